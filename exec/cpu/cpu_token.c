/* cpu_token.c — the transformer kernels of the cpu backend: strided batched SGEMM (a loop of
 * OpenBLAS products), the token embedding, LayerNorm and RMSNorm, rotary positions, the causal
 * softmax of attention, GELU and SwiGLU.  Each is a plain loop over rows in float with double
 * accumulators for the softmax denominators and eight float lanes for the norms' row sums; the contracts are in
 * tp_backend.h. */
#include "config.h"
#include "tp_cpu.h"

#include <math.h>
#include <string.h>

gboolean tp_cpu_sgemm_batched(const TpBackend *be, gboolean ta, gboolean tb, int m, int n, int k, float alpha,
                              const float *a, int lda, size_t sa, const float *b, int ldb, size_t sb, float beta,
                              float *c, int ldc, size_t sc, int count, GError **err)
{
  for (int i = 0; i < count; i++)
    if (!tp_cpu_sgemm(be, ta, tb, m, n, k, alpha, a + i * sa, lda, b + i * sb, ldb, beta, c + i * sc, ldc, err))
      return FALSE;
  return TRUE;
}

gboolean tp_cpu_axpy(const TpBackend *be, size_t n, float alpha, const float *x, float *y, GError **err)
{
  (void)be, (void)err;
  for (size_t i = 0; i < n; i++)
    y[i] += alpha * x[i];
  return TRUE;
}

gboolean tp_cpu_embedding_forward(const TpBackend *be, int rows, int s, int d, const float *ids, const float *table,
                                  const float *pos, float *y, GError **err)
{
  (void)be, (void)err;
  for (int r = 0; r < rows; r++) {
    const float *e = table + (size_t)ids[r] * d, *p = pos ? pos + (size_t)(r % s) * d : NULL;
    float *out = y + (size_t)r * d;
    for (int j = 0; j < d; j++)
      out[j] = p ? e[j] + p[j] : e[j];
  }
  return TRUE;
}

gboolean tp_cpu_embedding_backward(const TpBackend *be, int rows, int s, int d, const float *ids, const float *dy,
                                   float *dtable, float *dpos, GError **err)
{
  (void)be, (void)err;
  for (int r = 0; r < rows; r++) {
    const float *g = dy + (size_t)r * d;
    float *e = dtable + (size_t)ids[r] * d, *p = dpos ? dpos + (size_t)(r % s) * d : NULL;
    for (int j = 0; j < d; j++)
      e[j] += g[j];
    for (int j = 0; p && j < d; j++)
      p[j] += g[j];
  }
  return TRUE;
}

/* Σ x[j] and Σ (x[j] − mu)² over a row, in eight float lanes the vectorizer keeps apart (a row of
 * a few thousand values: within float's rounding of a double sum). */
static float lane_sum(const float *x, int d, float mu, gboolean squares)
{
  float acc[8] = { 0 };
  int j = 0;
  for (; j + 8 <= d; j += 8)
    for (int l = 0; l < 8; l++) {
      float v = x[j + l] - mu;
      acc[l] += squares ? v * v : v;
    }
  for (; j < d; j++) {
    float v = x[j] - mu;
    acc[j % 8] += squares ? v * v : v;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* A row's mean (0 for RMSNorm) and reciprocal standard deviation. */
static void row_stats(const float *x, int d, float eps, gboolean rms, float *mean, float *rstd)
{
  float mu = rms ? 0.0f : lane_sum(x, d, 0.0f, FALSE) / (float)d;
  *mean = mu;
  *rstd = 1.0f / sqrtf(lane_sum(x, d, mu, TRUE) / (float)d + eps);
}

gboolean tp_cpu_norm_forward(const TpBackend *be, int rows, int d, float eps, gboolean rms, const float *x,
                             const float *w, const float *b, float *y, GError **err)
{
  (void)be, (void)err;
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (size_t)r * d;
    float *yr = y + (size_t)r * d, mean, rstd;
    row_stats(xr, d, eps, rms, &mean, &rstd);
    for (int j = 0; j < d; j++)
      yr[j] = (xr[j] - mean) * rstd * w[j] + (rms ? 0.0f : b[j]);
  }
  return TRUE;
}

gboolean tp_cpu_norm_backward(const TpBackend *be, int rows, int d, float eps, gboolean rms, const float *x,
                              const float *w, const float *dy, float *dx, float *dw, float *db, GError **err)
{
  (void)be, (void)err;
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (size_t)r * d, *g = dy + (size_t)r * d;
    float mean, rstd;
    row_stats(xr, d, eps, rms, &mean, &rstd);
    double sum_g = 0.0, sum_gx = 0.0; /* Σ dx̂ and Σ dx̂·x̂, dx̂ = dy·w */
    for (int j = 0; j < d; j++) {
      float xh = (xr[j] - mean) * rstd, gh = g[j] * w[j];
      sum_g += gh, sum_gx += (double)gh * xh;
      if (dw)
        dw[j] += g[j] * xh;
      if (dw && !rms)
        db[j] += g[j];
    }
    if (!dx)
      continue;
    float mg = rms ? 0.0f : (float)(sum_g / d), mgx = (float)(sum_gx / d);
    float *out = dx + (size_t)r * d;
    for (int j = 0; j < d; j++)
      out[j] = rstd * (g[j] * w[j] - mg - (xr[j] - mean) * rstd * mgx);
  }
  return TRUE;
}

