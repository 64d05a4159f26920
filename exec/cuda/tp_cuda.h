/* tp_cuda.h — the cuda backend's internals: its per-instance state (device, stream, cuBLAS handle,
 * scratch for labels and reductions), its checking macros (tp_gpu_check.h's, naming the backend), and
 * the kernel launchers. The launchers live in
 * the .cu files (one per kernel family, compiled by nvcc), enqueue on the given stream and return
 * the launch status; the host glue (.c files, compiled by the C compiler against the CUDA runtime
 * API) checks it. The module's one exported entry point is in tp_backend_cuda.h. */
#ifndef TP_CUDA_H
#define TP_CUDA_H

#include "tp_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef __CUDACC__ /* host glue only: the .cu files see the launchers and nothing else */
#include "tp_error.h"
#include "tp_gpu_check.h"

typedef struct {
  int device;
  cudaStream_t stream;
  cublasHandle_t blas;
  void *scratch; /* device: labels, per-sample losses and counts, the reduced result */
  size_t scratch_bytes;
  gboolean pools; /* allocations stream-ordered from the device's memory pool (cuda_backend.c) */
  cudaStream_t alloc; /* where those allocations are made: a stream that carries nothing else */
} TpCudaCtx;

static inline TpCudaCtx *tp_cuda_ctx(const TpBackend *be)
{
  return (TpCudaCtx *)be->ctx;
}

/* The instance's stream (its device made current first: tp_cuda_use). */
static inline cudaStream_t tp_cuda_stream(const TpBackend *be)
{
  return tp_cuda_ctx(be)->stream;
}

/* Make the instance's device current on the calling thread: a stage's thread need not have set it,
 * and cudaSetDevice on the current device costs next to nothing.  Every member that enqueues work
 * starts with TP_CUDA_CHECK(tp_cuda_use(be), err). */
static inline cudaError_t tp_cuda_use(const TpBackend *be)
{
  return cudaSetDevice(tp_cuda_ctx(be)->device);
}

/* The checks of tp_gpu_check.h, naming the cuda backend. */
#define TP_CUDA_CHECK(call, err) TP_GPU_CUDA("cuda backend", call, err)
#define TP_CUBLAS_CHECK(call, err) TP_GPU_CUBLAS("cuda backend", call, err)
#define TP_CUDA_LOG(call) TP_GPU_CUDA_LOG("cuda backend", call)

/* Device scratch of at least `bytes` on the backend's device (grown, never shrunk). */
gboolean tp_cuda_scratch(const TpBackend *be, size_t bytes, void **out, GError **err);

/* The TpBackend members implemented in the host glue (signatures as in tp_backend.h). */
gboolean tp_cuda_sgemm(const TpBackend *be, gboolean trans_a, gboolean trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
                       GError **err);
gboolean tp_cuda_linear_forward(const TpBackend *be, int batch, int in, int out, const float *x, const float *w,
                                const float *b, float *y, GError **err);
gboolean tp_cuda_linear_backward(const TpBackend *be, int batch, int in, int out, const float *x, const float *w,
                                 const float *dy, float *dx, float *dw, float *db, GError **err);
size_t tp_cuda_conv_workspace(const TpBackend *be, const TpWindow *s, int batch);
gboolean tp_cuda_conv_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                              const float *b, float *y, float *work, GError **err);
gboolean tp_cuda_conv_backward(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                               const float *dy, float *dx, float *dw, float *db, float *work, GError **err);
/* cuda_ops.c: the members on the backend's own kernels */
gboolean tp_cuda_maxpool_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, float *y,
                                 gint32 *argmax, GError **err);
gboolean tp_cuda_maxpool_backward(const TpBackend *be, const TpWindow *s, int batch, const float *dy,
                                  const gint32 *argmax, float *dx, GError **err);
gboolean tp_cuda_avgpool_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, float *y,
                                 GError **err);
gboolean tp_cuda_avgpool_backward(const TpBackend *be, const TpWindow *s, int batch, const float *dy, float *dx,
                                  GError **err);
