/* tp_nccl.c — the NCCL transport's send, receive, abort and counters (the message scheme is in
 * tp_nccl.h): a send copies its payload into a device buffer of its own, posts the header over MPI
 * and the payload with ncclSend on its link's stream; a receive takes held messages first, else
 * the link's headers in order, receiving each payload with ncclRecv and polling the stream, NCCL's
 * asynchronous errors, abort notices and its deadline. */
#include "config.h"
#include "tp_nccl_priv.h"

#include <string.h>

static gboolean aborted_error(TpNccl *m, GError **err)
{
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "the run was aborted: %s", m->reason ? m->reason : "(no reason)");
  return FALSE;
}

gboolean tp_nccl_poll_abort(TpNccl *m)
{
  int flag = 0;
  MPI_Status st;
  if (!g_atomic_int_get(&m->aborted) &&
      MPI_Iprobe(MPI_ANY_SOURCE, TP_NCCL_TAG_ABORT, m->mpi, &flag, &st) == MPI_SUCCESS && flag) {
    int n = 0;
    if (!TP_GPU_MPI_TRY(MPI_Get_count(&st, MPI_CHAR, &n)) || n == MPI_UNDEFINED)
      n = 0;
    char *text = g_malloc0((size_t)MAX(n, 0) + 1);
    /* the notice's words lost: the peer aborted all the same */
    if (!TP_GPU_MPI_TRY(MPI_Recv(text, n, MPI_CHAR, st.MPI_SOURCE, TP_NCCL_TAG_ABORT, m->mpi, MPI_STATUS_IGNORE)) || !*text)
      g_free(text), text = g_strdup_printf("stage %d aborted", st.MPI_SOURCE + 1);
    if (!m->reason)
      m->reason = text;
    else
      g_free(text);
    g_atomic_int_set(&m->aborted, 1);
  }
  return g_atomic_int_get(&m->aborted);
}

/* Sleep a little (lock released), longer each time up to 200 µs. */
static void nap(TpNccl *m, guint i)
{
  if (i < 64)
    return;
  g_mutex_unlock(&m->lock);
  g_usleep(MIN(20u << MIN((i - 64) / 16, 4u), 200u));
  g_mutex_lock(&m->lock);
}

/* Wait for an MPI request: 0 done, 1 timeout, 2 abort, 3 error. */
static int wait_mpi(TpNccl *m, MPI_Request *req, gint64 deadline)
{
  for (guint i = 0;; i++) {
    int done = 0;
    if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return 3;
    if (done)
      return 0;
    if (tp_nccl_poll_abort(m))
      return 2;
    if (g_get_monotonic_time() >= deadline)
      return 1;
    nap(m, i);
  }
}

