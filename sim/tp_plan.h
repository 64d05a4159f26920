/* tp_plan.h — the search behind `timeprest plan`: every candidate preset × W × N (a divisor of the
 * batch) × recomputation, each split by the exact partitioner on its costs (tp_analytic.h: a cluster's
 * roofline or a measured profile), bounded, simulated on every core, and judged against a memory
 * limit per device; the fitting plans ranked by steady time per mini-batch and their Pareto front of
 * time against peak memory. */
#ifndef TP_PLAN_H
#define TP_PLAN_H

#include "tp_analytic.h"
#include "tp_metrics.h"

/* Which recomputation the candidates take (docs/recompute.md). */
typedef enum {
  TP_PLAN_RECOMPUTE_NO,   /* store every layer's activations (the default) */
  TP_PLAN_RECOMPUTE_YES,  /* store each stage's input only; a backward runs its forward again */
  TP_PLAN_RECOMPUTE_BOTH, /* each candidate both ways */
} TpPlanRecompute;

/* The largest tensor-parallel split plan --devices considers (one node's NVLink domain). */
#define TP_PLAN_MAX_TENSOR 8

typedef struct {
  const TpModel *model;
  const TpCluster *cluster;   /* roofline times and device memory; with a profile: the links only */
  const TpProfile *profile;   /* measured times and bytes, or NULL */
  long batch;                 /* samples per mini-batch */
  const int *batches;         /* n_batches > 0: the mini-batch sizes to search instead of batch; with more
                                 than one, plans are ranked by samples/s (time per sample), not time per
                                 mini-batch */
  int n_batches;
  int w0, w1, n0, n1;         /* W range; N range (only divisors of batch are candidates) */
  const TpPreset *const *presets; /* n_presets of them */
  int n_presets;
  /* Recomputation (SPEC §5: a stage keeps only its inputs and re-runs its forward in the
   * backward) is a candidate dimension: recompute ∈ {FALSE}, {TRUE} or both. */
  TpPlanRecompute recompute;
  double memory_limit;        /* bytes per device, capping each device's own memory (a profile's: the
                                 memory available when it was taken); 0: no cap */
  int threads;                /* 0: every core */
  int optimizer_states;       /* optimizer floats per parameter: 1 (SGD, also for 0), 2 (AdamW) */
  gboolean no_prune;          /* simulate every candidate (for checking the pruning) */
  /* data and tensor parallelism (sim/tp_plan_parallel.c): devices > 0 searches every D x W x T of
   * at most that many devices (T a power of two up to the cluster's GPUs per node, by_tensor[T] the
   * model split T ways); otherwise the plans take data_parallel and tensor_parallel (0: 1) */
  int devices, data_parallel, tensor_parallel;
  gboolean overlap_allreduce;
  const TpModel *by_tensor[TP_PLAN_MAX_TENSOR + 1];
} TpPlanRequest;

typedef enum {
  TP_PLAN_FITS,         /* simulated, within the limit */
  TP_PLAN_OVER_MEMORY,  /* simulated, or bounded, over the limit */
  TP_PLAN_DOMINATED,    /* not simulated: a plan already simulated is faster than its time bound and
                           smaller than its memory bound */
  TP_PLAN_FAILED,       /* the simulation refused it (too large) */
} TpPlanStatus;

/* What a candidate's simulation said. */
typedef struct {
  int v_steady, max_mismatch; /* steady version difference; largest backward-forward version mismatch */
  double t_minibatch, samples_per_second, bubble; /* steady state */
  double *peak_bytes;         /* [W] per stage */
  double peak;                /* largest device's bytes at peak (a stage's, when each has a device) */
  double limit;               /* the limit that device had */
  int peak_stage, peak_component; /* the stage with the largest peak, and its largest component (TP_MEM_…) */
  int bottleneck_stage;       /* the stage with the most work per mini-batch (on a shared device: that device's) */
  const char *bottleneck;     /* its largest part: "forward", "backward", "update", "link" */
} TpPlanSim;

typedef struct {
  const TpPreset *preset;
  long batch;                 /* samples per mini-batch */
  int W, N;
  int D, T;                   /* replicas of the pipeline (each on batch / D samples); tensor-parallel split */
  gboolean recompute;         /* its stages store their inputs only and recompute in the backward */
  gboolean fused;             /* its forwards fused (tp_schedule_fuse_forwards): simulated faster so */
  int *split;                 /* [W] layers per stage */
  double t_bound, mem_bound;  /* lower bounds before simulating: time per mini-batch, largest device's bytes */
  gboolean may_fit;           /* some split might fit every device (tp_plan_may_fit): if not, over the limit */
  double rank_time, rank_bound; /* the ranking's time and its bound: per mini-batch, or per sample when
                                   several batches are searched */
  gboolean simulated;         /* sim holds its simulation */
  gboolean tried, pending;    /* a split of it simulated; over the limit, sim left for when nothing fits */
  TpPlanSim sim;              /* what its simulation said */
  TpPlanStatus status;
  char *failure;              /* TP_PLAN_FAILED: why */
  int index;                  /* order of enumeration (ties) */
} TpPlan;

