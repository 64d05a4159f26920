/* test-sim-costs.c — the simulator on real costs: a hand-computed cost-file timeline, rendezvous,
 * stages sharing a device, determinism, bad cost files, the order fixed on the costs, and zero
 * costs (library and command line). The simulator on unit costs is tests/test-sim.c. */
#include "tp_cost.h"
#include "tp_costed.h"
#include "tp_index.h"
#include "tp_metrics.h"
#include "tp_policy.h"
#include "tp_replay.h"
#include "tp_sim.h"
#include "tp_test.h"

#include <math.h>

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

/* MPI's rendezvous, by hand: W=2, N=4, K=1 GPipe; stage 1's forwards take 1 s and send 100 B each
 * over a link of 0.5 s, stage 2's take 10 s.  F(1,i) ends at i, arrives at i + 0.5; stage 2 starts
 * F(1,1) at 1.5, F(1,2) at 11.5, F(1,3) at 21.5, F(1,4) at 31.5.  Its backwards take 10 s and send
 * 100 B back, which stage 1 (backwards of 1 s) takes as they arrive.
 *  - eager (no limit, or a limit of 100 B: the messages are not larger): stage 1 holds each message
 *    for its transfer (one at a time: 100 B); stage 2 holds what arrived and waits, F(1,2..4) at
 *    4.5 (300 B), and each gradient for its transfer (100 B);
 *  - rendezvous (a limit of 99 B): stage 1 holds each of its messages until stage 2's forward takes
 *    it (F(1,2..4) at 4: 300 B) and nothing that it receives; stage 2 holds nothing that it
 *    receives and each gradient until stage 1's backward starts (at its arrival: 100 B). */
static void test_rendezvous(void)
{
  const char *limits[] = { "", "eager_limit = 100\n", "eager_limit = 99\n" };
  const double comm[][2] = { { 100, 300 }, { 100, 300 }, { 300, 100 } };
  g_autoptr(TpSchedule) s = tpt_preset("gpipe", 2, 4, 1);
  for (size_t i = 0; i < G_N_ELEMENTS(limits); i++) {
    GError *err = NULL;
    g_autofree char *text = g_strdup_printf("[stages]\nforward = 1, 10\nbackward = 1, 10\nactivation_bytes = 100\n"
                                            "gradient_bytes = 0, 100\nstored_activation_bytes = 0\n"
                                            "[links]\nlatency = 0.5\n%s", limits[i]);
    g_autoptr(TpCost) c = cost_text(text, 2, &err);
    g_assert_no_error(err);
    g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
    g_assert_no_error(err);
    g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
    for (int st = 0; st < 2; st++) {
      if (m->stage[st].comp_peak[TP_MEM_COMM] != comm[i][st] || m->stage[st].peak_bytes != comm[i][st])
        g_error("limit '%s': stage %d holds %g B of messages at most (peak %g B), expected %g", limits[i], st + 1,
                m->stage[st].comp_peak[TP_MEM_COMM], m->stage[st].peak_bytes, comm[i][st]);
      /* the memory over time says the same */
      g_autoptr(GArray) series = tp_metrics_memory_series(sim, m, st);
      double top = 0;
      for (guint k = 0; k < series->len; k++)
        top = MAX(top, g_array_index(series, TpMemPoint, k).bytes);
      g_assert_cmpfloat(top, ==, comm[i][st]);
    }
    /* the times are the link's as before */
    g_assert_cmpfloat_with_epsilon(sim->makespan, 1.5 + 40 + 40 + 0.5 + 1, 1e-12);
  }
}

/* [a, t) is covered by operations of stages other than st on st's device (it was busy then). */
static gboolean device_busy(const TpSim *sim, int st, double a, double t)
{
  const TpCost *c = sim->c;
  for (double cur = a; cur < t;) {
    double next = cur;
    for (int o = 0; o < sim->s->W; o++)
      if (o != st && c->stage[o].device == c->stage[st].device)
        for (long g = sim->ix->off[o]; g < sim->ix->off[o + 1]; g++)
          if (sim->start[g] <= cur && cur < sim->end[g])
            next = MAX(next, sim->end[g]);
    if (next == cur)
      return FALSE;
    cur = next;
  }
  return TRUE;
}

