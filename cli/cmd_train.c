/* cmd_train.c — `timeprest train`: real training with a schedule (exec/tp_runtime.h), the layers
 * split into W stages balanced by FLOPs, each stage profiled before training, the order fixed on the
 * profiled costs (or on unit slots, or read from a file), the run simulated with those costs, and
 * the measurement reported beside the prediction. */
#include "config.h"
#include "tp_checkpoint.h"
#include "tp_cli.h"
#include "tp_costed.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_mpi.h"
#include "tp_net.h"
#include "tp_output.h"
#include "tp_partition.h"
#include "tp_policy.h"
#include "tp_predict.h"
#include "tp_report.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  char *preset, *workers, *micro, *mini, *epochs, *model, *batch, *data, *seed, *lr, *momentum, *wd;
  char *backend, *transport, *order_from, *schedule, *csv, *trace, *format, *output, *timeout, *reps;
  char *significance, *peer_timeout;
  char *checkpoint, *resume, *ck_every, *stop_after;
  gboolean quiet;
} Opts;

static void opts_clear(Opts *o)
{
  char **all[] = { &o->preset, &o->workers, &o->micro, &o->mini, &o->epochs, &o->model, &o->batch, &o->data,
                   &o->seed, &o->lr, &o->momentum, &o->wd, &o->backend, &o->transport, &o->order_from,
                   &o->schedule, &o->csv, &o->trace, &o->format, &o->output, &o->timeout, &o->reps,
                   &o->significance, &o->peer_timeout, &o->checkpoint, &o->resume, &o->ck_every, &o->stop_after };
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    g_clear_pointer(all[i], g_free);
}

/* A finite number in [lo, hi] for option flag. */
static gboolean opt_double(const char *flag, const char *text, double lo, double hi, double *out, GError **err)
{
  if (!text)
    return TRUE;
  char *end = NULL;
  double x = g_ascii_strtod(text, &end);
  if (!*text || end == text || *end || !isfinite(x) || x < lo || x > hi) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: '%s' is not a number in [%g, %g]", flag, text, lo, hi);
    return FALSE;
  }
  *out = x;
  return TRUE;
}

/* ---- the split of the layers into stages ---------------------------------------------------------- */

static double range_flops(int s, int lo, int hi, gpointer data)
{
  (void)s;
  const TpModel *m = data;
  double c = 0;
  for (int i = lo; i < hi; i++) {
    const TpLayer *L = tp_model_layer(m, i);
    c += L->fwd_flops + L->bwd_flops + (double)(L->in_elems + L->out_elems); /* + memory traffic */
  }
  return c;
}

/* ---- the run --------------------------------------------------------------------------------------- */

typedef struct {
  Opts o;
  const TpPreset *preset;
  int W, N, K, runs, batch;
  gboolean per_epoch;       /* runs are epochs (else one run of -k mini-batches, or of the file) */
  int fmt;                  /* 0 text, 1 json */
  guint32 seed;
  double lr, momentum, wd, timeout;
  int reps, cores;
  gboolean slots;           /* --order-from slots */
  gboolean has_sig;         /* --significance given */
  TpSignificance sig;
  TpModel *model;
  TpDataset *train, *test;
  TpBatcher *batcher;
  int *bounds;
  TpRuntime *rt;
  TpSchedule *s;
  TpCost *cost;
  TpStageProfile *prof;
  TpSim *psim;
  TpMetrics *pm;
  TpComparison cmp;
  gboolean cmp_ready;
  /* results per run (epoch) */
  GArray *test_acc, *test_loss, *epoch_time, *train_loss;
  gboolean versions_match;
  long mismatched;
  double train_time, samples;
  GString *log;             /* training log (CSV) */
  GArray *events;           /* measured event rows */
  /* --transport mpi: this rank's transport (NULL: the local transport), rank, links */
  TpTransport *mpi;
  int rank;
  double peer_timeout;
  TpMpiLink *links;         /* [W-1], measured before training */
  /* progress */
  gboolean bar;
  gint64 origin, bar_start;
  int done_before;
  /* checkpoints (README: Checkpoints) */
  TpCheckpointOpts ck;      /* --checkpoint / --resume DIR, --checkpoint-every M, --stop-after D */
  TpSchedule *s_tail;       /* the shorter last segment of a run, when M does not divide K */
  int start_epoch, start_index, generation;
  double elapsed0;          /* seconds of the run before this process (resumed) */
  double epoch_wall;        /* the current epoch's training seconds so far */
  GArray *ep_loss, *ep_upd, *ep_correct; /* the current epoch's mini-batches: loss sum, update time, correct */
  int bar_base;             /* mini-batches done before this process (resumed) */
  int ck_epoch, ck_index;   /* where the last checkpoint written lies (epoch from 1, mini-batches into it) */
  int interrupted;          /* the signal that stopped the run at a checkpoint (-1: --stop-after) */
} Train;

static void train_clear(Train *t)
{
  opts_clear(&t->o);
  tp_model_free(t->model);
  tp_dataset_free(t->train);
  tp_dataset_free(t->test);
  tp_batcher_free(t->batcher);
  g_free(t->bounds);
  tp_runtime_free(t->rt);
  tp_schedule_free(t->s);
  tp_schedule_free(t->s_tail);
  tp_cost_free(t->cost);
  g_free(t->prof);
  tp_metrics_free(t->pm);
  tp_sim_free(t->psim);
  if (t->cmp_ready)
    tp_comparison_clear(&t->cmp);
  const GArray *arrs[] = { t->test_acc, t->test_loss, t->epoch_time, t->train_loss, t->events,
                           t->ep_loss, t->ep_upd, t->ep_correct };
  for (size_t i = 0; i < G_N_ELEMENTS(arrs); i++)
    if (arrs[i])
      g_array_unref((GArray *)arrs[i]);
  if (t->log)
    g_string_free(t->log, TRUE);
  g_free(t->links);
}

/* ---- checkpoints: the run's identity, saving and resuming (cli/tp_checkpoint.h) -------------------- */

