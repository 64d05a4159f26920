/* tp_reduce_local.c — the collectives of an update (tp_reduce.h) where the stages and replicas are
 * threads of one process.  The parties meet — a stage's D replicas for the mean, the two sides of a
 * tied head for the tie —, each sums a slice of the gradient over every party in party order (so the
 * result does not depend on who came when; the mean scales it by 1/D), and they meet again before
 * going on: every party ends with the same bits, the work shared.  On a host backend the slices are
 * read from and written to the parties' own gradients; otherwise through host copies.  One
 * rendezvous per stage and one per replica's tie, reused update after update. */
#include "config.h"
#include "tp_reduce.h"
#include "tp_error.h"

typedef struct {
  GMutex lock;
  GCond cond;
  int arrived;
  guint64 round;     /* meetings completed so far */
  size_t n;
  float **src;       /* [parties] each party's gradient: its own (host backend) or its host copy */
  float **copy;      /* [parties] the host copies (device backends; allocated on first use) */
  float **dst;       /* [parties] where each party's result goes (its gradient, or its copy) */
} Rendezvous;

/* One meeting's parties and what errors call it. */
typedef struct {
  int parties, part; /* the parties, and which one the caller is */
  gboolean mean;     /* the sum over the parties, divided by them (else the sum) */
  int stage, replica;
  long mb;
  const char *others; /* who did not come, in an error */
} Meeting;

typedef struct {
  TpReduce base;
  int W;
  double timeout_s;
  Rendezvous *st;    /* [W]: each stage's replicas */
  Rendezvous *tie;   /* [D]: each replica's tied stages */
  char *aborted;     /* why (NULL: not aborted); under every rendezvous' lock */
  GMutex abort_lock;
} Local;

/* The error of meeting m: why, naming the stage (and the replica, where there are several). */
static void meeting_error(const Local *l, const Meeting *m, const char *why, GError **err)
{
  g_autofree char *who = l->base.D > 1 ? g_strdup_printf(", replica %d", m->replica + 1) : g_strdup("");
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d%s: %s at the update of mini-batch %ld", m->stage + 1, who, why,
              m->mb);
}

/* Wait (lock held) until every party has come to this meeting; FALSE with err once the reduction is
 * aborted or the others do not come within the timeout. */
static gboolean meet(Local *l, Rendezvous *z, const Meeting *m, GError **err)
{
  guint64 mine = z->round;
  if (!l->aborted && ++z->arrived == m->parties) {
    z->arrived = 0, z->round++;
    g_cond_broadcast(&z->cond);
  }
  gint64 until = g_get_monotonic_time() + (gint64)(l->timeout_s * 1e6);
  while (z->round == mine && !l->aborted)
    if (!g_cond_wait_until(&z->cond, &z->lock, until))
      break;
  if (z->round != mine)
    return TRUE;
  meeting_error(l, m, l->aborted ? l->aborted : m->others, err);
  return FALSE;
}

/* The caller's slice: the sum over the parties in their order (over their number for a mean). */
static void reduce_slice(const Rendezvous *z, const Meeting *m)
{
  int P = m->parties;
  size_t lo = z->n * (size_t)m->part / (size_t)P, hi = z->n * (size_t)(m->part + 1) / (size_t)P;
  for (size_t i = lo; i < hi; i++) {
    float s = z->src[0][i];
    for (int r = 1; r < P; r++)
      s += z->src[r][i];
    if (m->mean)
      s /= (float)P;
    for (int r = 0; r < P; r++)
      z->dst[r][i] = s;
  }
}

/* The rendezvous' arrays for gradients of n floats (the first call); FALSE where the parties
 * disagree on n. */
static gboolean ensure(Rendezvous *z, int parties, size_t n, GError **err)
{
  if (z->src && z->n == n)
    return TRUE;
  if (z->src) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "the parties of a gradient reduction disagree on its size (%zu, %zu "
                "floats)", z->n, n);
    return FALSE;
  }
  z->n = n;
  z->src = g_new0(float *, parties), z->copy = g_new0(float *, parties), z->dst = g_new0(float *, parties);
  return TRUE;
}

