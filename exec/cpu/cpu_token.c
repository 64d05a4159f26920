/* cpu_token.c — the transformer kernels of the cpu backend: strided batched SGEMM (a loop of
 * OpenBLAS products), the token embedding, LayerNorm and RMSNorm, rotary positions, the causal
 * softmax of attention, GELU and SwiGLU.  Each is a plain loop over rows in float with eight float
 * lanes for the row sums; the exponentials of the softmax and SwiGLU are eight at a time (GCC's
 * vector extensions: SSE2 or AVX2 as the processor has, the same bits either way); the contracts
 * are in tp_backend.h. */
#include "config.h"
#include "tp_cpu.h"

#include <math.h>
#include <string.h>

/* ---- exp, eight values at a time ---- */

/* Vectors of eight pass between static functions of this file only, all inlined: the ABI of a
 * 32-byte vector without AVX (-Wpsabi) never reaches a call. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float V8 __attribute__((vector_size(32)));
typedef gint32 I8 __attribute__((vector_size(32)));
typedef guint32 U8 __attribute__((vector_size(32))); /* integer steps that may wrap: defined there */

static inline V8 splat(float v) { return (V8){ v, v, v, v, v, v, v, v }; }
static inline V8 pick(I8 m, V8 a, V8 b) { return (V8)(((I8)a & m) | ((I8)b & ~m)); }
static inline V8 load8(const float *p) { V8 v; memcpy(&v, p, sizeof v); return v; }
static inline void store8(float *p, V8 v) { memcpy(p, &v, sizeof v); }

/* e^x (Cephes's expf: x = n·ln 2 + r, |r| ≤ ln 2 / 2, a degree-5 polynomial in r, times 2^n; within
 * two float ulps of e^x), 0 below −87.3 where e^x leaves float's normal range, x clamped at 88.3 above.
 * n is rounded to nearest by adding 1.5·2²³ (the default rounding mode); every step a separate IEEE
 * multiplication or addition (C11: no contraction), so that the SSE2 and AVX2 builds agree. */
static inline V8 exp8(V8 x)
{
  const float magic = 12582912.0f; /* 1.5·2²³ */
  I8 under = x < splat(-87.3f);
  x = pick(x > splat(88.3f), splat(88.3f), x);
  V8 k = x * splat(1.44269504088896341f) + splat(magic);
  U8 n = (U8)k - (U8)splat(magic); /* far out of range (a NaN, or below −87.3: masked) it wraps */
  V8 nf = k - splat(magic);
  V8 r = x - nf * splat(0.693359375f) - nf * splat(-2.12194440e-4f);
  V8 p = splat(1.9875691500e-4f) * r + splat(1.3981999507e-3f);
  p = p * r + splat(8.3334519073e-3f);
  p = p * r + splat(4.1665795894e-2f);
  p = p * r + splat(1.6666665459e-1f);
  p = p * r + splat(5.0000001201e-1f);
  V8 y = (p * (r * r) + r + splat(1.0f)) * (V8)((n + 127) << 23);
  return pick(under, splat(0.0f), y);
}

/* y[j] = e^(scale·x[j] − shift) for j < n (y may equal x). */
__attribute__((target_clones("avx2", "default"))) static void exp_row(const float *x, float scale, float shift,
                                                                       float *y, int n)
{
  int j = 0;
  for (; j + 8 <= n; j += 8)
    store8(y + j, exp8(load8(x + j) * splat(scale) - splat(shift)));
  if (j < n) {
    float t[8] = { 0 };
    memcpy(t, x + j, sizeof(float) * (size_t)(n - j));
    store8(t, exp8(load8(t) * splat(scale) - splat(shift)));
    memcpy(y + j, t, sizeof(float) * (size_t)(n - j));
  }
}

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

/* The sum of eight lanes, pairwise. */
static float total8(const float *acc)
{
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
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
  return total8(acc);
}

/* Σ a[j]·b[j] over n values, in eight float lanes. */
static float lane_dot(const float *a, const float *b, int n)
{
  float acc[8] = { 0 };
  int j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; l++)
      acc[l] += a[j + l] * b[j + l];
  for (; j < n; j++)
    acc[j % 8] += a[j] * b[j];
  return total8(acc);
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

