/* cuda_bias.cu — biases and their gradients, and the reshuffles between the convolution's GEMM
 * layout [c][n·hw] and the activation layout [n][c][hw]. Every reduction runs in a fixed order
 * (no atomics), so a gradient is the same from run to run. */
#include "tp_cuda_kernel.cuh"

__global__ static void bias_rows_kernel(int rows, int cols, const float *b, float *y)
{
  TP_CUDA_FOR(i, (size_t)rows * cols)
    y[i] = b[i % cols];
}

/* one thread per column: db[c] += Σ_r dy[r][c], rows in order */
__global__ static void bias_grad_rows_kernel(int rows, int cols, const float *dy, float *db)
{
  TP_CUDA_FOR(c, (size_t)cols) {
    float sum = 0.0f;
    for (int r = 0; r < rows; r++)
      sum += dy[(size_t)r * cols + c];
    db[c] += sum;
  }
}

__global__ static void conv_scatter_kernel(int nb, int c, size_t hw, const float *prod, const float *b, float *y)
{
  size_t ncols = (size_t)nb * hw;
  TP_CUDA_FOR(i, ncols * c) { /* i indexes y [n][ch][p] */
    size_t p = i % hw, ch = i / hw % c, n = i / (hw * c);
    y[i] = prod[ch * ncols + n * hw + p] + (b ? b[ch] : 0.0f);
  }
}

__global__ static void conv_gather_kernel(int nb, int c, size_t hw, const float *dy, float *dyt)
{
  size_t ncols = (size_t)nb * hw;
  TP_CUDA_FOR(i, ncols * c) { /* i indexes dy [n][ch][p] */
    size_t p = i % hw, ch = i / hw % c, n = i / (hw * c);
    dyt[ch * ncols + n * hw + p] = dy[i];
  }
}

/* one block per channel: each thread sums a strided share, then a tree in shared memory */
__global__ static void conv_bias_grad_kernel(int nb, int c, size_t hw, const float *dy, float *db)
{
  __shared__ float part[TP_CUDA_BLOCK];
  int ch = blockIdx.x;
  float sum = 0.0f;
  for (size_t j = threadIdx.x; j < (size_t)nb * hw; j += blockDim.x) {
    size_t n = j / hw, p = j % hw;
    sum += dy[(n * c + ch) * hw + p];
  }
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half)
      part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    db[ch] += part[0];
}

extern "C" cudaError_t tp_cuda_bias_rows(cudaStream_t st, int rows, int cols, const float *b, float *y)
{
  tp_cuda_launch_begin();
  size_t n = (size_t)rows * cols;
  if (n)
    bias_rows_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(rows, cols, b, y);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_bias_grad_rows(cudaStream_t st, int rows, int cols, const float *dy, float *db)
{
  tp_cuda_launch_begin();
  if (cols > 0)
    bias_grad_rows_kernel<<<tp_cuda_grid((size_t)cols), TP_CUDA_BLOCK, 0, st>>>(rows, cols, dy, db);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_conv_scatter(cudaStream_t st, int nb, int c, size_t hw, const float *prod,
                                            const float *b, float *y)
{
  tp_cuda_launch_begin();
  size_t n = (size_t)nb * c * hw;
  if (n)
    conv_scatter_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(nb, c, hw, prod, b, y);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_conv_gather(cudaStream_t st, int nb, int c, size_t hw, const float *dy, float *dyt)
{
  tp_cuda_launch_begin();
  size_t n = (size_t)nb * c * hw;
  if (n)
    conv_gather_kernel<<<tp_cuda_grid(n), TP_CUDA_BLOCK, 0, st>>>(nb, c, hw, dy, dyt);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_cuda_conv_bias_grad(cudaStream_t st, int nb, int c, size_t hw, const float *dy,
                                              float *db)
{
  tp_cuda_launch_begin();
  if (c > 0)
    conv_bias_grad_kernel<<<c, TP_CUDA_BLOCK, 0, st>>>(nb, c, hw, dy, db);
  return cudaGetLastError();
}
