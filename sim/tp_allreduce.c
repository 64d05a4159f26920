/* tp_allreduce.c — the data-parallel all-reduce: its ring cost and its part of the event loop
 * (tp_allreduce.h). */
#include "tp_allreduce.h"

#include <math.h>

TpDataParallel *tp_dp_new(int W)
{
  TpDataParallel *dp = g_new0(TpDataParallel, 1);
  dp->D = 1;
  dp->W = W;
  dp->link = g_new(int, W);
  dp->latency = g_new0(double, W);
  dp->bandwidth = g_new0(double, W);
  dp->bytes = g_new0(double, W);
  for (int s = 0; s < W; s++)
    dp->link[s] = s;
  dp->n_links = W;
  return dp;
}

void tp_dp_free(TpDataParallel *dp)
{
  if (!dp)
    return;
  g_free(dp->link);
  g_free(dp->latency);
  g_free(dp->bandwidth);
  g_free(dp->bytes);
  g_free(dp);
}

void tp_dp_update_links(TpDataParallel *dp)
{
  dp->n_links = 0;
  for (int s = 0; s < dp->W; s++)
    dp->n_links = MAX(dp->n_links, dp->link[s] + 1);
}

double tp_allreduce_ring(int D, double bytes, double bandwidth, double latency)
{
  if (D <= 1)
    return 0;
  return 2.0 * (D - 1) / D * (bandwidth > 0 ? bytes / bandwidth : 0) + 2.0 * (D - 1) * latency;
}

int tp_allreduce_buckets(const TpDataParallel *dp, int st)
{
  if (!dp->overlap || dp->bytes[st] <= TP_ALLREDUCE_BUCKET_BYTES)
    return 1;
  return (int)MIN(ceil(dp->bytes[st] / TP_ALLREDUCE_BUCKET_BYTES), 1 << 20);
}

/* A full bucket's bytes: 25 MiB (more where the count of buckets is capped: equal ones). */
static double bucket_size(const TpDataParallel *dp, int st)
{
  return MAX(TP_ALLREDUCE_BUCKET_BYTES, dp->bytes[st] / tp_allreduce_buckets(dp, st));
}

double tp_allreduce_bucket_time(const TpDataParallel *dp, int st, int i)
{
  int n = tp_allreduce_buckets(dp, st);
  double bytes = n == 1 ? dp->bytes[st] : i < n - 1 ? bucket_size(dp, st) : dp->bytes[st] - (n - 1) * bucket_size(dp, st);
  return tp_allreduce_ring(dp->D, bytes, dp->bandwidth[st], dp->latency[st]);
}

double tp_allreduce_bucket_ready(const TpDataParallel *dp, int st, int i, double t0, double dur)
{
  int n = tp_allreduce_buckets(dp, st);
  return i + 1 >= n ? t0 + dur : t0 + dur * (i + 1) * bucket_size(dp, st) / dp->bytes[st];
}

double tp_allreduce_time(const TpDataParallel *dp, int st)
{
  int n = tp_allreduce_buckets(dp, st);
  return (n - 1) * tp_allreduce_bucket_time(dp, st, 0) + tp_allreduce_bucket_time(dp, st, n - 1);
}

TpAllreduceStats *tp_allreduce_stats_new(int W)
{
  TpAllreduceStats *st = g_new0(TpAllreduceStats, 1);
  st->busy = g_new0(double, W);
  st->exposed = g_new0(double, W);
  st->count = g_new0(long, W);
  return st;
}

void tp_allreduce_stats_free(TpAllreduceStats *st)
{
  if (!st)
    return;
  g_free(st->busy);
  g_free(st->exposed);
  g_free(st->count);
  g_free(st);
}

/* ---- the event loop's part ------------------------------------------------------------------ */

struct TpArRun {
  const TpDataParallel *dp;
  TpEngine *e;
  TpAllreduceStats *stats;
  TpLinkQueue *q;   /* [n_links] buckets waiting for or in transfer (the message: their stage) */
  double *xfer_t0;  /* [n_links] when the transfer in progress started */
  int *left;        /* [W] buckets of the stage's pending all-reduce not reduced yet; -1: none pending */
  int *sent;        /* [W] of its buckets, those sent (in order: the full ones, then the rest) */
  double *reached;  /* [W] when the stage reached its update; -1: not yet */
};

static void ar_deliver(void *ctx, int l, long st)
{
  TpArRun *ar = ctx;
  ar->stats->busy[st] += ar->e->now - ar->xfer_t0[l];
  if (--ar->left[st] == 0) {
    ar->stats->count[st]++;
    if (ar->reached[st] >= 0)
      ar->stats->exposed[st] += ar->e->now - ar->reached[st];
    tp_engine_mark(ar->e, (int)st);
  }
}

static void ar_started(void *ctx, int l, long st)
{
  (void)st;
  TpArRun *ar = ctx;
  ar->xfer_t0[l] = ar->e->now;
}

static const TpLinkHandlers ar_handlers = { ar_deliver, ar_started, TP_EV_AR_XFER };

