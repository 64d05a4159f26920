/* test-dualpipe.c — DualPipe-V generated natively: its order against PyTorch's ScheduleDualPipeV,
 * its idle time against DeepSeek's closed form, its F&B composites validated, costed and written to
 * and read from PyTorch's CSV (OVERLAP_F_B), and what is refused.  Training it: test-interleaved-train. */
#include "tp_test.h"

#include <math.h>
#include "tp_cost.h"
#include "tp_index.h"
#include "tp_metrics.h"
#include "tp_replay.h"
#include "tp_sim.h"
#include "tp_validate.h"

static TpSchedule *dualpipe(int R, int N, int K)
{
  GError *err = NULL;
  TpSchedule *s = tp_schedule_generate(TP_ORDER_DUALPIPE_V, TP_POLICY_SYNC, R, N, K, &err);
  g_assert_no_error(err);
  return s;
}

/* PyTorch's ScheduleDualPipeV for 2 ranks and 4 micro-batches, its computations in its order (the
 * file written out from its _calculate_single_rank_operations): read back, it is our generator's. */
static void test_pytorch_order(void)
{
  g_autofree char *path = g_build_filename(TP_SRCDIR, "tests", "data", "torch-dualpipev-2x4.csv", NULL);
  GError *err = NULL;
  g_autoptr(TpSchedule) s = tp_schedule_load(path, &err);
  g_assert_no_error(err);
  g_assert_true(tp_validate(s, &err));
  g_assert_cmpint(s->order, ==, TP_ORDER_DUALPIPE_V);
  g_autoptr(TpSchedule) g = dualpipe(2, 4, 1);
  g_assert_true(tp_schedule_equal(s, g));
  /* three composites on each rank, as the file's cells */
  g_assert_cmpuint(g->fb[0]->len, ==, 3);
  g_assert_cmpuint(g->fb[1]->len, ==, 3);
}

/* Each cell of the CSV written sits in the column of its (first) operation's unit-slot start, a
 * composite's B one slot later, its cell empty. */
static void check_columns(const TpSchedule *s, const char *csv)
{
  GError *err = NULL;
  g_autoptr(TpIndex) ix = NULL;
  int64_t *start = NULL, *end = NULL;
  g_assert_true(tp_replay_indexed(s, &ix, &start, &end, &err));
  g_auto(GStrv) rows = g_strsplit_set(csv, "\n", -1);
  for (int r = 0; r < tp_schedule_ranks(s); r++) {
    g_auto(GStrv) cell = g_strsplit(rows[r], ",", -1);
    for (int c = 0; cell[c]; c++) {
      if (!*cell[c])
        continue;
      gboolean fb = cell[c][0] == '(';
      int st, micro, st2, micro2;
      char kind, kind2;
      g_assert_cmpint(sscanf(cell[c] + fb, "%d%c%d;%d%c%d", &st, &kind, &micro, &st2, &kind2, &micro2), ==, fb ? 6 : 3);
      TpOp op = { .kind = (uint8_t)(strchr(tp_op_letters, kind) - tp_op_letters), .mb = 1, .micro = (int16_t)micro };
      g_assert_cmpint(start[ix->off[st] + tp_index_pos(ix, st, &op)], ==, c);
      if (fb) {
        TpOp b = { .kind = TP_OP_B, .mb = 1, .micro = (int16_t)micro2 };
        g_assert_cmpint(kind2, ==, 'B');
        g_assert_cmpint(start[ix->off[st2] + tp_index_pos(ix, st2, &b)], ==, c + 1);
        g_assert_true(cell[c + 1] == NULL || !*cell[c + 1]);
      }
    }
  }
  g_free(start);
  g_free(end);
}

/* Generated for R = 1..6 ranks and N = 2R..3R+1: valid, written to PyTorch's CSV and read back the
 * same schedule, composites included; every stage runs N forwards and N backwards (B, or I and W). */
