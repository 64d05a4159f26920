/* test-resnet-layers.c — batch normalisation and the bottleneck block on the cpu backend against an
 * independent float64 reference written here (direct convolution loops, two-pass statistics): the
 * training forward, the running statistics (momentum 0.1, unbiased variance), the inference forward
 * from them, and every input and weight gradient against central differences of the reference;
 * then the properties the pipeline relies on: a forward of several micro-batches takes each one's
 * statistics (bit for bit the separate forwards, running statistics included), a replayed forward
 * leaves the running statistics, the split backward (I then W) leaves the fused one's gradient bit
 * for bit, and a forward keeps the bytes the model counts. */
#include "config.h"
#include "tp_backend.h"
#include "tp_model.h"
#include "tp_net.h"
#include "tp_test.h"

#include <math.h>
#include <string.h>

/* A projection block (the stride and the width change), an identity block, and batchnorm alone. */
static const char *const proj_model = "input 6 5 5\nbottleneck 3 8 stride=2\n";
static const char *const ident_model = "input 8 4 4\nbottleneck 2 8\n";
static const char *const bn_model = "input 4 3 5\nbatchnorm\n";

#define parse tpt_model_text

/* ---- the float64 reference: tensors [batch][c][h][w] ---- */

typedef struct {
  int c, h, w;
} Shape;

static void ref_conv(int B, Shape in, const double *x, int cout, int k, int stride, int pad, const double *wt,
                     Shape *out, double *y)
{
  int ho = (in.h + 2 * pad - k) / stride + 1, wo = (in.w + 2 * pad - k) / stride + 1;
  *out = (Shape){ cout, ho, wo };
  for (int b = 0; b < B; b++)
    for (int o = 0; o < cout; o++)
      for (int i = 0; i < ho; i++)
        for (int j = 0; j < wo; j++) {
          double s = 0;
          for (int c = 0; c < in.c; c++)
            for (int u = 0; u < k; u++)
              for (int v = 0; v < k; v++) {
                int r = i * stride - pad + u, q = j * stride - pad + v;
                if (r >= 0 && r < in.h && q >= 0 && q < in.w)
                  s += wt[((o * in.c + c) * k + u) * k + v] * x[((b * in.c + c) * in.h + r) * in.w + q];
              }
          y[((b * cout + o) * ho + i) * wo + j] = s;
        }
}

/* Training batchnorm in place over groups of g samples; running (2c) updated where not NULL. */
static void ref_bn(int B, int g, Shape s, double *x, const double *gamma, const double *beta, double *running)
{
  int hw = s.h * s.w;
  for (int b0 = 0; b0 < B; b0 += g)
    for (int c = 0; c < s.c; c++) {
      double n = (double)g * hw, mean = 0, var = 0;
      for (int b = b0; b < b0 + g; b++)
        for (int p = 0; p < hw; p++)
          mean += x[(b * s.c + c) * hw + p];
      mean /= n;
      for (int b = b0; b < b0 + g; b++)
        for (int p = 0; p < hw; p++)
          var += (x[(b * s.c + c) * hw + p] - mean) * (x[(b * s.c + c) * hw + p] - mean);
      var /= n;
      if (running)
        running[c] = 0.9 * running[c] + 0.1 * mean, running[s.c + c] = 0.9 * running[s.c + c] + 0.1 * var * n / (n - 1);
      for (int b = b0; b < b0 + g; b++)
        for (int p = 0; p < hw; p++) {
          double *v = &x[(b * s.c + c) * hw + p];
          *v = (*v - mean) / sqrt(var + 1e-5) * gamma[c] + beta[c];
        }
    }
}

static void ref_bn_infer(int B, Shape s, double *x, const double *gamma, const double *beta, const double *running)
{
  int hw = s.h * s.w;
  for (int b = 0; b < B; b++)
    for (int c = 0; c < s.c; c++)
      for (int p = 0; p < hw; p++) {
        double *v = &x[(b * s.c + c) * hw + p];
        *v = (*v - running[c]) / sqrt(running[s.c + c] + 1e-5) * gamma[c] + beta[c];
      }
}