gboolean tp_cuda_relu_forward(const TpBackend *be, size_t n, const float *x, float *y, GError **err);
gboolean tp_cuda_relu_backward(const TpBackend *be, size_t n, const float *x, const float *dy, float *dx,
                               GError **err);
gboolean tp_cuda_dropout_forward(const TpBackend *be, size_t n, float p, guint64 seed, const float *x, float *y,
                                 float *mask, GError **err);
gboolean tp_cuda_dropout_backward(const TpBackend *be, size_t n, const float *mask, const float *dy, float *dx,
                                  GError **err);
gboolean tp_cuda_dropout_byte_forward(const TpBackend *be, size_t n, float p, guint64 seed, guint64 first,
                                      const float *x, float *y, guint8 *mask, GError **err);
gboolean tp_cuda_dropout_byte_backward(const TpBackend *be, size_t n, float p, const guint8 *mask, const float *dy,
                                       float *dx, GError **err);
gboolean tp_cuda_softmax_ce_forward(const TpBackend *be, int batch, int classes, const float *x,
                                    const gint32 *labels, float *probs, double *loss_sum, int *correct, GError **err);
gboolean tp_cuda_softmax_ce_backward(const TpBackend *be, int batch, int classes, const float *probs,
                                     const gint32 *labels, float scale, float *dx, GError **err);
gboolean tp_cuda_sgd_step(const TpBackend *be, size_t n, float lr, float momentum, float weight_decay,
                          const float *w_in, const float *grad, float *mom, float *w_out, GError **err);
gboolean tp_cuda_blend_weights(const TpBackend *be, size_t n, float s, const float *a, const float *b, float *out,
                               GError **err);
gboolean tp_cuda_adamw_step(const TpBackend *be, size_t n, const TpAdamW *h, const float *w_in, const float *grad,
                            float *m, float *v, float *w_out, GError **err);
/* cuda_token_glue.c: the transformer members */
gboolean tp_cuda_sgemm_batched(const TpBackend *be, gboolean ta, gboolean tb, int m, int n, int k, float alpha,
                               const float *a, int lda, size_t sa, const float *b, int ldb, size_t sb, float beta,
                               float *c, int ldc, size_t sc, int count, GError **err);
gboolean tp_cuda_axpy(const TpBackend *be, size_t n, float alpha, const float *x, float *y, GError **err);
gboolean tp_cuda_embedding_forward(const TpBackend *be, int rows, int s, int d, const float *ids, const float *table,
                                   const float *pos, float *y, GError **err);
gboolean tp_cuda_embedding_backward(const TpBackend *be, int rows, int s, int d, const float *ids, const float *dy,
                                    float *dtable, float *dpos, GError **err);
gboolean tp_cuda_norm_forward(const TpBackend *be, int rows, int d, float eps, gboolean rms, const float *x,
                              const float *w, const float *b, float *y, GError **err);
gboolean tp_cuda_norm_backward(const TpBackend *be, int rows, int d, float eps, gboolean rms, const float *x,
                               const float *w, const float *dy, float *dx, float *dw, float *db, GError **err);
gboolean tp_cuda_batchnorm_forward(const TpBackend *be, int batch, int c, int hw, float eps, float momentum,
                                   gboolean training, const float *x, const float *w, const float *b, float *running,
                                   float *y, GError **err);
gboolean tp_cuda_batchnorm_backward(const TpBackend *be, int batch, int c, int hw, float eps, const float *x,
                                    const float *w, const float *dy, float *dx, float *dw, float *db, GError **err);
gboolean tp_cuda_rope(const TpBackend *be, int rows, int s, int heads, int hd, int ld, float theta, float sign, float *x,
                      GError **err);
gboolean tp_cuda_causal_softmax_forward(const TpBackend *be, int n, int s, float scale, const float *x, float *y,
                                        GError **err);
gboolean tp_cuda_causal_softmax_backward(const TpBackend *be, int n, int s, float scale, const float *y,
                                         const float *dy, float *dx, GError **err);
