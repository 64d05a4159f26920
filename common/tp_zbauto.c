/* tp_zbauto.c — the automatic zero-bubble orders (zb-1p, zb-2p, zb-auto): the heuristic of Qi et al.
 * (Zero Bubble Pipeline Parallelism, §3.1) on per-stage times.  One mini-batch is built round by round, so
 * that every operation's predecessors are placed (and timed) before it: round 0 runs micro-batch 0's
 * forward down the stages, then the warm-up forwards each stage has time and memory for before its
 * first input gradient can arrive, then micro-batch 0's I back up the stages; round r runs one more
 * forward on each stage (top down) and micro-batch r's I (bottom up).  Before an operation whose input
 * has not arrived, deferred weight gradients W fill the gap; before a forward that would pass the
 * activation limit, W run to free memory (an I frees M_B - M_W, its W the rest).  Twelve variants — a
 * warm-up forward only where it ends before the gradient arrives, or wherever it starts before; a W
 * only in a gap it fits, in any gap, or in a gap the stage cannot idle through without becoming the
 * most idle; a round's forward always run, or left to wait for the next I where the stage runs two
 * ahead of the next (the stages before waiting too) — are built and the shortest longest-stage span
 * kept, the first of equals. */
#include "tp_zbauto.h"

#include <string.h>

#define EPS 1e-9
enum { W_FIT, W_ANY, W_SLACK, N_W_MODES };
G_STATIC_ASSERT(TP_ZB_VARIANTS == 4 * N_W_MODES);

TpZbCosts *tp_zb_costs_new(int W, double limit)
{
  TpZbCosts *c = g_new0(TpZbCosts, 1);
  c->W = W;
  c->limit = limit;
  c->f = g_new(double, W), c->i = g_new(double, W), c->w = g_new(double, W), c->keep = g_new(double, W);
  c->up = g_new0(double, MAX(W - 1, 1)), c->down = g_new0(double, MAX(W - 1, 1));
  for (int st = 0; st < W; st++)
    c->f[st] = c->i[st] = c->w[st] = c->keep[st] = 1;
  return c;
}

void tp_zb_costs_free(TpZbCosts *c)
{
  if (!c)
    return;
  g_free(c->f), g_free(c->i), g_free(c->w), g_free(c->keep), g_free(c->up), g_free(c->down);
  g_free(c);
}

double tp_zb_limit(const TpSchedule *s)
{
  if (s->order == TP_ORDER_ZB_AUTO && s->act_limit > 0)
    return s->act_limit;
  return s->order == TP_ORDER_ZB_1P ? s->W : 2.0 * s->W;
}

/* One mini-batch's order under construction: per stage its time, memory and counts, the end of each
 * micro-batch's F and I, and the operations so far (3N per stage). */
typedef struct {
  const TpZbCosts *c;
  int W, N;
  gboolean fit_warm;        /* the variant: warm-up forwards only where they end in time */
  int w_mode;               /* and a W in a gap shorter than it: never (W_FIT), always (W_ANY), or where
                               idling would make the stage's idle time the largest (W_SLACK) */
  gboolean wait_f;          /* and a forward two ahead of the next stage's may wait for the next I */
  double *e, *mem, *first;  /* [W] time the stage is free, activations held (M_B), its first start */
  double *idle, most_idle;  /* [W] idle time since the first start; the largest of them */
  int *nf, *ni, *nw;        /* [W] F, I, W placed */
  int *want;                /* [W] the round's forwards */
  double *tf, *ti;          /* [W·N] end of each F, I */
  TpOp *ops;                /* [W·3N] */
} Build;

/* When the input of stage j's next operation of kind k (micro-batch mb) is there. */
static double ready(const Build *b, int j, TpOpKind k, int mb)
{
  const int N = b->N;
  if (k == TP_OP_F)
    return j > 0 ? b->tf[(j - 1) * N + mb] + b->c->up[j - 1] : 0;
  if (k == TP_OP_I)
    return j < b->W - 1 ? b->ti[(j + 1) * N + mb] + b->c->down[j] : b->tf[j * N + mb];
  return b->ti[j * N + mb];
}

