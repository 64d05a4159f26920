/* tp_train.h — training with a schedule (libtptrain.a): the run's configuration as parsed values,
 * the trainer (set-up, the runs of the schedule cut into checkpointed segments, the profile, the
 * plan and the prediction joined with the measurement) and its results as data, which the command
 * line prints.  What several processes do together goes through a group (exec/tp_group.h): a run in one
 * process and a run of one MPI rank per stage follow the same code. */
#ifndef TP_TRAIN_H
#define TP_TRAIN_H

#include "tp_checkpoint.h"
#include "tp_group_run.h"
#include "tp_predict.h"
#include "tp_report.h"

/* Where checkpoints go and how often (from --checkpoint / --resume DIR, --checkpoint-every M,
 * --stop-after D). */
typedef struct {
  const char *dir;   /* where checkpoints go (NULL: none) */
  int every;         /* M: mini-batches per drained segment (0: whole runs) */
  int stop_after;    /* stop at the first checkpoint after D mini-batches (0: never) */
} TpCheckpointOpts;

/* Fused forwards (tp_schedule_fuse_forwards): where a generated schedule has them, AUTO runs them
 * when the simulator on the profiled costs says they are faster, ON always, OFF never. */
typedef enum { TP_FUSE_AUTO, TP_FUSE_ON, TP_FUSE_OFF } TpFuseMode;

/* What became of them in this run. */
typedef struct {
  gboolean decided;         /* the choice is made (the first schedule generated makes it) */
  gboolean on;              /* the run's schedules fuse them */
  int mini_batches;         /* mini-batches of the run's plan whose forwards could be fused (0: none) */
  double t_fused, t_plain;  /* AUTO: the simulated time per mini-batch each way (s) */
} TpTrainFuse;

/* The optimizer and its learning rate. */
typedef struct {
  gboolean adamw;           /* AdamW (else SGD with momentum) */
  double lr, momentum, wd;
  double beta1, beta2, eps; /* AdamW's */
  gboolean lr_cosine;       /* lr decayed by a cosine over the whole run */
  int warmup;               /* with lr_cosine: mini-batches of linear warm-up first (-1: a tenth of the run) */
} TpTrainOptim;

/* The schedule asked for: a preset (generated here) or a file, its sizes, and what generation takes. */
typedef struct {
  const TpPreset *preset;   /* NULL: file gives the schedule */
  const char *file;
  int workers, N, K;        /* K: mini-batches of one run when !per_epoch */
  int chunks;               /* model chunks per worker of a preset with interleaved stages (0: its default) */
  gboolean workers_given, N_given; /* a schedule file must agree with those given */
  int epochs;
  gboolean per_epoch;       /* runs are epochs (else one run of K mini-batches, or of the file) */
  gboolean slots;           /* the order fixed on unit slots (else on the profiled costs) */
  gboolean recompute;       /* stages keep their inputs only; a backward runs its forward again */
  double act_limit;         /* zb-auto's activation limit (0 for the other presets) */
  TpFuseMode fuse;          /* fused forwards of a generated schedule */
  const int *split;         /* [stages] layers per stage (NULL: balanced by FLOPs); borrowed */
  gboolean has_sig;
  TpSignificance sig;
} TpTrainSchedule;

/* A training run as asked for.  Strings are borrowed (they outlive the run). */
typedef struct {
  TpTrainSchedule sched;
  TpTrainOptim opt;
  const char *model;        /* name or .model file (NULL: mlp) */
  const char *data;         /* directory or synthetic[:TRAIN[:TEST]] (NULL: the default directory) */
  const char *backend;      /* NULL: cpu */
  const char *devices;      /* GPUs of the stages, round-robin (NULL: stage s on GPU s mod count) */
  int batch;                /* samples per mini-batch, over all replicas */
  int data_parallel;        /* D replicas of the pipeline, B/D samples each (0 or 1: one pipeline) */
  guint32 seed;
  double timeout;           /* seconds a stage waits for a message */
  double peer_timeout;      /* one process per stage: seconds a rank waits for another */
  int reps;                 /* timed repetitions per profiled operation */
  int threads;              /* a host backend's threads per call (0: its default, one per stage) */
  TpCheckpointOpts ck;
  const char *resume;       /* continue the run whose checkpoint is in this directory */
  gboolean ck_dir_is_resume; /* ck.dir came from resume (errors about it name that parameter) */
  gboolean progress;        /* a progress bar on standard error when it is a terminal */
  gboolean keep_events;     /* keep the measured events (for a trace) */
} TpTrainConfig;