static void ref_relu(size_t n, double *x)
{
  for (size_t i = 0; i < n; i++)
    x[i] = x[i] > 0 ? x[i] : 0;
}

/* One batchnorm of the reference: training over groups of g (running updated) or inference. */
static void norm(int B, int g, gboolean train, Shape s, double *x, const double *gb, double *running)
{
  if (train)
    ref_bn(B, g, s, x, gb, gb + s.c, running);
  else
    ref_bn_infer(B, s, x, gb, gb + s.c, running);
}

/* The model's one layer (bottleneck or batchnorm) on B samples at weights w (the executor's layout),
 * into y; running: the executor's statistics layout. */
static void ref_layer(const TpLayer *d, int B, int g, gboolean train, const double *x, const double *w, double *running,
                      double *y)
{
  Shape in = { (int)d->cin, (int)d->hin, (int)d->win };
  size_t n_in = (size_t)B * in.c * in.h * in.w;
  if (d->kind == TP_LAYER_BATCHNORM) {
    memcpy(y, x, n_in * sizeof(double));
    norm(B, g, train, in, y, w, running);
    return;
  }
  int mid = d->mid, out = d->out, st = d->stride;
  gboolean proj = st != 1 || in.c != out;
  size_t big = n_in * 16 + (size_t)B * out * in.h * in.w * 4;
  g_autofree double *a1 = g_new(double, big), *a2 = g_new(double, big), *a3 = g_new(double, big), *as = g_new(double, big);
  Shape s1, s2, s3, ss;
  const double *w1 = w, *g1 = w1 + mid * in.c, *w2 = g1 + 2 * mid, *g2 = w2 + mid * mid * 9, *w3 = g2 + 2 * mid;
  const double *g3 = w3 + out * mid, *ws = g3 + 2 * out, *gs = ws + out * in.c;
  ref_conv(B, in, x, mid, 1, 1, 0, w1, &s1, a1);
  norm(B, g, train, s1, a1, g1, running);
  ref_relu((size_t)B * mid * s1.h * s1.w, a1);
  ref_conv(B, s1, a1, mid, 3, st, 1, w2, &s2, a2);
  norm(B, g, train, s2, a2, g2, running + 2 * mid);
  ref_relu((size_t)B * mid * s2.h * s2.w, a2);
  ref_conv(B, s2, a2, out, 1, 1, 0, w3, &s3, a3);
  norm(B, g, train, s3, a3, g3, running + 4 * mid);
  size_t n_out = (size_t)B * out * s3.h * s3.w;
  if (proj) {
    ref_conv(B, in, x, out, 1, st, 0, ws, &ss, as);
    norm(B, g, train, ss, as, gs, running + 4 * mid + 2 * out);
  }
  for (size_t i = 0; i < n_out; i++)
    y[i] = a3[i] + (proj ? as[i] : x[i]);
  ref_relu(n_out, y);
}

/* The whole model m (conv without bias, relu, batchnorm, bottleneck) in training, each layer's weights
 * after the previous one's, into y. */
static void ref_model(const TpModel *m, int B, int g, const double *x, const double *w, double *y)
{
  size_t most = 0;
  for (int i = 0; i < tp_model_n_layers(m); i++)
    most = MAX(most, (size_t)MAX(tp_model_layer(m, i)->in_elems, tp_model_layer(m, i)->out_elems));
  g_autofree double *a = g_new(double, most * B), *b = g_new(double, most * B);
  g_autofree double *running = g_new0(double, 64 * most);
  memcpy(a, x, sizeof(double) * tp_model_layer(m, 0)->in_elems * B);
  for (int i = 0; i < tp_model_n_layers(m); i++) {
    const TpLayer *d = tp_model_layer(m, i);
    Shape in = { (int)d->cin, (int)d->hin, (int)d->win }, out;
    if (d->kind == TP_LAYER_CONV)
      ref_conv(B, in, a, d->out, d->k, d->stride, d->pad, w, &out, b);
    else if (d->kind == TP_LAYER_RELU)
      memcpy(b, a, sizeof(double) * d->in_elems * B), ref_relu((size_t)d->in_elems * B, b);
    else
      ref_layer(d, B, g, TRUE, a, w, running, b);
    w += d->params;
    double *t = a;
    a = b, b = t;
  }
  memcpy(y, a, sizeof(double) * tp_model_layer(m, tp_model_n_layers(m) - 1)->out_elems * B);
}

