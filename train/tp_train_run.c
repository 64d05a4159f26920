/* tp_train_run.c — the trainer's third phase, on the plan tp_train_plan.c fixed: every run (epoch)
 * of the schedule cut into segments that drain, each followed by a checkpoint when asked
 * (tp_checkpoint.h), the test set at the end of a run, the progress bar; a resumed run's state.
 * What the processes of the run do together goes through its group (tp_group.h). */
#include "config.h"
#include "tp_train.h"
#include "tp_train_priv.h"
#include "tp_costed.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_policy.h"
#include "tp_trainlog.h"
#include "tp_signal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- checkpoints: the run's identity, saving and resuming (tp_checkpoint.h) ------------------------ */


static void run_identity(const Train *t, TpCheckpoint *c)
{
  const TpTrainConfig *cfg = &t->cfg;
  char b1[G_ASCII_DTOSTR_BUF_SIZE], b2[G_ASCII_DTOSTR_BUF_SIZE], e[G_ASCII_DTOSTR_BUF_SIZE];
  g_autofree char *opt = cfg->opt.adamw ? g_strdup_printf("adamw beta1 %s beta2 %s eps %s",
                                                      g_ascii_dtostr(b1, sizeof b1, cfg->opt.beta1),
                                                      g_ascii_dtostr(b2, sizeof b2, cfg->opt.beta2),
                                                      g_ascii_dtostr(e, sizeof e, cfg->opt.eps))
                                    : NULL;
  TpRunIdentity id = {
    .model = t->model,
    .preset = cfg->sched.preset,
    .file = t->s,
    .slots = cfg->sched.slots,
    .per_epoch = t->per_epoch,
    .sig = cfg->sched.has_sig ? &cfg->sched.sig : NULL,
    .W = t->W,
    .N = t->N,
    .batch = cfg->batch,
    .K = t->K,
    .every = cfg->ck.every,
    .seed = cfg->seed,
    .lr = cfg->opt.lr,
    .momentum = cfg->opt.momentum,
    .weight_decay = cfg->opt.wd,
    .backend = cfg->backend,
    .data = t->data_id,
    .lr_steps = tp_train_lr_steps(t),
    .warmup = tp_train_warmup(t),
    .optimizer = opt,
    .replicas = MAX(t->dp.D, 1),
  };
  tp_checkpoint_identity(c, &id);
}

/* NULL when log is the training log of `runs` runs of K mini-batches (log_run's rows: their
 * mini-batches and test flags, losses and times finite and 0 or more, accuracies from 0 to 1), else
 * a line saying where it is not. */
static char *log_check(const char *log, int runs, int K)
{
  if (runs == 0)
    return strcmp(log, TP_TRAINLOG_HEADER "\n") == 0 ? NULL : g_strdup("log is not the header alone (no run is complete)");
  GError *e = NULL;
  g_autoptr(TpTrainLog) l = tp_trainlog_parse(log, "log", &e);
  g_autoptr(GArray) rows = l ? tp_trainlog_rows(l, "log", &e) : NULL;
  if (!rows) {
    char *why = g_strdup_printf("log is not a training log (%s)", e->message);
    g_error_free(e);
    return why;
  }
  int every = MAX(1, K / 10), per_run = (K - 1) / every + 1;
  if (rows->len != (guint)(runs * per_run))
    return g_strdup_printf("log holds %u rows, %d runs of %d mini-batches give %d", rows->len, runs, K, runs * per_run);
  for (guint r = 0; r < rows->len; r++) {
    const TpTrainLogRow *x = &g_array_index(rows, TpTrainLogRow, r);
    int e0 = (int)(r / per_run), i = (int)(r % per_run), mb = i + 1 < per_run ? e0 * K + (i + 1) * every : (e0 + 1) * K;
    if (x->mini_batch != mb || x->test != (i + 1 == per_run) || !(x->loss >= 0) || !(x->time >= 0) ||
        !(x->accuracy >= 0 && x->accuracy <= 1))
      return g_strdup_printf("log row %u is not the row of mini-batch %d of the run", r + 1, mb);
  }
  return NULL;
}

