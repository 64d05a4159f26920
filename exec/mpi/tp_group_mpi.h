/* tp_group_mpi.h — the group (exec/tp_group.h) of a run with one MPI rank per stage: MPI started
 * and ended, its collectives over this rank's MPI transport, the stages' links over MPI or, for GPU
 * stages, over a transport of their own (NCCL). */
#ifndef TP_GROUP_MPI_H
#define TP_GROUP_MPI_H

#include "tp_group.h"

/* The stage links of a rank whose stage is on a GPU (tp_nccl_new): N micro-batches, receives
 * waiting at most timeout_s, the rank's GPU. */
typedef TpTransport *(*TpGpuLinksFn)(int N, double timeout_s, const char *gpu, GError **err);

/* Data parallelism's reduction among the replicas of GPU stages (tp_nccl_reduce_new): D replicas,
 * waits at most timeout_s. */
typedef TpReduce *(*TpGpuReduceFn)(int replicas, double timeout_s, GError **err);

/* MPI started (MPI_Init and the communicators bounded by peer_timeout_s, which every wait for
 * another rank keeps) and this rank's group: NULL and err when MPI cannot start; a rank that
 * cannot make its transport ends the job with its line.  gpu_links: NULL where MPI carries the
 * stages' messages, else what carries them between GPUs (MPI keeps the rest), and gpu_reduce the
 * replicas' reduction there (NULL: MPI's).  replicas: data parallelism's D (rank r: replica r / W,
 * stage r mod W; 1: one pipeline). */
TpGroup *tp_group_mpi_start(double peer_timeout_s, TpGpuLinksFn gpu_links, TpGpuReduceFn gpu_reduce, int replicas,
                            GError **err);

#endif
