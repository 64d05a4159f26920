/* test-train-mpi-ckpt.c — checkpoints of `timeprest train --transport mpi` through the binary
 * ($TP_BIN) under `timeout 60 mpirun`: one rank killed mid-run (SIGKILL) ends every other rank with
 * its line and a non-zero status, and --resume from the last checkpoint ends with the weights of the
 * uninterrupted run; SIGTERM to one rank stops every rank at the next checkpoint (exit 143, one
 * line) and the run resumed ends with the same weights; each rank writes its stage's file; rank 0
 * killed during a commit leaves the previous checkpoint, which resumes to the same weights; a
 * checkpoint of the local transport resumes under MPI and the other way round; another run's
 * checkpoint (-n, -w) and a damaged stage file are refused (exit 2, one line); a rank that cannot
 * write its part ends the job with its line, the previous checkpoint kept.  The uninterrupted
 * runs are of the local transport, whose weights the MPI transport's equal (test-train-mpi).  Skips
 * where mpirun cannot start processes here or the build has no MPI. */
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp_test.h"
#include "tp_test_mpi.h"

static const char *bin;

/* A run long enough to be interrupted after its first checkpoint (every 5 mini-batches). */
#define LONG "-s pipedream -w 3 -n 2 -k 300 --batch 16 --data synthetic --seed 3 --order-from slots --format json " \
             "--quiet --checkpoint-every 5 --peer-timeout 5"
/* A short one, stopped after 6 mini-batches (--stop-after: the second segment's end) */
#define SHORT "-s timeprest -w 2 -n 2 -k 10 --batch 16 --data synthetic --seed 3 --order-from slots --format json " \
              "--quiet --checkpoint-every 3"

/* mpirun's wait between SIGTERM and SIGKILL back at its default: the ranks of a stopped or failed run
 * exit by themselves, and mpirun waits that long once the first has exited non-zero */
static const char *const env[] = { "OMPI_MCA_odls_base_sigkill_timeout=1", NULL };

static TptMpiRun run(int np, const char *args)
{
  return tpt_mpi_run(np, env, bin, (const char *const[]){ "train", NULL }, args);
}

static gboolean mpi_usable(void) { return tpt_mpi_train_usable(bin); }

static void expect_success(const TptMpiRun *r)
{
  if (r->status != 0)
    g_error("exit status %d\n--- stdout\n%s--- stderr\n%s", r->status, r->out, r->err);
}

/* weights_sha256 of a run that succeeded: np ranks (0: the local transport), args, then more. */
static char *sha_of_run(int np, const char *args, const char *more)
{
  g_autofree char *line = g_strdup_printf("%s%s %s", np ? "--transport mpi " : "", args, more);
  TptMpiRun r = run(np, line);
  expect_success(&r);
  char *sha = tpt_json_value(r.out, "weights_sha256");
  g_assert_nonnull(sha);
  g_assert_cmpuint(strlen(sha), ==, 64);
  tpt_mpi_run_clear(&r);
  return sha;
}

/* An integer key (e.g. done, generation) of the committed checkpoint in dir. */
static int ini_int(const char *dir, const char *key)
{
  g_autofree char *path = g_build_filename(dir, "checkpoint.ini", NULL), *text = NULL;
  g_autofree char *at = g_strdup_printf("\n%s=", key);
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  const char *p = strstr(text, at);
  g_assert_nonnull(p);
  return atoi(p + strlen(at));
}

static int done_of(const char *dir) { return ini_int(dir, "done"); }

/* weights_sha256 of args run whole on the local transport (checkpointing into root/whole, as the
 * runs compared with it do into their directory). */
static char *uninterrupted_sha(const char *root, const char *args)
{
  g_autofree char *whole = g_build_filename(root, "whole", NULL);
  g_autofree char *more = g_strdup_printf("--checkpoint %s", whole);
  return sha_of_run(0, args, more);
}

/* args resumed from dir on np ranks (0: the local transport) ends with the weights want. */
static void expect_resumes_to(int np, const char *args, const char *dir, const char *want)
{
  g_autofree char *resumed = g_strdup_printf("--resume %s", dir);
  g_autofree char *got = sha_of_run(np, args, resumed);
  g_assert_cmpstr(got, ==, want);
}