/* The position and results of checkpoint c checked for meaning against this run (a checkpoint whose
 * seal was recomputed after an edit passes its integrity check): every key in range, the position a
 * segment boundary, the counts and the data position agreeing with it.  One line naming the key. */
static gboolean check_position(const Train *t, const TpCheckpoint *c, const char *dir, GError **err)
{
  int K = t->K, M = tp_train_segment_length(t), P = tp_batcher_per_epoch(t->batcher);
  gint64 done = (gint64)c->epoch * K + c->index;
  /* the data position after `done` mini-batches from the start: each epoch of the data holds P */
  gint64 de = done > 0 ? (done - 1) / P : 0, di = done > 0 ? ((done - 1) % P + 1) * (gint64)t->cfg.batch : 0;
  const char *key = NULL, *why = NULL;
  g_autofree char *val = NULL;
#define BAD(k, v, w) (key = (k), val = g_strdup_printf("%" G_GINT64_FORMAT, (gint64)(v)), why = (w))
  if (c->generation < 0)
    BAD("generation", c->generation, "is negative");
  else if (c->W != t->W)
    BAD("stages", c->W, "differs from this run's stages");
  else if (c->seed != t->cfg.seed)
    BAD("seed", c->seed, "differs from this run's seed");
  else if (c->epoch < 0 || c->epoch > t->runs || (c->epoch == t->runs && c->index != 0))
    BAD("epoch", c->epoch, "is not a run of this one");
  else if (c->index < 0 || c->index >= K || (c->index % M != 0 && !c->plan_cut))
    BAD("index", c->index, "is not a segment boundary of this run (and no cut_segment says the rest of one)");
  else if (c->index % M == 0 && c->plan_cut)
    BAD("index", c->index, "is a segment boundary, but a cut_segment is there");
  else if (c->done != done)
    BAD("done", c->done, "disagrees with epoch and index");
  else if (c->pos.epoch != de)
    BAD("data_epoch", c->pos.epoch, "disagrees with the mini-batches done");
  else if (c->pos.index != di)
    BAD("data_index", c->pos.index, "disagrees with the mini-batches done");
  else if (c->tally.mismatched < 0)
    BAD("mismatched_reads", c->tally.mismatched, "is negative");
  if (key) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_RESUME, "%s/%s: %s=%s %s", dir, TP_CHECKPOINT_INI, key, val, why);
    return FALSE;
  }
#undef BAD
  g_autofree char *bad = !isfinite(c->elapsed) || c->elapsed < 0
                           ? g_strdup("elapsed is not a finite number of 0 or more")
                           : tp_tally_check(&c->tally, c->epoch, c->index, K, t->cfg.batch, t->train->label_dim);
  if (!bad)
    bad = log_check(c->log, c->epoch, K);
  if (bad)
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_RESUME, "%s/%s: %s", dir, TP_CHECKPOINT_INI, bad);
  return !bad;
}

/* A checkpoint inside a segment: its cut_segment is the rest of that segment for this run — its
 * size, and a schedule of the plan's kind (order, policy, timeline, recomputation, chunks,
 * significance; fused forwards only where the plan fuses). */
