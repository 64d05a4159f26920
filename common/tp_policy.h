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
/* tp_policy_assign on a unit-slot replay the caller has run already (tp_replay, same index). */
void tp_policy_assign_replayed(TpSchedule *s, const TpIndex *ix, const int64_t *start, const int64_t *end);

/* Significance s(d) of stale weights for the intermediate policy (d = latest − stashed ≥ 0). */
double tp_significance(const TpSignificance *sig, int d);
/* Parse "exp", "exp:TAU", "linear", "const:C"; TP_ERROR_INPUT on anything else. */
gboolean tp_significance_parse(const char *text, TpSignificance *out, GError **err);
/* The canonical text of a significance, as tp_significance_parse reads it (g_free it). */
char *tp_significance_to_string(const TpSignificance *sig);

#endif
