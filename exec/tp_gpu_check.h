/* tp_gpu_check.h — the one set of checking macros of the GPU code (the cuda backend, exec/cuda/; the
 * NCCL transport, exec/nccl/): a failed CUDA, cuBLAS, NCCL or MPI call becomes a TP_ERROR_RUNTIME
 * "WHO: FILE:LINE: CALL: the library's own words" and returns FALSE from the caller.  A failed CUDA
 * call's error is also taken off the thread's last error (cudaGetLastError), so that it is reported
 * once, here, and not again by a later kernel launch under that kernel's name.  TP_GPU_CUDA_LOG is
 * for the few calls that have nobody to report to (releases): one line on stderr, the error cleared.
 * TP_GPU_MPI_TRY is for MPI's clean-up and cancel paths, where the run has already ended or failed
 * and a second line would hide the first: the call's outcome as a gboolean for the caller to act on,
 * a failure logged (g_debug, G_MESSAGES_DEBUG=all shows it) with file, line and MPI's own words.
 * Include it after the headers of the libraries whose macros are used. */
#ifndef TP_GPU_CHECK_H
#define TP_GPU_CHECK_H

#include "tp_error.h"

#include <glib.h>

#define TP_GPU_FAIL(err, who, what, detail)                                                           \
  g_set_error((err), TP_ERROR, TP_ERROR_RUNTIME, "%s: %s:%d: %s: %s", (who), __FILE__, __LINE__, (what), \
              (detail))

/* a cudaError_t expression */
#define TP_GPU_CUDA(who, call, err)                                                                   \
  do {                                                                                                \
    cudaError_t tp_gpu_rc_ = (call);                                                                  \
    if (tp_gpu_rc_ != cudaSuccess) {                                                                  \
      (void)cudaGetLastError();                                                                       \
      TP_GPU_FAIL(err, who, #call, cudaGetErrorString(tp_gpu_rc_));                                   \
      return FALSE;                                                                                   \
    }                                                                                                 \
  } while (0)

/* a cudaError_t expression whose failure nobody can be told of: stderr, and the error cleared */
#define TP_GPU_CUDA_LOG(who, call)                                                                    \
  do {                                                                                                \
    cudaError_t tp_gpu_rc_ = (call);                                                                  \
    if (tp_gpu_rc_ != cudaSuccess) {                                                                  \
      (void)cudaGetLastError();                                                                       \
      g_printerr("%s: %s:%d: %s: %s\n", (who), __FILE__, __LINE__, #call, cudaGetErrorString(tp_gpu_rc_)); \
    }                                                                                                 \
  } while (0)

/* a cublasStatus_t expression */
#define TP_GPU_CUBLAS(who, call, err)                                                                 \
  do {                                                                                                \
    cublasStatus_t tp_gpu_rc_ = (call);                                                               \
    if (tp_gpu_rc_ != CUBLAS_STATUS_SUCCESS) {                                                        \
      TP_GPU_FAIL(err, who, #call, cublasGetStatusString(tp_gpu_rc_));                                \
      return FALSE;                                                                                   \
    }                                                                                                 \
  } while (0)

/* an ncclResult_t expression on communicator comm (NCCL's last error text when it has one) */
#define TP_GPU_NCCL(who, call, comm, err)                                                             \
  do {                                                                                                \
    ncclResult_t tp_gpu_rc_ = (call);                                                                 \
    if (tp_gpu_rc_ != ncclSuccess) {                                                                  \
      const char *tp_gpu_last_ = ncclGetLastError(comm);                                              \
      g_set_error((err), TP_ERROR, TP_ERROR_RUNTIME, "%s: %s:%d: %s: %s%s%s", (who), __FILE__, __LINE__, \
                  #call, ncclGetErrorString(tp_gpu_rc_), tp_gpu_last_ && *tp_gpu_last_ ? ": " : "",    \
                  tp_gpu_last_ ? tp_gpu_last_ : "");                                                  \
      return FALSE;                                                                                   \
    }                                                                                                 \
  } while (0)

/* an MPI call's return code */
#define TP_GPU_MPI(who, call, err)                                                                    \
  do {                                                                                                \
    int tp_gpu_rc_ = (call);                                                                          \
    if (tp_gpu_rc_ != MPI_SUCCESS) {                                                                  \
      char tp_gpu_msg_[MPI_MAX_ERROR_STRING];                                                         \
      int tp_gpu_n_ = 0;                                                                              \
      if (MPI_Error_string(tp_gpu_rc_, tp_gpu_msg_, &tp_gpu_n_) != MPI_SUCCESS)                       \
        g_snprintf(tp_gpu_msg_, sizeof tp_gpu_msg_, "MPI error %d", tp_gpu_rc_);                      \
      TP_GPU_FAIL(err, who, #call, tp_gpu_msg_);                                                      \
      return FALSE;                                                                                   \
    }                                                                                                 \
  } while (0)

#ifdef MPI_VERSION
static inline gboolean tp_gpu_mpi_try_(int rc, const char *call, const char *file, int line)
{
  if (rc == MPI_SUCCESS)
    return TRUE;
  char msg[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(rc, msg, &n) != MPI_SUCCESS)
    g_snprintf(msg, sizeof msg, "MPI error %d", rc);
  g_debug("%s:%d: %s: %s", file, line, call, msg);
  return FALSE;
}
/* an MPI call on a clean-up or cancel path: TRUE when it succeeded */
#define TP_GPU_MPI_TRY(call) tp_gpu_mpi_try_((call), #call, __FILE__, __LINE__)
#endif

#endif
