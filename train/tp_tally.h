/* tp_tally.h — what a run has counted so far: the report's counts and the current run's values per
 * mini-batch.  One struct that the trainer keeps and its checkpoints carry, read, written, copied and
 * checked through one table of its fields (tp_tally.c): a new count is one edit there. */
#ifndef TP_TALLY_H
#define TP_TALLY_H

#include <glib.h>

typedef struct {
  double train_time, samples;  /* training seconds and samples of the whole run so far */
  double epoch_wall;           /* the current run's (epoch's) training seconds so far */
  gboolean versions_match;     /* every read was of the version the schedule names */
  long mismatched;             /* the reads that were not */
  GArray *test_acc, *test_loss, *epoch_time, *train_loss; /* double, one per run (epoch) complete */
  GArray *loss_sum, *upd_time; /* double, one per mini-batch of the current run done */
  GArray *correct;             /* int, idem */
} TpTally;

/* Empty: no values, versions_match TRUE. */
void tp_tally_init(TpTally *t);
void tp_tally_clear(TpTally *t);
/* dst (initialised) takes src's values. */
void tp_tally_copy(TpTally *dst, const TpTally *src);

/* Into key file k's group: every field under its key (numbers as g_ascii_dtostr writes them, lists
 * ';'-separated). */
void tp_tally_put(const TpTally *t, GKeyFile *k, const char *group);
/* From k's group into t (initialised): its numbers (lists FALSE) or its lists (TRUE).  FALSE with
 * *which the key missing or malformed. */
gboolean tp_tally_get(TpTally *t, GKeyFile *k, const char *group, gboolean lists, const char **which);

/* NULL when t fits a position of `runs` runs of K mini-batches complete and `index` mini-batches into
 * the next, of `batch` samples with `labels` labels each: one value per run, one per mini-batch done;
 * every number finite and at least 0 (an accuracy at most 1, a mini-batch's correct labels at most
 * batch · labels); the samples those mini-batches hold; versions_match true exactly where no read
 * mismatched.  Else a line naming the first field that does not. */
char *tp_tally_check(const TpTally *t, int runs, int index, int K, int batch, int labels);

#endif
