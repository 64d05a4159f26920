/* tp_backend_stages.c — the instances of a pipeline's stages on a device backend: one instance
 * (device, stream, handles) per stage, stage s on the s-th device of a --devices list taken
 * round-robin, or by default on device (s − 1) mod count (stages 1-based); so the stages of one
 * process never share a stream.  A process that runs one stage (a rank of --transport mpi or nccl)
 * makes that stage's instance only.  It uses only the registry's entry points (tp_backend.h). */
#include "config.h"
#include "tp_backend.h"
#include "tp_error.h"

#include <stdlib.h>

/* "0,1,3" → [0, 1, 3]; TP_ERROR_INPUT naming --devices for anything else. */
static GArray *parse_devices(const char *text, int count, const char *noun, GError **err)
{
  GArray *dev = g_array_new(FALSE, FALSE, sizeof(int));
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  for (int i = 0; parts[i]; i++) {
    char *end = NULL;
    const char *p = g_strstrip(parts[i]);
    long d = strtol(p, &end, 10);
    if (!*p || *end || d < 0 || d > G_MAXINT) {
      g_set_error(err, TP_ERROR, TP_ERROR_PARAM_DEVICES, "'%s' is not a list of device numbers (e.g. 0,1)", text);
      g_array_free(dev, TRUE);
      return NULL;
    }
    if (d >= count) {
      g_set_error(err, TP_ERROR, TP_ERROR_PARAM_DEVICES, "no %s %ld (%d present)", noun, d, count);
      g_array_free(dev, TRUE);
      return NULL;
    }
    int v = (int)d;
    g_array_append_val(dev, v);
  }
  if (dev->len == 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_DEVICES, "empty list");
    g_array_free(dev, TRUE);
    return NULL;
  }
  return dev;
}

/* The device of stage s (0-based): the list's, round-robin, else s mod count. */
static int stage_device(const GArray *dev, int count, int s)
{
  return dev ? g_array_index(dev, int, s % (int)dev->len) : s % count;
}

TpBackend **tp_backend_stages(const TpBackendReg *reg, int W, const char *devices, int only, int *n_devices,
                              GError **err)
{
  char *why = NULL;
  int count = reg->device_count(&why);
  if (count == 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_BACKEND, "backend %s: no %s: %s", reg->name, reg->device_noun, why);
    g_free(why);
    return NULL;
  }
  GArray *dev = NULL;
  if (devices && !(dev = parse_devices(devices, count, reg->device_noun, err)))
    return NULL;
  TpBackend **be = g_new0(TpBackend *, W);
  for (int s = 0; s < W; s++) {
    if (only >= 0 && s != only)
      continue;
    if (!(be[s] = reg->create(stage_device(dev, count, s), err))) {
      g_prefix_error(err, "stage %d: ", s + 1);
      tp_backend_stages_free(be, W);
      be = NULL;
      break;
    }
  }
  if (n_devices) { /* distinct devices among the stages' */
    *n_devices = 0;
    for (int s = 0; s < W; s++) {
      int d = stage_device(dev, count, s), seen = 0;
      for (int r = 0; r < s; r++)
        seen |= stage_device(dev, count, r) == d;
      *n_devices += !seen;
    }
  }
  if (dev)
    g_array_free(dev, TRUE);
  return be;
}

void tp_backend_stages_free(TpBackend **be, int W)
{
  for (int s = 0; be && s < W; s++)
    tp_backend_free(be[s]);
  g_free(be);
}
