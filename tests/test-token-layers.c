/* test-token-layers.c — the executor's transformer layers on the cpu backend against independent
 * references: every layer kind's input and weight gradients against central finite differences of
 * its own forward (through tp_net, at shapes small enough for double-checked sums), the causal
 * mask (a later token never changes an earlier position's output), the rotary turn against its
 * closed form, a norm and AdamW's step against float64 loops, the split backward (I then W) against the fused one
 * bit for bit, and the saved bytes of a forward against the model's count. */
#include "config.h"
#include "tp_backend.h"
#include "tp_model.h"
#include "tp_net.h"
#include "tp_test.h"

#include <math.h>
#include <string.h>

/* Small models: Llama's block (RMSNorm, rotary, grouped-query, SwiGLU, no biases) and GPT's
 * (LayerNorm, learned positions, GELU, every bias), each with a loss. */
static const char *const llama_small = "tokens 6 11\nembedding 8\nblock heads=4 kv_heads=2 ffn=12 mlp=swiglu "
                                       "norm=rmsnorm positions=rope theta=10000\nrmsnorm\nlm_head\ntoken_ce\n";
static const char *const gpt_small = "tokens 5 9\nembedding 8 positions=learned\nblock heads=2 ffn=16 mlp=gelu "
                                     "norm=layernorm positions=none bias=1\nlayernorm\nlm_head\ntoken_ce\n";

#define parse tpt_model_text

typedef struct {
  TpModel *m;
  TpNet *net;
  TpSaved *saved;
  float *w, *grad, *in, *dout, *din, *r;
  gint32 *labels;
  int batch, first, last;
  size_t n_in, n_out;
} Fix;

/* Layers [first, last) of model text at `batch` samples, with seeded weights, inputs (token
 * numbers on the first layer), an output weighting r (the loss is Σ r·out, or the model's loss on
 * its last layer) and labels. */
static Fix fix_new(const char *text, int first, int last, int batch)
{
  GError *err = NULL;
  Fix f = { .m = parse(text), .batch = batch, .first = first, .last = last };
  f.net = tp_net_new(f.m, first, last, tp_backend_cpu(), &err);
  g_assert_no_error(err);
  f.saved = tp_saved_new_split(f.net, batch, &err);
  size_t np = tp_net_n_params(f.net);
  f.w = g_new0(float, MAX(np, 1)), f.grad = g_new0(float, MAX(np, 1)); /* a layer without parameters keeps one float */
  g_assert_true(tp_net_init_weights(f.net, 7, f.w, &err));
  GRand *rand = g_rand_new_with_seed(42);
  for (size_t j = 0; j < np; j++) /* larger than the initial weights, so that every path matters */
    f.w[j] += (float)g_rand_double_range(rand, -0.3, 0.3);
  f.n_in = tp_net_in_elems(f.net) * batch, f.n_out = tp_net_out_elems(f.net) * batch;
  f.in = g_new(float, f.n_in), f.din = g_new0(float, f.n_in);
  f.r = g_new(float, f.n_out), f.dout = g_new(float, f.n_out);
  for (size_t j = 0; j < f.n_in; j++)
    f.in[j] = first == 0 ? (float)g_rand_int_range(rand, 0, f.m->vocab) : (float)g_rand_double_range(rand, -1, 1);
  for (size_t j = 0; j < f.n_out; j++)
    f.r[j] = f.dout[j] = (float)g_rand_double_range(rand, -1, 1);
  int nl = tp_net_labels_per_sample(f.net) * batch;
  f.labels = g_new(gint32, nl);
  for (int j = 0; j < nl; j++)
    f.labels[j] = g_rand_int_range(rand, 0, f.m->vocab);
  g_rand_free(rand);
  return f;
}

static void fix_free(Fix *f)
{
  tp_saved_free(f->saved);
  tp_net_free(f->net);
  tp_model_free(f->m);
  g_free(f->w), g_free(f->grad), g_free(f->in), g_free(f->din), g_free(f->r), g_free(f->dout), g_free(f->labels);
}

/* The loss at weights w and input in (double sums). */
static double loss_at(Fix *f, const float *w, const float *in)
{
  GError *err = NULL;
  if (tp_net_has_loss(f->net)) {
    TpLossStats st;
    g_assert_true(tp_net_forward(f->net, w, in, f->batch, NULL, NULL, f->labels, &st, &err));
    return st.loss_sum / f->batch;
  }
  g_autofree float *out = g_new(float, f->n_out);
  g_assert_true(tp_net_forward(f->net, w, in, f->batch, out, NULL, NULL, NULL, &err));
  g_assert_no_error(err);
  double l = 0;
  for (size_t j = 0; j < f->n_out; j++)
    l += (double)f->r[j] * out[j];
  return l;
}