/* What a run measured: the report's data (rank 0 holds it), apart from the state that produced it. */
typedef struct {
  TpTally tally;            /* the counts, as checkpoints carry them */
  GString *log;             /* training log (CSV) */
  GArray *events;           /* measured event rows (cfg.keep_events) */
  TpGroupLink *links;       /* [W-1] measured before training (NULL: free links) */
  double *allreduce;        /* [W] each stage's gradient reduction among its replicas, timed before
                               training (seconds; NULL: one pipeline): the prediction's all-reduce */
  TpComparison cmp;         /* the prediction joined with the measurement */
  gboolean cmp_ready;
} TpTrainResults;

/* The progress bar. */
typedef struct {
  gboolean bar;
  gint64 origin, bar_start;
  int done_before;
  int bar_base;             /* mini-batches done before this process (resumed) */
} TpTrainProgress;

/* Where the run is, in checkpointed segments (docs: Checkpoints). */
typedef struct {
  TpSchedule *s_tail;       /* the shorter last segment of a run, when M does not divide K */
  TpSchedule *s_cut;        /* the rest of a segment a stop cut (train/tp_train_run.c): run first on
                               resuming there, and held by the checkpoint written at the cut */
  int start_epoch, start_index, generation;
  double elapsed0;          /* seconds of the run before this process (resumed) */
  int ck_epoch, ck_index;   /* where the last checkpoint written lies (epoch from 1, mini-batches into it) */
  int interrupted;          /* the signal that stopped the run at a checkpoint (-1: stop_after) */
} TpTrainPosition;

/* The devices the stages compute on. */
typedef struct {
  int cores;                /* the first rank's processors (the prediction's devices on cpu) */
  TpBackend **stage_be;     /* cuda: each stage's own instance */
  int gpus;                 /* the distinct GPUs they use */
  char *list;               /* their list (cfg.devices, or every GPU where the stages' links join GPUs) */
} TpTrainDevices;

/* The plan's prediction: the stages' profiles, the simulation of the run's schedule on them. */
typedef struct {
  TpStageProfile *prof;     /* [W] */
  TpSim *sim;
  TpMetrics *m;
} TpTrainPrediction;

/* Data parallelism: D replicas of the pipeline in this process, whose updates use the mean of their
 * gradients (exec/tp_reduce.h). */
typedef struct {
  int D;
  TpRuntime **rt;           /* [D]: rt[0] is the run's runtime (Train.rt) */
  TpReduce *reduce;
  gboolean identical;       /* the replicas' weights were bit-identical after every segment */
  /* a stop inside a segment, decided once for every replica: the segment's mini-batches asked about
   * so far, and the first one cut (0: none) */
  GMutex cut_lock;
  int cut_asked, cut_mb;
} TpTrainReplicas;

typedef struct {
  TpTrainConfig cfg;
  TpGroup *group;           /* the processes of the run (NULL: a group of one, every stage here); the run's */
  int W, N, K, runs;        /* as run (a schedule file gives W, N and K; an epoch gives K); W: the stages
                               (cfg.sched.workers · V with interleaved stages), set by the prepare phase */
  int V;                    /* model chunks per worker (1 without interleaved stages): W / V workers,
                               whose chunks take turns in the one process that runs them all */
  gboolean per_epoch;
  TpTrainDevices dev;
  TpModel *model;
  TpDataset *train, *test;
  char *data_id;            /* the data by content (sizes, sha256): what a checkpoint names, not the path */
  TpBatcher *batcher;
  int *bounds;              /* [W+1] the stages' first layers */
  TpRuntime *rt;            /* replica 0's with data parallelism */
  TpTrainReplicas dp;
  TpSchedule *s;
  TpCost *cost;
  TpTrainPrediction pred;
  TpTrainResults res;
  int rank;                 /* this process's in the group */
  TpTrainProgress prog;
  TpTrainPosition pos;
  TpTrainFuse fuse;
} Train;

/* What the trainer hands its results to, read-only, on the process that holds them (rank 0), before the run
 * shuts down: the report's writer. */
