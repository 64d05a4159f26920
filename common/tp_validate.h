/* tp_validate.h — static validation of a schedule, generated or read from a file. */
#ifndef TP_VALIDATE_H
#define TP_VALIDATE_H

#include "tp_index.h"

/* Checks, in this order, and reports the first failure as one TP_ERROR_INPUT line naming the
 * operation and its file:line:
 *   sizes and order × policy pair; operation fields and duplicates; completeness (every forward,
 *   backward and update on every stage, same granularity on neighbouring stages); same-stage order
 *   (a backward after its forwards, an update after its backwards, updates in mini-batch order);
 *   versions (exists when read, still kept under the policy's retention, the policy's rule);
 *   a replay with matched sends and receives that must terminate (no deadlock); and, under
 *   vsync-latest, each backward's c(i): exactly the unit-slot replay's when the order was fixed on
 *   unit slots, within the causal bounds of tp_causal_bounds when it was fixed on costs. */
gboolean tp_validate(const TpSchedule *s, GError **err);
/* The same, keeping in *prep (tp_replay.h; NULL: keep nothing) the index and unit-slot replay the
 * validation built, for tp_sim_run_prepared. */
gboolean tp_validate_prepared(const TpSchedule *s, TpPrepared *prep, GError **err);
/* All of it but the sizes and the replay, on an index of s (for a generator that replays anyway). */
gboolean tp_validate_static(const TpSchedule *s, const TpIndex *ix, GError **err);

#endif