static void put(Build *b, int j, TpOpKind k)
{
  const TpZbCosts *c = b->c;
  int *count = k == TP_OP_F ? b->nf : k == TP_OP_I ? b->ni : b->nw, mb = count[j];
  double start = MAX(b->e[j], ready(b, j, k, mb));
  if (b->nf[j] == 0)
    b->first[j] = start;
  else
    b->idle[j] += start - b->e[j], b->most_idle = MAX(b->most_idle, b->idle[j]);
  b->e[j] = start + (k == TP_OP_F ? c->f[j] : k == TP_OP_I ? c->i[j] : c->w[j]);
  b->mem[j] += k == TP_OP_F ? 1 : k == TP_OP_I ? c->keep[j] - 1 : -c->keep[j];
  if (k != TP_OP_W)
    (k == TP_OP_F ? b->tf : b->ti)[j * b->N + mb] = b->e[j];
  b->ops[(size_t)j * 3 * b->N + b->nf[j] + b->ni[j] + b->nw[j]] =
    (TpOp){ .kind = (uint8_t)k, .src = TP_SRC_FIXED, .micro = (int16_t)mb };
  count[j]++;
}

/* Deferred W before an operation whose input arrives at `until`: those that end by then, and one more
 * in a shorter gap as the variant says. */
static void fill(Build *b, int j, double until)
{
  while (b->nw[j] < b->ni[j] && b->e[j] + b->c->w[j] <= until + EPS)
    put(b, j, TP_OP_W);
  if (b->w_mode == W_FIT || b->nw[j] >= b->ni[j] || b->e[j] >= until - EPS)
    return;
  if (b->w_mode == W_ANY || until - b->e[j] > b->most_idle - b->idle[j])
    put(b, j, TP_OP_W);
}

/* Stage j's next forward, after the W that make room for it and those that fill the wait for its
 * input; FALSE if the limit leaves no room. */
static gboolean forward(Build *b, int j)
{
  while (b->mem[j] + 1 > b->c->limit + EPS && b->nw[j] < b->ni[j])
    put(b, j, TP_OP_W);
  if (b->mem[j] + 1 > b->c->limit + EPS)
    return FALSE;
  fill(b, j, ready(b, j, TP_OP_F, b->nf[j]));
  put(b, j, TP_OP_F);
  return TRUE;
}

static void backward(Build *b, int j)
{
  fill(b, j, ready(b, j, TP_OP_I, b->ni[j]));
  put(b, j, TP_OP_I);
}

/* Round 0: micro-batch 0's forward down the stages; from the last stage back, the forwards a stage
 * can run (under the limit) before its first gradient arrives, fewer than the stage before runs
 * (whose forwards they need) unless they are all its forwards; then micro-batch 0's I up the stages. */
static gboolean warm_up(Build *b)
{
  const TpZbCosts *c = b->c;
  const int W = b->W;
  int *extra = g_new0(int, W);
  for (int j = 0; j < W; j++)
    if (!forward(b, j)) {
      g_free(extra);
      return FALSE;
    }
  double last = b->e[W - 1] + c->i[W - 1]; /* the end of the last stage's first I */
  for (int j = W - 2; j >= 0; j--) {
    double arrive = last + c->down[j], t = b->e[j], m = b->mem[j];
    while (b->nf[j] + extra[j] < b->N && m + 1 <= c->limit + EPS && (b->fit_warm ? t + c->f[j] <= arrive + EPS
                                                                                   : t < arrive - EPS))
      t += c->f[j], m += 1, extra[j]++;
    last = MAX(t, arrive) + c->i[j];
  }
  for (int j = 1; j < W; j++) { /* fewer than the stage before, whose next forward comes after its first I,
                                  unless they are all the stage's forwards; never more */
    extra[j] = MIN(extra[j], extra[j - 1]);
    if (extra[j] > 0 && extra[j] == extra[j - 1] && b->nf[j] + extra[j] < b->N)
      extra[j]--;
  }
  for (int j = 0; j < W; j++)
    for (int x = 0; x < extra[j]; x++)
      forward(b, j);
  g_free(extra);
  for (int j = W - 1; j >= 0; j--)
    backward(b, j);
  return TRUE;
}

/* With wait_f, whether stage j, two forwards ahead of the next stage, lets this round's forward wait:
 * the next stage's forward, I and gradient end by the time stage j is free, or the forward (after the W
 * that make room for it) would not end before they do and the stage can idle until then without
 * becoming the most idle. */
static gboolean waits(const Build *b, int j)
{
  const TpZbCosts *c = b->c;
  if (!b->wait_f || j + 1 >= b->W || b->nf[j] < b->nf[j + 1] + 2)
    return FALSE;
  double next = b->e[j + 1] + c->f[j + 1] + c->i[j + 1] + c->down[j], w = 0, mem = b->mem[j] + 1;
  if (b->e[j] >= next - EPS)
    return TRUE;
  for (int n = b->nw[j]; mem > c->limit + EPS && n < b->ni[j]; n++)
    w += c->w[j], mem -= c->keep[j];
  return b->e[j] + c->f[j] + w > next + EPS && next - b->e[j] <= b->most_idle - b->idle[j] + EPS;
}

