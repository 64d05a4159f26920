/* tp_group.c — the group interface's calls, the group of one process, and what is built on the
 * interface alone (the barrier, the size check, the agreement on a step). */
#include "tp_group.h"
#include "tp_error.h"
#include "tp_signal.h"

#include <string.h>

static int single_rank(const TpGroup *g) { (void)g; return 0; }
static int single_size(const TpGroup *g) { (void)g; return 1; }

static gboolean single_gather(TpGroup *g, int root, const void *mine, size_t len, void *all, GError **err)
{
  (void)g, (void)root, (void)err;
  if (all && len)
    memcpy(all, mine, len);
  return TRUE;
}

static gboolean single_broadcast(TpGroup *g, int root, void *buf, size_t len, const char *doing, GError **err)
{
  (void)g, (void)root, (void)buf, (void)len, (void)doing, (void)err;
  return TRUE;
}

static void single_catch_stop(TpGroup *g, void (*note)(int sig))
{
  (void)g;
  tp_signal_catch_stop(note); /* at the next mini-batch, else said */
}

static void single_free(TpGroup *g) { g_free(g); }

static const TpGroupIface single_iface = {
  .transport = "local",
  .rank = single_rank,
  .size = single_size,
  .gather = single_gather,
  .broadcast = single_broadcast,
  .catch_stop = single_catch_stop,
  .free = single_free,
};

TpGroup *tp_group_single_new(void)
{
  TpGroup *g = g_new0(TpGroup, 1);
  g->iface = &single_iface;
  return g;
}

void tp_group_free(TpGroup *g)
{
  if (g)
    g->iface->free(g);
}

int tp_group_rank(const TpGroup *g) { return g->iface->rank(g); }
int tp_group_size(const TpGroup *g) { return g->iface->size(g); }
gboolean tp_group_per_stage(const TpGroup *g) { return g->iface->per_stage; }
gboolean tp_group_links_on_gpus(const TpGroup *g) { return g->iface->links_on_gpus; }
const char *tp_group_transport(const TpGroup *g) { return g->iface->transport; }

gboolean tp_group_gather(TpGroup *g, int root, const void *mine, size_t len, void *all, GError **err)
{
  return g->iface->gather(g, root, mine, len, all, err);
}

gboolean tp_group_broadcast(TpGroup *g, int root, void *buf, size_t len, const char *doing, GError **err)
{
  return g->iface->broadcast(g, root, buf, len, doing, err);
}

gboolean tp_group_barrier(TpGroup *g, GError **err)
{
  gint64 one = 1;
  g_autofree gint64 *all = g_new(gint64, tp_group_size(g));
  return tp_group_gather(g, -1, &one, sizeof one, all, err);
}

gboolean tp_group_measure_links(TpGroup *g, int W, TpGroupLink **links, GError **err)
{
  *links = NULL;
  if (!g->iface->measure_links)
    return TRUE;
  *links = g_new0(TpGroupLink, MAX(W - 1, 1));
  return g->iface->measure_links(g, W, *links, err);
}

gboolean tp_group_check_same(TpGroup *g, const char *text, GError **err)
{
  return !g->iface->check_same || g->iface->check_same(g, text, err);
}

gboolean tp_group_reduce(TpGroup *g, int W, int tie_stage, double timeout_s, TpReduce **r, GError **err)
{
  GError *e = NULL;
  *r = g->iface->reduce ? g->iface->reduce(g, W, tie_stage, timeout_s, &e) : NULL;
  if (!e)
    return TRUE;
  g_propagate_error(err, e);
  return FALSE;
}

gboolean tp_group_check_size(const TpGroup *g, int W, GError **err)
{
  return !g->iface->check_size || g->iface->check_size(g, W, err);
}

gboolean tp_group_stage_links(TpGroup *g, int N, int device, TpTransport **links, GError **err)
{
  *links = NULL;
  return !g->iface->stage_links || (*links = g->iface->stage_links(g, N, device, err)) != NULL;
}

void tp_group_catch_stop(TpGroup *g, void (*note)(int sig)) { g->iface->catch_stop(g, note); }

gboolean tp_group_agree(TpGroup *g, gboolean ok, GError *e, int *status, GError **err)
{
  gint64 mine = ok ? 0 : tp_error_exit_status(e);
  int n = tp_group_size(g), me = tp_group_rank(g);
  g_autofree gint64 *all = g_new(gint64, n);
  GError *ge = NULL;
  *status = 0;
  if (!tp_group_gather(g, -1, &mine, sizeof mine, all, &ge)) {
    tp_group_fail(g, ge->message, 1);
    g_clear_error(&e);
    g_propagate_error(err, ge);
    return FALSE;
  }
  for (int r = 0; r < n; r++)
    if (all[r]) {
      tp_group_end_said(g, r == me); /* its line first: mpirun would cut it off */
      if (r == me) {
        g_propagate_error(err, e);
        return FALSE;
      }
      g_clear_error(&e);
      *status = (int)all[r]; /* rank r says why */
      return FALSE;
    }
  return TRUE;
}

void tp_group_end_said(TpGroup *g, gboolean says)
{
  if (g->iface->end_said)
    g->iface->end_said(g, says);
}

void tp_group_fail(TpGroup *g, const char *line, int status)
{
  if (g->iface->fail)
    g->iface->fail(g, line, status);
}

void tp_group_finish(TpGroup *g)
{
  if (g->iface->finish)
    g->iface->finish(g);
}
