/* cpu_optim.c — the optimizer steps (SGD with momentum and weight decay; AdamW) and I-TiMePReSt's blend of
 * a stashed and the latest weight version. */
#include "config.h"
#include "tp_cpu.h"

#include <math.h>

gboolean tp_cpu_sgd_step(const TpBackend *be, size_t n, float lr, float momentum, float weight_decay,
                         const float *w_in, const float *grad, float *mom, float *w_out, GError **err)
{
  (void)be, (void)err;
  for (size_t i = 0; i < n; i++) {
    float g = grad[i] + weight_decay * w_in[i];
    float m = momentum * mom[i] + g;
    mom[i] = m;
    w_out[i] = w_in[i] - lr * m;
  }
  return TRUE;
}

gboolean tp_cpu_adamw_step(const TpBackend *be, size_t n, const TpAdamW *h, const float *w_in, const float *grad,
                           float *m, float *v, float *w_out, GError **err)
{
  (void)be, (void)err;
  const float decay = 1.0f - h->lr * h->weight_decay, b1 = h->beta1, b2 = h->beta2;
  const float inv1 = 1.0f / h->bias1, inv2 = 1.0f / h->bias2;
  for (size_t i = 0; i < n; i++) {
    float g = grad[i];
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    w_out[i] = w_in[i] * decay - h->lr * (m[i] * inv1) / (sqrtf(v[i] * inv2) + h->eps);
  }
  return TRUE;
}

gboolean tp_cpu_blend(const TpBackend *be, size_t n, float s, const float *a, const float *b, float *out,
                      GError **err)
{
  (void)be, (void)err;
  float r = 1.0f - s;
  for (size_t i = 0; i < n; i++)
    out[i] = s * a[i] + r * b[i];
  return TRUE;
}