static gboolean check_cut(const Train *t, const TpCheckpoint *c, const char *dir, GError **err)
{
  int M = tp_train_segment_length(t), end = MIN(c->index - c->index % M + M, t->K);
  const TpSchedule *r = t->pos.s_cut, *s = t->s;
  char there[96] = "", here[96] = "";
  if (r->W != s->W || r->N != t->N || r->K != end - c->index || r->V != s->V)
    g_snprintf(there, sizeof there, "W=%d, N=%d, K=%d, %d chunks", r->W, r->N, r->K, r->V),
      g_snprintf(here, sizeof here, "W=%d, N=%d, K=%d, %d chunks", s->W, t->N, end - c->index, s->V);
  else if (r->order != s->order || r->policy != s->policy || r->fixed_on != s->fixed_on || r->map != s->map)
    g_snprintf(there, sizeof there, "%s/%s fixed on %s", tp_order_name(r->order), tp_policy_name(r->policy),
               tp_fixed_on_name(r->fixed_on)),
      g_snprintf(here, sizeof here, "%s/%s fixed on %s", tp_order_name(s->order), tp_policy_name(s->policy),
                 tp_fixed_on_name(s->fixed_on));
  else if (r->recompute != s->recompute)
    g_snprintf(there, sizeof there, "recompute %s", r->recompute ? "true" : "false"),
      g_snprintf(here, sizeof here, "recompute %s", s->recompute ? "true" : "false");
  else if (s->policy == TP_POLICY_INTERMEDIATE && (r->sig.kind != s->sig.kind || r->sig.param != s->sig.param))
    g_strlcpy(there, "another significance", sizeof there), g_strlcpy(here, "the plan's", sizeof here);
  else if (tp_schedule_fused_forwards(r) > 0 && tp_schedule_fused_forwards(s) == 0)
    g_strlcpy(there, "fused forwards", sizeof there), g_strlcpy(here, "none in the plan", sizeof here);
  if (!*there)
    return TRUE;
  g_set_error(err, TP_ERROR, TP_ERROR_PARAM_RESUME, "%s/%s: cut_segment is not the rest of the segment at index %d "
              "(%s there; %s here)", dir, TP_CHECKPOINT_INI, c->index, there, here);
  return FALSE;
}

/* --resume: the checkpoint read and checked against this run, its state restored. */
gboolean tp_train_resume(Train *t, GError **err)
{
  const char *dir = t->cfg.resume;
  TpCheckpoint c, run;
  /* resuming where it goes on writing: a run still writing there is named, as the lock taken once
   * the checkpoint is read would name it, rather than caught between two of its files; a group of
   * several processes reads together, and refuses together after */
  if (tp_group_size(t->group) == 1 && g_strcmp0(t->cfg.ck.dir, dir) == 0 && tp_checkpoint_in_use(dir, err)) {
    tp_error_about(err, t->cfg.ck_dir_is_resume ? TP_ERROR_PARAM_RESUME : TP_ERROR_PARAM_CHECKPOINT);
    return FALSE;
  }
  /* rank 0's metadata, each process's stages' state */
  if (!tp_checkpoint_load(t->group, dir, t->W, &c, err)) {
    tp_error_about(err, TP_ERROR_PARAM_RESUME);
    return FALSE;
  }
  tp_checkpoint_init(&run, 0, NULL, NULL, 1);
  run_identity(t, &run);
  tp_checkpoint_read_old_digest(&c, &run, t->cfg.sched.preset ? NULL : t->s);
  g_autofree char *diff = tp_checkpoint_id_diff(&c, &run);
  gboolean ok = TRUE;
  if (diff) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_RESUME, "%s/%s is of another run: %s", dir, TP_CHECKPOINT_INI, diff);
    ok = FALSE;
  } else if (c.epoch == t->runs && c.index == 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_RESUME, "%s holds the end of the run (%d run%s): nothing left to do",
                dir, c.epoch, c.epoch == 1 ? "" : "s");
    ok = FALSE;
  } else
    ok = check_position(t, &c, dir, err);
  for (int k = 0; k < (t->dp.rt ? t->dp.D : 1) && ok; k++) /* every replica of this process */
    ok = tp_checkpoint_restore(&c, t->dp.rt ? t->dp.rt[k] : t->rt, dir, err);
  ok = ok && tp_batcher_seek(t->batcher, c.pos, err);
  if (ok && !t->cfg.sched.file) /* the plan it ran, not one fixed on this process's profile */
    ok = (t->s = tp_checkpoint_plan(c.plan, dir, "segment", err)) != NULL &&
         (!c.plan_tail || (t->pos.s_tail = tp_checkpoint_plan(c.plan_tail, dir, "last_segment", err)) != NULL);
  if (ok && c.plan_cut) /* inside a segment (check_position): the rest of it, a schedule file's too */
    ok = (t->pos.s_cut = tp_checkpoint_plan(c.plan_cut, dir, "cut_segment", err)) != NULL && check_cut(t, &c, dir, err);
  if (ok && !t->cfg.sched.file && t->s->recompute != t->cfg.sched.recompute) { /* the plan's header says which rule ran */
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_RESUME, "%s/%s is of another run: recompute '%s' there, '%s' here",
                dir, TP_CHECKPOINT_INI, t->s->recompute ? "true" : "false", t->cfg.sched.recompute ? "true" : "false");
    ok = FALSE;
  }
  if (ok && !t->cfg.sched.file && t->cfg.sched.fuse != TP_FUSE_AUTO &&
      (tp_schedule_fused_forwards(t->s) > 0) != (t->cfg.sched.fuse == TP_FUSE_ON)) { /* asked for what the plan did not run */
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_RESUME, "%s/%s is of another run: its plan runs %s; here "
                "--fuse-forwards %s (resume without it)", dir, TP_CHECKPOINT_INI,
                tp_schedule_fused_forwards(t->s) ? "fused forwards" : "forwards per micro-batch",
                t->cfg.sched.fuse == TP_FUSE_ON ? "on" : "off");
    ok = FALSE;
  }
  if (ok) {
    t->pos.start_epoch = c.epoch, t->pos.start_index = c.index, t->pos.generation = c.generation + 1;
    t->prog.done_before = t->prog.bar_base = c.done;
    t->pos.elapsed0 = c.elapsed;
    g_string_assign(t->res.log, c.log);
    tp_tally_copy(&t->res.tally, &c.tally);
  }
  tp_checkpoint_clear(&c);
  tp_checkpoint_clear(&run);
  return ok && tp_train_check_ck_dir(t, err); /* where the run goes on writing checkpoints */
}

