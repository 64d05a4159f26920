/* tp_train.h — private to `timeprest train` (cli/cmd_train.c and cli/tp_train_*.c): the run's options
 * and state, shared by the set-up, the run loop, the MPI part and the report. */
#ifndef TP_TRAIN_H
#define TP_TRAIN_H

#include "tp_checkpoint.h"
#include "tp_mpi.h"
#include "tp_predict.h"
#include "tp_report.h"

typedef struct {
  char *preset, *workers, *micro, *mini, *epochs, *model, *batch, *data, *seed, *lr, *momentum, *wd;
  char *backend, *transport, *order_from, *schedule, *csv, *trace, *format, *output, *timeout, *reps;
  char *significance, *peer_timeout, *devices, *lr_schedule;
  char *checkpoint, *resume, *ck_every, *stop_after;
  gboolean quiet;
} Opts;

typedef struct {
  Opts o;
  const TpPreset *preset;
  int W, N, K, runs, batch;
  gboolean per_epoch;       /* runs are epochs (else one run of -k mini-batches, or of the file) */
  int fmt;                  /* 0 text, 1 json */
  guint32 seed;
  double lr, momentum, wd, timeout;
  int lr_cosine;            /* --lr-schedule cosine */
  int reps, cores;
  gboolean slots;           /* --order-from slots */
  gboolean has_sig;         /* --significance given */
  TpSignificance sig;
  TpModel *model;
  TpDataset *train, *test;
  char *data_id;            /* the data by content (sizes, sha256): what a checkpoint names, not the path */
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
  TpTransport *nccl;        /* --transport nccl: the stages' transport (MPI then serves the rest) */
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
  TpBackend **stage_be;     /* --backend cuda: each stage's own instance */
  int gpus;                 /* the distinct GPUs they use */
} Train;

/* The cosine decay's length in mini-batches (the whole run), 0 for a constant rate. */
static inline long tp_train_lr_steps(const Train *t) { return t->lr_cosine ? (long)t->K * t->runs : 0; }

/* cmd_train.c: the set-up (model, data, stages, runtime; --resume's state) and the teardown. */
gboolean tp_train_setup(Train *t, GError **err);
void tp_train_clear(Train *t);
/* What the stages' compute shares, for the prediction: the cores on cpu; on cuda the GPUs in use. */
int tp_train_prediction_devices(const Train *t);
/* Whether the checkpoint directory (if any) takes files: checked before training (--resume: once
 * its checkpoint is read), exit 2 naming the flag when not; the run's first generation is then
 * past every state file there (tp_checkpoint_first_generation). */
gboolean tp_train_check_ck_dir(Train *t, GError **err);
/* A run stopped at a checkpoint (t->interrupted): its line, and the exit. */
G_NORETURN void tp_train_stopped(Train *t);

/* tp_train_run.c: every run (epoch) of the schedule, cut into checkpointed segments; --resume. */
gboolean tp_train_run_all(Train *t, GError **err);
gboolean tp_train_resume(Train *t, GError **err);

/* tp_train_report.c: the training log, the trace files and the report, all or none; before the run,
 * those outputs' names checked (none empty, no file named twice). */
gboolean tp_train_write_outputs(Train *t, GError **err);
gboolean tp_train_check_outputs(const Opts *o, GError **err);

/* tp_train_mpi.c: --transport mpi, one rank per stage. */
gboolean tp_train_mpi(Train *t, const char *args, GError **err);
gboolean tp_train_mpi_share_profile(Train *t, GError **err);
void tp_train_mpi_links_to_cost(Train *t);
gboolean tp_train_mpi_same_schedule(Train *t, GError **err);
gboolean tp_train_mpi_barrier(Train *t, GError **err);
void tp_train_mpi_links_json(const Train *t, GString *out);
void tp_train_mpi_links_text(const Train *t, GString *out);
/* Checkpoints over MPI (README: Checkpoints): --resume's checkpoint with this rank's stage's state;
 * a checkpoint of every stage, committed once every rank's part is on disk (*sig: a signal any rank
 * caught, 0: none). */
gboolean tp_train_mpi_read_checkpoint(Train *t, const char *dir, TpCheckpoint *c, GError **err);
gboolean tp_train_mpi_save(Train *t, const TpCheckpoint *c, int *sig, GError **err);

#endif
