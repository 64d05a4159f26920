/* tp_backend.c — the registry of compute backends: a name (`--backend`) to its TpBackend. */
#include "config.h"
#include "tp_backend.h"
#include "tp_error.h"
#ifdef HAVE_CUDA
#include "tp_backend_cuda.h"
#endif

#include <string.h>

const TpBackend *tp_backend_get(const char *name, GError **err)
{
  if (strcmp(name, "cpu") == 0)
    return tp_backend_cpu();
  if (strcmp(name, "cuda") == 0) {
#ifdef HAVE_CUDA
    GError *why = NULL;
    const TpBackend *be = tp_backend_cuda_default(&why);
    if (!be) {
      g_set_error(err, TP_ERROR, why->code, "--backend cuda: %s", why->message);
      g_error_free(why);
    }
    return be;
#else
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--backend cuda: this build has no CUDA support");
    return NULL;
#endif
  }
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--backend: unknown backend '%s' (known: cpu, cuda)", name);
  return NULL;
}
