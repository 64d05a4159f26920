/* cmd_train.c — `timeprest train`: real training with a schedule (exec/tp_runtime.h), the layers
 * split into W stages balanced by FLOPs, each stage profiled before training, the order fixed on the
 * profiled costs (or on unit slots, or read from a file), the run simulated with those costs, and
 * the measurement reported beside the prediction.  This file: the options, the set-up and the
 * command; the run loop is in tp_train_run.c, the outputs in tp_train_report.c, --transport mpi in
 * tp_train_mpi.c. */
#include "config.h"
#include "tp_train.h"
#include "tp_trainlog.h"
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_mpi.h"
#include "tp_net.h"
#include "tp_partition.h"
#include "tp_policy.h"
#ifdef HAVE_CUDA
#include "tp_backend_cuda.h"
#endif
#include "tp_nccl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void opts_clear(Opts *o)
{
  char **all[] = { &o->preset, &o->workers, &o->micro, &o->mini, &o->epochs, &o->model, &o->batch, &o->data,
                   &o->seed, &o->lr, &o->momentum, &o->wd, &o->backend, &o->transport, &o->order_from,
                   &o->schedule, &o->csv, &o->trace, &o->format, &o->output, &o->timeout, &o->reps,
                   &o->significance, &o->peer_timeout, &o->checkpoint, &o->resume, &o->ck_every, &o->stop_after,
                   &o->devices, &o->lr_schedule };
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    g_clear_pointer(all[i], g_free);
}

/* A finite number in [lo, hi] for option flag. */
static gboolean opt_double(const char *flag, const char *text, double lo, double hi, double *out, GError **err)
{
  if (!text)
    return TRUE;
  if (tp_parse_double(text, lo, hi, out, err))
    return TRUE;
  g_prefix_error(err, "%s: ", flag);
  return FALSE;
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


/* ---- device backends: one instance per stage ---------------------------------------------------- */

/* --backend cuda: every stage gets an instance of its own (its own stream), stage s on visible GPU
 * (s − 1) mod count or on the --devices list round-robin; other backends share one instance and take no --devices. */
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
  if (!t->o.devices && !g_strcmp0(t->o.transport, "nccl")) { /* one GPU per rank: stage s on GPU s mod count */
    int count = tp_cuda_device_count(NULL);
    GString *list = g_string_new("0");
    for (int d = 1; d < count; d++)
      g_string_append_printf(list, ",%d", d);
    t->o.devices = g_string_free(list, FALSE);
  }
  return (t->stage_be = tp_backend_cuda_stages(t->W, t->o.devices, &t->gpus, err)) != NULL;
#else
  return TRUE; /* not reached: tp_backend_get refuses cuda in a build without it */
#endif
}

/* --transport nccl links GPU stages that run one process (MPI rank) per GPU: it needs the NCCL
 * transport in the build, --backend cuda and a GPU; each missing piece is one line, before MPI. */
static gboolean check_nccl(const Opts *o, GError **err)
{
  if (!tp_nccl_available()) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport nccl: " TP_NCCL_MISSING);
    return FALSE;
  }
  if (g_strcmp0(o->backend, "cuda") != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport nccl: links GPU stages; give --backend cuda");
    return FALSE;
  }
#ifdef HAVE_CUDA
  char *why = NULL;
  if (tp_cuda_device_count(&why) == 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport nccl: no CUDA device: %s", why);
    g_free(why);
    return FALSE;
  }
#endif
  return TRUE;
}

/* Stages on one GPU serialise their compute there, as the h200 cluster assumes. */
int tp_train_prediction_devices(const Train *t)
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