/* When op g becomes runnable as far as its own stage's order and its input go: the previous op's
 * end and the arrival of its message (for a backward at stage W, its forwards' ends come first in
 * the order). */
static double ready_time(const TpSim *sim, long g)
{
  double t = sim->prod[g] >= 0 ? sim->xend[sim->prod[g]] : 0;
  for (int st = 0; st < sim->s->W; st++)
    if (g > sim->ix->off[st] && g < sim->ix->off[st + 1])
      t = MAX(t, sim->end[g - 1]);
  return t;
}

/* Two stages on one device serialise, and only they: every operation starts as soon as its stage,
 * its input and its device allow, and stage 3 (a device of its own) runs beside the other two. */
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
  int waited = 0, beside = 0;
  for (int st = 0; st < 3; st++)
    for (long g = sim->ix->off[st]; g < sim->ix->off[st + 1]; g++) {
      double r = ready_time(sim, g);
      g_assert_cmpfloat(sim->start[g], >=, r);
      if (sim->start[g] > r) {
        g_assert_true(device_busy(sim, st, r, sim->start[g]));
        waited++;
      }
      if (st == 2)
        for (long o = sim->ix->off[0]; o < sim->ix->off[2]; o++)
          beside += sim->start[g] < sim->end[o] && sim->start[o] < sim->end[g];
    }
  g_assert_cmpint(waited, >, 0);
  g_assert_cmpint(beside, >, 0);
  g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
  g_assert_cmpfloat(m->makespan, >=, m->stage[0].busy + m->stage[1].busy);
  g_assert_cmpfloat(m->makespan, <, m->stage[0].busy + m->stage[1].busy + m->stage[2].busy);
}

/* Two runs of the program, two processes: the same bytes on standard output and in the event CSV. */
static void test_deterministic(void)
{
  g_autofree char *cost = tpt_tmp_path("det.cost");
  g_assert_true(g_file_set_contents(cost, "[stages]\nforward = 1,1,1,1,1,1\nbackward = 2\nupdate = 0\n"
                                          "device = 1,2,1,2,3,3\nactivation_bytes = 10\n[links]\nlatency = 0.5\n"
                                          "bandwidth = 10\n", -1, NULL));
  char *csv[2], *out[2];
  for (int run = 0; run < 2; run++) {
    csv[run] = tpt_tmp_path("events.csv");
    TptRun r = tpt_run((const char *const[]){ "simulate", "-s", "timeprest", "-w", "6", "-n", "3", "-k", "14",
                                              "--cost", cost, "--format", "json", "--csv", csv[run], NULL });
    g_assert_cmpint(r.status, ==, 0);
    out[run] = g_strdup(r.out);
    tpt_run_clear(&r);
  }
  g_assert_cmpstr(out[0], ==, out[1]);
  g_autofree char *a = NULL, *b = NULL;
  gsize la = 0, lb = 0;
  g_assert_true(g_file_get_contents(csv[0], &a, &la, NULL));
  g_assert_true(g_file_get_contents(csv[1], &b, &lb, NULL));
  g_assert_cmpuint(la, >, 1000);
  g_assert_cmpmem(a, la, b, lb);
  for (int run = 0; run < 2; run++) {
    tpt_tmp_remove(csv[run]);
    g_free(csv[run]);
    g_free(out[run]);
  }
  tpt_tmp_remove(cost);
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
  expect_cost_error("not a key file\n", 2, "test.cost:1: 'not a key file' is not a [group]");
  expect_cost_error("[stages]\nforward = 1\nbackward = 1\ndevice = 0\n", 1, "device numbers");
  expect_cost_error("[stages]\nforward = 1\nbackward = 1\n[link.1]\neager_limit = 1e19\n", 2,
                    "test.cost:5: [link.1] eager_limit: expected a byte count");
}

/* Count the places where a simulated timeline breaks the rules an nf1b or 1f1b-async order is fixed
 * by on costs (spec §2.1): a stage that starts a forward while its next backward is ready (backward
 * first), a stage that idles, its device free, while its next backward or its next admitted forward
 * is ready (it runs what is ready), more mini-batches in flight than W-s+1, backwards out of
 * mini-batch order, an update that does not follow its backward. */
