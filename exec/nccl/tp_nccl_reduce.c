/* tp_nccl_reduce.c — data parallelism's reduction with NCCL (exec/tp_reduce.h, tp_nccl.h): the
 * D·W ranks split by stage over MPI, one NCCL communicator per stage over its D replicas, joined on
 * the first reduction on the GPU that holds the gradient; each reduction an in-place ncclAllReduce
 * with ncclAvg on a stream of its own (a gradient in host memory through a device copy), waited for by polling (the stream, NCCL's asynchronous error,
 * this reduction's abort) at most timeout_s, after which the communicator is aborted. */
#include "config.h"
#include "tp_nccl_priv.h"
#include "tp_reduce.h"

#define TP_NCCLR_CUDA(call, err) TP_GPU_CUDA("nccl all-reduce", call, err)
#define TP_NCCLR_CALL(call, comm, err) TP_GPU_NCCL("nccl all-reduce", call, comm, err)

typedef struct {
  TpReduce base;
  int replica, device;  /* device: -1 until the first reduction joins the communicator */
  double timeout_s;
  ncclUniqueId id;      /* the stage's communicator, made by its first replica */
  ncclComm_t comm;
  cudaStream_t stream;
  gint aborted;
  GMutex lock;
  char *why;            /* the abort's reason (lock) */
  float *buf;           /* a host gradient's copy on the GPU (cap floats) */
  size_t cap;
} NcclReduce;

/* The communicator on GPU device (the first call: collective over the stage's replicas). */
static gboolean join(NcclReduce *r, int device, GError **err)
{
  TP_NCCLR_CUDA(cudaSetDevice(device), err);
  TP_NCCLR_CUDA(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking), err);
  TP_NCCLR_CALL(ncclCommInitRank(&r->comm, r->base.D, r->id, r->replica), NULL, err);
  r->device = device;
  return TRUE;
}

/* Where grad lies: *on_gpu and its device, or host memory (the device then the current one). */
static gboolean locate(const float *grad, gboolean *on_gpu, int *device, GError **err)
{
  struct cudaPointerAttributes a;
  TP_NCCLR_CUDA(cudaPointerGetAttributes(&a, grad), err);
  *on_gpu = a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
  if (*on_gpu)
    *device = a.device;
  else
    TP_NCCLR_CUDA(cudaGetDevice(device), err);
  return TRUE;
}

/* A device buffer of n floats for a gradient in host memory, the reduction's own (kept). */
static gboolean scratch(NcclReduce *r, size_t n, GError **err)
{
  if (r->cap >= n)
    return TRUE;
  if (r->buf)
    TP_NCCLR_CUDA(cudaFree(r->buf), err);
  r->buf = NULL, r->cap = 0;
  TP_NCCLR_CUDA(cudaMalloc((void **)&r->buf, MAX(n, 1) * sizeof(float)), err);
  r->cap = n;
  return TRUE;
}

/* Why a reduction on the stream must stop waiting (q: the stream's state), or NULL to go on. */
static const char *why_stop(NcclReduce *r, cudaError_t q, gint64 deadline)
{
  ncclResult_t async = ncclSuccess;
  if (q != cudaErrorNotReady)
    return cudaGetErrorString(q);
  if (ncclCommGetAsyncError(r->comm, &async) != ncclSuccess || (async != ncclSuccess && async != ncclInProgress))
    return ncclGetErrorString(async);
  if (g_atomic_int_get(&r->aborted))
    return "aborted";
  return g_get_monotonic_time() >= deadline ? "timed out (another replica is dead or stuck)" : NULL;
}

/* Wait for the stream: FALSE with err (and the communicator aborted) on an error, an abort or the
 * timeout. */
static gboolean wait_for(NcclReduce *r, int stage, long mb, GError **err)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)(r->timeout_s * G_USEC_PER_SEC);
  gulong nap = 10;
  for (;;) {
    cudaError_t q = cudaStreamQuery(r->stream);
    if (q == cudaSuccess)
      return TRUE;
    const char *what = why_stop(r, q, deadline);
    if (what) {
      (void)cudaGetLastError();
      g_mutex_lock(&r->lock);
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d, replica %d: the NCCL all-reduce of the gradient of "
                  "mini-batch %ld %s%s%s", stage + 1, r->replica + 1, mb, what, r->why ? ": " : "", r->why ? r->why : "");
      g_mutex_unlock(&r->lock);
      g_atomic_int_set(&r->aborted, 1);
      ncclCommAbort(r->comm);
      r->comm = NULL;
      return FALSE;
    }
    g_usleep(nap);
    nap = MIN(nap * 2, 200);
  }
}