void tp_train_clear(Train *t)
{
  opts_clear(&t->o);
  tp_model_free(t->model);
  tp_dataset_free(t->train);
  tp_dataset_free(t->test);
  g_free(t->data_id);
  tp_batcher_free(t->batcher);
  g_free(t->bounds);
  tp_runtime_free(t->rt);
  free_stage_backends(t);
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


static gboolean parse_opts(Train *t, GError **err)
{
  Opts *o = &t->o;
  static const char *const formats[] = { "text", "json", NULL };
  static const char *const froms[] = { "costs", "slots", NULL };
  static const char *const lr_schedules[] = { "constant", "cosine", NULL };
  int from = 0, w = 4, n = 4, k = 0, e = 1, batch = 128, seed = 1, reps = 3;
  t->lr = 0.01, t->momentum = 0.9, t->wd = 1e-4, t->timeout = 300, t->peer_timeout = 60;
  if ((o->format && !tp_cli_choice("--format", o->format, formats, &t->fmt, err)) ||
      (o->order_from && !tp_cli_choice("--order-from", o->order_from, froms, &from, err)) ||
      (o->lr_schedule && !tp_cli_choice("--lr-schedule", o->lr_schedule, lr_schedules, &t->lr_cosine, err)) ||
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
  if (o->transport && strcmp(o->transport, "local") != 0 && strcmp(o->transport, "mpi") != 0 &&
      strcmp(o->transport, "nccl") != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport: '%s' is not a transport (local, mpi, nccl)", o->transport);
    return FALSE;
  }
  gboolean ranks = o->transport && strcmp(o->transport, "local") != 0; /* one process per stage */
  /* mpirun -np P (P > 1) with the local transport: P whole runs, each of every stage */
  const char *size_vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS" };
  for (size_t i = 0; i < G_N_ELEMENTS(size_vars) && !ranks; i++) {
    const char *v = g_getenv(size_vars[i]);
    if (v && atoi(v) > 1) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport local: started by mpirun with %d processes (%s), each "
                  "would run every stage; give --transport mpi (one stage per process) or start one process",
                  atoi(v), size_vars[i]);
      return FALSE;
    }
  }
  if (g_strcmp0(o->transport, "nccl") == 0 && !check_nccl(o, err))
    return FALSE;
  if (g_strcmp0(o->transport, "nccl") == 0 && (o->checkpoint || o->resume || o->ck_every || o->stop_after)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--%s: not with --transport nccl yet (checkpoints are of the local "
                "and mpi transports)",
                o->checkpoint ? "checkpoint" : o->resume ? "resume" : o->ck_every ? "checkpoint-every" : "stop-after");
    return FALSE;
  }
  if (ranks && (!tp_mpi_available() || !tp_mpi_launched())) {
    if (!tp_mpi_available())
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport %s: " TP_MPI_MISSING, o->transport);
    else
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport %s: start it under mpirun (mpirun -np W timeprest "
                  "train --transport %s -w W ...)", o->transport, o->transport);
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
  return tp_train_check_outputs(o, err) &&
         tp_checkpoint_options(o->checkpoint, o->resume, o->ck_every, o->stop_after, o->schedule != NULL, &t->ck, err);
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

gboolean tp_train_setup(Train *t, GError **err)
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
  /* synthetic data takes the model's input shape and classes (labels are bytes: at most 255) */
  const TpLayer *top = tp_model_layer(t->model, L - 1);
  TpDataShape shape = { (int)t->model->in_c, (int)t->model->in_h, (int)t->model->in_w,
                        top->kind == TP_LAYER_SOFTMAX_CE ? (int)MIN(top->in_elems, 255) : TP_DATA_CLASSES };
  if (!be || !tp_data_open_shaped(o->data, &shape, t->seed, &t->train, &t->test, err) ||
      !(t->batcher = tp_batcher_new(t->train, t->batch, t->N, t->seed, err)))
    return FALSE;
  if (t->model->in_c * t->model->in_h * t->model->in_w != t->train->dim) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--model: %s takes %d×%d×%d inputs, the data has %d×%d", t->model->name,
                (int)t->model->in_c, (int)t->model->in_h, (int)t->model->in_w, t->train->rows, t->train->cols);
    return FALSE;
  }
  /* every label a class of the model (files may hold more classes than the model has) */
  int classes = top->kind == TP_LAYER_SOFTMAX_CE ? (int)top->in_elems : TP_DATA_CLASSES;
  const TpDataset *sets0[] = { t->train, t->test };
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < sets0[i]->n; j++)
      if (sets0[i]->labels[j] >= classes) {
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s (its labels): label %d of sample %d is not a class of model %s (0..%d)",
                    sets0[i]->name, sets0[i]->labels[j], j + 1, t->model->name, classes - 1);
        return FALSE;
      }
  /* the data's identity by content, for checkpoints only (a digest of every byte): a copy elsewhere
   * is the same data, the same path with other contents is not */
  if (t->ck.dir || o->resume) {
    GChecksum *sum = g_checksum_new(G_CHECKSUM_SHA256);
    const TpDataset *sets[] = { t->train, t->test };
    for (int i = 0; i < 2; i++) {
      g_autofree char *head = g_strdup_printf("%d %d %d %d\n", sets[i]->n, sets[i]->rows, sets[i]->cols, sets[i]->dim);
      g_checksum_update(sum, (const guchar *)head, -1);
      g_checksum_update(sum, sets[i]->labels, sets[i]->n);
      g_checksum_update(sum, sets[i]->pixels, (gssize)sets[i]->n * sets[i]->dim);
    }
    t->data_id = g_strdup_printf("%d + %d samples of %d bytes, sha256 %s", t->train->n, t->test->n, t->train->dim,
                                 g_checksum_get_string(sum));
    g_checksum_free(sum);
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
  /* the least the stages hold (weights, momentum and gradient, the initial weights' buffer, one
   * mini-batch's activations), checked against the memory left before any of it is allocated */
  long long need = 0;
  for (int i = 0; i < L; i++) {
    const TpLayer *ly = tp_model_layer(t->model, i);
    need += 4 * (4 * ly->params + (long long)t->batch * ly->out_elems);
  }
  g_autofree char *what = g_strdup_printf("training %s with --batch %d", t->model->name, t->batch);
  if (!tp_memory_check(what, t->W, t->N, t->K, need, err))
    return FALSE;
  TpRuntimeConfig cfg = { t->model, t->bounds, t->W, t->N, t->batch, be, t->train, (float)t->lr, (float)t->momentum,
                          (float)t->wd, t->seed, t->timeout, tp_train_lr_steps(t) };
  if (!make_stage_backends(t, be, err) ||
      !(t->rt = tp_runtime_new_on(&cfg, (const TpBackend *const *)t->stage_be, err)))
    return FALSE;
  t->test_acc = g_array_new(FALSE, FALSE, sizeof(double));
  t->test_loss = g_array_new(FALSE, FALSE, sizeof(double));
  t->epoch_time = g_array_new(FALSE, FALSE, sizeof(double));
  t->train_loss = g_array_new(FALSE, FALSE, sizeof(double));
  t->ep_loss = g_array_new(FALSE, FALSE, sizeof(double));
  t->ep_upd = g_array_new(FALSE, FALSE, sizeof(double));
  t->ep_correct = g_array_new(FALSE, FALSE, sizeof(int));
  t->events = g_array_new(FALSE, FALSE, sizeof(TpEventRow));
  t->log = g_string_new(NULL);
  tp_trainlog_header(t->log);
  t->versions_match = TRUE;
  if (t->ck.every > t->K)
    t->ck.every = t->K; /* one segment: the run itself */
  if (!o->resume && !tp_train_check_ck_dir(t, err))
    return FALSE;
  return !o->resume || t->mpi || tp_train_resume(t, err); /* --transport mpi: once every rank is set up */
}

