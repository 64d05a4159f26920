/* bench-gemm-cuda.c — the SGEMM rate of the cuda backend's layers against cuBLAS's own on the same
 * shapes (bench/bench-gemm.c does the same for the cpu backend against OpenBLAS): for every linear
 * and conv layer of a model, the layer's forward + backward through the backend (bias, im2col,
 * col2im included) against raw cublasSgemm calls of the layer's GEMM shapes over the whole batch
 * (forward, weight gradient, and input gradient except for the first layer with parameters).
 * Wall time of `inner` back-to-back calls between two stream synchronisations, best of R, raw and
 * layer runs alternating, after a warm-up.  Built only with CUDA (`make bench/bench-gemm-cuda`).
 * The last line is machine-readable: total layers_gflops=… raw_gflops=… efficiency=… (raw: cuBLAS)
 * Usage: bench-gemm-cuda [MODEL [BATCH [REPS [DEVICE]]]]   (default: cnn 128 5 0) */
#include "tp_backend.h"
#include "tp_model.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

enum { INNER = 10 };

static void die(const char *what)
{
  fprintf(stderr, "bench-gemm-cuda: %s\n", what);
  exit(1);
}

static void die_err(GError *err)
{
  fprintf(stderr, "bench-gemm-cuda: %s\n", err->message);
  exit(err->code == 2 ? 2 : 1);
}

#define CK(call)                                                                                       \
  do {                                                                                                 \
    cudaError_t rc_ = (call);                                                                          \
    if (rc_ != cudaSuccess)                                                                            \
      die(cudaGetErrorString(rc_));                                                                    \
  } while (0)

