/* cpu_conv.c — 2-D convolution as im2col + OpenBLAS SGEMM per chunk of samples.
 *
 * A chunk of nb samples is unfolded into cols [cin·k·k][nb·hout·wout] (columns ordered sample,
 * row, column). Each input plane is first copied into a zero-bordered plane (the padding made
 * real), so that every unfolded row is a plain strided copy with no bounds to test.
 * Forward: one GEMM per sample, w [cout][cin·k·k] times the sample's columns, straight into
 * y [n][cout][hout][wout] onto the bias; for small output planes one GEMM of the chunk's columns,
 * scattered into y.
 * Backward (only the input is kept between the passes, so cols is unfolded again): dy is
 * transposed per chunk into dyt [nb·hout·wout][cout]; dwᵀ [cin·k·k][cout] += cols·dyt (the long
 * dimension of the product is its inner one: OpenBLAS is slow with cout rows), added into dw once
 * at the end; dcols = wᵀ·dytᵀ (into cols), folded back through the bordered plane into dx.
 * With few output channels and one sample per chunk, dy is used as it lies instead:
 * dw += dy·colsᵀ, dcols = wᵀ·dy.
 * Chunks keep cols inside the core's L2 cache, so that the GEMMs read what im2col has just
 * written (sizes measured on the cnn shapes, bench/RESULTS.md), and hold at least TP_CONV_MIN_COLS
 * columns. */
#include "config.h"
#include "tp_cpu.h"

#include <string.h>

/* floats of unfolded input per chunk (128 KiB, at least one sample): on both of cnn's
 * convolutions one sample at a time was fastest, against chunks of 3 to 26 (bench/RESULTS.md) */
#define TP_CONV_CHUNK_FLOATS ((size_t)1 << 15)
/* the fewest output channels for which the backward transposes dy: with fewer (conv 1→16), the
 * strided stores of the transposition cost more than the faster GEMM saves (1.1 against 2.0 ms
 * for conv 1→16's backward at batch 128; 14.2 against 13.0 ms the other way for conv 16→32) */
#define TP_CONV_TRANSPOSED_MIN_COUT 32

/* the fewest columns a chunk's products have: small output planes with many channels (ResNet-50's
 * last stages, 1x1 to 4x4) would otherwise make one product per sample of a handful of columns,
 * each paying OpenBLAS's packing of the whole weight matrix */
#define TP_CONV_MIN_COLS 128

static int chunk_samples(const TpWindow *s, int batch)
{
  size_t hw = (size_t)s->hout * s->wout, per = (size_t)s->cin * s->k * s->k * hw;
  size_t nb = per ? TP_CONV_CHUNK_FLOATS / per : (size_t)batch;
  nb = MAX(nb, hw ? (TP_CONV_MIN_COLS + hw - 1) / hw : 1);
  if (nb < 1)
    nb = 1;
  return nb > (size_t)batch ? batch : (int)nb;
}

static size_t bordered_floats(const TpWindow *s)
{
  return (size_t)(s->hin + 2 * s->pad) * (s->win + 2 * s->pad);
}

/* Workspace: cols, dyt, dwᵀ and the bordered plane. */
size_t tp_cpu_conv_workspace(const TpBackend *be, const TpWindow *s, int batch)
{
  (void)be;
  size_t K = (size_t)s->cin * s->k * s->k, cols = (size_t)chunk_samples(s, batch) * s->hout * s->wout;
  return (K + s->cout) * cols + K * s->cout + bordered_floats(s);
}

/* Copy one input plane into the interior of the bordered plane pb (whose border is zero). */
static void fill_bordered(const TpWindow *s, const float *src, float *pb)
{
  int wp = s->win + 2 * s->pad;
  for (int ih = 0; ih < s->hin; ih++)
    memcpy(pb + (size_t)(ih + s->pad) * wp + s->pad, src + (size_t)ih * s->win, sizeof(float) * s->win);
}

/* dst[0..n) = src[0..n) and dst[0..n) += src[0..n) on rows that never overlap; the widths of the
 * common shapes are copied with a size known here, which the compiler turns into a few vector
 * moves instead of a call to memcpy */
static inline void copy_row(float *restrict dst, const float *restrict src, int n)
{
  switch (n) {
  case 7: memcpy(dst, src, 7 * sizeof(float)); break;
  case 14: memcpy(dst, src, 14 * sizeof(float)); break;
  case 28: memcpy(dst, src, 28 * sizeof(float)); break;
  default:
    for (int i = 0; i < n; i++)
      dst[i] = src[i];
  }
}

