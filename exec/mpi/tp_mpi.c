/* tp_mpi.c — the MPI transport's send, receive, abort and counters (the message scheme is in
 * tp_mpi.h): sends post MPI_Isend of a copy (or of the caller's lent buffer) and are reaped later; receives post MPI_Irecv for the
 * header of their operation's code and test it until it comes, the timeout passes or an abort
 * arrives. */
#include "tp_mpi_priv.h"
#include "tp_error.h"

#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* Data parallelism: the stages of each replica (0: one pipeline, rank r runs stage r+1). */
static int replica_stages;

void tp_mpi_who(int rank, char *buf, size_t len)
{
  if (replica_stages > 0)
    g_snprintf(buf, len, "stage %d of replica %d (rank %d)", rank % replica_stages + 1, rank / replica_stages + 1, rank);
  else
    g_snprintf(buf, len, "stage %d (rank %d)", rank + 1, rank);
}

int tp_mpi_code(const TpMpi *m, const TpTag *tag)
{
  guint64 mb = tag->mb < 0 ? 0 : (guint64)tag->mb;
  guint64 micro = tag->micro == TP_WHOLE || tag->micro < 0 ? 0 : (guint64)tag->micro + 1;
  guint64 code = (mb * ((guint64)m->base.N + 1) + micro) * 2 + (tag->kind == TP_OP_B);
  return (int)(code % ((guint64)m->tag_ub + 1));
}

static void mpi_message(int code, char *buf)
{
  int n = 0;
  if (MPI_Error_string(code, buf, &n) != MPI_SUCCESS)
    g_snprintf(buf, MPI_MAX_ERROR_STRING, "MPI error %d", code);
}

gboolean tp_mpi_poll_abort(TpMpi *m)
{
  int flag = 0;
  MPI_Status st;
  if (!g_atomic_int_get(&m->aborted) &&
      MPI_Iprobe(MPI_ANY_SOURCE, TP_MPI_CTL_ABORT, m->ctl_comm, &flag, &st) == MPI_SUCCESS && flag) {
    int n = 0;
    if (!TP_GPU_MPI_TRY(MPI_Get_count(&st, MPI_CHAR, &n)) || n == MPI_UNDEFINED)
      n = 0;
    char *text = g_malloc0((size_t)MAX(n, 0) + 1);
    /* the notice's words lost: the peer aborted all the same */
    if (!TP_GPU_MPI_TRY(MPI_Recv(text, n, MPI_CHAR, st.MPI_SOURCE, TP_MPI_CTL_ABORT, m->ctl_comm, MPI_STATUS_IGNORE)) || !*text)
      g_free(text), text = g_strdup_printf("stage %d aborted", st.MPI_SOURCE + 1);
    if (!m->reason)
      m->reason = text;
    else
      g_free(text);
    g_atomic_int_set(&m->aborted, 1);
  }
  return g_atomic_int_get(&m->aborted);
}

/* Cancel a posted receive; TRUE when it was cancelled (or MPI could not say: the peer is lost, its
 * message is not to be read), FALSE when it had completed meanwhile. */
static gboolean cancel_recv(MPI_Request *req)
{
  MPI_Status st;
  int cancelled = 0;
  if (!TP_GPU_MPI_TRY(MPI_Cancel(req)) || !TP_GPU_MPI_TRY(MPI_Wait(req, &st)) ||
      !TP_GPU_MPI_TRY(MPI_Test_cancelled(&st, &cancelled)))
    return TRUE;
  return cancelled;
}

/* Sleeps of this thread as long as asked, not 50 µs more (Linux's default timer slack). */
static void precise_sleeps(void)
{
#ifdef __linux__
  static __thread gboolean set;
  if (!set) {
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    set = TRUE;
  }
#endif
}

