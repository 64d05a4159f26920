/* tp_checkpoint.h — the training checkpoint on disk: a directory holding checkpoint.ini (GKeyFile:
 * the run's identity, its position, the plan, the log so far, sha256 of the state files and of
 * itself) and the state: state-G.bin (every stage's latest weights, its optimizer state, then its
 * buffers — batchnorm's running statistics —, little-endian float32; one process ran every stage) or state-G-stageS.bin, one file per stage S in the same
 * layout (one process per stage, --transport mpi: each writes its own).  Everything is written
 * atomically (temporary file, fsync, rename, fsync of the directory) and the state files, under
 * names of their generation G, before the metadata that names them: its rename is the commit, so
 * that a run killed at any moment leaves the previous checkpoint whole. */
#ifndef TP_CHECKPOINT_H
#define TP_CHECKPOINT_H

#include "tp_data.h"
#include "tp_group_run.h"
#include "tp_model.h"
#include "tp_runtime.h"
#include "tp_schedule.h"
#include "tp_tally.h"

#include <glib.h>

#define TP_CHECKPOINT_INI "checkpoint.ini"
/* Environment hook for tests: kill the process (SIGKILL) during the Nth checkpoint it writes,
 * after the new state file and the temporary metadata are on disk, before the metadata's rename. */
#define TP_CHECKPOINT_KILL_ENV "TIMEPREST_CHECKPOINT_KILL"

typedef struct {
  /* identity: what must agree for a run to continue from it, as (key, value) strings in order */
  GPtrArray *id_keys, *id_vals;
  int generation;            /* counts the checkpoints of the run; names the state file */
  int epoch;                 /* epochs (runs) complete */
  int index;                 /* mini-batches done in the current epoch */
  int done;                  /* mini-batches done in the whole run */
  TpDataPos pos;             /* the data order's position after them */
  guint32 seed;
  int W;
  int lo, hi;                /* the stages whose state weights/mom hold (taken, written or read) */
  size_t *np;                /* [W] floats per stage */
  int states;                /* optimizer state per parameter: 1 (SGD's momentum), 2 (AdamW's moments) */
  size_t *nb;                /* [W] buffer floats per stage (batchnorm's running statistics; 0 without) */
  float **weights, **mom, **buf; /* [W][np], [W][np·states], [W][nb] */
  char *plan, *plan_tail;    /* the schedules run (CSV): a segment, and the shorter last one (or NULL) */
  char *plan_cut;            /* at a stop inside a segment: the rest of it, run first on resuming (or NULL) */
  char *log;                 /* the training log so far (CSV text) */
  double elapsed;            /* seconds of the run so far (the log's time) */
  TpTally tally;             /* the run's counts so far ([results]) */
} TpCheckpoint;

/* An empty checkpoint for W stages of np[s] floats, `states` optimizer floats per parameter and nb[s]
 * buffer floats (nb NULL: none; memory allocated, arrays empty; lo..hi = every stage). */
void tp_checkpoint_init(TpCheckpoint *c, int W, const size_t *np, const size_t *nb, int states);
void tp_checkpoint_clear(TpCheckpoint *c);
void tp_checkpoint_id(TpCheckpoint *c, const char *key, const char *value);

/* Write c into dir (created if missing) atomically; old state files are removed once the new
 * metadata is in place.  TP_ERROR_RUNTIME naming the file on failure. */
gboolean tp_checkpoint_write(const char *dir, const TpCheckpoint *c, GError **err);

/* Whether checkpoints can be written into dir: created if missing, a file made and removed there
 * (before training, so that a run does not learn it at its first checkpoint).  TP_ERROR_INPUT
 * naming dir when not. */
gboolean tp_checkpoint_check_dir(const char *dir, GError **err);

/* Whether path (through its symbolic links) names the checkpoint directory dir itself or a file a
 * checkpoint there writes: checkpoint.ini, the lock, a state file or a temporary of one. */
gboolean tp_checkpoint_owns(const char *dir, const char *path);

/* The lock file of a checkpoint directory: held (fcntl) for the life of the run that writes there,
 * holding "PID P on HOST". */
#define TP_CHECKPOINT_LOCK "checkpoint.lock"
/* Take dir's lock for this process (again for the same dir: nothing to do).  TP_ERROR_INPUT, naming
 * flag, dir and the holder, when another process holds it. */
gboolean tp_checkpoint_lock(const char *dir, GError **err);
/* Whether another process holds dir's lock (a run writing there): TRUE with the error
 * tp_checkpoint_lock would give; FALSE when none does, this process does, or there is no lock file.
 * Takes nothing, makes nothing, keeps this process's lock. */
gboolean tp_checkpoint_in_use(const char *dir, GError **err);

/* The first generation a run may write into dir: past every state file there (temporaries too),
 * so that no file of the checkpoint in force, whatever run made it, is overwritten before the new
 * one is committed.  0 for an empty or missing directory. */
int tp_checkpoint_first_generation(const char *dir);

