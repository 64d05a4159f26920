/* tp_mpi_coll.c — the few collectives a run needs besides messages: gathering each rank's part
 * of the report and checking at start-up that every rank was given the same arguments.  Both wait
 * at most the transport's timeout and poll aborts, like a receive. */
#include "tp_mpi_priv.h"
#include "tp_digest.h"
#include "tp_error.h"

#include <string.h>

/* The collectives are point-to-point messages on the control communicator, so that a rank that
 * never answers is named. */
enum { TAG_GATHER = 3, TAG_BCAST = 4 };

/* Wait for n requests to or from peer[i] (recv[i]: a receive) until the timeout (at least 1 s);
 * on failure err names the first peer that did not answer and what was being done, and the
 * requests left are cancelled or let go (lock held). */
static gboolean wait_peers(TpMpi *m, MPI_Request *req, const int *peer, const gboolean *recv, int n, const char *doing,
                           GError **err)
{
  double limit = MAX(m->base.timeout_s, 1.0);
  gint64 deadline = g_get_monotonic_time() + (gint64)(limit * G_USEC_PER_SEC);
  int w = 0, i = 0;
  for (; i < n && w == 0; i++)
    w = tp_mpi_wait(m, &req[i], deadline, recv[i]);
  if (w == 0)
    return TRUE;
  char me[40], who[40];
  tp_mpi_who(m->first + m->rank, me, sizeof me);
  tp_mpi_who(m->first + peer[i - 1], who, sizeof who);
  if (w == 1)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: no answer from %s within %g s while %s (the peer is dead or "
                "stuck)", me, who, limit, doing);
  else if (w == 2)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: run aborted while %s: %s", me, doing,
                m->reason ? m->reason : "aborted");
  else
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: MPI failed while %s with %s (the peer is lost)", me, doing, who);
  for (; i < n; i++) { /* the job is about to end: nothing may write into the caller's buffers */
    if (req[i] == MPI_REQUEST_NULL)
      continue;
    /* what MPI cannot cancel or free here, the job's end (MPI_Abort, the caller's next step) takes */
    if (recv[i])
      (void)(TP_GPU_MPI_TRY(MPI_Cancel(&req[i])) && TP_GPU_MPI_TRY(MPI_Wait(&req[i], MPI_STATUS_IGNORE)));
    else
      (void)TP_GPU_MPI_TRY(MPI_Request_free(&req[i]));
  }
  return FALSE;
}

/* Post a send or receive of len bytes with peer on the control communicator. */
static gboolean post(TpMpi *m, gboolean recv, void *buf, size_t len, int peer, int tag, MPI_Request *req)
{
  int rc = recv ? MPI_Irecv(buf, (int)len, MPI_BYTE, peer, tag, m->ctl_comm, req)
                : MPI_Isend(buf, (int)len, MPI_BYTE, peer, tag, m->ctl_comm, req);
  if (rc != MPI_SUCCESS)
    *req = MPI_REQUEST_NULL;
  return rc == MPI_SUCCESS;
}

gboolean tp_mpi_gather(TpMpi *m, int root, const void *mine, size_t len, void *all, GError **err)
{
  TpTransport *t = &m->base;
  const int W = t->W, me = m->rank;
  MPI_Request *req = g_new(MPI_Request, 2 * (size_t)W);
  int *peer = g_new(int, 2 * (size_t)W), n = 0;
  gboolean *recv = g_new(gboolean, 2 * (size_t)W), posted = TRUE;
  if (all)
    memcpy((char *)all + (size_t)me * len, mine, len);
  g_rec_mutex_lock(&m->lock);
  /* receives first (from every rank: root < 0, or at the root), then the sends */
  for (int r = 0; r < W && posted; r++)
    if (r != me && (root < 0 || me == root)) {
      peer[n] = r, recv[n] = TRUE;
      posted = post(m, TRUE, (char *)all + (size_t)r * len, len, r, TAG_GATHER, &req[n++]);
    }
  for (int r = 0; r < W && posted; r++)
    if (r != me && (root < 0 || r == root)) {
      peer[n] = r, recv[n] = FALSE;
      posted = post(m, FALSE, (void *)mine, len, r, TAG_GATHER, &req[n++]);
    }
  gboolean ok = wait_peers(m, req, peer, recv, n, "gathering the ranks' results", err);
  g_rec_mutex_unlock(&m->lock);
  if (ok && !posted) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d: MPI gather failed", me);
    ok = FALSE;
  }
  g_free(req);
  g_free(peer);
  g_free(recv);
  return ok;
}

gboolean tp_mpi_bcast(TpMpi *m, int root, void *buf, size_t len, const char *doing, GError **err)
{
  TpTransport *t = &m->base;
  const int W = t->W, me = m->rank;
  MPI_Request *req = g_new(MPI_Request, (size_t)W);
  int *peer = g_new(int, (size_t)W), n = 0;
  gboolean *recv = g_new(gboolean, (size_t)W), posted = TRUE;
  g_rec_mutex_lock(&m->lock);
  for (int r = 0; r < W && posted; r++)
    if (r != me && (me == root || r == root)) {
      peer[n] = r, recv[n] = me != root;
      posted = post(m, me != root, buf, len, r, TAG_BCAST, &req[n++]);
    }
  gboolean ok = wait_peers(m, req, peer, recv, n, doing, err);
  g_rec_mutex_unlock(&m->lock);
  if (ok && !posted) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d: MPI broadcast failed", me);
    ok = FALSE;
  }
  g_free(req);
  g_free(peer);
  g_free(recv);
  return ok;
}

gboolean tp_mpi_check_same(TpMpi *m, const char *text, GError **err)
{
  TpTransport *t = &m->base;
  uint8_t mine[TP_SHA256_BYTES];
  TpSha256 *c = tp_sha256_new();
  tp_sha256_update(c, text, strlen(text));
  if (!tp_sha256_finish(c, mine)) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "libcrypto failed the digest of this rank's arguments");
    return FALSE;
  }
  guint8 *all = g_malloc((size_t)t->W * sizeof mine);
  gboolean ok = tp_mpi_gather(m, -1, mine, sizeof mine, all, err);
  for (int r = 1; ok && r < t->W; r++)
    if (memcmp(all + (size_t)r * sizeof mine, all, sizeof mine) != 0) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "rank %d (stage %d) was started with other arguments than rank 0", r,
                  r + 1);
      ok = FALSE;
    }
  g_free(all);
  return ok;
}
