/* test-model.c — workload descriptions against the networks' well-known totals, the partitioner
 * against brute force, device and cluster files, and the analytic stage costs by hand. */
#include "tp_analytic.h"
#include "tp_cluster.h"
#include "tp_model.h"
#include "tp_partition.h"
#include "tp_test.h"

#include <glib/gstdio.h>

/* Parameter totals: torchvision's published counts for the ImageNet networks; the CIFAR-100 and
 * Tiny-ImageNet variants differ only in the classifier (and AlexNet-CIFAR is the common 2.47M net). */
/* torchvision's bottleneck: three convolutions without bias, three batchnorms, a projection's two */
static long long bottleneck(long long cin, long long mid, long long out)
{
  return cin * mid + 2 * mid + mid * mid * 9 + 2 * mid + mid * out + 2 * out + (cin != out ? cin * out + 2 * out : 0);
}

static void test_parameter_totals(void)
{
  struct { const char *name; long long params; } cases[] = {
    { "alexnet-imagenet", 61100840 },
    { "vgg16-imagenet", 138357544 },
    { "resnet50-imagenet", 25557032 },
    { "alexnet-tinyimagenet", 61100840 - (4096LL * 1000 + 1000) + (4096LL * 200 + 200) },
    { "vgg16-cifar100", 138357544 - (4096LL * 1000 + 1000) + (4096LL * 100 + 100) },
    { "vgg16-tinyimagenet", 138357544 - (4096LL * 1000 + 1000) + (4096LL * 200 + 200) },
    { "resnet50-cifar100", 25557032 - (2048LL * 1000 + 1000) + (2048LL * 100 + 100) },
    { "resnet50-tinyimagenet", 25557032 - (2048LL * 1000 + 1000) + (2048LL * 200 + 200) },
    /* 2,472,266 with 10 classes (the well-known 2.47M), 90 more classes of 257 weights each */
    { "alexnet-cifar100", 2472266 + 90LL * 257 },
    { "mlp", 784LL * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10 },
    { "cnn", 25LL * 16 + 16 + 16 * 25 * 32 + 32 + 32 * 7 * 7 * 128 + 128 + 128 * 10 + 10 },
    { "resnet-fmnist", 9LL * 16 + 2 * 16 + bottleneck(16, 16, 64) + bottleneck(64, 32, 128) + bottleneck(128, 32, 128) +
                         bottleneck(128, 64, 256) + 256 * 10 + 10 },
  };
  /* the smallest plane a batchnorm normalises: ResNet-50's last stage on 32x32 inputs is 1x1,
   * resnet-fmnist's 7x7, and cnn has none */
  const struct { const char *name; long long plane; } planes[] = { { "resnet50-cifar100", 1 },
                                                                   { "resnet50-imagenet", 49 },
                                                                   { "resnet-fmnist", 49 },
                                                                   { "cnn", 0 } };
  for (guint i = 0; i < G_N_ELEMENTS(planes); i++) {
    g_autoptr(TpModel) m = tpt_model(planes[i].name);
    g_assert_cmpint(tp_model_least_norm_plane(m), ==, planes[i].plane);
  }
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(TpModel) m = tpt_model(cases[i].name);
    if (m->params != cases[i].params)
      g_error("%s: %lld parameters, expected %lld", cases[i].name, m->params, cases[i].params);
    g_assert_cmpint(m->dataset, >, 0);
    const TpLayer *last = tp_model_layer(m, tp_model_n_layers(m) - 1);
    g_assert_cmpint(last->kind, ==, TP_LAYER_SOFTMAX_CE);
  }
}

/* Multiply-accumulates of the ImageNet networks (widely quoted: AlexNet 0.71 G, VGG-16 15.47 G,
 * ResNet-50 4.09 G) within 3%; our FLOPs count 2 per multiply-accumulate. */
