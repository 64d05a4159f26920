/* cuda_ops.c — the host side of the cuda backend's own kernels: pooling, ReLU, dropout,
 * softmax-cross-entropy (labels copied to the device, loss sum and correct count reduced there and
 * fetched as one small copy), the SGD step and the blend (members of the table in cuda_backend.c). */
#include "config.h"
#include "tp_cuda.h"

gboolean tp_cuda_maxpool_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, float *y,
                                 gint32 *argmax, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_maxpool_fwd(tp_cuda_stream(be), s, batch, x, y, argmax), err);
  return TRUE;
}

gboolean tp_cuda_maxpool_backward(const TpBackend *be, const TpWindow *s, int batch, const float *dy,
                                  const gint32 *argmax, float *dx, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_maxpool_bwd(tp_cuda_stream(be), s, batch, dy, argmax, dx), err);
  return TRUE;
}

gboolean tp_cuda_avgpool_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, float *y,
                                 GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_avgpool_fwd(tp_cuda_stream(be), s, batch, x, y), err);
  return TRUE;
}

gboolean tp_cuda_avgpool_backward(const TpBackend *be, const TpWindow *s, int batch, const float *dy, float *dx,
                                  GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_avgpool_bwd(tp_cuda_stream(be), s, batch, dy, dx), err);
  return TRUE;
}

gboolean tp_cuda_relu_forward(const TpBackend *be, size_t n, const float *x, float *y, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_relu_fwd(tp_cuda_stream(be), n, x, y), err);
  return TRUE;
}

gboolean tp_cuda_relu_backward(const TpBackend *be, size_t n, const float *x, const float *dy, float *dx,
                               GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_relu_bwd(tp_cuda_stream(be), n, x, dy, dx), err);
  return TRUE;
}

gboolean tp_cuda_dropout_forward(const TpBackend *be, size_t n, float p, guint64 seed, const float *x, float *y,
                                 float *mask, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  cudaStream_t st = tp_cuda_stream(be);
  if (!mask) {
    if (y != x && n)
      TP_CUDA_CHECK(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, st), err);
    return TRUE;
  }
  /* the scale is computed here, as the cpu backend does, so that the masks agree bit for bit */
  float keep = 1.0f / (1.0f - p);
  TP_CUDA_CHECK(tp_cuda_dropout_fwd(st, n, p, keep, seed, x, y, mask), err);
  return TRUE;
}

gboolean tp_cuda_dropout_backward(const TpBackend *be, size_t n, const float *mask, const float *dy, float *dx,
                                  GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_mul(tp_cuda_stream(be), n, dy, mask, dx), err);
  return TRUE;
}

/* The scale 1/(1−p) is computed here, as the cpu backend computes it. */
gboolean tp_cuda_dropout_byte_forward(const TpBackend *be, size_t n, float p, guint64 seed, guint64 first,
                                      const float *x, float *y, guint8 *mask, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_dropout_byte_fwd(tp_cuda_stream(be), n, p, 1.0f / (1.0f - p), seed, first, x, y, mask), err);
  return TRUE;
}

gboolean tp_cuda_dropout_byte_backward(const TpBackend *be, size_t n, float p, const guint8 *mask, const float *dy,
                                       float *dx, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_dropout_byte_bwd(tp_cuda_stream(be), n, 1.0f / (1.0f - p), mask, dy, dx), err);
  return TRUE;
}

/* The labels go to the device by a copy from pageable host memory, which returns once the host
 * array has been read; later uses of the scratch are ordered after the kernels by the stream.
 * Scratch layout: result (double loss, int count, padded to 16 bytes), then per-sample losses
 * (double), per-sample hits (int) and the labels (gint32). */
typedef struct {
  double *result, *loss;
  int *hit;
  gint32 *labels;
} LossScratch;

static gboolean loss_scratch(const TpBackend *be, int batch, int classes, const gint32 *labels, LossScratch *ls,
                             GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  void *base;
  size_t b = (size_t)batch;
  if (labels)
    for (int n = 0; n < batch; n++)
      if (labels[n] < 0 || labels[n] >= classes) {
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "label %d of sample %d is not a class (0..%d)", labels[n], n,
                    classes - 1);
        return FALSE;
      }
  if (!tp_cuda_scratch(be, 16 + b * (sizeof(double) + sizeof(int) + sizeof(gint32)), &base, err))
    return FALSE;
  char *p = base;
  ls->result = (double *)p;
  ls->loss = (double *)(p + 16);
  ls->hit = (int *)(p + 16 + b * sizeof(double));
  ls->labels = (gint32 *)(p + 16 + b * (sizeof(double) + sizeof(int)));
  if (labels && batch)
    TP_CUDA_CHECK(cudaMemcpyAsync(ls->labels, labels, b * sizeof(gint32), cudaMemcpyHostToDevice,
                                  tp_cuda_stream(be)),
                  err);
  return TRUE;
}

gboolean tp_cuda_softmax_ce_forward(const TpBackend *be, int batch, int classes, const float *x,
                                    const gint32 *labels, float *probs, double *loss_sum, int *correct, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  cudaStream_t st = tp_cuda_stream(be);
  LossScratch ls;
  if (!loss_scratch(be, batch, classes, labels, &ls, err))
    return FALSE;
  TP_CUDA_CHECK(tp_cuda_softmax_ce_fwd(st, batch, classes, x, labels ? ls.labels : NULL, probs, ls.loss, ls.hit,
                                       ls.result),
                err);
  struct {
    double loss;
    int correct;
  } host = { 0.0, 0 };
  if (labels) {
    TP_CUDA_CHECK(cudaMemcpyAsync(&host.loss, ls.result, sizeof(double), cudaMemcpyDeviceToHost, st), err);
    TP_CUDA_CHECK(cudaMemcpyAsync(&host.correct, ls.result + 1, sizeof(int), cudaMemcpyDeviceToHost, st), err);
  }
  /* the labels in scratch must outlive the kernels, and the result must have arrived */
  TP_CUDA_CHECK(cudaStreamSynchronize(st), err);
  if (loss_sum)
    *loss_sum = host.loss;
  if (correct)
    *correct = host.correct;
  return TRUE;
}

gboolean tp_cuda_softmax_ce_backward(const TpBackend *be, int batch, int classes, const float *probs,
                                     const gint32 *labels, float scale, float *dx, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  cudaStream_t st = tp_cuda_stream(be);
  LossScratch ls;
  if (!loss_scratch(be, batch, classes, labels, &ls, err))
    return FALSE;
  TP_CUDA_CHECK(tp_cuda_softmax_ce_bwd(st, batch, classes, probs, ls.labels, scale, dx), err);
  return TRUE;
}

gboolean tp_cuda_sgd_step(const TpBackend *be, size_t n, float lr, float momentum, float weight_decay,
                          const float *w_in, const float *grad, float *mom, float *w_out, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_sgd(tp_cuda_stream(be), n, lr, momentum, weight_decay, w_in, grad, mom, w_out), err);
  return TRUE;
}

gboolean tp_cuda_adamw_step(const TpBackend *be, size_t n, const TpAdamW *h, const float *w_in, const float *grad,
                            float *m, float *v, float *w_out, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_adamw(tp_cuda_stream(be), n, h, w_in, grad, m, v, w_out), err);
  return TRUE;
}

gboolean tp_cuda_blend_weights(const TpBackend *be, size_t n, float s, const float *a, const float *b, float *out,
                               GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(tp_cuda_blend(tp_cuda_stream(be), n, s, a, b, out), err);
  return TRUE;
}
