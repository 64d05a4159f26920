/* cuda_im2col.cu — unfolding of image patches for the convolution's GEMM and the folding back of
 * their gradients. cols [cin·k·k][nb·hout·wout] (columns ordered sample, row, column), as in
 * exec/cpu/cpu_conv.c. col2im gathers: each input element sums the columns that read it, in a
 * fixed order, so the result is deterministic and dx is overwritten (no zeroing, no atomics). */
#include "tp_cuda_kernel.cuh"

__global__ static void im2col_kernel(TpWindow s, int nb, const float *x, float *cols)
{
  size_t hw = (size_t)s.hout * s.wout, ncols = (size_t)nb * hw;
  size_t total = (size_t)s.cin * s.k * s.k * ncols;
  TP_CUDA_FOR(i, total) {
    size_t col = i % ncols, row = i / ncols;
    int n = (int)(col / hw), p = (int)(col % hw);
    int oh = p / s.wout, ow = p % s.wout;
    int kj = (int)(row % s.k), ki = (int)(row / s.k % s.k), c = (int)(row / ((size_t)s.k * s.k));
    int ih = oh * s.stride - s.pad + ki, iw = ow * s.stride - s.pad + kj;
    float v = 0.0f;
    if (ih >= 0 && ih < s.hin && iw >= 0 && iw < s.win)
      v = x[(((size_t)n * s.cin + c) * s.hin + ih) * s.win + iw];
    cols[i] = v;
  }
}

__global__ static void col2im_kernel(TpWindow s, int nb, const float *cols, float *dx)
{
  size_t hw = (size_t)s.hout * s.wout, ncols = (size_t)nb * hw;
  size_t total = (size_t)nb * s.cin * s.hin * s.win;
  TP_CUDA_FOR(i, total) {
    int iw = (int)(i % s.win), ih = (int)(i / s.win % s.hin);
    size_t nc = i / ((size_t)s.win * s.hin);
    int c = (int)(nc % s.cin), n = (int)(nc / s.cin);
    int oh0, oh1, ow0, ow1;
    tp_cuda_covering(ih, s.k, s.stride, s.pad, s.hout, &oh0, &oh1);
    tp_cuda_covering(iw, s.k, s.stride, s.pad, s.wout, &ow0, &ow1);
    float sum = 0.0f;
    for (int oh = oh0; oh <= oh1; oh++) {
      int ki = ih + s.pad - oh * s.stride;
      for (int ow = ow0; ow <= ow1; ow++) {
        int kj = iw + s.pad - ow * s.stride;
        size_t row = ((size_t)c * s.k + ki) * s.k + kj;
        sum += cols[row * ncols + (size_t)n * hw + (size_t)oh * s.wout + ow];
      }
    }
    dx[i] = sum;
  }
}

extern "C" cudaError_t tp_cuda_im2col(cudaStream_t st, const TpWindow *s, int nb, const float *x, float *cols)
{
  tp_cuda_launch_begin();
  size_t total = (size_t)s->cin * s->k * s->k * nb * s->hout * s->wout;
  if (total)
    im2col_kernel<<<tp_cuda_grid(total), TP_CUDA_BLOCK, 0, st>>>(*s, nb, x, cols);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_col2im(cudaStream_t st, const TpWindow *s, int nb, const float *cols, float *dx)
{
  tp_cuda_launch_begin();
  size_t total = (size_t)nb * s->cin * s->hin * s->win;
  if (total)
    col2im_kernel<<<tp_cuda_grid(total), TP_CUDA_BLOCK, 0, st>>>(*s, nb, cols, dx);
  return cudaGetLastError();
}
