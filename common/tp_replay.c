/* tp_replay.c — unit-slot replay of per-stage orders: the deadlock check of validation, the
 * times behind the grid format and the vertical-synchronisation versions; and the happens-before
 * bounds on those versions that hold on every timeline. */
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

/* Whether operation g of stage st has its input (its producer, on the stage before or after, has run:
 * pos says how far each stage got), raising *ready to the producer's end. */
static inline gboolean input_ready(const TpSchedule *s, const TpIndex *ix, const int *pos, int st, long g,
                                   const int64_t *ie, int64_t *ready)
{
  int32_t p = ix->prod[g];
  if (p == -1)
    return TRUE;
  int pst = tp_stage_ops(s, st)[g - ix->off[st]].kind == TP_OP_F ? st - 1 : st + 1;
  if (p < 0 || p - ix->off[pst] >= pos[pst])
    return FALSE;
  *ready = MAX(*ready, ie[p]);
  return TRUE;
}

/* Whether place k of rank r's order starts an F&B composite; fbc[r] is its next composite. */
static inline gboolean fb_at(const TpSchedule *s, int r, int k, const int *fbc)
{
  return tp_fb_opens(s, r, (guint)fbc[r], k);
}

/* The replay of a schedule with interleaved stages: each rank runs its rank_seq one operation at a
 * time across its chunks, an operation starting when the rank is free and its producer has ended (an
 * F&B composite when both its parts' producers have). */
static gboolean replay_ranks(const TpSchedule *s, const TpIndex *ix, int64_t *is, int64_t *ie, GError **err)
{
  const int W = s->W, R = tp_schedule_ranks(s);
  int *pos = g_new0(int, W), *rp = g_new0(int, R), *stack = g_new(int, R), *fbc = g_new0(int, R);
  gboolean *queued = g_new(gboolean, R);
  int64_t *clock = g_new0(int64_t, R);
  int top = 0;
  for (int r = R - 1; r >= 0; r--)
    stack[top++] = r, queued[r] = TRUE;
  while (top > 0) {
    int r = stack[--top];
    queued[r] = FALSE;
    const GArray *seq = s->rank_seq[r];
    for (; rp[r] < (int)seq->len; rp[r]++) {
      int st = g_array_index(seq, int32_t, rp[r]), k = pos[st];
      if (k >= tp_stage_len(s, st))
        break; /* more entries than operations: validation names it */
      const TpOp *op = &tp_stage_ops(s, st)[k];
      long g = ix->off[st] + k;
      int64_t ready = clock[r];
      if (!input_ready(s, ix, pos, st, g, ie, &ready))
        break;
      if (fb_at(s, r, rp[r], fbc)) { /* an F&B composite starts once its B's gradient is there too */
        int st2 = g_array_index(seq, int32_t, rp[r] + 1);
        if (!input_ready(s, ix, pos, st2, ix->off[st2] + pos[st2] + (st2 == st), ie, &ready))
          break;
        fbc[r]++;
      }
      clock[r] = ready + (op->kind == TP_OP_U ? 0 : 1);
      is[g] = ready, ie[g] = clock[r];
      pos[st]++;
      int nb = op->kind == TP_OP_F ? st + 1 : tp_op_sends_up(op->kind) ? st - 1 : -1;
      if (nb >= 0 && nb < W && !queued[tp_stage_rank(s, nb)] && tp_stage_rank(s, nb) != r) {
        stack[top++] = tp_stage_rank(s, nb);
        queued[tp_stage_rank(s, nb)] = TRUE;
      }
    }
  }
  gboolean ok = TRUE;
  for (int r = 0; r < R && ok; r++) {
    if (rp[r] >= (int)s->rank_seq[r]->len)
      continue;
    int st = g_array_index(s->rank_seq[r], int32_t, rp[r]), pst = st;
    char what[64], where[512];
    if (pos[st] >= tp_stage_len(s, st)) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%srank %d's order names stage %d more often than it has operations",
                  s->source ? s->source : "", s->source ? ": " : "", r + 1, st + 1);
      ok = FALSE;
      break;
    }
    const TpOp *op = &tp_stage_ops(s, st)[pos[st]];
    int64_t unused = 0;
    const char *part = "";
    if (fb_at(s, r, rp[r], fbc) && input_ready(s, ix, pos, st, ix->off[st] + pos[st], ie, &unused)) {
      int st2 = g_array_index(s->rank_seq[r], int32_t, rp[r] + 1); /* the composite waits for its B's input */
      op = &tp_stage_ops(s, st2)[pos[st2] + (st2 == st)], st = st2, part = "the F&B composite's ";
    }
    tp_op_where(s, op, where, sizeof where);
    tp_op_name(s, op, what, sizeof what);
    tp_index_producer(ix, s, st, op, &pst);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%sdeadlock: rank %d waits at %s%s of stage %d for %s from stage %d on "
                "rank %d, which never gets there in its order", where, r + 1, part, what, st + 1, what, pst + 1,
                tp_stage_rank(s, pst) + 1);
    ok = FALSE;
  }
  g_free(pos);
  g_free(rp);
  g_free(fbc);
  g_free(stack);
  g_free(queued);
  g_free(clock);
  return ok;
}

