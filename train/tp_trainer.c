/* tp_trainer.c — the trainer's set-up and teardown: the model, the data, the layers split into W
 * stages balanced by FLOPs, one backend instance per stage on GPUs, the runtime; the run in one
 * process (tp_train_main), the line of a run stopped at a checkpoint, the weights' digest. */
#include "config.h"
#include "tp_train.h"
#include "tp_train_priv.h"
#include "tp_trainlog.h"
#include "tp_digest.h"
#include "tp_error.h"
#include "tp_tie.h"
#include "tp_signal.h"
#include "tp_format.h"
#include "tp_net.h"
#include "tp_partition.h"
#include "tp_policy.h"
#include "tp_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Interleaved stages: each chunk on its worker's device, worker r on the r-th of the devices list
 * round-robin, or on device r mod count — the list of the stages' devices, one per stage. */
static char *chunk_devices(const Train *t, const TpBackendReg *reg)
{
  TpChunkMap map = t->s ? t->s->map : tp_order_chunk_map(t->cfg.sched.preset->order, t->V);
  int R = t->W / t->V, count = MAX(reg->device_count(NULL), 1);
  g_auto(GStrv) given = t->cfg.devices ? g_strsplit(t->cfg.devices, ",", -1) : NULL;
  int n = given ? (int)g_strv_length(given) : 0;
  GString *list = g_string_new(NULL);
  for (int s = 0; s < t->W; s++) {
    int r = tp_chunk_map_rank(map, R, s);
    if (s)
      g_string_append_c(list, ',');
    if (n)
      g_string_append(list, g_strstrip(given[r % n]));
    else
      g_string_append_printf(list, "%d", r % count);
  }
  return g_string_free(list, FALSE);
}

/* cuda: every stage gets an instance of its own (its own stream), stage s on visible GPU
 * (s − 1) mod count or on the devices list round-robin (interleaved stages: on their worker's, as
 * worker r would be); a rank of one process per stage makes its own stage's alone.  Other backends
 * share one instance and take no devices. */
static gboolean make_stage_backends(Train *t, const TpBackendReg *reg, GError **err)
{
  if (!reg->device_noun) {
    if (t->cfg.devices) {
      g_set_error(err, TP_ERROR, TP_ERROR_PARAM_DEVICES, "only with the cuda backend");
      return FALSE;
    }
    return TRUE;
  }
  t->dev.list = t->V > 1 ? chunk_devices(t, reg) : g_strdup(t->cfg.devices);
  if (!t->dev.list && tp_group_links_on_gpus(t->group)) { /* one device per rank: stage s on device s mod count */
    int count = reg->device_count(NULL);
    GString *list = g_string_new("0");
    for (int d = 1; d < count; d++)
      g_string_append_printf(list, ",%d", d);
    t->dev.list = g_string_free(list, FALSE);
  }
  return (t->dev.stage_be = tp_backend_stages(reg, t->W, t->dev.list, tp_group_per_stage(t->group) ? t->rank : -1,
                                          &t->dev.gpus, err)) != NULL;
}

/* Stages on one GPU serialise their compute there, as the h200 cluster assumes. */
int tp_train_prediction_devices(const Train *t)
{
  return t->dev.stage_be ? t->dev.gpus : MAX(t->dev.cores / MAX(t->dp.D, 1), 1); /* a replica's share of them */
}

static void free_stage_backends(Train *t)
{
  tp_backend_stages_free(t->dev.stage_be, t->W);
  t->dev.stage_be = NULL;
}

