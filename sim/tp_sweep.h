/* tp_sweep.h — the (W, N) sweep behind `validate`: simulated steady-state v against the published
 * Eq. 2 (W <= N+1 <=> v = 1) and Eq. 3 (v = floor((W+N-2)/N)), and the closed form the simulation
 * shows for nf1b on unit slots, v = ceil(W/(N+1)). */
#ifndef TP_SWEEP_H
#define TP_SWEEP_H

#include "tp_schedule.h"

typedef struct {
  int W, N, K;
  int v_sim, v_sim_min; /* largest and smallest v(i) over the steady range */
  int v_eq3, v_closed;
  gboolean eq2_holds;   /* (W <= N+1) == (v_sim == 1) */
  gboolean multiple_sequences;
  gboolean na;          /* the order does not take this N (interleaved-1f1b: N a multiple of W): not run */
} TpSweepRow;

static inline int tp_eq3(int W, int N) { return (W + N - 2) / N; }
static inline int tp_closed_form(int W, int N) { return (W + N) / (N + 1); } /* = ceil(W/(N+1)) */
/* Mini-batches simulated per cell: the default of tp_schedule.h. */
static inline int tp_sweep_K(int W) { return tp_default_mini_batches(W); }

/* Operations a sweep may simulate in all, summed over its cells (W·K·(2N+1) each): about 20 s on
 * two cores of a small machine. */
#define TP_MAX_SWEEP_WORK 2000000000LL

/* Rows in W-major order; a cell whose N the order does not take (interleaved-1f1b's multiple of W) is
 * a row marked na.  Fails up front if a cell's order × policy pair is impossible, no cell can run, the work
 * exceeds TP_MAX_SWEEP_WORK or if the largest cell does not fit in memory.  Runs on
 * every core; tp_sweep_threads runs on `threads` (0: every core) and gives the same rows. */
GArray *tp_sweep(TpOrder o, TpPolicy p, int w0, int w1, int n0, int n1, GError **err);
GArray *tp_sweep_threads(TpOrder o, TpPolicy p, int w0, int w1, int n0, int n1, int threads, GError **err);
/* Work of a sweep: operations summed over its cells (and, in *max_cell, those of its largest cell). */
long long tp_sweep_work(int w0, int w1, int n0, int n1, long long *max_cell);

#endif
