/* test-mpi.c — the MPI transport under mpirun.  Run by `make check` it is the driver: each test
 * starts this same program under `timeout 60 mpirun -np 2|3 … --worker MODE` and checks the exit
 * status and the lines the ranks print.  As a worker (one process per rank) it exchanges tagged
 * messages in the orders of generated schedules for every preset (as test-transport.c does with
 * threads), with operations sharing MPI tags, out of order, timing out, aborting, and misbehaves on
 * purpose: one rank exits, is killed, is stopped (SIGSTOP) or stops answering, and every other rank
 * must end with one line naming the rank, stage and operation it waited for.  Skips when mpirun is
 * missing or cannot start processes here. */
#include "tp_mpi.h"
#include "tp_test.h"
#include "tp_test_mpi.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ================================ the worker (one rank) ============================================ */

#define CHECK(cond, ...)                                                                               \
  do {                                                                                                 \
    if (!(cond)) {                                                                                     \
      fprintf(stderr, "rank %d: check failed at line %d: ", tp_mpi_rank(), __LINE__);                 \
      fprintf(stderr, __VA_ARGS__);                                                                    \
      fputc('\n', stderr);                                                                             \
      exit(1);                                                                                         \
    }                                                                                                  \
  } while (0)

/* A message's length and contents depend on the link and the tag, so a mismatch shows (the
 * pattern of test-transport.c). */
static size_t payload_len(const TpTag *tag) { return 8 + 4 * (size_t)((tag->mb * 3 + tag->micro + 1) % 5); }

static void payload(int from, const TpTag *tag, int32_t *buf)
{
  size_t n = payload_len(tag) / 4;
  for (size_t i = 0; i < n; i++)
    buf[i] = (int32_t)(from * 1000003 + tag->kind * 10007 + tag->mb * 101 + tag->micro * 7 + (int)i);
}

typedef enum { FAULT_NONE, FAULT_EXIT, FAULT_KILL, FAULT_STOP, FAULT_MUTE } Fault;

/* This rank's stage of schedule s; the faulty rank misbehaves before its operation fault_at. */
static gboolean run_stage(TpTransport *t, const TpSchedule *s, int st, Fault fault, int fault_at, GError **err)
{
  const TpOp *ops = tp_stage_ops(s, st);
  int32_t buf[64], want[64];
  for (int k = 0; k < tp_stage_len(s, st); k++) {
    if (fault != FAULT_NONE && k == fault_at) {
      if (fault == FAULT_EXIT)
        exit(3);
      if (fault == FAULT_KILL)
        raise(SIGKILL);
      if (fault == FAULT_STOP)
        raise(SIGSTOP);
      if (fault == FAULT_MUTE)
        g_usleep(120 * G_USEC_PER_SEC);
    }
    const TpOp *op = &ops[k];
    if (op->kind == TP_OP_U)
      continue;
    TpTag tag = tp_tag_of(op);
    int from = op->kind == TP_OP_F ? st - 1 : st + 1;
    int to = op->kind == TP_OP_F ? st + 1 : st - 1;
    if (from >= 0 && from < s->W) {
      size_t len = payload_len(&tag);
      if (!t->recv(t, tp_link_ends(st, from), &tag, buf, len, err))
        return FALSE;
      payload(from, &tag, want);
      CHECK(memcmp(buf, want, len) == 0, "stage %d op %d: wrong payload", st + 1, k);
    }
    if (to >= 0 && to < s->W) {
      payload(st, &tag, buf);
      if (!t->send(t, tp_link_ends(st, to), &tag, buf, payload_len(&tag), err))
        return FALSE;
    }
  }
  return TRUE;
}