/* Wait for an event recorded after NCCL work on comm c: 0 done, 1 timeout, 2 abort, 3 error (err set). */
static int wait_event(TpNccl *m, cudaEvent_t ev, int c, gint64 deadline, GError **err)
{
  for (guint i = 0;; i++) {
    cudaError_t rc = cudaEventQuery(ev);
    if (rc == cudaSuccess)
      return 0;
    (void)cudaGetLastError(); /* not ready is no error: it must not stay the thread's last error */
    if (rc != cudaErrorNotReady) {
      TP_NCCL_FAIL(err, "cudaEventQuery", cudaGetErrorString(rc));
      return 3;
    }
    ncclResult_t async = ncclSuccess;
    if (m->comm[c] && ncclCommGetAsyncError(m->comm[c], &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress) {
      const char *last = ncclGetLastError(m->comm[c]);
      TP_NCCL_FAIL(err, "ncclCommGetAsyncError", last && *last ? last : ncclGetErrorString(async));
      return 3;
    }
    if (tp_nccl_poll_abort(m))
      return 2;
    if (g_get_monotonic_time() >= deadline)
      return 1;
    nap(m, i);
  }
}

void tp_nccl_send_free(gpointer p)
{
  TpNcclSend *s = p;
  if (!s)
    return;
  if (s->buf)
    TP_NCCL_CUDA_LOG(cudaFree(s->buf));
  if (s->done)
    TP_NCCL_CUDA_LOG(cudaEventDestroy(s->done));
  g_free(s);
}

void tp_nccl_held_free(gpointer p)
{
  TpNcclHeld *h = p;
  if (!h)
    return;
  if (h->buf)
    TP_NCCL_CUDA_LOG(cudaFree(h->buf));
  g_free(h);
}

/* While the run goes on, device memory comes and goes stream-ordered on the copy stream
 * (cudaMallocAsync / cudaFreeAsync): cudaMalloc and cudaFree may wait for the whole device, and
 * with a send of this rank still waiting on the GPU for its peer's receive while that peer waits
 * the same way, neither would return (a hang, not an error).  dev_alloc returns memory that every
 * stream may use (its allocation done); a buffer given to dev_release must be idle.  The copies
 * at the transport's end use cudaFree (nothing is in flight then). */
static cudaError_t dev_alloc(TpNccl *m, void **p, size_t len)
{
  if (!m->pools) /* a device without memory pools: plain allocations */
    return cudaMalloc(p, MAX(len, 1));
  cudaError_t rc = cudaMallocAsync(p, MAX(len, 1), m->copy);
  rc = rc == cudaSuccess ? cudaStreamSynchronize(m->copy) : rc;
  if (rc != cudaSuccess)
    (void)cudaGetLastError(); /* reported by the caller, not left behind */
  return rc;
}

static void dev_release(TpNccl *m, void *p)
{
  if (p && m->pools)
    TP_NCCL_CUDA_LOG(cudaFreeAsync(p, m->copy));
  else if (p)
    TP_NCCL_CUDA_LOG(cudaFree(p));
}

static void send_release(TpNccl *m, TpNcclSend *s)
{
  dev_release(m, s->buf);
  s->buf = NULL;
  tp_nccl_send_free(s);
}

static void held_release(TpNccl *m, TpNcclHeld *h)
{
  dev_release(m, h->buf);
  h->buf = NULL;
  tp_nccl_held_free(h);
}

/* Move completed sends to the spares (lock held). */
static void reap(TpNccl *m)
{
  for (guint i = 0; i < m->pending->len;) {
    TpNcclSend *s = g_ptr_array_index(m->pending, i);
    int done = 0;
    if (MPI_Test(&s->req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
      cudaError_t rc = cudaEventQuery(s->done);
      (void)cudaGetLastError(); /* not ready (or a failure the receive's wait reports) is not left behind */
      done = rc == cudaSuccess;
    }
    if (!done) {
      i++;
      continue;
    }
    g_ptr_array_index(m->pending, i) = NULL;
    g_ptr_array_remove_index_fast(m->pending, i);
    if (m->spare->len < 8)
      g_ptr_array_add(m->spare, s);
    else
      send_release(m, s);
  }
}

gboolean tp_nccl_drain(TpNccl *m, gint64 deadline, GError **err)
{
  for (guint i = 0; m->pending->len; i++) {
    reap(m);
    if (!m->pending->len)
      break;
    if (tp_nccl_poll_abort(m))
      return aborted_error(m, err);
    if (g_get_monotonic_time() >= deadline) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%u message(s) not taken by the neighbouring stages in time",
                  m->pending->len);
      return FALSE;
    }
    nap(m, i);
  }
  return TRUE;
}

/* A send record whose buffer holds len bytes: the smallest spare that fits, else a new one. */
static TpNcclSend *send_record(TpNccl *m, size_t len, GError **err)
{
  guint best = G_MAXUINT;
  for (guint i = 0; i < m->spare->len; i++) {
    TpNcclSend *s = g_ptr_array_index(m->spare, i);
    if (s->cap >= len && (best == G_MAXUINT || s->cap < ((TpNcclSend *)g_ptr_array_index(m->spare, best))->cap))
      best = i;
  }
  if (best != G_MAXUINT)
    return g_ptr_array_steal_index_fast(m->spare, best);
  TpNcclSend *s = g_new0(TpNcclSend, 1);
  cudaError_t rc = dev_alloc(m, &s->buf, len);
  if (rc == cudaSuccess)
    rc = cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming);
  if (rc != cudaSuccess) {
    TP_NCCL_FAIL(err, "cudaMallocAsync/cudaEventCreate of a send buffer", cudaGetErrorString(rc));
    send_release(m, s);
    return NULL;
  }
  s->cap = MAX(len, 1);
  return s;
}

/* Copy len bytes between any two of host and this GPU's memory, waiting until it is done. */
static gboolean copy_now(TpNccl *m, void *dst, const void *src, size_t len, GError **err)
{
  TP_NCCL_CUDA(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, m->copy), err);
  TP_NCCL_CUDA(cudaStreamSynchronize(m->copy), err);
  return TRUE;
}

