/* fuzz-schedule.c — libFuzzer targets: schedule files read and validated as `schedule --input`
 * does; built twice, as fuzz-schedule-csv (texts that do not start with '{') and, with
 * TP_FUZZ_JSON, as fuzz-schedule-json (texts that do). */
#include "fuzz.h"
#include "tp_format.h"
#include "tp_validate.h"

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
  size_t i = 0;
  while (i < size && g_ascii_isspace(data[i]))
    i++;
#ifdef TP_FUZZ_JSON
  if (i == size || data[i] != '{')
#else
  if (i < size && data[i] == '{')
#endif
    return 0; /* the other format's target */
  g_autofree char *text = tp_fuzz_text(data, size); /* NUL-terminated, as the loaders read files */
  GError *err = NULL;
  TpSchedule *s = tp_schedule_parse(text, size, "fuzz", &err);
  gboolean ok = s && tp_validate(s, &err);
  tp_fuzz_check(s != NULL && ok, err);
  if (ok) { /* what was accepted must print back */
    GString *out = g_string_new(NULL);
    tp_format_csv(s, out);
    tp_format_json(s, out);
    g_string_free(out, TRUE);
  }
  tp_schedule_free(s);
  return 0;
}
