/* cmd_train.c — `timeprest train`: real training with a schedule by the trainer (train/tp_train.h):
 * the layers split into W stages balanced by FLOPs, each stage profiled before training, the order
 * fixed on the profiled costs (or on unit slots, or read from a file), the run simulated with those
 * costs, and the measurement reported beside the prediction.  This file: the options, checked and
 * parsed into the trainer's configuration, and the command; the outputs are in tp_train_report.c. */
#include "config.h"
#include "tp_train.h"
#include "tp_train_report.h"
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_group_mpi.h"
#include "tp_mpi.h"
#include "tp_policy.h"
#include "tp_nccl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The options as given (strings), parsed into the trainer's configuration by parse_opts. */
typedef struct {
  char *preset, *workers, *micro, *mini, *epochs, *model, *batch, *data, *seed, *lr, *momentum, *wd;
  char *backend, *transport, *order_from, *schedule, *csv, *trace, *format, *output, *timeout, *reps, *threads;
  char *significance, *peer_timeout, *devices, *lr_schedule, *optimizer, *beta1, *beta2, *eps, *warmup;
  char *checkpoint, *resume, *ck_every, *stop_after, *split, *chunks, *fuse, *data_parallel, *act_limit;
  gboolean quiet, recompute;
  int *split_counts;        /* --split parsed: [W] layers per stage */
} Opts;

static void opts_clear(Opts *o)
{
  char **all[] = { &o->preset, &o->workers, &o->micro, &o->mini, &o->epochs, &o->model, &o->batch, &o->data,
                   &o->seed, &o->lr, &o->momentum, &o->wd, &o->backend, &o->transport, &o->order_from,
                   &o->schedule, &o->csv, &o->trace, &o->format, &o->output, &o->timeout, &o->reps, &o->threads,
                   &o->significance, &o->peer_timeout, &o->checkpoint, &o->resume, &o->ck_every, &o->stop_after,
                   &o->devices, &o->lr_schedule, &o->split, &o->chunks, &o->fuse, &o->optimizer, &o->beta1,
                   &o->beta2, &o->eps, &o->warmup, &o->data_parallel, &o->act_limit };
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    g_clear_pointer(all[i], g_free);
  g_clear_pointer(&o->split_counts, g_free);
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

/* --transport nccl links GPU stages that run one process (MPI rank) per GPU: it needs the NCCL
 * transport in the build and --backend cuda, each missing one line, before MPI (the registry
 * answers without loading a backend; whether a GPU is present the trainer finds when it makes the
 * stages' backends). */
static gboolean check_nccl(const Opts *o, GError **err)
{
  if (!tp_nccl_available()) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport nccl: " TP_NCCL_MISSING);
    return FALSE;
  }
  const TpBackendReg *reg = tp_backend_find(o->backend ? o->backend : "cpu", NULL);
  if (!reg || !reg->device_noun) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport nccl: links GPU stages; give --backend cuda");
    return FALSE;
  }
  return TRUE;
}

/* The processes of the run: this one (--transport local), or one MPI rank per stage with the
 * stages' links over MPI or, for GPU stages, NCCL (the backend asked to load its code eagerly before
 * CUDA starts: no module loaded inside a launch while NCCL waits). */
static gboolean start_group(const Opts *o, Train *t, GError **err)
{
  if (!o->transport || strcmp(o->transport, "local") == 0) {
    t->group = tp_group_single_new();
    return TRUE;
  }
  gboolean nccl = strcmp(o->transport, "nccl") == 0;
  const TpBackendReg *reg = nccl ? tp_backend_find(o->backend ? o->backend : "cpu", NULL) : NULL;
  if (reg && reg->load_eagerly)
    reg->load_eagerly();
  t->group = tp_group_mpi_start(t->cfg.peer_timeout, nccl ? tp_nccl_new : NULL, nccl ? tp_nccl_reduce_new : NULL,
                                MAX(t->cfg.data_parallel, 1), err);
  return t->group != NULL;
}

/* The checkpoint options, checked: --checkpoint DIR, --resume DIR (which keeps checkpointing there
 * unless --checkpoint names another), --checkpoint-every M, --stop-after D. */
