/* tp_runtime.h — real training by a schedule: one thread per stage walks its operation list in
 * order with its network (tp_net.h), its weight store (tp_wstore.h) and a transport
 * (tp_transport.h), and every operation's measured start, end, version read and message bytes are
 * recorded so that the run can be compared with the simulator's prediction of the same schedule.
 *
 * A TpRuntime holds what lives for the whole run: each stage's network, latest weights, momentum
 * and gradient buffer.  tp_runtime_run executes one schedule (one epoch, or the K mini-batches of a
 * -k run) on given mini-batch sample indices; every stage drains at its end, its latest weights
 * become version 0 of the next schedule, and the momentum carries over.
 *
 * Inputs and labels: stage 1 gathers its micro-batch (or whole mini-batch, for whole-mini-batch
 * forwards) from the training set; the last stage reads the labels of the same samples from the
 * training set (the stages are threads of one process; with one process per stage, every process
 * opens the same data with the same seed, so each reads the same samples in the same order).
 *
 * A process may run only some of the stages (tp_runtime_set_part: stages lo..hi-1, e.g. one MPI
 * rank per stage) over a transport given from outside: every stage's network is built (the sizes feed the cost
 * model, and the process that evaluates receives the others' weights), but threads run, and
 * profiles are timed, for its own stages only. */
#ifndef TP_RUNTIME_H
#define TP_RUNTIME_H

#include "tp_backend.h"
#include "tp_data.h"
#include "tp_reduce.h"
#include "tp_model.h"
#include "tp_schedule.h"
#include "tp_timeline.h"
#include "tp_transport.h"
#include "tp_wstore.h"

#include <glib.h>
#include <math.h>

typedef struct {
  const TpModel *model;
  const int *bounds;        /* [W+1]: stage s runs layers [bounds[s], bounds[s+1]) */
  int W, N;
  int batch;                /* samples per mini-batch (a multiple of N) */
  const TpBackend *be;
  const TpDataset *train;   /* read by stage 1 (inputs) and the last stage (labels) */
  float lr, momentum, weight_decay;
  gboolean adamw;           /* the optimizer: AdamW (decoupled weight decay), else SGD with momentum */
  float beta1, beta2, eps;  /* AdamW's */
  long warmup;              /* with lr_steps: mini-batches of linear warm-up before the cosine */
  guint64 seed;             /* initial weights and dropout masks */
  double timeout_s;         /* how long a stage waits for a message before the run fails */
  long lr_steps;            /* > 0: cosine learning-rate decay over this many mini-batches (the
                               whole run); 0: lr constant */
  gboolean recompute;       /* the schedules it runs recompute (TpSchedule.recompute): what
                               tp_runtime_sizes counts as stored activations */
  gboolean split_backward;  /* the schedules it runs split backwards into I and W
                               (tp_schedule_has_split): a forward's stored state also keeps the
                               output gradients from I to W, in tp_runtime_sizes and
                               tp_runtime_saved_bytes_per_sample */
  gboolean per_micro_backward; /* run a whole-mini-batch backward micro-batch by micro-batch even
                                  where its micro-batches read one version (the reference path) */
  /* data parallelism: this runtime is replica `replica` of reduce->D, whose updates use the mean of the
   * replicas' gradients (in a timing run too: every replica times at once); its micro-batches are micro_base.. of the global
   * mini-batch (dropout masks as one pipeline of all of them draws) */
  TpReduce *reduce;         /* NULL: one pipeline */
  int replica, micro_base;
} TpRuntimeConfig;

/* The learning rate of the update that ends global mini-batch g (1-based): lr, or with lr_steps
 * the cosine decay lr·(1 + cos(π·(g−1)/lr_steps))/2 — lr at the first update, → 0 at the last;
 * with a warm-up of u mini-batches, lr·g/u for g ≤ u, then the cosine over the other lr_steps − u. */
static inline float tp_runtime_lr(const TpRuntimeConfig *cfg, long g)
{
  if (cfg->lr_steps <= 0)
    return cfg->lr;
  if (g <= cfg->warmup)
    return (float)(cfg->lr * (double)g / (double)cfg->warmup);
  double x = (double)(g - 1 - cfg->warmup) / (double)MAX(cfg->lr_steps - cfg->warmup, 1);
  if (x > 1)
    x = 1;
  return (float)(cfg->lr * 0.5 * (1.0 + cos(G_PI * x)));
}

