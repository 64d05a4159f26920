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
/* The heuristic's variants (tp_zbauto.c), numbered 0..TP_ZB_VARIANTS-1: the one it keeps on c for N
 * micro-batches (the shortest longest-stage span, the first of equals; -1 if none keeps under the
 * limit), and s filled as tp_order_zb_auto does but with the given variant (FALSE, nothing written, if
 * it cannot keep under the limit).  A caller that times orders otherwise (sim/tp_costed.c, with the
 * data-parallel all-reduces) chooses among them. */
#define TP_ZB_VARIANTS 12
int tp_order_zb_auto_best(const TpZbCosts *c, int N);
/* The variants that build distinct orders on c for N micro-batches, the first of each, in order, into
 * out (room for TP_ZB_VARIANTS); how many (those that cannot keep under the limit left out).  The
 * variant tp_order_zb_auto_best keeps is among them. */
int tp_order_zb_auto_distinct(const TpZbCosts *c, int N, int *out);
gboolean tp_order_zb_auto_variant(TpSchedule *s, int *len, const TpZbCosts *c, int variant);

/* zb-v's activation limit per rank, in micro-batches of two chunks' activations: its act_limit, or R by
 * default (2R chunks' activations, 1F1B's memory and the handcrafted ZB-V's). */
static inline double tp_zbv_limit(const TpSchedule *s) { return s->act_limit > 0 ? s->act_limit : s->W / 2; }
/* Fill the 2R stages and R rank orders of zb-v schedule s (arrays sized, len[st] operations so far) with
 * its K mini-batches in the order tp_zbv.c builds on c (c->W = 2R stages), then the updates; FALSE
 * (nothing written) if a rank cannot keep under the limit. */
gboolean tp_order_zbv(TpSchedule *s, int *len, const TpZbCosts *c);
/* The most activations a rank of zb-v schedule s holds at once, counted on its order in c's unit (a
 * chunk's forward half a micro-batch's; an I frees it but M_W, its W the rest). */
double tp_zbv_peak(const TpSchedule *s, const TpZbCosts *c);
/* Whether activation limit `limit` (0: the default) suits zb-v on R workers: at least R; otherwise a
 * one-line TP_ERROR_INPUT. */
gboolean tp_zbv_limit_check(int R, double limit, GError **err);

#endif
