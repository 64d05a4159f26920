/* tp_sim.c — the simulator: stages run their operations in the schedule's order on the event
 * engine (tp_engine.h).  At each instant every completion is committed first (transfer ends before
 * compute ends, then by target, then by age); then the stages whose state changed try to start,
 * lowest stage first; this repeats while zero-time operations finish at the same instant.  Links
 * are tp_link.h's.  On unit costs with a device per stage the timeline is the unit-slot replay's;
 * on other costs with no interleaved ranks, the costed replay's, the same times without the event
 * queue: a sweep over the stages with a device per stage (run_costed; all-reduces too where each
 * stage has its data-parallel link to itself), decisions device by device where stages share
 * devices, nothing is all-reduced and nothing that sends takes zero time (tp_sim_shared.c; the event
 * loop where it cannot decide). */
#include "tp_sim_priv.h"
#include "tp_engine.h"
#include "tp_error.h"
#include "tp_replay.h"
#include "tp_memory.h"

enum { EV_XFER_DONE, EV_COMPUTE_DONE };

typedef struct {
  TpSim *sim;
  TpEngine eng;
  int W;
  int *pos;
  int *rpos;         /* interleaved stages: each rank's place in its order (rank_seq) */
  int *fbc;          /* each rank's next F&B composite (TpSchedule.fb) */
  double *fb_rest;   /* each rank's B part of the composite whose F part runs, or -1 */
  long *cur;
  gboolean *busy, *dev_busy;
  uint8_t *arrived;
  TpLinkQueue *link; /* queued messages: the producing op's global index */
  TpArRun *ar;       /* data parallelism: the stages' all-reduces (NULL: none) */
} Run;

double tp_sim_op_time(const TpCost *c, const TpSchedule *s, int st, const TpOp *op, gboolean after_whole)
{
  if (c->unit)
    return op->kind == TP_OP_U ? 0.0 : 1.0;
  const TpStageCost *sc = &c->stage[st];
  /* recomputation: a backward (its input-gradient part, when split) first runs its forwards again —
   * after one whole-mini-batch forward, that one forward */
  double again = s->recompute ? sc->fwd : 0;
  if (s->recompute && after_whole && op->kind == TP_OP_B && op->micro == TP_WHOLE)
    return tp_cost_forward_whole(sc, s->N) + s->N * sc->bwd;
  switch (op->kind) {
  case TP_OP_U: return sc->upd;
  case TP_OP_F: return op->micro == TP_WHOLE ? tp_cost_forward_whole(sc, s->N) : sc->fwd;
  case TP_OP_I: return tp_op_count(s, op) * (again + tp_cost_input_grad(sc));
  case TP_OP_W: return tp_op_count(s, op) * tp_cost_weight_grad(sc);
  default: return tp_op_count(s, op) * (again + sc->bwd);
  }
}

/* Whether op, a whole-mini-batch backward at stage st, follows one whole-mini-batch forward there
 * (not the forwards of its micro-batches). */
static gboolean after_whole_forward(const TpIndex *ix, int st, const TpOp *op)
{
  if (op->kind != TP_OP_B || op->micro != TP_WHOLE)
    return FALSE;
  TpOp f = { .kind = TP_OP_F, .mb = op->mb, .micro = TP_WHOLE };
  return tp_index_pos(ix, st, &f) >= 0;
}

double tp_sim_op_dur(const TpSim *sim, int st, const TpOp *op)
{
  return tp_sim_op_time(sim->c, sim->s, st, op, sim->s->recompute && after_whole_forward(sim->ix, st, op));
}

double tp_sim_link_time(const TpCost *c, int link, double bytes)
{
  if (c->unit)
    return 0;
  const TpLinkCost *lc = &c->link[link % (c->W - 1)];
  return lc->latency + (lc->bandwidth > 0 ? bytes / lc->bandwidth : 0);
}

static inline void try_later(Run *r, int st) { tp_engine_mark(&r->eng, st); }

