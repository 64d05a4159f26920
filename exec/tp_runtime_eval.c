/* tp_runtime_eval.c — what the runtime does outside training proper: test-set evaluation through
 * every stage in turn with the latest weights, and the profiles the simulator's prediction is
 * built on — each stage's operations timed alone on real data in the calling thread, and timed in
 * a short pipelined run whose updates are discarded. */
#include "config.h"
#include "tp_error.h"
#include "tp_runtime_priv.h"

#include <math.h>
#include <string.h>
#include <time.h>

/* Samples an evaluation runs at once: 256, fewer where a sample is wide (a language model's scores
 * are context × vocabulary floats), so that a chunk's buffers stay near 2^24 floats each. */
enum { EVAL_CHUNK_MOST = 256, EVAL_CHUNK_FLOATS = 1 << 24 };

static size_t max_width(const TpRuntime *rt)
{
  size_t w = 1;
  for (int s = 0; s < rt->W; s++)
    w = MAX(w, MAX(tp_net_in_elems(rt->st[s].net), tp_net_out_elems(rt->st[s].net)));
  return w;
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
  const int chunk = (int)CLAMP(EVAL_CHUNK_FLOATS / width, 1, EVAL_CHUNK_MOST);
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

/* Stage s's forward then backward buffers: on a host backend the shared host arrays themselves;
 * on a device backend buffers of its own, filled from and read back to the host arrays (so that
 * each stage works on what the previous one produced, as in training). */
typedef struct {
  float *in, *out, *dout, *din;
} ProfBufs;

gboolean tp_runtime_profile(TpRuntime *rt, const int *idx, int reps, gboolean whole, gboolean whole_bwd,
                            TpStageProfile *out, GError **err)
{
  const TpRuntimeConfig *cfg = &rt->cfg;
  whole_bwd = whole_bwd || whole;
  /* a whole backward over micro-batch forwards: the forwards timed per micro-batch, then all N of
   * them into one saved state for one backward of the whole mini-batch (as the run does) */
  int m = cfg->batch / cfg->N, n = whole_bwd ? cfg->batch : m, W = rt->W;
  double per = whole_bwd ? (double)cfg->N : 1.0, fper = whole ? (double)cfg->N : 1.0;
  size_t width = max_width(rt);
  reps = MAX(reps, 1);
  /* acts[s]: stage s's input; grads[s]: the gradient stage s receives (host memory) */
  float **acts = g_new0(float *, W + 1), **grads = g_new0(float *, W + 1);
  TpSaved **saved = g_new0(TpSaved *, W);
  ProfBufs *bufs = g_new0(ProfBufs, W);
  for (int s = 0; s <= W; s++)
    acts[s] = g_new0(float, (size_t)n * width), grads[s] = g_new0(float, (size_t)n * width);
  g_autofree gint32 *labels = g_new(gint32, (size_t)n * cfg->train->label_dim);
  tp_dataset_gather(cfg->train, idx, n, acts[0], labels);
  gboolean ok = TRUE;
  for (int s = 0; s < W && ok; s++) {
    const TpBackend *be = rt->st[s].be;
    ProfBufs *b = &bufs[s];
    if (tp_backend_host_memory(be))
      *b = (ProfBufs){ acts[s], acts[s + 1], grads[s + 1], grads[s] };
    else
      ok = (b->in = tp_rt_buf(be, FALSE, (size_t)n * width, err)) && (b->out = tp_rt_buf(be, FALSE, (size_t)n * width, err)) &&
           (b->dout = tp_rt_buf(be, FALSE, (size_t)n * width, err)) && (b->din = tp_rt_buf(be, FALSE, (size_t)n * width, err));
  }
  for (int s = 0; s < W && ok; s++) {
    const TpBackend *be = rt->st[s].be;
    const TpNet *net = rt->st[s].net;
    gboolean mine = s >= rt->lo && s < rt->hi;
    ProfCtx c = { .rt = rt, .s = s, .n = n, .be = be, .in = bufs[s].in, .out = bufs[s].out, .h_in = acts[0],
                  .labels = labels, .idx = idx };
    ProfCtx micro = c;
    double all;
    micro.n = whole ? n : m;
    ok = (c.saved = micro.saved = saved[s] = cfg->split_backward ? tp_saved_new_split(rt->st[s].net, n, err)
                                                                  : tp_saved_new(rt->st[s].net, n, err)) != NULL &&
         (tp_saved_set_replay(saved[s], TRUE), TRUE) && /* a timing: the running statistics stay the run's */
         tp_rt_up(be, c.in, acts[s], (size_t)n * tp_net_in_elems(net), err) &&
         (mine ? time_median(prof_forward, &micro, reps, &out[s].fwd, err)
               : run_once(prof_forward, &micro, &out[s].fwd, err)) &&
         (micro.n == n || (mine ? time_median(prof_forward, &c, reps, &all, err) : run_once(prof_forward, &c, &all, err))) &&
         (s == W - 1 || tp_rt_down(be, acts[s + 1], c.out, (size_t)n * tp_net_out_elems(net), err));
    out[s].fwd_whole = micro.n == n ? (whole ? out[s].fwd : 0) : all;
    out[s].fwd /= fper;
  }
  for (int s = W - 1; s >= rt->lo && ok; s--) {
    const RtStage *S = &rt->st[s];
    const TpBackend *be = S->be;
    if (s >= rt->hi) { /* after this process's stages: the gradient they receive */
      size_t np = S->np ? S->np : 1;
      float *grad = be->iface->alloc(be, np, err);
      ProfCtx c = { .rt = rt, .s = s, .n = n, .be = be, .dout = bufs[s].dout, .din = bufs[s].din, .grad = grad,
                    .saved = saved[s], .labels = labels, .idx = idx };
      ok = grad && be->iface->zero(be, grad, np, err) &&
           (s == W - 1 || tp_rt_up(be, c.dout, grads[s + 1], (size_t)n * tp_net_out_elems(S->net), err)) &&
           run_once(prof_backward, &c, &out[s].bwd, err) &&
           tp_rt_down(be, grads[s], c.din, (size_t)n * tp_net_in_elems(S->net), err);
      out[s].upd = 0;
      if (grad)
        be->iface->free(be, grad);
      continue;
    }
    size_t np = S->np ? S->np : 1;
    float *grad = be->iface->alloc(be, np, err), *w = grad ? be->iface->alloc(be, np, err) : NULL;
    size_t ns = S->ns ? S->ns : 1;
    float *mom = w ? be->iface->alloc(be, ns, err) : NULL;
    ProfCtx c = { .rt = rt, .s = s, .n = n, .be = be, .dout = bufs[s].dout, .din = bufs[s].din, .grad = grad, .w = w,
                  .mom = mom, .saved = saved[s], .labels = labels, .idx = idx };
    ok = mom && be->iface->zero(be, grad, np, err) &&
         (s == W - 1 || tp_rt_up(be, c.dout, grads[s + 1], (size_t)n * tp_net_out_elems(S->net), err)) &&
         time_median(prof_backward, &c, reps, &out[s].bwd, err) &&
         (!cfg->split_backward || (time_median(prof_input, &c, reps, &out[s].inp, err) &&
                                   time_median(prof_weight, &c, reps, &out[s].wgt, err))) &&
         (s == 0 || tp_rt_down(be, grads[s], c.din, (size_t)n * tp_net_in_elems(S->net), err)) &&
         be->iface->copy(be, w, S->weights, np, err) && be->iface->copy(be, mom, S->mom, ns, err) &&
         time_median(prof_update, &c, reps, &out[s].upd, err);
    out[s].bwd /= per, out[s].inp /= per, out[s].wgt /= per;
    if (grad)
      be->iface->free(be, grad);
    if (w)
      be->iface->free(be, w);
    if (mom)
      be->iface->free(be, mom);
  }
  for (int s = 0; s < W; s++)
    if (!tp_backend_host_memory(rt->st[s].be)) {
      float *dev[] = { bufs[s].in, bufs[s].out, bufs[s].dout, bufs[s].din };
      for (int i = 0; i < 4; i++)
        tp_rt_buf_free(rt->st[s].be, FALSE, dev[i]);
    }
  for (int s = 0; s <= W; s++)
    g_free(acts[s]), g_free(grads[s]);
  for (int s = 0; s < W; s++)
    tp_saved_free(saved[s]);
  g_free(acts), g_free(grads), g_free(saved), g_free(bufs);
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

gboolean tp_runtime_profile_pipelined(TpRuntime *rt, const TpSchedule *s, const int *idx, TpStageProfile *out,
                                      GError **err)
{
  const int W = rt->W;
  /* the state the run changes: each stage's weights, momentum and gradient buffer, and its running
   * statistics */
  float **keep = g_new0(float *, 3 * (size_t)W), **stats = g_new0(float *, (size_t)W);
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
  const int **ids = g_new(const int *, MAX(s->K, 1));
  for (int i = 0; i < s->K; i++)
    ids[i] = idx;
  TpRunResult r = { 0 };
  rt->timing = TRUE;
  ok = ok && tp_runtime_run(rt, s, ids, 1, g_get_monotonic_time(), NULL, &r, err);
  rt->timing = FALSE;
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
  g_free(stats);
  for (int st = rt->lo; st < rt->hi && ok; st++) {
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
      double d = r.rec[st][i].end - r.rec[st][i].start;
      if (op->kind == TP_OP_F && op->micro == TP_WHOLE) /* timed apart from micro-batch ones */
        fw[nwhole++] = d;
      else {
        if (op->kind == TP_OP_B)
          bwhole[cnt[TP_OP_B]] = op->micro == TP_WHOLE && fwhole[op->mb];
        t[op->kind][cnt[op->kind]++] = op->kind == TP_OP_U ? d : d / tp_op_count(s, op);
      }
    }
    out[st].fwd = median_or(t[TP_OP_F], cnt[TP_OP_F], out[st].fwd);
    out[st].fwd_whole = median_or(fw, nwhole, out[st].fwd_whole);
    if (nwhole && !cnt[TP_OP_F]) /* only whole forwards: per micro-batch as a whole one's share */
      out[st].fwd = out[st].fwd_whole / s->N;
    g_free(fw);
    /* a recomputing backward (or I) ran its forwards again first (after one whole forward, that
     * one: per micro-batch its share); the cost model adds that forward itself (tp_sim_op_time), so
     * the profile keeps the backward proper — a floor keeps a noisy difference positive */
    if (s->recompute) {
      double share = (out[st].fwd_whole > 0 ? out[st].fwd_whole : s->N * out[st].fwd) / s->N;
      for (int j = 0; j < cnt[TP_OP_B]; j++) {
        double v = t[TP_OP_B][j];
        t[TP_OP_B][j] = MAX(v - (bwhole[j] ? share : out[st].fwd), 0.1 * v);
      }
      for (int j = 0; j < cnt[TP_OP_I]; j++)
        t[TP_OP_I][j] = MAX(t[TP_OP_I][j] - out[st].fwd, 0.1 * t[TP_OP_I][j]);
    }
    g_free(fwhole), g_free(bwhole);
    out[st].bwd = median_or(t[TP_OP_B], cnt[TP_OP_B], out[st].bwd);
    out[st].upd = median_or(t[TP_OP_U], cnt[TP_OP_U], out[st].upd);
    out[st].inp = median_or(t[TP_OP_I], cnt[TP_OP_I], out[st].inp);
    out[st].wgt = median_or(t[TP_OP_W], cnt[TP_OP_W], out[st].wgt);
    if (cnt[TP_OP_I] && cnt[TP_OP_W] && !cnt[TP_OP_B])
      out[st].bwd = out[st].inp + out[st].wgt;
    for (int k = 0; k < 5; k++)
      g_free(t[k]);
  }
  tp_run_result_clear(&r);
  g_free(ids);
  g_free(keep);
  return ok;
}
