/* tp_nccl_priv.h — what the NCCL transport's files share (tp_nccl_boot.c: start-up and shutdown;
 * tp_nccl.c: send, receive, abort): its state, and the checking macros that turn a failed CUDA,
 * NCCL or MPI call into a TP_ERROR_RUNTIME carrying file and line. */
#ifndef TP_NCCL_PRIV_H
#define TP_NCCL_PRIV_H

#include "tp_error.h"
#include "tp_nccl.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

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

#define TP_NCCL_FAIL(err, what, detail)                                                               \
  g_set_error((err), TP_ERROR, TP_ERROR_RUNTIME, "nccl transport: %s:%d: %s: %s", __FILE__, __LINE__, \
              (what), (detail))

/* Run `call` (a cudaError_t expression); on failure set *err and return FALSE from the caller. */
#define TP_NCCL_CUDA(call, err)                                                                       \
  do {                                                                                                \
    cudaError_t tp_rc_ = (call);                                                                      \
    if (tp_rc_ != cudaSuccess) {                                                                      \
      TP_NCCL_FAIL(err, #call, cudaGetErrorString(tp_rc_));                                           \
      return FALSE;                                                                                   \
    }                                                                                                 \
  } while (0)

/* The same for an ncclResult_t expression (NCCL's last error text when it has one). */
#define TP_NCCL_CALL(call, comm, err)                                                                 \
  do {                                                                                                \
    ncclResult_t tp_rc_ = (call);                                                                     \
    if (tp_rc_ != ncclSuccess) {                                                                      \
      const char *tp_last_ = ncclGetLastError(comm);                                                  \
      g_set_error((err), TP_ERROR, TP_ERROR_RUNTIME, "nccl transport: %s:%d: %s: %s%s%s", __FILE__,   \
                  __LINE__, #call, ncclGetErrorString(tp_rc_), tp_last_ && *tp_last_ ? ": " : "",      \
                  tp_last_ ? tp_last_ : "");                                                          \
      return FALSE;                                                                                   \
    }                                                                                                 \
  } while (0)

/* The same for an MPI call's return code. */
#define TP_NCCL_MPI(call, err)                                                                        \
  do {                                                                                                \
    int tp_rc_ = (call);                                                                              \
    if (tp_rc_ != MPI_SUCCESS) {                                                                      \
      char tp_msg_[MPI_MAX_ERROR_STRING];                                                             \
      int tp_n_ = 0;                                                                                  \
      if (MPI_Error_string(tp_rc_, tp_msg_, &tp_n_) != MPI_SUCCESS)                                  \
        g_snprintf(tp_msg_, sizeof tp_msg_, "MPI error %d", tp_rc_);                                  \
      TP_NCCL_FAIL(err, #call, tp_msg_);                                                              \
      return FALSE;                                                                                   \
    }                                                                                                 \
  } while (0)

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
