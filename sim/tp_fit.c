/* tp_fit.c — the split of the layers that fits the devices' memory (tp_fit.h). */
#include "tp_fit.h"
#include "tp_costed.h"
#include "tp_metrics.h"
#include "tp_sim.h"

void tp_fitted_clear(TpFitted *f)
{
  tp_sim_free(f->sim);
  tp_schedule_free(f->order);
  g_free(f->memory);
  *f = (TpFitted){ 0 };
}

gboolean tp_fit_unit_peaks(const TpSchedule *s, TpPrepared *prep, int *acts, int *versions, GError **err)
{
  g_autoptr(TpCost) unit = tp_cost_unit(s->W);
  g_autoptr(TpSim) usim = tp_sim_run_prepared(s, unit, prep, err);
  if (!usim)
    return FALSE;
  g_autofree TpStageMetrics *um = tp_metrics_memory(usim);
  for (int st = 0; st < s->W; st++)
    acts[st] = um[st].peak_activations, versions[st] = um[st].max_live_versions;
  return TRUE;
}

/* The analytic model's cost of its current split, dressed. */
static TpCost *dressed(const TpAnalytic *a, const TpCostDress *dress)
{
  TpCost *c = tp_analytic_cost(a);
  if (dress)
    dress->fn(c, dress->data);
  return c;
}

TpCost *tp_fit_memory_from(TpAnalytic *a, const TpSchedule *s, const int *acts, const int *versions,
                           gboolean order_on_costs, int rounds, const TpCostDress *dress, TpFitted *fitted,
                           GError **err)
{
  if (!tp_analytic_split(a, NULL, acts, versions, err))
    return NULL;
  TpCost *cost = dressed(a, dress);
  /* The split's estimate leaves out message buffers and the timing of real costs: simulate, hold back
   * what a stage overran, and split again until every stage fits (or no split does). */
  for (int round = 0; round < rounds; round++) {
    /* the order that will run: fixed on this round's costs unless asked for the unit-slot one */
    GError *e = NULL;
    g_autoptr(TpSchedule) t =
        order_on_costs && tp_order_depends_on_costs(s->order) ? tp_schedule_costed_like(s, cost, &e) : NULL;
    g_autoptr(TpSim) sim = e ? NULL : tp_sim_run(t ? t : s, cost, &e);
    if (!sim) {
      g_propagate_error(err, e);
      tp_cost_free(cost);
      return NULL;
    }
    g_autofree TpStageMetrics *mm = tp_metrics_memory(sim);
    gboolean over = FALSE;
    for (int st = 0; st < s->W; st++)
      if (mm[st].peak_bytes > cost->capacity[st]) {
        a->reserve[st] += mm[st].peak_bytes - cost->capacity[st];
        over = TRUE;
      }
    if (!over) {
      if (fitted)
        *fitted = (TpFitted){ .order = g_steal_pointer(&t), .sim = g_steal_pointer(&sim), .memory = g_steal_pointer(&mm) };
      break;
    }
    tp_cost_free(cost);
    if (!tp_analytic_split(a, NULL, acts, versions, err))
      return NULL;
    cost = dressed(a, dress);
  }
  return cost;
}

TpCost *tp_fit_memory(TpAnalytic *a, const TpSchedule *s, TpPrepared *prep, gboolean order_on_costs, int rounds,
                      const TpCostDress *dress, GError **err)
{
  /* the schedule's own peaks (micro-batch activations, versions) on unit slots */
  g_autofree int *acts = g_new(int, s->W), *versions = g_new(int, s->W);
  if (!tp_fit_unit_peaks(s, prep, acts, versions, err))
    return NULL;
  return tp_fit_memory_from(a, s, acts, versions, order_on_costs, rounds, dress, NULL, err);
}
