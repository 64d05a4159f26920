/* bench-mpi.c — the MPI transport's messages against plain MPI, in one run under
 * `mpirun -np 2 bench/bench-mpi [REPS]`: for each size from 8 B to 16 MiB, a ping-pong of plain
 * blocking MPI_Send/MPI_Recv, of the transport's send (which copies the payload) and of its
 * send_borrowed (which lends it), each round trip timed with MPI_Wtime; the best of REPS rounds
 * (default 30, fewer for the largest sizes) gives the latency (half the best round trip) and the
 * bandwidth (size over that half).  The three are interleaved round by round, in a rotating order,
 * so that the load of a shared machine, and the cache the previous one left, fall on all alike.  Rank 0 prints the table (Markdown) and the ratios to plain
 * MPI. */
#include "tp_mpi.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PLAIN, COPY, LENT, WAYS };
static const char *const names[WAYS] = { "plain MPI", "transport send (copy)", "transport send_borrowed" };

static void given_back(void *flag) { g_atomic_int_set((gint *)flag, 1); }

static void die(const char *what, GError *e)
{
  fprintf(stderr, "bench-mpi: %s: %s\n", what, e ? e->message : "failed");
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One round trip of len bytes by way; the transport's tags count up with seq. */
static void round_trip(TpMpi *m, int way, int me, int seq, char *buf, size_t len)
{
  TpTransport *t = tp_mpi_transport(m);
  GError *e = NULL;
  int peer = 1 - me;
  if (way == PLAIN) {
    if (me == 0) {
      MPI_Send(buf, (int)len, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
      MPI_Recv(buf, (int)len, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf, (int)len, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, (int)len, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
    }
    return;
  }
  TpTag go = { TP_OP_F, seq, TP_WHOLE }, back = { TP_OP_B, seq, TP_WHOLE };
  const TpTag *out = me == 0 ? &go : &back, *in = me == 0 ? &back : &go;
  gint lent_back = 0;
  gboolean ok = TRUE;
  if (me == 1)
    ok = t->recv(t, tp_link_ends(me, peer), in, buf, len, &e);
  if (ok && way == COPY)
    ok = t->send(t, tp_link_ends(me, peer), out, buf, len, &e);
  else if (ok)
    ok = tp_transport_send_borrowed(t, tp_link_ends(me, peer), out, buf, len, given_back, &lent_back, &e);
  if (ok && me == 0)
    ok = t->recv(t, tp_link_ends(me, peer), in, buf, len, &e);
  /* the lent buffer is written by the next receive: wait until the transport gives it back */
  while (ok && way == LENT && !g_atomic_int_get(&lent_back))
    if (tp_mpi_check_abort(m, &e))
      ok = FALSE;
  if (!ok)
    die("ping-pong", e);
}

int main(int argc, char **argv)
{
  GError *e = NULL;
  if (!tp_mpi_init(&argc, &argv, &e))
    die("MPI", e);
  int me = tp_mpi_rank(), reps = argc > 1 ? atoi(argv[1]) : 30;
  if (tp_mpi_size() != 2) {
    if (me == 0)
      fprintf(stderr, "usage: mpirun -np 2 bench-mpi [REPS]\n");
    MPI_Finalize();
    return 2;
  }
  TpMpi *m = tp_mpi_new(1, 60, &e);
  if (!m)
    die("transport", e);
  const size_t max = 16u << 20;
  char *buf = g_malloc(max);
  memset(buf, 1, max);
  if (me == 0) {
    printf("| bytes | plain MPI latency (us) | plain MPI GB/s | copy latency (us) | copy GB/s | copy / plain | "
           "lent latency (us) | lent GB/s | lent / plain |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  int seq = 1;
  for (size_t len = 8; len <= max; len *= 2) {
    int rounds = len >= (4u << 20) ? MAX(reps / 3, 5) : reps;
    double best[WAYS] = { G_MAXDOUBLE, G_MAXDOUBLE, G_MAXDOUBLE };
    for (int i = 0; i <= rounds; i++) /* round 0 warms up */
      for (int k = 0; k < WAYS; k++) {
        int way = (k + i) % WAYS; /* each way after each other as often */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        round_trip(m, way, me, seq++, buf, len);
        double dt = MPI_Wtime() - t0;
        if (i > 0)
          best[way] = MIN(best[way], dt);
      }
    if (me == 0) {
      double lat[WAYS], bw[WAYS];
      for (int w = 0; w < WAYS; w++)
        lat[w] = best[w] / 2, bw[w] = (double)len / lat[w] / 1e9;
      printf("| %zu | %.2f | %.3f | %.2f | %.3f | %.0f %% | %.2f | %.3f | %.0f %% |\n", len, lat[PLAIN] * 1e6, bw[PLAIN],
             lat[COPY] * 1e6, bw[COPY], 100 * bw[COPY] / bw[PLAIN], lat[LENT] * 1e6, bw[LENT],
             100 * bw[LENT] / bw[PLAIN]);
      fflush(stdout);
    }
  }
  if (me == 0)
    printf("\n(%s, %s, %s: best of %d round trips per size, %d for 4 MiB and more)\n", names[PLAIN], names[COPY],
           names[LENT], reps, MAX(reps / 3, 5));
  g_free(buf);
  tp_mpi_finalize(m);
  return 0;
}
