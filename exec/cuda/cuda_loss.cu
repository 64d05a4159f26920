/* cuda_loss.cu — softmax with cross-entropy. One thread per sample computes the probabilities (in
 * double, as the cpu backend does), its loss and whether its first maximal score is the label; one
 * block then reduces losses and hits in a fixed order into result = {double loss sum, int count}. */
#include "tp_cuda_kernel.cuh"

__global__ static void softmax_ce_kernel(int batch, int classes, const float *x, const gint32 *labels, float *probs,
                                         double *sample_loss, int *sample_hit)
{
  TP_CUDA_FOR(n, (size_t)batch) {
    const float *s = x + n * classes;
    float *p = probs + n * classes;
    int best = 0;
    for (int c = 1; c < classes; c++)
      if (s[c] > s[best])
        best = c;
    double sum = 0.0;
    for (int c = 0; c < classes; c++)
      sum += exp((double)s[c] - s[best]);
    for (int c = 0; c < classes; c++)
      p[c] = (float)(exp((double)s[c] - s[best]) / sum);
    if (labels) {
      gint32 y = labels[n];
      sample_loss[n] = log(sum) - ((double)s[y] - s[best]);
      sample_hit[n] = best == y;
    }
  }
}

__global__ static void reduce_kernel(int batch, const double *sample_loss, const int *sample_hit, double *result)
{
  __shared__ double loss[TP_CUDA_BLOCK];
  __shared__ int hit[TP_CUDA_BLOCK];
  double l = 0.0;
  int h = 0;
  for (int n = threadIdx.x; n < batch; n += blockDim.x)
    l += sample_loss[n], h += sample_hit[n];
  loss[threadIdx.x] = l;
  hit[threadIdx.x] = h;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half) {
      loss[threadIdx.x] += loss[threadIdx.x + half];
      hit[threadIdx.x] += hit[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    result[0] = loss[0];
    *(int *)(result + 1) = hit[0];
  }
}

__global__ static void softmax_ce_bwd_kernel(int batch, int classes, const float *probs, const gint32 *labels,
                                             float scale, float *dx)
{
  TP_CUDA_FOR(i, (size_t)batch * classes) {
    int c = (int)(i % classes), n = (int)(i / classes);
    dx[i] = scale * (probs[i] - (c == labels[n] ? 1.0f : 0.0f));
  }
}

extern "C" cudaError_t tp_cuda_softmax_ce_fwd(cudaStream_t st, int batch, int classes, const float *x,
                                              const gint32 *labels, float *probs, double *sample_loss,
                                              int *sample_hit, double *result)
{
  tp_cuda_launch_begin();
  if (batch > 0)
    softmax_ce_kernel<<<tp_cuda_grid((size_t)batch), TP_CUDA_BLOCK, 0, st>>>(batch, classes, x, labels, probs,
                                                                              sample_loss, sample_hit);
  cudaError_t rc = cudaGetLastError();
  if (rc == cudaSuccess && labels)
    reduce_kernel<<<1, TP_CUDA_BLOCK, 0, st>>>(batch, sample_loss, sample_hit, result);
  return rc != cudaSuccess ? rc : cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_softmax_ce_bwd(cudaStream_t st, int batch, int classes, const float *probs,
                                              const gint32 *labels, float scale, float *dx)
{
  tp_cuda_launch_begin();
  size_t n = (size_t)batch * classes;
  if (n)
    softmax_ce_bwd_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(batch, classes, probs, labels, scale, dx);
  return cudaGetLastError();
}
