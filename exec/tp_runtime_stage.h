/* tp_runtime_stage.h — the state of a run (Shared) and of one stage's thread in it (Stage), shared by
 * the driver (tp_runtime.c: the threads, the turns of interleaved stages, the run) and the
 * operations a stage runs (tp_runtime_ops.c: forward, backward, weight gradient, update). */
#ifndef TP_RUNTIME_STAGE_H
#define TP_RUNTIME_STAGE_H

#include "tp_outbox.h"
#include "tp_runtime_priv.h"

/* The run: what every stage's thread shares. */
typedef struct {
  TpRuntime *rt;
  const TpSchedule *s;
  const int *const *idx;
  int first_mb;
  gint64 origin;
  TpTransport *tr;
  TpRtLinks *links;  /* how each link direction moves its messages (tp_runtime_msg.c) */
  TpProgress *progress;
  TpRunResult *out;
  GMutex lock;       /* first_err, finished */
  GCond cond;        /* a stage finished */
  int finished;      /* stages done */
  GError *first_err; /* the error that ended the run */
  /* interleaved stages (s->rank_seq): the turn of each rank, which runs one operation at a time in
   * its order across its chunks, as the simulator's ranks do (but for a tied head's update, which
   * passes the turn on before it meets the other side: stage_walk) */
  GMutex turn_lock;  /* rpos, stopped */
  GCond turn_cond;   /* a rank's turn passed on, or the run stopped */
  int *rpos;         /* [ranks] the place of each rank's next operation in its order */
  gboolean stopped;  /* the run failed: no stage waits for its turn any more */
} Shared;

/* A stage's buffers for its operations' inputs and outputs, in the backend's memory, and their
 * host staging (data, messages); on a host backend they are the same buffers. */
typedef struct {
  gboolean host;     /* the backend works on host memory: the staging buffers are the buffers */
  float *in, *out, *dout, *din;         /* in the backend's memory */
  float *h_in, *h_out, *h_dout, *h_din; /* their host staging (data, messages) */
  TpOutbox *box[2];  /* h_out, h_din: taken from these for each message, lent with its send */
  gint32 *labels;
} RtBufs;

/* The activation store (tp_runtime_acts.c): what a forward leaves for its backward, and for how long
 * — its saved state, a slice of its mini-batch's buffer where the backward is whole and the forwards
 * are not, only its input under recomputation, kept from I to W under a split backward. */
typedef struct {
  TpSaved **saved;   /* [tp_key] the forward's saved state until its backward (a slice of mbuf[mb]
                        where the mini-batch's backward is whole and its forwards are not) */
  TpSaved **mbuf;    /* [K] the saved state of all micro-batches of a mini-batch, in one buffer */
  int *fver;         /* [tp_key] the version that forward read */
  gboolean *whole_b; /* [K] the mini-batch's backward on this stage is one whole-mini-batch backward */
  gboolean batched;  /* whole backwards over micro-batch forwards run batched (not per_micro_backward) */
  GPtrArray *pool[2];/* free TpSaved of micro-batch / whole-mini-batch size */
  /* recomputation (s->recompute): a forward keeps only its input; the backward re-runs it */
  gboolean rc;
  float **kept;      /* [tp_key] the forward's input, until its backward */
  GPtrArray *kpool[2]; /* free input buffers of micro-batch / whole-mini-batch size */
  TpSaved *ws;       /* the workspace every forward and re-run forward writes (max op samples) */
  float *rc_out;     /* where a re-run forward writes its output (discarded) */
  gboolean split;    /* the schedule splits backwards into I and W: saved states keep output
                        gradients (tp_saved_new_split), and saved[key] lives from I to W */
} RtActs;

/* Stage state for one schedule. */
typedef struct {
  Shared *sh;
  int st, W, N, B, m;
  RtStage *S;
  TpNet *net;
  const TpBackend *be;
  TpWStore *store;
  size_t in_e, out_e;
  RtBufs b;
  RtActs a;
  guint64 *seeds;    /* [N] the dropout seeds of the forward being run (tp_rt_set_seeds) */
  int *fwd_done;     /* [K] forwards done on the last stage, to know when a loss is complete */
  /* a cut run (TpProgress.cut_before): operations of mini-batches after `cut` are left out */
  int cut;           /* K while the run is whole */
  int started;       /* stage 1: the last mini-batch whose first forward it began */
  gboolean marked;   /* the cut's marker went to the next stage */
} Stage;

/* The forwards a backward consumes: one whole-mini-batch forward (from_whole), or micro-batches
 * lo..hi-1 of un samples each. */
typedef struct {
  int lo, hi, un, whole_key;
  gboolean from_whole;
} RtSpan;

static inline double tp_rt_now(const Shared *sh) { return (double)(g_get_monotonic_time() - sh->origin) / 1e6; }

/* tp_runtime_ops.c: the operations of one stage, each recording what it did in rec */
gboolean tp_rt_forward(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err);
gboolean tp_rt_backward(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err);
gboolean tp_rt_weight_grad(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err);
gboolean tp_rt_update(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err);
/* The message bytes the stage (data) holds, for its weight store's count. */
gint64 tp_rt_message_bytes(void *data);
/* The dropout seeds of the forward of (mb, micro) into saved state sv (tp_saved_set_seeds). */
void tp_rt_set_seeds(Stage *g, TpSaved *sv, int mb, int micro);

/* tp_runtime_acts.c: the activation store, made and freed in one place each (tp_acts_workspace once
 * the stage's weight store counts its bytes) */
gboolean tp_acts_new(Stage *g, GError **err);
gboolean tp_acts_workspace(Stage *g, GError **err);
void tp_acts_free(Stage *g);
/* Where the forward op of n samples (at offset off in its mini-batch) writes its saved state; given
 * back with tp_acts_drop when the forward fails, else kept with tp_acts_keep (it read version v). */
TpSaved *tp_acts_forward_state(Stage *g, const TpOp *op, int n, int off, GError **err);
void tp_acts_drop(Stage *g, TpSaved *sv, int n);
gboolean tp_acts_keep(Stage *g, const TpOp *op, TpSaved *sv, int n, int v, GError **err);
/* The forwards backward op consumes; whether forward j of them is stored, and the key it is under. */
RtSpan tp_acts_span(const Stage *g, const TpOp *op);
int tp_acts_key(const Stage *g, const TpOp *op, const RtSpan *p, int j);
gboolean tp_acts_has(const Stage *g, int key);
/* The version the forward stored under key read. */
static inline int tp_acts_version(const Stage *g, int key) { return g->a.fver[key]; }
/* The saved state of forwards j0..j1-1 of span p, for one backward at weights w (under recomputation:
 * re-run from their inputs at w); let go of by tp_acts_release (of `samples` samples; an I keeps it
 * for its W), and the mini-batch's buffer once the backward is done (tp_acts_end_backward). */
TpSaved *tp_acts_take(Stage *g, const TpOp *op, const RtSpan *p, int j0, int j1, const float *w, GError **err);
void tp_acts_release(Stage *g, const TpOp *op, TpSaved *sv, int samples);
void tp_acts_end_backward(Stage *g, const TpOp *op);
/* A W's state (the output gradients its I kept; NULL: none), given back with tp_acts_release. */
TpSaved *tp_acts_take_for_w(Stage *g, const TpOp *op);

#endif
