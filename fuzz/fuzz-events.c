/* fuzz-events.c — libFuzzer target: event CSV files (simulate --csv, measured runs), read as
 * `plot timeline --events` does and written back. */
#include "fuzz.h"
#include "tp_events.h"

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
  GArray *rows = tp_events_parse(text, "fuzz.csv", &err);
  tp_fuzz_check(rows != NULL, err);
  if (rows) {
    GString *out = g_string_new(NULL);
    tp_events_write_csv(rows, out);
    g_string_free(out, TRUE);
    g_array_unref(rows);
  }
  return 0;
}
