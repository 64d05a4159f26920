/* cuda_backend.c — the `cuda` backend: instances (device, stream, cuBLAS handle), device memory,
 * cuBLAS SGEMM on row-major matrices, the interface (one table, shared by every instance) and the
 * module's one exported entry point, tp_cuda_module().
 *
 * Every call of an instance goes to its own stream, in order, so one stage's work never waits for
 * another's; uploads and downloads synchronise that stream (the host buffer is usable on return).
 * cuBLAS is column-major: a row-major matrix is its transpose there, so the row-major product
 * C = op(A)·op(B) is computed as the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ — operands swapped, the
 * transpose flags kept, m and n exchanged. */
#include "config.h"
#include "tp_backend_cuda.h"
#include "tp_cuda.h"

#include <string.h>

static int cuda_device_count(char **why)
{
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess || n <= 0) {
    (void)cudaGetLastError(); /* reported here, not by a later call */
    if (why)
      *why = g_strdup(rc != cudaSuccess ? cudaGetErrorString(rc) : "the CUDA runtime reports 0 devices");
    return 0;
  }
  return n;
}

/* Device memory during a run comes and goes stream-ordered (cudaMallocAsync / cudaFreeAsync on the
 * instance's stream) where the device has memory pools: cudaMalloc and cudaFree may wait for the
 * whole device, which stalls every other stage on it and, under the NCCL transport, can hang two
 * ranks whose sends each wait on the GPU for the other's receive.  An allocation is complete on
 * return (usable from any stream: peer copies, the NCCL transport); a buffer freed must be idle,
 * as the runtime's operations end with their stream synchronised.  Allocations are made on a stream
 * of their own and waited for there: a stage that takes a buffer of its neighbour's instance (a peer
 * message, tp_runtime_msg.c) then waits for that allocation only, not for the neighbour's work. */
static cudaError_t dev_alloc(TpCudaCtx *c, void **p, size_t bytes)
{
  if (!c->pools)
    return cudaMalloc(p, bytes);
  cudaError_t rc = cudaMallocAsync(p, bytes, c->alloc);
  return rc == cudaSuccess ? cudaStreamSynchronize(c->alloc) : rc;
}

static cudaError_t dev_release(TpCudaCtx *c, void *p)
{
  return c->pools ? cudaFreeAsync(p, c->stream) : cudaFree(p);
}

static float *cuda_alloc(const TpBackend *be, size_t n, GError **err)
{
  void *p = NULL;
  if (n > G_MAXSIZE / sizeof(float)) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cuda backend: cannot allocate %zu floats", n);
    return NULL;
  }
  cudaError_t rc = tp_cuda_use(be);
  if (rc == cudaSuccess)
    rc = dev_alloc(tp_cuda_ctx(be), &p, (n ? n : 1) * sizeof(float));
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cuda backend: %s:%d: cannot allocate %zu floats on device %d: %s",
                __FILE__, __LINE__, n, tp_cuda_ctx(be)->device, cudaGetErrorString(rc));
    return NULL;
  }
  return p;
}

/* Nothing to report to: a failure is one line on stderr (the memory is left to the process's end). */
static void cuda_free(const TpBackend *be, float *p)
{
  if (!p)
    return;
  TP_CUDA_LOG(tp_cuda_use(be));
  TP_CUDA_LOG(dev_release(tp_cuda_ctx(be), p));
}

static gboolean cuda_zero(const TpBackend *be, float *p, size_t n, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(float), tp_cuda_stream(be)), err);
  return TRUE;
}

static gboolean cuda_copy(const TpBackend *be, float *dst, const float *src, size_t n, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  if (dst != src && n)
    TP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, tp_cuda_stream(be)), err);
  return TRUE;
}

/* To another stage's instance: on one device a plain device copy, else a peer copy (which CUDA
 * routes over NVLink/PCIe, or through the host where peer access is off). */
