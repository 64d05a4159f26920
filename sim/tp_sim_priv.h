/* tp_sim_priv.h — what the simulator's files share (tp_sim.c, tp_sim_shared.c), not for its users. */
#ifndef TP_SIM_PRIV_H
#define TP_SIM_PRIV_H

#include "tp_sim.h"

/* The time op (of stage st) takes in sim: tp_sim_op_time, a recomputed backward after a whole
 * forward where it follows one. */
double tp_sim_op_dur(const TpSim *sim, int st, const TpOp *op);
/* The costed replay where stages share devices (tp_sim_shared.c): sim's start, end and transfer times
 * and makespan, as the event loop gives them; FALSE when it cannot (the caller runs the event loop).
 * Only without interleaved ranks, F&B composites or all-reduce (tp_sim.c checks). */
gboolean tp_sim_replay_shared(TpSim *sim);

/* Op g's message, d long on its link (d <= 0: none), once op g has ended: it starts as the link's
 * last transfer (*link_free) ends, first in first out, and *link_free becomes its arrival. */
static inline void tp_sim_transfer(TpSim *sim, long g, double d, double *link_free)
{
  double t = MAX(sim->end[g], *link_free);
  sim->xstart[g] = t;
  sim->xend[g] = *link_free = d > 0 ? t + d : t;
}

#endif
