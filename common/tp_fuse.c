/* tp_fuse.c — fused forwards: a schedule in which every stage runs the N forwards of a mini-batch
 * back to back, in micro-batch order, reading one version, and then one backward of the whole
 * mini-batch (the nF1B order under vertical synchronisation), may run those N forwards as one
 * forward of the whole mini-batch.  Versions, backwards and updates stay where they were, so every
 * sample meets the same weights: the same arithmetic in products of B rows instead of N products of
 * B/N rows (faster where small products run below the rate of large ones), and only the timing
 * changes — a stage sends the mini-batch on when all of it is done. */
#include "tp_schedule.h"
#include "tp_validate.h"

/* Whether mini-batch i's forwards at ops[k..] (its micro-batch 0) are N back to back, in order,
 * reading one version from one source. */
static gboolean run_of_forwards(const TpSchedule *s, const TpOp *ops, int n, int k)
{
  if (k + s->N > n)
    return FALSE;
  for (int j = 1; j < s->N; j++) {
    const TpOp *a = &ops[k], *b = &ops[k + j];
    if (b->kind != TP_OP_F || b->mb != a->mb || b->micro != j || b->ver != a->ver || b->src != a->src)
      return FALSE;
  }
  return TRUE;
}

TpSchedule *tp_schedule_fuse_forwards(const TpSchedule *s, int *fused, GError **err)
{
  *fused = 0;
  if (s->N < 2 || s->rank_seq || tp_schedule_has_split(s))
    return NULL;
  gboolean *ok = g_new(gboolean, (size_t)s->K + 1);
  for (int i = 0; i <= s->K; i++)
    ok[i] = i > 0;
  for (int st = 0; st < s->W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    int n = tp_stage_len(s, st);
    for (int k = 0; k < n; k++) {
      const TpOp *op = &ops[k];
      if (op->mb < 1 || op->mb > s->K || op->kind == TP_OP_U)
        continue;
      if (op->micro == TP_WHOLE ? op->kind == TP_OP_F : op->kind != TP_OP_F) /* nothing to fuse, or a backward per micro-batch */
        ok[op->mb] = FALSE;
      else if (op->kind == TP_OP_F && op->micro == 0 && !run_of_forwards(s, ops, n, k))
        ok[op->mb] = FALSE;
    }
  }
  for (int i = 1; i <= s->K; i++)
    *fused += ok[i];
  TpSchedule *f = NULL;
  if (*fused) {
    f = tp_schedule_new(s->order, s->policy, s->W, s->N, s->K);
    f->fixed_on = s->fixed_on;
    f->sig = s->sig;
    f->recompute = s->recompute;
    f->source = g_strdup(s->source);
    for (int st = 0; st < s->W; st++) {
      const TpOp *ops = tp_stage_ops(s, st);
      int n = tp_stage_len(s, st);
      for (int k = 0; k < n; k++) {
        TpOp op = ops[k];
        if (op.kind == TP_OP_F && op.micro != TP_WHOLE && ok[op.mb]) {
          if (op.micro != 0)
            continue; /* in the run its micro-batch 0 stands for */
          op.micro = TP_WHOLE;
        }
        g_array_append_val(f->stage[st], op);
      }
    }
    if (!tp_validate(f, err)) { /* cannot happen: a fused forward reads what its run read */
      g_prefix_error(err, "fusing the forwards: ");
      tp_schedule_free(f);
      f = NULL;
      *fused = 0;
    }
  }
  g_free(ok);
  return f;
}

int tp_schedule_fused_forwards(const TpSchedule *s)
{
  int n = 0;
  if (s->order != TP_ORDER_NF1B || s->rank_seq)
    return 0;
  for (int k = 0; k < tp_stage_len(s, 0); k++) /* fusion is all stages or none: stage 1 tells */
    n += tp_stage_ops(s, 0)[k].kind == TP_OP_F && tp_stage_ops(s, 0)[k].micro == TP_WHOLE;
  return n;
}

TpSchedule *tp_schedule_unfuse_forwards(const TpSchedule *s)
{
  TpSchedule *u = tp_schedule_new(s->order, s->policy, s->W, s->N, s->K);
  u->fixed_on = s->fixed_on;
  u->sig = s->sig;
  u->recompute = s->recompute;
  u->source = g_strdup(s->source);
  for (int st = 0; st < s->W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      TpOp op = tp_stage_ops(s, st)[k];
      gboolean whole = op.kind == TP_OP_F && op.micro == TP_WHOLE;
      for (int j = 0; j < (whole ? s->N : 1); j++) {
        if (whole)
          op.micro = j;
        g_array_append_val(u->stage[st], op);
      }
    }
  return u;
}
