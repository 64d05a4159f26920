/* tp_mpi.h — the MPI transport: one MPI rank per stage (rank r runs stage r+1), non-blocking
 * tagged messages between neighbouring ranks, receive timeouts naming the peer, an abort that
 * reaches every rank, start-up and shutdown helpers, and a ping-pong measurement of each link for
 * the simulator's cost model.  This header does not include mpi.h: without MPI (configure found no
 * mpicc) the same functions exist and fail with TP_MPI_MISSING.
 *
 * Messages.  A send posts two MPI_Isend of a private copy (send_borrowed: of the caller's buffer,
 * lent until the send completes and a later call of the transport reaps it): a 24-byte header (kind, mini-batch,
 * micro-batch, length) on one communicator and the payload on another, both with the same MPI tag,
 * the operation's code: ((mb·(N+1) + micro+1)·2 + [kind is B]) modulo (MPI_TAG_UB+1) (micro+1 is 0
 * for a whole mini-batch).  MPI guarantees only MPI_TAG_UB ≥ 32767, so two operations may share a
 * code; MPI keeps messages of one (source, tag, communicator) in order, so the k-th header of a code
 * belongs to the k-th payload of that code.  A receive waits (MPI_Irecv/MPI_Test) for the next
 * header of its code from its peer; when the header names its operation and length, the payload is
 * received straight into the caller's buffer; a header of another operation that shares the code
 * has its payload received into a held message that a later receive takes.  Messages of other
 * codes stay in MPI's queues, so tags may be asked for in any order, and forward (from rank r-1)
 * and backward (from rank r+1) traffic never wait on each other.
 *
 * Faults.  A receive that waits longer than timeout_s fails with one line naming the peer's stage
 * and rank and the operation awaited.  abort() marks the transport (every waiting and later
 * receive and send fails) and sends its reason on a third communicator to every other rank; each
 * waiting loop polls it.  tp_mpi_fail() prints the rank's line, aborts, gives the others a moment
 * to print theirs and ends the job with MPI_Abort.  When a rank dies, mpirun sends SIGTERM to the
 * others: the end hook tp_mpi_init() sets (common/tp_signal.h) prints the line of what the rank was
 * waiting for.
 *
 * Threads.  Calls may come from any thread but never two at once inside MPI: the transport
 * serialises its MPI calls with a mutex, so MPI_THREAD_SERIALIZED is enough (MPI_THREAD_MULTIPLE is
 * asked for; FUNNELED is refused, since the stage thread is not the thread that called MPI_Init). */
#ifndef TP_MPI_H
#define TP_MPI_H

#include "tp_transport.h"

#include <glib.h>

#define TP_MPI_MISSING "this build has no MPI support (configure found no mpicc)"

/* This rank's MPI transport: the stage links (tp_mpi_transport) and the collectives below. */
typedef struct TpMpi TpMpi;

/* Whether this build has the MPI transport. */
gboolean tp_mpi_available(void);

/* Why it is not available (TP_MPI_MISSING, or why its module cannot be loaded); NULL where it is. */
const char *tp_mpi_missing(void);

/* Whether the process looks started by an MPI launcher (mpirun, mpiexec or srun set their
 * environment variables); a --transport mpi run without one is refused before MPI starts. */
gboolean tp_mpi_launched(void);

/* Bound a wait that no timeout of the transport covers (MPI's start-up, MPI_Init_thread and the
 * communicators' creation; MPI_Finalize): after seconds, one line naming what was waited for and
 * _exit(1), so that mpirun ends the job.  seconds <= 0 disarms it.  (SIGALRM.) */
void tp_mpi_watchdog(double seconds, const char *what);

/* MPI_Init_thread asking for MPI_THREAD_MULTIPLE; fails when less than MPI_THREAD_SERIALIZED is
 * provided.  Sets the SIGTERM hook described above. */
gboolean tp_mpi_init(int *argc, char ***argv, GError **err);

/* For runs that stop at a checkpoint: SIGINT, SIGTERM and SIGHUP no longer end the rank; the first
 * is recorded (tp_signal_stop_requested returns it, common/tp_signal.h) with one line saying so and
 * what the rank waits for, if anything (so that the line is there should mpirun kill the rank
 * next); a second one ends the rank at once with the line of the SIGTERM hook above. */
void tp_mpi_catch_signals(void);
int tp_mpi_rank(void);
int tp_mpi_size(void);

/* FALSE with a TP_ERROR_INPUT "mpirun -np N does not match -w W" when the number of ranks is not
 * W (every rank gets it: the caller has one of them say it, tp_mpi_end_said). */
gboolean tp_mpi_check_size(int W, GError **err);

/* The transport of this rank's stage (stage tp_mpi_rank()+1 of W = tp_mpi_size());
 * N: micro-batches per mini-batch; receives wait at most timeout_s.  Collective. */
TpMpi *tp_mpi_new(int N, double timeout_s, GError **err);
/* Data parallelism: the transport of this rank's replica, the world's ranks split into `replicas`
 * runs of consecutive ranks (rank r: replica r / W, stage r mod W, W = size / replicas), each a
 * pipeline of its own.  Collective. */
