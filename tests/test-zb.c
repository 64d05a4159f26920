/* test-zb.c — the split backward (I and W) and the zero-bubble orders: their bubbles against closed
 * forms on unit slots F = I = W = 1 (B = 2), validation of I and W, the automatic orders on costs (with
 * replicas too), and what is refused (the executor's I and W: test-split; PyTorch's CSV: test-torch). */
#include "tp_test.h"

#include <math.h>
#include "tp_cost.h"
#include "tp_metrics.h"
#include "tp_sim.h"
#include "tp_validate.h"
#include "tp_costed.h"
#include "tp_zbauto.h"

/* F = 1, B = 2 per micro-batch (a split backward: I = W = 1, the default half each), transfers free. */
static const char unit3[] = "[stages]\nforward = 1\nbackward = 2\n";

static double makespan(const char *preset, int W, int N, int K, const TpCost *c)
{
  g_autoptr(TpSchedule) s = tpt_preset(preset, W, N, K);
  GError *err = NULL;
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  double end = 0;
  for (long g = 0; g < sim->n_ops; g++)
    end = MAX(end, sim->end[g]);
  return end;
}

/* Bubble per stage and mini-batch, in the first mini-batch (K = 1: makespan - 3N) and in the steady
 * state (what a second mini-batch adds beyond its 3N of work), for W in 2..16 and N in W..4W:
 * 1F1B (W-1)·3 both; ZB-H1 (W-1)·1 both; ZB-H2 max(0, 2W-1-N) steady, so 0 once N >= 2W-1. */
static void test_closed_forms(void)
{
  GError *err = NULL;
  for (int W = 2; W <= 16; W++) {
    g_autoptr(TpCost) c = tp_cost_parse(unit3, sizeof unit3 - 1, "unit3", W, &err);
    g_assert_no_error(err);
    for (int N = W; N <= 4 * W; N++) {
      struct {
        const char *preset;
        int first, steady; /* -1: not stated */
      } want[] = {
        { "1f1b", 3 * (W - 1), 3 * (W - 1) },
        { "zb-h1", W - 1, W - 1 },
        { "zb-h2", -1, MAX(0, 2 * W - 1 - N) },
      };
      for (guint i = 0; i < G_N_ELEMENTS(want); i++) {
        double m1 = makespan(want[i].preset, W, N, 1, c), m2 = makespan(want[i].preset, W, N, 2, c);
        if (want[i].first >= 0)
          g_assert_cmpfloat(m1 - 3 * N, ==, want[i].first);
        g_assert_cmpfloat(m2 - m1 - 3 * N, ==, want[i].steady);
      }
    }
  }
}

/* A cost file's backward splits into I = backward_input (default half) and W = the rest; an
 * input gradient not shorter than the backward is refused with one line naming the key. */
static void test_split_costs(void)
{
  static const char half[] = "[stages]\nforward = 1\nbackward = 3\n",
                    given[] = "[stages]\nforward = 1\nbackward = 3\n[stage.2]\nbackward_input = 1\n",
                    bad[] = "[stages]\nforward = 1\nbackward = 3\nbackward_input = 3\n";
  GError *err = NULL;
  g_autoptr(TpSchedule) s = tpt_preset("zb-h1", 2, 2, 1);
  g_autoptr(TpCost) c1 = tp_cost_parse(half, sizeof half - 1, "half", 2, &err);
  g_autoptr(TpCost) c2 = tp_cost_parse(given, sizeof given - 1, "given", 2, &err);
  g_assert_no_error(err);
  TpOp i = { .kind = TP_OP_I, .mb = 1, .micro = 0 }, w = { .kind = TP_OP_W, .mb = 1, .micro = 0 },
       b = { .kind = TP_OP_B, .mb = 1, .micro = 0 };
  g_assert_cmpfloat(tp_sim_op_time(c1, s, 1, &i, FALSE), ==, 1.5);
  g_assert_cmpfloat(tp_sim_op_time(c1, s, 1, &w, FALSE), ==, 1.5);
  g_assert_cmpfloat(tp_sim_op_time(c2, s, 0, &i, FALSE), ==, 1.5);
  g_assert_cmpfloat(tp_sim_op_time(c2, s, 1, &i, FALSE), ==, 1);
  g_assert_cmpfloat(tp_sim_op_time(c2, s, 1, &w, FALSE), ==, 2);
  g_assert_cmpfloat(tp_sim_op_time(c2, s, 1, &b, FALSE), ==, 3);
  g_assert_null(tp_cost_parse(bad, sizeof bad - 1, "bad", 2, &err));
  g_assert_nonnull(strstr(err->message, "backward_input 3 is not less than backward 3"));
  g_assert_null(strchr(err->message, '\n'));
  g_error_free(err);
}

