/* bench-sim.c — simulated operations per second: the generation (and its validation), the simulation
 * (tp_sim_run: on unit costs the unit-slot replay), the event loop alone (tp_sim_run_events, one
 * core), the metrics, the schedule's digest and its CSV text, each the best of several repetitions;
 * prints one line per part. */
#include "tp_cost.h"
#include "tp_format.h"
#include "tp_metrics.h"
#include "tp_sim.h"

#include <stdio.h>
#include <stdlib.h>

static double now(void) { return g_get_monotonic_time() / 1e6; }

int main(int argc, char **argv)
{
  const char *preset = argc > 1 ? argv[1] : "timeprest";
  int W = argc > 2 ? atoi(argv[2]) : 64, N = argc > 3 ? atoi(argv[3]) : 32, K = argc > 4 ? atoi(argv[4]) : 512;
  int reps = argc > 5 ? atoi(argv[5]) : 5;
  const TpPreset *p = tp_preset_find(preset);
  GError *err = NULL;
  if (!p) {
    fprintf(stderr, "bench-sim: unknown preset %s\n", preset);
    return 2;
  }
  double t0, t_gen = 1e30;
  TpSchedule *s = NULL;
  for (int r = 0; r < reps; r++) {
    tp_schedule_free(s);
    t0 = now();
    s = tp_schedule_generate(p->order, p->policy, W, N, K, &err);
    if (!s) {
      fprintf(stderr, "bench-sim: %s\n", err->message);
      return 2;
    }
    t_gen = MIN(t_gen, now() - t0);
  }
  long long ops = tp_schedule_n_ops(s);
  TpCost *c = tp_cost_unit(W);
  double best = 1e30, best_m = 1e30, best_e = 1e30;
  for (int r = 0; r < reps; r++) {
    t0 = now();
    TpSim *ev = tp_sim_run_events(s, c, &err);
    double t = now() - t0;
    best_e = t < best_e ? t : best_e;
    tp_sim_free(ev);
    t0 = now();
    TpSim *sim = tp_sim_run(s, c, &err);
    t = now() - t0;
    best = t < best ? t : best;
    t0 = now();
    TpMetrics *m = tp_metrics_compute(sim);
    t = now() - t0;
    best_m = t < best_m ? t : best_m;
    tp_metrics_free(m);
    tp_sim_free(sim);
  }
  printf("preset %s W=%d N=%d K=%d: %lld operations\n", preset, W, N, K, ops);
  printf("generate+validate (best/%d) %8.3f s  %8.2f M ops/s\n", reps, t_gen, ops / t_gen / 1e6);
  printf("simulate (best/%d) %8.3f s  %8.2f M ops/s\n", reps, best, ops / best / 1e6);
  printf("event loop (best/%d) %6.3f s  %8.2f M ops/s\n", reps, best_e, ops / best_e / 1e6);
  printf("metrics  (best/%d) %8.3f s  %8.2f M ops/s\n", reps, best_m, ops / best_m / 1e6);
  double best_d = 1e30, best_c = 1e30;
  for (int r = 0; r < reps; r++) {
    t0 = now();
    g_free(tp_schedule_sha256(s));
    best_d = MIN(best_d, now() - t0);
    GString *csv = g_string_new(NULL);
    t0 = now();
    tp_format_csv(s, csv);
    best_c = MIN(best_c, now() - t0);
    g_string_free(csv, TRUE);
  }
  printf("digest   (best/%d) %8.3f s  %8.2f M ops/s\n", reps, best_d, ops / best_d / 1e6);
  printf("csv text (best/%d) %8.3f s  %8.2f M ops/s\n", reps, best_c, ops / best_c / 1e6);
  tp_cost_free(c);
  tp_schedule_free(s);
  return 0;
}
