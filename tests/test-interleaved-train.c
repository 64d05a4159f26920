/* test-interleaved-train.c — training interleaved (virtual) stages: interleaved-1f1b, zb-v and
 * dualpipe-v (its F&B composites run as their F, then their B) run
 * through the executor end with 1f1b's weights on the same stages (the same mini-batch SGD, the
 * same order of gradient sums) and gpipe's within 1e-5; every worker runs one operation at a time,
 * in its order across its chunks (the measured operations of a worker never overlap and follow
 * its order); a failing run ends every chunk's thread; train runs the presets (stopped at a
 * checkpoint and resumed too), and refuses them on the transports with one process per stage. */
#include "tp_test.h"
#include "tp_test_mpi.h" /* tpt_json_value */
#include "tp_test_run.h"
#include "tp_train.h"
#include "tp_costed.h"

enum { BATCH = 32, K_RUN = 6 };
static TpModel *deep;
static TpDataset *data;

/* mlp-deep on s->W stages of equal layer counts (a worker's chunks are stages too). */
static float *train(const TpSchedule *s, TpRunResult *res, size_t *n)
{
  return tpt_train_even(deep, data, BATCH, s, res, n);
}

static TpSchedule *chunked(TpOrder o, int W, int V, int N, int K)
{
  GError *err = NULL;
  TpSchedule *s = tp_schedule_generate_chunked(o, TP_POLICY_SYNC, W, V, N, K, NULL, &err);
  g_assert_no_error(err);
  return s;
}

/* Each worker's measured operations follow its order (rank_seq) and never overlap: every one
 * starts at or after the end of the one before it in the worker's order. */
static void check_turns(const TpSchedule *s, const TpRunResult *r)
{
  g_autofree int *k = g_new0(int, s->W);
  for (int rk = 0; rk < tp_schedule_ranks(s); rk++) {
    double prev_end = -1;
    int prev_st = -1;
    const GArray *seq = s->rank_seq[rk];
    for (guint i = 0; i < seq->len; i++) {
      int st = g_array_index(seq, int32_t, i);
      const TpOpRecord *rec = &r->rec[st][k[st]++];
      if (rec->start < prev_end)
        g_error("worker %d: operation %u of its order (stage %d) started at %.6f s, before the one before it (stage "
                "%d) ended at %.6f s", rk + 1, i + 1, st + 1, rec->start, prev_st + 1, prev_end);
      g_assert_cmpfloat(rec->end, >=, rec->start);
      prev_end = rec->end, prev_st = st;
    }
  }
  for (int st = 0; st < s->W; st++)
    g_assert_cmpint(k[st], ==, tp_stage_len(s, st));
}

/* interleaved-1f1b (V = 2 on W = 2 and 4, V = 3 on W = 2), zb-v (W = 2, 3; and built on costs) and dualpipe-v
 * (W = 2, 3) against 1f1b and gpipe on the same W·V stages: each chunk runs its micro-batches' backwards in order, as 1f1b
 * does, so the gradient sums are 1f1b's, bit for bit; gpipe sums in reverse order (within 1e-5). */
static void test_same_weights(void)
{
  static const char costs[] = "[stages]\nforward = 1.3\nbackward = 2.1\nbackward_input = 1.2\n"
                              "stored_activation_bytes = 4\nstored_for_w_bytes = 1\n[links]\nlatency = 0.1\n";
  static const struct {
    TpOrder o;
    int W, V, N;
    gboolean costed; /* zb-v built on the costs above */
  } cases[] = {
    { TP_ORDER_INTERLEAVED_1F1B, 2, 2, 4, FALSE },
    { TP_ORDER_INTERLEAVED_1F1B, 4, 2, 4, FALSE },
    { TP_ORDER_INTERLEAVED_1F1B, 2, 3, 4, FALSE },
    { TP_ORDER_ZB_V, 2, 2, 4, FALSE },
    { TP_ORDER_ZB_V, 3, 2, 4, FALSE },
    { TP_ORDER_ZB_V, 2, 2, 8, TRUE },
    { TP_ORDER_DUALPIPE_V, 2, 2, 4, FALSE },
    { TP_ORDER_DUALPIPE_V, 3, 2, 8, FALSE },
  };
  for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
    int stages = cases[c].W * cases[c].V, N = cases[c].N;
    size_t n1;
    TpRunResult r;
    g_autofree float *wg = NULL, *wf = NULL;
    size_t n = tpt_flush_references(deep, data, BATCH, stages, N, K_RUN, &wg, &wf);
    g_autoptr(TpSchedule) s = chunked(cases[c].o, cases[c].W, cases[c].V, N, K_RUN);
    if (cases[c].costed) { /* another order than the fixed pattern's, the same weights */
      GError *err = NULL;
      g_autoptr(TpCost) cost = tp_cost_parse(costs, sizeof costs - 1, "costs", stages, &err);
      g_assert_no_error(err);
      TpSchedule *t = tp_schedule_costed_like(s, cost, &err);
      g_assert_no_error(err);
      g_assert_false(tp_schedule_equal(s, t));
      tp_schedule_free(s);
      s = t;
    }
    g_assert_cmpint(s->W, ==, stages);
    g_autofree float *w = train(s, &r, &n1);
    g_assert_cmpuint(n, ==, n1);
    g_assert_true(r.versions_match);
    check_turns(s, &r);
    double d = tpt_rel_diff(w, wg, n);
    g_test_message("%s W=%d V=%d N=%d: %g from gpipe's weights (relative)", tp_order_name(s->order), cases[c].W,
                   cases[c].V, N, d);
    if (memcmp(w, wf, sizeof(float) * n) != 0 || !(d <= 1e-5))
      g_error("%s W=%d V=%d N=%d: weights differ from 1f1b's on %d stages or from gpipe's (by %g)",
              tp_order_name(s->order), cases[c].W, cases[c].V, N, stages, d);
    tp_run_result_clear(&r);
  }
}