/* The most micro-batches stage st holds from a forward until its W, counted on its order (each
 * forward has its W: nothing is held at the end). */
static int most_held(const TpSchedule *s, int st)
{
  int held = 0, most = 0;
  for (int k = 0; k < tp_stage_len(s, st); k++) {
    const TpOp *op = &tp_stage_ops(s, st)[k];
    held += op->kind == TP_OP_F ? 1 : op->kind == TP_OP_W ? -1 : 0;
    most = MAX(most, held);
  }
  g_assert_cmpint(held, ==, 0);
  return most;
}

/* The zero-bubble orders keep their memory promises: at most W (zb-h1, 1F1B's stage 1) and 2W
 * (zb-h2: 2W-1 forwards ahead of the first I, one more while the next W waits behind an F)
 * micro-batches' activations held from a forward until its W, on every stage. */
static void test_in_flight(void)
{
  for (int W = 2; W <= 8; W++)
    for (int N = 1; N <= 3 * W; N++)
      for (int h2 = 0; h2 < 2; h2++) {
        g_autoptr(TpSchedule) s = tpt_preset(h2 ? "zb-h2" : "zb-h1", W, N, 2);
        for (int st = 0; st < W; st++)
          g_assert_cmpint(most_held(s, st), <=, MIN(N, h2 ? 2 * W : W));
      }
}

/* The simulator's memory: a pending W keeps its micro-batch's activations, so the peak per stage is
 * the most forwards not yet followed by their W, counted on the order (unit slots, one mini-batch). */
static void test_pending_w_memory(void)
{
  g_autoptr(TpCost) c = tp_cost_unit(4);
  for (int h2 = 0; h2 < 2; h2++)
    for (int N = 4; N <= 12; N += 4) {
      g_autoptr(TpSchedule) s = tpt_preset(h2 ? "zb-h2" : "zb-h1", 4, N, 1);
      GError *err = NULL;
      g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
      g_assert_no_error(err);
      TpMetrics *m = tp_metrics_compute(sim);
      for (int st = 0; st < 4; st++)
        g_assert_cmpint(m->stage[st].peak_activations, ==, most_held(s, st));
      tp_metrics_free(m);
    }
}

/* The same with M_W (stored_for_w_bytes) a share `keep` of M_B: an I frees M_B - M_W, its W the rest.
 * The largest total held on stage st, in M_B, counted on the order. */
static double most_held_w(const TpSchedule *s, int st, double keep)
{
  double held = 0, most = 0;
  for (int k = 0; k < tp_stage_len(s, st); k++) {
    TpOpKind kind = tp_stage_ops(s, st)[k].kind;
    held += kind == TP_OP_F ? 1 : kind == TP_OP_I ? keep - 1 : kind == TP_OP_W ? -keep : 0;
    most = MAX(most, held);
  }
  g_assert_cmpfloat(fabs(held), <, 1e-9);
  return most;
}

/* stored_for_w_bytes: the simulator's peak per stage is what the order holds with an I freeing
 * M_B - M_W and its W M_W (in bytes: stored_activation_bytes = 100); more than the stored bytes is
 * refused in one line. */
static void test_w_memory(void)
{
  static const char text[] = "[stages]\nforward = 1\nbackward = 2\nstored_activation_bytes = 100\n"
                             "stored_for_w_bytes = 25\n",
                    bad[] = "[stages]\nforward = 1\nbackward = 2\nstored_activation_bytes = 100\n"
                            "stored_for_w_bytes = 101\n";
  GError *err = NULL;
  for (int h2 = 0; h2 < 2; h2++)
    for (int N = 4; N <= 12; N += 4) {
      g_autoptr(TpCost) c = tp_cost_parse(text, sizeof text - 1, "w", 4, &err);
      g_assert_no_error(err);
      g_autoptr(TpSchedule) s = tpt_preset(h2 ? "zb-h2" : "zb-h1", 4, N, 1);
      g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
      g_assert_no_error(err);
      g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
      for (int st = 0; st < 4; st++)
        g_assert_cmpfloat(fabs(m->stage[st].peak_bytes - 100 * most_held_w(s, st, 0.25)), <, 1e-9);
    }
  g_assert_null(tp_cost_parse(bad, sizeof bad - 1, "bad", 4, &err));
  g_assert_nonnull(strstr(err->message, "stored_for_w_bytes 101 is more than stored_activation_bytes 100"));
  g_assert_null(strchr(err->message, '\n'));
  g_error_free(err);
}