void tp_train_clear(Train *t)
{
  tp_model_free(t->model);
  tp_dataset_free(t->train);
  tp_dataset_free(t->test);
  tp_batcher_free(t->batcher);
  g_free(t->bounds);
  tp_runtime_free(t->rt);
  for (int r = 1; t->dp.rt && r < t->dp.D; r++)
    tp_runtime_free(t->dp.rt[r]);
  if (t->group && !tp_group_per_stage(t->group)) /* the stages and replicas are this process's threads: their
                                                    reduction is the run's (else the group's) */
    tp_reduce_free(t->dp.reduce);
  if (t->dp.rt)
    g_mutex_clear(&t->dp.cut_lock);
  g_free(t->dp.rt);
  free_stage_backends(t);
  tp_schedule_free(t->s);
  tp_schedule_free(t->pos.s_tail);
  tp_schedule_free(t->pos.s_cut);
  tp_cost_free(t->cost);
  g_free(t->pred.prof);
  tp_metrics_free(t->pred.m);
  tp_sim_free(t->pred.sim);
  if (t->res.cmp_ready)
    tp_comparison_clear(&t->res.cmp);
  tp_tally_clear(&t->res.tally);
  if (t->res.events)
    g_array_unref(t->res.events);
  if (t->res.log)
    g_string_free(t->res.log, TRUE);
  g_free(t->res.links);
  g_free(t->res.allreduce);
  g_free(t->dev.list);
  g_free(t->data_id);
  tp_group_free(t->group);
  TpTrainConfig cfg = t->cfg;
  memset(t, 0, sizeof *t);
  t->cfg = cfg;
}

/* The schedule file, with the run's recomputation and significance: W and N from it (those given
 * must agree). */
static gboolean load_schedule_file(Train *t, GError **err)
{
  const TpTrainConfig *c = &t->cfg;
  if (!(t->s = tp_schedule_load(c->sched.file, err)))
    return FALSE;
  if (c->sched.recompute && !tp_schedule_ask_recompute(t->s, err))
    return FALSE;
  if (c->sched.has_sig) /* --significance over the file's */
    t->s->sig = c->sched.sig;
  int ranks = tp_schedule_ranks(t->s); /* the workers: -w counts them, not their chunks */
  if ((c->sched.workers_given && ranks != c->sched.workers) || (c->sched.N_given && t->s->N != c->sched.N)) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_SCHEDULE, "%s has W=%d, N=%d; the workers and micro-batches given are %d, %d",
                c->sched.file, ranks, t->s->N, c->sched.workers, c->sched.N);
    return FALSE;
  }
  t->W = t->s->W, t->N = t->s->N, t->K = t->s->K;
  t->per_epoch = FALSE;
  return TRUE;
}

/* The schedule's shape checked for the executor: a file's, or the preset's with its chunks, the
 * transport and the options that depend on the order and policy; t->W the stages afterwards. */
static gboolean check_schedule(Train *t, GError **err)
{
  const TpTrainConfig *c = &t->cfg;
  if (c->sched.file && !load_schedule_file(t, err))
    return FALSE;
  gboolean chunked = t->s ? t->s->rank_seq != NULL : tp_order_chunked(c->sched.preset->order);
  if (chunked && tp_group_per_stage(t->group)) {
    g_set_error(err, TP_ERROR, t->s ? TP_ERROR_PARAM_SCHEDULE : TP_ERROR_PARAM_PRESET, "%s %s: interleaved stages (several model chunks per worker) "
                "are trained with --transport local only: --transport %s runs one stage per process, and a worker's "
                "chunks must take turns in one", t->s ? "schedule" : "preset", t->s ? c->sched.file : c->sched.preset->name,
                tp_group_transport(t->group));
    return FALSE;
  }
  t->V = t->s ? t->s->V : chunked ? (c->sched.chunks > 0 ? c->sched.chunks : tp_order_default_chunks(c->sched.preset->order)) : 1;
  int workers = c->sched.workers;
  if (!t->s && !tp_chunks_check(c->sched.preset->order, workers, t->V, t->N, err))
    return FALSE;
  if (t->s && !tp_runtime_check_schedule(t->s, err)) { /* names the file, line and operation */
    (*err)->code = TP_ERROR_PARAM_SCHEDULE;
    return FALSE;
  }
  if (!t->s && c->sched.recompute && tp_order_split(c->sched.preset->order)) { /* as tp_runtime_check_schedule */
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_PRESET, "preset %s: the executor runs a split backward (I and W) "
                "without recomputation (its W needs the forward's saved state); drop --recompute", c->sched.preset->name);
    return FALSE;
  }
  if (!t->s && !tp_pair_check(c->sched.preset->order, c->sched.preset->policy, workers, t->N, err))
    return FALSE;
  if (!t->s)
    t->W = workers * t->V; /* the stages: the workers' chunks */
  if (c->sched.has_sig && (t->s ? t->s->policy : c->sched.preset->policy) != TP_POLICY_INTERMEDIATE) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_SIGNIFICANCE, "only the intermediate policy blends weights");
    return FALSE;
  }
  return TRUE;
}

