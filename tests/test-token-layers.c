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
#include "tp_tie.h"
#include "tp_test.h"
#include "tp_test_run.h"

#include <math.h>
#include <string.h>

/* Small models: Llama's block (RMSNorm, rotary, grouped-query, SwiGLU, no biases) and GPT's
 * (LayerNorm, learned positions, GELU, every bias), each with a loss. */
static const char *const llama_small = "tokens 6 11\nembedding 8\nblock heads=4 kv_heads=2 ffn=12 mlp=swiglu "
                                       "norm=rmsnorm positions=rope theta=10000\nrmsnorm\nlm_head\ntoken_ce\n";
static const char *const gpt_small = "tokens 5 9\nembedding 8 positions=learned\nblock heads=2 ffn=16 mlp=gelu "
                                     "norm=layernorm positions=none bias=1\nlayernorm\nlm_head\ntoken_ce\n";
/* GPT-2's own: dropout in the block, the head tied to the embedding (masks a·s² + 2·s·d = 256 bytes a
 * sample: whole floats, so the saved bytes are the model's) */
static const char *const gpt_tied = "tokens 8 9\nembedding 8 positions=learned\nblock heads=2 ffn=16 mlp=gelu "
                                    "norm=layernorm positions=none bias=1 dropout=1\nlayernorm\nlm_head tied=1\n"
                                    "token_ce\n";

#define parse tpt_model_text

typedef struct {
  TpModel *m;
  TpNet *net;
  TpSaved *saved, *probe; /* probe: the training forwards of the finite differences (dropout's masks) */
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
  for (int i = first; i < last && !f.probe; i++)
    if (tp_model_layer(f.m, i)->kind == TP_LAYER_BLOCK && tp_model_layer(f.m, i)->blk.dropout)
      f.probe = tp_saved_new(f.net, batch, &err);
  tp_saved_set_seed(f.saved, 5);
  if (f.probe)
    tp_saved_set_seed(f.probe, 5);
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
  tp_saved_free(f->probe);
  tp_net_free(f->net);
  tp_model_free(f->m);
  g_free(f->w), g_free(f->grad), g_free(f->in), g_free(f->din), g_free(f->r), g_free(f->dout), g_free(f->labels);
}

/* The loss at weights w and input in (double sums): of an inference forward, or with dropout of a
 * training forward with the analytic gradients' masks. */
