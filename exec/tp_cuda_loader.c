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

#include <gmodule.h>

typedef struct {
  GModule *module;
  char *error; /* why it could not be loaded, or NULL */
  TpBackend *(*make)(int device, GError **err);
  void (*release)(TpBackend *be);
  int (*count)(char **why);
  gboolean (*sync)(const TpBackend *be, GError **err);
} CudaModule;

static gboolean symbol(CudaModule *m, const char *name, gpointer *out)
{
  if (g_module_symbol(m->module, name, out) && *out)
    return TRUE;
  m->error = g_strdup_printf("%s has no symbol %s", g_module_name(m->module), name);
  return FALSE;
}

static gpointer load(gpointer data)
{
  CudaModule *m = data;
  const char *env = g_getenv("TP_CUDA_MODULE");
  g_autofree char *built = g_build_filename(TP_BUILDDIR, "tpcuda.so", NULL);
  g_autofree char *installed = g_build_filename(TP_PKGLIBDIR, "tpcuda.so", NULL);
  const char *path = env && *env ? env : g_file_test(built, G_FILE_TEST_EXISTS) ? built : installed;
  m->module = g_module_open(path, G_MODULE_BIND_LOCAL);
  if (!m->module) {
    m->error = g_strdup_printf("cannot load the cuda backend module: %s", g_module_error());
    return NULL;
  }
  g_module_make_resident(m->module);
  if (!symbol(m, "tp_backend_cuda_new", (gpointer *)&m->make) ||
      !symbol(m, "tp_backend_cuda_free", (gpointer *)&m->release) ||
      !symbol(m, "tp_cuda_device_count", (gpointer *)&m->count) ||
      !symbol(m, "tp_backend_cuda_sync", (gpointer *)&m->sync))
    return NULL;
  return m;
}

/* The loaded module, or NULL with the reason in *why (not to be freed). */
static CudaModule *module(const char **why)
{
  static CudaModule m;
  static GOnce once = G_ONCE_INIT;
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
