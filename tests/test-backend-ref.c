/* test-backend-ref.c — the reference of tests/test-backend: a naive double-precision subset of the
 * backend interface in host memory (sgemm, linear and conv forward and backward by direct loops, no
 * im2col), against which the cpu backend is compared, so that the parity harness runs on every
 * machine. The members it lacks are NULL. */
#include "tp_backend_ref.h"

static gboolean ref_sgemm(const TpBackend *be, gboolean ta, gboolean tb, int m, int n, int k, float alpha,
                          const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
                          GError **err)
{
  (void)be, (void)err;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0.0;
      for (int p = 0; p < k; p++)
        s += (double)(ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]) *
             (tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
      c[(size_t)i * ldc + j] = (float)(alpha * s + (double)beta * c[(size_t)i * ldc + j]);
    }
  return TRUE;
}

static gboolean ref_linear_forward(const TpBackend *be, int batch, int in, int out, const float *x, const float *w,
                                   const float *b, float *y, GError **err)
{
  (void)be, (void)err;
  for (int n = 0; n < batch; n++)
    for (int o = 0; o < out; o++) {
      double s = b ? b[o] : 0.0;
      for (int i = 0; i < in; i++)
        s += (double)x[(size_t)n * in + i] * w[(size_t)o * in + i];
      y[(size_t)n * out + o] = (float)s;
    }
  return TRUE;
}

static gboolean ref_linear_backward(const TpBackend *be, int batch, int in, int out, const float *x, const float *w,
                                    const float *dy, float *dx, float *dw, float *db, GError **err)
{
  (void)be, (void)err;
  for (int o = 0; o < out; o++) {
    double sb = 0.0;
    for (int n = 0; n < batch; n++)
      sb += dy[(size_t)n * out + o];
    if (db)
      db[o] = (float)(db[o] + sb);
    for (int i = 0; dw && i < in; i++) {
      double s = 0.0;
      for (int n = 0; n < batch; n++)
        s += (double)dy[(size_t)n * out + o] * x[(size_t)n * in + i];
      dw[(size_t)o * in + i] = (float)(dw[(size_t)o * in + i] + s);
    }
  }
  for (int n = 0; dx && n < batch; n++)
    for (int i = 0; i < in; i++) {
      double s = 0.0;
      for (int o = 0; o < out; o++)
        s += (double)dy[(size_t)n * out + o] * w[(size_t)o * in + i];
      dx[(size_t)n * in + i] = (float)s;
    }
  return TRUE;
}

static size_t ref_conv_workspace(const TpBackend *be, const TpWindow *s, int batch)
{
  (void)be, (void)s, (void)batch;
  return 0;
}

/* The input index under output (n, oh, ow), channel c, tap (a, b); -1 in the padding. */
static long tap(const TpWindow *s, int n, int c, int oh, int ow, int a, int b)
{
  int ih = oh * s->stride - s->pad + a, iw = ow * s->stride - s->pad + b;
  if (ih < 0 || ih >= s->hin || iw < 0 || iw >= s->win)
    return -1;
  return (((long)n * s->cin + c) * s->hin + ih) * s->win + iw;
}

/* direct convolution; with dy, its backward (dx as a double accumulator, then rounded) */
static void ref_conv(const TpWindow *s, int batch, const float *x, const float *w, const float *b, float *y,
                     const float *dy, float *dx, float *dw, float *db)
{
  size_t in_n = (size_t)batch * s->cin * s->hin * s->win, wn = (size_t)s->cout * s->cin * s->k * s->k;
  double *gx = g_new0(double, in_n), *gw = g_new0(double, wn), *gb = g_new0(double, s->cout);
  for (int n = 0; n < batch; n++)
    for (int o = 0; o < s->cout; o++)
      for (int oh = 0; oh < s->hout; oh++)
        for (int ow = 0; ow < s->wout; ow++) {
          size_t yi = (((size_t)n * s->cout + o) * s->hout + oh) * s->wout + ow;
          double acc = b ? b[o] : 0.0, g = dy ? dy[yi] : 0.0;
          gb[o] += g;
          for (int c = 0; c < s->cin; c++)
            for (int a = 0; a < s->k; a++)
              for (int bb = 0; bb < s->k; bb++) {
                long xi = tap(s, n, c, oh, ow, a, bb);
                size_t wi = (((size_t)o * s->cin + c) * s->k + a) * s->k + bb;
                if (xi < 0)
                  continue;
                acc += (double)w[wi] * x[xi];
                gw[wi] += g * x[xi];
                gx[xi] += g * w[wi];
              }
          if (!dy)
            y[yi] = (float)acc;
        }
  if (dy) {
    for (size_t i = 0; dx && i < in_n; i++)
      dx[i] = (float)gx[i];
    for (size_t i = 0; dw && i < wn; i++)
      dw[i] = (float)(dw[i] + gw[i]);
    for (int o = 0; db && o < s->cout; o++)
      db[o] = (float)(db[o] + gb[o]);
  }
  g_free(gx), g_free(gw), g_free(gb);
}

static gboolean ref_conv_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                                 const float *b, float *y, float *work, GError **err)
{
  (void)be, (void)work, (void)err;
  ref_conv(s, batch, x, w, b, y, NULL, NULL, NULL, NULL);
  return TRUE;
}

static gboolean ref_conv_backward(const TpBackend *be, const TpWindow *s, int batch, const float *x,
                                  const float *w, const float *dy, float *dx, float *dw, float *db, float *work,
                                  GError **err)
{
  (void)be, (void)work, (void)err;
  ref_conv(s, batch, x, w, NULL, NULL, dy, dx, dw, db);
  return TRUE;
}

static const char *ref_name(const TpBackend *be)
{
  (void)be;
  return "naive double reference";
}

const TpBackend *test_backend_reference(void)
{
  static TpBackendIface iface;
  static TpBackend ref_backend = { .iface = &iface };
  if (iface.get_name)
    return &ref_backend;
  iface = *tp_backend_cpu()->iface; /* the instance, memory and the rest: cpu's */
  iface.get_name = ref_name;
  iface.sgemm = ref_sgemm;
  iface.linear_forward = ref_linear_forward;
  iface.linear_backward = ref_linear_backward;
  iface.conv_workspace = ref_conv_workspace;
  iface.conv_forward = ref_conv_forward;
  iface.conv_backward = ref_conv_backward;
  return &ref_backend;
}