/* The zero-bubble paper's Table 9 (Qi et al., arXiv 2401.10241; Table 6 of the ICLR version):
 * profiled T_F, T_B (our I), T_W, T_comm in ms for p stages and m micro-batches of a model of
 * hidden size h and a heads (its Table 3), and its Table 5's bubble rates for 1F1B, ZB-H1, ZB-H2,
 * ZB-1p, ZB-2p. */
typedef struct {
  int p, m, h, a;
  double f, b, w, comm, rate[5];
} PaperRow;

static const PaperRow paper[] = {
  { 8, 24, 2304, 24, 18.522, 18.086, 9.337, 0.601, { 0.2431, 0.1585, 0.1083, 0.1585, 0.0433 } },
  { 8, 32, 2304, 24, 18.513, 18.086, 9.331, 0.626, { 0.1985, 0.1242, 0.0837, 0.1242, 0.0039 } },
  { 8, 64, 2304, 24, 18.546, 18.097, 9.321, 0.762, { 0.1240, 0.0674, 0.0444, 0.0674, 0.0026 } },
  { 8, 24, 4096, 32, 29.718, 29.444, 19.927, 0.527, { 0.2347, 0.1323, 0.0698, 0.1323, 0.0029 } },
  { 8, 32, 4096, 32, 29.802, 29.428, 19.530, 0.577, { 0.1898, 0.1045, 0.0559, 0.1045, 0.0022 } },
  { 8, 64, 4096, 32, 29.935, 29.621, 19.388, 0.535, { 0.1091, 0.0554, 0.0294, 0.0554, 0.0010 } },
  { 16, 48, 5120, 40, 11.347, 11.248, 8.132, 0.377, { 0.2552, 0.1397, 0.0672, 0.1397, 0.0066 } },
  { 16, 64, 5120, 40, 11.307, 11.254, 8.101, 0.379, { 0.2082, 0.1088, 0.0516, 0.1088, 0.0054 } },
  { 16, 128, 5120, 40, 11.325, 11.308, 8.109, 0.378, { 0.1251, 0.0576, 0.0266, 0.0576, 0.0028 } },
  { 32, 96, 6144, 48, 10.419, 10.207, 7.715, 0.408, { 0.2646, 0.1421, 0.0641, 0.1421, 0.0038 } },
  { 32, 128, 6144, 48, 10.408, 10.204, 7.703, 0.408, { 0.2168, 0.1106, 0.0490, 0.1106, 0.0029 } },
  { 32, 256, 6144, 48, 10.402, 10.248, 7.698, 0.460, { 0.1352, 0.0594, 0.0257, 0.0594, 0.0018 } },
};

/* A row's cost file: backward = T_B + T_W, split at backward_input = T_B; links of latency T_comm;
 * with mw, the paper's M_B = s·h·(34 + 5·a·s/h) and M_W = 32·s·h per sample (s = 1024), in s·h. */
static TpCost *paper_cost(const PaperRow *r, gboolean mw)
{
  g_autofree char *text = g_strdup_printf("[stages]\nforward = %g\nbackward = %.17g\nbackward_input = %g\n"
                                          "stored_activation_bytes = %.17g\nstored_for_w_bytes = %d\n"
                                          "[links]\nlatency = %g\n", r->f, r->b + r->w, r->b,
                                          mw ? 34 + 5.0 * r->a * 1024 / r->h : 1, mw ? 32 : 1, r->comm);
  GError *err = NULL;
  TpCost *c = tp_cost_parse(text, strlen(text), "paper", r->p, &err);
  g_assert_no_error(err);
  return c;
}

static double span_rate(TpSchedule *s, const TpCost *c)
{
  GError *err = NULL;
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
  return m->bubble_span;
}

/* The paper's bubble rate, (cost - m(T_F + T_B + T_W)) / cost with cost the longest stage span,
 * gives its Table 5 to the four published decimals for 1F1B, ZB-H1 and ZB-H2 on every row. */
