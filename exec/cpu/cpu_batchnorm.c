/* cpu_batchnorm.c — batch normalisation over [batch][c][hw] on the cpu (tp_backend.h's contract):
 * each channel's statistics in two passes (the mean, then the squared deviations from it), each
 * plane's sum in eight float lanes (vectorised) added into a double, so that a channel of a
 * million values keeps float's precision. */
#include "config.h"
#include "tp_cpu.h"

#include <math.h>

enum { LANES = 8 };

static double lanes_total(const float *l)
{
  return (double)((l[0] + l[1]) + (l[2] + l[3])) + (double)((l[4] + l[5]) + (l[6] + l[7]));
}

/* Σ p, Σ (p − m)², Σ g·(p − m) over one plane of n values */
static double plane_sum(const float *restrict p, size_t n)
{
  float l[LANES] = { 0 };
  size_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int j = 0; j < LANES; j++)
      l[j] += p[i + j];
  for (; i < n; i++)
    l[0] += p[i];
  return lanes_total(l);
}

static double plane_sq(const float *restrict p, size_t n, float m)
{
  float l[LANES] = { 0 };
  size_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int j = 0; j < LANES; j++)
      l[j] += (p[i + j] - m) * (p[i + j] - m);
  for (; i < n; i++)
    l[0] += (p[i] - m) * (p[i] - m);
  return lanes_total(l);
}

static double plane_dot(const float *restrict g, const float *restrict p, size_t n, float m)
{
  float l[LANES] = { 0 };
  size_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int j = 0; j < LANES; j++)
      l[j] += g[i + j] * (p[i + j] - m);
  for (; i < n; i++)
    l[0] += g[i] * (p[i] - m);
  return lanes_total(l);
}

/* Channel ch's mean and biased variance over batch planes of hw values. */
static void channel_stats(int batch, int c, size_t hw, int ch, const float *x, double *mean, double *var)
{
  double s = 0.0, q = 0.0, n = (double)batch * (double)hw;
  for (int b = 0; b < batch; b++)
    s += plane_sum(x + ((size_t)b * c + ch) * hw, hw);
  double m = s / n;
  for (int b = 0; b < batch; b++)
    q += plane_sq(x + ((size_t)b * c + ch) * hw, hw, (float)m);
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
      sdy += plane_sum(g, (size_t)hw), sdyx += plane_dot(g, p, (size_t)hw, (float)mean);
    }
    sdyx *= rstd;
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
