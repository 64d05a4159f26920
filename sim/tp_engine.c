/* tp_engine.c — event heap with a total order on events, and the event loop. */
#include "tp_engine.h"

static inline gboolean before(const TpEvent *a, const TpEvent *b)
{
  return a->time < b->time || (a->time == b->time && a->key < b->key);
}

void tp_engine_init(TpEngine *e, int n_targets)
{
  e->cap = 64;
  e->heap = g_new(TpEvent, e->cap);
  e->len = 0;
  e->seq = 0;
  e->now = 0;
  e->n_targets = n_targets;
  e->dirty = g_new0(gboolean, n_targets);
  e->dirty_list = g_new(int, n_targets);
  e->n_dirty = 0;
}

void tp_engine_clear(TpEngine *e)
{
  g_free(e->heap);
  g_free(e->dirty);
  g_free(e->dirty_list);
  e->heap = NULL;
  e->dirty = NULL;
  e->dirty_list = NULL;
  e->len = e->cap = 0;
}

void tp_engine_push(TpEngine *e, double time, uint32_t cls, uint32_t target)
{
  if (e->len == e->cap) {
    e->cap *= 2;
    e->heap = g_renew(TpEvent, e->heap, e->cap);
  }
  TpEvent ev = { time, (uint64_t)cls << 62 | (uint64_t)target << 40 | (e->seq++ & ((1ULL << 40) - 1)) };
  size_t i = e->len++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!before(&ev, &e->heap[p]))
      break;
    e->heap[i] = e->heap[p];
    i = p;
  }
  e->heap[i] = ev;
}

gboolean tp_engine_pop(TpEngine *e, TpEvent *ev)
{
  if (e->len == 0)
    return FALSE;
  *ev = e->heap[0];
  TpEvent last = e->heap[--e->len];
  size_t i = 0, n = e->len;
  /* move the hole down to a leaf along the smaller children, then sift `last` up from there */
  for (size_t c; (c = 2 * i + 1) < n; i = c) {
    if (c + 1 < n && before(&e->heap[c + 1], &e->heap[c]))
      c++;
    e->heap[i] = e->heap[c];
  }
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!before(&last, &e->heap[p]))
      break;
    e->heap[i] = e->heap[p];
    i = p;
  }
  if (n > 0)
    e->heap[i] = last;
  e->now = ev->time;
  return TRUE;
}

/* Let the marked targets try to start, lowest first (the list is short: insertion sort). */
static void start_marked(TpEngine *e, const TpEngineHandlers *h, void *ctx)
{
  int n = e->n_dirty, *d = e->dirty_list;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && d[j - 1] > d[j]; j--) {
      int t = d[j];
      d[j] = d[j - 1];
      d[j - 1] = t;
    }
  int *batch = g_newa(int, n);
  for (int i = 0; i < n; i++)
    batch[i] = d[i], e->dirty[d[i]] = FALSE;
  e->n_dirty = 0;
  for (int i = 0; i < n; i++)
    h->start(ctx, batch[i]);
}

void tp_engine_run(TpEngine *e, const TpEngineHandlers *h, void *ctx)
{
  TpEvent ev;
  for (;;) {
    while (e->len > 0 && e->heap[0].time <= e->now) {
      tp_engine_pop(e, &ev);
      h->commit(ctx, &ev);
    }
    if (e->n_dirty > 0) {
      start_marked(e, h, ctx);
      continue;
    }
    if (e->len == 0)
      break;
    e->now = e->heap[0].time;
  }
}