/* The run's state at a drained point: epoch complete runs, index mini-batches into the next
 * (every process its stages', rank 0 the metadata).  *sig: a signal caught (by any process), so
 * that the run stops here. */
static gboolean save_checkpoint(Train *t, int epoch, int index, int *sig, GError **err)
{
  TpCheckpoint c;
  int lo, hi;
  tp_group_stages(t->group, t->W, &lo, &hi);
  gboolean ok = tp_checkpoint_take(&c, t->rt, lo, hi, err);
  run_identity(t, &c);
  g_autoptr(GString) plan = g_string_new(NULL), tail = g_string_new(NULL);
  tp_format_csv(t->s, plan);
  if (t->pos.s_tail)
    tp_format_csv(t->pos.s_tail, tail);
  c.generation = t->pos.generation++;
  c.epoch = epoch, c.index = index, c.done = t->prog.done_before, c.pos = tp_batcher_pos(t->batcher), c.seed = t->cfg.seed;
  c.plan = g_strdup(plan->str), c.plan_tail = t->pos.s_tail ? g_strdup(tail->str) : NULL, c.log = g_strdup(t->res.log->str);
  int M = tp_train_segment_length(t);
  if (index % M) { /* inside a segment: the rest of it */
    g_autoptr(GString) rest = g_string_new(NULL);
    tp_format_csv(t->pos.s_cut, rest);
    c.plan_cut = g_strdup(rest->str);
  }
  c.elapsed = (double)(g_get_monotonic_time() - t->prog.origin) / 1e6;
  tp_tally_copy(&c.tally, &t->res.tally);
  *sig = 0;
  ok = ok && tp_checkpoint_save(t->group, t->cfg.ck.dir, &c, tp_signal_stop_requested, sig, err);
  tp_checkpoint_clear(&c);
  return ok;
}

/* ---- progress bar -------------------------------------------------------------------------------- */

