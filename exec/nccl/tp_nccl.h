/* tp_nccl.h — the NCCL transport: GPU stages linked by ncclSend/ncclRecv, one process (MPI rank)
 * per GPU stage (rank r runs stage r+1), the NCCL communicators bootstrapped over MPI.  This header
 * includes neither nccl.h nor mpi.h: a build without NCCL or without MPI has the same functions,
 * which refuse with TP_NCCL_MISSING.
 *
 * Bootstrap.  MPI is started first (tp_mpi_init).  Each rank picks its GPU (the --devices list by
 * its rank on the node, round-robin, or device local-rank mod count), rank 0 makes one
 * ncclUniqueId per communicator, MPI_Bcast hands them to every rank, and every rank joins the
 * communicators with ncclCommInitRank inside one ncclGroupStart/End.
 *
 * Communicators and streams.  Four communicators over all ranks: forward (activations, r → r+1)
 * and backward (gradients, r+1 → r), each split by the parity of the link's lower rank, so that on
 * every rank each communicator carries one role only (send to one peer or receive from the other)
 * and each has a stream of its own.  A send blocked on the GPU until its peer receives therefore
 * never holds up a receive of this rank, and forward and backward traffic never wait on each other
 * (NCCL serialises the operations of one communicator).
 *
 * Messages and tags.  NCCL has no tags: a send posts a small header (kind, mini-batch,
 * micro-batch, length) as an MPI_Isend on a duplicate of MPI_COMM_WORLD, then the payload with
 * ncclSend on the link's communicator.  Both keep their order per link, so the k-th header of a
 * link describes its k-th payload.  A receive for a tag first looks in the messages held for that
 * link; else it takes the link's headers in order and receives each payload, straight into the
 * caller's buffer when the header names the awaited operation (and the buffer is device memory of
 * this rank's GPU), else into a held device buffer that a later receive takes — so tags may be
 * asked for in any order, as with every transport.
 *
 * Buffers.  send() and recv() take device memory of the rank's GPU or host memory (told apart by
 * cudaPointerGetAttributes); send() copies the payload into a device buffer of its own before it
 * returns (device memory must be ready: its producer's stream synchronised), so the caller may
 * reuse its buffer at once; host memory costs one more copy each way.
 *
 * Faults.  Every CUDA, NCCL and MPI call is checked, and a failure is a TP_ERROR_RUNTIME naming
 * the file and line and NCCL's or CUDA's own words.  A receive waits at most timeout_s, polling
 * the stream, ncclCommGetAsyncError and the abort notices of other ranks; it then fails naming the
 * peer stage and the operation awaited.  abort() marks the transport, sends its reason to every
 * other rank over MPI and aborts the communicators (ncclCommAbort), so that no operation of this
 * rank waits any longer; free() after an abort aborts instead of destroying. */
#ifndef TP_NCCL_H
#define TP_NCCL_H

#include "tp_msg_hdr.h"
#include "tp_reduce.h"
#include "tp_transport.h"

#include <glib.h>
#include <stdint.h>

#define TP_NCCL_MISSING "this build has no NCCL transport (configure found no NCCL or no MPI)"

/* Whether this build has the NCCL transport. */
gboolean tp_nccl_available(void);

/* The transport of this rank's stage (stage tp_mpi_rank()+1 of W = tp_mpi_size()), on the GPU
 * chosen as described above (devices: "0,1,…" or NULL); N: micro-batches per mini-batch; receives
 * wait at most timeout_s.  Collective over MPI_COMM_WORLD.  TP_ERROR_PARAM_TRANSPORT "transport nccl: …"
 * when the build has no NCCL or there is no usable GPU (checked before any MPI call, so that every
 * rank fails alike); TP_ERROR_RUNTIME when the bootstrap fails. */
TpTransport *tp_nccl_new(int N, double timeout_s, const char *devices, GError **err);

/* The GPU this rank's transport runs on. */
int tp_nccl_device(const TpTransport *t);

/* Data parallelism's reduction (tp_reduce.h) over NCCL, for GPU stages one rank each: the D·W ranks
 * of MPI_COMM_WORLD, rank r replica r / W of stage r mod W; a communicator per stage over its D
 * replicas (its id made by the first and broadcast over MPI here, collectively; joined by the first
 * mean(), on the GPU that holds the gradient).  mean() reduces the gradient in place (ncclAllReduce,
 * ncclAvg: NCCL leaves every replica the same bits; host memory through a copy on the GPU) and
 * waits at most timeout_s;
 * abort() makes a waiting or later mean() fail and abort the communicator.  TP_NCCL_MISSING where
 * the build has no NCCL. */
TpReduce *tp_nccl_reduce_new(int replicas, double timeout_s, GError **err);

/* ---- the parts of the scheme that need neither a GPU nor MPI (tp_nccl_match.c; tested alone) ---- */

enum { TP_NCCL_N_COMMS = 4 };

/* The communicator (0..3) that carries messages from stage `from` to its neighbour `to`
 * (0-based): 0/1 forward, 2/3 backward, by the parity of the lower of the two; -1 for stages that
 * are not neighbours. */
int tp_nccl_comm_of(int from, int to);

/* Where a rank's GPU is: its node's name and the device's UUID (the device number is for messages).
 * The ranks gather theirs before NCCL starts: NCCL refuses two ranks on one GPU ("Duplicate GPU"
 * inside ncclGroupEnd), and the transport refuses it first, with one line on every rank. */
typedef struct {
  char node[64];
  unsigned char uuid[16];
  int device;
} TpNcclPlace;

/* Whether two of the n ranks' places are one GPU of one node: TRUE with the first such pair in
 * *a < *b; FALSE when every rank has a GPU of its own. */
gboolean tp_nccl_shared_gpu(const TpNcclPlace *places, int n, int *a, int *b);

/* A message received ahead of its turn: its header (sent over MPI ahead of every payload, as the
 * MPI transport's: tp_msg_hdr.h, which also takes held messages by tag) and its payload (a device
 * buffer owned by the transport; opaque here). */
typedef struct {
  TpMsgHdr hdr;
  void *buf;
} TpNcclHeld;

#endif