static gboolean checkpoint_options(const char *checkpoint, const char *resume, const char *every, const char *stop_after,
                               gboolean schedule_file, TpCheckpointOpts *out, GError **err)
{
  memset(out, 0, sizeof *out);
  if ((every && !tp_cli_int("--checkpoint-every", every, 1, TP_MAX_MINI, &out->every, err)) ||
      (stop_after && !tp_cli_int("--stop-after", stop_after, 1, G_MAXINT, &out->stop_after, err)))
    return FALSE;
  out->dir = checkpoint ? checkpoint : resume;
  if ((every || stop_after) && !out->dir) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: needs --checkpoint DIR (or --resume DIR)",
                every ? "--checkpoint-every" : "--stop-after");
    return FALSE;
  }
  if (every && schedule_file) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--checkpoint-every: a --schedule file runs whole; checkpoints at its end");
    return FALSE;
  }
  return TRUE;
}

/* The numbers and choices given, parsed (where the configuration has no field: into p). */
typedef struct {
  int from, w, n, k, e, batch, seed, reps, cosine, adamw, chunks;
} Parsed;

/* --optimizer and its defaults (SGD's, or AdamW's: PyTorch's lr 1e-3, betas 0.9 and 0.999, eps 1e-8,
 * weight decay 0.01); a flag of the other optimizer refused. */
static gboolean parse_optimizer(const Opts *o, TpTrainConfig *c, int *adamw, GError **err)
{
  static const char *const optimizers[] = { "sgd", "adamw", NULL };
  if (o->optimizer && !tp_cli_choice("--optimizer", o->optimizer, optimizers, adamw, err))
    return FALSE;
  c->opt.lr = *adamw ? 1e-3 : 0.01, c->opt.momentum = 0.9, c->opt.wd = *adamw ? 0.01 : 1e-4, c->timeout = 300, c->peer_timeout = 60;
  c->opt.beta1 = 0.9, c->opt.beta2 = 0.999, c->opt.eps = 1e-8, c->opt.warmup = -1;
  const char *sgd_only = o->momentum ? "--momentum" : NULL;
  const char *adamw_only = o->beta1 ? "--beta1" : o->beta2 ? "--beta2" : o->eps ? "--eps" : NULL;
  if (*adamw ? sgd_only != NULL : adamw_only != NULL) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %s", *adamw ? sgd_only : adamw_only,
                *adamw ? "SGD's momentum; AdamW's moments decay by --beta1 and --beta2" : "AdamW's; give --optimizer adamw");
    return FALSE;
  }
  return TRUE;
}

/* Each number and choice in its range. */
static gboolean parse_values(const Opts *o, TpTrainConfig *c, Parsed *p, int *fmt, GError **err)
{
  static const char *const formats[] = { "text", "json", NULL };
  static const char *const froms[] = { "costs", "slots", NULL };
  static const char *const lr_schedules[] = { "constant", "cosine", "warmup-cosine", NULL };
  return (!o->format || tp_cli_choice("--format", o->format, formats, fmt, err)) &&
         (!o->order_from || tp_cli_choice("--order-from", o->order_from, froms, &p->from, err)) &&
         (!o->lr_schedule || tp_cli_choice("--lr-schedule", o->lr_schedule, lr_schedules, &p->cosine, err)) &&
         (!o->workers || tp_cli_int("-w", o->workers, 1, 64, &p->w, err)) &&
         (!o->micro || tp_cli_int("-n", o->micro, 1, TP_MAX_MICRO, &p->n, err)) &&
         (!o->mini || tp_cli_int("-k", o->mini, 1, TP_MAX_MINI, &p->k, err)) &&
         (!o->epochs || tp_cli_int("--epochs", o->epochs, 1, 100000, &p->e, err)) &&
         (!o->batch || tp_cli_int("--batch", o->batch, 1, 1 << 20, &p->batch, err)) &&
         (!o->seed || tp_cli_int("--seed", o->seed, 0, G_MAXINT, &p->seed, err)) &&
         (!o->reps || tp_cli_int("--profile-reps", o->reps, 1, 1000, &p->reps, err)) &&
         (!o->threads || tp_cli_int("--threads", o->threads, 1, 1024, &c->threads, err)) &&
         (!o->data_parallel || tp_cli_int("--data-parallel", o->data_parallel, 1, 1024, &c->data_parallel, err)) &&
         opt_double("--lr", o->lr, 0, 1e6, &c->opt.lr, err) && opt_double("--momentum", o->momentum, 0, 1, &c->opt.momentum, err) &&
         opt_double("--weight-decay", o->wd, 0, 1e6, &c->opt.wd, err) &&
         /* below 1 as the float they become: a β of 1.0f makes the bias correction 0 and the step NaN */
         opt_double("--beta1", o->beta1, 0, 0.9999999, &c->opt.beta1, err) &&
         opt_double("--beta2", o->beta2, 0, 0.9999999, &c->opt.beta2, err) &&
         opt_double("--eps", o->eps, 1e-30, 1, &c->opt.eps, err) &&
         (!o->warmup || tp_cli_int("--warmup", o->warmup, 1, G_MAXINT, &c->opt.warmup, err)) &&
         opt_double("--timeout", o->timeout, 0.001, 1e7, &c->timeout, err) &&
         opt_double("--peer-timeout", o->peer_timeout, 0.001, 1e7, &c->peer_timeout, err);
}

