/* tp_cuda_loader.c — the cuda backend's entry points (tp_backend_cuda.h) inside the executor.
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

typedef struct {
  GModule *module;
  char *error; /* why it could not be loaded, or NULL */
  TpBackend *(*make)(int device, GError **err);
  void (*release)(TpBackend *be);
  int (*count)(char **why);
  gboolean (*sync)(const TpBackend *be, GError **err);
  gboolean (*memory)(int device, guint64 *peak, guint64 *total);
} CudaModule;

static gint started; /* set once loading began: CUDA may have started */

static gpointer load(gpointer data)
{
  CudaModule *m = data;
  g_atomic_int_set(&started, 1);
  static const char *const names[] = { "tp_backend_cuda_new", "tp_backend_cuda_free", "tp_cuda_device_count",
                                       "tp_backend_cuda_sync", "tp_cuda_memory", NULL };
  gpointer *const out[] = { (gpointer *)&m->make, (gpointer *)&m->release, (gpointer *)&m->count,
                            (gpointer *)&m->sync, (gpointer *)&m->memory };
  char *why = NULL;
  if (!(m->module = tp_module_open("tpcuda.so", "TP_CUDA_MODULE", &why)) ||
      !tp_module_symbols(m->module, names, out, &why)) {
    m->error = g_strdup_printf("the cuda backend module: %s", why);
    g_free(why);
    return NULL;
  }
  return m;
}

static GOnce once = G_ONCE_INIT;

/* The loaded module, or NULL with the reason in *why (not to be freed). */
static CudaModule *module(const char **why)
{
  static CudaModule m;
  CudaModule *ok = g_once(&once, load, &m);
  if (!ok)
    *why = m.error;
  return ok;
}

TpBackend *tp_backend_cuda_new(int device, GError **err)
{
  const char *why = NULL;
  CudaModule *m = module(&why);
  if (!m) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "no CUDA device: %s", why);
    return NULL;
  }
  return m->make(device, err);
}

void tp_backend_cuda_free(TpBackend *be)
{
  const char *why = NULL;
  CudaModule *m = be ? module(&why) : NULL;
  if (m)
    m->release(be);
}

int tp_cuda_device_count(char **why)
{
  const char *reason = NULL;
  CudaModule *m = module(&reason);
  if (m)
    return m->count(why);
  if (why)
    *why = g_strdup(reason);
  return 0;
}

gboolean tp_backend_cuda_sync(const TpBackend *be, GError **err)
{
  const char *why = NULL;
  CudaModule *m = module(&why);
  if (!m) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cuda backend: %s", why);
    return FALSE;
  }
  return m->sync(be, err);
}

const TpBackend *tp_backend_cuda_default(GError **err)
{
  static GMutex lock;
  static TpBackend *shared;
  g_mutex_lock(&lock);
  if (!shared)
    shared = tp_backend_cuda_new(0, err);
  TpBackend *be = shared;
  g_mutex_unlock(&lock);
  return be;
}

gboolean tp_cuda_memory(int device, guint64 *peak, guint64 *total)
{
  const char *why = NULL;
  CudaModule *m = module(&why);
  return m && m->memory(device, peak, total);
}

gboolean tp_cuda_load_eagerly(void)
{
  if (g_atomic_int_get(&started))
    return FALSE;
  g_setenv("CUDA_MODULE_LOADING", "EAGER", FALSE);
  return g_strcmp0(g_getenv("CUDA_MODULE_LOADING"), "EAGER") == 0;
}
