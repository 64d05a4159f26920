/* tp_wstore.c — per-stage weight versions with reference counts taken from the operation list,
 * stored-activation counts, and byte accounting by category with current and peak values. */
#include "tp_wstore.h"
#include "tp_backend.h"
#include "tp_error.h"
#include "tp_index.h"

#include <string.h>

const char *const tp_wstore_mem_names[TP_N_MEMCAT] = { "weights", "optimizer", "gradients", "activations", "comm" };

static float *host_alloc(void *ctx, size_t n, GError **err)
{
  (void)ctx;
  return tp_host_floats(n, err);
}
static void host_free(void *ctx, float *buf)
{
  (void)ctx;
  g_free(buf);
}
const TpWAlloc tp_walloc_host = { .alloc = host_alloc, .free = host_free, .ctx = NULL };

struct TpWStore {
  const TpSchedule *s;
  int st, n_ops, N, K;
  const TpOp *ops;
  TpWStoreSizes sz;
  TpWAlloc a;
  int32_t *refs;    /* [K+1] reads of each version by operations not yet ended */
  float **buf;      /* [K+1] buffer of each live version, NULL otherwise */
  int32_t *fver;    /* [keys] version each forward of this stage reads, -1 when none */
  int32_t *release; /* [n_ops] activation micro-batches released at the end of each op */
  int latest, pos, cur;
  float *upd, *blend;
  gboolean in_place;
  /* buffers given back, kept for the next take (never more than were in use at once, so the
   * memory held is the accounted peak): no allocation, and no page faults, per update */
  GPtrArray *spare;
  TpWStoreStats stats;
  gint64 comm_added;              /* message bytes added by tp_wstore_mem_add */
  gint64 (*comm)(void *comm_data); /* message bytes held outside the store now (NULL: none) */
  void *comm_data;
};

/* ---- accounting -------------------------------------------------------------------------------- */

static void note(TpWStore *w)
{
  TpWStoreStats *t = &w->stats;
  t->cur[TP_MEMCAT_COMM] = w->comm_added + (w->comm ? w->comm(w->comm_data) : 0);
  t->total = 0;
  for (int c = 0; c < TP_N_MEMCAT; c++) {
    t->total += t->cur[c];
    t->peak[c] = MAX(t->peak[c], t->cur[c]);
  }
  if (t->total > t->peak_total) {
    t->peak_total = t->total;
    memcpy(t->at_peak, t->cur, sizeof t->at_peak);
  }
  t->max_live_versions = MAX(t->max_live_versions, t->live_versions);
  t->max_activations = MAX(t->max_activations, t->activations);
}

void tp_wstore_mem_add(TpWStore *w, TpMemCat cat, gint64 delta)
{
  if (cat == TP_MEMCAT_COMM)
    w->comm_added += delta;
  else
    w->stats.cur[cat] += delta;
  note(w);
}

void tp_wstore_set_comm(TpWStore *w, gint64 (*bytes)(void *data), void *data)
{
  w->comm = bytes, w->comm_data = data;
  note(w);
}

void tp_wstore_sample(TpWStore *w) { note(w); }

static gint64 wbytes(const TpWStore *w) { return (gint64)(w->sz.n_params * sizeof(float)); }

/* A buffer for a version: a spare one, or a new one from the allocator (NULL and err on failure). */
static float *take(TpWStore *w, GError **err)
{
  GError *e = NULL;
  float *b = w->spare->len ? g_ptr_array_steal_index(w->spare, w->spare->len - 1)
                           : w->a.alloc(w->a.ctx, w->sz.n_params, &e);
  if (!b) {
    if (e)
      g_propagate_prefixed_error(err, e, "stage %d: a weight version of %zu floats: ", w->st + 1, w->sz.n_params);
    else
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: cannot allocate a weight version of %zu floats",
                  w->st + 1, w->sz.n_params);
    return NULL;
  }
  w->stats.cur[TP_MEMCAT_WEIGHTS] += wbytes(w);
  return b;
}

