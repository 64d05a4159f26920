/* tp_analytic.h — per-stage costs from a model description and a cluster: layer times from
 * FLOPs and bytes against each device's FLOP/s and bandwidth (roofline, scaled by its efficiency),
 * stage bytes from activation sizes, and the split of the layers into stages. */
#ifndef TP_ANALYTIC_H
#define TP_ANALYTIC_H

#include "tp_cluster.h"
#include "tp_cost.h"
#include "tp_model.h"

typedef struct {
  const TpModel *model;
  const TpCluster *cluster;
  int W, N;
  long batch;   /* samples per mini-batch */
  double micro; /* samples per micro-batch (batch / N) */
  int *bounds;  /* [W+1]: stage s has layers [bounds[s], bounds[s+1]) */
  double *fwd_prefix, *bwd_prefix; /* [W][L+1] prefix sums of layer times on stage s's device */
  const int *acts, *versions;      /* per stage counts for the memory test, or NULL */
  double *reserve;                 /* [W] bytes held back from each device in the memory test */
} TpAnalytic;

/* Checks W against the cluster (one device per stage, or one device for all) and batch vs N. */
TpAnalytic *tp_analytic_new(const TpModel *m, const TpCluster *c, int W, int N, long batch, GError **err);
void tp_analytic_free(TpAnalytic *a);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpAnalytic, tp_analytic_free)

/* Seconds for one layer on a device for b samples (forward, or backward when bwd). */
double tp_layer_time(const TpLayer *L, const TpDevice *d, double b, gboolean bwd);

/* Split: `counts` gives layers per stage (W values, from --split), else the optimal split; with
 * acts/versions (peak micro-batch activations and live versions per stage, from a unit-slot
 * simulation of the schedule) only splits whose stages fit their device's memory are allowed. */
gboolean tp_analytic_split(TpAnalytic *a, const int *counts, const int *acts, const int *versions, GError **err);
/* Stage bytes as the simulator's cost model counts them, with the given counts. */
double tp_analytic_stage_bytes(const TpAnalytic *a, int s, int lo, int hi, int acts, int versions);
/* The cost model for the simulator, from the current split. */
TpCost *tp_analytic_cost(const TpAnalytic *a);

#endif