static void run_identity(const Train *t, TpCheckpoint *c)
{
  TpRunIdentity id = { t->model, t->preset, t->s, t->slots, t->per_epoch, t->has_sig ? &t->sig : NULL, t->W, t->N,
                       t->batch, t->K, t->ck.every, t->seed, t->lr, t->momentum, t->wd, t->o.backend, t->o.data };
  tp_checkpoint_identity(c, &id);
}

/* --resume: the checkpoint read and checked against this run, its state restored. */
static gboolean resume(Train *t, GError **err)
{
  const char *dir = t->o.resume;
  TpCheckpoint c, run;
  if (!tp_checkpoint_read(dir, &c, err)) {
    g_prefix_error(err, "--resume: ");
    return FALSE;
  }
  tp_checkpoint_init(&run, 0, NULL);
  run_identity(t, &run);
  g_autofree char *diff = tp_checkpoint_id_diff(&c, &run);
  gboolean ok = TRUE;
  if (diff) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--resume: %s/%s is of another run: %s", dir, TP_CHECKPOINT_INI, diff);
    ok = FALSE;
  } else if (c.epoch >= t->runs) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--resume: %s holds the end of the run (%d run%s): nothing left to do",
                dir, c.epoch, c.epoch == 1 ? "" : "s");
    ok = FALSE;
  }
  ok = ok && tp_checkpoint_restore(&c, t->rt, dir, err) && tp_batcher_seek(t->batcher, c.pos, err);
  if (ok && !t->o.schedule) /* the plan it ran, not one fixed on this process's profile */
    ok = (t->s = tp_checkpoint_plan(c.plan, dir, err)) != NULL &&
         (!c.plan_tail || (t->s_tail = tp_checkpoint_plan(c.plan_tail, dir, err)) != NULL);
  if (ok) {
    t->start_epoch = c.epoch, t->start_index = c.index, t->generation = c.generation + 1;
    t->done_before = t->bar_base = c.done;
    t->elapsed0 = c.elapsed, t->train_time = c.train_time, t->samples = c.samples, t->epoch_wall = c.epoch_wall;
    t->versions_match = c.versions_match, t->mismatched = c.mismatched;
    g_string_assign(t->log, c.log);
    GArray *from[] = { c.test_acc, c.test_loss, c.epoch_time, c.train_loss, c.loss_sum, c.upd_time, c.correct };
    GArray *to[] = { t->test_acc, t->test_loss, t->epoch_time, t->train_loss, t->ep_loss, t->ep_upd, t->ep_correct };
    for (size_t i = 0; i < G_N_ELEMENTS(to); i++)
      g_array_append_vals(to[i], from[i]->data, from[i]->len);
  }
  tp_checkpoint_clear(&c);
  tp_checkpoint_clear(&run);
  return ok;
}

/* The run's state at a drained point: epoch complete runs, index mini-batches into the next. */
static gboolean save_checkpoint(Train *t, int epoch, int index, GError **err)
{
  TpCheckpoint c;
  gboolean ok = tp_checkpoint_take(&c, t->rt, err);
  run_identity(t, &c);
  g_autoptr(GString) plan = g_string_new(NULL), tail = g_string_new(NULL);
  tp_format_csv(t->s, plan);
  if (t->s_tail)
    tp_format_csv(t->s_tail, tail);
  c.generation = t->generation++;
  c.epoch = epoch, c.index = index, c.done = t->done_before, c.pos = tp_batcher_pos(t->batcher), c.seed = t->seed;
  c.plan = g_strdup(plan->str), c.plan_tail = t->s_tail ? g_strdup(tail->str) : NULL, c.log = g_strdup(t->log->str);
  c.elapsed = (double)(g_get_monotonic_time() - t->origin) / 1e6;
  c.train_time = t->train_time, c.samples = t->samples, c.epoch_wall = t->epoch_wall;
  c.versions_match = t->versions_match, c.mismatched = t->mismatched;
  GArray *from[] = { t->test_acc, t->test_loss, t->epoch_time, t->train_loss, t->ep_loss, t->ep_upd, t->ep_correct };
  GArray *to[] = { c.test_acc, c.test_loss, c.epoch_time, c.train_loss, c.loss_sum, c.upd_time, c.correct };
  for (size_t i = 0; i < G_N_ELEMENTS(to); i++)
    g_array_append_vals(to[i], from[i]->data, from[i]->len);
  ok = ok && tp_checkpoint_write(t->ck.dir, &c, err);
  tp_checkpoint_clear(&c);
  return ok;
}