static void give(TpWStore *w, float *b)
{
  g_ptr_array_add(w->spare, b);
  w->stats.cur[TP_MEMCAT_WEIGHTS] -= wbytes(w);
}

static void version_free(TpWStore *w, int v)
{
  give(w, w->buf[v]);
  w->buf[v] = NULL;
  w->stats.live_versions--;
}

static void acts_add(TpWStore *w, int micro_batches)
{
  w->stats.activations += micro_batches;
  w->stats.cur[TP_MEMCAT_ACTIVATIONS] += micro_batches * w->sz.activation_bytes;
}

/* ---- what each operation reads ------------------------------------------------------------------- */

/* The version micro-batch j of mini-batch mb read in its forward on this stage, -1 if none. */
static int forward_version(const TpWStore *w, int mb, int j)
{
  int v = w->fver[tp_key(w->N, mb, j)];
  return v >= 0 ? v : w->fver[tp_key(w->N, mb, TP_WHOLE)];
}

/* A backward, or a split backward's input gradient I, reading its forwards' versions (W reads
 * op->ver: its products need no weights, but the version stays live until it, as simulated). */
static gboolean stashed(const TpOp *op)
{
  return (op->kind == TP_OP_B || op->kind == TP_OP_I) && op->src != TP_SRC_FIXED;
}

/* Add d to the reference count of every version op reads (once per micro-batch it covers).
 * Returns FALSE when a stashed read has no forward. */
static gboolean refs_add(TpWStore *w, const TpOp *op, int d, GArray *touched)
{
  if (!stashed(op)) {
    w->refs[op->ver] += d;
    if (touched)
      g_array_append_val(touched, op->ver);
    return TRUE;
  }
  int n = tp_op_count(w->s, op);
  for (int j = 0; j < n; j++) {
    int v = forward_version(w, op->mb, op->micro == TP_WHOLE ? j : op->micro);
    if (v < 0)
      return FALSE;
    w->refs[v] += d;
    if (touched)
      g_array_append_val(touched, v);
  }
  return TRUE;
}

static gboolean fail(GError **err, const TpWStore *w, const TpOp *op, const char *what)
{
  char name[64], where[256];
  tp_op_name(w->s, op, name, sizeof name);
  tp_op_where(w->s, op, where, sizeof where);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%sstage %d: %s %s", where, w->st + 1, name, what);
  return FALSE;
}

/* One pass over the list: forward versions, update order, reads in range, reference counts of the
 * operations from first_op on, and where each forward's activations are released. */
static gboolean derive(TpWStore *w, int first_op, GError **err)
{
  const size_t nkeys = (size_t)w->K * (w->N + 1) + 1;
  int32_t *bpos = g_try_new(int32_t, nkeys);
  if (!bpos) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: cannot allocate the weight store's bookkeeping of %zu "
                "operations", w->st + 1, nkeys);
    return FALSE;
  }
  for (size_t i = 0; i < nkeys; i++)
    bpos[i] = w->fver[i] = -1;
  for (int k = 0; k < w->n_ops; k++)
    if (w->ops[k].kind == TP_OP_B || w->ops[k].kind == TP_OP_W) /* a pending W keeps the activations */
      bpos[tp_key(w->N, w->ops[k].mb, w->ops[k].micro)] = k;
  gboolean ok = TRUE;
  int latest = 0;
  for (int k = 0; ok && k < w->n_ops; k++) {
    const TpOp *op = &w->ops[k];
    if (k == first_op)
      w->latest = latest;
    if (op->kind == TP_OP_U) {
      if (op->mb != latest + 1)
        ok = fail(err, w, op, "is out of order: updates must make versions 1, 2, … in turn");
      latest = op->mb;
      continue;
    }
    if (op->ver < 0 || op->ver > latest) {
      ok = fail(err, w, op, "reads a version this stage has not made yet");
      break;
    }
    if (op->kind == TP_OP_F) {
      w->fver[tp_key(w->N, op->mb, op->micro)] = op->ver;
      int p = bpos[tp_key(w->N, op->mb, TP_WHOLE)];
      if (p < 0 && op->micro != TP_WHOLE)
        p = bpos[tp_key(w->N, op->mb, op->micro)];
      for (int j = 0; p < 0 && op->micro == TP_WHOLE && j < w->N; j++)
        p = MAX(p, bpos[tp_key(w->N, op->mb, j)]);
      if (p < k) {
        ok = fail(err, w, op, "has no backward after it on this stage");
        break;
      }
      w->release[p] += tp_op_count(w->s, op);
      if (k < first_op && p >= first_op)
        acts_add(w, tp_op_count(w->s, op));
    }
    if (k >= first_op && !refs_add(w, op, 1, NULL))
      ok = fail(err, w, op, "reads a stashed version but its forward is not before it on this stage");
  }
  if (first_op == w->n_ops)
    w->latest = latest;
  g_free(bpos);
  return ok;
}