static void test_paper_table5_handcrafted(void)
{
  static const char *const presets[] = { "1f1b", "zb-h1", "zb-h2" };
  for (guint i = 0; i < G_N_ELEMENTS(paper); i++) {
    g_autoptr(TpCost) c = paper_cost(&paper[i], FALSE);
    for (int k = 0; k < 3; k++) {
      g_autoptr(TpSchedule) s = tpt_preset(presets[k], paper[i].p, paper[i].m, 1);
      g_assert_cmpfloat(fabs(span_rate(s, c) - paper[i].rate[k]), <=, 0.00005);
    }
  }
}

/* ZB-1p and ZB-2p, built on each row's costs with the paper's M_W: every stage within p·M_B and
 * 2p·M_B (M_W counted), and a bubble rate no worse than Table 5's on every row. */
static void test_paper_table5_auto(void)
{
  for (guint i = 0; i < G_N_ELEMENTS(paper); i++) {
    g_autoptr(TpCost) c = paper_cost(&paper[i], TRUE);
    double keep = 32 / c->stage[0].stored_bytes;
    for (int k = 0; k < 2; k++) {
      GError *err = NULL;
      TpOrder o = k ? TP_ORDER_ZB_2P : TP_ORDER_ZB_1P;
      g_autoptr(TpSchedule) s = tp_schedule_generate_costed(o, TP_POLICY_SYNC, paper[i].p, paper[i].m, 1, c, &err);
      g_assert_no_error(err);
      g_assert_cmpint(s->fixed_on, ==, TP_FIXED_ON_COSTS);
      for (int st = 0; st < s->W; st++)
        g_assert_cmpfloat(most_held_w(s, st, keep), <=, tp_zb_limit(s) + 1e-9);
      double rate = span_rate(s, c), paper_rate = paper[i].rate[3 + k];
      g_test_message("p=%d m=%d %s: %.4f (paper %.4f)", paper[i].p, paper[i].m, k ? "zb-2p" : "zb-1p", rate, paper_rate);
      g_assert_cmpfloat(fabs(rate - paper_rate), <=, 0.00005); /* the published figure, to four decimals */
    }
  }
}

/* Mini-batch time of zero-bubble order o fixed on cost model `fix_on`, simulated under c (steady). */
static double zb_minibatch(TpOrder o, int W, int N, const TpCost *fix_on, const TpCost *c)
{
  GError *err = NULL;
  g_autoptr(TpSchedule) s = tp_schedule_generate_costed(o, TP_POLICY_SYNC, W, N, 8, fix_on, &err);
  g_assert_no_error(err);
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
  return m->t_minibatch;
}

/* With replicas, the heuristic's spans leave out the all-reduces; the variant is chosen on a simulation
 * with them.  Here (a random search's case) the heuristic's own order, fixed on the same stages without
 * replicas, takes 14.995 s a mini-batch with them, the chosen one 14.39 s.  And over stages of other
 * times and gradient bytes, shared all-reduce links or not, the chosen order is never slower than the
 * heuristic's own. */
/* The first W of the three values, as a cost file's list. */
static char *first_of(const double v[3], int W)
{
  return W == 2 ? g_strdup_printf("%g, %g", v[0], v[1]) : g_strdup_printf("%g, %g, %g", v[0], v[1], v[2]);
}

static void test_auto_allreduce(void)
{
  static const double fwd[3][3] = { { 1.04, 1.11, 0.7 }, { 0.6, 1.3, 1.0 }, { 1.2, 0.9, 1.1 } };
  static const double bwd[3] = { 2.01, 2.45, 2.3 };
  static const double bytes[2][3] = { { 1e9, 1e8, 5e8 }, { 2e9, 5e8, 2e9 } };
  for (int i = 0; i < 2 * 3 * 3 * 2; i++) {
    const int W = 2 + i % 2, N = 2 + 2 * (i / 2 % 3);
    g_autofree char *f = first_of(fwd[i / 6 % 3], W), *b = first_of(bwd, W), *wb = first_of(bytes[i / 18], W);
    g_autofree char *text = g_strdup_printf("[cost]\nsamples_per_micro_batch = 1\n[stages]\nforward = %s\n"
                                            "backward = %s\nweight_bytes = %s\n[links]\nlatency = 0.05\n"
                                            "[data_parallel]\nlatency = 0\nbandwidth = 1e9\n%s",
                                            f, b, wb, i % 4 == 3 ? "link = 1\n" : "");
    GError *err = NULL;
    g_autoptr(TpCost) one = tp_cost_parse(text, strlen(text), "dp.cost", W, &err);
    g_assert_no_error(err);
    g_autoptr(TpCost) four = tp_cost_parse(text, strlen(text), "dp.cost", W, &err);
    g_assert_no_error(err);
    tp_cost_data_parallel(four, 4, FALSE);
    double own = zb_minibatch(TP_ORDER_ZB_2P, W, N, one, four), chosen = zb_minibatch(TP_ORDER_ZB_2P, W, N, four, four);
    g_test_message("zb-2p W=%d N=%d D=4 (case %d): %g s the heuristic's order, %g s the one chosen", W, N, i, own, chosen);
    if (i == 2) { /* W = 2, N = 4, the first stage's gradient ten times the second's */
      g_assert_cmpfloat(fabs(own - 14.995), <, 1e-6);
      g_assert_cmpfloat(fabs(chosen - 14.39), <, 1e-6);
    }
    g_assert_cmpfloat(chosen, <=, own * (1 + 1e-12));
  }
}

