/* tp_orders.c — the per-stage operation orders of spec §2.1: gpipe, 1f1b, 2bw and the zero-bubble
 * orders zb-h1 and zb-h2 (§2.3, split backward) in closed form; nf1b and 1f1b-async by their
 * unit-slot rules (backward first, bounded admission). */
#include "tp_schedule.h"
#include "tp_memory.h"
#include "tp_parallel.h"
#include "tp_zbauto.h"

/* Append an operation to stage st, whose array is sized already (len[st]: operations so far). */
static inline void put(TpSchedule *s, int *len, int st, TpOpKind k, int mb, int micro)
{
  TpOp *op = &tp_stage_ops(s, st)[len[st]++];
  *op = (TpOp){ .kind = (uint8_t)k, .src = TP_SRC_FIXED, .mb = mb, .micro = micro };
}

static void order_gpipe(TpSchedule *s, int *len)
{
  for (int i = 1; i <= s->K; i++)
    for (int st = 0; st < s->W; st++) {
      for (int j = 0; j < s->N; j++)
        put(s, len, st, TP_OP_F, i, j);
      for (int j = s->N - 1; j >= 0; j--)
        put(s, len, st, TP_OP_B, i, j);
      put(s, len, st, TP_OP_U, i, TP_WHOLE);
    }
}

static void order_1f1b(TpSchedule *s, int *len)
{
  for (int i = 1; i <= s->K; i++)
    for (int st = 0; st < s->W; st++) {
      int warm = MIN(s->W - 1 - st, s->N), f = 0, b = 0;
      while (f < warm)
        put(s, len, st, TP_OP_F, i, f++);
      while (f < s->N) {
        put(s, len, st, TP_OP_F, i, f++);
        put(s, len, st, TP_OP_B, i, b++);
      }
      while (b < s->N)
        put(s, len, st, TP_OP_B, i, b++);
      put(s, len, st, TP_OP_U, i, TP_WHOLE);
    }
}

/* The zero-bubble handcrafted orders, per mini-batch and stage st (0-based), with a flush: `warm`
 * forwards, then while forwards remain one input gradient I and one forward (zb-h1: the forward
 * first, as 1F1B), then the remaining I; after each I, the oldest weight gradient W still owed runs
 * once more than `defer` I have run, so up to `defer` W wait to fill what would be idle time; the
 * W left over close the mini-batch before its update.
 *   zb-h1: warm = W-1-st (1F1B's), defer = st: at most W micro-batches' activations on any stage,
 *          1F1B's peak; bubble per stage and mini-batch (W-1)(F+I-W) against 1F1B's (W-1)(F+I+W).
 *   zb-h2: warm = 2(W-1-st)+1, defer = 2st: at most 2W-1 micro-batches' activations on every stage;
 *          on unit slots F = I = W no bubble in the steady state once N >= 2W-1 (docs/zero-bubble.md). */
static void order_zb(TpSchedule *s, int *len, gboolean h2)
{
  for (int i = 1; i <= s->K; i++)
    for (int st = 0; st < s->W; st++) {
      int warm = MIN(h2 ? 2 * (s->W - 1 - st) + 1 : s->W - 1 - st, s->N), defer = h2 ? 2 * st : st;
      int f = 0, b = 0, w = 0;
      while (f < warm)
        put(s, len, st, TP_OP_F, i, f++);
      while (b < s->N) {
        gboolean fwd = f < s->N;
        if (fwd && !h2)
          put(s, len, st, TP_OP_F, i, f++);
        put(s, len, st, TP_OP_I, i, b++);
        if (fwd && h2)
          put(s, len, st, TP_OP_F, i, f++);
        if (b > defer)
          put(s, len, st, TP_OP_W, i, w++);
      }
      while (w < s->N)
        put(s, len, st, TP_OP_W, i, w++);
      put(s, len, st, TP_OP_U, i, TP_WHOLE);
    }
}

