/* tp_runtime.c — running a schedule for real: one thread per stage that walks the stage's operation
 * list with its weight store and the transport, recording what every operation did and when (the
 * stages' state itself is made in tp_runtime_state.c). */
#include "config.h"
#include "tp_runtime_priv.h"
#include "tp_error.h"
#include "tp_index.h"
#include "tp_local.h"
#include "tp_outbox.h"
#include "tp_policy.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

void tp_run_result_clear(TpRunResult *r)
{
  for (int s = 0; r->rec && s < r->W; s++)
    g_free(r->rec[s]);
  g_free(r->rec);
  g_free(r->loss_sum);
  g_free(r->correct);
  g_free(r->stats);
  memset(r, 0, sizeof *r);
}

/* ---- one stage's thread -------------------------------------------------------------------------- */

typedef struct {
  TpRuntime *rt;
  const TpSchedule *s;
  const int *const *idx;
  int first_mb;
  gint64 origin;
  TpTransport *tr;
  TpRtLinks *links;  /* how each link direction moves its messages (tp_runtime_msg.c) */
  TpProgress *progress;
  TpRunResult *out;
  GMutex lock;       /* first_err, finished */
  GCond cond;        /* a stage finished */
  int finished;      /* stages done */
  GError *first_err; /* the error that ended the run */
  /* interleaved stages (s->rank_seq): the turn of each rank, which runs one operation at a time in
   * its order across its chunks, as the simulator's ranks do */
  GMutex turn_lock;  /* rpos, stopped */
  GCond turn_cond;   /* a rank's turn passed on, or the run stopped */
  int *rpos;         /* [ranks] the place of each rank's next operation in its order */
  gboolean stopped;  /* the run failed: no stage waits for its turn any more */
} Shared;

typedef struct {
  Shared *sh;
  int st;
} StageArg;

/* Stage state for one schedule. */
typedef struct {
  Shared *sh;
  int st, W, N, B, m;
  RtStage *S;
  TpNet *net;
  const TpBackend *be;
  TpWStore *store;
  size_t in_e, out_e;
  gboolean host;     /* the backend works on host memory: the staging buffers are the buffers */
  float *in, *out, *dout, *din;         /* in the backend's memory */
  float *h_in, *h_out, *h_dout, *h_din; /* their host staging (data, messages) */
  TpOutbox *box[2];  /* h_out, h_din: taken from these for each message, lent with its send */
  gint32 *labels;
  uint8_t *lab8;
  TpSaved **saved;   /* [tp_key] the forward's saved state until its backward (a slice of mbuf[mb]
                        where the mini-batch's backward is whole and its forwards are not) */
  TpSaved **mbuf;    /* [K] the saved state of all micro-batches of a mini-batch, in one buffer */
  gboolean batched;  /* whole backwards over micro-batch forwards run batched (not per_micro_backward) */
  int *fver;         /* [tp_key] the version that forward read */
  GPtrArray *pool[2];/* free TpSaved of micro-batch / whole-mini-batch size */
  gboolean *whole_b; /* [K] the mini-batch's backward on this stage is one whole-mini-batch backward */
  /* recomputation (s->recompute): a forward keeps only its input; the backward re-runs it */
  gboolean rc;
  float **kept;      /* [tp_key] the forward's input, until its backward */
  guint64 *kseed;    /* [tp_key] its dropout seed */
  GPtrArray *kpool[2]; /* free input buffers of micro-batch / whole-mini-batch size */
  TpSaved *ws;       /* the workspace every forward and re-run forward writes (max op samples) */
  float *rc_out;     /* where a re-run forward writes its output (discarded) */
  int *fwd_done;     /* [K] forwards done on the last stage, to know when a loss is complete */
  gboolean split;    /* the schedule splits backwards into I and W: saved states keep output
                        gradients (tp_saved_new_split), and saved[key] lives from I to W */
} Stage;

static double now_s(const Shared *sh) { return (double)(g_get_monotonic_time() - sh->origin) / 1e6; }

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

