/* test-layers.c — the executor's numerical core on the cpu backend: every layer's forward against a
 * double-precision reference written here (direct loops, no im2col), every backward (input and
 * parameter gradients) against central finite differences of that reference; a backward on another
 * weight version than its forward; the optimizer step and the blend against their closed forms;
 * stage splits of mlp and cnn against the whole network; refusal of unsupported layers. */
#include "tp_backend.h"
#include "tp_error.h"
#include "tp_model.h"
#include "tp_net.h"

#include <math.h>
#include <string.h>

static const TpBackend *be;

static TpModel *parse(const char *text)
{
  GError *err = NULL;
  TpModel *m = tp_model_parse(text, strlen(text), "test.model", &err);
  g_assert_no_error(err);
  return m;
}

static TpNet *whole(const TpModel *m)
{
  GError *err = NULL;
  TpNet *net = tp_net_new(m, 0, tp_model_n_layers(m), be, &err);
  g_assert_no_error(err);
  return net;
}

static void fill(GRand *r, float *v, size_t n, double lo, double hi)
{
  for (size_t i = 0; i < n; i++)
    v[i] = (float)g_rand_double_range(r, lo, hi);
}

/* ---- double-precision reference, layer by layer (parameters: weights, then bias) ------------ */

static double at(const double *x, const TpLayer *d, int n, int c, int i, int j)
{
  if (i < 0 || i >= d->hin || j < 0 || j >= d->win)
    return NAN; /* padding */
  return x[(((size_t)n * d->cin + c) * d->hin + i) * d->win + j];
}

/* y of one layer; returns the parameters it used. softmax_ce gives probabilities. */
static size_t ref_layer(const TpLayer *d, int B, const double *x, const double *w, double *y)
{
  size_t in = (size_t)d->in_elems, out = (size_t)d->out_elems;
  switch (d->kind) {
  case TP_LAYER_LINEAR:
    for (int n = 0; n < B; n++)
      for (int o = 0; o < d->cout; o++) {
        double s = d->bias ? w[(size_t)d->cout * d->cin + o] : 0.0;
        for (int i = 0; i < d->cin; i++)
          s += w[(size_t)o * d->cin + i] * x[n * in + i];
        y[n * out + o] = s;
      }
    return (size_t)d->params;
  case TP_LAYER_CONV:
    for (int n = 0; n < B; n++)
      for (int o = 0; o < d->cout; o++)
        for (int oh = 0; oh < d->hout; oh++)
          for (int ow = 0; ow < d->wout; ow++) {
            double s = d->bias ? w[(size_t)d->cout * d->cin * d->k * d->k + o] : 0.0;
            for (int c = 0; c < d->cin; c++)
              for (int a = 0; a < d->k; a++)
                for (int b = 0; b < d->k; b++) {
                  double v = at(x, d, n, c, oh * d->stride - d->pad + a, ow * d->stride - d->pad + b);
                  if (!isnan(v))
                    s += w[(((size_t)o * d->cin + c) * d->k + a) * d->k + b] * v;
                }
            y[((n * d->cout + o) * d->hout + oh) * d->wout + ow] = s;
          }
    return (size_t)d->params;
  case TP_LAYER_MAXPOOL:
  case TP_LAYER_AVGPOOL:
    for (int n = 0; n < B; n++)
      for (int c = 0; c < d->cin; c++)
        for (int oh = 0; oh < d->hout; oh++)
          for (int ow = 0; ow < d->wout; ow++) {
            double best = -INFINITY, sum = 0.0;
            for (int a = 0; a < d->k; a++)
              for (int b = 0; b < d->k; b++) {
                double v = at(x, d, n, c, oh * d->stride - d->pad + a, ow * d->stride - d->pad + b);
                if (!isnan(v))
                  best = fmax(best, v), sum += v;
              }
            y[((n * d->cin + c) * d->hout + oh) * d->wout + ow] =
              d->kind == TP_LAYER_MAXPOOL ? best : sum / (d->k * d->k);
          }
    return 0;
  case TP_LAYER_AVGPOOL_TO: /* PyTorch's adaptive average pooling, window bounds by floor and ceil */
    for (int n = 0; n < B; n++)
      for (int c = 0; c < d->cin; c++)
        for (int oh = 0; oh < d->hout; oh++)
          for (int ow = 0; ow < d->wout; ow++) {
            int a0 = (int)floor((double)oh * d->hin / d->hout), a1 = (int)ceil((double)(oh + 1) * d->hin / d->hout);
            int b0 = (int)floor((double)ow * d->win / d->wout), b1 = (int)ceil((double)(ow + 1) * d->win / d->wout);
            double sum = 0.0;
            for (int a = a0; a < a1; a++)
              for (int b = b0; b < b1; b++)
                sum += at(x, d, n, c, a, b);
            y[((n * d->cin + c) * d->hout + oh) * d->wout + ow] = sum / ((a1 - a0) * (b1 - b0));
          }
    return 0;
  case TP_LAYER_RELU:
    for (size_t i = 0; i < B * in; i++)
      y[i] = x[i] > 0 ? x[i] : 0;
    return 0;
  case TP_LAYER_FLATTEN:
    memcpy(y, x, sizeof(double) * B * in);
    return 0;
  case TP_LAYER_SOFTMAX_CE:
    for (int n = 0; n < B; n++) {
      double mx = -INFINITY, s = 0;
      for (size_t c = 0; c < in; c++)
        mx = fmax(mx, x[n * in + c]);
      for (size_t c = 0; c < in; c++)
        s += exp(x[n * in + c] - mx);
      for (size_t c = 0; c < in; c++)
        y[n * in + c] = exp(x[n * in + c] - mx) / s;
    }
    return 0;
  default: g_assert_not_reached();
  }
}

