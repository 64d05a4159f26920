/* tp_runtime.c — running a schedule for real: one thread per stage that walks the stage's operation
 * list with its weight store and the transport, recording what every operation did and when, and
 * the turns of a worker's chunks (interleaved stages).  The operations themselves are in
 * tp_runtime_ops.c; the stages' state is made in tp_runtime_state.c. */
#include "config.h"
#include "tp_runtime_stage.h"
#include "tp_error.h"
#include "tp_index.h"
#include "tp_local.h"
#include "tp_outbox.h"
#include "tp_policy.h"
#include "tp_tie.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

void tp_run_result_clear(TpRunResult *r)
{
  for (int s = 0; r->rec && s < r->W; s++)
    g_free(r->rec[s]);
  g_free(r->rec);
  g_free(r->loss_sum);
  g_free(r->correct);
  g_free(r->stats);
  memset(r, 0, sizeof *r);
}

typedef struct {
  Shared *sh;
  int st;
} StageArg;

/* ---- interleaved stages: a rank's chunks take turns --------------------------------------------- */

/* Wait until the next operation in the order of stage st's rank is this stage's (nothing to wait
 * for without interleaved stages).  The stage then holds its rank's turn for the whole operation,
 * waiting for its message included, and passes it on with turn_pass: the order was validated
 * deadlock-free on the same rule (a rank waits at its next operation until its input is there), so
 * the message comes.  A tied head's update passes the turn on first (tp_tie.h checked that the
 * orders let both sides meet).  FALSE with err when the run stopped meanwhile (another stage failed). */
static gboolean turn_take(Shared *sh, int st, const TpOp *op, GError **err)
{
  const TpSchedule *s = sh->s;
  if (!s->rank_seq)
    return TRUE;
  int rk = tp_stage_rank(s, st);
  const GArray *seq = s->rank_seq[rk];
  g_mutex_lock(&sh->turn_lock);
  while (!sh->stopped && sh->rpos[rk] < (int)seq->len && g_array_index(seq, int32_t, sh->rpos[rk]) != st)
    g_cond_wait(&sh->turn_cond, &sh->turn_lock);
  gboolean stopped = sh->stopped, past = sh->rpos[rk] >= (int)seq->len;
  g_mutex_unlock(&sh->turn_lock);
  if (stopped || past) {
    char name[64];
    tp_op_name(s, op, name, sizeof name);
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d, %s: %s", st + 1, name,
                stopped ? "the run stopped while it waited for its turn on its rank"
                        : "its rank's order has no turn left for it");
    return FALSE;
  }
  return TRUE;
}

/* Stage st's operation is done: its rank's next operation may start. */
static void turn_pass(Shared *sh, int st)
{
  if (!sh->s->rank_seq)
    return;
  g_mutex_lock(&sh->turn_lock);
  sh->rpos[tp_stage_rank(sh->s, st)]++;
  g_cond_broadcast(&sh->turn_cond);
  g_mutex_unlock(&sh->turn_lock);
}

/* The run failed: every stage waiting for its turn ends. */
static void turn_stop(Shared *sh)
{
  g_mutex_lock(&sh->turn_lock);
  sh->stopped = TRUE;
  g_cond_broadcast(&sh->turn_cond);
  g_mutex_unlock(&sh->turn_lock);
}

/* ---- a cut run: the mini-batches after the cut are left out ---------------------------------------- */

/* Stage 1, before it begins mini-batch mb: whether the caller cuts the run there. */
static void ask_cut(Stage *g, const TpOp *op)
{
  const Shared *sh = g->sh;
  if (g->st != 0 || op->kind != TP_OP_F || op->mb <= g->started)
    return;
  g->started = op->mb;
  TpProgress *p = sh->progress;
  if (g->cut == sh->s->K && p && p->cut_before && p->cut_before(p, p->data, op->mb))
    g->cut = op->mb - 1;
}

/* Operation k (of a mini-batch after the cut) left out: its turn taken and passed, the versions it
 * would read released; the first forward left out tells the next stage, by the marker in place of
 * its activations. */