/* What one operation did, measured. */
typedef struct {
  double start, end;   /* seconds since the run's common origin; start: once the input message is there */
  int version;         /* version read (a backward over several versions: the oldest) */
  int latest;          /* the stage's latest version when it began */
  gboolean match;      /* every read was of the version the schedule names */
  double bytes;        /* bytes of the message it sent (0 if none) */
} TpOpRecord;

typedef struct {
  int W, K;
  TpOpRecord **rec;          /* [W][stage's op count]; a process running some stages fills theirs */
  double *loss_sum;          /* [K]: Σ −log p(label) over mini-batch i+1's samples (last stage) */
  int *correct;              /* [K] */
  TpWStoreStats *stats;      /* [W]: each stage's weight store at the end */
  gboolean versions_match;   /* every read of every operation */
  long mismatched_reads;
  double wall;               /* seconds from the first operation's start to the last one's end */
  int done;                  /* mini-batches run: K, or where the run was cut (TpProgress.cut_before) */
} TpRunResult;

void tp_run_result_clear(TpRunResult *r);
/* versions_match, mismatched_reads and wall from the records of stages [lo, hi) of schedule s (a
 * run's own stages, or all of them once gathered from the processes that ran them), of the
 * operations of mini-batches 1..done. */
void tp_run_result_summarise(TpRunResult *r, const TpSchedule *s, int lo, int hi);
/* A cut run's records (done < K) made those of the operations it ran, in the order of
 * tp_schedule_prefix(s, done): K becomes done.  Nothing changes for a whole run. */
void tp_run_result_cut(TpRunResult *r, const TpSchedule *s);
/* The measured timeline of schedule s from the records of every stage (a run of all stages, or one
 * gathered from the processes that ran them): each operation's start, end, version read and the
 * stage's latest version, times shifted so that the first start is 0 (t0: that start on the run's
 * clock), messages delivered when their sender ends (the records time no transfer).
 * TP_ERROR_INPUT when s cannot be indexed. */
TpTimeline *tp_run_result_timeline(const TpRunResult *r, const TpSchedule *s, GError **err);

/* Progress of a running schedule, written by the stage threads and shown by the thread that
 * called tp_runtime_run (through tick) while it waits for them. */
typedef struct TpProgress TpProgress;
struct TpProgress {
  gint done;            /* mini-batches through stage 1's update */
  gint losses;          /* mini-batches whose loss is known */
  _Atomic double last_loss; /* mean loss of the latest of them */
  /* called by the thread that runs tp_runtime_run about every interval_s while the stages work */
  void (*tick)(TpProgress *p, void *data);
  void *data;
  double interval_s;
  /* or NULL: asked by stage 1 before it begins mini-batch mb (1..K) of the schedule; TRUE cuts the
   * run there: every stage runs the operations of mini-batches 1..mb-1 (its order without the
   * others, a schedule of its own: tp_schedule_prefix) and drains, the cut told from stage to stage
   * by a marker in place of mini-batch mb's first activations (tp_transport.h), so any transport
   * carries it.  Called on stage 1's thread. */
  gboolean (*cut_before)(TpProgress *p, void *data, int mb);
};

typedef struct TpRuntime TpRuntime;

/* Build every stage's network, the initial weights (tp_net_init_weights with cfg->seed) and the
 * optimizer state.  TP_ERROR_INPUT for a bad split or model. */
TpRuntime *tp_runtime_new(const TpRuntimeConfig *cfg, GError **err);
/* The same with stage s on stage_be[s] (a device backend: one instance per stage, each with its own
 * stream) instead of cfg->be; stage_be NULL: every stage on cfg->be.  The caller owns the
 * instances; they must outlive the runtime (the array itself need not). */
TpRuntime *tp_runtime_new_on(const TpRuntimeConfig *cfg, const TpBackend *const *stage_be, GError **err);
void tp_runtime_free(TpRuntime *rt);

