/* tp_cuda_kernel.cuh — what every kernel file of the cuda backend shares: the launch geometry of the
 * grid-stride loops (a fixed block size, a grid capped so that huge n reuses the threads), the
 * launchers' first step (stale errors cleared) and the
 * window arithmetic of the gathering backward passes (col2im, pooling). */
#ifndef TP_CUDA_KERNEL_CUH
#define TP_CUDA_KERNEL_CUH

#include "tp_cuda.h"

#define TP_CUDA_BLOCK 256

/* Every launcher starts here: what an earlier call left as the thread's last error (cudaEventQuery's
 * cudaErrorNotReady while the NCCL transport polls, a failure already reported) is cleared, so that
 * the cudaGetLastError() a launcher returns is its own launch's status. */
static inline void tp_cuda_launch_begin(void)
{
  (void)cudaGetLastError();
}

/* Blocks for n items: enough to cover n, at most 4096 (the loops stride over the rest); ≥ 1. */
static inline unsigned tp_cuda_grid(size_t n)
{
  size_t g = (n + TP_CUDA_BLOCK - 1) / TP_CUDA_BLOCK;
  return g < 1 ? 1u : g > 4096 ? 4096u : (unsigned)g;
}

/* Σ of v over the block, in every thread's return: a fixed-order tree in sh (TP_CUDA_BLOCK values
 * of shared memory), so that a sum does not depend on the order threads arrive in. */
template <typename T> __device__ static inline T tp_cuda_block_sum(T v, T *sh)
{
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int w = TP_CUDA_BLOCK / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w)
      sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  T total = sh[0];
  __syncthreads();
  return total;
}

/* for (i = this thread's first; i < n; i += every thread) */
#define TP_CUDA_FOR(i, n)                                                                          \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n);                  \
       i += (size_t)blockDim.x * gridDim.x)

/* The outputs o in [lo, hi] whose window o·stride − pad + [0, k) covers input position i. */
__device__ static inline void tp_cuda_covering(int i, int k, int stride, int pad, int nout, int *lo, int *hi)
{
  int top = i + pad; /* o·stride ≤ top and o·stride > top − k */
  int l = top - k + 1 <= 0 ? 0 : (top - k + 1 + stride - 1) / stride;
  int h = top < 0 ? -1 : top / stride;
  *lo = l;
  *hi = h < nout - 1 ? h : nout - 1;
}

#endif