static void test_flops(void)
{
  struct { const char *name; double gmacs; } cases[] = {
    { "alexnet-imagenet", 0.714 }, { "vgg16-imagenet", 15.47 }, { "resnet50-imagenet", 4.09 } };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(TpModel) m = tpt_model(cases[i].name);
    double gmacs = m->fwd_flops / 2e9;
    if (gmacs < cases[i].gmacs * 0.97 || gmacs > cases[i].gmacs * 1.03)
      g_error("%s: %.3f GMACs, expected about %.3f", cases[i].name, gmacs, cases[i].gmacs);
    g_assert_cmpfloat(m->bwd_flops, >, 1.5 * m->fwd_flops);
  }
  /* one layer by hand: cnn's first convolution, 1x28x28 -> 16x28x28 with a 5x5 kernel */
  g_autoptr(TpModel) m = tpt_model("cnn");
  const TpLayer *c1 = tp_model_layer(m, 0);
  g_assert_cmpfloat(c1->fwd_flops, ==, 2.0 * 25 * 16 * 28 * 28);
  g_assert_cmpint(c1->out_elems, ==, 16 * 28 * 28);
  g_assert_cmpint(c1->stored_elems, ==, 28 * 28);
}

static void expect_model_error(const char *text, const char *needle)
{
  GError *err = NULL;
  TpModel *m = tp_model_parse(text, strlen(text), "bad.model", &err);
  g_assert_null(m);
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  if (!strstr(err->message, needle))
    g_error("message '%s' lacks '%s'", err->message, needle);
  g_error_free(err);
}

static void test_bad_models(void)
{
  expect_model_error("input 1 28 28\nflatten\nsoftmax 10\n", "bad.model:3: unknown layer 'softmax'");
  expect_model_error("input 1 28 28\nlinear 10\n", "bad.model:2: linear needs a flat input");
  expect_model_error("input 1 8 8\nconv 4 9\n", "bad.model:2: conv: a 9x9 kernel does not fit a 8x8 input");
  expect_model_error("input 1 8 8\nconv 4\n", "bad.model:2: expected 'conv OUT K");
  expect_model_error("input 8 4 4\nbottleneck 0 16\n", "bad.model:2: expected 'bottleneck MID OUT [stride=S]': '0' is "
                     "not a whole number from 1 to 1048576");
  expect_model_error("input 8 4 4\nbottleneck 4 4000000000\n", "'4000000000' is not a whole number from 1 to");
  expect_model_error("input 1 8 8\nconv 4 3 strid=2\n", "bad.model:2: conv: bad option 'strid=2'");
  expect_model_error("conv 4 3\n", "bad.model:1: expected 'input CHANNELS HEIGHT WIDTH' (or 'tokens CONTEXT VOCAB') before the first layer");
  expect_model_error("input 1 8\n", "bad.model:1: expected 'input CHANNELS HEIGHT WIDTH'");
  expect_model_error("input 1 8 8\n# nothing\n", "bad.model: no layers");
  expect_model_error("input 1 8 8\ndataset many\nflatten\n", "bad.model:2: expected 'dataset SAMPLES'");
  /* a name goes into reports as written: no quotes, backslashes or control characters */
  expect_model_error("name a\"b\ninput 1 8 8\nflatten\n", "bad.model:1: name 'a\"b' holds a double quote");
  expect_model_error("name a\\b\ninput 1 8 8\nflatten\n", "bad.model:1: name 'a\\\\b' holds a backslash");
  expect_model_error("name a\x01b\ninput 1 8 8\nflatten\n", "holds a control character");
}

/* Names from files: what a report cannot carry is refused where it is given and replaced where it
 * comes from a file's name. */