gboolean tp_cpu_rope(const TpBackend *be, int rows, int s, int heads, int hd, int ld, float theta, float sign, float *x,
                     GError **err)
{
  (void)be, (void)err;
  int half = hd / 2;
  g_autofree float *turn = g_new(float, 2 * (size_t)s * half); /* cos, sin of each position's angles */
  for (int p = 0; p < s; p++)
    for (int i = 0; i < half; i++) {
      double ang = p * pow(theta, -2.0 * i / hd);
      turn[2 * ((size_t)p * half + i)] = (float)cos(ang), turn[2 * ((size_t)p * half + i) + 1] = (float)sin(ang);
    }
  for (int r = 0; r < rows; r++) {
    const float *t = turn + 2 * (size_t)(r % s) * half;
    for (int i = 0; i < half; i++) {
      float c = t[2 * i], sn = sign * t[2 * i + 1];
      for (int h = 0; h < heads; h++) {
        float *v = x + (size_t)r * ld + (size_t)h * hd;
        float a = v[i], b = v[i + half];
        v[i] = a * c - b * sn, v[i + half] = a * sn + b * c;
      }
    }
  }
  return TRUE;
}

gboolean tp_cpu_causal_softmax_forward(const TpBackend *be, int n, int s, float scale, const float *x, float *y,
                                       GError **err)
{
  (void)be, (void)err;
  for (size_t row = 0; row < (size_t)n * s; row++) {
    int i = (int)(row % s);
    const float *xr = x + row * s;
    float *yr = y + row * s, m = -INFINITY;
    for (int j = 0; j <= i; j++)
      m = scale * xr[j] > m ? scale * xr[j] : m;
    double sum = 0.0;
    for (int j = 0; j <= i; j++)
      sum += yr[j] = expf(scale * xr[j] - m);
    float inv = (float)(1.0 / sum);
    for (int j = 0; j <= i; j++)
      yr[j] *= inv;
    for (int j = i + 1; j < s; j++)
      yr[j] = 0.0f;
  }
  return TRUE;
}

gboolean tp_cpu_causal_softmax_backward(const TpBackend *be, int n, int s, float scale, const float *y, const float *dy,
                                        float *dx, GError **err)
{
  (void)be, (void)err;
  for (size_t row = 0; row < (size_t)n * s; row++) {
    int i = (int)(row % s);
    const float *yr = y + row * s, *g = dy + row * s;
    float *out = dx + row * s;
    double dot = 0.0;
    for (int j = 0; j <= i; j++)
      dot += (double)yr[j] * g[j];
    for (int j = 0; j <= i; j++)
      out[j] = scale * yr[j] * (g[j] - (float)dot);
    for (int j = i + 1; j < s; j++)
      out[j] = 0.0f;
  }
  return TRUE;
}

#define GELU_K 0.7978845608028654f /* √(2/π) */
#define GELU_C 0.044715f

gboolean tp_cpu_gelu_forward(const TpBackend *be, size_t n, const float *x, float *y, GError **err)
{
  (void)be, (void)err;
  for (size_t i = 0; i < n; i++) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_C * v * v * v)));
  }
  return TRUE;
}

gboolean tp_cpu_gelu_backward(const TpBackend *be, size_t n, const float *x, const float *dy, float *dx, GError **err)
{
  (void)be, (void)err;
  for (size_t i = 0; i < n; i++) {
    float v = x[i], t = tanhf(GELU_K * (v + GELU_C * v * v * v));
    float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_C * v * v);
    dx[i] = dy[i] * d;
  }
  return TRUE;
}

gboolean tp_cpu_swiglu_forward(const TpBackend *be, int rows, int f, const float *gu, float *y, GError **err)
{
  (void)be, (void)err;
  for (int r = 0; r < rows; r++) {
    const float *g = gu + (size_t)r * 2 * f, *u = g + f;
    float *out = y + (size_t)r * f;
    for (int j = 0; j < f; j++)
      out[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
  }
  return TRUE;
}

gboolean tp_cpu_swiglu_backward(const TpBackend *be, int rows, int f, const float *gu, const float *dy, float *dgu,
                                GError **err)
{
  (void)be, (void)err;
  for (int r = 0; r < rows; r++) {
    const float *g = gu + (size_t)r * 2 * f, *u = g + f, *d = dy + (size_t)r * f;
    float *dg = dgu + (size_t)r * 2 * f, *du = dg + f;
    for (int j = 0; j < f; j++) {
      float sig = 1.0f / (1.0f + expf(-g[j])), silu = g[j] * sig;
      dg[j] = d[j] * u[j] * sig * (1.0f + g[j] * (1.0f - sig));
      du[j] = d[j] * silu;
    }
  }
  return TRUE;
}
