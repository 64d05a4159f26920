/* test-fuse.c — fused forwards (tp_schedule_fuse_forwards): which mini-batches the rule fuses and
 * what it leaves as it was; the simulator's cost of a whole-mini-batch forward (forward_whole, in
 * closed form, recomputed too) and its staleness histogram (the unfused one's); the executor's
 * fused runs against the unfused ones (the same weights within rounding, dropout and recomputation
 * included, the same versions and stored activations); train's --fuse-forwards and its report. */
#include "tp_costed.h"
#include "tp_format.h"
#include "tp_metrics.h"
#include "tp_runtime.h"
#include "tp_sim.h"
#include "tp_test.h"
#include "tp_test_run.h"
#include "tp_validate.h"

#include <math.h>

enum { BATCH = 32, TRAIN_N = 512 };

static TpDataset *data;

/* Two stages' costs: forward 1 per micro-batch (fwd_whole for the whole mini-batch, 0: N x 1),
 * backward 2, update 0.5. */
static TpCost *costs(int W, double fwd_whole)
{
  TpCost *c = tp_cost_unit(W);
  c->unit = FALSE;
  for (int st = 0; st < W; st++)
    c->stage[st] = (TpStageCost){ .fwd = 1, .bwd = 2, .upd = 0.5, .act_bytes = 10, .grad_bytes = 10,
                                  .stored_bytes = 100, .weight_bytes = 1, .optimizer_bytes = 1,
                                  .grad_buffer_bytes = 1, .device = st, .input_bytes = 10, .fwd_whole = fwd_whole };
  tp_cost_update_devices(c);
  return c;
}

/* f is s with the forwards of the mini-batches fused[i] as one whole forward each, every other
 * operation in its place with its version and source; returns how many mini-batches that is. */
static int check_fused(const TpSchedule *s, const TpSchedule *f)
{
  g_autofree gboolean *fused = g_new0(gboolean, s->K + 1);
  for (int st = 0; st < f->W; st++)
    for (int k = 0; k < tp_stage_len(f, st); k++) {
      const TpOp *op = &tp_stage_ops(f, st)[k];
      if (op->kind == TP_OP_F && op->micro == TP_WHOLE)
        fused[op->mb] = TRUE;
    }
  int n = 0;
  for (int i = 1; i <= s->K; i++)
    n += fused[i];
  for (int st = 0; st < s->W; st++) {
    const TpOp *a = tp_stage_ops(s, st), *b = tp_stage_ops(f, st);
    int na = tp_stage_len(s, st), nb = tp_stage_len(f, st), j = 0;
    for (int k = 0; k < na; k++) {
      if (a[k].kind == TP_OP_F && fused[a[k].mb]) { /* its run: N forwards, back to back, one version */
        g_assert_cmpint(a[k].micro, ==, 0);
        for (int m = 1; m < s->N; m++) {
          g_assert_cmpint(a[k + m].kind, ==, TP_OP_F);
          g_assert_cmpint(a[k + m].mb, ==, a[k].mb);
          g_assert_cmpint(a[k + m].micro, ==, m);
          g_assert_cmpint(a[k + m].ver, ==, a[k].ver);
        }
        g_assert_cmpint(j, <, nb);
        g_assert_true(b[j].kind == TP_OP_F && b[j].micro == TP_WHOLE && b[j].mb == a[k].mb && b[j].ver == a[k].ver &&
                      b[j].src == a[k].src);
        k += s->N - 1, j++;
        continue;
      }
      g_assert_cmpint(j, <, nb);
      g_assert_true(b[j].kind == a[k].kind && b[j].mb == a[k].mb && b[j].micro == a[k].micro && b[j].ver == a[k].ver &&
                    b[j].src == a[k].src);
      j++;
    }
    g_assert_cmpint(j, ==, nb);
    g_assert_cmpint(nb, ==, na - n * (s->N - 1));
  }
  GError *err = NULL;
  g_assert_true(tp_validate(f, &err));
  g_assert_no_error(err);
  return n;
}