static void kept_free(gpointer data, gpointer user)
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

static gboolean forward(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
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
    rec->start = now_s(sh); /* the operation starts when its input is there */
  }
  gboolean last = g->st == g->W - 1;
  if (last) {
    tp_dataset_gather(cfg->train, ids, n, NULL, g->lab8);
    for (int i = 0; i < n; i++)
      g->labels[i] = g->lab8[i];
  }
  float *w = read_weights(g, op, rec, err);
  if (!w)
    return FALSE;
  int key = tp_key(g->N, op->mb, op->micro);
  guint64 gmb = (guint64)(sh->first_mb + op->mb - 1);
  guint64 seed = tp_mix64(cfg->seed ^ tp_mix64((gmb << 16) + (guint64)(op->micro + 1)));
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
  tp_saved_set_seed(sv, seed);
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
    g->kseed[key] = seed;
  } else
    g->saved[key] = sv;
  g->fver[key] = rec->version;
  if (last) {
    if (!isfinite(stats.loss_sum))
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
static gboolean backward(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
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
    rec->start = now_s(sh);
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
        tp_saved_set_seed(part, g->kseed[key]);
        if (last) {
          tp_dataset_gather(sh->rt->cfg.train, sh->idx[op->mb - 1] + (from_whole ? 0 : j * g->m), un, NULL, g->lab8);
          for (int i = 0; i < un; i++)
            g->labels[i] = g->lab8[i];
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
static gboolean weight_grad(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
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

static gboolean update(Stage *g, const TpOp *op, TpOpRecord *rec, GError **err)
{
  const TpRuntimeConfig *cfg = &g->sh->rt->cfg;
  rec->version = tp_wstore_latest(g->store);
  rec->match = rec->version == op->ver;
  float *ub = tp_wstore_update_buffer(g->store), *wl = tp_wstore_version(g->store, rec->version);
  if (!ub || !wl)
    return fail(g, op, err, "no buffer for the new version");
  float lr = tp_runtime_lr(cfg, (long)g->sh->first_mb + op->mb - 1);
  if (!g->be->iface->sgd_step(g->be, g->S->np, lr, cfg->momentum, cfg->weight_decay, wl, g->S->grad, g->S->mom, ub, err) ||
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
static gint64 message_bytes(void *data)
{
  Stage *g = data;
  TpTransport *tr = g->sh->tr;
  return (tr->queued ? tr->queued(tr, g->st) : 0) + tp_outbox_lent(g->box[0]) + tp_outbox_lent(g->box[1]);
}

/* ---- interleaved stages: a rank's chunks take turns --------------------------------------------- */

/* Wait until the next operation in the order of stage st's rank is this stage's (nothing to wait
 * for without interleaved stages).  The stage then holds its rank's turn for the whole operation,
 * waiting for its message included, and passes it on with turn_pass: the order was validated
 * deadlock-free on the same rule (a rank waits at its next operation until its input is there), so
 * the message comes.  FALSE with err when the run stopped meanwhile (another stage failed). */
static gboolean turn_take(Shared *sh, int st, const TpOp *op, GError **err)
{
  const TpSchedule *s = sh->s;
  if (!s->rank_seq)
    return TRUE;
  int rk = tp_stage_rank(s, st);
  const GArray *seq = s->rank_seq[rk];
  g_mutex_lock(&sh->turn_lock);
  while (!sh->stopped && sh->rpos[rk] < (int)seq->len && g_array_index(seq, int32_t, sh->rpos[rk]) != st)
    g_cond_wait(&sh->turn_cond, &sh->turn_lock);
  gboolean stopped = sh->stopped, past = sh->rpos[rk] >= (int)seq->len;
  g_mutex_unlock(&sh->turn_lock);
  if (stopped || past) {
    char name[64];
    tp_op_name(s, op, name, sizeof name);
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d, %s: %s", st + 1, name,
                stopped ? "the run stopped while it waited for its turn on its rank"
                        : "its rank's order has no turn left for it");
    return FALSE;
  }
  return TRUE;
}

/* Stage st's operation is done: its rank's next operation may start. */
static void turn_pass(Shared *sh, int st)
{
  if (!sh->s->rank_seq)
    return;
  g_mutex_lock(&sh->turn_lock);
  sh->rpos[tp_stage_rank(sh->s, st)]++;
  g_cond_broadcast(&sh->turn_cond);
  g_mutex_unlock(&sh->turn_lock);
}

/* The run failed: every stage waiting for its turn ends. */
static void turn_stop(Shared *sh)
{
  g_mutex_lock(&sh->turn_lock);
  sh->stopped = TRUE;
  g_cond_broadcast(&sh->turn_cond);
  g_mutex_unlock(&sh->turn_lock);
}

static gboolean stage_walk(Stage *g, GError **err)
{
  Shared *sh = g->sh;
  const TpSchedule *s = sh->s;
  TpWStoreSizes sz;
  tp_rt_sizes(sh->rt, g->st, g->rc, g->split, &sz);
  if (!(g->store = tp_wstore_new(s, g->st, 0, &sz, &sh->rt->alloc[g->st], err)))
    return FALSE;
  tp_wstore_set_comm(g->store, message_bytes, g);
  if (g->rc) { /* the workspace of the largest operation, held for the whole run */
    int most = 1;
    for (int k = 0; k < tp_stage_len(s, g->st); k++) {
      const TpOp *op = &tp_stage_ops(s, g->st)[k];
      most = MAX(most, op->kind == TP_OP_U ? 1 : tp_op_count(s, op));
    }
    if (!(g->ws = tp_saved_new(g->net, most * g->m, err)) ||
        (g->st + 1 < g->W && !(g->rc_out = tp_rt_buf(g->be, FALSE, (size_t)most * g->m * g->out_e, err))))
      return FALSE;
    tp_wstore_mem_add(g->store, TP_MEMCAT_ACTIVATIONS,
                      (gint64)(tp_net_saved_bytes_per_sample(g->net) * (size_t)(most * g->m)));
  }
  float *v0 = tp_wstore_version(g->store, 0);
  if (!g->be->iface->copy(g->be, v0, g->S->weights, g->S->np ? g->S->np : 1, err))
    return FALSE;
  const int n_ops = tp_stage_len(s, g->st);
  TpOpRecord *recs = sh->out->rec[g->st];
  for (int k = 0; k < n_ops; k++) {
    if (!turn_take(sh, g->st, &tp_stage_ops(s, g->st)[k], err))
      return FALSE;
    const TpOp *op = tp_wstore_op_begin(g->store, k, err);
    if (!op)
      return FALSE;
    TpOpRecord *rec = &recs[k];
    rec->latest = tp_wstore_latest(g->store);
    rec->start = now_s(sh);
    gboolean ok = op->kind == TP_OP_F   ? forward(g, op, rec, err)
                  : op->kind == TP_OP_W ? weight_grad(g, op, rec, err)
                  : op->kind == TP_OP_U ? update(g, op, rec, err)
                                        : backward(g, op, rec, err);
    if (!ok || !tp_backend_sync(g->be, err)) /* a device operation ends when its work is done */
      return FALSE;
    tp_wstore_op_end(g->store);
    rec->end = now_s(sh);
    turn_pass(sh, g->st);
  }
  tp_wstore_stats(g->store, &sh->out->stats[g->st]);
  return g->be->iface->copy(g->be, g->S->weights, tp_wstore_version(g->store, tp_wstore_latest(g->store)),
                     g->S->np ? g->S->np : 1, err) &&
         tp_rt_sync_host_weights(g->S, err);
}

static gpointer stage_main(gpointer data)
{
  StageArg *a = data;
  Shared *sh = a->sh;
  TpRuntime *rt = sh->rt;
  const TpSchedule *s = sh->s;
  Stage g = { .sh = sh, .st = a->st, .W = s->W, .N = s->N, .B = rt->cfg.batch, .m = rt->cfg.batch / s->N };
  g.S = &rt->st[a->st];
  g.net = g.S->net;
  g.be = g.S->be;
  g.host = tp_backend_host_memory(g.be);
  g.in_e = tp_net_in_elems(g.net), g.out_e = tp_net_out_elems(g.net);
  GError *err = NULL;
  g.box[0] = tp_outbox_new((size_t)g.B * g.out_e);
  g.box[1] = tp_outbox_new((size_t)g.B * g.in_e);
  size_t nkeys = (size_t)s->K * (s->N + 1);
  g.labels = g_try_new(gint32, g.B);
  g.lab8 = g_try_new(uint8_t, g.B);
  g.saved = g_try_new0(TpSaved *, nkeys);
  g.fver = g_try_new(int, nkeys);
  g.fwd_done = g_try_new0(int, s->K);
  g.mbuf = g_try_new0(TpSaved *, s->K);
  g.whole_b = g_try_new0(gboolean, s->K);
  for (int k = 0; g.whole_b && k < tp_stage_len(s, g.st); k++) {
    const TpOp *op = &tp_stage_ops(s, g.st)[k];
    if (op->kind == TP_OP_B && op->micro == TP_WHOLE)
      g.whole_b[op->mb - 1] = TRUE;
  }
  g.batched = !rt->cfg.per_micro_backward;
  g.rc = s->recompute;
  g.split = tp_schedule_has_split(s);
  if (g.rc) {
    g.kept = g_try_new0(float *, nkeys);
    g.kseed = g_try_new0(guint64, nkeys);
  }
  for (int i = 0; i < 2; i++) {
    g.pool[i] = g_ptr_array_new_with_free_func((GDestroyNotify)tp_saved_free);
    g.kpool[i] = g_ptr_array_new();
  }
  if (!(g.h_in = tp_rt_buf(g.be, TRUE, (size_t)g.B * g.in_e, &err)) ||
      !(g.h_dout = tp_rt_buf(g.be, TRUE, (size_t)g.B * g.out_e, &err)))
    g_prefix_error(&err, "stage %d: ", g.st + 1);
  else if (!g.labels || !g.lab8 || !g.saved || !g.fver || !g.fwd_done || !g.mbuf || !g.whole_b ||
           (g.rc && (!g.kept || !g.kseed)))
    g_set_error(&err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: cannot allocate its bookkeeping of %zu operations",
                g.st + 1, nkeys);
  else if (g.host)
    g.in = g.h_in, g.dout = g.h_dout; /* out and din: the message buffers, taken for each message */
  else if (!(g.in = tp_rt_buf(g.be, FALSE, (size_t)g.B * g.in_e, &err)) ||
           !(g.din = tp_rt_buf(g.be, FALSE, (size_t)g.B * g.in_e, &err)) ||
           !(g.out = tp_rt_buf(g.be, FALSE, (size_t)g.B * g.out_e, &err)) ||
           !(g.dout = tp_rt_buf(g.be, FALSE, (size_t)g.B * g.out_e, &err)))
    g_prefix_error(&err, "stage %d: ", g.st + 1);
  if (err || !stage_walk(&g, &err)) {
    g_mutex_lock(&sh->lock);
    if (!sh->first_err) {
      sh->first_err = err;
      err = NULL;
      sh->tr->abort(sh->tr, sh->first_err->message);
    }
    g_mutex_unlock(&sh->lock);
    g_clear_error(&err);
    turn_stop(sh);
  }
  g_mutex_lock(&sh->lock);
  sh->finished++;
  g_cond_signal(&sh->cond);
  g_mutex_unlock(&sh->lock);
  for (size_t k = 0; g.saved && k < nkeys; k++) /* slices before the buffers they are part of */
    tp_saved_free(g.saved[k]);
  for (int k = 0; g.mbuf && k < s->K; k++)
    tp_saved_free(g.mbuf[k]);
  for (size_t k = 0; g.kept && k < nkeys; k++)
    tp_rt_buf_free(g.be, FALSE, g.kept[k]);
  tp_saved_free(g.ws);
  tp_rt_buf_free(g.be, FALSE, g.rc_out);
  for (int i = 0; i < 2; i++) {
    g_ptr_array_unref(g.pool[i]);
    g_ptr_array_foreach(g.kpool[i], kept_free, &g);
    g_ptr_array_unref(g.kpool[i]);
  }
  tp_wstore_free(g.store);
  if (!g.host) {
    float *dev[] = { g.in, g.din, g.out, g.dout };
    for (int i = 0; i < 4; i++)
      tp_rt_buf_free(g.be, FALSE, dev[i]);
  }
  for (int i = 0; i < 2; i++) {
    float *h = i ? g.h_din : g.h_out;
    if (h)
      tp_outbox_give(g.box[i], h);
    tp_outbox_release(g.box[i]);
  }
  g_free(g.h_in), g_free(g.h_dout), g_free(g.labels), g_free(g.lab8);
  g_free(g.saved), g_free(g.fver), g_free(g.fwd_done), g_free(g.mbuf), g_free(g.whole_b);
  g_free(g.kept), g_free(g.kseed);
  return NULL;
}

gboolean tp_runtime_check_schedule(const TpSchedule *s, GError **err)
{
  for (int st = 0; st < s->W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOp *op = &tp_stage_ops(s, st)[k];
      if ((op->kind != TP_OP_I && op->kind != TP_OP_W) || (op->micro != TP_WHOLE && !s->recompute))
        continue;
      char name[64], where[256];
      tp_op_name(s, op, name, sizeof name);
      tp_op_where(s, op, where, sizeof where);
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%sstage %d: %s: the executor runs a split backward (I and W) %s",
                  where, st + 1, name, s->recompute ? "without recomputation (its W needs the forward's saved state)"
                                                    : "per micro-batch only");
      return FALSE;
    }
  return TRUE;
}

gboolean tp_runtime_run(TpRuntime *rt, const TpSchedule *s, const int *const *idx, int first_mb, gint64 origin,
                        TpProgress *progress, TpRunResult *out, GError **err)
{
  if (!tp_runtime_check_schedule(s, err))
    return FALSE;
  if (s->rank_seq && (rt->lo != 0 || rt->hi != rt->W)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "interleaved stages (%d model chunks per worker) run in one process: "
                "its stage threads take turns in each worker's order", s->V);
    return FALSE;
  }
  if (s->W != rt->W || rt->cfg.batch % s->N) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "the schedule has %d stages and %d micro-batches; the run %d stages "
                "and batch %d", s->W, s->N, rt->W, rt->cfg.batch);
    return FALSE;
  }
  memset(out, 0, sizeof *out);
  out->W = s->W, out->K = s->K;
  out->rec = g_try_new0(TpOpRecord *, s->W);
  gboolean held = out->rec != NULL;
  long n_ops = 0;
  for (int st = 0; st < s->W; st++)
    n_ops += tp_stage_len(s, st);
  for (int st = 0; held && st < s->W; st++)
    held = (out->rec[st] = g_try_new0(TpOpRecord, MAX(tp_stage_len(s, st), 1))) != NULL;
  out->loss_sum = g_try_new0(double, MAX(s->K, 1));
  out->correct = g_try_new0(int, MAX(s->K, 1));
  out->stats = g_try_new0(TpWStoreStats, s->W);
  if (!held || !out->loss_sum || !out->correct || !out->stats) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot allocate the run's records of %ld operations and %d "
                "mini-batches", n_ops, s->K);
    tp_run_result_clear(out);
    return FALSE;
  }

  Shared sh = { .rt = rt, .s = s, .idx = idx, .first_mb = first_mb, .origin = origin, .progress = progress,
                .out = out };
  g_mutex_init(&sh.lock);
  g_cond_init(&sh.cond);
  g_mutex_init(&sh.turn_lock);
  g_cond_init(&sh.turn_cond);
  if (s->rank_seq)
    sh.rpos = g_new0(int, tp_schedule_ranks(s));
  const int lo = rt->lo, hi = rt->hi, n_th = hi - lo;
  sh.tr = rt->tr ? rt->tr : tp_local_new(s->W, s->N, rt->cfg.timeout_s > 0 ? rt->cfg.timeout_s : 300);
  sh.links = tp_rt_links_new(rt, sh.tr);
  StageArg *args = g_new(StageArg, n_th);
  GThread **th = g_new(GThread *, n_th);
  int started = 0;
  for (int i = 0; i < n_th; i++, started++) {
    int st = lo + i;
    args[i] = (StageArg){ &sh, st };
    g_autofree char *name = g_strdup_printf("stage-%d", st + 1);
    GError *te = NULL;
    if (!(th[i] = g_thread_try_new(name, stage_main, &args[i], &te))) {
      /* the stages running end by the transport's abort; the run fails with this line */
      g_mutex_lock(&sh.lock);
      if (!sh.first_err) {
        sh.first_err = g_error_new(TP_ERROR, TP_ERROR_RUNTIME, "cannot start the thread of stage %d: %s", st + 1,
                                   te->message);
        sh.tr->abort(sh.tr, sh.first_err->message);
      }
      sh.finished += n_th - i; /* the stages never started count as finished */
      g_mutex_unlock(&sh.lock);
      turn_stop(&sh); /* their turns never come */
      g_error_free(te);
      break;
    }
  }
  if (progress && progress->tick) {
    gint64 step = (gint64)(1e6 * (progress->interval_s > 0 ? progress->interval_s : 0.25));
    g_mutex_lock(&sh.lock);
    while (sh.finished < n_th) {
      g_cond_wait_until(&sh.cond, &sh.lock, g_get_monotonic_time() + step);
      g_mutex_unlock(&sh.lock);
      progress->tick(progress, progress->data);
      g_mutex_lock(&sh.lock);
    }
    g_mutex_unlock(&sh.lock);
  }
  for (int i = 0; i < started; i++)
    g_thread_join(th[i]);
  g_free(th);
  g_free(args);
  if (sh.tr != rt->tr)
    tp_transport_free(sh.tr);
  tp_rt_links_free(sh.links);
  g_mutex_clear(&sh.lock);
  g_cond_clear(&sh.cond);
  g_mutex_clear(&sh.turn_lock);
  g_cond_clear(&sh.turn_cond);
  g_free(sh.rpos);
  if (sh.first_err) {
    g_propagate_error(err, sh.first_err);
    return FALSE;
  }
  tp_run_result_summarise(out, s, lo, hi);
  return TRUE;
}

void tp_run_result_summarise(TpRunResult *out, const TpSchedule *s, int lo, int hi)
{
  double t0 = G_MAXDOUBLE, t1 = 0;
  out->versions_match = TRUE;
  out->mismatched_reads = 0;
  for (int st = lo; st < hi; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOpRecord *r = &out->rec[st][k];
      t0 = MIN(t0, r->start), t1 = MAX(t1, r->end);
      if (!r->match)
        out->versions_match = FALSE, out->mismatched_reads++;
    }
  out->wall = t1 > t0 ? t1 - t0 : 0;
}

TpTimeline *tp_run_result_timeline(const TpRunResult *r, const TpSchedule *s, GError **err)
{
  TpTimeline *tl = tp_timeline_new(s, TRUE, err);
  if (!tl)
    return NULL;
  for (int st = 0; st < s->W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOpRecord *rec = &r->rec[st][k];
      long g = tl->ix->off[st] + k;
      tl->start[g] = rec->start, tl->end[g] = rec->end;
      tl->version[g] = rec->version, tl->latest[g] = rec->latest;
    }
  tp_timeline_normalise(tl);
  return tl;
}