/* The backend the stages compute on (*reg its registration): one rank per stage on a GPU gets its
 * stage's own instance (no instance on device 0 for every rank, tp_backend_get's); the other stages'
 * nets and weights, which this rank only sizes (and rank 0 evaluates with the weights gathered at the
 * end), live on the host. */
static const TpBackend *stage_backend(Train *t, const TpBackendReg **reg, gboolean *own_stage, GError **err)
{
  const TpTrainConfig *c = &t->cfg;
  if (!(*reg = tp_backend_find(c->backend ? c->backend : "cpu", err)))
    return NULL;
  if (c->threads > 0) {
    if (!(*reg)->set_threads) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "backend %s has no threads per call to set", (*reg)->name);
      return NULL;
    }
    (*reg)->set_threads(c->threads);
  }
  *own_stage = tp_group_per_stage(t->group) && (*reg)->device_noun;
  if (*own_stage && !make_stage_backends(t, *reg, err))
    return NULL;
  return !*own_stage ? tp_backend_get((*reg)->name, err)
         : t->rank < t->W ? t->dev.stage_be[t->rank] : tp_backend_cpu(); /* -np ≠ W: refused later */
}

/* Every label of both sets a class of the model (files may hold more classes than the model has). */
static gboolean check_labels(const Train *t, GError **err)
{
  const TpLayer *top = tp_model_layer(t->model, tp_model_n_layers(t->model) - 1);
  int classes = top->kind == TP_LAYER_SOFTMAX_CE ? (int)top->in_elems
                : top->kind == TP_LAYER_TOKEN_CE ? t->model->vocab : TP_DATA_CLASSES;
  const TpDataset *sets[] = { t->train, t->test };
  for (int i = 0; i < 2; i++)
    for (size_t j = 0; j < (size_t)sets[i]->n * sets[i]->label_dim; j++)
      if (sets[i]->labels[j] >= classes) {
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s (its labels): label %d of sample %zu is not a class of model %s (0..%d)",
                    sets[i]->name, sets[i]->labels[j], j / sets[i]->label_dim + 1, t->model->name, classes - 1);
        return FALSE;
      }
  return TRUE;
}

/* The data's identity by content, for checkpoints only (a digest of every byte): a copy elsewhere is
 * the same data, the same path with other contents is not; generated data by what generates every
 * byte (a digest of gigabytes of synthetic samples took longer than making them). */
static char *data_identity(const Train *t)
{
  if (t->train->recipe && t->test->recipe)
    return g_strdup_printf("%s + %s", t->train->recipe, t->test->recipe);
  const TpDataset *sets[] = { t->train, t->test };
  TpSha256 *sum = tp_sha256_new();
  for (int i = 0; i < 2; i++) {
    g_autofree char *head = g_strdup_printf("%d %d %d %d\n", sets[i]->n, sets[i]->rows, sets[i]->cols, sets[i]->dim);
    tp_sha256_update(sum, head, strlen(head));
    tp_sha256_update(sum, sets[i]->labels, (size_t)sets[i]->n * sets[i]->label_dim);
    tp_sha256_update(sum, sets[i]->pixels, (size_t)sets[i]->n * (size_t)sets[i]->dim);
  }
  g_autofree char *hex = tp_sha256_finish_hex(sum);
  return g_strdup_printf("%d + %d samples of %d bytes, sha256 %s", t->train->n, t->test->n, t->train->dim, hex);
}

/* The data (synthetic data takes the model's input shape and classes), its batcher, its checks. */
static gboolean open_data(Train *t, GError **err)
{
  const TpTrainConfig *c = &t->cfg;
  TpDataShape shape = tp_data_shape_of(t->model);
  if (!tp_data_open_shaped(c->data, &shape, c->seed, &t->train, &t->test, err) ||
      !(t->batcher = tp_batcher_new(t->train, c->batch, t->N, c->seed, err)))
    return FALSE;
  if (t->model->in_c * t->model->in_h * t->model->in_w != t->train->dim) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_MODEL, "%s takes %d×%d×%d inputs, the data has %d×%d", t->model->name,
                (int)t->model->in_c, (int)t->model->in_h, (int)t->model->in_w, t->train->rows, t->train->cols);
    return FALSE;
  }
  if (!check_labels(t, err))
    return FALSE;
  if (c->ck.dir || c->resume)
    t->data_id = data_identity(t);
  if (t->per_epoch)
    t->K = tp_batcher_per_epoch(t->batcher);
  else if (!c->sched.file)
    t->runs = 1;
  return TRUE;
}

