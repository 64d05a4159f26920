/* tp_backend.c — the registry of compute backends: a name (`--backend`) to its TpBackend. */
#include "config.h"
#include "tp_backend.h"
#include "tp_error.h"

#include <string.h>

const TpBackend *tp_backend_get(const char *name, GError **err)
{
  if (strcmp(name, "cpu") == 0)
    return tp_backend_cpu();
  if (strcmp(name, "cuda") == 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--backend: cuda is not built into this program");
    return NULL;
  }
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--backend: unknown backend '%s' (known: cpu, cuda)", name);
  return NULL;
}
