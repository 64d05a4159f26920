/* tp_timeline.c — allocation, wiring and normalisation of a timeline (tp_timeline.h). */
#include "tp_timeline.h"

#include <string.h>

void tp_timeline_wire(TpTimeline *tl)
{
  for (long g = 0; g < tl->n_ops; g++)
    tl->cons[g] = -1;
  for (long g = 0; g < tl->n_ops; g++)
    if (tl->prod[g] >= 0)
      tl->cons[tl->prod[g]] = (int32_t)g;
}

gboolean tp_timeline_init(TpTimeline *tl, const TpSchedule *s, TpIndex *ix, gboolean measured, GError **err)
{
  memset(tl, 0, sizeof *tl);
  tl->s = s;
  if (!ix && !(ix = tp_index_new(s, err)))
    return FALSE;
  tl->ix = ix;
  long n = tl->n_ops = ix->off[s->W];
  tl->start = g_new0(double, n);
  tl->end = g_new0(double, n);
  tl->xend = g_new(double, n);
  tl->xstart = measured ? tl->xend : g_new(double, n);
  tl->prod = ix->prod;
  tl->cons = g_new(int32_t, n);
  if (measured) {
    tl->version = g_new0(int32_t, n);
    tl->latest = g_new0(int32_t, n);
  }
  tp_timeline_wire(tl);
  for (long g = 0; g < n; g++)
    tl->xstart[g] = tl->xend[g] = -1;
  return TRUE;
}

void tp_timeline_clear(TpTimeline *tl)
{
  tp_index_free(tl->ix);
  g_free(tl->start);
  g_free(tl->end);
  if (tl->xstart != tl->xend)
    g_free(tl->xstart);
  if (tl->xend != tl->end)
    g_free(tl->xend);
  g_free(tl->cons);
  g_free(tl->version);
  g_free(tl->latest);
  memset(tl, 0, sizeof *tl);
}

TpTimeline *tp_timeline_new(const TpSchedule *s, gboolean measured, GError **err)
{
  TpTimeline *tl = g_new(TpTimeline, 1);
  if (!tp_timeline_init(tl, s, NULL, measured, err)) {
    g_free(tl);
    return NULL;
  }
  return tl;
}

void tp_timeline_free(TpTimeline *tl)
{
  if (!tl)
    return;
  tp_timeline_clear(tl);
  g_free(tl);
}

void tp_timeline_normalise(TpTimeline *tl)
{
  double lo = G_MAXDOUBLE, span = 0;
  for (long g = 0; g < tl->n_ops; g++)
    lo = MIN(lo, tl->start[g]);
  if (tl->n_ops == 0)
    lo = 0;
  for (long g = 0; g < tl->n_ops; g++) {
    tl->start[g] -= lo;
    tl->end[g] -= lo;
    span = MAX(span, tl->end[g]);
  }
  for (long g = 0; g < tl->n_ops && tl->xend != tl->end; g++)
    if (tl->xstart == tl->xend)
      tl->xend[g] = tl->cons[g] >= 0 ? tl->end[g] : -1;
    else if (tl->cons[g] >= 0)
      tl->xstart[g] -= lo, tl->xend[g] -= lo;
  tl->t0 += lo;
  tl->makespan = span;
}
