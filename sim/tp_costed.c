/* tp_costed.c — nf1b and 1f1b-async orders fixed on a cost model by a small event loop with the
 * simulator's resources and tie rules, so that simulating the result under the same costs gives
 * back the very timeline the order was chosen on.  The rule is tp_nf1b_next, the links tp_link.h's,
 * the data-parallel all-reduces tp_allreduce.h's. */
#include "tp_costed.h"
#include "tp_engine.h"
#include "tp_error.h"
#include "tp_policy.h"
#include "tp_sim.h"
#include "tp_validate.h"
#include "tp_memory.h"
#include "tp_metrics.h"
#include "tp_zbauto.h"

#include <math.h>

enum { EV_XFER_DONE, EV_COMPUTE_DONE };

typedef struct {
  TpSchedule *s;
  const TpCost *c;
  TpEngine eng;
  int W, per;
  long units;
  long *nf;         /* next forward unit per stage */
  int *nb, *inflight;
  int *pending_u;   /* mini-batch whose update is due next on the stage, or 0 */
  gboolean *busy, *dev_busy;
  uint8_t *f_in;    /* [st * units + f]: activation of unit f has arrived at st */
  uint8_t *g_in;    /* [st * (K+1) + i]: gradient of B(i) has arrived at st */
  long cap;            /* operations per stage */
  double *t0, *t1;     /* [st * cap + position]: start and end of each operation */
  TpLinkQueue *link; /* queued messages: forward unit (activations) or mini-batch (gradients) */
  TpArRun *ar;       /* data parallelism: the stages' all-reduces, as the simulator runs them (NULL: none) */
  TpAllreduceStats *ar_stats;
} Gen;

static inline void mark(Gen *g, int st) { tp_engine_mark(&g->eng, st); }

static void push_op(Gen *g, int st, TpOpKind k, int mb, int micro, double d)
{
  size_t at = (size_t)st * g->cap + tp_stage_len(g->s, st);
  tp_push(g->s, st, k, mb, micro);
  g->t0[at] = g->eng.now;
  g->t1[at] = g->eng.now + d;
  g->busy[st] = g->dev_busy[g->c->stage[st].device] = TRUE;
  tp_engine_push(&g->eng, g->t1[at], EV_COMPUTE_DONE, (uint32_t)st);
}

/* The message `id` on link l has arrived: a forward unit's activations or a mini-batch's gradient. */
static void deliver(void *ctx, int l, long id)
{
  Gen *g = ctx;
  int dst = tp_link_dst(g->W, l);
  if (l < g->W - 1)
    g->f_in[(size_t)dst * g->units + id] = 1;
  else
    g->g_in[(size_t)dst * (g->s->K + 1) + id] = 1;
  mark(g, dst);
}

static const TpLinkHandlers link_handlers = { deliver, NULL, EV_XFER_DONE };

static void send(Gen *g, int st, TpOpKind kind, long id, double bytes)
{
  int l = tp_link_of(g->W, st, kind);
  tp_link_send(&g->eng, &g->link[l], l, id, tp_sim_link_time(g->c, l, bytes), &link_handlers, g);
}

/* Stage st is idle: run its next backward if ready, else its next admitted, ready forward. */
static void try_start(Gen *g, int st)
{
  const TpSchedule *s = g->s;
  /* as the simulator checks: a stage that reaches its update starts its all-reduce, its device
   * busy or not */
  if (g->busy[st] || (g->pending_u[st] && g->ar && !tp_ar_ready(g->ar, st)) || g->dev_busy[g->c->stage[st].device])
    return;
  if (g->pending_u[st]) { /* the update follows its backward, and its all-reduce */
    TpOp u = { .kind = TP_OP_U, .mb = g->pending_u[st], .micro = TP_WHOLE };
    g->pending_u[st] = 0;
    push_op(g, st, TP_OP_U, u.mb, TP_WHOLE, tp_sim_op_time(g->c, s, st, &u, FALSE));
    if (g->ar)
      tp_ar_update_started(g->ar, st);
    return;
  }
  int i = g->nb[st];
  long f = g->nf[st];
  gboolean fready = st > 0 && f < g->units && g->f_in[(size_t)st * g->units + f];
  gboolean bready = st < g->W - 1 && i <= s->K && g->g_in[(size_t)st * (s->K + 1) + i];
  switch (tp_nf1b_next(g->W, s->K, g->per, st, f, (int)(f % g->per), i, g->inflight[st], fready, bready)) {
  case TP_NEXT_BACKWARD: {
    TpOp op = { .kind = TP_OP_B, .mb = i, .micro = TP_WHOLE };
    double d = tp_sim_op_time(g->c, s, st, &op, g->per == 1); /* per 1: after a whole forward */
    push_op(g, st, TP_OP_B, i, TP_WHOLE, d);
    if (g->ar) /* its update follows it */
      tp_ar_last_before_update(g->ar, st, d);
    break;
  }
  case TP_NEXT_FORWARD: {
    int fi = (int)(f / g->per) + 1, micro = g->per == 1 ? TP_WHOLE : (int)(f % g->per);
    TpOp op = { .kind = TP_OP_F, .mb = fi, .micro = micro };
    push_op(g, st, TP_OP_F, fi, micro, tp_sim_op_time(g->c, s, st, &op, FALSE));
    break;
  }
  case TP_NEXT_IDLE: break;
  }
}

