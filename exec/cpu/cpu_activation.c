/* cpu_activation.c — elementwise layers: ReLU and inverted dropout with a counter-based mask
 * (element i of a call with seed S is kept when tp_dropout_keep(S, i, p), on every backend), its
 * mask a float scale (the dropout layer's) or a byte (a transformer block's). */
#include "config.h"
#include "tp_cpu.h"

gboolean tp_cpu_relu_forward(const TpBackend *be, size_t n, const float *x, float *y, GError **err)
{
  (void)be, (void)err;
  for (size_t i = 0; i < n; i++)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return TRUE;
}

gboolean tp_cpu_relu_backward(const TpBackend *be, size_t n, const float *x, const float *dy, float *dx,
                              GError **err)
{
  (void)be, (void)err;
  for (size_t i = 0; i < n; i++) {
    float g = dy[i]; /* loaded unconditionally, so that the loop vectorizes */
    dx[i] = x[i] > 0.0f ? g : 0.0f;
  }
  return TRUE;
}

gboolean tp_cpu_dropout_forward(const TpBackend *be, size_t n, float p, guint64 seed, const float *x, float *y,
                                float *mask, GError **err)
{
  (void)be, (void)err;
  if (!mask) {
    for (size_t i = 0; i < n; i++)
      y[i] = x[i];
    return TRUE;
  }
  float keep = 1.0f / (1.0f - p);
  for (size_t i = 0; i < n; i++) {
    mask[i] = tp_dropout_keep(seed, i, p) ? keep : 0.0f;
    y[i] = x[i] * mask[i];
  }
  return TRUE;
}

gboolean tp_cpu_dropout_backward(const TpBackend *be, size_t n, const float *mask, const float *dy, float *dx,
                                 GError **err)
{
  (void)be, (void)err;
  for (size_t i = 0; i < n; i++)
    dx[i] = dy[i] * mask[i];
  return TRUE;
}

gboolean tp_cpu_dropout_byte_forward(const TpBackend *be, size_t n, float p, guint64 seed, guint64 first,
                                     const float *x, float *y, guint8 *mask, GError **err)
{
  (void)be, (void)err;
  float keep = 1.0f / (1.0f - p);
  for (size_t i = 0; i < n; i++) {
    mask[i] = tp_dropout_keep(seed, first + i, p);
    y[i] = mask[i] ? x[i] * keep : 0.0f;
  }
  return TRUE;
}

gboolean tp_cpu_dropout_byte_backward(const TpBackend *be, size_t n, float p, const guint8 *mask, const float *dy,
                                      float *dx, GError **err)
{
  (void)be, (void)err;
  float keep = 1.0f / (1.0f - p);
  for (size_t i = 0; i < n; i++) {
    float g = dy[i] * keep; /* computed unconditionally, so that the loop vectorizes */
    dx[i] = mask[i] ? g : 0.0f;
  }
  return TRUE;
}