static void test_round_trip(void)
{
  for (int R = 1; R <= 6; R++)
    for (int N = 2 * R; N <= 3 * R + 1; N++) {
      g_autoptr(TpSchedule) s = dualpipe(R, N, 1);
      g_assert_cmpint(s->W, ==, 2 * R);
      for (int st = 0; st < s->W; st++) {
        int f = 0, b = 0, i = 0, w = 0;
        for (int k = 0; k < tp_stage_len(s, st); k++) {
          int kind = tp_stage_ops(s, st)[k].kind;
          f += kind == TP_OP_F, b += kind == TP_OP_B, i += kind == TP_OP_I, w += kind == TP_OP_W;
        }
        g_assert_cmpint(f, ==, N);
        g_assert_cmpint(b + i, ==, N);
        g_assert_cmpint(i, ==, w);
      }
      /* composites per rank r: 2(N-2R+r+1) + R-1-r, less the last rank's first */
      for (int r = 0; r < R; r++)
        g_assert_cmpint((int)s->fb[r]->len, ==, 2 * (N - 2 * R + r + 1) + R - 1 - r - (r == R - 1));
      g_autoptr(GString) out = g_string_new(NULL);
      GError *err = NULL;
      g_assert_true(tp_format_torch(s, out, &err));
      g_assert_nonnull(strstr(out->str, ")OVERLAP_F_B"));
      check_columns(s, out->str);
      g_autoptr(TpSchedule) back = tpt_parse(out->str, &err);
      g_assert_no_error(err);
      g_assert_cmpint(back->order, ==, TP_ORDER_DUALPIPE_V);
      if (!tp_schedule_equal(s, back))
        g_error("dualpipe-v R=%d N=%d: read back differently", R, N);
    }
}

/* Simulate s on F = fwd, B = bwd (I = in, W = bwd - in), F&B overlap o; the idle time of each rank. */
static double *idle_per_rank(const TpSchedule *s, double fwd, double bwd, double in, double o, double *makespan)
{
  g_autofree char *text = g_strdup_printf("[stages]\nforward = %g\nbackward = %g\nbackward_input = %g\nfb_overlap = %g\n",
                                          fwd, bwd, in, o);
  GError *err = NULL;
  g_autoptr(TpCost) c = tp_cost_parse(text, strlen(text), "fb", s->W, &err);
  g_assert_no_error(err);
  tp_cost_place_chunks(c, s);
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
  int R = tp_schedule_ranks(s);
  double *idle = g_new0(double, R);
  for (int st = 0; st < s->W; st++)
    idle[tp_stage_rank(s, st)] += m->stage[st].busy;
  for (int r = 0; r < R; r++)
    idle[r] = m->makespan - idle[r];
  *makespan = m->makespan;
  return idle;
}

/* DeepSeek-V3's Table 2 gives DualPipe-V's bubble as (PP/2 - 1)(F&B + B - 3W), PP/2 = R ranks, B a whole
 * backward (I + W), F&B a composite's time.  On F = I = W = 1 (B = 2) and F&B = 2, 2.5, 3 (overlap 1,
 * 0.5, 0) it is the idle time of the last rank (and of rank R-2) for every N >= 2R.  For F >= I that
 * idle time is (R-1)(F&B + F - W - min(W, I)), DeepSeek's where F = I >= W.  The other ranks run fewer
 * composites (rank r < R-1: R-2-r fewer), so all ranks' idle time together is that times R, less
 * (R-1)(R-2)/2 · (F + B - F&B).  (With F < I the idle time grows faster than R-1: not stated here.) */
static void test_closed_form(void)
{
  static const struct {
    double fwd, bwd, in, o;
  } costs[] = { { 1, 2, 1, 0 },   { 1, 2, 1, 0.5 }, { 1, 2, 1, 1 },     { 2, 3, 2, 0.3 },
                { 3, 2, 1, 0.5 }, { 2, 3, 1, 0.4 }, { 5, 3, 1, 0 },     { 1, 4, 1, 1 } };
  for (guint i = 0; i < G_N_ELEMENTS(costs); i++)
    for (int R = 2; R <= 6; R++)
      for (int N = 2 * R; N <= 4 * R; N += R) {
        double F = costs[i].fwd, B = costs[i].bwd, I = costs[i].in, W = B - I;
        double FB = MAX(F, B) + (1 - costs[i].o) * MIN(F, B);
        g_autoptr(TpSchedule) s = dualpipe(R, N, 1);
        double makespan;
        g_autofree double *idle = idle_per_rank(s, F, B, I, costs[i].o, &makespan);
        double want = (R - 1) * (FB + F - W - MIN(W, I)), total = 0;
        if (F == I && W <= I)
          g_assert_cmpfloat_with_epsilon(want, (R - 1) * (FB + B - 3 * W), 1e-9); /* DeepSeek's */
        if (fabs(idle[R - 1] - want) > 1e-9 || fabs(idle[R - 2] - want) > 1e-9)
          g_error("F=%g B=%g I=%g overlap %g, R=%d N=%d: ranks R-1 and R-2 idle %g and %g, closed form %g", F, B, I,
                  costs[i].o, R, N, idle[R - 1], idle[R - 2], want);
        for (int r = 0; r < R; r++)
          total += idle[r];
        g_assert_cmpfloat_with_epsilon(total, R * want - (R - 1) * (R - 2) / 2.0 * (F + B - FB), 1e-9);
        /* the makespan: rank R-1's work (2N - 2R - 1 composites) and its idle time */
        g_assert_cmpfloat_with_epsilon(makespan, 2 * N * (F + B) - (2 * N - 2 * R - 1) * (F + B - FB) + want, 1e-9);
      }
}

