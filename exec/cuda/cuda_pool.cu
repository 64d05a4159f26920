/* cuda_pool.cu — max-pooling (with its argmax) and average pooling, one thread per output, the
 * comparisons and sums in the cpu backend's order (exec/cpu/cpu_pool.c). The backward passes
 * gather: each input element sums, in output order, the windows that cover it, so dx is
 * overwritten without atomics and equals the cpu's sums bit for bit. */
#include "tp_cuda_kernel.cuh"

__global__ static void maxpool_fwd_kernel(TpWindow s, size_t total, const float *x, float *y, gint32 *argmax)
{
  TP_CUDA_FOR(o, total) { /* o indexes y [plane][oh][ow] */
    int ow = (int)(o % s.wout), oh = (int)(o / s.wout % s.hout);
    const float *src = x + o / ((size_t)s.wout * s.hout) * ((size_t)s.hin * s.win);
    int best = -1;
    float v = 0.0f;
    for (int ki = 0; ki < s.k; ki++) {
      int ih = oh * s.stride - s.pad + ki;
      if (ih < 0 || ih >= s.hin)
        continue;
      for (int kj = 0; kj < s.k; kj++) {
        int iw = ow * s.stride - s.pad + kj, at = ih * s.win + iw;
        if (iw >= 0 && iw < s.win && (best < 0 || src[at] > v))
          best = at, v = src[at];
      }
    }
    y[o] = v;
    if (argmax)
      argmax[o] = best;
  }
}

__global__ static void maxpool_bwd_kernel(TpWindow s, size_t total, const float *dy, const gint32 *argmax, float *dx)
{
  TP_CUDA_FOR(i, total) { /* i indexes dx [plane][ih][iw] */
    int iw = (int)(i % s.win), ih = (int)(i / s.win % s.hin), at = ih * s.win + iw;
    size_t q = i / ((size_t)s.win * s.hin), outp = (size_t)s.hout * s.wout;
    int oh0, oh1, ow0, ow1;
    tp_cuda_covering(ih, s.k, s.stride, s.pad, s.hout, &oh0, &oh1);
    tp_cuda_covering(iw, s.k, s.stride, s.pad, s.wout, &ow0, &ow1);
    float sum = 0.0f;
    for (int oh = oh0; oh <= oh1; oh++)
      for (int ow = ow0; ow <= ow1; ow++) {
        size_t o = q * outp + (size_t)oh * s.wout + ow;
        if (argmax[o] == at)
          sum += dy[o];
      }
    dx[i] = sum;
  }
}

__global__ static void avgpool_fwd_kernel(TpWindow s, size_t total, const float *x, float *y)
{
  float inv = 1.0f / (float)(s.k * s.k);
  TP_CUDA_FOR(o, total) {
    int ow = (int)(o % s.wout), oh = (int)(o / s.wout % s.hout);
    const float *src = x + o / ((size_t)s.wout * s.hout) * ((size_t)s.hin * s.win);
    float sum = 0.0f;
    for (int ki = 0; ki < s.k; ki++) {
      int ih = oh * s.stride - s.pad + ki;
      for (int kj = 0; kj < s.k && ih >= 0 && ih < s.hin; kj++) {
        int iw = ow * s.stride - s.pad + kj;
        if (iw >= 0 && iw < s.win)
          sum += src[ih * s.win + iw];
      }
    }
    y[o] = sum * inv;
  }
}

__global__ static void avgpool_bwd_kernel(TpWindow s, size_t total, const float *dy, float *dx)
{
  float inv = 1.0f / (float)(s.k * s.k);
  TP_CUDA_FOR(i, total) {
    int iw = (int)(i % s.win), ih = (int)(i / s.win % s.hin);
    size_t q = i / ((size_t)s.win * s.hin), outp = (size_t)s.hout * s.wout;
    int oh0, oh1, ow0, ow1;
    tp_cuda_covering(ih, s.k, s.stride, s.pad, s.hout, &oh0, &oh1);
    tp_cuda_covering(iw, s.k, s.stride, s.pad, s.wout, &ow0, &ow1);
    float sum = 0.0f;
    for (int oh = oh0; oh <= oh1; oh++)
      for (int ow = ow0; ow <= ow1; ow++)
        sum += dy[q * outp + (size_t)oh * s.wout + ow] * inv;
    dx[i] = sum;
  }
}

extern "C" cudaError_t tp_cuda_maxpool_fwd(cudaStream_t st, const TpWindow *s, int batch, const float *x, float *y,
                                           gint32 *argmax)
{
  tp_cuda_launch_begin();
  size_t total = (size_t)batch * s->cin * s->hout * s->wout;
  if (total)
    maxpool_fwd_kernel<<<tp_cuda_grid(total), TP_CUDA_BLOCK, 0, st>>>(*s, total, x, y, argmax);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_maxpool_bwd(cudaStream_t st, const TpWindow *s, int batch, const float *dy,
                                           const gint32 *argmax, float *dx)
{
  tp_cuda_launch_begin();
  size_t total = (size_t)batch * s->cin * s->hin * s->win;
  if (total)
    maxpool_bwd_kernel<<<tp_cuda_grid(total), TP_CUDA_BLOCK, 0, st>>>(*s, total, dy, argmax, dx);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_avgpool_fwd(cudaStream_t st, const TpWindow *s, int batch, const float *x, float *y)
{
  tp_cuda_launch_begin();
  size_t total = (size_t)batch * s->cin * s->hout * s->wout;
  if (total)
    avgpool_fwd_kernel<<<tp_cuda_grid(total), TP_CUDA_BLOCK, 0, st>>>(*s, total, x, y);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_avgpool_bwd(cudaStream_t st, const TpWindow *s, int batch, const float *dy, float *dx)
{
  tp_cuda_launch_begin();
  size_t total = (size_t)batch * s->cin * s->hin * s->win;
  if (total)
    avgpool_bwd_kernel<<<tp_cuda_grid(total), TP_CUDA_BLOCK, 0, st>>>(*s, total, dy, dx);
  return cudaGetLastError();
}