static gboolean parse_opts(Train *t, GError **err)
{
  Opts *o = &t->o;
  static const char *const formats[] = { "text", "json", NULL };
  static const char *const froms[] = { "costs", "slots", NULL };
  int from = 0, w = 4, n = 4, k = 0, e = 1, batch = 128, seed = 1, reps = 3;
  t->lr = 0.01, t->momentum = 0.9, t->wd = 1e-4, t->timeout = 300, t->peer_timeout = 60;
  if ((o->format && !tp_cli_choice("--format", o->format, formats, &t->fmt, err)) ||
      (o->order_from && !tp_cli_choice("--order-from", o->order_from, froms, &from, err)) ||
      (o->workers && !tp_cli_int("-w", o->workers, 1, 64, &w, err)) ||
      (o->micro && !tp_cli_int("-n", o->micro, 1, TP_MAX_MICRO, &n, err)) ||
      (o->mini && !tp_cli_int("-k", o->mini, 1, TP_MAX_MINI, &k, err)) ||
      (o->epochs && !tp_cli_int("--epochs", o->epochs, 1, 100000, &e, err)) ||
      (o->batch && !tp_cli_int("--batch", o->batch, 1, 1 << 20, &batch, err)) ||
      (o->seed && !tp_cli_int("--seed", o->seed, 0, G_MAXINT, &seed, err)) ||
      (o->reps && !tp_cli_int("--profile-reps", o->reps, 1, 1000, &reps, err)) ||
      !opt_double("--lr", o->lr, 0, 1e6, &t->lr, err) || !opt_double("--momentum", o->momentum, 0, 1, &t->momentum, err) ||
      !opt_double("--weight-decay", o->wd, 0, 1e6, &t->wd, err) ||
      !opt_double("--timeout", o->timeout, 0.001, 1e7, &t->timeout, err) ||
      !opt_double("--peer-timeout", o->peer_timeout, 0.001, 1e7, &t->peer_timeout, err))
    return FALSE;
  if (o->mini && o->epochs) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-k and --epochs: give one of them");
    return FALSE;
  }
  if (o->transport && strcmp(o->transport, "local") != 0 && strcmp(o->transport, "mpi") != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport: '%s' is not a transport (local, mpi)", o->transport);
    return FALSE;
  }
  if (o->transport && !strcmp(o->transport, "mpi") && (o->checkpoint || o->resume || o->ck_every || o->stop_after)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--%s: not with --transport mpi (checkpoints are of the local transport)",
                o->checkpoint ? "checkpoint" : o->resume ? "resume" : o->ck_every ? "checkpoint-every" : "stop-after");
    return FALSE;
  }
  if (o->transport && !strcmp(o->transport, "mpi") && (!tp_mpi_available() || !tp_mpi_launched())) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport mpi: %s",
                !tp_mpi_available() ? TP_MPI_MISSING : "start it under mpirun (mpirun -np W timeprest train "
                                                       "--transport mpi -w W ...)");
    return FALSE;
  }
  if (o->schedule && (o->preset || o->order_from || o->mini)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--schedule: the file gives the schedule; drop -s, -k and --order-from");
    return FALSE;
  }
  if (!o->schedule && !(t->preset = tp_cli_preset(o->preset, err)))
    return FALSE;
  t->W = w, t->N = n, t->K = k, t->runs = e, t->batch = batch, t->seed = (guint32)seed, t->reps = reps;
  t->per_epoch = !o->mini;
  t->cores = (int)g_get_num_processors();
  t->slots = from == 1;
  if (o->significance) {
    if (!tp_significance_parse(o->significance, &t->sig, err)) {
      g_prefix_error(err, "--significance: ");
      return FALSE;
    }
    t->has_sig = TRUE;
  }
  return tp_checkpoint_options(o->checkpoint, o->resume, o->ck_every, o->stop_after, o->schedule != NULL, &t->ck, err);
}

/* The schedule file given with --schedule: W and N from it (-w, -n must agree when given). */
static gboolean load_schedule_file(Train *t, GError **err)
{
  if (!(t->s = tp_schedule_load(t->o.schedule, err)))
    return FALSE;
  if ((t->o.workers && t->s->W != t->W) || (t->o.micro && t->s->N != t->N)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--schedule: %s has W=%d, N=%d; -w/-n say %d, %d", t->o.schedule,
                t->s->W, t->s->N, t->W, t->N);
    return FALSE;
  }
  t->W = t->s->W, t->N = t->s->N, t->K = t->s->K;
  t->per_epoch = FALSE;
  return TRUE;
}

static gboolean setup(Train *t, GError **err)
{
  Opts *o = &t->o;
  if (o->schedule && !load_schedule_file(t, err))
    return FALSE;
  if (!t->s && !tp_pair_check(t->preset->order, t->preset->policy, t->W, t->N, err))
    return FALSE;
  if (t->has_sig && (t->s ? t->s->policy : t->preset->policy) != TP_POLICY_INTERMEDIATE) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--significance: only the intermediate policy blends weights");
    return FALSE;
  }
  if (!(t->model = tp_model_load(o->model ? o->model : "mlp", err)) || !tp_net_check_model(t->model, err))
    return FALSE;
  int L = tp_model_n_layers(t->model);
  if (t->W > L) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-w: %d stages, but model %s has only %d layers", t->W, t->model->name, L);
    return FALSE;
  }
  const TpBackend *be = tp_backend_get(o->backend ? o->backend : "cpu", err);
  if (!be || !tp_data_open(o->data, t->seed, &t->train, &t->test, err) ||
      !(t->batcher = tp_batcher_new(t->train, t->batch, t->N, t->seed, err)))
    return FALSE;
  if (t->model->in_c * t->model->in_h * t->model->in_w != t->train->dim) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--model: %s takes %d×%d×%d inputs, the data has %d×%d", t->model->name,
                (int)t->model->in_c, (int)t->model->in_h, (int)t->model->in_w, t->train->rows, t->train->cols);
    return FALSE;
  }
  if (t->per_epoch)
    t->K = tp_batcher_per_epoch(t->batcher);
  else if (!o->schedule)
    t->runs = 1;
  t->bounds = g_new(int, t->W + 1);
  double best;
  if (!tp_partition(L, t->W, range_flops, NULL, t->model, t->bounds, &best)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-w: cannot split %d layers into %d stages", L, t->W);
    return FALSE;
  }
  TpRuntimeConfig cfg = { t->model, t->bounds, t->W, t->N, t->batch, be, t->train, (float)t->lr, (float)t->momentum,
                          (float)t->wd, t->seed, t->timeout };
  if (!(t->rt = tp_runtime_new(&cfg, err)))
    return FALSE;
  t->test_acc = g_array_new(FALSE, FALSE, sizeof(double));
  t->test_loss = g_array_new(FALSE, FALSE, sizeof(double));
  t->epoch_time = g_array_new(FALSE, FALSE, sizeof(double));
  t->train_loss = g_array_new(FALSE, FALSE, sizeof(double));
  t->ep_loss = g_array_new(FALSE, FALSE, sizeof(double));
  t->ep_upd = g_array_new(FALSE, FALSE, sizeof(double));
  t->ep_correct = g_array_new(FALSE, FALSE, sizeof(int));
  t->events = g_array_new(FALSE, FALSE, sizeof(TpEventRow));
  t->log = g_string_new("epoch,mini_batch,time,loss,accuracy,test\n");
  t->versions_match = TRUE;
  if (t->ck.every > t->K)
    t->ck.every = t->K; /* one segment: the run itself */
  return !o->resume || resume(t, err);
}

/* ---- --transport mpi: one rank per stage ----------------------------------------------------------- */