/* The most a rank of zb-v schedule s holds at once, in its micro-batch's stored activations (each chunk
 * half of them, a W keeping `keep` of its chunk's), counted on the rank's order. */
static double most_held_v(const TpSchedule *s, int r, double keep)
{
  double held = 0, most = 0;
  int *pos = g_new0(int, s->W);
  for (guint k = 0; k < s->rank_seq[r]->len; k++) {
    int st = g_array_index(s->rank_seq[r], int32_t, k);
    TpOpKind kind = tp_stage_ops(s, st)[pos[st]++].kind;
    held += 0.5 * (kind == TP_OP_F ? 1 : kind == TP_OP_I ? keep - 1 : kind == TP_OP_W ? -keep : 0);
    most = MAX(most, held);
  }
  g_free(pos);
  g_assert_cmpfloat(fabs(held), <, 1e-9);
  return most;
}

/* Costs for the limit tests: a W keeping a quarter of the stored activations (M_W = M_B / 4). */
static const char limit_costs[] = "[stages]\nforward = 1.3\nbackward = 2.1\nbackward_input = 1.2\n"
                                  "stored_activation_bytes = 4\nstored_for_w_bytes = 1\n[links]\nlatency = 0.1\n";

/* Order o (zb-auto or zb-v) on W workers under limit X, on unit slots and built on c (limit_costs):
 * every stage (zb-v: worker) within X, M_W counted. */
static void expect_within(TpOrder o, int W, int N, double X, const TpCost *c)
{
  GError *err = NULL;
  g_autoptr(TpSchedule) u = tp_schedule_generate_limited(o, TP_POLICY_SYNC, W, N, 2, X, NULL, &err);
  g_assert_no_error(err);
  g_autoptr(TpSchedule) s = tp_schedule_costed_like(u, c, &err);
  g_assert_no_error(err);
  double (*held)(const TpSchedule *, int, double) = u->rank_seq ? most_held_v : most_held_w;
  for (int r = 0; r < tp_schedule_ranks(u); r++) {
    g_assert_cmpfloat(held(u, r, 1), <=, X + 1e-9);
    g_assert_cmpfloat(held(s, r, 0.25), <=, X + 1e-9);
  }
}

/* zb-v on each row's profile as chunks of half a stage (T_F, T_B, T_W and the activations halved,
 * T_comm kept) on p ranks: built on the costs, every rank within p micro-batches' activations (2p
 * chunks', M_W counted), and a bubble rate below PyTorch's fixed pattern's on every row. */
static void test_paper_zbv(void)
{
  for (guint i = 0; i < G_N_ELEMENTS(paper); i++) {
    PaperRow half = paper[i];
    half.p *= 2, half.f /= 2, half.b /= 2, half.w /= 2;
    g_autoptr(TpCost) c = paper_cost(&half, TRUE);
    double keep = 32 / c->stage[0].stored_bytes;
    GError *err = NULL;
    g_autoptr(TpSchedule) u = tp_schedule_generate_chunked(TP_ORDER_ZB_V, TP_POLICY_SYNC, paper[i].p, 2, paper[i].m, 1,
                                                           NULL, &err);
    g_assert_no_error(err);
    g_autoptr(TpSchedule) s = tp_schedule_costed_like(u, c, &err);
    g_assert_no_error(err);
    g_assert_cmpint(s->fixed_on, ==, TP_FIXED_ON_COSTS);
    for (int r = 0; r < paper[i].p; r++)
      g_assert_cmpfloat(most_held_v(s, r, keep), <=, paper[i].p + 1e-9);
    double rate = span_rate(s, c), fixed = span_rate(u, c);
    g_test_message("p=%d m=%d zb-v: %.4f (fixed pattern %.4f)", paper[i].p, paper[i].m, rate, fixed);
    g_assert_cmpfloat(rate, <, fixed); /* better on every row */
  }
}

