/* tp_error.c — error domain of the project, its mapping to exit statuses, and file reading with
 * errors in that domain. */
#include "tp_error.h"

G_DEFINE_QUARK(timeprest-error-quark, tp_error)

int tp_error_exit_status(const GError *err)
{
  if (err == NULL)
    return 0;
  if (err->domain == TP_ERROR)
    return err->code == TP_ERROR_RUNTIME ? 1 : 2;
  if (err->domain == G_OPTION_ERROR || err->domain == G_KEY_FILE_ERROR)
    return 2;
  return 1;
}

gboolean tp_read_file(const char *path, const char *what, char **text, gsize *len, GError **err)
{
  GError *e = NULL;
  if (g_file_get_contents(path, text, len, &e))
    return TRUE;
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "cannot read %s: %s", what, e->message);
  g_error_free(e);
  return FALSE;
}
