/* tp_runtime_ops.c — the operations one stage's thread runs (tp_runtime_stage.h), one function per
 * kind: a forward, a backward (whole, per micro-batch, batched, or its input-gradient part I), the
 * weight gradient W of a split backward, the update, each with its messages and record; what each
 * keeps for the next is the activation store's (tp_runtime_acts.c). */
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
  float **h = which ? &g->b.h_din : &g->b.h_out, **dev = which ? &g->b.din : &g->b.out;
  if (!*h && !(*h = tp_outbox_take(g->b.box[which], err))) {
    g_prefix_error(err, "stage %d: an outgoing message: ", g->st + 1);
    return FALSE;
  }
  if (g->b.host)
    *dev = *h;
  return TRUE;
}

/* Send it, lent to the transport until sent (no copy where the transport can lend). */
static gboolean send_message(Stage *g, int which, int to, const TpTag *tag, size_t len, GError **err)
{
  float **h = which ? &g->b.h_din : &g->b.h_out;
  float *buf = *h;
  *h = NULL;
  if (g->b.host)
    *(which ? &g->b.din : &g->b.out) = NULL;
  return tp_outbox_send(g->b.box[which], buf, g->sh->tr, g->st, to, tag, len, err);
}

/* An operation's result to stage `to`, n samples of elems floats: its activations (which 0) or its
 * input gradients (1); rec counts the bytes. */
static gboolean send_result(Stage *g, int which, int to, const TpTag *tag, int n, size_t elems, TpOpRecord *rec,
                            GError **err)
{
  Shared *sh = g->sh;
  float *dev = which ? g->b.din : g->b.out, *host = which ? g->b.h_din : g->b.h_out;
  size_t count = (size_t)n * elems, len = count * sizeof(float);
  rec->bytes = (double)len;
  if (tp_rt_link_via_host(sh->links, g->st, to)) /* the host buffer, lent to the transport */
    return tp_rt_down(g->be, host, dev, count, err) && send_message(g, which, to, tag, len, err);
  return tp_rt_send(sh->links, sh->tr, g->be, g->st, to, tag, dev, host, count, err);
}

/* An operation's input from stage `from` (count floats into dev, staged through host): the operation
 * starts when it is there. */