/* LONG under 3 ranks into dir; once its first checkpoint is committed, rank 1 gets sig. */
static TptMpiRun interrupted(const char *dir, int sig)
{
  g_autofree char *mark = g_strdup_printf("%d-%d-%d", (int)getpid(), sig, g_random_int_range(0, 1 << 30));
  g_autofree char *args = g_strdup_printf("--transport mpi " LONG " --checkpoint %s", dir);
  g_autoptr(GPtrArray) argv = tpt_mpi_command(3, bin, (const char *const[]){ "train", NULL }, args);
  g_auto(GStrv) envp = tpt_mpi_env(env, mark);
  g_autofree char *ini = g_build_filename(dir, "checkpoint.ini", NULL);
  int err_fd = -1;
  gint64 t0 = g_get_monotonic_time();
  GPid child = tpt_mpi_start(argv, envp, &err_fd);
  for (int i = 0; i < 40000 && !g_file_test(ini, G_FILE_TEST_EXISTS); i++)
    g_usleep(1000);
  pid_t victim = tpt_mpi_find_rank(mark, 1);
  g_assert_cmpint(victim, >, 0);
  kill(victim, sig);
  TptMpiRun r = tpt_mpi_finish(child, err_fd, t0);
  g_test_message("signal %d: status %d after %.2f s\n%s", sig, r.status, r.secs, r.err);
  return r;
}

/* Rank 1 of 3 killed after the first checkpoint: ranks 0 and 2 end non-zero, each with a line
 * naming what failed or what it waited for from rank 1; the checkpoint left resumes to the
 * uninterrupted run's weights. */
