/* tp_train_priv.h — what the trainer's phases share inside train/: a segment's length and the
 * schedules' generation (tp_train_plan.c), which a run cut by a stop needs again (tp_train_run.c). */
#ifndef TP_TRAIN_PRIV_H
#define TP_TRAIN_PRIV_H

#include "tp_train.h"

/* Mini-batches per segment: --checkpoint-every M, else the whole run's K (one schedule). */
static inline int tp_train_segment_length(const Train *t) { return t->cfg.ck.every ? t->cfg.ck.every : t->K; }

/* The preset's schedule of K mini-batches, with the run's recomputation and significance: fixed on
 * unit slots (c NULL, or --order-from slots) or on cost model c.  Interleaved stages (t->V chunks per
 * worker) come from their rule, which no cost changes, but zb-v's, built on c. */
TpSchedule *tp_train_generate_order(Train *t, int K, const TpCost *c, GError **err);
/* tp_train_generate_order's schedule, its forwards fused as the run's choice says (fuse(), decided
 * on the first schedule and kept for the run's others). */
TpSchedule *tp_train_generate(Train *t, int K, const TpCost *c, GError **err);

/* tp_train_replicas.c: schedule s of a segment (mini-batches from global first_mb, samples idx[i]) run
 * by every replica at once (replica 0 here, with prog), r replica 0's record with every replica's
 * losses and correct counts; one pipeline: tp_runtime_run itself. */
gboolean tp_train_run_replicas(Train *t, const TpSchedule *s, int *const *idx, int first_mb, TpProgress *prog,
                               TpRunResult *r, GError **err);

/* tp_train_replicas.c: the pipelined profile (tp_runtime_profile_pipelined) of schedule warm on the
 * first mini-batch (samples first_idx) into t->pred.prof; with replicas in this process, every
 * replica's at once on its share of the samples (replica 0's times kept). */
gboolean tp_train_profile_replicas(Train *t, const TpSchedule *warm, const int *first_idx, GError **err);

/* tp_train_replicas.c: with replicas (D > 1), the run's reduction timed on every stage's gradient
 * (tp_runtime_time_reduce: every replica at once, in this process's threads or the group's ranks),
 * the slowest replica's median per stage into t->res.allreduce on every rank; nothing for D = 1. */
gboolean tp_train_time_allreduce(Train *t, GError **err);

#endif
