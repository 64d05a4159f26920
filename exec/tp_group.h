/* tp_group.h — the processes of one training run and what they do together, behind one small
 * interface: rank, size, gather, broadcast, the measured costs of their links, the stage links of
 * this process, and the process model (the agreement on a step, catching stop requests, ending the
 * job when a rank fails, the orderly end).  A run in one process is a group of one
 * (tp_group_single_new: every collective is a copy or nothing, the stages' links are the runtime's
 * own); `--transport mpi|nccl` runs one process per stage (exec/mpi/tp_group_mpi.h).  The trainer
 * calls this interface and never asks which group it has. */
#ifndef TP_GROUP_H
#define TP_GROUP_H

#include "tp_reduce.h"
#include "tp_transport.h"

#include <glib.h>

typedef struct TpGroup TpGroup;

/* One link's measured cost: latency (s) and bandwidth (bytes/s) between stages l+1 and l+2, and
 * the eager limit (bytes) of MPI on it (larger messages are rendezvous sends, TpLinkCost; 0 where
 * MPI does not carry the stages' messages). */
typedef struct {
  double latency_s;
  double bandwidth_Bps;
  double eager_limit;
} TpGroupLink;

typedef struct {
  const char *transport;  /* what --transport names it (in messages) */
  gboolean per_stage;     /* one process per stage (else this process runs every stage) */
  gboolean links_on_gpus; /* the stages' links join GPU buffers: each rank's stage on a GPU of its own */
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
  /* Optional (NULL: one process agrees with itself): whether text is the same on every rank, else
   * TP_ERROR_INPUT naming the first rank that differs, on every rank.  Collective. */
  gboolean (*check_same)(TpGroup *g, const char *text, GError **err);
  /* Optional (NULL: this process runs every stage): whether the ranks are the W stages of every
   * replica, else TP_ERROR_INPUT saying so, on every rank. */
  gboolean (*check_size)(const TpGroup *g, int W, GError **err);
  /* Optional (NULL: the replicas, if any, are threads of this process): the reduction of each stage's
   * gradient over its replicas, where the group's ranks hold them (rank r: replica r / W, stage
   * r mod W), and with tie_stage > 0 the tie of the first stage's gradient with stage tie_stage's
   * (tp_reduce.h); the group's, freed when it finishes.  NULL without err where there is nothing to
   * reduce.  Collective. */
  TpReduce *(*reduce)(TpGroup *g, int W, int tie_stage, double timeout_s, GError **err);
  /* Optional (NULL: the runtime's own links): this rank's stage links for a schedule of N
   * micro-batches, its stage on GPU device (-1: on the host); the group owns them.  Collective. */
  TpTransport *(*stage_links)(TpGroup *g, int N, int device, GError **err);
  /* A run that stops at a checkpoint: SIGINT, SIGTERM and SIGHUP request the stop (common/tp_signal.h);
   * note, where the group can, says the first at once (NULL: nothing said). */
  void (*catch_stop)(TpGroup *g, void (*note)(int sig));
  /* Optional: the job ends with a status one rank says (says: this one); the group is then done. */
  void (*end_said)(TpGroup *g, gboolean says);
  /* Optional (NULL: nothing to do; the caller says line and ends the process): a rank failed after
   * the set-up was agreed: say line, make every other rank end, and end the job with status (it
   * does not return). */
  void (*fail)(TpGroup *g, const char *line, int status);
  /* Optional: the run's orderly end, every rank there (the stage links' last sends completed). */
  void (*finish)(TpGroup *g);
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
/* Whether each process runs one stage (else this one runs them all). */
gboolean tp_group_per_stage(const TpGroup *g);
gboolean tp_group_links_on_gpus(const TpGroup *g);
const char *tp_group_transport(const TpGroup *g);
gboolean tp_group_gather(TpGroup *g, int root, const void *mine, size_t len, void *all, GError **err);
gboolean tp_group_broadcast(TpGroup *g, int root, void *buf, size_t len, const char *doing, GError **err);
/* Every rank reaches this point (a gather of one value onto every rank). */
gboolean tp_group_barrier(TpGroup *g, GError **err);
/* The links' costs (*links: W-1 of them, g_free), or *links = NULL when links are free. */
gboolean tp_group_measure_links(TpGroup *g, int W, TpGroupLink **links, GError **err);
gboolean tp_group_check_same(TpGroup *g, const char *text, GError **err);
/* Whether the ranks are the W stages (a group of one runs them all). */
gboolean tp_group_check_size(const TpGroup *g, int W, GError **err);
/* The reduction over replicas held by other ranks and of the tie with stage tie_stage (> 0), or
 * *r = NULL where the group has none or nothing to reduce. */
gboolean tp_group_reduce(TpGroup *g, int W, int tie_stage, double timeout_s, TpReduce **r, GError **err);
/* This rank's stage links, or *links = NULL where the runtime keeps its own. */
gboolean tp_group_stage_links(TpGroup *g, int N, int device, TpTransport **links, GError **err);
void tp_group_catch_stop(TpGroup *g, void (*note)(int sig));
/* Whether a step went well on every rank (ok on this one; e: its error, taken).  TRUE when it did.
 * Else FALSE and the group is done: the first failing rank gets its error in err (it says it and
 * ends with its status) and *status = 0; the others *status = that rank's status (they end with
 * it, silently, once it has said it). */
gboolean tp_group_agree(TpGroup *g, gboolean ok, GError *e, int *status, GError **err);
void tp_group_end_said(TpGroup *g, gboolean says);
void tp_group_fail(TpGroup *g, const char *line, int status);
void tp_group_finish(TpGroup *g);

#endif
