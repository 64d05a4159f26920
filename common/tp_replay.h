/* tp_replay.h — replay of the per-stage orders with matched sends and receives on unit slots.
 * Gives each operation its unit-slot start and end (forward and backward take one slot, updates
 * none, transfers none) and detects deadlock; and the causal bounds on vsync-latest's versions that
 * hold on every timeline of the orders. */
#ifndef TP_REPLAY_H
#define TP_REPLAY_H

#include "tp_index.h"

/* start/end: arrays of tp_schedule_n_ops() entries, indexed by global op index (ix->off).
 * Fails with TP_ERROR_INPUT "deadlock: …" naming the wait cycle when the orders cannot finish (the
 * times of the operations that did not run are then left unset). */
gboolean tp_replay(const TpSchedule *s, const TpIndex *ix, int64_t *start, int64_t *end, GError **err);
/* Index s and replay it on unit slots: *ix, *start and *end (by global operation index) for the
 * caller to free, also on failure (an index-less failure leaves all three NULL). */
gboolean tp_replay_indexed(const TpSchedule *s, TpIndex **ix, int64_t **start, int64_t **end, GError **err);
/* The same with the times as doubles (the simulator's unit-slot timeline). */
gboolean tp_replay_times(const TpSchedule *s, const TpIndex *ix, double *start, double *end, GError **err);

/* What generating a schedule computed on the way that simulating it can reuse
 * (tp_schedule_generate_prepared, tp_sim_run_prepared): the index of the schedule as generated and
 * its unit-slot replay (start and end by global operation index).  The caller owns it, next to
 * the schedule it describes; it describes the operations as generated, so clear it before editing
 * them.  tp_sim_run_prepared takes over what it uses and frees the rest
 * (once it has started, it leaves prep empty).  With `untimed` set before generating, the caller
 * reads no unit-slot times and finds a deadlock its own way (its simulation on costs stalls) or
 * never runs the order (it reads the operations alone): generation then keeps the index alone and
 * replays on unit slots only where the versions need the times (vsync-latest). */
struct TpPrepared {
  TpIndex *ix;
  double *start, *end;
  gboolean untimed;
};
void tp_prepared_clear(TpPrepared *p);

/* Timeline-independent bounds on vsync-latest's c(i), for i = 1..K (lo, hi: K+1 entries), at the
 * first backward of mini-batch i in stage W's order: lo[i] = stage 1's updates that happen before
 * its start, hi[i] = stage 1's updates that do not happen after its start (happens-before through
 * the stages' orders and the messages).  Every timeline of the orders finishes at least lo[i] and,
 * counting an update at the very instant B(i) starts only when it does not follow B(i), at most
 * hi[i] <= i-1 of them when B(i) starts.  FALSE when the orders do not finish (a deadlock). */
gboolean tp_causal_bounds(const TpSchedule *s, const TpIndex *ix, int32_t *lo, int32_t *hi);

#endif
