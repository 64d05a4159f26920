/* cuda_activation.cu — elementwise layers: ReLU, and inverted dropout whose mask comes from the
 * counter-based tp_dropout_keep of tp_backend.h (the very function the cpu backend calls), so that
 * masks agree with the cpu backend's bit for bit; the dropout backward is a product with the mask
 * (a float scale, the dropout layer's) or a choice by it (a byte, a transformer block's). */
#include "tp_cuda_kernel.cuh"

__global__ static void relu_fwd_kernel(size_t n, const float *x, float *y)
{
  TP_CUDA_FOR(i, n)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ static void relu_bwd_kernel(size_t n, const float *x, const float *dy, float *dx)
{
  TP_CUDA_FOR(i, n)
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ static void dropout_fwd_kernel(size_t n, float p, float keep, guint64 seed, const float *x, float *y,
                                          float *mask)
{
  TP_CUDA_FOR(i, n) {
    float m = tp_dropout_keep(seed, i, p) ? keep : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ static void dropout_byte_fwd_kernel(size_t n, float p, float keep, guint64 seed, guint64 first,
                                               const float *x, float *y, guint8 *mask)
{
  TP_CUDA_FOR(i, n) {
    guint8 m = tp_dropout_keep(seed, first + i, p);
    mask[i] = m;
    y[i] = m ? x[i] * keep : 0.0f;
  }
}

__global__ static void dropout_byte_bwd_kernel(size_t n, float keep, const guint8 *mask, const float *dy, float *dx)
{
  TP_CUDA_FOR(i, n)
    dx[i] = mask[i] ? dy[i] * keep : 0.0f;
}

__global__ static void mul_kernel(size_t n, const float *a, const float *b, float *out)
{
  TP_CUDA_FOR(i, n)
    out[i] = a[i] * b[i];
}

extern "C" cudaError_t tp_cuda_probe_kernels(void)
{
  struct cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, relu_fwd_kernel);
}

extern "C" cudaError_t tp_cuda_relu_fwd(cudaStream_t st, size_t n, const float *x, float *y)
{
  tp_cuda_launch_begin();
  if (n)
    relu_fwd_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(n, x, y);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_relu_bwd(cudaStream_t st, size_t n, const float *x, const float *dy, float *dx)
{
  tp_cuda_launch_begin();
  if (n)
    relu_bwd_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(n, x, dy, dx);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_dropout_fwd(cudaStream_t st, size_t n, float p, float keep, guint64 seed,
                                           const float *x, float *y, float *mask)
{
  tp_cuda_launch_begin();
  if (n)
    dropout_fwd_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(n, p, keep, seed, x, y, mask);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_dropout_byte_fwd(cudaStream_t st, size_t n, float p, float keep, guint64 seed,
                                                guint64 first, const float *x, float *y, guint8 *mask)
{
  tp_cuda_launch_begin();
  if (n)
    dropout_byte_fwd_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(n, p, keep, seed, first, x, y, mask);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_dropout_byte_bwd(cudaStream_t st, size_t n, float keep, const guint8 *mask,
                                                const float *dy, float *dx)
{
  tp_cuda_launch_begin();
  if (n)
    dropout_byte_bwd_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(n, keep, mask, dy, dx);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_mul(cudaStream_t st, size_t n, const float *a, const float *b, float *out)
{
  tp_cuda_launch_begin();
  if (n)
    mul_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(n, a, b, out);
  return cudaGetLastError();
}