int tp_mpi_wait_spin(TpMpi *m, MPI_Request *req, gint64 deadline, gboolean is_recv, gint64 spin_us)
{
  gint64 start = g_get_monotonic_time();
  gulong nap = 10;
  for (;;) {
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
      return 3;
    if (done)
      return 0;
    if (tp_mpi_poll_abort(m))
      return !is_recv || cancel_recv(req) ? 2 : 0;
    gint64 now = g_get_monotonic_time();
    if (deadline && now >= deadline)
      return !is_recv || cancel_recv(req) ? 1 : 0;
    /* poll for spin_us (a message on its way: latency, and MPI moves large messages only inside
     * its calls), then sleep, a little longer each time, at most 200 µs: a rank waiting for its
     * peer's computation leaves the core to the computing threads */
    if (now - start < spin_us)
      continue;
    g_rec_mutex_unlock(&m->lock);
    precise_sleeps();
    g_usleep(nap);
    nap = MIN(nap * 2, 200);
    g_rec_mutex_lock(&m->lock);
  }
}

int tp_mpi_wait(TpMpi *m, MPI_Request *req, gint64 deadline, gboolean is_recv)
{
  return tp_mpi_wait_spin(m, req, deadline, is_recv, TP_MPI_SPIN_US);
}

enum { SPARE_MAX = 8 };

/* A send that is over: a lent buffer back to its owner, a copy's buffer to the spares (or freed). */
static void give_back(TpMpi *m, TpMpiSend *s)
{
  if (s->done) {
    s->done(s->done_data);
    g_free(s); /* the header alone */
  } else if (m->spare->len < SPARE_MAX)
    g_ptr_array_add(m->spare, s);
  else
    g_free(s);
}

/* Move the sends whose requests have completed to the spare buffers (or free them). */
static void reap(TpMpi *m)
{
  for (guint i = 0; i < m->pending->len;) {
    TpMpiSend *s = g_ptr_array_index(m->pending, i);
    int done = 0;
    /* a send MPI failed on is not done: its buffer stays with the request until the free's bounded wait */
    if (!TP_GPU_MPI_TRY(MPI_Testall(2, s->req, &done, MPI_STATUSES_IGNORE)) || !done) {
      i++;
      continue;
    }
    g_ptr_array_index(m->pending, i) = NULL;
    g_ptr_array_remove_index_fast(m->pending, i);
    give_back(m, s);
  }
}

/* A send buffer for len bytes: the smallest spare one that fits, else a new one. */
static TpMpiSend *send_buffer(TpMpi *m, size_t len)
{
  guint best = G_MAXUINT;
  for (guint i = 0; i < m->spare->len; i++) {
    TpMpiSend *s = g_ptr_array_index(m->spare, i);
    if (s->cap >= len && (best == G_MAXUINT || s->cap < ((TpMpiSend *)g_ptr_array_index(m->spare, best))->cap))
      best = i;
  }
  if (best != G_MAXUINT)
    return g_ptr_array_steal_index_fast(m->spare, best);
  TpMpiSend *s = g_malloc(sizeof(TpMpiSend) + len);
  s->cap = len;
  return s;
}

static char *reason_of(TpMpi *m)
{
  g_rec_mutex_lock(&m->lock);
  char *r = g_strdup(m->reason ? m->reason : "aborted");
  g_rec_mutex_unlock(&m->lock);
  return r;
}

/* Post the header and the payload (data; lent: the caller's buffer until done(done_data), else
 * copied first). */
