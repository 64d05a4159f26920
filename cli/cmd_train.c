/* cmd_train.c — `timeprest train`: real training with a schedule (exec/tp_runtime.h), the layers
 * split into W stages balanced by FLOPs, each stage profiled before training, the order fixed on the
 * profiled costs (or on unit slots, or read from a file), the run simulated with those costs, and
 * the measurement reported beside the prediction. */
#include "config.h"
#include "tp_cli.h"
#include "tp_costed.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_net.h"
#include "tp_partition.h"
#include "tp_policy.h"
#include "tp_predict.h"
#include "tp_report.h"
#ifdef HAVE_CUDA
#include "tp_backend_cuda.h"
#endif
#include "tp_nccl.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  char *preset, *workers, *micro, *mini, *epochs, *model, *batch, *data, *seed, *lr, *momentum, *wd;
  char *backend, *transport, *order_from, *schedule, *csv, *trace, *format, *output, *timeout, *reps;
  char *significance, *devices;
  gboolean quiet;
} Opts;

static void opts_clear(Opts *o)
{
  char **all[] = { &o->preset, &o->workers, &o->micro, &o->mini, &o->epochs, &o->model, &o->batch, &o->data,
                   &o->seed, &o->lr, &o->momentum, &o->wd, &o->backend, &o->transport, &o->order_from,
                   &o->schedule, &o->csv, &o->trace, &o->format, &o->output, &o->timeout, &o->reps,
                   &o->significance, &o->devices };
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
  /* progress */
  gboolean bar;
  gint64 origin, bar_start;
  int done_before;
  TpBackend **stage_be;     /* --backend cuda: each stage's own instance */
  int gpus;                 /* the distinct GPUs they use */
} Train;

/* ---- device backends: one instance per stage ---------------------------------------------------- */

/* --backend cuda: every stage gets an instance of its own (its own stream), on device 0 or on the
 * --devices list round-robin; other backends share one instance and take no --devices. */
static gboolean make_stage_backends(Train *t, const TpBackend *be, GError **err)
{
  if (g_strcmp0(be->name, "cuda") != 0) {
    if (t->o.devices) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--devices: only with --backend cuda");
      return FALSE;
    }
    return TRUE;
  }
#ifdef HAVE_CUDA
  return (t->stage_be = tp_backend_cuda_stages(t->W, t->o.devices, &t->gpus, err)) != NULL;
#else
  return TRUE; /* not reached: tp_backend_get refuses cuda in a build without it */
#endif
}

/* --transport nccl: the transport (exec/nccl/) links GPU stages that run one process per GPU;
 * train runs the stages of one process only, so it refuses, saying which part is missing. */
static gboolean refuse_nccl(GError **err)
{
#ifdef HAVE_NCCL_TRANSPORT
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport nccl: train runs every stage in one process "
              "(the NCCL transport is built, but needs one process per GPU stage); use --transport local");
#else
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport nccl: " TP_NCCL_MISSING);
#endif
  return FALSE;
}

/* What the stages' compute shares, for the prediction: the cores on cpu; on cuda the GPUs in use
 * (stages on one GPU serialise their compute there, as the h200 cluster assumes). */
static int prediction_devices(const Train *t)
{
  return t->stage_be ? t->gpus : t->cores;
}

static void free_stage_backends(Train *t)
{
#ifdef HAVE_CUDA
  tp_backend_cuda_stages_free(t->stage_be, t->W);
#endif
  t->stage_be = NULL;
}

static void train_clear(Train *t)
{
  opts_clear(&t->o);
  tp_model_free(t->model);
  tp_dataset_free(t->train);
  tp_dataset_free(t->test);
  tp_batcher_free(t->batcher);
  g_free(t->bounds);
  tp_runtime_free(t->rt);
  free_stage_backends(t);
  tp_schedule_free(t->s);
  tp_cost_free(t->cost);
  g_free(t->prof);
  tp_metrics_free(t->pm);
  tp_sim_free(t->psim);
  if (t->cmp_ready)
    tp_comparison_clear(&t->cmp);
  const GArray *arrs[] = { t->test_acc, t->test_loss, t->epoch_time, t->train_loss, t->events };
  for (size_t i = 0; i < G_N_ELEMENTS(arrs); i++)
    if (arrs[i])
      g_array_unref((GArray *)arrs[i]);
  if (t->log)
    g_string_free(t->log, TRUE);
}

