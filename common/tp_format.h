/* tp_format.h — text forms of a schedule: grid (output only, spec §6), CSV and JSON (both ways). */
#ifndef TP_FORMAT_H
#define TP_FORMAT_H

#include "tp_schedule.h"

/* One line per stage, one token per unit slot ("3B", "3", "3b", "."), from the unit-slot replay.
 * Fails only if the schedule deadlocks. */
gboolean tp_format_grid(const TpSchedule *s, GString *out, GError **err);

void tp_format_csv(const TpSchedule *s, GString *out);
/* PyTorch's compute-only pipeline CSV (torch.distributed.pipelining): one row per rank, one cell per
 * unit slot ("0F0", "3I2", "1W0", "2B1", empty when idle).  Only K=1, policy sync, operations per
 * micro-batch; fails (TP_ERROR_INPUT) otherwise, or if the schedule deadlocks. */
gboolean tp_format_torch(const TpSchedule *s, GString *out, GError **err);

/* The schedule's digest: the sha256 (hex) of its digest record — the CSV's header line, then every
 * operation in the CSV's order as a few bytes (docs/formats.md, "The schedule's digest") — what
 * tells two runs' plans apart in reports and checkpoints.  g_free the result. */
char *tp_schedule_sha256(const TpSchedule *s);
/* The digest before that record: the sha256 of the CSV form, as `schedule --format csv` prints it
 * (what checkpoints written before it carry). */
char *tp_schedule_sha256_csv(const TpSchedule *s);
void tp_format_json(const TpSchedule *s, GString *out);

/* What every JSON reader refuses before json-glib reads the text (which it takes, or recurses on):
 * nesting deeper than 16, keys given twice or written with escapes, \u0000 in strings, single quotes,
 * comments, text after the value; each as "name:line: why". */
gboolean tp_json_check(const char *text, gsize len, const char *name, GError **err);
/* json-glib's error as one line "LINE:COL: …", to follow "name:". */
char *tp_json_error_line(const GError *e);

/* Parse a schedule from text (CSV, JSON or PyTorch's CSV, told apart by the first non-blank
 * character: '#' ours, '{' JSON, a digit, ',' or '(' PyTorch's).
 * `name` is used in messages ("name:line: …").  The result is parsed, not validated. */
TpSchedule *tp_schedule_parse(const char *text, gsize len, const char *name, GError **err);
/* Read, parse and validate a schedule file. */
TpSchedule *tp_schedule_load(const char *path, GError **err);
/* The same, keeping in *prep (NULL: nothing) the index and unit-slot replay its validation built. */
TpSchedule *tp_schedule_load_prepared(const char *path, TpPrepared *prep, GError **err);

#endif
