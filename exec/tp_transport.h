/* tp_transport.h — how stages exchange activations and gradients: a small struct of function
 * pointers that every transport fills (local threads here; MPI and NCCL each in a folder of their
 * own).
 *
 * Messages travel between neighbouring stages only (stage s to s+1 carries activations, s+1 to s
 * gradients).  Each message is tagged with the operation that sent it; a receiver asks for a tag
 * and gets exactly that message, whatever order messages arrived in.  A send never blocks the
 * sender's compute order (the payload is copied or queued; send_borrowed lends it instead).  A receive waits at most timeout_s and
 * then fails naming the peer stage and the operation it waited for; abort() makes every waiting
 * and later receive fail at once, so a failing stage ends the run instead of hanging it.
 * Stages are 0-based here and 1-based in messages. */
#ifndef TP_TRANSPORT_H
#define TP_TRANSPORT_H

#include "tp_error.h"
#include "tp_schedule.h"

#include <glib.h>
#include <stddef.h>

/* The operation that sent a message: kind (TP_OP_F or TP_OP_B), mini-batch 1..K, micro-batch
 * 0..N-1 or TP_WHOLE. */
typedef struct {
  int kind;
  int mb;
  int micro;
} TpTag;

static inline gboolean tp_tag_equal(const TpTag *a, const TpTag *b)
{
  return a->kind == b->kind && a->mb == b->mb && a->micro == b->micro;
}

/* The tag of the message an operation sends; the operation that receives it (the same forward on
 * the next stage, the same backward on the previous one) asks for the same tag.  A split
 * backward's I sends what B sends, under B's tag: a stage's I or B may feed its neighbour's I or
 * B alike (the transports know two kinds). */
static inline TpTag tp_tag_of(const TpOp *op)
{
  TpTag t = { tp_op_sends_up(op->kind) ? TP_OP_B : op->kind, op->mb, op->micro };
  return t;
}

/* The two ends of a link as one stage sees it: the stage that sends or receives (local) and its
 * neighbour at the other end (peer).  0-based stages. */
typedef struct {
  int local;
  int peer;
} TpLinkEnds;

static inline TpLinkEnds tp_link_ends(int local, int peer)
{
  TpLinkEnds l = { .local = local, .peer = peer };
  return l;
}

/* Counters of one link direction (from → to). */
typedef struct {
  guint64 messages;
  guint64 bytes;
} TpLinkStats;

/* A message of zero bytes where more are expected is the marker of a cut run (tp_runtime.h): the
 * receive fails with TP_ERROR_CUT, which the runtime takes as "the mini-batches from this tag's on
 * are left out".  Every transport's receive says it so. */
static inline gboolean tp_transport_cut_marker(const TpTag *tag, int to, int from, GError **err)
{
  g_set_error(err, TP_ERROR, TP_ERROR_CUT, "stage %d: the run is cut before mini-batch %d (marker from stage %d)",
              to + 1, tag->mb, from + 1);
  return FALSE;
}

typedef struct TpTransport TpTransport;
struct TpTransport {
  const char *name; /* "local", "mpi", "nccl" */
  int W;            /* stages (fixed at creation) */
  int N;            /* micro-batches per mini-batch, fixed before the first message (names micro-batches in
                       messages; the MPI transport's tags are made of it) */
  double timeout_s; /* how long a receive waits before it fails */
  /* What the transport can do, set at creation (callers decide by these, never by name): */
  gboolean in_process;    /* every stage runs in this process (a neighbour's backend instance is at
                             hand: two devices' buffers may be copied directly) */
  gboolean device_memory; /* sends and receives take buffers in a device's memory as they are */

  /* Send len bytes from stage link.local to its neighbour link.peer, tagged tag.  Returns at once. */
  gboolean (*send)(TpTransport *t, TpLinkEnds link, const TpTag *tag, const void *data, size_t len, GError **err);
  /* Receive at stage link.local the message tagged tag from its neighbour link.peer into data, which
   * must be exactly len bytes long; waits at most timeout_s (TP_ERROR_RUNTIME then, and on abort). */
  gboolean (*recv)(TpTransport *t, TpLinkEnds link, const TpTag *tag, void *data, size_t len, GError **err);
  /* End the run: every waiting and later receive (and later send) fails with reason. */
  void (*abort)(TpTransport *t, const char *reason);
  /* Messages and bytes sent from → to so far. */
  void (*stats)(TpTransport *t, int from, int to, TpLinkStats *out);
  void (*free)(TpTransport *t);
  /* Optional (NULL: tp_transport_send_borrowed copies through send): send without copying.  The
   * transport reads data until it calls done(done_data) — once, from any thread, when the payload
   * is sent or the send failed; the caller must not write data before.  A transport freed with a
   * send in flight may never call it (the run failed; MPI may still read the buffer). */
  gboolean (*send_borrowed)(TpTransport *t, TpLinkEnds link, const TpTag *tag, const void *data, size_t len,
                            void (*done)(void *done_data), void *done_data, GError **err);
  /* Optional (NULL: none it can count): the payload bytes this transport holds for stage `to`, in
   * this process, of messages that arrived and were not yet received — a message counts from its
   * arrival until a receive takes it, and a receive that was waiting when its message came takes
   * it at once.  Only that stage's receives lower it; any thread may call it. */
  gint64 (*queued)(TpTransport *t, int to);
};

/* Send data lent to the transport until done(done_data) (see send_borrowed); a transport without
 * its own way copies it at once and calls done before returning. */
static inline gboolean tp_transport_send_borrowed(TpTransport *t, TpLinkEnds link, const TpTag *tag, const void *data,
                                                  size_t len, void (*done)(void *), void *done_data, GError **err)
{
  if (t->send_borrowed)
    return t->send_borrowed(t, link, tag, data, len, done, done_data, err);
  gboolean ok = t->send(t, link, tag, data, len, err);
  if (done)
    done(done_data);
  return ok;
}

static inline void tp_transport_free(TpTransport *t)
{
  if (t)
    t->free(t);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpTransport, tp_transport_free)

/* "F(3,B)" — a tag's name in messages, as tp_op_name names the operation. */
static inline void tp_tag_name(const TpTransport *t, const TpTag *tag, char *buf, size_t len)
{
  TpSchedule stub = { .N = t->N };
  TpOp op = { .kind = (uint8_t)tag->kind, .src = TP_SRC_FIXED, .mb = tag->mb, .micro = tag->micro };
  tp_op_name(&stub, &op, buf, len);
}


/* For transports of one stage per process (MPI, NCCL): the index of the link direction towards or
 * from peer as seen by `rank` (0: rank-1, 1: rank+1), or -1 when peer is no neighbour. */
static inline int tp_transport_side(int W, int rank, int peer)
{
  if (peer < 0 || peer >= W)
    return -1;
  return peer == rank - 1 ? 0 : peer == rank + 1 ? 1 : -1;
}

/* The error of a send (local: from) or receive (local: to) that `rank` cannot do; FALSE. */
static inline gboolean tp_transport_bad_link(int W, int rank, int local, int from, int to, GError **err)
{
  if (local != rank)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d is not on this rank (rank %d runs stage %d)", local + 1,
                rank, rank + 1);
  else
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "no link from stage %d to stage %d (of %d)", from + 1, to + 1, W);
  return FALSE;
}

#endif