static gboolean cuda_copy_peer(const TpBackend *be, float *dst, const TpBackend *dst_be, const float *src, size_t n,
                               GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  if (dst_be->iface != be->iface) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cuda backend: a peer copy to a %s buffer", tp_backend_name(dst_be));
    return FALSE;
  }
  int from = tp_cuda_ctx(be)->device, to = tp_cuda_ctx(dst_be)->device;
  if (!n)
    return TRUE;
  if (from == to)
    TP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, tp_cuda_stream(be)), err);
  else
    TP_CUDA_CHECK(cudaMemcpyPeerAsync(dst, to, src, from, n * sizeof(float), tp_cuda_stream(be)), err);
  return TRUE;
}

static gboolean cuda_upload(const TpBackend *be, float *dst, const float *host, size_t n, GError **err)
{
  TpCudaCtx *c = tp_cuda_ctx(be);
  if (!n)
    return TRUE;
  TP_CUDA_CHECK(cudaSetDevice(c->device), err);
  TP_CUDA_CHECK(cudaMemcpyAsync(dst, host, n * sizeof(float), cudaMemcpyHostToDevice, c->stream), err);
  TP_CUDA_CHECK(cudaStreamSynchronize(c->stream), err);
  return TRUE;
}

static gboolean cuda_download(const TpBackend *be, float *host, const float *src, size_t n, GError **err)
{
  TpCudaCtx *c = tp_cuda_ctx(be);
  if (!n)
    return TRUE;
  TP_CUDA_CHECK(cudaSetDevice(c->device), err);
  TP_CUDA_CHECK(cudaMemcpyAsync(host, src, n * sizeof(float), cudaMemcpyDeviceToHost, c->stream), err);
  TP_CUDA_CHECK(cudaStreamSynchronize(c->stream), err);
  return TRUE;
}

/* The highest device memory in use (cudaMemGetInfo: total − free) seen at a synchronisation, per
 * device: every operation of a stage ends with one, so this samples each device after every
 * operation of every stage on it. */
enum { MAX_DEVICES = 64 };
static GMutex used_lock;
static guint64 used_peak[MAX_DEVICES], used_total[MAX_DEVICES];

static gboolean note_used(int device, GError **err)
{
  size_t free_b = 0, total_b = 0;
  if (device < 0 || device >= MAX_DEVICES)
    return TRUE;
  TP_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b), err);
  g_mutex_lock(&used_lock);
  used_peak[device] = MAX(used_peak[device], (guint64)(total_b - free_b));
  used_total[device] = total_b;
  g_mutex_unlock(&used_lock);
  return TRUE;
}

static gboolean cuda_memory(const TpBackend *be, guint64 *peak, guint64 *total)
{
  int device = tp_cuda_ctx(be)->device;
  *peak = *total = 0;
  if (device < 0 || device >= MAX_DEVICES)
    return FALSE;
  g_mutex_lock(&used_lock);
  *peak = used_peak[device], *total = used_total[device];
  g_mutex_unlock(&used_lock);
  return *total > 0;
}

static gboolean cuda_sync(const TpBackend *be, GError **err)
{
  TP_CUDA_CHECK(tp_cuda_use(be), err);
  TP_CUDA_CHECK(cudaStreamSynchronize(tp_cuda_stream(be)), err);
  return note_used(tp_cuda_ctx(be)->device, err); /* its device is current (tp_cuda_use) */
}

gboolean tp_cuda_scratch(const TpBackend *be, size_t bytes, void **out, GError **err)
{
  TpCudaCtx *c = tp_cuda_ctx(be);
  TP_CUDA_CHECK(cudaSetDevice(c->device), err);
  if (c->scratch_bytes < bytes) {
    if (c->scratch) {
      TP_CUDA_CHECK(cudaStreamSynchronize(c->stream), err); /* earlier kernels may still read it */
      TP_CUDA_CHECK(dev_release(c, c->scratch), err);
      c->scratch = NULL, c->scratch_bytes = 0;
    }
    size_t want = MAX(bytes, (size_t)4096);
    TP_CUDA_CHECK(dev_alloc(c, &c->scratch, want), err);
    c->scratch_bytes = want;
  }
  *out = c->scratch;
  return TRUE;
}