static void deliver(void *ctx, int l, long g)
{
  Run *r = ctx;
  TpSim *sim = r->sim;
  sim->xend[g] = r->eng.now;
  r->arrived[sim->cons[g]] = 1;
  int dst = tp_link_dst(r->W, l), rk = tp_stage_rank(sim->s, dst);
  try_later(r, dst);
  if (sim->s->fb && sim->s->rank_seq && r->rpos[rk] < (int)sim->s->rank_seq[rk]->len) /* a composite's F may wait for this B's input */
    try_later(r, g_array_index(sim->s->rank_seq[rk], int32_t, r->rpos[rk]));
}

static void started(void *ctx, int l, long g)
{
  (void)l;
  Run *r = ctx;
  r->sim->xstart[g] = r->eng.now;
}

static const TpLinkHandlers link_handlers = { deliver, started, EV_XFER_DONE };

/* F&B composites on rank rk, whose operation of stage st is next: its F starts once its B's gradient
 * has arrived too (FALSE: not yet); the composite takes tp_cost_fb's time, its F part then its B
 * part in proportion to their own times (*dur, the F's or the B's, becomes its part's). */
static gboolean fb_part(Run *r, int rk, int st, double *dur)
{
  const TpSim *sim = r->sim;
  const TpSchedule *s = sim->s;
  if (r->fb_rest[rk] >= 0) { /* the B part follows its F part */
    *dur = r->fb_rest[rk];
    r->fb_rest[rk] = -1;
    return TRUE;
  }
  if (!tp_fb_opens(s, rk, (guint)r->fbc[rk], r->rpos[rk]))
    return TRUE;
  int st2 = g_array_index(s->rank_seq[rk], int32_t, r->rpos[rk] + 1), k2 = r->pos[st2] + (st2 == st);
  long g2 = sim->ix->off[st2] + k2;
  if (!r->arrived[g2])
    return FALSE;
  double f = *dur, b = tp_sim_op_time(sim->c, s, st2, &tp_stage_ops(s, st2)[k2], FALSE);
  double fb = sim->c->unit ? f + b : tp_cost_fb(f, b, sim->c->stage[st].fb_overlap);
  *dur = f + b > 0 ? fb * f / (f + b) : 0;
  r->fb_rest[rk] = fb - *dur;
  r->fbc[rk]++;
  return TRUE;
}

static void try_start(Run *r, int st)
{
  TpSim *sim = r->sim;
  if (r->busy[st] || r->pos[st] >= tp_stage_len(sim->s, st))
    return;
  long g = sim->ix->off[st] + r->pos[st];
  const TpSchedule *s = sim->s;
  int dev = sim->c->stage[st].device, rk = tp_stage_rank(s, st);
  const TpOp *op = &tp_stage_ops(s, st)[r->pos[st]];
  if (!r->arrived[g] || (r->ar && op->kind == TP_OP_U && !tp_ar_ready(r->ar, st)) || r->dev_busy[dev])
    return;
  if (s->rank_seq && g_array_index(s->rank_seq[rk], int32_t, r->rpos[rk]) != st)
    return; /* not this chunk's turn on its rank: the rank runs one operation at a time, in its order */
  double dur = tp_sim_op_dur(sim, st, op);
  if (s->fb && s->rank_seq && !fb_part(r, rk, st, &dur))
    return;
  r->busy[st] = r->dev_busy[dev] = TRUE;
  r->cur[st] = g;
  sim->start[g] = r->eng.now;
  tp_engine_push(&r->eng, r->eng.now + dur, EV_COMPUTE_DONE, (uint32_t)st);
  if (r->ar)
    tp_ar_started(r->ar, s, st, r->pos[st], dur);
#ifdef __GNUC__
  /* each stage walks its own arrays: with many stages that is more streams than the hardware
   * prefetcher follows, so fetch the stage's next operation while this one runs */
  __builtin_prefetch(op + 1);
  __builtin_prefetch(&r->arrived[g + 1]);
  __builtin_prefetch(&sim->start[g + 1], 1);
  __builtin_prefetch(&sim->end[g], 1);
  __builtin_prefetch(&sim->cons[g]);
#endif
}