/* One operation of chunk c on rank r, appended to its stage and to the rank's sequence; micro-batches
 * at or beyond N (zb-v's warm-up assumes at least 2R-1 of them) are left out. */
static void put_chunk(TpSchedule *s, int *len, int r, int c, TpOpKind k, int mb, int micro)
{
  if (micro >= s->N)
    return;
  int R = s->W / s->V, st = c * R + (s->map == TP_MAP_V_SHAPE && c % 2 ? R - 1 - r : r);
  put(s, len, st, k, mb, micro);
  int32_t v = st;
  g_array_append_val(s->rank_seq[r], v);
}

/* Every chunk of rank r applies mini-batch i's update, chunk 0 first. */
static void put_updates(TpSchedule *s, int *len, int r, int i)
{
  for (int c = 0; c < s->V; c++)
    put_chunk(s, len, r, c, TP_OP_U, i, -1);
}

/* Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM; PyTorch's ScheduleInterleaved1F1B) with a
 * flush, N a multiple of R: rank r's k-th forward is of chunk (k / R) mod V, micro-batch
 * (k / RV)·R + k mod R — groups of R micro-batches go through chunk 0, then chunk 1, … — and its
 * k-th backward the same with the chunks in reverse; (R-1-r)·2 + (V-1)·R forwards warm up, then one
 * forward and one backward alternate, then the backwards left.  Bubble per rank and mini-batch
 * (R-1)(F+B)/V for whole-stage times F and B (docs/zero-bubble.md). */
static void order_interleaved(TpSchedule *s, int *len)
{
  const int V = s->V, R = s->W / V, total = s->N * V;
  for (int i = 1; i <= s->K; i++)
    for (int r = 0; r < R; r++) {
      int warm = MIN((R - 1 - r) * 2 + (V - 1) * R, total), f = 0, b = 0;
      for (; f < warm; f++)
        put_chunk(s, len, r, (f / R) % V, TP_OP_F, i, (f / (R * V)) * R + f % R);
      for (; f < total; f++, b++) {
        put_chunk(s, len, r, (f / R) % V, TP_OP_F, i, (f / (R * V)) * R + f % R);
        put_chunk(s, len, r, V - 1 - (b / R) % V, TP_OP_B, i, (b / (R * V)) * R + b % R);
      }
      for (; b < total; b++)
        put_chunk(s, len, r, V - 1 - (b / R) % V, TP_OP_B, i, (b / (R * V)) * R + b % R);
      put_updates(s, len, r, i);
    }
}

/* ZB-V (Qi et al., Zero Bubble Pipeline Parallelism, §6; PyTorch's ScheduleZBVZeroBubble): two chunks
 * per rank in a V, chunk 0 = stage r going down, chunk 1 = stage 2R-1-r coming back up, backward
 * split into I and W.  Per mini-batch, counting as if N >= 2R-1 (the extra micro-batches left out):
 * 2(R-r)-1 forwards of chunk 0; r times F1 F0; R-r times F1 I1 W1; then F0 I0 W0 F1 I1 W1 while
 * forwards remain; r times I0 I1; R-r times I0 and the oldest W0 owed; the W1 then W0 left. */
