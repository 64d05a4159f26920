/* test-interleaved.c — interleaved (virtual) stages: the chunk → rank maps, interleaved 1F1B's and
 * ZB-V's bubbles against closed forms on unit slots, their memory, the validation of a rank's order
 * across its chunks, free links inside a rank, the file formats (ours and PyTorch's CSV with more
 * stages than ranks) and what the command line refuses (training them: test-interleaved-train.c). */
#include "tp_test.h"
#include "tp_cost.h"
#include "tp_metrics.h"
#include "tp_sim.h"
#include "tp_validate.h"

static TpSchedule *chunked(TpOrder o, int W, int V, int N, int K)
{
  GError *err = NULL;
  TpSchedule *s = tp_schedule_generate_chunked(o, TP_POLICY_SYNC, W, V, N, K, NULL, &err);
  g_assert_no_error(err);
  g_assert_nonnull(s);
  return s;
}

/* Makespan of s under c; the event loop and the unit-slot replay must agree on unit costs. */
static double makespan(const TpSchedule *s, const TpCost *c)
{
  GError *err = NULL;
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  if (c->unit) {
    g_autoptr(TpSim) ev = tp_sim_run_events(s, c, &err);
    g_assert_no_error(err);
    g_assert_cmpfloat(ev->makespan, ==, sim->makespan);
    for (long g = 0; g < sim->n_ops; g++)
      g_assert_cmpfloat(ev->start[g], ==, sim->start[g]);
  }
  return sim->makespan;
}

static void test_maps(void)
{
  /* round-robin: chunk c of rank r is stage c·R + r; V-shape: rank r holds r and 2R-1-r */
  for (int R = 1; R <= 8; R++)
    for (int st = 0; st < 4 * R; st++) {
      int c = st / R, r = tp_chunk_map_rank(TP_MAP_ROUND_ROBIN, R, st);
      g_assert_cmpint(c * R + r, ==, st);
      int v = tp_chunk_map_rank(TP_MAP_V_SHAPE, R, st);
      if (st < 2 * R)
        g_assert_true(st == v || st == 2 * R - 1 - v);
      g_assert_cmpint(tp_chunk_map_rank(TP_MAP_NONE, R, st), ==, st);
    }
  g_autoptr(TpSchedule) s = chunked(TP_ORDER_ZB_V, 3, 2, 6, 1);
  g_assert_cmpint(s->W, ==, 6);
  g_assert_cmpint(tp_schedule_ranks(s), ==, 3);
  static const int want[] = { 0, 1, 2, 2, 1, 0 };
  for (int st = 0; st < 6; st++)
    g_assert_cmpint(tp_stage_rank(s, st), ==, want[st]);
}

/* Interleaved 1F1B's bubble per rank and mini-batch is (W-1)(F+B)/V: on unit slots a chunk's forward
 * and backward take one slot each, a whole stage's F = B = V slots, so the bubble is 2(W-1) slots
 * against a rank's 2NV of work — for W in 2..16, N = W, 2W, 3W, 4W, V = 2..4; and 1F1B's
 * 2(W-1) slots of whole-stage F = B = 1 is the same bubble V times longer in stage time. */
static void test_interleaved_closed_form(void)
{
  for (int W = 2; W <= 16; W++)
    for (int N = W; N <= 4 * W; N += W)
      for (int V = 2; V <= 4; V++) {
        g_autoptr(TpSchedule) s = chunked(TP_ORDER_INTERLEAVED_1F1B, W, V, N, 1);
        g_autoptr(TpCost) c = tp_cost_unit(s->W);
        tp_cost_place_chunks(c, s);
        double F = V, B = V; /* a whole stage's forward and backward, in chunk slots */
        g_assert_cmpfloat(makespan(s, c) - N * (F + B), ==, (W - 1) * (F + B) / V);
      }
}

/* ZB-V on unit slots, a chunk's F = I = W = 1 (cost file: forward 1, backward 2, I = W = B/2), a
 * rank's work 6N per mini-batch: the first mini-batch's bubble is max(W-1, 2(2W-1-N)) and the steady
 * state's (what a second mini-batch adds) max(0, 2(2W-1-N)): none once N >= 2W-1, for W in 2..16
 * and N in W..4W. */
