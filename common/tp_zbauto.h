/* tp_zbauto.h — the automatic zero-bubble orders zb-1p, zb-2p and zb-auto (Qi et al., Zero Bubble
 * Pipeline Parallelism, §3.1): per stage, as many warm-up forwards as the activation limit and the
 * first input gradient's arrival allow, then one forward and one input gradient I a round, with
 * deferred weight gradients W filling the gaps and freeing memory; built on per-stage times (unit
 * slots, or a cost model's, sim/tp_costed.c). */
#ifndef TP_ZBAUTO_H
#define TP_ZBAUTO_H

#include "tp_schedule.h"

/* What the heuristic builds on, per stage st (0-based) and link. */
typedef struct {
  int W;
  double limit;          /* activations a stage may hold, in micro-batches' stored bytes (M_B) */
  double *f, *i, *w;     /* [W] times of a micro-batch's forward, input gradient, weight gradient */
  double *keep;          /* [W] M_W / M_B: the share of the stored bytes kept from the I to the W */
  double *up, *down;     /* [W-1] link st: an activation's time to st+1, a gradient's from st+1 */
} TpZbCosts;

/* Unit slots (F = I = W = 1, free links, M_W = M_B) on W stages under the limit. */
TpZbCosts *tp_zb_costs_new(int W, double limit);
void tp_zb_costs_free(TpZbCosts *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpZbCosts, tp_zb_costs_free)

/* zb-1p or zb-2p. */
static inline gboolean tp_order_zb_auto_kind(TpOrder o)
{
  return o == TP_ORDER_ZB_1P || o == TP_ORDER_ZB_2P || o == TP_ORDER_ZB_AUTO;
}

/* The activation limit of s, in M_B: W (zb-1p), 2W (zb-2p) or its act_limit (zb-auto; 2W without). */
double tp_zb_limit(const TpSchedule *s);

/* Fill the stages of s (arrays sized, len[st] operations so far) with its K mini-batches, each in the
 * order the heuristic builds on c, then its update.  FALSE (nothing written) if a stage cannot keep
 * under the limit: a limit below one micro-batch. */
gboolean tp_order_zb_auto(TpSchedule *s, int *len, const TpZbCosts *c);

#endif
