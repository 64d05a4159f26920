/* bench-gemm.c — GEMM efficiency of the cpu backend's layers: for every linear and conv layer of a
 * model, the time of the layer's forward + backward (bias, im2col, reordering and col2im included)
 * against OpenBLAS's own cblas_sgemm on the same GEMM shapes over the whole batch (forward,
 * weight gradient, and input gradient except for the first layer with parameters, whose input
 * gradient the executor never computes); then the whole network's forward + backward against the sum of its raw
 * GEMMs. One BLAS thread; times are the thread's CPU time (robust on a shared machine), best of R
 * repetitions, raw and layer runs alternating, each after a warm-up.  The last line is
 * machine-readable: total layers_gflops=… raw_gflops=… efficiency=… (raw: OpenBLAS; as
 * bench-gemm-cuda prints it for cuBLAS).
 * Usage: bench-gemm [MODEL [BATCH [REPS]]]   (default: mlp 128 20; run it for cnn too) */
#include "tp_backend.h"
#include "tp_net.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *buffer(size_t n)
{
  float *p = g_new(float, n ? n : 1);
  for (size_t i = 0; i < n; i++)
    p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  return p;
}

static void die(GError *err)
{
  fprintf(stderr, "bench-gemm: %s\n", err->message);
  exit(err->code == 2 ? 2 : 1);
}

/* One raw GEMM C[m][n] (+)= op(A)·op(B), row-major, operands of the layer's own layout. */
typedef struct { gboolean ta, tb; int m, n, k; } Shape;

static double raw_gemms(const Shape *sh, int count, int reps)
{
  double best = 1e30;
  float *a[3], *b[3], *c[3];
  for (int i = 0; i < count; i++)
    a[i] = buffer((size_t)sh[i].m * sh[i].k), b[i] = buffer((size_t)sh[i].k * sh[i].n),
    c[i] = buffer((size_t)sh[i].m * sh[i].n);
  for (int r = 0; r < reps + 1; r++) { /* the first run warms the buffers up */
    double t0 = now();
    for (int i = 0; i < count; i++) {
      const Shape *s = &sh[i];
      cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->m, s->n,
                  s->k, 1.0f, a[i], s->ta ? s->m : s->k, b[i], s->tb ? s->k : s->n, 1.0f, c[i], s->n);
    }
    double t = now() - t0;
    best = t < best || r == 0 ? t : best;
  }
  for (int i = 0; i < count; i++)
    g_free(a[i]), g_free(b[i]), g_free(c[i]);
  return best;
}

/* The layer's forward + backward through the backend. */
static double layer_time(const TpBackend *be, const TpLayer *d, int B, gboolean want_dx, int reps)
{
  size_t in = (size_t)d->in_elems * B, out = (size_t)d->out_elems * B;
  TpWindow win = { d->cin, d->hin, d->win, d->cout, d->hout, d->wout, d->k, d->stride, d->pad };
  size_t nw = d->kind == TP_LAYER_CONV ? (size_t)d->cout * d->cin * d->k * d->k : (size_t)d->cout * d->cin;
  size_t nwork = d->kind == TP_LAYER_CONV ? be->iface->conv_workspace(be, &win, B) : 0;
  float *x = buffer(in), *y = buffer(out), *dy = buffer(out), *dx = buffer(in), *w = buffer(nw + d->cout);
  float *gw = buffer(nw + d->cout), *work = buffer(nwork);
  GError *err = NULL;
  double best = 1e30;
  for (int r = 0; r < reps + 1; r++) {
    double t0 = now();
    gboolean ok;
    if (d->kind == TP_LAYER_CONV)
      ok = be->iface->conv_forward(be, &win, B, x, w, w + nw, y, work, &err) &&
           be->iface->conv_backward(be, &win, B, x, w, dy, want_dx ? dx : NULL, gw, gw + nw, work, &err);
    else
      ok = be->iface->linear_forward(be, B, d->cin, d->cout, x, w, w + nw, y, &err) &&
           be->iface->linear_backward(be, B, d->cin, d->cout, x, w, dy, want_dx ? dx : NULL, gw, gw + nw, &err);
    if (!ok)
      die(err);
    double t = now() - t0;
    best = t < best || r == 0 ? t : best;
  }
  g_free(x), g_free(y), g_free(dy), g_free(dx), g_free(w), g_free(gw), g_free(work);
  return best;
}

