/* cpu_optim.c — the optimizer step (SGD with momentum and weight decay) and I-TiMePReSt's blend of
 * a stashed and the latest weight version. */
#include "config.h"
#include "tp_cpu.h"

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

gboolean tp_cpu_blend(const TpBackend *be, size_t n, float s, const float *a, const float *b, float *out,
                      GError **err)
{
  (void)be, (void)err;
  float r = 1.0f - s;
  for (size_t i = 0; i < n; i++)
    out[i] = s * a[i] + r * b[i];
  return TRUE;
}
