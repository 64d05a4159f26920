/* test-nccl.c — the NCCL transport.  Everywhere: its bookkeeping that needs no GPU (which
 * communicator each link uses, the header that names a payload, held messages taken by tag in any
 * order) and its refusal when it cannot run (a build without NCCL or MPI; no GPU), in the library
 * and in `train --transport nccl`.  Where two GPUs and mpirun are present (NCCL allows one rank per
 * GPU): `make check` is the driver and starts this same program under `timeout 60 mpirun -np 2 …
 * --worker`, whose ranks exchange tagged messages out of order between host and device buffers and
 * check every byte, and two replicas of one stage average a gradient with NCCL's all-reduce
 * (data parallelism's reduction).  Otherwise those tests skip, saying why. */
#include "config.h"
#include "tp_error.h"
#include "tp_nccl.h"
#include "tp_test.h"

#include <glib.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

#ifdef HAVE_NCCL_TRANSPORT
#include "tp_backend_cuda.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#endif

static void test_comm_of(void)
{
  enum { W = 6 };
  for (int r = 0; r < W; r++) {
    /* the communicators this rank uses, one per role: send forward, receive forward, send
     * backward, receive backward (a role a rank at either end lacks reads -1) */
    int role[4] = { r + 1 < W ? tp_nccl_comm_of(r, r + 1) : -1, r > 0 ? tp_nccl_comm_of(r - 1, r) : -1,
                    r > 0 ? tp_nccl_comm_of(r, r - 1) : -1, r + 1 < W ? tp_nccl_comm_of(r + 1, r) : -1 };
    for (int i = 0; i < 4; i++) {
      if (role[i] < 0)
        continue;
      g_assert_cmpint(role[i], <, TP_NCCL_N_COMMS);
      g_assert_cmpint(role[i] < 2, ==, i < 2); /* forward traffic on forward communicators */
      for (int j = 0; j < i; j++)
        g_assert_cmpint(role[i], !=, role[j]);
    }
  }
  g_assert_cmpint(tp_nccl_comm_of(0, 2), ==, -1);
  g_assert_cmpint(tp_nccl_comm_of(3, 3), ==, -1);
  g_assert_cmpint(tp_nccl_comm_of(-1, 0), ==, -1);
}

static void test_header(void)
{
  TpTag t = { TP_OP_F, 3, 1 };
  TpMsgHdr h = tp_msg_hdr(&t, 4096);
  g_assert_cmpuint(h.len, ==, 4096);
  g_assert_true(tp_msg_hdr_is(&h, &t));
  TpTag others[] = { { TP_OP_B, 3, 1 }, { TP_OP_F, 4, 1 }, { TP_OP_F, 3, 2 }, { TP_OP_F, 3, TP_WHOLE } };
  for (guint i = 0; i < G_N_ELEMENTS(others); i++)
    g_assert_false(tp_msg_hdr_is(&h, &others[i]));
}

static void test_held(void)
{
  GQueue q = G_QUEUE_INIT;
  TpTag tags[] = { { TP_OP_F, 1, 0 }, { TP_OP_F, 1, 1 }, { TP_OP_B, 1, 0 } };
  TpNcclHeld held[3];
  for (int i = 0; i < 3; i++) {
    held[i] = (TpNcclHeld){ tp_msg_hdr(&tags[i], (size_t)(i + 1)), &held[i] };
    g_queue_push_tail(&q, &held[i]);
  }
  int order[] = { 2, 0, 1 };
  for (int k = 0; k < 3; k++) {
    TpNcclHeld *m = tp_msg_held_take(&q, &tags[order[k]]);
    g_assert_true(m == &held[order[k]]);
    g_assert_cmpuint(m->hdr.len, ==, (guint64)order[k] + 1);
    g_assert_null(tp_msg_held_take(&q, &tags[order[k]])); /* taken once */
  }
  g_assert_true(g_queue_is_empty(&q));
}

/* Two ranks on one GPU of one node are found before NCCL starts (it would fail inside ncclGroupEnd
 * with "Duplicate GPU"); one GPU per rank, or the same device number on two nodes, is fine. */