static int costed_rule_breaks(const TpSim *sim)
{
  const TpSchedule *s = sim->s;
  const TpIndex *ix = sim->ix;
  const int W = s->W;
  int breaks = 0;
  for (int st = 0; st < W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    int n = tp_stage_len(s, st), nb = 1, inflight = 0;
    double e = 0; /* the stage is free from e */
    for (int k = 0; k < n; k++) {
      const TpOp *op = &ops[k];
      long g = ix->off[st] + k;
      double t = sim->start[g];
      if (op->kind == TP_OP_U) {
        breaks += !(k > 0 && ops[k - 1].kind == TP_OP_B && ops[k - 1].mb == op->mb);
        e = sim->end[g];
        continue;
      }
      double rb = INFINITY, rf = INFINITY; /* when the next backward and forward were ready */
      if (nb <= s->K) {
        TpOp b = { .kind = TP_OP_B, .mb = nb, .micro = TP_WHOLE };
        long bg = ix->off[st] + tp_index_pos(ix, st, &b);
        if (st < W - 1) {
          rb = sim->xend[sim->prod[bg]];
        } else { /* stage W: when its forwards are done, if they come before position k */
          double r = 0;
          for (int j = 0; j < s->N && r < INFINITY; j++) {
            TpOp f = { .kind = TP_OP_F, .mb = nb, .micro = s->order == TP_ORDER_1F1B_ASYNC ? TP_WHOLE : j };
            int p = tp_index_pos(ix, st, &f);
            r = p < k ? MAX(r, sim->end[ix->off[st] + p]) : INFINITY;
          }
          rb = r;
        }
      }
      int fk = k;
      while (fk < n && ops[fk].kind != TP_OP_F)
        fk++;
      if (fk < n) {
        gboolean opens = ops[fk].micro == 0 || ops[fk].micro == TP_WHOLE;
        if (!opens || inflight < W - st)
          rf = st > 0 ? sim->xend[sim->prod[ix->off[st] + fk]] : 0;
      }
      if (op->kind == TP_OP_F)
        breaks += rb <= t; /* backward first */
      double a = MAX(e, MIN(rb, rf));
      if (a < t && !device_busy(sim, st, a, t))
        breaks++; /* idled with something ready */
      if (op->kind == TP_OP_F) {
        inflight += op->micro == 0 || op->micro == TP_WHOLE;
        breaks += inflight > W - st;
      } else {
        breaks += op->mb != nb++;
        inflight--;
      }
      e = sim->end[g];
    }
  }
  return breaks;
}

/* An order fixed on a cost model: on unit costs it is the unit-slot order; on real costs the
 * simulator, replaying it under the same costs, finds a timeline on which every stage, every time it
 * falls idle, picks what the rules pick (backward first, nothing ready left waiting) — the timeline
 * the order was chosen on — while the unit-slot order replayed on those costs breaks the rules. */
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
  const char *costs[] = {
    "[stages]\nforward = 1, 3, 1, 2\nbackward = 2, 5, 2, 4\nupdate = 0.5\nactivation_bytes = 100\n"
    "device = 1, 2, 1, 3\n[links]\nlatency = 0.25\nbandwidth = 80\n",
    "[stages]\nforward = 1, 3, 1, 2\nbackward = 2, 5, 2, 4\nupdate = 0.5\nactivation_bytes = 100\n"
    "[links]\nlatency = 0.25\nbandwidth = 80\n",
    "[stages]\nforward = 2, 1, 1, 1\nbackward = 1, 1, 1, 6\nupdate = 0.125\n",
  };
  int differ = 0;
  for (guint z = 0; z < G_N_ELEMENTS(costs); z++)
    for (guint i = 0; i < G_N_ELEMENTS(presets); i++) {
      g_autoptr(TpCost) c = cost_text(costs[z], 4, &err);
      g_assert_no_error(err);
      const TpPreset *p = tp_preset_find(presets[i]);
      g_autoptr(TpSchedule) s = tp_schedule_generate_costed(p->order, p->policy, 4, 3, 12, c, &err);
      g_assert_no_error(err);
      g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
      g_assert_no_error(err);
      int breaks = costed_rule_breaks(sim);
      if (breaks)
        g_error("%s on cost model %u: %d rule breaks on the simulated timeline", presets[i], z, breaks);
      g_autoptr(TpSchedule) u = tpt_preset(presets[i], 4, 3, 12);
      g_autoptr(TpSim) usim = tp_sim_run(u, c, &err);
      g_assert_no_error(err);
      /* the rules pin the order down: the unit-slot order keeps them only where it is the same */
      g_assert_cmpint(costed_rule_breaks(usim) > 0, ==, !tp_schedule_equal(s, u));
      differ += !tp_schedule_equal(s, u);
    }
  g_assert_cmpint(differ, >=, 8);
  g_autoptr(TpCost) c = cost_text(costs[0], 4, &err);
  g_autoptr(TpSchedule) s = tp_schedule_generate_costed(TP_ORDER_NF1B, TP_POLICY_VSYNC_LATEST, 4, 3, 12, c, &err);
  g_assert_no_error(err);
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  /* c(i) recomputed from the simulated timeline agrees with the versions fixed with the order */
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
}

