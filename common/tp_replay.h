/* tp_replay.h — replay of the per-stage orders with matched sends and receives on unit slots.
 * Gives each operation its unit-slot start and end (forward and backward take one slot, updates
 * none, transfers none) and detects deadlock. */
#ifndef TP_REPLAY_H
#define TP_REPLAY_H

#include "tp_index.h"

/* start/end: arrays of tp_schedule_n_ops() entries, indexed by global op index (ix->off).
 * Fails with TP_ERROR_INPUT "deadlock: …" naming the wait cycle when the orders cannot finish. */
gboolean tp_replay(const TpSchedule *s, const TpIndex *ix, int64_t *start, int64_t *end, GError **err);
/* The same with the times as doubles (the simulator's unit-slot timeline). */
gboolean tp_replay_times(const TpSchedule *s, const TpIndex *ix, double *start, double *end, GError **err);

#endif
