/* cpu_conv.c — 2-D convolution as im2col + one OpenBLAS SGEMM per chunk of samples.
 *
 * A chunk of nb samples is unfolded into cols [cin·k·k][nb·hout·wout] (columns ordered sample,
 * row, column); each sample's columns are multiplied by the weight [cout][cin·k·k] straight into
 * y [n][cout][hout][wout], onto the bias. Chunks keep the unfolded matrix well inside the core's L2
 * cache, so that the GEMM reads what im2col has just written.
 * The backward recomputes cols from the saved input (only the input is kept between the passes),
 * gathers dy' [cout][nb·hout·wout] (dy itself when nb = 1): dw += dy'·colsᵀ, db += Σ dy',
 * dcols = wᵀ·dy' (into the same buffer), then col2im adds into dx. */
#include "config.h"
#include "tp_cpu.h"

#include <string.h>

/* floats of unfolded input per chunk (128 KiB, at least one sample): measured on the cnn shapes
 * at batch 128 against 64 KiB to 16 MiB (bench/RESULTS.md) */
#define TP_CONV_CHUNK_FLOATS ((size_t)1 << 15)

static int chunk_samples(const TpWindow *s, int batch)
{
  size_t per = (size_t)s->cin * s->k * s->k * s->hout * s->wout;
  size_t nb = per ? TP_CONV_CHUNK_FLOATS / per : (size_t)batch;
  if (nb < 1)
    nb = 1;
  return nb > (size_t)batch ? batch : (int)nb;
}

size_t tp_cpu_conv_workspace(const TpBackend *be, const TpWindow *s, int batch)
{
  (void)be;
  size_t cols = (size_t)chunk_samples(s, batch) * s->hout * s->wout;
  return ((size_t)s->cin * s->k * s->k + s->cout) * cols;
}

/* The output columns [*lo, *hi) whose input column ow·stride − pad + kj lies inside the image. */
static void valid_cols(const TpWindow *s, int kj, int *lo, int *hi)
{
  int off = kj - s->pad; /* iw = ow·stride + off */
  *lo = off >= 0 ? 0 : (-off + s->stride - 1) / s->stride;
  *hi = s->win - off <= 0 ? 0 : MIN(s->wout, (s->win - off + s->stride - 1) / s->stride);
  if (*lo > *hi)
    *lo = *hi;
}

/* Unfold samples x[0..nb) into cols (ncols = nb·hout·wout columns). */
static void im2col(const TpWindow *s, int nb, const float *x, float *cols)
{
  size_t hw = (size_t)s->hout * s->wout, ncols = nb * hw, plane = (size_t)s->hin * s->win;
  for (int c = 0; c < s->cin; c++)
    for (int ki = 0; ki < s->k; ki++)
      for (int kj = 0; kj < s->k; kj++) {
        float *dst = cols + ((size_t)(c * s->k + ki) * s->k + kj) * ncols;
        int lo, hi, off = kj - s->pad;
        valid_cols(s, kj, &lo, &hi);
        for (int n = 0; n < nb; n++) {
          const float *src = x + ((size_t)n * s->cin + c) * plane;
          for (int oh = 0; oh < s->hout; oh++, dst += s->wout) {
            int ih = oh * s->stride - s->pad + ki;
            if (ih < 0 || ih >= s->hin) {
              memset(dst, 0, sizeof(float) * s->wout);
              continue;
            }
            const float *row = src + (size_t)ih * s->win + off;
            for (int ow = 0; ow < lo; ow++)
              dst[ow] = 0.0f;
            if (s->stride == 1)
              memcpy(dst + lo, row + lo, sizeof(float) * (hi - lo));
            else
              for (int ow = lo; ow < hi; ow++)
                dst[ow] = row[ow * s->stride];
            for (int ow = hi; ow < s->wout; ow++)
              dst[ow] = 0.0f;
          }
        }
      }
}

