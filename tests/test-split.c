/* test-split.c — the executor's split backward (zero-bubble schedules' I and W): on every backend
 * (cpu, the naive double reference, cuda where there is one) I then W leave the input gradient and
 * the accumulated weight gradient of the fused backward bit for bit, and agree with central finite
 * differences of the loss; through the runtime, zb-h1, zb-h2, zb-1p and zb-2p end with the weights of 1f1b (the
 * same order of gradient sums: bit for bit) and of gpipe (within 1e-5) on mlp-deep, keep the
 * activations and output gradients the simulator counts, and train runs a preset, a PyTorch
 * schedule file with I and W, and a file whose I is fed by a fused B (one message tag for both). */
#include "tp_backend_ref.h"
#include "tp_cost.h"
#include "tp_metrics.h"
#include "tp_net.h"
#include "tp_runtime.h"
#include "tp_sim.h"
#include "tp_test.h"
#include "tp_test_mpi.h" /* tpt_json_value */
#include "tp_test_run.h"

#include <math.h>

/* one stage's layers of each kind the split touches: conv (with and without bias), pooling,
 * dropout, linear, the loss; the middle one without a loss (it receives an output gradient) */
static const char *const models[] = {
  "input 2 6 6\nconv 3 3 pad=1\nrelu\nmaxpool 2\nflatten\nlinear 5\nsoftmax_ce\n",
  "input 1 5 5\nconv 2 3 pad=1 bias=0\nrelu\nconv 4 3 stride=2\nflatten\ndropout\nlinear 6\n",
  "input 1 1 12\nflatten\nlinear 8\nrelu\nlinear 8\nrelu\nlinear 3\nsoftmax_ce\n",
};

static TpModel *parse(const char *text)
{
  GError *err = NULL;
  TpModel *m = tp_model_parse(text, strlen(text), "split.model", &err);
  g_assert_no_error(err);
  return m;
}

static float *upload(const TpBackend *be, const float *host, size_t n)
{
  GError *err = NULL;
  float *d = be->iface->alloc(be, n ? n : 1, &err);
  g_assert_no_error(err);
  g_assert_true(be->iface->upload(be, d, host, n, &err));
  return d;
}

static float *download(const TpBackend *be, const float *dev, size_t n)
{
  GError *err = NULL;
  float *h = g_new(float, n ? n : 1);
  g_assert_true(be->iface->download(be, h, dev, n, &err) && tp_backend_sync(be, &err));
  g_assert_no_error(err);
  return h;
}

typedef struct {
  float *dx, *grad; /* host copies */
} Grads;

/* One forward of B samples, then either the fused backward or I then W, onto a gradient buffer
 * that starts at grad0 (the products accumulate).  want_dx FALSE: a first stage's backward. */
static Grads backward_once(const TpBackend *be, const TpModel *m, const float *x, const float *w, const float *dout,
                           const gint32 *labels, const float *grad0, int B, gboolean split, gboolean want_dx)
{
  GError *err = NULL;
  TpNet *net = tp_net_new(m, 0, tp_model_n_layers(m), be, &err);
  g_assert_no_error(err);
  size_t in = tp_net_in_elems(net), out = tp_net_out_elems(net), np = tp_net_n_params(net);
  gboolean loss = tp_net_has_loss(net);
  float *dx_ = upload(be, x, B * in), *dw = upload(be, w, np), *dg = upload(be, grad0, np);
  float *dd = loss ? NULL : upload(be, dout, B * out), *dy = upload(be, dout, B * out);
  float *ddx = want_dx ? upload(be, x, B * in) : NULL;
  TpSaved *sv = split ? tp_saved_new_split(net, B, &err) : tp_saved_new(net, B, &err);
  g_assert_no_error(err);
  g_assert_true(tp_net_forward(net, dw, dx_, B, loss ? NULL : dy, sv, labels, NULL, &err));
  if (split)
    g_assert_true(tp_net_backward_input(net, dw, sv, dd, ddx, 2 * B, &err) &&
                  tp_net_backward_weight(net, dw, sv, dg, &err));
  else
    g_assert_true(tp_net_backward(net, dw, sv, dd, ddx, dg, 2 * B, &err));
  g_assert_no_error(err);
  Grads g = { want_dx ? download(be, ddx, B * in) : NULL, download(be, dg, np) };
  tp_saved_free(sv);
  float *bufs[] = { dx_, dw, dg, dd, dy, ddx };
  for (size_t i = 0; i < G_N_ELEMENTS(bufs); i++)
    if (bufs[i])
      be->iface->free(be, bufs[i]);
  tp_net_free(net);
  return g;
}

static void fill(GRand *r, float *v, size_t n, double lo, double hi)
{
  for (size_t i = 0; i < n; i++)
    v[i] = (float)g_rand_double_range(r, lo, hi);
}

