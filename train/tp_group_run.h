/* tp_group_run.h — the trainer's collectives on a group (exec/tp_group.h): which stages a rank
 * runs, and the gather of a run's results onto rank 0. */
#ifndef TP_GROUP_RUN_H
#define TP_GROUP_RUN_H

#include "tp_group.h"
#include "tp_runtime.h"

/* The stages this process runs: every stage in a group of one, else stage rank mod W (0-based) alone
 * (rank r: stage r mod W of replica r / W). */
void tp_group_stages(const TpGroup *g, int W, int *lo, int *hi);

/* After schedule s: every rank sends rank 0 its stage's part of r (records, weight-store
 * statistics, the losses and correct counts of the last stage) and its stage's latest weights and buffers;
 * rank 0 fills r for every stage (versions_match and wall over all of them) and sets the other
 * stages' weights and buffers in rt, so that it reports, traces and evaluates as if it had run every stage.
 * With replicas (rank r: replica r / W, stage r mod W) the first replica's ranks give the stages, every
 * rank its losses, and *identical (where not NULL) stays TRUE only if every replica's weights equal
 * the first's.  Other ranks' r and rt are left as they are; a group of one has nothing to do.
 * Collective. */
gboolean tp_group_gather_run(TpGroup *g, const TpSchedule *s, TpRuntime *rt, TpRunResult *r, gboolean *identical,
                             GError **err);

#endif
