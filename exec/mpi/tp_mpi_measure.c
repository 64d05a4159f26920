/* tp_mpi_measure.c — ping-pong between neighbouring ranks before a run: each link's latency (half
 * the best of 10·reps round trips of an 8-byte message) and bandwidth (a large message's size over
 * half its best round trip less the latency), in the units of the simulator's cost model, on every
 * rank. */
#include "tp_mpi_priv.h"
#include "tp_error.h"

#include <string.h>

enum { TAG_RAW = 2 };

/* One round trip of len bytes; left: the rank that starts it. */
static gboolean round_trip(TpMpi *m, gboolean raw, gboolean left, int peer, int seq, void *buf, size_t len,
                           GError **err)
{
  TpTransport *t = &m->base;
  TpTag go = { TP_OP_F, 0, seq }, back = { TP_OP_B, 0, seq };
  if (raw) {
    g_rec_mutex_lock(&m->lock);
    int rc = left ? MPI_Send(buf, (int)len, MPI_BYTE, peer, TAG_RAW, m->ctl_comm)
                  : MPI_Recv(buf, (int)len, MPI_BYTE, peer, TAG_RAW, m->ctl_comm, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS)
      rc = left ? MPI_Recv(buf, (int)len, MPI_BYTE, peer, TAG_RAW, m->ctl_comm, MPI_STATUS_IGNORE)
                : MPI_Send(buf, (int)len, MPI_BYTE, peer, TAG_RAW, m->ctl_comm);
    g_rec_mutex_unlock(&m->lock);
    if (rc != MPI_SUCCESS)
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d: MPI ping-pong with rank %d failed", m->rank, peer);
    return rc == MPI_SUCCESS;
  }
  if (left)
    return t->send(t, tp_link_ends(m->rank, peer), &go, buf, len, err) && t->recv(t, tp_link_ends(m->rank, peer), &back, buf, len, err);
  return t->recv(t, tp_link_ends(m->rank, peer), &go, buf, len, err) && t->send(t, tp_link_ends(m->rank, peer), &back, buf, len, err);
}

gboolean tp_mpi_measure_links(TpMpi *m, int reps, size_t large_bytes, gboolean raw, TpMpiLink *links,
                              GError **err)
{
  TpTransport *t = &m->base;
  const int W = t->W, me = m->rank;
  reps = MAX(reps, 1);
  if (!large_bytes)
    large_bytes = 4u << 20;
  unsigned char *buf = g_malloc0(large_bytes);
  const size_t sizes[2] = { 8, large_bytes };
  const int rounds[2] = { 10 * reps, reps }; /* small messages are cheap: more of them */
  double mine[2] = { 0, 0 }; /* the link me → me+1, measured here */
  gboolean ok = TRUE;
  /* links 0, 2, 4, … first, then 1, 3, …: a rank is in one pair at a time */
  for (int parity = 0; parity < 2 && ok; parity++) {
    gboolean left = me % 2 == parity && me + 1 < W;
    gboolean right = me >= 1 && (me - 1) % 2 == parity;
    if (!left && !right)
      continue;
    int peer = left ? me + 1 : me - 1;
    double best[2] = { G_MAXDOUBLE, G_MAXDOUBLE };
    for (int z = 0; z < 2 && ok; z++)
      for (int i = 0; i <= rounds[z] && ok; i++) { /* round 0 warms up */
        double t0 = MPI_Wtime();
        ok = round_trip(m, raw, left, peer, z * (rounds[0] + 1) + i, buf, sizes[z], err);
        double dt = MPI_Wtime() - t0;
        if (i > 0)
          best[z] = MIN(best[z], dt);
      }
    if (ok && left) {
      mine[0] = MAX(best[0] / 2, 1e-9);
      mine[1] = (double)large_bytes / MAX(best[1] / 2 - mine[0], 1e-9);
    }
  }
  g_free(buf);
  /* everyone learns every link (a rank that failed still takes part, so the others do not wait) */
  double *all = g_new0(double, 2 * (size_t)W);
  g_rec_mutex_lock(&m->lock);
  int rc = MPI_Allgather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, m->ctl_comm);
  memset(m->sent, 0, sizeof m->sent);
  g_rec_mutex_unlock(&m->lock);
  if (ok && rc != MPI_SUCCESS) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d: MPI_Allgather of the link measurements failed", me);
    ok = FALSE;
  }
  for (int s = 0; ok && s + 1 < W; s++)
    links[s] = (TpMpiLink){ all[2 * s], all[2 * s + 1] };
  g_free(all);
  return ok;
}