static void test_names(void)
{
  g_assert_null(tp_name_problem("A100 (80 GB) — été"));
  g_assert_cmpstr(tp_name_problem("a\"b"), ==, "a double quote");
  g_assert_cmpstr(tp_name_problem("a\\b"), ==, "a backslash");
  g_assert_cmpstr(tp_name_problem("a\tb"), ==, "a control character");
  g_assert_cmpstr(tp_name_problem("a\xc2\x85"), ==, "a control character"); /* U+0085 */
  g_assert_cmpstr(tp_name_problem("a\xff"), ==, "not UTF-8");
  g_autofree char *f = tp_name_from_file("/x/y/q\"\xff\\z.cluster");
  g_assert_cmpstr(f, ==, "q_\xef\xbf\xbd_z");
  g_autofree char *dir = g_dir_make_tmp("tp-cluster-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "odd\"one.cluster", NULL);
  g_assert_true(g_file_set_contents(path, "[cluster]\ndevices = rtx-2080\nlink_bandwidth = 1e9\n", -1, NULL));
  GError *err = NULL;
  g_autoptr(TpCluster) c = tp_cluster_load(path, &err);
  g_assert_no_error(err);
  g_assert_cmpstr(c->name, ==, "odd_one");
  g_assert_cmpint(g_unlink(path), ==, 0);
  g_assert_cmpint(g_rmdir(dir), ==, 0);
}

/* ---- partitioner -------------------------------------------------------------------------- */

typedef struct {
  int L, W;
  double w[16];     /* layer weights */
  double speed[6];  /* per stage */
  double mem[16];   /* layer memory */
  double edge[16];  /* a time at each layer's input boundary, as a link's (not monotone) */
  double cap;
} Toy;

static double toy_cost(int s, int lo, int hi, gpointer data)
{
  const Toy *t = data;
  double sum = 0;
  for (int i = lo; i < hi; i++)
    sum += t->w[i];
  return sum / t->speed[s];
}

/* toy_cost, or the time at the stage's input boundary if larger: toy_cost is its floor. */
static double toy_linked(int s, int lo, int hi, gpointer data)
{
  const Toy *t = data;
  return MAX(toy_cost(s, lo, hi, data), s > 0 ? t->edge[lo] : 0);
}

static gboolean toy_fits(int s, int lo, int hi, gpointer data)
{
  const Toy *t = data;
  double sum = 0;
  for (int i = lo; i < hi; i++)
    sum += t->mem[i];
  return sum <= t->cap * (s + 1) / 2.0;
}

/* The recurrence the partitioner solves, every start of every stage tried (its tie rule: each stage's
 * earliest start among equals), as the reference of its pruned search. */
static gboolean plain_partition(int L, int W, const TpRanges *r, int *bounds, double *best)
{
  double f[8][17] = { { 0 } };
  int arg[8][17];
  for (int s = 0; s < W; s++)
    for (int j = 0; j <= L; j++) {
      f[s][j] = G_MAXDOUBLE, arg[s][j] = -1;
      for (int i = s, last = s == 0 ? 0 : j - 1; i <= last && i < j; i++) { /* stage 0 starts at 0 */
        double prev = s == 0 ? 0 : f[s - 1][i];
        if (prev == G_MAXDOUBLE || (r->fits && !r->fits(s, i, j, r->data)))
          continue;
        double v = MAX(prev, r->cost(s, i, j, r->data));
        if (v < f[s][j])
          f[s][j] = v, arg[s][j] = i;
      }
    }
  if (f[W - 1][L] == G_MAXDOUBLE)
    return FALSE;
  bounds[W] = L;
  for (int s = W - 1; s >= 0; s--)
    bounds[s] = arg[s][bounds[s + 1]];
  *best = f[W - 1][L];
  return TRUE;
}