/* ---- a fixture: the executor's layer and the reference's inputs ---- */

typedef struct {
  TpModel *m;
  const TpLayer *d;
  TpNet *net;
  int batch, group;
  size_t np, n_in, n_out, n_st;
  float *w, *in, *r;
  double *wd, *xd;
} Fix;

static Fix fix_new(const char *text, int batch, int group)
{
  GError *err = NULL;
  Fix f = { .m = parse(text), .batch = batch, .group = group };
  f.d = tp_model_n_layers(f.m) == 1 ? tp_model_layer(f.m, 0) : NULL; /* NULL: the whole model */
  f.net = tp_net_new(f.m, 0, tp_model_n_layers(f.m), tp_backend_cpu(), &err);
  g_assert_no_error(err);
  g_assert_true(tp_net_set_group(f.net, group, &err));
  f.np = tp_net_n_params(f.net), f.n_st = tp_net_n_stats(f.net);
  f.n_in = tp_net_in_elems(f.net) * batch, f.n_out = tp_net_out_elems(f.net) * batch;
  f.w = g_new(float, f.np), f.wd = g_new(double, f.np);
  f.in = g_new(float, f.n_in), f.xd = g_new(double, f.n_in), f.r = g_new(float, f.n_out);
  g_assert_true(tp_net_init_weights(f.net, 7, f.w, &err));
  GRand *rand = g_rand_new_with_seed(42);
  for (size_t j = 0; j < f.np; j++) /* off the initial γ = 1, β = 0, so that every term matters */
    f.w[j] += (float)g_rand_double_range(rand, -0.3, 0.3), f.wd[j] = f.w[j];
  for (size_t j = 0; j < f.n_in; j++)
    f.in[j] = (float)g_rand_double_range(rand, -1, 1.5), f.xd[j] = f.in[j];
  for (size_t j = 0; j < f.n_out; j++)
    f.r[j] = (float)g_rand_double_range(rand, -1, 1);
  g_rand_free(rand);
  return f;
}

static void fix_free(Fix *f)
{
  tp_net_free(f->net);
  tp_model_free(f->m);
  g_free(f->w), g_free(f->wd), g_free(f->in), g_free(f->xd), g_free(f->r);
}

/* The executor's running statistics' starting values: means 0, variances 1. */
static double *start_stats(const Fix *f)
{
  g_autofree float *s = g_new(float, f->n_st);
  GError *err = NULL;
  g_assert_true(tp_net_get_stats(f->net, s, &err));
  double *d = g_new(double, f->n_st);
  for (size_t i = 0; i < f->n_st; i++)
    d[i] = s[i];
  return d;
}

static double rel(const double *ref, const float *got, size_t n)
{
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; i++)
    diff += (ref[i] - got[i]) * (ref[i] - got[i]), norm += ref[i] * ref[i];
  g_assert_cmpfloat(norm, >, 0);
  return sqrt(diff / norm);
}

/* Training forward, running statistics after it, and inference from them: all within float's reach
 * of the reference. */