/* Build one mini-batch's order in the variant set in b; its longest stage span, or -1 if a stage
 * cannot keep under the limit. */
static double build(Build *b)
{
  const int W = b->W, N = b->N;
  if (!warm_up(b))
    return -1;
  for (int r = 1; r < N; r++) {
    for (int j = 0; j < W; j++)
      b->want[j] = b->nf[j] < N && !waits(b, j);
    for (int j = W - 2; j >= 0; j--) /* a stage waits if the next does, but needs micro-batch r's forward */
      b->want[j] = (b->want[j] && b->want[j + 1]) || (b->nf[j] <= r && b->nf[j] < N);
    for (int j = 0; j < W; j++) /* before its I */
      if (b->want[j] && (j == 0 || b->nf[j] < b->nf[j - 1]) && !forward(b, j) && b->nf[j] <= r)
        return -1;
    for (int j = W - 1; j >= 0; j--)
      backward(b, j);
  }
  double span = 0;
  for (int j = 0; j < W; j++) {
    while (b->nw[j] < N)
      put(b, j, TP_OP_W);
    span = MAX(span, b->e[j] - b->first[j]);
  }
  return span;
}

static void build_init(Build *b, const TpZbCosts *c, int N, int variant)
{
  const int W = c->W;
  *b = (Build){ .c = c, .W = W, .N = N, .fit_warm = variant & 1, .w_mode = (variant >> 1) % N_W_MODES,
                .wait_f = variant >= 2 * N_W_MODES };
  b->e = g_new0(double, W), b->mem = g_new0(double, W), b->first = g_new0(double, W), b->idle = g_new0(double, W);
  b->nf = g_new0(int, W), b->ni = g_new0(int, W), b->nw = g_new0(int, W), b->want = g_new0(int, W);
  b->tf = g_new0(double, (size_t)W * N), b->ti = g_new0(double, (size_t)W * N);
  b->ops = g_new0(TpOp, (size_t)W * 3 * N);
}

static void build_clear(Build *b)
{
  g_free(b->e), g_free(b->mem), g_free(b->first), g_free(b->idle), g_free(b->nf), g_free(b->ni), g_free(b->nw);
  g_free(b->want);
  g_free(b->tf), g_free(b->ti), g_free(b->ops);
}

/* Write b's one mini-batch order as each of s's K mini-batches, each followed by its update. */
static void write_order(TpSchedule *s, int *len, const Build *b)
{
  const int per = 3 * s->N;
  for (int i = 1; i <= s->K; i++)
    for (int st = 0; st < s->W; st++) {
      TpOp *to = tp_stage_ops(s, st);
      for (int k = 0; k < per; k++) {
        to[len[st]] = b->ops[(size_t)st * per + k];
        to[len[st]++].mb = i;
      }
      to[len[st]++] = (TpOp){ .kind = TP_OP_U, .src = TP_SRC_FIXED, .mb = i, .micro = TP_WHOLE };
    }
}

gboolean tp_order_zb_auto_variant(TpSchedule *s, int *len, const TpZbCosts *c, int variant)
{
  Build b;
  build_init(&b, c, s->N, variant);
  gboolean ok = build(&b) >= 0;
  if (ok)
    write_order(s, len, &b);
  build_clear(&b);
  return ok;
}

int tp_order_zb_auto_best(const TpZbCosts *c, int N)
{
  int best = -1;
  double best_span = -1;
  for (int variant = 0; variant < TP_ZB_VARIANTS; variant++) {
    Build b;
    build_init(&b, c, N, variant);
    double span = build(&b);
    build_clear(&b);
    if (span >= 0 && (best_span < 0 || span < best_span - EPS))
      best = variant, best_span = span;
  }
  return best;
}

int tp_order_zb_auto_distinct(const TpZbCosts *c, int N, int *out)
{
  Build kept[TP_ZB_VARIANTS];
  int n = 0;
  for (int variant = 0; variant < TP_ZB_VARIANTS; variant++) {
    Build *b = &kept[n];
    build_init(b, c, N, variant);
    gboolean keep = build(b) >= 0;
    for (int i = 0; keep && i < n; i++)
      keep = memcmp(b->ops, kept[i].ops, (size_t)c->W * 3 * N * sizeof(TpOp)) != 0;
    if (keep)
      out[n++] = variant;
    else
      build_clear(b);
  }
  for (int i = 0; i < n; i++)
    build_clear(&kept[i]);
  return n;
}

gboolean tp_order_zb_auto(TpSchedule *s, int *len, const TpZbCosts *c)
{
  int variant = tp_order_zb_auto_best(c, s->N);
  return variant >= 0 && tp_order_zb_auto_variant(s, len, c, variant);
}