static gboolean leave_out(Stage *g, int k, const TpOp *op, gboolean begun, GError **err)
{
  Shared *sh = g->sh;
  if (!begun && !turn_take(sh, g->st, op, err))
    return FALSE;
  if (begun)
    tp_wstore_op_cancel(g->store);
  else
    tp_wstore_op_skip(g->store, k);
  if (op->kind == TP_OP_F && !g->marked && g->st + 1 < g->W) {
    static const char none = 0; /* a marker carries no bytes */
    TpTag tag = tp_tag_of(op);
    if (!sh->tr->send(sh->tr, tp_link_ends(g->st, g->st + 1), &tag, &none, 0, err))
      return FALSE;
    g->marked = TRUE;
  }
  turn_pass(sh, g->st);
  return TRUE;
}

static gboolean stage_walk(Stage *g, GError **err)
{
  Shared *sh = g->sh;
  const TpSchedule *s = sh->s;
  TpWStoreSizes sz;
  tp_rt_sizes(sh->rt, g->st, g->a.rc, g->a.split, &sz);
  if (!(g->store = tp_wstore_new(s, g->st, 0, &sz, &sh->rt->alloc[g->st], err)))
    return FALSE;
  tp_wstore_set_comm(g->store, tp_rt_message_bytes, g);
  if (!tp_acts_workspace(g, err))
    return FALSE;
  float *v0 = tp_wstore_version(g->store, 0);
  if (!g->be->iface->copy(g->be, v0, g->S->weights, g->S->np ? g->S->np : 1, err))
    return FALSE;
  const int n_ops = tp_stage_len(s, g->st);
  TpOpRecord *recs = sh->out->rec[g->st];
  for (int k = 0; k < n_ops; k++) {
    const TpOp *next = &tp_stage_ops(s, g->st)[k];
    ask_cut(g, next);
    if (next->mb > g->cut) {
      if (!leave_out(g, k, next, FALSE, err))
        return FALSE;
      continue;
    }
    if (!turn_take(sh, g->st, next, err))
      return FALSE;
    /* a tied stage's update meets the other side of the tie (tp_tie.h), which may be a chunk of this
     * rank later in its order: the rank's turn goes on before the meeting */
    size_t tie_off, tie_n;
    gboolean early = s->rank_seq && next->kind == TP_OP_U && tp_net_tied_part(g->net, &tie_off, &tie_n);
    if (early)
      turn_pass(sh, g->st);
    const TpOp *op = tp_wstore_op_begin(g->store, k, err);
    if (!op)
      return FALSE;
    TpOpRecord *rec = &recs[k];
    rec->latest = tp_wstore_latest(g->store);
    rec->start = tp_rt_now(sh);
    gboolean ok = op->kind == TP_OP_F   ? tp_rt_forward(g, op, rec, err)
                  : op->kind == TP_OP_W ? tp_rt_weight_grad(g, op, rec, err)
                  : op->kind == TP_OP_U ? tp_rt_update(g, op, rec, err)
                                        : tp_rt_backward(g, op, rec, err);
    if (!ok && op->kind == TP_OP_F && g_error_matches(*err, TP_ERROR, TP_ERROR_CUT)) {
      g_clear_error(err); /* the marker came in place of its input: the run is cut before its mini-batch */
      g->cut = op->mb - 1;
      *rec = (TpOpRecord){ 0 };
      if (!leave_out(g, k, op, TRUE, err))
        return FALSE;
      continue;
    }
    if (!ok || !tp_backend_sync(g->be, err)) /* a device operation ends when its work is done */
      return FALSE;
    tp_wstore_op_end(g->store);
    rec->end = tp_rt_now(sh);
    if (!early)
      turn_pass(sh, g->st);
  }
  tp_wstore_stats(g->store, &sh->out->stats[g->st]);
  g_mutex_lock(&sh->lock);
  sh->out->done = MIN(sh->out->done, g->cut);
  g_mutex_unlock(&sh->lock);
  return g->be->iface->copy(g->be, g->S->weights, tp_wstore_version(g->store, tp_wstore_latest(g->store)),
                     g->S->np ? g->S->np : 1, err) &&
         tp_rt_sync_host_weights(g->S, err);
}

/* The stage's buffers (RtBufs): the host staging of its input and output gradients, then, on a
 * device backend, the four device buffers (on a host one, in and dout are the staging, out and din
 * the message buffers taken for each message); the outboxes of its messages. */
