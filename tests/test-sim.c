/* test-sim.c — the simulator against closed forms: unit-cost timelines equal the unit-slot
 * replay, GPipe's bubble, 1F1B's stored activations, PipeDream's versions, message counts,
 * a hand-computed cost-file timeline, device sharing, determinism, and bad cost files. */
#include "tp_cost.h"
#include "tp_costed.h"
#include "tp_index.h"
#include "tp_metrics.h"
#include "tp_policy.h"
#include "tp_replay.h"
#include "tp_sim.h"
#include "tp_test.h"

static TpSim *sim_unit(const TpSchedule *s, TpCost **c)
{
  *c = tp_cost_unit(s->W);
  GError *err = NULL;
  TpSim *sim = tp_sim_run(s, *c, &err);
  g_assert_no_error(err);
  return sim;
}

/* The event loop on unit costs gives the unit-slot replay's timeline, which is why tp_sim_run takes
 * the replay there: both must agree, transfers included. */
static void test_unit_equals_replay(void)
{
  for (int i = 0; i < tp_n_presets; i++) {
    g_autoptr(TpSchedule) s = tpt_preset(tp_presets[i].name, 5, 5, 9);
    TpCost *c;
    g_autoptr(TpSim) fast = sim_unit(s, &c);
    g_autoptr(TpSim) sim = tp_sim_run_events(s, c, NULL);
    g_assert_nonnull(sim);
    int64_t *start = g_new(int64_t, sim->n_ops), *end = g_new(int64_t, sim->n_ops);
    g_assert_true(tp_replay(s, sim->ix, start, end, NULL));
    g_assert_cmpfloat(fast->makespan, ==, sim->makespan);
    for (long g = 0; g < sim->n_ops; g++) {
      g_assert_cmpfloat(sim->start[g], ==, (double)start[g]);
      g_assert_cmpfloat(sim->end[g], ==, (double)end[g]);
      g_assert_cmpfloat(fast->start[g], ==, sim->start[g]);
      g_assert_cmpfloat(fast->end[g], ==, sim->end[g]);
      g_assert_cmpfloat(fast->xstart[g], ==, sim->xstart[g]);
      g_assert_cmpfloat(fast->xend[g], ==, sim->xend[g]);
    }
    g_free(start);
    g_free(end);
    tp_cost_free(c);
  }
}

static void test_gpipe_bubble(void)
{
  for (int W = 1; W <= 6; W++)
    for (int N = 1; N <= 6; N++)
      for (int K = 1; K <= 3; K++) {
        g_autoptr(TpSchedule) s = tpt_preset("gpipe", W, N, K);
        TpCost *c;
        g_autoptr(TpSim) sim = sim_unit(s, &c);
        g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
        g_assert_cmpfloat_with_epsilon(m->bubble, (double)(W - 1) / (N + W - 1), 1e-12);
        g_assert_cmpfloat(m->makespan, ==, 2.0 * K * (N + W - 1));
        tp_cost_free(c);
      }
}

static void test_1f1b_activations(void)
{
  for (int W = 2; W <= 6; W++)
    for (int N = 1; N <= 8; N++) {
      g_autoptr(TpSchedule) s = tpt_preset("1f1b", W, N, 3);
      TpCost *c;
      g_autoptr(TpSim) sim = sim_unit(s, &c);
      g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
      for (int st = 1; st <= W; st++)
        g_assert_cmpint(m->stage[st - 1].peak_activations, ==, MIN(W - st + 1, N));
      tp_cost_free(c);
    }
}