/* Mini-batch i fuses exactly when, on every stage, its N forwards stand back to back in micro-batch
 * order reading one version from one source, and its backward is one whole backward: the rule
 * against that direct reading, on unit slots and on costs, at W 1..4 and N 1..6 (the rule was tested
 * at N = 4 alone, and one forward short of N passed). */
static gboolean fusable(const TpSchedule *s, int i)
{
  if (s->N < 2)
    return FALSE;
  for (int st = 0; st < s->W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    int n = tp_stage_len(s, st), first = -1, backs = 0, whole = 0;
    for (int k = 0; k < n; k++) {
      if (ops[k].mb != i || ops[k].kind == TP_OP_U)
        continue;
      if (ops[k].kind == TP_OP_F && first < 0)
        first = k;
      backs += ops[k].kind != TP_OP_F, whole += ops[k].kind != TP_OP_F && ops[k].micro == TP_WHOLE;
    }
    if (first < 0 || backs != 1 || whole != 1 || first + s->N > n)
      return FALSE;
    for (int j = 0; j < s->N; j++) {
      const TpOp *f = &ops[first + j];
      if (f->kind != TP_OP_F || f->mb != i || f->micro != j || f->ver != ops[first].ver || f->src != ops[first].src)
        return FALSE;
    }
  }
  return TRUE;
}

static void test_rule_direct(void)
{
  GError *err = NULL;
  int some = 0, all = 0;
  for (int W = 1; W <= 4; W++)
    for (int N = 1; N <= 6; N++)
      for (int costed = 0; costed < 2; costed++) {
        const TpPreset *pr = tp_preset_find("timeprest");
        TpCost *c = costs(W, 0);
        g_autoptr(TpSchedule) s = costed ? tp_schedule_generate_costed_rc(pr->order, pr->policy, W, N, 3 * W + 2, FALSE,
                                                                          c, NULL, &err)
                                         : tpt_preset("timeprest", W, N, 3 * W + 2);
        g_assert_no_error(err);
        tp_cost_free(c);
        int n = -1, want = 0;
        g_autoptr(TpSchedule) f = tp_schedule_fuse_forwards(s, &n, &err);
        g_assert_no_error(err);
        for (int i = 1; i <= s->K; i++)
          want += fusable(s, i);
        g_assert_cmpint(n, ==, want);
        g_assert_true((f != NULL) == (want > 0));
        for (int st = 0; f && st < f->W; st++) /* the whole forwards are of those mini-batches */
          for (int k = 0; k < tp_stage_len(f, st); k++) {
            const TpOp *op = &tp_stage_ops(f, st)[k];
            if (op->kind == TP_OP_F)
              g_assert_true((op->micro == TP_WHOLE) == fusable(s, op->mb));
          }
        some += want > 0 && want < s->K, all += want == s->K;
      }
  g_assert_cmpint(some, >, 0); /* both kinds of schedule were met */
  g_assert_cmpint(all, >, 0);
}

/* On unit slots TiMePReSt's W = 2, N = 4 order runs B(1) between 2B and 2C on stage 1 ("1A 2A 2B 1
 * 2C 2D ..."), and so on for every later mini-batch: only mini-batch 1 has its forwards back to back
 * on both stages.  On costs that make the backward the longer step, every mini-batch has. */
