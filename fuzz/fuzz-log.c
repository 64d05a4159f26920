/* fuzz-log.c — libFuzzer target: training logs (common/tp_trainlog.h), read as `plot convergence`
 * reads them, turned into rows where they have the columns `train --csv` writes, and written back. */
#include "fuzz.h"
#include "tp_trainlog.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  tp_fuzz_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (tp_fuzz_skip(data, size))
    return 0;
  g_autofree char *text = tp_fuzz_text(data, size);
  GError *err = NULL;
  TpTrainLog *log = tp_trainlog_parse(text, "fuzz.csv", &err);
  tp_fuzz_check(log != NULL, err);
  if (log && tp_trainlog_column(log, "mini_batch") >= 0) {
    GArray *rows = tp_trainlog_rows(log, "fuzz.csv", &err);
    tp_fuzz_check(rows != NULL, err);
    if (rows) {
      GString *out = g_string_new(NULL);
      tp_trainlog_header(out);
      for (guint i = 0; i < rows->len; i++)
        tp_trainlog_append(out, &g_array_index(rows, TpTrainLogRow, i));
      g_string_free(out, TRUE);
      g_array_unref(rows);
    }
  }
  tp_trainlog_free(log);
  return 0;
}
