/* tp_policy.h — weight policies of spec §2.2: which version each operation reads. */
#ifndef TP_POLICY_H
#define TP_POLICY_H

#include "tp_index.h"

/* Fill ver/src of every operation of s (whose order is set) according to s->policy.
 * vsync-latest uses the unit-slot replay of the order for its vertical synchronisation. */
gboolean tp_policy_assign(TpSchedule *s, GError **err);
/* The same on a given timeline (start/end by global operation index, as the order was fixed on):
 * vsync-latest's c(i) then follows those times instead of the unit-slot replay. */
gboolean tp_policy_assign_timed(TpSchedule *s, const double *start, const double *end, GError **err);
/* tp_policy_assign on a unit-slot replay the caller has run already (tp_replay_times, same index). */
gboolean tp_policy_assign_replayed(TpSchedule *s, const TpIndex *ix, const double *start, const double *end,
                                   GError **err);

/* vsync-latest's c(i) for i = 1..K (c: K+1 entries, c[0] = 0) on a timeline: the updates stage 1
 * has finished when the first B(i) of stage W's order starts.  end1: end times of stage 1's
 * operations in its order; startW, endW: start and end times of stage W's operations.  At one
 * instant an update counts when it does not causally follow B(i) there (zero-time operations), so
 * c(i) <= i-1 always.  FALSE (TP_ERROR_INPUT) when the orders do not finish. */
gboolean tp_vsync_versions(const TpSchedule *s, const TpIndex *ix, const double *end1, const double *startW,
                           const double *endW, int32_t *c, GError **err);

/* Significance s(d) of stale weights for the intermediate policy (d = latest − stashed ≥ 0). */
double tp_significance(const TpSignificance *sig, int d);
/* Parse "exp", "exp:TAU", "linear", "const:C"; TP_ERROR_INPUT on anything else. */
gboolean tp_significance_parse(const char *text, TpSignificance *out, GError **err);
/* The canonical text of a significance, as tp_significance_parse reads it (g_free it). */
char *tp_significance_to_string(const TpSignificance *sig);

#endif