static void tick(TpProgress *p, void *data)
{
  Train *t = data;
  int total = t->runs * t->K, done = t->prog.done_before + g_atomic_int_get(&p->done);
  double el = (double)(g_get_monotonic_time() - t->prog.bar_start) / 1e6;
  int here = done - t->prog.bar_base; /* a resumed run: those of this process */
  double rate = el > 0 ? here * (double)t->cfg.batch / el : 0;
  double eta = here > 0 ? el * (total - done) / here : 0;
  int width = 24, fill = total ? (int)((double)width * done / total) : 0;
  char bar[32];
  for (int i = 0; i < width; i++)
    bar[i] = i < fill ? '#' : '.';
  bar[width] = '\0';
  char loss[32] = "-";
  if (g_atomic_int_get(&p->losses) > 0)
    g_snprintf(loss, sizeof loss, "%.4f", atomic_load(&p->last_loss));
  fprintf(stderr, "\r[%s] %d/%d mini-batches  %.0f samples/s  loss %s  ETA %.0fs\033[K", bar, done, total, rate, loss,
          eta);
  fflush(stderr);
}

/* ---- one run of the schedule (an epoch) ------------------------------------------------------------ */

/* Stage 1's update of each mini-batch, for the log's times. */
static double update_time(const TpSchedule *s, const TpRunResult *r, int mb)
{
  const TpOp *ops = tp_stage_ops(s, 0);
  for (int k = 0; k < tp_stage_len(s, 0); k++)
    if (ops[k].kind == TP_OP_U && ops[k].mb == mb)
      return r->rec[0][k].end;
  return 0;
}

static void log_run(Train *t, int e, double acc)
{
  int K = t->K, every = MAX(1, K / 10), batch = t->cfg.batch;
  double ls = 0, win_loss = 0;
  long win_correct = 0;
  int win = 0;
  for (int i = 0; i < K; i++) {
    double l = g_array_index(t->res.tally.loss_sum, double, i);
    ls += l;
    win_loss += l, win_correct += g_array_index(t->res.tally.correct, int, i), win++;
    if ((i + 1) % every == 0 && i + 1 < K) {
      TpTrainLogRow row = {
        .epoch = e + (double)(i + 1) / K,
        .mini_batch = e * K + i + 1,
        .time = g_array_index(t->res.tally.upd_time, double, i),
        .loss = win_loss / ((double)win * batch),
        .accuracy = (double)win_correct / ((double)win * batch * t->train->label_dim), /* per label */
        .test = FALSE,
      };
      tp_trainlog_append(t->res.log, &row);
      win_loss = 0, win_correct = 0, win = 0;
    }
  }
  TpTrainLogRow end = {
    .epoch = e + 1,
    .mini_batch = (e + 1) * K,
    .time = g_array_index(t->res.tally.upd_time, double, K - 1),
    .loss = ls / ((double)K * batch),
    .accuracy = acc,
    .test = TRUE,
  };
  tp_trainlog_append(t->res.log, &end);
}

/* Stage 1 is about to begin mini-batch mb of the segment: a signal caught, or --stop-after's count
 * reached, cuts the run there, where a checkpoint is written (a run with checkpoints only). */
static gboolean cut_before(TpProgress *p, void *data, int mb)
{
  (void)p;
  Train *t = data;
  long done = (long)t->prog.done_before + mb - 1;
  /* replicas over ranks each see their own signal: there a signal stops at the segment's end */
  gboolean by_signal = tp_signal_stop_requested() && !(t->dp.D > 1 && tp_group_per_stage(t->group));
  gboolean cut = t->cfg.ck.dir && (by_signal || (t->cfg.ck.stop_after && done >= t->cfg.ck.stop_after));
  if (t->dp.D == 1 || tp_group_per_stage(t->group))
    return cut;
  /* replicas as threads: the first to ask about mini-batch mb decides for them all */
  TpTrainReplicas *dp = &t->dp;
  g_mutex_lock(&dp->cut_lock);
  if (mb > dp->cut_asked) {
    dp->cut_asked = mb;
    if (cut && !dp->cut_mb)
      dp->cut_mb = mb;
  }
  cut = dp->cut_mb && mb >= dp->cut_mb;
  g_mutex_unlock(&dp->cut_lock);
  return cut;
}

/* The schedule of the segment from mini-batch i0 of a run: on the grid of M, the segment's (the
 * shorter last one's when fewer are left); the rest of one a stop cut, from there. */