static void test_forward(gconstpointer data)
{
  Fix f = fix_new(data, 4, 2);
  GError *err = NULL;
  g_autofree double *running = start_stats(&f), *want = g_new(double, f.n_out);
  g_autofree float *out = g_new(float, f.n_out), *st = g_new(float, f.n_st);
  TpSaved *sv = tp_saved_new(f.net, f.batch, &err);
  g_assert_true(tp_net_forward(f.net, f.w, f.in, f.batch, out, sv, NULL, NULL, &err));
  ref_layer(f.d, f.batch, f.group, TRUE, f.xd, f.wd, running, want);
  g_test_message("training forward off by %.2e", rel(want, out, f.n_out));
  g_assert_cmpfloat(rel(want, out, f.n_out), <, 1e-5);
  g_assert_true(tp_net_get_stats(f.net, st, &err));
  g_test_message("running statistics off by %.2e", rel(running, st, f.n_st));
  g_assert_cmpfloat(rel(running, st, f.n_st), <, 1e-5);
  g_assert_true(tp_net_forward(f.net, f.w, f.in, f.batch, out, NULL, NULL, NULL, &err));
  ref_layer(f.d, f.batch, f.group, FALSE, f.xd, f.wd, running, want);
  g_test_message("inference forward off by %.2e", rel(want, out, f.n_out));
  g_assert_cmpfloat(rel(want, out, f.n_out), <, 1e-5);
  g_assert_no_error(err);
  tp_saved_free(sv);
  fix_free(&f);
}

/* Σ r·y of the reference's training forward (running statistics not kept). */
static double ref_loss(const Fix *f, const double *x, const double *w)
{
  g_autofree double *y = g_new(double, f->n_out), *running = g_new0(double, MAX(f->n_st, 1));
  if (f->d)
    ref_layer(f->d, f->batch, f->group, TRUE, x, w, running, y);
  else
    ref_model(f->m, f->batch, f->group, x, w, y);
  double l = 0;
  for (size_t i = 0; i < f->n_out; i++)
    l += f->r[i] * y[i];
  return l;
}

/* ‖numeric − analytic‖/‖analytic‖, numeric by central differences of the float64 reference. */
static double fd_error(const Fix *f, double *v, const float *ana, size_t n, gboolean weights)
{
  double diff = 0, norm = 0;
  for (size_t j = 0; j < n; j++) {
    double keep = v[j], h = 1e-5;
    v[j] = keep + h;
    double up = weights ? ref_loss(f, f->xd, v) : ref_loss(f, v, f->wd);
    v[j] = keep - h;
    double down = weights ? ref_loss(f, f->xd, v) : ref_loss(f, v, f->wd);
    v[j] = keep;
    double num = (up - down) / (2 * h);
    diff += (num - ana[j]) * (num - ana[j]), norm += num * num;
  }
  g_assert_cmpfloat(norm, >, 0);
  return sqrt(diff / norm);
}

/* The training forward into out (want not NULL: within 1e-5 of it), then the backward's gradients
 * against the reference's central differences: within 1e-4 (float32 arithmetic; a wrong or missing
 * term is off by its own size). */
static void check_gradients(Fix *f, float *out, const double *want)
{
  GError *err = NULL;
  g_autofree float *grad = g_new0(float, f->np), *din = g_new(float, f->n_in);
  TpSaved *sv = tp_saved_new(f->net, f->batch, &err);
  g_assert_true(tp_net_forward(f->net, f->w, f->in, f->batch, out, sv, NULL, NULL, &err));
  if (want) {
    g_test_message("forward off by %.2e", rel(want, out, f->n_out));
    g_assert_cmpfloat(rel(want, out, f->n_out), <, 1e-5);
  }
  g_assert_true(tp_net_backward(f->net, f->w, sv, f->r, din, grad, f->batch, &err));
  g_assert_no_error(err);
  double ew = fd_error(f, f->wd, grad, f->np, TRUE), ex = fd_error(f, f->xd, din, f->n_in, FALSE);
  g_test_message("weight gradient off by %.2e, input gradient by %.2e", ew, ex);
  g_assert_cmpfloat(ew, <, 1e-4);
  g_assert_cmpfloat(ex, <, 1e-4);
  tp_saved_free(sv);
}

