/* tp_mpi_measure.c — ping-pong between neighbouring ranks: each link's one-way time (half a round
 * trip) for messages of given sizes, best and median over the rounds, on every rank; and from it,
 * before a run, each link's latency (half the best of 10·reps round trips of an 8-byte message) and
 * bandwidth (a large message's size over half its best round trip less the latency), in the units
 * of the simulator's cost model; and each link's eager limit, read from MPI. */
#include "tp_mpi_priv.h"
#include "tp_eager.h"
#include "tp_error.h"

#include <stdlib.h>
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

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

gboolean tp_mpi_ping_pong(TpMpi *m, const size_t *sizes, const int *rounds, int n, gboolean raw, double *best,
                          double *median, GError **err)
{
  TpTransport *t = &m->base;
  const int W = t->W, me = m->rank;
  size_t largest = 8;
  int most = 1;
  for (int z = 0; z < n; z++)
    largest = MAX(largest, sizes[z]), most = MAX(most, rounds[z]);
  unsigned char *buf = g_malloc0(largest);
  double *dt = g_new(double, most);
  double *mine = g_new0(double, 2 * (size_t)n); /* the link me → me+1, measured here: best, median per size */
  gboolean ok = TRUE;
  /* links 0, 2, 4, … first, then 1, 3, …: a rank is in one pair at a time */
  for (int parity = 0; parity < 2 && ok; parity++) {
    int seq = 0; /* the round trips of one pair, numbered alike at both ends */
    gboolean left = me % 2 == parity && me + 1 < W;
    gboolean right = me >= 1 && (me - 1) % 2 == parity;
    if (!left && !right)
      continue;
    int peer = left ? me + 1 : me - 1;
    for (int z = 0; z < n && ok; z++) {
      int r = MAX(rounds[z], 1);
      for (int i = 0; i <= r && ok; i++) { /* round 0 warms up */
        double t0 = MPI_Wtime();
        ok = round_trip(m, raw, left, peer, seq++, buf, sizes[z], err);
        if (i > 0)
          dt[i - 1] = (MPI_Wtime() - t0) / 2;
      }
      if (ok && left) {
        qsort(dt, r, sizeof *dt, cmp_double);
        mine[2 * z] = dt[0];
        mine[2 * z + 1] = r % 2 ? dt[r / 2] : 0.5 * (dt[r / 2 - 1] + dt[r / 2]);
      }
    }
  }
  g_free(buf);
  g_free(dt);
  /* everyone learns every link (a rank that failed still takes part, so the others do not wait) */
  double *all = g_new0(double, 2 * (size_t)n * W);
  g_rec_mutex_lock(&m->lock);
  int rc = MPI_Allgather(mine, 2 * n, MPI_DOUBLE, all, 2 * n, MPI_DOUBLE, m->ctl_comm);
  memset(m->sent, 0, sizeof m->sent);
  g_rec_mutex_unlock(&m->lock);
  if (ok && rc != MPI_SUCCESS) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d: MPI_Allgather of the link measurements failed", me);
    ok = FALSE;
  }
  for (int s = 0; ok && s + 1 < W; s++)
    for (int z = 0; z < n; z++) {
      if (best)
        best[(size_t)s * n + z] = all[(size_t)s * 2 * n + 2 * z];
      if (median)
        median[(size_t)s * n + z] = all[(size_t)s * 2 * n + 2 * z + 1];
    }
  g_free(mine);
  g_free(all);
  return ok;
}

gboolean tp_mpi_measure_links(TpMpi *m, int reps, size_t large_bytes, gboolean raw, TpMpiLink *links,
                              GError **err)
{
  const int W = m->base.W;
  reps = MAX(reps, 1);
  const size_t sizes[2] = { 8, large_bytes ? large_bytes : 4u << 20 };
  const int rounds[2] = { 10 * reps, reps }; /* small messages are cheap: more of them */
  double *best = g_new0(double, 2 * (size_t)MAX(W - 1, 1));
  gboolean ok = tp_mpi_ping_pong(m, sizes, rounds, 2, raw, best, NULL, err);
  for (int s = 0; ok && s + 1 < W; s++) {
    double lat = MAX(best[2 * s], 1e-9);
    links[s] = (TpMpiLink){ lat, (double)sizes[1] / MAX(best[2 * s + 1] - lat, 1e-9) };
  }
  g_free(best);
  return ok;
}

/* The value of MPI control variable name (a byte count), or fallback when MPI has none such (a
 * component not loaded, another MPI).  Lock held. */
static double cvar_bytes(const char *name, double fallback)
{
  int idx = 0, count = 0, verbosity, bind, scope, name_len = 0, desc_len = 0;
  MPI_Datatype type;
  MPI_T_enum enumtype;
  MPI_T_cvar_handle h;
  if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS ||
      MPI_T_cvar_get_info(idx, NULL, &name_len, &verbosity, &type, &enumtype, NULL, &desc_len, &bind, &scope) !=
        MPI_SUCCESS ||
      MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS)
    return fallback;
  union {
    int i;
    unsigned u;
    unsigned long ul;
    unsigned long long ull;
    long long ll;
  } v = { 0 };
  double out = fallback;
  if (count == 1 && MPI_T_cvar_read(h, &v) == MPI_SUCCESS) {
    if (type == MPI_INT)
      out = v.i;
    else if (type == MPI_UNSIGNED)
      out = v.u;
    else if (type == MPI_UNSIGNED_LONG)
      out = (double)v.ul;
    else if (type == MPI_UNSIGNED_LONG_LONG)
      out = (double)v.ull;
    else if (type == MPI_LONG_LONG)
      out = (double)v.ll;
  }
  MPI_T_cvar_handle_free(&h);
  return out > 0 ? out : fallback;
}

gboolean tp_mpi_eager_limits(TpMpi *m, double *limits, GError **err)
{
  const int W = m->base.W;
  int provided, host = m->rank, first = 0;
  g_autofree int *hosts = g_new0(int, W);
  g_rec_mutex_lock(&m->lock);
  double shm = TP_EAGER_LIMIT_SHM, tcp = TP_EAGER_LIMIT_TCP;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS) {
    shm = cvar_bytes("btl_vader_eager_limit", cvar_bytes("btl_sm_eager_limit", shm)); /* Open MPI 4, 5 */
    tcp = cvar_bytes("btl_tcp_eager_limit", tcp);
    MPI_T_finalize();
  }
  /* a host: the lowest world rank of the shared-memory domain */
  MPI_Comm local;
  MPI_Group lg, wg;
  int rc = MPI_Comm_split_type(m->ctl_comm, MPI_COMM_TYPE_SHARED, m->rank, MPI_INFO_NULL, &local);
  if (rc == MPI_SUCCESS) {
    if (MPI_Comm_group(local, &lg) == MPI_SUCCESS && MPI_Comm_group(m->ctl_comm, &wg) == MPI_SUCCESS) {
      MPI_Group_translate_ranks(lg, 1, &first, wg, &host);
      MPI_Group_free(&lg), MPI_Group_free(&wg);
    }
    MPI_Comm_free(&local);
    rc = MPI_Allgather(&host, 1, MPI_INT, hosts, 1, MPI_INT, m->ctl_comm);
  }
  g_rec_mutex_unlock(&m->lock);
  if (rc != MPI_SUCCESS) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d: MPI could not say which ranks share a host", m->rank);
    return FALSE;
  }
  for (int l = 0; l + 1 < W; l++)
    limits[l] = hosts[l] == hosts[l + 1] ? shm : tcp;
  return TRUE;
}
