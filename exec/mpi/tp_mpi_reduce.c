/* tp_mpi_reduce.c — the collectives of an update over MPI (exec/tp_reduce.h).  Data parallelism's:
 * a communicator per stage holding that stage's replicas; each update's gradient reduced (sum) onto
 * the stage's first replica and broadcast back, then scaled by 1/D on every rank alike, so that every
 * replica gets the same bits.  A tied head's: a communicator of the first stage and the head's per
 * replica, the two parts summed by an all-reduce (a sum of two is the same bits either way).  Non-blocking calls waited for under the transport's lock with its timeout, polling its
 * aborts, like a receive; a failure ends the job through the group (tp_mpi_fail), as a stage's does. */
#include "tp_mpi_priv.h"
#include "tp_error.h"
#include "tp_reduce.h"

#include <limits.h>

typedef struct {
  TpReduce base;
  TpMpi *m;          /* the world's transport: its lock, timeout and aborts */
  MPI_Comm stage;    /* this rank's stage's replicas, replica order */
  MPI_Comm tie;      /* this rank's replica's first and tied stages (MPI_COMM_NULL: not one of them) */
  double timeout_s;
  float *host;       /* the gradient, staged */
  size_t cap;
} MpiReduce;

/* Wait for req (lock held): FALSE with err naming the replica, the stage and what went wrong. */
static gboolean wait_for(MpiReduce *r, MPI_Request *req, int stage, int replica, long mb, const char *what, GError **err)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)(r->timeout_s * G_USEC_PER_SEC);
  int w = tp_mpi_wait(r->m, req, deadline, FALSE);
  if (w == 0)
    return TRUE;
  g_autofree char *who = r->base.D > 1 ? g_strdup_printf(", replica %d", replica + 1) : g_strdup("");
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d%s (rank %d): %s of the gradient of mini-batch %ld %s",
              stage + 1, who, tp_mpi_rank(), what, mb,
              w == 1 ? "timed out (a peer is dead or stuck)" : w == 2 ? "aborted" : "failed in MPI");
  return FALSE;
}

/* Stage stage's gradient (n floats in be's memory) into the host buffer, for one MPI call. */
static gboolean stage_in(MpiReduce *r, int stage, const TpBackend *be, const float *grad, size_t n, GError **err)
{
  if (n > (size_t)INT_MAX) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: %zu floats of gradient are more than one MPI call "
                "reduces", stage + 1, n);
    return FALSE;
  }
  if (r->cap < n)
    r->host = g_realloc_n(r->host, n, sizeof(float)), r->cap = n;
  return be->iface->download(be, r->host, grad, n, err);
}

static gboolean mpi_mean(TpReduce *base, int stage, int replica, long mb, const TpBackend *be, float *grad, size_t n,
                         GError **err)
{
  MpiReduce *r = (MpiReduce *)base;
  if (!stage_in(r, stage, be, grad, n, err))
    return FALSE;
  MPI_Request req;
  g_rec_mutex_lock(&r->m->lock);
  int rc = MPI_Ireduce(replica == 0 ? MPI_IN_PLACE : r->host, r->host, (int)n, MPI_FLOAT, MPI_SUM, 0, r->stage, &req);
  gboolean ok = rc == MPI_SUCCESS && wait_for(r, &req, stage, replica, mb, "the sum", err);
  rc = ok ? MPI_Ibcast(r->host, (int)n, MPI_FLOAT, 0, r->stage, &req) : rc;
  ok = ok && rc == MPI_SUCCESS && wait_for(r, &req, stage, replica, mb, "the broadcast", err);
  g_rec_mutex_unlock(&r->m->lock);
  if (!ok && !(err && *err))
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d, replica %d: MPI cannot reduce the gradient", stage + 1,
                replica + 1);
  if (!ok)
    return FALSE;
  float d = (float)base->D;
  for (size_t i = 0; i < n; i++)
    r->host[i] /= d;
  return be->iface->upload(be, grad, r->host, n, err);
}

static gboolean mpi_tie(TpReduce *base, int stage, int replica, long mb, const TpBackend *be, float *grad, size_t n,
                        GError **err)
{
  MpiReduce *r = (MpiReduce *)base;
  if (r->tie == MPI_COMM_NULL) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: no communicator ties it to another stage", stage + 1);
    return FALSE;
  }
  if (!stage_in(r, stage, be, grad, n, err))
    return FALSE;
  MPI_Request req;
  g_rec_mutex_lock(&r->m->lock);
  int rc = MPI_Iallreduce(MPI_IN_PLACE, r->host, (int)n, MPI_FLOAT, MPI_SUM, r->tie, &req);
  gboolean ok = rc == MPI_SUCCESS && wait_for(r, &req, stage, replica, mb, "the tied head's sum", err);
  g_rec_mutex_unlock(&r->m->lock);
  if (!ok && !(err && *err))
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: MPI cannot sum the tied head's gradient", stage + 1);
  return ok && be->iface->upload(be, grad, r->host, n, err);
}

static void mpi_abort(TpReduce *base, const char *why)
{
  MpiReduce *r = (MpiReduce *)base;
  tp_mpi_transport(r->m)->abort(tp_mpi_transport(r->m), why);
}

static void mpi_free(TpReduce *base)
{
  MpiReduce *r = (MpiReduce *)base;
  MPI_Comm_free(&r->stage);
  if (r->tie != MPI_COMM_NULL)
    MPI_Comm_free(&r->tie);
  g_free(r->host);
  g_free(r);
}

static const TpReduceIface mpi_iface = { .mean = mpi_mean, .tie = mpi_tie, .abort = mpi_abort, .free = mpi_free };

TpReduce *tp_mpi_reduce_new(TpMpi *m, int replicas, int tie_stage, double timeout_s, GError **err)
{
  int size = tp_mpi_size(), rank = tp_mpi_rank(), W = size / MAX(replicas, 1);
  MpiReduce *r = g_new0(MpiReduce, 1);
  *r = (MpiReduce){ .base = { .iface = &mpi_iface, .D = replicas }, .m = m, .timeout_s = MAX(timeout_s, 1.0),
                    .tie = MPI_COMM_NULL };
  if (replicas < 1 || size % replicas || MPI_Comm_split(MPI_COMM_WORLD, rank % W, rank / W, &r->stage) != MPI_SUCCESS ||
      MPI_Comm_set_errhandler(r->stage, MPI_ERRORS_RETURN) != MPI_SUCCESS) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d: cannot make the communicator of its stage's %d replicas",
                rank, replicas);
    g_free(r);
    return NULL;
  }
  int st = rank % W, tied = tie_stage > 0 && tie_stage < W && (st == 0 || st == tie_stage);
  if (tie_stage > 0 && (MPI_Comm_split(MPI_COMM_WORLD, tied ? rank / W : MPI_UNDEFINED, st, &r->tie) != MPI_SUCCESS ||
                        (tied && MPI_Comm_set_errhandler(r->tie, MPI_ERRORS_RETURN) != MPI_SUCCESS))) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d: cannot make the communicator of its tied stages", rank);
    mpi_free(&r->base);
    return NULL;
  }
  return &r->base;
}
