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
   * its order across its chunks, as the simulator's ranks do */
  GMutex turn_lock;  /* rpos, stopped */
  GCond turn_cond;   /* a rank's turn passed on, or the run stopped */
  int *rpos;         /* [ranks] the place of each rank's next operation in its order */
  gboolean stopped;  /* the run failed: no stage waits for its turn any more */
} Shared;

/* Stage state for one schedule. */
typedef struct {
  Shared *sh;
  int st, W, N, B, m;
  RtStage *S;
  TpNet *net;
  const TpBackend *be;
  TpWStore *store;
  size_t in_e, out_e;
  gboolean host;     /* the backend works on host memory: the staging buffers are the buffers */
  float *in, *out, *dout, *din;         /* in the backend's memory */
  float *h_in, *h_out, *h_dout, *h_din; /* their host staging (data, messages) */
  TpOutbox *box[2];  /* h_out, h_din: taken from these for each message, lent with its send */
  gint32 *labels;
  TpSaved **saved;   /* [tp_key] the forward's saved state until its backward (a slice of mbuf[mb]
                        where the mini-batch's backward is whole and its forwards are not) */
  TpSaved **mbuf;    /* [K] the saved state of all micro-batches of a mini-batch, in one buffer */
  gboolean batched;  /* whole backwards over micro-batch forwards run batched (not per_micro_backward) */
  int *fver;         /* [tp_key] the version that forward read */
  guint64 *seeds;    /* [N] the dropout seeds of the forward being run (set_seeds) */
  GPtrArray *pool[2];/* free TpSaved of micro-batch / whole-mini-batch size */
  gboolean *whole_b; /* [K] the mini-batch's backward on this stage is one whole-mini-batch backward */
  /* recomputation (s->recompute): a forward keeps only its input; the backward re-runs it */
  gboolean rc;
  float **kept;      /* [tp_key] the forward's input, until its backward */
  GPtrArray *kpool[2]; /* free input buffers of micro-batch / whole-mini-batch size */
  TpSaved *ws;       /* the workspace every forward and re-run forward writes (max op samples) */
  float *rc_out;     /* where a re-run forward writes its output (discarded) */
  int *fwd_done;     /* [K] forwards done on the last stage, to know when a loss is complete */
  gboolean split;    /* the schedule splits backwards into I and W: saved states keep output
                        gradients (tp_saved_new_split), and saved[key] lives from I to W */
  /* a cut run (TpProgress.cut_before): operations of mini-batches after `cut` are left out */
  int cut;           /* K while the run is whole */
  int started;       /* stage 1: the last mini-batch whose first forward it began */
  gboolean marked;   /* the cut's marker went to the next stage */
} Stage;

static inline double tp_rt_now(const Shared *sh) { return (double)(g_get_monotonic_time() - sh->origin) / 1e6; }

/* tp_runtime_ops.c: the operations of one stage, each recording what it did in rec */
gboolean tp_rt_forward(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err);
gboolean tp_rt_backward(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err);
gboolean tp_rt_weight_grad(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err);
gboolean tp_rt_update(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err);
/* The message bytes the stage (data) holds, for its weight store's count. */
gint64 tp_rt_message_bytes(void *data);
/* A kept input buffer (data) of stage user let go (g_ptr_array_foreach). */
void tp_rt_kept_free(gpointer data, gpointer user);

#endif