/* Fold cols back, adding into dx[0..nb) (which the caller has zeroed). */
static void col2im(const TpWindow *s, int nb, const float *cols, float *dx)
{
  size_t hw = (size_t)s->hout * s->wout, ncols = nb * hw, plane = (size_t)s->hin * s->win;
  for (int c = 0; c < s->cin; c++)
    for (int ki = 0; ki < s->k; ki++)
      for (int kj = 0; kj < s->k; kj++) {
        const float *src = cols + ((size_t)(c * s->k + ki) * s->k + kj) * ncols;
        int lo, hi, off = kj - s->pad;
        valid_cols(s, kj, &lo, &hi);
        for (int n = 0; n < nb; n++) {
          float *dst = dx + ((size_t)n * s->cin + c) * plane;
          for (int oh = 0; oh < s->hout; oh++, src += s->wout) {
            int ih = oh * s->stride - s->pad + ki;
            if (ih < 0 || ih >= s->hin)
              continue;
            float *row = dst + (size_t)ih * s->win + off;
            if (s->stride == 1)
              for (int ow = lo; ow < hi; ow++)
                row[ow] += src[ow];
            else
              for (int ow = lo; ow < hi; ow++)
                row[ow * s->stride] += src[ow];
          }
        }
      }
}

gboolean tp_cpu_conv_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                             const float *b, float *y, float *work, GError **err)
{
  int K = s->cin * s->k * s->k, chunk = chunk_samples(s, batch);
  size_t hw = (size_t)s->hout * s->wout, in_sz = (size_t)s->cin * s->hin * s->win, out_sz = s->cout * hw;
  for (int n0 = 0; n0 < batch; n0 += chunk) {
    int nb = MIN(chunk, batch - n0);
    size_t ncols = nb * hw;
    float *cols = work;
    im2col(s, nb, x + n0 * in_sz, cols);
    /* one GEMM per sample, straight into y's layout and onto the bias: the columns of sample n
     * are a sub-matrix of cols (leading dimension ncols) */
    for (int n = 0; n < nb; n++) {
      float *yn = y + (n0 + n) * out_sz;
      for (int c = 0; c < s->cout; c++)
        for (size_t p = 0; p < hw; p++)
          yn[c * hw + p] = b ? b[c] : 0.0f;
      if (!tp_cpu_sgemm(be, FALSE, FALSE, s->cout, (int)hw, K, 1.0f, w, K, cols + n * hw, (int)ncols, 1.0f, yn,
                        (int)hw, err))
        return FALSE;
    }
  }
  return TRUE;
}

gboolean tp_cpu_conv_backward(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                              const float *dy, float *dx, float *dw, float *db, float *work, GError **err)
{
  int K = s->cin * s->k * s->k, chunk = chunk_samples(s, batch);
  size_t hw = (size_t)s->hout * s->wout, in_sz = (size_t)s->cin * s->hin * s->win, out_sz = s->cout * hw;
  for (int n0 = 0; n0 < batch; n0 += chunk) {
    int nb = MIN(chunk, batch - n0);
    size_t ncols = nb * hw;
    float *cols = work, *dyt = work + (size_t)K * ncols;
    if (nb == 1) /* dy' is dy's own layout */
      dyt = (float *)dy + n0 * out_sz;
    for (int n = 0; n < nb; n++)
      for (int c = 0; c < s->cout; c++) {
        const float *src = dy + (n0 + n) * out_sz + c * hw;
        float *dst = dyt + c * ncols + n * hw, sum = 0.0f;
        for (size_t p = 0; p < hw; p++)
          sum += src[p];
        if (db)
          db[c] += sum;
        if (nb > 1)
          memcpy(dst, src, sizeof(float) * hw);
      }
    im2col(s, nb, x + n0 * in_sz, cols);
    if (!tp_cpu_sgemm(be, FALSE, TRUE, s->cout, K, (int)ncols, 1.0f, dyt, (int)ncols, cols, (int)ncols, 1.0f, dw,
                      K, err))
      return FALSE;
    if (!dx)
      continue;
    if (!tp_cpu_sgemm(be, TRUE, FALSE, K, (int)ncols, s->cout, 1.0f, w, K, dyt, (int)ncols, 0.0f, cols,
                      (int)ncols, err))
      return FALSE;
    memset(dx + n0 * in_sz, 0, sizeof(float) * nb * in_sz);
    col2im(s, nb, cols, dx + n0 * in_sz);
  }
  return TRUE;
}