static void test_shared_gpu(void)
{
  TpNcclPlace p[4] = { { "node-a", { 1 }, 0 }, { "node-a", { 2 }, 1 }, { "node-b", { 1 }, 0 }, { "node-b", { 3 }, 1 } };
  int a = -1, b = -1;
  g_assert_false(tp_nccl_shared_gpu(p, 4, &a, &b));
  g_assert_false(tp_nccl_shared_gpu(p, 1, &a, &b));
  p[3].uuid[0] = 1; /* rank 3 on rank 2's GPU */
  g_assert_true(tp_nccl_shared_gpu(p, 4, &a, &b));
  g_assert_cmpint(a, ==, 2);
  g_assert_cmpint(b, ==, 3);
  p[1].uuid[0] = 1, p[1].uuid[15] = 9; /* one byte apart: another GPU */
  g_assert_true(tp_nccl_shared_gpu(p, 4, &a, &b));
  g_assert_cmpint(a, ==, 2);
  p[1].uuid[15] = 0; /* now rank 1 is on rank 0's */
  g_assert_true(tp_nccl_shared_gpu(p, 4, &a, &b));
  g_assert_cmpint(a, ==, 0);
  g_assert_cmpint(b, ==, 1);
}

/* Without NCCL or MPI the transport refuses with one line naming the flag; without a GPU it
 * refuses before any MPI call, naming the reason. */
static void test_refusal(void)
{
  GError *err = NULL;
  TpTransport *t = NULL;
#ifdef HAVE_NCCL_TRANSPORT
  char *why = NULL;
  if (tp_cuda_device_count(&why) > 0) {
    g_test_skip("a GPU is present: the refusal without one is not observable here");
    return;
  }
  g_free(why);
  t = tp_nccl_new(4, 1, NULL, &err);
  g_assert_null(t);
  g_assert_error(err, TP_ERROR, TP_ERROR_PARAM_TRANSPORT); /* the program names it --transport */
  g_assert_true(g_str_has_prefix(err->message, "transport nccl: no CUDA device"));
#else
  g_assert_false(tp_nccl_available());
  t = tp_nccl_new(4, 1, NULL, &err);
  g_assert_null(t);
  g_assert_error(err, TP_ERROR, TP_ERROR_PARAM_TRANSPORT);
  g_assert_cmpstr(err->message, ==, "transport nccl: " TP_NCCL_MISSING);
#endif
  g_clear_error(&err);
}

/* `train --transport nccl` without what it needs: one line, status 2, before any MPI start-up —
 * without NCCL in the build, without --backend cuda, outside mpirun (option checking loads no backend:
 * whether a GPU is present the trainer finds after MPI starts). */
static void test_train_refusal(void)
{
  const char *plain[] = { "train", "--transport", "nccl", "--data", "synthetic", "-k", "2", "-q", NULL };
  const char *cuda[] = { "train", "--transport", "nccl", "--backend", "cuda", "--data", "synthetic", "-k", "2", "-q",
                         NULL };
  const char *expect[2];
#ifdef HAVE_NCCL_TRANSPORT
  expect[0] = "timeprest train: --transport nccl: links GPU stages; give --backend cuda\n";
  expect[1] = "timeprest train: --transport nccl: start it under mpirun";
#else
  expect[0] = expect[1] = "timeprest train: --transport nccl: " TP_NCCL_MISSING "\n";
#endif
  const char *const *args[2] = { plain, cuda };
  for (int i = 0; i < 2; i++) {
    TptRun r = tpt_run(args[i]);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpstr(r.out, ==, "");
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    if (!g_str_has_prefix(r.err, expect[i]))
      g_error("expected '%s...', got '%s'", expect[i], r.err);
    tpt_run_clear(&r);
  }
}

static const char *self;

#ifdef HAVE_NCCL_TRANSPORT
/* Byte i of message k. */
static guchar pattern(int k, size_t i) { return (guchar)(k * 31 + i * 7 + 1); }

#define WCHECK(cond, what)                                                                             \
  do {                                                                                                 \
    if (!(cond)) {                                                                                     \
      g_printerr("rank %d: %s\n", rank, (what));                                                       \
      return 1;                                                                                        \
    }                                                                                                  \
  } while (0)

/* Two replicas of one stage (D = 2, W = 1), one GPU each: the gradient's mean by NCCL's all-reduce,
 * checked against the host's on both ranks, and the same bits on both; then of host memory. */
