/* tp_group.h — what the processes of one training run do together, behind one small interface:
 * rank, size, barrier, gather, broadcast (and, where a group has links between processes, their
 * measured costs).  A run in one process is a group of one (tp_group_single: every collective is a
 * copy or nothing); `--transport mpi|nccl` runs one process per stage, a group over the MPI
 * transport (tp_group_mpi).  The trainer calls the interface and never asks which group it has. */
#ifndef TP_GROUP_H
#define TP_GROUP_H

#include "tp_runtime.h"

#include <glib.h>

typedef struct TpGroup TpGroup;

/* One link's measured cost: latency (s) and bandwidth (bytes/s) between stages l+1 and l+2, and
 * the eager limit (bytes) of MPI on it (larger messages are rendezvous sends, TpLinkCost). */
typedef struct {
  double latency_s;
  double bandwidth_Bps;
  double eager_limit;
} TpGroupLink;

typedef struct {
  int (*rank)(const TpGroup *g);
  int (*size)(const TpGroup *g);
  /* len bytes from every rank into all (size·len bytes, rank order) on rank root, or on every rank
   * when root < 0; all may be NULL on ranks that receive nothing.  Collective. */
  gboolean (*gather)(TpGroup *g, int root, const void *mine, size_t len, void *all, GError **err);
  /* len bytes of buf from rank root to every rank; doing names the step in errors.  Collective. */
  gboolean (*broadcast)(TpGroup *g, int root, void *buf, size_t len, const char *doing, GError **err);
  /* Optional (NULL: the processes share memory, links are free): the cost of each link between
   * neighbouring ranks, links[0..W-2] on every rank.  Collective. */
  gboolean (*measure_links)(TpGroup *g, int W, TpGroupLink *links, GError **err);
  void (*free)(TpGroup *g);
} TpGroupIface;

struct TpGroup {
  const TpGroupIface *iface;
  void *ctx;
};

/* A run in one process: rank 0 of 1. */
TpGroup *tp_group_single_new(void);
void tp_group_free(TpGroup *g);

int tp_group_rank(const TpGroup *g);
int tp_group_size(const TpGroup *g);
gboolean tp_group_gather(TpGroup *g, int root, const void *mine, size_t len, void *all, GError **err);
gboolean tp_group_broadcast(TpGroup *g, int root, void *buf, size_t len, const char *doing, GError **err);
/* Every rank reaches this point (a gather of one value onto every rank). */
gboolean tp_group_barrier(TpGroup *g, GError **err);
/* The links' costs (*links: W-1 of them, g_free), or *links = NULL when links are free. */
gboolean tp_group_measure_links(TpGroup *g, int W, TpGroupLink **links, GError **err);

/* The stages this process runs: every stage in a group of one, else stage rank (0-based) alone. */
void tp_group_stages(const TpGroup *g, int W, int *lo, int *hi);

/* After schedule s: every rank sends rank 0 its stage's part of r (records, weight-store
 * statistics, the losses and correct counts of the last stage) and its stage's latest weights and buffers;
 * rank 0 fills r for every stage (versions_match and wall over all of them) and sets the other
 * stages' weights and buffers in rt, so that it reports, traces and evaluates as if it had run every stage.
 * Other ranks' r and rt are left as they are; a group of one has nothing to do.  Collective. */
gboolean tp_group_gather_run(TpGroup *g, const TpSchedule *s, TpRuntime *rt, TpRunResult *r, GError **err);

#endif