/* Every rank profiles its own stage; the profiles (and rank 0's core count, for the device map)
 * are gathered onto every rank, so each plans from the same numbers.  The links are measured here,
 * before training, by a ping-pong between neighbours. */
static gboolean mpi_share_profile(Train *t, GError **err)
{
  typedef struct {
    TpStageProfile p;
    gint64 cores;
  } Part;
  Part mine = { t->prof[t->rank], t->cores };
  g_autofree Part *all = g_new(Part, t->W);
  if (!tp_mpi_gather(t->mpi, -1, &mine, sizeof mine, all, err))
    return FALSE;
  for (int s = 0; s < t->W; s++)
    t->prof[s] = all[s].p;
  t->cores = (int)all[0].cores;
  t->links = g_new0(TpMpiLink, MAX(t->W - 1, 1));
  return tp_mpi_measure_links(t->mpi, 5, 0, FALSE, t->links, err);
}

static void mpi_links_to_cost(Train *t)
{
  g_autofree double *lat = g_new(double, t->W), *bw = g_new(double, t->W);
  for (int l = 0; l < t->W - 1; l++)
    lat[l] = t->links[l].latency_s, bw[l] = t->links[l].bandwidth_Bps;
  tp_predict_set_links(t->cost, lat, bw);
}

/* The schedule every rank is about to run is rank 0's (a digest compared across ranks). */
static gboolean mpi_same_schedule(Train *t, GError **err)
{
  g_autoptr(GString) text = g_string_new(NULL);
  tp_format_csv(t->s, text);
  g_string_append_printf(text, "fixed_on=%s\n", tp_report_fixed_on(t->s));
  guint8 mine[32];
  gsize n = sizeof mine;
  GChecksum *c = g_checksum_new(G_CHECKSUM_SHA256);
  g_checksum_update(c, (const guchar *)text->str, (gssize)text->len);
  g_checksum_get_digest(c, mine, &n);
  g_checksum_free(c);
  g_autofree guint8 *all = g_malloc((size_t)t->W * sizeof mine);
  if (!tp_mpi_gather(t->mpi, -1, mine, sizeof mine, all, err))
    return FALSE;
  for (int r = 1; r < t->W; r++)
    if (memcmp(all + (size_t)r * sizeof mine, all, sizeof mine) != 0) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d (rank %d): rank %d (stage %d) fixed another schedule than "
                  "rank 0", t->rank + 1, t->rank, r, r + 1);
      return FALSE;
    }
  return TRUE;
}

/* Every rank reaches this point (training starts together: each rank's times are from here). */
static gboolean mpi_barrier(Train *t, GError **err)
{
  gint64 one = 1;
  g_autofree gint64 *all = g_new(gint64, t->W);
  return tp_mpi_gather(t->mpi, -1, &one, sizeof one, all, err);
}

static void mpi_links_json(const Train *t, GString *out)
{
  g_string_append(out, "\"links\": [");
  for (int l = 0; l < t->W - 1; l++)
    g_string_append_printf(out, "%s{\"from\": %d, \"to\": %d, \"latency\": %.9g, \"bandwidth\": %.9g}", l ? ", " : "",
                           l + 1, l + 2, t->links[l].latency_s, t->links[l].bandwidth_Bps);
  g_string_append(out, "], ");
}

static void mpi_links_text(const Train *t, GString *out)
{
  g_string_append_printf(out, "transport    mpi: %d rank%s, rank r runs stage r+1; %s", t->W, t->W == 1 ? "" : "s",
                         t->W == 1 ? "no links" : "links (ping-pong before training):");
  for (int l = 0; l < t->W - 1; l++)
    g_string_append_printf(out, "%s %d-%d %.1f us, %.2f GB/s", l ? "," : "", l + 1, l + 2,
                           t->links[l].latency_s * 1e6, t->links[l].bandwidth_Bps / 1e9);
  g_string_append_c(out, '\n');
}

/* Profile the stages on the first mini-batch, build the cost model, fix the schedule, predict. */
static gboolean plan(Train *t, const int *first_idx, GError **err)
{
  gboolean whole = t->s ? tp_stage_ops(t->s, 0)[0].micro == TP_WHOLE : t->preset->order == TP_ORDER_1F1B_ASYNC;
  t->prof = g_new0(TpStageProfile, t->W);
  if (!tp_runtime_profile(t->rt, first_idx, t->reps, whole, t->prof, err) || (t->mpi && !mpi_share_profile(t, err)))
    return FALSE;
  t->cost = tp_predict_cost(t->rt, t->prof, t->N, t->batch, t->cores);
  if (t->links)
    mpi_links_to_cost(t);
  if (!t->s) {
    /* with --checkpoint-every M, a run is cut into segments of M mini-batches, each a whole schedule */
    int seg = t->ck.every ? t->ck.every : t->K, tail = t->ck.every ? t->K % t->ck.every : 0;
    TpSchedule **to[] = { &t->s, &t->s_tail };
    int ks[] = { seg, tail };
    for (int i = 0; i < 2; i++) {
      if (!ks[i])
        continue;
      *to[i] = t->slots ? tp_schedule_generate(t->preset->order, t->preset->policy, t->W, t->N, ks[i], err)
                        : tp_schedule_generate_costed(t->preset->order, t->preset->policy, t->W, t->N, ks[i], t->cost, err);
      if (!*to[i])
        return FALSE;
    }
  }
  if (t->mpi && !mpi_same_schedule(t, err))
    return FALSE;
  if (t->has_sig) {
    t->s->sig = t->sig;
    if (t->s_tail)
      t->s_tail->sig = t->sig;
  }
  if (!(t->psim = tp_sim_run(t->s, t->cost, err)))
    return FALSE;
  t->pm = tp_metrics_compute(t->psim);
  tp_comparison_init(&t->cmp, t->pm);
  t->cmp_ready = TRUE;
  return TRUE;
}

/* ---- progress bar -------------------------------------------------------------------------------- */