static void check_pipeline(const TpPreset *p, int W, int N, int K)
{
  if (!tp_pair_check(p->order, p->policy, W, N, NULL))
    return;
  GError *err = NULL;
  TpSchedule *s = tp_schedule_generate(p->order, p->policy, W, N, K, &err);
  CHECK(s, "%s", err->message);
  const int me = tp_mpi_rank();
  TpMpi *m = tp_mpi_new(N, 20, &err);
  TpTransport *t = tp_mpi_transport(m);
  CHECK(t, "%s", err->message);
  if (!run_stage(t, s, me, FAULT_NONE, 0, &err))
    tp_mpi_fail(m, err->message, 1);
  guint64 nf = 0, nb = 0, bf = 0, bb = 0;
  for (int k = 0; k < tp_stage_len(s, me); k++) {
    const TpOp *op = &tp_stage_ops(s, me)[k];
    TpTag tag = tp_tag_of(op);
    if (op->kind == TP_OP_F)
      nf++, bf += payload_len(&tag);
    if (op->kind == TP_OP_B)
      nb++, bb += payload_len(&tag);
  }
  TpLinkStats ls;
  if (me + 1 < W) {
    t->stats(t, me, me + 1, &ls);
    CHECK(ls.messages == nf && ls.bytes == bf, "%s: %" G_GUINT64_FORMAT " forward messages", p->name, ls.messages);
  }
  if (me > 0) {
    t->stats(t, me, me - 1, &ls);
    CHECK(ls.messages == nb && ls.bytes == bb, "%s: %" G_GUINT64_FORMAT " backward messages", p->name, ls.messages);
  }
  t->stats(t, (me + 1) % W, me, &ls); /* another rank's link: not counted here */
  CHECK(ls.messages == 0, "counters of another rank");
  tp_transport_free(t);
  tp_schedule_free(s);
}

static void worker_pipelines(void)
{
  static const int wnk[][3] = { { 2, 2, 6 }, { 2, 1, 4 }, { 3, 3, 8 }, { 3, 2, 6 }, { 4, 2, 10 } };
  for (int p = 0; p < tp_n_presets; p++)
    for (guint i = 0; i < G_N_ELEMENTS(wnk); i++)
      if (wnk[i][0] == tp_mpi_size() && !tp_order_split(tp_presets[p].order) &&
          !tp_order_chunked(tp_presets[p].order)) /* the executor runs no I, W nor chunks */
        check_pipeline(&tp_presets[p], wnk[i][0], wnk[i][1], wnk[i][2]);
}

static TpTag tag_of(int kind, int mb, int micro)
{
  TpTag t = { kind, mb, micro };
  return t;
}