/* Zero and near-zero costs: orders fixed on them validate, every backward of vsync-latest reads
 * c(i) <= i-1 (an update finished at the very instant B(i) starts counts only when it does not
 * follow B(i)), and the simulation's numbers are finite. */
static const char *const zero_costs[] = {
  "[stages]\nforward = 1\nbackward = 0\nupdate = 0.5\nactivation_bytes = 10\n[links]\nlatency = 0.25\nbandwidth = 100\n",
  "[stages]\nforward = 1\nbackward = 0\nupdate = 0\n",
  "[stages]\nforward = 0\nbackward = 1\nupdate = 0\n",
  "[stages]\nforward = 1\nbackward = 2\nupdate = 0\n",
  "[stages]\nforward = 0\nbackward = 0\nupdate = 0\n",
  "[stages]\nforward = 1e-300\nbackward = 1e-300\nupdate = 1e-300\n",
  "[stages]\nforward = 1\nbackward = 1e-300\nupdate = 0\n",
  "[stages]\nforward = 0, 1, 0, 2\nbackward = 0, 0, 3, 0\nupdate = 0\n",
};

/* Preset p fixed on cost file `text` (W stages) with D = 2 replicas: its simulated timeline keeps the
 * order's rules, and vsync-latest's versions taken on the order's own timeline are the simulated
 * one's.  *held counts the stages whose updates waited for their all-reduce. */
static void allreduce_case(const char *text, int W, const char *p_name, int N, int K, gboolean overlap, int *held)
{
  GError *err = NULL;
  g_autoptr(TpCost) c = cost_text(text, W, &err);
  g_assert_no_error(err);
  tp_cost_data_parallel(c, 2, overlap);
  const TpPreset *p = tp_preset_find(p_name);
  g_autoptr(TpSchedule) s = tp_schedule_generate_costed(p->order, p->policy, W, N, K, c, &err);
  g_assert_no_error(err);
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  g_assert_cmpint(costed_rule_breaks(sim), ==, 0);
  for (int st = 0; st < W; st++)
    *held += sim->ar->exposed[st] > 0;
  g_autoptr(GArray) ver = g_array_new(FALSE, FALSE, sizeof(int32_t));
  for (int st = 0; st < W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++)
      g_array_append_val(ver, tp_stage_ops(s, st)[k].ver);
  g_assert_true(tp_policy_assign_timed(s, sim->start, sim->end, &err));
  for (int st = 0, at = 0; st < W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++)
      g_assert_cmpint(tp_stage_ops(s, st)[k].ver, ==, g_array_index(ver, int32_t, at++));
}

/* With replicas, each update waits for its stage's all-reduce: the order fixed on the costs waits for
 * it as the simulator does (also where a stage reaches its update while a lower stage holds their
 * device: its all-reduce starts then), so its simulated timeline keeps the rules (serial and
 * overlapped all-reduces, on links slow enough to hold the updates back). */