/* The message op g (at stage st) sends goes on its link. */
static void send(Run *r, int st, long g)
{
  TpSim *sim = r->sim;
  const TpOp *op = &tp_stage_ops(sim->s, st)[g - sim->ix->off[st]];
  int l = tp_link_of(r->W, st, op->kind);
  double dur = sim->c->unit ? 0 : tp_sim_link_time(sim->c, l, tp_sim_op_bytes(sim->c, sim->s, st, op));
  if (sim->s->rank_seq && tp_stage_rank(sim->s, tp_link_src(r->W, l)) == tp_stage_rank(sim->s, tp_link_dst(r->W, l)))
    dur = 0; /* two chunks of one rank: nothing crosses a link */
  tp_link_send(&r->eng, &r->link[l], l, g, dur, &link_handlers, r);
}

static void on_compute_done(Run *r, int st)
{
  TpSim *sim = r->sim;
  long g = r->cur[st];
  const TpSchedule *s = sim->s;
  int dev = sim->c->stage[st].device, rk = tp_stage_rank(s, st);
  sim->end[g] = r->eng.now;
  r->busy[st] = r->dev_busy[dev] = FALSE;
  r->pos[st]++;
  if (sim->cons[g] >= 0)
    send(r, st, g);
  try_later(r, st);
  if (s->rank_seq && ++r->rpos[rk] < (int)s->rank_seq[rk]->len) /* the rank's next operation, of any chunk */
    try_later(r, g_array_index(s->rank_seq[rk], int32_t, r->rpos[rk]));
  tp_mark_device_sharers(&r->eng, sim->c, st);
}

static void on_xfer_done(Run *r, int l) { tp_link_done(&r->eng, &r->link[l], l, &link_handlers, r); }

static void commit(void *ctx, const TpEvent *ev)
{
  if (TP_EV_CLASS(ev) >= TP_EV_AR_XFER)
    tp_ar_commit(((Run *)ctx)->ar, ev);
  else
    (TP_EV_CLASS(ev) == EV_XFER_DONE ? on_xfer_done : on_compute_done)(ctx, (int)TP_EV_TARGET(ev));
}

static void start(void *ctx, int st) { try_start(ctx, st); }

/* Whether a costed replay may give this run's timeline: costs and no interleaved ranks (nor their F&B
 * composites), so that nothing is shared but the devices and the links, each link carrying one
 * sender's messages in that sender's order. */
static gboolean replayable(const TpSchedule *s, const TpCost *c, gboolean events)
{
  return !events && !c->unit && !s->rank_seq && !s->fb;
}

static gboolean all_reduced(const TpCost *c) { return c->dp && c->dp->D > 1; }

/* Whether the costed replay with a device per stage (run_costed) gives it: all-reduces too, where
 * each stage has its data-parallel link to itself. */
static gboolean costed_replay(const TpSchedule *s, const TpCost *c, gboolean events)
{
  return replayable(s, c, events) && !c->shared_devices && (!all_reduced(c) || tp_dp_links_apart(c->dp));
}

/* Stages a device at most for the costed replay of shared devices. */
#define SHARED_MAX_STAGES 8

/* Whether the costed replay of shared devices (tp_sim_shared.c) may decide it: no operation that
 * sends taking zero time, and a few stages a device (each decision looks at all of them; with many
 * the event loop is faster). */
static gboolean shared_replay(const TpSchedule *s, const TpCost *c, gboolean events)
{
  if (!replayable(s, c, events) || !c->shared_devices || all_reduced(c))
    return FALSE;
  int *on = g_new0(int, c->n_devices), most = 0;
  gboolean timed = TRUE;
  for (int st = 0; st < c->W; st++) {
    const TpStageCost *sc = &c->stage[st];
    timed = timed && sc->fwd > 0 && sc->bwd > 0 && tp_cost_input_grad(sc) > 0 && tp_cost_forward_whole(sc, s->N) > 0;
    on[sc->device]++;
    most = MAX(most, on[sc->device]);
  }
  g_free(on);
  return timed && most <= SHARED_MAX_STAGES;
}

