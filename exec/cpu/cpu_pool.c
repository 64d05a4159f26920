/* cpu_pool.c — max-pooling (keeps the argmax for its backward) and average pooling (divides by
 * k·k, padding counting as zeros) over [n][c][h][w]. */
#include "config.h"
#include "tp_cpu.h"

#include <string.h>

gboolean tp_cpu_maxpool_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, float *y,
                                gint32 *argmax, GError **err)
{
  (void)be, (void)err;
  size_t plane = (size_t)s->hin * s->win, planes = (size_t)batch * s->cin;
  if (s->pad == 0) { /* every window lies inside the image: no bounds to check */
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
    return TRUE;
  }
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
