/* test-sim.c — the simulator on unit costs against closed forms: unit-cost timelines equal the
 * unit-slot replay, GPipe's bubble, 1F1B's stored activations, PipeDream's versions, message
 * counts, the costed replays against the event loop, the steady time per mini-batch, the version
 * mismatch and its column in event files.
 * The simulator on real costs is tests/test-sim-costs.c. */
#include "tp_cost.h"
#include "tp_costed.h"
#include "tp_events.h"
#include "tp_metrics.h"
#include "tp_policy.h"
#include "tp_replay.h"
#include "tp_report.h"
#include "tp_sim.h"
#include "tp_test.h"

#include <math.h>

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
    /* dualpipe-v takes N >= 2W */
    g_autoptr(TpSchedule) s = tpt_preset(tp_presets[i].name, 5, tp_presets[i].order == TP_ORDER_DUALPIPE_V ? 10 : 5, 9);
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
      g_assert_cmpint(fast->cons[g], ==, sim->cons[g]);
      if (sim->cons[g] < 0) /* no message: transfer times are not read */
        continue;
      g_assert_cmpfloat(fast->xstart[g], ==, sim->xstart[g]);
      g_assert_cmpfloat(fast->xend[g], ==, sim->xend[g]);
    }
    g_free(start);
    g_free(end);
    tp_cost_free(c);
  }
}

/* Preset p on W stages under cost file text `cost`: recomputed (variant bit 0), forwards fused (bit
 * 1), its order fixed on the costs (bit 2); the costed replay's timeline must be the event loop's
 * bit for bit, transfers included.  Variants that do not apply are skipped (-1); else how
 * tp_sim_run made the timeline. */
static int costed_case(const char *cost, int W, int D, gboolean overlap, const TpPreset *p, int variant)
{
  g_autoptr(TpSchedule) s = tpt_preset(p->name, W, 30, 9); /* N a multiple of W (1, 3 or 5), and dualpipe-v's 2W */
  GError *err = NULL;
  g_autoptr(TpCost) c = tp_cost_parse(cost, strlen(cost), "test.cost", W, &err);
  g_assert_no_error(err);
  if (D > 1)
    tp_cost_data_parallel(c, D, overlap);
  if (s->rank_seq || ((variant & 1) && !tp_schedule_ask_recompute(s, NULL)) ||
      ((variant & 4) && !tp_order_depends_on_costs(s->order)))
    return -1; /* interleaved stages take the event loop alone; a split backward is not recomputed */
  if (variant & 4) {
    TpSchedule *t = tp_schedule_costed_like(s, c, &err);
    g_assert_no_error(err);
    tp_schedule_free(s), s = t;
  }
  int fused = 0;
  TpSchedule *f = (variant & 2) ? tp_schedule_fuse_forwards(s, &fused, NULL) : NULL;
  if ((variant & 2) && !f)
    return -1; /* nothing to fuse */
  if (f)
    tp_schedule_free(s), s = f;
  g_autoptr(TpSim) fast = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  g_autoptr(TpSim) ev = tp_sim_run_events(s, c, &err);
  g_assert_no_error(err);
  g_assert_cmpfloat(fast->makespan, ==, ev->makespan);
  for (long g = 0; g < ev->n_ops; g++) {
    g_assert_cmpfloat(fast->start[g], ==, ev->start[g]);
    g_assert_cmpfloat(fast->end[g], ==, ev->end[g]);
    if (ev->cons[g] < 0)
      continue;
    g_assert_cmpfloat(fast->xstart[g], ==, ev->xstart[g]);
    g_assert_cmpfloat(fast->xend[g], ==, ev->xend[g]);
  }
  g_assert_true((fast->ar == NULL) == (D <= 1) && (ev->ar == NULL) == (D <= 1));
  for (int st = 0; st < W && D > 1; st++) { /* what the all-reduces took, summed alike */
    g_assert_cmpfloat(fast->ar->busy[st], ==, ev->ar->busy[st]);
    g_assert_cmpfloat(fast->ar->exposed[st], ==, ev->ar->exposed[st]);
    g_assert_cmpint(fast->ar->count[st], ==, ev->ar->count[st]);
    g_assert_cmpint(ev->ar->count[st], >, 0);
  }
  return fast->path;
}

