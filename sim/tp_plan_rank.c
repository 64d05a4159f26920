/* tp_plan_rank.c — plans ranked (times to 9 digits, then peaks), their Pareto front, the
 * explanation of the top choice, and Kendall's tau of two orders (tp_plan.h). */
#include "tp_plan.h"

#include <math.h>

/* A ranking's time to 9 significant digits: simulated times that differ below it are the same time
 * reached by sums in another order (rounding), and tie, so that the smaller peak ranks first.
 * Rounding, not a tolerance: ties stay transitive, and the sort well defined. */
static double time_key(double t)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  return g_ascii_strtod(g_ascii_formatd(buf, sizeof buf, "%.9g", t), NULL);
}

gboolean tp_plan_same_time(const TpPlan *a, const TpPlan *b) { return time_key(a->rank_time) == time_key(b->rank_time); }
double tp_plan_time_key(const TpPlan *p) { return time_key(p->rank_time); }

int tp_plan_compare(const TpPlan *a, const TpPlan *b)
{
  if (!tp_plan_same_time(a, b))
    return a->rank_time < b->rank_time ? -1 : 1;
  if (a->sim.peak != b->sim.peak)
    return a->sim.peak < b->sim.peak ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}


static int compare_ptr(gconstpointer a, gconstpointer b)
{
  return tp_plan_compare(*(const TpPlan *const *)a, *(const TpPlan *const *)b);
}

GPtrArray *tp_plan_ranked(const GPtrArray *plans)
{
  GPtrArray *b = g_ptr_array_copy((GPtrArray *)plans, NULL, NULL);
  g_ptr_array_set_free_func(b, NULL); /* the pointers alone: the plans stay the caller's */
  g_ptr_array_sort(b, compare_ptr);
  return b;
}

GPtrArray *tp_plan_pareto(const GPtrArray *plans)
{
  g_autoptr(GPtrArray) sorted = tp_plan_ranked(plans);
  GPtrArray *front = g_ptr_array_new();
  double best_peak = INFINITY;
  /* in ranking order, a plan is on the front when its peak is below every faster plan's */
  for (guint i = 0; i < sorted->len; i++) {
    TpPlan *p = sorted->pdata[i];
    if (p->sim.peak < best_peak) {
      g_ptr_array_add(front, p);
      best_peak = p->sim.peak;
    }
  }
  return front;
}

char *tp_plan_split_text(const TpPlan *p)
{
  GString *s = g_string_new(NULL);
  for (int i = 0; i < p->W; i++)
    g_string_append_printf(s, "%s%d", i ? "," : "", p->split[i]);
  return g_string_free(s, FALSE);
}

double tp_kendall_tau(const double *x, const double *y, int n)
{
  long conc = 0, disc = 0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      double s = (x[i] - x[j]) * (y[i] - y[j]);
      conc += s > 0, disc += s < 0;
    }
  long pairs = (long)n * (n - 1) / 2;
  return pairs ? (double)(conc - disc) / (double)pairs : 1.0;
}

/* ---- explanation -------------------------------------------------------------------------------- */

/* with_batch: the batches of the plans compared differ */
static char *label(const TpPlan *p, gboolean with_batch)
{
  g_autofree char *b = with_batch ? g_strdup_printf(" B=%ld", p->batch) : g_strdup("");
  g_autofree char *dt = p->D > 1 || p->T > 1 ? g_strdup_printf(" D=%d T=%d", p->D, p->T) : g_strdup("");
  return g_strdup_printf("%s W=%d N=%d%s%s%s", p->preset->name, p->W, p->N, dt, b, p->recompute ? " recompute" : "");
}

char *tp_plan_explain(const TpPlan *top, const TpPlan *next)
{
  gboolean batches = next && next->batch != top->batch;
  g_autofree char *a = label(top, batches);
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "%s: %.4g s per mini-batch (%.4g samples/s), %.3g GB at peak (stage %d, %s); "
                         "bottleneck stage %d (%s).\n", a, top->sim.t_minibatch, top->sim.samples_per_second, top->sim.peak / 1e9,
                         top->sim.peak_stage + 1, tp_mem_names[top->sim.peak_component], top->sim.bottleneck_stage + 1,
                         top->sim.bottleneck);
  if (!next) {
    g_string_append(s, "No other plan fits.\n");
    return g_string_free(s, FALSE);
  }
  g_autofree char *b = label(next, batches);
  /* of different batches, the plans compare in samples/s (the ranking's time per sample) */
  const char *per = batches ? "time per sample" : "time per mini-batch";
  double gain = next->rank_time > 0 ? 100 * (next->rank_time - top->rank_time) / next->rank_time : 0;
  if (tp_plan_same_time(top, next))
    g_string_append_printf(s, "It ties with the runner-up, %s, in %s (bubbles %.1f %% of the steady "
                           "window) and ranks first for its %s peak", b, per, 100 * top->sim.bubble,
                           top->sim.peak < next->sim.peak ? "smaller" : "equal");
  else
    g_string_append_printf(s, "It beats the runner-up, %s, by %.1f %% in %s: bubbles %.1f %% against "
                           "%.1f %% of the steady window", b, gain, per, 100 * top->sim.bubble, 100 * next->sim.bubble);
  if (top->W != next->W || top->N != next->N)
    g_string_append_printf(s, ", %d×%d against %d×%d stages × micro-batches", top->W, top->N, next->W, next->N);
  g_string_append(s, ".\n");
  double dm = next->sim.peak > 0 ? 100 * (top->sim.peak - next->sim.peak) / next->sim.peak : 0;
  g_string_append_printf(s, "Its price: peak memory %+.1f %% (%.3g against %.3g GB); v = %d against %d, version "
                         "mismatch up to %d against %d.\n", dm, top->sim.peak / 1e9, next->sim.peak / 1e9, top->sim.v_steady,
                         next->sim.v_steady, top->sim.max_mismatch, next->sim.max_mismatch);
  return g_string_free(s, FALSE);
}
