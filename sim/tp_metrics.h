/* tp_metrics.h — what a simulation says: makespan, busy time and bubbles, throughput (whole run and
 * steady state), per-stage peak memory by component, live versions and stored activations,
 * staleness of every read, the version mismatch of every backward against its forward, the version
 * difference v(i), update chains, messages and bytes. */
#ifndef TP_METRICS_H
#define TP_METRICS_H

#include "tp_sim.h"

enum { TP_MEM_WEIGHTS, TP_MEM_OPTIMIZER, TP_MEM_GRADIENTS, TP_MEM_ACTIVATIONS, TP_MEM_COMM, TP_N_MEM };
extern const char *const tp_mem_names[TP_N_MEM];

typedef struct {
  double busy, bubble;        /* busy time; idle / makespan */
  int max_live_versions;      /* weight versions kept at once, at peak */
  int peak_activations;       /* micro-batch activations stored at once, at peak */
  double peak_bytes;          /* peak of the sum of all components */
  int max_version_mismatch;   /* largest version mismatch of a backward here (see TpMetrics.mismatch) */
  double at_peak[TP_N_MEM];   /* components at the moment of peak_bytes */
  double comp_peak[TP_N_MEM]; /* each component's own peak */
} TpStageMetrics;

/* The version difference v(i) of every mini-batch, its steady value and the update chains (SPEC §3). */
typedef struct {
  int *v;                 /* [1..K] version difference v(i) = i - g(i) */
  int *g;                 /* [1..K] version the gradient of i is computed against (stage 1) */
  int v_steady, v_steady_min;
  int steady_lo, steady_hi; /* the mini-batches v_steady is taken over */
  gboolean steady_empty;    /* K <= 2W: taken over all mini-batches instead */
  int chains;               /* chains the steady mini-batches (and the v-1 after them) lie on */
  GArray *chain_first;      /* int: first member of each chain, ascending */
  gboolean multiple_sequences;
} TpVersionMetrics;

typedef struct {
  int W, N, K;
  double makespan, busy, bubble, throughput;
  double t_minibatch;     /* steady time per mini-batch: spacing of stage 1's updates over the steady
                             range (makespan / K when there is none) */
  /* makespan, busy, bubble and throughput cover the whole run, fill and drain included; these are
   * their steady-state counterparts, over the window from stage 1's update of mini-batch
   * steady_lo - 1 to that of steady_hi (the whole run when there is no such window) */
  double t_minibatch_run;   /* makespan / K */
  double throughput_steady; /* N x samples per micro-batch / t_minibatch */
  double bubble_steady;     /* idle / (W x window) */
  double bubble_span;       /* Qi et al.'s bubble rate (cost - work) / cost: cost the longest worker span
                               from its first forward's start to its last operation's end (updates left
                               out), work the most compute time of a worker */
  double window_start, window_end;
  TpVersionMetrics ver;     /* v, its steady value, the update chains */
  long messages;
  double bytes;
  long *link_messages;      /* [tp_sim_n_links(W)] */
  double *link_bytes;
  GArray *staleness;        /* long: staleness[d] = reads that were d versions behind the latest (a
                               forward's per micro-batch, a whole forward's N times; a backward's once) */
  /* weight inconsistency: for every backward, per micro-batch it covers, the version it reads minus
   * the version that micro-batch's forward read on the stage (I-TiMePReSt's blend counts the newest
   * version in it: the latest when s(d) < 1).  mismatch[d] counts micro-batch backwards with
   * difference d >= 0; mismatch_older those that read older weights than their forward (none in a
   * valid schedule of the policies here). */
  GArray *mismatch;         /* long */
  long mismatch_older;
  TpStageMetrics *stage;
} TpMetrics;

TpMetrics *tp_metrics_compute(const TpSim *sim);
/* The same with the stages' memory already computed (tp_metrics_memory(sim), or NULL: computed). */
TpMetrics *tp_metrics_compute_with(const TpSim *sim, const TpStageMetrics *memory);
/* The memory fields of tp_metrics_compute(sim)'s stages alone ([W], g_free), for callers that read
 * nothing else. */
TpStageMetrics *tp_metrics_memory(const TpSim *sim);
/* t_minibatch of tp_metrics_compute(sim) alone: the spacing of stage 1's updates over the steady
 * range, else makespan / K. */
double tp_metrics_time_per_minibatch(const TpSim *sim);
void tp_metrics_free(TpMetrics *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpMetrics, tp_metrics_free)

typedef struct {
  double t, bytes;
} TpMemPoint;

/* Stage st's total memory over time: a step function, one point per instant it changes. */
GArray *tp_metrics_memory_series(const TpSim *sim, const TpMetrics *m, int st);

/* Version mismatch of backward b at stage st, run when the stage's latest version was `latest`: the
 * largest, over the micro-batches it covers, of the version it reads minus the version that
 * micro-batch's forward read there.  With hist (long) and older, counts each micro-batch's difference. */
int tp_backward_mismatch(const TpSchedule *s, const TpIndex *ix, int st, const TpOp *b, int latest, GArray *hist,
                         long *older);

/* Steady-state v of a schedule alone (unit slots), for sweeps: fills v_steady/min, chains. */
int tp_version_difference(const TpSchedule *s, int *v_min, gboolean *steady_empty);

#endif