gboolean tp_cuda_sgemm(const TpBackend *be, gboolean trans_a, gboolean trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
                       GError **err)
{
  if (m <= 0 || n <= 0)
    return TRUE;
  TP_CUDA_CHECK(cudaSetDevice(tp_cuda_ctx(be)->device), err); /* the handle's device */
  TP_CUBLAS_CHECK(cublasSgemm(tp_cuda_ctx(be)->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                              trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc),
                  err);
  return TRUE;
}

/* Whether c's buffers come from the device's memory pool (dev_alloc): wherever the device has pools.
 * Every other device that can reach this one is granted access to the pool (peer copies between
 * stages read and write its buffers); a device that cannot reach it copies through the host
 * (cuda_copy_peer), which needs no access.  The pool keeps what is freed (no release to the system
 * at each synchronisation), and plain cudaMalloc/cudaFree — which wait for the whole device — are
 * left to devices without pools. */
static gboolean pool_init(TpCudaCtx *c, GError **err)
{
  int pools = 0, count = 0;
  c->pools = FALSE;
  TP_CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, c->device), err);
  TP_CUDA_CHECK(cudaGetDeviceCount(&count), err);
  if (!pools)
    return TRUE;
  cudaMemPool_t pool;
  unsigned long long keep = ~0ULL;
  TP_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, c->device), err);
  TP_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), err);
  for (int d = 0; d < count; d++) {
    int reach = 0;
    if (d == c->device)
      continue;
    TP_CUDA_CHECK(cudaDeviceCanAccessPeer(&reach, d, c->device), err);
    if (reach) {
      struct cudaMemAccessDesc a = { .location = { .type = cudaMemLocationTypeDevice, .id = d },
                                     .flags = cudaMemAccessFlagsProtReadWrite };
      TP_CUDA_CHECK(cudaMemPoolSetAccess(pool, &a, 1), err);
    }
  }
  TP_CUDA_CHECK(cudaStreamCreateWithFlags(&c->alloc, cudaStreamNonBlocking), err);
  c->pools = TRUE;
  return TRUE;
}

/* Set up c (device, stream, handle); on failure what was made is released by the caller. A device
 * the kernels were not compiled for (older than the build's architecture) counts as no device. */
static gboolean ctx_init(TpCudaCtx *c, GError **err)
{
  TP_CUDA_CHECK(cudaSetDevice(c->device), err);
  cudaError_t rc = tp_cuda_probe_kernels();
  if (rc != cudaSuccess) {
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, c->device) != cudaSuccess)
      major = minor = 0;
    (void)cudaGetLastError(); /* reported here, not by a later launch */
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "no CUDA device: device %d (compute capability %d.%d) cannot run this build's kernels: %s", c->device,
                major, minor, cudaGetErrorString(rc));
    return FALSE;
  }
  TP_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), err);
  TP_CUBLAS_CHECK(cublasCreate(&c->blas), err);
  TP_CUBLAS_CHECK(cublasSetStream(c->blas, c->stream), err);
  /* full FP32 (no TF32 tensor-core rounding): results must stay within float tolerance of the cpu
   * backend. One handle per stream keeps cuBLAS's workspace private, so results are reproducible. */
  TP_CUBLAS_CHECK(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH), err);
  return pool_init(c, err);
}

static void cuda_release(TpBackend *be);

static const char *cuda_name(const TpBackend *be)
{
  (void)be;
  return "cuda";
}

static size_t cuda_thread_bytes(const TpBackend *be)
{
  (void)be;
  return 0; /* cuBLAS keeps its workspace on the device */
}

static int cuda_device(const TpBackend *be)
{
  return tp_cuda_ctx(be)->device;
}

static gboolean cuda_host_memory(const TpBackend *be)
{
  (void)be;
  return FALSE;
}