/* Costs take the costed replays (tp_sim_run; with a device per stage, or stages sharing devices):
 * every preset, uneven stages, links slow enough that messages queue, free links, one stage, equal
 * stages whose ties the lowest stage wins, whole-mini-batch forwards, recomputation and orders fixed
 * on the costs; every case of a cost file takes the path it names. */
static void test_costed_equals_events(void)
{
  static const struct {
    int W;
    int path; /* a TpSimPath, or -1: any */
    const char *text;
    int D;            /* replicas, their all-reduces on [data_parallel]'s links */
    gboolean overlap; /* reduced in buckets behind the backward */
  } costs[] = {
    { .W = 5, .path = TP_SIM_COSTED_REPLAY, .text =
      "[stages]\nforward = 1.25, 2, 0.5, 3, 1.5\nforward_whole = 9, 14, 4, 21, 11\nbackward = 2.5, 4, 1, 5.75, 3\n"
      "update = 0.3\nactivation_bytes = 400, 100, 900, 50, 0\ngradient_bytes = 0, 700, 80, 300, 60\n"
      "[links]\nlatency = 0.2\nbandwidth = 100\n" },
    { .W = 5, .path = TP_SIM_COSTED_REPLAY, .text =
      "[stages]\nforward = 1, 1.5, 2, 0.75, 1\nbackward = 2, 3, 4.5, 1.5, 2\nupdate = 0\n[links]\nlatency = 0\n" },
    { .W = 1, .path = TP_SIM_COSTED_REPLAY, .text = "[stages]\nforward = 2\nbackward = 3\nupdate = 0.5\n" },
    /* stages sharing devices */
    { .W = 5, .path = TP_SIM_SHARED_REPLAY, .text =
      "[stages]\nforward = 1.25, 2, 0.5, 3, 1.5\nforward_whole = 9, 14, 4, 21, 11\nbackward = 2.5, 4, 1, 5.75, 3\n"
      "update = 0.3\nactivation_bytes = 400, 100, 900, 50, 0\ngradient_bytes = 0, 700, 80, 300, 60\n"
      "device = 1, 2, 1, 3, 2\n[links]\nlatency = 0.2\nbandwidth = 100\n" },
    { .W = 5, .path = TP_SIM_SHARED_REPLAY, .text =
      "[stages]\nforward = 1, 1, 1, 1, 1\nbackward = 2, 2, 2, 2, 2\nupdate = 0\ndevice = 1, 2, 2, 1, 1\n" },
    { .W = 5, .path = TP_SIM_SHARED_REPLAY, .text =
      "[stages]\nforward = 1, 1.5, 2, 0.75, 1\nbackward = 2, 3, 4.5, 1.5, 2\nupdate = 0.25\ndevice = 1, 1, 1, 1, 1\n"
      "[links]\nlatency = 0.5\n" },
    /* a forward of no time sends within its instant, after a higher stage may have taken the device */
    { .W = 5, .path = TP_SIM_EVENTS, .text =
      "[stages]\nforward = 0, 1, 1, 0, 1\nbackward = 1, 1, 1, 1, 1\nupdate = 0\ndevice = 1, 2, 1, 2, 1\n" },
    /* the same where a backward's time is lost in rounding: its end is its start, late in the run */
    { .W = 3, .path = -1, .text = "[stages]\nforward = 1, 1e-12, 1e-12\nbackward = 5e8, 1e-12, 5e8\nactivation_bytes = 8\ndevice = 2, 1, 2\n"
             "[links]\nlatency = 1e-12, 0\n" },
    /* replicas: each stage's all-reduce on its own link (one bucket; in buckets that queue behind the
     * backward, some still running when the update comes; of no time), or on links two stages share */
    { .W = 5, .path = TP_SIM_COSTED_REPLAY, .D = 4,
      .text = "[stages]\nforward = 1.25, 2, 0.5, 3, 1.5\nbackward = 2.5, 4, 1, 5.75, 3\nupdate = 0.3\n"
              "weight_bytes = 300, 0, 50, 1000, 70\nactivation_bytes = 400, 100, 900, 50, 0\n"
              "[links]\nlatency = 0.2\nbandwidth = 100\n[data_parallel]\nlatency = 0.05\nbandwidth = 40, 40, 80, 20, 40\n" },
    { .W = 5, .path = TP_SIM_COSTED_REPLAY, .D = 8, .overlap = TRUE,
      .text = "[stages]\nforward = 1, 1.5, 2, 0.75, 1\nbackward = 2, 3, 4.5, 1.5, 2\nupdate = 0.1\n"
              "weight_bytes = 1e8, 3e7, 6e7, 1e6, 0\n[data_parallel]\nlatency = 0.01\nbandwidth = 3e7\n" },
    { .W = 3, .path = TP_SIM_COSTED_REPLAY, .D = 2, .overlap = TRUE,
      .text = "[stages]\nforward = 1, 2, 1\nbackward = 1.4, 2.8, 0.7\nupdate = 0\nweight_bytes = 6e7\n" },
    { .W = 5, .path = TP_SIM_EVENTS, .D = 4,
      .text = "[stages]\nforward = 1, 1.5, 2, 0.75, 1\nbackward = 2, 3, 4.5, 1.5, 2\nupdate = 0.1\nweight_bytes = 500\n"
              "[data_parallel]\nlatency = 0.05\nbandwidth = 50\nlink = 1, 1, 2, 3, 3\n" },
  };
  for (guint ci = 0; ci < G_N_ELEMENTS(costs); ci++) {
    int cases = 0, took = 0;
    for (int i = 0; i < tp_n_presets; i++)
      for (int variant = 0; variant < 8; variant++) {
        int path = costed_case(costs[ci].text, costs[ci].W, costs[ci].D, costs[ci].overlap, &tp_presets[i], variant);
        cases += path >= 0, took += path == costs[ci].path;
      }
    g_assert_cmpint(cases, >, 0);
    if (costs[ci].path >= 0)
      g_assert_cmpint(took, ==, cases);
  }
}

