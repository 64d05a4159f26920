/* tp_nccl_match.c — the NCCL transport's bookkeeping that needs no GPU and no MPI: which
 * communicator a link uses, the header that names a payload, and the messages held until their
 * receive asks for them (the scheme is in tp_nccl.h).  Built in every configuration, so the tests
 * check it everywhere. */
#include "config.h"
#include "tp_nccl.h"

int tp_nccl_comm_of(int from, int to)
{
  if (from < 0 || to < 0 || (to != from + 1 && to != from - 1))
    return -1;
  int low = MIN(from, to);
  return (to > from ? 0 : 2) + (low & 1);
}

TpNcclHdr tp_nccl_hdr(const TpTag *tag, size_t len)
{
  TpNcclHdr h = { tag->kind, tag->mb, tag->micro, 0, (uint64_t)len };
  return h;
}

gboolean tp_nccl_hdr_is(const TpNcclHdr *h, const TpTag *tag)
{
  return h->kind == tag->kind && h->mb == tag->mb && h->micro == tag->micro;
}

TpNcclHeld *tp_nccl_held_take(GQueue *q, const TpTag *tag)
{
  for (GList *l = q->head; l; l = l->next) {
    TpNcclHeld *m = l->data;
    if (tp_nccl_hdr_is(&m->hdr, tag)) {
      g_queue_delete_link(q, l);
      return m;
    }
  }
  return NULL;
}
