/* tp_engine.h — the discrete-event core shared by the simulator and the costed-order generator:
 * a binary min-heap of events ordered by (time, class, target, sequence), and the loop
 *   pop every event of the current instant and commit it; then let the targets whose state
 *   changed try to start, lowest first; repeat; advance to the next instant.
 * Ties are therefore always broken the same way. */
#ifndef TP_ENGINE_H
#define TP_ENGINE_H

#include <glib.h>
#include <stdint.h>

typedef struct {
  double time;
  uint64_t key; /* class (2 bits) | target (22 bits) | sequence (40 bits): the tie-break order */
} TpEvent;

#define TP_EV_CLASS(ev) ((uint32_t)((ev)->key >> 62))
#define TP_EV_TARGET(ev) ((uint32_t)(((ev)->key >> 40) & 0x3fffff))

typedef struct {
  void (*commit)(void *ctx, const TpEvent *ev); /* an event of the current instant */
  void (*start)(void *ctx, int target);          /* a changed target may start something */
} TpEngineHandlers;

typedef struct {
  TpEvent *heap;
  size_t len, cap;
  uint64_t seq;
  double now;
  int n_targets;
  gboolean *dirty;
  int *dirty_list, n_dirty;
} TpEngine;

/* Targets that can be marked: 0 .. n_targets-1. */
void tp_engine_init(TpEngine *e, int n_targets);
void tp_engine_clear(TpEngine *e);
/* cls < 4, target < 2^22: lower classes, then lower targets, then older events go first. */
void tp_engine_push(TpEngine *e, double time, uint32_t cls, uint32_t target);
/* Pop the earliest event into *ev and advance the clock; FALSE when none is left. */
gboolean tp_engine_pop(TpEngine *e, TpEvent *ev);
/* Target's state changed: it gets a start call once this instant's events are committed. */
static inline void tp_engine_mark(TpEngine *e, int target)
{
  if (!e->dirty[target]) {
    e->dirty[target] = TRUE;
    e->dirty_list[e->n_dirty++] = target;
  }
}
/* Run until no event and no marked target is left; e->now is then the time of the last event. */
void tp_engine_run(TpEngine *e, const TpEngineHandlers *h, void *ctx);

#endif
