/* tp_runtime_acts.c — one stage's activation store (tp_runtime_stage.h): where a forward writes its
 * saved state and what is kept of it until its backward — the state itself, a slice of its
 * mini-batch's one buffer (a whole backward over micro-batch forwards), only its input (recomputation,
 * the backward re-runs it), or the state and the output gradients from an I to its W — so that the
 * operations (tp_runtime_ops.c) never see those lifetimes.  Made and freed in one place each. */
#include "config.h"
#include "tp_runtime_stage.h"
#include "tp_error.h"
#include "tp_index.h"

static TpSaved *saved_take(Stage *g, int n, GError **err)
{
  GPtrArray *p = g->a.pool[n != g->m];
  if (p->len)
    return g_ptr_array_steal_index_fast(p, p->len - 1);
  return g->a.split ? tp_saved_new_split(g->net, n, err) : tp_saved_new(g->net, n, err);
}

/* Back to its pool (n: the samples it was taken for); a slice is only let go. */
static void saved_give(Stage *g, TpSaved *sv, int n)
{
  if (tp_saved_is_slice(sv))
    tp_saved_free(sv);
  else
    g_ptr_array_add(g->a.pool[n != g->m], sv);
}

/* A buffer for the input of a forward of n samples (recomputation), in the backend's memory. */
static float *kept_take(Stage *g, int n, GError **err)
{
  GPtrArray *p = g->a.kpool[n != g->m];
  if (p->len)
    return g_ptr_array_steal_index_fast(p, p->len - 1);
  return tp_rt_buf(g->be, FALSE, (size_t)n * g->in_e, err);
}

static void kept_give(Stage *g, float *buf, int n) { g_ptr_array_add(g->a.kpool[n != g->m], buf); }

static void kept_free(gpointer data, gpointer user)
{
  const Stage *g = user;
  tp_rt_buf_free(g->be, FALSE, data);
}

static size_t n_keys(const TpSchedule *s) { return (size_t)s->K * (s->N + 1); }

gboolean tp_acts_new(Stage *g, GError **err)
{
  const TpSchedule *s = g->sh->s;
  RtActs *a = &g->a;
  size_t nkeys = n_keys(s);
  a->saved = g_try_new0(TpSaved *, nkeys);
  a->fver = g_try_new(int, nkeys);
  a->mbuf = g_try_new0(TpSaved *, s->K);
  a->whole_b = g_try_new0(gboolean, s->K);
  for (int k = 0; a->whole_b && k < tp_stage_len(s, g->st); k++) {
    const TpOp *op = &tp_stage_ops(s, g->st)[k];
    if (op->kind == TP_OP_B && op->micro == TP_WHOLE)
      a->whole_b[op->mb - 1] = TRUE;
  }
  a->batched = !g->sh->rt->cfg.per_micro_backward;
  a->rc = s->recompute;
  a->split = tp_schedule_has_split(s);
  if (a->rc)
    a->kept = g_try_new0(float *, nkeys);
  for (int i = 0; i < 2; i++) {
    a->pool[i] = g_ptr_array_new_with_free_func((GDestroyNotify)tp_saved_free);
    a->kpool[i] = g_ptr_array_new();
  }
  if (a->saved && a->fver && a->mbuf && a->whole_b && (!a->rc || a->kept))
    return TRUE;
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: cannot allocate its bookkeeping of %zu operations", g->st + 1,
              nkeys);
  return FALSE;
}

gboolean tp_acts_workspace(Stage *g, GError **err)
{
  const TpSchedule *s = g->sh->s;
  if (!g->a.rc) /* recomputation: the workspace of the largest operation, held for the whole run */
    return TRUE;
  int most = 1;
  for (int k = 0; k < tp_stage_len(s, g->st); k++) {
    const TpOp *op = &tp_stage_ops(s, g->st)[k];
    most = MAX(most, op->kind == TP_OP_U ? 1 : tp_op_count(s, op));
  }
  if (!(g->a.ws = tp_saved_new(g->net, most * g->m, err)) ||
      (g->st + 1 < g->W && !(g->a.rc_out = tp_rt_buf(g->be, FALSE, (size_t)most * g->m * g->out_e, err))))
    return FALSE;
  tp_wstore_mem_add(g->store, TP_MEMCAT_ACTIVATIONS, (gint64)(tp_net_saved_bytes_per_sample(g->net) * (size_t)(most * g->m)));
  return TRUE;
}

void tp_acts_free(Stage *g)
{
  RtActs *a = &g->a;
  const TpSchedule *s = g->sh->s;
  size_t nkeys = n_keys(s);
  for (size_t k = 0; a->saved && k < nkeys; k++) /* slices before the buffers they are part of */
    tp_saved_free(a->saved[k]);
  for (int k = 0; a->mbuf && k < s->K; k++)
    tp_saved_free(a->mbuf[k]);
  for (size_t k = 0; a->kept && k < nkeys; k++)
    tp_rt_buf_free(g->be, FALSE, a->kept[k]);
  tp_saved_free(a->ws);
  tp_rt_buf_free(g->be, FALSE, a->rc_out);
  for (int i = 0; i < 2; i++) {
    if (a->pool[i])
      g_ptr_array_unref(a->pool[i]);
    if (a->kpool[i]) {
      g_ptr_array_foreach(a->kpool[i], kept_free, g);
      g_ptr_array_unref(a->kpool[i]);
    }
  }
  g_free(a->saved), g_free(a->fver), g_free(a->mbuf), g_free(a->whole_b), g_free(a->kept);
  *a = (RtActs){ 0 };
}