static void test_zbv_closed_form(void)
{
  static const char unit3[] = "[stages]\nforward = 1\nbackward = 2\n";
  GError *err = NULL;
  for (int W = 2; W <= 16; W++) {
    g_autoptr(TpCost) c = tp_cost_parse(unit3, sizeof unit3 - 1, "unit3", 2 * W, &err);
    g_assert_no_error(err);
    for (int N = W; N <= 4 * W; N++) {
      g_autoptr(TpSchedule) s1 = chunked(TP_ORDER_ZB_V, W, 2, N, 1);
      g_autoptr(TpSchedule) s2 = chunked(TP_ORDER_ZB_V, W, 2, N, 2);
      tp_cost_place_chunks(c, s1);
      double m1 = makespan(s1, c), m2 = makespan(s2, c);
      g_assert_cmpfloat(m1 - 6 * N, ==, MAX(W - 1, 2 * (2 * W - 1 - N)));
      g_assert_cmpfloat(m2 - m1 - 6 * N, ==, MAX(0, 2 * (2 * W - 1 - N)));
    }
  }
}

/* The most chunk activations rank r holds at once, on its order: a forward adds one, the operation
 * that releases it (B, or W for a split backward) takes it away. */
static int rank_held(const TpSchedule *s, int r)
{
  int *pos = g_new0(int, s->W), held = 0, most = 0;
  for (guint k = 0; k < s->rank_seq[r]->len; k++) {
    int st = g_array_index(s->rank_seq[r], int32_t, k);
    const TpOp *op = &tp_stage_ops(s, st)[pos[st]++];
    held += op->kind == TP_OP_F ? 1 : op->kind == TP_OP_B || op->kind == TP_OP_W ? -1 : 0;
    most = MAX(most, held);
  }
  g_assert_cmpint(held, ==, 0);
  g_free(pos);
  return most;
}

/* ZB-V keeps 1F1B's memory: at most 2W chunk activations (W whole stages') on any rank; interleaved
 * 1F1B holds its warm-up plus one: 2(W-1-r) + (V-1)W + 1 on rank r. */
static void test_memory(void)
{
  for (int W = 2; W <= 8; W++)
    for (int N = W; N <= 4 * W; N += W) {
      g_autoptr(TpSchedule) z = chunked(TP_ORDER_ZB_V, W, 2, N, 1);
      g_autoptr(TpSchedule) i = chunked(TP_ORDER_INTERLEAVED_1F1B, W, 2, N, 1);
      for (int r = 0; r < W; r++) {
        g_assert_cmpint(rank_held(z, r), <=, 2 * W);
        g_assert_cmpint(rank_held(i, r), ==, MIN(2 * N, 2 * (W - 1 - r) + W + 1));
      }
      /* the simulator adds a rank's chunks: its peak_activations per stage count that chunk's */
      g_autoptr(TpCost) c = tp_cost_unit(z->W);
      GError *err = NULL;
      g_autoptr(TpSim) sim = tp_sim_run(z, c, &err);
      g_assert_no_error(err);
      TpMetrics *m = tp_metrics_compute(sim);
      for (int r = 0; r < W; r++)
        g_assert_cmpint(m->stage[r].peak_activations + m->stage[2 * W - 1 - r].peak_activations, >=, rank_held(z, r));
      tp_metrics_free(m);
    }
}

/* Two chunks of one rank pass activations and gradients without a link: on ZB-V the turn of the V
 * (stage W-1 to W, both on rank W-1) costs nothing, every other link its latency. */
static void test_free_links(void)
{
  static const char lat[] = "[stages]\nforward = 1\nbackward = 2\n[links]\nlatency = 0.25\n";
  GError *err = NULL;
  const int W = 3;
  g_autoptr(TpSchedule) s = chunked(TP_ORDER_ZB_V, W, 2, 6, 1);
  g_autoptr(TpCost) c = tp_cost_parse(lat, sizeof lat - 1, "lat", s->W, &err);
  g_assert_no_error(err);
  g_autoptr(TpCost) raw = tp_cost_parse(lat, sizeof lat - 1, "lat", s->W, &err);
  g_assert_no_error(err);
  tp_cost_place_chunks(c, s);
  g_assert_true(c->shared_devices);
  g_assert_cmpint(c->n_devices, ==, W);
  for (int l = 0; l < s->W - 1; l++) /* the placed cost: the turn's link is free */
    g_assert_cmpfloat(c->link[l].latency, ==, l == W - 1 ? 0 : 0.25);
  /* the simulator frees it too, on a cost model that was not placed */
  g_autoptr(TpSim) sim = tp_sim_run(s, raw, &err);
  g_assert_no_error(err);
  int free_ = 0, paid = 0;
  for (int st = 0; st < s->W; st++)
    for (long g = sim->ix->off[st]; g < sim->ix->off[st + 1]; g++) {
      if (sim->cons[g] < 0)
        continue;
      const TpOp *op = &tp_stage_ops(s, st)[g - sim->ix->off[st]];
      int to = op->kind == TP_OP_F ? st + 1 : st - 1;
      double t = sim->xend[g] - sim->xstart[g];
      gboolean inside = tp_stage_rank(s, st) == tp_stage_rank(s, to);
      g_assert_cmpfloat(t, ==, inside ? 0 : 0.25);
      free_ += inside, paid += !inside;
    }
  g_assert_cmpint(free_, ==, 2 * 6); /* 6 forwards down and 6 gradients up the turn */
  g_assert_cmpint(paid, >, 0);
}