/* A composite's cost: max(F, B) + (1 - o)·min(F, B); fb_overlap from 0 to 1, anything else refused in
 * one line; on unit slots F&B is two slots, F's then B's, and the event loop agrees with the replay. */
static void test_costs(void)
{
  g_assert_cmpfloat(tp_cost_fb(1, 2, 0), ==, 3);
  g_assert_cmpfloat(tp_cost_fb(1, 2, 1), ==, 2);
  g_assert_cmpfloat(tp_cost_fb(3, 2, 0.5), ==, 4);
  static const char bad[] = "[stages]\nforward = 1\nbackward = 2\nfb_overlap = 1.5\n";
  GError *err = NULL;
  g_assert_null(tp_cost_parse(bad, sizeof bad - 1, "bad", 4, &err));
  g_assert_nonnull(strstr(err->message, "fb_overlap: expected a fraction from 0 to 1"));
  g_assert_null(strchr(err->message, '\n'));
  g_clear_error(&err);
  for (int R = 1; R <= 4; R++) {
    g_autoptr(TpSchedule) s = dualpipe(R, 2 * R + 1, 3);
    g_autoptr(TpCost) c = tp_cost_unit(s->W);
    g_autoptr(TpSim) fast = tp_sim_run(s, c, &err);
    g_autoptr(TpSim) ev = tp_sim_run_events(s, c, &err);
    g_assert_no_error(err);
    g_assert_cmpfloat(fast->makespan, ==, ev->makespan);
    for (long g = 0; g < ev->n_ops; g++)
      g_assert_cmpfloat(fast->start[g], ==, ev->start[g]);
    /* each composite's B starts as its F ends, one slot later */
    g_autofree int *pos = g_new0(int, s->W);
    for (int r = 0; r < R; r++) {
      g_autofree long *at = g_new(long, s->rank_seq[r]->len);
      for (guint k = 0; k < s->rank_seq[r]->len; k++) {
        int st = g_array_index(s->rank_seq[r], int32_t, k);
        at[k] = ev->ix->off[st] + pos[st]++;
      }
      g_assert_cmpuint(s->fb[r]->len, >, 0);
      for (guint i = 0; i < s->fb[r]->len; i++) {
        int k = g_array_index(s->fb[r], int32_t, i);
        g_assert_cmpfloat(ev->start[at[k + 1]], ==, ev->end[at[k]]);
        g_assert_cmpfloat(ev->end[at[k]], ==, ev->start[at[k]] + 1);
      }
    }
  }
}

/* Our CSV and JSON carry the composites (docs/formats.md): dualpipe-v read back from either is the
 * same schedule, composites included, written again byte for byte, and simulates the same on costs
 * where a composite saves time (every operation's start and end); without its marks it would not. */
static void test_own_formats(void)
{
  static const char cost[] = "[stages]\nforward = 1\nbackward = 2\nbackward_input = 1\nfb_overlap = 0.5\n";
  for (int R = 1; R <= 4; R++)
    for (int N = 2 * R; N <= 3 * R + 1; N += R)
      for (int K = 1; K <= 3; K += 2)
        for (int json = 0; json < 2; json++) {
          g_autoptr(TpSchedule) s = dualpipe(R, N, K);
          g_autoptr(GString) text = g_string_new(NULL), again = g_string_new(NULL);
          (json ? tp_format_json : tp_format_csv)(s, text);
          GError *err = NULL;
          g_autoptr(TpSchedule) back = tpt_parse(text->str, &err);
          g_assert_no_error(err);
          g_assert_true(tp_schedule_equal(s, back));
          (json ? tp_format_json : tp_format_csv)(back, again);
          g_assert_cmpstr(text->str, ==, again->str);
          g_autoptr(TpCost) c = tp_cost_parse(cost, sizeof cost - 1, "fb", s->W, &err);
          g_assert_no_error(err);
          tp_cost_place_chunks(c, s);
          g_autoptr(TpSim) a = tp_sim_run(s, c, &err), b = tp_sim_run(back, c, &err);
          g_assert_no_error(err);
          g_assert_cmpint(a->n_ops, ==, b->n_ops);
          for (long g = 0; g < a->n_ops; g++) {
            g_assert_cmpfloat(a->start[g], ==, b->start[g]);
            g_assert_cmpfloat(a->end[g], ==, b->end[g]);
          }
          g_assert_cmpfloat(a->makespan, ==, b->makespan);
          tpt_drop_fb(back); /* the control: the same operations without their composites */
          g_autoptr(TpSim) plain = tp_sim_run(back, c, &err);
          g_assert_cmpfloat(plain->makespan, >, a->makespan);
        }
}

