/* tp_link.h — the links of the event loop, one copy for the simulator and the costed-order
 * generator: each link direction carries one message at a time, first in first out; a message
 * occupies it for its transfer time and is delivered when that ends (at once when it is zero and
 * the link is idle).  The caller says what a delivery means and numbers the messages. */
#ifndef TP_LINK_H
#define TP_LINK_H

#include "tp_engine.h"

/* A link direction's FIFO of messages waiting for or in transfer. */
typedef struct {
  long *id;    /* what is sent (an op, a forward unit, a mini-batch: the caller's numbering) */
  double *dur; /* transfer time of each */
  long head, tail, cap;
  gboolean busy;
} TpLinkQueue;

typedef struct {
  void (*deliver)(void *ctx, int link, long id); /* the message has arrived (engine time) */
  void (*started)(void *ctx, int link, long id); /* its transfer starts now; may be NULL */
  uint32_t ev_class;                             /* class of the transfer-end events */
} TpLinkHandlers;

static inline void tp_link_queue_push(TpLinkQueue *q, long id, double dur)
{
  if (q->tail == q->cap) {
    q->cap = q->cap ? 2 * q->cap : 64;
    q->id = g_renew(long, q->id, q->cap);
    q->dur = g_renew(double, q->dur, q->cap);
  }
  q->id[q->tail] = id;
  q->dur[q->tail++] = dur;
}

static inline void tp_link_queues_free(TpLinkQueue *q, int n)
{
  for (int l = 0; l < n; l++) {
    g_free(q[l].id);
    g_free(q[l].dur);
  }
  g_free(q);
}

/* Start transfers at the head of link l's queue while the link is free. */
static inline void tp_link_pump(TpEngine *e, TpLinkQueue *q, int l, const TpLinkHandlers *h, void *ctx)
{
  while (!q->busy && q->head < q->tail) {
    long id = q->id[q->head];
    if (h->started)
      h->started(ctx, l, id);
    if (q->dur[q->head] <= 0) {
      q->head++;
      h->deliver(ctx, l, id);
    } else {
      q->busy = TRUE;
      tp_engine_push(e, e->now + q->dur[q->head], h->ev_class, (uint32_t)l);
    }
  }
}

/* Send message id on link l (q = that link's queue): an instant transfer on an idle link is
 * delivered at once, anything else waits its turn. */
static inline void tp_link_send(TpEngine *e, TpLinkQueue *q, int l, long id, double dur, const TpLinkHandlers *h,
                                void *ctx)
{
  if (dur <= 0 && !q->busy && q->head == q->tail) {
    if (h->started)
      h->started(ctx, l, id);
    h->deliver(ctx, l, id);
    return;
  }
  tp_link_queue_push(q, id, dur);
  tp_link_pump(e, q, l, h, ctx);
}

/* The transfer at the head of link l ended (its event was committed): deliver it, start the next. */
static inline void tp_link_done(TpEngine *e, TpLinkQueue *q, int l, const TpLinkHandlers *h, void *ctx)
{
  long id = q->id[q->head++];
  q->busy = FALSE;
  h->deliver(ctx, l, id);
  tp_link_pump(e, q, l, h, ctx);
}

#endif
