/* tp_mpi_priv.h — what the MPI transport's files share: the transport's state, the message header,
 * and the note of what the rank is waiting for (read by the SIGTERM hook). */
#ifndef TP_MPI_PRIV_H
#define TP_MPI_PRIV_H

#include "tp_mpi.h"
#include "tp_msg_hdr.h"

#include <mpi.h>
#include "tp_gpu_check.h"
#include <stdint.h>

enum { TP_MPI_CTL_ABORT = 1 };

/* The header sent ahead of every payload (shared with the NCCL transport). */
typedef TpMsgHdr TpMpiHdr;

/* A message received ahead of its turn (its header shared the code of the one awaited). */
typedef struct {
  TpMpiHdr hdr;
  unsigned char data[];
} TpMpiHeld;

/* A send in flight: the header and the payload (a copy in data, or the caller's lent buffer, given
 * back by done(done_data)), freed or reused once both requests complete. */
typedef struct {
  MPI_Request req[2];
  size_t cap; /* bytes data can hold (buffers are reused) */
  void (*done)(void *);
  void *done_data;
  TpMpiHdr hdr;
  unsigned char data[];
} TpMpiSend;

struct TpMpi {
  TpTransport base;
  int rank;              /* in its communicator (a replica's, with data parallelism) */
  int first;             /* the world rank of its communicator's rank 0 */
  int tag_ub;
  MPI_Comm hdr_comm, data_comm, ctl_comm;
  GRecMutex lock;        /* every MPI call, the pending sends and the held messages */
  GPtrArray *pending;    /* TpMpiSend */
  GPtrArray *spare;      /* completed TpMpiSend, reused (fresh large buffers cost page faults) */
  GQueue held[2];        /* from rank-1 (forward), from rank+1 (backward) */
  gint64 held_bytes;     /* their payloads (read by queued() under the lock) */
  TpLinkStats sent[2];   /* to rank-1, to rank+1 */
  GPtrArray *ctl_sends;  /* abort notices in flight (char * with an MPI_Request ahead) */
  gint aborted;
  char *reason;          /* under lock */
};

/* The operation's MPI tag (see tp_mpi.h). */
int tp_mpi_code(const TpMpi *m, const TpTag *tag);

/* Poll the abort communicator (lock held); TRUE when the run is aborted, here or elsewhere. */
gboolean tp_mpi_poll_abort(TpMpi *m);

/* Wait for req until deadline (monotonic µs, 0: none), polling aborts: MPI_Test in a loop for
 * spin_us, then between sleeps of 10 µs growing to 200 µs; lock held, released while sleeping.
 * Returns 0 when it completed, 1 on timeout, 2 on abort, 3 when MPI reports an error; on a timeout
 * or an abort a receive (is_recv) is cancelled, another request is left as it is (the job is about
 * to end).  tp_mpi_wait polls TP_MPI_SPIN_US; a receive polls that long plus 1 µs per 2 KiB it
 * expects (a message on its way), and its payload, which follows the header at once, up to 10 ms. */
enum { TP_MPI_SPIN_US = 50 };
int tp_mpi_wait_spin(TpMpi *m, MPI_Request *req, gint64 deadline, gboolean is_recv, gint64 spin_us);
int tp_mpi_wait(TpMpi *m, MPI_Request *req, gint64 deadline, gboolean is_recv);

/* "stage 2 (rank 1)", or with replicas "stage 2 of replica 1 (rank 1)": world rank rank. */
void tp_mpi_who(int rank, char *buf, size_t len);
/* The rank's line (the signal hooks') named again, once the replicas are known. */
void tp_mpi_renote_who(void);

/* Note what the rank is waiting for (NULL: nothing), for the SIGTERM hook's line. */
void tp_mpi_note_wait(const char *what);

#endif
