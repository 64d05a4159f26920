/* tp_predict.h — predicted against measured for a training run: the simulator's cost model built
 * from the executor's profile of each stage, and the prediction beside the measurement (the
 * executor's timeline, tp_run_result_timeline, through the simulator's metrics) with their relative
 * error.
 * It lives above both sim/ and exec/ (which never see each other). */
#ifndef TP_PREDICT_H
#define TP_PREDICT_H

#include "tp_metrics.h"
#include "tp_runtime.h"

/* The cost model of a run: per-stage forward and backward time per micro-batch and update time from
 * the profile, message and memory bytes from the networks; links are free (the local transport
 * hands a message over by one copy).  When there are more stages than processors (cores), stage s
 * runs on device s mod cores, so that the simulation serialises what the machine must. */
TpCost *tp_predict_cost(const TpRuntime *rt, const TpStageProfile *prof, int N, int batch, int cores);

/* Links that are not free: link l (stages l+1 and l+2) takes latency_s[l] seconds before the first
 * byte and moves bandwidth_Bps[l] bytes per second (e.g. measured by a ping-pong between
 * processes); a message of more than eager_limit[l] bytes (MPI's rendezvous; eager_limit NULL or 0:
 * none) is held by its sender until its receiving operation starts.  c->source says so. */
void tp_predict_set_links(TpCost *c, const double *latency_s, const double *bandwidth_Bps, const double *eager_limit);

/* One side of the comparison. */
typedef struct {
  double t_minibatch;   /* steady time per mini-batch (spacing of stage 1's updates) */
  double makespan;      /* one schedule */
  double *busy;         /* [W] seconds per schedule */
  int *max_live_versions, *peak_activations; /* [W] */
  double *peak_bytes;   /* [W] */
} TpSide;

typedef struct {
  int W;
  int n_measured; /* schedules added to the measured side */
  TpSide predicted, measured;
} TpComparison;

/* The predicted side from the simulation of the schedule under the profiled costs. */
void tp_comparison_init(TpComparison *c, const TpMetrics *predicted);
/* Add one measured schedule (its timeline's metrics and the weight stores' statistics); the
 * measured side keeps the mean of times and the maximum of counts and bytes over those added. */
void tp_comparison_add(TpComparison *c, const TpMetrics *measured, const TpRunResult *r);
void tp_comparison_clear(TpComparison *c);

/* (predicted − measured) / measured, 0 when both are 0. */
double tp_rel_error(double predicted, double measured);

/* "predicted": {...}, "measured": {...}, "error": {...} members (no braces around them); measured and
 * error null when no schedule was added. */
void tp_comparison_json(const TpComparison *c, GString *out);
/* The side-by-side table of the text report. */
void tp_comparison_text(const TpComparison *c, GString *out);

#endif