long long tp_sim_bytes(const TpSchedule *s, const TpCost *c)
{
  long long ops = tp_schedule_n_ops(s), widest = 0;
  for (int st = 0; st < s->W; st++)
    widest = MAX(widest, (long long)tp_stage_len(s, st));
  long long keys = (long long)s->W * ((long long)s->K * (s->N + 1) + 1);
  /* the schedule (20 B per operation); index: producers, consumers (8 B), positions per key (12 B) and
   * per update; start, end, transfer start and end (32 B); arrivals (1 B); queued messages (16 B,
   * none on unit costs nor in the costed replay; as much of summed times in the replay of shared
   * devices, freed before any event loop); the metrics' latest versions (4 B) and, per thread, one
   * stage's memory changes (about six of 16 B per operation); and the program itself */
  int threads = s->W < 16 ? 1 : (int)MIN(g_get_num_processors(), (guint)s->W / 8);
  long long queued = c->unit || costed_replay(s, c, FALSE) ? 0 : 16;
  return ops * (long long)(sizeof(TpOp) + 8 + 32 + 1 + queued + 4) + keys * 12 +
         (long long)s->W * (s->K + 1) * 4 + (widest * 6 + 2LL * s->K + 2) * 16 * threads + (8LL << 20);
}

/* Unit slots with a device per stage: every operation starts as soon as its stage is free and its
 * input has arrived, transfers take no time; that is the unit-slot replay (tp_replay), which gives
 * the event loop's timeline without the event queue (tests check that the two agree). */
static gboolean run_replay(TpSim *sim, gboolean replayed, GError **err)
{
  if (!replayed && !tp_replay_times(sim->s, sim->ix, sim->start, sim->end, err)) {
    if (err && *err)
      (*err)->code = TP_ERROR_RUNTIME;
    return FALSE;
  }
  double span = 0;
  const double *end = sim->end;
  for (long g = 0; g < sim->n_ops; g++)
    span = MAX(span, end[g]);
  sim->makespan = span;
  return TRUE;
}

/* Whether every stage ran all its operations (pos: how far each got); else the first that stalled. */
static gboolean all_ran(const TpSchedule *s, const int *pos, GError **err)
{
  for (int st = 0; st < s->W; st++)
    if (pos[st] < tp_stage_len(s, st)) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "simulation stalled at stage %d, operation %d", st + 1, pos[st] + 1);
      return FALSE;
    }
  return TRUE;
}

static gboolean run_events(TpSim *sim, GError **err)
{
  const TpSchedule *s = sim->s;
  const TpCost *c = sim->c;
  long n = sim->n_ops;
  Run r = { .sim = sim, .W = s->W };
  tp_engine_init(&r.eng, s->W);
  r.pos = g_new0(int, s->W);
  r.cur = g_new0(long, s->W);
  r.busy = g_new0(gboolean, s->W);
  r.dev_busy = g_new0(gboolean, c->n_devices);
  r.rpos = g_new0(int, tp_schedule_ranks(s));
  r.fbc = g_new0(int, tp_schedule_ranks(s));
  r.fb_rest = g_new(double, tp_schedule_ranks(s));
  for (int k = 0; k < tp_schedule_ranks(s); k++)
    r.fb_rest[k] = -1;
  r.arrived = g_new0(uint8_t, n);
  r.link = g_new0(TpLinkQueue, MAX(tp_sim_n_links(s->W), 1));
  for (long g = 0; g < n; g++)
    r.arrived[g] = sim->prod[g] < 0; /* nothing to receive */
  for (int st = 0; st < s->W; st++)
    try_later(&r, st);
  if (all_reduced(c))
    r.ar = tp_ar_run_new(c->dp, &r.eng, sim->ar = tp_allreduce_stats_new(s->W));

  static const TpEngineHandlers handlers = { commit, start };
  tp_engine_run(&r.eng, &handlers, &r);
  sim->makespan = r.eng.now;

  gboolean ok = all_ran(s, r.pos, err);
  tp_link_queues_free(r.link, tp_sim_n_links(s->W));
  tp_ar_run_free(r.ar);
  g_free(r.pos);
  g_free(r.cur);
  g_free(r.busy);
  g_free(r.dev_busy);
  g_free(r.rpos);
  g_free(r.fbc);
  g_free(r.fb_rest);
  g_free(r.arrived);
  tp_engine_clear(&r.eng);
  return ok;
}

/* The costed replay's state: how far each stage got and when it is free, when each link's last
 * message arrives, and each stage's all-reduce started behind its backward (-1: none). */
typedef struct {
  int *pos;
  double *clock, *link_free, *ar_done;
} Sweep;

/* The time op (of stage st) starts, its input there at `ready`: an update waits for its
 * all-reduce, started now unless it was behind the operation before. */
