/* cpu_batchnorm.c — batch normalisation over [batch][c][hw] on the cpu (tp_backend.h's contract):
 * each channel's statistics over its batch·hw values, accumulated in double (two passes: the mean,
 * then the squared deviations), so that a channel of a million values keeps float's precision. */
#include "config.h"
#include "tp_cpu.h"

#include <math.h>

/* Channel ch's mean and biased variance over batch planes of hw values. */
static void channel_stats(int batch, int c, size_t hw, int ch, const float *x, double *mean, double *var)
{
  double s = 0.0, q = 0.0, n = (double)batch * (double)hw;
  for (int b = 0; b < batch; b++) {
    const float *p = x + ((size_t)b * c + ch) * hw;
    for (size_t i = 0; i < hw; i++)
      s += p[i];
  }
  double m = s / n;
  for (int b = 0; b < batch; b++) {
    const float *p = x + ((size_t)b * c + ch) * hw;
    for (size_t i = 0; i < hw; i++)
      q += ((double)p[i] - m) * ((double)p[i] - m);
  }
  *mean = m, *var = q / n;
}

gboolean tp_cpu_batchnorm_forward(const TpBackend *be, int batch, int c, int hw, float eps, float momentum,
                                  gboolean training, const float *x, const float *w, const float *b, float *running,
                                  float *y, GError **err)
{
  (void)be, (void)err;
  double n = (double)batch * hw;
  for (int ch = 0; ch < c; ch++) {
    double mean, var;
    if (training) {
      channel_stats(batch, c, (size_t)hw, ch, x, &mean, &var);
      if (running) { /* PyTorch's: the running variance is the unbiased one */
        running[ch] = (float)((1.0 - momentum) * running[ch] + momentum * mean);
        running[c + ch] = (float)((1.0 - momentum) * running[c + ch] + momentum * (n > 1 ? var * n / (n - 1) : var));
      }
    } else
      mean = running[ch], var = running[c + ch];
    float m = (float)mean, scale = (float)(1.0 / sqrt(var + eps)) * w[ch], shift = b[ch];
    for (int i = 0; i < batch; i++) {
      const float *p = x + ((size_t)i * c + ch) * hw;
      float *q = y + ((size_t)i * c + ch) * hw;
      for (int j = 0; j < hw; j++)
        q[j] = (p[j] - m) * scale + shift;
    }
  }
  return TRUE;
}

gboolean tp_cpu_batchnorm_backward(const TpBackend *be, int batch, int c, int hw, float eps, const float *x,
                                   const float *w, const float *dy, float *dx, float *dw, float *db, GError **err)
{
  (void)be, (void)err;
  double n = (double)batch * hw;
  for (int ch = 0; ch < c; ch++) {
    double mean, var, sdy = 0.0, sdyx = 0.0;
    channel_stats(batch, c, (size_t)hw, ch, x, &mean, &var);
    double rstd = 1.0 / sqrt(var + eps);
    for (int i = 0; i < batch; i++) {
      const float *p = x + ((size_t)i * c + ch) * hw, *g = dy + ((size_t)i * c + ch) * hw;
      for (int j = 0; j < hw; j++)
        sdy += g[j], sdyx += (double)g[j] * (((double)p[j] - mean) * rstd);
    }
    if (dw)
      dw[ch] += (float)sdyx, db[ch] += (float)sdy;
    if (!dx)
      continue;
    /* dx = γ·rstd·(dy − mean(dy) − x̂·mean(dy·x̂)) */
    float k = (float)(w[ch] * rstd), a = (float)(sdy / n), bq = (float)(sdyx / n), m = (float)mean, r = (float)rstd;
    for (int i = 0; i < batch; i++) {
      const float *p = x + ((size_t)i * c + ch) * hw, *g = dy + ((size_t)i * c + ch) * hw;
      float *q = dx + ((size_t)i * c + ch) * hw;
      for (int j = 0; j < hw; j++)
        q[j] = k * (g[j] - a - (p[j] - m) * r * bq);
    }
  }
  return TRUE;
}