gboolean tp_train_check_ck_dir(Train *t, GError **err)
{
  if (!t->ck.dir)
    return TRUE;
  const char *flag = t->o.checkpoint ? "--checkpoint" : "--resume";
  if (!tp_checkpoint_check_dir(t->ck.dir, err)) {
    g_prefix_error(err, "%s: ", flag);
    return FALSE;
  }
  /* one run at a time writes there (--transport mpi: rank 0 holds the lock for the job) */
  if (t->rank == 0 && !tp_checkpoint_lock(t->ck.dir, flag, err))
    return FALSE;
  t->generation = MAX(t->generation, tp_checkpoint_first_generation(t->ck.dir));
  return TRUE;
}

/* A run stopped at a checkpoint: one line (--transport mpi: from rank 0), and exit 128 + the signal
 * (130 SIGINT, 143 SIGTERM, 129 SIGHUP), or 0 for --stop-after. */
G_NORETURN void tp_train_stopped(Train *t)
{
  int sig = t->interrupted;
  if (t->rank == 0)
    fprintf(stderr, "%s: checkpoint at epoch %d, mini-batch %d written to %s; resume with --resume %s\n",
            sig > 0 ? "interrupted" : "stopped", t->ck_epoch, t->ck_index, t->ck.dir, t->ck.dir);
  fflush(stdout);
  tp_train_clear(t);
  exit(sig > 0 ? 128 + sig : 0);
}