int main(int argc, char **argv)
{
  const char *name = argc > 1 ? argv[1] : "mlp";
  int B = argc > 2 ? atoi(argv[2]) : 128, reps = argc > 3 ? atoi(argv[3]) : 20;
  GError *err = NULL;
  const TpBackend *be = tp_backend_get("cpu", &err);
  TpModel *m = be ? tp_model_load(name, &err) : NULL;
  if (!m)
    die(err);
  printf("model %s, batch %d, best of %d, OpenBLAS threads per call: %d\n", m->name, B, reps,
         openblas_get_num_threads());
  printf("%-6s %-5s %-28s %9s %9s %7s %7s\n", "layer", "kind", "GEMMs (m x n x k)", "layer ms", "raw ms", "GF/s",
         "eff %");
  double sum_raw = 0, sum_layer = 0, sum_flops = 0;
  int first_param = 0; /* no input gradient before the first layer with parameters */
  while (tp_model_layer(m, first_param)->params == 0)
    first_param++;
  for (int i = 0; i < tp_model_n_layers(m); i++) {
    const TpLayer *d = tp_model_layer(m, i);
    if (d->kind != TP_LAYER_LINEAR && d->kind != TP_LAYER_CONV)
      continue;
    gboolean want_dx = i > first_param;
    Shape sh[3];
    if (d->kind == TP_LAYER_CONV) {
      int K = d->cin * d->k * d->k, cols = B * d->hout * d->wout;
      sh[0] = (Shape){ FALSE, FALSE, d->cout, cols, K };  /* y' = w·cols */
      sh[1] = (Shape){ FALSE, FALSE, K, d->cout, cols };  /* dwᵀ += cols·dyt (dyt: dy transposed) */
      sh[2] = (Shape){ TRUE, TRUE, K, cols, d->cout };    /* dcols = wᵀ·dytᵀ */
    } else {
      sh[0] = (Shape){ FALSE, TRUE, B, d->cout, d->cin }; /* y = x·wᵀ */
      sh[1] = (Shape){ TRUE, FALSE, d->cout, d->cin, B }; /* dw += dyᵀ·x */
      sh[2] = (Shape){ FALSE, FALSE, B, d->cin, d->cout }; /* dx = dy·w */
    }
    int count = want_dx ? 3 : 2;
    double flops = 0;
    for (int g = 0; g < count; g++)
      flops += 2.0 * sh[g].m * sh[g].n * sh[g].k;
    /* alternate the two, so that both see the same load on a shared machine */
    double raw = 1e30, lay = 1e30;
    for (int r = 0; r < reps; r++) {
      raw = MIN(raw, raw_gemms(sh, count, 1));
      lay = MIN(lay, layer_time(be, d, B, want_dx, 1));
    }
    char shapes[64];
    g_snprintf(shapes, sizeof shapes, "%dx%dx%d%s", sh[0].m, sh[0].n, sh[0].k, want_dx ? " (+dW, dX)" : " (+dW)");
    printf("%-6d %-5s %-28s %9.3f %9.3f %7.1f %7.1f\n", i + 1, tp_layer_names[d->kind], shapes, lay * 1e3,
           raw * 1e3, flops / lay / 1e9, 100 * raw / lay);
    sum_raw += raw, sum_layer += lay, sum_flops += flops;
  }
  printf("%-6s %-5s %-28s %9.3f %9.3f %7s %7.1f\n", "sum", "", "linear and conv layers", sum_layer * 1e3,
         sum_raw * 1e3, "", 100 * sum_raw / sum_layer);

  /* the whole network as the executor runs it (one stage) */
  TpNet *net = tp_net_new(m, 0, tp_model_n_layers(m), be, &err);
  if (!net)
    die(err);
  size_t np = tp_net_n_params(net);
  float *w = buffer(np), *g = buffer(np), *x = buffer(tp_net_in_elems(net) * B);
  gint32 *labels = g_new(gint32, B);
  for (int n = 0; n < B; n++)
    labels[n] = n % (int)tp_net_out_elems(net);
  TpSaved *s = tp_saved_new(net, B, &err);
  if (!s || !tp_net_init_weights(net, 1, w, &err))
    die(err);
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    if (!tp_net_forward(net, w, x, B, NULL, s, labels, NULL, &err) ||
        !tp_net_backward(net, w, s, NULL, NULL, g, B, &err))
      die(err);
    double t = now() - t0;
    best = t < best ? t : best;
  }
  /* the model's FLOPs, less the input gradient of the first layer with parameters (half its backward) */
  double net_flops = (m->fwd_flops + m->bwd_flops - tp_model_layer(m, first_param)->bwd_flops / 2) * B;
  printf("%-6s %-5s %-28s %9.3f %9.3f %7.1f %7.1f\n", "net", "", "forward + backward, all layers", best * 1e3,
         sum_raw * 1e3, net_flops / best / 1e9, 100 * sum_raw / best);
  printf("total layers_gflops=%.1f raw_gflops=%.1f efficiency=%.1f\n", sum_flops / sum_layer / 1e9,
         sum_flops / sum_raw / 1e9, 100 * sum_raw / sum_layer);
  tp_saved_free(s);
  tp_net_free(net);
  g_free(w), g_free(g), g_free(x), g_free(labels);
  tp_model_free(m);
  return 0;
}