static void test_rule(void)
{
  GError *err = NULL;
  const char *const nf1b[] = { "timeprest", "v-timeprest", "i-timeprest" };
  for (size_t p = 0; p < G_N_ELEMENTS(nf1b); p++) {
    g_autoptr(TpSchedule) s = tpt_preset(nf1b[p], 2, 4, 5);
    int n = -1;
    g_autoptr(TpSchedule) f = tp_schedule_fuse_forwards(s, &n, &err);
    g_assert_no_error(err);
    g_assert_nonnull(f);
    g_assert_cmpint(n, ==, 1);
    g_assert_cmpint(check_fused(s, f), ==, 1);
    const TpPreset *pr = tp_preset_find(nf1b[p]);
    TpCost *c = costs(2, 0);
    g_autoptr(TpSchedule) sc = tp_schedule_generate_costed_rc(pr->order, pr->policy, 2, 4, 6, FALSE, c, NULL, &err);
    g_assert_no_error(err);
    g_autoptr(TpSchedule) fc = tp_schedule_fuse_forwards(sc, &n, &err);
    g_assert_no_error(err);
    g_assert_cmpint(n, ==, 6);
    g_assert_cmpint(check_fused(sc, fc), ==, 6);
    tp_cost_free(c);
    /* a fused schedule has nothing left to fuse */
    g_assert_null(tp_schedule_fuse_forwards(fc, &n, &err));
    g_assert_no_error(err);
    g_assert_cmpint(n, ==, 0);
  }
  /* nothing to fuse: backwards per micro-batch (gpipe, 1f1b, pipedream, 2bw), split backwards
   * (zb-h1), interleaved stages, whole forwards already (1f1b-async), one micro-batch */
  const char *const none[] = { "gpipe", "1f1b", "pipedream", "pipedream-2bw", "zb-h1", "interleaved-1f1b" };
  for (size_t p = 0; p < G_N_ELEMENTS(none); p++) {
    g_autoptr(TpSchedule) s = tpt_preset(none[p], 2, 4, 5);
    int n = -1;
    g_assert_null(tp_schedule_fuse_forwards(s, &n, &err));
    g_assert_no_error(err);
    g_assert_cmpint(n, ==, 0);
  }
  /* a fused schedule on unit slots keeps the versions of the timeline its order was fixed on (the
   * unfused one's): written and read back, it validates and is the same */
  g_autoptr(TpSchedule) s3 = tpt_preset("timeprest", 3, 2, 6);
  int n3 = 0;
  g_autoptr(TpSchedule) f3 = tp_schedule_fuse_forwards(s3, &n3, &err);
  g_assert_no_error(err);
  g_assert_cmpint(n3, ==, 6);
  g_autoptr(GString) csv = g_string_new(NULL);
  tp_format_csv(f3, csv);
  g_autoptr(TpSchedule) back = tp_schedule_parse(csv->str, csv->len, "fused.csv", &err);
  g_assert_no_error(err);
  g_assert_true(tp_validate(back, &err));
  g_assert_no_error(err);
  g_assert_true(tp_schedule_equal(back, f3));
  g_autoptr(TpSchedule) unfused = tp_schedule_unfuse_forwards(f3);
  g_assert_true(tp_schedule_equal(unfused, s3));
  g_autoptr(TpSchedule) a = tp_schedule_generate(TP_ORDER_1F1B_ASYNC, TP_POLICY_VSYNC_LATEST, 2, 4, 5, &err);
  g_assert_no_error(err);
  g_autoptr(TpSchedule) one = tpt_preset("timeprest", 2, 1, 5);
  int n = -1;
  g_assert_null(tp_schedule_fuse_forwards(a, &n, &err));
  g_assert_null(tp_schedule_fuse_forwards(one, &n, &err));
  g_assert_no_error(err);
}

/* One stage, N = 4, K = 3 (nf1b: per mini-batch 4 forwards, one whole backward of 4 x 2, an update
 * of 0.5): 3 x (4 + 8 + 0.5) = 37.5 unfused; fused, a whole forward of forward_whole = 2.5:
 * 3 x (2.5 + 8 + 0.5) = 33; forward_whole 0 counts it as N forwards (37.5).  Two stages: the second
 * stage's fused forward waits for the first's whole one. */
