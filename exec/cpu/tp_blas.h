/* tp_blas.h — OpenBLAS as the cpu backend uses it, behind the module tpblas.so.
 *
 * OpenBLAS (with libgfortran) starts worker threads and maps buffers as it loads, about 5 ms of
 * every start; the module links it so that commands that make no product (simulate, validate,
 * plan, …) never load it.  The cpu backend loads it (tp_blas()) when first requested, and
 * tp_backend_cpu_settle() first thing in the commands that train or profile. */
#ifndef TP_BLAS_H
#define TP_BLAS_H

#include <glib.h>

/* The module's table: row-major SGEMM (C = alpha·op(A)·op(B) + beta·C) and OpenBLAS's own thread
 * and core calls. */
typedef struct {
  void (*sgemm)(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc);
  void (*set_num_threads)(int n);
  const char *(*corename)(void);
  int (*thread_init)(void);
  int (*thread_shutdown)(void);
} TpBlasModule;

/* The module's entry point: returns its table. */
#define TP_BLAS_MODULE_SYMBOL "tp_blas_module"

/* The table, the module loaded on the first call; NULL with the reason in *err when it cannot be
 * ($TP_BLAS_MODULE, then the build tree, then the package's libexec directory). */
const TpBlasModule *tp_blas(GError **err);

#endif