static gboolean post_send(TpTransport *t, int from, int to, const TpTag *tag, const void *data, size_t len,
                          gboolean lent, void (*done)(void *), void *done_data, GError **err)
{
  TpMpi *m = (TpMpi *)t;
  int side = tp_transport_side(m->base.W, m->rank, to);
  if (from != m->rank || side < 0) {
    if (done)
      done(done_data);
    return tp_transport_bad_link(m->base.W, m->rank, from, from, to, err);
  }
  char name[48], me[40], peer[40];
  tp_tag_name(t, tag, name, sizeof name);
  tp_mpi_who(m->first + from, me, sizeof me);
  tp_mpi_who(m->first + to, peer, sizeof peer);
  g_rec_mutex_lock(&m->lock);
  if (tp_mpi_poll_abort(m)) {
    g_rec_mutex_unlock(&m->lock);
    if (done)
      done(done_data);
    char *r = reason_of(m);
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: run aborted before %s was sent to %s: %s", me, name, peer, r);
    g_free(r);
    return FALSE;
  }
  reap(m);
  TpMpiSend *s;
  if (lent) {
    s = g_malloc(sizeof(TpMpiSend));
    s->cap = 0;
  } else
    s = send_buffer(m, len);
  s->done = lent ? done : NULL, s->done_data = done_data;
  s->hdr = tp_msg_hdr(tag, len);
  if (len && !lent)
    memcpy(s->data, data, len);
  int code = tp_mpi_code(m, tag);
  int rc = MPI_Isend(&s->hdr, sizeof s->hdr, MPI_BYTE, to, code, m->hdr_comm, &s->req[0]);
  if (rc == MPI_SUCCESS) {
    rc = MPI_Isend(lent ? data : s->data, (int)len, MPI_BYTE, to, code, m->data_comm, &s->req[1]);
    if (rc != MPI_SUCCESS)
      s->req[1] = MPI_REQUEST_NULL;
    g_ptr_array_add(m->pending, s);
    m->sent[side].messages++;
    m->sent[side].bytes += len;
  } else
    give_back(m, s);
  g_rec_mutex_unlock(&m->lock);
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    mpi_message(rc, msg);
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: MPI error while sending %s to %s: %s", me, name, peer, msg);
    return FALSE;
  }
  return TRUE;
}

static gboolean mpi_send(TpTransport *t, TpLinkEnds link, const TpTag *tag, const void *data, size_t len, GError **err)
{
  return post_send(t, link.local, link.peer, tag, data, len, FALSE, NULL, NULL, err);
}

static gboolean mpi_send_borrowed(TpTransport *t, TpLinkEnds link, const TpTag *tag, const void *data, size_t len,
                                  void (*done)(void *), void *done_data, GError **err)
{
  return post_send(t, link.local, link.peer, tag, data, len, TRUE, done, done_data, err);
}

/* The held message of this operation from side, removed from the held list, or NULL. */
static TpMpiHeld *take_held(TpMpi *m, int side, const TpTag *tag)
{
  TpMpiHeld *h = tp_msg_held_take(&m->held[side], tag);
  if (h)
    m->held_bytes -= (gint64)h->hdr.len;
  return h;
}

/* The payloads received ahead of their turn (while a receive waited for another message), held
 * until their own receive: the rank's messages that arrived and wait.  Those MPI has not handed
 * over yet are not in this process's count.  The sends MPI has completed are reaped first, so that
 * the buffers lent to them count until their transfer ended, not until the next send looked. */
static gint64 mpi_queued(TpTransport *t, int to)
{
  TpMpi *m = (TpMpi *)t;
  if (to != m->rank)
    return 0;
  g_rec_mutex_lock(&m->lock);
  reap(m);
  gint64 n = m->held_bytes;
  g_rec_mutex_unlock(&m->lock);
  return n;
}

static void abort_error(TpMpi *m, const char *me, const char *what, const char *peer, GError **err)
{
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: run aborted while waiting for %s from %s: %s", me, what, peer,
              m->reason ? m->reason : "aborted");
}

/* Wait for one request of the receive described by what, polling spin_us before sleeping; on
 * failure sets err (lock held). */