static void test_kill_resume(void)
{
  if (!mpi_usable())
    return;
  g_autofree char *root = tpt_tmp_dir("tp-mpi-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  g_autofree char *want = uninterrupted_sha(root, LONG);
  TptMpiRun k = interrupted(dir, SIGKILL);
  g_assert_cmpint(k.status, !=, 0);
  g_assert_cmpint(k.status, !=, 124); /* the outer timeout: a hang */
  g_assert_cmpfloat(k.secs, <, 45);
  /* its own timeout, another rank's abort, or — when mpirun, ending the job, signals the rank and
   * kills it a second later — the line of its SIGTERM, which names what it waited for */
  GRegex *line = g_regex_new("^stage [13] \\(rank [02]\\): .*(no (message|answer) .* from stage 2 \\(rank "
                             "1\\)|SIGTERM while waiting for .* from stage 2 \\(rank 1\\)|run aborted|ended by mpirun)",
                             G_REGEX_MULTILINE, 0, NULL);
  for (int rank = 0; rank < 3; rank += 2) {
    g_autofree char *prefix = g_strdup_printf("stage %d (rank %d): ", rank + 1, rank);
    gboolean found = FALSE;
    g_auto(GStrv) lines = g_strsplit_set(k.err, "\n", -1);
    for (int i = 0; lines[i]; i++)
      found = found || (g_str_has_prefix(lines[i], prefix) && g_regex_match(line, lines[i], 0, NULL));
    if (!found)
      g_error("no line of what failed from %s\n%s", prefix, k.err);
  }
  g_regex_unref(line);
  int done = done_of(dir);
  g_assert_cmpint(done, <, 300);
  g_test_message("resuming after mini-batch %d", done);
  expect_resumes_to(3, LONG, dir, want);
  tpt_mpi_run_clear(&k);
  tpt_rm_tree(root);
}

/* SIGTERM to rank 1 of 3: every rank stops at the next checkpoint, exit 143, one "interrupted" line
 * (rank 0's), one line of rank 1 saying it got the signal; each rank's stage file is there; resumed,
 * the run ends with the uninterrupted run's weights. */
static void test_sigterm_resume(void)
{
  if (!mpi_usable())
    return;
  g_autofree char *root = tpt_tmp_dir("tp-mpi-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  g_autofree char *want = uninterrupted_sha(root, LONG);
  TptMpiRun t = interrupted(dir, SIGTERM);
  g_assert_cmpint(t.status, ==, 143);
  g_autofree char *stopped = g_strdup_printf("interrupted: checkpoint at epoch 1, mini-batch %d written to %s; resume "
                                             "with --resume %s\n", done_of(dir), dir, dir);
  g_assert_cmpint(tpt_count(t.err, stopped), ==, 1);
  g_assert_cmpint(tpt_count(t.err, "interrupted:"), ==, 1);
  g_assert_cmpint(tpt_count(t.err, "stage 2 (rank 1): SIGTERM"), ==, 1);
  g_auto(GStrv) lines = g_strsplit_set(t.err, "\n", -1);
  for (int i = 0; lines[i]; i++) /* nothing failed: no line of ranks 0 and 2 */
    g_assert_false(g_str_has_prefix(lines[i], "stage 1 (rank 0): ") || g_str_has_prefix(lines[i], "stage 3 (rank 2): "));
  int g = ini_int(dir, "generation");
  for (int s = 1; s <= 3; s++) { /* each rank's part of the last checkpoint, and no older one */
    g_autofree char *part = g_strdup_printf("%s/state-%d-stage%d.bin", dir, g, s);
    g_autofree char *old = g_strdup_printf("%s/state-%d-stage%d.bin", dir, g - 1, s);
    g_assert_true(g_file_test(part, G_FILE_TEST_EXISTS));
    g_assert_false(g_file_test(old, G_FILE_TEST_EXISTS));
  }
  expect_resumes_to(3, LONG, dir, want);
  tpt_mpi_run_clear(&t);
  tpt_rm_tree(root);
}

/* A checkpoint of the local transport resumes under MPI, one of MPI under the local transport. */
static void test_across_transports(void)
{
  if (!mpi_usable())
    return;
  g_autofree char *root = tpt_tmp_dir("tp-mpi-ckpt");
  g_autofree char *a = g_build_filename(root, "a", NULL), *b = g_build_filename(root, "b", NULL);
  g_autofree char *want = uninterrupted_sha(root, SHORT);
  for (int np = 0; np <= 2; np += 2) {
    const char *dir = np ? b : a;
    g_autofree char *stop = g_strdup_printf("%s" SHORT " --checkpoint %s --stop-after 6", np ? "--transport mpi " : "",
                                            dir);
    TptMpiRun s = run(np, stop);
    expect_success(&s);
    g_assert_cmpint(tpt_count(s.err, "stopped: checkpoint at epoch 1, mini-batch 6"), ==, 1);
    tpt_mpi_run_clear(&s);
    expect_resumes_to(np ? 0 : 2, SHORT, dir, want);
  }
  tpt_rm_tree(root);
}

/* Stopped inside a segment under MPI (--stop-after 4 of segments of 3: the cut's marker goes from
 * rank to rank): a flush schedule resumes to the uninterrupted run's weights under either
 * transport. */
static void test_cut(void)
{
  if (!mpi_usable())
    return;
  g_autofree char *root = tpt_tmp_dir("tp-mpi-ckpt");
  const char *flush = "-s gpipe -w 2 -n 2 -k 10 --batch 16 --data synthetic --seed 3 --order-from slots --format json "
                      "--quiet --checkpoint-every 3";
  g_autofree char *want = uninterrupted_sha(root, flush);
  for (int np = 0; np <= 2; np += 2) {
    g_autofree char *dir = g_strdup_printf("%s/cut%d", root, np);
    g_autofree char *stop = g_strdup_printf("--transport mpi %s --checkpoint %s --stop-after 4", flush, dir);
    TptMpiRun s = run(2, stop);
    expect_success(&s);
    g_assert_cmpint(tpt_count(s.err, "stopped: checkpoint at epoch 1, mini-batch 4"), ==, 1);
    tpt_mpi_run_clear(&s);
    expect_resumes_to(np, flush, dir, want);
  }
  tpt_rm_tree(root);
}

/* Rank 0 killed (SIGKILL, TIMEPREST_CHECKPOINT_KILL) during the second checkpoint's commit, every
 * stage's part of it written: the run ends non-zero, the first checkpoint is the one in force and
 * resumes to the uninterrupted run's weights. */
static void test_kill_during_commit(void)
{
  if (!mpi_usable())
    return;
  g_autofree char *root = tpt_tmp_dir("tp-mpi-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  g_autofree char *want = uninterrupted_sha(root, SHORT);
  g_autofree char *args = g_strdup_printf("--transport mpi " SHORT " --checkpoint %s", dir);
  const char *kill_env[] = { env[0], "TIMEPREST_CHECKPOINT_KILL=2", NULL };
  TptMpiRun k = tpt_mpi_run(2, kill_env, bin, (const char *const[]){ "train", NULL }, args);
  g_test_message("status %d\n%s", k.status, k.err);
  g_assert_cmpint(k.status, !=, 0);
  g_assert_cmpint(k.status, !=, 124);
  for (int s = 1; s <= 2; s++) { /* the second checkpoint's parts were written */
    g_autofree char *part = g_strdup_printf("%s/state-1-stage%d.bin", dir, s);
    g_assert_true(g_file_test(part, G_FILE_TEST_EXISTS));
  }
  g_assert_cmpint(done_of(dir), ==, 3);
  expect_resumes_to(2, SHORT, dir, want);
  tpt_mpi_run_clear(&k);
  tpt_rm_tree(root);
}

/* A stage file's name in the checkpoint directory taken by a directory: the job is refused before
 * training (exit 2 well within the timeout, the line names the file, no checkpoint written); the
 * directory gone, the same command runs to the uninterrupted run's weights. */
static void test_part_unwritable(void)
{
  if (!mpi_usable())
    return;
  g_autofree char *root = tpt_tmp_dir("tp-mpi-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  g_autofree char *want = uninterrupted_sha(root, SHORT);
  g_autofree char *blocker = g_build_filename(dir, "state-1-stage2.bin", NULL), *inside = NULL;
  inside = g_build_filename(blocker, "x", NULL);
  g_assert_cmpint(g_mkdir_with_parents(blocker, 0700), ==, 0);
  g_assert_true(g_file_set_contents(inside, "x", 1, NULL));
  g_autofree char *args = g_strdup_printf("--transport mpi " SHORT " --peer-timeout 5 --checkpoint %s", dir);
  TptMpiRun k = run(2, args);
  g_test_message("status %d after %.2f s\n%s", k.status, k.secs, k.err);
  g_assert_cmpint(k.status, ==, 2);
  g_assert_cmpfloat(k.secs, <, 30);
  g_autofree char *says = g_strdup_printf("%s: a checkpoint's file name taken by", blocker);
  if (!strstr(k.err, says))
    g_error("expected '%s' in\n%s", says, k.err);
  g_assert_cmpstr(k.out, ==, "");
  g_autofree char *ini = g_build_filename(dir, "checkpoint.ini", NULL);
  g_assert_false(g_file_test(ini, G_FILE_TEST_EXISTS));
  tpt_mpi_run_clear(&k);
  tpt_rm_tree(blocker);
  TptMpiRun r = run(2, args);
  expect_success(&r);
  g_autofree char *sha = tpt_json_value(r.out, "weights_sha256");
  g_assert_cmpstr(sha, ==, want);
  tpt_mpi_run_clear(&r);
  tpt_rm_tree(root);
}

/* Another run's checkpoint (-n, -w) and a damaged stage file: exit 2, one line. */
static void test_refused(void)
{
  if (!mpi_usable())
    return;
  g_autofree char *root = tpt_tmp_dir("tp-mpi-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  g_autofree char *stop = g_strdup_printf("--transport mpi " SHORT " --checkpoint %s --stop-after 4", dir);
  TptMpiRun s = run(2, stop);
  expect_success(&s);
  tpt_mpi_run_clear(&s);
  struct {
    int np;
    const char *more, *says;
  } cases[] = {
    { 2, "-n 4", "is of another run: micro_batches '2' there, '4' here" },
    { 3, "-w 3", "is of another run: workers '2' there, '3' here" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *args = g_strdup_printf("--transport mpi " SHORT " %s --resume %s", cases[i].more, dir);
    TptMpiRun r = run(cases[i].np, args);
    if (r.status != 2 || tpt_count(r.err, cases[i].says) != 1)
      g_test_message("status %d, stderr:\n%s", r.status, r.err);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpint(tpt_count(r.err, cases[i].says), ==, 1);
    g_assert_cmpint(tpt_count(r.err, "timeprest train:"), ==, 1);
    g_assert_cmpstr(r.out, ==, "");
    tpt_mpi_run_clear(&r);
  }
  /* stage 2's state, damaged: rank 1 names its file */
  int g = ini_int(dir, "generation");
  g_autofree char *part = g_strdup_printf("%s/state-%d-stage2.bin", dir, g), *data = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(part, &data, &len, NULL));
  data[len / 2] ^= 0x10;
  g_assert_true(g_file_set_contents(part, data, (gssize)len, NULL));
  g_autofree char *args = g_strdup_printf("--transport mpi " SHORT " --resume %s", dir);
  TptMpiRun r = run(2, args);
  g_autofree char *says = g_strdup_printf("timeprest train: --resume: %s: corrupt", part);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(tpt_count(r.err, says), ==, 1);
  g_assert_cmpint(tpt_count(r.err, "timeprest train:"), ==, 1);
  tpt_mpi_run_clear(&r);
  tpt_rm_tree(root);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  bin = g_getenv("TP_BIN");
  if (!bin) {
    fprintf(stderr, "TP_BIN is not set (make check sets it)\n");
    return 1;
  }
  g_test_add_func("/train-mpi-ckpt/kill-resume", test_kill_resume);
  g_test_add_func("/train-mpi-ckpt/sigterm-resume", test_sigterm_resume);
  g_test_add_func("/train-mpi-ckpt/kill-during-commit", test_kill_during_commit);
  g_test_add_func("/train-mpi-ckpt/across-transports", test_across_transports);
  g_test_add_func("/train-mpi-ckpt/cut", test_cut);
  g_test_add_func("/train-mpi-ckpt/refused", test_refused);
  g_test_add_func("/train-mpi-ckpt/part-unwritable", test_part_unwritable);
  return g_test_run();
}
