/* tp_runtime_eval.c — what the runtime does outside the pipeline, in the calling thread: test-set
 * evaluation through every stage in turn with the latest weights, and the profile of each stage's
 * operations timed alone on real data (the costs the simulator's prediction is built on). */
#include "config.h"
#include "tp_error.h"
#include "tp_runtime_priv.h"

#include <math.h>
#include <string.h>

enum { EVAL_CHUNK = 256 };

static size_t max_width(const TpRuntime *rt)
{
  size_t w = 1;
  for (int s = 0; s < rt->W; s++)
    w = MAX(w, MAX(tp_net_in_elems(rt->st[s].net), tp_net_out_elems(rt->st[s].net)));
  return w;
}

gboolean tp_runtime_evaluate(TpRuntime *rt, const TpDataset *test, double *accuracy, double *loss, GError **err)
{
  size_t width = max_width(rt);
  g_autofree float *a = g_new(float, (size_t)EVAL_CHUNK * width), *b = g_new(float, (size_t)EVAL_CHUNK * width);
  g_autofree int *ids = g_new(int, EVAL_CHUNK);
  g_autofree uint8_t *lab8 = g_new(uint8_t, EVAL_CHUNK);
  g_autofree gint32 *labels = g_new(gint32, EVAL_CHUNK);
  double loss_sum = 0;
  long correct = 0;
  for (int i0 = 0; i0 < test->n; i0 += EVAL_CHUNK) {
    int n = MIN(EVAL_CHUNK, test->n - i0);
    for (int i = 0; i < n; i++)
      ids[i] = i0 + i;
    tp_dataset_gather(test, ids, n, a, lab8);
    for (int i = 0; i < n; i++)
      labels[i] = lab8[i];
    float *in = a, *out = b;
    for (int s = 0; s < rt->W; s++) {
      gboolean last = s == rt->W - 1;
      TpLossStats st = { 0, 0 };
      if (!tp_net_forward(rt->st[s].net, rt->st[s].weights, in, n, last ? NULL : out, NULL, last ? labels : NULL,
                          last ? &st : NULL, err))
        return FALSE;
      if (last)
        loss_sum += st.loss_sum, correct += st.correct;
      float *t = in;
      in = out, out = t;
    }
  }
  *accuracy = test->n ? (double)correct / test->n : 0;
  if (loss)
    *loss = test->n ? loss_sum / test->n : 0;
  return TRUE;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of reps timings of one call, after one untimed warm-up. */
typedef gboolean (*TimedFn)(void *ctx, GError **err);
static gboolean time_median(TimedFn fn, void *ctx, int reps, double *out, GError **err)
{
  g_autofree double *t = g_new(double, reps);
  if (!fn(ctx, err))
    return FALSE;
  for (int r = 0; r < reps; r++) {
    gint64 t0 = g_get_monotonic_time();
    if (!fn(ctx, err))
      return FALSE;
    t[r] = (double)(g_get_monotonic_time() - t0) / 1e6;
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
  float *in, *out, *dout, *din, *grad, *w, *mom;
  TpSaved *saved;
  gint32 *labels;
  const int *idx; /* stage 1 gathers its input from the dataset, as in training */
} ProfCtx;

static gboolean prof_forward(void *ctx, GError **err)
{
  ProfCtx *c = ctx;
  gboolean last = c->s == c->rt->W - 1;
  TpLossStats st;
  if (c->s == 0)
    tp_dataset_gather(c->rt->cfg.train, c->idx, c->n, c->in, NULL);
  return tp_net_forward(c->rt->st[c->s].net, c->rt->st[c->s].weights, c->in, c->n, last ? NULL : c->out, c->saved,
                        last ? c->labels : NULL, last ? &st : NULL, err);
}

static gboolean prof_backward(void *ctx, GError **err)
{
  ProfCtx *c = ctx;
  gboolean last = c->s == c->rt->W - 1;
  return tp_net_backward(c->rt->st[c->s].net, c->rt->st[c->s].weights, c->saved, last ? NULL : c->dout,
                         c->s ? c->din : NULL, c->grad, c->rt->cfg.batch, err);
}

static gboolean prof_update(void *ctx, GError **err)
{
  ProfCtx *c = ctx;
  const TpRuntimeConfig *cfg = &c->rt->cfg;
  const RtStage *S = &c->rt->st[c->s];
  return cfg->be->sgd_step(cfg->be, S->np, cfg->lr, cfg->momentum, cfg->weight_decay, c->w, c->grad, c->mom, c->w,
                           err);
}

gboolean tp_runtime_profile(TpRuntime *rt, const int *idx, int reps, gboolean whole, TpStageProfile *out,
                            GError **err)
{
  const TpRuntimeConfig *cfg = &rt->cfg;
  const TpBackend *be = cfg->be;
  int n = whole ? cfg->batch : cfg->batch / cfg->N, W = rt->W;
  double per = whole ? (double)cfg->N : 1.0;
  size_t width = max_width(rt);
  reps = MAX(reps, 1);
  /* acts[s]: stage s's input; grads[s]: the gradient stage s receives */
  float **acts = g_new0(float *, W + 1), **grads = g_new0(float *, W + 1);
  TpSaved **saved = g_new0(TpSaved *, W);
  for (int s = 0; s <= W; s++)
    acts[s] = g_new0(float, (size_t)n * width), grads[s] = g_new0(float, (size_t)n * width);
  g_autofree uint8_t *lab8 = g_new(uint8_t, n);
  g_autofree gint32 *labels = g_new(gint32, n);
  tp_dataset_gather(cfg->train, idx, n, acts[0], lab8);
  for (int i = 0; i < n; i++)
    labels[i] = lab8[i];
  gboolean ok = TRUE;
  for (int s = 0; s < W && ok; s++) {
    ProfCtx c = { rt, s, n, acts[s], acts[s + 1], NULL, NULL, NULL, NULL, NULL, NULL, labels, idx };
    gboolean mine = s >= rt->lo && s < rt->hi;
    ok = (c.saved = saved[s] = tp_saved_new(rt->st[s].net, n, err)) != NULL &&
         (mine ? time_median(prof_forward, &c, reps, &out[s].fwd, err) : run_once(prof_forward, &c, &out[s].fwd, err));
    out[s].fwd /= per;
  }
  for (int s = W - 1; s >= rt->lo && ok; s--) {
    const RtStage *S = &rt->st[s];
    if (s >= rt->hi) { /* after this process's stages: the gradient they receive */
      size_t np = S->np ? S->np : 1;
      float *grad = be->alloc(be, np, err);
      ProfCtx c = { rt, s, n, NULL, NULL, grads[s + 1], grads[s], grad, NULL, NULL, saved[s], labels, idx };
      ok = grad && be->zero(be, grad, np, err) && run_once(prof_backward, &c, &out[s].bwd, err);
      out[s].upd = 0;
      if (grad)
        be->free(be, grad);
      continue;
    }
    size_t np = S->np ? S->np : 1;
    float *grad = be->alloc(be, np, err), *w = grad ? be->alloc(be, np, err) : NULL;
    float *mom = w ? be->alloc(be, np, err) : NULL;
    ProfCtx c = { rt, s, n, NULL, NULL, grads[s + 1], grads[s], grad, w, mom, saved[s], labels, idx };
    ok = mom && be->zero(be, grad, np, err) && time_median(prof_backward, &c, reps, &out[s].bwd, err) &&
         be->copy(be, w, S->weights, np, err) && be->copy(be, mom, S->mom, np, err) &&
         time_median(prof_update, &c, reps, &out[s].upd, err);
    out[s].bwd /= per;
    if (grad)
      be->free(be, grad);
    if (w)
      be->free(be, w);
    if (mom)
      be->free(be, mom);
  }
  for (int s = 0; s <= W; s++)
    g_free(acts[s]), g_free(grads[s]);
  for (int s = 0; s < W; s++)
    tp_saved_free(saved[s]);
  g_free(acts), g_free(grads), g_free(saved);
  return ok;
}
