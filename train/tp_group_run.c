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
    *lo = tp_group_rank(g), *hi = *lo + 1;
}

/* ---- one report from many ranks ------------------------------------------------------------------ */

/* Bytes of stage st's part: its records, statistics, K losses and correct counts, weights, buffers. */
static size_t part_len(const TpSchedule *s, const TpRuntime *rt, int st)
{
  return sizeof(gint64) + (size_t)tp_stage_len(s, st) * sizeof(TpOpRecord) + sizeof(TpWStoreStats) +
         (size_t)s->K * (sizeof(double) + sizeof(int)) +
         (tp_runtime_n_params(rt, st) + tp_runtime_n_buffers(rt, st)) * sizeof(float);
}

gboolean tp_group_gather_run(TpGroup *g, const TpSchedule *s, TpRuntime *rt, TpRunResult *r, GError **err)
{
  if (tp_group_size(g) == 1)
    return TRUE;
  const int W = s->W, K = s->K, me = tp_group_rank(g);
  size_t len = 0;
  for (int st = 0; st < W; st++)
    len = MAX(len, part_len(s, rt, st));
  g_autofree guint8 *mine = g_malloc0(len), *all = me == 0 ? g_malloc((size_t)W * len) : NULL;
  size_t at = 0, n_ops = (size_t)tp_stage_len(s, me), np = tp_runtime_n_params(rt, me);
  size_t nb = tp_runtime_n_buffers(rt, me);
  gint64 n = (gint64)n_ops;
#define PUT(src, bytes) (memcpy(mine + at, (src), (bytes)), at += (bytes))
  PUT(&n, sizeof n);
  PUT(r->rec[me], n_ops * sizeof(TpOpRecord));
  PUT(&r->stats[me], sizeof(TpWStoreStats));
  PUT(r->loss_sum, (size_t)K * sizeof(double));
  PUT(r->correct, (size_t)K * sizeof(int));
  PUT(tp_runtime_weights(rt, me), np * sizeof(float));
#undef PUT
  if (nb && !tp_runtime_get_buffers(rt, me, (float *)(gpointer)(mine + at), err)) /* at is a multiple of 4 */
    return FALSE;
  if (!tp_group_gather(g, 0, mine, len, all, err))
    return FALSE;
  if (me != 0)
    return TRUE;
  g_autofree double *loss = g_new(double, K);
  g_autofree int *correct = g_new(int, K);
  for (int st = 1; st < W; st++) {
    const guint8 *p = all + (size_t)st * len;
    size_t ops = (size_t)tp_stage_len(s, st);
    gint64 got;
    memcpy(&got, p, sizeof got), p += sizeof got;
    if (got != (gint64)ops) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d sent %" G_GINT64_FORMAT " operations of stage %d, the "
                  "schedule has %zu", st, got, st + 1, ops);
      return FALSE;
    }
    memcpy(r->rec[st], p, ops * sizeof(TpOpRecord)), p += ops * sizeof(TpOpRecord);
    memcpy(&r->stats[st], p, sizeof(TpWStoreStats)), p += sizeof(TpWStoreStats);
    memcpy(loss, p, (size_t)K * sizeof(double)), p += (size_t)K * sizeof(double);
    memcpy(correct, p, (size_t)K * sizeof(int)), p += (size_t)K * sizeof(int);
    for (int i = 0; i < K; i++)
      r->loss_sum[i] += loss[i], r->correct[i] += correct[i];
    size_t np_st = tp_runtime_n_params(rt, st);
    g_autofree float *w = g_new(float, MAX(np_st, 1));
    memcpy(w, p, np_st * sizeof(float)), p += np_st * sizeof(float);
    size_t nb_st = tp_runtime_n_buffers(rt, st);
    g_autofree float *b = g_new(float, MAX(nb_st, 1));
    memcpy(b, p, nb_st * sizeof(float));
    if (!tp_runtime_set_weights(rt, st, w, err) || (nb_st && !tp_runtime_set_buffers(rt, st, b, err)))
      return FALSE;
  }
  tp_run_result_summarise(r, s, 0, W);
  return TRUE;
}