static void tick(TpProgress *p, void *data)
{
  Train *t = data;
  int total = t->runs * t->K, done = t->done_before + g_atomic_int_get(&p->done);
  double el = (double)(g_get_monotonic_time() - t->bar_start) / 1e6;
  int here = done - t->bar_base; /* a resumed run: those of this process */
  double rate = el > 0 ? here * (double)t->batch / el : 0;
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
  int K = t->K, every = MAX(1, K / 10);
  double ls = 0, win_loss = 0;
  long win_correct = 0;
  int win = 0;
  for (int i = 0; i < K; i++) {
    double l = g_array_index(t->ep_loss, double, i);
    ls += l;
    win_loss += l, win_correct += g_array_index(t->ep_correct, int, i), win++;
    if ((i + 1) % every == 0 && i + 1 < K) {
      g_string_append_printf(t->log, "%.4f,%d,%.4f,%.6f,%.6f,0\n", e + (double)(i + 1) / K, e * K + i + 1,
                             g_array_index(t->ep_upd, double, i), win_loss / ((double)win * t->batch),
                             (double)win_correct / ((double)win * t->batch));
      win_loss = 0, win_correct = 0, win = 0;
    }
  }
  g_string_append_printf(t->log, "%d,%d,%.4f,%.6f,%.6f,1\n", e + 1, (e + 1) * K, g_array_index(t->ep_upd, double, K - 1),
                         ls / ((double)K * t->batch), acc);
}

/* One segment: mini-batches i0+1 .. i0+len of run e, a whole schedule that drains at its end. */
static gboolean run_segment(Train *t, int e, int i0, int len, int **idx, GError **err)
{
  const TpSchedule *s = len == t->s->K ? t->s : t->s_tail;
  TpProgress prog = { 0, 0, 0, t->bar ? tick : NULL, t, 0.25 };
  TpRunResult r = { 0 };
  gint64 t0 = g_get_monotonic_time();
  gboolean ok = tp_runtime_run(t->rt, s, (const int *const *)idx, e * t->K + i0 + 1, t->origin, &prog, &r, err);
  double wall = (double)(g_get_monotonic_time() - t0) / 1e6;
  t->done_before += len;
  if (ok && t->mpi) /* rank 0 gets every stage's part; the others only train */
    ok = tp_mpi_gather_run(t->mpi, s, t->rt, &r, err);
  if (ok && t->rank == 0) {
    for (int i = 0; i < len; i++) {
      double u = update_time(s, &r, i + 1);
      g_array_append_val(t->ep_loss, r.loss_sum[i]);
      g_array_append_val(t->ep_correct, r.correct[i]);
      g_array_append_val(t->ep_upd, u);
    }
    t->epoch_wall += wall;
    t->train_time += wall;
    t->samples += (double)len * t->batch;
    t->versions_match = t->versions_match && r.versions_match;
    t->mismatched += r.mismatched_reads;
    double shift = 0;
    g_autoptr(TpSim) msim = tp_predict_measured_sim(s, t->cost, &r, &shift, err);
    ok = msim != NULL;
    if (ok) {
      g_autoptr(TpMetrics) mm = tp_metrics_compute(msim);
      if (s == t->s) /* the prediction is of a whole segment: the shorter last one is not compared */
        tp_comparison_add(&t->cmp, mm, &r);
      if (t->o.trace) {
        GArray *rows = tp_predict_events(msim, mm, &r, shift, e * t->K + i0);
        g_array_append_vals(t->events, rows->data, rows->len);
        g_array_unref(rows);
      }
    }
  }
  if (r.rec || r.stats)
    tp_run_result_clear(&r);
  return ok;
}

/* The end of run e: the test set through the latest weights, the run's results and log rows. */
static gboolean end_run(Train *t, int e, GError **err)
{
  double acc = 0, tl = 0, ls = 0;
  for (int i = 0; i < t->K; i++)
    ls += g_array_index(t->ep_loss, double, i);
  ls /= (double)t->K * t->batch;
  if (!tp_runtime_evaluate(t->rt, t->test, &acc, &tl, err))
    return FALSE;
  g_array_append_val(t->test_acc, acc);
  g_array_append_val(t->test_loss, tl);
  g_array_append_val(t->epoch_time, t->epoch_wall);
  g_array_append_val(t->train_loss, ls);
  log_run(t, e, acc);
  g_array_set_size(t->ep_loss, 0);
  g_array_set_size(t->ep_upd, 0);
  g_array_set_size(t->ep_correct, 0);
  t->epoch_wall = 0;
  return TRUE;
}

static gboolean run_all(Train *t, GError **err)
{
  int K = t->K, B = t->batch, M = t->ck.every ? t->ck.every : K;
  int **idx = g_new(int *, M);
  for (int i = 0; i < M; i++)
    idx[i] = g_new(int, B);
  gboolean ok = TRUE, planned = FALSE;
  t->bar = !t->o.quiet && isatty(STDERR_FILENO) && t->rank == 0;
  for (int e = t->start_epoch; e < t->runs && ok && !t->interrupted; e++) {
    for (int i0 = e == t->start_epoch ? t->start_index : 0; i0 < K && ok && !t->interrupted; i0 += M) {
      int len = MIN(M, K - i0);
      for (int i = 0; i < len; i++)
        memcpy(idx[i], tp_batcher_next(t->batcher), sizeof(int) * B);
      if (!planned) {
        if (!(ok = plan(t, idx[0], err) && (!t->mpi || mpi_barrier(t, err))))
          break;
        planned = TRUE;
        /* a resumed run's times continue from where the checkpoint left them */
        t->origin = g_get_monotonic_time() - (gint64)(t->elapsed0 * 1e6);
        t->bar_start = g_get_monotonic_time();
      }
      ok = run_segment(t, e, i0, len, idx, err);
      gboolean ends = i0 + len == K;
      ok = ok && (!ends || t->rank != 0 || end_run(t, e, err)); /* --transport mpi: rank 0 reports */
      if (ok && t->ck.dir && (ends || t->ck.every)) {
        ok = save_checkpoint(t, ends ? e + 1 : e, ends ? 0 : i0 + len, err);
        t->ck_epoch = e + 1, t->ck_index = i0 + len;
        gboolean last = ends && e + 1 == t->runs;
        if (ok && !last && (tp_checkpoint_signal() || (t->ck.stop_after && t->done_before >= t->ck.stop_after)))
          t->interrupted = tp_checkpoint_signal() ? tp_checkpoint_signal() : -1;
      }
    }
  }
  if (t->bar)
    fprintf(stderr, "\r\033[K");
  for (int i = 0; i < M; i++)
    g_free(idx[i]);
  g_free(idx);
  return ok;
}

