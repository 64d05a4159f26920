/* tp_error.h — the project's GError domain and the exit status each error maps to.
 * Bad usage or bad input is TP_ERROR_INPUT (exit 2); a runtime failure is TP_ERROR_RUNTIME (exit 1). */
#ifndef TP_ERROR_H
#define TP_ERROR_H

#include <glib.h>

#define TP_ERROR (tp_error_quark())

typedef enum {
  TP_ERROR_RUNTIME = 1, /* something failed while running: exit 1 */
  TP_ERROR_INPUT = 2,   /* bad flag, file or schedule: exit 2 */
} TpErrorCode;

GQuark tp_error_quark(void);

/* Read a whole file; on failure a TP_ERROR_INPUT "cannot read WHAT: reason" (len may be NULL). */
gboolean tp_read_file(const char *path, const char *what, char **text, gsize *len, GError **err);

/* The process exit status for an error of any domain (GOption errors are usage errors). */
int tp_error_exit_status(const GError *err);

#endif
