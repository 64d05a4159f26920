/* tp_fit.h — a split of the layers into stages that fits every device's memory: the analytic
 * model's split, then the schedule simulated on its costs, what each stage overran held back from
 * its device, and the split made again until every stage fits (or no split does). */
#ifndef TP_FIT_H
#define TP_FIT_H

#include "tp_analytic.h"
#include "tp_metrics.h"
#include "tp_schedule.h"
#include "tp_sim.h"

/* What the caller adds to every cost the analytic model makes before it is simulated: links of a
 * cluster's layout, the all-reduce of replicas (whose buffers the memory must hold). */
typedef struct {
  void (*fn)(TpCost *c, gconstpointer data);
  gconstpointer data;
} TpCostDress;

/* The cost model of schedule s under a, split so that every stage's simulated peak fits its
 * device.  The split's first estimate takes the schedule's own peaks (micro-batch activations,
 * live versions) on unit slots; each round simulates the order that will run (fixed on that
 * round's costs when order_on_costs and s's order depends on them), at most `rounds` rounds, on
 * the cost dressed by `dress` (NULL: as made); the cost returned is dressed too.  a->reserve keeps
 * what was held back; where the estimate finds no split, the fastest split is returned if its
 * simulation fits (a->reserve then 0).  prep (NULL: none) is what generating s computed, taken over
 * by its simulation on unit slots (tp_sim_run_prepared). */
TpCost *tp_fit_memory(TpAnalytic *a, const TpSchedule *s, TpPrepared *prep, gboolean order_on_costs, int rounds,
                      const TpCostDress *dress, GError **err);

/* The fit in two parts, for callers that keep what it computed.  s's unit-slot peaks per stage:
 * micro-batch activations and live versions. */
gboolean tp_fit_unit_peaks(const TpSchedule *s, TpPrepared *prep, int *acts, int *versions, GError **err);

/* What the fit's last round simulated when the split it returns fit: the order that ran when it was
 * fixed on the costs (NULL: s itself), its simulation, and its stages' memory (tp_metrics_memory). */
typedef struct {
  TpSchedule *order;
  TpSim *sim;
  TpStageMetrics *memory;
} TpFitted;
void tp_fitted_clear(TpFitted *f);

/* tp_fit_memory from s's unit-slot peaks; *fitted (NULL: not wanted) takes what the last round
 * simulated when the split fit, and stays empty otherwise. */
TpCost *tp_fit_memory_from(TpAnalytic *a, const TpSchedule *s, const int *acts, const int *versions,
                           gboolean order_on_costs, int rounds, const TpCostDress *dress, TpFitted *fitted,
                           GError **err);

#endif
