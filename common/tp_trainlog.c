/* tp_trainlog.c — the training log's writer and reader (tp_trainlog.h). */
#include "tp_trainlog.h"
#include "tp_error.h"
#include "tp_memory.h"
#include "tp_keyfile.h"

#include <math.h>
#include <string.h>

void tp_trainlog_header(GString *out) { g_string_append(out, TP_TRAINLOG_HEADER "\n"); }

void tp_trainlog_append(GString *out, const TpTrainLogRow *r)
{
  if (r->test && r->epoch == floor(r->epoch) && fabs(r->epoch) < G_MAXINT)
    g_string_append_printf(out, "%d,", (int)r->epoch);
  else
    g_string_append_printf(out, "%.4f,", r->epoch);
  g_string_append_printf(out, "%d,%.4f,%.6f,%.6f,%d\n", r->mini_batch, r->time, r->loss, r->accuracy, r->test ? 1 : 0);
}

void tp_trainlog_free(TpTrainLog *log)
{
  if (!log)
    return;
  g_strfreev(log->columns);
  g_free(log->values);
  g_free(log->lines);
  g_free(log);
}

int tp_trainlog_column(const TpTrainLog *log, const char *name)
{
  for (int j = 0; j < log->n_columns; j++)
    if (strcmp(log->columns[j], name) == 0)
      return j;
  return -1;
}

TpTrainLog *tp_trainlog_parse(const char *text, const char *name, GError **err)
{
  g_autofree char *what = g_strdup_printf("reading %s", name);
  if (!tp_memory_check_text(what, text, strlen(text), 4, FALSE, err))
    return NULL;
  g_auto(GStrv) lines = g_strsplit_set(text, "\n", -1);
  g_autoptr(TpTrainLog) log = g_new0(TpTrainLog, 1);
  int head = 0; /* the header: the first line that is not empty */
  while (lines[head] && !*g_strstrip(lines[head]))
    head++;
  if (!lines[head]) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: empty (no header line of column names)", name);
    return NULL;
  }
  log->header_line = head + 1;
  log->columns = g_strsplit(lines[head], ",", -1);
  for (int j = 0; log->columns[j]; j++)
    g_strstrip(log->columns[j]);
  int ncols = log->n_columns = (int)g_strv_length(log->columns);
  g_autoptr(GArray) values = g_array_new(FALSE, FALSE, sizeof(double));
  g_autoptr(GArray) at = g_array_new(FALSE, FALSE, sizeof(int));
  for (int ln = head + 1; lines[ln]; ln++) {
    char *l = g_strchomp(lines[ln]);
    if (!*l)
      continue;
    g_auto(GStrv) f = g_strsplit(l, ",", -1);
    if ((int)g_strv_length(f) != ncols) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: expected %d fields, found %u", name, ln + 1, ncols,
                  g_strv_length(f));
      return NULL;
    }
    for (int j = 0; j < ncols; j++) {
      double v = 0;
      gboolean number = tp_kf_parse_number(f[j], &v);
      if (!number || fabs(v) > TP_TRAINLOG_MAX) {
        g_autofree char *q = tp_quote(f[j]);
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: %s is %s", name, ln + 1, q,
                    number ? "out of range (at most 1e30 in magnitude)" : "not a finite number");
        return NULL;
      }
      g_array_append_val(values, v);
    }
    int line = ln + 1;
    g_array_append_val(at, line);
    log->n_rows++;
  }
  if (log->n_rows == 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: no data rows", name);
    return NULL;
  }
  log->values = (double *)(void *)g_array_free(g_steal_pointer(&values), FALSE);
  log->lines = (int *)(void *)g_array_free(g_steal_pointer(&at), FALSE);
  return g_steal_pointer(&log);
}

TpTrainLog *tp_trainlog_load(const char *path, GError **err)
{
  g_autofree char *text = NULL;
  if (!tp_read_file(path, "training log", &text, NULL, err))
    return NULL;
  return tp_trainlog_parse(text, tp_input_name(path), err);
}

GArray *tp_trainlog_rows(const TpTrainLog *log, const char *name, GError **err)
{
  static const char *const want[] = { "epoch", "mini_batch", "time", "loss", "accuracy", "test" };
  int col[G_N_ELEMENTS(want)];
  for (guint k = 0; k < G_N_ELEMENTS(want); k++)
    if ((col[k] = tp_trainlog_column(log, want[k])) < 0) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: no column '%s' in the header", name, log->header_line,
                  want[k]);
      return NULL;
    }
  g_autoptr(GArray) rows = g_array_sized_new(FALSE, FALSE, sizeof(TpTrainLogRow), (guint)log->n_rows);
  for (int i = 0; i < log->n_rows; i++) {
    const double *v = &log->values[(size_t)i * log->n_columns];
    double mb = v[col[1]], test = v[col[5]];
    if (mb != floor(mb) || mb < 0 || mb > G_MAXINT) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: mini_batch is not a whole number from 0", name, log->lines[i]);
      return NULL;
    }
    if (test != 0 && test != 1) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: test is neither 0 nor 1", name, log->lines[i]);
      return NULL;
    }
    TpTrainLogRow r = { v[col[0]], (int)mb, v[col[2]], v[col[3]], v[col[4]], test == 1 };
    g_array_append_val(rows, r);
  }
  return g_steal_pointer(&rows);
}