static gboolean bufs_new(Stage *g, GError **err)
{
  RtBufs *b = &g->b;
  b->host = tp_backend_host_memory(g->be);
  b->box[0] = tp_outbox_new((size_t)g->B * g->out_e);
  b->box[1] = tp_outbox_new((size_t)g->B * g->in_e);
  if (!(b->h_in = tp_rt_buf(g->be, TRUE, (size_t)g->B * g->in_e, err)) ||
      !(b->h_dout = tp_rt_buf(g->be, TRUE, (size_t)g->B * g->out_e, err)))
    return FALSE;
  if (b->host) {
    b->in = b->h_in, b->dout = b->h_dout;
    return TRUE;
  }
  float **dev[] = { &b->in, &b->din, &b->out, &b->dout };
  for (int i = 0; i < 4; i++)
    if (!(*dev[i] = tp_rt_buf(g->be, FALSE, (size_t)g->B * (i < 2 ? g->in_e : g->out_e), err)))
      return FALSE;
  return TRUE;
}

static void bufs_free(Stage *g)
{
  RtBufs *b = &g->b;
  if (!b->host) {
    float *dev[] = { b->in, b->din, b->out, b->dout };
    for (int i = 0; i < 4; i++)
      tp_rt_buf_free(g->be, FALSE, dev[i]);
  }
  for (int i = 0; i < 2; i++) {
    float *h = i ? b->h_din : b->h_out;
    if (h)
      tp_outbox_give(b->box[i], h);
    if (b->box[i])
      tp_outbox_release(b->box[i]);
  }
  g_free(b->h_in), g_free(b->h_dout), g_free(b->labels);
  *b = (RtBufs){ 0 };
}

/* Everything stage st holds for the run, made in one place (and freed in stage_free). */
static gboolean stage_new(Stage *g, Shared *sh, int st, GError **err)
{
  TpRuntime *rt = sh->rt;
  const TpSchedule *s = sh->s;
  *g = (Stage){ .sh = sh, .st = st, .W = s->W, .N = s->N, .B = rt->cfg.batch, .m = rt->cfg.batch / s->N, .cut = s->K,
                .S = &rt->st[st] };
  g->net = g->S->net, g->be = g->S->be;
  g->in_e = tp_net_in_elems(g->net), g->out_e = tp_net_out_elems(g->net);
  g->b.labels = g_try_new(gint32, (size_t)g->B * tp_net_labels_per_sample(g->net));
  g->seeds = g_try_new(guint64, g->N);
  g->fwd_done = g_try_new0(int, s->K);
  if (!tp_acts_new(g, err))
    return FALSE;
  if (!g->b.labels || !g->seeds || !g->fwd_done) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: cannot allocate its bookkeeping of %d mini-batches",
                st + 1, s->K);
    return FALSE;
  }
  if (!bufs_new(g, err)) {
    g_prefix_error(err, "stage %d: ", st + 1);
    return FALSE;
  }
  return TRUE;
}

static void stage_free(Stage *g)
{
  tp_acts_free(g); /* before the weight store: its buffers counted there */
  tp_wstore_free(g->store);
  bufs_free(g);
  g_free(g->seeds), g_free(g->fwd_done);
}

/* A stage's failure: the run's first error ends every other stage (by the transport's abort, and
 * their turns). */
static void stage_failed(Shared *sh, GError *err)
{
  g_mutex_lock(&sh->lock);
  if (!sh->first_err) {
    sh->first_err = err;
    err = NULL;
    sh->tr->abort(sh->tr, sh->first_err->message);
    if (sh->rt->cfg.reduce) /* the other replicas stop at their next update */
      sh->rt->cfg.reduce->iface->abort(sh->rt->cfg.reduce, sh->first_err->message);
  }
  g_mutex_unlock(&sh->lock);
  g_clear_error(&err);
  turn_stop(sh);
}

static gpointer stage_main(gpointer data)
{
  StageArg *a = data;
  Shared *sh = a->sh;
  Stage g;
  GError *err = NULL;
  if (!stage_new(&g, sh, a->st, &err) || !stage_walk(&g, &err))
    stage_failed(sh, err);
  g_mutex_lock(&sh->lock);
  sh->finished++;
  g_cond_signal(&sh->cond);
  g_mutex_unlock(&sh->lock);
  stage_free(&g);
  return NULL;
}

