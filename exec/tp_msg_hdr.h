/* tp_msg_hdr.h — what the transports of one stage per process (MPI: exec/mpi/, NCCL: exec/nccl/)
 * share about their messages: the small header sent ahead of every payload (the operation's tag
 * and the payload's length), and the messages received ahead of their turn, held in a queue
 * until a receive asks for their tag. */
#ifndef TP_MSG_HDR_H
#define TP_MSG_HDR_H

#include "tp_transport.h"

#include <stdint.h>

/* The header ahead of every payload (fixed size and layout: it travels as bytes). */
typedef struct {
  int32_t kind, mb, micro, pad;
  uint64_t len;
} TpMsgHdr;

static inline TpMsgHdr tp_msg_hdr(const TpTag *tag, size_t len)
{
  TpMsgHdr h = { tag->kind, tag->mb, tag->micro, 0, (uint64_t)len };
  return h;
}

static inline gboolean tp_msg_hdr_is(const TpMsgHdr *h, const TpTag *tag)
{
  return h->kind == tag->kind && h->mb == tag->mb && h->micro == tag->micro;
}

/* The held message of q tagged tag, removed from q; NULL when none.  A held message is any struct
 * whose first member is its TpMsgHdr. */
static inline gpointer tp_msg_held_take(GQueue *q, const TpTag *tag)
{
  for (GList *l = q->head; l; l = l->next)
    if (tp_msg_hdr_is((const TpMsgHdr *)l->data, tag)) {
      gpointer m = l->data;
      g_queue_delete_link(q, l);
      return m;
    }
  return NULL;
}

#endif
