/* tp_sim.h — discrete-event simulation of a schedule under a cost model.
 * Resources: each device's compute (stages on one device serialise) and each link direction
 * (a message occupies it for latency + bytes/bandwidth); compute and communication overlap. */
#ifndef TP_SIM_H
#define TP_SIM_H

#include "tp_cost.h"
#include "tp_engine.h"
#include "tp_index.h"
#include "tp_link.h"
#include "tp_schedule.h"
#include "tp_timeline.h"

/* How a simulation's timeline was made: the same times whichever (tests compare them). */
typedef enum { TP_SIM_EVENTS, TP_SIM_UNIT_REPLAY, TP_SIM_COSTED_REPLAY, TP_SIM_SHARED_REPLAY } TpSimPath;

/* A simulation: its timeline (tp_timeline.h, read as sim->start or passed as &sim->tl) and the cost
 * model it ran under (message bytes and memory for the metrics and reports). */
typedef struct {
  union {
    TpTimeline tl;
    struct {
      TP_TIMELINE_MEMBERS
    };
  };
  const TpCost *c;
  TpAllreduceStats *ar; /* data parallelism (D > 1): what the all-reduces took; NULL otherwise */
  TpSimPath path;       /* of tp_sim_run (TP_SIM_EVENTS for a measured timeline) */
} TpSim;

/* Links: 0..W-2 carry activations from stage l to l+1; W-1+l carries gradients from l+1 to l
 * (stages 0-based). */
static inline int tp_sim_n_links(int W) { return 2 * (W - 1); }
static inline int tp_link_src(int W, int l) { return l < W - 1 ? l : l - (W - 1) + 1; }
static inline int tp_link_dst(int W, int l) { return l < W - 1 ? l + 1 : l - (W - 1); }
/* The link a forward (activations) or backward (gradients) of stage st sends on. */
static inline int tp_link_of(int W, int st, int kind) { return kind == TP_OP_F ? st : W - 1 + st - 1; }

/* Stage st freed its device: the other stages on that device may start now. */
static inline void tp_mark_device_sharers(TpEngine *e, const TpCost *c, int st)
{
  if (!c->shared_devices)
    return;
  for (int o = 0; o < c->W; o++)
    if (o != st && c->stage[o].device == c->stage[st].device)
      tp_engine_mark(e, o);
}

/* Refuses (TP_ERROR_INPUT, before allocating) a schedule whose simulation and metrics need more
 * memory than tp_memory_available() allows: about tp_sim_bytes(s, c). */
TpSim *tp_sim_run(const TpSchedule *s, const TpCost *c, GError **err);
/* The same, taking over from prep (NULL: nothing) what generating s computed already: its index,
 * and on unit costs with a device per stage its unit-slot timeline (the times are freed otherwise,
 * so prep is empty afterwards).  prep must describe s's operations as they are
 * (tp_schedule_generate_prepared, no edit since). */
TpSim *tp_sim_run_prepared(const TpSchedule *s, const TpCost *c, TpPrepared *prep, GError **err);
/* The same, always through the event loop (tp_sim_run takes the unit-slot replay where the two
 * agree, unit costs with a device per stage, and the costed replays on other costs without
 * interleaved ranks or all-reduce). */
TpSim *tp_sim_run_events(const TpSchedule *s, const TpCost *c, GError **err);
long long tp_sim_bytes(const TpSchedule *s, const TpCost *c);
/* A measured timeline under cost model c (message bytes, memory) as a simulation result, for the
 * simulator's metrics and reports; takes over what tl holds and frees tl. */
TpSim *tp_sim_from_timeline(TpTimeline *tl, const TpCost *c);
void tp_sim_free(TpSim *sim);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpSim, tp_sim_free)

/* How long op takes at stage st.  after_whole: op is a whole-mini-batch backward B that follows one
 * whole-mini-batch forward on st (1f1b-async orders, fused forwards), whose recomputation (with
 * s->recompute) runs that one forward again — forward_whole — rather than N forwards. */
double tp_sim_op_time(const TpCost *c, const TpSchedule *s, int st, const TpOp *op, gboolean after_whole);
/* Bytes of the message op (at stage st) sends, 0 if it sends none. */
static inline double tp_sim_op_bytes(const TpCost *c, const TpSchedule *s, int st, const TpOp *op)
{
  if (op->kind == TP_OP_F && st < s->W - 1)
    return tp_op_count(s, op) * c->stage[st].act_bytes;
  if (tp_op_sends_up(op->kind) && st > 0)
    return tp_op_count(s, op) * c->stage[st].grad_bytes;
  return 0;
}
double tp_sim_link_time(const TpCost *c, int link, double bytes);

#endif