static void order_zbv(TpSchedule *s, int *len)
{
  const int R = s->W / 2, n = MAX(2 * R - 1, s->N);
  for (int i = 1; i <= s->K; i++)
    for (int r = 0; r < R; r++) {
      int f0 = 0, f1 = 0, b0 = 0, b1 = 0, w0, w1;
      for (int k = 0; k < 2 * (R - r) - 1; k++)
        put_chunk(s, len, r, 0, TP_OP_F, i, f0++);
      for (int k = 0; k < r; k++) {
        put_chunk(s, len, r, 1, TP_OP_F, i, f1++);
        put_chunk(s, len, r, 0, TP_OP_F, i, f0++);
      }
      for (int k = 0; k < R - r; k++, b1++) {
        put_chunk(s, len, r, 1, TP_OP_F, i, f1++);
        put_chunk(s, len, r, 1, TP_OP_I, i, b1);
        put_chunk(s, len, r, 1, TP_OP_W, i, b1);
      }
      while (f1 < f0 || f0 < n) {
        if (f0 < n)
          put_chunk(s, len, r, 0, TP_OP_F, i, f0++);
        put_chunk(s, len, r, 0, TP_OP_I, i, b0);
        put_chunk(s, len, r, 0, TP_OP_W, i, b0++);
        put_chunk(s, len, r, 1, TP_OP_F, i, f1++);
        put_chunk(s, len, r, 1, TP_OP_I, i, b1);
        put_chunk(s, len, r, 1, TP_OP_W, i, b1++);
      }
      w0 = b0, w1 = b1;
      for (int k = 0; k < r; k++) {
        put_chunk(s, len, r, 0, TP_OP_I, i, b0++);
        put_chunk(s, len, r, 1, TP_OP_I, i, b1++);
      }
      for (int k = 0; k < R - r; k++) {
        put_chunk(s, len, r, 0, TP_OP_I, i, b0++);
        put_chunk(s, len, r, 0, TP_OP_W, i, w0++);
      }
      while (w1 < b1)
        put_chunk(s, len, r, 1, TP_OP_W, i, w1++);
      while (w0 < b0)
        put_chunk(s, len, r, 0, TP_OP_W, i, w0++);
      put_updates(s, len, r, i);
    }
}

/* DualPipe-V's state on one rank in one mini-batch: forwards and backwards so far per chunk, and the
 * weight gradients owed, oldest first (chunk·TP_MAX_MICRO + micro-batch). */
typedef struct {
  TpSchedule *s;
  int *len, r, i;
  int f[2], b[2];
  GQueue owed;
} DualV;

static void dv_forward(DualV *d, int c) { put_chunk(d->s, d->len, d->r, c, TP_OP_F, d->i, d->f[c]++); }

/* The next backward of chunk c: whole (B), or its input gradient I with its W owed (zb). */
static void dv_backward(DualV *d, int c, gboolean zb)
{
  if (zb)
    g_queue_push_tail(&d->owed, GINT_TO_POINTER(c * TP_MAX_MICRO + d->b[c]));
  put_chunk(d->s, d->len, d->r, c, zb ? TP_OP_I : TP_OP_B, d->i, d->b[c]++);
}

/* The oldest W owed, if any. */
static void dv_weight(DualV *d)
{
  if (g_queue_is_empty(&d->owed))
    return;
  int w = GPOINTER_TO_INT(g_queue_pop_head(&d->owed));
  put_chunk(d->s, d->len, d->r, w / TP_MAX_MICRO, TP_OP_W, d->i, w % TP_MAX_MICRO);
}

/* An F&B composite: the next forward of chunk fc and the next whole backward of the other chunk. */
static void dv_fb(DualV *d, int fc)
{
  tp_schedule_add_fb(d->s, d->r, (int)d->s->rank_seq[d->r]->len);
  dv_forward(d, fc);
  dv_backward(d, 1 - fc, FALSE);
}

/* DualPipe-V (DeepSeek-V3's DualPipe cut in half; deepseek-ai/DualPipe's DualPipeV, PyTorch's
 * ScheduleDualPipeV), N >= 2R: chunk 0 = stage r, chunk 1 = stage 2R-1-r.  Per rank r and mini-batch:
 * 2(R-1-r) F0; r+1 times F0 F1; R-1-r times I1 W F1; N-2R+r+1 times (F0;B1) (F1;B0) as composites
 * (the last rank's first (F0;B1) as two operations); R-1-r times B1 (F1;B0); r+1 times B1 B0, their
 * second half I instead of B (W owed); R-1-r times W and B0 (I once the second half began); r+1 W.
 * A W is the oldest owed. */
