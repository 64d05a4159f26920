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
 *   and a replay with matched sends and receives that must terminate (no deadlock). */
gboolean tp_validate(const TpSchedule *s, GError **err);
/* All of it but the sizes and the replay, on an index of s (for a generator that replays anyway). */
gboolean tp_validate_static(const TpSchedule *s, const TpIndex *ix, GError **err);

#endif
