/* tp_local.c — the local transport: one GAsyncQueue per link direction; a send copies the payload
 * into a message and pushes it (never blocking); a receive pops until it finds its tag, holding
 * the messages that arrived ahead of their turn; abort wakes every waiting receiver. */
#include "tp_local.h"
#include "tp_error.h"

#include <stdatomic.h>
#include <string.h>

typedef struct {
  TpTag tag;
  size_t len;
  gboolean held; /* counted in its link's queued bytes: nobody was waiting for it when it came */
  unsigned char data[];
} Msg;

/* Pushed into every queue by abort to wake its receiver. */
static Msg wake_up;

typedef struct {
  GAsyncQueue *q;
  GQueue held; /* popped ahead of their turn; touched by the receiving thread only */
  GMutex lock; /* counters, and what the receiver waits for */
  TpLinkStats stats;
  _Atomic gint64 queued; /* payload bytes sent and not yet received, but for one its receiver waited for */
  gboolean waiting;      /* the receiver is waiting for the message tagged `want` */
  TpTag want;
} Link;

typedef struct {
  TpTransport base;
  Link *link; /* 0..W-2: s → s+1; W-1+s: s+1 → s */
  gint aborted;
  GMutex lock; /* reason */
  char *reason;
} Local;

static Link *link_of(Local *l, int from, int to)
{
  const int W = l->base.W;
  if (from < 0 || to < 0 || from >= W || to >= W)
    return NULL;
  if (to == from + 1)
    return &l->link[from];
  if (from == to + 1)
    return &l->link[W - 1 + to];
  return NULL;
}

static gboolean no_link(Local *l, int from, int to, GError **err)
{
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "no link from stage %d to stage %d (of %d)", from + 1, to + 1,
              l->base.W);
  return FALSE;
}

static char *abort_reason(Local *l)
{
  g_mutex_lock(&l->lock);
  char *r = g_strdup(l->reason ? l->reason : "aborted");
  g_mutex_unlock(&l->lock);
  return r;
}

static gboolean fail_aborted(Local *l, int to, int from, const TpTag *tag, GError **err)
{
  char name[48], *r = abort_reason(l);
  tp_tag_name(&l->base, tag, name, sizeof name);
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: run aborted while waiting for %s from stage %d: %s",
              to + 1, name, from + 1, r);
  g_free(r);
  return FALSE;
}

static gboolean local_send(TpTransport *t, TpLinkEnds link, const TpTag *tag, const void *data, size_t len,
                           GError **err)
{
  const int from = link.local, to = link.peer;
  Local *l = (Local *)t;
  Link *k = link_of(l, from, to);
  if (!k)
    return no_link(l, from, to, err);
  if (g_atomic_int_get(&l->aborted)) {
    char name[48], *r = abort_reason(l);
    tp_tag_name(t, tag, name, sizeof name);
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: run aborted before %s was sent to stage %d: %s",
                from + 1, name, to + 1, r);
    g_free(r);
    return FALSE;
  }
  Msg *m = g_try_malloc(sizeof(Msg) + len);
  if (!m) {
    char name[48];
    tp_tag_name(t, tag, name, sizeof name);
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: cannot allocate the copy of %s (%zu bytes) for stage %d",
                from + 1, name, len, to + 1);
    return FALSE;
  }
  m->tag = *tag;
  m->len = len;
  if (len)
    memcpy(m->data, data, len);
  g_mutex_lock(&k->lock);
  k->stats.messages++;
  k->stats.bytes += len;
  /* a message its receiver already waits for is taken as it comes: held by nobody (as the simulator
   * counts it); one that comes ahead of its turn is held until taken */
  m->held = !(k->waiting && tp_tag_equal(&k->want, tag));
  if (m->held)
    atomic_fetch_add(&k->queued, (gint64)len); /* before the receiver can take it */
  g_mutex_unlock(&k->lock);
  g_async_queue_push(k->q, m);
  return TRUE;
}

static gint64 local_queued(TpTransport *t, int to)
{
  Local *l = (Local *)t;
  gint64 n = 0;
  for (int from = to - 1; from <= to + 1; from += 2) {
    Link *k = link_of(l, from, to);
    if (k)
      n += atomic_load(&k->queued);
  }
  return n;
}

/* The held message with this tag, removed from the held list, or NULL. */
static Msg *take_held(Link *k, const TpTag *tag)
{
  for (GList *it = k->held.head; it; it = it->next) {
    Msg *m = it->data;
    if (tp_tag_equal(&m->tag, tag)) {
      g_queue_delete_link(&k->held, it);
      return m;
    }
  }
  return NULL;
}