static gboolean send_locked(TpNccl *m, int from, int to, const TpTag *tag, const void *data, size_t len,
                            GError **err)
{
  int side = tp_transport_side(m->base.W, m->rank, to), c = tp_nccl_comm_of(from, to);
  if (from != m->rank || side < 0)
    return tp_transport_bad_link(m->base.W, m->rank, from, from, to, err);
  if (tp_nccl_poll_abort(m))
    return aborted_error(m, err);
  TP_NCCL_CUDA(cudaSetDevice(m->device), err);
  reap(m);
  TpNcclSend *s = send_record(m, len, err);
  if (!s)
    return FALSE;
  g_ptr_array_add(m->pending, s); /* freed with the transport from here on */
  s->req = MPI_REQUEST_NULL;
  s->hdr = tp_msg_hdr(tag, len);
  if (len && !copy_now(m, s->buf, data, len, err))
    return FALSE;
  TP_NCCL_MPI(MPI_Isend(&s->hdr, (int)sizeof s->hdr, MPI_BYTE, to, TP_NCCL_TAG_HDR, m->mpi, &s->req), err);
  if (len)
    TP_NCCL_CALL(ncclSend(s->buf, len, ncclChar, to, m->comm[c], m->stream[c]), m->comm[c], err);
  TP_NCCL_CUDA(cudaEventRecord(s->done, m->stream[c]), err);
  m->sent[side].messages++;
  m->sent[side].bytes += len;
  return TRUE;
}

static gboolean nccl_send(TpTransport *t, TpLinkEnds link, const TpTag *tag, const void *data, size_t len,
                          GError **err)
{
  const int from = link.local, to = link.peer;
  TpNccl *m = (TpNccl *)t;
  g_mutex_lock(&m->lock);
  gboolean ok = send_locked(m, from, to, tag, data, len, err);
  g_mutex_unlock(&m->lock);
  return ok;
}

/* Whether p is device memory of this rank's GPU (else host memory, pageable or pinned). */
static gboolean on_device(const TpNccl *m, const void *p)
{
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError(); /* older runtimes fail on plain host pointers: clear the sticky error */
    return FALSE;
  }
  return (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) && a.device == m->device;
}

/* The error of a receive that ended without its message (rc as wait_event's). */
static gboolean recv_failed(TpNccl *m, int rc, int from, const TpTag *tag, GError **err)
{
  char name[64];
  tp_tag_name(&m->base, tag, name, sizeof name);
  if (rc == 1)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "no message from stage %d (rank %d) for %s within %g s", from + 1,
                from, name, m->base.timeout_s);
  else if (rc == 2)
    return aborted_error(m, err);
  else if (err && !*err)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "receiving %s from stage %d (rank %d) failed", name, from + 1, from);
  else if (err)
    g_prefix_error(err, "receiving %s from stage %d (rank %d): ", name, from + 1, from);
  return FALSE;
}