/* The analytic gradients (fused backward) into f->grad and f->din. */
static void analytic(Fix *f)
{
  GError *err = NULL;
  gboolean loss = tp_net_has_loss(f->net);
  memset(f->grad, 0, tp_net_n_params(f->net) * sizeof(float));
  g_assert_true(tp_net_forward(f->net, f->w, f->in, f->batch, loss ? NULL : g_alloca(f->n_out * sizeof(float)), f->saved,
                               f->labels, NULL, &err));
  g_assert_true(tp_net_backward(f->net, f->w, f->saved, loss ? NULL : f->dout, f->first ? f->din : NULL, f->grad,
                                f->batch, &err));
  g_assert_no_error(err);
}

/* ‖numeric − analytic‖/‖analytic‖ over n entries of v (perturbed by ±h in place), at most 400 of them
 * (every stride-th). */
static double fd_error(Fix *f, float *v, const float *ana, size_t n, gboolean weights)
{
  double diff = 0, norm = 0;
  size_t stride = MAX(1, n / 400);
  for (size_t j = 0; j < n; j += stride) {
    float keep = v[j], h = 1e-2f * MAX(1.0f, fabsf(keep));
    v[j] = keep + h;
    double up = loss_at(f, weights ? v : f->w, weights ? f->in : v);
    v[j] = keep - h;
    double down = loss_at(f, weights ? v : f->w, weights ? f->in : v);
    v[j] = keep;
    double num = (up - down) / (2.0 * (double)h);
    diff += (num - ana[j]) * (num - ana[j]), norm += (double)ana[j] * ana[j];
  }
  g_assert_cmpfloat(norm, >, 0);
  return sqrt(diff / norm);
}

/* Every layer of a model alone (and the whole model): weight and input gradients within 2 % of
 * central differences (h = 1e-2: float32 forwards; a wrong term is off by its own size). */
static void test_fd(gconstpointer data)
{
  const char *text = data;
  g_autoptr(TpModel) m = parse(text);
  int n = tp_model_n_layers(m);
  for (int first = 0; first < n; first++)
    for (int last = first + 1; last <= n; last += (first == 0 ? n - 1 : n)) {
      if (last - first > 1 && first != 0)
        continue;
      Fix f = fix_new(text, first, last, 2);
      analytic(&f);
      if (tp_net_n_params(f.net)) {
        double e = fd_error(&f, f.w, f.grad, tp_net_n_params(f.net), TRUE);
        g_test_message("layers %d-%d (%s): weight gradient off by %.2e", first + 1, last,
                       tp_layer_names[tp_model_layer(m, first)->kind], e);
        g_assert_cmpfloat(e, <, 2e-2);
      }
      if (first > 0) {
        double e = fd_error(&f, f.in, f.din, f.n_in, FALSE);
        g_test_message("layers %d-%d (%s): input gradient off by %.2e", first + 1, last,
                       tp_layer_names[tp_model_layer(m, first)->kind], e);
        g_assert_cmpfloat(e, <, 2e-2);
      }
      fix_free(&f);
    }
}

/* I then W leave the fused backward's gradients, bit for bit, at every stage split. */
static void test_split_exact(gconstpointer data)
{
  const char *text = data;
  g_autoptr(TpModel) m = parse(text);
  for (int first = 0; first < tp_model_n_layers(m); first++) {
    Fix f = fix_new(text, first, tp_model_n_layers(m), 3);
    GError *err = NULL;
    size_t np = tp_net_n_params(f.net);
    analytic(&f);
    g_autofree float *g1 = g_memdup2(f.grad, np * sizeof(float)), *d1 = g_memdup2(f.din, f.n_in * sizeof(float));
    memset(f.grad, 0, np * sizeof(float));
    g_assert_true(tp_net_forward(f.net, f.w, f.in, f.batch, NULL, f.saved, f.labels, NULL, &err));
    g_assert_true(tp_net_backward_input(f.net, f.w, f.saved, NULL, first ? f.din : NULL, f.batch, &err));
    g_assert_true(tp_net_backward_weight(f.net, f.w, f.saved, f.grad, &err));
    g_assert_no_error(err);
    g_assert_cmpmem(g1, np * sizeof(float), f.grad, np * sizeof(float));
    g_assert_cmpmem(d1, f.n_in * sizeof(float), f.din, f.n_in * sizeof(float));
    fix_free(&f);
  }
}

