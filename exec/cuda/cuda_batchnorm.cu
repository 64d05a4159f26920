/* cuda_batchnorm.cu — batch normalisation over [batch][c][hw] (tp_backend.h's contract), the cpu
 * backend's arithmetic (exec/cpu/cpu_batchnorm.c) on the device: one block per channel reduces its
 * batch·hw values in double, in a fixed order (two passes: the mean, then the squared deviations),
 * into the channel's statistics; an elementwise kernel then normalises, or forms the input gradient. */
#include "tp_cuda_kernel.cuh"

/* The block's sum of v, in every thread's return. */
__device__ static double block_sum(double v)
{
  __shared__ double part[TP_CUDA_BLOCK];
  return tp_cuda_block_sum(v, part);
}

/* Where the j-th value of channel ch lies in [nb][c][hw]: sample j / hw, position j mod hw (in 32
 * bits where the tensor fits them: a 64-bit division is many times slower on the device). */
__device__ static inline size_t at_of(size_t j, int c, int ch, size_t hw, bool narrow)
{
  if (narrow) {
    unsigned jj = (unsigned)j, h = (unsigned)hw, q = jj / h;
    return ((size_t)q * c + ch) * hw + (jj - q * h);
  }
  return ((j / hw) * c + ch) * hw + j % hw;
}

/* Channel blockIdx.x's mean and biased variance. */
__device__ static void channel_stats(int nb, int c, size_t hw, const float *x, double *mean, double *var)
{
  int ch = blockIdx.x;
  size_t n = (size_t)nb * hw;
  bool narrow = n * c <= 0xffffffffu;
  double s = 0.0;
  for (size_t j = threadIdx.x; j < n; j += blockDim.x)
    s += x[at_of(j, c, ch, hw, narrow)];
  double m = block_sum(s) / (double)n, q = 0.0;
  for (size_t j = threadIdx.x; j < n; j += blockDim.x) {
    double d = (double)x[at_of(j, c, ch, hw, narrow)] - m;
    q += d * d;
  }
  *mean = m, *var = block_sum(q) / (double)n;
}

/* The channel of element i of [nb][c][hw]. */
__device__ static inline int channel_of(size_t i, int c, size_t hw, bool narrow)
{
  return narrow ? (int)(((unsigned)i / (unsigned)hw) % (unsigned)c) : (int)((i / hw) % c);
}

/* stats[2ch] = mean, stats[2ch+1] = 1/√(var + eps) of each channel (training: the batch's, the
 * running statistics updated; inference: the running ones). */
__global__ static void bn_stats_kernel(int nb, int c, size_t hw, float eps, float momentum, int training,
                                       const float *x, float *running, float *stats)
{
  int ch = blockIdx.x;
  double mean, var;
  if (training) {
    channel_stats(nb, c, hw, x, &mean, &var);
    double n = (double)nb * (double)hw;
    if (running && threadIdx.x == 0) {
      running[ch] = (float)((1.0 - momentum) * running[ch] + momentum * mean);
      running[c + ch] = (float)((1.0 - momentum) * running[c + ch] + momentum * (n > 1 ? var * n / (n - 1) : var));
    }
  } else
    mean = running[ch], var = running[c + ch];
  if (threadIdx.x == 0)
    stats[2 * ch] = (float)mean, stats[2 * ch + 1] = (float)(1.0 / sqrt(var + eps));
}

__global__ static void bn_apply_kernel(int nb, int c, size_t hw, const float *x, const float *w, const float *b,
                                       const float *stats, float *y)
{
  bool narrow = (size_t)nb * c * hw <= 0xffffffffu;
  TP_CUDA_FOR(i, (size_t)nb * c * hw) {
    int ch = channel_of(i, c, hw, narrow);
    y[i] = (x[i] - stats[2 * ch]) * (stats[2 * ch + 1] * w[ch]) + b[ch];
  }
}

/* stats[4ch..]: mean, rstd, mean(dy), mean(dy·x̂); dw, db accumulated where not NULL */
__global__ static void bn_grad_stats_kernel(int nb, int c, size_t hw, float eps, const float *x, const float *dy,
                                            float *stats, float *dw, float *db)
{
  int ch = blockIdx.x;
  double mean, var;
  channel_stats(nb, c, hw, x, &mean, &var);
  double rstd = 1.0 / sqrt(var + eps), sdy = 0.0, sdyx = 0.0;
  size_t n = (size_t)nb * hw;
  bool narrow = n * c <= 0xffffffffu;
  for (size_t j = threadIdx.x; j < n; j += blockDim.x) {
    size_t at = at_of(j, c, ch, hw, narrow);
    sdy += dy[at], sdyx += (double)dy[at] * (((double)x[at] - mean) * rstd);
  }
  sdy = block_sum(sdy), sdyx = block_sum(sdyx);
  if (threadIdx.x == 0) {
    if (dw)
      dw[ch] += (float)sdyx, db[ch] += (float)sdy;
    stats[4 * ch] = (float)mean, stats[4 * ch + 1] = (float)rstd;
    stats[4 * ch + 2] = (float)(sdy / (double)n), stats[4 * ch + 3] = (float)(sdyx / (double)n);
  }
}

__global__ static void bn_dx_kernel(int nb, int c, size_t hw, const float *x, const float *w, const float *dy,
                                    const float *stats, float *dx)
{
  bool narrow = (size_t)nb * c * hw <= 0xffffffffu;
  TP_CUDA_FOR(i, (size_t)nb * c * hw) {
    int ch = channel_of(i, c, hw, narrow);
    const float *s = stats + 4 * ch;
    dx[i] = w[ch] * s[1] * (dy[i] - s[2] - (x[i] - s[0]) * s[1] * s[3]);
  }
}

extern "C" cudaError_t tp_cuda_bn_fwd(cudaStream_t st, int nb, int c, int hw, float eps, float momentum, int training,
                                      const float *x, const float *w, const float *b, float *running, float *stats,
                                      float *y)
{
  tp_cuda_launch_begin();
  size_t n = (size_t)nb * c * hw;
  if (!n)
    return cudaGetLastError();
  bn_stats_kernel<<<c, TP_CUDA_BLOCK, 0, st>>>(nb, c, (size_t)hw, eps, momentum, training, x, running, stats);
  bn_apply_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(nb, c, (size_t)hw, x, w, b, stats, y);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_bn_bwd(cudaStream_t st, int nb, int c, int hw, float eps, const float *x,
                                      const float *w, const float *dy, float *stats, float *dx, float *dw, float *db)
{
  tp_cuda_launch_begin();
  size_t n = (size_t)nb * c * hw;
  if (!n)
    return cudaGetLastError();
  bn_grad_stats_kernel<<<c, TP_CUDA_BLOCK, 0, st>>>(nb, c, (size_t)hw, eps, x, dy, stats, dw, db);
  if (dx)
    bn_dx_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(nb, c, (size_t)hw, x, w, dy, stats, dx);
  return cudaGetLastError();
}
