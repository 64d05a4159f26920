/* tp_reduce_local.c — the mean of a stage's gradient over replicas that are threads of one process
 * (tp_reduce.h).  The replicas meet, each sums a slice of the gradient over every replica in replica
 * order (so the result does not depend on who came when) and scales it by 1/D, and they meet again
 * before going on: every replica ends with the same bits, the work shared.  On a host backend the
 * slices are read from and written to the replicas' own gradients; otherwise through host copies.
 * One rendezvous per stage, reused update after update. */
#include "config.h"
#include "tp_reduce.h"
#include "tp_error.h"

typedef struct {
  GMutex lock;
  GCond cond;
  int arrived;
  guint64 round;     /* meetings completed so far */
  size_t n;
  float **src;       /* [D] each replica's gradient: its own (host backend) or its host copy */
  float **copy;      /* [D] the host copies (device backends; allocated on first use) */
  float **dst;       /* [D] where each replica's mean goes (its gradient, or its copy) */
} Rendezvous;

typedef struct {
  TpReduce base;
  int W;
  double timeout_s;
  Rendezvous *st;    /* [W] */
  char *aborted;     /* why (NULL: not aborted); under every rendezvous' lock */
  GMutex abort_lock;
} Local;

/* Wait (lock held) until every replica has come to this meeting; FALSE with err once the reduction
 * is aborted or the others do not come within the timeout. */
static gboolean meet(Local *l, Rendezvous *z, int stage, int replica, long mb, GError **err)
{
  guint64 mine = z->round;
  if (!l->aborted && ++z->arrived == l->base.D) {
    z->arrived = 0, z->round++;
    g_cond_broadcast(&z->cond);
  }
  gint64 until = g_get_monotonic_time() + (gint64)(l->timeout_s * 1e6);
  while (z->round == mine && !l->aborted)
    if (!g_cond_wait_until(&z->cond, &z->lock, until))
      break;
  if (z->round != mine)
    return TRUE;
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d, replica %d: %s at the update of mini-batch %ld",
              stage + 1, replica + 1, l->aborted ? l->aborted : "the other replicas did not come", mb);
  return FALSE;
}

/* Replica `replica`'s slice of the mean: the sum over the replicas in their order, over D. */
static void reduce_slice(const Rendezvous *z, int D, int replica)
{
  size_t lo = z->n * (size_t)replica / (size_t)D, hi = z->n * (size_t)(replica + 1) / (size_t)D;
  for (size_t i = lo; i < hi; i++) {
    float s = z->src[0][i];
    for (int r = 1; r < D; r++)
      s += z->src[r][i];
    s /= (float)D;
    for (int r = 0; r < D; r++)
      z->dst[r][i] = s;
  }
}

/* The rendezvous' arrays for gradients of n floats (the first call); FALSE where the replicas
 * disagree on n. */
static gboolean ensure(Rendezvous *z, int D, size_t n, GError **err)
{
  if (z->src && z->n == n)
    return TRUE;
  if (z->src) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "replicas disagree on a stage's gradient size (%zu, %zu floats)",
                z->n, n);
    return FALSE;
  }
  z->n = n;
  z->src = g_new0(float *, D), z->copy = g_new0(float *, D), z->dst = g_new0(float *, D);
  return TRUE;
}

static gboolean local_mean(TpReduce *base, int stage, int replica, long mb, const TpBackend *be, float *grad, size_t n,
                           GError **err)
{
  Local *l = (Local *)base;
  Rendezvous *z = &l->st[stage];
  gboolean host = tp_backend_host_memory(be);
  g_mutex_lock(&z->lock);
  gboolean ok = !l->aborted || (g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d, replica %d: %s at the update "
                                            "of mini-batch %ld", stage + 1, replica + 1, l->aborted, mb), FALSE);
  ok = ok && ensure(z, base->D, n, err);
  if (ok && !host && !z->copy[replica] && !(z->copy[replica] = g_try_new(float, MAX(n, 1)))) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot allocate the gradient reduction's copy of %zu floats", n);
    ok = FALSE;
  }
  if (ok) {
    z->src[replica] = z->dst[replica] = host ? grad : z->copy[replica];
    g_mutex_unlock(&z->lock);
    ok = host || be->iface->download(be, z->copy[replica], grad, n, err);
    g_mutex_lock(&z->lock);
  }
  ok = ok && meet(l, z, stage, replica, mb, err);
  if (ok) { /* every replica's gradient is in place: each sums its slice, unlocked */
    g_mutex_unlock(&z->lock);
    reduce_slice(z, base->D, replica);
    g_mutex_lock(&z->lock);
  }
  ok = ok && meet(l, z, stage, replica, mb, err); /* every slice done */
  g_mutex_unlock(&z->lock);
  ok = ok && (host || be->iface->upload(be, grad, z->copy[replica], n, err));
  if (!ok && err && *err && !l->aborted)
    base->iface->abort(base, (*err)->message);
  return ok;
}

static void local_abort(TpReduce *base, const char *why)
{
  Local *l = (Local *)base;
  g_mutex_lock(&l->abort_lock);
  for (int s = 0; s < l->W; s++)
    g_mutex_lock(&l->st[s].lock);
  if (!l->aborted)
    l->aborted = g_strdup_printf("another replica failed (%s)", why);
  for (int s = 0; s < l->W; s++) {
    g_cond_broadcast(&l->st[s].cond);
    g_mutex_unlock(&l->st[s].lock);
  }
  g_mutex_unlock(&l->abort_lock);
}

static void local_free(TpReduce *base)
{
  Local *l = (Local *)base;
  for (int s = 0; s < l->W; s++) {
    Rendezvous *z = &l->st[s];
    for (int r = 0; z->copy && r < base->D; r++)
      g_free(z->copy[r]);
    g_free(z->src), g_free(z->copy), g_free(z->dst);
    g_mutex_clear(&z->lock);
    g_cond_clear(&z->cond);
  }
  g_mutex_clear(&l->abort_lock);
  g_free(l->st), g_free(l->aborted), g_free(l);
}

static const TpReduceIface local_iface = { .mean = local_mean, .abort = local_abort, .free = local_free };

TpReduce *tp_reduce_local_new(int D, int W, double timeout_s)
{
  Local *l = g_new0(Local, 1);
  l->base = (TpReduce){ .iface = &local_iface, .D = D };
  l->W = W, l->timeout_s = timeout_s > 0 ? timeout_s : 300;
  l->st = g_new0(Rendezvous, W);
  for (int s = 0; s < W; s++)
    g_mutex_init(&l->st[s].lock), g_cond_init(&l->st[s].cond);
  g_mutex_init(&l->abort_lock);
  return &l->base;
}
