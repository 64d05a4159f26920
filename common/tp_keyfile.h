/* tp_keyfile.h — helpers for the project's key files (cost, device, cluster): loading with
 * errors that name the file, strict numbers, and "file:line: [group] key: reason" messages. */
#ifndef TP_KEYFILE_H
#define TP_KEYFILE_H

#include <glib.h>

typedef struct {
  const char *name; /* file name, for messages */
  char *text;       /* the file's text, for line numbers */
  GKeyFile *kf;
} TpKeyFile;

/* Load from text (copied); the error names `name`.  A group or a key given twice is refused (GKeyFile
 * would merge the groups and keep the last value). */
gboolean tp_kf_open(TpKeyFile *k, const char *name, const char *text, gsize len, GError **err);
/* Read path and load it; what = "cost file", "cluster file", … for the error message. */
gboolean tp_kf_open_file(TpKeyFile *k, const char *path, const char *what, GError **err);
void tp_kf_close(TpKeyFile *k);

/* Line of `key` in `[group]` (of the group header when key is NULL), 0 if not found. */
int tp_kf_line(const TpKeyFile *k, const char *group, const char *key);
/* Set a TP_ERROR_INPUT "file:line: [group] key: reason" error; returns FALSE. */
gboolean tp_kf_fail(const TpKeyFile *k, GError **err, const char *group, const char *key, const char *fmt, ...)
  G_GNUC_PRINTF(5, 6);
/* A finite number, surrounding blanks allowed. */
gboolean tp_kf_parse_number(const char *t, double *out);
/* Required (or optional, if *out holds a default and required is FALSE) number in [lo, hi]. */
gboolean tp_kf_number(const TpKeyFile *k, const char *group, const char *key, gboolean required, double lo, double hi,
                      double *out, GError **err);
/* A name or other text the reports carry (tp_name_problem), taken as written (GKeyFile's escapes are
 * not undone: a backslash is refused), surrounding blanks dropped: required, or NULL where missing;
 * empty only where empty_ok. */
gboolean tp_kf_name(const TpKeyFile *k, const char *group, const char *key, gboolean required, gboolean empty_ok,
                    char **out, GError **err);
/* Fail on any key of group not in the NULL-terminated list `known`. */
gboolean tp_kf_known_keys(const TpKeyFile *k, const char *group, const char *const *known, GError **err);

#endif
