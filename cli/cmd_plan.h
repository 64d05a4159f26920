/* cmd_plan.h — what `timeprest plan`'s files share: its options as given and a measured plan, and
 * --run-top (cmd_plan_run.c). */
#ifndef CMD_PLAN_H
#define CMD_PLAN_H

#include "tp_plan.h"
#include "tp_profile.h"

#include <glib.h>

typedef struct {
  char *model, *cluster, *profile, *batch, *limit, *workers, *micro, *presets, *run_top, *format, *show, *threads;
  char *output, *run_k, *recompute, *run_reps, *transport, *launcher, *optimizer;
  char *devices, *data_parallel, *tensor_parallel, *launch_timeout;
  gboolean overlap_allreduce, sequence_parallel;
  int launch_s; /* --launch-timeout, checked (default 30) */
} PlanOpts;

/* A measured plan (--run-top): the median over its repetitions and their spread. */
typedef struct {
  double t_minibatch, samples_per_second, spread;
  int mini_batches;
  int threads; /* BLAS threads per call of the runs' stages, as train reported them */
} Measured;

/* The steady window a --run-top run aims at by default, in predicted seconds, and its repetitions. */
#define RUN_WINDOW_S 1.0
#define RUN_REPS 3

/* The launcher's words with {W} replaced by W (--transport mpi), or NULL with err. */
GPtrArray *tp_plan_launcher_words(const char *launcher, int W, GError **err);

/* --run-top: the `runs` best plans of res, each trained reps times (run_k mini-batches, 0: a default
 * length per plan; mpi: one MPI rank per stage under o's launcher), the runs interleaved across the
 * plans; each plan's median and spread into meas[]. */
gboolean tp_plan_run_top(const TpPlanResult *res, int runs, int reps, const PlanOpts *o, int run_k,
                         const TpProfile *prof, gboolean mpi, Measured *meas, GError **err);

#endif
