/* tp_reduce_local.c — the mean of a stage's gradient over replicas that are threads of one process
 * (tp_reduce.h): each replica leaves a host copy of its gradient, the last to arrive sums them in
 * replica order (so the result does not depend on who came when) and scales by 1/D, and every
 * replica takes the same mean back.  One rendezvous per stage, reused update after update. */
#include "config.h"
#include "tp_reduce.h"
#include "tp_error.h"

typedef struct {
  GMutex lock;
  GCond cond;
  int arrived;
  guint64 round;     /* rendezvous completed so far */
  size_t n;
  float **part;      /* [D] each replica's gradient (host) */
  float *mean;
} Rendezvous;

typedef struct {
  TpReduce base;
  int W;
  double timeout_s;
  Rendezvous *st;    /* [W] */
  char *aborted;     /* why (NULL: not aborted); under every rendezvous' lock */
  GMutex abort_lock;
} Local;

/* Sum in replica order, then the mean (the last replica to arrive, under the lock). */
static void reduce_parts(Rendezvous *z, int D)
{
  for (size_t i = 0; i < z->n; i++) {
    float s = z->part[0][i];
    for (int r = 1; r < D; r++)
      s += z->part[r][i];
    z->mean[i] = s / (float)D;
  }
}

/* Each replica's host copy, sized on the first call (every replica's stage has n floats). */
static gboolean ensure_parts(Rendezvous *z, int D, size_t n, GError **err)
{
  if (z->part && z->n == n)
    return TRUE;
  if (z->part) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "replicas disagree on a stage's gradient size (%zu, %zu floats)",
                z->n, n);
    return FALSE;
  }
  z->n = n;
  z->part = g_new0(float *, D);
  for (int r = 0; r < D; r++)
    z->part[r] = g_try_new(float, MAX(n, 1));
  z->mean = g_try_new(float, MAX(n, 1));
  for (int r = 0; r < D; r++)
    if (!z->part[r] || !z->mean) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot allocate the gradient reduction's %d copies of %zu floats",
                  D + 1, n);
      return FALSE;
    }
  return TRUE;
}

static gboolean local_mean(TpReduce *base, int stage, int replica, long mb, const TpBackend *be, float *grad, size_t n,
                           GError **err)
{
  Local *l = (Local *)base;
  Rendezvous *z = &l->st[stage];
  int D = base->D;
  g_mutex_lock(&z->lock);
  gboolean late = l->aborted != NULL; /* aborted before this replica came: it fails, naming why */
  gboolean ok = !late && ensure_parts(z, D, n, err) && be->iface->download(be, z->part[replica], grad, n, err);
  guint64 mine = z->round;
  if (ok && ++z->arrived == D) {
    reduce_parts(z, D);
    z->arrived = 0, z->round++;
    g_cond_broadcast(&z->cond);
  }
  gint64 until = g_get_monotonic_time() + (gint64)(l->timeout_s * 1e6);
  while (ok && z->round == mine && !l->aborted)
    if (!g_cond_wait_until(&z->cond, &z->lock, until))
      break;
  if (late || (ok && z->round == mine))
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d, replica %d: %s at the update of mini-batch %ld",
                stage + 1, replica + 1, l->aborted ? l->aborted : "the other replicas did not come", mb);
  ok = ok && z->round != mine && be->iface->upload(be, grad, z->mean, n, err);
  g_mutex_unlock(&z->lock);
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
    for (int r = 0; z->part && r < base->D; r++)
      g_free(z->part[r]);
    g_free(z->part), g_free(z->mean);
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
