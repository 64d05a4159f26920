/* tp_layout.h — where D replicas of a W-stage pipeline whose blocks are split T ways sit on a
 * cluster's nodes, and the links that follows.  Megatron-LM's order: GPU g = t + T(r + D s) for
 * tensor rank t, replica r, stage s, nodes filled in turn (gpus_per_node each).  A stage's D x T GPUs
 * are consecutive: within one node its all-reduce runs on the node's GPU links; across nodes on their
 * network, each GPU of the stage on a node getting an equal share of that node's bandwidth, and stages
 * that share a node share its network: one data-parallel link. */
#ifndef TP_LAYOUT_H
#define TP_LAYOUT_H

#include "tp_cluster.h"
#include "tp_cost.h"
#include "tp_schedule.h"

/* Whether c's network between nodes differs from its GPU link (where it does not, a stage's nodes
 * do not matter). */
gboolean tp_layout_nodes_differ(const TpCluster *c);
/* The data-parallel links of cost (made if it has none) for D replicas, and the pipeline's links
 * where consecutive stages sit on different nodes (a single pipeline on a cluster whose network is
 * its link keeps the cost's links).  Stages are placed by worker: with map (not TP_MAP_NONE)
 * the W stages are chunks of R workers, a worker's chunks on its GPUs, sharing its links. */
void tp_layout_links(TpCost *cost, const TpCluster *c, int D, int T, TpChunkMap map, int R);
/* Bytes/s one GPU of a group of `gpus` sees across nodes: its node's network shared by the group's
 * GPUs there, never more than the link between two GPUs. */
double tp_layout_network_share(const TpCluster *c, int gpus);

/* Whether D replicas of R ranks (stages, or workers of interleaved chunks) of T-way blocks have GPUs
 * on cluster c: a tensor-parallel group within a node where the network between nodes is not the
 * GPU link (T divides gpus_per_node), and on a list of devices (not a node description that grows to
 * any count) a GPU each, D x R x T at most, where one pipeline (D = T = 1) shares them instead.
 * FALSE with err saying which. */
gboolean tp_layout_check(const TpCluster *c, int D, int R, int T, GError **err);

#endif