gboolean tp_cuda_gelu_forward(const TpBackend *be, size_t n, const float *x, float *y, GError **err);
gboolean tp_cuda_gelu_backward(const TpBackend *be, size_t n, const float *x, const float *dy, float *dx, GError **err);
gboolean tp_cuda_swiglu_forward(const TpBackend *be, int rows, int f, const float *gu, float *y, GError **err);
gboolean tp_cuda_swiglu_backward(const TpBackend *be, int rows, int f, const float *gu, const float *dy, float *dgu,
                                 GError **err);
#endif

/* ---- launchers (the .cu files of exec/cuda); every one clears stale errors, enqueues on `st` and returns
 * cudaGetLastError(): its launch's status (tp_cuda_kernel.cuh) ---- */

/* cuda_im2col.cu: nb samples of x [nb][cin][hin][win] to cols [cin·k·k][nb·hout·wout] and back
 * (col2im overwrites dx: each input element gathers its columns, no atomics). */
cudaError_t tp_cuda_im2col(cudaStream_t st, const TpWindow *s, int nb, const float *x, float *cols);
cudaError_t tp_cuda_col2im(cudaStream_t st, const TpWindow *s, int nb, const float *cols, float *dx);

/* cuda_bias.cu: y[r][c] = b[c] over rows × cols; db[c] += Σ_r dy[r][c];
 * conv layout: y[n][c][p] = prod[c][n·hw + p] + (b ? b[c] : 0), its inverse gather dyt[c][n·hw + p] =
 * dy[n][c][p], and db[c] += Σ_{n,p} dy[n][c][p] (one block per channel, a fixed-order reduction). */
cudaError_t tp_cuda_bias_rows(cudaStream_t st, int rows, int cols, const float *b, float *y);
cudaError_t tp_cuda_bias_grad_rows(cudaStream_t st, int rows, int cols, const float *dy, float *db);
cudaError_t tp_cuda_conv_scatter(cudaStream_t st, int nb, int c, size_t hw, const float *prod, const float *b,
                                 float *y);
cudaError_t tp_cuda_conv_gather(cudaStream_t st, int nb, int c, size_t hw, const float *dy, float *dyt);
cudaError_t tp_cuda_conv_bias_grad(cudaStream_t st, int nb, int c, size_t hw, const float *dy, float *db);

/* cuda_activation.cu; tp_cuda_probe_kernels: whether the current device can run this build's
 * kernels (an error such as cudaErrorNoKernelImageForDevice where it cannot) */
cudaError_t tp_cuda_probe_kernels(void);
cudaError_t tp_cuda_relu_fwd(cudaStream_t st, size_t n, const float *x, float *y);
cudaError_t tp_cuda_relu_bwd(cudaStream_t st, size_t n, const float *x, const float *dy, float *dx);
cudaError_t tp_cuda_dropout_fwd(cudaStream_t st, size_t n, float p, float keep, guint64 seed, const float *x,
                                float *y, float *mask);
cudaError_t tp_cuda_dropout_byte_fwd(cudaStream_t st, size_t n, float p, float keep, guint64 seed, guint64 first,
                                     const float *x, float *y, guint8 *mask);
cudaError_t tp_cuda_dropout_byte_bwd(cudaStream_t st, size_t n, float keep, const guint8 *mask, const float *dy,
                                     float *dx);
cudaError_t tp_cuda_mul(cudaStream_t st, size_t n, const float *a, const float *b, float *out);

/* cuda_batchnorm.cu: stats is the launch's scratch (2c floats forward, 4c backward) */
cudaError_t tp_cuda_bn_fwd(cudaStream_t st, int nb, int c, int hw, float eps, float momentum, int training,
                           const float *x, const float *w, const float *b, float *running, float *stats, float *y);
cudaError_t tp_cuda_bn_bwd(cudaStream_t st, int nb, int c, int hw, float eps, const float *x, const float *w,
                           const float *dy, float *stats, float *dx, float *dw, float *db);