static gboolean local_recv(TpTransport *t, TpLinkEnds link, const TpTag *tag, void *data, size_t len, GError **err)
{
  const int to = link.local, from = link.peer;
  Local *l = (Local *)t;
  Link *k = link_of(l, from, to);
  if (!k)
    return no_link(l, from, to, err);
  if (g_atomic_int_get(&l->aborted))
    return fail_aborted(l, to, from, tag, err);
  Msg *m = take_held(k, tag);
  gint64 deadline = g_get_monotonic_time() + (gint64)(t->timeout_s * G_USEC_PER_SEC);
  while (!m) {
    gint64 left = deadline - g_get_monotonic_time();
    g_mutex_lock(&k->lock);
    k->waiting = TRUE, k->want = *tag;
    g_mutex_unlock(&k->lock);
    Msg *got = left > 0 ? g_async_queue_timeout_pop(k->q, (guint64)left) : g_async_queue_try_pop(k->q);
    g_mutex_lock(&k->lock);
    k->waiting = FALSE;
    g_mutex_unlock(&k->lock);
    if (got == &wake_up || g_atomic_int_get(&l->aborted)) {
      if (got && got != &wake_up)
        g_queue_push_tail(&k->held, got);
      return fail_aborted(l, to, from, tag, err);
    }
    if (!got) {
      char name[48];
      tp_tag_name(t, tag, name, sizeof name);
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME,
                  "stage %d: no message %s from stage %d within %g s (the peer is dead or stuck)", to + 1, name,
                  from + 1, t->timeout_s);
      return FALSE;
    }
    if (tp_tag_equal(&got->tag, tag))
      m = got;
    else
      g_queue_push_tail(&k->held, got);
  }
  if (m->held)
    atomic_fetch_sub(&k->queued, (gint64)m->len);
  gboolean ok = m->len == len;
  if (ok) {
    if (len)
      memcpy(data, m->data, len);
  } else if (m->len == 0) {
    tp_transport_cut_marker(tag, to, from, err);
  } else {
    char name[48];
    tp_tag_name(t, tag, name, sizeof name);
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d: message %s from stage %d has %zu bytes, expected %zu",
                to + 1, name, from + 1, m->len, len);
  }
  g_free(m);
  return ok;
}

static void local_abort(TpTransport *t, const char *reason)
{
  Local *l = (Local *)t;
  g_mutex_lock(&l->lock);
  if (!l->reason)
    l->reason = g_strdup(reason ? reason : "aborted");
  g_mutex_unlock(&l->lock);
  if (g_atomic_int_compare_and_exchange(&l->aborted, 0, 1))
    for (int i = 0; i < 2 * (t->W - 1); i++)
      g_async_queue_push(l->link[i].q, &wake_up);
}

static void local_stats(TpTransport *t, int from, int to, TpLinkStats *out)
{
  Link *k = link_of((Local *)t, from, to);
  memset(out, 0, sizeof *out);
  if (!k)
    return;
  g_mutex_lock(&k->lock);
  *out = k->stats;
  g_mutex_unlock(&k->lock);
}

static void msg_free(gpointer p)
{
  if (p != &wake_up)
    g_free(p);
}

static void local_free(TpTransport *t)
{
  Local *l = (Local *)t;
  for (int i = 0; i < 2 * (t->W - 1); i++) {
    Link *k = &l->link[i];
    gpointer m;
    while ((m = g_async_queue_try_pop(k->q)))
      msg_free(m);
    g_async_queue_unref(k->q);
    g_queue_clear_full(&k->held, msg_free);
    g_mutex_clear(&k->lock);
  }
  g_mutex_clear(&l->lock);
  g_free(l->reason);
  g_free(l->link);
  g_free(l);
}

TpTransport *tp_local_new(int W, int N, double timeout_s)
{
  g_return_val_if_fail(W >= 1 && N >= 1 && timeout_s >= 0, NULL);
  Local *l = g_new0(Local, 1);
  l->base = (TpTransport){
    .name = "local",
    .W = W,
    .N = N,
    .timeout_s = timeout_s,
    .in_process = TRUE,
    .send = local_send,
    .recv = local_recv,
    .abort = local_abort,
    .stats = local_stats,
    .free = local_free,
    .send_borrowed = NULL, /* sends copy */
    .queued = local_queued,
  };
  l->link = g_new0(Link, MAX(2 * (W - 1), 1));
  for (int i = 0; i < 2 * (W - 1); i++) {
    l->link[i].q = g_async_queue_new();
    g_queue_init(&l->link[i].held);
    g_mutex_init(&l->link[i].lock);
  }
  g_mutex_init(&l->lock);
  return &l->base;
}