/* The model's layers in double; y gets the last layer's output. */
static void ref_forward(const TpModel *m, int B, const double *x, const double *w, double *y)
{
  g_autofree double *cur = g_memdup2(x, sizeof(double) * B * tp_model_layer(m, 0)->in_elems);
  for (int i = 0; i < tp_model_n_layers(m); i++) {
    const TpLayer *d = tp_model_layer(m, i);
    double *next = g_new(double, B * d->out_elems);
    w += ref_layer(d, B, cur, w, next);
    g_free(cur);
    cur = next;
  }
  memcpy(y, cur, sizeof(double) * B * tp_model_layer(m, tp_model_n_layers(m) - 1)->out_elems);
}

/* The scalar whose gradient the backward computes: Σ dout·y, or the loss over `mb` samples. */
static double ref_objective(const TpModel *m, int B, const double *x, const double *w, const double *dout,
                            const gint32 *labels, int mb)
{
  const TpLayer *last = tp_model_layer(m, tp_model_n_layers(m) - 1);
  size_t out = (size_t)last->out_elems;
  g_autofree double *y = g_new(double, B * out);
  ref_forward(m, B, x, w, y);
  double s = 0;
  for (size_t i = 0; i < B * out; i++)
    if (last->kind == TP_LAYER_SOFTMAX_CE)
      s += (size_t)labels[i / out] == i % out ? -log(y[i]) / mb : 0.0;
    else
      s += dout[i] * y[i];
  return s;
}

/* The model text on one line, for messages. */
static const char *one_line(const char *text)
{
  static char buf[512];
  g_strlcpy(buf, text, sizeof buf);
  return g_strdelimit(g_strchomp(buf), "\n", ';');
}

static double *to_double(const float *v, size_t n)
{
  double *d = g_new(double, n);
  for (size_t i = 0; i < n; i++)
    d[i] = v[i];
  return d;
}

/* Largest |a − b| relative to the largest |b| (at least 1). */
static double rel_error(const float *a, const double *b, size_t n)
{
  double err = 0, scale = 1;
  for (size_t i = 0; i < n; i++)
    scale = fmax(scale, fabs(b[i]));
  for (size_t i = 0; i < n; i++)
    err = fmax(err, fabs(a[i] - b[i]));
  return err / scale;
}

