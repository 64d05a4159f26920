/* cuda_optim.cu — the optimizer steps (SGD with momentum and weight decay, AdamW: the formulations of
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

__global__ static void adamw_kernel(size_t n, TpAdamW h, const float *w_in, const float *grad, float *m, float *v,
                                    float *w_out)
{
  const float decay = 1.0f - h.lr * h.weight_decay, inv1 = 1.0f / h.bias1, inv2 = 1.0f / h.bias2;
  TP_CUDA_FOR(i, n) {
    float g = grad[i];
    float mi = h.beta1 * m[i] + (1.0f - h.beta1) * g, vi = h.beta2 * v[i] + (1.0f - h.beta2) * g * g;
    m[i] = mi, v[i] = vi;
    w_out[i] = w_in[i] * decay - h.lr * (mi * inv1) / (sqrtf(vi * inv2) + h.eps);
  }
}

extern "C" cudaError_t tp_cuda_adamw(cudaStream_t st, size_t n, const TpAdamW *h, const float *w_in, const float *grad,
                                     float *m, float *v, float *w_out)
{
  tp_cuda_launch_begin();
  if (n)
    adamw_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(n, *h, w_in, grad, m, v, w_out);
  return cudaGetLastError();
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