/* t->bounds: the layers per stage as given (e.g. by plan --run-top), else balanced by FLOPs. */
static gboolean split_stages(Train *t, GError **err)
{
  const TpTrainConfig *c = &t->cfg;
  int L = tp_model_n_layers(t->model);
  t->bounds = g_new(int, t->W + 1);
  double best;
  /* the FLOPs of more layers are never fewer: they bound themselves */
  const TpRanges ranges = { .cost = range_flops, .floor = range_flops, .data = (gpointer)t->model };
  if (c->sched.split) {
    t->bounds[0] = 0;
    for (int s = 0; s < t->W; s++)
      t->bounds[s + 1] = t->bounds[s] + c->sched.split[s];
    if (t->bounds[t->W] != L) {
      g_set_error(err, TP_ERROR, TP_ERROR_PARAM_SPLIT, "the stages get %d layers, model %s has %d", t->bounds[t->W],
                  t->model->name, L);
      return FALSE;
    }
  } else if (!tp_partition(L, t->W, &ranges, t->bounds, &best)) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_WORKERS, "cannot split %d layers into %d stages", L, t->W);
    return FALSE;
  }
  return TRUE;
}

/* A head tied to the embedding across stages, refused before any work where the run cannot tie it:
 * the schedule (the file's, or the preset's order on unit slots) and the transport, as the runtime
 * checks them (tp_runtime_check_tie); NCCL's reduction does not tie stages. */
static gboolean check_tie(Train *t, GError **err)
{
  if (tp_tie_stage(t->model, t->bounds, t->W) < 0)
    return TRUE;
  g_autoptr(TpSchedule) own = t->s ? NULL : tp_train_generate_order(t, MIN(t->K, 3), NULL, err);
  return (t->s || own) &&
         tp_runtime_check_tie(t->model, t->bounds, t->s ? t->s : own, !tp_group_links_on_gpus(t->group), err);
}

/* The least the stages hold (weights, momentum and gradient, the initial weights' buffer, one
 * mini-batch's activations), checked against the memory left before any of it is allocated; and
 * the learning rate's warm-up against the run's length. */
static gboolean check_memory(Train *t, const TpBackend *be, GError **err)
{
  const TpTrainConfig *c = &t->cfg;
  int D = t->dp.D; /* each replica holds the least for its share of the batch */
  long long need = D * (tp_model_train_bytes(t->model, tp_train_replica_batch(t)) +
                        (c->opt.adamw ? 4 * t->model->params : 0)); /* AdamW: v */
  /* under ulimit -v or -d, the address space each thread running the backend maps for itself: the
   * stages' threads in this process, the main one (it profiles) and BLAS's own beyond the first */
  int threads = (tp_group_per_stage(t->group) ? 1 : D * t->W + D - 1) + 1 + MAX(c->threads - 1, 0); /* and the
                                                                                                  replicas' */
  need += tp_backend_threads_address_bytes(be, threads);
  need += tp_runtime_eval_bytes(t->model, t->bounds, t->W, tp_train_replica_batch(t), be); /* the test set's */
  g_autofree char *what = g_strdup_printf("training %s with mini-batches of %d", t->model->name, c->batch);
  if (!tp_memory_check(what, t->W, t->N, t->K, need, err))
    return FALSE;
  if (c->opt.warmup > 0 && c->opt.warmup > tp_train_lr_steps(t)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--warmup %d: longer than the run's %ld mini-batches", c->opt.warmup,
                tp_train_lr_steps(t));
    return FALSE;
  }
  return TRUE;
}