static void on_compute_done(Gen *g, int st)
{
  const TpSchedule *s = g->s;
  const TpOp *op = &tp_stage_ops(s, st)[tp_stage_len(s, st) - 1];
  int dev = g->c->stage[st].device;
  g->busy[st] = g->dev_busy[dev] = FALSE;
  if (op->kind == TP_OP_F) {
    long f = g->nf[st]++;
    if (f % g->per == 0)
      g->inflight[st]++;
    if (st < g->W - 1)
      send(g, st, TP_OP_F, f, tp_sim_op_bytes(g->c, s, st, op));
  } else if (op->kind == TP_OP_B) {
    int i = op->mb;
    g->inflight[st]--;
    g->nb[st]++;
    if (st > 0)
      send(g, st, TP_OP_B, i, tp_sim_op_bytes(g->c, s, st, op));
    g->pending_u[st] = i;
  }
  mark(g, st);
  tp_mark_device_sharers(&g->eng, g->c, st);
}

static void on_xfer_done(Gen *g, int l) { tp_link_done(&g->eng, &g->link[l], l, &link_handlers, g); }

static void commit(void *ctx, const TpEvent *ev)
{
  if (TP_EV_CLASS(ev) >= TP_EV_AR_XFER)
    tp_ar_commit(((Gen *)ctx)->ar, ev);
  else
    (TP_EV_CLASS(ev) == EV_XFER_DONE ? on_xfer_done : on_compute_done)(ctx, (int)TP_EV_TARGET(ev));
}

static void start(void *ctx, int st) { try_start(ctx, st); }

/* What the zero-bubble heuristics build on, from cost model c for schedule s (its W stages): each
 * stage's F, I and W, a message's time on its link (none between two chunks of a rank) and the share
 * of the stored bytes a W keeps (tp_zbauto.h). */
static TpZbCosts *zb_costs(const TpSchedule *s, double limit, const TpCost *c)
{
  const int W = s->W;
  TpZbCosts *zc = tp_zb_costs_new(W, limit);
  for (int st = 0; st < W; st++) {
    const TpStageCost *sc = &c->stage[st];
    TpOp f = { .kind = TP_OP_F, .mb = 1, .micro = 0 }, i = f, w = f;
    i.kind = TP_OP_I, w.kind = TP_OP_W;
    zc->f[st] = tp_sim_op_time(c, s, st, &f, FALSE);
    zc->i[st] = tp_sim_op_time(c, s, st, &i, FALSE);
    zc->w[st] = tp_sim_op_time(c, s, st, &w, FALSE);
    zc->keep[st] = sc->stored_bytes > 0 ? tp_cost_stored_w(sc) / sc->stored_bytes : 1;
    gboolean apart = st < W - 1 && tp_stage_rank(s, st) != tp_stage_rank(s, st + 1);
    if (apart)
      zc->up[st] = tp_sim_link_time(c, tp_link_of(W, st, TP_OP_F), tp_sim_op_bytes(c, s, st, &f));
    if (apart)
      zc->down[st] = tp_sim_link_time(c, tp_link_of(W, st + 1, TP_OP_I), tp_sim_op_bytes(c, s, st + 1, &i));
  }
  return zc;
}

