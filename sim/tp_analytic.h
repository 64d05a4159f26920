/* tp_analytic.h — per-stage costs from a model description and either a cluster (layer times from
 * FLOPs and bytes against each device's FLOP/s and bandwidth: roofline, scaled by its efficiency;
 * stage bytes from activation sizes) or a measured profile (tp_profile.h: the layers' measured
 * times and bytes; links from a cluster when one is given, free otherwise), and the split of the
 * layers into stages. */
#ifndef TP_ANALYTIC_H
#define TP_ANALYTIC_H

#include "tp_cluster.h"
#include "tp_cost.h"
#include "tp_model.h"
#include "tp_profile.h"
#include "tp_schedule.h"

/* The layers' times and bytes, as prefix sums over the layers (a range's cost is two reads). */
typedef struct {
  double *fwd_prefix, *bwd_prefix; /* [W][L+1] prefix sums of layer times on stage s's device */
  double *inp_prefix;              /* [W][L+1] the same of the backwards' input-gradient parts (a
                                      layer's backward shared by its input- and weight-gradient FLOPs) */
  double *upd_prefix;              /* [L+1] measured update seconds (profile), else NULL */
  double *param_prefix, *stored_prefix, *storedw_prefix; /* [L+1] weight bytes; bytes kept per sample; of
                                                           those, what a W still needs after its I */
  double *in_bytes, *out_bytes;    /* [L] per sample: a layer's input gradient, output activations */
  gboolean times_grow;             /* no layer's time is negative: a stage's compute never shrinks
                                      as it takes more layers */
  double tied_bytes;               /* a head tied to the embedding (tp_tie.h): its copy of the table's bytes */
  double *copy_prefix, *copy_upd_prefix; /* [L+1] prefix sums of the tied heads' copies' bytes and update
                                            seconds (profile), which a stage that also holds the
                                            embedding does not have */
} TpAnalyticTables;

/* The weight bytes of layers [lo, hi) on one stage: a tied head beside the embedding holds no copy. */
static inline double tp_tables_params(const TpAnalyticTables *t, int lo, int hi)
{
  return t->param_prefix[hi] - t->param_prefix[lo] - (lo == 0 ? t->copy_prefix[hi] : 0);
}

/* The measured update seconds of layers [lo, hi) on one stage (a profile's tables only). */
static inline double tp_tables_upd(const TpAnalyticTables *t, int lo, int hi)
{
  return t->upd_prefix[hi] - t->upd_prefix[lo] - (lo == 0 ? t->copy_upd_prefix[hi] : 0);
}

typedef struct {
  const TpModel *model;
  const TpCluster *cluster;   /* NULL with a profile alone */
  const TpProfile *profile;   /* NULL for the roofline model */
  int W, N;
  long batch;   /* samples per mini-batch */
  double micro; /* samples per micro-batch (batch / N) */
  int *bounds;  /* [W+1]: stage s has layers [bounds[s], bounds[s+1]) */
  int *device;  /* [W]: the device (cluster worker, or processor for a profile) stage s runs on; with
                   replicas or tensor ranks on a list of devices, the slowest of its group's */
  double *group_memory; /* [W] with such groups: the least memory among a stage's devices; else NULL */
  TpChunkMap map;       /* a schedule of chunks (tp_analytic_place): their map onto `ranks` workers */
  int ranks;
  TpAnalyticTables tab;            /* the layers' times and bytes */
  double link_latency, link_bandwidth; /* bandwidth 0: links are free */
  double link_eager_limit;             /* MPI's eager limit (TpLinkCost); 0: every message eager */
  const int *acts, *versions;      /* per stage counts for the memory test, or NULL */
  double *reserve;                 /* [W] bytes held back from each device in the memory test */
  double cap;                      /* > 0: no device holds more than this (a memory limit) */
  double pace;                     /* after a split chosen here: its slowest stage's cost per micro-batch */
  int optimizer_states;            /* optimizer floats per parameter: 1 (SGD's momentum, the default), 2 (AdamW) */
  int tensor;                      /* > 1: the model's blocks are split this many ways (tp_analytic_tensor) */
  int replicas;                    /* > 1: the stages' gradients are all-reduced among this many replicas,
                                      each stage holding a reduction buffer of its weights
                                      (tp_cost_data_parallel) */
  gboolean recompute;              /* the split is for a recomputing schedule (docs/recompute.md): a stage's
                                      pace gains its forward again, its memory test stores the stage's
                                      input per micro-batch plus one micro-batch's activations */
} TpAnalytic;

/* Checks W against the cluster (one device per stage, or one device for all) and batch vs N. */
TpAnalytic *tp_analytic_new(const TpModel *m, const TpCluster *c, int W, int N, long batch, GError **err);
/* The general form: with a profile p (c may then be NULL: free links) or without (c required);
 * any_width: W need not match the cluster's workers — with fewer stages they take the first
 * devices, with more stage s runs on device s mod n (they share it).  A profile's stages beyond its
 * cores share them the same way.  The profile must be of model m and hold micro-batches of
 * batch / N samples (errors name the profile and what to profile). */
TpAnalytic *tp_analytic_new_on(const TpModel *m, const TpCluster *c, const TpProfile *p, int W, int N, long batch,
                               gboolean any_width, GError **err);
/* Interleaved stages: a->W = s->W chunks, each on its rank's device (s's chunk map; ranks beyond the
 * cluster's devices share them, rank mod devices); made with any_width.  Always TRUE. */
gboolean tp_analytic_place(TpAnalytic *a, const TpSchedule *s, GError **err);
/* Whether profile p was taken of model m (layer count and kinds); the error names the profile. */
gboolean tp_profile_check_model(const TpProfile *p, const TpModel *m, GError **err);
void tp_analytic_free(TpAnalytic *a);
/* Tensor parallelism (the model already split by tp_model_tensor_parallel): each block's forward and
 * backward gain two all-reduces of its activations among T on the cluster's link (intra-node). */
void tp_analytic_tensor(TpAnalytic *a, int T);
/* D replicas of the pipeline and T-way blocks (tp_analytic_tensor): on a list of devices a stage's
 * D x T GPUs are its rank's group (GPU g = t + T(r + D x rank), tp_layout.h), which runs at the pace
 * of its slowest and holds what its smallest holds. */
void tp_analytic_parallel(TpAnalytic *a, int D, int T);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpAnalytic, tp_analytic_free)

/* Seconds for one layer on a device for b samples (forward, or backward when bwd), its elements of
 * elem_bytes (2: the device's 16-bit FLOP/s). */
double tp_layer_time(const TpLayer *L, const TpDevice *d, int elem_bytes, double b, gboolean bwd);

/* Split: `counts` gives layers per stage (W values, from --split), else the optimal split; with
 * acts/versions (peak micro-batch activations and live versions per stage, from a unit-slot
 * simulation of the schedule) only splits whose stages fit their device's memory are allowed. */
gboolean tp_analytic_split(TpAnalytic *a, const int *counts, const int *acts, const int *versions, GError **err);
/* Stage bytes as the simulator's cost model counts them, with the given counts. */
double tp_analytic_stage_bytes(const TpAnalytic *a, int s, int lo, int hi, int acts, int versions);
/* Bytes stage s may hold: its device's memory, or the memory available where the profile was taken,
 * capped by a->cap, shared evenly by the stages on that memory (a profile's machine holds them all). */
double tp_analytic_capacity(const TpAnalytic *a, int s);
/* The cost model for the simulator, from the current split. */
TpCost *tp_analytic_cost(const TpAnalytic *a);

#endif