static void test_versions_kept(void)
{
  for (int W = 2; W <= 7; W++) {
    g_autoptr(TpSchedule) p = tpt_preset("pipedream", W, 3, 3 * W);
    g_autoptr(TpSchedule) v = tpt_preset("v-timeprest", W, 3, 3 * W);
    TpCost *c1, *c2;
    g_autoptr(TpSim) sp = sim_unit(p, &c1);
    g_autoptr(TpSim) sv = sim_unit(v, &c2);
    g_autoptr(TpMetrics) mp = tp_metrics_compute(sp);
    g_autoptr(TpMetrics) mv = tp_metrics_compute(sv);
    for (int st = 1; st <= W; st++) {
      g_assert_cmpint(mp->stage[st - 1].max_live_versions, ==, W - st + 1);
      g_assert_cmpint(mv->stage[st - 1].max_live_versions, ==, 1);
    }
    tp_cost_free(c1);
    tp_cost_free(c2);
  }
}

/* Messages: nf1b sends N forwards and one backward per mini-batch and link; GPipe 2N. */
static void test_messages(void)
{
  int W = 5, N = 3, K = 7;
  g_autoptr(TpSchedule) t = tpt_preset("timeprest", W, N, K);
  g_autoptr(TpSchedule) g = tpt_preset("gpipe", W, N, K);
  TpCost *c1, *c2;
  g_autoptr(TpSim) st = sim_unit(t, &c1);
  g_autoptr(TpSim) sg = sim_unit(g, &c2);
  g_autoptr(TpMetrics) mt = tp_metrics_compute(st);
  g_autoptr(TpMetrics) mg = tp_metrics_compute(sg);
  g_assert_cmpint(mt->messages, ==, (long)(W - 1) * (N + 1) * K);
  g_assert_cmpint(mg->messages, ==, 2L * (W - 1) * N * K);
  /* a mini-batch backward carries the gradients of all N micro-batches */
  g_assert_cmpfloat(mt->bytes, ==, 2.0 * (W - 1) * N * K);
  tp_cost_free(c1);
  tp_cost_free(c2);
}

static TpCost *cost_text(const char *text, int W, GError **err)
{
  return tp_cost_parse(text, strlen(text), "test.cost", W, err);
}

/* W=2, N=1, K=1 GPipe with real costs, computed by hand:
 * F1 [0,1]; send 100 B at 50 B/s + 0.5 latency: [1,3.5]; F2 [3.5,5.5]; B2 [5.5,8.5];
 * send 200 B: [8.5,13]; B1 [13,17]; U1 [17,17.25]; U2 [8.5,8.75]. */
static void test_cost_file_timeline(void)
{
  GError *err = NULL;
  g_autoptr(TpCost) c = cost_text("[stages]\nforward = 1, 2\nbackward = 4, 3\nupdate = 0.25\n"
                                  "activation_bytes = 100\ngradient_bytes = 0, 200\nweight_bytes = 10\n"
                                  "[links]\nlatency = 0.5\nbandwidth = 50\n", 2, &err);
  g_assert_no_error(err);
  g_autoptr(TpSchedule) s = tpt_preset("gpipe", 2, 1, 1);
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  g_assert_cmpfloat_with_epsilon(sim->makespan, 17.25, 1e-12);
  g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
  g_assert_cmpfloat_with_epsilon(m->stage[0].busy, 5.25, 1e-12);
  g_assert_cmpfloat_with_epsilon(m->stage[1].busy, 5.25, 1e-12);
  g_assert_cmpfloat(m->bytes, ==, 300);
  /* stage 2 holds the received activation 0 s, its stored activation (100 B) from 3.5 to 8.5,
   * weights, optimizer and gradient buffer (10 B each): peak 130 B plus the 200 B it sends */
  g_assert_cmpfloat(m->stage[1].at_peak[TP_MEM_WEIGHTS], ==, 10);
  g_assert_cmpfloat(m->stage[1].comp_peak[TP_MEM_ACTIVATIONS], ==, 100);
  g_assert_cmpfloat(m->stage[1].comp_peak[TP_MEM_COMM], ==, 200);
}