static int worker_allreduce(int rank)
{
  enum { N = 1 << 16 };
  GError *err = NULL;
  TpReduce *r = tp_nccl_reduce_new(2, 30, &err);
  WCHECK(r, err ? err->message : "tp_nccl_reduce_new");
  g_autofree float *host = g_new(float, N), *all = g_new(float, 2 * (size_t)N);
  float *dev = NULL;
  WCHECK(cudaSetDevice(rank) == cudaSuccess && cudaMalloc((void **)&dev, N * sizeof(float)) == cudaSuccess, "cudaMalloc");
  for (int i = 0; i < N; i++)
    host[i] = rank ? 1.5f * (float)i + 1.0f : 0.5f * (float)i;
  WCHECK(cudaMemcpy(dev, host, N * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess, "upload");
  gboolean ok = r->iface->mean(r, 0, rank, 1, NULL, dev, N, &err);
  WCHECK(ok, err ? err->message : "mean");
  WCHECK(cudaMemcpy(host, dev, N * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess, "download");
  for (int i = 0; i < N; i++)
    WCHECK(fabsf(host[i] - ((float)i + 0.5f)) <= 1e-6f * ((float)i + 1.0f), "a mean is wrong");
  WCHECK(MPI_Allgather(host, N, MPI_FLOAT, all, N, MPI_FLOAT, MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Allgather");
  WCHECK(memcmp(all, all + N, N * sizeof(float)) == 0, "the replicas' means differ");
  for (int i = 0; i < N; i++) /* host memory (batchnorm's statistics): through the GPU */
    host[i] = rank ? 3.0f : 1.0f;
  WCHECK(r->iface->mean(r, 0, rank, 1, NULL, host, N, &err), err ? err->message : "mean of host memory");
  for (int i = 0; i < N; i++)
    WCHECK(host[i] == 2.0f, "a mean of host memory is wrong");
  tp_reduce_free(r);
  cudaFree(dev);
  return 0;
}

/* Rank 0 sends F(1,1..3) in order from device memory; rank 1 asks for them as 3, 1, 2 (host, device,
 * host buffers), then answers with B(1,1) which rank 0 receives into host memory. */
static int worker(int *argc, char ***argv)
{
  int provided = 0, rank = -1;
  gboolean allreduce = strcmp((*argv)[1], "--worker-allreduce") == 0; /* read before MPI sees argv */
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    return 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (allreduce) {
    int rc = worker_allreduce(rank);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
  }
  GError *err = NULL;
  TpTransport *t = tp_nccl_new(3, 30, NULL, &err);
  if (!t) {
    g_printerr("rank %d: %s\n", rank, err->message);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  enum { LEN = 1 << 20 };
  guchar *host = g_malloc(LEN);
  void *dev = NULL;
  WCHECK(cudaMalloc(&dev, LEN) == cudaSuccess, "cudaMalloc");
  gboolean ok = TRUE;
  if (rank == 0) {
    for (int k = 0; k < 3 && ok; k++) {
      for (size_t i = 0; i < LEN; i++)
        host[i] = pattern(k, i);
      TpTag tag = { TP_OP_F, 1, k };
      ok = cudaMemcpy(dev, host, LEN, cudaMemcpyHostToDevice) == cudaSuccess &&
           t->send(t, tp_link_ends(0, 1), &tag, dev, LEN, &err); /* the buffer is reused at once: send copies it */
    }
    TpTag back = { TP_OP_B, 1, 0 };
    ok = ok && t->recv(t, tp_link_ends(0, 1), &back, host, LEN, &err);
    for (size_t i = 0; ok && i < LEN; i++)
      WCHECK(host[i] == pattern(9, i), "B(1,1) arrived damaged");
  } else {
    int order[] = { 2, 0, 1 };
    for (int j = 0; j < 3 && ok; j++) {
      int k = order[j];
      TpTag tag = { TP_OP_F, 1, k };
      memset(host, 0, LEN);
      if (j == 1)
        ok = t->recv(t, tp_link_ends(1, 0), &tag, dev, LEN, &err) && cudaMemcpy(host, dev, LEN, cudaMemcpyDeviceToHost) == cudaSuccess;
      else
        ok = t->recv(t, tp_link_ends(1, 0), &tag, host, LEN, &err);
      for (size_t i = 0; ok && i < LEN; i++)
        WCHECK(host[i] == pattern(k, i), "a forward message arrived damaged or out of place");
    }
    for (size_t i = 0; i < LEN; i++)
      host[i] = pattern(9, i);
    TpTag back = { TP_OP_B, 1, 0 };
    ok = ok && t->send(t, tp_link_ends(1, 0), &back, host, LEN, &err);
  }
  if (!ok) {
    g_printerr("rank %d: %s\n", rank, err ? err->message : "failed");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  TpLinkStats st;
  t->stats(t, rank, 1 - rank, &st);
  WCHECK(st.messages == (rank == 0 ? 3u : 1u) && st.bytes == st.messages * LEN, "wrong link counters");
  tp_transport_free(t);
  cudaFree(dev);
  g_free(host);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
#endif

/* `timeout 60 mpirun -np 2 SELF mode`, two ranks of one GPU each; skips, saying why, where there are
 * not two GPUs, or no mpirun. */
static void two_ranks(const char *mode)
{
#ifndef HAVE_NCCL_TRANSPORT
  (void)mode;
  tpt_skip_unless_required("nccl", TP_NCCL_MISSING);
#else
  char *why = NULL;
  int gpus = tp_cuda_device_count(&why);
  g_autofree char *mpirun = g_find_program_in_path("mpirun"), *timeout = g_find_program_in_path("timeout");
  if (gpus < 2) {
    g_autofree char *msg = g_strdup_printf("needs 2 GPUs (NCCL runs one rank per GPU); %d here%s%s", gpus,
                                           why ? ": " : "", why ? why : "");
    g_free(why);
    tpt_skip_unless_required(gpus == 0 ? "cuda" : "nccl", msg);
    return;
  }
  if (!mpirun || !timeout) {
    tpt_skip_unless_required("mpi", !mpirun ? "mpirun not found" : "timeout not found");
    return;
  }
  const char *argv[] = { "timeout", "60", "mpirun", "--oversubscribe", "-np", "2", self, mode, NULL };
  char **envp = g_get_environ();
  envp = g_environ_setenv(envp, "OMPI_ALLOW_RUN_AS_ROOT", "1", TRUE);
  envp = g_environ_setenv(envp, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", TRUE);
  g_autofree char *out = NULL, *errout = NULL;
  int wait = 0;
  GError *e = NULL;
  g_assert_true(g_spawn_sync(NULL, (char **)argv, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &errout, &wait, &e));
  g_assert_no_error(e);
  g_strfreev(envp);
  if (!WIFEXITED(wait) || WEXITSTATUS(wait) != 0)
    g_error("mpirun -np 2 %s failed (status %d):\n%s%s", mode, wait, out, errout);
#endif
}

/* Two ranks, one GPU each, exchange messages out of order (see worker). */
static void test_two_ranks(void) { two_ranks("--worker"); }

/* Data parallelism's NCCL all-reduce: two replicas of one stage, one GPU each (worker_allreduce). */
static void test_allreduce(void) { two_ranks("--worker-allreduce"); }

/* Its refusal where it cannot run: a build without NCCL; outside MPI. */
static void test_allreduce_refusal(void)
{
  GError *err = NULL;
#ifdef HAVE_NCCL_TRANSPORT
  g_assert_null(tp_nccl_reduce_new(2, 1, &err)); /* MPI not started in this process */
  g_assert_error(err, TP_ERROR, TP_ERROR_RUNTIME);
  g_assert_true(g_str_has_prefix(err->message, "nccl all-reduce: "));
#else
  g_assert_null(tp_nccl_reduce_new(2, 1, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_RUNTIME);
  g_assert_cmpstr(err->message, ==, "nccl all-reduce: " TP_NCCL_MISSING);
#endif
  g_clear_error(&err);
}

int main(int argc, char **argv)
{
  self = argv[0];
#ifdef HAVE_NCCL_TRANSPORT
  if (argc > 1 && (strcmp(argv[1], "--worker") == 0 || strcmp(argv[1], "--worker-allreduce") == 0))
    return worker(&argc, &argv);
#endif
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/nccl/comm-of", test_comm_of);
  g_test_add_func("/nccl/header", test_header);
  g_test_add_func("/nccl/held", test_held);
  g_test_add_func("/nccl/shared-gpu", test_shared_gpu);
  g_test_add_func("/nccl/refusal", test_refusal);
  g_test_add_func("/nccl/train-refusal", test_train_refusal);
  g_test_add_func("/nccl/two-ranks", test_two_ranks);
  g_test_add_func("/nccl/allreduce", test_allreduce);
  g_test_add_func("/nccl/allreduce-refusal", test_allreduce_refusal);
  return g_test_run();
}
