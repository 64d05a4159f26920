/* tp_zbv.c — zb-v built on per-chunk times under an activation limit: the zero-bubble heuristic of
 * Qi et al. (§3.1) on the V of §6, as its authors build their ZB-V.  Rank r holds chunk 0, stage r
 * (forwards going down), and chunk 1, stage 2R-1-r (coming back up); the backward runs chunk 1's
 * input gradient I from rank 0 to R-1, then chunk 0's back.  Built in rounds, each operation's inputs
 * placed (and timed) before it:
 *   1. every rank's first chunk-0 forward; then from the last rank back, the chunk-0 forwards (on it
 *      and every rank before) that end before its first chunk-1 forward can arrive, leaving room
 *      for the 2r+2 forwards still to come; then that chunk-1 forward;
 *   2. each rank brought to as many forwards as the rank before, chunks alternating;
 *   3. 2N rounds of one I per rank (chunk 0's once its input has arrived, else chunk 1's) and one
 *      forward (chunk 1's if its input is there, else chunk 0's).
 * Before each, deferred weight gradients W (oldest first) free memory for a forward, fill a wait
 * they fit, and — in a variant — a wait the rank cannot idle through without becoming the most
 * idle; then the W left.  Four variants (such W before forwards, before chunk-1 I's), each rebuilt
 * while letting every rank idle as much as the last build did shortens the most idle rank: the
 * least idle build is kept. */
#include "tp_zbauto.h"
#include "tp_error.h"

#define EPS 1e-9

typedef struct {
  const TpZbCosts *c;
  int R, S, N;
  gboolean fill_f, fill_i;   /* the variant: W in a wait the rank cannot afford before a forward, an I */
  const double *approved;    /* [R] idle time each rank may take (the last build's), or NULL */
  double most_approved;
  gboolean broken;           /* an operation was placed before its input: the variant fails */
  double *e, *mem, *idle;    /* [R] time the rank is free, activations held (two chunks' M_B), idle */
  int *nf, *ni;              /* [2R]: index r·2+chunk, F and I placed */
  double *tf, *ti;           /* [2R·N] end of each F, I; < 0 not yet */
  int *wq, *wh, *wt;         /* [R·2N] W owed as chunk·N + micro-batch, in I order; head, tail [R] */
  int *n;                    /* [R] operations placed */
  TpOp *ops;                 /* [R·6N] each rank's order, */
  int *st;                   /* [R·6N] and the stage of each */
} VBuild;

static inline int stage_of(const VBuild *b, int r, int ch) { return ch ? b->S - 1 - r : r; }

/* When the input of rank r's next operation `k` of chunk ch arrives; 0 if it has none off the rank,
 * -1 if it is not placed yet. */
static double input(const VBuild *b, int r, int ch, TpOpKind k)
{
  const TpZbCosts *c = b->c;
  const int N = b->N, R = b->R;
  if (k == TP_OP_F) {
    int m = b->nf[r * 2 + ch], from = ch ? r + 1 : r - 1;
    if ((ch ? r == R - 1 : r == 0) || m >= N)
      return 0;
    double t = b->tf[(from * 2 + ch) * N + m];
    return t < 0 ? -1 : t + c->up[ch ? stage_of(b, from, ch) : from];
  }
  int m = b->ni[r * 2 + ch], from = ch ? r - 1 : r + 1;
  if ((ch ? r == 0 : r == R - 1) || m >= N)
    return 0;
  double t = b->ti[(from * 2 + ch) * N + m];
  return t < 0 ? -1 : t + c->down[ch ? stage_of(b, r, ch) : r];
}

static void put(VBuild *b, int r, int ch, TpOpKind k)
{
  const TpZbCosts *c = b->c;
  const int N = b->N;
  int *count = k == TP_OP_F ? b->nf : b->ni, mb = 0;
  double at = 0;
  if (k == TP_OP_W) {
    int q = b->wq[r * 2 * N + b->wh[r]++];
    ch = q / N, mb = q % N, count = NULL;
  } else {
    mb = count[r * 2 + ch], at = input(b, r, ch, k);
    gboolean own = k == TP_OP_F ? ch == 0 || b->nf[r * 2] > mb : ch == 1 ? b->nf[r * 2 + 1] > mb : b->ni[r * 2 + 1] > mb;
    if (at < 0 || !own || mb >= N) {
      b->broken = TRUE;
      return;
    }
  }
  const int j = stage_of(b, r, ch);
  double start = MAX(b->e[r], at);
  if (b->nf[r * 2] > 0)
    b->idle[r] += start - b->e[r];
  b->e[r] = start + (k == TP_OP_F ? c->f[j] : k == TP_OP_I ? c->i[j] : c->w[j]);
  b->mem[r] += 0.5 * (k == TP_OP_F ? 1 : k == TP_OP_I ? c->keep[j] - 1 : -c->keep[j]);
  b->broken = b->broken || b->mem[r] > c->limit + EPS; /* past the limit: the variant fails */
  if (k != TP_OP_W) {
    (k == TP_OP_F ? b->tf : b->ti)[(r * 2 + ch) * N + mb] = b->e[r];
    count[r * 2 + ch]++;
  }
  if (k == TP_OP_I)
    b->wq[r * 2 * N + b->wt[r]++] = ch * N + mb;
  size_t at_r = (size_t)r * 6 * N + b->n[r]++;
  b->ops[at_r] = (TpOp){ .kind = (uint8_t)k, .src = TP_SRC_FIXED, .micro = (int16_t)mb };
  b->st[at_r] = j;
}

