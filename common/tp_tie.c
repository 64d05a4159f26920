/* tp_tie.c — a head tied to the embedding across stages: its stage under a split and the schedules
 * that can keep its copy of the table the same as the embedding's (tp_tie.h). */
#include "config.h"
#include "tp_tie.h"
#include "tp_error.h"
#include "tp_index.h"

/* The first head tied to the embedding off the first stage: its stage (and its layer in *layer), or
 * -1. */
static int tied_head(const TpModel *m, const int *bounds, int W, const TpLayer **layer)
{
  for (int s = 1; s < W; s++)
    for (int i = MAX(bounds[s], 0); i < MIN(bounds[s + 1], tp_model_n_layers(m)); i++) {
      const TpLayer *d = tp_model_layer(m, i);
      if (d->kind == TP_LAYER_LM_HEAD && d->blk.tied) {
        *layer = d;
        return s;
      }
    }
  return -1;
}

int tp_tie_stage(const TpModel *m, const int *bounds, int W)
{
  const TpLayer *d;
  return tied_head(m, bounds, W, &d);
}

TpTie tp_tie_of(const TpModel *m, const int *bounds, int W)
{
  const TpLayer *d = NULL;
  int s = tied_head(m, bounds, W, &d);
  if (s < 0)
    return (TpTie){ .stage = -1 };
  if (g_str_has_suffix(m->source, ".json")) /* a config.json: the lines are not the file's */
    return (TpTie){ .stage = s, .head = g_strdup(m->source), .what = "the head (tie_word_embeddings)",
                    .untie = "untie it" };
  return (TpTie){ .stage = s, .head = g_strdup_printf("%s:%d", m->source, d->line), .what = "lm_head tied=1",
                  .untie = "tied=0" };
}

void tp_tie_clear(TpTie *t) { g_clear_pointer(&t->head, g_free); }

gboolean tp_tie_check_split(const TpModel *m, const int *bounds, int W, GError **err)
{
  int heads = 0, off = 0;
  for (int s = 0; s < W; s++)
    for (int i = MAX(bounds[s], 0); i < MIN(bounds[s + 1], tp_model_n_layers(m)); i++) {
      const TpLayer *d = tp_model_layer(m, i);
      if (d->kind != TP_LAYER_LM_HEAD || !d->blk.tied)
        continue;
      heads++, off += s > 0;
      if (heads > 1 && off > 0) {
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: a second lm_head tied=1 on stage %d: a split may tie one "
                    "head to the embedding across stages (put the heads on the embedding's stage, or untie one)",
                    m->source, d->line, s + 1);
        return FALSE;
      }
    }
  return TRUE;
}

gboolean tp_order_ties(TpOrder o)
{
  return o == TP_ORDER_GPIPE || o == TP_ORDER_1F1B || o == TP_ORDER_ZB_H1 || o == TP_ORDER_ZB_H2 || o == TP_ORDER_ZB_1P ||
         o == TP_ORDER_ZB_2P || o == TP_ORDER_ZB_AUTO || o == TP_ORDER_INTERLEAVED_1F1B || o == TP_ORDER_ZB_V ||
         o == TP_ORDER_DUALPIPE_V;
}

/* The first operation of stage st that is out of its mini-batch's block of the order (each
 * mini-batch's operations, then its update, then the next's), and in *done the updates before it;
 * NULL where every one is in its block. */
static const TpOp *out_of_block(const TpSchedule *s, int st, int *done)
{
  *done = 0;
  for (int k = 0; k < tp_stage_len(s, st); k++) {
    const TpOp *op = &tp_stage_ops(s, st)[k];
    if (op->mb != *done + 1)
      return op;
    *done += op->kind == TP_OP_U;
  }
  return NULL;
}

/* Why stage st of s cannot meet the other side of a tie at its updates (NULL: it can): it runs an
 * operation out of its mini-batch's block. */
static char *block_why(const TpSchedule *s, int st)
{
  int done;
  const TpOp *op = out_of_block(s, st, &done);
  if (!op)
    return NULL;
  char name[64], where[256];
  tp_op_name(s, op, name, sizeof name);
  tp_op_where(s, op, where, sizeof where);
  return op->mb > done + 1 ? g_strdup_printf("%sstage %d runs %s before the update of mini-batch %d", where, st + 1, name,
                                             done + 1)
                           : g_strdup_printf("%sstage %d runs %s after its mini-batch's update", where, st + 1, name);
}

