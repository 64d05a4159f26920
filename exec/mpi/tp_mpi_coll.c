/* tp_mpi_coll.c — the few collectives a run needs besides messages: gathering each rank's part
 * of the report and checking at start-up that every rank was given the same arguments.  Both wait
 * at most the transport's timeout and poll aborts, like a receive. */
#include "tp_mpi_priv.h"
#include "tp_error.h"

#include <string.h>

/* Wait for a collective; on failure err says what was being done (lock held). */
static gboolean wait_coll(TpMpi *m, MPI_Request *req, const char *doing, GError **err)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)(MAX(m->base.timeout_s, 1.0) * G_USEC_PER_SEC);
  int w = tp_mpi_wait(m, req, deadline, FALSE);
  char me[40];
  tp_mpi_who(m->rank, me, sizeof me);
  if (w == 1)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: the other ranks did not answer within %g s while %s", me,
                MAX(m->base.timeout_s, 1.0), doing);
  else if (w == 2)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: run aborted while %s: %s", me, doing,
                m->reason ? m->reason : "aborted");
  else if (w == 3)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: MPI failed while %s (a rank is lost)", me, doing);
  return w == 0;
}

gboolean tp_mpi_gather(TpTransport *t, int root, const void *mine, size_t len, void *all, GError **err)
{
  TpMpi *m = (TpMpi *)t;
  MPI_Request req;
  g_rec_mutex_lock(&m->lock);
  int rc = root < 0 ? MPI_Iallgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, m->ctl_comm, &req)
                    : MPI_Igather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, root, m->ctl_comm, &req);
  gboolean ok = rc == MPI_SUCCESS && wait_coll(m, &req, "gathering the ranks' results", err);
  g_rec_mutex_unlock(&m->lock);
  if (rc != MPI_SUCCESS)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d: MPI gather failed", m->rank);
  return ok;
}

gboolean tp_mpi_check_same(TpTransport *t, const char *text, GError **err)
{
  guint8 mine[32];
  gsize n = sizeof mine;
  GChecksum *c = g_checksum_new(G_CHECKSUM_SHA256);
  g_checksum_update(c, (const guchar *)text, -1);
  g_checksum_get_digest(c, mine, &n);
  g_checksum_free(c);
  guint8 *all = g_malloc((size_t)t->W * sizeof mine);
  gboolean ok = tp_mpi_gather(t, -1, mine, sizeof mine, all, err);
  for (int r = 1; ok && r < t->W; r++)
    if (memcmp(all + (size_t)r * sizeof mine, all, sizeof mine) != 0) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "rank %d (stage %d) was started with other arguments than rank 0", r,
                  r + 1);
      ok = FALSE;
    }
  g_free(all);
  return ok;
}