/* Two stages on one device serialise: no two operations overlap in time. */
static void test_shared_device(void)
{
  GError *err = NULL;
  g_autoptr(TpCost) c = cost_text("[stages]\nforward = 1\nbackward = 2\ndevice = 1, 1, 2\n", 3, &err);
  g_assert_no_error(err);
  g_assert_true(c->shared_devices);
  g_autoptr(TpSchedule) s = tpt_preset("1f1b", 3, 4, 2);
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  for (long a = sim->ix->off[0]; a < sim->ix->off[2]; a++)
    for (long b = a + 1; b < sim->ix->off[2]; b++)
      g_assert_true(sim->end[a] <= sim->start[b] || sim->end[b] <= sim->start[a]);
  g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
  g_assert_cmpfloat(m->makespan, >=, m->stage[0].busy + m->stage[1].busy);
}

static void test_deterministic(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 6, 3, 14);
  GError *err = NULL;
  g_autoptr(TpCost) c = cost_text("[stages]\nforward = 1,1,1,1,1,1\nbackward = 2\nupdate = 0\ndevice = 1,2,1,2,3,3\n"
                                  "activation_bytes = 10\n[links]\nlatency = 0.5\nbandwidth = 10\n", 6, &err);
  g_assert_no_error(err);
  g_autoptr(TpSim) a = tp_sim_run(s, c, &err);
  g_autoptr(TpSim) b = tp_sim_run(s, c, &err);
  g_assert_cmpmem(a->start, a->n_ops * sizeof(double), b->start, b->n_ops * sizeof(double));
  g_assert_cmpmem(a->xend, a->n_ops * sizeof(double), b->xend, b->n_ops * sizeof(double));
}

static void expect_cost_error(const char *text, int W, const char *needle)
{
  GError *err = NULL;
  TpCost *c = cost_text(text, W, &err);
  g_assert_null(c);
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  if (!strstr(err->message, needle))
    g_error("message '%s' lacks '%s'", err->message, needle);
  g_assert_null(strchr(err->message, '\n'));
  g_error_free(err);
}

static void test_bad_cost_files(void)
{
  expect_cost_error("[stages]\nforward = 1\nbackward = x\n", 2, "test.cost:3: [stages] backward: expected a non-negative number, got 'x'");
  expect_cost_error("[stages]\nforward = 1, 2, 3\nbackward = 1\n", 2, "test.cost:2: [stages] forward: expected one number or 2");
  expect_cost_error("[stages]\nforward = 1\nbackward = 1\nflops = 3\n", 2, "test.cost:4: [stages] flops: unknown key");
  expect_cost_error("[stages]\nforward = 1\n", 2, "stage 1 has no backward time");
  expect_cost_error("[stage.3]\nforward = 1\n", 2, "test.cost:1: [stage.3]: no such stage");
  expect_cost_error("[links]\nbandwidth = 0\n[stages]\nforward=1\nbackward=1\n", 2, "test.cost:2: [links] bandwidth: bandwidth must be positive");
  expect_cost_error("[stages]\nforward = -1\nbackward = 1\n", 2, "expected a non-negative number, got '-1'");
  expect_cost_error("[oops]\n", 2, "unknown group");
  expect_cost_error("not a key file\n", 2, "test.cost: ");
  expect_cost_error("[stages]\nforward = 1\nbackward = 1\ndevice = 0\n", 1, "device numbers");
}

/* An order fixed on a cost model: on unit costs it is the unit-slot order; on real costs the
 * simulator, replaying it under the same costs, finds the timeline it was chosen on (no stage
 * ever waits with a ready operation), and it differs from the unit-slot order. */
