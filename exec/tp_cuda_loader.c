/* tp_cuda_loader.c — the cuda backend's entry points (tp_backend_cuda.h) inside the executor: the
 * module's table, looked up once.
 *
 * The backend itself is the module tpcuda.so (exec/cuda/, nvcc kernels linked against cudart and
 * cuBLAS).  It is loaded here, with GModule, the first time a stage asks for a GPU, so that a
 * program that never does (simulate, validate, a cpu training run) never maps the CUDA libraries.
 * Where it is looked for: $TP_CUDA_MODULE, then the build tree (uninstalled runs and tests), then
 * the installed package library directory. */
#include "config.h"
#include "tp_backend_cuda.h"
#include "tp_error.h"
#include "tp_module.h"

static gint started; /* set once loading began: CUDA may have started */
static TpModuleOnce cuda = TP_MODULE_ONCE("tpcuda.so", "TP_CUDA_MODULE", TP_CUDA_MODULE_SYMBOL, "cuda backend");

/* The module's table, or NULL with the reason in *why (not to be freed). */
static const TpCudaModule *module(const char **why)
{
  g_atomic_int_set(&started, 1);
  return tp_module_get(&cuda, why);
}

TpBackend *tp_cuda_create(int device, GError **err)
{
  const char *why = NULL;
  const TpCudaModule *m = module(&why);
  if (!m) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "no CUDA device: %s", why);
    return NULL;
  }
  return m->create(device, err);
}

int tp_cuda_device_count(char **why)
{
  const char *reason = NULL;
  const TpCudaModule *m = module(&reason);
  if (m)
    return m->device_count(why);
  if (why)
    *why = g_strdup(reason);
  return 0;
}

gboolean tp_cuda_load_eagerly(void)
{
  if (g_atomic_int_get(&started))
    return FALSE;
  g_setenv("CUDA_MODULE_LOADING", "EAGER", FALSE);
  return g_strcmp0(g_getenv("CUDA_MODULE_LOADING"), "EAGER") == 0;
}