/* The runtime of the stages on backend be (on GPUs, each stage's own instance). */
static gboolean make_runtime(Train *t, const TpBackendReg *reg, const TpBackend *be, gboolean own_stage, GError **err)
{
  const TpTrainConfig *c = &t->cfg;
  TpRuntimeConfig cfg = {
    .model = t->model,
    .bounds = t->bounds,
    .W = t->W,
    .N = t->N,
    .batch = tp_train_replica_batch(t),
    .be = be,
    .train = t->train,
    .lr = (float)c->opt.lr,
    .momentum = (float)c->opt.momentum,
    .weight_decay = (float)c->opt.wd,
    .adamw = c->opt.adamw,
    .beta1 = (float)c->opt.beta1,
    .beta2 = (float)c->opt.beta2,
    .eps = (float)c->opt.eps,
    .warmup = tp_train_warmup(t),
    .seed = c->seed,
    .timeout_s = c->timeout,
    .lr_steps = tp_train_lr_steps(t),
    .recompute = t->s ? t->s->recompute : c->sched.recompute,
    .split_backward = t->s ? tp_schedule_has_split(t->s) : tp_order_split(c->sched.preset->order),
  };
  if (!own_stage && !make_stage_backends(t, reg, err))
    return FALSE;
  g_autofree const TpBackend **per_stage = g_new0(const TpBackend *, t->W);
  for (int s = 0; s < t->W && t->dev.stage_be; s++)
    per_stage[s] = t->dev.stage_be[s] ? t->dev.stage_be[s] : tp_backend_cpu();
  t->dp.identical = TRUE;
  int tie = tp_tie_stage(t->model, t->bounds, t->W); /* a head tied across stages: their sum */
  if (tp_group_per_stage(t->group) && (t->dp.D > 1 || tie > 0)) { /* this rank: one stage of replica rank / W, the
                                                                     reduction the group's, once the set-up is
                                                                     agreed (group_reduce) */
    int r = t->rank / t->W;
    cfg.replica = r, cfg.micro_base = r * t->N;
    return (t->rt = tp_runtime_new_on(&cfg, t->dev.stage_be ? (const TpBackend *const *)per_stage : NULL, err)) != NULL;
  }
  if (t->dp.D == 1) {
    cfg.reduce = t->dp.reduce = tie > 0 ? tp_reduce_local_new(1, t->W, c->timeout) : NULL;
    return (t->rt = tp_runtime_new_on(&cfg, t->dev.stage_be ? (const TpBackend *const *)per_stage : NULL, err)) != NULL;
  }
  t->dp.reduce = tp_reduce_local_new(t->dp.D, t->W, c->timeout);
  t->dp.rt = g_new0(TpRuntime *, t->dp.D);
  g_mutex_init(&t->dp.cut_lock);
  for (int r = 0; r < t->dp.D; r++) { /* the same seed: the same initial weights */
    cfg.reduce = t->dp.reduce, cfg.replica = r, cfg.micro_base = r * t->N;
    if (!(t->dp.rt[r] = tp_runtime_new_on(&cfg, NULL, err)))
      return FALSE;
    t->rt = t->dp.rt[0]; /* freed as the run's */
  }
  return TRUE;
}

/* Data parallelism's checks: replicas on the cpu backend (threads of this process, or ranks of the
 * group), and micro-batches of whole samples on every replica. */
static gboolean check_replicas(Train *t, const TpBackendReg *reg, GError **err)
{
  const TpTrainConfig *c = &t->cfg;
  int D = t->dp.D = MAX(c->data_parallel, 1);
  const char *why = NULL;
  if (D > 1 && (reg->device_noun || tp_group_links_on_gpus(t->group)))
    why = "the replicas run on the cpu backend; on GPUs the D·W ranks are not given GPUs of their own yet (NCCL's "
          "all-reduce is built, not run)";
  if (why) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_DATA_PARALLEL, "data-parallel %d: %s", D, why);
    return FALSE;
  }
  if (D > 1 && c->batch % (D * t->N)) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_DATA_PARALLEL, "data-parallel %d: %d replicas of %d micro-batches "
                "each do not divide the batch of %d samples", D, D, t->N, c->batch);
    return FALSE;
  }
  return TRUE;
}