/* EVENTS.csv → EVENTS.WHAT.csv (any other name: NAME.WHAT.csv). */
static char *beside(const char *trace, const char *what)
{
  size_t n = strlen(trace);
  if (n > 4 && strcmp(trace + n - 4, ".csv") == 0)
    n -= 4;
  return g_strdup_printf("%.*s.%s.csv", (int)n, trace, what);
}

/* ---- reports ------------------------------------------------------------------------------------- */

static char *weights_sha256(const Train *t)
{
  GChecksum *c = g_checksum_new(G_CHECKSUM_SHA256);
  for (int s = 0; s < t->W; s++) {
    const float *w = tp_runtime_weights(t->rt, s);
    size_t n = tp_runtime_n_params(t->rt, s);
    for (size_t i = 0; i < n; i++) {
      guint32 u;
      memcpy(&u, &w[i], 4);
      u = GUINT32_TO_LE(u);
      g_checksum_update(c, (const guchar *)&u, 4);
    }
  }
  char *hex = g_strdup(g_checksum_get_string(c));
  g_checksum_free(c);
  return hex;
}

static void json_array(GString *out, const char *name, const GArray *a)
{
  g_string_append_printf(out, ", \"%s\": [", name);
  for (guint i = 0; i < a->len; i++)
    g_string_append_printf(out, "%s%.9g", i ? ", " : "", g_array_index(a, double, i));
  g_string_append_c(out, ']');
}

static double last_of(const GArray *a) { return a->len ? g_array_index(a, double, a->len - 1) : 0; }

static void report_json(const Train *t, const char *sha, GString *out)
{
  const char *name = t->preset ? t->preset->name : tp_preset_name(t->s->order, t->s->policy);
  g_string_append_printf(out, "{\"preset\": \"%s\", \"order\": \"%s\", \"policy\": \"%s\", \"model\": \"%s\", ",
                         name ? name : "", tp_order_name(t->s->order), tp_policy_name(t->s->policy), t->model->name);
  g_string_append_printf(out, "\"workers\": %d, \"micro_batches\": %d, \"batch\": %d, \"mini_batches\": %d, "
                         "\"epochs\": %d, \"backend\": \"cpu\", \"transport\": \"%s\", \"cores\": %d, ",
                         t->W, t->N, t->batch, t->K, t->runs, t->mpi ? "mpi" : "local", t->cores);
  if (t->links)
    mpi_links_json(t, out);
  g_string_append(out, "\"stages\": [");
  for (int s = 0; s < t->W; s++)
    g_string_append_printf(out, "%s{\"stage\": %d, \"first_layer\": %d, \"last_layer\": %d, \"params\": %zu}",
                           s ? ", " : "", s + 1, t->bounds[s] + 1, t->bounds[s + 1], tp_runtime_n_params(t->rt, s));
  g_string_append_printf(out, "], \"samples_per_second\": %.9g, \"train_time\": %.9g, \"final_train_loss\": %.9g, "
                         "\"final_test_accuracy\": %.9g, \"final_test_loss\": %.9g",
                         t->train_time > 0 ? t->samples / t->train_time : 0, t->train_time, last_of(t->train_loss),
                         last_of(t->test_acc), last_of(t->test_loss));
  json_array(out, "test_accuracy", t->test_acc);
  json_array(out, "epoch_time", t->epoch_time);
  json_array(out, "train_loss", t->train_loss);
  g_string_append_printf(out, ", \"weights_sha256\": \"%s\", \"versions_match\": %s, \"mismatched_reads\": %ld, "
                         "\"order_fixed_on\": \"%s\", \"time_unit\": \"s\", \"byte_unit\": \"B\", \"profile\": [",
                         sha, t->versions_match ? "true" : "false", t->mismatched, tp_report_fixed_on(t->s));
  for (int s = 0; s < t->W; s++)
    g_string_append_printf(out, "%s{\"stage\": %d, \"forward\": %.9g, \"backward\": %.9g, \"update\": %.9g}",
                           s ? ", " : "", s + 1, t->prof[s].fwd, t->prof[s].bwd, t->prof[s].upd);
  g_string_append_printf(out, "], \"v_steady\": %d, \"chains\": %d, \"multiple_sequences\": %s, ", t->pm->v_steady,
                         t->pm->chains, t->pm->multiple_sequences ? "true" : "false");
  tp_comparison_json(&t->cmp, out);
  g_string_append(out, "}\n");
}