static double loss_at(Fix *f, const float *w, const float *in)
{
  GError *err = NULL;
  if (tp_net_has_loss(f->net)) {
    TpLossStats st;
    g_assert_true(tp_net_forward(f->net, w, in, f->batch, NULL, f->probe, f->labels, &st, &err));
    return st.loss_sum / f->batch;
  }
  g_autofree float *out = g_new(float, f->n_out);
  g_assert_true(tp_net_forward(f->net, w, in, f->batch, out, f->probe, NULL, NULL, &err));
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
 * central differences (h = 1e-2: float32 forwards; a wrong term is off by its own size) — within
 * 0.2 % with dropout, whose masks touch few terms at these sizes (a mask left out of the
 * attention's backward is off by 1 %; the exact gradients here by 0.05 % at most). */
static void test_fd(gconstpointer data)
{
  const char *text = data;
  double tol = strstr(text, "dropout=1") ? 2e-3 : 2e-2;
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
        g_assert_cmpfloat(e, <, tol);
      }
      if (first > 0) {
        double e = fd_error(&f, f.in, f.din, f.n_in, FALSE);
        g_test_message("layers %d-%d (%s): input gradient off by %.2e", first + 1, last,
                       tp_layer_names[tp_model_layer(m, first)->kind], e);
        g_assert_cmpfloat(e, <, tol);
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

/* The causal softmax and SwiGLU (their exponentials eight at a time) against float64 loops, over
 * scores and gates from −100 to 100: within 1e-6 relative (1e-30 absolute, where e^−100 leaves
 * float's range; SwiGLU's gate gradient: of its terms' size), the softmax's exponents rounded to
 * float as the kernel's are. */
static void test_exp_kernels(void)
{
  const TpBackend *be = tp_backend_cpu();
  enum { s = 37, f = 45, rows = 7 };
  float x[2 * s * s], y[2 * s * s], gu[rows * 2 * f], out[rows * f], dy[rows * f], dgu[rows * 2 * f];
  for (int j = 0; j < 2 * s * s; j++)
    x[j] = (float)(100.0 * sin(j * 1.37));
  for (int j = 0; j < rows * 2 * f; j++)
    gu[j] = (float)(j % 11 == 0 ? 100.0 * cos(j * 0.7) : 8.0 * sin(j * 0.31));
  for (int j = 0; j < rows * f; j++)
    dy[j] = (float)cos(j * 0.91);
  GError *err = NULL;
  g_assert_true(be->iface->causal_softmax_forward(be, 2, s, 0.25f, x, y, &err));
  g_assert_true(be->iface->swiglu_forward(be, rows, f, gu, out, &err));
  g_assert_true(be->iface->swiglu_backward(be, rows, f, gu, dy, dgu, &err));
  g_assert_no_error(err);
  for (int r = 0; r < 2 * s; r++) { /* the exponents as the kernel rounds them, in float */
    int i = r % s;
    float m = -INFINITY;
    double sum = 0;
    for (int j = 0; j <= i; j++)
      m = MAX(m, 0.25f * x[r * s + j]);
    for (int j = 0; j <= i; j++)
      sum += exp((double)(0.25f * x[r * s + j] - m));
    for (int j = 0; j < s; j++) {
      double want = j <= i ? exp((double)(0.25f * x[r * s + j] - m)) / sum : 0;
      g_assert_cmpfloat(fabs(y[r * s + j] - want), <=, 1e-6 * want + 1e-30);
    }
  }
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < f; j++) {
      double g = gu[r * 2 * f + j], u = gu[r * 2 * f + f + j], sig = 1 / (1 + exp(-g)), d = dy[r * f + j];
      double want[] = { g * sig * u, d * u * sig * (1 + g * (1 - sig)), d * g * sig };
      double size[] = { fabs(want[0]), fabs(d * u) * sig * (1 + fabs(g)), fabs(want[2]) }; /* dg: its terms' */
      float got[] = { out[r * f + j], dgu[r * 2 * f + j], dgu[r * 2 * f + f + j] };
      for (int k = 0; k < 3; k++)
        g_assert_cmpfloat(fabs(got[k] - want[k]), <=, 1e-6 * size[k] + 1e-30);
    }
}

/* A forward keeps what the model counts: the saved bytes per sample are the model's stored bytes
 * at fp32 (and the last stage's labels, a token each). */
static void test_saved_bytes(void)
{
  const char *texts[] = { llama_small, gpt_small, gpt_tied };
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

/* The byte-mask dropout against its definition: element i kept when tp_dropout_keep(seed, first + i,
 * p), then scaled by 1/(1 − p); the backward scales the kept gradients alike and zeroes the rest. */
static void test_dropout_byte(void)
{
  const TpBackend *be = tp_backend_cpu();
  enum { n = 1000 };
  const float p = 0.25f;
  float x[n], y[n], dy[n], dx[n];
  guint8 mask[n];
  for (int i = 0; i < n; i++)
    x[i] = (float)sin(i * 0.37), dy[i] = (float)cos(i * 0.53);
  GError *err = NULL;
  g_assert_true(be->iface->dropout_byte_forward(be, n, p, 99, 1234, x, y, mask, &err));
  g_assert_true(be->iface->dropout_byte_backward(be, n, p, mask, dy, dx, &err));
  g_assert_no_error(err);
  int dropped = 0;
  for (int i = 0; i < n; i++) {
    gboolean keep = tp_dropout_keep(99, 1234 + (size_t)i, p);
    dropped += !keep;
    g_assert_cmpint(mask[i], ==, keep);
    g_assert_cmpfloat(y[i], ==, keep ? x[i] * (1.0f / (1.0f - p)) : 0.0f);
    g_assert_cmpfloat(dx[i], ==, keep ? dy[i] * (1.0f / (1.0f - p)) : 0.0f);
  }
  g_assert_cmpint(dropped, >, 200);
  g_assert_cmpint(dropped, <, 300);
}

/* Scores of the layers up to the head (batch samples) of fix f: a training forward with seeds
 * (n of them) or, seeds NULL, an inference one. */
static float *scores(Fix *f, const float *in, int batch, const guint64 *seeds, int n)
{
  GError *err = NULL;
  float *out = g_new(float, tp_net_out_elems(f->net) * batch);
  TpSaved *sv = seeds ? tp_saved_new(f->net, batch, &err) : NULL;
  if (sv)
    tp_saved_set_seeds(sv, seeds, n);
  g_assert_true(tp_net_forward(f->net, f->w, in, batch, out, sv, NULL, NULL, &err));
  g_assert_no_error(err);
  tp_saved_free(sv);
  return out;
}

/* Dropout in the block: a training forward drops (its scores differ from inference's), draws the
 * same masks again from the same seed and others from another, draws each block of rows from its
 * own seed as a forward of those rows alone; inference drops nothing (the scores of the model
 * without dropout, bit for bit). */
static void test_block_dropout(void)
{
  g_autofree char *plain = g_strdup(gpt_tied);
  memcpy(strstr(plain, "dropout=1"), "dropout=0", 9);
  Fix f = fix_new(gpt_tied, 0, 4, 2), g = fix_new(plain, 0, 4, 2);
  size_t n = tp_net_out_elems(f.net), bytes = 2 * n * sizeof(float);
  const guint64 one[] = { 11 }, other[] = { 12 }, two[] = { 11, 12 };
  g_autofree float *inf = scores(&f, f.in, 2, NULL, 0), *ref = scores(&g, g.in, 2, NULL, 0);
  g_autofree float *a = scores(&f, f.in, 2, one, 1), *b = scores(&f, f.in, 2, one, 1);
  g_autofree float *c = scores(&f, f.in, 2, other, 1);
  g_assert_cmpmem(inf, bytes, ref, bytes);
  g_assert_cmpmem(a, bytes, b, bytes);
  g_assert_true(memcmp(a, inf, bytes) != 0 && memcmp(a, c, bytes) != 0);
  g_autofree float *both = scores(&f, f.in, 2, two, 2), *first = scores(&f, f.in, 1, one, 1);
  g_autofree float *second = scores(&f, f.in + tp_net_in_elems(f.net), 1, other, 1);
  g_test_message("both vs first %g, second %g", tpt_rel_diff(both, first, n), tpt_rel_diff(both + n, second, n));
  g_assert_cmpfloat(tpt_rel_diff(both, first, n), <, 1e-6); /* products of 8 rows or 16: rounding only */
  g_assert_cmpfloat(tpt_rel_diff(both + n, second, n), <, 1e-6);
  fix_free(&f), fix_free(&g);
}

/* A tied head on the embedding's stage has no weights of its own; alone on a stage it holds a copy
 * of the embedding's initial table, the part of its stage tied to the embedding's table on the first
 * (tests/test-token-train.c trains them). */
static void test_tied(void)
{
  Fix whole = fix_new(gpt_tied, 0, 5, 1), emb = fix_new(gpt_tied, 0, 1, 1), head = fix_new(gpt_tied, 3, 4, 1);
  g_assert_cmpuint(tp_net_n_params(whole.net), ==, (guint64)whole.m->params);
  size_t table = (size_t)whole.m->vocab * 8;
  g_assert_cmpuint(tp_net_n_params(head.net), ==, table);
  GError *err = NULL;
  g_autofree float *we = g_new(float, tp_net_n_params(emb.net)), *wh = g_new(float, table);
  g_assert_true(tp_net_init_weights(emb.net, 3, we, &err) && tp_net_init_weights(head.net, 3, wh, &err));
  g_assert_cmpmem(we, table * sizeof(float), wh, table * sizeof(float));
  const int one[] = { 0, 5 }, apart[] = { 0, 2, 5 }, together[] = { 0, 5, 5 }, third[] = { 0, 1, 3, 5 };
  g_assert_cmpint(tp_tie_stage(whole.m, one, 1), ==, -1);
  g_assert_cmpint(tp_tie_stage(whole.m, together, 2), ==, -1);
  g_assert_cmpint(tp_tie_stage(whole.m, apart, 2), ==, 1);
  g_assert_cmpint(tp_tie_stage(whole.m, third, 3), ==, 2);
  /* the two sides: the embedding's table on the first stage, the head's copy on its own */
  size_t off, n;
  g_assert_false(tp_net_tied_part(whole.net, &off, &n));
  g_assert_true(tp_net_tied_part(emb.net, &off, &n));
  g_assert_cmpuint(off, ==, 0);
  g_assert_cmpuint(n, ==, table);
  g_assert_true(tp_net_tied_part(head.net, &off, &n));
  g_assert_cmpuint(off, ==, 0);
  g_assert_cmpuint(n, ==, table);
  fix_free(&whole), fix_free(&emb), fix_free(&head);
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
  g_test_add_data_func("/token/fd/gpt-dropout-tied", gpt_tied, test_fd);
  g_test_add_data_func("/token/split-exact/gpt-dropout-tied", gpt_tied, test_split_exact);
  g_test_add_func("/token/causal", test_causal);
  g_test_add_func("/token/rope", test_rope);
  g_test_add_func("/token/norms", test_norms);
  g_test_add_func("/token/exp-kernels", test_exp_kernels);
  g_test_add_func("/token/saved-bytes", test_saved_bytes);
  g_test_add_func("/token/dropout-byte", test_dropout_byte);
  g_test_add_func("/token/block-dropout", test_block_dropout);
  g_test_add_func("/token/tied", test_tied);
  g_test_add_func("/token/adamw", test_adamw);
  return g_test_run();
}