/* Central differences of the objective with respect to v[0..n) (x or w), in double. */
static void finite_diff(const TpModel *m, int B, double *x, double *w, double *v, size_t n, const double *dout,
                        const gint32 *labels, int mb, double *g)
{
  const double h = 1e-6;
  for (size_t i = 0; i < n; i++) {
    double keep = v[i];
    v[i] = keep + h;
    double up = ref_objective(m, B, x, w, dout, labels, mb);
    v[i] = keep - h;
    double down = ref_objective(m, B, x, w, dout, labels, mb);
    v[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
}

/* Forward against the reference, backward against finite differences. The backward runs with
 * weights wb (the forward with wf); pass wb = wf for a plain check. The parameter gradient is
 * differentiated at wf and the input gradient at wb: for one linear or conv layer that is exactly
 * what a backward on another version must give (dX = dY·W_b, dW = dYᵀ·X_saved). */
static void check_model(const char *text, int B, gboolean other_version)
{
  g_autoptr(TpModel) m = parse(text);
  TpNet *net = whole(m);
  GRand *r = g_rand_new_with_seed(0x5eed + B);
  size_t in = tp_net_in_elems(net), out = tp_net_out_elems(net), np = tp_net_n_params(net);
  gboolean loss = tp_net_has_loss(net);
  int mb = loss ? 2 * B + 1 : 0; /* the mini-batch is larger than this micro-batch */
  g_autofree float *x = g_new(float, B * in), *wf = g_new(float, np + 1), *wb = g_new(float, np + 1);
  g_autofree float *y = g_new(float, B * out), *dout = g_new(float, B * out), *dx = g_new(float, B * in);
  g_autofree float *grad = g_new(float, np + 1), *grad0 = g_new(float, np + 1);
  g_autofree gint32 *labels = g_new(gint32, B);
  fill(r, x, B * in, -1, 1);
  fill(r, wf, np, -0.5, 0.5);
  if (other_version)
    fill(r, wb, np, -0.5, 0.5);
  else
    memcpy(wb, wf, sizeof(float) * np);
  fill(r, dout, B * out, -1, 1);
  fill(r, grad0, np, -1, 1);
  memcpy(grad, grad0, sizeof(float) * np);
  for (int n = 0; n < B; n++)
    labels[n] = g_rand_int_range(r, 0, (gint32)out);
  GError *err = NULL;
  TpSaved *saved = tp_saved_new(net, B + 2, &err);
  g_assert_no_error(err);
  TpLossStats st = { 0 };
  g_assert_true(tp_net_forward(net, wf, x, B, y, saved, labels, &st, &err));
  g_assert_no_error(err);
  g_assert_true(tp_net_backward(net, wb, saved, loss ? NULL : dout, dx, grad, mb, &err));
  g_assert_no_error(err);

  g_autofree double *xd = to_double(x, B * in), *wfd = to_double(wf, np), *wbd = to_double(wb, np);
  g_autofree double *doutd = to_double(dout, B * out), *yd = g_new(double, B * out);
  ref_forward(m, B, xd, wfd, yd);
  double e = rel_error(y, yd, B * out);
  if (e > 1e-5)
    g_error("%s: forward differs from the reference by %g", one_line(text), e);
  if (loss) {
    double want = ref_objective(m, B, xd, wfd, NULL, labels, 1);
    g_assert_cmpfloat(fabs(st.loss_sum - want), <, 1e-5 * fmax(1, want));
  }
  g_autofree double *gx = g_new(double, B * in), *gw = g_new(double, np + 1);
  finite_diff(m, B, xd, wbd, xd, B * in, doutd, labels, mb, gx);
  if ((e = rel_error(dx, gx, B * in)) > 1e-4)
    g_error("%s: input gradient differs from finite differences by %g", one_line(text), e);
  finite_diff(m, B, xd, wfd, wfd, np, doutd, labels, mb, gw);
  for (size_t i = 0; i < np; i++)
    grad[i] -= grad0[i]; /* accumulated onto what was there */
  if ((e = rel_error(grad, gw, np)) > 1e-4)
    g_error("%s: parameter gradient differs from finite differences by %g", one_line(text), e);
  tp_saved_free(saved);
  tp_net_free(net);
  g_rand_free(r);
}

static void test_linear(void)
{
  check_model("input 7 1 1\nlinear 5\n", 3, FALSE);
  check_model("input 6 1 1\nlinear 9 bias=0\n", 2, FALSE);
  check_model("input 2 3 3\nflatten\nlinear 4\n", 3, FALSE);
}

static void test_conv(void)
{
  check_model("input 2 5 5\nconv 3 3\n", 2, FALSE);
  check_model("input 3 7 6\nconv 4 3 stride=2 pad=1\n", 3, FALSE);
  check_model("input 2 4 5\nconv 2 2 pad=2\n", 2, FALSE);
  check_model("input 1 9 9\nconv 3 5 stride=3 pad=2 bias=0\n", 2, FALSE);
  /* two samples' unfolded columns fill a chunk (2^15 floats): chunks of 2 and 1 samples */
  check_model("input 1 24 24\nconv 1 5 pad=2\n", 3, FALSE);
  /* one sample per chunk and few output channels: dy used as it lies, not transposed */
  check_model("input 1 28 28\nconv 2 5 pad=2\n", 2, FALSE);
  /* batch 1 (one sample per chunk): rows of exactly 16, of 33, and stride 2 with padding */
  check_model("input 2 6 16\nconv 3 3 pad=1\n", 1, FALSE);
  check_model("input 1 4 35\nconv 2 3\n", 1, FALSE);
  check_model("input 3 7 6\nconv 4 3 stride=2 pad=1\n", 1, FALSE);
}

static void test_pool(void)
{
  check_model("input 2 6 6\nmaxpool 2\n", 3, FALSE);
  check_model("input 2 7 7\nmaxpool 3 stride=2 pad=1\n", 2, FALSE);
  check_model("input 2 7 7\nmaxpool 3 stride=2\n", 2, FALSE);
  check_model("input 2 6 6\navgpool 2\n", 3, FALSE);
  check_model("input 2 7 5\navgpool 3 stride=2 pad=1\n", 2, FALSE);
  check_model("input 2 7 5\nmaxpool 2\n", 1, FALSE); /* 2×2 on odd sides: the last row and column left out */
  /* adaptive: VGG's 1×1 → 7×7 (each output copies the input), uneven overlapping windows, shrinking */
  check_model("input 3 1 1\navgpool_to 7 7\n", 2, FALSE);
  check_model("input 2 5 7\navgpool_to 3 2\n", 3, FALSE);
  check_model("input 2 6 6\navgpool_to 2 3\nflatten\nlinear 4\nsoftmax_ce\n", 2, FALSE);
}

/* 2×2 max-pooling picks the first of equal elements (and of a window holding a NaN, the first
 * element when it is the NaN): the rule of the general scan, which the unrolled case must keep */
static void test_maxpool_ties(void)
{
  const TpBackend *be = tp_backend_cpu();
  TpWindow s = { .cin = 1, .hin = 4, .win = 4, .k = 2, .stride = 2, .pad = 0, .cout = 1, .hout = 2, .wout = 2 };
  /* windows: all equal; equal pair after a smaller one; the maximum last; a NaN first */
  float x[16] = { 1, 1, 0, 2,  1, 1, 2, 2,  -1, -1, NAN, 9,  -1, 0, 1, 1 };
  float y[4];
  gint32 arg[4];
  GError *err = NULL;
  g_assert_true(be->iface->maxpool_forward(be, &s, 1, x, y, arg, &err));
  g_assert_no_error(err);
  g_assert_cmpint(arg[0], ==, 0);
  g_assert_cmpint(arg[1], ==, 3);
  g_assert_cmpint(arg[2], ==, 13);
  g_assert_cmpint(arg[3], ==, 10);
  g_assert_cmpfloat(y[0], ==, 1.0f);
  g_assert_cmpfloat(y[1], ==, 2.0f);
  g_assert_cmpfloat(y[2], ==, 0.0f);
  g_assert_true(isnan(y[3]));
}

static void test_bad_label(void)
{
  g_autoptr(TpModel) m = parse("input 3 1 1\nsoftmax_ce\n");
  TpNet *net = whole(m);
  float x[6] = { 0 };
  gint32 labels[2] = { 2, 3 };
  GError *err = NULL;
  TpSaved *s = tp_saved_new(net, 2, &err);
  g_assert_false(tp_net_forward(net, NULL, x, 2, NULL, s, labels, NULL, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_assert_nonnull(strstr(err->message, "label 3 of sample 1"));
  g_error_free(err);
  tp_saved_free(s);
  tp_net_free(net);
}

typedef struct {
  TpNet *net;
  const float *w, *x;
  float *out, *grad;
  int reps;
} Job;

/* Forward and backward of a stage, repeated (what one stage thread does). */
static gpointer run_job(gpointer data)
{
  Job *j = data;
  GError *err = NULL;
  gint32 labels[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
  TpSaved *s = tp_saved_new(j->net, 8, &err);
  for (int r = 0; r < j->reps; r++) {
    g_assert_true(tp_net_forward(j->net, j->w, j->x, 8, j->out, s, labels, NULL, &err));
    g_assert_true(tp_net_backward(j->net, j->w, s, NULL, NULL, j->grad, 8, &err));
  }
  g_assert_no_error(err);
  tp_saved_free(s);
  return NULL;
}

/* Two stages' nets running at once in two threads (both calling BLAS) give exactly what they give
 * one after the other. */
static void test_threads(void)
{
  GError *err = NULL;
  g_autoptr(TpModel) m = tp_model_load("cnn", &err);
  g_assert_no_error(err);
  GRand *r = g_rand_new_with_seed(21);
  Job seq[2], par[2];
  for (int k = 0; k < 2; k++) {
    TpNet *net = whole(m);
    size_t np = tp_net_n_params(net), in = tp_net_in_elems(net) * 8, out = tp_net_out_elems(net) * 8;
    float *w = g_new(float, np), *x = g_new(float, in);
    g_assert_true(tp_net_init_weights(net, 100 + k, w, &err));
    fill(r, x, in, 0, 1);
    seq[k] = (Job){ net, w, x, g_new(float, out), g_new0(float, np), 3 };
    par[k] = (Job){ whole(m), w, x, g_new(float, out), g_new0(float, np), 3 };
    run_job(&seq[k]);
  }
  GThread *t[2];
  for (int k = 0; k < 2; k++)
    t[k] = g_thread_new("stage", run_job, &par[k]);
  for (int k = 0; k < 2; k++) {
    g_thread_join(t[k]);
    size_t np = tp_net_n_params(seq[k].net), out = tp_net_out_elems(seq[k].net) * 8;
    g_assert_cmpmem(par[k].out, out * sizeof(float), seq[k].out, out * sizeof(float));
    g_assert_cmpmem(par[k].grad, np * sizeof(float), seq[k].grad, np * sizeof(float));
    g_free((float *)seq[k].w), g_free((float *)seq[k].x);
    g_free(seq[k].out), g_free(seq[k].grad), g_free(par[k].out), g_free(par[k].grad);
    tp_net_free(seq[k].net), tp_net_free(par[k].net);
  }
  g_rand_free(r);
}

static void test_relu_softmax(void)
{
  check_model("input 3 4 4\nrelu\n", 3, FALSE);
  check_model("input 6 1 1\nsoftmax_ce\n", 4, FALSE);
  check_model("input 5 1 1\nlinear 4\nsoftmax_ce\n", 3, FALSE);
}

/* The stack of the cnn description in miniature: every layer kind, the saved regions shared. */
static void test_stack(void)
{
  check_model("input 2 8 8\nconv 3 3 pad=1\nrelu\nmaxpool 2\nconv 4 3 pad=1\nrelu\navgpool 2\nflatten\n"
              "linear 5\nrelu\nlinear 3\nsoftmax_ce\n", 3, FALSE);
}

/* One layer, forward on version a, backward on version b. */
static void test_other_version_single(void)
{
  check_model("input 7 1 1\nlinear 5\n", 3, TRUE);
  check_model("input 3 7 6\nconv 4 3 stride=2 pad=1\n", 2, TRUE);
}

/* linear–relu–linear, forward on a and backward on b, against the formula written out:
 * dr = dy·W2b, dh = dr ⊙ [h_a > 0], dx = dh·W1b, dW2 = dyᵀ·relu(h_a), dW1 = dhᵀ·x. */
static void test_other_version_stack(void)
{
  enum { B = 3, I = 6, H = 5, O = 4 };
  g_autoptr(TpModel) m = parse("input 6 1 1\nlinear 5\nrelu\nlinear 4\n");
  TpNet *net = whole(m);
  size_t np = tp_net_n_params(net);
  g_assert_cmpuint(np, ==, I * H + H + H * O + O);
  GRand *r = g_rand_new_with_seed(11);
  float x[B * I], wa[I * H + H + H * O + O], wb[I * H + H + H * O + O], dy[B * O], dx[B * I], y[B * O];
  float grad[I * H + H + H * O + O] = { 0 };
  fill(r, x, B * I, -1, 1), fill(r, wa, np, -1, 1), fill(r, wb, np, -1, 1), fill(r, dy, B * O, -1, 1);
  GError *err = NULL;
  TpSaved *s = tp_saved_new(net, B, &err);
  g_assert_true(tp_net_forward(net, wa, x, B, y, s, NULL, NULL, &err));
  g_assert_true(tp_net_backward(net, wb, s, dy, dx, grad, 0, &err));
  g_assert_no_error(err);
  const float *W1a = wa, *b1a = wa + I * H, *W1b = wb, *W2b = wb + I * H + H;
  double h[B][H], dh[B][H], want_dx[B * I], want_g[I * H + H + H * O + O];
  memset(want_g, 0, sizeof want_g);
  for (int n = 0; n < B; n++)
    for (int j = 0; j < H; j++) {
      h[n][j] = b1a[j];
      for (int i = 0; i < I; i++)
        h[n][j] += (double)W1a[j * I + i] * x[n * I + i];
      double dr = 0;
      for (int o = 0; o < O; o++)
        dr += (double)dy[n * O + o] * W2b[o * H + j];
      dh[n][j] = h[n][j] > 0 ? dr : 0;
    }
  for (int n = 0; n < B; n++) {
    for (int i = 0; i < I; i++) {
      want_dx[n * I + i] = 0;
      for (int j = 0; j < H; j++)
        want_dx[n * I + i] += dh[n][j] * W1b[j * I + i];
    }
    for (int j = 0; j < H; j++) {
      for (int i = 0; i < I; i++)
        want_g[j * I + i] += dh[n][j] * x[n * I + i];
      want_g[I * H + j] += dh[n][j];
      for (int o = 0; o < O; o++)
        want_g[I * H + H + o * H + j] += dy[n * O + o] * (h[n][j] > 0 ? h[n][j] : 0);
    }
    for (int o = 0; o < O; o++)
      want_g[I * H + H + H * O + o] += dy[n * O + o];
  }
  g_assert_cmpfloat(rel_error(dx, want_dx, B * I), <, 1e-5);
  g_assert_cmpfloat(rel_error(grad, want_g, np), <, 1e-5);
  tp_saved_free(s);
  tp_net_free(net);
  g_rand_free(r);
}

/* Masks from the seed: values 0 or 1/(1-p), about half kept, the same seed the same mask, another
 * seed another; the backward multiplies by the mask; inference passes the input through. */
static void test_dropout(void)
{
  enum { B = 4, C = 50 };
  g_autoptr(TpModel) m = parse("input 50 1 1\ndropout\n");
  TpNet *net = whole(m);
  GRand *r = g_rand_new_with_seed(3);
  float x[B * C], y[B * C], y2[B * C], dy[B * C], dx[B * C];
  fill(r, x, B * C, 0.5, 1), fill(r, dy, B * C, -1, 1);
  GError *err = NULL;
  TpSaved *s = tp_saved_new(net, B, &err);
  tp_saved_set_seed(s, 7);
  g_assert_true(tp_net_forward(net, NULL, x, B, y, s, NULL, NULL, &err));
  g_assert_true(tp_net_backward(net, NULL, s, dy, dx, NULL, 0, &err));
  g_assert_no_error(err);
  int kept = 0;
  for (int i = 0; i < B * C; i++) {
    float mask = y[i] / x[i];
    g_assert_true(y[i] == 0.0f || y[i] == x[i] * 2.0f);
    g_assert_true(tp_dropout_keep(tp_mix64(7 ^ 0), i, TP_DROPOUT_P) == (y[i] != 0.0f));
    g_assert_cmpfloat(dx[i], ==, dy[i] * (y[i] != 0.0f ? 2.0f : 0.0f));
    kept += mask != 0.0f;
  }
  g_assert_cmpint(kept, >, B * C * 3 / 10);
  g_assert_cmpint(kept, <, B * C * 7 / 10);
  g_assert_true(tp_net_forward(net, NULL, x, B, y2, s, NULL, NULL, &err));
  g_assert_cmpmem(y, sizeof y, y2, sizeof y2);
  tp_saved_set_seed(s, 8);
  g_assert_true(tp_net_forward(net, NULL, x, B, y2, s, NULL, NULL, &err));
  g_assert_true(memcmp(y, y2, sizeof y) != 0);
  g_assert_true(tp_net_forward(net, NULL, x, B, y2, NULL, NULL, NULL, &err));
  g_assert_cmpmem(x, sizeof x, y2, sizeof y2);
  tp_saved_free(s);
  tp_net_free(net);
  g_rand_free(r);
}

/* Two steps by hand: w0 = 1, grad 0.5, lr 0.1, momentum 0.9, weight decay 0.01:
 * g1 = 0.51, m1 = 0.51, w1 = 0.949; g2 = 0.50949, m2 = 0.96849, w2 = 0.852151. */
static void test_sgd(void)
{
  float w[3] = { 1, 1, -2 }, w1[3], g[3] = { 0.5f, 0.5f, 0 }, mom[3] = { 0 };
  GError *err = NULL;
  g_assert_true(be->iface->sgd_step(be, 3, 0.1f, 0.9f, 0.01f, w, g, mom, w1, &err));
  g_assert_cmpfloat(w[0], ==, 1.0f); /* out of place: the input version is untouched */
  g_assert_cmpfloat_with_epsilon(w1[0], 0.949, 1e-6);
  g_assert_cmpfloat_with_epsilon(mom[1], 0.51, 1e-6);
  g_assert_cmpfloat_with_epsilon(w1[2], -2 + 0.1 * 0.02, 1e-6); /* decay alone: -2 − 0.1·(0.01·−2) */
  g_assert_true(be->iface->sgd_step(be, 3, 0.1f, 0.9f, 0.01f, w1, g, mom, w1, &err));
  g_assert_cmpfloat_with_epsilon(mom[0], 0.96849, 1e-6);
  g_assert_cmpfloat_with_epsilon(w1[0], 0.852151, 1e-6);
  g_assert_no_error(err);
}

static void test_blend(void)
{
  enum { N = 257 };
  GRand *r = g_rand_new_with_seed(5);
  float a[N], b[N], out[N], a2[N];
  fill(r, a, N, -3, 3), fill(r, b, N, -3, 3);
  memcpy(a2, a, sizeof a);
  const float s = 0.3678794f; /* exp(−1): d = 1, τ = 1 */
  GError *err = NULL;
  g_assert_true(be->iface->blend(be, N, s, a, b, out, &err));
  for (int i = 0; i < N; i++)
    g_assert_cmpfloat(fabs(out[i] - ((double)s * a[i] + (1.0 - s) * b[i])), <=, 4e-7 * (1 + fabs(out[i])));
  g_assert_true(be->iface->blend(be, N, s, a2, b, a2, &err)); /* in place */
  g_assert_cmpmem(a2, sizeof a2, out, sizeof out);
  g_assert_true(be->iface->blend(be, N, 1.0f, a, b, out, &err));
  g_assert_cmpmem(a, sizeof a, out, sizeof out);
  g_assert_no_error(err);
  g_rand_free(r);
}

/* W = 1..4 even splits of a model: the concatenated initial weights, the output, the gradients and
 * the first stage's input gradient are bit for bit those of the whole network. */
static void check_split(const char *name)
{
  enum { B = 5 };
  GError *err = NULL;
  g_autoptr(TpModel) m = tp_model_load(name, &err);
  g_assert_no_error(err);
  int L = tp_model_n_layers(m);
  TpNet *one = whole(m);
  size_t np = tp_net_n_params(one), in = tp_net_in_elems(one), classes = tp_net_out_elems(one);
  g_assert_cmpuint(np, ==, (size_t)m->params);
  GRand *r = g_rand_new_with_seed(9);
  g_autofree float *x = g_new(float, B * in), *w = g_new(float, np), *p = g_new(float, B * classes);
  g_autofree float *g = g_new0(float, np), *dx = g_new(float, B * in);
  gint32 labels[B] = { 1, 7, 3, 3, 9 };
  fill(r, x, B * in, 0, 1);
  g_assert_true(tp_net_init_weights(one, 42, w, &err));
  TpSaved *s = tp_saved_new(one, B, &err);
  g_assert_true(tp_net_forward(one, w, x, B, p, s, labels, NULL, &err));
  g_assert_true(tp_net_backward(one, w, s, NULL, dx, g, 2 * B, &err));
  g_assert_no_error(err);
  { /* without an input gradient (the first stage) the parameter gradient is the same */
    g_autofree float *g2 = g_new0(float, np);
    g_assert_true(tp_net_backward(one, w, s, NULL, NULL, g2, 2 * B, &err));
    g_assert_cmpmem(g2, np * sizeof(float), g, np * sizeof(float));
  }
  tp_saved_free(s);
  for (int W = 2; W <= 4; W++) {
    g_autofree float *ws = g_new(float, np), *gs = g_new0(float, np), *ps = g_new(float, B * classes);
    TpNet *net[4];
    TpSaved *sv[4];
    float *act[5], *grad_act[5];
    size_t off = 0;
    act[0] = x;
    for (int k = 0; k < W; k++) {
      net[k] = tp_net_new(m, k * L / W, (k + 1) * L / W, be, &err);
      g_assert_no_error(err);
      g_assert_true(tp_net_init_weights(net[k], 42, ws + off, &err));
      sv[k] = tp_saved_new(net[k], B, &err);
      act[k + 1] = k == W - 1 ? ps : g_new(float, B * tp_net_out_elems(net[k]));
      grad_act[k] = g_new(float, B * tp_net_in_elems(net[k]));
      g_assert_true(tp_net_forward(net[k], ws + off, act[k], B, act[k + 1], sv[k], labels, NULL, &err));
      off += tp_net_n_params(net[k]);
    }
    g_assert_cmpuint(off, ==, np);
    g_assert_cmpmem(ws, np * sizeof(float), w, np * sizeof(float));
    g_assert_cmpmem(ps, B * classes * sizeof(float), p, B * classes * sizeof(float));
    for (int k = W - 1; k >= 0; k--) {
      off -= tp_net_n_params(net[k]);
      g_assert_true(tp_net_backward(net[k], ws + off, sv[k], k == W - 1 ? NULL : grad_act[k + 1], grad_act[k],
                                    gs + off, 2 * B, &err));
    }
    g_assert_no_error(err);
    g_assert_cmpmem(gs, np * sizeof(float), g, np * sizeof(float));
    g_assert_cmpmem(grad_act[0], B * in * sizeof(float), dx, B * in * sizeof(float));
    for (int k = 0; k < W; k++) {
      if (k < W - 1)
        g_free(act[k + 1]);
      g_free(grad_act[k]);
      tp_saved_free(sv[k]);
      tp_net_free(net[k]);
    }
  }
  tp_net_free(one);
  g_rand_free(r);
}

static void test_split(void)
{
  check_split("mlp");
  check_split("cnn");
}

/* Byte sizes for the weight store's accounting, by hand for mlp. */
static void test_sizes(void)
{
  GError *err = NULL;
  g_autoptr(TpModel) m = tp_model_load("mlp", &err);
  g_assert_no_error(err);
  TpNet *net = whole(m);
  g_assert_cmpuint(tp_net_param_bytes(net), ==, 4 * 235146);
  g_assert_cmpuint(tp_net_saved_bytes_per_sample(net), ==, 4 * (784 + 256 + 256 + 128 + 128 + 10) + 4);
  g_assert_cmpuint(tp_net_out_bytes_per_sample(net), ==, 4 * 10);
  tp_net_free(net);
  TpNet *mid = tp_net_new(m, 1, 4, be, &err); /* linear 256, relu, linear 128 */
  g_assert_no_error(err);
  g_assert_cmpuint(tp_net_saved_bytes_per_sample(mid), ==, 4 * (784 + 256 + 256));
  g_assert_cmpuint(tp_net_out_bytes_per_sample(mid), ==, 4 * 128);
  g_assert_false(tp_net_has_loss(mid));
  tp_net_free(mid);
}

/* A layer the executor cannot run anywhere in the model refuses every stage of it: one line, file:line. */
static void test_unsupported(void)
{
  const char *cases[][2] = {
    { "input 4 1 1\nsoftmax_ce\nlinear 3\n", "bad.model:2: softmax_ce must be the model's last layer" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    GError *err = NULL;
    g_autoptr(TpModel) m = tp_model_parse(cases[i][0], strlen(cases[i][0]), "bad.model", &err);
    g_assert_no_error(err);
    TpNet *net = tp_net_new(m, 0, 1, be, &err);
    g_assert_null(net);
    g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
    g_assert_true(g_str_has_prefix(err->message, cases[i][1]));
    g_assert_null(strchr(err->message, '\n'));
    g_error_free(err);
  }
  GError *err = NULL;
  g_autoptr(TpModel) m = parse("input 4 1 1\nlinear 3\n");
  g_assert_null(tp_net_new(m, 1, 1, be, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_error_free(err);
  err = NULL;
  g_assert_null(tp_backend_get("tpu", &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_PARAM_BACKEND); /* the program names it --backend */
  g_error_free(err);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  GError *err = NULL;
  be = tp_backend_get("cpu", &err);
  g_assert_no_error(err);
  g_test_add_func("/layers/linear", test_linear);
  g_test_add_func("/layers/conv", test_conv);
  g_test_add_func("/layers/maxpool-ties", test_maxpool_ties);
  g_test_add_func("/layers/pool", test_pool);
  g_test_add_func("/layers/relu-softmax", test_relu_softmax);
  g_test_add_func("/layers/dropout", test_dropout);
  g_test_add_func("/layers/stack", test_stack);
  g_test_add_func("/layers/other-version/single", test_other_version_single);
  g_test_add_func("/layers/other-version/stack", test_other_version_stack);
  g_test_add_func("/layers/sgd", test_sgd);
  g_test_add_func("/layers/blend", test_blend);
  g_test_add_func("/layers/split", test_split);
  g_test_add_func("/layers/sizes", test_sizes);
  g_test_add_func("/layers/unsupported", test_unsupported);
  g_test_add_func("/layers/bad-label", test_bad_label);
  g_test_add_func("/layers/threads", test_threads);
  return g_test_run();
}