TpWStore *tp_wstore_new(const TpSchedule *s, int stage, int first_op, const TpWStoreSizes *sz, const TpWAlloc *alloc,
                        GError **err)
{
  g_return_val_if_fail(stage >= 0 && stage < s->W && sz && sz->n_params > 0, NULL);
  g_return_val_if_fail(first_op >= 0 && first_op <= tp_stage_len(s, stage), NULL);
  TpWStore *w = g_new0(TpWStore, 1);
  w->s = s, w->st = stage, w->N = s->N, w->K = s->K;
  w->ops = tp_stage_ops(s, stage);
  w->n_ops = tp_stage_len(s, stage);
  w->sz = *sz;
  w->a = alloc ? *alloc : tp_walloc_host;
  const size_t nkeys = (size_t)s->K * (s->N + 1) + 1;
  w->refs = g_try_new0(int32_t, s->K + 1);
  w->buf = g_try_new0(float *, s->K + 1);
  w->fver = g_try_new(int32_t, nkeys);
  w->release = g_try_new0(int32_t, MAX(w->n_ops, 1));
  w->pos = first_op, w->cur = -1;
  w->spare = g_ptr_array_new();
  if (!w->refs || !w->buf || !w->fver || !w->release) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: cannot allocate the weight store's bookkeeping of %zu "
                "operations", stage + 1, nkeys);
    tp_wstore_free(w);
    return NULL;
  }
  if (!derive(w, first_op, err)) {
    tp_wstore_free(w);
    return NULL;
  }
  w->stats.cur[TP_MEMCAT_OPTIMIZER] = sz->optimizer_bytes;
  w->stats.cur[TP_MEMCAT_GRADIENTS] = sz->gradient_bytes;
  for (int v = 0; v <= w->latest; v++)
    if (v == w->latest || w->refs[v] > 0) {
      if (!(w->buf[v] = take(w, err))) {
        tp_wstore_free(w);
        return NULL;
      }
      w->stats.live_versions++;
    }
  note(w);
  return w;
}

void tp_wstore_free(TpWStore *w)
{
  if (!w)
    return;
  for (int v = 0; w->buf && v <= w->K; v++)
    if (w->buf[v])
      w->a.free(w->a.ctx, w->buf[v]);
  if (w->upd && !w->in_place)
    w->a.free(w->a.ctx, w->upd);
  if (w->blend)
    w->a.free(w->a.ctx, w->blend);
  for (guint i = 0; w->spare && i < w->spare->len; i++)
    w->a.free(w->a.ctx, g_ptr_array_index(w->spare, i));
  if (w->spare)
    g_ptr_array_unref(w->spare);
  g_free(w->refs);
  g_free(w->buf);
  g_free(w->fver);
  g_free(w->release);
  g_free(w);
}

float *tp_wstore_version(TpWStore *w, int v) { return v >= 0 && v <= w->K ? w->buf[v] : NULL; }
int tp_wstore_latest(const TpWStore *w) { return w->latest; }
int tp_wstore_position(const TpWStore *w) { return w->pos; }

int tp_wstore_live(const TpWStore *w, int *out, int max)
{
  int n = 0;
  for (int v = 0; v <= w->latest; v++)
    if (w->buf[v]) {
      if (n < max)
        out[n] = v;
      n++;
    }
  return n;
}