static void test_simulator(void)
{
  GError *err = NULL;
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 1, 4, 3);
  int n = 0;
  g_autoptr(TpSchedule) f = tp_schedule_fuse_forwards(s, &n, &err);
  g_assert_cmpint(n, ==, 3);
  const double expect[][2] = { { 0, 37.5 }, { 2.5, 33 } };
  for (int i = 0; i < 2; i++) {
    TpCost *c = costs(1, expect[i][0]);
    TpSim *a = tp_sim_run(f, c, &err), *b = tp_sim_run(s, c, &err);
    g_assert_no_error(err);
    TpMetrics *ma = tp_metrics_compute(a), *mb = tp_metrics_compute(b);
    g_assert_cmpfloat(fabs(ma->makespan - expect[i][1]), <, 1e-9);
    g_assert_cmpfloat(fabs(mb->makespan - 37.5), <, 1e-9);
    /* the same stored activations at the peak: a whole forward stores its N micro-batches' */
    g_assert_cmpfloat(ma->stage[0].comp_peak[3], ==, mb->stage[0].comp_peak[3]);
    tp_metrics_free(ma), tp_metrics_free(mb);
    tp_sim_free(a), tp_sim_free(b);
    tp_cost_free(c);
  }
  /* W = 2, K = 1, fused on unit slots (mini-batch 1): stage 1's whole forward (2.5), then stage 2's
   * (2.5), its backward (8), stage 1's backward (8); updates (0.5) after each: 2.5 + 2.5 + 8 + 8 + 0.5 */
  g_autoptr(TpSchedule) s2 = tpt_preset("timeprest", 2, 4, 1);
  g_autoptr(TpSchedule) f2 = tp_schedule_fuse_forwards(s2, &n, &err);
  g_assert_cmpint(n, ==, 1);
  TpCost *c = costs(2, 2.5);
  TpSim *sim = tp_sim_run(f2, c, &err);
  g_assert_no_error(err);
  g_assert_cmpfloat(fabs(sim->makespan - 21.5), <, 1e-9);
  tp_sim_free(sim);
  tp_cost_free(c);
}

/* Recomputing, a backward runs its forwards again: after one whole forward, that one forward
 * (forward_whole), as the executor does.  One stage, N = 4, K = 3, forward 1, forward_whole 2.5,
 * backward 2, update 0.5: fused, per mini-batch 2.5 + (2.5 + 4 x 2) + 0.5 = 13.5 (makespan 40.5);
 * unfused 4 x 1 + 4 x (1 + 2) + 0.5 = 16.5 (49.5).  Two stages, K = 1, fused: 2.5 + 2.5 + 10.5 +
 * 10.5 + 0.5 = 26.5.  On unit slots W = 2, N = 4, K = 5 only mini-batch 1 fuses: its backwards cost
 * forward_whole again, the others' 4 forwards. */
static void test_simulator_recompute(void)
{
  GError *err = NULL;
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 1, 4, 3);
  s->recompute = TRUE;
  int n = 0;
  g_autoptr(TpSchedule) f = tp_schedule_fuse_forwards(s, &n, &err);
  g_assert_cmpint(n, ==, 3);
  g_assert_true(f->recompute);
  TpCost *c = costs(1, 2.5);
  TpSim *a = tp_sim_run(f, c, &err), *b = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  TpMetrics *ma = tp_metrics_compute(a), *mb = tp_metrics_compute(b);
  g_assert_cmpfloat(fabs(ma->makespan - 40.5), <, 1e-9);
  g_assert_cmpfloat(fabs(ma->t_minibatch - 13.5), <, 1e-9);
  g_assert_cmpfloat(fabs(mb->makespan - 49.5), <, 1e-9);
  g_assert_cmpfloat(fabs(mb->t_minibatch - 16.5), <, 1e-9);
  tp_metrics_free(ma), tp_metrics_free(mb);
  tp_sim_free(a), tp_sim_free(b);
  tp_cost_free(c);
  c = costs(2, 2.5);
  g_autoptr(TpSchedule) s2 = tpt_preset("timeprest", 2, 4, 1);
  s2->recompute = TRUE;
  g_autoptr(TpSchedule) f2 = tp_schedule_fuse_forwards(s2, &n, &err);
  g_assert_cmpint(n, ==, 1);
  TpSim *sim = tp_sim_run(f2, c, &err);
  g_assert_no_error(err);
  g_assert_cmpfloat(fabs(sim->makespan - 26.5), <, 1e-9);
  tp_sim_free(sim);
  g_autoptr(TpSchedule) s5 = tpt_preset("timeprest", 2, 4, 5);
  s5->recompute = TRUE;
  g_autoptr(TpSchedule) f5 = tp_schedule_fuse_forwards(s5, &n, &err);
  g_assert_cmpint(n, ==, 1);
  sim = tp_sim_run(f5, c, &err);
  g_assert_no_error(err);
  for (int st = 0; st < 2; st++)
    for (int k = 0; k < tp_stage_len(f5, st); k++) {
      const TpOp *op = &tp_stage_ops(f5, st)[k];
      long g = sim->ix->off[st] + k;
      if (op->kind == TP_OP_B)
        g_assert_cmpfloat(fabs(sim->end[g] - sim->start[g] - (op->mb == 1 ? 10.5 : 12)), <, 1e-9);
    }
  tp_sim_free(sim);
  tp_cost_free(c);
}