/* The results and the position, empty. */
static void start_results(Train *t)
{
  tp_tally_init(&t->res.tally);
  t->res.events = g_array_new(FALSE, FALSE, sizeof(TpEventRow));
  t->res.log = g_string_new(NULL);
  tp_trainlog_header(t->res.log);
}

gboolean tp_train_prepare(Train *t, GError **err)
{
  const TpTrainConfig *c = &t->cfg;
  t->N = c->sched.N, t->K = c->sched.K, t->runs = c->sched.epochs, t->per_epoch = c->sched.per_epoch;
  t->dev.cores = (int)g_get_num_processors();
  if (!t->group)
    t->group = tp_group_single_new();
  if (!check_schedule(t, err))
    return FALSE;
  if (!(t->model = tp_model_load(c->model ? c->model : "mlp", err)) || !tp_net_check_trainable(t->model, err))
    return FALSE;
  int L = tp_model_n_layers(t->model);
  if (t->W > L) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_WORKERS, "%d stages, but model %s has only %d layers", t->W, t->model->name,
                L);
    return FALSE;
  }
  const TpBackendReg *reg = NULL;
  gboolean own_stage = FALSE;
  const TpBackend *be = stage_backend(t, &reg, &own_stage, err);
  if (!be || !check_replicas(t, reg, err) || !open_data(t, err) || !split_stages(t, err) || !check_memory(t, be, err) ||
      !check_tie(t, err) || !make_runtime(t, reg, be, own_stage, err))
    return FALSE;
  start_results(t);
  if (t->cfg.ck.every > t->K)
    t->cfg.ck.every = t->K; /* one segment: the run itself */
  return c->resume || tp_train_check_ck_dir(t, err); /* resume: once its checkpoint is read */
}

gboolean tp_train_check_ck_dir(Train *t, GError **err)
{
  if (!t->cfg.ck.dir)
    return TRUE;
  /* writable, and one run at a time writes there (one process per stage: rank 0 holds the lock) */
  if (!tp_checkpoint_check_dir(t->cfg.ck.dir, err) || (t->rank == 0 && !tp_checkpoint_lock(t->cfg.ck.dir, err))) {
    tp_error_about(err, t->cfg.ck_dir_is_resume ? TP_ERROR_PARAM_RESUME : TP_ERROR_PARAM_CHECKPOINT);
    return FALSE;
  }
  t->pos.generation = MAX(t->pos.generation, tp_checkpoint_first_generation(t->cfg.ck.dir));
  return TRUE;
}

void tp_train_stopped(const Train *t, TpTrainEnd *end)
{
  int sig = t->pos.interrupted;
  *end = (TpTrainEnd){ .ended = TRUE, .status = sig > 0 ? 128 + sig : 0, .signal = sig, .says = t->rank == 0 };
}

char *tp_train_weights_sha256(const Train *t)
{
  TpSha256 *c = tp_sha256_new();
  for (int s = 0; s < t->W; s++) {
    const float *w = tp_runtime_weights(t->rt, s);
    size_t n = tp_runtime_n_params(t->rt, s);
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
    tp_sha256_update(c, w, n * sizeof *w);
#else
    for (size_t i = 0; i < n; i++) {
      guint32 u;
      memcpy(&u, &w[i], 4);
      u = GUINT32_TO_LE(u);
      tp_sha256_update(c, &u, 4);
    }
#endif
  }
  return tp_sha256_finish_hex(c);
}

/* The first signal of a run from a schedule file, which stops only at its segment's end (nothing
 * makes the rest of a file's schedule): said at once, from the handler (write only). */
static void note_segment_end(int sig)
{
  static const char line[] = "timeprest train: the run from a schedule file stops at the end of its segment, with a "
                             "checkpoint (a second signal ends it now)\n";
  (void)sig;
  ssize_t w = write(STDERR_FILENO, line, sizeof line - 1);
  (void)w;
}

/* A step of the set-up agreed by every rank (tp_group_agree): FALSE when it failed on any, with end
 * (another rank's failure) or err (this rank's) set. */
static gboolean agreed(Train *t, gboolean ok, GError *e, TpTrainEnd *end, GError **err)
{
  int status = 0;
  if (tp_group_agree(t->group, ok, e, &status, err))
    return TRUE;
  if (status)
    *end = (TpTrainEnd){ .ended = TRUE, .status = status };
  return FALSE;
}