static gboolean receive(Stage *g, int from, const TpTag *tag, float *dev, float *host, size_t count, TpOpRecord *rec,
                        GError **err)
{
  Shared *sh = g->sh;
  tp_wstore_sample(g->store); /* with the messages that came before it asks */
  if (!tp_rt_recv(sh->links, sh->tr, g->be, g->st, from, tag, dev, host, count, err))
    return FALSE;
  rec->start = tp_rt_now(sh);
  return TRUE;
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
void tp_rt_set_seeds(Stage *g, TpSaved *sv, int mb, int micro)
{
  const Shared *sh = g->sh;
  guint64 gmb = (guint64)(sh->first_mb + mb - 1), base = sh->rt->cfg.seed;
  int n = micro == TP_WHOLE ? g->N : 1;
  for (int j = 0; j < n; j++)
    g->seeds[j] = tp_mix64(base ^ tp_mix64((gmb << 16) + (guint64)((micro == TP_WHOLE ? j : micro) + 1 +
                                                                   sh->rt->cfg.micro_base)));
  tp_saved_set_seeds(sv, g->seeds, n);
}

/* The last stage's loss and correct count of a forward of n samples, into the run's results. */
static gboolean count_loss(Stage *g, const TpOp *op, int n, const TpLossStats *stats, GError **err)
{
  Shared *sh = g->sh;
  if (!isfinite(stats->loss_sum) && !sh->rt->timing)
    return fail(g, op, err, "the loss is %s; lower the learning rate or check the data",
                isnan(stats->loss_sum) ? "NaN" : "infinite");
  sh->out->loss_sum[op->mb - 1] += stats->loss_sum;
  sh->out->correct[op->mb - 1] += stats->correct;
  if ((g->fwd_done[op->mb - 1] += n) == g->B && sh->progress) {
    atomic_store(&sh->progress->last_loss, sh->out->loss_sum[op->mb - 1] / g->B);
    g_atomic_int_inc(&sh->progress->losses);
  }
  return TRUE;
}

gboolean tp_rt_forward(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
{
  Shared *sh = g->sh;
  const TpRuntimeConfig *cfg = &sh->rt->cfg;
  gboolean whole = op->micro == TP_WHOLE, last = g->st == g->W - 1;
  int n = whole ? g->B : g->m, off = whole ? 0 : op->micro * g->m;
  const int *ids = sh->idx[op->mb - 1] + off;
  TpTag tag = tp_tag_of(op);
  if (g->st == 0) {
    tp_dataset_gather(cfg->train, ids, n, g->b.h_in, NULL);
    if (!tp_rt_up(g->be, g->b.in, g->b.h_in, (size_t)n * g->in_e, err))
      return FALSE;
  } else if (!receive(g, g->st - 1, &tag, g->b.in, g->b.h_in, (size_t)n * g->in_e, rec, err))
    return FALSE;
  if (last)
    tp_dataset_gather(cfg->train, ids, n, NULL, g->b.labels);
  float *w = read_weights(g, op, rec, err);
  TpSaved *sv = w ? tp_acts_forward_state(g, op, n, off, err) : NULL;
  if (!sv)
    return FALSE;
  tp_rt_set_seeds(g, sv, op->mb, op->micro);
  TpLossStats stats = { 0, 0 };
  if ((!last && !take_message(g, 0, err)) ||
      !tp_net_forward(g->net, w, g->b.in, n, last ? NULL : g->b.out, sv, last ? g->b.labels : NULL,
                      last ? &stats : NULL, err)) {
    tp_acts_drop(g, sv, n);
    return FALSE;
  }
  if (!tp_acts_keep(g, op, sv, n, rec->version, err))
    return FALSE;
  return last ? count_loss(g, op, n, &stats, err) : send_result(g, 0, g->st + 1, &tag, n, g->out_e, rec, err);
}

/* Forwards j0..j1-1 of span p are stored and read version v (held: the store has it): rec's version
 * and whether they read what the schedule names. */
static gboolean check_reads(Stage *g, const TpOp *op, const RtSpan *p, int j0, int j1, int v, gboolean held,
                            TpOpRecord *rec, GError **err)
{
  for (int j = j0; j < j1; j++) {
    int key = tp_acts_key(g, op, p, j);
    if (!tp_acts_has(g, key))
      return fail(g, op, err, "no stored %s of micro-batch %d's forward", g->a.rc ? "input" : "activations", j + 1);
    int expect = op->src == TP_SRC_FIXED ? op->ver : tp_acts_version(g, key);
    rec->match = rec->match && v == expect && held;
  }
  rec->version = MIN(rec->version, v);
  return TRUE;
}

/* The weights a backward of forwards that read version v computes with: that version, or under a
 * blending policy its blend with the latest (*blended: the version the blend buffer holds now). */
static float *backward_weights(Stage *g, const TpOp *op, int v, int *blended, GError **err)
{
  float *w = tp_wstore_version(g->store, v);
  if (!w)
    return fail(g, op, err, "version %d is not in the weight store", v), NULL;
  int latest = tp_wstore_latest(g->store), d = latest - v;
  if (op->src != TP_SRC_BLEND || d <= 0)
    return w;
  float *blend = tp_wstore_blend_buffer(g->store), *wl = tp_wstore_version(g->store, latest);
  float sig = (float)tp_significance(&g->sh->s->sig, d);
  if (!blend || !wl)
    return fail(g, op, err, "no buffer to blend versions %d and %d", v, latest), NULL;
  if (*blended != v && !g->be->iface->blend(g->be, g->S->np, sig, w, wl, blend, err))
    return NULL;
  *blended = v;
  return blend;
}

/* One backward of forwards j0..j1-1 of span p, which read version v: their saved state and output
 * gradients give the input gradients in din, and the weight gradient unless it is an I. */
static gboolean backward_run(Stage *g, const TpOp *op, const RtSpan *p, int j0, int j1, int v, int *blended,
                             TpOpRecord *rec, GError **err)
{
  gboolean last = g->st == g->W - 1;
  float *w = tp_wstore_version(g->store, v);
  if (!check_reads(g, op, p, j0, j1, v, w != NULL, rec, err) || !(w = backward_weights(g, op, v, blended, err)))
    return FALSE;
  TpSaved *sv = tp_acts_take(g, op, p, j0, j1, w, err);
  if (!sv)
    return FALSE;
  size_t o = (size_t)(p->from_whole ? 0 : (j0 - p->lo) * g->m);
  const float *dout = last ? NULL : g->b.dout + o * g->out_e;
  float *din = g->st ? g->b.din + o * g->in_e : NULL;
  gboolean ok = op->kind == TP_OP_I ? tp_net_backward_input(g->net, w, sv, dout, din, g->B, err)
                                    : tp_net_backward(g->net, w, sv, dout, din, g->S->grad, g->B, err);
  tp_acts_release(g, op, sv, (j1 - j0) * p->un);
  return ok;
}

/* A backward B, or a split backward's input gradient I (the same, but the weight gradient is left
 * to its W: the forward's saved state, with the output gradients I keeps there, stays until then).
 * Each run of its forwards that read one version is one backward of all their samples. */
gboolean tp_rt_backward(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
{
  gboolean whole = op->micro == TP_WHOLE;
  int n = whole ? g->B : g->m;
  TpTag tag = tp_tag_of(op);
  if (op->kind == TP_OP_I && (whole || g->a.rc)) /* refused before training (tp_runtime_check_schedule) */
    return fail(g, op, err, "a split backward runs per micro-batch and without recomputation");
  if (g->st < g->W - 1 && !receive(g, g->st + 1, &tag, g->b.dout, g->b.h_dout, (size_t)n * g->out_e, rec, err))
    return FALSE;
  RtSpan p = tp_acts_span(g, op);
  rec->version = G_MAXINT;
  rec->match = TRUE;
  if (g->st > 0 && !take_message(g, 1, err))
    return FALSE;
  int blended = -1; /* the stashed version the blend buffer holds (micro-batches mostly share one) */
  for (int j0 = p.lo, j1; j0 < p.hi; j0 = j1) {
    int v = tp_wstore_read_version(g->store, j0);
    for (j1 = j0 + 1; g->a.batched && j1 < p.hi && tp_wstore_read_version(g->store, j1) == v; j1++)
      ;
    if (!backward_run(g, op, &p, j0, j1, v, &blended, rec, err))
      return FALSE;
  }
  tp_acts_end_backward(g, op);
  return g->st == 0 || send_result(g, 1, g->st - 1, &tag, n, g->in_e, rec, err);
}

/* A split backward's weight gradient W: the gradient accumulates dW from the output gradients its I
 * kept and the forward's saved inputs, which are let go. */
gboolean tp_rt_weight_grad(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
{
  TpSaved *sv = tp_acts_take_for_w(g, op);
  if (!sv)
    return fail(g, op, err, "no output gradients of its I");
  float *w = read_weights(g, op, rec, err);
  gboolean ok = w && tp_net_backward_weight(g->net, w, sv, g->S->grad, err);
  tp_acts_release(g, op, sv, g->m);
  return ok;
}

gboolean tp_rt_update(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
{
  rec->version = tp_wstore_latest(g->store);
  rec->match = rec->version == op->ver;
  float *ub = tp_wstore_update_buffer(g->store), *wl = tp_wstore_version(g->store, rec->version);
  if (!ub || !wl)
    return fail(g, op, err, "no buffer for the new version");
  const TpRuntime *rt = g->sh->rt;
  TpReduce *red = rt->cfg.reduce; /* data parallelism: the replicas' mean gradient; a tied head's sum */
  long mb = (long)g->sh->first_mb + op->mb - 1;
  size_t off, n;
  if (red && red->D > 1 && g->S->np && !red->iface->mean(red, g->st, rt->cfg.replica, mb, g->be, g->S->grad, g->S->np, err))
    return FALSE;
  if (tp_net_tied_part(g->net, &off, &n) && !red->iface->tie(red, g->st, rt->cfg.replica, mb, g->be, g->S->grad + off, n, err))
    return FALSE;
  if (!tp_rt_step(g->sh->rt, g->S, mb, wl, g->S->grad, g->S->mom, ub, err) ||
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
  return (tr->queued ? tr->queued(tr, g->st) : 0) + tp_outbox_lent(g->b.box[0]) + tp_outbox_lent(g->b.box[1]);
}

