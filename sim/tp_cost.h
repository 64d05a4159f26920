/* tp_cost.h — cost models for the simulator: unit slots, or a cost file (GKeyFile) with per-stage
 * times and bytes, link latency and bandwidth, and an optional stage → device mapping. */
#ifndef TP_COST_H
#define TP_COST_H

#include <glib.h>

#include "tp_allreduce.h"
#include "tp_schedule.h"
#include "tp_tie.h"

typedef struct {
  double fwd, bwd;           /* time of one micro-batch forward / backward */
  double upd;                /* time of one update */
  double act_bytes;          /* bytes sent downstream per micro-batch forward */
  double grad_bytes;         /* bytes sent upstream per micro-batch backward */
  double stored_bytes;       /* bytes kept per micro-batch activation until its backward */
  double weight_bytes;       /* one weight version */
  double optimizer_bytes;    /* optimizer state (lives with the latest weights) */
  double grad_buffer_bytes;  /* gradient (accumulation) buffer */
  int device;                /* 0-based device the stage runs on */
  double input_bytes;        /* bytes of the stage's input per micro-batch: what a recomputing
                                schedule stores instead of stored_bytes (0: gradient_bytes, the
                                same elements) */
  double bwd_input;          /* a split backward's input gradient I per micro-batch; 0: half of bwd */
  double fwd_whole;          /* one forward of the whole mini-batch (its N micro-batches as one
                                product); 0: N x fwd */
  double stored_w_bytes;     /* of stored_bytes, what a split backward keeps from its I to its W (Qi et
                                al.'s M_W); 0: all of stored_bytes */
  double fb_overlap;         /* o of an F&B composite whose F runs here (tp_cost_fb), 0..1 */
} TpStageCost;

/* An F&B composite of a forward of time f and a backward of time b takes max(f, b) + (1 - o)·min(f, b):
 * o = 0 (the default) their sum, o = 1 the longer one alone. */
static inline double tp_cost_fb(double f, double b, double o) { return MAX(f, b) + (1 - o) * MIN(f, b); }

/* Times of a split backward's parts per micro-batch: I = bwd_input (default bwd/2), W = bwd - I. */
static inline double tp_cost_input_grad(const TpStageCost *sc) { return sc->bwd_input > 0 ? sc->bwd_input : sc->bwd / 2; }
/* Time of a forward of the whole mini-batch of N micro-batches. */
static inline double tp_cost_forward_whole(const TpStageCost *sc, int N) { return sc->fwd_whole > 0 ? sc->fwd_whole : N * sc->fwd; }
static inline double tp_cost_weight_grad(const TpStageCost *sc) { return sc->bwd - tp_cost_input_grad(sc); }
/* Bytes a micro-batch keeps between its I and its W (M_W). */
static inline double tp_cost_stored_w(const TpStageCost *sc) { return sc->stored_w_bytes > 0 ? sc->stored_w_bytes : sc->stored_bytes; }

typedef struct {
  double latency;     /* time before the first byte arrives */
  double bandwidth;   /* bytes per time unit; 0 = infinite */
  double eager_limit; /* MPI's rendezvous: a message of more bytes stays with its sender until its
                         receiving operation starts (common/tp_eager.h); 0: every message eager */
} TpLinkCost;

/* Whether a message of `bytes` on link l stays with its sender until its receiving operation starts
 * (and counts at the receiver only from then on) instead of until its transfer ends. */
static inline gboolean tp_cost_rendezvous(const TpLinkCost *l, double bytes)
{
  return l->eager_limit > 0 && bytes > l->eager_limit;
}

typedef struct {
  int W;
  gboolean unit;            /* unit-slot mode: F and B take one slot each whatever they cover */
  double samples_per_micro; /* samples in one micro-batch, for throughput */
  const char *time_unit;    /* "slot" or "s" */
  const char *byte_unit;    /* "unit" or "B" */
  TpStageCost *stage;       /* W entries */
  TpLinkCost *link;         /* W-1 entries: link l joins stages l and l+1 (0-based), both directions */
  int n_devices;
  gboolean shared_devices;  /* some device runs more than one stage */
  long gpus;                /* replicas and tensor ranks: the GPUs they take in all (0: n_devices) */
  char *source;             /* cost file, or NULL */
  /* from an analytic model (NULL otherwise): per stage device name, layer range, device memory */
  char **device_name, **stage_note;
  double *capacity;
  TpTie tie; /* the split's head tied across stages (tp_tie.h; stage -1: none, as without a model) */
  /* data parallelism (tp_allreduce.h): the [data_parallel] links of a cost file or a cluster's, and
   * D once the command line sets it; NULL: none given, D = 1 */
  TpDataParallel *dp;
} TpCost;

/* The pipeline's replicas: D, or 1. */
static inline int tp_cost_replicas(const TpCost *c) { return c->dp ? c->dp->D : 1; }

TpCost *tp_cost_unit(int W);
/* Load a cost file for W stages.  Errors (TP_ERROR_INPUT) name file:line and the key. */
TpCost *tp_cost_load(const char *path, int W, GError **err);
TpCost *tp_cost_parse(const char *text, gsize len, const char *name, int W, GError **err);
void tp_cost_free(TpCost *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpCost, tp_cost_free)

/* Recompute n_devices and shared_devices after editing stage[].device. */
void tp_cost_update_devices(TpCost *c);
/* Interleaved stages (s->rank_seq): each stage runs on its rank's device — rank r's is the device
 * stage r had, so ranks that shared a device still do — and a link between two chunks of one rank
 * costs nothing (no latency, infinite bandwidth).  Nothing to do otherwise. */
void tp_cost_place_chunks(TpCost *c, const TpSchedule *s);
/* D replicas of the pipeline (D > 1): each stage all-reduces its weight bytes of gradients before its
 * update (overlap: in buckets behind its last backward) on the links c->dp gives (free links where
 * none are given), and holds a reduction buffer of as many bytes beside its gradient buffer. */
void tp_cost_data_parallel(TpCost *c, int D, gboolean overlap);

#endif