static inline void add_row(float *restrict dst, const float *restrict src, int n)
{
#define TP_ADD_N(N) for (int i = 0; i < N; i++) dst[i] += src[i]
  switch (n) {
  case 7: TP_ADD_N(7); break;
  case 14: TP_ADD_N(14); break;
  case 28: TP_ADD_N(28); break;
  default: TP_ADD_N(n);
  }
#undef TP_ADD_N
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TP_CONV_AVX512 1
/* The stride-1 rows of one bordered plane pb (width wp) with AVX-512 where the processor has it:
 * a row of up to 16 floats is one masked load and store (the fixed-size copies above are instruction
 * bound: a third of conv 16→32's time outside SGEMM).  unfold: dst0 + (ki·k + kj)·ncols gets the
 * hout·wout window at offset (ki, kj); fold: the reverse, added into pb (each element gets the
 * same additions in the same order as add_row, so both paths give the same bits). */
__attribute__((target("avx512f"))) static void unfold_avx512(const float *pb, int wp, int k, int hout, int wout,
                                                            float *dst0, size_t ncols)
{
  for (int ki = 0; ki < k; ki++)
    for (int kj = 0; kj < k; kj++) {
      float *dst = dst0 + (size_t)(ki * k + kj) * ncols;
      for (int oh = 0; oh < hout; oh++, dst += wout) {
        const float *row = pb + (size_t)(oh + ki) * wp + kj;
        int ow = 0;
        for (; ow + 16 <= wout; ow += 16)
          _mm512_storeu_ps(dst + ow, _mm512_loadu_ps(row + ow));
        if (ow < wout) {
          __mmask16 m = (__mmask16)((1u << (wout - ow)) - 1);
          _mm512_mask_storeu_ps(dst + ow, m, _mm512_maskz_loadu_ps(m, row + ow));
        }
      }
    }
}

__attribute__((target("avx512f"))) static void fold_avx512(float *pb, int wp, int k, int hout, int wout,
                                                          const float *src0, size_t ncols)
{
  for (int ki = 0; ki < k; ki++)
    for (int kj = 0; kj < k; kj++) {
      const float *src = src0 + (size_t)(ki * k + kj) * ncols;
      for (int oh = 0; oh < hout; oh++, src += wout) {
        float *row = pb + (size_t)(oh + ki) * wp + kj;
        int ow = 0;
        for (; ow + 16 <= wout; ow += 16)
          _mm512_storeu_ps(row + ow, _mm512_add_ps(_mm512_loadu_ps(row + ow), _mm512_loadu_ps(src + ow)));
        if (ow < wout) {
          __mmask16 m = (__mmask16)((1u << (wout - ow)) - 1);
          __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, row + ow), _mm512_maskz_loadu_ps(m, src + ow));
          _mm512_mask_storeu_ps(row + ow, m, v);
        }
      }
    }
}

static gint avx512_allowed = 1;

static gboolean have_avx512(void)
{
  static gsize have = 0; /* 1: no, 2: yes */
  if (g_once_init_enter(&have))
    g_once_init_leave(&have, __builtin_cpu_supports("avx512f") ? 2 : 1);
  return have == 2 && g_atomic_int_get(&avx512_allowed);
}

void tp_cpu_conv_allow_avx512(gboolean allow) { g_atomic_int_set(&avx512_allowed, allow != FALSE); }
#else
#define TP_CONV_AVX512 0
void tp_cpu_conv_allow_avx512(gboolean allow) { (void)allow; }
#endif

/* Unfold samples x[0..nb) into cols (ncols = nb·hout·wout columns); pb: the bordered plane. */
static void im2col(const TpWindow *s, int nb, const float *x, float *cols, float *pb)
{
  size_t hw = (size_t)s->hout * s->wout, ncols = nb * hw, plane = (size_t)s->hin * s->win;
  int wp = s->win + 2 * s->pad, st = s->stride, wout = s->wout;
  memset(pb, 0, sizeof(float) * bordered_floats(s));
  for (int n = 0; n < nb; n++)
    for (int c = 0; c < s->cin; c++) {
      fill_bordered(s, x + ((size_t)n * s->cin + c) * plane, pb);
#if TP_CONV_AVX512
      if (st == 1 && have_avx512()) {
        unfold_avx512(pb, wp, s->k, s->hout, wout, cols + (size_t)c * s->k * s->k * ncols + n * hw, ncols);
        continue;
      }
#endif
      for (int ki = 0; ki < s->k; ki++)
        for (int kj = 0; kj < s->k; kj++) {
          float *dst = cols + ((size_t)(c * s->k + ki) * s->k + kj) * ncols + n * hw;
          for (int oh = 0; oh < s->hout; oh++, dst += wout) {
            const float *row = pb + (size_t)(oh * st + ki) * wp + kj;
            if (st == 1)
              copy_row(dst, row, wout);
            else
              for (int ow = 0; ow < wout; ow++)
                dst[ow] = row[ow * st];
          }
        }
    }
}

