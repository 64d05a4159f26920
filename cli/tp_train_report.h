/* tp_train_report.h — what `timeprest train` writes from the trainer's results (train/tp_train.h):
 * the report (text or JSON), the training log and the trace files, all or none. */
#ifndef TP_TRAIN_REPORT_H
#define TP_TRAIN_REPORT_H

#include "tp_train.h"

typedef struct {
  const char *csv;     /* --csv LOG */
  const char *trace;   /* --trace EVENTS.csv (and .schedule.csv, .predicted.csv beside it) */
  const char *output;  /* --output FILE (NULL: standard output) */
  int json;            /* --format json */
} TpTrainOutputs;

/* Before the run: the outputs' names checked (none empty, each writable, no file named twice, the
 * trace's files beside it included, none the model, schedule or data file read, none the directory
 * of --checkpoint or --resume (NULL: not given) or a file of a checkpoint there; an output inside the
 * --checkpoint directory is checked as if the run had made it); TP_ERROR_INPUT naming the flags. */
gboolean tp_train_check_outputs(const char *csv, const char *trace, const char *output, const char *checkpoint,
                                const char *resume, const char *model, const char *schedule, const char *data,
                                GError **err);

/* The outputs (data: a TpTrainOutputs), as the trainer's report function (TpTrainReportFn). */
gboolean tp_train_write_outputs(const Train *t, gpointer data, GError **err);

/* plan --run-top: the run that train's arguments argv (argv[0] the command's name; one process)
 * describe, trained in this process without a report: its measured steady time per mini-batch and
 * the BLAS threads per call its stages used. */
gboolean tp_train_measure(int argc, char **argv, double *t_minibatch, int *threads, GError **err);

#endif
