/* test-resnet-train.c — a residual network with batch normalisation trained by the runtime under
 * every preset: gpipe on two stages ends bit for bit where gpipe on one stage ends (weights and
 * running statistics); every schedule trains to finite weights; under the flush and stashing
 * policies recomputation leaves the weights and the running statistics of the run without it, bit
 * for bit (a recomputed forward must not move them a second time).  Through the program: the same
 * on resnet-fmnist with its test loss, and every shipped vision model trains a mini-batch. */
#include "config.h"
#include "tp_data.h"
#include "tp_runtime.h"
#include "tp_test_run.h"

#include <math.h>
#include <string.h>

/* stem, a projection bottleneck with stride, an identity bottleneck, head: 8 layers */
static const char *const small_resnet = "input 1 8 8\nconv 8 3 pad=1 bias=0\nbatchnorm\nrelu\nbottleneck 4 16 stride=2\n"
                                        "bottleneck 4 16\navgpool_to 1 1\nflatten\nlinear 10\nsoftmax_ce\n";

typedef struct {
  float *w, *b; /* every stage's weights and running statistics, in stage order */
  size_t nw, nb;
} Trained;

static void trained_clear(Trained *t) { g_free(t->w), g_free(t->b); }

/* per_micro: each micro-batch's backward alone (else one backward of the micro-batches reading one
 * version, the default) */
static Trained train_with(const TpModel *m, const TpDataset *data, TpSchedule *s, gboolean per_micro)
{
  GError *err = NULL;
  g_autofree int *bounds = g_new(int, s->W + 1);
  TpRuntimeConfig cfg = tpt_even_config(m, data, 8, s, bounds);
  cfg.recompute = s->recompute, cfg.per_micro_backward = per_micro;
  TpRuntime *rt = tp_runtime_new(&cfg, &err);
  g_assert_no_error(err);
  TpBatcher *bat = tp_batcher_new(data, cfg.batch, s->N, 3, &err);
  g_assert_no_error(err);
  int **idx = g_new(int *, s->K);
  for (int i = 0; i < s->K; i++)
    idx[i] = g_memdup2(tp_batcher_next(bat), sizeof(int) * cfg.batch);
  TpRunResult res;
  g_assert_true(tp_runtime_run(rt, s, (const int *const *)idx, 1, g_get_monotonic_time(), NULL, &res, &err));
  g_assert_no_error(err);
  Trained t = { 0 };
  for (int st = 0; st < s->W; st++)
    t.nw += tp_runtime_n_params(rt, st), t.nb += tp_runtime_n_buffers(rt, st);
  t.w = g_new(float, t.nw), t.b = g_new(float, t.nb);
  size_t aw = 0, ab = 0;
  for (int st = 0; st < s->W; st++) {
    memcpy(t.w + aw, tp_runtime_weights(rt, st), sizeof(float) * tp_runtime_n_params(rt, st));
    g_assert_true(tp_runtime_get_buffers(rt, st, t.b + ab, &err));
    aw += tp_runtime_n_params(rt, st), ab += tp_runtime_n_buffers(rt, st);
  }
  for (size_t i = 0; i < t.nw; i++)
    g_assert_true(isfinite(t.w[i]));
  for (int i = 0; i < s->K; i++)
    g_free(idx[i]);
  g_free(idx);
  tp_run_result_clear(&res);
  tp_batcher_free(bat);
  tp_runtime_free(rt);
  return t;
}

static Trained train(const TpModel *m, const TpDataset *data, TpSchedule *s) { return train_with(m, data, s, FALSE); }

static TpModel *model(void) { return tpt_model_text(small_resnet); }

/* gpipe W = 2 against gpipe W = 1, N = 2: the same weights and running statistics, bit for bit; and
 * against its backwards run per micro-batch. */
static void test_split_is_exact(void)
{
  g_autoptr(TpModel) m = model();
  TpDataset *data = tp_dataset_synthetic(64, 8, 8, 5);
  TpSchedule *one = tpt_preset("gpipe", 1, 2, 4), *two = tpt_preset("gpipe", 2, 2, 4);
  Trained a = train(m, data, one), b = train(m, data, two);
  g_assert_cmpuint(a.nb, ==, b.nb);
  g_assert_cmpuint(a.nb, >, 0);
  g_assert_cmpmem(a.w, a.nw * sizeof(float), b.w, b.nw * sizeof(float));
  g_assert_cmpmem(a.b, a.nb * sizeof(float), b.b, b.nb * sizeof(float));
  /* the statistics moved from their start (means 0): the forwards updated them */
  double moved = 0;
  for (size_t i = 0; i < a.nb; i++)
    moved += fabs(a.b[i]) > 0;
  g_assert_cmpfloat(moved, >, 0);
  /* TiMePReSt's one backward of a mini-batch, run as one backward of its micro-batches, takes each
   * one's statistics: what their backwards alone compute, within rounding (the products' sums run in
   * another order) */
  TpSchedule *nf = tpt_preset("timeprest", 2, 2, 4);
  Trained c = train_with(m, data, nf, FALSE), d = train_with(m, data, nf, TRUE);
  g_test_message("batched backward against per micro-batch: %.2e", tpt_rel_diff(c.w, d.w, c.nw));
  g_assert_cmpfloat(tpt_rel_diff(c.w, d.w, c.nw), <, 1e-5);
  trained_clear(&a), trained_clear(&b), trained_clear(&c), trained_clear(&d);
  tp_schedule_free(nf);
  tp_schedule_free(one), tp_schedule_free(two);
  tp_dataset_free(data);
}

