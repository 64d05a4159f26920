/* tp_outbox.c — buffers lent to a transport with each send, given back when sent (tp_outbox.h). */
#include "tp_outbox.h"
#include "tp_backend.h"

struct TpOutbox {
  GMutex lock;
  GPtrArray *free; /* float * ready for the next message */
  int refs;        /* the owner + the buffers lent */
  size_t n;
  gint64 lent;     /* bytes of the messages lent and not yet given back */
};

typedef struct {
  TpOutbox *o;
  float *buf;
  size_t len;
} Lent;

TpOutbox *tp_outbox_new(size_t n)
{
  TpOutbox *o = g_new0(TpOutbox, 1);
  g_mutex_init(&o->lock);
  o->free = g_ptr_array_new_with_free_func(g_free);
  o->refs = 1;
  o->n = n ? n : 1;
  return o;
}

float *tp_outbox_take(TpOutbox *o, GError **err)
{
  g_mutex_lock(&o->lock);
  float *b = o->free->len ? g_ptr_array_steal_index_fast(o->free, o->free->len - 1) : NULL;
  g_mutex_unlock(&o->lock);
  return b ? b : tp_host_floats(o->n, err);
}

/* Drop one reference (lock held, released here); the last frees the outbox. */
static void unref_unlock(TpOutbox *o)
{
  gboolean last = --o->refs == 0;
  g_mutex_unlock(&o->lock);
  if (last) {
    g_ptr_array_unref(o->free);
    g_mutex_clear(&o->lock);
    g_free(o);
  }
}

void tp_outbox_give(TpOutbox *o, float *buf)
{
  g_mutex_lock(&o->lock);
  g_ptr_array_add(o->free, buf);
  g_mutex_unlock(&o->lock);
}

/* The transport's done(): the buffer back, the reference it held dropped. */
static void given_back(void *data)
{
  Lent *l = data;
  TpOutbox *o = l->o;
  g_mutex_lock(&o->lock);
  g_ptr_array_add(o->free, l->buf);
  o->lent -= (gint64)l->len;
  g_free(l);
  unref_unlock(o);
}

gint64 tp_outbox_lent(TpOutbox *o)
{
  g_mutex_lock(&o->lock);
  gint64 n = o->lent;
  g_mutex_unlock(&o->lock);
  return n;
}

gboolean tp_outbox_send(TpOutbox *o, float *buf, TpTransport *t, int from, int to, const TpTag *tag, size_t len,
                        GError **err)
{
  Lent *l = g_new(Lent, 1);
  l->o = o, l->buf = buf, l->len = len;
  g_mutex_lock(&o->lock);
  o->refs++;
  o->lent += (gint64)len;
  g_mutex_unlock(&o->lock);
  return tp_transport_send_borrowed(t, tp_link_ends(from, to), tag, buf, len, given_back, l, err);
}

void tp_outbox_release(TpOutbox *o)
{
  if (!o)
    return;
  g_mutex_lock(&o->lock);
  unref_unlock(o);
}