static void order_dualpipev(TpSchedule *s, int *len)
{
  const int R = s->W / 2;
  for (int i = 1; i <= s->K; i++)
    for (int r = 0; r < R; r++) {
      DualV d = { .s = s, .len = len, .r = r, .i = i };
      g_queue_init(&d.owed);
      for (int k = 0; k < 2 * (R - 1 - r); k++)
        dv_forward(&d, 0);
      for (int k = 0; k < r + 1; k++)
        dv_forward(&d, 0), dv_forward(&d, 1);
      for (int k = 0; k < R - 1 - r; k++)
        dv_backward(&d, 1, TRUE), dv_weight(&d), dv_forward(&d, 1);
      for (int k = 0; k < s->N - 2 * R + r + 1; k++) {
        if (k == 0 && r == R - 1)
          dv_forward(&d, 0), dv_backward(&d, 1, FALSE);
        else
          dv_fb(&d, 0);
        dv_fb(&d, 1);
      }
      for (int k = 0; k < R - 1 - r; k++)
        dv_backward(&d, 1, FALSE), dv_fb(&d, 1);
      gboolean zb = FALSE;
      for (int k = 0; k < r + 1; k++) {
        zb |= k == (r + 1) / 2 && r % 2 == 1;
        dv_backward(&d, 1, zb);
        zb |= k == (r + 1) / 2 && r % 2 == 0;
        dv_backward(&d, 0, zb);
      }
      for (int k = 0; k < R - 1 - r; k++)
        dv_weight(&d), dv_backward(&d, 0, zb);
      for (int k = 0; k < r + 1; k++)
        dv_weight(&d);
      g_assert(g_queue_is_empty(&d.owed));
      put_updates(s, len, r, i);
    }
}

/* PipeDream-2BW: one 1F1B stream over all K·N micro-batches, an update after the last
 * micro-batch backward of each mini-batch, no flush. */
static void order_2bw(TpSchedule *s, int *len)
{
  long total = (long)s->K * s->N;
  for (int st = 0; st < s->W; st++) {
    long warm = MIN((long)(s->W - 1 - st), total), f = 0, b = 0;
    while (f < total || b < total) {
      gboolean do_f = f < total && (f < warm || f <= b + warm);
      long m = do_f ? f++ : b++;
      int mb = (int)(m / s->N) + 1, micro = (int)(m % s->N);
      put(s, len, st, do_f ? TP_OP_F : TP_OP_B, mb, micro);
      if (!do_f && micro == s->N - 1)
        put(s, len, st, TP_OP_U, mb, TP_WHOLE);
    }
  }
}

/* nf1b (and 1f1b-async, its N=1 case over whole mini-batches) on unit slots: every slot, every
 * stage runs what tp_nf1b_next says.  Results are visible from the slot after the one that produced
 * them: stages are visited in order within a slot, so stage st+1's count of backwards is still the
 * one of the slot before, and stage st-1's count of forwards is taken before it moves.  A stage runs
 * its next operation as soon as it is ready, so the slots are the unit-slot replay's times
 * (tp_replay_times).
 * Two passes: the rule, slot by slot, writes one byte per stage and slot (what it ran: a column of
 * bytes per stage); then each stage's column becomes its operations and their times (by global
 * index: every stage has per_stage operations), on ranges of stages at once — one write stream per
 * array instead of three per stage. */
enum { RAN_NOTHING, RAN_FORWARD, RAN_BACKWARD };

/* One stage's place in the rule: its next forward unit (nf, micro-batch fj, kept without a division),
 * its next backward's mini-batch and its mini-batches in flight. */
typedef struct {
  long nf;
  int fj, nb, inflight;
} SlotStage;

typedef struct {
  TpSchedule *s;
  int *len, per;
  gboolean whole;
  uint8_t **col; /* [st][t]: what stage st ran in slot t */
  long slots;    /* the slots the rule took */
  double *start, *end;
  long per_stage;
} Slots;