/* Fold cols back into dx[0..nb) (overwriting it) through the bordered plane pb. */
static void col2im(const TpWindow *s, int nb, const float *cols, float *dx, float *pb)
{
  size_t hw = (size_t)s->hout * s->wout, ncols = nb * hw, plane = (size_t)s->hin * s->win;
  int wp = s->win + 2 * s->pad, st = s->stride, wout = s->wout;
  for (int n = 0; n < nb; n++)
    for (int c = 0; c < s->cin; c++) {
      memset(pb, 0, sizeof(float) * bordered_floats(s));
      gboolean folded = FALSE;
#if TP_CONV_AVX512
      if (st == 1 && have_avx512()) {
        fold_avx512(pb, wp, s->k, s->hout, wout, cols + (size_t)c * s->k * s->k * ncols + n * hw, ncols);
        folded = TRUE;
      }
#endif
      for (int ki = 0; !folded && ki < s->k; ki++)
        for (int kj = 0; kj < s->k; kj++) {
          const float *src = cols + ((size_t)(c * s->k + ki) * s->k + kj) * ncols + n * hw;
          for (int oh = 0; oh < s->hout; oh++, src += wout) {
            float *row = pb + (size_t)(oh * st + ki) * wp + kj;
            if (st == 1)
              add_row(row, src, wout);
            else
              for (int ow = 0; ow < wout; ow++)
                row[ow * st] += src[ow];
          }
        }
      float *dst = dx + ((size_t)n * s->cin + c) * plane;
      for (int ih = 0; ih < s->hin; ih++)
        memcpy(dst + (size_t)ih * s->win, pb + (size_t)(ih + s->pad) * wp + s->pad, sizeof(float) * s->win);
    }
}

gboolean tp_cpu_conv_forward(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                             const float *b, float *y, float *work, GError **err)
{
  int K = s->cin * s->k * s->k, chunk = chunk_samples(s, batch);
  size_t hw = (size_t)s->hout * s->wout, in_sz = (size_t)s->cin * s->hin * s->win, out_sz = s->cout * hw;
  float *cols = work, *pb = work + ((size_t)K + s->cout) * chunk * hw + (size_t)K * s->cout;
  for (int n0 = 0; n0 < batch; n0 += chunk) {
    int nb = MIN(chunk, batch - n0);
    size_t ncols = nb * hw;
    im2col(s, nb, x + n0 * in_sz, cols, pb);
    if (nb > 1 && hw < TP_CONV_MIN_COLS) { /* small planes: one GEMM of the chunk, scattered into y */
      float *prod = cols + (size_t)K * ncols;
      if (!tp_cpu_sgemm(be, FALSE, FALSE, s->cout, (int)ncols, K, 1.0f, w, K, cols, (int)ncols, 0.0f, prod,
                        (int)ncols, err))
        return FALSE;
      for (int n = 0; n < nb; n++)
        for (int c = 0; c < s->cout; c++) {
          float bc = b ? b[c] : 0.0f, *restrict yc = y + (n0 + n) * out_sz + c * hw;
          const float *restrict pc = prod + (size_t)c * ncols + n * hw;
          for (size_t p = 0; p < hw; p++)
            yc[p] = pc[p] + bc;
        }
      continue;
    }
    /* one GEMM per sample, straight into y's layout and onto the bias: the columns of sample n
     * are a sub-matrix of cols (leading dimension ncols) */
    for (int n = 0; n < nb; n++) {
      float *restrict yn = y + (n0 + n) * out_sz;
      for (int c = 0; c < s->cout; c++) {
        float bc = b ? b[c] : 0.0f;
        for (size_t p = 0; p < hw; p++)
          yn[c * hw + p] = bc;
      }
      if (!tp_cpu_sgemm(be, FALSE, FALSE, s->cout, (int)hw, K, 1.0f, w, K, cols + n * hw, (int)ncols, 1.0f, yn,
                        (int)hw, err))
        return FALSE;
    }
  }
  return TRUE;
}

