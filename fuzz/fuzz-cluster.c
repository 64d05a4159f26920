/* fuzz-cluster.c — libFuzzer target: cluster files, read from a scratch clusters/ directory whose
 * ../devices/ holds the shipped device descriptions. */
#include "fuzz.h"
#include "tp_cluster.h"

static char *dir, *path;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  tp_fuzz_init();
  dir = tp_fuzz_dir();
  g_autofree char *clusters = g_build_filename(dir, "clusters", NULL);
  g_autofree char *devices = g_build_filename(dir, "devices", NULL);
  g_autofree char *shipped = g_build_filename(TP_SRCDIR, "models", "devices", NULL);
  if (g_mkdir(clusters, 0700) != 0 || symlink(shipped, devices) != 0)
    return 1;
  path = g_build_filename(clusters, "fuzz.cluster", NULL);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (tp_fuzz_skip(data, size))
    return 0;
  tp_fuzz_write(path, data, size);
  GError *err = NULL;
  TpCluster *c = tp_cluster_load(path, &err);
  tp_fuzz_check(c != NULL, err);
  tp_cluster_free(c);
  return 0;
}
