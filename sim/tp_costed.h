/* tp_costed.h — fixing a rule-based order (nf1b, 1f1b-async) on a cost model instead of unit
 * slots: the same rules (backward first, bounded admission, forwards and backwards in order) with
 * real operation and transfer times, each stage choosing from what is ready when it falls idle; and
 * the automatic zero-bubble orders (zb-1p, zb-2p, zb-auto) built on the model's times. */
#ifndef TP_COSTED_H
#define TP_COSTED_H

#include "tp_cost.h"
#include "tp_schedule.h"

/* Generate, assign versions on the costed timeline (vsync-latest's c(i) from real times) and
 * validate.  Orders that do not depend on costs (gpipe, 1f1b, 2bw, zb-h1, zb-h2) come out as from unit
 * slots; zb-auto takes zb-2p's limit here (tp_schedule_costed_like keeps a schedule's own). */
TpSchedule *tp_schedule_generate_costed(TpOrder o, TpPolicy p, int W, int N, int K, const TpCost *c, GError **err);
/* The same for a schedule that recomputes (TpSchedule.recompute): fixed on backwards that cost
 * their forwards again.  prep (NULL: none) keeps what generating an order that does not depend on
 * the costs computed, for tp_sim_run_prepared (tp_schedule_generate_prepared). */
TpSchedule *tp_schedule_generate_costed_rc(TpOrder o, TpPolicy p, int W, int N, int K, gboolean recompute,
                                           const TpCost *c, TpPrepared *prep, GError **err);

/* Whether an order depends on the timeline it is fixed on (nf1b, 1f1b-async, zb-1p, zb-2p, zb-auto;
 * not gpipe, 1f1b, 2bw, zb-h1, zb-h2). */
gboolean tp_order_depends_on_costs(TpOrder o);

/* Generated schedule s again, its order fixed on cost model c (its significance kept). */
TpSchedule *tp_schedule_costed_like(const TpSchedule *s, const TpCost *c, GError **err);

#endif
