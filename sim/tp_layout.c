/* tp_layout.c — placing replicas, stages and tensor ranks on a cluster's nodes (tp_layout.h). */
#include "tp_layout.h"
#include "tp_error.h"

double tp_layout_network_share(const TpCluster *c, int gpus)
{
  int gpn = MAX(c->gpus_per_node, 1);
  double share = c->network_bandwidth / MIN(gpus, gpn);
  return c->link_bandwidth > 0 ? MIN(share, c->link_bandwidth) : share;
}

gboolean tp_layout_check(const TpCluster *c, int D, int R, int T, GError **err)
{
  long gpus = (long)D * R * T;
  gboolean nodes_differ = c->network_bandwidth != c->link_bandwidth || c->network_latency != c->link_latency;
  if (T > 1 && nodes_differ && c->gpus_per_node % T) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--tensor-parallel %d: cluster %s has %d GPU%s a node, and a "
                "tensor-parallel group stays within a node (T divides the GPUs per node)", T, c->name,
                c->gpus_per_node, c->gpus_per_node == 1 ? "" : "s");
    return FALSE;
  }
  if (!c->any_count && (long)D * T > 1 && gpus > c->n) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%d replicas x %d stages x %d-way blocks need %ld GPUs, and cluster "
                "%s has %d (a cluster of nodes, such as dgx-a100, has any count)", D, R, T, gpus, c->name, c->n);
    return FALSE;
  }
  return TRUE;
}

void tp_layout_links(TpCost *cost, const TpCluster *c, int D, int T)
{
  int W = cost->W, gpn = MAX(c->gpus_per_node, 1);
  long group = (long)D * T; /* a stage's GPUs */
  if (group <= 1)
    return;
  if (!cost->dp)
    cost->dp = tp_dp_new(W);
  TpDataParallel *dp = cost->dp;
  int link = -1;
  for (int s = 0; s < W; s++) {
    long first = s * group, last = first + group - 1;
    gboolean inside = first / gpn == last / gpn;
    dp->latency[s] = inside ? c->link_latency : c->network_latency;
    dp->bandwidth[s] = inside ? c->link_bandwidth : tp_layout_network_share(c, (int)MIN(group, gpn));
    /* across nodes, a stage shares the network of a node it has in common with the stage before */
    gboolean shares = s > 0 && !inside && dp->link[s - 1] == link && (first - 1) / gpn == first / gpn;
    dp->link[s] = shares ? link : ++link;
    if (s + 1 < W && (first / gpn != (first + group) / gpn)) /* the next stage is on another node */
      cost->link[s] = (TpLinkCost){ .latency = c->network_latency, .bandwidth = tp_layout_network_share(c, (int)MIN(group, gpn)),
                                    .eager_limit = cost->link[s].eager_limit };
  }
  tp_dp_update_links(dp);
}
