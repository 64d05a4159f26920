/* fuzz-cost.c — libFuzzer target: cost files (key files of per-stage times and bytes) for 4 stages,
 * then a small TiMePReSt schedule simulated under the accepted costs and reported as JSON. */
#include "fuzz.h"
#include "tp_cost.h"
#include "tp_report.h"
#include "tp_sim.h"

static TpSchedule *sched;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  tp_fuzz_init();
  const TpPreset *p = tp_preset_find("timeprest");
  sched = tp_schedule_generate(p->order, p->policy, 4, 2, 6, NULL);
  return sched ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (tp_fuzz_skip(data, size))
    return 0;
  g_autofree char *text = tp_fuzz_text(data, size); /* NUL-terminated, as the loaders read files */
  GError *err = NULL;
  TpCost *c = tp_cost_parse(text, size, "fuzz.cost", 4, &err);
  tp_fuzz_check(c != NULL, err);
  if (!c)
    return 0;
  TpSim *sim = tp_sim_run(sched, c, &err);
  if (sim) {
    TpMetrics *m = tp_metrics_compute(sim);
    GString *out = g_string_new(NULL);
    tp_report_json(sim, m, out);
    g_string_free(out, TRUE);
    tp_metrics_free(m);
    tp_sim_free(sim);
  } else {
    tp_fuzz_check(FALSE, err);
  }
  tp_cost_free(c);
  return 0;
}
