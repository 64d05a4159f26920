/* tp_cpu.h — the cpu backend's kernels, one file per family (cpu_linear.c, cpu_conv.c, cpu_pool.c,
 * cpu_activation.c, cpu_batchnorm.c, cpu_loss.c, cpu_optim.c,
 * cpu_token.c), gathered into one TpBackend by cpu_backend.c.
 * The signatures are those of the TpBackend members (see tp_backend.h for the contract). */
#ifndef TP_CPU_H
#define TP_CPU_H

#include "tp_backend.h"

/* The registry's constructor of the cpu backend: its one instance, whatever the device. */
TpBackend *tp_cpu_instance(int device, GError **err);
/* The registry's set_threads: OpenBLAS's threads per call (1 unless asked). */
void tp_cpu_set_threads(int n);

gboolean tp_cpu_sgemm(const TpBackend *be, gboolean trans_a, gboolean trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc, GError **err);

gboolean tp_cpu_linear_forward(const TpBackend *be, int batch, int in, int out, const float *x, const float *w,
                               const float *b, float *y, GError **err);
gboolean tp_cpu_linear_backward(const TpBackend *be, int batch, int in, int out, const float *x, const float *w,
                                const float *dy, float *dx, float *dw, float *db, GError **err);

size_t tp_cpu_conv_workspace(const TpBackend *be, const TpWindow *s, int batch);
gboolean tp_cpu_conv_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                             const float *b, float *y, float *work, GError **err);
gboolean tp_cpu_conv_backward(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                              const float *dy, float *dx, float *dw, float *db, float *work, GError **err);
/* Whether the convolution may unfold and fold its stride-1 rows with AVX-512 where the processor
 * has it (TRUE at start). The portable rows give the same bits; tests compare the two this way. */
void tp_cpu_conv_allow_avx512(gboolean allow);

gboolean tp_cpu_maxpool_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, float *y,
                                gint32 *argmax, GError **err);
gboolean tp_cpu_maxpool_backward(const TpBackend *be, const TpWindow *s, int batch, const float *dy,
                                 const gint32 *argmax, float *dx, GError **err);
gboolean tp_cpu_avgpool_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, float *y,
                                GError **err);
gboolean tp_cpu_avgpool_backward(const TpBackend *be, const TpWindow *s, int batch, const float *dy, float *dx,
                                 GError **err);

gboolean tp_cpu_batchnorm_forward(const TpBackend *be, int batch, int c, int hw, float eps, float momentum,
                                  gboolean training, const float *x, const float *w, const float *b, float *running,
                                  float *y, GError **err);
gboolean tp_cpu_batchnorm_backward(const TpBackend *be, int batch, int c, int hw, float eps, const float *x,
                                   const float *w, const float *dy, float *dx, float *dw, float *db, GError **err);

gboolean tp_cpu_relu_forward(const TpBackend *be, size_t n, const float *x, float *y, GError **err);
gboolean tp_cpu_relu_backward(const TpBackend *be, size_t n, const float *x, const float *dy, float *dx,
                              GError **err);
gboolean tp_cpu_dropout_forward(const TpBackend *be, size_t n, float p, guint64 seed, const float *x, float *y,
                                float *mask, GError **err);
gboolean tp_cpu_dropout_backward(const TpBackend *be, size_t n, const float *mask, const float *dy, float *dx,
                                 GError **err);
gboolean tp_cpu_dropout_byte_forward(const TpBackend *be, size_t n, float p, guint64 seed, guint64 first,
                                     const float *x, float *y, guint8 *mask, GError **err);
gboolean tp_cpu_dropout_byte_backward(const TpBackend *be, size_t n, float p, const guint8 *mask, const float *dy,
                                      float *dx, GError **err);

gboolean tp_cpu_softmax_ce_forward(const TpBackend *be, int batch, int classes, const float *x,
                                   const gint32 *labels, float *probs, double *loss_sum, int *correct, GError **err);
gboolean tp_cpu_softmax_ce_backward(const TpBackend *be, int batch, int classes, const float *probs,
                                    const gint32 *labels, float scale, float *dx, GError **err);

gboolean tp_cpu_sgd_step(const TpBackend *be, size_t n, float lr, float momentum, float weight_decay,
                         const float *w_in, const float *grad, float *mom, float *w_out, GError **err);
gboolean tp_cpu_adamw_step(const TpBackend *be, size_t n, const TpAdamW *h, const float *w_in, const float *grad,
                           float *m, float *v, float *w_out, GError **err);
gboolean tp_cpu_blend(const TpBackend *be, size_t n, float s, const float *a, const float *b, float *out,
                      GError **err);

gboolean tp_cpu_sgemm_batched(const TpBackend *be, gboolean ta, gboolean tb, int m, int n, int k, float alpha,
                              const float *a, int lda, size_t sa, const float *b, int ldb, size_t sb, float beta,
                              float *c, int ldc, size_t sc, int count, GError **err);
gboolean tp_cpu_axpy(const TpBackend *be, size_t n, float alpha, const float *x, float *y, GError **err);
gboolean tp_cpu_embedding_forward(const TpBackend *be, int rows, int s, int d, const float *ids, const float *table,
                                  const float *pos, float *y, GError **err);
gboolean tp_cpu_embedding_backward(const TpBackend *be, int rows, int s, int d, const float *ids, const float *dy,
                                   float *dtable, float *dpos, GError **err);
gboolean tp_cpu_norm_forward(const TpBackend *be, int rows, int d, float eps, gboolean rms, const float *x,
                             const float *w, const float *b, float *y, GError **err);
gboolean tp_cpu_norm_backward(const TpBackend *be, int rows, int d, float eps, gboolean rms, const float *x,
                              const float *w, const float *dy, float *dx, float *dw, float *db, GError **err);
gboolean tp_cpu_rope(const TpBackend *be, int rows, int s, int heads, int hd, int ld, float theta, float sign, float *x,
                     GError **err);
gboolean tp_cpu_causal_softmax_forward(const TpBackend *be, int n, int s, float scale, const float *x, float *y,
                                       GError **err);
gboolean tp_cpu_causal_softmax_backward(const TpBackend *be, int n, int s, float scale, const float *y, const float *dy,
                                        float *dx, GError **err);
gboolean tp_cpu_gelu_forward(const TpBackend *be, size_t n, const float *x, float *y, GError **err);
gboolean tp_cpu_gelu_backward(const TpBackend *be, size_t n, const float *x, const float *dy, float *dx, GError **err);
gboolean tp_cpu_swiglu_forward(const TpBackend *be, int rows, int f, const float *gu, float *y, GError **err);
gboolean tp_cpu_swiglu_backward(const TpBackend *be, int rows, int f, const float *gu, const float *dy, float *dgu,
                                GError **err);

#endif