/* Two ranks: out-of-order tags, wrong links and lengths, a timeout, link measurement, abort. */
static void worker_tags(void)
{
  const int me = tp_mpi_rank();
  GError *e = NULL;
  TpMpi *m = tp_mpi_new(4, 5, &e), *last = tp_mpi_new(4, 5, &e);
  TpTransport *t = tp_mpi_transport(m);
  CHECK(t && last, "tp_mpi_new");
  int v = 0;
  if (me == 0) {
    int order[4] = { 2, 0, 3, 1 };
    for (int i = 0; i < 4; i++) {
      TpTag tag = tag_of(TP_OP_F, 1, order[i]);
      v = 100 + order[i];
      CHECK(t->send(t, tp_link_ends(0, 1), &tag, &v, sizeof v, &e), "send");
    }
    TpTag b = tag_of(TP_OP_B, 1, TP_WHOLE);
    CHECK(t->recv(t, tp_link_ends(0, 1), &b, &v, sizeof v, &e) && v == 7, "backward");
    CHECK(!t->send(t, tp_link_ends(0, 2), &b, &v, sizeof v, &e), "no link");
    CHECK(!strcmp(e->message, "no link from stage 1 to stage 3 (of 2)"), "%s", e->message);
    g_clear_error(&e);
    CHECK(!t->recv(t, tp_link_ends(1, 0), &b, &v, sizeof v, &e), "not this rank");
    CHECK(!strcmp(e->message, "stage 2 is not on this rank (rank 0 runs stage 1)"), "%s", e->message);
    g_clear_error(&e);
    TpTag f = tag_of(TP_OP_F, 2, 1);
    CHECK(t->send(t, tp_link_ends(0, 1), &f, &v, sizeof v, &e), "send");
    /* many operations, of several lengths, received in the reverse order */
    for (int mb = 1; mb <= 6; mb++)
      for (int micro = 0; micro < 4; micro++) {
        TpTag tag = tag_of(TP_OP_F, 10 + mb, micro);
        int32_t w[3] = { mb, micro, mb * micro };
        CHECK(t->send(t, tp_link_ends(0, 1), &tag, w, sizeof(int32_t) * (size_t)(1 + (mb + micro) % 3), &e), "send");
      }
  } else {
    for (int j = 0; j < 4; j++) {
      TpTag tag = tag_of(TP_OP_F, 1, j);
      v = -1;
      CHECK(t->recv(t, tp_link_ends(1, 0), &tag, &v, sizeof v, &e) && v == 100 + j, "micro %d: %d", j, v);
    }
    TpTag b = tag_of(TP_OP_B, 1, TP_WHOLE);
    v = 7;
    CHECK(t->send(t, tp_link_ends(1, 0), &b, &v, sizeof v, &e), "send");
    TpTag f = tag_of(TP_OP_F, 2, 1);
    char big[8];
    CHECK(!t->recv(t, tp_link_ends(1, 0), &f, big, sizeof big, &e), "length");
    CHECK(!strcmp(e->message, "stage 2 (rank 1): message F(2,B) from stage 1 (rank 0) has 4 bytes, expected 8"), "%s",
          e->message);
    g_clear_error(&e);
    for (int mb = 6; mb >= 1; mb--)
      for (int micro = 3; micro >= 0; micro--) {
        TpTag tag = tag_of(TP_OP_F, 10 + mb, micro);
        int32_t w[3] = { -1, -1, -1 };
        CHECK(t->recv(t, tp_link_ends(1, 0), &tag, w, sizeof(int32_t) * (size_t)(1 + (mb + micro) % 3), &e), "%s", e->message);
        CHECK(w[0] == mb && (w[1] == micro || (mb + micro) % 3 < 1) && (w[2] == mb * micro || (mb + micro) % 3 < 2),
              "F(%d,%d): %d %d %d", 10 + mb, micro, w[0], w[1], w[2]);
      }
    /* a receive that times out, naming the peer and the operation */
    t->timeout_s = 0.3;
    TpTag never = tag_of(TP_OP_F, 3, 1);
    gint64 t0 = g_get_monotonic_time();
    CHECK(!t->recv(t, tp_link_ends(1, 0), &never, &v, sizeof v, &e), "timeout");
    double dt = (g_get_monotonic_time() - t0) / 1e6;
    CHECK(!strcmp(e->message, "stage 2 (rank 1): no message F(3,B) from stage 1 (rank 0) within 0.3 s (the peer is "
                              "dead or stuck)"),
          "%s", e->message);
    CHECK(dt >= 0.29 && dt < 5, "timed out after %g s", dt);
    g_clear_error(&e);
    t->timeout_s = 5;
  }
  /* the links, through the transport and through plain MPI */
  for (int raw = 0; raw < 2; raw++) {
    TpMpiLink link[1] = { { 0, 0 } };
    CHECK(tp_mpi_measure_links(m, 3, 1 << 20, raw, link, &e), "measure: %s", e ? e->message : "");
    CHECK(link[0].latency_s > 0 && link[0].latency_s < 0.1 && link[0].bandwidth_Bps > 1e6, "link %g s %g B/s",
          link[0].latency_s, link[0].bandwidth_Bps);
    if (me == 0)
      printf("%s link 1->2: latency %.2f us, bandwidth %.2f GB/s\n", raw ? "plain MPI" : "transport",
             link[0].latency_s * 1e6, link[0].bandwidth_Bps / 1e9);
    TpLinkStats ls;
    t->stats(t, me, 1 - me, &ls);
    CHECK(ls.messages == 0, "counters reset after measuring");
  }
  /* gathering, and arguments that agree or not */
  int mine = 10 * (me + 1), all[2] = { 0, 0 };
  CHECK(tp_mpi_gather(m, 0, &mine, sizeof mine, all, &e), "gather");
  CHECK(me != 0 || (all[0] == 10 && all[1] == 20), "gathered %d %d", all[0], all[1]);
  all[0] = all[1] = 0;
  CHECK(tp_mpi_gather(m, -1, &mine, sizeof mine, all, &e) && all[0] == 10 && all[1] == 20, "gathered everywhere");
  CHECK(tp_mpi_check_same(m, "-s timeprest -w 2", &e), "the same arguments");
  CHECK(!tp_mpi_check_same(m, me ? "-s timeprest -w 2" : "-s gpipe -w 2", &e), "other arguments");
  CHECK(e->code == TP_ERROR_INPUT && !strcmp(e->message, "rank 1 (stage 2) was started with other arguments than rank 0"),
        "%s", e->message);
  g_clear_error(&e);
  /* an abort on rank 0 wakes rank 1's receive at once, with rank 0's reason */
  t->timeout_s = 60;
  TpTag f5 = tag_of(TP_OP_F, 5, TP_WHOLE);
  if (me == 0) {
    g_usleep(200000);
    t->abort(t, "stage 1 (rank 0): loss is NaN at mini-batch 4");
    CHECK(!t->send(t, tp_link_ends(0, 1), &f5, &v, sizeof v, &e), "send after abort");
    g_clear_error(&e);
  } else {
    gint64 t0 = g_get_monotonic_time();
    CHECK(!t->recv(t, tp_link_ends(1, 0), &f5, &v, sizeof v, &e), "abort");
    CHECK((g_get_monotonic_time() - t0) / 1e6 < 5, "abort took too long");
    CHECK(!strcmp(e->message, "stage 2 (rank 1): run aborted while waiting for F(5) from stage 1 (rank 0): stage 1 "
                              "(rank 0): loss is NaN at mini-batch 4"),
          "%s", e->message);
    g_clear_error(&e);
    CHECK(tp_mpi_check_abort(m, &e), "check_abort");
    g_clear_error(&e);
  }
  tp_transport_free(t);
  CHECK(!tp_mpi_check_abort(last, NULL), "the other transport is not aborted");
  tp_mpi_finalize(last);
  exit(0);
}