static gboolean recv_locked(TpNccl *m, int to, int from, const TpTag *tag, void *data, size_t len, GError **err)
{
  int side = tp_transport_side(m->base.W, m->rank, from), c = tp_nccl_comm_of(from, to);
  if (to != m->rank || side < 0)
    return tp_transport_bad_link(m->base.W, m->rank, to, from, to, err);
  if (tp_nccl_poll_abort(m))
    return aborted_error(m, err);
  TP_NCCL_CUDA(cudaSetDevice(m->device), err);
  gint64 deadline = g_get_monotonic_time() + (gint64)(m->base.timeout_s * 1e6);
  gboolean direct = on_device(m, data);
  for (;;) {
    TpNcclHeld *h = tp_msg_held_take(&m->held[side], tag);
    if (h) {
      gboolean ok = h->hdr.len == len;
      if (!ok && h->hdr.len == 0)
        tp_transport_cut_marker(tag, to, from, err);
      else if (!ok)
        g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "message from stage %d is %" G_GUINT64_FORMAT " bytes, %zu expected",
                    from + 1, (guint64)h->hdr.len, len);
      ok = ok && (!len || copy_now(m, data, h->buf, len, err));
      held_release(m, h);
      return ok;
    }
    /* the link's next header, then its payload */
    TpMsgHdr hdr;
    MPI_Request req;
    TP_NCCL_MPI(MPI_Irecv(&hdr, (int)sizeof hdr, MPI_BYTE, from, TP_NCCL_TAG_HDR, m->mpi, &req), err);
    int rc = wait_mpi(m, &req, deadline);
    if (rc) {
      (void)(TP_GPU_MPI_TRY(MPI_Cancel(&req)) && TP_GPU_MPI_TRY(MPI_Request_free(&req)));
      return recv_failed(m, rc, from, tag, err);
    }
    gboolean mine = tp_msg_hdr_is(&hdr, tag);
    if (mine && hdr.len == 0 && len > 0)
      return tp_transport_cut_marker(tag, to, from, err);
    if (mine && hdr.len != len) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "message from stage %d is %" G_GUINT64_FORMAT " bytes, %zu expected",
                  from + 1, (guint64)hdr.len, len);
      return FALSE;
    }
    void *dst = data;
    if (!mine || !direct) { /* held until asked for, or staged for a host buffer */
      h = g_new0(TpNcclHeld, 1);
      h->hdr = hdr;
      cudaError_t crc = dev_alloc(m, &h->buf, hdr.len);
      if (crc != cudaSuccess) {
        held_release(m, h);
        TP_NCCL_FAIL(err, "cudaMallocAsync of a received message", cudaGetErrorString(crc));
        return FALSE;
      }
      g_queue_push_tail(&m->held[side], h);
      dst = h->buf;
    }
    if (hdr.len) {
      TP_NCCL_CALL(ncclRecv(dst, hdr.len, ncclChar, from, m->comm[c], m->stream[c]), m->comm[c], err);
      TP_NCCL_CUDA(cudaEventRecord(m->recv_done, m->stream[c]), err);
      if ((rc = wait_event(m, m->recv_done, c, deadline, err)))
        return recv_failed(m, rc, from, tag, err);
    }
    if (mine && direct)
      return TRUE;
  }
}

static gboolean nccl_recv(TpTransport *t, TpLinkEnds link, const TpTag *tag, void *data, size_t len, GError **err)
{
  const int to = link.local, from = link.peer;
  TpNccl *m = (TpNccl *)t;
  g_mutex_lock(&m->lock);
  gboolean ok = recv_locked(m, to, from, tag, data, len, err);
  g_mutex_unlock(&m->lock);
  return ok;
}

static void nccl_abort(TpTransport *t, const char *reason)
{
  TpNccl *m = (TpNccl *)t;
  g_mutex_lock(&m->lock);
  if (!g_atomic_int_get(&m->aborted)) {
    int size = m->base.W;
    m->reason = g_strdup(reason);
    m->abort_msg = g_strdup_printf("stage %d: %s", m->rank + 1, reason);
    m->abort_req = g_new(MPI_Request, size);
    for (int r = 0; r < size; r++) {
      m->abort_req[r] = MPI_REQUEST_NULL;
      if (r != m->rank && !TP_GPU_MPI_TRY(MPI_Isend(m->abort_msg, (int)strlen(m->abort_msg), MPI_CHAR, r,
                                                    TP_NCCL_TAG_ABORT, m->mpi, &m->abort_req[r])))
        m->abort_req[r] = MPI_REQUEST_NULL; /* that peer learns of it from the job's end */
    }
    g_atomic_int_set(&m->aborted, 1);
  }
  /* no NCCL operation of this rank waits any longer: pending kernels end, the communicators go */
  for (int c = 0; c < TP_NCCL_N_COMMS; c++)
    if (m->comm[c]) {
      ncclCommAbort(m->comm[c]);
      m->comm[c] = NULL;
    }
  g_mutex_unlock(&m->lock);
}

static void nccl_stats(TpTransport *t, int from, int to, TpLinkStats *out)
{
  TpNccl *m = (TpNccl *)t;
  int side = tp_transport_side(m->base.W, m->rank, to);
  g_mutex_lock(&m->lock);
  *out = from == m->rank && side >= 0 ? m->sent[side] : (TpLinkStats){ 0, 0 };
  g_mutex_unlock(&m->lock);
}

void tp_nccl_fill(TpNccl *m)
{
  m->base.name = "nccl";
  m->base.device_memory = TRUE; /* GPU buffers straight to the peer's GPU */
  m->base.send = nccl_send;
  m->base.recv = nccl_recv;
  m->base.abort = nccl_abort;
  m->base.stats = nccl_stats;
}
