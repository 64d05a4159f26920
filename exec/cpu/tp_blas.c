/* tp_blas.c — loading the module tpblas.so (tp_blas.h) once, with GModule. */
#include "config.h"
#include "tp_blas.h"
#include "tp_error.h"
#include "tp_module.h"

static char *error; /* why the module could not be loaded */

static gpointer load(gpointer data)
{
  (void)data;
  return (gpointer)tp_module_table("tpblas.so", "TP_BLAS_MODULE", TP_BLAS_MODULE_SYMBOL, "OpenBLAS", &error);
}

const TpBlasModule *tp_blas(GError **err)
{
  static GOnce once = G_ONCE_INIT;
  const TpBlasModule *m = g_once(&once, load, NULL);
  if (!m)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s", error);
  return m;
}