gboolean tp_runtime_check_schedule(const TpSchedule *s, GError **err)
{
  for (int st = 0; st < s->W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOp *op = &tp_stage_ops(s, st)[k];
      if ((op->kind != TP_OP_I && op->kind != TP_OP_W) || (op->micro != TP_WHOLE && !s->recompute))
        continue;
      char name[64], where[256];
      tp_op_name(s, op, name, sizeof name);
      tp_op_where(s, op, where, sizeof where);
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%sstage %d: %s: the executor runs a split backward (I and W) %s",
                  where, st + 1, name, s->recompute ? "without recomputation (its W needs the forward's saved state)"
                                                    : "per micro-batch only");
      return FALSE;
    }
  return TRUE;
}

/* out, made for schedule s: a record per operation, the losses per mini-batch, a store's statistics
 * per stage. */
static gboolean result_new(TpRunResult *out, const TpSchedule *s, GError **err)
{
  memset(out, 0, sizeof *out);
  out->W = s->W, out->K = s->K, out->done = s->K;
  out->rec = g_try_new0(TpOpRecord *, s->W);
  gboolean held = out->rec != NULL;
  long n_ops = 0;
  for (int st = 0; st < s->W; st++)
    n_ops += tp_stage_len(s, st);
  for (int st = 0; held && st < s->W; st++)
    held = (out->rec[st] = g_try_new0(TpOpRecord, MAX(tp_stage_len(s, st), 1))) != NULL;
  out->loss_sum = g_try_new0(double, MAX(s->K, 1));
  out->correct = g_try_new0(int, MAX(s->K, 1));
  out->stats = g_try_new0(TpWStoreStats, s->W);
  if (held && out->loss_sum && out->correct && out->stats)
    return TRUE;
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot allocate the run's records of %ld operations and %d "
              "mini-batches", n_ops, s->K);
  tp_run_result_clear(out);
  return FALSE;
}

/* A thread for each of stages lo..hi-1; how many started (a thread that does not start fails the run:
 * the stages running end by the transport's abort, the others count as finished). */
static int start_stages(Shared *sh, int lo, int hi, StageArg *args, GThread **th)
{
  int n_th = hi - lo;
  for (int i = 0; i < n_th; i++) {
    int st = lo + i;
    args[i] = (StageArg){ sh, st };
    g_autofree char *name = g_strdup_printf("stage-%d", st + 1);
    GError *te = NULL;
    if ((th[i] = g_thread_try_new(name, stage_main, &args[i], &te)))
      continue;
    g_mutex_lock(&sh->lock);
    if (!sh->first_err) {
      sh->first_err = g_error_new(TP_ERROR, TP_ERROR_RUNTIME, "cannot start the thread of stage %d: %s", st + 1,
                                  te->message);
      sh->tr->abort(sh->tr, sh->first_err->message);
    }
    sh->finished += n_th - i; /* the stages never started count as finished */
    g_mutex_unlock(&sh->lock);
    turn_stop(sh); /* their turns never come */
    g_error_free(te);
    return i;
  }
  return n_th;
}

/* Until every one of n_th stages has finished: the progress's tick at its interval. */
static void tick_until_done(Shared *sh, int n_th, TpProgress *progress)
{
  if (!progress || !progress->tick)
    return;
  gint64 step = (gint64)(1e6 * (progress->interval_s > 0 ? progress->interval_s : 0.25));
  g_mutex_lock(&sh->lock);
  while (sh->finished < n_th) {
    g_cond_wait_until(&sh->cond, &sh->lock, g_get_monotonic_time() + step);
    g_mutex_unlock(&sh->lock);
    progress->tick(progress, progress->data);
    g_mutex_lock(&sh->lock);
  }
  g_mutex_unlock(&sh->lock);
}

gboolean tp_runtime_check_tie(const TpModel *m, const int *bounds, const TpSchedule *s, gboolean can_tie, GError **err)
{
  if (can_tie)
    return tp_tie_check(m, bounds, s, err);
  if (!tp_tie_check_split(m, bounds, s->W, err))
    return FALSE;
  TpTie t = tp_tie_of(m, bounds, s->W);
  if (t.stage >= 0) {
    g_autofree char *fix = g_strdup_printf("use --transport local or mpi, or %s", t.untie);
    tp_tie_refuse(&t, "which this transport cannot", fix, err);
  }
  tp_tie_clear(&t);
  return t.stage < 0;
}

/* Whether rt runs s: a schedule the executor runs, of its stages and a micro-batch that divides its
 * batch, interleaved stages all in this process. */
