/* tp_nccl_priv.h — what the NCCL transport's files share (tp_nccl_boot.c: start-up and shutdown;
 * tp_nccl.c: send, receive, abort): its state, and its checking macros (tp_gpu_check.h's, naming
 * the transport). */
#ifndef TP_NCCL_PRIV_H
#define TP_NCCL_PRIV_H

#include "tp_error.h"
#include "tp_nccl.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include "tp_gpu_check.h"

enum { TP_NCCL_TAG_HDR = 1, TP_NCCL_TAG_ABORT = 2 };

/* A send in flight: its header's MPI request, its payload's device copy and the event recorded
 * after its ncclSend; reused once both are done. */
typedef struct {
  MPI_Request req;
  TpMsgHdr hdr;
  void *buf;
  size_t cap;
  cudaEvent_t done;
} TpNcclSend;

typedef struct {
  TpTransport base;
  int rank, device;
  ncclComm_t comm[TP_NCCL_N_COMMS];
  cudaStream_t stream[TP_NCCL_N_COMMS]; /* one per communicator */
  cudaStream_t copy;                   /* payload copies into and out of the transport's buffers */
  cudaEvent_t recv_done;
  gboolean pools;                      /* the device has stream-ordered allocation (tp_nccl.c) */
  MPI_Comm mpi;                        /* headers and abort notices (a duplicate of MPI_COMM_WORLD) */
  GMutex lock;                         /* everything below, and every MPI call */
  GPtrArray *pending, *spare;          /* TpNcclSend */
  GQueue held[2];                      /* TpNcclHeld from rank-1 (forward), from rank+1 (backward) */
  TpLinkStats sent[2];                 /* to rank-1, to rank+1 */
  MPI_Request *abort_req;              /* abort notices in flight, one per other rank */
  char *abort_msg;
  gint aborted;
  char *reason;
} TpNccl;

/* The checks of tp_gpu_check.h, naming the transport. */
#define TP_NCCL_FAIL(err, what, detail) TP_GPU_FAIL(err, "nccl transport", what, detail)
#define TP_NCCL_CUDA(call, err) TP_GPU_CUDA("nccl transport", call, err)
#define TP_NCCL_CUDA_LOG(call) TP_GPU_CUDA_LOG("nccl transport", call)
#define TP_NCCL_CALL(call, comm, err) TP_GPU_NCCL("nccl transport", call, comm, err)
#define TP_NCCL_MPI(call, err) TP_GPU_MPI("nccl transport", call, err)

/* Poll the abort notices of other ranks (lock held); TRUE when the run is aborted. */
gboolean tp_nccl_poll_abort(TpNccl *m);

/* The send and receive functions of the TpTransport (tp_nccl.c). */
void tp_nccl_fill(TpNccl *m);

/* Wait for the pending sends to complete, at most until deadline (monotonic µs); FALSE on
 * timeout, abort or error (lock held). */
gboolean tp_nccl_drain(TpNccl *m, gint64 deadline, GError **err);

/* Free a send record or a held message (their device buffers included). */
void tp_nccl_send_free(gpointer p);
void tp_nccl_held_free(gpointer p);

#endif