static void test_costed_order_allreduce(void)
{
  const char *presets[] = { "timeprest", "v-timeprest", "pipedream", "timeprest-1f1b" };
  /* buckets of 25 MiB: 12 to 35; a device a stage, or stages 1 and 3 on one */
  const char *text = "[stages]\nforward = 1, 3, 1, 2\nbackward = 2, 5, 2, 4\nupdate = 0.5\nactivation_bytes = 100\n"
                     "weight_bytes = 4e8, 9e8, 3e8, 6e8\n%s[links]\nlatency = 0.25\nbandwidth = 80\n"
                     "[data_parallel]\nlatency = 0.5\nbandwidth = 2e8\n";
  int held = 0;
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++)
    for (int variant = 0; variant < 4; variant++) {
      g_autofree char *t = g_strdup_printf(text, (variant & 2) ? "device = 1, 2, 1, 3\n" : "");
      allreduce_case(t, 4, presets[i], 3, 12, variant & 1, &held);
    }
  g_assert_cmpint(held, >, 0); /* the all-reduces do hold updates back */
  allreduce_case("[stages]\nforward = 2, 3, 2, 2, 2\nbackward = 4, 3, 4, 4, 1\nupdate = 0\nweight_bytes = 2e8, 1e8, 4e8, "
                 "3e8, 3e8\ndevice = 2, 2, 1, 4, 4\n[data_parallel]\nlatency = 2\nbandwidth = 2e8\n", 5, "timeprest", 2, 8,
                 FALSE, &held);
}

static void test_zero_costs(void)
{
  const char *presets[] = { "timeprest", "timeprest-1f1b", "v-timeprest", "pipedream", "i-timeprest" };
  for (guint z = 0; z < G_N_ELEMENTS(zero_costs); z++)
    for (guint p = 0; p < G_N_ELEMENTS(presets); p++)
      for (int W = 1; W <= 4; W++)
        for (int N = 1; N <= 3; N++) {
        GError *err = NULL;
        g_autoptr(TpCost) c = cost_text(zero_costs[z], W, &err);
        if (!c) /* per-stage lists are for W = 4 */
          continue;
        const TpPreset *pr = tp_preset_find(presets[p]);
        g_autoptr(TpSchedule) s = tp_schedule_generate_costed(pr->order, pr->policy, W, N, 12, c, &err);
        if (err)
          g_error("%s, W=%d, N=%d, cost file %u: %s", presets[p], W, N, z, err->message);
        for (int st = 0; st < W; st++)
          for (int k = 0; k < tp_stage_len(s, st); k++) {
            const TpOp *op = &tp_stage_ops(s, st)[k];
            if (s->policy == TP_POLICY_VSYNC_LATEST && op->kind == TP_OP_B)
              g_assert_cmpint(op->ver, <=, op->mb - 1);
          }
        g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
        g_assert_no_error(err);
        g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
        g_assert_true(isfinite(m->makespan) && isfinite(m->bubble) && isfinite(m->throughput));
      }
  /* all at one instant: B(i) reads every update of stage 1 that does not follow it */
  GError *err = NULL;
  g_autoptr(TpCost) c = cost_text(zero_costs[4], 4, &err);
  g_autoptr(TpSchedule) s = tp_schedule_generate_costed(TP_ORDER_NF1B, TP_POLICY_VSYNC_LATEST, 4, 2, 12, c, &err);
  g_assert_no_error(err);
  g_autoptr(TpIndex) ix = tp_index_new(s, &err);
  int32_t lo[13], hi[13];
  g_assert_true(tp_causal_bounds(s, ix, lo, hi));
  for (int k = 0; k < tp_stage_len(s, 3); k++) {
    const TpOp *op = &tp_stage_ops(s, 3)[k];
    if (op->kind == TP_OP_B)
      g_assert_cmpint(op->ver, ==, hi[op->mb]);
  }
}

/* The same through the program: simulate --costed-order, and schedule --costed-order written to
 * a file and read back. */
static char *replace_all(const char *text, const char *from, const char *to)
{
  g_auto(GStrv) parts = g_strsplit(text, from, -1);
  return g_strjoinv(to, parts);
}