/* A run that fails (the loss overflows on the last chunk) ends with its line: the chunks waiting
 * for their turn end too, and nothing hangs. */
static void test_failure(void)
{
  g_autoptr(TpSchedule) s = chunked(TP_ORDER_INTERLEAVED_1F1B, 2, 2, 4, 2);
  int bounds[16];
  TpRuntimeConfig cfg = tpt_even_config(deep, data, BATCH, s, bounds);
  cfg.lr = INFINITY; /* the first update makes every weight infinite or NaN */
  GError *err = NULL;
  g_autoptr(TpRuntime) rt = tp_runtime_new(&cfg, &err);
  g_assert_no_error(err);
  TpBatcher *b = tp_batcher_new(data, BATCH, s->N, 3, &err);
  g_assert_no_error(err);
  int *idx[2];
  for (int i = 0; i < 2; i++)
    idx[i] = g_memdup2(tp_batcher_next(b), sizeof(int) * BATCH);
  TpRunResult r = { 0 };
  g_assert_false(tp_runtime_run(rt, s, (const int *const *)idx, 1, g_get_monotonic_time(), NULL, &r, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_RUNTIME);
  g_test_message("%s", err->message);
  g_assert_nonnull(strstr(err->message, "the loss is"));
  g_clear_error(&err);
  tp_run_result_clear(&r); /* what the run recorded before it failed */
  for (int i = 0; i < 2; i++)
    g_free(idx[i]);
  tp_batcher_free(b);
}

/* The JSON report's `key` of a run of the program that must succeed. */
static char *run_value(const char *const *args, const char *key)
{
  TptRun r = tpt_run(args);
  if (r.status != 0)
    g_error("%s %s %s: status %d: %s", args[0], args[1], args[2], r.status, r.err);
  char *v = tpt_json_value(r.out, key);
  tpt_run_clear(&r);
  return v;
}

/* train: interleaved-1f1b (W = 2, --chunks 2) and zb-v (W = 2) end with the weights of 1f1b on
 * W = 4, whose split into four stages is the same (the partitioner splits W·V chunks as W·V
 * stages); the report says the workers and chunks. */
static void test_cli(void)
{
  g_autofree char *model = g_build_filename(TP_SRCDIR, "models", "mlp-deep.model", NULL);
#define RUN_ARGS(...)                                                                                              \
  { "train", __VA_ARGS__, "-n", "4", "-k", "3", "-m", model, "--batch", "32", "--data", "synthetic:256:32",        \
    "--profile-reps", "1", "--format", "json", "--quiet", NULL }
  const char *const ref[] = RUN_ARGS("-s", "1f1b", "-w", "4");
  const char *const il[] = RUN_ARGS("-s", "interleaved-1f1b", "-w", "2", "--chunks", "2");
  const char *const zv[] = RUN_ARGS("-s", "zb-v", "-w", "2");
  g_autofree char *dir = tpt_tmp_dir("tp-interleaved-ck");
  const char *const stop[] = RUN_ARGS("-s", "zb-v", "-w", "2", "--checkpoint-every", "1", "--checkpoint", dir,
                                      "--stop-after", "1");
  const char *const resume[] = RUN_ARGS("-s", "zb-v", "-w", "2", "--checkpoint-every", "1", "--resume", dir);
#undef RUN_ARGS
  g_autofree char *sa = run_value(ref, "weights_sha256");
  const char *const *runs[] = { il, zv };
  for (int i = 0; i < 2; i++) {
    TptRun b = tpt_run(runs[i]);
    if (b.status != 0)
      g_error("train -s %s: status %d: %s", runs[i][2], b.status, b.err);
    g_autofree char *sb = tpt_json_value(b.out, "weights_sha256"), *vm = tpt_json_value(b.out, "versions_match");
    g_autofree char *w = tpt_json_value(b.out, "workers"), *ch = tpt_json_value(b.out, "chunks");
    g_assert_cmpstr(sb, ==, sa);
    g_assert_cmpstr(vm, ==, "true");
    g_assert_cmpstr(w, ==, "2");
    g_assert_cmpstr(ch, ==, "2");
    tpt_run_clear(&b);
  }
  /* the schedule written to a file (with its chunk map) and trained from there: the same weights */
  g_autofree char *path = tpt_tmp_path("zb-v.csv");
  const char *const exp[] = { "schedule", "-s", "zb-v", "-w", "2", "-n", "4", "-k", "3", "--format", "csv",
                              "--output", path, NULL };
  TptRun x = tpt_run(exp);
  g_assert_cmpint(x.status, ==, 0);
  tpt_run_clear(&x);
  const char *const file[] = { "train", "--schedule", path, "-m", model, "--batch", "32", "--data", "synthetic:256:32",
                               "--profile-reps", "1", "--format", "json", "--quiet", NULL };
  g_autofree char *sf = run_value(file, "weights_sha256");
  g_assert_cmpstr(sf, ==, sa);
  tpt_tmp_remove(path);
  /* stopped at a checkpoint after one mini-batch and resumed: the same weights */
  TptRun st = tpt_run(stop);
  if (st.status != 0 || !strstr(st.err, "stopped: checkpoint"))
    g_error("train -s zb-v --stop-after 1: status %d: %s", st.status, st.err);
  tpt_run_clear(&st);
  g_autofree char *sr = run_value(resume, "weights_sha256");
  g_assert_cmpstr(sr, ==, sa);
  tpt_rm_tree(dir);
  /* the text report names the workers and their chunks */
  const char *const text[] = { "train", "-s", "zb-v", "-w", "2", "-n", "2", "-k", "1", "--batch", "16", "--data",
                               "synthetic:64:16", "--profile-reps", "1", "--quiet", NULL };
  TptRun t = tpt_run(text);
  if (t.status != 0)
    g_error("train -s zb-v: status %d: %s", t.status, t.err);
  g_assert_nonnull(strstr(t.out, "W=4 stages (2 workers x 2 chunks, taking turns), N=2 micro-batches"));
  tpt_run_clear(&t);
  /* refused in one line each: a split that does not give every chunk its layers, a bad --chunks */
  struct {
    const char *const args[16];
    const char *want;
  } refused[] = {
    { { "train", "-s", "interleaved-1f1b", "-w", "2", "-n", "4", "--split", "3,3", "--data", "synthetic", "--quiet",
        NULL }, "--split: expected 4 layer counts (one per stage)" },
    { { "train", "-s", "interleaved-1f1b", "-w", "2", "-n", "3", "--data", "synthetic", "--quiet", NULL },
      "interleaved-1f1b needs N a multiple of W" },
    { { "train", "-s", "zb-v", "-w", "2", "--chunks", "3", "--data", "synthetic", "--quiet", NULL },
      "zb-v holds exactly 2 chunks per worker" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(refused); i++)
    tpt_expect_cli_refused(refused[i].args, refused[i].want);
}

static int one_rank(const TpGroup *g) { (void)g; return 1; }
static int rank_zero(const TpGroup *g) { (void)g; return 0; }
static void free_group(TpGroup *g) { g_free(g); }

/* One process per stage (mpi, nccl) cannot make a worker's chunks take turns: refused, one line. */
static void test_other_transports(void)
{
  static const TpGroupIface per_stage = { .transport = "mpi", .per_stage = TRUE, .rank = rank_zero,
                                          .size = one_rank, .free = free_group };
  TpGroup *g = g_new0(TpGroup, 1);
  g->iface = &per_stage;
  Train t = { .cfg = { .sched = { .preset = tp_preset_find("zb-v"), .workers = 2, .N = 4, .K = 1, .epochs = 1 },
                       .batch = 32, .data = "synthetic" }, .group = g };
  g_assert_nonnull(t.cfg.sched.preset);
  GError *err = NULL;
  g_assert_false(tp_train_prepare(&t, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_PARAM_PRESET);
  g_assert_nonnull(strstr(err->message, "preset zb-v: interleaved stages (several model chunks per worker) are "
                                        "trained with --transport local only"));
  g_clear_error(&err);
  tp_train_clear(&t);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  GError *err = NULL;
  deep = tp_model_load(TP_SRCDIR "/models/mlp-deep.model", &err);
  g_assert_no_error(err);
  data = tp_dataset_synthetic(512, 28, 28, 5);
  g_test_add_func("/interleaved-train/runtime/same-weights", test_same_weights);
  g_test_add_func("/interleaved-train/runtime/failure", test_failure);
  g_test_add_func("/interleaved-train/cli", test_cli);
  g_test_add_func("/interleaved-train/other-transports", test_other_transports);
  int rc = g_test_run();
  tp_dataset_free(data);
  tp_model_free(deep);
  return rc;
}
