/* tp_engine.h — the discrete-event core: a binary min-heap of events ordered by
 * (time, class, target, sequence), so that ties are always broken the same way. */
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
  TpEvent *heap;
  size_t len, cap;
  uint64_t seq;
  double now;
} TpEngine;

void tp_engine_init(TpEngine *e);
void tp_engine_clear(TpEngine *e);
/* cls < 4, target < 2^22: lower classes, then lower targets, then older events go first. */
void tp_engine_push(TpEngine *e, double time, uint32_t cls, uint32_t target);
/* Pop the earliest event into *ev and advance the clock; FALSE when none is left. */
gboolean tp_engine_pop(TpEngine *e, TpEvent *ev);

#endif