static const TpSchedule *segment_schedule(const Train *t, int i0, int len)
{
  int M = tp_train_segment_length(t);
  return i0 % M ? t->pos.s_cut : len == t->s->K ? t->s : t->pos.s_tail;
}

/* One segment: mini-batches i0+1 .. i0+len of run e, a whole schedule that drains at its end, or
 * cut by a stop after *done < len of them (a schedule file's segments run whole: nothing makes the
 * rest of one). */
static gboolean run_segment(Train *t, int e, int i0, int len, int **idx, int *done, GError **err)
{
  const TpSchedule *s = segment_schedule(t, i0, len);
  TpProgress prog = { .tick = t->prog.bar ? tick : NULL, .data = t, .interval_s = 0.25,
                      .cut_before = t->cfg.sched.file ? NULL : cut_before };
  t->dp.cut_asked = 0, t->dp.cut_mb = 0;
  TpRunResult r = { 0 };
  gint64 t0 = g_get_monotonic_time();
  gboolean ok = tp_train_run_replicas(t, s, idx, e * t->K + i0 + 1, &prog, &r, err);
  double wall = (double)(g_get_monotonic_time() - t0) / 1e6;
  *done = ok ? r.done : len;
  t->prog.done_before += *done;
  if (ok) /* rank 0 gets every stage's part; the others only train */
    ok = tp_group_gather_run(t->group, s, t->rt, &r, t->dp.D > 1 ? &t->dp.identical : NULL, err);
  g_autoptr(TpSchedule) ran = ok && *done < len && *done > 0 ? tp_schedule_prefix(s, *done) : NULL;
  if (ran) {
    tp_run_result_cut(&r, s);
    s = ran;
  }
  if (ok && t->rank == 0 && *done > 0) {
    len = *done;
    for (int i = 0; i < len; i++) {
      double u = update_time(s, &r, i + 1);
      g_array_append_val(t->res.tally.loss_sum, r.loss_sum[i]);
      g_array_append_val(t->res.tally.correct, r.correct[i]);
      g_array_append_val(t->res.tally.upd_time, u);
    }
    t->res.tally.epoch_wall += wall;
    t->res.tally.train_time += wall;
    t->res.tally.samples += (double)len * t->cfg.batch;
    t->res.tally.versions_match = t->res.tally.versions_match && r.versions_match;
    t->res.tally.mismatched += r.mismatched_reads;
    TpTimeline *tl = tp_run_result_timeline(&r, s, err);
    ok = tl != NULL;
    if (ok) {
      g_autoptr(TpSim) msim = tp_sim_from_timeline(tl, t->cost);
      g_autoptr(TpMetrics) mm = tp_metrics_compute(msim);
      if (s == t->s) /* the prediction is of a whole segment: a shorter or cut one is not compared */
        tp_comparison_add(&t->res.cmp, mm, &r);
      if (t->cfg.keep_events) {
        GArray *rows = tp_events_from_sim(msim);
        tp_events_renumber(rows, e * t->K + i0);
        g_array_append_vals(t->res.events, rows->data, rows->len);
        g_array_unref(rows);
      }
    }
  }
  if (r.rec || r.stats)
    tp_run_result_clear(&r);
  return ok;
}

/* A stop cut the segment of len mini-batches from i0 after done of them: the data order back to
 * where they end (it had read the whole segment's), and the rest of the segment's schedule made,
 * for the checkpoint (the segment itself when none of it ran). */
static gboolean cut_rest(Train *t, int i0, int len, int done, TpDataPos at, GError **err)
{
  if (!tp_batcher_seek(t->batcher, at, err))
    return FALSE;
  for (int i = 0; i < done; i++)
    tp_batcher_next(t->batcher);
  int M = tp_train_segment_length(t);
  if ((i0 + done) % M == 0) /* cut before the segment's first mini-batch: a segment boundary */
    return TRUE;
  if (!t->fuse.decided) /* a resumed plan: the rest fuses forwards as the plan does */
    t->fuse.decided = TRUE, t->fuse.on = tp_schedule_fused_forwards(t->s) > 0;
  TpSchedule *rest = done ? tp_train_generate(t, len - done, t->cost, err)
                          : tp_schedule_prefix(segment_schedule(t, i0, len), len);
  if (!rest)
    return FALSE;
  tp_schedule_free(t->pos.s_cut);
  t->pos.s_cut = rest;
  return TRUE;
}