/* Causality: changing the last token of a sequence leaves every earlier position's scores as
 * they were, and changes the last one's. */
static void test_causal(void)
{
  Fix f = fix_new(llama_small, 0, 4, 1); /* up to the head: scores per position */
  GError *err = NULL;
  g_autofree float *a = g_new(float, f.n_out), *b = g_new(float, f.n_out);
  g_assert_true(tp_net_forward(f.net, f.w, f.in, 1, a, NULL, NULL, NULL, &err));
  int s = f.m->context, V = f.m->vocab;
  f.in[s - 1] = (float)(((int)f.in[s - 1] + 1) % V);
  g_assert_true(tp_net_forward(f.net, f.w, f.in, 1, b, NULL, NULL, NULL, &err));
  g_assert_cmpmem(a, (size_t)(s - 1) * V * sizeof(float), b, (size_t)(s - 1) * V * sizeof(float));
  g_assert_true(memcmp(a + (size_t)(s - 1) * V, b + (size_t)(s - 1) * V, V * sizeof(float)) != 0);
  fix_free(&f);
}

/* The rotary turn: position p turns the pair (x_i, x_{i+hd/2}) by p·θ^(−2i/hd), and −1 turns it back. */
static void test_rope(void)
{
  const TpBackend *be = tp_backend_cpu();
  int s = 5, hd = 6, heads = 2, ld = 14, rows = 10;
  g_autofree float *x = g_new(float, (size_t)rows * ld), *x0 = g_new(float, (size_t)rows * ld);
  for (int j = 0; j < rows * ld; j++)
    x[j] = x0[j] = (float)sin(j * 0.7 + 0.1);
  GError *err = NULL;
  g_assert_true(be->iface->rope(be, rows, s, heads, hd, ld, 100.0f, 1.0f, x, &err));
  for (int r = 0; r < rows; r++)
    for (int h = 0; h < heads; h++)
      for (int i = 0; i < hd / 2; i++) {
        double ang = (r % s) * pow(100.0, -2.0 * i / hd);
        const float *v0 = x0 + r * ld + h * hd, *v = x + r * ld + h * hd;
        g_assert_cmpfloat(fabs(v[i] - (v0[i] * cos(ang) - v0[i + hd / 2] * sin(ang))), <, 1e-5);
        g_assert_cmpfloat(fabs(v[i + hd / 2] - (v0[i] * sin(ang) + v0[i + hd / 2] * cos(ang))), <, 1e-5);
      }
  for (int r = 0; r < rows; r++) /* the columns beyond the heads untouched */
    g_assert_cmpmem(x + r * ld + heads * hd, 2 * sizeof(float), x0 + r * ld + heads * hd, 2 * sizeof(float));
  g_assert_true(be->iface->rope(be, rows, s, heads, hd, ld, 100.0f, -1.0f, x, &err));
  for (int j = 0; j < rows * ld; j++)
    g_assert_cmpfloat(fabs(x[j] - x0[j]), <, 1e-5);
}

/* LayerNorm and RMSNorm against a float64 loop. */
static void test_norms(void)
{
  const TpBackend *be = tp_backend_cpu();
  int rows = 3, d = 7;
  float x[21], w[7], b[7], y[21];
  for (int j = 0; j < 21; j++)
    x[j] = (float)cos(j * 1.3) * 2 + 0.5f;
  for (int j = 0; j < 7; j++)
    w[j] = 0.5f + j * 0.1f, b[j] = -0.2f + j * 0.05f;
  for (int rms = 0; rms < 2; rms++) {
    GError *err = NULL;
    g_assert_true(be->iface->norm_forward(be, rows, d, 1e-5f, rms, x, w, b, y, &err));
    for (int r = 0; r < rows; r++) {
      double mu = 0, var = 0;
      for (int j = 0; j < d; j++)
        mu += x[r * d + j] / (double)d;
      if (rms)
        mu = 0;
      for (int j = 0; j < d; j++)
        var += (x[r * d + j] - mu) * (x[r * d + j] - mu) / d;
      for (int j = 0; j < d; j++) {
        double want = (x[r * d + j] - mu) / sqrt(var + 1e-5) * w[j] + (rms ? 0 : b[j]);
        g_assert_cmpfloat(fabs(y[r * d + j] - want), <, 1e-5);
      }
    }
  }
}

/* A forward keeps what the model counts: the saved bytes per sample are the model's stored bytes
 * at fp32 (and the last stage's labels, a token each). */
