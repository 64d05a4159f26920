/* tp_fit.h — a split of the layers into stages that fits every device's memory: the analytic
 * model's split, then the schedule simulated on its costs, what each stage overran held back from
 * its device, and the split made again until every stage fits (or no split does). */
#ifndef TP_FIT_H
#define TP_FIT_H

#include "tp_analytic.h"
#include "tp_schedule.h"

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
 * what was held back.  prep (NULL: none) is what generating s computed, taken over by its
 * simulation on unit slots (tp_sim_run_prepared). */
TpCost *tp_fit_memory(TpAnalytic *a, const TpSchedule *s, TpPrepared *prep, gboolean order_on_costs, int rounds,
                      const TpCostDress *dress, GError **err);

#endif