static const TpBackendIface cuda_iface = {
  .get_name = cuda_name,
  .thread_bytes = cuda_thread_bytes,
  .release = cuda_release,
  .sync = cuda_sync,
  .device = cuda_device,
  .host_memory = cuda_host_memory,
  .memory = cuda_memory,
  .alloc = cuda_alloc,
  .free = cuda_free,
  .zero = cuda_zero,
  .copy = cuda_copy,
  .copy_peer = cuda_copy_peer,
  .upload = cuda_upload,
  .download = cuda_download,
  .sgemm = tp_cuda_sgemm,
  .linear_forward = tp_cuda_linear_forward,
  .linear_backward = tp_cuda_linear_backward,
  .conv_workspace = tp_cuda_conv_workspace,
  .conv_forward = tp_cuda_conv_forward,
  .conv_backward = tp_cuda_conv_backward,
  .maxpool_forward = tp_cuda_maxpool_forward,
  .maxpool_backward = tp_cuda_maxpool_backward,
  .avgpool_forward = tp_cuda_avgpool_forward,
  .avgpool_backward = tp_cuda_avgpool_backward,
  .batchnorm_forward = tp_cuda_batchnorm_forward,
  .batchnorm_backward = tp_cuda_batchnorm_backward,
  .relu_forward = tp_cuda_relu_forward,
  .relu_backward = tp_cuda_relu_backward,
  .dropout_forward = tp_cuda_dropout_forward,
  .dropout_backward = tp_cuda_dropout_backward,
  .dropout_byte_forward = tp_cuda_dropout_byte_forward,
  .dropout_byte_backward = tp_cuda_dropout_byte_backward,
  .softmax_ce_forward = tp_cuda_softmax_ce_forward,
  .softmax_ce_backward = tp_cuda_softmax_ce_backward,
  .sgd_step = tp_cuda_sgd_step,
  .blend = tp_cuda_blend_weights,
  .adamw_step = tp_cuda_adamw_step,
  .sgemm_batched = tp_cuda_sgemm_batched,
  .axpy = tp_cuda_axpy,
  .embedding_forward = tp_cuda_embedding_forward,
  .embedding_backward = tp_cuda_embedding_backward,
  .norm_forward = tp_cuda_norm_forward,
  .norm_backward = tp_cuda_norm_backward,
  .rope = tp_cuda_rope,
  .causal_softmax_forward = tp_cuda_causal_softmax_forward,
  .causal_softmax_backward = tp_cuda_causal_softmax_backward,
  .gelu_forward = tp_cuda_gelu_forward,
  .gelu_backward = tp_cuda_gelu_backward,
  .swiglu_forward = tp_cuda_swiglu_forward,
  .swiglu_backward = tp_cuda_swiglu_backward,
};

static TpBackend *cuda_create(int device, GError **err)
{
  char *why = NULL;
  int count = cuda_device_count(&why);
  if (count == 0 || device < 0 || device >= count) {
    if (count == 0)
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "no CUDA device: %s", why);
    else
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "no CUDA device %d: %d present", device, count);
    g_free(why);
    return NULL;
  }
  TpCudaCtx *c = g_new0(TpCudaCtx, 1);
  TpBackend *be = g_new(TpBackend, 1);
  *be = (TpBackend){ .iface = &cuda_iface, .ctx = c };
  c->device = device;
  if (!ctx_init(c, err)) {
    cuda_release(be);
    return NULL;
  }
  return be;
}

/* Synchronises the instance's stream and releases it; its buffers must be freed before. */
static void cuda_release(TpBackend *be)
{
  TpCudaCtx *c = tp_cuda_ctx(be);
  if (cudaSetDevice(c->device) == cudaSuccess) {
    if (c->stream)
      TP_CUDA_LOG(cudaStreamSynchronize(c->stream));
    if (c->scratch)
      TP_CUDA_LOG(dev_release(c, c->scratch));
    if (c->blas)
      cublasDestroy(c->blas);
    if (c->alloc)
      TP_CUDA_LOG(cudaStreamDestroy(c->alloc));
    if (c->stream)
      TP_CUDA_LOG(cudaStreamDestroy(c->stream));
  }
  g_free(c);
  g_free(be);
}

const TpCudaModule *tp_cuda_module(void)
{
  static const TpCudaModule entries = { .device_count = cuda_device_count, .create = cuda_create };
  return &entries;
}
