/* tp_allreduce.h — data parallelism in the simulator: D replicas of the pipeline, each stage's
 * gradients all-reduced among its D replicas before the stage's update.  An all-reduce is costed as a
 * ring, 2(D-1)/D x bytes / bandwidth + 2(D-1) x latency, on the stage's data-parallel link; stages
 * whose replicas share a node's network interface share one link, and the simulator runs the
 * all-reduces on a link one at a time, first come first served (tp_link.h).  By default a stage's
 * all-reduce starts when the stage reaches its update (after its last backward of the mini-batch);
 * overlapped, the gradients are reduced in buckets that become ready evenly through the stage's last
 * backward before the update, and the update waits for the last bucket. */
#ifndef TP_ALLREDUCE_H
#define TP_ALLREDUCE_H

#include "tp_engine.h"
#include "tp_link.h"
#include "tp_schedule.h"

/* PyTorch DistributedDataParallel's default bucket (bucket_cap_mb = 25). */
#define TP_ALLREDUCE_BUCKET_BYTES (25.0 * 1024 * 1024)

typedef struct {
  int D;                       /* replicas; 1: none (the all-reduce is not simulated) */
  gboolean overlap;            /* reduce in buckets behind the last backward */
  int W, n_links;
  int *link;                   /* [W] the data-parallel link stage s's all-reduce runs on */
  double *latency, *bandwidth; /* [W] that link's, as stage s sees it (bandwidth 0: infinite) */
  double *bytes;               /* [W] gradient bytes stage s reduces (its weight bytes) */
} TpDataParallel;

/* D = 1, every stage on its own link of no latency and infinite bandwidth. */
TpDataParallel *tp_dp_new(int W);
void tp_dp_free(TpDataParallel *dp);
/* Recount n_links after editing link[]. */
void tp_dp_update_links(TpDataParallel *dp);

/* The ring all-reduce of `bytes` among D on a link of that bandwidth (0: infinite) and latency. */
double tp_allreduce_ring(int D, double bytes, double bandwidth, double latency);
/* Buckets of stage st's all-reduce (1 unless overlapped: 25 MiB ones, the rest in the last), the link
 * time of bucket i, and when it is ready behind an operation from t0 lasting dur that makes the
 * gradients evenly (once its bytes and those of the buckets before it are made). */
int tp_allreduce_buckets(const TpDataParallel *dp, int st);
double tp_allreduce_bucket_time(const TpDataParallel *dp, int st, int i);
double tp_allreduce_bucket_ready(const TpDataParallel *dp, int st, int i, double t0, double dur);
/* Link time of stage st's whole all-reduce (all its buckets). */
double tp_allreduce_time(const TpDataParallel *dp, int st);

/* What the simulation measured, per stage: link time of its all-reduces, their number, and the time
 * its updates waited for them after the stage reached them. */
typedef struct {
  double *busy, *exposed; /* [W] */
  long *count;            /* [W] */
} TpAllreduceStats;

TpAllreduceStats *tp_allreduce_stats_new(int W);
void tp_allreduce_stats_free(TpAllreduceStats *st);

/* Whether every stage has a data-parallel link of its own (then its all-reduces wait for nothing
 * but themselves, and the costed replay can time them). */
gboolean tp_dp_links_apart(const TpDataParallel *dp);
/* The all-reduce without the event loop, for a stage alone on its link: the event loop's sums.
 * *pending is when the stage's all-reduce started behind a backward is delivered, -1 if none is.
 * The operation before an update started at t0 and lasts dur (overlapped, it releases the buckets);
 * the stage reached its update at `reached`: when the update starts. */
void tp_ar_replay_before_update(const TpDataParallel *dp, TpAllreduceStats *stats, int st, double t0, double dur,
                                double *pending);
double tp_ar_replay_update(const TpDataParallel *dp, TpAllreduceStats *stats, int st, double reached,
                           double *pending);

/* The event loop's part (sim/tp_sim.c): classes 2 (a data-parallel transfer ended, target its link)
 * and 3 (a bucket became ready, target its stage) are the all-reduce's. */
enum { TP_EV_AR_XFER = 2, TP_EV_AR_BUCKET = 3 };
typedef struct TpArRun TpArRun;

TpArRun *tp_ar_run_new(const TpDataParallel *dp, TpEngine *e, TpAllreduceStats *stats);
void tp_ar_run_free(TpArRun *ar);
/* Stage st's next operation is its update: whether its all-reduce is done (starting it if not yet). */
gboolean tp_ar_ready(TpArRun *ar, int st);
/* Stage st started op (position pos of its order) lasting dur: an update consumes its all-reduce;
 * overlapped, the operation before an update releases the buckets through its run. */
void tp_ar_started(TpArRun *ar, const TpSchedule *s, int st, int pos, double dur);
/* The same for an order still being written (the costed generator): stage st started its update, or
 * the operation of duration dur that its update will follow. */
void tp_ar_update_started(TpArRun *ar, int st);
void tp_ar_last_before_update(TpArRun *ar, int st, double dur);
/* An event of class TP_EV_AR_XFER or TP_EV_AR_BUCKET. */
void tp_ar_commit(TpArRun *ar, const TpEvent *ev);

#endif