/* The backward's input and weight gradients (per-group statistics) against the reference. */
static void test_gradients(gconstpointer data)
{
  Fix f = fix_new(data, 4, 2);
  g_autofree float *out = g_new(float, f.n_out);
  check_gradients(&f, out, NULL);
  fix_free(&f);
}

/* One forward of two micro-batches (group 2 of batch 4) gives the two forwards' outputs and running
 * statistics (the backward's groups: tests/test-resnet-train.c, a batched backward against per
 * micro-batch ones): bit for bit where the BLAS sums every column of a product alike; OpenBLAS's
 * AVX-512 kernels for small products (another kernel for 4 samples' columns than for 2) round some
 * last bits otherwise, so within 2^-20 of the largest value. */
static void assert_same(const float *a, const float *b, size_t n)
{
  double most = 0, diff = 0;
  for (size_t i = 0; i < n; i++)
    most = MAX(most, fabs(a[i])), diff = MAX(diff, fabs((double)a[i] - b[i]));
  g_assert_cmpfloat(diff, <=, most * 0x1p-20);
}

static void test_groups(gconstpointer data)
{
  Fix f = fix_new(data, 4, 2);
  GError *err = NULL;
  size_t half_out = f.n_out / 2, half_in = f.n_in / 2;
  g_autofree float *one = g_new(float, f.n_out), *two = g_new(float, f.n_out);
  g_autofree float *st1 = g_new(float, f.n_st), *st2 = g_new(float, f.n_st), *st0 = g_new(float, f.n_st);
  g_assert_true(tp_net_get_stats(f.net, st0, &err));
  TpSaved *sv = tp_saved_new(f.net, f.batch, &err);
  g_assert_true(tp_net_forward(f.net, f.w, f.in, f.batch, one, sv, NULL, NULL, &err));
  g_assert_true(tp_net_get_stats(f.net, st1, &err));
  g_assert_true(tp_net_set_stats(f.net, st0, &err));
  for (int k = 0; k < 2; k++)
    g_assert_true(tp_net_forward(f.net, f.w, f.in + k * half_in, 2, two + k * half_out, sv, NULL, NULL, &err));
  g_assert_true(tp_net_get_stats(f.net, st2, &err));
  g_assert_no_error(err);
  assert_same(one, two, f.n_out);
  assert_same(st1, st2, f.n_st);
  /* the whole batch as one group differs: the statistics are the micro-batch's */
  g_assert_true(tp_net_set_group(f.net, 0, &err));
  g_assert_true(tp_net_forward(f.net, f.w, f.in, f.batch, two, sv, NULL, NULL, &err));
  double most = 0, diff = 0;
  for (size_t i = 0; i < f.n_out; i++)
    most = MAX(most, fabs(one[i])), diff = MAX(diff, fabs((double)one[i] - two[i]));
  g_assert_cmpfloat(diff, >, most * 0x1p-10);
  tp_saved_free(sv);
  fix_free(&f);
}

/* A replayed forward (recomputation) computes the same output and leaves the running statistics. */
static void test_replay(gconstpointer data)
{
  Fix f = fix_new(data, 4, 2);
  GError *err = NULL;
  g_autofree float *a = g_new(float, f.n_out), *b = g_new(float, f.n_out);
  g_autofree float *st1 = g_new(float, f.n_st), *st2 = g_new(float, f.n_st);
  TpSaved *sv = tp_saved_new(f.net, f.batch, &err);
  g_assert_true(tp_net_forward(f.net, f.w, f.in, f.batch, a, sv, NULL, NULL, &err));
  g_assert_true(tp_net_get_stats(f.net, st1, &err));
  tp_saved_set_replay(sv, TRUE);
  g_assert_true(tp_net_forward(f.net, f.w, f.in, f.batch, b, sv, NULL, NULL, &err));
  g_assert_true(tp_net_get_stats(f.net, st2, &err));
  g_assert_no_error(err);
  g_assert_cmpmem(a, f.n_out * sizeof(float), b, f.n_out * sizeof(float));
  g_assert_cmpmem(st1, f.n_st * sizeof(float), st2, f.n_st * sizeof(float));
  tp_saved_set_replay(sv, FALSE); /* and a forward that is not a replay moves them */
  g_assert_true(tp_net_forward(f.net, f.w, f.in, f.batch, b, sv, NULL, NULL, &err));
  g_assert_true(tp_net_get_stats(f.net, st2, &err));
  g_assert_cmpfloat(memcmp(st1, st2, f.n_st * sizeof(float)), !=, 0);
  tp_saved_free(sv);
  fix_free(&f);
}

