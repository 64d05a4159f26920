/* tp_error.c — error domain of the project and its mapping to exit statuses. */
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
