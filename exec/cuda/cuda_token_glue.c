/* cuda_token_glue.c — the transformer members of the cuda backend and batch normalisation (tp_backend.h's contracts): the
 * strided batched products on cublasSgemmStridedBatched, the rest on cuda_token.cu's kernels. */
#include "config.h"
#include "tp_cuda.h"

gboolean tp_cuda_sgemm_batched(const TpBackend *be, gboolean ta, gboolean tb, int m, int n, int k, float alpha,
                               const float *a, int lda, size_t sa, const float *b, int ldb, size_t sb, float beta,
                               float *c, int ldc, size_t sc, int count, GError **err)
{
  if (m <= 0 || n <= 0 || count <= 0)
    return TRUE;
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  /* row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, as tp_cuda_sgemm computes it */
  TP_CUBLAS_CHECK(cublasSgemmStridedBatched(tp_cuda_ctx(be)->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, (long long)sb, a,
                                            lda, (long long)sa, &beta, c, ldc, (long long)sc, count),
                  err);
  return TRUE;
}

gboolean tp_cuda_axpy(const TpBackend *be, size_t n, float alpha, const float *x, float *y, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_axpy_k(tp_cuda_stream(be), n, alpha, x, y), err);
  return TRUE;
}

gboolean tp_cuda_embedding_forward(const TpBackend *be, int rows, int s, int d, const float *ids, const float *table,
                                   const float *pos, float *y, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_embed_fwd(tp_cuda_stream(be), rows, s, d, ids, table, pos, y), err);
  return TRUE;
}

gboolean tp_cuda_embedding_backward(const TpBackend *be, int rows, int s, int d, const float *ids, const float *dy,
                                    float *dtable, float *dpos, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_embed_bwd(tp_cuda_stream(be), rows, s, d, ids, dy, dtable, dpos), err);
  return TRUE;
}

gboolean tp_cuda_norm_forward(const TpBackend *be, int rows, int d, float eps, gboolean rms, const float *x,
                              const float *w, const float *b, float *y, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_norm_fwd(tp_cuda_stream(be), rows, d, eps, rms, x, w, b, y), err);
  return TRUE;
}

gboolean tp_cuda_norm_backward(const TpBackend *be, int rows, int d, float eps, gboolean rms, const float *x,
                               const float *w, const float *dy, float *dx, float *dw, float *db, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  cudaStream_t st = tp_cuda_stream(be);
  if (dw) { /* the rows' statistics once, in the instance's scratch, for the column sums */
    void *stats = NULL;
    if (!tp_cuda_scratch(be, 2 * sizeof(float) * (size_t)rows, &stats, err))
      return FALSE;
    TP_CUDA_CHECK(tp_cuda_norm_stats(st, rows, d, eps, rms, x, stats), err);
    TP_CUDA_CHECK(tp_cuda_norm_wgrad(st, rows, d, x, stats, dy, dw, rms ? NULL : db), err);
  }
  if (dx)
    TP_CUDA_CHECK(tp_cuda_norm_bwd(st, rows, d, eps, rms, x, w, dy, dx), err);
  return TRUE;
}

gboolean tp_cuda_rope(const TpBackend *be, int rows, int s, int heads, int hd, int ld, float theta, float sign, float *x,
                      GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_rope_k(tp_cuda_stream(be), rows, s, heads, hd, ld, theta, sign, x), err);
  return TRUE;
}

gboolean tp_cuda_causal_softmax_forward(const TpBackend *be, int n, int s, float scale, const float *x, float *y,
                                        GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_csoftmax_fwd(tp_cuda_stream(be), n, s, scale, x, y), err);
  return TRUE;
}

gboolean tp_cuda_causal_softmax_backward(const TpBackend *be, int n, int s, float scale, const float *y,
                                         const float *dy, float *dx, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_csoftmax_bwd(tp_cuda_stream(be), n, s, scale, y, dy, dx), err);
  return TRUE;
}

gboolean tp_cuda_gelu_forward(const TpBackend *be, size_t n, const float *x, float *y, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_gelu_fwd(tp_cuda_stream(be), n, x, y), err);
  return TRUE;
}

gboolean tp_cuda_gelu_backward(const TpBackend *be, size_t n, const float *x, const float *dy, float *dx, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_gelu_bwd(tp_cuda_stream(be), n, x, dy, dx), err);
  return TRUE;
}

gboolean tp_cuda_swiglu_forward(const TpBackend *be, int rows, int f, const float *gu, float *y, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_swiglu_fwd(tp_cuda_stream(be), rows, f, gu, y), err);
  return TRUE;
}

gboolean tp_cuda_swiglu_backward(const TpBackend *be, int rows, int f, const float *gu, const float *dy, float *dgu,
                                 GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_swiglu_bwd(tp_cuda_stream(be), rows, f, gu, dy, dgu), err);
  return TRUE;
}

gboolean tp_cuda_batchnorm_forward(const TpBackend *be, int batch, int c, int hw, float eps, float momentum,
                                   gboolean training, const float *x, const float *w, const float *b, float *running,
                                   float *y, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  void *stats = NULL;
  if (!tp_cuda_scratch(be, 2 * sizeof(float) * (size_t)c, &stats, err))
    return FALSE;
  TP_CUDA_CHECK(tp_cuda_bn_fwd(tp_cuda_stream(be), batch, c, hw, eps, momentum, training, x, w, b, running, stats, y),
                err);
  return TRUE;
}

gboolean tp_cuda_batchnorm_backward(const TpBackend *be, int batch, int c, int hw, float eps, const float *x,
                                    const float *w, const float *dy, float *dx, float *dw, float *db, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  void *stats = NULL;
  if (!tp_cuda_scratch(be, 4 * sizeof(float) * (size_t)c, &stats, err))
    return FALSE;
  TP_CUDA_CHECK(tp_cuda_bn_bwd(tp_cuda_stream(be), batch, c, hw, eps, x, w, dy, stats, dx, dw, db), err);
  return TRUE;
}
