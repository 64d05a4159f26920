/* cpu_pool.c — max-pooling (keeps the argmax for its backward) and average pooling (divides by
 * k·k, padding counting as zeros) over [n][c][h][w]. */
#include "config.h"
#include "tp_cpu.h"

#include <string.h>

/* The common 2×2 window of stride 2 without padding, without branches: the maximum as the general
 * case scans it (a later element wins only when strictly greater), and its first position (the
 * same argmax). */
static void maxpool_2x2(const TpWindow *s, size_t planes, const float *x, float *y, gint32 *argmax)
{
  size_t plane = (size_t)s->hin * s->win;
  const int win = s->win, hout = s->hout, wout = s->wout;
  for (size_t q = 0; q < planes; q++)
    for (int oh = 0; oh < hout; oh++) {
      const float *restrict r0 = x + q * plane + (size_t)2 * oh * win, *restrict r1 = r0 + win;
      float *restrict yo = y + (q * hout + oh) * wout;
      for (int ow = 0; ow < wout; ow++) {
        float v = r0[2 * ow], c = r0[2 * ow + 1];
        v = c > v ? c : v;
        c = r1[2 * ow], v = c > v ? c : v;
        c = r1[2 * ow + 1], v = c > v ? c : v;
        yo[ow] = v;
      }
      if (!argmax)
        continue;
      gint32 *restrict ao = argmax + (q * hout + oh) * wout, at = 2 * oh * win;
      for (int ow = 0; ow < wout; ow++) {
        float v = yo[ow];
        gint32 off = r1[2 * ow] == v ? win : win + 1;
        off = r0[2 * ow + 1] == v ? 1 : off;
        off = r0[2 * ow] == v || v != v ? 0 : off; /* a NaN maximum is the first element */
        ao[ow] = at + 2 * ow + off;
      }
    }
}

/* Any window without padding: every window lies inside the image, no bounds to check. */
static void maxpool_inside(const TpWindow *s, size_t planes, const float *x, float *y, gint32 *argmax)
{
  size_t plane = (size_t)s->hin * s->win;
  for (size_t q = 0; q < planes; q++) {
    const float *src = x + q * plane;
    for (int oh = 0; oh < s->hout; oh++)
      for (int ow = 0; ow < s->wout; ow++) {
        int best = oh * s->stride * s->win + ow * s->stride;
        float v = src[best];
        for (int ki = 0; ki < s->k; ki++)
          for (int kj = 0; kj < s->k; kj++) {
            int at = (oh * s->stride + ki) * s->win + ow * s->stride + kj;
            if (src[at] > v)
              best = at, v = src[at];
          }
        size_t o = (q * s->hout + oh) * s->wout + ow;
        y[o] = v;
        if (argmax)
          argmax[o] = best;
      }
  }
}

/* Padded windows: the elements inside the image only. */
static void maxpool_padded(const TpWindow *s, size_t planes, const float *x, float *y, gint32 *argmax)
{
  size_t plane = (size_t)s->hin * s->win;
  for (size_t q = 0; q < planes; q++) {
    const float *src = x + q * plane;
    for (int oh = 0; oh < s->hout; oh++)
      for (int ow = 0; ow < s->wout; ow++) {
        int best = -1;
        float v = 0.0f;
        for (int ki = 0; ki < s->k; ki++) {
          int ih = oh * s->stride - s->pad + ki;
          if (ih < 0 || ih >= s->hin)
            continue;
          for (int kj = 0; kj < s->k; kj++) {
            int iw = ow * s->stride - s->pad + kj, at = ih * s->win + iw;
            if (iw >= 0 && iw < s->win && (best < 0 || src[at] > v))
              best = at, v = src[at];
          }
        }
        size_t o = (q * s->hout + oh) * s->wout + ow;
        y[o] = v;
        if (argmax)
          argmax[o] = best;
      }
  }
}

gboolean tp_cpu_maxpool_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, float *y,
                                gint32 *argmax, GError **err)
{
  (void)be, (void)err;
  size_t planes = (size_t)batch * s->cin;
  if (s->pad == 0 && s->k == 2 && s->stride == 2)
    maxpool_2x2(s, planes, x, y, argmax);
  else if (s->pad == 0)
    maxpool_inside(s, planes, x, y, argmax);
  else
    maxpool_padded(s, planes, x, y, argmax);
  return TRUE;
}

gboolean tp_cpu_maxpool_backward(const TpBackend *be, const TpWindow *s, int batch, const float *dy,
                                 const gint32 *argmax, float *dx, GError **err)
{
  (void)be, (void)err;
  size_t plane = (size_t)s->hin * s->win, planes = (size_t)batch * s->cin, outp = (size_t)s->hout * s->wout;
  memset(dx, 0, sizeof(float) * plane * planes);
  for (size_t q = 0; q < planes; q++)
    for (size_t o = 0; o < outp; o++) {
      gint32 at = argmax[q * outp + o];
      if (at >= 0)
        dx[q * plane + at] += dy[q * outp + o];
    }
  return TRUE;
}

gboolean tp_cpu_avgpool_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, float *y,
                                GError **err)
{
  (void)be, (void)err;
  size_t plane = (size_t)s->hin * s->win, planes = (size_t)batch * s->cin;
  float inv = 1.0f / (float)(s->k * s->k);
  for (size_t q = 0; q < planes; q++) {
    const float *src = x + q * plane;
    for (int oh = 0; oh < s->hout; oh++)
      for (int ow = 0; ow < s->wout; ow++) {
        float sum = 0.0f;
        for (int ki = 0; ki < s->k; ki++) {
          int ih = oh * s->stride - s->pad + ki;
          for (int kj = 0; kj < s->k && ih >= 0 && ih < s->hin; kj++) {
            int iw = ow * s->stride - s->pad + kj;
            if (iw >= 0 && iw < s->win)
              sum += src[ih * s->win + iw];
          }
        }
        y[(q * s->hout + oh) * s->wout + ow] = sum * inv;
      }
  }
  return TRUE;
}

gboolean tp_cpu_avgpool_backward(const TpBackend *be, const TpWindow *s, int batch, const float *dy, float *dx,
                                 GError **err)
{
  (void)be, (void)err;
  size_t plane = (size_t)s->hin * s->win, planes = (size_t)batch * s->cin;
  float inv = 1.0f / (float)(s->k * s->k);
  memset(dx, 0, sizeof(float) * plane * planes);
  for (size_t q = 0; q < planes; q++) {
    float *dst = dx + q * plane;
    for (int oh = 0; oh < s->hout; oh++)
      for (int ow = 0; ow < s->wout; ow++) {
        float g = dy[(q * s->hout + oh) * s->wout + ow] * inv;
        for (int ki = 0; ki < s->k; ki++) {
          int ih = oh * s->stride - s->pad + ki;
          for (int kj = 0; kj < s->k && ih >= 0 && ih < s->hin; kj++) {
            int iw = ow * s->stride - s->pad + kj;
            if (iw >= 0 && iw < s->win)
              dst[ih * s->win + iw] += g;
          }
        }
      }
  }
  return TRUE;
}
