/* tp_tie.h — a head tied to the embedding across pipeline stages: which stage holds it under a
 * split, and whether a schedule can keep the two copies of the table the same.
 *
 * A split that puts a tied head (an lm_head with tied=1) on a later stage than the embedding gives
 * that stage a copy of the table; at every update the two stages sum their gradients (the
 * executor's tie, exec/tp_reduce.h; the simulator's cost of it, sim/tp_analytic.c).  The sum costs
 * the schedule nothing only where both stages run their mini-batches in blocks (a mini-batch's
 * operations, its update, then the next's): the stage that comes first waits only for what its
 * next operation waits for anyway (interleaved stages: a chunk's update lets its worker's next
 * chunk go on while it waits).  Where the embedding's stage runs ahead (the asynchronous policies)
 * the head's would stall at every update.  train, simulate, compare and plan refuse alike what
 * cannot tie. */
#ifndef TP_TIE_H
#define TP_TIE_H

#include <glib.h>
#include "tp_model.h"
#include "tp_schedule.h"

/* A split's tie: the stage (0-based) of the head tied to the embedding where that is not the
 * embedding's stage (the first), -1 where there is none; where the head is ("FILE:LINE", or a
 * Hugging Face config.json's field); and how to untie it there. */
typedef struct {
  int stage;
  char *head;
  const char *what, *untie; /* the head as its file names it; how to untie it there */
} TpTie;

/* The tie of a split of m into W stages [bounds[s], bounds[s+1]); tp_tie_clear frees it. */
TpTie tp_tie_of(const TpModel *m, const int *bounds, int W);
void tp_tie_clear(TpTie *t);
/* Its stage alone. */
int tp_tie_stage(const TpModel *m, const int *bounds, int W);

/* Whether the split can tie: at most one head tied to the embedding off the embedding's stage (two
 * would each need the table's gradient); else a one-line TP_ERROR_INPUT naming the second. */
gboolean tp_tie_check_split(const TpModel *m, const int *bounds, int W, GError **err);

/* Whether order o's generated schedules run every stage's mini-batches in blocks: a model with a
 * head tied across stages can be trained on them (the flushing orders). */
gboolean tp_order_ties(TpOrder o);
/* Their presets, for messages. */
#define TP_TIE_PRESETS "gpipe, 1f1b, the zb presets, interleaved-1f1b or dualpipe-v"

/* Whether s can run a split whose tie is t: TRUE without a head tied across stages; else both
 * stages' mini-batches in blocks, or a one-line TP_ERROR_INPUT naming the head, the operation out
 * of its block and what to do. */
gboolean tp_tie_check_schedule(const TpTie *t, const TpSchedule *s, GError **err);
/* tp_tie_check_split, then tp_tie_check_schedule on m's split at bounds. */
gboolean tp_tie_check(const TpModel *m, const int *bounds, const TpSchedule *s, GError **err);

/* The refusal of tie t: "FILE:LINE: lm_head tied=1 on stage H sums its gradient with stage 1's at
 * each update, WHY (FIX)" (a config.json: "FILE: the head (tie_word_embeddings) on stage H …"). */
void tp_tie_refuse(const TpTie *t, const char *why, const char *fix, GError **err);

#endif