static gboolean owed(const VBuild *b, int r) { return b->wh[r] < b->wt[r]; }

static double w_time(const VBuild *b, int r)
{
  return b->c->w[stage_of(b, r, b->wq[r * 2 * b->N + b->wh[r]] / b->N)];
}

/* The most any rank has idled, or may idle by the last build, beyond what rank r may. */
static double most_idle(const VBuild *b, int r)
{
  double most = 0;
  for (int q = 0; q < b->R; q++)
    most = MAX(most, b->idle[q]);
  return b->approved ? MAX(most, b->most_approved - b->approved[r]) : most;
}

/* Rank r's next operation k of chunk ch, after the W that fill the wait for its input (every W
 * that ends by then; with `slack`, one more where the wait is longer than the rank can afford). */
static void after_fill(VBuild *b, int r, int ch, TpOpKind k, gboolean slack)
{
  double at = input(b, r, ch, k);
  gboolean remote = at > 0;
  while (remote && owed(b, r) && at >= b->e[r] + w_time(b, r) - EPS)
    put(b, r, 0, TP_OP_W);
  if (remote && slack && owed(b, r) && at - b->e[r] > most_idle(b, r) - b->idle[r] + EPS)
    put(b, r, 0, TP_OP_W);
  put(b, r, ch, k);
}

static gboolean fits(const VBuild *b, int r, double room)
{
  return b->mem[r] + 0.5 * room <= b->c->limit + EPS;
}

/* Steps 1 and 2: the warm-up forwards. */
static void warm_up(VBuild *b)
{
  const int R = b->R, N = b->N;
  for (int r = 0; r < R; r++)
    put(b, r, 0, TP_OP_F);
  for (int r = R - 1; r >= 0 && !b->broken; r--) {
    if (r < R - 1) {
      double arrive = input(b, r, 1, TP_OP_F);
      while (!b->broken && fits(b, r, 2 + 2 * r) && b->e[r] + b->c->f[r] <= arrive + EPS && b->nf[r * 2] < N - r)
        for (int q = 0; q <= r; q++)
          put(b, q, 0, TP_OP_F);
    }
    put(b, r, 1, TP_OP_F);
  }
  for (int r = 1, ch = 0; r < R && !b->broken; r++)
    while (!b->broken && (b->nf[r * 2] + b->nf[r * 2 + 1] < b->nf[r * 2 - 2] + b->nf[r * 2 - 1] ||
                          (b->nf[r * 2 + 1] <= b->nf[r * 2 - 1] && b->nf[r * 2 - 1] < N))) {
      int placed = 0;
      for (int q = R - 1; q >= r; q--)
        if (b->nf[q * 2 + ch] < N)
          put(b, q, ch, TP_OP_F), placed++;
      b->broken = b->broken || (placed == 0 && b->nf[r * 2 + ch] >= N && b->nf[r * 2 + 1 - ch] >= N);
      ch = 1 - ch;
    }
}

/* Step 3, one round: an I on every rank (chunk 0's from the last rank back, then chunk 1's from rank
 * 0 on, so that each input is placed first), then a forward on every rank. */
static void round_(VBuild *b)
{
  const int R = b->R, N = b->N;
  int *chunk = g_new(int, R);
  for (int r = 0; r < R; r++) {
    int i0 = b->ni[r * 2], i1 = b->ni[r * 2 + 1];
    chunk[r] = i0 >= i1 ? 1 : r == R - 1 || i1 >= N || input(b, r, 0, TP_OP_I) >= 0 ? 0 : 1;
  }
  for (int r = R - 1; r >= 0; r--)
    if (chunk[r] == 0)
      after_fill(b, r, 0, TP_OP_I, TRUE);
  for (int r = 0; r < R; r++)
    if (chunk[r] == 1)
      after_fill(b, r, 1, TP_OP_I, b->fill_i);
  g_free(chunk);
  for (int r = 0; r < R && !b->broken; r++) {
    int f0 = b->nf[r * 2], f1 = b->nf[r * 2 + 1], ch = -1;
    if (f1 >= N)
      continue;
    if (f1 >= f0)
      ch = 0;
    else if (r == R - 1 || input(b, r, 1, TP_OP_F) >= 0)
      ch = 1;
    else if (f0 < N && input(b, r, 0, TP_OP_F) >= 0)
      ch = 0;
    if (ch < 0)
      continue;
    while (!fits(b, r, 1) && owed(b, r))
      put(b, r, 0, TP_OP_W);
    after_fill(b, r, ch, TP_OP_F, b->fill_f);
  }
}