/* The staleness histogram counts what every sample read: a whole forward reads for its N
 * micro-batches, each the version the unfused forwards read, so a fused schedule's histogram is the
 * unfused one's (costed orders, all mini-batches fused; unit slots, mini-batch 1). */
static void test_staleness(void)
{
  GError *err = NULL;
  const char *const nf1b[] = { "timeprest", "v-timeprest", "i-timeprest" };
  for (size_t p = 0; p < G_N_ELEMENTS(nf1b); p++)
    for (int costed = 0; costed < 2; costed++) {
      const TpPreset *pr = tp_preset_find(nf1b[p]);
      TpCost *c = costs(4, 2.5);
      g_autoptr(TpSchedule) s = costed ? tp_schedule_generate_costed_rc(pr->order, pr->policy, 4, 4, 12, FALSE, c, NULL, &err)
                                       : tpt_preset(nf1b[p], 4, 4, 12);
      g_assert_no_error(err);
      int n = 0;
      g_autoptr(TpSchedule) f = tp_schedule_fuse_forwards(s, &n, &err);
      g_assert_nonnull(f);
      g_assert_cmpint(n, >=, 1);
      TpSim *a = tp_sim_run(s, c, &err), *b = tp_sim_run(f, c, &err);
      g_assert_no_error(err);
      TpMetrics *ma = tp_metrics_compute(a), *mb = tp_metrics_compute(b);
      long reads = 0;
      g_assert_cmpuint(ma->staleness->len, ==, mb->staleness->len);
      for (guint d = 0; d < ma->staleness->len; d++) {
        g_assert_cmpint(g_array_index(mb->staleness, long, d), ==, g_array_index(ma->staleness, long, d));
        reads += g_array_index(ma->staleness, long, d);
      }
      g_assert_cmpint(reads, ==, 4 * 12 * (4 + 1)); /* per stage and mini-batch: N forwards, one backward */
      tp_metrics_free(ma), tp_metrics_free(mb);
      tp_sim_free(a), tp_sim_free(b);
      tp_cost_free(c);
    }
}

/* A model without dropout, 7 layers split 4 + 3; and one with a dropout layer on each stage, 9
 * layers split 4 + 5 (a whole forward draws its mask block by block, each block of B/N rows from
 * its micro-batch's seed, so that the masks are the unfused forwards'). */
static const char plain_model[] = "name plain\ninput 1 28 28\ndataset 60000\nflatten\nlinear 256\nrelu\n"
                                  "linear 256\nrelu\nlinear 10\nsoftmax_ce\n";
static const char dropout_model[] = "name dropout\ninput 1 28 28\ndataset 60000\nflatten\nlinear 256\nrelu\ndropout\n"
                                    "linear 256\nrelu\ndropout\nlinear 10\nsoftmax_ce\n";