/* Σ dy·w and Σ dy·w·x̂ over a row (x̂ = (x − mean)·rstd), in eight float lanes. */
static void norm_sums(const float *x, const float *g, const float *w, int d, float mean, float rstd, float *sum_g,
                      float *sum_gx)
{
  float ag[8] = { 0 }, agx[8] = { 0 };
  int j = 0;
  for (; j + 8 <= d; j += 8)
    for (int l = 0; l < 8; l++) {
      float gh = g[j + l] * w[j + l];
      ag[l] += gh, agx[l] += gh * ((x[j + l] - mean) * rstd);
    }
  for (; j < d; j++) {
    float gh = g[j] * w[j];
    ag[j % 8] += gh, agx[j % 8] += gh * ((x[j] - mean) * rstd);
  }
  *sum_g = total8(ag), *sum_gx = total8(agx);
}

gboolean tp_cpu_norm_backward(const TpBackend *be, int rows, int d, float eps, gboolean rms, const float *x,
                              const float *w, const float *dy, float *dx, float *dw, float *db, GError **err)
{
  (void)be, (void)err;
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (size_t)r * d, *g = dy + (size_t)r * d;
    float mean, rstd, sum_g, sum_gx;
    row_stats(xr, d, eps, rms, &mean, &rstd);
    for (int j = 0; dw && j < d; j++)
      dw[j] += g[j] * ((xr[j] - mean) * rstd);
    for (int j = 0; dw && !rms && j < d; j++)
      db[j] += g[j];
    if (!dx)
      continue;
    norm_sums(xr, g, w, d, mean, rstd, &sum_g, &sum_gx);
    float mg = rms ? 0.0f : sum_g / (float)d, mgx = sum_gx / (float)d;
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

/* The largest of scale·x[j], j < n, in eight lanes. */
static float scaled_max(const float *x, float scale, int n)
{
  float acc[8], m = -INFINITY;
  for (int l = 0; l < 8; l++)
    acc[l] = -INFINITY;
  int j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; l++)
      acc[l] = scale * x[j + l] > acc[l] ? scale * x[j + l] : acc[l];
  for (; j < n; j++)
    m = scale * x[j] > m ? scale * x[j] : m;
  for (int l = 0; l < 8; l++)
    m = acc[l] > m ? acc[l] : m;
  return m;
}

gboolean tp_cpu_causal_softmax_forward(const TpBackend *be, int n, int s, float scale, const float *x, float *y,
                                       GError **err)
{
  (void)be, (void)err;
  for (size_t row = 0; row < (size_t)n * s; row++) {
    int i = (int)(row % s);
    const float *xr = x + row * s;
    float *yr = y + row * s;
    exp_row(xr, scale, scaled_max(xr, scale, i + 1), yr, i + 1);
    float inv = 1.0f / lane_sum(yr, i + 1, 0.0f, FALSE);
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
    float *out = dx + row * s, dot = lane_dot(yr, g, i + 1);
    for (int j = 0; j <= i; j++)
      out[j] = scale * yr[j] * (g[j] - dot);
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

/* SiLU's sigmoid from e^−g (exp_row, into the output first). */
gboolean tp_cpu_swiglu_forward(const TpBackend *be, int rows, int f, const float *gu, float *y, GError **err)
{
  (void)be, (void)err;
  for (int r = 0; r < rows; r++) {
    const float *g = gu + (size_t)r * 2 * f, *u = g + f;
    float *out = y + (size_t)r * f;
    exp_row(g, -1.0f, 0.0f, out, f);
    for (int j = 0; j < f; j++)
      out[j] = g[j] / (1.0f + out[j]) * u[j];
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
    exp_row(g, -1.0f, 0.0f, dg, f);
    for (int j = 0; j < f; j++) {
      float sig = 1.0f / (1.0f + dg[j]), silu = g[j] * sig;
      dg[j] = d[j] * u[j] * sig * (1.0f + g[j] * (1.0f - sig));
      du[j] = d[j] * silu;
    }
  }
  return TRUE;
}