/* Meeting m at rendezvous z with grad (n floats in be's memory), which ends as the meeting's result. */
static gboolean reduce(Local *l, Rendezvous *z, const Meeting *m, const TpBackend *be, float *grad, size_t n,
                       GError **err)
{
  gboolean host = tp_backend_host_memory(be);
  int p = m->part;
  g_mutex_lock(&z->lock);
  gboolean ok = !l->aborted || (meeting_error(l, m, l->aborted, err), FALSE);
  ok = ok && ensure(z, m->parties, n, err);
  if (ok && !host && !z->copy[p] && !(z->copy[p] = g_try_new(float, MAX(n, 1)))) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot allocate the gradient reduction's copy of %zu floats", n);
    ok = FALSE;
  }
  if (ok) {
    z->src[p] = z->dst[p] = host ? grad : z->copy[p];
    g_mutex_unlock(&z->lock);
    ok = host || be->iface->download(be, z->copy[p], grad, n, err);
    g_mutex_lock(&z->lock);
  }
  ok = ok && meet(l, z, m, err);
  if (ok) { /* every party's gradient is in place: each sums its slice, unlocked */
    g_mutex_unlock(&z->lock);
    reduce_slice(z, m);
    g_mutex_lock(&z->lock);
  }
  ok = ok && meet(l, z, m, err); /* every slice done */
  g_mutex_unlock(&z->lock);
  ok = ok && (host || be->iface->upload(be, grad, z->copy[p], n, err));
  if (!ok && err && *err && !l->aborted)
    l->base.iface->abort(&l->base, (*err)->message);
  return ok;
}

static gboolean local_mean(TpReduce *base, int stage, int replica, long mb, const TpBackend *be, float *grad, size_t n,
                           GError **err)
{
  Meeting m = { .parties = base->D, .part = replica, .mean = TRUE, .stage = stage, .replica = replica, .mb = mb,
                .others = "the other replicas did not come" };
  return reduce((Local *)base, &((Local *)base)->st[stage], &m, be, grad, n, err);
}

static gboolean local_tie(TpReduce *base, int stage, int replica, long mb, const TpBackend *be, float *grad, size_t n,
                          GError **err)
{
  Local *l = (Local *)base;
  Meeting m = { .parties = 2, .part = stage > 0, .stage = stage, .replica = replica, .mb = mb,
                .others = stage ? "the embedding's stage did not come to sum the tied head's gradient"
                                : "the tied head's stage did not come to sum its gradient" };
  return reduce(l, &l->tie[replica], &m, be, grad, n, err);
}

/* Every rendezvous: the stages' (W), then the ties' (D). */
static Rendezvous *rendezvous(Local *l, int i)
{
  return i < l->W ? &l->st[i] : &l->tie[i - l->W];
}

static void local_abort(TpReduce *base, const char *why)
{
  Local *l = (Local *)base;
  int n = l->W + base->D;
  g_mutex_lock(&l->abort_lock);
  for (int i = 0; i < n; i++)
    g_mutex_lock(&rendezvous(l, i)->lock);
  if (!l->aborted)
    l->aborted = g_strdup_printf("another %s failed (%s)", base->D > 1 ? "replica" : "stage", why);
  for (int i = 0; i < n; i++) {
    g_cond_broadcast(&rendezvous(l, i)->cond);
    g_mutex_unlock(&rendezvous(l, i)->lock);
  }
  g_mutex_unlock(&l->abort_lock);
}

static void local_free(TpReduce *base)
{
  Local *l = (Local *)base;
  for (int i = 0; i < l->W + base->D; i++) {
    Rendezvous *z = rendezvous(l, i);
    for (int r = 0; z->copy && r < (i < l->W ? base->D : 2); r++)
      g_free(z->copy[r]);
    g_free(z->src), g_free(z->copy), g_free(z->dst);
    g_mutex_clear(&z->lock);
    g_cond_clear(&z->cond);
  }
  g_mutex_clear(&l->abort_lock);
  g_free(l->st), g_free(l->tie), g_free(l->aborted), g_free(l);
}

static const TpReduceIface local_iface = { .mean = local_mean, .tie = local_tie, .abort = local_abort,
                                           .free = local_free };

TpReduce *tp_reduce_local_new(int D, int W, double timeout_s)
{
  Local *l = g_new0(Local, 1);
  l->base = (TpReduce){ .iface = &local_iface, .D = D };
  l->W = W, l->timeout_s = timeout_s > 0 ? timeout_s : 300;
  l->st = g_new0(Rendezvous, W), l->tie = g_new0(Rendezvous, D);
  for (int i = 0; i < W + D; i++)
    g_mutex_init(&rendezvous(l, i)->lock), g_cond_init(&rendezvous(l, i)->cond);
  g_mutex_init(&l->abort_lock);
  return &l->base;
}