/* Ranks that share one device (a cost model whose stages all run on device 1, as on the h200
 * cluster) still share it once the chunks are placed: every operation runs one after another. */
static void test_shared_device(void)
{
  static const char one[] = "[stages]\nforward = 1\nbackward = 1\ndevice = 1\n";
  GError *err = NULL;
  g_autoptr(TpSchedule) s = chunked(TP_ORDER_INTERLEAVED_1F1B, 4, 2, 8, 1);
  g_autoptr(TpCost) c = tp_cost_parse(one, sizeof one - 1, "one", s->W, &err);
  g_assert_no_error(err);
  tp_cost_place_chunks(c, s);
  g_assert_cmpint(c->n_devices, ==, 1);
  g_assert_cmpfloat(makespan(s, c), ==, 2.0 * 8 * s->W);
}

static void test_validate(void)
{
  { /* a rank's order naming another rank's stage */
    g_autoptr(TpSchedule) s = chunked(TP_ORDER_INTERLEAVED_1F1B, 2, 2, 2, 1);
    g_array_index(s->rank_seq[0], int32_t, 0) = 1;
    tpt_expect_invalid(s, "worker 1 runs an operation of stage 2, which map round-robin puts on worker 2");
  }
  { /* an operation missing from its rank's order */
    g_autoptr(TpSchedule) s = chunked(TP_ORDER_INTERLEAVED_1F1B, 2, 2, 2, 1);
    g_array_remove_index(s->rank_seq[1], s->rank_seq[1]->len - 1);
    tpt_expect_invalid(s, "stage 4 has 5 operations, its worker's order runs 4 of them");
  }
  { /* rank 1 runs chunk 1's first forward before chunk 0's: it waits for itself */
    g_autoptr(TpSchedule) s = chunked(TP_ORDER_INTERLEAVED_1F1B, 2, 2, 2, 1);
    GArray *q = s->rank_seq[0];
    int first = g_array_index(q, int32_t, 0), k = 0;
    while (g_array_index(q, int32_t, k) == first)
      k++;
    g_array_index(q, int32_t, k) = first, g_array_index(q, int32_t, 0) = 2;
    tpt_expect_invalid(s, "deadlock: rank 1 waits at F(1,A) of stage 3 for F(1,A) from stage 2 on rank 2");
  }
  { /* a chunked order without chunks, and a flat order with them */
    g_autoptr(TpSchedule) s = tpt_preset("1f1b", 4, 4, 1);
    s->order = TP_ORDER_INTERLEAVED_1F1B;
    tpt_expect_invalid(s, "order interleaved-1f1b needs several chunks per worker");
    g_autoptr(TpSchedule) z = chunked(TP_ORDER_ZB_V, 2, 2, 4, 1);
    z->order = TP_ORDER_ZB_H1;
    tpt_expect_invalid(z, "order zb-h1 holds one chunk per worker");
  }
  GError *err = NULL;
  g_assert_false(tp_pair_check(TP_ORDER_INTERLEAVED_1F1B, TP_POLICY_VSYNC_LATEST, 4, 8, &err));
  g_assert_nonnull(strstr(err->message, "order interleaved-1f1b takes policy sync only"));
  g_clear_error(&err);
  g_assert_false(tp_chunks_check(TP_ORDER_INTERLEAVED_1F1B, 4, 2, 6, &err));
  g_assert_nonnull(strstr(err->message, "interleaved-1f1b needs N a multiple of W"));
  g_clear_error(&err);
  g_assert_false(tp_chunks_check(TP_ORDER_ZB_V, 4, 3, 8, &err));
  g_assert_nonnull(strstr(err->message, "zb-v holds exactly 2 chunks per worker"));
  g_clear_error(&err);
  g_assert_false(tp_chunks_check(TP_ORDER_1F1B, 4, 2, 8, &err));
  g_assert_nonnull(strstr(err->message, "order 1f1b holds one chunk per worker"));
  g_error_free(err);
}

