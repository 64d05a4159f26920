/* tp_parallel.c — contiguous ranges of stages on threads (tp_parallel.h). */
#include "tp_parallel.h"

int tp_parallel_parts(long long ops, int W)
{
  if (ops < 200000 || W < 16)
    return 1;
  return (int)MIN(MIN(g_get_num_processors(), (guint)TP_PARALLEL_MAX), (guint)W / 8);
}

typedef struct {
  TpRangeFn fn;
  void *ctx;
  int part, lo, hi;
} Range;

static gpointer range_main(gpointer data)
{
  Range *r = data;
  r->fn(r->ctx, r->part, r->lo, r->hi);
  return NULL;
}

void tp_parallel_ranges(int n, int parts, TpRangeFn fn, void *ctx)
{
  parts = CLAMP(parts, 1, TP_PARALLEL_MAX);
  Range r[TP_PARALLEL_MAX];
  GThread *t[TP_PARALLEL_MAX] = { NULL };
  for (int p = 0; p < parts; p++)
    r[p] = (Range){ .fn = fn, .ctx = ctx, .part = p, .lo = (int)((long long)p * n / parts),
                    .hi = (int)((long long)(p + 1) * n / parts) };
  for (int p = 1; p < parts; p++)
    t[p] = g_thread_try_new("stages", range_main, &r[p], NULL);
  range_main(&r[0]);
  for (int p = 1; p < parts; p++)
    if (t[p])
      g_thread_join(t[p]);
    else
      range_main(&r[p]);
}