/* The rule over every slot until every stage is done: the columns, and their length. */
static void slots_rule(Slots *z)
{
  const int W = z->s->W, K = z->s->K, per = z->per;
  const long units = (long)K * per; /* forward units per stage, in order */
  SlotStage *g = g_new(SlotStage, W);
  long cap = (long)K * (per + 1) + 4L * W + 64;
  int done = 0;
  for (int st = 0; st < W; st++) {
    g[st] = (SlotStage){ .nf = 0, .fj = 0, .nb = 1, .inflight = 0 };
    z->col[st] = g_malloc(cap);
  }
  long t = 0;
  for (; done < W; t++) {
    if (t == cap) { /* more slots than the steady rate gives: room for twice as many */
      cap *= 2;
      for (int st = 0; st < W; st++)
        z->col[st] = g_realloc(z->col[st], cap);
    }
    long up = 0; /* forwards stage st-1 had finished before this slot */
    for (int st = 0; st < W; st++) {
      SlotStage *x = &g[st];
      int i = x->nb;
      long f = x->nf;
      gboolean bready = st < W - 1 && i <= K && g[st + 1].nb > i;
      gboolean fready = st > 0 && f < units && up > f;
      up = f;
      TpNext next = tp_nf1b_next(W, K, per, st, f, x->fj, i, x->inflight, fready, bready);
      z->col[st][t] = next == TP_NEXT_BACKWARD ? RAN_BACKWARD : next == TP_NEXT_FORWARD ? RAN_FORWARD : RAN_NOTHING;
      if (next == TP_NEXT_BACKWARD) {
        x->inflight--;
        done += ++x->nb > K;
      } else if (next == TP_NEXT_FORWARD) {
        x->nf++;
        x->inflight += x->fj == 0;
        if (++x->fj == per)
          x->fj = 0;
      }
    }
  }
  z->slots = t;
  g_free(g);
}

/* Stages lo..hi-1's operations (and times) from their columns. */
static void slots_expand(void *ctx, int part, int lo, int hi)
{
  (void)part;
  Slots *z = ctx;
  for (int st = lo; st < hi; st++) {
    const uint8_t *col = z->col[st];
    TpOp *ops = tp_stage_ops(z->s, st);
    int k = z->len[st], fi = 1, fj = 0, nb = 1;
    double *start = z->start ? z->start + (long)st * z->per_stage : NULL; /* by k, as the rule counts */
    double *end = z->end ? z->end + (long)st * z->per_stage : NULL;
    for (long t = 0; t < z->slots; t++) {
      if (col[t] == RAN_BACKWARD) {
        ops[k] = (TpOp){ .kind = TP_OP_B, .src = TP_SRC_FIXED, .mb = nb, .micro = TP_WHOLE };
        ops[k + 1] = (TpOp){ .kind = TP_OP_U, .src = TP_SRC_FIXED, .mb = nb++, .micro = TP_WHOLE };
        if (start) /* the update takes no time, right after its backward */
          start[k] = t, end[k] = t + 1, start[k + 1] = end[k + 1] = t + 1;
        k += 2;
      } else if (col[t] == RAN_FORWARD) {
        ops[k] = (TpOp){ .kind = TP_OP_F, .src = TP_SRC_FIXED, .mb = fi, .micro = z->whole ? TP_WHOLE : fj };
        if (start)
          start[k] = t, end[k] = t + 1;
        k++;
        if (++fj == z->per)
          fj = 0, fi++;
      }
    }
    z->len[st] = k;
  }
}

static void order_slots(TpSchedule *s, int *len, gboolean whole, double *start, double *end, long per_stage)
{
  Slots z = { .s = s, .len = len, .per = whole ? 1 : s->N, .whole = whole, .col = g_new(uint8_t *, s->W),
              .start = start, .end = end, .per_stage = per_stage };
  slots_rule(&z);
  tp_parallel_ranges(s->W, tp_parallel_parts((long long)s->W * per_stage, s->W), slots_expand, &z);
  for (int st = 0; st < s->W; st++)
    g_free(z.col[st]);
  g_free(z.col);
}

/* A large schedule's pages fault in on another core while the orders fill them: every stage's
 * operations, and its part of start and end when given. */