/* Each preset trains on two stages (three for the TiMePReSt family); where a recomputed forward
 * reads its forward's weights, the recomputing run ends bit for bit where the storing one does,
 * running statistics included. */
static void test_preset(gconstpointer data_name)
{
  const char *name = data_name;
  g_autoptr(TpModel) m = model();
  TpDataset *data = tp_dataset_synthetic(64, 8, 8, 5);
  int W = g_str_has_suffix(name, "timeprest") ? 3 : 2;
  TpSchedule *s = tpt_preset(name, W, 2, 5);
  Trained a = train(m, data, s);
  /* the flush and stashing policies: a recomputed forward reads its forward's weights (the others
   * read a later version by design: tests/test-recompute.c) */
  TpPolicy p = tp_preset_find(name)->policy;
  if (!tp_schedule_has_split(s) && (p == TP_POLICY_SYNC || p == TP_POLICY_STASH || p == TP_POLICY_2BW)) {
    TpSchedule *rc = tpt_preset(name, W, 2, 5);
    rc->recompute = TRUE;
    Trained b = train(m, data, rc);
    g_assert_cmpmem(a.w, a.nw * sizeof(float), b.w, b.nw * sizeof(float));
    g_assert_cmpmem(a.b, a.nb * sizeof(float), b.b, b.nb * sizeof(float));
    trained_clear(&b);
    tp_schedule_free(rc);
  }
  trained_clear(&a);
  tp_schedule_free(s);
  tp_dataset_free(data);
}

/* ---- through the program ---- */

static TptRun train_cli(const char *const *extra)
{
  const char *base[] = { "train", "-n", "2", "--batch", "8", "-d", "synthetic:64:16", "--profile-reps", "1", "--quiet",
                         "--format", "json" };
  return tpt_run_more(base, G_N_ELEMENTS(base), extra);
}

static char *field(const TptRun *r, const char *key)
{
  g_autofree char *k = g_strdup_printf("\"%s\": ", key);
  const char *p = strstr(r->out, k);
  if (!p)
    g_error("no %s in: %s%s", key, r->out, r->err);
  return g_strndup(p, strcspn(p, ",}"));
}

/* resnet-fmnist, gpipe on one and two stages: the same weights and test loss (the test set read
 * through the running statistics, which the pipelined profile before the run must leave as the
 * run found them); TiMePReSt trains it on three stages, the chunked schedules on two workers. */
static void test_cli(void)
{
  const char *w1[] = { "-m", "resnet-fmnist", "-s", "gpipe", "-w", "1", "-k", "3", NULL };
  const char *w2[] = { "-m", "resnet-fmnist", "-s", "gpipe", "-w", "2", "-k", "3", NULL };
  TptRun a = train_cli(w1), b = train_cli(w2);
  g_assert_cmpint(a.status, ==, 0);
  g_assert_cmpint(b.status, ==, 0);
  const char *keys[] = { "weights_sha256", "final_test_loss", "final_train_loss" };
  for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
    g_autofree char *x = field(&a, keys[i]), *y = field(&b, keys[i]);
    g_assert_cmpstr(x, ==, y);
  }
  tpt_run_clear(&a), tpt_run_clear(&b);
  const char *const runs[][12] = {
    { "-m", "resnet-fmnist", "-s", "timeprest", "-w", "3", "-k", "4", NULL },
    { "-m", "resnet-fmnist", "-s", "zb-v", "-w", "2", "-k", "3", NULL },
    { "-m", "resnet-fmnist", "-s", "interleaved-1f1b", "-w", "2", "--chunks", "2", "-k", "3", NULL },
  };
  /* a fresh run of one micro-batch a mini-batch has no fused forwards to speak of (it said "as the
   * plan resumed has them") */
  const char *text[] = { "train", "-m", "resnet-fmnist", "-w", "1", "-n", "1", "-k", "1", "--batch", "4", "-d",
                         "synthetic:8:4", "--profile-reps", "1", NULL };
  TptRun t = tpt_run(text);
  g_assert_cmpint(t.status, ==, 0);
  g_assert_null(strstr(t.out, "resumed"));
  tpt_run_clear(&t);
  for (size_t i = 0; i < G_N_ELEMENTS(runs); i++) {
    TptRun r = train_cli(runs[i]);
    if (r.status != 0)
      g_error("%s: exit %d: %s", runs[i][3], r.status, r.err);
    g_autofree char *loss = field(&r, "final_train_loss");
    g_assert_true(isfinite(g_ascii_strtod(loss + strlen("\"final_train_loss\": "), NULL)));
    tpt_run_clear(&r);
  }
}