/* dst[j][i] (+)= src[i][j] for i < rows, j < cols, in tiles that stay in the L1 cache on both sides */
enum { TILE = 16 };
static void transpose(float *restrict dst, size_t ldd, const float *restrict src, size_t lds, size_t rows, size_t cols,
                      gboolean add)
{
  for (size_t i0 = 0; i0 < rows; i0 += TILE)
    for (size_t j0 = 0; j0 < cols; j0 += TILE) {
      size_t i1 = MIN(i0 + TILE, rows), j1 = MIN(j0 + TILE, cols);
      for (size_t j = j0; j < j1; j++)
        for (size_t i = i0; i < i1; i++)
          dst[j * ldd + i] = (add ? dst[j * ldd + i] : 0.0f) + src[i * lds + j];
    }
}

gboolean tp_cpu_conv_backward(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                              const float *dy, float *dx, float *dw, float *db, float *work, GError **err)
{
  int K = s->cin * s->k * s->k, cout = s->cout, chunk = chunk_samples(s, batch);
  size_t hw = (size_t)s->hout * s->wout, in_sz = (size_t)s->cin * s->hin * s->win, out_sz = cout * hw;
  float *cols = work, *dyt = cols + (size_t)K * chunk * hw, *dwt = dyt + (size_t)cout * chunk * hw;
  float *pb = dwt + (size_t)K * cout;
  if (dw)
    memset(dwt, 0, sizeof(float) * K * cout);
  if (chunk == 1 && cout < TP_CONV_TRANSPOSED_MIN_COUT) {
    for (int n = 0; n < batch; n++) {
      const float *dyn = dy + n * out_sz;
      if (db)
        for (int c = 0; c < cout; c++) {
          float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
          size_t p = 0;
          for (; p + 4 <= hw; p += 4)
            s0 += dyn[c * hw + p], s1 += dyn[c * hw + p + 1], s2 += dyn[c * hw + p + 2], s3 += dyn[c * hw + p + 3];
          for (; p < hw; p++)
            s0 += dyn[c * hw + p];
          db[c] += (s0 + s1) + (s2 + s3);
        }
      if (dw) {
        im2col(s, 1, x + n * in_sz, cols, pb);
        if (!tp_cpu_sgemm(be, FALSE, TRUE, cout, K, (int)hw, 1.0f, dyn, (int)hw, cols, (int)hw, 1.0f, dw, K, err))
          return FALSE;
      }
      if (!dx)
        continue;
      if (!tp_cpu_sgemm(be, TRUE, FALSE, K, (int)hw, cout, 1.0f, w, K, dyn, (int)hw, 0.0f, cols, (int)hw, err))
        return FALSE;
      col2im(s, 1, cols, dx + n * in_sz, pb);
    }
    return TRUE;
  }
  for (int n0 = 0; n0 < batch; n0 += chunk) {
    int nb = MIN(chunk, batch - n0);
    size_t ncols = nb * hw;
    for (int n = 0; n < nb; n++) {
      const float *dyn = dy + (n0 + n) * out_sz;
      transpose(dyt + n * hw * cout, cout, dyn, hw, cout, hw, FALSE); /* [cout][hw] → [hw][cout] */
      for (int c = 0; db && c < cout; c++) {
        const float *src = dyn + c * hw;
        float sum = 0.0f;
        for (size_t p = 0; p < hw; p++)
          sum += src[p];
        db[c] += sum;
      }
    }
    if (dw) {
      im2col(s, nb, x + n0 * in_sz, cols, pb);
      if (!tp_cpu_sgemm(be, FALSE, FALSE, K, cout, (int)ncols, 1.0f, cols, (int)ncols, dyt, cout, 1.0f, dwt, cout,
                        err))
        return FALSE;
    }
    if (!dx)
      continue;
    if (!tp_cpu_sgemm(be, TRUE, TRUE, K, (int)ncols, cout, 1.0f, w, K, dyt, cout, 0.0f, cols, (int)ncols, err))
      return FALSE;
    col2im(s, nb, cols, dx + n0 * in_sz, pb);
  }
  if (dw) /* dw [cout][K] += dwtᵀ */
    transpose(dw, K, dwt, cout, K, cout, TRUE);
  return TRUE;
}