typedef struct {
  GPtrArray *all;       /* TpPlan, every candidate (owned) */
  GPtrArray *ranked;    /* the fitting plans, best first */
  GPtrArray *pareto;    /* the Pareto front of the fitting plans (time vs peak), fastest first */
  int n_candidates, n_simulated, n_over_memory, n_dominated, n_failed, n_inapplicable;
  int n_tied; /* candidates left out: their order cannot tie the model's head across stages (tp_tie.h) */
  const TpPlan *smallest; /* nothing fits: the simulated candidate with the smallest peak */
} TpPlanResult;

/* TP_ERROR_INPUT: a profile that does not match the model or lacks a micro-batch size, no
 * candidate at all (empty ranges, no divisor of the batch). */
TpPlanResult *tp_plan_search(const TpPlanRequest *r, GError **err);
void tp_plan_result_free(TpPlanResult *res);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpPlanResult, tp_plan_result_free)

/* Most steps (W·L² summed over the candidates) per thread a search's exact splits may take: minutes
 * (about 1e8 steps a second). */
#define TP_PLAN_MAX_SPLIT_WORK 2e10

/* Data and tensor parallelism in a search (sim/tp_plan_parallel.c): the (D, T) pairs candidates of
 * batch B take ({1, 1} without them; at most TP_PLAN_MAX_PAIRS; T as tp_layout_check allows), the
 * most stages each allows (on a list of devices, D x W x T within it where D x T > 1), the model and
 * samples of p's replica, its analytic costs split T ways (before its split is chosen), and its cost
 * model's replicas and links (once made). */
#define TP_PLAN_MAX_PAIRS 4096
int tp_plan_pairs(const TpPlanRequest *r, long B, int *D, int *T);
int tp_plan_max_width(const TpPlanRequest *r, int D, int T);
const TpModel *tp_plan_model(const TpPlanRequest *r, const TpPlan *p);
long tp_plan_replica_batch(const TpPlan *p);
void tp_plan_replicas(const TpPlanRequest *r, const TpPlan *p, TpCost *c);

/* Memory before simulating (sim/tp_plan_memory.c).  held[s]: the micro-batches of activations stage s
 * of preset ps (W stages, N micro-batches) holds when its first backward starts, the same on every
 * split (1 where the order is fixed on the costs).  tp_plan_may_fit: FALSE when no split of p's layers
 * keeps every stage's least bytes (its weights, optimizer state, buffers and those activations, or
 * recomputing one micro-batch's, as cost model c counts them) within its device's memory under a
 * (the candidate's analytic costs); TRUE where it cannot tell (stages sharing a memory).  TpPlanActs
 * keeps held per order and policy, W and N for a search's threads. */
typedef struct TpPlanActs TpPlanActs;
TpPlanActs *tp_plan_acts_new(void);
void tp_plan_acts_free(TpPlanActs *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpPlanActs, tp_plan_acts_free)
void tp_plan_held_acts(const TpPreset *ps, int W, int N, int *held);
gboolean tp_plan_may_fit(TpPlanActs *t, const TpPlan *p, const TpAnalytic *a, const TpCost *c);
/* TRUE when the split of cost model c (p's, under a) holds more than a device's memory on some stage by
 * those least bytes: simulated, it would be over the limit. */
gboolean tp_plan_split_over(TpPlanActs *t, const TpPlan *p, const TpAnalytic *a, const TpCost *c);
/* p's schedule (its preset's order, recomputing as p) and, in *peaks, its peaks on unit slots per
 * stage (tp_fit_unit_peaks: W micro-batch activations, then W live versions), kept in t per order and
 * policy, W, N and recomputing for a search's threads; NULL on error. */
TpSchedule *tp_plan_schedule_peaks(TpPlanActs *t, const TpPlan *p, const int **peaks, GError **err);

/* Ranking: faster first (rank_time; times equal to 9 significant digits tie), then smaller peak, then
 * batch, preset, W, N, recompute in enumeration order. */
int tp_plan_compare(const TpPlan *a, const TpPlan *b);
/* p's rank_time as the ranking compares it (to 9 significant digits: equal keys tie). */
double tp_plan_time_key(const TpPlan *p);
/* Whether a and b tie in time (rank_time to 9 significant digits). */
gboolean tp_plan_same_time(const TpPlan *a, const TpPlan *b);
/* The plans of `plans` no other one beats in both time (rank_time) and peak (ties: the first in ranking),
 * fastest first. */
GPtrArray *tp_plan_pareto(const GPtrArray *plans);
/* plans in ranking order (tp_plan_compare): a new array of the same pointers, without a free function. */
GPtrArray *tp_plan_ranked(const GPtrArray *plans);
/* Two or three lines: why `top` is ranked above `next`. */
char *tp_plan_explain(const TpPlan *top, const TpPlan *next);
/* "10,12,9" */
char *tp_plan_split_text(const TpPlan *p);
/* Kendall's tau-a between two orders given as values (n > 1; ties count as neither). */
double tp_kendall_tau(const double *x, const double *y, int n);

#endif