/* One generation for every rank's checkpoint parts: past the files of every rank's directory. */
static gboolean same_generation(Train *t, GError **err)
{
  int n = tp_group_size(t->group);
  gint64 mine = t->pos.generation;
  g_autofree gint64 *all = g_new(gint64, n);
  if (!tp_group_gather(t->group, -1, &mine, sizeof mine, all, err))
    return FALSE;
  for (int r = 0; r < n; r++)
    t->pos.generation = MAX(t->pos.generation, (int)all[r]);
  return TRUE;
}

/* This rank's stage links, where the group has its own (its stage's GPU when it has one). */
static gboolean open_stage_links(Train *t, GError **err)
{
  TpTransport *links = NULL;
  int device = t->dev.stage_be && t->rank < t->W ? tp_backend_device(t->dev.stage_be[t->rank]) : -1;
  int st = t->rank % t->W; /* with replicas, rank r runs stage r mod W of replica r / W */
  return tp_group_stage_links(t->group, t->N, device, &links, err) &&
         (!links || tp_runtime_set_part(t->rt, st, st + 1, links, err));
}

/* Where the group's ranks hold the stages and there is something to reduce (replicas, or a head tied
 * across stages), the group's reduction, made once every rank agreed on the set-up (its
 * communicators are collectives that would wait for a rank whose set-up failed): the ranks' checks
 * first, then the runtime's.  Its waits are bounded by --peer-timeout, as the stages' messages. */
static gboolean group_reduce(Train *t, GError **err)
{
  int tie = tp_tie_stage(t->model, t->bounds, t->W);
  if (!tp_group_per_stage(t->group) || (t->dp.D == 1 && tie < 0))
    return TRUE;
  if (!tp_group_reduce(t->group, t->W, tie, t->cfg.peer_timeout, &t->dp.reduce, err))
    return FALSE;
  tp_runtime_set_reduce(t->rt, t->dp.reduce);
  return TRUE;
}

/* A failure once the set-up is agreed: the caller ends the job through the group. */
static gboolean failed(TpTrainEnd *end, int status, GError *e, GError **err)
{
  *end = (TpTrainEnd){ .failed = TRUE, .status = status };
  g_propagate_error(err, e);
  return FALSE;
}

/* The set-up agreed by every rank (the same arguments, a set-up that worked on every rank, the
 * ranks the stages, then --resume's checkpoint read); a failure once training has begun ends the
 * job (end->failed); rank 0 reports.  A run stopped at a checkpoint ends every rank with the same
 * status. */
gboolean tp_train_main(Train *t, const char *args, TpTrainReportFn report, gpointer data, TpTrainEnd *end,
                       GError **err)
{
  *end = (TpTrainEnd){ .ended = FALSE };
  if (!t->group)
    t->group = tp_group_single_new();
  if (t->cfg.ck.dir)
    tp_group_catch_stop(t->group, t->cfg.sched.file ? note_segment_end : NULL);
  t->rank = tp_group_rank(t->group);
  GError *e = NULL;
  gboolean ok = tp_group_check_same(t->group, args, &e) && tp_train_prepare(t, &e) &&
                tp_group_check_size(t->group, t->W, &e);
  if (!agreed(t, ok, e, end, err))
    return end->ended;
  if (t->cfg.resume) {
    ok = tp_train_resume(t, &e);
    if (!agreed(t, ok, e, end, err))
      return end->ended;
  }
  if (t->cfg.ck.dir && !same_generation(t, &e))
    return failed(end, 1, e, err);
  if (!group_reduce(t, &e))
    return failed(end, 1, e, err);
  if (!open_stage_links(t, &e))
    return failed(end, tp_error_exit_status(e), e, err);
  if (!tp_train_plan(t, &e) || !tp_train_execute(t, &e))
    return failed(end, 1, e, err);
  if (t->pos.interrupted) { /* every rank ends with the signal's status; rank 0 says where to resume */
    tp_train_stopped(t, end);
    tp_group_end_said(t->group, end->says);
    return TRUE;
  }
  ok = t->rank != 0 || report(t, data, err);
  tp_group_finish(t->group);
  return ok;
}