/* zb-v under --activation-limit X (X >= W, per worker): every worker within X (M_W counted), on unit
 * slots and on costs with M_W = M_B / 4, X = W on costs (the default) the same order as no limit; a
 * limit below W refused in one line; --order-from slots keeps PyTorch's fixed pattern, byte for byte. */
static void test_zbv_limit(void)
{
  GError *err = NULL;
  for (int W = 2; W <= 6; W += 2) {
    g_autoptr(TpCost) c = tp_cost_parse(limit_costs, sizeof limit_costs - 1, "v", 2 * W, &err);
    g_assert_no_error(err);
    for (int N = 1; N <= 3 * W; N++)
      for (double X = W; X <= 2.5 * W; X += 0.75)
        expect_within(TP_ORDER_ZB_V, W, N, X, c);
    g_autoptr(TpSchedule) a = tp_schedule_generate_limited(TP_ORDER_ZB_V, TP_POLICY_SYNC, W, 3 * W, 1, W, NULL, &err);
    g_autoptr(TpSchedule) b = tp_schedule_generate_chunked(TP_ORDER_ZB_V, TP_POLICY_SYNC, W, 2, 3 * W, 1, NULL, &err);
    g_assert_no_error(err);
    g_autoptr(TpSchedule) ca = tp_schedule_costed_like(a, c, &err);
    g_autoptr(TpSchedule) cb = tp_schedule_costed_like(b, c, &err);
    g_assert_no_error(err);
    g_assert_true(tp_schedule_equal(ca, cb));
  }
  TptRun r = tpt_run((const char *const[]){ "simulate", "-s", "zb-v", "-w", "4", "--activation-limit", "3", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "--activation-limit 3: zb-v on 4 workers needs at least 4"));
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  tpt_run_clear(&r);
  g_autofree char *path = tpt_tmp_path("v.cost");
  g_assert_true(g_file_set_contents(path, limit_costs, -1, NULL));
  char *sha[3];
  for (int k = 0; k < 3; k++) { /* unit slots; costs, --order-from slots; costs */
    const char *const argv[] = { "simulate", "-s", "zb-v", "-w", "3", "-n", "8", k ? "-c" : NULL, path, "--order-from",
                                 k == 1 ? "slots" : "costs", NULL };
    r = tpt_run(argv);
    g_assert_cmpint(r.status, ==, 0);
    sha[k] = g_strndup(strstr(r.out, "sha256 "), 71);
    tpt_run_clear(&r);
  }
  g_assert_cmpstr(sha[0], ==, sha[1]);
  g_assert_cmpstr(sha[0], !=, sha[2]);
  for (int k = 0; k < 3; k++)
    g_free(sha[k]);
  tpt_tmp_remove(path);
}

/* On unit slots (F = I = W = 1, free links, M_W = M_B) the heuristic finds the handcrafted schedules'
 * makespans: zb-1p zb-h1's; zb-2p zb-h2's once N >= 2W-1, and no more below (where ZB-H2's long
 * warm-up waits), for W in 2..8 and N in 1..3W; every order valid (tpt_preset validates) and every
 * stage within W and 2W micro-batches' activations. */
static void test_auto_unit(void)
{
  GError *err = NULL;
  for (int W = 2; W <= 8; W++) {
    g_autoptr(TpCost) c = tp_cost_parse(unit3, sizeof unit3 - 1, "unit3", W, &err);
    g_assert_no_error(err);
    for (int N = 1; N <= 3 * W; N++)
      for (int k = 0; k < 2; k++) {
        g_autoptr(TpSchedule) s = tpt_preset(k ? "zb-2p" : "zb-1p", W, N, 2);
        for (int st = 0; st < W; st++)
          g_assert_cmpint(most_held(s, st), <=, k ? 2 * W : W);
        double m = makespan(k ? "zb-2p" : "zb-1p", W, N, 1, c), h = makespan(k ? "zb-h2" : "zb-h1", W, N, 1, c);
        if (k && N < 2 * W - 1)
          g_assert_cmpfloat(m, <=, h);
        else
          g_assert_cmpfloat(m, ==, h);
      }
  }
}