TpMpi *tp_mpi_new_split(int N, double timeout_s, int replicas, GError **err);
/* The mean over the replicas of each stage's gradient (exec/tp_reduce.h): one communicator per
 * stage; a reduction onto the stage's first replica and a broadcast from it, so that every
 * replica gets the same bits; with tie_stage > 0, the tie of the first stage's gradient with that
 * stage's, one communicator of the two per replica; waits bounded by timeout_s, polling m's
 * aborts.  Collective. */
struct TpReduce *tp_mpi_reduce_new(TpMpi *m, int replicas, int tie_stage, double timeout_s, GError **err);
/* The micro-batches per mini-batch of the schedule its stage links carry (they name a message's
 * micro-batch), set before their first message. */
void tp_mpi_set_micro_batches(TpMpi *m, int N);
/* Its stage links, as every transport offers them (tp_transport_free of them frees m; a run ends
 * with tp_mpi_finalize instead). */
TpTransport *tp_mpi_transport(TpMpi *m);

/* Note: the transport's stats() counts the messages this rank sent (from = its stage); other links read 0 —
 * gather them with tp_mpi_gather for a report. */

/* Whether another rank has aborted the run (polls its messages); the reason in err. */
gboolean tp_mpi_check_abort(TpMpi *m, GError **err);

/* Print line (one line, to stderr), abort m (so the other ranks end too; m may be NULL), wait a
 * moment for them, and end the job with MPI_Abort(status). */
G_GNUC_NORETURN void tp_mpi_fail(TpMpi *m, const char *line, int status);

/* End of a run: waits (at most t's timeout, polling aborts) until every rank arrives, completes
 * pending sends, frees m and finalizes MPI.  On an abort or a rank that never arrives it calls
 * tp_mpi_fail and does not return. */
void tp_mpi_finalize(TpMpi *m);

/* The end of a job whose ranks all stop with an error that one of them says (says: this rank):
 * mpirun ends the job at the first rank that exits with an error, possibly before another has
 * printed.  The rank that says it finalizes at the process's exit, after its line; the others now,
 * waiting in tp_mpi_finalize's barrier for it at least 30 s (its way out may free GPU stages), not
 * just the transport's timeout — past that they end the job with status 1 and a line of their own. */
void tp_mpi_end_said(TpMpi *m, gboolean says);

/* Gather len bytes from every rank into all (W·len bytes, in rank order) on rank root, or on
 * every rank when root < 0.  Waits at most the transport's timeout (at least 1 s), polling aborts.  Collective. */
gboolean tp_mpi_gather(TpMpi *m, int root, const void *mine, size_t len, void *all, GError **err);

/* Broadcast len bytes of buf from rank root to every rank; doing names the step in errors ("while
 * reading the checkpoint").  Waits as tp_mpi_gather does.  Collective. */
gboolean tp_mpi_bcast(TpMpi *m, int root, void *buf, size_t len, const char *doing, GError **err);

/* Whether text (the arguments that must agree, e.g. the command line) is the same on every rank;
 * else TP_ERROR_INPUT "rank R (stage S) was started with other arguments than rank 0", the same on
 * every rank (so each exits 2; rank 0 prints it).  Collective. */
gboolean tp_mpi_check_same(TpMpi *m, const char *text, GError **err);

/* One link's measured cost: latency (s) and bandwidth (bytes/s) from stage s to s+1. */
typedef struct {
  double latency_s;
  double bandwidth_Bps;
} TpMpiLink;

/* Ping-pong of small (8 B, 10·reps round trips) and large (large_bytes, 0: 4 MiB; reps round trips)
 * messages between every pair of neighbouring ranks; links[0..W-2] gets every link on every rank.  raw:
 * plain blocking MPI_Send/MPI_Recv instead of the transport's send and receive (to compare the
 * two).  The transport's counters are reset afterwards.  Collective. */
gboolean tp_mpi_measure_links(TpMpi *m, int reps, size_t large_bytes, gboolean raw, TpMpiLink *links,
                              GError **err);

/* Each link's eager limit in bytes, limits[0..W-2] on every rank: a send of more payload completes
 * only once the receiving rank takes it (MPI's rendezvous; common/tp_eager.h), so the sender holds
 * its buffer until then.  Ranks on one host (one shared-memory domain) talk through Open MPI's
 * shared-memory BTL, others through its TCP BTL: the limit is that BTL's eager limit as this job
 * set it (read through MPI_T: btl_vader_eager_limit or btl_sm_eager_limit, btl_tcp_eager_limit),
 * else Open MPI's default (TP_EAGER_LIMIT_SHM, TP_EAGER_LIMIT_TCP).  Collective. */
gboolean tp_mpi_eager_limits(TpMpi *m, double *limits, GError **err);

/* Ping-pong of n message sizes between every pair of neighbouring ranks (the transport's send and
 * receive, or plain MPI when raw): one warm-up and rounds[i] timed round trips of sizes[i] bytes;
 * best[l·n + i] and median[l·n + i] (either may be NULL) get link l's one-way time (half a round trip),
 * the least and the median over the rounds, for l in 0..W-2, on every rank.  The transport's
 * counters are reset afterwards.  Collective. */
gboolean tp_mpi_ping_pong(TpMpi *m, const size_t *sizes, const int *rounds, int n, gboolean raw, double *best,
                          double *median, GError **err);

#endif
