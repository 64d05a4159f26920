/* tp_blas.c — loading the module tpblas.so (tp_blas.h) once, with GModule. */
#include "config.h"
#include "tp_blas.h"
#include "tp_error.h"
#include "tp_module.h"

static TpModuleOnce blas = TP_MODULE_ONCE("tpblas.so", "TP_BLAS_MODULE", TP_BLAS_MODULE_SYMBOL, "OpenBLAS");

const TpBlasModule *tp_blas(GError **err)
{
  const char *why = NULL;
  const TpBlasModule *m = tp_module_get(&blas, &why);
  if (!m)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s", why);
  return m;
}