/* Run only stages [lo, hi) in this process, over transport tr (not owned; NULL: a local transport
 * made for each run, as without this call).  TP_ERROR_INPUT when the range is not within W. */
gboolean tp_runtime_set_part(TpRuntime *rt, int lo, int hi, TpTransport *tr, GError **err);
/* The reduction its updates run (TpRuntimeConfig.reduce), where it is made after the runtime (a
 * group's, once the ranks agreed). */
void tp_runtime_set_reduce(TpRuntime *rt, TpReduce *reduce);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpRuntime, tp_runtime_free)

int tp_runtime_stages(const TpRuntime *rt);
/* The stages this process runs: [*lo, *hi). */
void tp_runtime_range(const TpRuntime *rt, int *lo, int *hi);
/* Replace stage's latest weights (tp_runtime_n_params floats, host memory), e.g. with those another
 * process trained, before evaluating or reporting. */
gboolean tp_runtime_set_weights(TpRuntime *rt, int stage, const float *w, GError **err);
/* Latest weights in host memory (on a device backend: a copy taken after tp_runtime_new, after
 * every tp_runtime_run and after tp_runtime_set_weights / tp_runtime_set_state). */
const float *tp_runtime_weights(const TpRuntime *rt, int stage);
/* The backend stage `stage` runs on. */
const TpBackend *tp_runtime_backend(const TpRuntime *rt, int stage);
size_t tp_runtime_n_params(const TpRuntime *rt, int stage);
/* Stage st's latest weights and optimizer state copied to host buffers (n_params and state floats; either may
 * be NULL), or replaced from them (a checkpoint's state; between schedules only, the gradient
 * buffer is zero there).  TP_ERROR_RUNTIME when the backend's copy fails. */
/* Optimizer state per parameter: 1 (SGD's momentum) or 2 (AdamW's two moments). */
int tp_runtime_optimizer_states(const TpRuntime *rt);
gboolean tp_runtime_get_state(const TpRuntime *rt, int stage, float *weights, float *momentum, GError **err);
gboolean tp_runtime_set_state(TpRuntime *rt, int stage, const float *weights, const float *momentum, GError **err);
/* Stage st's buffers: state beside its weights that no optimizer updates and no weight policy
 * versions (batchnorm's running statistics, tp_net.h): their floats (0 without), copied to or
 * replaced from host memory (a checkpoint's, another process's). */
size_t tp_runtime_n_buffers(const TpRuntime *rt, int stage);
gboolean tp_runtime_get_buffers(const TpRuntime *rt, int stage, float *host, GError **err);
gboolean tp_runtime_set_buffers(TpRuntime *rt, int stage, const float *host, GError **err);
/* Bytes of stage st's memory categories per unit, as the weight store counts them. */
void tp_runtime_sizes(const TpRuntime *rt, int stage, TpWStoreSizes *out);
/* Bytes of the message a forward (activations) / backward (input gradients) of one sample sends. */
size_t tp_runtime_act_bytes_per_sample(const TpRuntime *rt, int stage);
/* Bytes a forward of one sample keeps for its backward: its input with recomputation, else every
 * layer's saved state (with split_backward: and the output gradients a pending W keeps; the workspace a recomputing stage holds is saved bytes × its largest
 * operation's samples, counted as activations for the whole run). */
size_t tp_runtime_input_bytes_per_sample(const TpRuntime *rt, int stage);
size_t tp_runtime_saved_bytes_per_sample(const TpRuntime *rt, int stage);
size_t tp_runtime_grad_bytes_per_sample(const TpRuntime *rt, int stage);

/* Whether the executor runs schedule s: a split backward (I and W) runs per micro-batch and without
 * recomputation (its W needs the forward's saved state, which a recomputing stage re-makes in one
 * workspace for its backward only).  TP_ERROR_INPUT, one line naming the operation, otherwise. */
gboolean tp_runtime_check_schedule(const TpSchedule *s, GError **err);