/* A zero-bubble schedule of K mini-batches, its stages' arrays sized, nothing in them yet. */
static TpSchedule *zb_new(TpOrder o, TpPolicy p, int W, int N, int K, double limit)
{
  gboolean v = o == TP_ORDER_ZB_V;
  TpSchedule *s = tp_schedule_new(o, p, v ? 2 * W : W, N, K);
  if (v)
    tp_schedule_set_chunks(s, 2, TP_MAP_V_SHAPE);
  s->fixed_on = TP_FIXED_ON_COSTS;
  s->act_limit = limit;
  for (int st = 0; st < s->W; st++)
    g_array_set_size(s->stage[st], (guint)tp_stage_ops_count(o, N, K));
  return s;
}

/* s (from zb_new) filled in the heuristic's variant (-1: the one it keeps), its versions assigned and
 * validated; FALSE (err set where the policy or validation failed) otherwise. */
static gboolean zb_fill(TpSchedule *s, const TpZbCosts *zc, int variant, GError **err)
{
  int *len = g_new0(int, s->W);
  gboolean built = s->order == TP_ORDER_ZB_V ? tp_order_zbv(s, len, zc)
                   : variant < 0             ? tp_order_zb_auto(s, len, zc)
                                             : tp_order_zb_auto_variant(s, len, zc, variant);
  g_free(len);
  return built && tp_policy_assign(s, err) && tp_validate(s, err);
}

/* Variant v's schedule of K mini-batches simulated under c: its time per mini-batch (the report's
 * figure), or -1 with err set (a refusal of its memory). */
static double variant_time(TpOrder o, TpPolicy p, int W, int N, int K, double limit, const TpZbCosts *zc,
                           int v, const TpCost *c, GError **err)
{
  g_autoptr(TpSchedule) s = zb_new(o, p, W, N, K, limit);
  if (!zb_fill(s, zc, v, err))
    return -1;
  g_autoptr(TpSim) sim = tp_sim_run(s, c, err);
  return sim ? tp_metrics_time_per_minibatch(sim) : -1;
}

/* With data parallelism, the heuristic's variant kept (*variant) unless another, simulated under c with
 * the all-reduces its own spans leave out, takes less time per mini-batch (the first such of least
 * time); each distinct order simulated once, on K mini-batches or the default count if fewer (the
 * steady range is there either way), so that choosing never needs more memory than simulating the
 * run.  Without replicas *variant stays -1 (the heuristic's own).  FALSE with err where a simulation
 * was refused. */
static gboolean zb_variant_on(TpOrder o, TpPolicy p, int W, int N, int K, double limit, const TpZbCosts *zc,
                              const TpCost *c, int *variant, GError **err)
{
  *variant = -1;
  int own = tp_cost_replicas(c) < 2 ? -1 : tp_order_zb_auto_best(zc, N);
  if (own < 0)
    return TRUE;
  const int k = MIN(K, tp_default_mini_batches(W));
  double best_t = variant_time(o, p, W, N, k, limit, zc, own, c, err);
  if (best_t < 0)
    return FALSE;
  *variant = own;
  int distinct[TP_ZB_VARIANTS], n = tp_order_zb_auto_distinct(zc, N, distinct);
  for (int i = 0; i < n; i++) {
    if (distinct[i] == own)
      continue;
    double t = variant_time(o, p, W, N, k, limit, zc, distinct[i], c, err);
    if (t < 0)
      return FALSE;
    if (t < best_t * (1 - 1e-12))
      *variant = distinct[i], best_t = t;
  }
  return TRUE;
}

/* zb-1p, zb-2p and zb-auto (W stages), or zb-v (W ranks, 2W stages), built on the cost model's times. */
static TpSchedule *generate_zb(TpOrder o, TpPolicy p, int W, int N, int K, double limit, const TpCost *c,
                               GError **err)
{
  if (!tp_limit_check(o, limit, err))
    return NULL;
  TpSchedule *s = zb_new(o, p, W, N, 1, limit); /* what the costs are read for */
  g_autoptr(TpZbCosts) zc = zb_costs(s, o == TP_ORDER_ZB_V ? tp_zbv_limit(s) : tp_zb_limit(s), c);
  tp_schedule_free(s);
  int variant = -1;
  if (o != TP_ORDER_ZB_V && !zb_variant_on(o, p, W, N, K, limit, zc, c, &variant, err))
    return NULL;
  s = zb_new(o, p, W, N, K, limit);
  if (!zb_fill(s, zc, variant, err)) {
    tp_schedule_free(s);
    return NULL;
  }
  return s;
}