/* The orders fixed on unit slots write their times as they are generated: those are the unit-slot
 * replay's, exactly, for every preset of nf1b and 1f1b-async. */
static void test_generated_times(void)
{
  for (int i = 0; i < tp_n_presets; i++) {
    TpOrder o = tp_presets[i].order;
    if (o != TP_ORDER_NF1B && o != TP_ORDER_1F1B_ASYNC)
      continue;
    for (int W = 1; W <= 7; W++)
      for (int N = 1; N <= 6; N++) {
        TpPrepared prep = { 0 };
        GError *err = NULL;
        g_autoptr(TpSchedule) s = tp_schedule_generate_prepared(o, tp_presets[i].policy, W, N, 3 * W + 2, &prep, &err);
        g_assert_no_error(err);
        g_autoptr(TpIndex) ix = tp_index_new(s, &err);
        g_assert_no_error(err);
        long n = ix->off[W];
        double *start = g_new(double, n), *end = g_new(double, n);
        g_assert_true(tp_replay_times(s, ix, start, end, &err));
        for (long g = 0; g < n; g++) {
          g_assert_cmpfloat(prep.start[g], ==, start[g]);
          g_assert_cmpfloat(prep.end[g], ==, end[g]);
        }
        g_free(start);
        g_free(end);
        tp_prepared_clear(&prep);
      }
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

/* Steady time per mini-batch on unit slots: N+1 slots for nF1B (N forwards and one backward per
 * stage), 2 slots for PipeDream, 2(N+W-1) for GPipe. */
static void test_time_per_minibatch(void)
{
  for (int W = 2; W <= 6; W++)
    for (int N = 1; N <= 6; N++) {
      const char *presets[] = { "timeprest", "pipedream", "gpipe" };
      double want[] = { N + 1, 2, 2.0 * (N + W - 1) };
      for (int i = 0; i < 3; i++) {
        g_autoptr(TpSchedule) s = tpt_preset(presets[i], W, N, tp_default_mini_batches(W));
        TpCost *c;
        g_autoptr(TpSim) sim = sim_unit(s, &c);
        g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
        if (m->t_minibatch != want[i])
          g_error("%s W=%d N=%d: %g slots per mini-batch, expected %g", presets[i], W, N, m->t_minibatch, want[i]);
        tp_cost_free(c);
      }
    }
}

/* The version mismatch by brute force: for every backward and every micro-batch it covers, the
 * version it reads minus the version read by that micro-batch's forward, found by a search of the
 * stage's operations (independent of the index the metrics use). */
static int brute_mismatch(const TpSchedule *s, int st, int k, int latest)
{
  const TpOp *ops = tp_stage_ops(s, st), *b = &ops[k];
  int worst = G_MININT;
  for (int j = 0; j < s->N; j++) {
    if (b->micro != TP_WHOLE && b->micro != j)
      continue;
    int fv = -1;
    for (int q = 0; q < tp_stage_len(s, st); q++)
      if (ops[q].kind == TP_OP_F && ops[q].mb == b->mb && (ops[q].micro == j || ops[q].micro == TP_WHOLE))
        fv = ops[q].ver;
    g_assert_cmpint(fv, >=, 0);
    int read = b->src == TP_SRC_STASH ? fv
               : b->src == TP_SRC_BLEND ? (tp_significance(&s->sig, latest - fv) < 1 ? latest : fv)
                                        : b->ver;
    worst = MAX(worst, read - fv);
  }
  return worst;
}

/* Weight inconsistency: V-TiMePReSt (W = 4, N = 4) runs stage 1's backward on weights 2 versions
 * newer than its forward's; stashing and flush schedules have none; every preset agrees with the
 * brute-force count, and the histogram counts each micro-batch of every backward once. */
static void test_version_mismatch(void)
{
  for (int i = 0; i < tp_n_presets; i++) {
    const char *name = tp_presets[i].name;
    int W = 4, N = 4, K = 3 * W + 2;
    if (tp_order_chunked(tp_presets[i].order))
      continue; /* W·V stages: tests/test-interleaved */
    g_autoptr(TpSchedule) s = tpt_preset(name, W, N, K);
    TpCost *c;
    g_autoptr(TpSim) sim = sim_unit(s, &c);
    g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
    long total = 0;
    for (guint d = 0; d < m->mismatch->len; d++)
      total += g_array_index(m->mismatch, long, d);
    g_assert_cmpint(total, ==, (long)W * K * N);
    g_assert_cmpint(m->mismatch_older, ==, 0);
    for (int st = 0; st < W; st++) {
      int latest = 0, worst = 0;
      for (int k = 0; k < tp_stage_len(s, st); k++) {
        const TpOp *op = &tp_stage_ops(s, st)[k];
        latest += op->kind == TP_OP_U;
        if (op->kind == TP_OP_B) {
          int d = brute_mismatch(s, st, k, latest);
          g_assert_cmpint(tp_backward_mismatch(s, sim->ix, st, op, latest, NULL, NULL), ==, d);
          worst = MAX(worst, d);
        }
      }
      g_assert_cmpint(m->stage[st].max_version_mismatch, ==, worst);
    }
    const TpPolicy p = tp_presets[i].policy;
    if (p == TP_POLICY_STASH || p == TP_POLICY_SYNC || p == TP_POLICY_2BW) {
      g_assert_cmpuint(m->mismatch->len, ==, 1); /* all at 0 */
      for (int st = 0; st < W; st++)
        g_assert_cmpint(m->stage[st].max_version_mismatch, ==, 0);
    }
    if (strcmp(name, "v-timeprest") == 0) {
      g_assert_cmpint(m->stage[0].max_version_mismatch, ==, 2);
      g_assert_cmpint(m->stage[W - 1].max_version_mismatch, ==, 0); /* the last stage runs B right after its F */
    }
    tp_cost_free(c);
  }
  /* I-TiMePReSt with s(d) = 1: the stashed weights alone, no mismatch; with exp: the latest enters */
  g_autoptr(TpSchedule) s = tpt_preset("i-timeprest", 4, 4, 14);
  TpCost *c;
  g_autoptr(TpSim) sim = sim_unit(s, &c);
  g_autoptr(TpMetrics) blend = tp_metrics_compute(sim);
  g_assert_cmpint(blend->stage[0].max_version_mismatch, ==, 2);
  s->sig.kind = TP_SIG_CONST, s->sig.param = 1.0;
  g_autoptr(TpMetrics) stashed = tp_metrics_compute(sim);
  g_assert_cmpuint(stashed->mismatch->len, ==, 1);
  tp_cost_free(c);
}

/* Whole-run against steady-state values: GPipe's bubble is (W-1)/(N+W-1) either way; nF1B with
 * W <= N+1 keeps every stage busy in the steady state (bubble 0, N samples per N+1 slots) while
 * fill and drain make the whole run's bubble positive. */
static void test_steady_and_whole_run(void)
{
  for (int W = 2; W <= 5; W++)
    for (int N = 1; N <= 5; N++) {
      g_autoptr(TpSchedule) g = tpt_preset("gpipe", W, N, 3 * W + 2);
      TpCost *c;
      g_autoptr(TpSim) sim = sim_unit(g, &c);
      g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
      g_assert_cmpfloat_with_epsilon(m->bubble_steady, (double)(W - 1) / (N + W - 1), 1e-12);
      g_assert_cmpfloat_with_epsilon(m->bubble, m->bubble_steady, 1e-12);
      g_assert_cmpfloat(m->t_minibatch_run, ==, m->makespan / g->K);
      tp_cost_free(c);
      if (W > N + 1)
        continue;
      g_autoptr(TpSchedule) t = tpt_preset("timeprest", W, N, 3 * W + 2);
      g_autoptr(TpSim) tsim = sim_unit(t, &c);
      g_autoptr(TpMetrics) tm = tp_metrics_compute(tsim);
      g_assert_cmpfloat_with_epsilon(tm->bubble_steady, 0, 1e-12);
      g_assert_cmpfloat(tm->bubble, >, 0);
      g_assert_cmpfloat_with_epsilon(tm->throughput_steady, (double)N / (N + 1), 1e-12);
      g_assert_cmpfloat(tm->throughput, <, tm->throughput_steady);
      g_assert_cmpfloat(tm->window_end - tm->window_start, ==, (N + 1.0) * (tm->ver.steady_hi - tm->ver.steady_lo + 1));
      tp_cost_free(c);
    }
}

/* Event files: the version mismatch column is written for backwards and read back; files written
 * before it existed (11 columns) still read. */
static void test_events_mismatch_column(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("v-timeprest", 4, 4, 14);
  TpCost *c;
  g_autoptr(TpSim) sim = sim_unit(s, &c);
  g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
  g_autoptr(GArray) rows = tp_events_from_sim(sim);
  g_autoptr(GString) text = g_string_new(NULL);
  tp_events_write_csv(rows, text);
  GError *err = NULL;
  g_autoptr(GArray) back = tp_events_parse(text->str, "ev.csv", &err);
  g_assert_no_error(err);
  g_assert_cmpuint(back->len, ==, rows->len);
  int worst1 = -1;
  for (guint i = 0; i < back->len; i++) {
    const TpEventRow *r = &g_array_index(back, TpEventRow, i);
    g_assert_cmpint(r->mismatch, ==, g_array_index(rows, TpEventRow, i).mismatch);
    g_assert_cmpint(r->mismatch >= 0, ==, r->kind == TP_EV_B);
    if (r->stage == 1)
      worst1 = MAX(worst1, r->mismatch);
  }
  g_assert_cmpint(worst1, ==, 2);
  g_autoptr(GArray) old = tp_events_parse("stage,kind,mini_batch,micro_batch,start,end,version,latest,staleness,bytes,peer\n"
                                          "1,F,1,1,0,1,0,0,0,,\n1,B,1,,1,2,0,0,0,,\n", "old.csv", &err);
  g_assert_no_error(err);
  g_assert_cmpuint(old->len, ==, 2);
  g_assert_cmpint(g_array_index(old, TpEventRow, 1).mismatch, ==, -1);
  g_autoptr(GArray) bad = tp_events_parse("stage,kind,mini_batch,micro_batch,start,end,version,latest,staleness,bytes,peer,"
                                          "version_mismatch\n1,F,1,1,0,1,0,0,0,,,3\n", "bad.csv", &err);
  g_assert_null(bad);
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_assert_nonnull(strstr(err->message, "bad.csv:2: bad version_mismatch"));
  g_clear_error(&err);
  tp_cost_free(c);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/sim/unit-equals-replay", test_unit_equals_replay);
  g_test_add_func("/sim/costed-equals-events", test_costed_equals_events);
  g_test_add_func("/sim/generated-times", test_generated_times);
  g_test_add_func("/sim/gpipe-bubble", test_gpipe_bubble);
  g_test_add_func("/sim/1f1b-activations", test_1f1b_activations);
  g_test_add_func("/sim/versions-kept", test_versions_kept);
  g_test_add_func("/sim/messages", test_messages);
  g_test_add_func("/sim/time-per-mini-batch", test_time_per_minibatch);
  g_test_add_func("/sim/version-mismatch", test_version_mismatch);
  g_test_add_func("/sim/steady-and-whole-run", test_steady_and_whole_run);
  g_test_add_func("/sim/events-mismatch-column", test_events_mismatch_column);
  return g_test_run();
}
