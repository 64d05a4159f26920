/* tp_replay.c — unit-slot replay of per-stage orders: the deadlock check of validation, the
 * times behind the grid format and the vertical-synchronisation versions. */
#include "tp_replay.h"
#include "tp_error.h"

#include <stdio.h>

/* Name the chain of waits that starts at stage st, up to the first stage that repeats. */
static void describe_deadlock(const TpSchedule *s, const TpIndex *ix, const int *pos, int st, GString *msg)
{
  gboolean *seen = g_new0(gboolean, s->W);
  char what[64], where[512];
  tp_op_where(s, &tp_stage_ops(s, st)[pos[st]], where, sizeof where);
  g_string_append_printf(msg, "%sdeadlock: ", where);
  for (;;) {
    const TpOp *op = &tp_stage_ops(s, st)[pos[st]];
    int pst = st;
    seen[st] = TRUE;
    tp_op_name(s, op, what, sizeof what);
    g_string_append_printf(msg, "stage %d waits at %s", st + 1, what);
    if (op->line > 0)
      g_string_append_printf(msg, " (line %d)", op->line);
    if (tp_index_producer(ix, s, st, op, &pst) < 0)
      break;
    g_string_append_printf(msg, " for %s from stage %d", what, pst + 1);
    if (seen[pst]) {
      g_string_append(msg, ", a cycle");
      break;
    }
    g_string_append(msg, "; ");
    st = pst;
  }
  g_free(seen);
}

/* The replay, into integer (is, ie) or floating-point (ds, de) start and end arrays. */
static gboolean replay(const TpSchedule *s, const TpIndex *ix, int64_t *is, int64_t *ie, double *ds, double *de,
                       GError **err)
{
  const int W = s->W;
  int *pos = g_new0(int, W), *stack = g_new(int, W);
  gboolean *queued = g_new(gboolean, W);
  int64_t *clock = g_new0(int64_t, W);
  int top = 0;
  for (long g = 0; g < ix->off[W]; g++)
    de ? (void)(de[g] = -1) : (void)(ie[g] = -1);
  for (int st = W - 1; st >= 0; st--) {
    stack[top++] = st;
    queued[st] = TRUE;
  }
  while (top > 0) {
    int st = stack[--top];
    queued[st] = FALSE;
    const TpOp *ops = tp_stage_ops(s, st);
    int n = tp_stage_len(s, st);
    const int32_t *prod = ix->prod + ix->off[st];
    while (pos[st] < n) {
      const TpOp *op = &ops[pos[st]];
      int32_t p = prod[pos[st]];
      int64_t ready = clock[st];
      if (p != -1) {
        int64_t pend = p < 0 ? -1 : de ? (int64_t)de[p] : ie[p];
        if (pend < 0)
          break;
        ready = MAX(ready, pend);
      }
      long g = ix->off[st] + pos[st];
      clock[st] = ready + (op->kind == TP_OP_U ? 0 : 1);
      if (de)
        ds[g] = (double)ready, de[g] = (double)clock[st];
      else
        is[g] = ready, ie[g] = clock[st];
      pos[st]++;
      int nb = op->kind == TP_OP_F ? st + 1 : op->kind == TP_OP_B ? st - 1 : -1;
      if (nb >= 0 && nb < W && !queued[nb]) {
        stack[top++] = nb;
        queued[nb] = TRUE;
      }
    }
  }
  gboolean ok = TRUE;
  for (int st = 0; st < W && ok; st++)
    if (pos[st] < tp_stage_len(s, st)) {
      GString *msg = g_string_new(NULL);
      describe_deadlock(s, ix, pos, st, msg);
      g_set_error_literal(err, TP_ERROR, TP_ERROR_INPUT, msg->str);
      g_string_free(msg, TRUE);
      ok = FALSE;
    }
  g_free(pos);
  g_free(stack);
  g_free(queued);
  g_free(clock);
  return ok;
}

gboolean tp_replay(const TpSchedule *s, const TpIndex *ix, int64_t *start, int64_t *end, GError **err)
{
  return replay(s, ix, start, end, NULL, NULL, err);
}

gboolean tp_replay_times(const TpSchedule *s, const TpIndex *ix, double *start, double *end, GError **err)
{
  return replay(s, ix, NULL, NULL, start, end, err);
}
