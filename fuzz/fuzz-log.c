/* fuzz-log.c — libFuzzer target: training logs (CSV with a header) as `plot convergence` reads
 * them; the reader is private to cli/cmd_plot.c, which is compiled in here. */
#include "fuzz.h"
#include "../cli/cmd_plot.c"

static char *path;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  tp_fuzz_init();
  g_autofree char *dir = tp_fuzz_dir();
  path = g_build_filename(dir, "fuzz-log.csv", NULL);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (tp_fuzz_skip(data, size))
    return 0;
  tp_fuzz_write(path, data, size);
  static const char *const cols[] = { "epoch", "loss", "accuracy", NULL };
  gboolean has[3];
  GError *err = NULL;
  char *text = read_log(path, cols, has, &err);
  tp_fuzz_check(text != NULL, err);
  g_free(text);
  return 0;
}