/* cuda_pool.cu */
cudaError_t tp_cuda_maxpool_fwd(cudaStream_t st, const TpWindow *s, int batch, const float *x, float *y,
                                gint32 *argmax);
cudaError_t tp_cuda_maxpool_bwd(cudaStream_t st, const TpWindow *s, int batch, const float *dy,
                                const gint32 *argmax, float *dx);
cudaError_t tp_cuda_avgpool_fwd(cudaStream_t st, const TpWindow *s, int batch, const float *x, float *y);
cudaError_t tp_cuda_avgpool_bwd(cudaStream_t st, const TpWindow *s, int batch, const float *dy, float *dx);

/* cuda_loss.cu: probs and, with labels, per-sample losses and hits reduced on the device into
 * result (a double loss sum followed by an int count); labels live in device memory. */
cudaError_t tp_cuda_softmax_ce_fwd(cudaStream_t st, int batch, int classes, const float *x, const gint32 *labels,
                                   float *probs, double *sample_loss, int *sample_hit, double *result);
cudaError_t tp_cuda_softmax_ce_bwd(cudaStream_t st, int batch, int classes, const float *probs,
                                   const gint32 *labels, float scale, float *dx);

/* cuda_optim.cu */
cudaError_t tp_cuda_sgd(cudaStream_t st, size_t n, float lr, float momentum, float weight_decay, const float *w_in,
                        const float *grad, float *mom, float *w_out);
cudaError_t tp_cuda_blend(cudaStream_t st, size_t n, float s, const float *a, const float *b, float *out);
cudaError_t tp_cuda_adamw(cudaStream_t st, size_t n, const TpAdamW *h, const float *w_in, const float *grad, float *m,
                          float *v, float *w_out);

/* cuda_token.cu: the transformer kernels (tp_backend.h's members); norm_stats writes each row's mean and
 * reciprocal standard deviation (2 floats a row) for norm_wgrad's column sums */
cudaError_t tp_cuda_axpy_k(cudaStream_t st, size_t n, float alpha, const float *x, float *y);
cudaError_t tp_cuda_embed_fwd(cudaStream_t st, int rows, int s, int d, const float *ids, const float *table,
                              const float *pos, float *y);
cudaError_t tp_cuda_embed_bwd(cudaStream_t st, int rows, int s, int d, const float *ids, const float *dy, float *dtable,
                              float *dpos);
cudaError_t tp_cuda_norm_fwd(cudaStream_t st, int rows, int d, float eps, int rms, const float *x, const float *w,
                             const float *b, float *y);
cudaError_t tp_cuda_norm_bwd(cudaStream_t st, int rows, int d, float eps, int rms, const float *x, const float *w,
                             const float *dy, float *dx);
cudaError_t tp_cuda_norm_stats(cudaStream_t st, int rows, int d, float eps, int rms, const float *x, float *stats);
cudaError_t tp_cuda_norm_wgrad(cudaStream_t st, int rows, int d, const float *x, const float *stats, const float *dy,
                               float *dw, float *db);
cudaError_t tp_cuda_rope_k(cudaStream_t st, int rows, int s, int heads, int hd, int ld, float theta, float sign,
                           float *x);
cudaError_t tp_cuda_csoftmax_fwd(cudaStream_t st, int n, int s, float scale, const float *x, float *y);
cudaError_t tp_cuda_csoftmax_bwd(cudaStream_t st, int n, int s, float scale, const float *y, const float *dy, float *dx);
cudaError_t tp_cuda_gelu_fwd(cudaStream_t st, size_t n, const float *x, float *y);
cudaError_t tp_cuda_gelu_bwd(cudaStream_t st, size_t n, const float *x, const float *dy, float *dx);
cudaError_t tp_cuda_swiglu_fwd(cudaStream_t st, int rows, int f, const float *gu, float *y);
cudaError_t tp_cuda_swiglu_bwd(cudaStream_t st, int rows, int f, const float *gu, const float *dy, float *dgu);

#ifdef __cplusplus
}
#endif

#endif