#ifdef __GNUC__
#define TP_INLINE inline __attribute__((always_inline))
#else
#define TP_INLINE inline
#endif

/* The replay, into integer (is, ie) or floating-point (ds, de) start and end arrays; inlined into
 * each of its two callers, so that each runs a loop of its own type. */
static TP_INLINE gboolean replay(const TpSchedule *s, const TpIndex *ix, int64_t *is, int64_t *ie, double *ds, double *de,
                       GError **err)
{
  if (s->rank_seq && !de)
    return replay_ranks(s, ix, is, ie, err);
  if (s->rank_seq) {
    long total = ix->off[s->W];
    int64_t *a = g_new(int64_t, total), *b = g_new(int64_t, total);
    gboolean ok = replay_ranks(s, ix, a, b, err);
    for (long g = 0; ok && g < total; g++)
      ds[g] = (double)a[g], de[g] = (double)b[g];
    g_free(a);
    g_free(b);
    return ok;
  }
  const int W = s->W;
  int *pos = g_new0(int, W), *stack = g_new(int, W);
  gboolean *queued = g_new(gboolean, W);
  int64_t *clock = g_new0(int64_t, W);
  int top = 0;
  for (int st = W - 1; st >= 0; st--) {
    stack[top++] = st;
    queued[st] = TRUE;
  }
  /* run each stage as far as its inputs allow, then wake the neighbours it sent to; the times do
   * not depend on the order stages are visited in, only on each operation's producer */
  while (top > 0) {
    int st = stack[--top];
    queued[st] = FALSE;
    const TpOp *ops = tp_stage_ops(s, st);
    const int n = tp_stage_len(s, st);
    const long off = ix->off[st];
    const int32_t *prod = ix->prod + off;
    int k = pos[st];
    int64_t clk = clock[st];
    gboolean sent_down = FALSE, sent_up = FALSE;
    for (; k < n; k++) {
      int32_t p = prod[k];
      int64_t ready = clk;
      uint8_t kind = ops[k].kind;
      if (p != -1) {
        /* the producer, on the stage before (a forward's) or after (a backward's), has run when
         * that stage got past it: no time is read before it is written */
        int pst = kind == TP_OP_F ? st - 1 : st + 1;
        if (p < 0 || p - ix->off[pst] >= pos[pst])
          break;
        int64_t pend = de ? (int64_t)de[p] : ie[p];
        ready = MAX(ready, pend);
      }
      clk = ready + (kind == TP_OP_U ? 0 : 1);
      if (de)
        ds[off + k] = (double)ready, de[off + k] = (double)clk;
      else
        is[off + k] = ready, ie[off + k] = clk;
      sent_down |= kind == TP_OP_F;
      sent_up |= tp_op_sends_up(kind);
    }
    pos[st] = k;
    clock[st] = clk;
    for (int nb = st - 1; nb <= st + 1; nb += 2)
      if ((nb < st ? sent_up : sent_down) && nb >= 0 && nb < W && !queued[nb]) {
        stack[top++] = nb;
        queued[nb] = TRUE;
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

/* Walk the operations in an order that respects the stages' orders and the messages, forward
 * (each op after its stage predecessor and its producer) or backward (each op after its stage
 * successor and its consumer), and fold over stage 1's updates: forward, val[g] = how many of them
 * are g or happen before g; backward, val[g] = the first one that is g or happens after g (K+1 if
 * none).  Updates on stage 1 run in mini-batch order (validation checks it), so both are prefixes
 * or suffixes of 1..K.  FALSE when the orders do not finish (a deadlock). */
static gboolean causal_walk(const TpSchedule *s, const TpIndex *ix, gboolean forward, int32_t *val)
{
  const int W = s->W;
  int *pos = g_new(int, W), *stack = g_new(int, W);
  gboolean *queued = g_new(gboolean, W);
  int top = 0, left = 0;
  for (long g = 0; g < ix->off[W]; g++)
    val[g] = -1;
  for (int st = W - 1; st >= 0; st--) {
    pos[st] = forward ? 0 : tp_stage_len(s, st) - 1;
    stack[top++] = forward ? st : W - 1 - st;
    queued[st] = TRUE;
    left += tp_stage_len(s, st);
  }
  while (top > 0) {
    int st = stack[--top];
    queued[st] = FALSE;
    const TpOp *ops = tp_stage_ops(s, st);
    int n = tp_stage_len(s, st);
    while (forward ? pos[st] < n : pos[st] >= 0) {
      const TpOp *op = &ops[pos[st]];
      long g = ix->off[st] + pos[st];
      int32_t v;
      int nb;
      if (forward) {
        int pst = st;
        long p = tp_index_producer(ix, s, st, op, &pst);
        v = pos[st] > 0 ? val[g - 1] : 0;
        if (p >= 0 && val[p] < 0)
          break;
        if (p >= 0)
          v = MAX(v, val[p]);
        if (st == 0 && op->kind == TP_OP_U)
          v = MAX(v, op->mb);
        nb = op->kind == TP_OP_F ? st + 1 : tp_op_sends_up(op->kind) ? st - 1 : -1;
      } else {
        int cst = op->kind == TP_OP_F ? st + 1 : tp_op_sends_up(op->kind) ? st - 1 : -1;
        v = pos[st] < n - 1 ? val[g + 1] : s->K + 1;
        int32_t cp = cst >= 0 && cst < W ? tp_index_pos(ix, cst, op) : -1; /* -1: none (or missing) */
        if (cp >= 0) {
          long c = ix->off[cst] + cp;
          if (val[c] < 0)
            break;
          v = MIN(v, val[c]);
        }
        if (st == 0 && op->kind == TP_OP_U)
          v = MIN(v, op->mb);
        nb = op->kind == TP_OP_F ? st - 1 : tp_op_sends_up(op->kind) ? st + 1 : -1;
      }
      val[g] = v;
      left--;
      pos[st] += forward ? 1 : -1;
      if (nb >= 0 && nb < W && !queued[nb]) {
        stack[top++] = nb;
        queued[nb] = TRUE;
      }
    }
  }
  g_free(pos);
  g_free(stack);
  g_free(queued);
  return left == 0;
}

gboolean tp_causal_bounds(const TpSchedule *s, const TpIndex *ix, int32_t *lo, int32_t *hi)
{
  long total = ix->off[s->W];
  int32_t *before = g_new(int32_t, total), *after = g_new(int32_t, total);
  gboolean ok = causal_walk(s, ix, TRUE, before) && causal_walk(s, ix, FALSE, after);
  for (int i = 0; i <= s->K; i++)
    lo[i] = 0, hi[i] = -1;
  const TpOp *ow = tp_stage_ops(s, s->W - 1);
  for (int k = 0; ok && k < tp_stage_len(s, s->W - 1); k++) {
    if (ow[k].kind != TP_OP_B || hi[ow[k].mb] >= 0)
      continue;
    long g = ix->off[s->W - 1] + k;
    lo[ow[k].mb] = k > 0 ? before[g - 1] : 0;
    hi[ow[k].mb] = after[g] - 1;
  }
  g_free(before);
  g_free(after);
  return ok;
}

gboolean tp_replay(const TpSchedule *s, const TpIndex *ix, int64_t *start, int64_t *end, GError **err)
{
  return replay(s, ix, start, end, NULL, NULL, err);
}

gboolean tp_replay_indexed(const TpSchedule *s, TpIndex **ix, int64_t **start, int64_t **end, GError **err)
{
  *start = *end = NULL;
  if (!(*ix = tp_index_new(s, err)))
    return FALSE;
  long total = (*ix)->off[s->W];
  *start = g_new(int64_t, total);
  *end = g_new(int64_t, total);
  return tp_replay(s, *ix, *start, *end, err);
}

gboolean tp_replay_times(const TpSchedule *s, const TpIndex *ix, double *start, double *end, GError **err)
{
  return replay(s, ix, NULL, NULL, start, end, err);
}

void tp_prepared_clear(TpPrepared *p)
{
  tp_index_free(p->ix);
  g_free(p->start);
  g_free(p->end);
  *p = (TpPrepared){ .untimed = p->untimed };
}
