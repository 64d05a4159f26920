/* tp_runtime_ops.c — the operations one stage's thread runs (tp_runtime_stage.h): a forward, a
 * backward (whole, per micro-batch, batched, recomputing, or its input-gradient part I), the weight
 * gradient W of a split backward, the update, each with its messages, saved state and record. */
#include "config.h"
#include "tp_runtime_stage.h"
#include "tp_error.h"
#include "tp_index.h"
#include "tp_local.h"
#include "tp_outbox.h"
#include "tp_policy.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* The buffer of the next outgoing message (which 0: activations, h_out; 1: input gradients, h_din):
 * a free one of the outbox (on a host backend it is also the buffer the network writes). */
static gboolean take_message(Stage *g, int which, GError **err)
{
  float **h = which ? &g->h_din : &g->h_out, **dev = which ? &g->din : &g->out;
  if (!*h && !(*h = tp_outbox_take(g->box[which], err))) {
    g_prefix_error(err, "stage %d: an outgoing message: ", g->st + 1);
    return FALSE;
  }
  if (g->host)
    *dev = *h;
  return TRUE;
}

/* Send it, lent to the transport until sent (no copy where the transport can lend). */
static gboolean send_message(Stage *g, int which, int to, const TpTag *tag, size_t len, GError **err)
{
  float **h = which ? &g->h_din : &g->h_out;
  float *buf = *h;
  *h = NULL;
  if (g->host)
    *(which ? &g->din : &g->out) = NULL;
  return tp_outbox_send(g->box[which], buf, g->sh->tr, g->st, to, tag, len, err);
}

static TpSaved *saved_take(Stage *g, int n, GError **err)
{
  GPtrArray *p = g->pool[n != g->m];
  if (p->len)
    return g_ptr_array_steal_index_fast(p, p->len - 1);
  return g->split ? tp_saved_new_split(g->net, n, err) : tp_saved_new(g->net, n, err);
}

/* Back to its pool (n: the samples it was taken for); a slice is only let go. */
static void saved_give(Stage *g, TpSaved *sv, int n)
{
  if (tp_saved_is_slice(sv))
    tp_saved_free(sv);
  else
    g_ptr_array_add(g->pool[n != g->m], sv);
}

/* A buffer for the input of a forward of n samples (recomputation), in the backend's memory. */
static float *kept_take(Stage *g, int n, GError **err)
{
  GPtrArray *p = g->kpool[n != g->m];
  if (p->len)
    return g_ptr_array_steal_index_fast(p, p->len - 1);
  return tp_rt_buf(g->be, FALSE, (size_t)n * g->in_e, err);
}

static void kept_give(Stage *g, float *buf, int n) { g_ptr_array_add(g->kpool[n != g->m], buf); }

void tp_rt_kept_free(gpointer data, gpointer user)
{
  const Stage *g = user;
  tp_rt_buf_free(g->be, FALSE, data);
}

static gboolean fail(Stage *g, const TpOp *op, GError **err, const char *fmt, ...) G_GNUC_PRINTF(4, 5);
static gboolean fail(Stage *g, const TpOp *op, GError **err, const char *fmt, ...)
{
  char name[64];
  tp_op_name(g->sh->s, op, name, sizeof name);
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d, %s (mini-batch %d of the run): %s", g->st + 1, name,
              g->sh->first_mb + op->mb - 1, what);
  return FALSE;
}

/* The weights an operation of one version reads (a forward, a W), recorded in rec->version and
 * rec->match; NULL with err when the store does not hold them. */