/* --threads and --devices against the backend's registration (which loads nothing); -k against
 * --epochs. */
static gboolean check_backend_flags(const Opts *o, const TpTrainConfig *c, GError **err)
{
  const TpBackendReg *reg = tp_backend_find(o->backend ? o->backend : "cpu", NULL);
  if (c->threads && reg && !reg->set_threads) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--threads: backend %s has no threads per call to set", reg->name);
    return FALSE;
  }
  if (o->devices && reg && !reg->device_noun) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--devices: only with --backend cuda");
    return FALSE;
  }
  if (o->mini && o->epochs) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-k and --epochs: give one of them");
    return FALSE;
  }
  return TRUE;
}

/* --transport: a name it knows, what it needs in the build and the launch (mpirun -np P, P > 1, with
 * the local transport would make P whole runs, each of every stage). */
static gboolean check_transport(const Opts *o, GError **err)
{
  if (o->transport && strcmp(o->transport, "local") != 0 && strcmp(o->transport, "mpi") != 0 &&
      strcmp(o->transport, "nccl") != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport: '%s' is not a transport (local, mpi, nccl)", o->transport);
    return FALSE;
  }
  gboolean ranks = o->transport && strcmp(o->transport, "local") != 0; /* one process per stage */
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
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport %s: %s", o->transport, tp_mpi_missing());
    else
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport %s: start it under mpirun (mpirun -np W timeprest "
                  "train --transport %s -w W ...)", o->transport, o->transport);
    return FALSE;
  }
  return TRUE;
}

/* The schedule: a file, or a preset and its chunks per worker. */
static gboolean parse_schedule(const Opts *o, TpTrainConfig *c, Parsed *p, GError **err)
{
  if (o->schedule && (o->preset || o->order_from || o->mini || o->significance)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--schedule: the file gives the schedule; drop -s, -k, --order-from and "
                "--significance");
    return FALSE;
  }
  if (!o->schedule && !(c->sched.preset = tp_cli_preset(o->preset, err)))
    return FALSE;
  p->chunks = o->schedule ? 1 : tp_order_default_chunks(c->sched.preset->order);
  if (o->chunks && (o->schedule || !tp_cli_int("--chunks", o->chunks, 1, TP_MAX_WORKERS, &p->chunks, err) ||
                    !tp_chunks_check(c->sched.preset->order, p->w, p->chunks, p->n, err))) {
    if (o->schedule)
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--chunks: the schedule file gives its chunks; drop --chunks");
    return FALSE;
  }
  if (o->act_limit && o->schedule) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--activation-limit: the schedule file gives the schedule; drop it");
    return FALSE;
  }
  if (!o->schedule && !tp_cli_act_limit(o->act_limit, c->sched.preset->order, &c->sched.act_limit, err))
    return FALSE;
  return TRUE;
}

