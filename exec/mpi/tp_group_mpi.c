/* tp_group_mpi.c — the group of a run with one process (MPI rank) per stage: MPI's start and end,
 * collectives over the MPI transport (they wait at most the transport's timeout and poll aborts),
 * links measured by a ping-pong between neighbouring ranks with their eager limits read from MPI,
 * and a failed rank ending the whole job (tp_mpi_fail). */
#include "tp_group_mpi.h"
#include "tp_mpi.h"
#include "tp_signal.h"

typedef struct {
  TpMpi *mpi;          /* NULL once the job's end is said */
  TpGpuLinksFn gpu_links;
  TpGpuReduceFn gpu_reduce;
  TpTransport *gpu;    /* the stages' links when they join GPUs */
  double timeout_s;
  int replicas;        /* data parallelism's D: rank r is replica r / W, stage r mod W */
  TpMpi *replica;      /* D > 1: the stage links of this rank's replica */
  TpReduce *reduce;    /* D > 1: the gradients' reduction over each stage's replicas (the group's) */
} Ctx;

static Ctx *ctx_of(const TpGroup *g) { return g->ctx; }

static int mpi_rank(const TpGroup *g) { (void)g; return tp_mpi_rank(); }
static int mpi_size(const TpGroup *g) { (void)g; return tp_mpi_size(); }

static gboolean mpi_gather(TpGroup *g, int root, const void *mine, size_t len, void *all, GError **err)
{
  return tp_mpi_gather(ctx_of(g)->mpi, root, mine, len, all, err);
}

static gboolean mpi_broadcast(TpGroup *g, int root, void *buf, size_t len, const char *doing, GError **err)
{
  return tp_mpi_bcast(ctx_of(g)->mpi, root, buf, len, doing, err);
}

/* The links' costs; their eager limits only where MPI carries the stages' messages.  With replicas,
 * each measures its own links and every rank takes the first replica's, so that every rank fixes
 * its order on the same numbers. */
static gboolean mpi_measure_links(TpGroup *g, int W, TpGroupLink *links, GError **err)
{
  TpMpi *m = ctx_of(g)->replica ? ctx_of(g)->replica : ctx_of(g)->mpi; /* a replica's own links */
  g_autofree TpMpiLink *l = g_new0(TpMpiLink, MAX(W - 1, 1));
  g_autofree double *eager = g_new0(double, MAX(W - 1, 1));
  if (!tp_mpi_measure_links(m, 5, 0, FALSE, l, err) || !tp_mpi_eager_limits(m, eager, err))
    return FALSE;
  for (int i = 0; i < W - 1; i++)
    links[i] = (TpGroupLink){ .latency_s = l[i].latency_s, .bandwidth_Bps = l[i].bandwidth_Bps,
                              .eager_limit = ctx_of(g)->gpu_links ? 0 : eager[i] };
  return !ctx_of(g)->replica || W < 2 ||
         tp_mpi_bcast(ctx_of(g)->mpi, 0, links, (size_t)(W - 1) * sizeof *links,
                      "while sharing the first replica's links", err);
}

static gboolean mpi_check_same(TpGroup *g, const char *text, GError **err)
{
  return tp_mpi_check_same(ctx_of(g)->mpi, text, err);
}

static gboolean mpi_check_size(const TpGroup *g, int W, GError **err)
{
  int D = ctx_of(g)->replicas;
  if (D == 1)
    return tp_mpi_check_size(W, err);
  if (tp_mpi_size() == D * W)
    return TRUE;
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "mpirun -np %d does not match --data-parallel %d times -w %d (%d ranks)",
              tp_mpi_size(), D, W, D * W);
  return FALSE;
}

/* NCCL's reduction does not tie stages: where it carries the stages, a tie alone makes none (the
 * runtime then says the transport cannot tie). */
static TpReduce *mpi_reduce(TpGroup *g, int W, int tie_stage, double timeout_s, GError **err)
{
  (void)W;
  Ctx *c = ctx_of(g);
  if (!c->reduce && (c->replicas > 1 || (tie_stage > 0 && !c->gpu_reduce)))
    c->reduce = c->gpu_reduce ? c->gpu_reduce(c->replicas, timeout_s, err)
                              : tp_mpi_reduce_new(c->mpi, c->replicas, tie_stage, timeout_s, err);
  return c->reduce;
}

