/* tp_timeline.h — what happened when, for one schedule: the start and end of every operation, the
 * transfer of every message, and the version each operation read.  The simulator fills one from a
 * cost model (sim/tp_sim.h) and the executor from its measured run (exec/tp_runtime.h); metrics,
 * event files, Chrome traces and plots read it, so a measured run gets every report a simulated one
 * gets.  Operations are numbered globally by the schedule's index (ix->off[stage] + position). */
#ifndef TP_TIMELINE_H
#define TP_TIMELINE_H

#include "tp_index.h"
#include "tp_schedule.h"

/* The members of a timeline, in order.  TpTimeline is exactly these; the simulator's result
 * (TpSim) puts them in an anonymous union with a TpTimeline, so that its code reads sim->start while
 * functions of the timeline take &sim->tl. */
#define TP_TIMELINE_MEMBERS                                                                              \
  const TpSchedule *s;                                                                                    \
  TpIndex *ix;             /* owned */                                                                    \
  long n_ops;                                                                                             \
  double *start, *end;     /* per global op, seconds (or unit slots) since t0 */                          \
  int32_t *prod, *cons;    /* the op on the neighbouring stage this op receives from / sends to, or -1    \
                              (prod is the index's ix->prod) */                                           \
  double *xstart, *xend;   /* transfer of the message op g sends, read only where cons[g] >= 0 (else -1, \
                              or end[g] where they are end); where transfers take no time one array      \
                              serves both, and in a simulation on unit slots that array is end itself */ \
  int32_t *version, *latest; /* per global op: the version it read (a backward over several: the oldest) \
                                and the stage's latest version when it began, as measured; NULL in a     \
                                simulation (the schedule's version; the latest follows from the order) */ \
  double t0;               /* where 0 lies on the run's own clock (a measured run: its first start) */   \
  double makespan;

typedef struct {
  TP_TIMELINE_MEMBERS
} TpTimeline;

/* A timeline of schedule s with its arrays allocated (start, end, xstart, xend and cons; with
 * measured: version and latest too) and wired (cons from the index's producers); times are left for
 * the caller to fill.  ix: s's index, taken over (NULL: built here).  TP_ERROR_INPUT from the index. */
gboolean tp_timeline_init(TpTimeline *tl, const TpSchedule *s, TpIndex *ix, gboolean measured, GError **err);
/* cons from prod: cons[p] = g when g receives from p, else -1. */
void tp_timeline_wire(TpTimeline *tl);
/* Frees what tl holds (not tl itself). */
void tp_timeline_clear(TpTimeline *tl);

TpTimeline *tp_timeline_new(const TpSchedule *s, gboolean measured, GError **err);
void tp_timeline_free(TpTimeline *tl);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpTimeline, tp_timeline_free)

/* The version operation g (op, at its stage) read: the measured one, or the schedule's. */
static inline int tp_timeline_version(const TpTimeline *tl, long g, const TpOp *op)
{
  return tl->version ? tl->version[g] : op->ver;
}

/* Shifts every time so that the earliest start is 0 (t0 grows by what was taken off), and sets the
 * makespan to the latest end; transfers of a timeline whose transfers take no time (xstart ==
 * xend) are put at their sender's end. */
void tp_timeline_normalise(TpTimeline *tl);

#endif