static void report_text(const Train *t, const char *sha, GString *out)
{
  const char *name = t->preset ? t->preset->name : t->o.schedule;
  g_string_append_printf(out, "train        %s (%s + %s): W=%d stages, N=%d micro-batches, batch %d, model %s\n", name,
                         tp_order_name(t->s->order), tp_policy_name(t->s->policy), t->W, t->N, t->batch,
                         t->model->name);
  g_string_append(out, "stages       layers");
  for (int s = 0; s < t->W; s++)
    g_string_append_printf(out, " %d-%d", t->bounds[s] + 1, t->bounds[s + 1]);
  g_string_append(out, " (split balancing FLOPs)\n");
  if (t->links)
    mpi_links_text(t, out);
  g_string_append_printf(out, "order        fixed on %s; v = %d in the steady state (%d chain%s)\n",
                         t->s->fixed_on == TP_FIXED_ON_COSTS ? "the profiled costs" : "unit slots", t->pm->v_steady,
                         t->pm->chains, t->pm->chains == 1 ? "" : "s");
  g_string_append_printf(out, "data         %s: %d mini-batches x %d run%s (%s)\n", t->train->name, t->K, t->runs,
                         t->runs == 1 ? "" : "s", t->per_epoch ? "epochs" : "mini-batches as asked");
  for (guint e = 0; e < t->test_acc->len; e++)
    g_string_append_printf(out, "%-5s %-6u train loss %.4f, test accuracy %.4f, test loss %.4f, %.2f s\n",
                           t->per_epoch ? "epoch" : "run", e + 1,
                           g_array_index(t->train_loss, double, e), g_array_index(t->test_acc, double, e),
                           g_array_index(t->test_loss, double, e), g_array_index(t->epoch_time, double, e));
  g_string_append_printf(out, "throughput   %.1f samples/s (%.2f s of training)\n",
                         t->train_time > 0 ? t->samples / t->train_time : 0, t->train_time);
  g_string_append_printf(out, "versions     %s\n", t->versions_match ? "every read was of the version the schedule names"
                                                                      : "SOME READS DIFFER from the schedule");
  g_string_append_printf(out, "weights      sha256 %s\n", sha);
  g_string_append(out, "prediction   the simulator on the profiled costs vs this run (mean over runs; counts: max)\n");
  if (t->W > t->cores)
    g_string_append_printf(out, "             %d stages on %d cores: the prediction runs stage s on core s mod %d\n", t->W,
                           t->cores, t->cores);
  tp_comparison_text(&t->cmp, out);
}

/* A run stopped at a checkpoint: one line, and exit 128 + the signal (130 SIGINT, 143 SIGTERM), or 0
 * for --stop-after. */
static G_NORETURN gboolean stopped(Train *t)
{
  int sig = t->interrupted;
  fprintf(stderr, "%s: checkpoint at epoch %d, mini-batch %d written to %s; resume with --resume %s\n",
          sig > 0 ? "interrupted" : "stopped", t->ck_epoch, t->ck_index, t->ck.dir, t->ck.dir);
  fflush(stdout);
  train_clear(t);
  exit(sig > 0 ? 128 + sig : 0);
}

/* The training log, the trace files and the report: all of them or none (cli/tp_output.h). */
static gboolean write_outputs(Train *t, GError **err)
{
  const Opts *o = &t->o;
  g_autofree char *sha = weights_sha256(t);
  g_autoptr(TpOutputs) out = tp_outputs_new();
  g_autoptr(GString) text = g_string_new(NULL);
  gboolean ok = !o->csv || tp_outputs_add_text(out, o->csv, t->log, err);
  if (ok && o->trace) {
    g_string_append_printf(text, "# timeprest-events order_fixed_on=%s measured=1\n", tp_report_fixed_on(t->s));
    tp_events_write_csv(t->events, text);
    ok = tp_outputs_add_text(out, o->trace, text, err);
    /* the plan is part of the run's record: the schedule it ran, beside the events, and the
     * simulator's timeline of it (one schedule) to overlay */
    g_autofree char *plan_path = beside(o->trace, "schedule"), *pred_path = beside(o->trace, "predicted");
    if (ok) {
      tp_format_csv(t->s, text);
      ok = tp_outputs_add_text(out, plan_path, text, err);
    }
    if (ok) {
      tp_report_events_csv(t->psim, t->pm, text);
      ok = tp_outputs_add_text(out, pred_path, text, err);
    }
  }
  if (ok) {
    (t->fmt ? report_json : report_text)(t, sha, text);
    ok = tp_outputs_add_text(out, o->output, text, err);
  }
  return ok && tp_outputs_commit(out, err);
}

/* The arguments that must agree across ranks. */
static char *join_args(int argc, char **argv)
{
  GString *s = g_string_new(NULL);
  for (int i = 0; i < argc; i++)
    g_string_append_c(g_string_append(s, argv[i]), '\x1f'); /* a separator no argument holds */
  return g_string_free(s, FALSE);
}

/* mpirun -np W timeprest train --transport mpi …: what every rank must agree on before training
 * (the same arguments, -np = W, a setup that worked) ends every rank with the first failing rank's
 * status, printed by that rank alone; a failure once training has begun ends the job with one line
 * per rank (tp_mpi_fail); rank 0 reports. */
static gboolean train_mpi(Train *t, const char *args, GError **err)
{
  if (!tp_mpi_init(NULL, NULL, err))
    return FALSE;
  t->rank = tp_mpi_rank();
  GError *e = NULL;
  if (!(t->mpi = tp_mpi_new(t->N, t->peer_timeout, &e)))
    tp_mpi_fail(NULL, e->message, 1);
  gboolean ok = tp_mpi_check_same(t->mpi, args, &e) && setup(t, &e) && tp_mpi_check_size(t->W, &e) &&
                tp_runtime_set_part(t->rt, t->rank, t->rank + 1, t->mpi, &e);
  t->mpi->N = t->N; /* a schedule file's N */
  gint64 status = ok ? 0 : tp_error_exit_status(e);
  g_autofree gint64 *all = g_new(gint64, tp_mpi_size());
  GError *ge = NULL;
  if (!tp_mpi_gather(t->mpi, -1, &status, sizeof status, all, &ge))
    tp_mpi_fail(t->mpi, ge->message, 1);
  for (int r = 0; r < tp_mpi_size(); r++)
    if (all[r]) {
      tp_mpi_finalize(t->mpi);
      t->mpi = NULL;
      if (r == t->rank) {
        g_propagate_error(err, e);
        return FALSE;
      }
      g_clear_error(&e);
      train_clear(t);
      exit((int)all[r]); /* rank r says why */
    }
  if (!run_all(t, &e))
    tp_mpi_fail(t->mpi, e->message, 1);
  ok = t->rank != 0 || write_outputs(t, err);
  tp_mpi_finalize(t->mpi);
  t->mpi = NULL;
  return ok;
}