/* Refused in one line: N < 2W, a composite that is no forward then backward of another chunk, a --chunks
 * other than 2. */
static void test_refused(void)
{
  GError *err = NULL;
  g_assert_null(tp_schedule_generate(TP_ORDER_DUALPIPE_V, TP_POLICY_SYNC, 3, 5, 1, &err));
  g_assert_nonnull(strstr(err->message, "order dualpipe-v needs N >= 2W (got N=5, W=3)"));
  g_clear_error(&err);
  g_assert_null(tp_schedule_generate_chunked(TP_ORDER_DUALPIPE_V, TP_POLICY_SYNC, 2, 3, 4, 1, NULL, &err));
  g_assert_nonnull(strstr(err->message, "dualpipe-v holds exactly 2 chunks per worker"));
  g_clear_error(&err);
  /* worker 1 runs 0F0 0F1 0F2 3F0 3I0 3W0 3F1 (0F3;3B1) (3F2;0B0) 3B2 …: composites at 7, 9, 12 */
  static const int place[2] = { 0, 10 }, which[2] = { 0, 1 }; /* 0F0 then 0F1; 0B0 then 3B2 */
  for (int i = 0; i < 2; i++) {
    g_autoptr(TpSchedule) s = dualpipe(2, 4, 1);
    g_assert_cmpint(g_array_index(s->fb[0], int32_t, 1), ==, 9);
    g_array_index(s->fb[0], int32_t, which[i]) = place[i];
    g_assert_false(tp_validate(s, &err));
    g_assert_nonnull(strstr(err->message, "an F&B composite is a forward then a backward of a micro-batch"));
    g_assert_null(strchr(err->message, '\n'));
    g_clear_error(&err);
  }
  const char *const few[] = { "schedule", "-s", "dualpipe-v", "-w", "4", "-n", "6", NULL };
  tpt_expect_cli_refused(few, "order dualpipe-v needs N >= 2W (got N=6, W=4)");
  /* a composite waits for both inputs: its B's gradient comes after it (3B0 follows it on its rank) */
  tpt_expect_refused("0F0,0F1,3F0,(3F1;0B0)OVERLAP_F_B,3B0,3B1,0B1\n1F0,2F0,1F1,2F1,2B0,1B0,2B1,1B1\n",
                     "t.csv:1: deadlock: rank 1 waits at the F&B composite's B(1,A) of stage 1 for B(1,A) from stage 2 "
                     "on rank 2");
  /* our CSV's composite of one stage's F and B: that B of micro-batch 2 needs that very forward's output */
  tpt_expect_refused("# timeprest-schedule order=dualpipe-v policy=sync workers=1 micro_batches=2 mini_batches=1 chunks=2 "
                     "chunk_map=v-shape\nstage,op,mini_batch,micro_batch,version,source,composite\n1,F,1,1,0,fixed,\n"
                     "2,F,1,1,0,fixed,\n1,F,1,2,0,fixed,\n2,B,1,1,0,fixed,\n2,F,1,2,0,fixed,fb\n2,B,1,2,0,fixed,\n"
                     "1,B,1,1,0,fixed,\n1,I,1,2,0,fixed,\n1,W,1,2,0,fixed,\n1,U,1,,0,fixed,\n2,U,1,,0,fixed,\n",
                     "t.csv:7: F(1,B) at stage 2: an F&B composite overlaps a forward of one chunk with a backward of "
                     "another, not of the same stage 2");
  /* a composite of one chunk per rank is read as its two actions (test-zb reads one) */
  g_autoptr(TpSchedule) one = tpt_parse("0F0,(0F1;0B0)OVERLAP_F_B,0B1\n,1F0,1B0,1F1,1B1\n", &err);
  g_assert_no_error(err);
  g_assert_null(one->fb);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/dualpipe/pytorch-order", test_pytorch_order);
  g_test_add_func("/dualpipe/round-trip", test_round_trip);
  g_test_add_func("/dualpipe/closed-form", test_closed_form);
  g_test_add_func("/dualpipe/costs", test_costs);
  g_test_add_func("/dualpipe/refused", test_refused);
  g_test_add_func("/dualpipe/own-formats", test_own_formats);
  return g_test_run();
}