static float *read_weights(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
{
  int v = tp_wstore_read_version(g->store, 0);
  float *w = tp_wstore_version(g->store, v);
  rec->version = v;
  rec->match = v == op->ver && w != NULL;
  if (!w)
    fail(g, op, err, "version %d is not in the weight store", v);
  return w;
}

/* The dropout seeds of the forward of (mb, micro) in saved: a micro-batch's own; a whole forward
 * draws each block of B/N rows from its micro-batch's, as the forwards of its micro-batches would
 * (tp_saved_set_seeds), so that fused forwards and their recomputation draw the unfused masks. */
static void set_seeds(Stage *g, TpSaved *sv, int mb, int micro)
{
  const Shared *sh = g->sh;
  guint64 gmb = (guint64)(sh->first_mb + mb - 1), base = sh->rt->cfg.seed;
  int n = micro == TP_WHOLE ? g->N : 1;
  for (int j = 0; j < n; j++)
    g->seeds[j] = tp_mix64(base ^ tp_mix64((gmb << 16) + (guint64)((micro == TP_WHOLE ? j : micro) + 1)));
  tp_saved_set_seeds(sv, g->seeds, n);
}

gboolean tp_rt_forward(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
{
  Shared *sh = g->sh;
  const TpRuntimeConfig *cfg = &sh->rt->cfg;
  gboolean whole = op->micro == TP_WHOLE;
  int n = whole ? g->B : g->m, off = whole ? 0 : op->micro * g->m;
  const int *ids = sh->idx[op->mb - 1] + off;
  TpTag tag = tp_tag_of(op);
  if (g->st == 0) {
    tp_dataset_gather(cfg->train, ids, n, g->h_in, NULL);
    if (!tp_rt_up(g->be, g->in, g->h_in, (size_t)n * g->in_e, err))
      return FALSE;
  } else {
    tp_wstore_sample(g->store); /* with the messages that came before it asks */
    if (!tp_rt_recv(sh->links, sh->tr, g->be, g->st, g->st - 1, &tag, g->in, g->h_in, (size_t)n * g->in_e, err))
      return FALSE;
    rec->start = tp_rt_now(sh); /* the operation starts when its input is there */
  }
  gboolean last = g->st == g->W - 1;
  if (last) {
    tp_dataset_gather(cfg->train, ids, n, NULL, g->labels);
  }
  float *w = read_weights(g, op, rec, err);
  if (!w)
    return FALSE;
  int key = tp_key(g->N, op->mb, op->micro);
  /* where its saved state goes: the workspace (recomputation keeps only the input), its part of
   * the mini-batch's buffer (for one backward of all its micro-batches), or a buffer of its own */
  TpSaved *sv, **mbuf = &g->mbuf[op->mb - 1];
  if (g->rc)
    sv = tp_saved_slice(g->ws, 0, n);
  else if (!whole && g->batched && g->whole_b[op->mb - 1]) {
    if (!*mbuf && !(*mbuf = saved_take(g, g->B, err)))
      return FALSE;
    sv = tp_saved_slice(*mbuf, off, n);
  } else if (!(sv = saved_take(g, n, err)))
    return FALSE;
  set_seeds(g, sv, op->mb, op->micro);
  if (!last && !take_message(g, 0, err)) {
    saved_give(g, sv, n);
    return FALSE;
  }
  TpLossStats stats = { 0, 0 };
  if (!tp_net_forward(g->net, w, g->in, n, last ? NULL : g->out, sv, last ? g->labels : NULL, last ? &stats : NULL,
                      err)) {
    saved_give(g, sv, n);
    return FALSE;
  }
  if (g->rc) {
    saved_give(g, sv, n);
    float *keep = kept_take(g, n, err);
    if (!keep || !g->be->iface->copy(g->be, keep, g->in, (size_t)n * g->in_e, err))
      return FALSE;
    g->kept[key] = keep;
  } else
    g->saved[key] = sv;
  g->fver[key] = rec->version;
  if (last) {
    if (!isfinite(stats.loss_sum) && !sh->rt->timing)
      return fail(g, op, err, "the loss is %s; lower the learning rate or check the data", isnan(stats.loss_sum) ? "NaN" : "infinite");
    sh->out->loss_sum[op->mb - 1] += stats.loss_sum;
    sh->out->correct[op->mb - 1] += stats.correct;
    if ((g->fwd_done[op->mb - 1] += n) == g->B && sh->progress) {
      atomic_store(&sh->progress->last_loss, sh->out->loss_sum[op->mb - 1] / g->B);
      g_atomic_int_inc(&sh->progress->losses);
    }
    return TRUE;
  }
  size_t len = (size_t)n * g->out_e * sizeof(float);
  rec->bytes = (double)len;
  if (tp_rt_link_via_host(sh->links, g->st, g->st + 1)) /* the host buffer, lent to the transport */
    return tp_rt_down(g->be, g->h_out, g->out, (size_t)n * g->out_e, err) &&
           send_message(g, 0, g->st + 1, &tag, len, err);
  return tp_rt_send(sh->links, sh->tr, g->be, g->st, g->st + 1, &tag, g->out, g->h_out, (size_t)n * g->out_e, err);
}

/* A backward B, or a split backward's input gradient I (the same, but the weight gradient is left
 * to its W: the forward's saved state, with the output gradients I keeps there, stays until then). */
gboolean tp_rt_backward(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
{
  Shared *sh = g->sh;
  const TpSchedule *s = sh->s;
  gboolean whole = op->micro == TP_WHOLE, last = g->st == g->W - 1, input_only = op->kind == TP_OP_I;
  int n = whole ? g->B : g->m;
  TpTag tag = tp_tag_of(op);
  if (input_only && (whole || g->rc)) /* refused before training (tp_runtime_check_schedule) */
    return fail(g, op, err, "a split backward runs per micro-batch and without recomputation");
  if (!last) {
    tp_wstore_sample(g->store);
    if (!tp_rt_recv(sh->links, sh->tr, g->be, g->st, g->st + 1, &tag, g->dout, g->h_dout, (size_t)n * g->out_e, err))
      return FALSE;
    rec->start = tp_rt_now(sh);
  }
  /* the forwards this backward consumes: one whole-mini-batch forward, or micro-batches lo..hi-1 */
  int whole_key = tp_key(g->N, op->mb, TP_WHOLE);
  gboolean from_whole = whole && (g->rc ? g->kept[whole_key] != NULL : g->saved[whole_key] != NULL);
  int lo = whole ? 0 : op->micro, hi = whole ? (from_whole ? 1 : g->N) : op->micro + 1;
  int un = from_whole ? g->B : g->m; /* samples of each of those forwards */
  rec->version = G_MAXINT;
  rec->match = TRUE;
  if (g->st > 0 && !take_message(g, 1, err))
    return FALSE;
  int blended = -1; /* the stashed version the blend buffer holds (micro-batches mostly share one) */
  /* each run j0..j1-1 of forwards that read one version: one backward of all their samples */
  for (int j0 = lo, j1; j0 < hi; j0 = j1) {
    int v = tp_wstore_read_version(g->store, j0);
    for (j1 = j0 + 1; g->batched && j1 < hi && tp_wstore_read_version(g->store, j1) == v; j1++)
      ;
    float *w = tp_wstore_version(g->store, v);
    for (int j = j0; j < j1; j++) {
      int key = from_whole ? whole_key : tp_key(g->N, op->mb, j);
      if (g->rc ? !g->kept[key] : !g->saved[key])
        return fail(g, op, err, "no stored %s of micro-batch %d's forward", g->rc ? "input" : "activations", j + 1);
      int expect = op->src == TP_SRC_FIXED ? op->ver : g->fver[key];
      rec->match = rec->match && v == expect && w != NULL;
    }
    rec->version = MIN(rec->version, v);
    if (!w)
      return fail(g, op, err, "version %d is not in the weight store", v);
    if (op->src == TP_SRC_BLEND) {
      int latest = tp_wstore_latest(g->store), d = latest - v;
      if (d > 0) {
        float *blend = tp_wstore_blend_buffer(g->store), *wl = tp_wstore_version(g->store, latest);
        float sig = (float)tp_significance(&s->sig, d);
        if (!blend || !wl)
          return fail(g, op, err, "no buffer to blend versions %d and %d", v, latest);
        if (blended != v && !g->be->iface->blend(g->be, g->S->np, sig, w, wl, blend, err))
          return FALSE;
        blended = v;
        w = blend;
      }
    }
    int fn = (j1 - j0) * un; /* samples of this backward */
    TpSaved *sv;
    if (g->rc) { /* re-run each forward from its input with w, into the workspace */
      for (int j = j0; j < j1; j++) {
        int key = from_whole ? whole_key : tp_key(g->N, op->mb, j);
        TpSaved *part = tp_saved_slice(g->ws, (j - j0) * un, un);
        set_seeds(g, part, op->mb, from_whole ? TP_WHOLE : j);
        tp_saved_set_replay(part, TRUE); /* its forward ran: batchnorm's running statistics moved then */
        if (last) {
          tp_dataset_gather(sh->rt->cfg.train, sh->idx[op->mb - 1] + (from_whole ? 0 : j * g->m), un, NULL, g->labels);
        }
        gboolean ok = tp_net_forward(g->net, w, g->kept[key], un, last ? NULL : g->rc_out, part,
                                     last ? g->labels : NULL, NULL, err);
        tp_saved_free(part);
        if (!ok)
          return FALSE;
        kept_give(g, g->kept[key], un);
        g->kept[key] = NULL;
      }
      sv = tp_saved_slice(g->ws, 0, fn);
    } else if (j1 - j0 > 1) { /* forwards into the mini-batch's buffer: one slice of all of them */
      for (int j = j0; j < j1; j++) {
        int key = tp_key(g->N, op->mb, j);
        saved_give(g, g->saved[key], un);
        g->saved[key] = NULL;
      }
      sv = tp_saved_slice(g->mbuf[op->mb - 1], j0 * g->m, fn);
    } else {
      int key = from_whole ? whole_key : tp_key(g->N, op->mb, j0);
      sv = g->saved[key];
      if (!input_only)
        g->saved[key] = NULL;
    }
    size_t o = (size_t)(from_whole ? 0 : (j0 - lo) * g->m);
    const float *dout = last ? NULL : g->dout + o * g->out_e;
    float *din = g->st ? g->din + o * g->in_e : NULL;
    gboolean ok = input_only ? tp_net_backward_input(g->net, w, sv, dout, din, g->B, err)
                             : tp_net_backward(g->net, w, sv, dout, din, g->S->grad, g->B, err);
    if (!input_only)
      saved_give(g, sv, fn);
    if (!ok)
      return FALSE;
  }
  if (whole && g->mbuf[op->mb - 1]) {
    saved_give(g, g->mbuf[op->mb - 1], g->B);
    g->mbuf[op->mb - 1] = NULL;
  }
  if (g->st == 0)
    return TRUE;
  size_t len = (size_t)n * g->in_e * sizeof(float);
  rec->bytes = (double)len;
  if (tp_rt_link_via_host(sh->links, g->st, g->st - 1))
    return tp_rt_down(g->be, g->h_din, g->din, (size_t)n * g->in_e, err) &&
           send_message(g, 1, g->st - 1, &tag, len, err);
  return tp_rt_send(sh->links, sh->tr, g->be, g->st, g->st - 1, &tag, g->din, g->h_din, (size_t)n * g->in_e, err);
}

/* A split backward's weight gradient W: the gradient accumulates dW from the output gradients its I
 * kept and the forward's saved inputs, which are let go. */
gboolean tp_rt_weight_grad(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
{
  int key = tp_key(g->N, op->mb, op->micro);
  TpSaved *sv = op->micro == TP_WHOLE ? NULL : g->saved[key];
  if (!sv)
    return fail(g, op, err, "no output gradients of its I");
  float *w = read_weights(g, op, rec, err);
  if (!w)
    return FALSE;
  gboolean ok = tp_net_backward_weight(g->net, w, sv, g->S->grad, err);
  g->saved[key] = NULL;
  saved_give(g, sv, g->m);
  return ok;
}

gboolean tp_rt_update(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
{
  rec->version = tp_wstore_latest(g->store);
  rec->match = rec->version == op->ver;
  float *ub = tp_wstore_update_buffer(g->store), *wl = tp_wstore_version(g->store, rec->version);
  if (!ub || !wl)
    return fail(g, op, err, "no buffer for the new version");
  if (!tp_rt_step(g->sh->rt, g->S, (long)g->sh->first_mb + op->mb - 1, wl, g->S->grad, g->S->mom, ub, err) ||
      !g->be->iface->zero(g->be, g->S->grad, g->S->np ? g->S->np : 1, err))
    return FALSE;
  if (g->st == 0 && g->sh->progress)
    g_atomic_int_inc(&g->sh->progress->done);
  return TRUE;
}

/* The message bytes this stage holds: those that arrived and wait for their operation (queued in
 * the transport, from their arrival on), and its outgoing ones lent to sends not yet done — what
 * the simulator counts (a received message from its arrival to its operation's start, a sent one
 * until its transfer ends).  The buffer a stage waits to receive into is not a message: it is the
 * stage's own input (h_in, h_dout), held for the whole run. */
gint64 tp_rt_message_bytes(void *data)
{
  Stage *g = data;
  TpTransport *tr = g->sh->tr;
  return (tr->queued ? tr->queued(tr, g->st) : 0) + tp_outbox_lent(g->box[0]) + tp_outbox_lent(g->box[1]);
}

