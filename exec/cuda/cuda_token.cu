/* cuda_token.cu — the transformer kernels of the cuda backend, twins of exec/cpu/cpu_token.c: y +=
 * αx, the token embedding (its backward sums each column's rows in order, without atomics), LayerNorm and RMSNorm (a block per row, fixed-order shared-memory reductions),
 * rotary positions, the causal softmax (a block per row), GELU and SwiGLU. */
#include "tp_cuda_kernel.cuh"

__global__ static void axpy_kernel(size_t n, float alpha, const float *x, float *y)
{
  TP_CUDA_FOR(i, n)
    y[i] += alpha * x[i];
}

__global__ static void embed_fwd_kernel(int rows, int s, int d, const float *ids, const float *table, const float *pos,
                                        float *y)
{
  TP_CUDA_FOR(i, (size_t)rows * d) {
    size_t r = i / d, j = i % d;
    float v = table[(size_t)ids[r] * d + j];
    y[i] = pos ? v + pos[(r % s) * d + j] : v;
  }
}

/* A thread per column j, the rows in order: every element's sum in one order, as the cpu's (no
 * atomics, so that two runs agree bit for bit). */
__global__ static void embed_bwd_kernel(int rows, int s, int d, const float *ids, const float *dy, float *dtable,
                                        float *dpos)
{
  TP_CUDA_FOR(j, (size_t)d)
    for (int r = 0; r < rows; r++) {
      float g = dy[(size_t)r * d + j];
      dtable[(size_t)ids[r] * d + j] += g;
      if (dpos)
        dpos[(size_t)(r % s) * d + j] += g;
    }
}

/* Σ of v over the block (every thread gets it); sh holds TP_CUDA_BLOCK values. */
__device__ static float block_sum(float v, float *sh) { return tp_cuda_block_sum(v, sh); }

__device__ static void row_stats(const float *x, int d, float eps, int rms, float *sh, float *mean, float *rstd)
{
  float s = 0;
  for (int j = threadIdx.x; j < d; j += blockDim.x)
    s += x[j];
  float mu = rms ? 0.0f : block_sum(s, sh) / d, q = 0;
  for (int j = threadIdx.x; j < d; j += blockDim.x)
    q += (x[j] - mu) * (x[j] - mu);
  *mean = mu;
  *rstd = rsqrtf(block_sum(q, sh) / d + eps);
}

__global__ static void norm_fwd_kernel(int d, float eps, int rms, const float *x, const float *w, const float *b, float *y)
{
  __shared__ float sh[TP_CUDA_BLOCK];
  const float *xr = x + (size_t)blockIdx.x * d;
  float *yr = y + (size_t)blockIdx.x * d, mean, rstd;
  row_stats(xr, d, eps, rms, sh, &mean, &rstd);
  for (int j = threadIdx.x; j < d; j += blockDim.x)
    yr[j] = (xr[j] - mean) * rstd * w[j] + (rms ? 0.0f : b[j]);
}

__global__ static void norm_bwd_kernel(int d, float eps, int rms, const float *x, const float *w, const float *dy,
                                       float *dx)
{
  __shared__ float sh[TP_CUDA_BLOCK];
  const float *xr = x + (size_t)blockIdx.x * d, *g = dy + (size_t)blockIdx.x * d;
  float mean, rstd, sg = 0, sgx = 0;
  row_stats(xr, d, eps, rms, sh, &mean, &rstd);
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float gh = g[j] * w[j];
    sg += gh, sgx += gh * (xr[j] - mean) * rstd;
  }
  float mg = rms ? 0.0f : block_sum(sg, sh) / d, mgx = block_sum(sgx, sh) / d;
  for (int j = threadIdx.x; j < d; j += blockDim.x)
    dx[(size_t)blockIdx.x * d + j] = rstd * (g[j] * w[j] - mg - (xr[j] - mean) * rstd * mgx);
}

/* Each row's mean and reciprocal standard deviation into stats[2r], stats[2r + 1] (a block per row). */
__global__ static void norm_stats_kernel(int d, float eps, int rms, const float *x, float *stats)
{
  __shared__ float sh[TP_CUDA_BLOCK];
  float mean, rstd;
  row_stats(x + (size_t)blockIdx.x * d, d, eps, rms, sh, &mean, &rstd);
  if (threadIdx.x == 0)
    stats[2 * blockIdx.x] = mean, stats[2 * blockIdx.x + 1] = rstd;
}