/* The run's shape and training into the configuration; --warmup only with warmup-cosine. */
static gboolean take_values(const Opts *o, TpTrainConfig *c, const Parsed *p, GError **err)
{
  c->sched.chunks = p->chunks;
  c->sched.workers = p->w, c->sched.N = p->n, c->sched.K = p->k, c->sched.epochs = p->e, c->batch = p->batch, c->seed = (guint32)p->seed;
  c->reps = p->reps;
  c->sched.workers_given = o->workers != NULL, c->sched.N_given = o->micro != NULL;
  c->sched.per_epoch = !o->mini;
  c->opt.lr_cosine = p->cosine >= 1;
  c->opt.adamw = p->adamw == 1;
  if (o->warmup && p->cosine != 2) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--warmup: only with --lr-schedule warmup-cosine");
    return FALSE;
  }
  if (p->cosine != 2)
    c->opt.warmup = 0;
  c->sched.slots = p->from == 1;
  c->sched.recompute = o->recompute;
  return TRUE;
}

/* --fuse-forwards: auto, on or off; on refused where it can never apply, before anything runs. */
static gboolean parse_fuse(const Opts *o, TpTrainConfig *c, GError **err)
{
  if (!o->fuse)
    return TRUE;
  if (!strcmp(o->fuse, "auto") || !strcmp(o->fuse, "on") || !strcmp(o->fuse, "off"))
    c->sched.fuse = !strcmp(o->fuse, "auto") ? TP_FUSE_AUTO : !strcmp(o->fuse, "on") ? TP_FUSE_ON : TP_FUSE_OFF;
  else {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--fuse-forwards: expected auto, on or off, got '%s'", o->fuse);
    return FALSE;
  }
  if (o->schedule && c->sched.fuse != TP_FUSE_AUTO) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--fuse-forwards %s: not with --schedule (the file gives the forwards; "
                "timeprest schedule --fuse-forwards writes a fused one)", o->fuse);
    return FALSE;
  }
  if (c->sched.fuse == TP_FUSE_ON && c->sched.preset && (c->sched.preset->order != TP_ORDER_NF1B || c->sched.N < 2)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--fuse-forwards on: -s %s%s: " TP_FUSE_NOTHING, c->sched.preset->name,
                c->sched.N < 2 ? " -n 1" : "");
    return FALSE;
  }
  return TRUE;
}

/* --split (the layers per stage; plan --run-top gives the split it chose) and --significance. */
static gboolean parse_split_significance(Opts *o, TpTrainConfig *c, GError **err)
{
  if (o->split) {
    if (o->schedule) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--split: not with --schedule (the file gives W)");
      return FALSE;
    }
    o->split_counts = g_new(int, c->sched.workers * c->sched.chunks); /* one count per stage: each worker's chunks */
    if (!tp_cli_split(o->split, c->sched.workers * c->sched.chunks, o->split_counts, err))
      return FALSE;
    c->sched.split = o->split_counts;
  }
  if (o->significance) {
    if (!tp_significance_parse(o->significance, &c->sched.sig, err)) {
      g_prefix_error(err, "--significance: ");
      return FALSE;
    }
    c->sched.has_sig = TRUE;
  }
  return TRUE;
}

/* train's options checked (each in its range, against each other, against the build and the launch;
 * nothing loaded) and parsed into the trainer's configuration. */
static gboolean parse_opts(Opts *o, TpTrainConfig *c, int *fmt, GError **err)
{
  Parsed p = { .w = 4, .n = 4, .e = 1, .batch = 128, .seed = 1, .reps = 3 };
  if (!parse_optimizer(o, c, &p.adamw, err) || !parse_values(o, c, &p, fmt, err) ||
      !check_backend_flags(o, c, err) || !check_transport(o, err) || !parse_schedule(o, c, &p, err) ||
      !take_values(o, c, &p, err) || !parse_fuse(o, c, err) || !parse_split_significance(o, c, err))
    return FALSE;
  c->sched.file = o->schedule, c->model = o->model, c->data = o->data, c->backend = o->backend;
  c->devices = o->devices, c->resume = o->resume;
  c->ck_dir_is_resume = !o->checkpoint && o->resume;
  c->progress = !o->quiet;
  c->keep_events = o->trace != NULL;
  return tp_train_check_outputs(o->csv, o->trace, o->output, o->checkpoint, o->resume, o->model, o->schedule, o->data,
                                err) &&
         checkpoint_options(o->checkpoint, o->resume, o->ck_every, o->stop_after, o->schedule != NULL, &c->ck, err);
}

