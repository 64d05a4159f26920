/* tp_runtime_eval.c — what the runtime does outside training proper: test-set evaluation through
 * every stage in turn with the latest weights, and the profiles the simulator's prediction is
 * built on — each stage's operations timed alone on real data in the calling thread, and timed in
 * a short pipelined run whose updates are discarded — and the replicas' gradient reduction timed. */
#include "config.h"
#include "tp_error.h"
#include "tp_runtime_priv.h"

#include <math.h>
#include <string.h>
#include <time.h>

/* Samples an evaluation runs at once: 256, fewer where a sample is wide (a language model's scores
 * are context × vocabulary floats), so that a chunk's buffers stay near 2^24 floats each. */
enum { EVAL_CHUNK_MOST = 256, EVAL_CHUNK_FLOATS = 1 << 24 };

static size_t nets_width(TpNet *const *net, int W)
{
  size_t w = 1;
  for (int s = 0; s < W; s++)
    w = MAX(w, MAX(tp_net_in_elems(net[s]), tp_net_out_elems(net[s])));
  return w;
}

static size_t max_width(const TpRuntime *rt)
{
  g_autofree TpNet **net = g_new(TpNet *, rt->W);
  for (int s = 0; s < rt->W; s++)
    net[s] = rt->st[s].net;
  return nets_width(net, rt->W);
}

static int eval_chunk(size_t width) { return (int)CLAMP(EVAL_CHUNK_FLOATS / width, 1, EVAL_CHUNK_MOST); }

long long tp_runtime_eval_bytes(const TpModel *m, const int *bounds, int W, int batch, const TpBackend *be)
{
  TpNet **net = g_new0(TpNet *, W);
  long long bytes = 0;
  gboolean ok = TRUE;
  for (int s = 0; s < W && ok; s++)
    ok = (net[s] = tp_net_new(m, bounds[s], bounds[s + 1], be, NULL)) != NULL;
  if (ok) {
    size_t width = nets_width(net, W);
    int chunk = eval_chunk(width), b = MIN(chunk, MAX(batch, 1));
    for (int s = 0; s < W; s++) { /* each stage's scratch grows to a chunk's, and stays */
      size_t grown = tp_net_scratch_floats(net[s], chunk), had = tp_net_scratch_floats(net[s], b);
      bytes += 4 * (long long)(grown - MIN(had, grown));
    }
    bytes += 4 * (long long)chunk * (2 * (long long)width + MAX(m->context, 1)); /* a chunk in and out, its labels */
  }
  for (int s = 0; s < W; s++)
    if (net[s])
      tp_net_free(net[s]);
  g_free(net);
  return bytes;
}

/* One stage's inference on n samples: host in → host out (through the stage's device buffers
 * dev[0..1], a chunk's width floats each, on a device backend). */
static gboolean eval_stage(TpRuntime *rt, int s, float **dev, const float *in, int n, float *out,
                           const gint32 *labels, TpLossStats *st, GError **err)
{
  const RtStage *S = &rt->st[s];
  gboolean last = s == rt->W - 1, host = tp_backend_host_memory(S->be);
  float *din = host ? (float *)in : dev[0], *dout = host ? out : dev[1];
  return tp_rt_up(S->be, din, in, (size_t)n * tp_net_in_elems(S->net), err) &&
         tp_net_forward(S->net, S->weights, din, n, last ? NULL : dout, NULL, last ? labels : NULL, last ? st : NULL,
                        err) &&
         (last || tp_rt_down(S->be, out, dout, (size_t)n * tp_net_out_elems(S->net), err));
}