static void test_partition_brute(void)
{
  GRand *rng = g_rand_new_with_seed(7);
  int compared = 0, infeasible = 0;
  for (int trial = 0; trial < 600; trial++) {
    Toy t = { .L = g_rand_int_range(rng, 1, 17), .W = g_rand_int_range(rng, 1, 7) };
    int spread = g_rand_int_range(rng, 2, 20); /* few distinct weights, some none: many ties */
    for (int i = 0; i < t.L; i++)
      t.w[i] = g_rand_int_range(rng, 0, spread), t.mem[i] = g_rand_int_range(rng, 1, 10),
      t.edge[i] = g_rand_int_range(rng, 0, 2 * spread);
    for (int s = 0; s < t.W; s++)
      t.speed[s] = g_rand_int_range(rng, 1, 4);
    t.cap = g_rand_int_range(rng, 5, 30);
    for (int how = 0; how < 8; how++) { /* fits, a floor, a cost above its floor */
      int b1[8], b2[8], b3[8];
      double v1 = -1, v2 = -2, v3 = -3;
      const TpRanges r = { .cost = how & 4 ? toy_linked : toy_cost, .floor = how & 2 ? toy_cost : NULL,
                           .fits = how & 1 ? toy_fits : NULL, .data = &t };
      gboolean ok1 = tp_partition(t.L, t.W, &r, b1, &v1);
      gboolean ok3 = plain_partition(t.L, t.W, &r, b3, &v3);
      gboolean ok2 = t.W <= 4 && t.L <= 12 ? tp_partition_brute(t.L, t.W, &r, b2, &v2) : ok3;
      g_assert_cmpint(ok1, ==, ok2);
      g_assert_cmpint(ok1, ==, ok3);
      if (!ok1) {
        infeasible++;
        continue;
      }
      if (t.W <= 4 && t.L <= 12)
        g_assert_cmpfloat(v1, ==, v2);
      g_assert_cmpfloat(v1, ==, v3);
      for (int s = 0; s <= t.W; s++) /* the same split among equals as every start tried */
        g_assert_cmpint(b1[s], ==, b3[s]);
      /* the returned split achieves the value it claims, and is contiguous and complete */
      double worst = 0;
      g_assert_cmpint(b1[0], ==, 0);
      g_assert_cmpint(b1[t.W], ==, t.L);
      for (int s = 0; s < t.W; s++) {
        g_assert_cmpint(b1[s], <, b1[s + 1]);
        worst = MAX(worst, r.cost(s, b1[s], b1[s + 1], &t));
        if (r.fits)
          g_assert_true(r.fits(s, b1[s], b1[s + 1], &t));
      }
      g_assert_cmpfloat(worst, ==, v1);
      compared++;
    }
  }
  g_rand_free(rng);
  g_assert_cmpint(compared, >, 2000);
  g_assert_cmpint(infeasible, >, 0);
}

/* ---- devices, clusters, analytic costs ----------------------------------------------------- */

static void test_clusters(void)
{
  const char *names[] = { "A", "B", "C", "h200" };
  const int workers[] = { 2, 3, 4, 1 };
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    GError *err = NULL;
    g_autoptr(TpCluster) c = tp_cluster_load(names[i], &err);
    g_assert_no_error(err);
    g_assert_cmpint(c->n, ==, workers[i]);
    g_assert_cmpfloat(c->link_bandwidth, >, 0);
  }
  g_autoptr(TpCluster) c = tp_cluster_load("C", NULL);
  g_assert_cmpstr(c->dev[0].name, ==, "Quadro RTX 6000");
  g_assert_cmpstr(c->dev[3].name, ==, "RTX 2080");
  g_assert_cmpfloat(c->dev[3].memory, ==, 8589934592.0);
}

