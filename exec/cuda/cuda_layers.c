/* cuda_layers.c — the GEMM layers on the cuda backend: linear (cuBLAS, bias by its own kernel) and
 * conv2d as im2col + cuBLAS SGEMM over chunks of samples, the same decomposition as the cpu backend
 * (exec/cpu/cpu_conv.c): cols [cin·k·k][nb·hout·wout], prod = w·cols, scattered into y with the
 * bias; backward dw += dy'·colsᵀ, db += Σ dy', dcols = wᵀ·dy', then col2im.  dw NULL (an input-gradient
 * operation I): no weight gradient; dx NULL (a weight-gradient operation W): no input gradient. */
#include "config.h"
#include "tp_cuda.h"

/* floats of unfolded input per chunk (64 MiB, at least one sample): large enough to keep the GPU
 * busy with one GEMM, small enough that vgg16 at batch 128 needs no gigabytes of workspace */
#define TP_CUDA_CONV_CHUNK_FLOATS ((size_t)1 << 24)

gboolean tp_cuda_linear_forward(const TpBackend *be, int batch, int in, int out, const float *x, const float *w,
                                const float *b, float *y, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  cudaStream_t st = tp_cuda_stream(be);
  if (b)
    TP_CUDA_CHECK(tp_cuda_bias_rows(st, batch, out, b, y), err);
  return tp_cuda_sgemm(be, FALSE, TRUE, batch, out, in, 1.0f, x, in, w, in, b ? 1.0f : 0.0f, y, out, err);
}

gboolean tp_cuda_linear_backward(const TpBackend *be, int batch, int in, int out, const float *x, const float *w,
                                 const float *dy, float *dx, float *dw, float *db, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  if (db)
    TP_CUDA_CHECK(tp_cuda_bias_grad_rows(tp_cuda_stream(be), batch, out, dy, db), err);
  if (dw && !tp_cuda_sgemm(be, TRUE, FALSE, out, in, batch, 1.0f, dy, out, x, in, 1.0f, dw, in, err))
    return FALSE;
  return !dx || tp_cuda_sgemm(be, FALSE, FALSE, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, err);
}

static int chunk_samples(const TpWindow *s, int batch)
{
  size_t per = (size_t)s->cin * s->k * s->k * s->hout * s->wout;
  size_t nb = per ? TP_CUDA_CONV_CHUNK_FLOATS / per : (size_t)batch;
  if (nb < 1)
    nb = 1;
  return nb > (size_t)batch ? batch : (int)nb;
}

size_t tp_cuda_conv_workspace(const TpBackend *be, const TpWindow *s, int batch)
{
  (void)be;
  size_t cols = (size_t)chunk_samples(s, batch) * s->hout * s->wout;
  return ((size_t)s->cin * s->k * s->k + s->cout) * cols;
}

gboolean tp_cuda_conv_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                              const float *b, float *y, float *work, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  cudaStream_t st = tp_cuda_stream(be);
  int K = s->cin * s->k * s->k, chunk = chunk_samples(s, batch);
  size_t hw = (size_t)s->hout * s->wout, in_sz = (size_t)s->cin * s->hin * s->win, out_sz = s->cout * hw;
  for (int n0 = 0; n0 < batch; n0 += chunk) {
    int nb = MIN(chunk, batch - n0);
    size_t ncols = nb * hw;
    float *cols = work, *prod = work + (size_t)K * ncols;
    TP_CUDA_CHECK(tp_cuda_im2col(st, s, nb, x + n0 * in_sz, cols), err);
    if (!tp_cuda_sgemm(be, FALSE, FALSE, s->cout, (int)ncols, K, 1.0f, w, K, cols, (int)ncols, 0.0f, prod,
                       (int)ncols, err))
      return FALSE;
    TP_CUDA_CHECK(tp_cuda_conv_scatter(st, nb, s->cout, hw, prod, b, y + n0 * out_sz), err);
  }
  return TRUE;
}

gboolean tp_cuda_conv_backward(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                               const float *dy, float *dx, float *dw, float *db, float *work, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  cudaStream_t st = tp_cuda_stream(be);
  int K = s->cin * s->k * s->k, chunk = chunk_samples(s, batch);
  size_t hw = (size_t)s->hout * s->wout, in_sz = (size_t)s->cin * s->hin * s->win, out_sz = s->cout * hw;
  if (db)
    TP_CUDA_CHECK(tp_cuda_conv_bias_grad(st, batch, s->cout, hw, dy, db), err);
  for (int n0 = 0; n0 < batch; n0 += chunk) {
    int nb = MIN(chunk, batch - n0);
    size_t ncols = nb * hw;
    float *cols = work, *dyt = work + (size_t)K * ncols;
    TP_CUDA_CHECK(tp_cuda_conv_gather(st, nb, s->cout, hw, dy + n0 * out_sz, dyt), err);
    if (dw) {
      TP_CUDA_CHECK(tp_cuda_im2col(st, s, nb, x + n0 * in_sz, cols), err);
      if (!tp_cuda_sgemm(be, FALSE, TRUE, s->cout, K, (int)ncols, 1.0f, dyt, (int)ncols, cols, (int)ncols, 1.0f, dw,
                         K, err))
        return FALSE;
    }
    if (!dx)
      continue;
    if (!tp_cuda_sgemm(be, TRUE, FALSE, K, (int)ncols, s->cout, 1.0f, w, K, dyt, (int)ncols, 0.0f, cols,
                       (int)ncols, err))
      return FALSE;
    TP_CUDA_CHECK(tp_cuda_col2im(st, s, nb, cols, dx + n0 * in_sz), err);
  }
  return TRUE;
}
