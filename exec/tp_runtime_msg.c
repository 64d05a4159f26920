/* tp_runtime_msg.c — how the stage threads hand activations and gradients to the transport, per
 * link direction, by where the stages' buffers live:
 *  - host: a host backend's buffers go to the transport as they are (cpu: no copy at all);
 *  - staged: a device buffer is downloaded into host memory, sent, received into host memory and
 *    uploaded (a transport that knows only host memory, or stages without a peer copy);
 *  - device: the NCCL transport takes the stage's device buffers themselves (the sender's stream
 *    synchronised first, as that transport asks);
 *  - peer: two device stages of one process over the local transport.  The sender copies the
 *    payload device to device (copy_peer, on its own stream) into a buffer of the receiving
 *    stage's backend taken from the link's pool, waits for its stream — so the payload is complete
 *    before the message exists — and sends only a small descriptor (buffer, length); the receiver
 *    copies the buffer into its own input on its stream, waits for that, and gives the buffer back
 *    to the pool.  No byte crosses the host. */
#include "config.h"
#include "tp_runtime_priv.h"
#include "tp_error.h"

#include <string.h>

typedef enum { MODE_HOST, MODE_STAGED, MODE_DEVICE, MODE_PEER } Mode;

/* What travels through the transport on a peer link. */
typedef struct {
  float *buf;
  guint64 n;
} PeerMsg;

/* One link direction (from → to): its mode and, for peer links, its buffer pool. */
typedef struct {
  Mode mode;
  const TpBackend *to_be;
  size_t cap;       /* floats a pool buffer holds: the largest message of the direction */
  GMutex lock;
  GPtrArray *spare; /* buffers free to take */
  GPtrArray *all;   /* every buffer made (freed at the end, also those a failed run left in flight) */
} Link;

struct TpRtLinks {
  int W;
  Link *link; /* [2W]: link[2s] from s to s+1, link[2s+1] from s to s-1 */
};

static Link *link_of(TpRtLinks *l, int from, int to) { return &l->link[2 * from + (to < from)]; }

TpRtLinks *tp_rt_links_new(const TpRuntime *rt, const TpTransport *tr)
{
  TpRtLinks *l = g_new0(TpRtLinks, 1);
  l->W = rt->W;
  l->link = g_new0(Link, 2 * (size_t)rt->W);
  for (int from = 0; from < rt->W; from++)
    for (int d = 0; d < 2; d++) {
      int to = d ? from - 1 : from + 1;
      Link *k = &l->link[2 * from + d];
      g_mutex_init(&k->lock);
      k->spare = g_ptr_array_new();
      k->all = g_ptr_array_new();
      if (to < 0 || to >= rt->W)
        continue;
      const TpBackend *a = rt->st[from].be, *b = rt->st[to].be;
      k->to_be = b;
      k->cap = (size_t)rt->cfg.batch * (d ? tp_net_in_elems(rt->st[from].net) : tp_net_out_elems(rt->st[from].net));
      if (tp_backend_host_memory(a) && tp_backend_host_memory(b))
        k->mode = MODE_HOST;
      else if (tr->device_memory && (!tp_backend_host_memory(a) || !tp_backend_host_memory(b)))
        k->mode = MODE_DEVICE; /* a rank holds its own stage's instance only */
      else if (tr->in_process && !tp_backend_host_memory(a) && !tp_backend_host_memory(b) && a->iface->copy_peer &&
               a->iface == b->iface)
        k->mode = MODE_PEER;
      else
        k->mode = MODE_STAGED;
    }
  return l;
}

void tp_rt_links_free(TpRtLinks *l)
{
  if (!l)
    return;
  for (int i = 0; i < 2 * l->W; i++) {
    Link *k = &l->link[i];
    for (guint j = 0; j < k->all->len; j++)
      k->to_be->iface->free(k->to_be, g_ptr_array_index(k->all, j));
    g_ptr_array_free(k->spare, TRUE);
    g_ptr_array_free(k->all, TRUE);
    g_mutex_clear(&k->lock);
  }
  g_free(l->link);
  g_free(l);
}

static float *pool_take(Link *k, GError **err)
{
  g_mutex_lock(&k->lock);
  float *p = k->spare->len ? g_ptr_array_steal_index_fast(k->spare, k->spare->len - 1) : NULL;
  g_mutex_unlock(&k->lock);
  if (p || !(p = k->to_be->iface->alloc(k->to_be, k->cap ? k->cap : 1, err)))
    return p;
  g_mutex_lock(&k->lock);
  g_ptr_array_add(k->all, p);
  g_mutex_unlock(&k->lock);
  return p;
}

static void pool_give(Link *k, float *p)
{
  g_mutex_lock(&k->lock);
  g_ptr_array_add(k->spare, p);
  g_mutex_unlock(&k->lock);
}

gboolean tp_rt_link_via_host(TpRtLinks *l, int from, int to)
{
  Mode m = link_of(l, from, to)->mode;
  return m == MODE_HOST || m == MODE_STAGED;
}

gboolean tp_rt_send(TpRtLinks *l, TpTransport *tr, const TpBackend *be, int from, int to, const TpTag *tag,
                    const float *dev, float *host, size_t n, GError **err)
{
  Link *k = link_of(l, from, to);
  switch (k->mode) {
  case MODE_HOST:
  case MODE_STAGED:
    return tp_rt_down(be, host, dev, n, err) && tr->send(tr, tp_link_ends(from, to), tag, host, n * sizeof(float), err);
  case MODE_DEVICE:
    return tp_backend_sync(be, err) && tr->send(tr, tp_link_ends(from, to), tag, dev, n * sizeof(float), err);
  case MODE_PEER: {
    if (n > k->cap) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "a message of %zu floats from stage %d to stage %d (at most %zu)", n,
                  from + 1, to + 1, k->cap);
      return FALSE;
    }
    PeerMsg m = { pool_take(k, err), n };
    if (!m.buf)
      return FALSE;
    if (!be->iface->copy_peer(be, m.buf, k->to_be, dev, n, err) || !tp_backend_sync(be, err) ||
        !tr->send(tr, tp_link_ends(from, to), tag, &m, sizeof m, err)) {
      pool_give(k, m.buf);
      return FALSE;
    }
    return TRUE;
  }
  }
  g_assert_not_reached();
}

gboolean tp_rt_recv(TpRtLinks *l, TpTransport *tr, const TpBackend *be, int to, int from, const TpTag *tag, float *dev,
                    float *host, size_t n, GError **err)
{
  Link *k = link_of(l, from, to);
  switch (k->mode) {
  case MODE_HOST:
  case MODE_STAGED:
    return tr->recv(tr, tp_link_ends(to, from), tag, host, n * sizeof(float), err) && tp_rt_up(be, dev, host, n, err);
  case MODE_DEVICE:
    return tr->recv(tr, tp_link_ends(to, from), tag, dev, n * sizeof(float), err);
  case MODE_PEER: {
    PeerMsg m;
    if (!tr->recv(tr, tp_link_ends(to, from), tag, &m, sizeof m, err))
      return FALSE;
    gboolean ok = m.n == n || (g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "message from stage %d holds %"
                                           G_GUINT64_FORMAT " floats, %zu expected", from + 1, m.n, n), FALSE);
    ok = ok && be->iface->copy(be, dev, m.buf, n, err) && tp_backend_sync(be, err);
    pool_give(k, m.buf); /* copied (or failed): the buffer is free again */
    return ok;
  }
  }
  g_assert_not_reached();
}
