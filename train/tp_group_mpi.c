/* tp_group_mpi.c — the group of a run with one process (MPI rank) per stage: its collectives are
 * the MPI transport's (they wait at most the transport's timeout and poll aborts), its links are
 * measured by a ping-pong between neighbouring ranks and their eager limits read from MPI. */
#include "tp_group_mpi.h"

static TpMpi *mpi_of(const TpGroup *g) { return g->ctx; }

static int mpi_rank(const TpGroup *g) { (void)g; return tp_mpi_rank(); }
static int mpi_size(const TpGroup *g) { (void)g; return tp_mpi_size(); }

static gboolean mpi_gather(TpGroup *g, int root, const void *mine, size_t len, void *all, GError **err)
{
  return tp_mpi_gather(mpi_of(g), root, mine, len, all, err);
}

static gboolean mpi_broadcast(TpGroup *g, int root, void *buf, size_t len, const char *doing, GError **err)
{
  return tp_mpi_bcast(mpi_of(g), root, buf, len, doing, err);
}

static gboolean mpi_measure_links(TpGroup *g, int W, TpGroupLink *links, GError **err)
{
  g_autofree TpMpiLink *l = g_new0(TpMpiLink, MAX(W - 1, 1));
  g_autofree double *eager = g_new0(double, MAX(W - 1, 1));
  if (!tp_mpi_measure_links(mpi_of(g), 5, 0, FALSE, l, err) || !tp_mpi_eager_limits(mpi_of(g), eager, err))
    return FALSE;
  for (int i = 0; i < W - 1; i++)
    links[i] = (TpGroupLink){ .latency_s = l[i].latency_s, .bandwidth_Bps = l[i].bandwidth_Bps,
                              .eager_limit = eager[i] };
  return TRUE;
}

static void mpi_free(TpGroup *g) { g_free(g); } /* the transport stays its owner's */

static const TpGroupIface mpi_iface = {
  .rank = mpi_rank,
  .size = mpi_size,
  .gather = mpi_gather,
  .broadcast = mpi_broadcast,
  .measure_links = mpi_measure_links,
  .free = mpi_free,
};

TpGroup *tp_group_mpi_new(TpMpi *mpi)
{
  TpGroup *g = g_new0(TpGroup, 1);
  g->iface = &mpi_iface;
  g->ctx = mpi;
  return g;
}
