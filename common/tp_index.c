/* tp_index.c — position lookup of operations and the cross-stage producer of each one. */
#include "tp_index.h"
#include "tp_error.h"

#include <string.h>

void tp_index_free(TpIndex *ix)
{
  if (!ix)
    return;
  g_free(ix->fpos);
  g_free(ix->bpos);
  g_free(ix->wpos);
  g_free(ix->upos);
  g_free(ix->off);
  g_free(ix->prod);
  g_free(ix);
}

static gboolean op_fields_ok(const TpSchedule *s, int st, const TpOp *op, GError **err)
{
  if (G_LIKELY(op->kind < TP_N_OP_KINDS && op->mb >= 1 && op->mb <= s->K && op->ver >= 0 && op->ver <= s->K &&
               op->src <= TP_SRC_BLEND && (op->kind == TP_OP_U || (op->micro >= TP_WHOLE && op->micro < s->N))))
    return TRUE;
  char where[512], what[64];
  const char *bad = NULL;
  if (op->kind >= TP_N_OP_KINDS)
    bad = "unknown operation kind";
  else if (op->mb < 1 || op->mb > s->K)
    bad = "mini-batch out of range 1..K";
  else if (op->kind != TP_OP_U && (op->micro < TP_WHOLE || op->micro >= s->N))
    bad = "micro-batch out of range 1..N";
  else if (op->ver < 0 || op->ver > s->K)
    bad = "version out of range";
  else if (op->src > TP_SRC_BLEND)
    bad = "unknown weight source";
  if (!bad)
    return TRUE;
  tp_op_where(s, op, where, sizeof where);
  tp_op_name(s, op, what, sizeof what);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%s at stage %d: %s", where, what, st + 1, bad);
  return FALSE;
}

TpIndex *tp_index_new(const TpSchedule *s, GError **err)
{
  TpIndex *ix = g_new0(TpIndex, 1);
  ix->W = s->W;
  ix->N = s->N;
  ix->K = s->K;
  ix->nkeys = s->K * (s->N + 1) + 1;
  size_t nk = (size_t)s->W * ix->nkeys, nu = (size_t)s->W * (s->K + 1);
  ix->fpos = g_new(int32_t, nk);
  ix->bpos = g_new(int32_t, nk);
  ix->upos = g_new(int32_t, nu);
  memset(ix->fpos, 0xff, nk * sizeof(int32_t));
  memset(ix->bpos, 0xff, nk * sizeof(int32_t));
  memset(ix->upos, 0xff, nu * sizeof(int32_t));
  ix->off = g_new(long, s->W + 1);
  ix->off[0] = 0;
  for (int st = 0; st < s->W; st++)
    ix->off[st + 1] = ix->off[st] + tp_stage_len(s, st);
  /* positions, and in the same pass the producer of every operation (replay, validation,
   * simulation and metrics share it): a forward's is on the stage before, indexed already; a
   * backward's on the stage after, so a backward fills in the one it sends to on the stage before */
  ix->prod = g_new(int32_t, ix->off[s->W]);
  for (int st = 0; st < s->W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    const int n = tp_stage_len(s, st);
    const long off = ix->off[st];
    int32_t *fpos = ix->fpos + (size_t)st * ix->nkeys, *bpos = ix->bpos + (size_t)st * ix->nkeys;
    const int32_t *fprev = st > 0 ? fpos - ix->nkeys : NULL, *bprev = st > 0 ? bpos - ix->nkeys : NULL;
    for (int k = 0; k < n; k++) {
      const TpOp *op = &ops[k];
      if (!op_fields_ok(s, st, op, err)) {
        tp_index_free(ix);
        return NULL;
      }
      int key = op->kind == TP_OP_U ? 0 : tp_key(s->N, op->mb, op->micro);
      if (op->kind == TP_OP_W && !ix->wpos) { /* the first W: only split backwards need the table */
        ix->wpos = g_new(int32_t, nk);
        memset(ix->wpos, 0xff, nk * sizeof(int32_t));
      }
      int32_t *slot = op->kind == TP_OP_U ? &ix->upos[(size_t)st * (s->K + 1) + op->mb]
                      : op->kind == TP_OP_F ? &fpos[key]
                      : op->kind == TP_OP_W ? &ix->wpos[(size_t)st * ix->nkeys + key]
                                            : &bpos[key];
      if (*slot >= 0) {
        char where[512], what[64];
        tp_op_where(s, op, where, sizeof where);
        tp_op_name(s, op, what, sizeof what);
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%s at stage %d: duplicate operation (also at position %d)",
                    where, what, st + 1, *slot + 1);
        tp_index_free(ix);
        return NULL;
      }
      *slot = k;
      int32_t *prod = &ix->prod[off + k];
      if (op->kind == TP_OP_F) {
        int32_t p = fprev ? fprev[key] : -1;
        *prod = !fprev ? -1 : p < 0 ? -2 : (int32_t)(ix->off[st - 1] + p);
      } else if (tp_op_sends_up(op->kind)) {
        *prod = st < s->W - 1 ? -2 : -1; /* until stage st+1's backward says otherwise */
        int32_t q = bprev ? bprev[key] : -1;
        if (q >= 0)
          ix->prod[ix->off[st - 1] + q] = (int32_t)(off + k);
      } else {
        *prod = -1;
      }
    }
  }
  return ix;
}

long tp_index_producer(const TpIndex *ix, const TpSchedule *s, int st, const TpOp *op, int *pst)
{
  int src;
  if (op->kind == TP_OP_F && st > 0)
    src = st - 1;
  else if (tp_op_sends_up(op->kind) && st < s->W - 1)
    src = st + 1;
  else
    return -1;
  *pst = src;
  int32_t p = tp_index_pos(ix, src, op);
  return p < 0 ? -2 : ix->off[src] + p;
}