/* dw[j] (and db[j]) += Σ over rows: a thread per column, rows in order. */
__global__ static void norm_wgrad_kernel(int rows, int d, const float *x, const float *stats, const float *dy, float *dw,
                                         float *db)
{
  TP_CUDA_FOR(j, (size_t)d) {
    float aw = 0, ab = 0;
    for (int r = 0; r < rows; r++) {
      float g = dy[(size_t)r * d + j];
      aw += g * (x[(size_t)r * d + j] - stats[2 * r]) * stats[2 * r + 1], ab += g;
    }
    dw[j] += aw;
    if (db)
      db[j] += ab;
  }
}

__global__ static void rope_kernel(int rows, int s, int heads, int hd, int ld, float theta, float sign, float *x)
{
  int half = hd / 2;
  TP_CUDA_FOR(t, (size_t)rows * heads * half) {
    int i = (int)(t % half), h = (int)(t / half % heads);
    size_t r = t / half / heads;
    double ang = (double)(r % s) * pow((double)theta, -2.0 * i / hd);
    float c = (float)cos(ang), sn = sign * (float)sin(ang);
    float *v = x + r * ld + (size_t)h * hd;
    float a = v[i], b = v[i + half];
    v[i] = a * c - b * sn, v[i + half] = a * sn + b * c;
  }
}

/* A block per row of the n·s rows. */
__global__ static void csoftmax_fwd_kernel(int s, float scale, const float *x, float *y)
{
  __shared__ float sh[TP_CUDA_BLOCK];
  size_t row = blockIdx.x;
  int i = (int)(row % s);
  const float *xr = x + row * s;
  float *yr = y + row * s, m = -INFINITY;
  for (int j = threadIdx.x; j <= i; j += blockDim.x)
    m = fmaxf(m, scale * xr[j]);
  sh[threadIdx.x] = m;
  __syncthreads();
  for (int w = TP_CUDA_BLOCK / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w)
      sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + w]);
    __syncthreads();
  }
  m = sh[0];
  __syncthreads();
  float part = 0;
  for (int j = threadIdx.x; j <= i; j += blockDim.x)
    part += expf(scale * xr[j] - m);
  float inv = 1.0f / block_sum(part, sh);
  for (int j = threadIdx.x; j < s; j += blockDim.x)
    yr[j] = j <= i ? expf(scale * xr[j] - m) * inv : 0.0f;
}

__global__ static void csoftmax_bwd_kernel(int s, float scale, const float *y, const float *dy, float *dx)
{
  __shared__ float sh[TP_CUDA_BLOCK];
  size_t row = blockIdx.x;
  int i = (int)(row % s);
  const float *yr = y + row * s, *g = dy + row * s;
  float part = 0;
  for (int j = threadIdx.x; j <= i; j += blockDim.x)
    part += yr[j] * g[j];
  float dot = block_sum(part, sh);
  for (int j = threadIdx.x; j < s; j += blockDim.x)
    dx[row * s + j] = j <= i ? scale * yr[j] * (g[j] - dot) : 0.0f;
}

#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f

__global__ static void gelu_fwd_kernel(size_t n, const float *x, float *y)
{
  TP_CUDA_FOR(i, n) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_C * v * v * v)));
  }
}

__global__ static void gelu_bwd_kernel(size_t n, const float *x, const float *dy, float *dx)
{
  TP_CUDA_FOR(i, n) {
    float v = x[i], t = tanhf(GELU_K * (v + GELU_C * v * v * v));
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_C * v * v));
  }
}

__global__ static void swiglu_fwd_kernel(int rows, int f, const float *gu, float *y)
{
  TP_CUDA_FOR(i, (size_t)rows * f) {
    size_t r = i / f, j = i % f;
    float g = gu[r * 2 * f + j], u = gu[r * 2 * f + f + j];
    y[i] = g / (1.0f + expf(-g)) * u;
  }
}

__global__ static void swiglu_bwd_kernel(int rows, int f, const float *gu, const float *dy, float *dgu)
{
  TP_CUDA_FOR(i, (size_t)rows * f) {
    size_t r = i / f, j = i % f;
    float g = gu[r * 2 * f + j], u = gu[r * 2 * f + f + j], sig = 1.0f / (1.0f + expf(-g));
    dgu[r * 2 * f + j] = dy[i] * u * sig * (1.0f + g * (1.0f - sig));
    dgu[r * 2 * f + f + j] = dy[i] * g * sig;
  }
}