/* The paper's bubble rate of schedule s simulated under c (the longest worker span's share of idle
 * time), or -1 with *err set. */
static double span_on(const TpSchedule *s, const TpCost *c, GError **err)
{
  g_autoptr(TpSim) sim = tp_sim_run(s, c, err);
  if (!sim)
    return -1;
  g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
  return m->bubble_span;
}

/* zb-v on the costs: the heuristic's order, or PyTorch's fixed pattern where that stays within the
 * limit and is not longer on these costs (one mini-batch of each simulated) or the heuristic finds
 * none (fewer micro-batches than its warm-up takes). */
static TpSchedule *generate_zbv(TpPolicy p, int R, int N, int K, double limit, const TpCost *c, GError **err)
{
  if (!tp_limit_check(TP_ORDER_ZB_V, limit, err) || !tp_zbv_limit_check(R, limit, err))
    return NULL;
  GError *e = NULL;
  g_autoptr(TpSchedule) fixed = tp_schedule_generate_chunked(TP_ORDER_ZB_V, p, R, 2, N, 1, NULL, &e);
  g_autoptr(TpSchedule) built = fixed ? generate_zb(TP_ORDER_ZB_V, p, R, N, 1, limit, c, &e) : NULL;
  g_autoptr(TpZbCosts) zc = fixed ? zb_costs(fixed, limit > 0 ? limit : R, c) : NULL;
  double a = built ? span_on(built, c, &e) : INFINITY,
         b = !e && tp_zbv_peak(fixed, zc) <= zc->limit + 1e-9 ? span_on(fixed, c, &e) : INFINITY;
  if (e) {
    g_propagate_error(err, e);
    return NULL;
  }
  if (a < b)
    return generate_zb(TP_ORDER_ZB_V, p, R, N, K, limit, c, err);
  if (!isfinite(b)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "zb-v: no order of %d micro-batches keeps every worker within %g "
                "micro-batches' activations on these costs", N, zc->limit);
    return NULL;
  }
  TpSchedule *s = tp_schedule_generate_chunked(TP_ORDER_ZB_V, p, R, 2, N, K, NULL, err);
  if (s)
    s->fixed_on = TP_FIXED_ON_COSTS, s->act_limit = limit;
  return s;
}

/* What fixing an order on the costs allocated, freed (not the schedule). */
static void gen_clear(Gen *g)
{
  tp_link_queues_free(g->link, tp_sim_n_links(g->W));
  g_free(g->nf);
  g_free(g->nb);
  g_free(g->inflight);
  g_free(g->pending_u);
  g_free(g->busy);
  g_free(g->dev_busy);
  g_free(g->f_in);
  g_free(g->g_in);
  g_free(g->t0);
  g_free(g->t1);
  tp_ar_run_free(g->ar);
  tp_allreduce_stats_free(g->ar_stats);
  tp_engine_clear(&g->eng);
}

TpSchedule *tp_schedule_generate_costed(TpOrder o, TpPolicy p, int W, int N, int K, const TpCost *c, GError **err)
{
  return tp_schedule_generate_costed_rc(o, p, W, N, K, FALSE, c, NULL, err);
}

/* g ready to fix order o's schedule on costs c: every stage's first forward marked. */
static void gen_init(Gen *g, TpOrder o, TpPolicy p, int W, int N, int K, gboolean recompute, const TpCost *c)
{
  *g = (Gen){ .c = c, .W = W, .per = o == TP_ORDER_NF1B ? N : 1 };
  g->s = tp_schedule_new(o, p, W, N, K);
  g->s->fixed_on = TP_FIXED_ON_COSTS;
  g->s->recompute = recompute; /* its backwards cost their forwards again */
  g->units = (long)K * g->per;
  g->cap = g->units + 2L * K;
  tp_engine_init(&g->eng, W);
  g->nf = g_new0(long, W);
  g->nb = g_new(int, W);
  g->inflight = g_new0(int, W);
  g->pending_u = g_new0(int, W);
  g->busy = g_new0(gboolean, W);
  g->dev_busy = g_new0(gboolean, c->n_devices);
  g->f_in = g_new0(uint8_t, (size_t)W * g->units);
  g->g_in = g_new0(uint8_t, (size_t)W * (K + 1));
  g->t0 = g_new(double, (size_t)W * g->cap);
  g->t1 = g_new(double, (size_t)W * g->cap);
  g->link = g_new0(TpLinkQueue, MAX(tp_sim_n_links(W), 1));
  if (c->dp && c->dp->D > 1)
    g->ar = tp_ar_run_new(c->dp, &g->eng, g->ar_stats = tp_allreduce_stats_new(W));
  for (int st = 0; st < W; st++) {
    g->nb[st] = 1;
    mark(g, st);
  }
}

