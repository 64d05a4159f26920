/* tp_blas.c — loading the module tpblas.so (tp_blas.h) once, with GModule. */
#include "config.h"
#include "tp_blas.h"
#include "tp_error.h"
#include "tp_module.h"

static char *error; /* why the module could not be loaded */

static gpointer load(gpointer data)
{
  (void)data;
  static const char *const names[] = { TP_BLAS_MODULE_SYMBOL, NULL };
  const TpBlasModule *(*entry)(void) = NULL;
  gpointer *const out[] = { (gpointer *)&entry };
  char *why = NULL;
  GModule *m = tp_module_open("tpblas.so", "TP_BLAS_MODULE", &why);
  if (!m || !tp_module_symbols(m, names, out, &why)) {
    error = g_strdup_printf("the OpenBLAS module: %s", why);
    g_free(why);
    return NULL;
  }
  return (gpointer)entry();
}

const TpBlasModule *tp_blas(GError **err)
{
  static GOnce once = G_ONCE_INIT;
  const TpBlasModule *m = g_once(&once, load, NULL);
  if (!m)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s", error);
  return m;
}
