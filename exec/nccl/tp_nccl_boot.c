/* tp_nccl_boot.c — the NCCL transport's start-up and shutdown: the rank's GPU, the unique ids made
 * on rank 0 and broadcast over MPI, the four communicators and their streams (tp_nccl.h), and a
 * free that waits for pending sends, then destroys (or, after an abort, aborts) the communicators. */
#include "config.h"
#include "tp_nccl_priv.h"

#include <stdlib.h>
#include <string.h>

gboolean tp_nccl_available(void) { return TRUE; }

int tp_nccl_device(const TpTransport *t) { return ((const TpNccl *)t)->device; }

/* The GPU of this rank: the --devices list indexed by the rank's place on its node (round-robin),
 * else that place modulo the node's device count. */
static gboolean pick_device(const char *devices, int local, int count, int *out, GError **err)
{
  if (!devices) {
    *out = local % count;
    return TRUE;
  }
  g_auto(GStrv) parts = g_strsplit(devices, ",", -1);
  int n = (int)g_strv_length(parts);
  const char *p = n ? g_strstrip(parts[local % n]) : "";
  char *end = NULL;
  long d = strtol(p, &end, 10);
  if (!*p || *end || d < 0 || d >= count) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_DEVICES, "'%s' is not a list of devices 0..%d", devices, count - 1);
    return FALSE;
  }
  *out = (int)d;
  return TRUE;
}

static void nccl_free(TpTransport *t);

/* Every rank's GPU gathered (collective: every rank reaches the gather, whatever it found);
 * TP_ERROR_INPUT, alike on every rank, when two share one; an error on every rank when one cannot
 * tell its GPU. */
static gboolean check_places(TpNccl *m, GError **err)
{
  TpNcclPlace mine = { .device = m->device }, *all = g_new0(TpNcclPlace, (size_t)m->base.W);
  struct cudaDeviceProp prop;
  char node[MPI_MAX_PROCESSOR_NAME] = "";
  int len = 0, a = 0, b = 0;
  if (cudaGetDeviceProperties(&prop, m->device) == cudaSuccess)
    memcpy(mine.uuid, prop.uuid.bytes, sizeof mine.uuid);
  else
    mine.device = -1, (void)cudaGetLastError();
  if (MPI_Get_processor_name(node, &len) == MPI_SUCCESS)
    g_strlcpy(mine.node, node, sizeof mine.node);
  gboolean ok = FALSE;
  if (MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, m->mpi) != MPI_SUCCESS)
    TP_NCCL_FAIL(err, "MPI_Allgather", "cannot gather the ranks' GPUs");
  else if (!tp_nccl_shared_gpu(all, m->base.W, &a, &b))
    ok = TRUE;
  else if (all[a].device < 0 || all[b].device < 0)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "nccl transport: rank %d cannot identify its GPU",
                all[a].device < 0 ? a : b);
  else
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_TRANSPORT,
                "transport nccl: ranks %d and %d (stages %d and %d) would share GPU %d of %s: NCCL runs one rank "
                "per GPU (give every rank a GPU of its own in the devices' list, or use the mpi transport)",
                a, b, a + 1, b + 1, all[a].device, all[a].node);
  g_free(all);
  return ok;
}

/* The communicators and streams (m->device current). */
static gboolean bootstrap(TpNccl *m, GError **err)
{
  ncclUniqueId id[TP_NCCL_N_COMMS];
  if (m->rank == 0)
    for (int c = 0; c < TP_NCCL_N_COMMS; c++)
      TP_NCCL_CALL(ncclGetUniqueId(&id[c]), NULL, err);
  TP_NCCL_MPI(MPI_Bcast(id, (int)sizeof id, MPI_BYTE, 0, m->mpi), err);
  for (int c = 0; c < TP_NCCL_N_COMMS; c++)
    TP_NCCL_CUDA(cudaStreamCreateWithFlags(&m->stream[c], cudaStreamNonBlocking), err);
  TP_NCCL_CUDA(cudaStreamCreateWithFlags(&m->copy, cudaStreamNonBlocking), err);
  TP_NCCL_CUDA(cudaEventCreateWithFlags(&m->recv_done, cudaEventDisableTiming), err);
  /* buffers made during the run come from the device's memory pool, which keeps what is given
   * back (no release to the system at each synchronisation) */
  int pools = 0;
  TP_NCCL_CUDA(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, m->device), err);
  if ((m->pools = pools != 0)) {
    cudaMemPool_t pool;
    unsigned long long keep = ~0ULL;
    TP_NCCL_CUDA(cudaDeviceGetDefaultMemPool(&pool, m->device), err);
    TP_NCCL_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), err);
  }
  TP_NCCL_CALL(ncclGroupStart(), NULL, err);
  for (int c = 0; c < TP_NCCL_N_COMMS; c++) {
    ncclResult_t rc = ncclCommInitRank(&m->comm[c], m->base.W, id[c], m->rank);
    if (rc != ncclSuccess) {
      ncclGroupEnd();
      TP_NCCL_FAIL(err, "ncclCommInitRank", ncclGetErrorString(rc));
      return FALSE;
    }
  }
  TP_NCCL_CALL(ncclGroupEnd(), NULL, err);
  return TRUE;
}

