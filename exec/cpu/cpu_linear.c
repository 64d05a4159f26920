/* cpu_linear.c — the linear (fully connected) layer on OpenBLAS: y = x·wᵀ + b with w stored
 * [out][in]; backward dx = dy·w, dw += dyᵀ·x, db += column sums of dy. */
#include "config.h"
#include "tp_cpu.h"

gboolean tp_cpu_linear_forward(const TpBackend *be, int batch, int in, int out, const float *x, const float *w,
                               const float *b, float *y, GError **err)
{
  float beta = 0.0f;
  if (b) {
    for (int n = 0; n < batch; n++)
      for (int o = 0; o < out; o++)
        y[(size_t)n * out + o] = b[o];
    beta = 1.0f;
  }
  return tp_cpu_sgemm(be, FALSE, TRUE, batch, out, in, 1.0f, x, in, w, in, beta, y, out, err);
}

gboolean tp_cpu_linear_backward(const TpBackend *be, int batch, int in, int out, const float *x, const float *w,
                                const float *dy, float *dx, float *dw, float *db, GError **err)
{
  if (db)
    for (int n = 0; n < batch; n++) {
      const float *row = dy + (size_t)n * out;
      for (int o = 0; o < out; o++)
        db[o] += row[o];
    }
  if (dw && !tp_cpu_sgemm(be, TRUE, FALSE, out, in, batch, 1.0f, dy, out, x, in, 1.0f, dw, in, err))
    return FALSE;
  return !dx || tp_cpu_sgemm(be, FALSE, FALSE, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, err);
}