/* zb-auto under --activation-limit X: every stage within X (M_W counted), on unit slots and on costs
 * with M_W = M_B / 4; X = W gives zb-1p's order and X = 2W (the default) zb-2p's; a limit below one
 * micro-batch, or one for another order, is refused in one line. */
static void test_auto_limit(void)
{
  GError *err = NULL;
  for (int W = 2; W <= 6; W += 2) {
    g_autoptr(TpCost) c = tp_cost_parse(limit_costs, sizeof limit_costs - 1, "auto", W, &err);
    g_assert_no_error(err);
    for (double X = 1; X <= 2.5 * W; X += 0.75)
      expect_within(TP_ORDER_ZB_AUTO, W, 3 * W, X, c);
    for (int k = 1; k <= 3; k++) { /* 3: no limit given */
      g_autoptr(TpSchedule) a = tp_schedule_generate_limited(TP_ORDER_ZB_AUTO, TP_POLICY_SYNC, W, 2 * W, 1,
                                                             k < 3 ? k * W : 0, NULL, &err);
      g_autoptr(TpSchedule) p = tpt_preset(k == 1 ? "zb-1p" : "zb-2p", W, 2 * W, 1);
      g_assert_no_error(err);
      for (int st = 0; st < W; st++)
        g_assert_cmpmem(tp_stage_ops(a, st), tp_stage_len(a, st) * sizeof(TpOp), tp_stage_ops(p, st),
                        tp_stage_len(p, st) * sizeof(TpOp));
    }
  }
  static const struct {
    const char *preset, *limit, *want;
  } bad[] = {
    { "zb-auto", "0.5", "--activation-limit 0.5: from 1" },
    { "zb-h2", "3", "--activation-limit: only zb-auto and zb-v take one (order zb-h2)" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    TptRun r = tpt_run((const char *const[]){ "simulate", "-s", bad[i].preset, bad[i].limit ? "--activation-limit" : NULL,
                                              bad[i].limit, NULL });
    g_assert_cmpint(r.status, ==, 2);
    g_assert_nonnull(strstr(r.err, bad[i].want));
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    tpt_run_clear(&r);
  }
}

/* Edit one generated zb-h1 schedule and expect the validator's line to contain `want`. */
static void expect_invalid(void (*edit)(TpSchedule *), const char *want)
{
  g_autoptr(TpSchedule) s = tpt_preset("zb-h1", 3, 3, 1);
  edit(s);
  tpt_expect_invalid(s, want);
}

static int find(const TpSchedule *s, int st, TpOpKind kind, int micro)
{
  for (int k = 0; k < tp_stage_len(s, st); k++)
    if (tp_stage_ops(s, st)[k].kind == kind && tp_stage_ops(s, st)[k].micro == micro)
      return k;
  g_assert_not_reached();
}

static void swap(TpSchedule *s, int st, int a, int b)
{
  TpOp *o = tp_stage_ops(s, st), t = o[a];
  o[a] = o[b], o[b] = t;
}

static void w_before_i(TpSchedule *s) { swap(s, 2, find(s, 2, TP_OP_I, 0), find(s, 2, TP_OP_W, 0)); }
static void w_dropped(TpSchedule *s) { g_array_remove_index(s->stage[1], find(s, 1, TP_OP_W, 2)); }
static void w_becomes_b(TpSchedule *s) { tp_stage_ops(s, 0)[find(s, 0, TP_OP_I, 1)].kind = TP_OP_B; }
static void update_before_w(TpSchedule *s)
{
  int n = tp_stage_len(s, 2);
  swap(s, 2, n - 1, n - 2); /* the update and the last W */
}
static void i_before_next_stage(TpSchedule *s) { swap(s, 1, find(s, 1, TP_OP_I, 0), find(s, 1, TP_OP_F, 0)); }

static void test_validate_split(void)
{
  expect_invalid(w_before_i, "W(1,A) at stage 3: comes before its input gradient");
  expect_invalid(w_dropped, "stage 2 has no W(1,C)");
  expect_invalid(w_becomes_b, "W(1,B) at stage 1: has no input gradient I (a whole backward B is there)");
  expect_invalid(update_before_w, "U(1) at stage 3: comes before W(1,C), the weight gradient it applies");
  expect_invalid(i_before_next_stage, "I(1,A) at stage 2: needs the activations of F(1,A)");
  g_autoptr(TpSchedule) s = tpt_preset("zb-h1", 3, 3, 1);
  s->policy = TP_POLICY_LATEST;
  s->order = TP_ORDER_1F1B; /* an order that takes latest, with I and W: refused, I and W are zero-bubble's */
  GError *err = NULL;
  g_assert_false(tp_validate(s, &err));
  g_assert_nonnull(strstr(err->message, "order 1f1b runs unsplit backwards (B): I and W are the zero-bubble and "
                                        "interleaved orders'"));
  g_clear_error(&err);
  g_assert_false(tp_pair_check(TP_ORDER_ZB_H2, TP_POLICY_VSYNC_LATEST, 4, 8, &err));
  g_assert_nonnull(strstr(err->message, "order zb-h2 takes policy sync only"));
  g_error_free(err);
}

static void test_cli(void)
{
  /* the executor runs I and W without recomputation only: one line, exit 2 (test-split trains them) */
  const char *const train[] = { "train", "-s", "zb-h1", "-w", "2", "-n", "4", "--recompute", "--data", "synthetic",
                                "--quiet", NULL };
  TptRun r = tpt_run(train);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "-s zb-h1: the executor runs a split backward (I and W) without recomputation"));
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  tpt_run_clear(&r);
  const char *const policy[] = { "schedule", "--order", "zb-h1", "--policy", "vsync-latest", "-w", "4", "-n", "8", NULL };
  r = tpt_run(policy);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "order zb-h1 takes policy sync only"));
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  tpt_run_clear(&r);
  /* a PyTorch file read on --input, simulated */
  g_autofree char *path = tpt_tmp_path("zb-h2.csv");
  const char *const exp[] = { "schedule", "-s", "zb-h2", "-w", "3", "-n", "6", "-k", "1", "--format", "torch",
                              "--output", path, NULL };
  r = tpt_run(exp);
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  const char *const sim[] = { "simulate", "-i", path, "--format", "json", NULL };
  r = tpt_run(sim);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\"makespan\": 20"));
  tpt_run_clear(&r);
  /* PyTorch's interleaved zero-bubble schedule (round-robin chunks, I and W): read as the
   * interleaved-1f1b family, and simulated */
  g_autofree char *il = tpt_tmp_path("ilzb.csv");
  const char *const ilexp[] = { "schedule", "-s", "interleaved-1f1b", "-w", "2", "-n", "2", "-k", "1", "--format",
                                "torch", "--output", il, NULL };
  r = tpt_run(ilexp);
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(il, &text, NULL, NULL));
  g_autoptr(GRegex) b = g_regex_new("([0-9]+)B([0-9]+)", 0, 0, NULL);
  g_autofree char *split = g_regex_replace(b, text, -1, 0, "\\1I\\2,\\1W\\2", 0, NULL);
  g_assert_true(g_file_set_contents(il, split, -1, NULL));
  const char *const ilsim[] = { "simulate", "-i", il, NULL };
  r = tpt_run(ilsim);
  g_test_message("%s", r.err);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "interleaved-1f1b"));
  tpt_run_clear(&r);
  tpt_tmp_remove(il);
  /* compare: the presets beside the file's schedule, its row last, named after the file */
  const char *const cmp[] = { "compare", "-i", path, "--format", "csv", NULL };
  r = tpt_run(cmp);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\nzb-h1,zb-h1,sync,1,"));
  g_assert_nonnull(strstr(r.out, "\nzb-h2.csv,zb-h2,sync,1,"));
  tpt_run_clear(&r);
  tpt_tmp_remove(path);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/zb/closed-forms", test_closed_forms);
  g_test_add_func("/zb/split-costs", test_split_costs);
  g_test_add_func("/zb/in-flight", test_in_flight);
  g_test_add_func("/zb/pending-w-memory", test_pending_w_memory);
  g_test_add_func("/zb/w-memory", test_w_memory);
  g_test_add_func("/zb/paper-table5-handcrafted", test_paper_table5_handcrafted);
  g_test_add_func("/zb/paper-table5-auto", test_paper_table5_auto);
  g_test_add_func("/zb/paper-zbv", test_paper_zbv);
  g_test_add_func("/zb/zbv-limit", test_zbv_limit);
  g_test_add_func("/zb/auto-unit", test_auto_unit);
  g_test_add_func("/zb/auto-limit", test_auto_limit);
  g_test_add_func("/zb/auto-allreduce", test_auto_allreduce);
  g_test_add_func("/zb/validate-split", test_validate_split);
  g_test_add_func("/zb/cli", test_cli);
  return g_test_run();
}
