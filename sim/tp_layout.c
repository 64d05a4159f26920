/* tp_layout.c — placing replicas, stages and tensor ranks on a cluster's nodes (tp_layout.h). */
#include "tp_layout.h"
#include "tp_error.h"

double tp_layout_network_share(const TpCluster *c, int gpus)
{
  int gpn = MAX(c->gpus_per_node, 1);
  double share = c->network_bandwidth / MIN(gpus, gpn);
  return c->link_bandwidth > 0 ? MIN(share, c->link_bandwidth) : share;
}

gboolean tp_layout_nodes_differ(const TpCluster *c)
{
  return c->network_bandwidth != c->link_bandwidth || c->network_latency != c->link_latency;
}

gboolean tp_layout_check(const TpCluster *c, int D, int R, int T, GError **err)
{
  long gpus = (long)D * R * T;
  if (T > 1 && tp_layout_nodes_differ(c) && c->gpus_per_node % T) {
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

void tp_layout_links(TpCost *cost, const TpCluster *c, int D, int T, TpChunkMap map, int R)
{
  int W = cost->W, gpn = MAX(c->gpus_per_node, 1);
  long group = (long)D * T; /* a worker's GPUs */
  if (group <= 1 && !tp_layout_nodes_differ(c)) /* one pipeline, whose links are all alike */
    return;
  if (map == TP_MAP_NONE || R < 1 || W % R)
    R = W;
  TpDataParallel *dp = NULL;
  if (group > 1) {
    if (!cost->dp)
      cost->dp = tp_dp_new(W);
    dp = cost->dp;
  }
  double *lat = g_new(double, R), *bw = g_new(double, R);
  int *link = g_new(int, R), id = -1;
  for (int r = 0; r < R; r++) { /* worker r: GPUs r·group … r·group + group − 1 */
    long first = r * group, last = first + group - 1;
    gboolean inside = first / gpn == last / gpn;
    lat[r] = inside ? c->link_latency : c->network_latency;
    bw[r] = inside ? c->link_bandwidth : tp_layout_network_share(c, (int)MIN(group, gpn));
    /* across nodes, a worker shares the network of a node it has in common with the worker before */
    link[r] = r > 0 && !inside && (first - 1) / gpn == first / gpn ? id : ++id;
  }
  for (int s = 0; s < W; s++) { /* a stage on its worker's GPUs (a worker's chunks on the same ones) */
    int r = R == W ? s : tp_chunk_map_rank(map, R, s);
    int r1 = s + 1 >= W ? r : R == W ? s + 1 : tp_chunk_map_rank(map, R, s + 1);
    if (dp)
      dp->latency[s] = lat[r], dp->bandwidth[s] = bw[r], dp->link[s] = link[r];
    if (r1 != r && r * group / gpn != r1 * group / gpn) /* the next stage is on another node */
      cost->link[s] = (TpLinkCost){ .latency = c->network_latency, .bandwidth = tp_layout_network_share(c, (int)MIN(group, gpn)),
                                    .eager_limit = cost->link[s].eager_limit };
  }
  if (dp)
    tp_dp_update_links(dp);
  g_free(lat), g_free(bw), g_free(link);
}