static gboolean wait_for(TpMpi *m, MPI_Request *req, gint64 deadline, gint64 spin_us, const char *me, const char *what,
                         const char *peer, GError **err)
{
  int w = tp_mpi_wait_spin(m, req, deadline, TRUE, spin_us);
  if (w == 0)
    return TRUE;
  if (w == 1)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: no message %s from %s within %g s (the peer is dead or stuck)",
                me, what, peer, m->base.timeout_s);
  else if (w == 2)
    abort_error(m, me, what, peer, err);
  else
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: MPI failed while receiving %s from %s (the peer is lost)", me,
                what, peer);
  return FALSE;
}

/* Receive the message tagged tag from side into data (len bytes); lock held. */
static gboolean recv_locked(TpMpi *m, int side, int from, const TpTag *tag, void *data, size_t len, const char *me,
                            const char *name, const char *peer, GError **err)
{
  if (tp_mpi_poll_abort(m)) {
    abort_error(m, me, name, peer, err);
    return FALSE;
  }
  TpMpiHeld *h = take_held(m, side, tag);
  int code = tp_mpi_code(m, tag);
  gint64 deadline = g_get_monotonic_time() + (gint64)(m->base.timeout_s * G_USEC_PER_SEC);
  while (!h) {
    TpMpiHdr hdr;
    MPI_Request req;
    if (MPI_Irecv(&hdr, sizeof hdr, MPI_BYTE, from, code, m->hdr_comm, &req) != MPI_SUCCESS ||
        !wait_for(m, &req, deadline, TP_MPI_SPIN_US + (gint64)(len >> 11), me, name, peer, err))
      break;
    TpTag ht = { hdr.kind, hdr.mb, hdr.micro };
    gboolean mine = tp_tag_equal(&ht, tag) && hdr.len == len;
    TpMpiHeld *other = mine ? NULL : g_malloc(sizeof(TpMpiHeld) + hdr.len);
    if (other)
      other->hdr = hdr;
    /* the payload follows its header at once: poll while it moves (up to 10 ms) */
    if (MPI_Irecv(mine ? data : other->data, (int)hdr.len, MPI_BYTE, from, code, m->data_comm, &req) != MPI_SUCCESS ||
        !wait_for(m, &req, deadline, 10000, me, name, peer, err)) {
      g_free(other);
      break;
    }
    if (mine)
      return TRUE;
    if (tp_tag_equal(&ht, tag))
      h = other; /* the length differs: reported below */
    else {
      g_queue_push_tail(&m->held[side], other);
      m->held_bytes += (gint64)hdr.len;
    }
  }
  if (!h) {
    if (err && !*err)
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: MPI error while receiving %s from %s", me, name, peer);
    return FALSE;
  }
  gboolean ok = h->hdr.len == len;
  if (ok) {
    if (len)
      memcpy(data, h->data, len);
  } else if (h->hdr.len == 0)
    tp_transport_cut_marker(tag, m->rank, from, err);
  else
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: message %s from %s has %" G_GUINT64_FORMAT " bytes, expected %zu",
                me, name, peer, (guint64)h->hdr.len, len);
  g_free(h);
  return ok;
}

static gboolean mpi_recv(TpTransport *t, TpLinkEnds link, const TpTag *tag, void *data, size_t len, GError **err)
{
  const int to = link.local, from = link.peer;
  TpMpi *m = (TpMpi *)t;
  int side = tp_transport_side(m->base.W, m->rank, from);
  if (to != m->rank || side < 0)
    return tp_transport_bad_link(m->base.W, m->rank, to, from, to, err);
  char name[48], me[40], peer[40];
  tp_tag_name(t, tag, name, sizeof name);
  tp_mpi_who(m->first + to, me, sizeof me);
  tp_mpi_who(m->first + from, peer, sizeof peer);
  char *note = g_strdup_printf("%s from %s", name, peer);
  tp_mpi_note_wait(note);
  g_rec_mutex_lock(&m->lock);
  gboolean ok = recv_locked(m, side, from, tag, data, len, me, name, peer, err);
  reap(m);
  g_rec_mutex_unlock(&m->lock);
  tp_mpi_note_wait(NULL);
  g_free(note);
  return ok;
}