static void test_costed_order(void)
{
  GError *err = NULL;
  const char *presets[] = { "timeprest", "v-timeprest", "pipedream", "timeprest-1f1b" };
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++) {
    const TpPreset *p = tp_preset_find(presets[i]);
    g_autoptr(TpCost) unit = tp_cost_unit(4);
    g_autoptr(TpSchedule) a = tp_schedule_generate_costed(p->order, p->policy, 4, 3, 10, unit, &err);
    g_assert_no_error(err);
    g_autoptr(TpSchedule) b = tpt_preset(presets[i], 4, 3, 10);
    g_assert_true(tp_schedule_equal(a, b));
  }
  g_autoptr(TpCost) c = cost_text("[stages]\nforward = 1, 3, 1, 2\nbackward = 2, 5, 2, 4\nupdate = 0.5\n"
                                  "activation_bytes = 100\ndevice = 1, 2, 1, 3\n[links]\nlatency = 0.25\nbandwidth = 80\n", 4, &err);
  g_assert_no_error(err);
  g_autoptr(TpSchedule) s = tp_schedule_generate_costed(TP_ORDER_NF1B, TP_POLICY_VSYNC_LATEST, 4, 3, 12, c, &err);
  g_assert_no_error(err);
  g_autoptr(TpSchedule) u = tpt_preset("timeprest", 4, 3, 12);
  g_assert_false(tp_schedule_equal(s, u));
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  /* the simulated timeline is the one the order was fixed on: c(i) recomputed from it agrees */
  g_autoptr(GString) text = g_string_new(NULL);
  tp_format_csv(s, text);
  g_autoptr(TpSchedule) again = tp_schedule_parse(text->str, text->len, "copy", &err);
  g_assert_no_error(err);
  for (int st = 0; st < again->W; st++)
    for (int k = 0; k < tp_stage_len(again, st); k++)
      tp_stage_ops(again, st)[k].ver = 0;
  g_assert_true(tp_policy_assign_timed(again, sim->start, sim->end, &err));
  g_assert_true(tp_schedule_equal(s, again));
  /* and it is not the unit-slot one: some backward reads another version there */
  g_autoptr(TpSchedule) unit_versions = tp_schedule_parse(text->str, text->len, "copy", &err);
  g_assert_true(tp_policy_assign(unit_versions, &err));
  g_assert_false(tp_schedule_equal(s, unit_versions));
  /* the nf1b rules hold on the costed timeline: admission and backward-first */
  for (int st = 0; st < s->W; st++) {
    int inflight = 0;
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOp *op = &tp_stage_ops(s, st)[k];
      inflight += op->kind == TP_OP_F && op->micro == 0;
      inflight -= op->kind == TP_OP_B;
      g_assert_cmpint(inflight, <=, s->W - st);
    }
  }
}

/* Steady time per mini-batch on unit slots: N+1 slots for nF1B (N forwards and one backward per
 * stage), 2 slots for PipeDream, 2(N+W-1) for GPipe. */
static void test_time_per_minibatch(void)
{
  for (int W = 2; W <= 6; W++)
    for (int N = 1; N <= 6; N++) {
      const char *presets[] = { "timeprest", "pipedream", "gpipe" };
      double want[] = { N + 1, 2, 2.0 * (N + W - 1) };
      for (int i = 0; i < 3; i++) {
        g_autoptr(TpSchedule) s = tpt_preset(presets[i], W, N, 3 * W + 2);
        TpCost *c;
        g_autoptr(TpSim) sim = sim_unit(s, &c);
        g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
        if (m->t_minibatch != want[i])
          g_error("%s W=%d N=%d: %g slots per mini-batch, expected %g", presets[i], W, N, m->t_minibatch, want[i]);
        tp_cost_free(c);
      }
    }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/sim/unit-equals-replay", test_unit_equals_replay);
  g_test_add_func("/sim/gpipe-bubble", test_gpipe_bubble);
  g_test_add_func("/sim/1f1b-activations", test_1f1b_activations);
  g_test_add_func("/sim/versions-kept", test_versions_kept);
  g_test_add_func("/sim/messages", test_messages);
  g_test_add_func("/sim/cost-file-timeline", test_cost_file_timeline);
  g_test_add_func("/sim/shared-device", test_shared_device);
  g_test_add_func("/sim/deterministic", test_deterministic);
  g_test_add_func("/sim/bad-cost-files", test_bad_cost_files);
  g_test_add_func("/sim/costed-order", test_costed_order);
  g_test_add_func("/sim/time-per-mini-batch", test_time_per_minibatch);
  return g_test_run();
}