/* Ours (CSV, JSON) and PyTorch's CSV written and read back: the same schedule, the rank orders
 * included, and the order named again (W = 1..6). */
static void test_round_trip(void)
{
  for (int W = 1; W <= 6; W++)
    for (int N = W; N <= 3 * W; N += W)
      for (int z = 0; z < 2; z++) {
        g_autoptr(TpSchedule) s = chunked(z ? TP_ORDER_ZB_V : TP_ORDER_INTERLEAVED_1F1B, W, z ? 2 : 3, N, z ? 1 : 2);
        for (int f = 0; f < 3; f++) {
          g_autoptr(GString) out = g_string_new(NULL);
          GError *err = NULL;
          if (f == 0)
            tp_format_csv(s, out);
          else if (f == 1)
            tp_format_json(s, out);
          else if (s->K > 1)
            continue;
          else
            g_assert_true(tp_format_torch(s, out, &err));
          g_autoptr(TpSchedule) back = tpt_parse(out->str, &err);
          g_assert_no_error(err);
          if (!tp_schedule_equal(s, back))
            g_error("%s W=%d N=%d format %d read back differently", tp_order_name(s->order), W, N, f);
        }
      }
}

/* Our files with a bad chunk header or worker orders: one line each. */
static void test_bad_files(void)
{
  static const char head[] = "# timeprest-schedule order=interleaved-1f1b policy=sync workers=1 micro_batches=1 "
                             "mini_batches=1";
  static const char rows[] = "\nstage,op,mini_batch,micro_batch,version,source\n1,F,1,1,0,fixed\n2,F,1,1,0,fixed\n"
                             "2,B,1,1,0,fixed\n2,U,1,,0,fixed\n1,B,1,1,0,fixed\n1,U,1,,0,fixed\n";
  g_autofree char *good = g_strconcat(head, " chunks=2 chunk_map=round-robin", rows, NULL);
  g_autofree char *no_map = g_strconcat(head, " chunks=2", rows, NULL);
  g_autofree char *bad_map = g_strconcat(head, " chunks=2 chunk_map=zigzag", rows, NULL);
  GError *err = NULL;
  g_autoptr(TpSchedule) s = tpt_parse(good, &err);
  g_assert_no_error(err);
  g_assert_cmpint(s->W, ==, 2);
  tpt_expect_refused(no_map, "chunks (2 or more) and chunk_map (round-robin or v-shape) go together");
  tpt_expect_refused(bad_map, "bad value 'zigzag' for chunk_map");
  /* JSON: worker_orders needed with chunks, refused without */
  g_autoptr(GString) json = g_string_new(NULL);
  tp_format_json(s, json);
  g_autofree char *cut = g_strndup(json->str, (gsize)(strstr(json->str, ",\n  \"worker_orders\"") - json->str));
  g_autofree char *no_orders = g_strconcat(cut, "\n}\n", NULL);
  tpt_expect_refused(no_orders, "\"worker_orders\" must be an array of 1 arrays (one per worker) of stage numbers");
  g_autoptr(TpSchedule) flat = tpt_preset("1f1b", 2, 2, 1);
  g_autoptr(GString) fj = g_string_new(NULL);
  tp_format_json(flat, fj);
  g_string_truncate(fj, (gsize)(strrchr(fj->str, ']') - fj->str + 1));
  g_string_append(fj, ",\n  \"worker_orders\": [[1]]\n}\n");
  tpt_expect_refused(fj->str, "\"worker_orders\" is for chunks above 1");
}

/* PyTorch's CSV with more stages than ranks: the map follows from the rows, then is checked. */
static void test_torch_read(void)
{
  GError *err = NULL;
  /* 4 stages on 2 ranks, round-robin: rank 0 holds 0 and 2 */
  g_autoptr(TpSchedule) s = tpt_parse("0F0,,2F0,,,,2B0,,,0B0\n,1F0,,3F0,3B0,,,1B0\n", &err);
  g_assert_no_error(err);
  g_assert_cmpint(s->W, ==, 4);
  g_assert_cmpint(s->V, ==, 2);
  g_assert_cmpint(s->map, ==, TP_MAP_ROUND_ROBIN);
  g_assert_cmpint(s->order, ==, TP_ORDER_INTERLEAVED_1F1B);
  g_assert_cmpint(s->rank_seq[0]->len, ==, 6); /* 4 computations and 2 updates */
  tpt_expect_refused("0F0,1F0,1B0,0B0\n2F0,3F0,3B0,2B0\n", "stage 1 runs on rank 0, which fits neither a round-robin map "
                 "(rank 1) nor a V-shaped one (rank 1)");
  tpt_expect_refused("0F0,2F0\n1F0\n", "3 stages on 2 ranks: interleaved stages need the same number of chunks");
  tpt_expect_refused("0F0,1F0\n1F0\n", "stage 1 runs on rank 0 already: a stage runs on one rank");
  tpt_expect_refused("0F0,2F1\n1F0,3F0\n", "action '2F1': stage 1 (rank 1) runs no forward of micro-batch 1");
}