static inline double costed_begin(TpSim *sim, Sweep *x, int st, const TpOp *op, double ready)
{
  if (!sim->ar || op->kind != TP_OP_U)
    return ready;
  return tp_ar_replay_update(sim->c->dp, sim->ar, st, ready, &x->ar_done[st]);
}

/* Stage st's operations from pos[st] on, as far as their inputs have been computed: an operation
 * starts at max(its stage's previous end, its input's arrival), an update once its all-reduce is
 * done; its message starts on its link at max(its end, the link's previous arrival).  *down, *up: it
 * sent on the link below or above. */
static void costed_stage(TpSim *sim, Sweep *x, int st, gboolean *down, gboolean *up)
{
  const TpSchedule *s = sim->s;
  const TpCost *c = sim->c;
  const TpIndex *ix = sim->ix;
  const TpOp *ops = tp_stage_ops(s, st);
  const long off = ix->off[st];
  const int n = tp_stage_len(s, st);
  int k = x->pos[st];
  double clk = x->clock[st];
  for (; k < n; k++) {
    const TpOp *op = &ops[k];
    long g = off + k;
    int32_t p = ix->prod[g];
    double ready = clk;
    if (p != -1) { /* its producer, on the stage before (a forward's) or after, has been computed */
      int pst = op->kind == TP_OP_F ? st - 1 : st + 1;
      if (p < 0 || p - ix->off[pst] >= x->pos[pst])
        break;
      ready = MAX(ready, sim->xend[p]);
    }
    double t0 = sim->start[g] = costed_begin(sim, x, st, op, ready), dur = tp_sim_op_dur(sim, st, op);
    clk = sim->end[g] = t0 + dur;
    if (sim->ar && op->kind != TP_OP_U && k + 1 < n && ops[k + 1].kind == TP_OP_U)
      tp_ar_replay_before_update(c->dp, sim->ar, st, t0, dur, &x->ar_done[st]);
    if (sim->cons[g] < 0)
      continue;
    int l = tp_link_of(s->W, st, op->kind);
    tp_sim_transfer(sim, g, tp_sim_link_time(c, l, tp_sim_op_bytes(c, s, st, op)), &x->link_free[l]);
    *(op->kind == TP_OP_F ? down : up) = TRUE;
  }
  x->pos[st] = k;
  x->clock[st] = clk;
}

/* The event loop's timeline where costed_replay holds, without the event queue: each stage runs as
 * far as its inputs allow, then wakes the neighbours it sent to.  Every time is the same sum of the
 * same two numbers as the event loop's, so the two agree bit for bit (tests check it). */
static gboolean run_costed(TpSim *sim, GError **err)
{
  const TpSchedule *s = sim->s;
  const int W = s->W;
  Sweep x = { .pos = g_new0(int, W), .clock = g_new0(double, W),
              .link_free = g_new0(double, MAX(tp_sim_n_links(W), 1)), .ar_done = g_new(double, W) };
  int *stack = g_new(int, W), top = 0;
  gboolean *queued = g_new(gboolean, W);
  if (all_reduced(sim->c))
    sim->ar = tp_allreduce_stats_new(W);
  for (int st = W - 1; st >= 0; st--)
    stack[top++] = st, queued[st] = TRUE, x.ar_done[st] = -1;
  while (top > 0) {
    int st = stack[--top];
    gboolean down = FALSE, up = FALSE;
    queued[st] = FALSE;
    costed_stage(sim, &x, st, &down, &up);
    if (down && st + 1 < W && !queued[st + 1])
      stack[top++] = st + 1, queued[st + 1] = TRUE;
    if (up && st > 0 && !queued[st - 1])
      stack[top++] = st - 1, queued[st - 1] = TRUE;
  }
  gboolean ok = all_ran(s, x.pos, err);
  double span = 0;
  for (int st = 0; st < W; st++)
    span = MAX(span, x.clock[st]);
  sim->makespan = span;
  g_free(x.pos), g_free(x.clock), g_free(x.link_free), g_free(x.ar_done), g_free(stack), g_free(queued);
  return ok;
}