static gboolean parse_opts(Train *t, GError **err)
{
  Opts *o = &t->o;
  static const char *const formats[] = { "text", "json", NULL };
  static const char *const froms[] = { "costs", "slots", NULL };
  int from = 0, w = 4, n = 4, k = 0, e = 1, batch = 128, seed = 1, reps = 3;
  t->lr = 0.01, t->momentum = 0.9, t->wd = 1e-4, t->timeout = 300;
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
      !opt_double("--timeout", o->timeout, 0.001, 1e7, &t->timeout, err))
    return FALSE;
  if (o->mini && o->epochs) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-k and --epochs: give one of them");
    return FALSE;
  }
  if (g_strcmp0(o->transport, "nccl") == 0)
    return refuse_nccl(err);
  if (o->transport && strcmp(o->transport, "local") != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport: '%s' is not available in this build (local)", o->transport);
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
  return TRUE;
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
  return make_stage_backends(t, be, err) &&
         (t->rt = tp_runtime_new_on(&cfg, (const TpBackend *const *)t->stage_be, err)) != NULL;
}

/* Profile the stages on the first mini-batch, build the cost model, fix the schedule, predict. */
static gboolean plan(Train *t, const int *first_idx, GError **err)
{
  gboolean whole = t->s ? tp_stage_ops(t->s, 0)[0].micro == TP_WHOLE : t->preset->order == TP_ORDER_1F1B_ASYNC;
  t->prof = g_new0(TpStageProfile, t->W);
  if (!tp_runtime_profile(t->rt, first_idx, t->reps, whole, t->prof, err))
    return FALSE;
  t->cost = tp_predict_cost(t->rt, t->prof, t->N, t->batch, prediction_devices(t));
  if (!t->s) {
    t->s = t->slots ? tp_schedule_generate(t->preset->order, t->preset->policy, t->W, t->N, t->K, err)
                 : tp_schedule_generate_costed(t->preset->order, t->preset->policy, t->W, t->N, t->K, t->cost, err);
    if (!t->s)
      return FALSE;
  }
  if (t->has_sig)
    t->s->sig = t->sig;
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
  double rate = el > 0 ? done * (double)t->batch / el : 0;
  double eta = done > 0 ? el * (total - done) / done : 0;
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
static double update_time(const Train *t, const TpRunResult *r, int mb)
{
  const TpOp *ops = tp_stage_ops(t->s, 0);
  for (int k = 0; k < tp_stage_len(t->s, 0); k++)
    if (ops[k].kind == TP_OP_U && ops[k].mb == mb)
      return r->rec[0][k].end;
  return 0;
}

static void log_run(Train *t, int e, const TpRunResult *r, double acc)
{
  int K = t->K, every = MAX(1, K / 10);
  double ls = 0, win_loss = 0;
  long win_correct = 0;
  int win = 0;
  for (int i = 0; i < K; i++) {
    ls += r->loss_sum[i];
    win_loss += r->loss_sum[i], win_correct += r->correct[i], win++;
    if ((i + 1) % every == 0 && i + 1 < K) {
      g_string_append_printf(t->log, "%.4f,%d,%.4f,%.6f,%.6f,0\n", e + (double)(i + 1) / K, e * K + i + 1,
                             update_time(t, r, i + 1), win_loss / ((double)win * t->batch),
                             (double)win_correct / ((double)win * t->batch));
      win_loss = 0, win_correct = 0, win = 0;
    }
  }
  g_string_append_printf(t->log, "%d,%d,%.4f,%.6f,%.6f,1\n", e + 1, (e + 1) * K, update_time(t, r, K),
                         ls / ((double)K * t->batch), acc);
}

static gboolean run_all(Train *t, GError **err)
{
  int K = t->K, B = t->batch;
  int **idx = g_new(int *, K);
  for (int i = 0; i < K; i++)
    idx[i] = g_new(int, B);
  gboolean ok = TRUE;
  t->test_acc = g_array_new(FALSE, FALSE, sizeof(double));
  t->test_loss = g_array_new(FALSE, FALSE, sizeof(double));
  t->epoch_time = g_array_new(FALSE, FALSE, sizeof(double));
  t->train_loss = g_array_new(FALSE, FALSE, sizeof(double));
  t->events = g_array_new(FALSE, FALSE, sizeof(TpEventRow));
  t->log = g_string_new("epoch,mini_batch,time,loss,accuracy,test\n");
  t->versions_match = TRUE;
  t->bar = !t->o.quiet && isatty(STDERR_FILENO);
  for (int e = 0; e < t->runs && ok; e++) {
    for (int i = 0; i < K; i++)
      memcpy(idx[i], tp_batcher_next(t->batcher), sizeof(int) * B);
    if (e == 0) {
      if (!(ok = plan(t, idx[0], err)))
        break;
      t->origin = t->bar_start = g_get_monotonic_time();
    }
    TpProgress prog = { 0, 0, 0, t->bar ? tick : NULL, t, 0.25 };
    TpRunResult r = { 0 };
    gint64 t0 = g_get_monotonic_time();
    ok = tp_runtime_run(t->rt, t->s, (const int *const *)idx, e * K + 1, t->origin, &prog, &r, err);
    double wall = (double)(g_get_monotonic_time() - t0) / 1e6;
    t->done_before += K;
    if (ok) {
      double acc = 0, tl = 0, ls = 0;
      for (int i = 0; i < K; i++)
        ls += r.loss_sum[i];
      ls /= (double)K * B;
      ok = tp_runtime_evaluate(t->rt, t->test, &acc, &tl, err);
      g_array_append_val(t->test_acc, acc);
      g_array_append_val(t->test_loss, tl);
      g_array_append_val(t->epoch_time, wall);
      g_array_append_val(t->train_loss, ls);
      t->train_time += wall;
      t->samples += (double)K * B;
      t->versions_match = t->versions_match && r.versions_match;
      t->mismatched += r.mismatched_reads;
      double shift = 0;
      g_autoptr(TpSim) msim = ok ? tp_predict_measured_sim(t->s, t->cost, &r, &shift, err) : NULL;
      ok = ok && msim;
      if (ok) {
        g_autoptr(TpMetrics) mm = tp_metrics_compute(msim);
        tp_comparison_add(&t->cmp, mm, &r);
        if (t->o.trace) {
          GArray *rows = tp_predict_events(msim, mm, &r, shift, e * K);
          g_array_append_vals(t->events, rows->data, rows->len);
          g_array_unref(rows);
        }
        log_run(t, e, &r, acc);
      }
    }
    if (r.rec || r.stats)
      tp_run_result_clear(&r);
  }
  if (t->bar)
    fprintf(stderr, "\r\033[K");
  for (int i = 0; i < K; i++)
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
                         "\"epochs\": %d, \"backend\": \"%s\", \"transport\": \"local\", \"cores\": %d, \"stages\": [",
                         t->W, t->N, t->batch, t->K, t->runs, tp_runtime_backend(t->rt, 0)->name, t->cores);
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
    { "backend", 0, 0, G_OPTION_ARG_STRING, &o->backend, "Compute backend: cpu (default) or cuda", "NAME" },
    { "devices", 0, 0, G_OPTION_ARG_STRING, &o->devices,
      "--backend cuda: GPUs of the stages, stage s on the s-th of the list round-robin (default 0)", "D0,D1,…" },
    { "transport", 0, 0, G_OPTION_ARG_STRING, &o->transport, "Stage transport: local (default)", "NAME" },
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
    { "timeout", 0, 0, G_OPTION_ARG_STRING, &o->timeout, "Seconds a stage waits for a message (default 300)", "S" },
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
  gboolean ok = tp_cli_parse(ctx, &argc, &argv, err) && parse_opts(&t, err) && setup(&t, err) && run_all(&t, err);
  if (ok) {
    g_autofree char *sha = weights_sha256(&t);
    g_autoptr(GString) text = g_string_new(NULL);
    if (o->csv)
      ok = tp_cli_emit(o->csv, t.log, err);
    if (ok && o->trace) {
      g_string_append_printf(text, "# timeprest-events order_fixed_on=%s measured=1\n", tp_report_fixed_on(t.s));
      tp_events_write_csv(t.events, text);
      ok = tp_cli_emit(o->trace, text, err);
      g_string_truncate(text, 0);
      /* the plan is part of the run's record: the schedule it ran, beside the events, and the
       * simulator's timeline of it (one schedule) to overlay */
      g_autofree char *plan_path = beside(o->trace, "schedule"), *pred_path = beside(o->trace, "predicted");
      tp_format_csv(t.s, text);
      ok = ok && tp_cli_emit(plan_path, text, err);
      g_string_truncate(text, 0);
      tp_report_events_csv(t.psim, t.pm, text);
      ok = ok && tp_cli_emit(pred_path, text, err);
      g_string_truncate(text, 0);
    }
    if (ok) {
      (t.fmt ? report_json : report_text)(&t, sha, text);
      ok = tp_cli_emit(o->output, text, err);
    }
  }
  train_clear(&t);
  return ok;
}