void tp_wstore_stats(const TpWStore *w, TpWStoreStats *out) { *out = w->stats; }

/* ---- driving the operations ----------------------------------------------------------------------- */

const TpOp *tp_wstore_op_begin(TpWStore *w, int k, GError **err)
{
  if (w->cur >= 0 || k != w->pos) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: operation %d begun out of turn (next is %d%s)",
                w->st + 1, k + 1, w->pos + 1, w->cur >= 0 ? ", and one is still running" : "");
    return NULL;
  }
  const TpOp *op = &w->ops[k];
  w->cur = k;
  if (op->kind == TP_OP_F) {
    acts_add(w, tp_op_count(w->s, op));
  } else if ((op->kind == TP_OP_B || op->kind == TP_OP_I) && op->src == TP_SRC_BLEND && w->latest > op->ver) {
    if (!(w->blend = take(w, err)))
      goto failed;
  } else if (op->kind == TP_OP_U) {
    w->in_place = w->refs[w->latest] == 0;
    if (w->in_place) {
      w->upd = w->buf[w->latest];
    } else {
      if (!(w->upd = take(w, err))) /* written by the step from the latest version: no copy first */
        goto failed;
      w->stats.live_versions++;
    }
  }
  note(w);
  return op;
failed:
  w->cur = -1;
  return NULL;
}

int tp_wstore_read_version(const TpWStore *w, int j)
{
  g_return_val_if_fail(w->cur >= 0, -1);
  const TpOp *op = &w->ops[w->cur];
  if (!stashed(op))
    return op->ver;
  return forward_version(w, op->mb, op->micro == TP_WHOLE ? j : op->micro);
}

float *tp_wstore_update_buffer(TpWStore *w)
{
  g_return_val_if_fail(w->cur >= 0 && w->ops[w->cur].kind == TP_OP_U, NULL);
  return w->upd;
}

float *tp_wstore_blend_buffer(TpWStore *w)
{
  g_return_val_if_fail(w->cur >= 0, NULL);
  return w->blend;
}

/* The versions op reads lose its reference; those no other operation reads and not the latest go. */
static void release_reads(TpWStore *w, const TpOp *op)
{
  GArray *touched = g_array_new(FALSE, FALSE, sizeof(int));
  refs_add(w, op, -1, touched);
  for (guint i = 0; i < touched->len; i++) {
    int v = g_array_index(touched, int, i);
    if (w->refs[v] == 0 && v != w->latest && w->buf[v])
      version_free(w, v);
  }
  g_array_unref(touched);
}

void tp_wstore_op_skip(TpWStore *w, int k)
{
  g_return_if_fail(w->cur < 0 && k == w->pos);
  const TpOp *op = &w->ops[k];
  if (op->kind != TP_OP_U) /* an update left out makes no version */
    release_reads(w, op);
  w->pos++;
  note(w);
}

void tp_wstore_op_cancel(TpWStore *w)
{
  g_return_if_fail(w->cur >= 0 && w->ops[w->cur].kind == TP_OP_F && !w->blend);
  int k = w->cur;
  acts_add(w, -tp_op_count(w->s, &w->ops[k]));
  w->cur = -1;
  tp_wstore_op_skip(w, k);
}

void tp_wstore_op_end(TpWStore *w)
{
  g_return_if_fail(w->cur >= 0);
  note(w); /* what is held as the operation ends, messages that came during it included */
  const TpOp *op = &w->ops[w->cur];
  if (op->kind == TP_OP_U) {
    int old = w->latest;
    w->latest = op->mb;
    w->buf[w->latest] = w->upd;
    if (w->in_place)
      w->buf[old] = NULL;
    w->upd = NULL;
  } else {
    release_reads(w, op);
    if (w->blend) {
      give(w, w->blend);
      w->blend = NULL;
    }
    acts_add(w, -w->release[w->cur]);
  }
  w->pos++;
  w->cur = -1;
  note(w);
}