gboolean tp_runtime_evaluate(TpRuntime *rt, const TpDataset *test, double *accuracy, double *loss, GError **err)
{
  size_t width = max_width(rt);
  const int chunk = eval_chunk(width);
  float **dev = g_new0(float *, 2 * (size_t)rt->W); /* device stages' input and output buffers */
  gboolean ok = TRUE;
  for (int s = 0; s < rt->W && ok; s++)
    if (!tp_backend_host_memory(rt->st[s].be))
      ok = (dev[2 * s] = tp_rt_buf(rt->st[s].be, FALSE, (size_t)chunk * width, err)) &&
           (dev[2 * s + 1] = tp_rt_buf(rt->st[s].be, FALSE, (size_t)chunk * width, err));
  g_autofree float *a = g_new(float, (size_t)chunk * width), *b = g_new(float, (size_t)chunk * width);
  g_autofree int *ids = g_new(int, chunk);
  g_autofree gint32 *labels = g_new(gint32, (size_t)chunk * test->label_dim);
  double loss_sum = 0;
  long correct = 0;
  for (int i0 = 0; i0 < test->n && ok; i0 += chunk) {
    int n = MIN(chunk, test->n - i0);
    for (int i = 0; i < n; i++)
      ids[i] = i0 + i;
    tp_dataset_gather(test, ids, n, a, labels);
    float *in = a, *out = b;
    for (int s = 0; s < rt->W && ok; s++) {
      gboolean last = s == rt->W - 1;
      TpLossStats st = { 0, 0 };
      if (!(ok = eval_stage(rt, s, dev + 2 * s, in, n, out, labels, &st, err)))
        break;
      if (last)
        loss_sum += st.loss_sum, correct += st.correct;
      float *t = in;
      in = out, out = t;
    }
  }
  for (int s = 0; s < rt->W; s++)
    for (int i = 0; i < 2; i++)
      if (dev[2 * s + i])
        rt->st[s].be->iface->free(rt->st[s].be, dev[2 * s + i]);
  g_free(dev);
  if (!ok)
    return FALSE;
  *accuracy = test->n ? (double)correct / ((double)test->n * test->label_dim) : 0; /* per label: tokens */
  if (loss)
    *loss = test->n ? loss_sum / test->n : 0;
  return TRUE;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Seconds on the monotonic clock, to the nanosecond (a small layer's call takes less than the
 * microsecond g_get_monotonic_time counts in). */
static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Median of reps timings of one call, after one untimed warm-up. */
typedef gboolean (*TimedFn)(void *ctx, GError **err);
static gboolean time_median(TimedFn fn, void *ctx, int reps, double *out, GError **err)
{
  g_autofree double *t = g_new(double, reps);
  if (!fn(ctx, err))
    return FALSE;
  for (int r = 0; r < reps; r++) {
    double t0 = now_s();
    if (!fn(ctx, err))
      return FALSE;
    t[r] = now_s() - t0;
  }
  qsort(t, reps, sizeof *t, cmp_double);
  *out = t[reps / 2];
  return TRUE;
}

/* A stage this process does not run: one untimed call, for the inputs of the stages it does. */
static gboolean run_once(TimedFn fn, void *ctx, double *out, GError **err)
{
  *out = 0;
  return fn(ctx, err);
}

typedef struct {
  TpRuntime *rt;
  int s, n;
  const TpBackend *be;
  float *in, *out, *dout, *din, *grad, *w, *mom; /* in the stage's backend memory */
  float *h_in;    /* stage 1: the host buffer its input is gathered into (in itself on a host backend) */
  TpSaved *saved;
  gint32 *labels;
  const int *idx; /* stage 1 gathers its input from the dataset, as in training */
} ProfCtx;

/* Every timed call ends with the stage's work done (device backends run asynchronously). */
static gboolean prof_forward(void *ctx, GError **err)
{
  ProfCtx *c = ctx;
  gboolean last = c->s == c->rt->W - 1;
  TpLossStats st;
  const RtStage *S = &c->rt->st[c->s];
  if (c->s == 0) {
    tp_dataset_gather(c->rt->cfg.train, c->idx, c->n, c->h_in, NULL);
    if (!tp_rt_up(c->be, c->in, c->h_in, (size_t)c->n * tp_net_in_elems(S->net), err))
      return FALSE;
  }
  return tp_net_forward(S->net, S->weights, c->in, c->n, last ? NULL : c->out, c->saved, last ? c->labels : NULL,
                        last ? &st : NULL, err) &&
         tp_backend_sync(c->be, err);
}

static gboolean prof_backward(void *ctx, GError **err)
{
  ProfCtx *c = ctx;
  gboolean last = c->s == c->rt->W - 1;
  return tp_net_backward(c->rt->st[c->s].net, c->rt->st[c->s].weights, c->saved, last ? NULL : c->dout,
                         c->s ? c->din : NULL, c->grad, c->rt->cfg.batch, err) &&
         tp_backend_sync(c->be, err);
}

/* A split backward's parts (the saved state made by tp_saved_new_split): I keeps the output
 * gradients that W then reads. */
static gboolean prof_input(void *ctx, GError **err)
{
  ProfCtx *c = ctx;
  gboolean last = c->s == c->rt->W - 1;
  return tp_net_backward_input(c->rt->st[c->s].net, c->rt->st[c->s].weights, c->saved, last ? NULL : c->dout,
                               c->s ? c->din : NULL, c->rt->cfg.batch, err) &&
         tp_backend_sync(c->be, err);
}

static gboolean prof_weight(void *ctx, GError **err)
{
  ProfCtx *c = ctx;
  return tp_net_backward_weight(c->rt->st[c->s].net, c->rt->st[c->s].weights, c->saved, c->grad, err) &&
         tp_backend_sync(c->be, err);
}

static gboolean prof_update(void *ctx, GError **err)
{
  ProfCtx *c = ctx;
  return tp_rt_step(c->rt, &c->rt->st[c->s], 1, c->w, c->grad, c->mom, c->w, err) && tp_backend_sync(c->be, err);
}

/* The data-parallel reduction (cfg.reduce) of stage s's gradient, as an update makes it: the mean
 * over the replicas of a scratch gradient in the stage's memory. */
static gboolean prof_reduce(void *ctx, GError **err)
{
  ProfCtx *c = ctx;
  TpReduce *red = c->rt->cfg.reduce;
  return red->iface->mean(red, c->s, c->rt->cfg.replica, 0, c->be, c->grad, c->rt->st[c->s].np, err) &&
         tp_backend_sync(c->be, err);
}

gboolean tp_runtime_time_reduce(TpRuntime *rt, int reps, double *out, GError **err)
{
  gboolean ok = TRUE;
  for (int s = 0; s < rt->W; s++)
    out[s] = 0;
  for (int s = rt->lo; s < rt->hi && ok && rt->cfg.reduce; s++) {
    const RtStage *S = &rt->st[s];
    if (!S->np) /* nothing to reduce: the update calls no reduction either */
      continue;
    ProfCtx c = { .rt = rt, .s = s, .be = S->be, .grad = S->be->iface->alloc(S->be, S->np, err) };
    ok = c.grad && S->be->iface->zero(S->be, c.grad, S->np, err) && time_median(prof_reduce, &c, MAX(reps, 1), &out[s], err);
    if (c.grad)
      S->be->iface->free(S->be, c.grad);
  }
  if (!ok)
    g_prefix_error(err, "timing the gradients' reduction before training: ");
  return ok;
}

/* Stage s's forward then backward buffers: on a host backend the shared host arrays themselves;
 * on a device backend buffers of its own, filled from and read back to the host arrays (so that
 * each stage works on what the previous one produced, as in training). */
typedef struct {
  float *in, *out, *dout, *din;
} ProfBufs;

/* A profile's buffers, for n samples a stage: acts[s] stage s's input and grads[s] the gradient it
 * receives (host memory, W + 1 of each), every stage's device buffers and saved state, the labels. */
typedef struct {
  int n, W;
  float **acts, **grads;
  TpSaved **saved;
  ProfBufs *bufs;
  gint32 *labels;
} ProfRun;

static gboolean prof_run_new(ProfRun *p, const TpRuntime *rt, const int *idx, int n, GError **err)
{
  const int W = rt->W;
  size_t width = max_width(rt);
  *p = (ProfRun){ .n = n, .W = W, .acts = g_new0(float *, W + 1), .grads = g_new0(float *, W + 1),
                  .saved = g_new0(TpSaved *, W), .bufs = g_new0(ProfBufs, W),
                  .labels = g_new(gint32, (size_t)n * rt->cfg.train->label_dim) };
  for (int s = 0; s <= W; s++)
    p->acts[s] = g_new0(float, (size_t)n * width), p->grads[s] = g_new0(float, (size_t)n * width);
  tp_dataset_gather(rt->cfg.train, idx, n, p->acts[0], p->labels);
  gboolean ok = TRUE;
  for (int s = 0; s < W && ok; s++) {
    const TpBackend *be = rt->st[s].be;
    ProfBufs *b = &p->bufs[s];
    if (tp_backend_host_memory(be))
      *b = (ProfBufs){ p->acts[s], p->acts[s + 1], p->grads[s + 1], p->grads[s] };
    else
      ok = (b->in = tp_rt_buf(be, FALSE, (size_t)n * width, err)) && (b->out = tp_rt_buf(be, FALSE, (size_t)n * width, err)) &&
           (b->dout = tp_rt_buf(be, FALSE, (size_t)n * width, err)) && (b->din = tp_rt_buf(be, FALSE, (size_t)n * width, err));
  }
  return ok;
}

static void prof_run_free(ProfRun *p, const TpRuntime *rt)
{
  for (int s = 0; s < p->W; s++)
    if (!tp_backend_host_memory(rt->st[s].be)) {
      float *dev[] = { p->bufs[s].in, p->bufs[s].out, p->bufs[s].dout, p->bufs[s].din };
      for (int i = 0; i < 4; i++)
        tp_rt_buf_free(rt->st[s].be, FALSE, dev[i]);
    }
  for (int s = 0; s <= p->W; s++)
    g_free(p->acts[s]), g_free(p->grads[s]);
  for (int s = 0; s < p->W; s++)
    tp_saved_free(p->saved[s]);
  g_free(p->acts), g_free(p->grads), g_free(p->saved), g_free(p->bufs), g_free(p->labels);
}

/* Stage s's forward: per micro-batch of m samples (whole: one forward of the mini-batch), and of all
 * p->n samples into its saved state, its output the next stage's input; timed reps times where this
 * process runs stage s, else run once. */
static gboolean profile_forward(TpRuntime *rt, ProfRun *p, int s, const int *idx, int reps, int m, gboolean whole,
                                TpStageProfile *out, GError **err)
{
  const TpBackend *be = rt->st[s].be;
  const TpNet *net = rt->st[s].net;
  int n = p->n;
  gboolean mine = s >= rt->lo && s < rt->hi;
  ProfCtx c = { .rt = rt, .s = s, .n = n, .be = be, .in = p->bufs[s].in, .out = p->bufs[s].out, .h_in = p->acts[0],
                .labels = p->labels, .idx = idx };
  ProfCtx micro = c;
  double all;
  micro.n = whole ? n : m;
  gboolean ok = (c.saved = micro.saved = p->saved[s] = rt->cfg.split_backward ? tp_saved_new_split(rt->st[s].net, n, err)
                                                                               : tp_saved_new(rt->st[s].net, n, err)) != NULL &&
                (tp_saved_set_replay(p->saved[s], TRUE), TRUE) && /* a timing: the running statistics stay the run's */
                tp_rt_up(be, c.in, p->acts[s], (size_t)n * tp_net_in_elems(net), err) &&
                (mine ? time_median(prof_forward, &micro, reps, &out->fwd, err)
                      : run_once(prof_forward, &micro, &out->fwd, err)) &&
                (micro.n == n || (mine ? time_median(prof_forward, &c, reps, &all, err) : run_once(prof_forward, &c, &all, err))) &&
                (s == rt->W - 1 || tp_rt_down(be, p->acts[s + 1], c.out, (size_t)n * tp_net_out_elems(net), err));
  out->fwd_whole = micro.n == n ? (whole ? out->fwd : 0) : all;
  return ok;
}

/* A stage after this process's ones: its backward run once, for the gradient they receive. */
static gboolean backward_through(TpRuntime *rt, ProfRun *p, int s, const int *idx, TpStageProfile *out, GError **err)
{
  const RtStage *S = &rt->st[s];
  const TpBackend *be = S->be;
  size_t np = S->np ? S->np : 1;
  float *grad = be->iface->alloc(be, np, err);
  ProfCtx c = { .rt = rt, .s = s, .n = p->n, .be = be, .dout = p->bufs[s].dout, .din = p->bufs[s].din, .grad = grad,
                .saved = p->saved[s], .labels = p->labels, .idx = idx };
  gboolean ok = grad && be->iface->zero(be, grad, np, err) &&
                (s == rt->W - 1 || tp_rt_up(be, c.dout, p->grads[s + 1], (size_t)p->n * tp_net_out_elems(S->net), err)) &&
                run_once(prof_backward, &c, &out->bwd, err) &&
                tp_rt_down(be, p->grads[s], c.din, (size_t)p->n * tp_net_in_elems(S->net), err);
  out->upd = 0;
  if (grad)
    be->iface->free(be, grad);
  return ok;
}

/* One of this process's stages: its backward (and a split backward's I and W) and its update, timed
 * on copies of its weights and optimizer state. */
static gboolean profile_backward(TpRuntime *rt, ProfRun *p, int s, const int *idx, int reps, TpStageProfile *out,
                                 GError **err)
{
  const RtStage *S = &rt->st[s];
  const TpBackend *be = S->be;
  size_t np = S->np ? S->np : 1, ns = S->ns ? S->ns : 1;
  float *grad = be->iface->alloc(be, np, err), *w = grad ? be->iface->alloc(be, np, err) : NULL;
  float *mom = w ? be->iface->alloc(be, ns, err) : NULL;
  ProfCtx c = { .rt = rt, .s = s, .n = p->n, .be = be, .dout = p->bufs[s].dout, .din = p->bufs[s].din, .grad = grad,
                .w = w, .mom = mom, .saved = p->saved[s], .labels = p->labels, .idx = idx };
  gboolean ok = mom && be->iface->zero(be, grad, np, err) &&
                (s == rt->W - 1 || tp_rt_up(be, c.dout, p->grads[s + 1], (size_t)p->n * tp_net_out_elems(S->net), err)) &&
                time_median(prof_backward, &c, reps, &out->bwd, err) &&
                (!rt->cfg.split_backward || (time_median(prof_input, &c, reps, &out->inp, err) &&
                                             time_median(prof_weight, &c, reps, &out->wgt, err))) &&
                (s == 0 || tp_rt_down(be, p->grads[s], c.din, (size_t)p->n * tp_net_in_elems(S->net), err)) &&
                be->iface->copy(be, w, S->weights, np, err) && be->iface->copy(be, mom, S->mom, ns, err) &&
                time_median(prof_update, &c, reps, &out->upd, err);
  float *tmp[] = { grad, w, mom };
  for (int i = 0; i < 3; i++)
    if (tmp[i])
      be->iface->free(be, tmp[i]);
  return ok;
}

gboolean tp_runtime_profile(TpRuntime *rt, const int *idx, int reps, gboolean whole, gboolean whole_bwd,
                            TpStageProfile *out, GError **err)
{
  const TpRuntimeConfig *cfg = &rt->cfg;
  whole_bwd = whole_bwd || whole;
  /* a whole backward over micro-batch forwards: the forwards timed per micro-batch, then all N of
   * them into one saved state for one backward of the whole mini-batch (as the run does) */
  int m = cfg->batch / cfg->N, n = whole_bwd ? cfg->batch : m, W = rt->W;
  double per = whole_bwd ? (double)cfg->N : 1.0, fper = whole ? (double)cfg->N : 1.0;
  reps = MAX(reps, 1);
  ProfRun p;
  gboolean ok = prof_run_new(&p, rt, idx, n, err);
  for (int s = 0; s < W && ok; s++) {
    ok = profile_forward(rt, &p, s, idx, reps, m, whole, &out[s], err);
    out[s].fwd /= fper;
  }
  for (int s = W - 1; s >= rt->lo && ok; s--) {
    if (s >= rt->hi) { /* after this process's stages: the gradient they receive */
      ok = backward_through(rt, &p, s, idx, &out[s], err);
      continue;
    }
    ok = profile_backward(rt, &p, s, idx, reps, &out[s], err);
    out[s].bwd /= per, out[s].inp /= per, out[s].wgt /= per;
  }
  prof_run_free(&p, rt);
  return ok;
}

/* Median of the n values in v (sorted in place); fallback when there are none. */
static double median_or(double *v, int n, double fallback)
{
  if (n == 0)
    return fallback;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The state a timing run changes, kept aside: each of this process's stages' weights, optimizer state
 * and gradient buffer (keep[3·st + i]) and its running statistics (stats[st]). */
static gboolean state_keep(const TpRuntime *rt, float **keep, float **stats, GError **err)
{
  gboolean ok = TRUE;
  for (int st = rt->lo; st < rt->hi && ok; st++)
    ok = (stats[st] = tp_host_floats(tp_net_n_stats(rt->st[st].net), err)) &&
         tp_net_get_stats(rt->st[st].net, stats[st], err);
  for (int st = rt->lo; st < rt->hi && ok; st++) {
    const RtStage *S = &rt->st[st];
    size_t np = S->np ? S->np : 1, len[3] = { np, S->ns ? S->ns : 1, np };
    float *now[3] = { S->weights, S->mom, S->grad };
    for (int i = 0; i < 3 && ok; i++)
      ok = (keep[3 * st + i] = S->be->iface->alloc(S->be, len[i], err)) &&
           S->be->iface->copy(S->be, keep[3 * st + i], now[i], len[i], err);
  }
  return ok;
}

/* ... and put back (where ok: what was kept is freed either way). */
static gboolean state_restore(TpRuntime *rt, float **keep, float **stats, gboolean ok, GError **err)
{
  for (int st = rt->lo; st < rt->hi; st++) {
    RtStage *S = &rt->st[st];
    size_t np = S->np ? S->np : 1, len[3] = { np, S->ns ? S->ns : 1, np };
    float *now[3] = { S->weights, S->mom, S->grad };
    for (int i = 0; i < 3; i++)
      if (keep[3 * st + i]) {
        if (ok)
          ok = S->be->iface->copy(S->be, now[i], keep[3 * st + i], len[i], err);
        S->be->iface->free(S->be, keep[3 * st + i]);
      }
    if (ok && S->host_w != S->weights)
      ok = S->be->iface->download(S->be, S->host_w, S->weights, np, err);
    if (ok && stats[st])
      ok = tp_net_set_stats(S->net, stats[st], err);
    g_free(stats[st]);
  }
  return ok;
}

/* A recomputing backward (or I) ran its forwards again first (after one whole forward, that one: per
 * micro-batch its share); the cost model adds that forward itself (tp_sim_op_time), so the profile
 * keeps the backward proper — a floor keeps a noisy difference positive.  t[k], cnt[k]: the times by
 * TpOpKind; bwhole[j]: the j-th backward followed a whole forward. */
static void without_recompute(const TpSchedule *s, const TpStageProfile *o, double **t, const int *cnt,
                              const gboolean *bwhole)
{
  double share = (o->fwd_whole > 0 ? o->fwd_whole : s->N * o->fwd) / s->N;
  for (int j = 0; j < cnt[TP_OP_B]; j++) {
    double v = t[TP_OP_B][j];
    t[TP_OP_B][j] = MAX(v - (bwhole[j] ? share : o->fwd), 0.1 * v);
  }
  for (int j = 0; j < cnt[TP_OP_I]; j++)
    t[TP_OP_I][j] = MAX(t[TP_OP_I][j] - o->fwd, 0.1 * t[TP_OP_I][j]);
}

/* Stage st's medians from run r of s (its first mini-batch warming up), over what o held. */
static void stage_medians(const TpSchedule *s, const TpRunResult *r, int st, TpStageProfile *o)
{
  int n = tp_stage_len(s, st), cnt[5] = { 0 }, nwhole = 0;
  const TpOp *ops = tp_stage_ops(s, st);
  double *t[5];
  for (int k = 0; k < 5; k++) /* by TpOpKind: F, B, U, I, W */
    t[k] = g_new(double, MAX(n, 1));
  double *fw = g_new(double, MAX(n, 1)); /* whole-mini-batch forwards, whole */
  /* fwhole[mb]: the mini-batch's forward on this stage is one whole forward; bwhole[j]: the j-th
   * backward timed follows one (recomputing, it ran that forward again, not N) */
  gboolean *fwhole = g_new0(gboolean, (size_t)s->K + 1), *bwhole = g_new0(gboolean, MAX(n, 1));
  for (int i = 0; i < n; i++)
    if (ops[i].kind == TP_OP_F && ops[i].micro == TP_WHOLE)
      fwhole[ops[i].mb] = TRUE;
  for (int i = 0; i < n; i++) {
    const TpOp *op = &ops[i];
    if (op->mb < 2 && s->K > 1) /* the first mini-batch warms up */
      continue;
    double d = r->rec[st][i].end - r->rec[st][i].start;
    if (op->kind == TP_OP_F && op->micro == TP_WHOLE) /* timed apart from micro-batch ones */
      fw[nwhole++] = d;
    else {
      if (op->kind == TP_OP_B)
        bwhole[cnt[TP_OP_B]] = op->micro == TP_WHOLE && fwhole[op->mb];
      t[op->kind][cnt[op->kind]++] = op->kind == TP_OP_U ? d : d / tp_op_count(s, op);
    }
  }
  o->fwd = median_or(t[TP_OP_F], cnt[TP_OP_F], o->fwd);
  o->fwd_whole = median_or(fw, nwhole, o->fwd_whole);
  if (nwhole && !cnt[TP_OP_F]) /* only whole forwards: per micro-batch as a whole one's share */
    o->fwd = o->fwd_whole / s->N;
  if (s->recompute)
    without_recompute(s, o, t, cnt, bwhole);
  o->bwd = median_or(t[TP_OP_B], cnt[TP_OP_B], o->bwd);
  o->upd = median_or(t[TP_OP_U], cnt[TP_OP_U], o->upd);
  o->inp = median_or(t[TP_OP_I], cnt[TP_OP_I], o->inp);
  o->wgt = median_or(t[TP_OP_W], cnt[TP_OP_W], o->wgt);
  if (cnt[TP_OP_I] && cnt[TP_OP_W] && !cnt[TP_OP_B])
    o->bwd = o->inp + o->wgt;
  for (int k = 0; k < 5; k++)
    g_free(t[k]);
  g_free(fw), g_free(fwhole), g_free(bwhole);
}

gboolean tp_runtime_profile_pipelined(TpRuntime *rt, const TpSchedule *s, const int *idx, TpStageProfile *out,
                                      GError **err)
{
  const int W = rt->W;
  float **keep = g_new0(float *, 3 * (size_t)W), **stats = g_new0(float *, (size_t)W);
  gboolean ok = state_keep(rt, keep, stats, err);
  const int **ids = g_new(const int *, MAX(s->K, 1));
  for (int i = 0; i < s->K; i++)
    ids[i] = idx;
  TpRunResult r = { 0 };
  rt->timing = TRUE;
  ok = ok && tp_runtime_run(rt, s, ids, 1, g_get_monotonic_time(), NULL, &r, err);
  rt->timing = FALSE;
  ok = state_restore(rt, keep, stats, ok, err);
  g_free(stats);
  for (int st = rt->lo; st < rt->hi && ok; st++)
    stage_medians(s, &r, st, &out[st]);
  tp_run_result_clear(&r);
  g_free(ids);
  g_free(keep);
  return ok;
}