/* A stem and two bottlenecks through one stage against the float64 reference: the output within
 * float's reach, the input and weight gradients (every layer's) against its central differences. */
static void test_whole(void)
{
  Fix f = fix_new("input 2 6 6\nconv 4 3 pad=1 bias=0\nbatchnorm\nrelu\nbottleneck 2 8 stride=2\nbottleneck 2 8\n", 4, 2);
  g_autofree float *out = g_new(float, f.n_out);
  g_autofree double *want = g_new(double, f.n_out);
  ref_model(f.m, f.batch, f.group, f.xd, f.wd, want);
  check_gradients(&f, out, want);
  fix_free(&f);
}

/* I then W leaves the fused backward's weight gradient and input gradient bit for bit. */
static void test_split(gconstpointer data)
{
  Fix f = fix_new(data, 4, 2);
  GError *err = NULL;
  g_autofree float *out = g_new(float, f.n_out), *g1 = g_new0(float, f.np), *g2 = g_new0(float, f.np);
  g_autofree float *d1 = g_new(float, f.n_in), *d2 = g_new(float, f.n_in);
  TpSaved *sv = tp_saved_new_split(f.net, f.batch, &err);
  g_assert_true(tp_net_forward(f.net, f.w, f.in, f.batch, out, sv, NULL, NULL, &err));
  g_assert_true(tp_net_backward(f.net, f.w, sv, f.r, d1, g1, f.batch, &err));
  g_assert_true(tp_net_backward_input(f.net, f.w, sv, f.r, d2, f.batch, &err));
  for (size_t j = 0; j < f.np; j++)
    g_assert_cmpfloat(g2[j], ==, 0); /* I leaves the gradient */
  g_assert_true(tp_net_backward_weight(f.net, f.w, sv, g2, &err));
  g_assert_no_error(err);
  g_assert_cmpmem(g1, f.np * sizeof(float), g2, f.np * sizeof(float));
  g_assert_cmpmem(d1, f.n_in * sizeof(float), d2, f.n_in * sizeof(float));
  tp_saved_free(sv);
  fix_free(&f);
}

/* A forward keeps per sample the elements the model counts (tp_model.c's bottleneck). */
static void test_saved_bytes(gconstpointer data)
{
  Fix f = fix_new(data, 1, 0);
  g_assert_cmpuint(tp_net_saved_bytes_per_sample(f.net), ==, (guint64)f.d->stored_elems * sizeof(float));
  fix_free(&f);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  const char *const models[][2] = { { "projection", proj_model }, { "identity", ident_model }, { "batchnorm", bn_model } };
  void (*tests[])(gconstpointer) = { test_forward, test_gradients, test_groups, test_replay, test_split, test_saved_bytes };
  const char *names[] = { "forward", "gradients", "groups", "replay", "split", "saved-bytes" };
  for (size_t t = 0; t < G_N_ELEMENTS(tests); t++)
    for (size_t i = 0; i < G_N_ELEMENTS(models); i++) {
      g_autofree char *path = g_strdup_printf("/resnet/%s/%s", names[t], models[i][0]);
      g_test_add_data_func(path, models[i][1], tests[t]);
    }
  g_test_add_func("/resnet/whole-stage", test_whole);
  return g_test_run();
}