static TpTransport *mpi_stage_links(TpGroup *g, int N, int device, GError **err)
{
  Ctx *c = ctx_of(g);
  if (c->replicas > 1) { /* a pipeline of its replica's ranks */
    if (!c->replica && !(c->replica = tp_mpi_new_split(N, c->timeout_s, c->replicas, err)))
      return NULL;
    tp_mpi_set_micro_batches(c->replica, N);
    return tp_mpi_transport(c->replica);
  }
  if (!c->gpu_links) {
    tp_mpi_set_micro_batches(c->mpi, N);
    return tp_mpi_transport(c->mpi);
  }
  g_autofree char *gpu = g_strdup_printf("%d", device);
  return c->gpu = c->gpu_links(N, c->timeout_s, gpu, err);
}

static void mpi_catch_stop(TpGroup *g, void (*note)(int sig))
{
  (void)g, (void)note; /* each rank says its own line (tp_mpi_catch_signals) */
  tp_mpi_catch_signals();
}

static void mpi_end_said(TpGroup *g, gboolean says)
{
  Ctx *c = ctx_of(g);
  tp_signal_ignore_end(); /* mpirun's SIGTERM, once the first rank has exited: nothing to report */
  tp_mpi_end_said(c->mpi, says);
  c->mpi = NULL;
}

static void mpi_fail(TpGroup *g, const char *line, int status) { tp_mpi_fail(ctx_of(g)->mpi, line, status); }

static void mpi_finish(TpGroup *g)
{
  Ctx *c = ctx_of(g);
  tp_transport_free(c->gpu); /* waits for its last sends */
  c->gpu = NULL;
  tp_transport_free(tp_mpi_transport(c->replica));
  c->replica = NULL;
  tp_reduce_free(c->reduce);
  c->reduce = NULL;
  if (c->mpi)
    tp_mpi_finalize(c->mpi);
  c->mpi = NULL;
}

static void mpi_free(TpGroup *g)
{
  g_free(g->ctx);
  g_free(g);
}

static const TpGroupIface mpi_iface = {
  .transport = "mpi",
  .per_stage = TRUE,
  .rank = mpi_rank,
  .size = mpi_size,
  .gather = mpi_gather,
  .broadcast = mpi_broadcast,
  .measure_links = mpi_measure_links,
  .check_same = mpi_check_same,
  .check_size = mpi_check_size,
  .reduce = mpi_reduce,
  .stage_links = mpi_stage_links,
  .catch_stop = mpi_catch_stop,
  .end_said = mpi_end_said,
  .fail = mpi_fail,
  .finish = mpi_finish,
  .free = mpi_free,
};

/* The same over MPI, the stages' links between GPUs. */
static const TpGroupIface gpu_iface = {
  .transport = "nccl",
  .per_stage = TRUE,
  .links_on_gpus = TRUE,
  .rank = mpi_rank,
  .size = mpi_size,
  .gather = mpi_gather,
  .broadcast = mpi_broadcast,
  .measure_links = mpi_measure_links,
  .check_same = mpi_check_same,
  .check_size = mpi_check_size,
  .reduce = mpi_reduce,
  .stage_links = mpi_stage_links,
  .catch_stop = mpi_catch_stop,
  .end_said = mpi_end_said,
  .fail = mpi_fail,
  .finish = mpi_finish,
  .free = mpi_free,
};

TpGroup *tp_group_mpi_start(double peer_timeout_s, TpGpuLinksFn gpu_links, TpGpuReduceFn gpu_reduce, int replicas,
                            GError **err)
{
  tp_mpi_watchdog(peer_timeout_s, "starting MPI"); /* MPI_Init and the communicators: no timeout of their own */
  if (!tp_mpi_init(NULL, NULL, err))
    return NULL;
  GError *e = NULL;
  TpMpi *m = tp_mpi_new(1, peer_timeout_s, &e);
  if (!m)
    tp_mpi_fail(NULL, e->message, 1);
  tp_mpi_watchdog(0, NULL);
  Ctx *c = g_new0(Ctx, 1);
  *c = (Ctx){ .mpi = m, .gpu_links = gpu_links, .gpu_reduce = gpu_reduce, .timeout_s = peer_timeout_s,
              .replicas = MAX(replicas, 1) };
  TpGroup *g = g_new0(TpGroup, 1);
  *g = (TpGroup){ .iface = gpu_links ? &gpu_iface : &mpi_iface, .ctx = c };
  return g;
}