/* Three ranks run a long schedule; rank 1 (stage 2) misbehaves in the middle. */
static void worker_fault(const char *kind, double timeout_s)
{
  Fault f = !strcmp(kind, "exit") ? FAULT_EXIT
            : !strcmp(kind, "kill") ? FAULT_KILL
            : !strcmp(kind, "stop") ? FAULT_STOP
            : FAULT_MUTE;
  GError *e = NULL;
  TpSchedule *s = tpt_preset("timeprest", tp_mpi_size(), 2, 20);
  TpMpi *m = tp_mpi_new(2, timeout_s, &e);
  TpTransport *t = tp_mpi_transport(m);
  CHECK(t, "tp_mpi_new");
  const int me = tp_mpi_rank();
  if (!run_stage(t, s, me, me == 1 ? f : FAULT_NONE, tp_stage_len(s, me) / 2, &e))
    tp_mpi_fail(m, e->message, 1);
  tp_schedule_free(s);
  tp_mpi_finalize(m);
  exit(0);
}

static int worker(int argc, char **argv)
{
  GError *e = NULL;
  if (!tp_mpi_init(&argc, &argv, &e)) {
    fprintf(stderr, "%s\n", e->message);
    return 1;
  }
  const char *mode = argv[2];
  if (!strcmp(mode, "hello")) {
    CHECK(tp_mpi_launched(), "started by mpirun");
    tp_mpi_finalize(NULL);
    return 0;
  }
  if (!strcmp(mode, "size")) {
    gboolean ok = tp_mpi_check_size(atoi(argv[3]), &e);
    if (!ok && tp_mpi_rank() == 0)
      fprintf(stderr, "timeprest train: %s\n", e->message);
    tp_mpi_finalize(NULL);
    return ok ? 0 : 2;
  }
  if (!strcmp(mode, "pipelines")) {
    worker_pipelines();
    tp_mpi_finalize(NULL);
    return 0;
  }
  if (!strcmp(mode, "tags"))
    worker_tags();
  if (!strcmp(mode, "fault"))
    worker_fault(argv[3], g_ascii_strtod(argv[4], NULL));
  fprintf(stderr, "unknown worker mode %s\n", mode);
  return 2;
}

/* ================================ the driver (make check) ========================================== */

static char *self;

typedef TptMpiRun MpiRun;
#define mpi_run_clear tpt_mpi_run_clear
#define count tpt_count

/* timeout 60 mpirun --oversubscribe -np np SELF --worker args…, with env (NAME=VALUE, NULL-ended). */
static MpiRun mpi_run(int np, const char *const *env, const char *const *args)
{
  const char *all[16] = { "--worker" };
  for (int i = 0; args[i] && i + 2 < (int)G_N_ELEMENTS(all); i++)
    all[i + 1] = args[i];
  return tpt_mpi_run(np, env, self, all, NULL);
}

/* Whether mpirun can start two processes here (else the tests skip, saying why). */
static gboolean mpi_usable(void)
{
  const char *why = tpt_mpi_unusable();
  if (why)
    tpt_skip_unless_required("mpi", why);
  return why == NULL;
}

static void expect_success(MpiRun *r)
{
  if (r->status != 0)
    g_error("mpirun exited with %d\n--- stdout\n%s--- stderr\n%s", r->status, r->out, r->err);
}

/* A rank knows it was started by mpirun. */
static void test_hello(void)
{
  if (!mpi_usable())
    return;
  MpiRun r = mpi_run(2, NULL, (const char *const[]){ "hello", NULL });
  expect_success(&r);
  mpi_run_clear(&r);
}