/* After the run: every stage complete, the versions assigned on this timeline (global op index =
 * stage offset + position), the schedule validated; FALSE with err otherwise. */
static gboolean gen_finish(Gen *g, GError **err)
{
  TpSchedule *s = g->s;
  long total = tp_schedule_n_ops(s), at = 0;
  double *start = g_try_new(double, total), *end = g_try_new(double, total);
  gboolean ok = start && end;
  if (!ok)
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "W=%d, N=%d, K=%d: the order fixed on the costs does not fit in "
                "memory (%ld operations' times)", s->W, s->N, s->K, total);
  for (int st = 0; ok && st < g->W; st++) {
    if (tp_stage_len(s, st) != g->cap) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "costed order stalled at stage %d (a bug)", st + 1);
      ok = FALSE;
      break;
    }
    for (long k = 0; k < g->cap; k++, at++)
      start[at] = g->t0[(size_t)st * g->cap + k], end[at] = g->t1[(size_t)st * g->cap + k];
  }
  ok = ok && tp_policy_assign_timed(s, start, end, err) && tp_validate(s, err);
  g_free(start);
  g_free(end);
  return ok;
}

TpSchedule *tp_schedule_generate_costed_rc(TpOrder o, TpPolicy p, int W, int N, int K, gboolean recompute,
                                           const TpCost *c, TpPrepared *prep, GError **err)
{
  if (tp_order_zb_auto_kind(o) && !recompute && c->W == W)
    return tp_size_check(W, N, K, err) && tp_pair_check(o, p, W, N, err) ? generate_zb(o, p, W, N, K, 0, c, err)
                                                                          : NULL;
  if (o != TP_ORDER_NF1B && o != TP_ORDER_1F1B_ASYNC) {
    TpSchedule *s = tp_schedule_generate_prepared(o, p, W, N, K, prep, err);
    if (s)
      s->recompute = recompute;
    return s;
  }
  if (!tp_size_check(W, N, K, err) || !tp_pair_check(o, p, W, N, err))
    return NULL;
  if (c->W != W) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "cost model is for %d stages, the schedule has %d", c->W, W);
    return NULL;
  }
  /* on top of generating: each operation's start and end twice (32 B), arrivals, queued messages */
  long long ops = W * tp_stage_ops_count(o, N, K);
  if (!tp_memory_check("fixing the order on the costs", W, N, K, tp_generate_bytes(o, W, N, K) + ops * 48, err))
    return NULL;
  Gen g;
  gen_init(&g, o, p, W, N, K, recompute, c);
  static const TpEngineHandlers handlers = { commit, start };
  tp_engine_run(&g.eng, &handlers, &g);
  TpSchedule *s = g.s;
  gboolean ok = gen_finish(&g, err);
  gen_clear(&g);
  if (!ok) {
    tp_schedule_free(s);
    return NULL;
  }
  return s;
}

gboolean tp_order_depends_on_costs(TpOrder o)
{
  return o == TP_ORDER_NF1B || o == TP_ORDER_1F1B_ASYNC || o == TP_ORDER_ZB_V || tp_order_zb_auto_kind(o);
}

TpSchedule *tp_schedule_costed_like(const TpSchedule *s, const TpCost *c, GError **err)
{
  TpSchedule *t;
  if (s->order == TP_ORDER_ZB_V)
    t = !s->recompute && c->W == s->W ? generate_zbv(s->policy, s->W / 2, s->N, s->K, s->act_limit, c, err)
                                      : tp_schedule_generate_limited(s->order, s->policy, s->W / 2, s->N, s->K,
                                                                     s->act_limit, NULL, err);
  else if (tp_order_zb_auto_kind(s->order) && !s->recompute && c->W == s->W)
    t = generate_zb(s->order, s->policy, s->W, s->N, s->K, s->act_limit, c, err);
  else
    t = tp_schedule_generate_costed_rc(s->order, s->policy, s->W, s->N, s->K, s->recompute, c, NULL, err);
  if (t)
    t->sig = s->sig;
  return t;
}