static gboolean nccl_mean(TpReduce *base, int stage, int replica, long mb, const TpBackend *be, float *grad, size_t n,
                          GError **err)
{
  NcclReduce *r = (NcclReduce *)base;
  (void)replica, (void)be; /* this rank's replica; be: the gradient's memory, which the pointer tells */
  gboolean on_gpu = FALSE;
  int device = -1;
  if (g_atomic_int_get(&r->aborted) || !locate(grad, &on_gpu, &device, err) || (r->device < 0 && !join(r, device, err))) {
    if (err && !*err)
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d, replica %d: the NCCL all-reduce was aborted%s%s",
                  stage + 1, r->replica + 1, r->why ? ": " : "", r->why ? r->why : "");
    return FALSE;
  }
  TP_NCCLR_CUDA(cudaSetDevice(r->device), err);
  float *x = grad; /* in host memory (batchnorm's statistics): reduced in a copy on the GPU */
  if (!on_gpu) {
    if (!scratch(r, n, err))
      return FALSE;
    x = r->buf;
    TP_NCCLR_CUDA(cudaMemcpyAsync(x, grad, n * sizeof(float), cudaMemcpyHostToDevice, r->stream), err);
  }
  TP_NCCLR_CALL(ncclAllReduce(x, x, n, ncclFloat, ncclAvg, r->comm, r->stream), r->comm, err);
  if (!on_gpu)
    TP_NCCLR_CUDA(cudaMemcpyAsync(grad, x, n * sizeof(float), cudaMemcpyDeviceToHost, r->stream), err);
  return wait_for(r, stage, mb, err);
}

static void nccl_abort(TpReduce *base, const char *why)
{
  NcclReduce *r = (NcclReduce *)base;
  g_mutex_lock(&r->lock);
  if (!r->why)
    r->why = g_strdup(why);
  g_mutex_unlock(&r->lock);
  g_atomic_int_set(&r->aborted, 1); /* a waiting reduction aborts the communicator */
}

static void nccl_reduce_free(TpReduce *base)
{
  NcclReduce *r = (NcclReduce *)base;
  if (r->comm)
    (void)(g_atomic_int_get(&r->aborted) ? ncclCommAbort(r->comm) : ncclCommDestroy(r->comm));
  if (r->stream)
    TP_GPU_CUDA_LOG("nccl all-reduce", cudaStreamDestroy(r->stream));
  if (r->buf)
    TP_GPU_CUDA_LOG("nccl all-reduce", cudaFree(r->buf));
  g_mutex_clear(&r->lock);
  g_free(r->why);
  g_free(r);
}

static const TpReduceIface nccl_iface = { .mean = nccl_mean, .abort = nccl_abort, .free = nccl_reduce_free };

TpReduce *tp_nccl_reduce_new(int replicas, double timeout_s, GError **err)
{
  int size = 0, rank = 0, inited = 0;
  if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited || MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS ||
      MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || replicas < 1 || size % replicas) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "nccl all-reduce: MPI is not started, or its %d ranks are not "
                "%d replicas' stages", size, replicas);
    return NULL;
  }
  int W = size / replicas;
  NcclReduce *r = g_new0(NcclReduce, 1);
  *r = (NcclReduce){ .base = { .iface = &nccl_iface, .D = replicas }, .replica = rank / W, .device = -1,
                     .timeout_s = MAX(timeout_s, 1.0) };
  g_mutex_init(&r->lock);
  MPI_Comm stage = MPI_COMM_NULL;
  struct {
    ncclUniqueId id;
    int made; /* the first replica's ncclGetUniqueId, for every replica to know */
  } boot = { .made = ncclSuccess };
  if (r->replica == 0)
    boot.made = ncclGetUniqueId(&boot.id);
  gboolean ok = MPI_Comm_split(MPI_COMM_WORLD, rank % W, r->replica, &stage) == MPI_SUCCESS &&
                MPI_Bcast(&boot, (int)sizeof boot, MPI_BYTE, 0, stage) == MPI_SUCCESS;
  if (stage != MPI_COMM_NULL)
    ok = TP_GPU_MPI_TRY(MPI_Comm_free(&stage)) && ok;
  if (!ok || boot.made != ncclSuccess) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d: cannot make the NCCL communicator of its stage's %d "
                "replicas: %s", rank, replicas, ok ? ncclGetErrorString(boot.made) : "MPI failed");
    nccl_reduce_free(&r->base);
    return NULL;
  }
  r->id = boot.id;
  return &r->base;
}
