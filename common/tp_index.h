/* tp_index.h — lookup of an operation's position by (stage, kind, mini-batch, micro-batch),
 * and global operation numbering (stage offsets) used by replay, simulator and executor. */
#ifndef TP_INDEX_H
#define TP_INDEX_H

#include "tp_schedule.h"

typedef struct {
  int W, N, K, nkeys;
  int32_t *fpos; /* [st * nkeys + key] position of the forward in stage st, or -1 */
  int32_t *bpos; /* [st * nkeys + key] position of the backward (B, or a split backward's I), or -1 */
  int32_t *wpos; /* [st * nkeys + key] position of a split backward's W, or -1; NULL when the schedule has
                    no W (tp_index_wpos reads it either way) */
  int32_t *upos; /* [st * (K+1) + mb] position of the update, or -1 */
  long *off;     /* [st] global index of the stage's first op; off[W] = total ops */
  int32_t *prod; /* [g] global index of the op g receives from (tp_index_producer), -1 or -2 */
} TpIndex;

/* key of (mb, micro): micro TP_WHOLE maps to the mini-batch's slot 0. */
static inline int tp_key(int N, int mb, int micro) { return (mb - 1) * (N + 1) + micro + 1; }

/* Build the index and the producer of every operation.  Fails (TP_ERROR_INPUT) on an op with
 * out-of-range fields or on a duplicate,
 * naming the op and its file:line. */
TpIndex *tp_index_new(const TpSchedule *s, GError **err);
void tp_index_free(TpIndex *ix);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpIndex, tp_index_free)

/* The position at stage st of the split backward's W of key, or -1 (none, or no W in the schedule). */
static inline int32_t tp_index_wpos(const TpIndex *ix, int st, int key)
{
  return ix->wpos ? ix->wpos[(size_t)st * ix->nkeys + key] : -1;
}

static inline int32_t tp_index_pos(const TpIndex *ix, int st, const TpOp *op)
{
  if (op->kind == TP_OP_U)
    return ix->upos[(size_t)st * (ix->K + 1) + op->mb];
  int key = tp_key(ix->N, op->mb, op->micro);
  if (op->kind == TP_OP_W)
    return tp_index_wpos(ix, st, key);
  return (op->kind == TP_OP_F ? ix->fpos : ix->bpos)[(size_t)st * ix->nkeys + key];
}

/* Global index of the op that op (at stage st) needs from a neighbouring stage: the same forward
 * at st-1, or the same backward at st+1 (a B or an I needs the B or I of the same micro-batches
 * there: both send the input gradient; a W needs nothing from another stage).  -1 when it needs none; -2 when the producer is missing. */
long tp_index_producer(const TpIndex *ix, const TpSchedule *s, int st, const TpOp *op, int *pst);

#endif