/* The end of run e: the test set through the latest weights, the run's results and log rows. */
static gboolean end_run(Train *t, int e, GError **err)
{
  double acc = 0, tl = 0, ls = 0;
  for (int i = 0; i < t->K; i++)
    ls += g_array_index(t->res.tally.loss_sum, double, i);
  ls /= (double)t->K * t->cfg.batch;
  if (!tp_runtime_evaluate(t->rt, t->test, &acc, &tl, err))
    return FALSE;
  if (!isfinite(tl)) { /* the training losses were finite: the latest weights give the test set none */
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "the test loss at the end of epoch %d is %s; lower the learning rate "
                "or check the data", e + 1, isnan(tl) ? "NaN" : "infinite");
    return FALSE;
  }
  g_array_append_val(t->res.tally.test_acc, acc);
  g_array_append_val(t->res.tally.test_loss, tl);
  g_array_append_val(t->res.tally.epoch_time, t->res.tally.epoch_wall);
  g_array_append_val(t->res.tally.train_loss, ls);
  log_run(t, e, acc);
  g_array_set_size(t->res.tally.loss_sum, 0);
  g_array_set_size(t->res.tally.upd_time, 0);
  g_array_set_size(t->res.tally.correct, 0);
  t->res.tally.epoch_wall = 0;
  return TRUE;
}

gboolean tp_train_execute(Train *t, GError **err)
{
  int K = t->K, B = t->cfg.batch, M = tp_train_segment_length(t);
  int **idx = g_new(int *, M);
  for (int i = 0; i < M; i++)
    idx[i] = g_new(int, B);
  gboolean ok = TRUE;
  t->prog.bar = t->cfg.progress && isatty(STDERR_FILENO) && t->rank == 0;
  /* a resumed run's times continue from where the checkpoint left them */
  t->prog.origin = g_get_monotonic_time() - (gint64)(t->pos.elapsed0 * 1e6);
  t->prog.bar_start = g_get_monotonic_time();
  for (int e = t->pos.start_epoch; e < t->runs && ok && !t->pos.interrupted; e++) {
    for (int i0 = e == t->pos.start_epoch ? t->pos.start_index : 0, len; i0 < K && ok && !t->pos.interrupted; i0 += len) {
      len = MIN(M - i0 % M, K - i0); /* on the grid of M; the rest of a cut segment first */
      TpDataPos at = tp_batcher_pos(t->batcher);
      for (int i = 0; i < len; i++)
        memcpy(idx[i], tp_batcher_next(t->batcher), sizeof(int) * B);
      int done = len;
      ok = run_segment(t, e, i0, len, idx, &done, err);
      gboolean cut = ok && done < len, ends = !cut && i0 + len == K;
      ok = ok && (!cut || cut_rest(t, i0, len, done, at, err));
      ok = ok && (!ends || t->rank != 0 || end_run(t, e, err)); /* --transport mpi: rank 0 reports */
      if (ok && t->cfg.ck.dir && (ends || t->cfg.ck.every || cut)) {
        int sig = 0;
        ok = save_checkpoint(t, ends ? e + 1 : e, ends ? 0 : i0 + done, &sig, err);
        t->pos.ck_epoch = e + 1, t->pos.ck_index = i0 + done;
        gboolean last = ends && e + 1 == t->runs;
        if (ok && !last && (sig || cut || (t->cfg.ck.stop_after && t->prog.done_before >= t->cfg.ck.stop_after)))
          t->pos.interrupted = sig ? sig : -1;
      }
    }
  }
  if (t->prog.bar)
    fprintf(stderr, "\r\033[K");
  for (int i = 0; i < M; i++)
    g_free(idx[i]);
  g_free(idx);
  return ok;
}