TpArRun *tp_ar_run_new(const TpDataParallel *dp, TpEngine *e, TpAllreduceStats *stats)
{
  TpArRun *ar = g_new0(TpArRun, 1);
  *ar = (TpArRun){ .dp = dp, .e = e, .stats = stats };
  ar->q = g_new0(TpLinkQueue, MAX(dp->n_links, 1));
  ar->xfer_t0 = g_new0(double, MAX(dp->n_links, 1));
  ar->left = g_new(int, dp->W);
  ar->sent = g_new0(int, dp->W);
  ar->reached = g_new(double, dp->W);
  for (int s = 0; s < dp->W; s++)
    ar->left[s] = -1, ar->reached[s] = -1;
  return ar;
}

void tp_ar_run_free(TpArRun *ar)
{
  if (!ar)
    return;
  tp_link_queues_free(ar->q, MAX(ar->dp->n_links, 1));
  g_free(ar->xfer_t0);
  g_free(ar->left);
  g_free(ar->sent);
  g_free(ar->reached);
  g_free(ar);
}

static void send_bucket(TpArRun *ar, int st)
{
  int l = ar->dp->link[st];
  tp_link_send(ar->e, &ar->q[l], l, st, tp_allreduce_bucket_time(ar->dp, st, ar->sent[st]++), &ar_handlers, ar);
}

gboolean tp_ar_ready(TpArRun *ar, int st)
{
  if (ar->reached[st] < 0)
    ar->reached[st] = ar->e->now;
  if (ar->left[st] < 0) { /* not started behind a backward: all of it now */
    int n = tp_allreduce_buckets(ar->dp, st);
    ar->left[st] = n, ar->sent[st] = 0;
    for (int i = 0; i < n; i++)
      send_bucket(ar, st);
  }
  return ar->left[st] == 0;
}

void tp_ar_started(TpArRun *ar, const TpSchedule *s, int st, int pos, double dur)
{
  const TpOp *ops = tp_stage_ops(s, st);
  if (ops[pos].kind == TP_OP_U)
    tp_ar_update_started(ar, st);
  else if (pos + 1 < tp_stage_len(s, st) && ops[pos + 1].kind == TP_OP_U)
    tp_ar_last_before_update(ar, st, dur);
}

void tp_ar_update_started(TpArRun *ar, int st) { ar->left[st] = -1, ar->reached[st] = -1; }

void tp_ar_last_before_update(TpArRun *ar, int st, double dur)
{
  if (!ar->dp->overlap || ar->left[st] >= 0)
    return;
  /* its gradients become ready evenly through its run: a bucket once its bytes are */
  int n = tp_allreduce_buckets(ar->dp, st);
  ar->left[st] = n, ar->sent[st] = 0;
  for (int i = 0; i < n; i++)
    tp_engine_push(ar->e, tp_allreduce_bucket_ready(ar->dp, st, i, ar->e->now, dur), TP_EV_AR_BUCKET, (uint32_t)st);
}

void tp_ar_commit(TpArRun *ar, const TpEvent *ev)
{
  int target = (int)TP_EV_TARGET(ev);
  if (TP_EV_CLASS(ev) == TP_EV_AR_XFER)
    tp_link_done(ar->e, &ar->q[target], target, &ar_handlers, ar);
  else
    send_bucket(ar, target);
}

/* ---- without the event loop ------------------------------------------------------------------- */

gboolean tp_dp_links_apart(const TpDataParallel *dp)
{
  gboolean *used = g_new0(gboolean, MAX(dp->n_links, 1)), apart = TRUE;
  for (int s = 0; s < dp->W && apart; s++) {
    int l = dp->link[s];
    apart = l >= 0 && l < dp->n_links && !used[l];
    if (apart)
      used[l] = TRUE;
  }
  g_free(used);
  return apart;
}

/* Stage st's buckets through its idle link one after another, each from when it is ready: from t0,
 * or spread evenly through [t0, t0 + dur] as the event loop releases them.  Its last delivery. */
static double replay_buckets(const TpDataParallel *dp, TpAllreduceStats *stats, int st, double t0, double dur,
                             gboolean spread)
{
  int n = tp_allreduce_buckets(dp, st);
  double link_free = t0;
  for (int i = 0; i < n; i++) {
    double start = MAX(spread ? tp_allreduce_bucket_ready(dp, st, i, t0, dur) : t0, link_free), bt = tp_allreduce_bucket_time(dp, st, i);
    link_free = bt > 0 ? start + bt : start;
    stats->busy[st] += link_free - start;
  }
  stats->count[st]++;
  return link_free;
}

void tp_ar_replay_before_update(const TpDataParallel *dp, TpAllreduceStats *stats, int st, double t0, double dur,
                                double *pending)
{
  if (dp->overlap && *pending < 0)
    *pending = replay_buckets(dp, stats, st, t0, dur, TRUE);
}

double tp_ar_replay_update(const TpDataParallel *dp, TpAllreduceStats *stats, int st, double reached,
                           double *pending)
{
  double done = *pending >= 0 ? *pending : replay_buckets(dp, stats, st, reached, 0, FALSE);
  *pending = -1;
  if (done > reached)
    stats->exposed[st] += done - reached;
  return MAX(done, reached);
}