static void expect_cluster_error(const char *text, const char *needle)
{
  g_autofree char *dir = g_dir_make_tmp("tp-cluster-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "bad.cluster", NULL);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  GError *err = NULL;
  TpCluster *c = tp_cluster_load(path, &err);
  g_assert_null(c);
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_autofree char *want = g_strdup_printf("%s%s", strchr(needle, ':') == needle ? path : "", needle);
  if (!strstr(err->message, want))
    g_error("message '%s' lacks '%s'", err->message, want);
  g_error_free(err);
  g_unlink(path);
  g_rmdir(dir);
}

static void test_bad_clusters(void)
{
  expect_cluster_error("[cluster]\ndevices = rtx-2080\nlink_bandwidth = fast\n", ":3: [cluster] link_bandwidth: expected a number");
  expect_cluster_error("[cluster]\ndevices = warp-drive\nlink_bandwidth = 1e9\n", ":2: [cluster] devices: no device file for 'warp-drive'");
  expect_cluster_error("[cluster]\ndevices = rtx-2080\nlink_bandwidth = 1e9\ncolour = red\n", ":4: [cluster] colour: unknown key");
  expect_cluster_error("[cluster]\nlink_bandwidth = 1e9\n", "missing key 'devices'");
  expect_cluster_error("[cluster]\ndevices = rtx-2080\n", "missing key 'link_bandwidth'");
  expect_cluster_error("[nodes]\n", "[cluster]: missing group");
  expect_cluster_error("[cluster]\ndevices =\nlink_bandwidth = 1e9\n", ":2: [cluster] devices: no devices");
  expect_cluster_error("[cluster]\nname = a\"b\ndevices = rtx-2080\nlink_bandwidth = 1e9\n",
                       ":2: [cluster] name: 'a\"b' holds a double quote");
  expect_cluster_error("[cluster]\nname = a\\nb\ndevices = rtx-2080\nlink_bandwidth = 1e9\n", "holds a backslash");
  expect_cluster_error("[cluster]\nname =\ndevices = rtx-2080\nlink_bandwidth = 1e9\n", ":2: [cluster] name: empty");
  /* a device's name too, and a file name of blanks still names the cluster */
  g_autofree char *dev = tpt_tmp_path("odd.device");
  g_assert_true(g_file_set_contents(dev, "[device]\nname = GPU \"X\"\nflops = 1e12\nmemory = 1e9\nmemory_bandwidth = 1e11\n",
                                    -1, NULL));
  GError *err = NULL;
  g_assert_null(tp_device_load(dev, &err));
  g_assert_nonnull(err);
  g_assert_nonnull(strstr(err->message, ":2: [device] name: 'GPU \"X\"' holds a double quote"));
  g_clear_error(&err);
  tpt_tmp_remove(dev);
  g_autofree char *blank = tp_name_from_file("/x/ .cluster");
  g_assert_cmpstr(blank, ==, "unnamed");
  expect_cluster_error("[cluster]\ndevices = rtx-2080\nlink_bandwidth = 1e9\nlink_bandwidth = 2e9\n",
                       ":4: [cluster] link_bandwidth: given twice (first on line 3)");
  expect_cluster_error("[cluster]\ndevices = rtx-2080\n[cluster]\nlink_bandwidth = 1e9\n",
                       ":3: [cluster]: group given twice (first on line 1)");
}

/* The shipped list names every cluster of models/clusters, and each loads. */
static void test_clusters_shipped(void)
{
  g_auto(GStrv) names = g_strsplit(TP_CLUSTERS_SHIPPED, ", ", -1);
  for (int i = 0; names[i]; i++) {
    GError *err = NULL;
    g_autoptr(TpCluster) c = tp_cluster_load(names[i], &err);
    g_assert_no_error(err);
  }
  g_autofree char *dir = g_build_filename(g_getenv("TP_SRCDIR") ? g_getenv("TP_SRCDIR") : ".", "models", "clusters", NULL);
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  g_assert_nonnull(d);
  int files = 0;
  for (const char *f; (f = g_dir_read_name(d));)
    if (g_str_has_suffix(f, ".cluster")) {
      g_autofree char *name = g_strndup(f, strlen(f) - strlen(".cluster"));
      g_assert_true(g_strv_contains((const char *const *)names, name));
      files++;
    }
  g_assert_cmpint(files, ==, g_strv_length(names));
}

static void test_bad_device(void)
{
  g_autofree char *path = tpt_tmp_path("tp-bad.device");
  g_assert_true(g_file_set_contents(path, "[device]\nflops = 1e12\nmemory = 1e9\nmemory_bandwidth = 1e11\n"
                                          "efficiency = 1.5\n", -1, NULL));
  GError *err = NULL;
  g_assert_null(tp_device_load(path, &err));
  g_autofree char *want = g_strdup_printf("%s:5: [device] efficiency: expected a number from 1e-06 to 1, got '1.5'", path);
  g_assert_nonnull(err);
  if (!g_str_has_prefix(err->message, want))
    g_error("'%s' lacks '%s'", err->message, want);
  g_error_free(err);
  tpt_tmp_remove(path);
}

/* Stage costs by hand for the mlp on cluster A (2 stages) with a fixed split. */
static void test_analytic_costs(void)
{
  g_autoptr(TpModel) m = tpt_model("mlp");
  g_autoptr(TpCluster) c = tp_cluster_load("A", NULL);
  GError *err = NULL;
  g_autoptr(TpAnalytic) a = tp_analytic_new(m, c, 2, 4, 256, &err);
  g_assert_no_error(err);
  int counts[2] = { 3, 4 }; /* flatten linear relu | linear relu linear softmax_ce */
  g_assert_true(tp_analytic_split(a, counts, NULL, NULL, &err));
  g_autoptr(TpCost) cost = tp_analytic_cost(a);
  double b = 64; /* samples per micro-batch */
  const TpDevice *d0 = &c->dev[0], *d1 = &c->dev[1];
  double f0 = 0, f1 = 0;
  for (int i = 0; i < 3; i++)
    f0 += tp_layer_time(tp_model_layer(m, i), d0, 4, b, FALSE);
  for (int i = 3; i < 7; i++)
    f1 += tp_layer_time(tp_model_layer(m, i), d1, 4, b, FALSE);
  g_assert_cmpfloat_with_epsilon(cost->stage[0].fwd, f0, 1e-15);
  g_assert_cmpfloat_with_epsilon(cost->stage[1].fwd, f1, 1e-15);
  /* the first linear: 784x256 MACs per sample, compute-bound or memory-bound, whichever is slower */
  const TpLayer *lin = tp_model_layer(m, 1);
  double t = MAX(b * 2.0 * 784 * 256 / (d0->flops * d0->efficiency),
                 4.0 * (b * (784 + 256) + lin->params) / (d0->bandwidth * d0->efficiency));
  g_assert_cmpfloat_with_epsilon(tp_layer_time(lin, d0, 4, b, FALSE), t, 1e-18);
  g_assert_cmpfloat(cost->stage[0].act_bytes, ==, 4.0 * b * 256);   /* relu output */
  g_assert_cmpfloat(cost->stage[1].grad_bytes, ==, 4.0 * b * 256);  /* gradient of that */
  g_assert_cmpfloat(cost->stage[0].weight_bytes, ==, 4.0 * (784 * 256 + 256));
  g_assert_cmpfloat(cost->samples_per_micro, ==, b);
  g_assert_cmpint(cost->stage[1].device, ==, 1);
  /* bad sizes */
  g_assert_null(tp_analytic_new(m, c, 3, 4, 256, &err));
  g_assert_nonnull(strstr(err->message, "cluster A has 2 workers"));
  g_clear_error(&err);
  g_assert_null(tp_analytic_new(m, c, 2, 3, 256, &err));
  g_assert_nonnull(strstr(err->message, "do not split into N=3"));
  g_clear_error(&err);
}

/* Sizes: shapes multiply in 64 bits (a 2 x 32768 x 32768 input flattens to 2^31 features, counted
 * right), counts past the bound and layer counts past TP_MODEL_MAX_LAYERS are refused at their line. */
static void test_model_sizes(void)
{
  const char *big = "input 2 32768 32768\nflatten\nlinear 10\nsoftmax_ce\n";
  GError *err = NULL;
  g_autoptr(TpModel) m = tp_model_parse(big, strlen(big), "big.model", &err);
  g_assert_no_error(err);
  g_assert_cmpint(m->in_c, ==, 2);
  g_assert_cmpint(m->in_h, ==, 32768);
  g_assert_cmpint(m->in_w, ==, 32768);
  g_assert_cmpint(tp_model_layer(m, 0)->cout, ==, 2LL << 30);
  g_assert_cmpint(m->params, ==, (2LL << 30) * 10 + 10);
  g_assert_cmpfloat(m->fwd_flops, >, 0);
  expect_model_error("input 1048576 65536 65536\nflatten\n", "bad.model:2: flatten: more than 1e+15 elements");
  expect_model_error("input 1048576 8 8\nconv 1048576 1024\n", "bad.model:2: conv: a 1024x1024 kernel does not fit");
  expect_model_error("input 1048576 1024 1024\nconv 1048576 1 pad=1000000\n", "bad.model:2: conv: more than 1e+15");
  expect_model_error("input 2 2 2\nconv 4 3 stride=2\n", "bad.model:2: conv: a 3x3 kernel does not fit a 2x2 input");
  g_autoptr(GString) many = g_string_new("input 1 1 8\nflatten\n");
  for (int i = 0; i < 200000; i++)
    g_string_append(many, "relu\n");
  g_autofree char *want = g_strdup_printf("bad.model:%d: more than %d layers", TP_MODEL_MAX_LAYERS + 2,
                                          TP_MODEL_MAX_LAYERS);
  expect_model_error(many->str, want);
  expect_model_error("input 1 8 8\nconv 4 3 strid\x01=2\n", "bad.model:2: conv: bad option 'strid\\x01=2'");
}

static void expect_device_error(const char *text, const char *needle)
{
  g_autofree char *dir = g_dir_make_tmp("tp-device-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "x.device", NULL);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  GError *err = NULL;
  TpDevice *d = tp_device_load(path, &err);
  if (needle) {
    g_assert_null(d);
    g_assert_nonnull(err);
    g_autofree char *want = g_strdup_printf("%s%s", path, needle);
    if (!g_str_has_prefix(err->message, want))
      g_error("'%s' lacks '%s'", err->message, want);
    g_error_free(err);
  } else {
    g_assert_no_error(err);
    g_assert_cmpfloat(d->flops, ==, 1e12);
    tp_device_clear(d);
    g_free(d);
  }
  g_unlink(path);
  g_rmdir(dir);
}

/* Device files: unknown groups and keys refused, numbers bounded so that derived times stay finite,
 * a byte-order mark skipped. */
static void test_device_strict(void)
{
#define DEV "[device]\nflops = 1e12\nmemory = 1e9\nmemory_bandwidth = 1e11\n"
  expect_device_error(DEV, NULL);
  expect_device_error("\xEF\xBB\xBF" DEV, NULL);
  expect_device_error(DEV "[extra]\nx = 1\n", ":5: [extra]: unknown group");
  expect_device_error(DEV "colour = red\n", ":5: [device] colour: unknown key");
  expect_device_error(DEV "efficiency = 4.9e-324\n", ":5: [device] efficiency: expected a number from 1e-06 to 1");
  expect_device_error("[device]\nflops = 1e308\nmemory = 1e9\nmemory_bandwidth = 1e11\n",
                      ":2: [device] flops: expected a number from 1 to 1e+30, got '1e308'");
#undef DEV
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/model/parameter-totals", test_parameter_totals);
  g_test_add_func("/model/flops", test_flops);
  g_test_add_func("/model/bad-models", test_bad_models);
  g_test_add_func("/model/names", test_names);
  g_test_add_func("/model/sizes", test_model_sizes);
  g_test_add_func("/model/partition-brute-force", test_partition_brute);
  g_test_add_func("/model/clusters", test_clusters);
  g_test_add_func("/model/bad-clusters", test_bad_clusters);
  g_test_add_func("/model/bad-device", test_bad_device);
  g_test_add_func("/model/clusters-shipped", test_clusters_shipped);
  g_test_add_func("/model/device-strict", test_device_strict);
  g_test_add_func("/model/analytic-costs", test_analytic_costs);
  return g_test_run();
}