/* The loss (Σ −log p) or Σ dout·y of one forward at weights w, on the cpu backend, in double. */
static double objective(const TpModel *m, const float *x, const float *w, const float *dout, const gint32 *labels,
                        int B)
{
  GError *err = NULL;
  TpNet *net = tp_net_new(m, 0, tp_model_n_layers(m), tp_backend_cpu(), &err);
  size_t out = tp_net_out_elems(net);
  g_autofree float *y = g_new(float, B * out);
  TpSaved *sv = tp_saved_new(net, B, &err); /* with saved state: the forward's dropout masks */
  TpLossStats st = { 0 };
  g_assert_true(tp_net_forward(net, w, x, B, y, sv, labels, &st, &err));
  g_assert_no_error(err);
  double j = 0;
  if (tp_net_has_loss(net))
    j = st.loss_sum / (2.0 * B); /* the backward's scale: 1 / mini-batch samples */
  else
    for (size_t i = 0; i < B * out; i++)
      j += (double)dout[i] * y[i];
  tp_saved_free(sv);
  tp_net_free(net);
  return j;
}

/* g[i] = ∂objective/∂v[i] by central differences of step h, v being x or w (restored after). */
static void central_diff(const TpModel *m, float *x, float *w, const float *dout, const gint32 *labels, int B, float *v,
                         size_t n, double h, double *g)
{
  for (size_t i = 0; i < n; i++) {
    float keep = v[i];
    v[i] = keep + (float)h;
    double up = objective(m, x, w, dout, labels, B);
    v[i] = keep - (float)h;
    double down = objective(m, x, w, dout, labels, B);
    v[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
}

static double rel_err(const float *a, const double *b, size_t n)
{
  double d = 0, r = 0;
  for (size_t i = 0; i < n; i++)
    d += (a[i] - b[i]) * (a[i] - b[i]), r += b[i] * b[i];
  return sqrt(d / fmax(r, 1e-30));
}

static void check_backend(const TpBackend *be)
{
  enum { B = 3 };
  for (size_t k = 0; k < G_N_ELEMENTS(models); k++) {
    g_autoptr(TpModel) m = parse(models[k]);
    GError *err = NULL;
    TpNet *net = tp_net_new(m, 0, tp_model_n_layers(m), tp_backend_cpu(), &err);
    g_assert_no_error(err);
    size_t in = tp_net_in_elems(net), out = tp_net_out_elems(net), np = tp_net_n_params(net);
    g_assert_cmpuint(tp_net_dy_bytes_per_sample(net), >, 0);
    tp_net_free(net);
    GRand *r = g_rand_new_with_seed(0x5b1 + (guint32)k);
    g_autofree float *x = g_new(float, B * in), *w = g_new(float, np), *dout = g_new(float, B * out);
    g_autofree float *grad0 = g_new(float, np);
    gint32 labels[B];
    fill(r, x, B * in, -1, 1), fill(r, w, np, -0.5, 0.5), fill(r, dout, B * out, -1, 1), fill(r, grad0, np, -1, 1);
    for (int n = 0; n < B; n++)
      labels[n] = g_rand_int_range(r, 0, (gint32)out);
    for (int first = 0; first < 2; first++) { /* a first stage wants no input gradient */
      Grads f = backward_once(be, m, x, w, dout, labels, grad0, B, FALSE, !first);
      Grads s = backward_once(be, m, x, w, dout, labels, grad0, B, TRUE, !first);
      if (memcmp(f.grad, s.grad, sizeof(float) * np) != 0 || (!first && memcmp(f.dx, s.dx, sizeof(float) * B * in)))
        g_error("%s, model %zu%s: I then W differ from the fused backward", tp_backend_name(be), k,
                first ? " (no input gradient)" : "");
      if (!first) { /* central differences of the objective, in the weights and in the input */
        const double h = 1e-3;
        g_autofree double *gw = g_new(double, np), *gx = g_new(double, B * in);
        g_autofree float *got = g_new(float, np);
        central_diff(m, x, w, dout, labels, B, w, np, h, gw);
        central_diff(m, x, w, dout, labels, B, x, B * in, h, gx);
        for (size_t i = 0; i < np; i++)
          got[i] = s.grad[i] - grad0[i];
        double ew = rel_err(got, gw, np), ex = rel_err(s.dx, gx, B * in);
        g_test_message("%s, model %zu: weight gradient %g, input gradient %g from finite differences",
                       tp_backend_name(be), k, ew, ex);
        if (!(ew < 2e-3 && ex < 2e-3))
          g_error("%s, model %zu: I and W differ from finite differences by %g (weights), %g (input)",
                  tp_backend_name(be), k, ew, ex);
      }
      g_free(f.dx), g_free(f.grad), g_free(s.dx), g_free(s.grad);
    }
    g_rand_free(r);
  }
}

static void test_net_cpu(void) { check_backend(tp_backend_cpu()); }
static void test_net_reference(void) { check_backend(test_backend_reference()); }

static void test_net_cuda(void)
{
  GError *err = NULL;
  const TpBackend *be = tp_backend_get("cuda", &err);
  if (!be) {
    g_autofree char *why = g_strdup_printf("no GPU (or no driver) here (%s)", err->message);
    tpt_skip_unless_required("cuda", why);
    g_error_free(err);
    return;
  }
  check_backend(be);
}

/* ---- through the runtime ------------------------------------------------------------------------ */

enum { BATCH = 32, K_RUN = 6 };
static TpModel *deep;
static TpDataset *data;

/* mlp-deep on W stages of equal layer counts, N micro-batches; split: the run's config says so. */
static float *train(const TpSchedule *s, TpRunResult *res, size_t *n)
{
  return tpt_train_even(deep, data, BATCH, s, res, n);
}

/* zb-h1, zb-h2, zb-1p and zb-2p against 1f1b (its backwards in the same micro-batch order: the same
 * sums, bit for bit) and gpipe (backwards in reverse order: within 1e-5), W = 2 and 3, N = 4. */
static void test_same_weights(void)
{
  static const int cases[][2] = { { 2, 4 }, { 3, 4 } };
  for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
    int W = cases[c][0], N = cases[c][1];
    size_t n1;
    TpRunResult r;
    g_autofree float *wg = NULL, *wf = NULL;
    size_t n = tpt_flush_references(deep, data, BATCH, W, N, K_RUN, &wg, &wf);
    g_assert_cmpfloat(tpt_rel_diff(wf, wg, n), <=, 1e-5);
    const char *zb[] = { "zb-h1", "zb-h2", "zb-1p", "zb-2p" };
    for (int i = 0; i < 4; i++) {
      g_autoptr(TpSchedule) s = tpt_preset(zb[i], W, N, K_RUN);
      g_assert_true(tp_schedule_has_split(s));
      g_autofree float *w = train(s, &r, &n1);
      g_assert_true(r.versions_match);
      double d = tpt_rel_diff(w, wg, n);
      g_test_message("%s W=%d N=%d: %g from gpipe's weights (relative)", zb[i], W, N, d);
      if (memcmp(w, wf, sizeof(float) * n) != 0 || !(d <= 1e-5))
        g_error("%s W=%d N=%d: weights differ from 1f1b's or from gpipe's (by %g)", zb[i], W, N, d);
      tp_run_result_clear(&r);
    }
  }
}

/* The activations a pending W keeps: the store's count and bytes against the simulator's, and
 * the bytes of each micro-batch include the output gradients I keeps for W. */
static void test_memory(void)
{
  const char *zb[] = { "zb-h1", "zb-h2", "zb-1p", "zb-2p" };
  for (int i = 0; i < 4; i++) {
    g_autoptr(TpSchedule) s = tpt_preset(zb[i], 3, 4, 3);
    TpRunResult r;
    size_t n;
    g_free(train(s, &r, &n));
    GError *err = NULL;
    g_autoptr(TpCost) cost = tp_cost_unit(3);
    g_autoptr(TpSim) sim = tp_sim_run(s, cost, &err);
    g_assert_no_error(err);
    TpMetrics *m = tp_metrics_compute(sim);
    for (int st = 0; st < 3; st++) {
      g_assert_cmpint(r.stats[st].max_activations, ==, m->stage[st].peak_activations);
      g_assert_cmpint(r.stats[st].activations, ==, 0);
      int L = tp_model_n_layers(deep);
      TpNet *net = tp_net_new(deep, st * L / 3, (st + 1) * L / 3, tp_backend_cpu(), &err);
      g_assert_no_error(err);
      gint64 per = (gint64)(tp_net_saved_bytes_per_sample(net) + tp_net_dy_bytes_per_sample(net)) * (BATCH / 4);
      g_assert_cmpint(r.stats[st].peak[TP_MEMCAT_ACTIVATIONS], ==, per * r.stats[st].max_activations);
      tp_net_free(net);
    }
    tp_metrics_free(m);
    tp_run_result_clear(&r);
  }
}

/* train: a preset and a PyTorch schedule file with I and W (the same operations: the same weights);
 * the file with --recompute refused. */
static void test_cli(void)
{
  g_autofree char *model = g_build_filename(TP_SRCDIR, "models", "mlp-deep.model", NULL);
  g_autofree char *path = tpt_tmp_path("zb-h1.torch.csv");
  const char *const exp[] = { "schedule", "-s", "zb-h1", "-w", "2", "-n", "4", "-k", "1", "--format", "torch",
                              "--output", path, NULL };
  TptRun r = tpt_run(exp);
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  const char *const preset[] = { "train", "-s", "zb-h1", "-w", "2", "-n", "4", "-k", "1", "-m", model, "--batch", "32",
                                 "--data", "synthetic:256:32", "--order-from", "slots", "--profile-reps", "1",
                                 "--format", "json", "--quiet", NULL };
  TptRun a = tpt_run(preset);
  if (a.status != 0)
    g_error("train -s zb-h1: status %d: %s", a.status, a.err);
  const char *const file[] = { "train", "--schedule", path, "-m", model, "--batch", "32", "--data", "synthetic:256:32",
                               "--profile-reps", "1", "--format", "json", "--quiet", NULL };
  TptRun b = tpt_run(file);
  if (b.status != 0)
    g_error("train --schedule (PyTorch CSV): status %d: %s", b.status, b.err);
  g_autofree char *sa = tpt_json_value(a.out, "weights_sha256"), *sb = tpt_json_value(b.out, "weights_sha256");
  g_autofree char *vm = tpt_json_value(b.out, "versions_match");
  g_assert_cmpstr(sa, ==, sb);
  g_assert_cmpstr(vm, ==, "true");
  tpt_run_clear(&a);
  tpt_run_clear(&b);
  /* with recomputation W would have no saved state: refused, one line naming the file's operation */
  const char *const rc[] = { "train", "--schedule", path, "--recompute", "--data", "synthetic", "--quiet", NULL };
  TptRun c = tpt_run(rc);
  g_assert_cmpint(c.status, ==, 2);
  g_assert_cmpint(tpt_lines(c.err), ==, 1);
  g_assert_nonnull(strstr(c.err, ".csv splits its backwards into I and W, and a split backward is not recomputed"));
  tpt_run_clear(&c);
  tpt_tmp_remove(path);
}

/* I on stage 1 fed by a fused B on stage 2 (the same message): 1f1b's operations, its weights. */
static void test_mixed(void)
{
  static const char csv[] = "# timeprest-schedule order=zb-h1 policy=sync workers=2 micro_batches=2 mini_batches=1 "
                            "fixed_on=slots\nstage,op,mini_batch,micro_batch,version,source\n"
                            "1,F,1,1,0,fixed\n1,F,1,2,0,fixed\n1,I,1,1,0,fixed\n1,W,1,1,0,fixed\n1,I,1,2,0,fixed\n"
                            "1,W,1,2,0,fixed\n1,U,1,,0,fixed\n"
                            "2,F,1,1,0,fixed\n2,B,1,1,0,fixed\n2,F,1,2,0,fixed\n2,B,1,2,0,fixed\n2,U,1,,0,fixed\n";
  g_autofree char *path = tpt_tmp_path("mixed.csv");
  g_assert_true(g_file_set_contents(path, csv, -1, NULL));
  const char *const file[] = { "train", "--schedule", path, "--batch", "32", "--data", "synthetic:256:32", "--timeout",
                               "20", "--profile-reps", "1", "--format", "json", "--quiet", NULL };
  const char *const ref[] = { "train", "-s", "1f1b", "-w", "2", "-n", "2", "-k", "1", "--order-from", "slots", "--batch",
                              "32", "--data", "synthetic:256:32", "--profile-reps", "1", "--format", "json", "--quiet",
                              NULL };
  TptRun a = tpt_run(file), b = tpt_run(ref);
  if (a.status != 0 || b.status != 0)
    g_error("status %d (%s), %d (%s)", a.status, a.err, b.status, b.err);
  g_autofree char *sa = tpt_json_value(a.out, "weights_sha256"), *sb = tpt_json_value(b.out, "weights_sha256");
  g_assert_cmpstr(sa, ==, sb);
  tpt_run_clear(&a);
  tpt_run_clear(&b);
  tpt_tmp_remove(path);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  GError *err = NULL;
  deep = tp_model_load(TP_SRCDIR "/models/mlp-deep.model", &err);
  g_assert_no_error(err);
  data = tp_dataset_synthetic(512, 28, 28, 5);
  g_test_add_func("/split/net/cpu", test_net_cpu);
  g_test_add_func("/split/net/reference", test_net_reference);
  g_test_add_func("/split/net/cuda", test_net_cuda);
  g_test_add_func("/split/runtime/same-weights", test_same_weights);
  g_test_add_func("/split/runtime/memory", test_memory);
  g_test_add_func("/split/cli", test_cli);
  g_test_add_func("/split/mixed", test_mixed);
  int rc = g_test_run();
  tp_model_free(deep);
  tp_dataset_free(data);
  return rc;
}
