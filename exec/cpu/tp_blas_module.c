/* tp_blas_module.c — the module tpblas.so (tp_blas.h): the one object linked against OpenBLAS;
 * its entry point gives the cpu backend the calls it makes. */
#include "tp_blas.h"

#include <cblas.h>

/* OpenBLAS's: joins its worker threads (a multi-threaded product starts them again), and starts them. */
int blas_thread_shutdown_(void);
int blas_thread_init(void);

const TpBlasModule *tp_blas_module(void);

static void sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc)
{
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

static const char *corename(void)
{
  return openblas_get_corename();
}

static const TpBlasModule table = {
  .sgemm = sgemm,
  .set_num_threads = openblas_set_num_threads,
  .corename = corename,
  .thread_init = blas_thread_init,
  .thread_shutdown = blas_thread_shutdown_,
};

const TpBlasModule *tp_blas_module(void)
{
  return &table;
}