static TpPrefault *prefault(const TpSchedule *s, const int *len, guint per_stage, double *start, double *end)
{
  if (tp_parallel_parts((long long)s->W * per_stage, s->W) < 2)
    return NULL;
  int n = 0;
  void **base = g_new(void *, 3 * s->W);
  gsize *bytes = g_new(gsize, 3 * s->W);
  for (int st = 0; st < s->W; st++) {
    base[n] = &tp_stage_ops(s, st)[len[st]], bytes[n++] = per_stage * sizeof(TpOp);
    if (start)
      base[n] = &start[(size_t)st * per_stage], bytes[n++] = per_stage * sizeof(double);
    if (end)
      base[n] = &end[(size_t)st * per_stage], bytes[n++] = per_stage * sizeof(double);
  }
  TpPrefault *pf = tp_memory_prefault(n, base, bytes);
  g_free(base);
  g_free(bytes);
  return pf;
}

gboolean tp_order_fill_timed(TpSchedule *s, double *start, double *end)
{
  /* every stage gets K·N forwards (K whole ones for 1f1b-async), K·N backwards (K whole ones for
   * nf1b and 1f1b-async) and K updates: size the arrays once, then write them in place */
  guint per_stage = (guint)tp_stage_ops_count(s->order, s->N, s->K);
  int *len = g_new(int, s->W);
  for (int st = 0; st < s->W; st++) {
    len[st] = tp_stage_len(s, st);
    g_array_set_size(s->stage[st], len[st] + per_stage);
  }
  TpPrefault *pf = prefault(s, len, per_stage, start, end);
  switch (s->order) {
  case TP_ORDER_GPIPE: order_gpipe(s, len); break;
  case TP_ORDER_1F1B: order_1f1b(s, len); break;
  case TP_ORDER_2BW: order_2bw(s, len); break;
  case TP_ORDER_ZB_H1: order_zb(s, len, FALSE); break;
  case TP_ORDER_ZB_H2: order_zb(s, len, TRUE); break;
  case TP_ORDER_INTERLEAVED_1F1B: order_interleaved(s, len); break;
  case TP_ORDER_ZB_V:
    if (s->act_limit > 0) { /* the heuristic under the limit, on unit slots; where it finds no order (few
                               micro-batches), the fixed pattern, within any limit of W or more */
      g_autoptr(TpZbCosts) c = tp_zb_costs_new(s->W, s->act_limit);
      if (!tp_order_zbv(s, len, c))
        order_zbv(s, len);
    } else {
      order_zbv(s, len);
    }
    break;
  case TP_ORDER_DUALPIPE_V: /* a whole B where others split: fewer operations than sized */
    order_dualpipev(s, len);
    for (int st = 0; st < s->W; st++)
      g_array_set_size(s->stage[st], (guint)len[st]);
    break;
  case TP_ORDER_ZB_1P:
  case TP_ORDER_ZB_2P:
  case TP_ORDER_ZB_AUTO: {
    g_autoptr(TpZbCosts) c = tp_zb_costs_new(s->W, tp_zb_limit(s));
    gboolean ok = tp_order_zb_auto(s, len, c); /* unit slots: any limit of 1 micro-batch or more fits */
    g_assert(ok);
    break;
  }
  case TP_ORDER_NF1B: order_slots(s, len, FALSE, start, end, per_stage); break;
  case TP_ORDER_1F1B_ASYNC: order_slots(s, len, TRUE, start, end, per_stage); break;
  default: g_assert_not_reached();
  }
  tp_memory_prefault_wait(pf);
  for (int st = 0; st < s->W; st++)
    g_assert((guint)len[st] == s->stage[st]->len);
  g_free(len);
  return s->order == TP_ORDER_NF1B || s->order == TP_ORDER_1F1B_ASYNC;
}

void tp_order_fill(TpSchedule *s) { (void)tp_order_fill_timed(s, NULL, NULL); }
