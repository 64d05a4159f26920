/* tp_trainlog.h — the training log: the CSV `timeprest train --csv LOG` writes and `timeprest plot
 * convergence` reads.  A header naming the columns, then one row of numbers per line:
 *   epoch,mini_batch,time,loss,accuracy,test
 * a row every tenth of an epoch (test 0: training loss and accuracy since the previous row) and one
 * at each epoch's end (test 1: the epoch's mean training loss and the test-set accuracy).  The
 * reader takes any such table (a header, then numbers), so logs with other or further columns plot
 * too; tp_trainlog_rows turns one with the columns above into rows. */
#ifndef TP_TRAINLOG_H
#define TP_TRAINLOG_H

#include <glib.h>

#define TP_TRAINLOG_HEADER "epoch,mini_batch,time,loss,accuracy,test"

typedef struct {
  double epoch;          /* epochs done: a fraction within an epoch, whole at its end */
  int mini_batch;        /* mini-batches done in the whole run */
  double time;           /* seconds of training when stage 1 updated after that mini-batch */
  double loss, accuracy; /* see above */
  gboolean test;         /* an epoch's end: accuracy is the test set's */
} TpTrainLogRow;

/* The header line. */
void tp_trainlog_header(GString *out);
/* One row: epoch with 4 decimals (an epoch's end: as a whole number), time with 4, loss and
 * accuracy with 6. */
void tp_trainlog_append(GString *out, const TpTrainLogRow *r);

/* A log as read: its column names and a table of finite numbers. */
typedef struct {
  char **columns;  /* NULL-terminated */
  int n_columns, n_rows;
  int header_line; /* the line the column names came from (1-based) */
  double *values;  /* [n_rows * n_columns], row-major */
  int *lines;      /* [n_rows]: the line each row came from */
} TpTrainLog;

/* The largest magnitude a log's number may have (far beyond any loss, time or count; small enough
 * for a plot's axis ranges). */
#define TP_TRAINLOG_MAX 1e30

/* Read a log: a header line of column names, then rows of as many numbers up to TP_TRAINLOG_MAX in
 * magnitude (empty lines are skipped).  Errors (TP_ERROR_INPUT) name file:line: a row with another
 * number of fields, a field that is not such a number; or the file: empty, no data rows.  parse:
 * text, named name in errors. */
TpTrainLog *tp_trainlog_parse(const char *text, const char *name, GError **err);
TpTrainLog *tp_trainlog_load(const char *path, GError **err);
void tp_trainlog_free(TpTrainLog *log);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpTrainLog, tp_trainlog_free)

/* The index of column name, or -1. */
int tp_trainlog_column(const TpTrainLog *log, const char *name);
/* The rows (TpTrainLogRow) of a log with the columns of TP_TRAINLOG_HEADER (in any order, among
 * others); errors name the column missing, or file:line of a mini-batch that is not a whole number
 * or a test flag other than 0 or 1.  name: the file, for errors. */
GArray *tp_trainlog_rows(const TpTrainLog *log, const char *name, GError **err);

#endif