static void mpi_abort(TpTransport *t, const char *reason)
{
  TpMpi *m = (TpMpi *)t;
  g_rec_mutex_lock(&m->lock);
  if (!g_atomic_int_get(&m->aborted)) {
    m->reason = g_strdup(reason ? reason : "aborted");
    g_atomic_int_set(&m->aborted, 1);
    /* tell every other rank: a notice each, sent without waiting */
    int n = (int)strlen(m->reason);
    for (int r = 0; r < t->W; r++) {
      if (r == m->rank)
        continue;
      MPI_Request *req = g_malloc(sizeof(MPI_Request));
      if (MPI_Isend(m->reason, n, MPI_CHAR, r, TP_MPI_CTL_ABORT, m->ctl_comm, req) == MPI_SUCCESS)
        g_ptr_array_add(m->ctl_sends, req);
      else
        g_free(req);
    }
  }
  g_rec_mutex_unlock(&m->lock);
}

static void mpi_stats(TpTransport *t, int from, int to, TpLinkStats *out)
{
  TpMpi *m = (TpMpi *)t;
  int side = tp_transport_side(m->base.W, m->rank, to);
  memset(out, 0, sizeof *out);
  if (from != m->rank || side < 0)
    return;
  g_rec_mutex_lock(&m->lock);
  *out = m->sent[side];
  g_rec_mutex_unlock(&m->lock);
}

static void held_free(gpointer p) { g_free(p); }

static void mpi_free(TpTransport *t)
{
  TpMpi *m = (TpMpi *)t;
  g_rec_mutex_lock(&m->lock);
  /* the peers receive what was sent: wait for that (at most the timeout, not after an abort);
   * sends still in flight then keep their buffers (the run failed; MPI may still read them) */
  gint64 deadline = g_get_monotonic_time() + (gint64)(t->timeout_s * G_USEC_PER_SEC);
  for (guint i = 0; i < m->pending->len; i++) {
    TpMpiSend *s = g_ptr_array_index(m->pending, i);
    gboolean done = TRUE;
    for (int k = 0; k < 2; k++)
      done = done && tp_mpi_wait(m, &s->req[k], deadline, FALSE) == 0;
    g_ptr_array_index(m->pending, i) = NULL;
    if (done)
      give_back(m, s);
  }
  g_ptr_array_free(m->pending, TRUE);
  g_ptr_array_free(m->spare, TRUE);
  gboolean notices_sent = TRUE;
  for (guint i = 0; i < m->ctl_sends->len; i++) {
    int done = 0;
    if (!TP_GPU_MPI_TRY(MPI_Test(g_ptr_array_index(m->ctl_sends, i), &done, MPI_STATUS_IGNORE)) || !done)
      g_ptr_array_index(m->ctl_sends, i) = NULL, notices_sent = FALSE;
  }
  g_ptr_array_free(m->ctl_sends, TRUE);
  for (int i = 0; i < 2; i++)
    g_queue_clear_full(&m->held[i], held_free);
  /* a communicator MPI cannot free (a lost peer) is left to MPI_Finalize or the job's end */
  (void)(TP_GPU_MPI_TRY(MPI_Comm_free(&m->hdr_comm)) & TP_GPU_MPI_TRY(MPI_Comm_free(&m->data_comm)) &
         TP_GPU_MPI_TRY(MPI_Comm_free(&m->ctl_comm)));
  g_rec_mutex_unlock(&m->lock);
  g_rec_mutex_clear(&m->lock);
  if (notices_sent) /* else a notice may still be read from it: it stays */
    g_free(m->reason);
  g_free(m);
}

void tp_mpi_set_micro_batches(TpMpi *m, int N)
{
  g_return_if_fail(N >= 1);
  m->base.N = N;
}

