/* tp_fit.c — the split of the layers that fits the devices' memory (tp_fit.h). */
#include "tp_fit.h"
#include "tp_costed.h"
#include "tp_error.h"
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

/* One round of the fit: the order that ran, its simulation, every stage's memory, and whether any
 * stage's peak passed its capacity. */
typedef struct {
  TpSchedule *order; /* NULL: s itself */
  TpSim *sim;
  TpStageMetrics *memory;
  gboolean any;
} Round;

/* Schedule s on cost, into r: the order that will run (fixed on cost unless asked for the unit-slot
 * one) simulated; FALSE on error, r empty. */
static gboolean round_run(const TpSchedule *s, const TpCost *cost, gboolean order_on_costs, Round *r, GError **err)
{
  GError *e = NULL;
  *r = (Round){ 0 };
  r->order = order_on_costs && tp_order_depends_on_costs(s->order) ? tp_schedule_costed_like(s, cost, &e) : NULL;
  r->sim = e ? NULL : tp_sim_run(r->order ? r->order : s, cost, &e);
  if (!r->sim) {
    tp_schedule_free(r->order);
    g_propagate_error(err, e);
    return FALSE;
  }
  r->memory = tp_metrics_memory(r->sim);
  for (int st = 0; st < s->W; st++)
    r->any = r->any || r->memory[st].peak_bytes > cost->capacity[st];
  return TRUE;
}

/* What the round simulated, into *fitted (NULL: freed). */
static void round_keep(Round *r, TpFitted *fitted)
{
  if (fitted)
    *fitted = (TpFitted){ .order = r->order, .sim = r->sim, .memory = r->memory };
  else {
    tp_sim_free(r->sim);
    tp_schedule_free(r->order);
    g_free(r->memory);
  }
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
    Round r;
    if (!round_run(s, cost, order_on_costs, &r, err)) {
      tp_cost_free(cost);
      return NULL;
    }
    for (int st = 0; st < s->W; st++)
      a->reserve[st] += MAX(r.memory[st].peak_bytes - cost->capacity[st], 0);
    if (!r.any) {
      round_keep(&r, fitted);
      break;
    }
    round_keep(&r, NULL);
    tp_cost_free(cost);
    if (!tp_analytic_split(a, NULL, acts, versions, err))
      return NULL;
    cost = dressed(a, dress);
  }
  return cost;
}

/* The fastest split, dressed, when its simulation fits every device: the estimate from unit slots
 * can hold more activations than the costs' timeline does (zero-bubble orders), and refuse it. */
static TpCost *fastest_if_it_fits(TpAnalytic *a, const TpSchedule *s, gboolean order_on_costs,
                                  const TpCostDress *dress)
{
  for (int st = 0; st < a->W; st++)
    a->reserve[st] = 0;
  if (!tp_analytic_split(a, NULL, NULL, NULL, NULL))
    return NULL;
  TpCost *cost = dressed(a, dress);
  Round r;
  if (!round_run(s, cost, order_on_costs, &r, NULL) || r.any)
    g_clear_pointer(&cost, tp_cost_free);
  if (r.sim)
    round_keep(&r, NULL);
  return cost;
}

TpCost *tp_fit_memory(TpAnalytic *a, const TpSchedule *s, TpPrepared *prep, gboolean order_on_costs, int rounds,
                      const TpCostDress *dress, GError **err)
{
  /* the schedule's own peaks (micro-batch activations, versions) on unit slots */
  g_autofree int *acts = g_new(int, s->W), *versions = g_new(int, s->W);
  if (!tp_fit_unit_peaks(s, prep, acts, versions, err))
    return NULL;
  GError *e = NULL;
  TpCost *c = tp_fit_memory_from(a, s, acts, versions, order_on_costs, rounds, dress, NULL, &e);
  if (!c && g_error_matches(e, TP_ERROR, TP_ERROR_INPUT) && (c = fastest_if_it_fits(a, s, order_on_costs, dress)))
    g_clear_error(&e);
  if (e)
    g_propagate_error(err, e);
  return c;
}