TpSaved *tp_acts_forward_state(Stage *g, const TpOp *op, int n, int off, GError **err)
{
  RtActs *a = &g->a;
  TpSaved **mbuf = &a->mbuf[op->mb - 1];
  if (a->rc) /* recomputation keeps only the input: the workspace */
    return tp_saved_slice(a->ws, 0, n);
  if (op->micro != TP_WHOLE && a->batched && a->whole_b[op->mb - 1]) { /* its part of the mini-batch's buffer */
    if (!*mbuf && !(*mbuf = saved_take(g, g->B, err)))
      return NULL;
    return tp_saved_slice(*mbuf, off, n);
  }
  return saved_take(g, n, err);
}

void tp_acts_drop(Stage *g, TpSaved *sv, int n) { saved_give(g, sv, n); }

gboolean tp_acts_keep(Stage *g, const TpOp *op, TpSaved *sv, int n, int v, GError **err)
{
  int key = tp_key(g->N, op->mb, op->micro);
  if (g->a.rc) {
    saved_give(g, sv, n);
    float *keep = kept_take(g, n, err);
    if (!keep || !g->be->iface->copy(g->be, keep, g->b.in, (size_t)n * g->in_e, err))
      return FALSE;
    g->a.kept[key] = keep;
  } else
    g->a.saved[key] = sv;
  g->a.fver[key] = v;
  return TRUE;
}

RtSpan tp_acts_span(const Stage *g, const TpOp *op)
{
  gboolean whole = op->micro == TP_WHOLE;
  int whole_key = tp_key(g->N, op->mb, TP_WHOLE);
  gboolean from_whole = whole && tp_acts_has(g, whole_key);
  return (RtSpan){ .lo = whole ? 0 : op->micro,
                   .hi = whole ? (from_whole ? 1 : g->N) : op->micro + 1,
                   .un = from_whole ? g->B : g->m,
                   .whole_key = whole_key,
                   .from_whole = from_whole };
}

int tp_acts_key(const Stage *g, const TpOp *op, const RtSpan *p, int j)
{
  return p->from_whole ? p->whole_key : tp_key(g->N, op->mb, j);
}

gboolean tp_acts_has(const Stage *g, int key) { return g->a.rc ? g->a.kept[key] != NULL : g->a.saved[key] != NULL; }

/* Recomputation: forwards j0..j1-1 of span p re-run from their inputs at weights w, into the
 * workspace (their inputs let go). */
static TpSaved *rerun(Stage *g, const TpOp *op, const RtSpan *p, int j0, int j1, const float *w, GError **err)
{
  const Shared *sh = g->sh;
  gboolean last = g->st == g->W - 1;
  for (int j = j0; j < j1; j++) {
    int key = tp_acts_key(g, op, p, j);
    TpSaved *part = tp_saved_slice(g->a.ws, (j - j0) * p->un, p->un);
    tp_rt_set_seeds(g, part, op->mb, p->from_whole ? TP_WHOLE : j);
    tp_saved_set_replay(part, TRUE); /* its forward ran: batchnorm's running statistics moved then */
    if (last)
      tp_dataset_gather(sh->rt->cfg.train, sh->idx[op->mb - 1] + (p->from_whole ? 0 : j * g->m), p->un, NULL,
                        g->b.labels);
    gboolean ok = tp_net_forward(g->net, w, g->a.kept[key], p->un, last ? NULL : g->a.rc_out, part,
                                 last ? g->b.labels : NULL, NULL, err);
    tp_saved_free(part);
    if (!ok)
      return NULL;
    kept_give(g, g->a.kept[key], p->un);
    g->a.kept[key] = NULL;
  }
  return tp_saved_slice(g->a.ws, 0, (j1 - j0) * p->un);
}

TpSaved *tp_acts_take(Stage *g, const TpOp *op, const RtSpan *p, int j0, int j1, const float *w, GError **err)
{
  if (g->a.rc)
    return rerun(g, op, p, j0, j1, w, err);
  if (j1 - j0 > 1) { /* forwards into the mini-batch's buffer: one slice of all of them */
    for (int j = j0; j < j1; j++) {
      int key = tp_key(g->N, op->mb, j);
      saved_give(g, g->a.saved[key], p->un);
      g->a.saved[key] = NULL;
    }
    return tp_saved_slice(g->a.mbuf[op->mb - 1], j0 * g->m, (j1 - j0) * p->un);
  }
  int key = tp_acts_key(g, op, p, j0);
  TpSaved *sv = g->a.saved[key];
  if (op->kind != TP_OP_I) /* an I leaves it for its W */
    g->a.saved[key] = NULL;
  return sv;
}

void tp_acts_release(Stage *g, const TpOp *op, TpSaved *sv, int samples)
{
  if (op->kind != TP_OP_I)
    saved_give(g, sv, samples);
}

void tp_acts_end_backward(Stage *g, const TpOp *op)
{
  TpSaved **mbuf = &g->a.mbuf[op->mb - 1];
  if (op->micro == TP_WHOLE && *mbuf) {
    saved_give(g, *mbuf, g->B);
    *mbuf = NULL;
  }
}

TpSaved *tp_acts_take_for_w(Stage *g, const TpOp *op)
{
  if (op->micro == TP_WHOLE)
    return NULL;
  int key = tp_key(g->N, op->mb, op->micro);
  TpSaved *sv = g->a.saved[key];
  g->a.saved[key] = NULL;
  return sv;
}