static void test_saved_bytes(void)
{
  const char *texts[] = { llama_small, gpt_small };
  for (guint i = 0; i < G_N_ELEMENTS(texts); i++) {
    Fix f = fix_new(texts[i], 0, 5, 1);
    double want = 0;
    for (int k = 0; k < 5; k++)
      want += tp_model_layer(f.m, k)->stored_bytes;
    g_assert_cmpfloat((double)tp_net_saved_bytes_per_sample(f.net), ==, want + 4.0 * f.m->context);
    fix_free(&f);
  }
  g_autoptr(TpModel) t = tpt_model("llama-tiny");
  GError *err = NULL;
  TpNet *net = tp_net_new(t, 0, tp_model_n_layers(t), tp_backend_cpu(), &err);
  g_assert_no_error(err);
  double want = 0;
  for (int k = 0; k < tp_model_n_layers(t); k++)
    want += tp_model_layer(t, k)->stored_bytes;
  g_assert_cmpfloat((double)tp_net_saved_bytes_per_sample(net), ==, want + 4.0 * t->context);
  g_assert_cmpuint(tp_net_n_params(net), ==, 2951424);
  tp_net_free(net);
}

/* What the executor does not run is refused in one line naming the layer. */
static void test_refused(void)
{
  const char *texts[] = { "tokens 4 9\nembedding 8\nblock heads=2 ffn=8 dropout=1\nlm_head\ntoken_ce\n",
                          "tokens 4 9\nembedding 8\nblock heads=2 ffn=8\nlm_head tied=1\ntoken_ce\n" };
  const char *want[] = { "t.model:3: block dropout=1", "t.model:4: lm_head tied=1" };
  for (guint i = 0; i < G_N_ELEMENTS(texts); i++) {
    g_autoptr(TpModel) m = parse(texts[i]);
    GError *err = NULL;
    g_assert_false(tp_net_check_model(m, &err));
    g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
    g_assert_true(g_str_has_prefix(err->message, want[i]));
    g_assert_null(strchr(err->message, '\n'));
    g_clear_error(&err);
  }
}

/* AdamW's step against its definition in float64 (Loshchilov & Hutter's decoupled decay, PyTorch's
 * bias corrections), three steps on the same state, in place. */
static void test_adamw(void)
{
  const TpBackend *be = tp_backend_cpu();
  enum { n = 9 };
  float w[n], m[n] = { 0 }, v[n] = { 0 };
  double wd[n], md[n] = { 0 }, vd[n] = { 0 };
  for (int i = 0; i < n; i++)
    w[i] = (float)(wd[i] = 0.1 * i - 0.4);
  const double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, decay = 0.1;
  for (int t = 1; t <= 3; t++) {
    float g[n];
    for (int i = 0; i < n; i++)
      g[i] = (float)(sin(i * 1.7 + t) * (i % 3 ? 1 : 1e-3));
    TpAdamW h = { .lr = (float)lr, .beta1 = (float)b1, .beta2 = (float)b2, .eps = (float)eps,
                  .weight_decay = (float)decay, .bias1 = (float)(1 - pow(b1, t)), .bias2 = (float)(1 - pow(b2, t)) };
    GError *err = NULL;
    g_assert_true(be->iface->adamw_step(be, n, &h, w, g, m, v, w, &err));
    for (int i = 0; i < n; i++) {
      md[i] = b1 * md[i] + (1 - b1) * g[i], vd[i] = b2 * vd[i] + (1 - b2) * (double)g[i] * g[i];
      wd[i] = wd[i] * (1 - lr * decay) - lr * (md[i] / (1 - pow(b1, t))) / (sqrt(vd[i] / (1 - pow(b2, t))) + eps);
      g_assert_cmpfloat(fabs(w[i] - wd[i]), <, 1e-6);
      g_assert_cmpfloat(fabs(m[i] - md[i]), <, 1e-6);
      g_assert_cmpfloat(fabs(v[i] - vd[i]), <, 1e-7);
    }
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_data_func("/token/fd/llama", llama_small, test_fd);
  g_test_add_data_func("/token/fd/gpt", gpt_small, test_fd);
  g_test_add_data_func("/token/split-exact/llama", llama_small, test_split_exact);
  g_test_add_data_func("/token/split-exact/gpt", gpt_small, test_split_exact);
  g_test_add_func("/token/causal", test_causal);
  g_test_add_func("/token/rope", test_rope);
  g_test_add_func("/token/norms", test_norms);
  g_test_add_func("/token/saved-bytes", test_saved_bytes);
  g_test_add_func("/token/refused", test_refused);
  g_test_add_func("/token/adamw", test_adamw);
  return g_test_run();
}