/* Interleaved stages whose ranks share no device (the unit-slot replay runs each rank on its own). */
static gboolean ranks_apart(const TpSchedule *s, const TpCost *c)
{
  if (!s->rank_seq)
    return FALSE;
  int *owner = g_new(int, c->n_devices); /* the rank each device serves */
  gboolean apart = TRUE;
  for (int d = 0; d < c->n_devices; d++)
    owner[d] = -1;
  for (int st = 0; st < s->W && apart; st++) {
    int d = c->stage[st].device;
    apart = owner[d] < 0 || owner[d] == tp_stage_rank(s, st);
    owner[d] = tp_stage_rank(s, st);
  }
  g_free(owner);
  return apart;
}

static TpSim *run(const TpSchedule *s, const TpCost *c, gboolean events, TpPrepared *prep, GError **err)
{
  if (c->W != s->W) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "cost model is for %d stages, schedule has %d", c->W, s->W);
    return NULL;
  }
  if (!tp_memory_check("simulating the schedule", s->W, s->N, s->K, tp_sim_bytes(s, c), err))
    return NULL;
  TpSim *sim = g_new0(TpSim, 1);
  sim->s = s;
  sim->c = c;
  if (prep && prep->ix) {
    sim->ix = prep->ix;
    prep->ix = NULL;
  } else if (!(sim->ix = tp_index_new(s, err))) {
    g_free(sim);
    return NULL;
  }
  long n = sim->n_ops = sim->ix->off[s->W];
  /* interleaved stages on unit costs: the replay follows the ranks' orders as the event loop does */
  gboolean replay = !events && c->unit && (!c->shared_devices || ranks_apart(s, c)), replayed = FALSE;
  if (replay && prep && prep->start && prep->end) {
    sim->start = prep->start;
    sim->end = prep->end;
    prep->start = prep->end = NULL;
    replayed = TRUE;
  } else {
    if (prep) { /* not this timeline's: freed before the simulator's own are allocated */
      g_free(prep->start), g_free(prep->end);
      prep->start = prep->end = NULL;
    }
    sim->start = tp_memory_alloc_large(n * sizeof(double));
    sim->end = tp_memory_alloc_large(n * sizeof(double));
  }
  /* on unit slots a message arrives as it is sent: its transfer is the sender's end */
  sim->xend = replay ? sim->end : tp_memory_alloc_large(n * sizeof(double));
  sim->xstart = replay ? sim->end : tp_memory_alloc_large(n * sizeof(double));
  sim->prod = sim->ix->prod;
  sim->cons = tp_memory_alloc_large(n * sizeof(int32_t));
  tp_timeline_wire(&sim->tl);

  gboolean ok;
  if (replay) {
    sim->path = TP_SIM_UNIT_REPLAY;
    ok = run_replay(sim, replayed, err);
  } else {
    for (long g = 0; g < n; g++)
      sim->xstart[g] = sim->xend[g] = -1;
    if (costed_replay(s, c, events))
      sim->path = TP_SIM_COSTED_REPLAY, ok = run_costed(sim, err);
    else if (shared_replay(s, c, events) && tp_sim_replay_shared(sim))
      sim->path = TP_SIM_SHARED_REPLAY, ok = TRUE;
    else /* it writes every message's times, a partial replay's too */
      ok = run_events(sim, err);
  }
  if (!ok) {
    tp_sim_free(sim);
    return NULL;
  }
  return sim;
}

TpSim *tp_sim_run(const TpSchedule *s, const TpCost *c, GError **err) { return run(s, c, FALSE, NULL, err); }

TpSim *tp_sim_run_prepared(const TpSchedule *s, const TpCost *c, TpPrepared *prep, GError **err)
{
  return run(s, c, FALSE, prep, err);
}

TpSim *tp_sim_run_events(const TpSchedule *s, const TpCost *c, GError **err) { return run(s, c, TRUE, NULL, err); }

TpSim *tp_sim_from_timeline(TpTimeline *tl, const TpCost *c)
{
  TpSim *sim = g_new0(TpSim, 1);
  sim->tl = *tl;
  sim->c = c;
  g_free(tl);
  return sim;
}

void tp_sim_free(TpSim *sim)
{
  if (!sim)
    return;
  tp_timeline_clear(&sim->tl);
  tp_allreduce_stats_free(sim->ar);
  g_free(sim);
}
