/* tp_runtime_state.c — the run's state of every stage, apart from the running: made and freed
 * (network, latest weights, momentum, gradient buffer on the stage's backend, the weight stores'
 * allocators), the stages this process runs and their transport, the weights and momentum read and
 * set, and the sizes the memory model takes. */
#include "config.h"
#include "tp_runtime_priv.h"
#include "tp_error.h"

#include <string.h>

/* ---- weight buffers through the backend ----------------------------------------------------------- */

static float *be_alloc(void *ctx, size_t n, GError **err)
{
  const TpBackend *be = ctx;
  return be->iface->alloc(be, n ? n : 1, err);
}
static void be_free(void *ctx, float *buf)
{
  const TpBackend *be = ctx;
  be->iface->free(be, buf);
}

float *tp_rt_buf(const TpBackend *be, gboolean host, size_t n, GError **err)
{
  if (!host)
    return be->iface->alloc(be, n ? n : 1, err);
  return tp_host_floats(n, err);
}

void tp_rt_buf_free(const TpBackend *be, gboolean host, float *p)
{
  if (host)
    g_free(p);
  else if (p)
    be->iface->free(be, p);
}

/* Refresh the host copy of a device stage's latest weights. */
gboolean tp_rt_sync_host_weights(RtStage *S, GError **err)
{
  return tp_rt_down(S->be, S->host_w, S->weights, S->np ? S->np : 1, err);
}

/* ---- the run's state ----------------------------------------------------------------------------- */

TpRuntime *tp_runtime_new(const TpRuntimeConfig *cfg, GError **err)
{
  return tp_runtime_new_on(cfg, NULL, err);
}

TpRuntime *tp_runtime_new_on(const TpRuntimeConfig *cfg, const TpBackend *const *stage_be, GError **err)
{
  if (cfg->W < 1 || cfg->N < 1 || cfg->batch < cfg->N || cfg->batch % cfg->N) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_BATCH, "%d samples cannot be split into %d equal micro-batches",
                cfg->batch, cfg->N);
    return NULL;
  }
  if (!tp_net_check_model(cfg->model, err))
    return NULL;
  g_autoptr(TpRuntime) rt = g_new0(TpRuntime, 1);
  rt->cfg = *cfg;
  rt->W = cfg->W;
  rt->lo = 0, rt->hi = cfg->W;
  rt->bounds = g_memdup2(cfg->bounds, sizeof(int) * (cfg->W + 1));
  rt->cfg.bounds = rt->bounds;
  rt->alloc = g_new(TpWAlloc, cfg->W);
  rt->st = g_new0(RtStage, cfg->W);
  for (int s = 0; s < cfg->W; s++) {
    RtStage *S = &rt->st[s];
    const TpBackend *be = S->be = stage_be && stage_be[s] ? stage_be[s] : cfg->be;
    rt->alloc[s] = (TpWAlloc){ .alloc = be_alloc, .free = be_free, .ctx = (void *)be };
    if (!(S->net = tp_net_new(cfg->model, cfg->bounds[s], cfg->bounds[s + 1], be, err)))
      return NULL;
    if (!tp_net_set_group(S->net, cfg->batch / cfg->N, err)) /* batchnorm's statistics: each micro-batch's */
      return NULL;
    if (s + 1 < cfg->W && tp_net_has_loss(S->net)) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: the loss layer must be on the last stage", cfg->model->source);
      return NULL;
    }
    S->np = tp_net_n_params(S->net);
    S->ns = S->np * (cfg->adamw ? 2 : 1);
    size_t n = S->np ? S->np : 1, ns = S->ns ? S->ns : 1;
    if (!(S->weights = be->iface->alloc(be, n, err)) || !(S->mom = be->iface->alloc(be, ns, err)) ||
        !(S->grad = be->iface->alloc(be, n, err)) || !be->iface->zero(be, S->mom, ns, err) || !be->iface->zero(be, S->grad, n, err) ||
        !tp_net_init_weights(S->net, cfg->seed, S->weights, err))
      return NULL;
    S->host_w = tp_backend_host_memory(be) ? S->weights : tp_rt_buf(be, TRUE, n, err);
    if (!S->host_w || !tp_rt_sync_host_weights(S, err))
      return NULL;
  }
  if (!tp_net_has_loss(rt->st[cfg->W - 1].net)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: the model must end with softmax_ce or token_ce", cfg->model->source);
    return NULL;
  }
  return g_steal_pointer(&rt);
}

void tp_runtime_set_reduce(TpRuntime *rt, TpReduce *reduce) { rt->cfg.reduce = reduce; }

void tp_runtime_free(TpRuntime *rt)
{
  if (!rt)
    return;
  for (int s = 0; s < rt->W && rt->st; s++) {
    RtStage *S = &rt->st[s];
    const TpBackend *be = S->be;
    if (S->host_w != S->weights)
      g_free(S->host_w);
    if (S->weights)
      be->iface->free(be, S->weights);
    if (S->mom)
      be->iface->free(be, S->mom);
    if (S->grad)
      be->iface->free(be, S->grad);
    tp_net_free(S->net);
  }
  g_free(rt->st);
  g_free(rt->alloc);
  g_free(rt->bounds);
  g_free(rt);
}

gboolean tp_runtime_set_part(TpRuntime *rt, int lo, int hi, TpTransport *tr, GError **err)
{
  if (lo < 0 || lo >= hi || hi > rt->W) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "stages %d-%d are not stages of a %d-stage run", lo + 1, hi, rt->W);
    return FALSE;
  }
  rt->lo = lo, rt->hi = hi, rt->tr = tr;
  return TRUE;
}

