/* tp_plan_parallel.c — data and tensor parallelism in plan's search (tp_plan.h): which replicas D and
 * tensor-parallel splits T a candidate takes, and how they change its costs.  D divides the batch
 * (each replica runs batch / D samples); T is a power of two up to the cluster's GPUs per node (a
 * split stays inside a node's links) and TP_PLAN_MAX_TENSOR, for which a split model was made; and
 * D x T x W stays within the devices. */
#include "tp_plan.h"
#include "tp_layout.h"

int tp_plan_pairs(const TpPlanRequest *r, long B, int *D, int *T)
{
  if (r->devices <= 0) {
    D[0] = MAX(r->data_parallel, 1), T[0] = MAX(r->tensor_parallel, 1);
    return B % D[0] == 0;
  }
  int n = 0, node = r->cluster ? MAX(r->cluster->gpus_per_node, 1) : 1;
  for (int t = 1; t <= MIN(node, TP_PLAN_MAX_TENSOR); t *= 2) {
    if (!r->by_tensor[t] || (r->cluster && !tp_layout_check(r->cluster, 1, 1, t, NULL)))
      continue;
    for (int d = 1; (long)d * t * MAX(r->w0, 1) <= r->devices && n < TP_PLAN_MAX_PAIRS; d++)
      if (B % d == 0)
        D[n] = d, T[n++] = t;
  }
  return n;
}

int tp_plan_max_width(const TpPlanRequest *r, int D, int T)
{
  int w = r->devices > 0 ? MIN(r->w1, r->devices / (D * T)) : r->w1;
  /* a list of devices: replicas and tensor ranks each on a GPU of their own */
  return r->cluster && !r->cluster->any_count && D * T > 1 ? MIN(w, r->cluster->n / (D * T)) : w;
}

const TpModel *tp_plan_model(const TpPlanRequest *r, const TpPlan *p)
{
  return p->T > 1 && p->T <= TP_PLAN_MAX_TENSOR && r->by_tensor[p->T] ? r->by_tensor[p->T] : r->model;
}

long tp_plan_replica_batch(const TpPlan *p) { return p->batch / MAX(p->D, 1); }


void tp_plan_replicas(const TpPlanRequest *r, const TpPlan *p, TpCost *c)
{
  if (r->cluster)
    tp_layout_links(c, r->cluster, MAX(p->D, 1), MAX(p->T, 1), TP_MAP_NONE, c->W);
  tp_cost_data_parallel(c, p->D, r->overlap_allreduce);
}
