/* tp_cluster.h — device and cluster descriptions (models/devices/NAME.device,
 * models/clusters/NAME.cluster) for the analytic cost model. */
#ifndef TP_CLUSTER_H
#define TP_CLUSTER_H

#include <glib.h>

typedef struct {
  char *id;          /* file base name, e.g. quadro-rtx-6000 */
  char *name;        /* e.g. "Quadro RTX 6000" */
  double flops;      /* peak FP32 FLOP/s */
  double flops16;    /* peak FLOP/s of 16-bit (bf16, fp16) matrix products; 0: not given (flops) */
  double memory;     /* bytes */
  double bandwidth;  /* memory bytes/s */
  double efficiency; /* fraction of peak reached by training layers, (0, 1] */
} TpDevice;

/* The FLOP/s a 16-bit model's layers are timed at: flops16 where the device file gives it. */
static inline double tp_device_flops16(const TpDevice *d) { return d->flops16 > 0 ? d->flops16 : d->flops; }

typedef struct {
  char *name, *source;
  int n;             /* workers (devices in stage order); 1 = all stages share the one device */
  TpDevice *dev;
  double link_bandwidth, link_latency;
  double link_eager_limit; /* links carried by MPI: its eager limit (common/tp_eager.h); 0: none */
  /* nodes, for data and tensor parallelism: GPUs per node (the link_* figures are those between two
   * GPUs of a node), and each node's network to the others: bytes/s of all its interfaces together
   * and latency.  Not given: a node per worker, its network the link. */
  int gpus_per_node;
  double network_bandwidth, network_latency;
  gboolean any_count; /* gpus_per_node given with one device: as many GPUs of it as a run asks for
                         (tp_cluster_expand), not one shared by every stage */
} TpCluster;

/* A path (contains '/' or ends in .cluster) or a name looked up as NAME.cluster in
 * $TP_CLUSTERS_DIR, the installed data, the source tree.  Devices are looked up by name next to
 * the cluster file (../devices/NAME.device), then in $TP_DEVICES_DIR, the installed data, the tree. */
TpCluster *tp_cluster_load(const char *name_or_path, GError **err);
/* The clusters shipped in models/clusters, by name. */
#define TP_CLUSTERS_SHIPPED "A, B, C, h200, a100x8, h100x8, dgx-a100, dgx-h100"
/* The file tp_cluster_load reads for name_or_path (newly allocated); NULL for a name found nowhere. */
char *tp_cluster_path(const char *name_or_path);
TpDevice *tp_device_load(const char *path, GError **err);
void tp_device_clear(TpDevice *d);
void tp_cluster_free(TpCluster *c);
/* A cluster of any_count: n workers of its device (no change for fewer than it has, or otherwise). */
void tp_cluster_expand(TpCluster *c, int n);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpCluster, tp_cluster_free)

/* The device stage s runs on when the pipeline has W stages. */
static inline int tp_cluster_device_of(const TpCluster *c, int s) { return c->n == 1 ? 0 : s; }

#endif