int tp_runtime_stages(const TpRuntime *rt) { return rt->W; }
void tp_runtime_range(const TpRuntime *rt, int *lo, int *hi) { *lo = rt->lo, *hi = rt->hi; }

gboolean tp_runtime_set_weights(TpRuntime *rt, int stage, const float *w, GError **err)
{
  RtStage *S = &rt->st[stage];
  if (S->np == 0)
    return TRUE;
  if (!tp_backend_host_memory(S->be))
    memcpy(S->host_w, w, sizeof(float) * S->np);
  return S->be->iface->upload(S->be, S->weights, w, S->np, err);
}
const float *tp_runtime_weights(const TpRuntime *rt, int stage) { return rt->st[stage].host_w; }
const TpBackend *tp_runtime_backend(const TpRuntime *rt, int stage) { return rt->st[stage].be; }
size_t tp_runtime_n_params(const TpRuntime *rt, int stage) { return rt->st[stage].np; }
int tp_runtime_optimizer_states(const TpRuntime *rt) { return rt->cfg.adamw ? 2 : 1; }

gboolean tp_rt_step(const TpRuntime *rt, const RtStage *S, long g, const float *w_in, const float *grad, float *state,
                    float *w_out, GError **err)
{
  const TpRuntimeConfig *cfg = &rt->cfg;
  const TpBackend *be = S->be;
  float lr = tp_runtime_lr(cfg, g);
  if (!cfg->adamw)
    return be->iface->sgd_step(be, S->np, lr, cfg->momentum, cfg->weight_decay, w_in, grad, state, w_out, err);
  TpAdamW h = { .lr = lr, .beta1 = cfg->beta1, .beta2 = cfg->beta2, .eps = cfg->eps, .weight_decay = cfg->weight_decay,
                .bias1 = (float)(1.0 - pow(cfg->beta1, (double)g)), .bias2 = (float)(1.0 - pow(cfg->beta2, (double)g)) };
  return be->iface->adamw_step(be, S->np, &h, w_in, grad, state, state + S->np, w_out, err);
}

gboolean tp_runtime_get_state(const TpRuntime *rt, int stage, float *weights, float *momentum, GError **err)
{
  const RtStage *S = &rt->st[stage];
  const TpBackend *be = S->be;
  return (!weights || !S->np || be->iface->download(be, weights, S->weights, S->np, err)) &&
         (!momentum || !S->np || be->iface->download(be, momentum, S->mom, S->ns, err));
}

gboolean tp_runtime_set_state(TpRuntime *rt, int stage, const float *weights, const float *momentum, GError **err)
{
  RtStage *S = &rt->st[stage];
  const TpBackend *be = S->be;
  return (!weights || !S->np ||
          (be->iface->upload(be, S->weights, weights, S->np, err) && tp_rt_sync_host_weights(S, err))) &&
         (!momentum || !S->np || be->iface->upload(be, S->mom, momentum, S->ns, err));
}

size_t tp_runtime_n_buffers(const TpRuntime *rt, int stage) { return tp_net_n_stats(rt->st[stage].net); }

gboolean tp_runtime_get_buffers(const TpRuntime *rt, int stage, float *host, GError **err)
{
  return tp_net_get_stats(rt->st[stage].net, host, err);
}

gboolean tp_runtime_set_buffers(TpRuntime *rt, int stage, const float *host, GError **err)
{
  return tp_net_set_stats(rt->st[stage].net, host, err);
}

/* With recomputation a forward keeps only its input (the stage's input of its samples); with a split
 * backward, its saved state and the output gradients its I keeps for its W. */
void tp_rt_sizes(const TpRuntime *rt, int stage, gboolean recompute, gboolean split, TpWStoreSizes *out)
{
  const TpNet *net = rt->st[stage].net;
  gint64 pb = (gint64)tp_net_param_bytes(net);
  size_t per_sample = recompute ? tp_net_in_elems(net) * sizeof(float)
                                : tp_net_saved_bytes_per_sample(net) + (split ? tp_net_dy_bytes_per_sample(net) : 0);
  gint64 ob = (gint64)(rt->st[stage].ns * sizeof(float));
  *out = (TpWStoreSizes){ .n_params = MAX(rt->st[stage].np, 1), /* a stage without parameters keeps one float */
                          .optimizer_bytes = ob, .gradient_bytes = pb,
                          .activation_bytes = (gint64)per_sample * (rt->cfg.batch / rt->cfg.N) };
}

void tp_runtime_sizes(const TpRuntime *rt, int stage, TpWStoreSizes *out)
{
  tp_rt_sizes(rt, stage, rt->cfg.recompute, rt->cfg.split_backward, out);
}

size_t tp_runtime_input_bytes_per_sample(const TpRuntime *rt, int stage)
{
  return tp_net_in_elems(rt->st[stage].net) * sizeof(float);
}

size_t tp_runtime_saved_bytes_per_sample(const TpRuntime *rt, int stage)
{
  const TpNet *net = rt->st[stage].net;
  return tp_net_saved_bytes_per_sample(net) + (rt->cfg.split_backward ? tp_net_dy_bytes_per_sample(net) : 0);
}

size_t tp_runtime_act_bytes_per_sample(const TpRuntime *rt, int stage)
{
  return stage + 1 < rt->W ? tp_net_out_bytes_per_sample(rt->st[stage].net) : 0;
}

size_t tp_runtime_grad_bytes_per_sample(const TpRuntime *rt, int stage)
{
  return stage > 0 ? tp_net_in_elems(rt->st[stage].net) * sizeof(float) : 0;
}