/* The arguments that must agree across ranks. */
static char *join_args(int argc, char **argv)
{
  GString *s = g_string_new(NULL);
  for (int i = 0; i < argc; i++)
    g_string_append_c(g_string_append(s, argv[i]), '\x1f'); /* a separator no argument holds */
  return g_string_free(s, FALSE);
}

/* The schedule and the run's shape: preset, stages, micro-batches, chunks, length. */
static void schedule_entries(GOptionContext *ctx, Opts *o)
{
  GOptionEntry entries[] = {
    { "preset", 's', 0, G_OPTION_ARG_STRING, &o->preset, "Schedule preset (default timeprest)", "PRESET" },
    { "workers", 'w', 0, G_OPTION_ARG_STRING, &o->workers, "Pipeline stages W (default 4; 1 = plain mini-batch SGD)", "W" },
    { "micro-batches", 'n', 0, G_OPTION_ARG_STRING, &o->micro, "Micro-batches per mini-batch N (default 4)", "N" },
    { "chunks", 0, 0, G_OPTION_ARG_STRING, &o->chunks,
      "Model chunks per worker for interleaved-1f1b (default 2; zb-v holds 2): W x V stages, a worker's chunks "
      "taking turns in its order (--transport local)", "V" },
    { "activation-limit", 0, 0, G_OPTION_ARG_STRING, &o->act_limit,
      "zb-auto's and zb-v's limit: micro-batches' stored activations a stage (zb-v: a worker's two chunks) may "
      "hold (a W keeps M_W of them; default 2W, zb-v W)", "X" },
    { "mini-batches", 'k', 0, G_OPTION_ARG_STRING, &o->mini, "Train K mini-batches (one schedule of K)", "K" },
    { "epochs", 0, 0, G_OPTION_ARG_STRING, &o->epochs, "Train E epochs, one schedule per epoch (default 1)", "E" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_option_context_add_main_entries(ctx, entries, NULL);
}

/* The model, its data and its training: split, seed, optimizer and its settings. */
static void model_entries(GOptionContext *ctx, Opts *o)
{
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &o->model, "Model name, .model file or config.json (default mlp)", "NAME|FILE" },
    { "batch", 'b', 0, G_OPTION_ARG_STRING, &o->batch, "Samples per mini-batch (default 128)", "B" },
    { "split", 0, 0, G_OPTION_ARG_STRING, &o->split,
      "Layers per stage, e.g. 6,5,5 (default: split balancing FLOPs)", "COUNTS" },
    { "data", 'd', 0, G_OPTION_ARG_FILENAME, &o->data, "Fashion-MNIST directory (default " TP_DATA_DEFAULT_DIR
      ") or synthetic[:TRAIN[:TEST]]; a language model: text:FILE (default the fortunes package's texts) or "
      "synthetic tokens", "DIR" },
    { "seed", 0, 0, G_OPTION_ARG_STRING, &o->seed, "Seed of the weights, data order and synthetic data (default 1)", "S" },
    { "optimizer", 0, 0, G_OPTION_ARG_STRING, &o->optimizer,
      "sgd (default: with momentum) or adamw (decoupled weight decay); either's state lives with the latest weights",
      "NAME" },
    { "lr", 0, 0, G_OPTION_ARG_STRING, &o->lr, "Learning rate (default 0.01; adamw 0.001)", "LR" },
    { "lr-schedule", 0, 0, G_OPTION_ARG_STRING, &o->lr_schedule,
      "constant (default), cosine: lr·(1 + cos(π·(i−1)/total))/2 for the update of mini-batch i of the whole "
      "run (total: its mini-batches over every epoch), or warmup-cosine: lr·i/U for the first U, then the cosine "
      "over the rest", "NAME" },
    { "warmup", 0, 0, G_OPTION_ARG_STRING, &o->warmup,
      "warmup-cosine's warm-up U in mini-batches (default a tenth of the run)", "U" },
    { "momentum", 0, 0, G_OPTION_ARG_STRING, &o->momentum, "SGD momentum (default 0.9)", "M" },
    { "beta1", 0, 0, G_OPTION_ARG_STRING, &o->beta1, "AdamW's first-moment decay (default 0.9)", "B1" },
    { "beta2", 0, 0, G_OPTION_ARG_STRING, &o->beta2, "AdamW's second-moment decay (default 0.999)", "B2" },
    { "eps", 0, 0, G_OPTION_ARG_STRING, &o->eps, "AdamW's epsilon (default 1e-8)", "E" },
    { "weight-decay", 0, 0, G_OPTION_ARG_STRING, &o->wd, "Weight decay (default 0.0001; adamw 0.01, decoupled)", "WD" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_option_context_add_main_entries(ctx, entries, NULL);
}

/* Where and how the stages run (backend, devices, threads, transport) and what they run (the order, a
 * schedule file, recomputation, fused forwards, significance). */
static void execution_entries(GOptionContext *ctx, Opts *o)
{
  GOptionEntry entries[] = {
    { "backend", 0, 0, G_OPTION_ARG_STRING, &o->backend, "Compute backend: cpu (default) or cuda", "NAME" },
    { "devices", 0, 0, G_OPTION_ARG_STRING, &o->devices,
      "--backend cuda: GPUs of the stages, stage s on the s-th of the list round-robin (default: stage s on GPU (s-1) mod count)", "D0,D1,…" },
    { "threads", 0, 0, G_OPTION_ARG_STRING, &o->threads,
      "--backend cpu: BLAS threads per call (default 1: each stage on its own core; one stage on every core: -w 1 --threads CORES)", "T" },
    { "data-parallel", 0, 0, G_OPTION_ARG_STRING, &o->data_parallel,
      "D replicas of the pipeline, each on B/D samples of every mini-batch, their gradients averaged before every "
      "update (default 1; threads of this process, cpu backend)", "D" },
    { "transport", 0, 0, G_OPTION_ARG_STRING, &o->transport,
      "Stage transport: local (default; threads), mpi (under mpirun -np W: rank r runs stage r+1) or nccl "
      "(as mpi, GPU stages: activations and gradients by NCCL between GPU buffers; needs --backend cuda)", "NAME" },
    { "order-from", 0, 0, G_OPTION_ARG_STRING, &o->order_from,
      "Fix the nf1b/1f1b-async order on the profiled costs (default) or on unit slots", "costs|slots" },
    { "schedule", 0, 0, G_OPTION_ARG_FILENAME, &o->schedule, "Run this schedule file (CSV or JSON)", "FILE" },
    { "recompute", 0, 0, G_OPTION_ARG_NONE, &o->recompute,
      "Store only each stage's input of a forward; a backward first runs the forward again with the weights it "
      "reads (docs/recompute.md)", NULL },
    { "fuse-forwards", 0, 0, G_OPTION_ARG_STRING, &o->fuse,
      "auto (default), on or off: run the N forwards of a mini-batch as one forward of the whole mini-batch where they "
      "run back to back on every stage reading one version (nf1b: TiMePReSt and its variants) — the same arithmetic "
      "in larger products; auto when the simulator on the profiled costs says it is faster", "auto|on|off" },
    { "significance", 0, 0, G_OPTION_ARG_STRING, &o->significance,
      "I-TiMePReSt's s(d): exp[:TAU] (default exp:1), linear, const:C", "S" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_option_context_add_main_entries(ctx, entries, NULL);
}

/* The outputs, checkpoints and time limits. */
static void output_entries(GOptionContext *ctx, Opts *o)
{
  GOptionEntry entries[] = {
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
      "Stop after D mini-batches with a checkpoint, as an interruption does (exit 0)", "D" },
    { "timeout", 0, 0, G_OPTION_ARG_STRING, &o->timeout, "Seconds a stage waits for a message (default 300)", "S" },
    { "peer-timeout", 0, 0, G_OPTION_ARG_STRING, &o->peer_timeout,
      "--transport mpi: seconds a rank waits for another before the run ends (default 60)", "S" },
    { "profile-reps", 0, 0, G_OPTION_ARG_STRING, &o->reps, "Timed repetitions per profiled operation, and mini-batches of the pipelined profile beyond 2W + 1 (default 3)", "R" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_option_context_add_main_entries(ctx, entries, NULL);
}

/* train's options, into o (in four tables, one after the other in --help). */
static GOptionContext *train_context(Opts *o)
{
  GOptionContext *ctx = g_option_context_new("- train a network with a schedule, and compare with its prediction");
  schedule_entries(ctx, o);
  model_entries(ctx, o);
  execution_entries(ctx, o);
  output_entries(ctx, o);
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
  return ctx;
}

gboolean tp_cmd_train(int argc, char **argv, GError **err)
{
  Opts opts = { 0 };
  Opts *o = &opts;
  g_autoptr(GOptionContext) ctx = train_context(o);
  g_autofree char *args = join_args(argc, argv);
  Train t = { 0 };
  TpTrainOutputs out = { 0 };
  gboolean ok = tp_cli_parse(ctx, &argc, &argv, err) && parse_opts(o, &t.cfg, &out.json, err);
  /* a flag refused before MPI starts is refused alike by every rank of mpirun: rank 0 says it (the
   * others end with the same status, silently), as for every refusal after MPI starts */
  if (!ok && tp_cli_silent_rank(err)) {
    tp_train_clear(&t);
    opts_clear(o);
    exit(2);
  }
  TpTrainEnd end = { .ended = FALSE };
  if (ok && (ok = start_group(o, &t, err))) {
    out.csv = o->csv, out.trace = o->trace, out.output = o->output;
    ok = tp_train_main(&t, args, tp_train_write_outputs, &out, &end, err);
  }
  if (!ok && end.failed) { /* one process per stage: this rank's line ends the job */
    tp_cli_name_flag(err);
    tp_group_fail(t.group, (*err)->message, end.status);
  }
  if (end.ended && end.says) /* stopped at a checkpoint */
    fprintf(stderr, "%s: checkpoint at epoch %d, mini-batch %d written to %s; resume with --resume %s\n",
            end.signal > 0 ? "interrupted" : "stopped", t.pos.ck_epoch, t.pos.ck_index, t.cfg.ck.dir, t.cfg.ck.dir);
  tp_train_clear(&t);
  opts_clear(o);
  if (end.ended) { /* its status, whatever the line (another rank's failure: that rank says why) */
    fflush(stdout);
    exit(end.status);
  }
  return ok;
}

/* The measurement of a run, as tp_train_measure takes it from the trainer. */
typedef struct {
  double t_minibatch;
  int threads;
} Measured;

static gboolean take_measured(const Train *t, gpointer data, GError **err)
{
  Measured *m = data;
  if (!t->res.cmp_ready) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "the run has no measured time per mini-batch");
    return FALSE;
  }
  m->t_minibatch = t->res.cmp.measured.t_minibatch, m->threads = MAX(t->cfg.threads, 1);
  return TRUE;
}

gboolean tp_train_measure(int argc, char **argv, double *t_minibatch, int *threads, GError **err)
{
  Opts opts = { 0 };
  g_autoptr(GOptionContext) ctx = train_context(&opts);
  Train t = { 0 };
  TpTrainOutputs out = { 0 };
  Measured m = { 0 };
  TpTrainEnd end = { .ended = FALSE };
  gboolean ok = tp_cli_parse(ctx, &argc, &argv, err) && parse_opts(&opts, &t.cfg, &out.json, err) &&
                (t.group = tp_group_single_new()) && tp_train_main(&t, "", take_measured, &m, &end, err);
  tp_train_clear(&t);
  opts_clear(&opts);
  *t_minibatch = m.t_minibatch, *threads = m.threads;
  return ok && !end.ended;
}