static gboolean check_run(const TpRuntime *rt, const TpSchedule *s, GError **err)
{
  if (!tp_runtime_check_schedule(s, err))
    return FALSE;
  if (s->rank_seq && (rt->lo != 0 || rt->hi != rt->W)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "interleaved stages (%d model chunks per worker) run in one process: "
                "its stage threads take turns in each worker's order", s->V);
    return FALSE;
  }
  if (s->W != rt->W || rt->cfg.batch % s->N) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "the schedule has %d stages and %d micro-batches; the run %d stages "
                "and batch %d", s->W, s->N, rt->W, rt->cfg.batch);
    return FALSE;
  }
  return tp_runtime_check_tie(rt->cfg.model, rt->bounds, s, rt->cfg.reduce && rt->cfg.reduce->iface->tie, err);
}

gboolean tp_runtime_run(TpRuntime *rt, const TpSchedule *s, const int *const *idx, int first_mb, gint64 origin,
                        TpProgress *progress, TpRunResult *out, GError **err)
{
  if (!check_run(rt, s, err) || !result_new(out, s, err))
    return FALSE;
  Shared sh = { .rt = rt, .s = s, .idx = idx, .first_mb = first_mb, .origin = origin, .progress = progress,
                .out = out };
  g_mutex_init(&sh.lock);
  g_cond_init(&sh.cond);
  g_mutex_init(&sh.turn_lock);
  g_cond_init(&sh.turn_cond);
  if (s->rank_seq)
    sh.rpos = g_new0(int, tp_schedule_ranks(s));
  const int lo = rt->lo, hi = rt->hi, n_th = hi - lo;
  sh.tr = rt->tr ? rt->tr : tp_local_new(s->W, s->N, rt->cfg.timeout_s > 0 ? rt->cfg.timeout_s : 300);
  sh.links = tp_rt_links_new(rt, sh.tr);
  StageArg *args = g_new(StageArg, n_th);
  GThread **th = g_new(GThread *, n_th);
  int started = start_stages(&sh, lo, hi, args, th);
  tick_until_done(&sh, n_th, progress);
  for (int i = 0; i < started; i++)
    g_thread_join(th[i]);
  g_free(th);
  g_free(args);
  if (sh.tr != rt->tr)
    tp_transport_free(sh.tr);
  tp_rt_links_free(sh.links);
  g_mutex_clear(&sh.lock);
  g_cond_clear(&sh.cond);
  g_mutex_clear(&sh.turn_lock);
  g_cond_clear(&sh.turn_cond);
  g_free(sh.rpos);
  if (sh.first_err) {
    g_propagate_error(err, sh.first_err);
    return FALSE;
  }
  tp_run_result_summarise(out, s, lo, hi);
  return TRUE;
}

void tp_run_result_summarise(TpRunResult *out, const TpSchedule *s, int lo, int hi)
{
  double t0 = G_MAXDOUBLE, t1 = 0;
  out->versions_match = TRUE;
  out->mismatched_reads = 0;
  for (int st = lo; st < hi; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOpRecord *r = &out->rec[st][k];
      if (tp_stage_ops(s, st)[k].mb > out->done) /* left out of a cut run */
        continue;
      t0 = MIN(t0, r->start), t1 = MAX(t1, r->end);
      if (!r->match)
        out->versions_match = FALSE, out->mismatched_reads++;
    }
  out->wall = t1 > t0 ? t1 - t0 : 0;
}

void tp_run_result_cut(TpRunResult *r, const TpSchedule *s)
{
  if (r->done >= r->K)
    return;
  for (int st = 0; st < s->W; st++) {
    int n = 0;
    for (int k = 0; k < tp_stage_len(s, st); k++)
      if (tp_stage_ops(s, st)[k].mb <= r->done)
        r->rec[st][n++] = r->rec[st][k];
  }
  r->K = r->done;
}

TpTimeline *tp_run_result_timeline(const TpRunResult *r, const TpSchedule *s, GError **err)
{
  TpTimeline *tl = tp_timeline_new(s, TRUE, err);
  if (!tl)
    return NULL;
  for (int st = 0; st < s->W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOpRecord *rec = &r->rec[st][k];
      long g = tl->ix->off[st] + k;
      tl->start[g] = rec->start, tl->end[g] = rec->end;
      tl->version[g] = rec->version, tl->latest[g] = rec->latest;
    }
  tp_timeline_normalise(tl);
  return tl;
}
