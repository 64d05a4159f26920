/* fuzz-device.c — libFuzzer target: device descriptions (FLOP/s, memory, bandwidth, efficiency). */
#include "fuzz.h"
#include "tp_cluster.h"

static char *path;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  tp_fuzz_init();
  g_autofree char *dir = tp_fuzz_dir();
  path = g_build_filename(dir, "fuzz.device", NULL);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (tp_fuzz_skip(data, size))
    return 0;
  tp_fuzz_write(path, data, size);
  GError *err = NULL;
  TpDevice *d = tp_device_load(path, &err);
  tp_fuzz_check(d != NULL, err);
  if (d) {
    tp_device_clear(d);
    g_free(d);
  }
  return 0;
}