void tp_tie_refuse(const TpTie *t, const char *why, const char *fix, GError **err)
{
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %s on stage %d sums its gradient with stage 1's at each update, %s "
              "(%s)", t->head, t->what, t->stage + 1, why, fix);
}

/* Interleaved stages (s->rank_seq): the executor's rule played out on the workers' orders.  A worker
 * runs its order one operation at a time, an operation once its input is there; a tied side's update
 * passes the worker's turn on at once, but its stage runs nothing more until the other side's update
 * of that mini-batch has come too.  Why a worker then never gets through its order (NULL: every one
 * does); ix is s's index. */
static char *turns_why(const TpSchedule *s, const TpIndex *ix, int h)
{
  const int R = tp_schedule_ranks(s);
  int *pos = g_new0(int, s->W), *rp = g_new0(int, R), waiting[2] = { 0, 0 }; /* the mini-batch a side waits at */
  for (gboolean moved = TRUE; moved;) {
    moved = FALSE;
    for (int r = 0; r < R; r++)
      for (const GArray *seq = s->rank_seq[r]; rp[r] < (int)seq->len; rp[r]++, moved = TRUE) {
        int st = g_array_index(seq, int32_t, rp[r]), side = st == 0 ? 0 : st == h ? 1 : -1, pst;
        if (pos[st] >= tp_stage_len(s, st) || (side >= 0 && waiting[side]))
          break;
        const TpOp *op = &tp_stage_ops(s, st)[pos[st]];
        long p = tp_index_producer(ix, s, st, op, &pst);
        if (p != -1 && (p < 0 || p - ix->off[pst] >= pos[pst]))
          break;
        pos[st]++;
        if (side >= 0 && op->kind == TP_OP_U && (waiting[side] = op->mb) == waiting[!side])
          waiting[0] = waiting[1] = 0; /* met */
      }
  }
  char *why = NULL;
  for (int r = 0; r < R && !why; r++)
    if (rp[r] < (int)s->rank_seq[r]->len) {
      int st = g_array_index(s->rank_seq[r], int32_t, rp[r]);
      char name[64] = "?", where[256] = "";
      if (pos[st] < tp_stage_len(s, st)) {
        tp_op_name(s, &tp_stage_ops(s, st)[pos[st]], name, sizeof name);
        tp_op_where(s, &tp_stage_ops(s, st)[pos[st]], where, sizeof where);
      }
      why = g_strdup_printf("%sworker %d would stop at %s of stage %d", where, r + 1, name, st + 1);
    }
  g_free(pos), g_free(rp);
  return why;
}

gboolean tp_tie_check_schedule(const TpTie *t, const TpSchedule *s, GError **err)
{
  if (t->stage < 0)
    return TRUE;
  g_autofree char *why = NULL;
  for (int i = 0; i < 2 && !why; i++) {
    g_autofree char *block = block_why(s, i ? t->stage : 0);
    if (block)
      why = g_strdup_printf("but %s: they would wait for each other", block);
  }
  if (!why && s->rank_seq) {
    TpIndex *ix = tp_index_new(s, err);
    if (!ix)
      return FALSE;
    g_autofree char *turns = turns_why(s, ix, t->stage);
    tp_index_free(ix);
    if (turns)
      why = g_strdup_printf("but %s, the updates waiting for each other", turns);
  }
  if (!why)
    return TRUE;
  g_autofree char *fix = g_strdup_printf("use a flushing preset, or %s", t->untie);
  tp_tie_refuse(t, why, fix, err);
  return FALSE;
}

gboolean tp_tie_check(const TpModel *m, const int *bounds, const TpSchedule *s, GError **err)
{
  if (!tp_tie_check_split(m, bounds, s->W, err))
    return FALSE;
  TpTie t = tp_tie_of(m, bounds, s->W);
  gboolean ok = tp_tie_check_schedule(&t, s, err);
  tp_tie_clear(&t);
  return ok;
}