/* Run schedule s (s->W stages, s->N micro-batches) on mini-batches whose sample indices are
 * idx[i] (batch of them, for mini-batch i+1 of the schedule); origin: the monotonic time
 * (g_get_monotonic_time) that recorded times are relative to; progress may be NULL.
 * A loss that is not finite, a failing operation or a message that does not come ends the run:
 * the transport is aborted so that no stage waits, and the first error is returned
 * (TP_ERROR_RUNTIME, naming the stage, operation and mini-batch).  first_mb: the number of the
 * schedule's first mini-batch in the whole run, for messages. */
gboolean tp_runtime_run(TpRuntime *rt, const TpSchedule *s, const int *const *idx, int first_mb, gint64 origin,
                        TpProgress *progress, TpRunResult *out, GError **err);

/* Test-set accuracy and mean loss with every stage's latest weights: inference through the stages
 * in turn, in the calling thread. */
gboolean tp_runtime_evaluate(TpRuntime *rt, const TpDataset *test, double *accuracy, double *loss, GError **err);
/* Bytes an evaluation adds to a run of model m split at bounds into W stages whose operations run
 * batch samples at most: its chunks' scratch in every stage (kept after it), their inputs, outputs
 * and labels. */
long long tp_runtime_eval_bytes(const TpModel *m, const int *bounds, int W, int batch, const TpBackend *be);

/* One stage's profiled times. */
typedef struct {
  double fwd, bwd, upd;      /* seconds per micro-batch (fwd, bwd) and per update */
  double inp, wgt;           /* with cfg.split_backward: a split backward's I and W per micro-batch,
                                each timed alone (0 otherwise) */
  double fwd_whole;          /* seconds of one forward of the whole mini-batch, where whole or
                                whole_bwd had it timed (0 otherwise) */
} TpStageProfile;

/* Each stage's operations timed alone on real data (one mini-batch, idx), before training, in the
 * calling thread: forward (stage 1's with the gathering of its input) and backward per micro-batch
 * (with cfg.split_backward also its I and W, each alone), and an update — `reps` repetitions after
 * one warm-up, the median kept.  whole: the schedule's forwards and backwards cover the whole
 * mini-batch, so time it at once and divide by N.  whole_bwd: only its backwards do (nf1b): the
 * forward is timed per micro-batch, the backward over the whole mini-batch at once divided by N.  Gradients and updates go to scratch copies and
 * are discarded; the weights, momentum and gradient buffer are left as they were.  A process that
 * runs some stages times only those (out[s] of the others is 0); the stages before them run their
 * forward once, and those after them their forward and backward once, untimed, for real inputs. */
gboolean tp_runtime_profile(TpRuntime *rt, const int *idx, int reps, gboolean whole, gboolean whole_bwd,
                            TpStageProfile *out, GError **err);

/* The profile as the run will see it: schedule s (a short one: a few mini-batches, all on the
 * sample indices idx) run through the stage threads as training runs it, and each of this
 * process's stages' operations timed there — while the other stages run theirs (sharing memory
 * bandwidth and caches), with everything an operation does in a run (messages, the blend, new
 * weight versions).  out[s] gets the median over the mini-batches after the first (which warms up)
 * of each kind per micro-batch: a whole-mini-batch operation's time divided by N (a split backward:
 * inp and wgt, and bwd their sum).  The weights,
 * momentum and gradient buffers are put back as they were: the run's updates are discarded.
 * Kinds the schedule does not run on a stage keep out[s]'s value. */
gboolean tp_runtime_profile_pipelined(TpRuntime *rt, const TpSchedule *s, const int *idx, TpStageProfile *out,
                                      GError **err);

/* tp_tie_check (common/tp_tie.h), can_tie saying whether the run's reduction ties stages: where it
 * does not, a head tied across stages is refused in one line naming the transport. */
gboolean tp_runtime_check_tie(const TpModel *m, const int *bounds, const TpSchedule *s, gboolean can_tie, GError **err);

/* Data parallelism (cfg.reduce): the reduction an update runs, timed on each of this process's
 * stages' gradient size (a scratch gradient of zeros in the stage's memory), every replica calling
 * at once (each from its own thread or process): out[s] the median seconds of reps calls after one
 * warm-up; 0 for a stage without parameters, or of another process, or without a reduction. */
gboolean tp_runtime_time_reduce(TpRuntime *rt, int reps, double *out, GError **err);

#endif