static float *dbuf(size_t n)
{
  float *host = g_new(float, n ? n : 1), *dev = NULL;
  for (size_t i = 0; i < n; i++)
    host[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  CK(cudaMalloc((void **)&dev, (n ? n : 1) * sizeof(float)));
  CK(cudaMemcpy(dev, host, n * sizeof(float), cudaMemcpyHostToDevice));
  g_free(host);
  return dev;
}

/* One raw GEMM C[m][n] (+)= op(A)·op(B), row-major, as the layer's own layout. */
typedef struct { gboolean ta, tb; int m, n, k; } Shape;

static double raw_gemms(cublasHandle_t h, cudaStream_t st, const Shape *sh, int count)
{
  float *a[3], *b[3], *c[3];
  for (int i = 0; i < count; i++)
    a[i] = dbuf((size_t)sh[i].m * sh[i].k), b[i] = dbuf((size_t)sh[i].k * sh[i].n), c[i] = dbuf((size_t)sh[i].m * sh[i].n);
  const float one = 1.0f;
  double best = 1e30;
  for (int r = 0; r < 2; r++) { /* the first run warms up */
    CK(cudaStreamSynchronize(st));
    gint64 t0 = g_get_monotonic_time();
    for (int it = 0; it < INNER; it++)
      for (int i = 0; i < count; i++) {
        const Shape *s = &sh[i]; /* row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ */
        if (cublasSgemm(h, s->tb ? CUBLAS_OP_T : CUBLAS_OP_N, s->ta ? CUBLAS_OP_T : CUBLAS_OP_N, s->n, s->m, s->k, &one,
                        b[i], s->tb ? s->k : s->n, a[i], s->ta ? s->m : s->k, &one, c[i], s->n) !=
            CUBLAS_STATUS_SUCCESS)
          die("cublasSgemm failed");
      }
    CK(cudaStreamSynchronize(st));
    double t = (double)(g_get_monotonic_time() - t0) / 1e6 / INNER;
    best = r ? MIN(best, t) : best;
  }
  for (int i = 0; i < count; i++)
    cudaFree(a[i]), cudaFree(b[i]), cudaFree(c[i]);
  return best;
}

static double layer_time(const TpBackend *be, const TpLayer *d, int B, gboolean want_dx)
{
  size_t in = (size_t)d->in_elems * B, out = (size_t)d->out_elems * B;
  TpWindow win = { d->cin, d->hin, d->win, d->cout, d->hout, d->wout, d->k, d->stride, d->pad };
  size_t nw = d->kind == TP_LAYER_CONV ? (size_t)d->cout * d->cin * d->k * d->k : (size_t)d->cout * d->cin;
  size_t nwork = d->kind == TP_LAYER_CONV ? be->iface->conv_workspace(be, &win, B) : 0;
  float *x = dbuf(in), *y = dbuf(out), *dy = dbuf(out), *dx = dbuf(in), *w = dbuf(nw + d->cout);
  float *gw = dbuf(nw + d->cout), *work = dbuf(nwork);
  GError *err = NULL;
  double best = 1e30;
  for (int r = 0; r < 2; r++) {
    if (!tp_backend_sync(be, &err))
      die_err(err);
    gint64 t0 = g_get_monotonic_time();
    for (int it = 0; it < INNER; it++) {
      gboolean ok;
      if (d->kind == TP_LAYER_CONV)
        ok = be->iface->conv_forward(be, &win, B, x, w, w + nw, y, work, &err) &&
             be->iface->conv_backward(be, &win, B, x, w, dy, want_dx ? dx : NULL, gw, gw + nw, work, &err);
      else
        ok = be->iface->linear_forward(be, B, d->cin, d->cout, x, w, w + nw, y, &err) &&
             be->iface->linear_backward(be, B, d->cin, d->cout, x, w, dy, want_dx ? dx : NULL, gw, gw + nw, &err);
      if (!ok)
        die_err(err);
    }
    if (!tp_backend_sync(be, &err))
      die_err(err);
    double t = (double)(g_get_monotonic_time() - t0) / 1e6 / INNER;
    best = r ? MIN(best, t) : best;
  }
  cudaFree(x), cudaFree(y), cudaFree(dy), cudaFree(dx), cudaFree(w), cudaFree(gw), cudaFree(work);
  return best;
}

int main(int argc, char **argv)
{
  const char *name = argc > 1 ? argv[1] : "cnn";
  int B = argc > 2 ? atoi(argv[2]) : 128, reps = argc > 3 ? atoi(argv[3]) : 5, dev = argc > 4 ? atoi(argv[4]) : 0;
  GError *err = NULL;
  TpModel *m = tp_model_load(name, &err);
  const TpBackendReg *reg = m ? tp_backend_find("cuda", &err) : NULL;
  TpBackend *be = reg ? reg->create(dev, &err) : NULL;
  if (!be)
    die_err(err);
  CK(cudaSetDevice(dev));
  cudaStream_t st;
  cublasHandle_t h;
  CK(cudaStreamCreate(&st));
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(h, st) != CUBLAS_STATUS_SUCCESS)
    die("cublasCreate failed");
  printf("model %s, batch %d, GPU %d, best of %d (x%d calls)\n", m->name, B, dev, reps, INNER);
  printf("%-6s %-5s %-28s %9s %9s %9s %9s %7s\n", "layer", "kind", "GEMMs (m x n x k)", "layer ms", "cuBLAS ms",
         "layer GF/s", "cuBLAS GF/s", "eff %");
  double sum_raw = 0, sum_layer = 0, sum_flops = 0;
  int first_param = 0;
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
      sh[0] = (Shape){ FALSE, FALSE, d->cout, cols, K };
      sh[1] = (Shape){ FALSE, TRUE, d->cout, K, cols };
      sh[2] = (Shape){ TRUE, FALSE, K, cols, d->cout };
    } else {
      sh[0] = (Shape){ FALSE, TRUE, B, d->cout, d->cin };
      sh[1] = (Shape){ TRUE, FALSE, d->cout, d->cin, B };
      sh[2] = (Shape){ FALSE, FALSE, B, d->cin, d->cout };
    }
    int count = want_dx ? 3 : 2;
    double flops = 0;
    for (int g = 0; g < count; g++)
      flops += 2.0 * sh[g].m * sh[g].n * sh[g].k;
    double raw = 1e30, lay = 1e30;
    for (int r = 0; r < reps; r++) {
      raw = MIN(raw, raw_gemms(h, st, sh, count));
      lay = MIN(lay, layer_time(be, d, B, want_dx));
    }
    char shapes[64];
    g_snprintf(shapes, sizeof shapes, "%dx%dx%d%s", sh[0].m, sh[0].n, sh[0].k, want_dx ? " (+dW, dX)" : " (+dW)");
    printf("%-6d %-5s %-28s %9.3f %9.3f %9.0f %9.0f %7.1f\n", i + 1, tp_layer_names[d->kind], shapes, lay * 1e3,
           raw * 1e3, flops / lay / 1e9, flops / raw / 1e9, 100 * raw / lay);
    sum_raw += raw, sum_layer += lay, sum_flops += flops;
  }
  printf("%-6s %-5s %-28s %9.3f %9.3f %9.0f %9.0f %7.1f\n", "sum", "", "linear and conv layers", sum_layer * 1e3,
         sum_raw * 1e3, sum_flops / sum_layer / 1e9, sum_flops / sum_raw / 1e9, 100 * sum_raw / sum_layer);
  printf("total layers_gflops=%.0f raw_gflops=%.0f efficiency=%.1f\n", sum_flops / sum_layer / 1e9,
         sum_flops / sum_raw / 1e9, 100 * sum_raw / sum_layer);
  cublasDestroy(h);
  cudaStreamDestroy(st);
  tp_backend_free(be);
  tp_model_free(m);
  return 0;
}