static void test_zero_costs_cli(void)
{
  g_autofree char *cost = tpt_tmp_path("zero.cost");
  g_autofree char *sched = tpt_tmp_path("zero.csv");
  for (guint z = 0; z < G_N_ELEMENTS(zero_costs); z++) {
    if (z == 4) /* all zero: refused below */
      continue;
    /* a cost file refuses times below 1e-12 at their line: the smallest it takes stands in for 1e-300 */
    g_autofree char *text = replace_all(zero_costs[z], "1e-300", "1e-12");
    g_assert_true(g_file_set_contents(cost, text, -1, NULL));
    TptRun a = tpt_run((const char *const[]){ "simulate", "-s", "timeprest", "-w", "4", "-n", "2", "-k", "12",
                                              "--costed-order", "--cost", cost, "--format", "json", NULL });
    if (a.status != 0)
      g_error("cost file %u: simulate exits %d: %s", z, a.status, a.err);
    g_assert_null(strstr(a.out, "nan"));
    g_assert_null(strstr(a.out, "inf"));
    TptRun b = tpt_run((const char *const[]){ "schedule", "-s", "timeprest", "-w", "4", "-n", "2", "-k", "12",
                                              "--costed-order", "--cost", cost, "--format", "csv", "-o", sched, NULL });
    g_assert_cmpint(b.status, ==, 0);
    TptRun r = tpt_run((const char *const[]){ "simulate", "--input", sched, "--cost", cost, NULL });
    if (r.status != 0)
      g_error("cost file %u: simulate --input exits %d: %s", z, r.status, r.err);
    tpt_run_clear(&a);
    tpt_run_clear(&b);
    tpt_run_clear(&r);
  }
  g_assert_true(g_file_set_contents(cost, zero_costs[4], -1, NULL));
  TptRun none = tpt_run((const char *const[]){ "simulate", "--cost", cost, NULL });
  g_assert_cmpint(none.status, ==, 2);
  g_assert_nonnull(strstr(none.err, "zero.cost: every time is 0 (operations, messages)"));
  tpt_run_clear(&none);
  /* no compute, but an all-reduce of 100 bytes at 1 B/s among replicas: a run of time (it was refused) */
  g_assert_true(g_file_set_contents(cost, "[stages]\nforward = 0\nbackward = 0\nweight_bytes = 100\n"
                                          "[data_parallel]\nbandwidth = 1\n", -1, NULL));
  TptRun dp = tpt_run((const char *const[]){ "simulate", "-w", "2", "-n", "2", "--cost", cost, "--data-parallel", "2",
                                             "--format", "json", NULL });
  g_assert_cmpint(dp.status, ==, 0);
  g_assert_nonnull(strstr(dp.out, "\"makespan\": "));
  g_assert_null(strstr(dp.out, "\"makespan\": 0,"));
  tpt_run_clear(&dp);
  dp = tpt_run((const char *const[]){ "simulate", "-w", "2", "-n", "2", "--cost", cost, NULL });
  g_assert_cmpint(dp.status, ==, 2);
  g_assert_nonnull(strstr(dp.err, "every time is 0 (operations, messages)"));
  tpt_run_clear(&dp);
  g_assert_true(g_file_set_contents(cost, zero_costs[5], -1, NULL));
  TptRun tiny = tpt_run((const char *const[]){ "simulate", "--costed-order", "--cost", cost, NULL });
  g_assert_cmpint(tiny.status, ==, 2);
  g_assert_nonnull(strstr(tiny.err, "zero.cost:2: [stages] forward: a time below 1e-12 is too small"));
  tpt_run_clear(&tiny);
  tpt_tmp_remove(cost);
  tpt_tmp_remove(sched);
}

/* "a, b, …" of W values cycling through v[0..3], each times `scale`. */
static char *cost_list(int W, const double *v, double scale)
{
  GString *t = g_string_new(NULL);
  for (int st = 0; st < W; st++)
    g_string_append_printf(t, "%s%g", st ? ", " : "", v[st % 4] * scale);
  return g_string_free(t, FALSE);
}

/* Whole-number bytes and times doubled (variant 0), times as they are (1: halves among them), and
 * bytes halved too (2: halves among them). */
static TpCost *memory_costs(int W, int variant)
{
  static const double fwd[4] = { 0.5, 0.5, 0.5, 0.5 }, bwd[4] = { 0.5, 1, 0.5, 0.5 }, act[4] = { 3, 5, 2, 4 },
                      grad[4] = { 5, 1, 6, 2 };
  double tb = variant ? 1 : 2, bb = variant == 2 ? 0.5 : 1;
  g_autofree char *f = cost_list(W, fwd, tb), *b = cost_list(W, bwd, tb), *a = cost_list(W, act, bb),
                  *g = cost_list(W, grad, bb);
  g_autofree char *text = g_strdup_printf("[stages]\nforward = %s\nbackward = %s\nupdate = 0\nactivation_bytes = %s\n"
                                          "gradient_bytes = %s\nweight_bytes = %g\nstored_activation_bytes = %g\n"
                                          "optimizer_bytes = %g\n[links]\nlatency = %g\neager_limit = %g\n",
                                          f, b, a, g, 7 * bb, 2 * bb, 11 * bb, 0.5 * tb, 9 * bb);
  GError *err = NULL;
  TpCost *c = cost_text(text, W, &err);
  g_assert_no_error(err);
  return c;
}