/* Build one mini-batch's order in the variant set in b: the most any rank idles, or -1 where an
 * input was not placed in time or a rank passed the limit. */
static double build(VBuild *b)
{
  warm_up(b);
  for (int x = 0; x < 2 * b->N && !b->broken; x++)
    round_(b);
  double most = 0;
  for (int r = 0; r < b->R; r++) {
    while (owed(b, r))
      put(b, r, 0, TP_OP_W);
    b->broken = b->broken || b->n[r] != 6 * b->N;
    most = MAX(most, b->idle[r]);
  }
  return b->broken ? -1 : most;
}

static void build_init(VBuild *b, const TpZbCosts *c, int N, int variant, const double *approved)
{
  const int R = c->W / 2;
  *b = (VBuild){ .c = c, .R = R, .S = 2 * R, .N = N, .fill_f = variant & 1, .fill_i = variant >> 1,
                 .approved = approved };
  for (int r = 0; approved && r < R; r++)
    b->most_approved = MAX(b->most_approved, approved[r]);
  b->e = g_new0(double, R), b->mem = g_new0(double, R), b->idle = g_new0(double, R), b->n = g_new0(int, R);
  b->nf = g_new0(int, 2 * R), b->ni = g_new0(int, 2 * R);
  b->tf = g_new(double, (size_t)2 * R * N), b->ti = g_new(double, (size_t)2 * R * N);
  for (size_t k = 0; k < (size_t)2 * R * N; k++)
    b->tf[k] = b->ti[k] = -1;
  b->wq = g_new(int, (size_t)R * 2 * N), b->wh = g_new0(int, R), b->wt = g_new0(int, R);
  b->ops = g_new0(TpOp, (size_t)R * 6 * N), b->st = g_new0(int, (size_t)R * 6 * N);
}

static void build_clear(VBuild *b)
{
  g_free(b->e), g_free(b->mem), g_free(b->idle), g_free(b->n), g_free(b->nf), g_free(b->ni);
  g_free(b->tf), g_free(b->ti), g_free(b->wq), g_free(b->wh), g_free(b->wt), g_free(b->ops), g_free(b->st);
}

gboolean tp_order_zbv(TpSchedule *s, int *len, const TpZbCosts *c)
{
  VBuild best = { 0 }, b;
  double best_idle = -1;
  for (int variant = 0; variant < 4; variant++) {
    double *approved = NULL, last = -1;
    for (int again = 0; again < 64; again++) { /* rebuilt on the last build's idle times while shorter */
      build_init(&b, c, s->N, variant, approved);
      double idle = build(&b);
      g_free(approved);
      approved = idle >= 0 ? g_memdup2(b.idle, sizeof(double) * b.R) : NULL;
      gboolean better = idle >= 0 && (best_idle < 0 || idle < best_idle - EPS);
      if (better) {
        build_clear(&best);
        best = b, best_idle = idle;
      } else {
        build_clear(&b);
      }
      if (idle < 0 || (last >= 0 && idle >= last - EPS))
        break;
      last = idle;
    }
    g_free(approved);
  }
  if (best_idle < 0)
    return FALSE;
  const int R = s->W / 2, per = 6 * s->N;
  for (int i = 1; i <= s->K; i++)
    for (int r = 0; r < R; r++) {
      for (int k = 0; k < per + 2; k++) { /* then the updates, chunk 0 first */
        int st = k < per ? best.st[(size_t)r * per + k] : k == per ? r : s->W - 1 - r;
        TpOp op = k < per ? best.ops[(size_t)r * per + k] : (TpOp){ .kind = TP_OP_U, .src = TP_SRC_FIXED, .micro = TP_WHOLE };
        op.mb = i;
        tp_stage_ops(s, st)[len[st]++] = op;
        int32_t v = st;
        g_array_append_val(s->rank_seq[r], v);
      }
    }
  build_clear(&best);
  return TRUE;
}

double tp_zbv_peak(const TpSchedule *s, const TpZbCosts *c)
{
  double most = 0;
  int *pos = g_new0(int, s->W);
  for (int r = 0; r < s->W / 2; r++) {
    double held = 0;
    for (guint k = 0; k < s->rank_seq[r]->len; k++) {
      int st = g_array_index(s->rank_seq[r], int32_t, k);
      TpOpKind kind = tp_stage_ops(s, st)[pos[st]++].kind;
      held += 0.5 * (kind == TP_OP_F ? 1 : kind == TP_OP_I ? c->keep[st] - 1 : kind == TP_OP_W ? -c->keep[st] : 0);
      most = MAX(most, held);
    }
  }
  g_free(pos);
  return most;
}

gboolean tp_zbv_limit_check(int R, double limit, GError **err)
{
  if (limit == 0 || limit >= R)
    return TRUE;
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--activation-limit %g: zb-v on %d workers needs at least %d (a worker's "
              "micro-batches, the handcrafted ZB-V's memory)", limit, R, R);
  return FALSE;
}