/* One process per stage: the state of stage (0-based) into dir/state-G-stageS.bin, durably (temporary
 * file, fsync, rename, fsync of dir), its sha256 (hex) into sha.  Nothing is committed yet. */
gboolean tp_checkpoint_write_part(const char *dir, const TpCheckpoint *c, int stage, char sha[65], GError **err);

/* Once every stage's part is written (sha[s] their sha256): the metadata naming them, put in place
 * atomically — the commit. */
gboolean tp_checkpoint_commit_parts(const char *dir, const TpCheckpoint *c, const char *const *sha, GError **err);

/* After a commit of generation: remove stage's files of other generations and its temporaries
 * (stage < 0: the whole-run state files and the metadata's temporaries). */
void tp_checkpoint_remove_stale(const char *dir, int generation, int stage);

/* Read the checkpoint in dir, every checksum verified.  TP_ERROR_INPUT naming the file for a
 * missing, truncated or corrupt checkpoint. */
gboolean tp_checkpoint_read(const char *dir, TpCheckpoint *c, GError **err);

/* The same in two steps, for processes that share the metadata: its text as read from dir, then
 * the checkpoint from that text (its seal checked) with the state of stages lo..hi-1 only (hi < 0:
 * every stage) read from dir. */
char *tp_checkpoint_read_meta(const char *dir, gsize *len, GError **err);
gboolean tp_checkpoint_parse(const char *dir, const char *meta, gsize len, int lo, int hi, TpCheckpoint *c,
                             GError **err);

/* NULL when c's identity equals run's (every key of run's, and data_parallel, which a run without it
 * may not continue either); otherwise one line naming the first difference. */
char *tp_checkpoint_id_diff(const TpCheckpoint *c, const TpCheckpoint *run);
/* A checkpoint written before the schedule digest record (docs/formats.md, "The schedule's digest")
 * names its schedule file by the sha256 of the file's CSV form: where that is file's (this run's),
 * c's schedule_sha256 becomes run's, so that the two compare equal; any other value stays. */
void tp_checkpoint_read_old_digest(TpCheckpoint *c, const TpCheckpoint *run, const TpSchedule *file);

/* ---- the run's side (tp_checkpoint_run.c) ------------------------------------------------------ */

/* What a checkpoint must agree on to be continued by a run. */
typedef struct {
  const TpModel *model;
  const TpPreset *preset;      /* NULL: a schedule file, then `file` */
  const TpSchedule *file;
  gboolean slots, per_epoch;
  const TpSignificance *sig;   /* NULL: the default */
  int W, N, batch, K, every;
  guint32 seed;
  double lr, momentum, weight_decay;
  const char *backend, *data;  /* data: the data by content (sizes and digest), not its path */
  long lr_steps;              /* cosine decay over this many mini-batches; 0: constant lr */
  long warmup;                /* of them, the linear warm-up's */
  const char *optimizer;      /* AdamW's name and hyper-parameters; NULL: SGD (as checkpoints before AdamW) */
  int replicas;               /* data parallelism's D (1: one pipeline) */
} TpRunIdentity;

void tp_checkpoint_identity(TpCheckpoint *c, const TpRunIdentity *id);

/* Stages lo..hi-1's (hi < 0: every stage's) latest weights and momentum from rt into c (initialised
 * for rt's stages), and c's stages c->lo..c->hi-1 back (TP_ERROR_INPUT naming dir when a stage's
 * parameter count differs). */
gboolean tp_checkpoint_take(TpCheckpoint *c, const TpRuntime *rt, int lo, int hi, GError **err);
gboolean tp_checkpoint_restore(const TpCheckpoint *c, TpRuntime *rt, const char *dir, GError **err);

/* A run's checkpoint written by its group: a group of one writes the whole run (tp_checkpoint_write);
 * otherwise each rank of the first replica (ranks 0..c->W-1) writes its stage's part durably, a gather (which also shares stop, the
 * signal each rank caught, into *sig: the first one, 0: none) tells rank 0 that every part is on
 * disk, rank 0 commits the metadata and says so, and only then does each rank remove its stage's
 * files of older checkpoints.  A rank that fails returns FALSE (its error names its stage): until
 * the commit the previous checkpoint is the one in force.  Collective. */
gboolean tp_checkpoint_save(TpGroup *g, const char *dir, const TpCheckpoint *c, int (*stop)(void), int *sig,
                            GError **err);

/* The checkpoint in dir read by a group of a run of W stages: rank 0 reads the metadata and broadcasts
 * it, every rank takes the state of its stages (tp_group_stages).  Collective. */
gboolean tp_checkpoint_load(TpGroup *g, const char *dir, int W, TpCheckpoint *c, GError **err);

/* A schedule of the checkpoint's plan (CSV text, [plan] key), parsed and validated; errors name the key. */
TpSchedule *tp_checkpoint_plan(const char *text, const char *dir, const char *key, GError **err);

#endif