TpTransport *tp_nccl_new(int N, double timeout_s, const char *devices, GError **err)
{
  int count = 0;
  cudaError_t crc = cudaGetDeviceCount(&count);
  if (crc != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_TRANSPORT, "transport nccl: no CUDA device: %s",
                crc != cudaSuccess ? cudaGetErrorString(crc) : "the CUDA runtime reports 0 devices");
    return NULL;
  }
  int inited = 0;
  if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "nccl transport: MPI is not started (tp_mpi_init first)");
    return NULL;
  }
  TpNccl *m = g_new0(TpNccl, 1);
  g_mutex_init(&m->lock);
  m->pending = g_ptr_array_new();
  m->spare = g_ptr_array_new();
  m->mpi = MPI_COMM_NULL;
  m->base.N = N;
  m->base.timeout_s = timeout_s > 0 ? timeout_s : 300;
  m->base.free = nccl_free;
  tp_nccl_fill(m);
  MPI_Comm node = MPI_COMM_NULL;
  int local = 0;
  gboolean ok = MPI_Comm_rank(MPI_COMM_WORLD, &m->rank) == MPI_SUCCESS &&
                MPI_Comm_size(MPI_COMM_WORLD, &m->base.W) == MPI_SUCCESS &&
                MPI_Comm_dup(MPI_COMM_WORLD, &m->mpi) == MPI_SUCCESS &&
                MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
                MPI_Comm_rank(node, &local) == MPI_SUCCESS;
  if (node != MPI_COMM_NULL)
    ok = TP_GPU_MPI_TRY(MPI_Comm_free(&node)) && ok;
  if (!ok) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "nccl transport: the MPI communicators could not be set up");
    nccl_free(&m->base);
    return NULL;
  }
  if (!pick_device(devices, local, count, &m->device, err)) {
    nccl_free(&m->base);
    return NULL;
  }
  crc = cudaSetDevice(m->device);
  if (crc != cudaSuccess) {
    (void)cudaGetLastError();
    TP_NCCL_FAIL(err, "cudaSetDevice", cudaGetErrorString(crc));
    nccl_free(&m->base);
    return NULL;
  }
  if (!check_places(m, err)) {
    nccl_free(&m->base);
    return NULL;
  }
  if (!bootstrap(m, err)) {
    g_prefix_error(err, "nccl transport: rank %d (GPU %d): ", m->rank, m->device);
    g_atomic_int_set(&m->aborted, 1); /* communicators half made are aborted, not destroyed */
    nccl_free(&m->base);
    return NULL;
  }
  return &m->base;
}

static void nccl_free(TpTransport *t)
{
  TpNccl *m = (TpNccl *)t;
  g_mutex_lock(&m->lock);
  GError *err = NULL;
  gboolean aborted = g_atomic_int_get(&m->aborted);
  if (!aborted && !tp_nccl_drain(m, g_get_monotonic_time() + (gint64)(m->base.timeout_s * 1e6), &err)) {
    g_printerr("nccl transport: rank %d: %s\n", m->rank, err->message);
    aborted = TRUE;
  }
  g_clear_error(&err);
  TP_NCCL_CUDA_LOG(cudaSetDevice(m->device));
  for (int c = 0; c < TP_NCCL_N_COMMS; c++)
    if (m->comm[c]) {
      if (aborted)
        ncclCommAbort(m->comm[c]);
      else
        ncclCommDestroy(m->comm[c]);
    }
  for (int c = 0; c < TP_NCCL_N_COMMS; c++)
    if (m->stream[c])
      TP_NCCL_CUDA_LOG(cudaStreamDestroy(m->stream[c]));
  if (m->copy)
    TP_NCCL_CUDA_LOG(cudaStreamDestroy(m->copy));
  if (m->recv_done)
    TP_NCCL_CUDA_LOG(cudaEventDestroy(m->recv_done));
  /* MPI requests still in flight after an abort are left to MPI_Finalize/MPI_Abort */
  for (guint i = 0; !aborted && i < m->pending->len; i++)
    tp_nccl_send_free(g_ptr_array_index(m->pending, i));
  for (guint i = 0; i < m->spare->len; i++)
    tp_nccl_send_free(g_ptr_array_index(m->spare, i));
  g_ptr_array_free(m->pending, TRUE);
  g_ptr_array_free(m->spare, TRUE);
  for (int i = 0; i < 2; i++)
    g_queue_clear_full(&m->held[i], tp_nccl_held_free);
  if (m->abort_req) /* the notices out (a lost peer's fails at once) */
    (void)TP_GPU_MPI_TRY(MPI_Waitall(m->base.W, m->abort_req, MPI_STATUSES_IGNORE));
  g_free(m->abort_req);
  g_free(m->abort_msg);
  g_free(m->reason);
  if (m->mpi != MPI_COMM_NULL)
    (void)TP_GPU_MPI_TRY(MPI_Comm_free(&m->mpi)); /* else left to MPI_Finalize */
  g_mutex_unlock(&m->lock);
  g_mutex_clear(&m->lock);
  g_free(m);
}