/* The arguments that must agree across ranks. */
static char *join_args(int argc, char **argv)
{
  GString *s = g_string_new(NULL);
  for (int i = 0; i < argc; i++)
    g_string_append_c(g_string_append(s, argv[i]), '\x1f'); /* a separator no argument holds */
  return g_string_free(s, FALSE);
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
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &o->model, "Model name or .model file (default mlp)", "NAME|FILE" },
    { "batch", 'b', 0, G_OPTION_ARG_STRING, &o->batch, "Samples per mini-batch (default 128)", "B" },
    { "data", 'd', 0, G_OPTION_ARG_FILENAME, &o->data, "Fashion-MNIST directory (default " TP_DATA_DEFAULT_DIR
      ") or synthetic[:TRAIN[:TEST]]", "DIR" },
    { "seed", 0, 0, G_OPTION_ARG_STRING, &o->seed, "Seed of the weights, data order and synthetic data (default 1)", "S" },
    { "lr", 0, 0, G_OPTION_ARG_STRING, &o->lr, "Learning rate (default 0.01)", "LR" },
    { "lr-schedule", 0, 0, G_OPTION_ARG_STRING, &o->lr_schedule,
      "constant (default) or cosine: lr·(1 + cos(π·(i−1)/total))/2 for the update of mini-batch i of the whole "
      "run (total: its mini-batches over every epoch)", "NAME" },
    { "momentum", 0, 0, G_OPTION_ARG_STRING, &o->momentum, "SGD momentum (default 0.9)", "M" },
    { "weight-decay", 0, 0, G_OPTION_ARG_STRING, &o->wd, "Weight decay (default 0.0001)", "WD" },
    { "backend", 0, 0, G_OPTION_ARG_STRING, &o->backend, "Compute backend: cpu (default) or cuda", "NAME" },
    { "devices", 0, 0, G_OPTION_ARG_STRING, &o->devices,
      "--backend cuda: GPUs of the stages, stage s on the s-th of the list round-robin (default: stage s on GPU (s-1) mod count)", "D0,D1,…" },
    { "transport", 0, 0, G_OPTION_ARG_STRING, &o->transport,
      "Stage transport: local (default; threads), mpi (under mpirun -np W: rank r runs stage r+1) or nccl "
      "(as mpi, GPU stages: activations and gradients by NCCL between GPU buffers; needs --backend cuda)", "NAME" },
    { "order-from", 0, 0, G_OPTION_ARG_STRING, &o->order_from,
      "Fix the nf1b/1f1b-async order on the profiled costs (default) or on unit slots", "costs|slots" },
    { "schedule", 0, 0, G_OPTION_ARG_FILENAME, &o->schedule, "Run this schedule file (CSV or JSON)", "FILE" },
    { "significance", 0, 0, G_OPTION_ARG_STRING, &o->significance,
      "I-TiMePReSt's s(d): exp[:TAU] (default exp:1), linear, const:C", "S" },
    { "csv", 0, 0, G_OPTION_ARG_FILENAME, &o->csv, "Write the training log (CSV, as plot convergence reads)", "LOG" },
    { "trace", 0, 0, G_OPTION_ARG_FILENAME, &o->trace,
      "Write the measured events (the simulator's event CSV) to FILE, the schedule run to FILE.schedule.csv "
      "and its predicted events to FILE.predicted.csv (FILE without its .csv)",
      "FILE" },
    { "format", 'f', 0, G_OPTION_ARG_STRING, &o->format, "Report format: text (default) or json", "FORMAT" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &o->output, "Write the report to FILE", "FILE" },
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &o->quiet, "No progress bar", NULL },
    { "checkpoint", 0, 0, G_OPTION_ARG_FILENAME, &o->checkpoint,
      "Write checkpoints into DIR: at the end of every run (epoch), every --checkpoint-every mini-batches, "
      "and on SIGINT/SIGTERM/SIGHUP", "DIR" },
    { "checkpoint-every", 0, 0, G_OPTION_ARG_STRING, &o->ck_every,
      "Cut every run into segments of M mini-batches (the pipeline drains after each) and checkpoint after each", "M" },
    { "resume", 0, 0, G_OPTION_ARG_FILENAME, &o->resume,
      "Continue the run whose checkpoint is in DIR (the same options; keeps checkpointing there)", "DIR" },
    { "stop-after", 0, 0, G_OPTION_ARG_STRING, &o->stop_after,
      "Stop at the first checkpoint after D mini-batches, as an interruption does (exit 0)", "D" },
    { "timeout", 0, 0, G_OPTION_ARG_STRING, &o->timeout, "Seconds a stage waits for a message (default 300)", "S" },
    { "peer-timeout", 0, 0, G_OPTION_ARG_STRING, &o->peer_timeout,
      "--transport mpi: seconds a rank waits for another before the run ends (default 60)", "S" },
    { "profile-reps", 0, 0, G_OPTION_ARG_STRING, &o->reps, "Timed repetitions per profiled operation, and mini-batches of the pipelined profile beyond 2W + 1 (default 3)", "R" },
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
  /* a flag refused before MPI starts is refused alike by every rank of mpirun: rank 0 says it (the
   * others end with the same status, silently), as for every refusal after MPI starts */
  const char *rank = g_getenv("OMPI_COMM_WORLD_RANK") ? g_getenv("OMPI_COMM_WORLD_RANK") : g_getenv("PMI_RANK");
  if (!ok && rank && atoi(rank) > 0 && tp_error_exit_status(*err) == 2) {
    g_clear_error(err);
    tp_train_clear(&t);
    exit(2);
  }
  if (ok && o->transport && strcmp(o->transport, "local") != 0) /* mpi, nccl: one rank per stage */
    ok = tp_train_mpi(&t, args, err);
  else {
    if (ok && t.ck.dir)
      tp_checkpoint_catch_signals();
    ok = ok && tp_train_setup(&t, err) && tp_train_run_all(&t, err);
    if (ok && t.interrupted)
      tp_train_stopped(&t);
    ok = ok && tp_train_write_outputs(&t, err);
  }
  tp_train_clear(&t);
  return ok;
}