static void test_cli(void)
{
  struct {
    const char *const args[16];
    const char *want;
  } refused[] = {
    { { "schedule", "-s", "interleaved-1f1b", "-w", "4", "-n", "6", NULL }, "interleaved-1f1b needs N a multiple of W" },
    { { "schedule", "-s", "interleaved-1f1b", "--chunks", "1", NULL }, "needs at least 2 chunks per worker" },
    { { "simulate", "-s", "zb-v", "--chunks", "3", NULL }, "zb-v holds exactly 2 chunks per worker" },
    { { "schedule", "-s", "gpipe", "--chunks", "2", NULL }, "order gpipe holds one chunk per worker" },
    { { "train", "-s", "gpipe", "--chunks", "2", "--data", "synthetic", "--quiet", NULL },
      "order gpipe holds one chunk per worker" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(refused); i++)
    tpt_expect_cli_refused(refused[i].args, refused[i].want);
  /* --chunks 4: 16 stages on 4 workers; the grid has one line per stage */
  const char *const grid[] = { "schedule", "-s", "interleaved-1f1b", "-w", "4", "-n", "8", "-k", "1", "--chunks", "4",
                               NULL };
  TptRun r = tpt_run(grid);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpint(tpt_lines(r.out), ==, 16);
  tpt_run_clear(&r);
  /* a published workload: 8 chunks of VGG-16 on cluster C's 4 workers */
  const char *const sim[] = { "simulate", "-s", "zb-v", "--model", "vgg16-cifar100", "--cluster", "C", "-n", "8", NULL };
  r = tpt_run(sim);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "chunks       4 workers hold 2 chunks each (map v-shape)"));
  tpt_run_clear(&r);
  /* the report adds each worker's chunks and marks the link inside a worker */
  const char *const rep[] = { "simulate", "-s", "zb-v", "-w", "2", "-n", "4", "-k", "1", NULL };
  r = tpt_run(rep);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\n     1 1,4                        24  0.0400           13\n"));
  g_assert_nonnull(strstr(r.out, "  2 -> 3            4            4  (inside worker 2: free)\n"));
  tpt_run_clear(&r);
  /* compare lists both presets; with a cost file of W stages they do not apply, with reasons */
  const char *const cmp[] = { "compare", "-w", "4", "-n", "8", "-k", "2", "--format", "csv", NULL };
  r = tpt_run(cmp);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\ninterleaved-1f1b,interleaved-1f1b,sync,1,slots,38,"));
  g_assert_nonnull(strstr(r.out, "\nzb-v,zb-v,sync,1,"));
  tpt_run_clear(&r);
  /* a model of fewer layers than their chunks: n/a for those two, the table for the others */
  const char *const few[] = { "compare", "--model", "mlp", "--cluster", "C", NULL };
  r = tpt_run(few);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\ninterleaved-1f1b n/a: model mlp has 7 layers, fewer than the 8 stages"));
  g_assert_nonnull(strstr(r.out, "\nzb-v             n/a: model mlp has 7 layers"));
  g_assert_nonnull(strstr(r.out, "\ngpipe   "));
  tpt_run_clear(&r);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/interleaved/maps", test_maps);
  g_test_add_func("/interleaved/interleaved-closed-form", test_interleaved_closed_form);
  g_test_add_func("/interleaved/zbv-closed-form", test_zbv_closed_form);
  g_test_add_func("/interleaved/memory", test_memory);
  g_test_add_func("/interleaved/free-links", test_free_links);
  g_test_add_func("/interleaved/shared-device", test_shared_device);
  g_test_add_func("/interleaved/validate", test_validate);
  g_test_add_func("/interleaved/round-trip", test_round_trip);
  g_test_add_func("/interleaved/bad-files", test_bad_files);
  g_test_add_func("/interleaved/torch-read", test_torch_read);
  g_test_add_func("/interleaved/cli", test_cli);
  return g_test_run();
}