static void test_pipelines(gconstpointer data)
{
  if (!mpi_usable())
    return;
  int np = GPOINTER_TO_INT(data) % 10;
  gboolean shared = GPOINTER_TO_INT(data) >= 10;
  /* a tag space of 10 codes: operations share codes, so messages get held and matched by header */
  const char *env[] = { "TP_MPI_TAG_UB=9", NULL };
  const char *args[] = { "pipelines", NULL };
  MpiRun r = mpi_run(np, shared ? env : NULL, args);
  expect_success(&r);
  mpi_run_clear(&r);
}

static void test_tags(void)
{
  if (!mpi_usable())
    return;
  /* a tag space of 4 codes: most operations share one with others */
  const char *env[] = { "TP_MPI_TAG_UB=3", NULL };
  const char *args[] = { "tags", NULL };
  MpiRun r = mpi_run(2, env, args);
  expect_success(&r);
  g_test_message("%s", r.out);
  g_assert_nonnull(strstr(r.out, "transport link 1->2: latency"));
  g_assert_nonnull(strstr(r.out, "plain MPI link 1->2: latency"));
  mpi_run_clear(&r);
}

static void test_size(void)
{
  if (!mpi_usable())
    return;
  const char *args[] = { "size", "3", NULL };
  MpiRun r = mpi_run(2, NULL, args);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(count(r.err, "timeprest train: mpirun -np 2 does not match -w 3\n"), ==, 1);
  mpi_run_clear(&r);
  const char *ok[] = { "size", "2", NULL };
  r = mpi_run(2, NULL, ok);
  expect_success(&r);
  mpi_run_clear(&r);
}

/* Rank 1 (stage 2) misbehaves: ranks 0 and 2 each end with one line naming stage 2 (rank 1) and
 * the operation they waited for; mpirun exits non-zero, well before the outer timeout. */
static void test_fault(gconstpointer data)
{
  if (!mpi_usable())
    return;
  const char *args[] = { "fault", data, "2", NULL }, *env[] = { TPT_MPI_PATIENT, NULL };
  MpiRun r = mpi_run(3, env, args);
  g_test_message("%s: status %d after %.2f s\n%s", (const char *)data, r.status, r.secs, r.err);
  g_assert_cmpint(r.status, !=, 0);
  g_assert_cmpint(r.status, !=, 124); /* the outer timeout: a hang */
  /* well before the outer timeout; a stopped rank is only killed after mpirun's SIGTERM → SIGKILL
   * wait (OMPI_MCA_odls_base_sigkill_timeout, 4 s here), which may come more than once */
  g_assert_cmpfloat(r.secs, <, 45);
  g_auto(GStrv) lines = g_strsplit_set(r.err, "\n", -1);
  GRegex *op = g_regex_new("(waiting for|no message) [FB]\\([0-9]+(,[A-Z])?\\) from stage 2 \\(rank 1\\)", 0, 0, NULL);
  for (int rank = 0; rank < 3; rank += 2) {
    char prefix[40];
    g_snprintf(prefix, sizeof prefix, "stage %d (rank %d): ", rank + 1, rank);
    int n = 0;
    for (int i = 0; lines[i]; i++)
      if (g_str_has_prefix(lines[i], prefix)) {
        n++;
        if (!g_regex_match(op, lines[i], 0, NULL))
          g_error("%s: the line does not name the operation and the peer: %s", (const char *)data, lines[i]);
      }
    if (n != 1)
      g_error("%s: %d lines from %s\n%s", (const char *)data, n, prefix, r.err);
  }
  g_regex_unref(op);
  mpi_run_clear(&r);
}

int main(int argc, char **argv)
{
  if (argc >= 3 && !strcmp(argv[1], "--worker"))
    return worker(argc, argv);
  g_test_init(&argc, &argv, NULL);
  self = g_canonicalize_filename(argv[0], NULL);
  g_test_add_func("/mpi/hello", test_hello);
  g_test_add_data_func("/mpi/pipelines/2", GINT_TO_POINTER(2), test_pipelines);
  g_test_add_data_func("/mpi/pipelines/3", GINT_TO_POINTER(3), test_pipelines);
  g_test_add_data_func("/mpi/pipelines/3-shared-tags", GINT_TO_POINTER(13), test_pipelines);
  g_test_add_func("/mpi/tags", test_tags);
  g_test_add_func("/mpi/size", test_size);
  g_test_add_data_func("/mpi/fault/exit", "exit", test_fault);
  g_test_add_data_func("/mpi/fault/kill", "kill", test_fault);
  g_test_add_data_func("/mpi/fault/stop", "stop", test_fault);
  g_test_add_data_func("/mpi/fault/mute", "mute", test_fault);
  int rc = g_test_run();
  g_free(self);
  return rc;
}