/* Fused and unfused runs of one schedule end with the same weights within float rounding (each row
 * of a product is the same sum whatever rows are beside it; OpenBLAS may block B rows differently
 * from B/N), read the versions the schedule names, and store the same activations at the peak —
 * with dropout too, and recomputing (a backward after a whole forward re-runs it with the same
 * masks).  Rounding can flip a ReLU whose input lies within it of 0, which sends training down
 * another of two nearby paths (1e-3 apart with OpenBLAS's Haswell kernels at lr 0.05, fused or not:
 * the SkylakeX and Prescott kernels, each bit for bit equal fused and unfused, end 1e-3 apart from
 * each other), 3.6e-8 two float steps of lr away.  A difference beyond rounding is therefore tried
 * again at lr two and four float steps up and fails if either of those is beyond it too, as a mask
 * or a version drawn wrongly would be; the worst of the two (a NaN counts as worst) is returned. */
static double fused_vs_not(const TpRuntimeConfig *cfg, const TpSchedule *s, const TpSchedule *f, const char *what)
{
  double worst = 0;
  TpRuntimeConfig c = *cfg;
  for (int k = 0; k < 3; k++) {
    TpRunResult r1, r2;
    size_t n1, n2;
    float *w1 = tpt_train(&c, s, &r1, &n1), *w2 = tpt_train(&c, f, &r2, &n2);
    g_assert_cmpuint(n1, ==, n2);
    double d = tpt_rel_diff(w2, w1, n1);
    g_test_message("%s, lr %.9g: fused vs not, relative difference %g", what, c.lr, d);
    g_assert_true(r1.versions_match && r2.versions_match);
    for (int st = 0; st < 2; st++)
      g_assert_cmpint(r1.stats[st].peak[TP_MEMCAT_ACTIVATIONS], ==, r2.stats[st].peak[TP_MEMCAT_ACTIVATIONS]);
    tp_run_result_clear(&r1), tp_run_result_clear(&r2);
    g_free(w1), g_free(w2);
    if (k == 0 && d <= 1e-6)
      return d;
    if (k > 0 && !(d <= worst))
      worst = d;
    c.lr = nextafterf(nextafterf(c.lr, 1.0f), 1.0f);
  }
  return worst;
}

static void test_train(gconstpointer name)
{
  const TpPreset *pr = tp_preset_find(name);
  TpCost *c = costs(2, 0);
  for (int dropout = 0; dropout < 2; dropout++) {
    g_autofree char *path = tpt_tmp_path("model");
    g_assert_true(g_file_set_contents(path, dropout ? dropout_model : plain_model, -1, NULL));
    GError *err = NULL;
    g_autoptr(TpModel) model = tp_model_load(path, &err);
    g_assert_no_error(err);
    tpt_tmp_remove(path);
    for (int rc = 0; rc < 2; rc++)
      for (int costed = 0; costed < 2; costed++) {
        g_autoptr(TpSchedule) s = costed ? tp_schedule_generate_costed_rc(pr->order, pr->policy, 2, 4, 8, rc, c, NULL, &err)
                                         : tpt_preset(name, 2, 4, 8);
        g_assert_no_error(err);
        s->recompute = rc;
        int n = 0;
        g_autoptr(TpSchedule) f = tp_schedule_fuse_forwards(s, &n, &err);
        g_assert_nonnull(f);
        g_assert_cmpint(n, ==, costed ? 8 : 1);
        g_assert_true(f->recompute == rc);
        const int bounds[] = { 0, 4, dropout ? 9 : 7 };
        TpRuntimeConfig cfg = { .model = model, .bounds = bounds, .W = 2, .N = 4, .batch = BATCH,
                                .be = tp_backend_cpu(), .train = data, .lr = 0.05f, .momentum = 0.9f,
                                .weight_decay = 1e-4f, .seed = 7, .timeout_s = 60 };
        g_autofree char *what = g_strdup_printf("%s (%s order%s%s)", (const char *)name, costed ? "costed" : "unit-slot",
                                                dropout ? ", dropout" : "", rc ? ", recompute" : "");
        double d = fused_vs_not(&cfg, s, f, what);
        if (!(d <= 1e-6))
          g_error("%s: the fused forwards' weights differ by %g (relative) at lr two and four float steps above "
                  "%g too (each try is in the test's log)", what, d, (double)cfg.lr);
      }
  }
  tp_cost_free(c);
}