#define LAUNCH(n, kernel, ...)                                                                     \
  do {                                                                                             \
    tp_cuda_launch_begin();                                                                        \
    if ((n) > 0)                                                                                   \
      kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(__VA_ARGS__);                              \
    return cudaGetLastError();                                                                     \
  } while (0)

#define LAUNCH_ROWS(rows, kernel, ...)                                                             \
  do {                                                                                             \
    tp_cuda_launch_begin();                                                                        \
    if ((rows) > 0)                                                                                \
      kernel<<<(unsigned)(rows), TP_CUDA_BLOCK, 0, st>>>(__VA_ARGS__);                             \
    return cudaGetLastError();                                                                     \
  } while (0)

extern "C" cudaError_t tp_cuda_axpy_k(cudaStream_t st, size_t n, float alpha, const float *x, float *y)
{
  LAUNCH(n, axpy_kernel, n, alpha, x, y);
}
extern "C" cudaError_t tp_cuda_embed_fwd(cudaStream_t st, int rows, int s, int d, const float *ids, const float *table,
                                         const float *pos, float *y)
{
  LAUNCH((size_t)rows * d, embed_fwd_kernel, rows, s, d, ids, table, pos, y);
}
extern "C" cudaError_t tp_cuda_embed_bwd(cudaStream_t st, int rows, int s, int d, const float *ids, const float *dy,
                                         float *dtable, float *dpos)
{
  LAUNCH((size_t)d, embed_bwd_kernel, rows, s, d, ids, dy, dtable, dpos);
}
extern "C" cudaError_t tp_cuda_norm_fwd(cudaStream_t st, int rows, int d, float eps, int rms, const float *x,
                                        const float *w, const float *b, float *y)
{
  LAUNCH_ROWS(rows, norm_fwd_kernel, d, eps, rms, x, w, b, y);
}
extern "C" cudaError_t tp_cuda_norm_bwd(cudaStream_t st, int rows, int d, float eps, int rms, const float *x,
                                        const float *w, const float *dy, float *dx)
{
  LAUNCH_ROWS(rows, norm_bwd_kernel, d, eps, rms, x, w, dy, dx);
}
extern "C" cudaError_t tp_cuda_norm_stats(cudaStream_t st, int rows, int d, float eps, int rms, const float *x,
                                          float *stats)
{
  LAUNCH_ROWS(rows, norm_stats_kernel, d, eps, rms, x, stats);
}
extern "C" cudaError_t tp_cuda_norm_wgrad(cudaStream_t st, int rows, int d, const float *x, const float *stats,
                                          const float *dy, float *dw, float *db)
{
  LAUNCH((size_t)d, norm_wgrad_kernel, rows, d, x, stats, dy, dw, db);
}
extern "C" cudaError_t tp_cuda_rope_k(cudaStream_t st, int rows, int s, int heads, int hd, int ld, float theta,
                                      float sign, float *x)
{
  LAUNCH((size_t)rows * heads * (hd / 2), rope_kernel, rows, s, heads, hd, ld, theta, sign, x);
}
extern "C" cudaError_t tp_cuda_csoftmax_fwd(cudaStream_t st, int n, int s, float scale, const float *x, float *y)
{
  LAUNCH_ROWS((size_t)n * s, csoftmax_fwd_kernel, s, scale, x, y);
}
extern "C" cudaError_t tp_cuda_csoftmax_bwd(cudaStream_t st, int n, int s, float scale, const float *y, const float *dy,
                                            float *dx)
{
  LAUNCH_ROWS((size_t)n * s, csoftmax_bwd_kernel, s, scale, y, dy, dx);
}
extern "C" cudaError_t tp_cuda_gelu_fwd(cudaStream_t st, size_t n, const float *x, float *y)
{
  LAUNCH(n, gelu_fwd_kernel, n, x, y);
}
extern "C" cudaError_t tp_cuda_gelu_bwd(cudaStream_t st, size_t n, const float *x, const float *dy, float *dx)
{
  LAUNCH(n, gelu_bwd_kernel, n, x, dy, dx);
}
extern "C" cudaError_t tp_cuda_swiglu_fwd(cudaStream_t st, int rows, int f, const float *gu, float *y)
{
  LAUNCH((size_t)rows * f, swiglu_fwd_kernel, rows, f, gu, y);
}
extern "C" cudaError_t tp_cuda_swiglu_bwd(cudaStream_t st, int rows, int f, const float *gu, const float *dy,
                                          float *dgu)
{
  LAUNCH((size_t)rows * f, swiglu_bwd_kernel, rows, f, gu, dy, dgu);
}