/* The transport among the ranks of communicator base (its size the stages, its rank this one's). */
static TpMpi *new_on(MPI_Comm base, int N, double timeout_s, GError **err)
{
  g_return_val_if_fail(N >= 1 && timeout_s >= 0, NULL);
  int size = 1, rank = 0;
  MPI_Comm_size(base, &size);
  MPI_Comm_rank(base, &rank);
  TpMpi *m = g_new0(TpMpi, 1);
  m->base = (TpTransport){
    .name = "mpi",
    .W = size,
    .N = N,
    .timeout_s = timeout_s,
    .send = mpi_send,
    .recv = mpi_recv,
    .abort = mpi_abort,
    .stats = mpi_stats,
    .free = mpi_free,
    .send_borrowed = mpi_send_borrowed,
    .queued = mpi_queued,
  };
  m->rank = rank, m->first = tp_mpi_rank() - rank;
  int *ub = NULL, flag = 0;
  if (!TP_GPU_MPI_TRY(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag)))
    flag = 0; /* the standard's least upper bound, below */
  m->tag_ub = flag && ub ? *ub : 32767;
  /* tests narrow the tag space to make operations share codes */
  const char *narrow = g_getenv("TP_MPI_TAG_UB");
  if (narrow && atoi(narrow) > 0 && atoi(narrow) < m->tag_ub)
    m->tag_ub = atoi(narrow);
  MPI_Comm *comms[3] = { &m->hdr_comm, &m->data_comm, &m->ctl_comm };
  for (int i = 0; i < 3; i++) {
    if (MPI_Comm_dup(base, comms[i]) != MPI_SUCCESS ||
        MPI_Comm_set_errhandler(*comms[i], MPI_ERRORS_RETURN) != MPI_SUCCESS) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d: cannot duplicate MPI_COMM_WORLD with errors returned",
                  m->rank);
      g_free(m);
      return NULL;
    }
  }
  g_rec_mutex_init(&m->lock);
  m->pending = g_ptr_array_new_with_free_func(g_free);
  m->spare = g_ptr_array_new_with_free_func(g_free);
  m->ctl_sends = g_ptr_array_new_with_free_func(g_free);
  g_queue_init(&m->held[0]);
  g_queue_init(&m->held[1]);
  return m;
}

TpMpi *tp_mpi_new(int N, double timeout_s, GError **err) { return new_on(MPI_COMM_WORLD, N, timeout_s, err); }

TpMpi *tp_mpi_new_split(int N, double timeout_s, int replicas, GError **err)
{
  int size = tp_mpi_size(), rank = tp_mpi_rank(), W = size / MAX(replicas, 1);
  MPI_Comm part;
  if (replicas < 1 || size % replicas || MPI_Comm_split(MPI_COMM_WORLD, rank / W, rank % W, &part) != MPI_SUCCESS) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "rank %d: cannot split %d ranks into %d replicas", rank, size,
                replicas);
    return NULL;
  }
  TpMpi *m = new_on(part, N, timeout_s, err);
  MPI_Comm_free(&part); /* its duplicates stay */
  replica_stages = W;
  tp_mpi_renote_who(); /* the rank's line names its replica */
  return m;
}

TpTransport *tp_mpi_transport(TpMpi *m) { return m ? &m->base : NULL; }

gboolean tp_mpi_check_abort(TpMpi *m, GError **err)
{
  g_rec_mutex_lock(&m->lock);
  gboolean aborted = tp_mpi_poll_abort(m);
  if (!aborted)
    reap(m);
  g_rec_mutex_unlock(&m->lock);
  if (aborted) {
    char me[40], *r = reason_of(m);
    tp_mpi_who(m->first + m->rank, me, sizeof me);
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: run aborted: %s", me, r);
    g_free(r);
  }
  return aborted;
}

gboolean tp_mpi_available(void) { return TRUE; }
const char *tp_mpi_missing(void) { return NULL; }
