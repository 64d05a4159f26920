/* test-conv-rows.c — the cpu convolution's two ways with its stride-1 rows (exec/cpu/cpu_conv.c):
 * AVX-512 masked loads and stores, where the processor has them, and the portable loops must give
 * the same bits — forward (y) and backward (dx, and dw, db accumulated onto what they held) — at
 * row widths below, at and past 16 floats and not multiples of 16, with and without padding, at
 * batch 1 and more, with few and with many output channels (the backward's two GEMM orientations).
 * On a processor without AVX-512 both runs take the portable path, and the test says so. */
#include "config.h"
#include "tp_backend.h"
#include "tp_cpu.h"

#include <string.h>

typedef struct {
  int cin, hin, win, cout, k, pad, batch;
} Shape;

typedef struct {
  float *y, *dx, *dw, *db;
} Out;

static void fill(GRand *r, float *v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    v[i] = (float)g_rand_double_range(r, -1, 1);
}

/* Forward and backward of one shape on fixed random inputs, AVX-512 allowed or not. */
static Out run(const Shape *sh, gboolean avx512)
{
  const TpBackend *be = tp_backend_cpu();
  TpWindow s = { .cin = sh->cin, .hin = sh->hin, .win = sh->win, .cout = sh->cout, .k = sh->k, .stride = 1,
                 .pad = sh->pad };
  s.hout = sh->hin + 2 * sh->pad - sh->k + 1, s.wout = sh->win + 2 * sh->pad - sh->k + 1;
  size_t nx = (size_t)sh->batch * s.cin * s.hin * s.win, ny = (size_t)sh->batch * s.cout * s.hout * s.wout;
  size_t nw = (size_t)s.cout * s.cin * s.k * s.k;
  GRand *r = g_rand_new_with_seed(0xc0de + (guint32)s.wout);
  float *x = g_new(float, nx), *w = g_new(float, nw), *b = g_new(float, s.cout), *dy = g_new(float, ny);
  float *work = g_new0(float, be->iface->conv_workspace(be, &s, sh->batch));
  Out o = { g_new(float, ny), g_new(float, nx), g_new(float, nw), g_new(float, s.cout) };
  fill(r, x, nx), fill(r, w, nw), fill(r, b, s.cout), fill(r, dy, ny), fill(r, o.dw, nw), fill(r, o.db, s.cout);
  GError *err = NULL;
  tp_cpu_conv_allow_avx512(avx512);
  g_assert_true(be->iface->conv_forward(be, &s, sh->batch, x, w, b, o.y, work, &err));
  g_assert_true(be->iface->conv_backward(be, &s, sh->batch, x, w, dy, o.dx, o.dw, o.db, work, &err));
  g_assert_no_error(err);
  tp_cpu_conv_allow_avx512(TRUE);
  g_free(x), g_free(w), g_free(b), g_free(dy), g_free(work);
  g_rand_free(r);
  return o;
}

static void out_free(Out *o) { g_free(o->y), g_free(o->dx), g_free(o->dw), g_free(o->db); }

static void test_same_bits(void)
{
  if (!__builtin_cpu_supports("avx512f")) { /* both runs would take the portable rows: nothing compared */
    g_test_skip("no AVX-512 here: the portable rows have no vector rows to be compared with");
    return;
  }
  static const Shape shapes[] = {
    { 2, 5, 5, 3, 3, 0, 1 },    /* a row of 3 */
    { 1, 16, 18, 4, 3, 0, 2 },  /* exactly 16 */
    { 2, 17, 17, 3, 3, 1, 1 },  /* 17: one full vector and one masked float, padded */
    { 1, 9, 37, 33, 5, 2, 3 },  /* 37 = 2·16 + 5, 33 output channels (dy transposed) */
    { 3, 6, 31, 2, 2, 2, 1 },   /* an even window, 34 wide */
    { 1, 28, 28, 16, 5, 2, 2 }, /* the cnn's first convolution */
  };
  for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++) {
    const Shape *sh = &shapes[i];
    int hout = sh->hin + 2 * sh->pad - sh->k + 1, wout = sh->win + 2 * sh->pad - sh->k + 1;
    size_t ny = (size_t)sh->batch * sh->cout * hout * wout, nx = (size_t)sh->batch * sh->cin * sh->hin * sh->win;
    size_t nw = (size_t)sh->cout * sh->cin * sh->k * sh->k;
    Out a = run(sh, TRUE), p = run(sh, FALSE);
    const char *what[] = { "y", "dx", "dw", "db" };
    const float *av[] = { a.y, a.dx, a.dw, a.db }, *pv[] = { p.y, p.dx, p.dw, p.db };
    size_t n[] = { ny, nx, nw, (size_t)sh->cout };
    for (int j = 0; j < 4; j++)
      if (memcmp(av[j], pv[j], sizeof(float) * n[j]) != 0)
        g_error("conv %d->%d k%d pad %d on %dx%d, batch %d: %s differs between the AVX-512 and the portable rows",
                sh->cin, sh->cout, sh->k, sh->pad, sh->hin, sh->win, sh->batch, what[j]);
    out_free(&a), out_free(&p);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/conv-rows/avx512-and-portable-same-bits", test_same_bits);
  return g_test_run();
}