/* train on a small synthetic run with `extra` options after the common ones (NULL-terminated). */
static TptRun train_with(const char *const *extra)
{
  static const char *const base[] = { "train", "-w", "2", "-n", "4", "-k", "6", "-b", "32", "-m", "mlp", "--data",
                                      "synthetic:256:64", "-q", "--profile-reps", "1" };
  g_autoptr(GPtrArray) args = g_ptr_array_new();
  for (size_t i = 0; i < G_N_ELEMENTS(base); i++)
    g_ptr_array_add(args, (gpointer)base[i]);
  for (; *extra; extra++)
    g_ptr_array_add(args, (gpointer)*extra);
  g_ptr_array_add(args, NULL);
  return tpt_run((const char **)args->pdata);
}

/* train --fuse-forwards: its values, the report (JSON fused_forwards, the text's forwards line and
 * how many mini-batches fused), `on` refused where nothing can fuse (gpipe, N = 1), on/off not with
 * --schedule (auto, the default, is), and a resume asking for other forwards than its plan ran. */
static void test_cli(void)
{
  TptRun t = train_with((const char *[]){ "--fuse-forwards", "maybe", NULL });
  g_assert_cmpint(t.status, ==, 2);
  g_assert_nonnull(strstr(t.err, "--fuse-forwards: expected auto, on or off, got 'maybe'"));
  tpt_run_clear(&t);
  /* preset, value, JSON, the text's line (NULL: none); how many fuse depends on the order fixed on
   * this machine's profile */
  const char *cases[][4] = {
    { "timeprest", "on", "\"fused_forwards\": true", " of the plan's 6 mini-batches: where a mini-batch's 4 forwards" },
    { "timeprest", "off", "\"fused_forwards\": false", "forwards     one per micro-batch (--fuse-forwards off)" },
    { "gpipe", "off", "\"fused_forwards\": false", NULL },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    t = train_with((const char *[]){ "-s", cases[i][0], "--fuse-forwards", cases[i][1], "-f", "json", NULL });
    g_assert_cmpint(t.status, ==, 0);
    g_assert_nonnull(strstr(t.out, cases[i][2]));
    g_assert_nonnull(strstr(t.out, "\"versions_match\": true"));
    tpt_run_clear(&t);
    t = train_with((const char *[]){ "-s", cases[i][0], "--fuse-forwards", cases[i][1], NULL });
    g_assert_cmpint(t.status, ==, 0);
    if (!cases[i][3])
      g_assert_null(strstr(t.out, "forwards     "));
    else
      g_assert_nonnull(strstr(t.out, cases[i][3]));
    if (!strcmp(cases[i][1], "on"))
      g_assert_nonnull(strstr(t.out, "forwards     fused in "));
    tpt_run_clear(&t);
  }
  /* on where nothing can fuse: refused before anything runs */
  const char *never[][2] = { { "gpipe", "4" }, { "pipedream", "4" }, { "timeprest", "1" } };
  for (size_t i = 0; i < G_N_ELEMENTS(never); i++) {
    t = train_with((const char *[]){ "-s", never[i][0], "-n", never[i][1], "--fuse-forwards", "on", NULL });
    g_assert_cmpint(t.status, ==, 2);
    g_assert_cmpint(tpt_lines(t.err), ==, 1);
    g_assert_nonnull(strstr(t.err, "--fuse-forwards on: -s "));
    g_assert_nonnull(strstr(t.err, "no mini-batch has its forwards back to back"));
    tpt_run_clear(&t);
  }
  t = tpt_run((const char *[]){ "train", "--schedule", "x.csv", "--fuse-forwards", "on", NULL });
  g_assert_cmpint(t.status, ==, 2);
  g_assert_nonnull(strstr(t.err, "--fuse-forwards on: not with --schedule"));
  tpt_run_clear(&t);
  /* auto, the default, is taken with --schedule: the missing file is what is refused */
  t = tpt_run((const char *[]){ "train", "--schedule", "no-such.csv", "--fuse-forwards", "auto", NULL });
  g_assert_cmpint(t.status, ==, 2);
  g_assert_null(strstr(t.err, "--fuse-forwards"));
  g_assert_nonnull(strstr(t.err, "no-such.csv"));
  tpt_run_clear(&t);
  /* a resume asking for the forwards its plan did not run */
  g_autofree char *dir = tpt_tmp_path("fuse-ck");
  t = train_with((const char *[]){ "-s", "timeprest", "--fuse-forwards", "on", "--checkpoint", dir, "--checkpoint-every",
                                   "3", "--stop-after", "3", NULL });
  g_assert_cmpint(t.status, ==, 0);
  tpt_run_clear(&t);
  t = train_with((const char *[]){ "-s", "timeprest", "--checkpoint-every", "3", "--resume", dir, "--fuse-forwards", "off",
                                   NULL });
  g_assert_cmpint(t.status, ==, 2);
  g_assert_nonnull(strstr(t.err, "its plan runs fused forwards; here --fuse-forwards off"));
  tpt_run_clear(&t);
  t = train_with((const char *[]){ "-s", "timeprest", "--checkpoint-every", "3", "--resume", dir, NULL }); /* auto */
  g_assert_cmpint(t.status, ==, 0);
  g_assert_nonnull(strstr(t.out, "forwards     fused in "));
  g_assert_nonnull(strstr(t.out, "mini-batches (as the plan resumed has them)"));
  tpt_run_clear(&t);
  /* resumed with auto (which decides on its own profile) and stopped inside a segment: the rest of
   * it, made by the resumed process, fuses as the plan does */
  tpt_rm_tree(dir);
  t = train_with((const char *[]){ "-s", "timeprest", "--fuse-forwards", "on", "--checkpoint", dir, "--checkpoint-every",
                                   "3", "--stop-after", "3", NULL });
  g_assert_cmpint(t.status, ==, 0);
  tpt_run_clear(&t);
  t = train_with((const char *[]){ "-s", "timeprest", "--checkpoint-every", "3", "--resume", dir, "--stop-after", "4",
                                   NULL });
  g_assert_cmpint(t.status, ==, 0);
  tpt_run_clear(&t);
  g_autofree char *ini = g_build_filename(dir, "checkpoint.ini", NULL), *text = NULL;
  g_assert_true(g_file_get_contents(ini, &text, NULL, NULL));
  const char *cut = strstr(text, "\ncut_segment=");
  g_assert_nonnull(cut);
  g_autofree char *rest = g_strndup(cut, strcspn(cut + 1, "\n") + 1);
  g_assert_nonnull(strstr(rest, "\\n1,F,1,,")); /* a whole (fused) forward in the rest's first mini-batch */
  tpt_rm_tree(dir);
  /* schedule --fuse-forwards where nothing fuses: one line, exit 2 */
  t = tpt_run((const char *[]){ "schedule", "-s", "gpipe", "-w", "2", "-n", "4", "--fuse-forwards", NULL });
  g_assert_cmpint(t.status, ==, 2);
  g_assert_nonnull(strstr(t.err, "--fuse-forwards: no mini-batch has its forwards back to back"));
  tpt_run_clear(&t);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  data = tp_dataset_synthetic(TRAIN_N, 28, 28, 5);
  g_test_add_func("/fuse/rule", test_rule);
  g_test_add_func("/fuse/rule-direct", test_rule_direct);
  g_test_add_func("/fuse/simulator", test_simulator);
  g_test_add_func("/fuse/simulator/recompute", test_simulator_recompute);
  g_test_add_func("/fuse/staleness", test_staleness);
  static const char *const presets[] = { "timeprest", "v-timeprest", "i-timeprest" };
  for (size_t i = 0; i < G_N_ELEMENTS(presets); i++) {
    g_autofree char *path = g_strdup_printf("/fuse/train/%s", presets[i]);
    g_test_add_data_func(path, presets[i], test_train);
  }
  g_test_add_func("/fuse/cli", test_cli);
  int rc = g_test_run();
  tp_dataset_free(data);
  return rc;
}