typedef gboolean (*TpTrainReportFn)(const Train *t, gpointer data, GError **err);

/* The samples of a mini-batch each replica runs. */
static inline int tp_train_replica_batch(const Train *t) { return t->cfg.batch / MAX(t->dp.D, 1); }
/* Timings of the replicas' reduction before training (res.allreduce): more than of an operation, a
 * reduction being cheap beside one and noisier (the replicas meet). */
static inline int tp_train_allreduce_reps(const Train *t) { return 2 * MAX(t->cfg.reps, 1) + 1; }

/* The cosine decay's length in mini-batches (the whole run), 0 for a constant rate. */
static inline long tp_train_lr_steps(const Train *t) { return t->cfg.opt.lr_cosine ? (long)t->K * t->runs : 0; }
/* The warm-up's mini-batches (0: none); -1 asks for a tenth of the decay's, at least one. */
static inline long tp_train_warmup(const Train *t)
{
  long steps = tp_train_lr_steps(t);
  return !steps || !t->cfg.opt.warmup ? 0 : t->cfg.opt.warmup < 0 ? MAX(steps / 10, 1) : MIN((long)t->cfg.opt.warmup, steps);
}

/* How a run ended before its report, for the caller to say (or not) and end the process with. */
typedef struct {
  gboolean ended;  /* TRUE: no report; the process ends with status */
  gboolean failed; /* FALSE returned once every rank had agreed on the set-up: the caller ends the job
                      with tp_group_fail(group, the error's line, status) (a group of one returns from it;
                      the caller then says the error as any other) */
  int status;      /* 128 + the signal that stopped the run, 0 for stop_after, else another rank's failure
                      (failed: the status the job ends with) */
  int signal;      /* stopped at a checkpoint (t->pos.ck_epoch, t->pos.ck_index in t->cfg.ck.dir): the signal, -1 for
                      stop_after; 0: another rank failed and says why */
  gboolean says;   /* this process says it (the stopped run's line: from rank 0 alone) */
} TpTrainEnd;

/* The whole run in t->group: set-up, training, then report(t, data) on the process that holds the
 * results.  args: the arguments every process must agree on (one process per stage).  FALSE and err
 * when the run failed here (end->failed: after the set-up was agreed); TRUE when it ran, or ended
 * before its report (end->ended: stopped at a checkpoint, or another rank failed), which the caller
 * then says and ends the process with. */
gboolean tp_train_main(Train *t, const char *args, TpTrainReportFn report, gpointer data, TpTrainEnd *end,
                       GError **err);

/* The trainer's three phases, which tp_train_main runs in turn (each rank its part):
 * tp_trainer.c: prepare — the one place for the semantic checks of the configuration, then the model,
 * the data, the split into stages, the backends and the runtime; and the teardown. */
gboolean tp_train_prepare(Train *t, GError **err);
void tp_train_clear(Train *t);
/* What the stages' compute shares, for the prediction: the cores on cpu; on cuda the GPUs in use. */
int tp_train_prediction_devices(const Train *t);
/* Whether the checkpoint directory (if any) takes files: checked before training (resume: once
 * its checkpoint is read), TP_ERROR_INPUT naming it when not; the run's first generation is then
 * past every state file there (tp_checkpoint_first_generation). */
gboolean tp_train_check_ck_dir(Train *t, GError **err);
/* A run stopped at a checkpoint (t->pos.interrupted): how it ends (status 128 + the signal: 130 SIGINT,
 * 143 SIGTERM, 129 SIGHUP, or 0 for stop_after; rank 0 says it). */
void tp_train_stopped(const Train *t, TpTrainEnd *end);
/* sha256 of every stage's latest weights (little-endian float32, stage 1 first). */
char *tp_train_weights_sha256(const Train *t);

/* tp_train_plan.c: plan — every stage profiled on the first mini-batch (gathered onto every rank), the
 * cost model, the fused-forward decision, the run's schedules and the prediction, before any training. */
gboolean tp_train_plan(Train *t, GError **err);

/* tp_train_run.c: execute — every run (epoch) of the plan's schedules, cut into checkpointed segments;
 * and --resume's checkpoint read into a prepared run (before its plan: the plan it ran is kept). */
gboolean tp_train_execute(Train *t, GError **err);
gboolean tp_train_resume(Train *t, GError **err);

#endif
