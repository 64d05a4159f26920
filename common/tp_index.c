/* tp_index.c — position lookup of operations and the cross-stage producer of each one. */
#include "tp_index.h"
#include "tp_error.h"
#include "tp_memory.h"
#include "tp_parallel.h"

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

/* The W table, made by the first range that meets a W (only split backwards need it): a range
 * that finds none makes one and offers it; where two did at once, the one taken first serves. */
static int32_t *wpos_table(TpIndex *ix)
{
  int32_t *w = g_atomic_pointer_get(&ix->wpos);
  if (w)
    return w;
  size_t nk = (size_t)ix->W * ix->nkeys;
  w = tp_memory_alloc_large(nk * sizeof(int32_t));
  memset(w, 0xff, nk * sizeof(int32_t));
  if (g_atomic_pointer_compare_and_exchange(&ix->wpos, NULL, w)) /* after its -1s: seen with them */
    return w;
  g_free(w);
  return g_atomic_pointer_get(&ix->wpos);
}

typedef struct {
  const TpSchedule *s;
  TpIndex *ix;
  gboolean ok[TP_PARALLEL_MAX];
  GError *err[TP_PARALLEL_MAX];
} IndexWork;

/* Positions of every operation of stages lo..hi-1: its fields in range, and no duplicate. */
static gboolean index_positions(IndexWork *w, int lo, int hi, GError **err)
{
  const TpSchedule *s = w->s;
  TpIndex *ix = w->ix;
  for (int st = lo; st < hi; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    const int n = tp_stage_len(s, st);
    int32_t *fpos = ix->fpos + (size_t)st * ix->nkeys, *bpos = ix->bpos + (size_t)st * ix->nkeys;
    memset(fpos, 0xff, ix->nkeys * sizeof(int32_t)); /* -1: none yet */
    memset(bpos, 0xff, ix->nkeys * sizeof(int32_t));
    for (int k = 0; k < n; k++) {
      const TpOp *op = &ops[k];
      if (!op_fields_ok(s, st, op, err))
        return FALSE;
      int key = op->kind == TP_OP_U ? 0 : tp_key(s->N, op->mb, op->micro);
      int32_t *slot = op->kind == TP_OP_U ? &ix->upos[(size_t)st * (s->K + 1) + op->mb]
                      : op->kind == TP_OP_F ? &fpos[key]
                      : op->kind == TP_OP_W ? &wpos_table(ix)[(size_t)st * ix->nkeys + key]
                                            : &bpos[key];
      if (*slot >= 0) {
        char where[512], what[64];
        tp_op_where(s, op, where, sizeof where);
        tp_op_name(s, op, what, sizeof what);
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%s at stage %d: duplicate operation (also at position %d)",
                    where, what, st + 1, *slot + 1);
        return FALSE;
      }
      *slot = k;
    }
  }
  return TRUE;
}

/* The producer of every operation of stages lo..hi-1, from the positions of every stage: a
 * forward's on the stage before, a backward's (B or I) on the stage after; -2 where it is missing
 * there, -1 for the others. */
static void index_producers(IndexWork *w, int lo, int hi)
{
  const TpSchedule *s = w->s;
  TpIndex *ix = w->ix;
  for (int st = lo; st < hi; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    const int n = tp_stage_len(s, st);
    const int32_t *fprev = st > 0 ? ix->fpos + (size_t)(st - 1) * ix->nkeys : NULL;
    const int32_t *bnext = st < s->W - 1 ? ix->bpos + (size_t)(st + 1) * ix->nkeys : NULL;
    int32_t *prod = ix->prod + ix->off[st];
    for (int k = 0; k < n; k++) {
      const TpOp *op = &ops[k];
      int key = op->kind == TP_OP_U ? 0 : tp_key(s->N, op->mb, op->micro);
      int32_t p = -1;
      long from = 0;
      if (op->kind == TP_OP_F && fprev)
        p = fprev[key], from = ix->off[st - 1];
      else if (tp_op_sends_up(op->kind) && bnext)
        p = bnext[key], from = ix->off[st + 1];
      else
        p = -2; /* no neighbour to receive from */
      prod[k] = p == -2 ? -1 : p < 0 ? -2 : (int32_t)(from + p);
    }
  }
}

static void positions_range(void *ctx, int part, int lo, int hi)
{
  IndexWork *w = ctx;
  w->ok[part] = index_positions(w, lo, hi, &w->err[part]);
}

static void producers_range(void *ctx, int part, int lo, int hi)
{
  (void)part;
  index_producers(ctx, lo, hi);
}

TpIndex *tp_index_new(const TpSchedule *s, GError **err)
{
  TpIndex *ix = g_new0(TpIndex, 1);
  ix->W = s->W;
  ix->N = s->N;
  ix->K = s->K;
  ix->nkeys = s->K * (s->N + 1) + 1;
  size_t nk = (size_t)s->W * ix->nkeys, nu = (size_t)s->W * (s->K + 1);
  ix->fpos = tp_memory_alloc_large(nk * sizeof(int32_t));
  ix->bpos = tp_memory_alloc_large(nk * sizeof(int32_t));
  ix->upos = g_new(int32_t, nu);
  memset(ix->upos, 0xff, nu * sizeof(int32_t)); /* the forward and backward rows: by each range */
  ix->off = g_new(long, s->W + 1);
  ix->off[0] = 0;
  for (int st = 0; st < s->W; st++)
    ix->off[st + 1] = ix->off[st] + tp_stage_len(s, st);
  ix->prod = tp_memory_alloc_large(ix->off[s->W] * sizeof(int32_t));
  /* positions, then the producers (replay, validation, simulation and metrics share them), each
   * pass on ranges of stages at once; the error of the first range that fails is the first one */
  IndexWork w = { .s = s, .ix = ix };
  int parts = tp_parallel_parts(ix->off[s->W], s->W), bad = -1;
  tp_parallel_ranges(s->W, parts, positions_range, &w);
  for (int p = 0; p < parts; p++)
    if (!w.ok[p] && bad < 0)
      bad = p;
    else
      g_clear_error(&w.err[p]);
  if (bad >= 0) {
    g_propagate_error(err, w.err[bad]);
    tp_index_free(ix);
    return NULL;
  }
  tp_parallel_ranges(s->W, parts, producers_range, &w);
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