gboolean tp_cmd_train(int argc, char **argv, GError **err)
{
  Train t = { 0 };
  Opts *o = &t.o;
  GOptionEntry entries[] = {
    { "preset", 's', 0, G_OPTION_ARG_STRING, &o->preset, "Schedule preset (default timeprest)", "PRESET" },
    { "workers", 'w', 0, G_OPTION_ARG_STRING, &o->workers, "Pipeline stages W (default 4; 1 = plain mini-batch SGD)", "W" },
    { "micro-batches", 'n', 0, G_OPTION_ARG_STRING, &o->micro, "Micro-batches per mini-batch N (default 4)", "N" },
    { "mini-batches", 'k', 0, G_OPTION_ARG_STRING, &o->mini, "Train K mini-batches (one schedule of K)", "K" },
    { "epochs", 0, 0, G_OPTION_ARG_STRING, &o->epochs, "Train E epochs, one schedule per epoch (default 1)", "E" },
    { "model", 'm', 0, G_OPTION_ARG_STRING, &o->model, "Model name or .model file (default mlp)", "NAME|FILE" },
    { "batch", 'b', 0, G_OPTION_ARG_STRING, &o->batch, "Samples per mini-batch (default 128)", "B" },
    { "data", 'd', 0, G_OPTION_ARG_STRING, &o->data, "Fashion-MNIST directory (default " TP_DATA_DEFAULT_DIR
      ") or synthetic[:TRAIN[:TEST]]", "DIR" },
    { "seed", 0, 0, G_OPTION_ARG_STRING, &o->seed, "Seed of the weights, data order and synthetic data (default 1)", "S" },
    { "lr", 0, 0, G_OPTION_ARG_STRING, &o->lr, "Learning rate (default 0.01)", "LR" },
    { "momentum", 0, 0, G_OPTION_ARG_STRING, &o->momentum, "SGD momentum (default 0.9)", "M" },
    { "weight-decay", 0, 0, G_OPTION_ARG_STRING, &o->wd, "Weight decay (default 0.0001)", "WD" },
    { "backend", 0, 0, G_OPTION_ARG_STRING, &o->backend, "Compute backend: cpu (default)", "NAME" },
    { "transport", 0, 0, G_OPTION_ARG_STRING, &o->transport,
      "Stage transport: local (default; threads) or mpi (under mpirun -np W: rank r runs stage r+1)", "NAME" },
    { "order-from", 0, 0, G_OPTION_ARG_STRING, &o->order_from,
      "Fix the nf1b/1f1b-async order on the profiled costs (default) or on unit slots", "costs|slots" },
    { "schedule", 0, 0, G_OPTION_ARG_FILENAME, &o->schedule, "Run this schedule file (CSV or JSON)", "FILE" },
    { "significance", 0, 0, G_OPTION_ARG_STRING, &o->significance,
      "I-TiMePReSt's s(d): exp[:TAU] (default exp:1), linear, const:C", "S" },
    { "csv", 0, 0, G_OPTION_ARG_FILENAME, &o->csv, "Write the training log (CSV, as plot convergence reads)", "LOG" },
    { "trace", 0, 0, G_OPTION_ARG_FILENAME, &o->trace,
      "Write the measured events (the simulator's event CSV) to FILE.csv, the schedule run to FILE.schedule.csv "
      "and its predicted events to FILE.predicted.csv",
      "FILE" },
    { "format", 'f', 0, G_OPTION_ARG_STRING, &o->format, "Report format: text (default) or json", "FORMAT" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &o->output, "Write the report to FILE", "FILE" },
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &o->quiet, "No progress bar", NULL },
    { "checkpoint", 0, 0, G_OPTION_ARG_FILENAME, &o->checkpoint,
      "Write checkpoints into DIR: at the end of every run (epoch), every --checkpoint-every mini-batches, "
      "and on SIGINT/SIGTERM", "DIR" },
    { "checkpoint-every", 0, 0, G_OPTION_ARG_STRING, &o->ck_every,
      "Cut every run into segments of M mini-batches (the pipeline drains after each) and checkpoint after each", "M" },
    { "resume", 0, 0, G_OPTION_ARG_FILENAME, &o->resume,
      "Continue the run whose checkpoint is in DIR (the same options; keeps checkpointing there)", "DIR" },
    { "stop-after", 0, 0, G_OPTION_ARG_STRING, &o->stop_after,
      "Stop at the first checkpoint after D mini-batches, as an interruption does (exit 0)", "D" },
    { "timeout", 0, 0, G_OPTION_ARG_STRING, &o->timeout, "Seconds a stage waits for a message (default 300)", "S" },
    { "peer-timeout", 0, 0, G_OPTION_ARG_STRING, &o->peer_timeout,
      "--transport mpi: seconds a rank waits for another before the run ends (default 60)", "S" },
    { "profile-reps", 0, 0, G_OPTION_ARG_STRING, &o->reps, "Timed repetitions per profiled operation (default 3)", "R" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- train a network with a schedule, and compare with its prediction");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx,
    "The layers are split into W contiguous stages balancing FLOPs; each stage is a thread.  Before training,\n"
    "each stage's forward and backward of one micro-batch and its update are timed alone on the first\n"
    "mini-batch (updates discarded); the simulator, on those costs, fixes the nf1b / 1f1b-async order\n"
    "(--order-from slots keeps the unit-slot order) and predicts the run, reported beside the measurement.\n"
    "--epochs runs one schedule per epoch (all stages drain at its end); -k one schedule of K mini-batches.\n"
    "The training log has a row every tenth of an epoch (training loss and accuracy since the last row,\n"
    "test = 0) and one per epoch (the epoch's training loss and the test accuracy, test = 1).\n\n"
    "Example: timeprest train -s timeprest -w 2 -n 4 -k 50\n"
    "         timeprest train -s pipedream -w 2 -n 4 --epochs 3 --csv pipedream.csv --format json");
  g_autofree char *args = join_args(argc, argv);
  gboolean ok = tp_cli_parse(ctx, &argc, &argv, err) && parse_opts(&t, err);
  if (ok && o->transport && !strcmp(o->transport, "mpi"))
    ok = train_mpi(&t, args, err);
  else {
    if (ok && t.ck.dir)
      tp_checkpoint_catch_signals();
    ok = ok && setup(&t, err) && run_all(&t, err);
    if (ok && t.interrupted)
      return stopped(&t);
    ok = ok && write_outputs(&t, err);
  }
  train_clear(&t);
  return ok;
}
