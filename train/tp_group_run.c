/* tp_group_run.c — what the trainer builds on the group interface alone: the stages of a rank and
 * one report from many ranks. */
#include "tp_group_run.h"
#include "tp_error.h"

#include <string.h>

void tp_group_stages(const TpGroup *g, int W, int *lo, int *hi)
{
  if (tp_group_size(g) == 1)
    *lo = 0, *hi = W;
  else
    *lo = W > 0 ? tp_group_rank(g) % W : tp_group_rank(g), *hi = *lo + 1;
}

/* ---- one report from many ranks ------------------------------------------------------------------ */

/* Bytes of stage st's part: its records, statistics, K losses and correct counts, weights, buffers. */
static size_t part_len(const TpSchedule *s, const TpRuntime *rt, int st)
{
  return sizeof(gint64) + (size_t)tp_stage_len(s, st) * sizeof(TpOpRecord) + sizeof(TpWStoreStats) +
         (size_t)s->K * (sizeof(double) + sizeof(int)) +
         (tp_runtime_n_params(rt, st) + tp_runtime_n_buffers(rt, st)) * sizeof(float);
}

/* Rank me's part (stage st of its replica) into mine (len bytes). */
static gboolean put_part(const TpSchedule *s, TpRuntime *rt, const TpRunResult *r, int st, guint8 *mine, GError **err)
{
  size_t at = 0, n_ops = (size_t)tp_stage_len(s, st), np = tp_runtime_n_params(rt, st);
  gint64 n = (gint64)n_ops;
#define PUT(src, bytes) (memcpy(mine + at, (src), (bytes)), at += (bytes))
  PUT(&n, sizeof n);
  PUT(r->rec[st], n_ops * sizeof(TpOpRecord));
  PUT(&r->stats[st], sizeof(TpWStoreStats));
  PUT(r->loss_sum, (size_t)s->K * sizeof(double));
  PUT(r->correct, (size_t)s->K * sizeof(int));
  PUT(tp_runtime_weights(rt, st), np * sizeof(float));
#undef PUT
  /* at is a multiple of 4 */
  return !tp_runtime_n_buffers(rt, st) || tp_runtime_get_buffers(rt, st, (float *)(gpointer)(mine + at), err);
}

/* Rank 0: stage st's part p, of a rank of the first replica (whole: its records, statistics, weights
 * and buffers), or of another (its losses and correct counts only). */
static gboolean take_part(const TpSchedule *s, TpRuntime *rt, TpRunResult *r, int rank, int st, gboolean whole,
                          const guint8 *p, GError **err)
{
  const int K = s->K;
  size_t ops = (size_t)tp_stage_len(s, st);
  gint64 got;
  memcpy(&got, p, sizeof got), p += sizeof got;
  if (got != (gint64)ops) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d sent %" G_GINT64_FORMAT " operations of stage %d, the "
                "schedule has %zu", rank, got, st + 1, ops);
    return FALSE;
  }
  const guint8 *rec = p;
  p += ops * sizeof(TpOpRecord) + sizeof(TpWStoreStats);
  g_autofree double *loss = g_memdup2(p, (size_t)K * sizeof(double));
  p += (size_t)K * sizeof(double);
  g_autofree int *correct = g_memdup2(p, (size_t)K * sizeof(int));
  p += (size_t)K * sizeof(int);
  for (int i = 0; i < K; i++)
    r->loss_sum[i] += loss[i], r->correct[i] += correct[i];
  if (!whole)
    return TRUE;
  memcpy(r->rec[st], rec, ops * sizeof(TpOpRecord));
  memcpy(&r->stats[st], rec + ops * sizeof(TpOpRecord), sizeof(TpWStoreStats));
  size_t np_st = tp_runtime_n_params(rt, st), nb_st = tp_runtime_n_buffers(rt, st);
  g_autofree float *w = g_new(float, MAX(np_st, 1)), *b = g_new(float, MAX(nb_st, 1));
  memcpy(w, p, np_st * sizeof(float));
  memcpy(b, p + np_st * sizeof(float), nb_st * sizeof(float));
  return tp_runtime_set_weights(rt, st, w, err) && (!nb_st || tp_runtime_set_buffers(rt, st, b, err));
}

gboolean tp_group_gather_run(TpGroup *g, const TpSchedule *s, TpRuntime *rt, TpRunResult *r, gboolean *identical,
                             GError **err)
{
  if (tp_group_size(g) == 1)
    return TRUE;
  const int W = s->W, n = tp_group_size(g), me = tp_group_rank(g);
  size_t len = 0, np_off = sizeof(gint64) + sizeof(TpWStoreStats) + (size_t)s->K * (sizeof(double) + sizeof(int));
  for (int st = 0; st < W; st++)
    len = MAX(len, part_len(s, rt, st));
  g_autofree guint8 *mine = g_malloc0(len), *all = me == 0 ? g_malloc((size_t)n * len) : NULL;
  if (!put_part(s, rt, r, me % W, mine, err) || !tp_group_gather(g, 0, mine, len, all, err))
    return FALSE;
  if (me != 0)
    return TRUE;
  for (int k = 1; k < n; k++)
    if (!take_part(s, rt, r, k, k % W, k < W, all + (size_t)k * len, err))
      return FALSE;
  for (int k = W; identical && k < n; k++) { /* another replica's weights and buffers against the first's */
    int st = k % W;
    size_t off = np_off + (size_t)tp_stage_len(s, st) * sizeof(TpOpRecord);
    *identical = *identical && memcmp(all + (size_t)k * len + off, all + (size_t)st * len + off,
                                      (tp_runtime_n_params(rt, st) + tp_runtime_n_buffers(rt, st)) * sizeof(float)) == 0;
  }
  tp_run_result_summarise(r, s, 0, W);
  return TRUE;
}