/* Every shipped vision model trains one mini-batch on two stages (synthetic data of its shape), or
 * is refused up front in one line with the bytes it needs (here: under a limit below them). */
static void test_shipped(gconstpointer name)
{
  /* lr 0.001: VGG-16 diverges at batch 2 with the default 0.01, within the pipelined profile's
   * mini-batches (docs/training.md); at ImageNet's resolution one sample a mini-batch (the same
   * code, a run's time mostly its first touch of the weights' pages), and one profiled repetition */
  gboolean imagenet = g_str_has_suffix(name, "-imagenet");
  /* ResNet-50's test set through running statistics of one mini-batch of 2 overflows at 0.001 (its
   * test loss not a number, which fails the run) */
  const char *lr = g_str_has_prefix(name, "resnet50") ? "0.0001" : "0.001";
  const char *args[] = { "-m", name, "-s", "timeprest", "-w", "2", "-n", "1", "-k", "1", "--batch", imagenet ? "1" : "2",
                         "--lr", lr, "-d", imagenet ? "synthetic:4:1" : "synthetic:4:2", "--profile-reps", "1", NULL };
  TptRun r = train_cli(args);
  if (r.status != 0)
    g_error("%s: exit %d: %s", (const char *)name, r.status, r.err);
  g_autofree char *loss = field(&r, "final_train_loss");
  g_assert_true(isfinite(g_ascii_strtod(loss + strlen("\"final_train_loss\": "), NULL)));
  tpt_run_clear(&r);
}

/* A micro-batch of one sample where ResNet-50's last planes are 1x1: no variance to normalise by,
 * refused before anything runs, naming the layer. */
static void test_refused_one_value(void)
{
  const char *args[] = { "-m", "resnet50-cifar100", "-w", "2", "-n", "2", "-k", "1", "--batch", "2", NULL };
  TptRun r = train_cli(args);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "layer 18 (bottleneck, line 22 of the model) would normalise one value per channel"));
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  g_assert_cmpstr(r.out, ==, "");
  tpt_run_clear(&r);
}

/* plan leaves such micro-batches out: with only them, no candidate, and it says why */
static void test_plan_leaves_out_one_value(void)
{
  const char *args[] = { "plan", "-m", "resnet50-cifar100", "--cluster", "h200", "-b", "4", "-w", "1-2", "-n", "4", NULL };
  TptRun r = tpt_run(args);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "a micro-batch must give each batchnorm more than one value per channel"));
  tpt_run_clear(&r);
}

static void test_refused_for_memory(void)
{
  g_autofree char *script = g_strdup("ulimit -v 1500000; $TP train -m resnet50-imagenet -w 2 -n 2 -k 1 --batch 64 "
                                     "-d synthetic:64:8");
  TptRun r = tpt_run_shell(script);
  if (strstr(r.err, "Sanitizer")) {
    g_test_skip("a sanitizer build needs an unlimited address space");
    tpt_run_clear(&r);
    return;
  }
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "needs about"));
  g_assert_nonnull(strstr(r.err, "GB of memory"));
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  tpt_run_clear(&r);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/resnet-train/gpipe-two-stages-exact", test_split_is_exact);
  g_test_add_func("/resnet-train/cli", test_cli);
  g_test_add_func("/resnet-train/refused-for-memory", test_refused_for_memory);
  g_test_add_func("/resnet-train/refused-one-value", test_refused_one_value);
  g_test_add_func("/resnet-train/plan-leaves-out-one-value", test_plan_leaves_out_one_value);
  /* vgg16-cifar100: test-train-program's /train/vgg16-synthetic trains it */
  static const char *const shipped[] = { "mlp", "mlp-deep", "cnn", "resnet-fmnist", "alexnet-cifar100",
                                         "alexnet-tinyimagenet", "alexnet-imagenet",
                                         "vgg16-tinyimagenet", "vgg16-imagenet", "resnet50-cifar100",
                                         "resnet50-tinyimagenet", "resnet50-imagenet" };
  for (size_t i = 0; i < G_N_ELEMENTS(shipped); i++) {
    g_autofree char *path = g_strdup_printf("/resnet-train/shipped/%s", shipped[i]);
    g_test_add_data_func(path, shipped[i], test_shipped);
  }
  for (int i = 0; i < tp_n_presets; i++) {
    if (tp_order_chunked(tp_presets[i].order))
      continue; /* chunked: tests/test-interleaved-train.c's runs; the command line's below */
    g_autofree char *path = g_strdup_printf("/resnet-train/preset/%s", tp_presets[i].name);
    g_test_add_data_func(path, tp_presets[i].name, test_preset);
  }
  return g_test_run();
}