/* Stage st's memory in run v against run 0's, bytes times `scale`: every peak, count and component. */
static void memory_same(const char *what, int st, const TpStageMetrics *a, const TpStageMetrics *b, double scale)
{
  gboolean same = a->max_live_versions == b->max_live_versions && a->peak_activations == b->peak_activations &&
                  a->peak_bytes == b->peak_bytes * scale;
  for (int k = 0; k < TP_N_MEM; k++)
    same = same && a->at_peak[k] == b->at_peak[k] * scale && a->comp_peak[k] == b->comp_peak[k] * scale;
  if (!same)
    g_error("%s stage %d: memory on whole times and bytes (peak %g B, %d versions, %d activations) differs from "
            "halves (peak %g B x %g, %d versions, %d activations)", what, st + 1, a->peak_bytes,
            a->max_live_versions, a->peak_activations, b->peak_bytes, scale, b->max_live_versions,
            b->peak_activations);
  g_assert_cmpfloat(a->peak_bytes, >, 11);
}

/* The stages' memory on whole-number times and bytes (summed per instant), on halved times (merged
 * by time, summed per instant) and on halved times and bytes (merged change by change, frees first
 * at an instant) is the same, for every preset, with and without recomputation, with messages over
 * the eager limit; and the highest point of the memory over time (merged) is the peak. */
static void test_memory_instants(void)
{
  for (int i = 0; i < tp_n_presets; i++)
    for (int recompute = 0; recompute < 2; recompute++) {
      g_autoptr(TpSchedule) s = tpt_preset(tp_presets[i].name, 4, 8, 9);
      if (recompute && !tp_schedule_ask_recompute(s, NULL))
        continue;
      TpStageMetrics *got[3];
      double span[3];
      for (int v = 0; v < 3; v++) {
        GError *err = NULL;
        g_autoptr(TpCost) c = memory_costs(s->W, v);
        tp_cost_place_chunks(c, s);
        g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
        g_assert_no_error(err);
        g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
        got[v] = g_memdup2(m->stage, s->W * sizeof *m->stage);
        span[v] = sim->makespan;
        for (int st = 0; st < s->W && !v; st++) {
          g_autoptr(GArray) series = tp_metrics_memory_series(sim, m, st);
          double top = 0;
          for (guint k = 0; k < series->len; k++)
            top = MAX(top, g_array_index(series, TpMemPoint, k).bytes);
          g_assert_cmpfloat(top, ==, m->stage[st].peak_bytes);
        }
      }
      g_assert_cmpfloat(span[0], ==, 2 * span[1]);
      g_assert_cmpfloat(span[1], ==, span[2]);
      g_autofree char *what = g_strdup_printf("%s%s", tp_presets[i].name, recompute ? " --recompute" : "");
      for (int st = 0; st < s->W; st++) {
        memory_same(what, st, &got[0][st], &got[1][st], 1);
        memory_same(what, st, &got[0][st], &got[2][st], 2);
      }
      for (int v = 0; v < 3; v++)
        g_free(got[v]);
    }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/sim/cost-file-timeline", test_cost_file_timeline);
  g_test_add_func("/sim/rendezvous", test_rendezvous);
  g_test_add_func("/sim/shared-device", test_shared_device);
  g_test_add_func("/sim/deterministic", test_deterministic);
  g_test_add_func("/sim/bad-cost-files", test_bad_cost_files);
  g_test_add_func("/sim/costed-order", test_costed_order);
  g_test_add_func("/sim/costed-order-allreduce", test_costed_order_allreduce);
  g_test_add_func("/sim/zero-costs", test_zero_costs);
  g_test_add_func("/sim/zero-costs-cli", test_zero_costs_cli);
  g_test_add_func("/sim/memory-instants", test_memory_instants);
  return g_test_run();
}
