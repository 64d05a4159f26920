/* cuda_optim.cu — the optimizer step (SGD with momentum and weight decay, the formulation of
 * exec/cpu/cpu_optim.c) and I-TiMePReSt's blend of two weight versions; w_out/out may alias. */
#include "tp_cuda_kernel.cuh"

__global__ static void sgd_kernel(size_t n, float lr, float momentum, float weight_decay, const float *w_in,
                                  const float *grad, float *mom, float *w_out)
{
  TP_CUDA_FOR(i, n) {
    float w = w_in[i];
    float g = grad[i] + weight_decay * w;
    float m = momentum * mom[i] + g;
    mom[i] = m;
    w_out[i] = w - lr * m;
  }
}

__global__ static void blend_kernel(size_t n, float s, const float *a, const float *b, float *out)
{
  float r = 1.0f - s;
  TP_CUDA_FOR(i, n)
    out[i] = s * a[i] + r * b[i];
}

extern "C" cudaError_t tp_cuda_sgd(cudaStream_t st, size_t n, float lr, float momentum, float weight_decay,
                                   const float *w_in, const float *grad, float *mom, float *w_out)
{
  tp_cuda_launch_begin();
  if (n)
    sgd_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(n, lr, momentum, weight_decay, w_in, grad, mom, w_out);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_blend(cudaStream_t st, size_t n, float s, const float *a, const float *b, float *out)
{
  tp_cuda_launch_begin();
  if (n)
    blend_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(n, s, a, b, out);
  return cudaGetLastError();
}
