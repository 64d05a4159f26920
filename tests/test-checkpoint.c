/* test-checkpoint.c — checkpoints of `timeprest train`.  Through the library (train/tp_checkpoint.h):
 * a checkpoint written and read back (whole, and in parts per stage through a group), a damaged
 * state file refused.  Through the program on small synthetic data: a run stopped at a checkpoint and resumed ends with the weights of the uninterrupted run (bit for
 * bit, several presets, -k segments and epochs; a residual network's running statistics too); a checkpoint of another run, a damaged one, a
 * SIGTERM during a run and a kill during the checkpoint's write (also of a new run over an older
 * checkpoint); a checkpoint directory that cannot be written. */
#include "tp_test.h"
#include "tp_checkpoint.h"
#include "tp_error.h"

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#define DATA "synthetic:512:128"

/* train with the common small options, then extra (NULL-terminated). */
static TptRun train(const char *preset, const char *const *extra)
{
  const char *base[] = { "train", "-s", preset, "-w", "2", "-n", "2", "--batch", "32", "--data", DATA,
                         "--order-from", "slots", "--quiet", "--format", "json" };
  return tpt_run_more(base, G_N_ELEMENTS(base), extra);
}

static char *sha_of(const TptRun *r)
{
  const char *p = strstr(r->out, "\"weights_sha256\": \"");
  g_assert_nonnull(p);
  return g_strndup(p + strlen("\"weights_sha256\": \""), 64);
}

/* The JSON array "name": [...] of a report, as text. */
static char *array_of(const char *out, const char *name)
{
  g_autofree char *key = g_strdup_printf("\"%s\": [", name);
  const char *p = strstr(out, key);
  g_assert_nonnull(p);
  return g_strndup(p, (gsize)(strchr(p, ']') - p));
}

/* The report's final test loss as text (it reads batchnorm's running statistics, state beside the
 * weights). */
static char *test_loss_of(const TptRun *r)
{
  const char *p = strstr(r->out, "\"final_test_loss\": ");
  g_assert_nonnull(p);
  return g_strndup(p, strcspn(p, ",}"));
}

/* The weights of an uninterrupted run with these options (checkpointing into its own directory);
 * its per-run training losses (then its final test loss) into losses when not NULL. */
static char *uninterrupted(const char *preset, const char *const *opts, const char *root, char **losses)
{
  g_autofree char *dir = g_build_filename(root, "whole", NULL);
  GPtrArray *a = g_ptr_array_new();
  for (int i = 0; opts[i]; i++)
    g_ptr_array_add(a, (char *)opts[i]);
  g_ptr_array_add(a, "--checkpoint");
  g_ptr_array_add(a, dir);
  g_ptr_array_add(a, NULL);
  TptRun r = train(preset, (const char *const *)a->pdata);
  g_ptr_array_free(a, TRUE);
  g_assert_cmpint(r.status, ==, 0);
  char *sha = sha_of(&r);
  if (losses) {
    g_autofree char *train = array_of(r.out, "train_loss"), *test = test_loss_of(&r);
    *losses = g_strconcat(train, test, NULL);
  }
  tpt_run_clear(&r);
  return sha;
}

/* opts (NULL-terminated, at most 6) + more (at most 4) as one argument list. */
static const char **args(const char *const *opts, const char *const *more, const char **buf)
{
  int n = 0;
  for (int i = 0; opts[i]; i++)
    buf[n++] = opts[i];
  for (int i = 0; more[i]; i++)
    buf[n++] = more[i];
  buf[n] = NULL;
  return buf;
}

/* Stop at --stop-after D (a checkpoint), resume, compare with the uninterrupted run: D a segment's
 * end, or any mini-batch of a flush schedule (each mini-batch drains). */
static void check_resume(const char *preset, const char *const *opts, const char *stop_after)
{
  g_autofree char *root = tpt_tmp_dir("tp-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  g_autofree char *losses = NULL;
  g_autofree char *whole = uninterrupted(preset, opts, root, &losses);
  const char *buf[16];
  TptRun s = train(preset, args(opts, (const char *[]){ "--checkpoint", dir, "--stop-after", stop_after, NULL }, buf));
  g_assert_cmpint(s.status, ==, 0);
  g_assert_nonnull(strstr(s.err, "stopped: checkpoint at epoch"));
  g_assert_cmpstr(s.out, ==, ""); /* no report: the run is not over */
  TptRun r = train(preset, args(opts, (const char *[]){ "--resume", dir, NULL }, buf));
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *sha = sha_of(&r), *train_losses = array_of(r.out, "train_loss"), *test_loss = test_loss_of(&r);
  g_autofree char *resumed_losses = g_strconcat(train_losses, test_loss, NULL);
  g_assert_cmpstr(sha, ==, whole);
  g_assert_cmpstr(resumed_losses, ==, losses); /* the report covers the whole run */
  tpt_run_clear(&s);
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

static void test_resume_segments(void)
{
  const char *presets[] = { "gpipe", "pipedream", "timeprest", "i-timeprest", "pipedream-2bw" };
  for (size_t i = 0; i < G_N_ELEMENTS(presets); i++)
    check_resume(presets[i], (const char *[]){ "-k", "10", "--checkpoint-every", "3", NULL }, "6");
}

/* A residual network: batchnorm's running statistics come back with the weights (the test loss of
 * the resumed run is the uninterrupted one's). */
static void test_resume_batchnorm(void)
{
  check_resume("timeprest", (const char *[]){ "-m", "resnet-fmnist", "-k", "4", "--checkpoint-every", "2", NULL }, "2");
}

static void test_resume_epochs(void)
{
  const char *presets[] = { "pipedream", "timeprest" };
  for (size_t i = 0; i < G_N_ELEMENTS(presets); i++)
    check_resume(presets[i], (const char *[]){ "--epochs", "2", NULL }, "16"); /* 512 samples of 32 */
}

/* --stop-after D inside a segment (one segment of 10, or the second of 3): the run stops at D exactly,
 * its checkpoint holds the rest of the segment (cut_segment).  A flush schedule resumes to the
 * uninterrupted run's weights bit for bit; an asynchronous one drained at D, so it resumes to its
 * own: the same whatever process stopped and resumed it, and another run stopped at D gives it. */
static void test_stop_inside_segment(void)
{
  const char *flush[] = { "gpipe", "1f1b", "zb-h1" };
  const char *one[] = { "-k", "10", NULL }, *three[] = { "-k", "10", "--checkpoint-every", "3", NULL };
  for (size_t i = 0; i < G_N_ELEMENTS(flush); i++) {
    check_resume(flush[i], one, "4");
    check_resume(flush[i], three, "4");
  }
  const char *async[] = { "timeprest", "pipedream", "i-timeprest" };
  for (size_t i = 0; i < G_N_ELEMENTS(async); i++) {
    g_autofree char *root = tpt_tmp_dir("tp-ckpt");
    char *sha[2];
    for (int k = 0; k < 2; k++) {
      g_autofree char *dir = g_strdup_printf("%s/ck%d", root, k), *ini = g_build_filename(dir, "checkpoint.ini", NULL);
      TptRun s = train(async[i], (const char *[]){ "-k", "10", "--checkpoint", dir, "--stop-after", "4", NULL });
      g_assert_cmpint(s.status, ==, 0);
      g_assert_nonnull(strstr(s.err, "stopped: checkpoint at epoch 1, mini-batch 4 written"));
      g_autofree char *text = NULL;
      g_assert_true(g_file_get_contents(ini, &text, NULL, NULL));
      g_assert_nonnull(strstr(text, "\nindex=4\n"));
      g_assert_nonnull(strstr(text, "\ncut_segment=")); /* the other 6 mini-batches' schedule */
      TptRun r = train(async[i], (const char *[]){ "-k", "10", "--resume", dir, NULL });
      g_assert_cmpint(r.status, ==, 0);
      sha[k] = sha_of(&r);
      g_autofree char *losses = array_of(r.out, "train_loss");
      g_assert_nonnull(losses); /* the report covers the whole run */
      /* the resumed process ran only the rest of the cut segment: no whole one to set beside the plan's */
      g_assert_nonnull(strstr(r.out, "\"measured\": null, \"error\": null"));
      tpt_run_clear(&s), tpt_run_clear(&r);
    }
    g_assert_cmpstr(sha[0], ==, sha[1]);
    g_free(sha[0]), g_free(sha[1]);
    tpt_rm_tree(root);
  }
}

/* A checkpoint of one run: resumed by another, refused with exit 2 and one line naming the difference. */
static void test_other_run(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  TptRun s = train("gpipe", (const char *[]){ "--epochs", "2", "--checkpoint", dir, "--stop-after", "1", NULL });
  g_assert_cmpint(s.status, ==, 0);
  tpt_run_clear(&s);
  struct {
    const char *preset, *flag, *value, *names;
  } cases[] = {
    { "pipedream", "--epochs", "2", "preset" },
    { "gpipe", "-w", "3", "workers" },
    { "gpipe", "-n", "4", "micro_batches" },
    { "gpipe", "--lr", "0.02", "lr" },
    { "gpipe", "--lr-schedule", "cosine", "lr_schedule" },
    { "gpipe", "--model", "cnn", "model" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    TptRun r = train(cases[i].preset, (const char *[]){ cases[i].flag, cases[i].value, "--resume", dir, NULL });
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    g_assert_nonnull(strstr(r.err, "is of another run"));
    g_autofree char *key = g_strdup_printf(": %s '", cases[i].names);
    g_assert_nonnull(strstr(r.err, key));
    g_assert_cmpstr(r.out, ==, "");
    tpt_run_clear(&r);
  }
  tpt_rm_tree(root);
}

/* ---- the library -------------------------------------------------------------------------------- */

/* A checkpoint of two stages of 3 and 5 floats, every member set to something to compare. */
static void fill_checkpoint(TpCheckpoint *c, int generation)
{
  const size_t np[] = { 3, 5 };
  tp_checkpoint_init(c, 2, np, NULL, 1);
  tp_checkpoint_id(c, "model", "mlp");
  tp_checkpoint_id(c, "seed", "7");
  c->generation = generation, c->epoch = 1, c->index = 4, c->done = 12, c->seed = 7;
  c->pos = (TpDataPos){ 0 };
  for (int s = 0; s < 2; s++)
    for (size_t i = 0; i < np[s]; i++)
      c->weights[s][i] = (float)(s * 10 + i) + 0.25f, c->mom[s][i] = -(float)i / 8;
  c->plan = g_strdup("a plan\n"), c->log = g_strdup("a log\n");
  c->elapsed = 1.5, c->tally.train_time = 1.25, c->tally.samples = 384, c->tally.epoch_wall = 0.5;
  c->tally.versions_match = TRUE, c->tally.mismatched = 0;
  double d = 0.875;
  int k = 3;
  g_array_append_val(c->tally.test_acc, d);
  g_array_append_val(c->tally.loss_sum, d);
  g_array_append_val(c->tally.correct, k);
}

static void check_same(const TpCheckpoint *a, const TpCheckpoint *b, int lo, int hi)
{
  g_assert_cmpint(a->W, ==, b->W);
  g_assert_cmpint(a->generation, ==, b->generation);
  g_assert_cmpint(a->epoch, ==, b->epoch);
  g_assert_cmpint(a->index, ==, b->index);
  g_assert_cmpint(a->done, ==, b->done);
  g_assert_cmpstr(a->plan, ==, b->plan);
  g_assert_cmpstr(a->log, ==, b->log);
  g_assert_cmpfloat(a->elapsed, ==, b->elapsed);
  g_assert_cmpfloat(a->tally.samples, ==, b->tally.samples);
  g_assert_cmpuint(a->tally.test_acc->len, ==, b->tally.test_acc->len);
  g_assert_cmpfloat(g_array_index(a->tally.test_acc, double, 0), ==, g_array_index(b->tally.test_acc, double, 0));
  g_assert_cmpint(g_array_index(a->tally.correct, int, 0), ==, g_array_index(b->tally.correct, int, 0));
  g_assert_null(tp_checkpoint_id_diff(a, b));
  for (int s = lo; s < hi; s++) {
    g_assert_cmpuint(a->np[s], ==, b->np[s]);
    g_assert_cmpmem(a->weights[s], a->np[s] * sizeof(float), b->weights[s], b->np[s] * sizeof(float));
    g_assert_cmpmem(a->mom[s], a->np[s] * sizeof(float), b->mom[s], b->np[s] * sizeof(float));
  }
}

static int no_signal(void) { return 0; }

/* Written whole (as a group of one saves it), read back equal; a state file with one byte flipped
 * is refused naming it. */
static void test_lib_round_trip(void)
{
  g_autofree char *dir = tpt_tmp_dir("tp-ckpt-lib");
  TpCheckpoint c, back;
  fill_checkpoint(&c, 3);
  TpGroup *g = tp_group_single_new();
  GError *e = NULL;
  int sig = -1;
  g_assert_true(tp_checkpoint_save(g, dir, &c, no_signal, &sig, &e));
  g_assert_no_error(e);
  g_assert_cmpint(sig, ==, 0);
  g_assert_cmpint(tp_checkpoint_first_generation(dir), ==, 4);
  g_assert_true(tp_checkpoint_load(g, dir, c.W, &back, &e));
  g_assert_no_error(e);
  check_same(&c, &back, 0, 2);
  tp_checkpoint_clear(&back);
  /* a flipped byte in the state file: the checksum refuses it */
  g_autofree char *state = g_build_filename(dir, "state-3.bin", NULL), *data = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(state, &data, &len, NULL));
  g_assert_cmpuint(len, ==, (3 + 5) * 2 * sizeof(float));
  data[len / 2] ^= 1;
  g_assert_true(g_file_set_contents(state, data, (gssize)len, NULL));
  g_assert_false(tp_checkpoint_read(dir, &back, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_INPUT);
  g_assert_nonnull(strstr(e->message, "state-3.bin"));
  g_clear_error(&e);
  tp_checkpoint_clear(&back);
  tp_checkpoint_clear(&c);
  tp_group_free(g);
  tpt_rm_tree(dir);
}

/* One part per stage, committed by the metadata that names both: every stage reads back, and a
 * process that reads only stage 2 gets stage 2's floats. */
static void test_lib_parts(void)
{
  g_autofree char *dir = tpt_tmp_dir("tp-ckpt-parts");
  TpCheckpoint c, back;
  fill_checkpoint(&c, 5);
  char sha[2][65];
  GError *e = NULL;
  for (int s = 0; s < 2; s++)
    g_assert_true(tp_checkpoint_write_part(dir, &c, s, sha[s], &e));
  const char *shas[] = { sha[0], sha[1] };
  g_assert_true(tp_checkpoint_commit_parts(dir, &c, shas, &e));
  g_assert_no_error(e);
  g_assert_true(tp_checkpoint_read(dir, &back, &e));
  g_assert_no_error(e);
  check_same(&c, &back, 0, 2);
  tp_checkpoint_clear(&back);
  gsize len = 0;
  g_autofree char *meta = tp_checkpoint_read_meta(dir, &len, &e);
  g_assert_nonnull(meta);
  memset(&back, 0, sizeof back);
  g_assert_true(tp_checkpoint_parse(dir, meta, len, 1, 2, &back, &e));
  g_assert_no_error(e);
  check_same(&c, &back, 1, 2);
  tp_checkpoint_clear(&back);
  tp_checkpoint_clear(&c);
  tpt_rm_tree(dir);
}

/* ---- the program ----------------------------------------------------------------------------------- */

static char *state_file(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name(d)))
    if (g_str_has_prefix(name, "state-"))
      return g_build_filename(dir, name, NULL);
  g_assert_not_reached();
}

/* Damage one file of a good checkpoint (flip a byte or cut it), expect exit 2 naming it. */
static void check_damaged(gboolean ini, gboolean cut)
{
  g_autofree char *root = tpt_tmp_dir("tp-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  TptRun s = train("timeprest", (const char *[]){ "--epochs", "2", "--checkpoint", dir, "--stop-after", "1", NULL });
  g_assert_cmpint(s.status, ==, 0);
  tpt_run_clear(&s);
  g_autofree char *path = ini ? g_build_filename(dir, "checkpoint.ini", NULL) : state_file(dir);
  g_autofree char *data = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(path, &data, &len, NULL));
  if (cut)
    len -= len / 3;
  else
    data[len / 2] ^= 0x04;
  g_assert_true(g_file_set_contents(path, data, (gssize)len, NULL));
  TptRun r = train("timeprest", (const char *[]){ "--epochs", "2", "--resume", dir, NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  g_assert_nonnull(strstr(r.err, path));
  g_assert_cmpstr(r.out, ==, "");
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

static void test_damaged(void)
{
  for (int ini = 0; ini < 2; ini++)
    for (int cut = 0; cut < 2; cut++)
      check_damaged(ini, cut);
}

/* Start train with argv (NULL-terminated after the binary's place); SIGTERM once `ini` is there (a
 * first checkpoint) or, with ini NULL, after wait_ms; the wait status, stderr in msg and the
 * milliseconds from the signal to the end. */
static int term_run(const char **argv, const char *ini, int wait_ms, char *msg, size_t cap, double *ms)
{
  GPid pid;
  int err_fd = -1;
  GError *e = NULL;
  argv[0] = g_getenv("TP_BIN") ? g_getenv("TP_BIN") : "./timeprest";
  g_assert_true(g_spawn_async_with_pipes(NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL,
                                         NULL, NULL, &pid, NULL, NULL, &err_fd, &e));
  g_assert_no_error(e);
  for (int i = 0; ini && i < 30000 && !g_file_test(ini, G_FILE_TEST_EXISTS); i++)
    g_usleep(1000);
  g_assert_true(!ini || g_file_test(ini, G_FILE_TEST_EXISTS));
  if (!ini)
    g_usleep((gulong)wait_ms * 1000);
  gint64 t0 = g_get_monotonic_time();
  kill(pid, SIGTERM);
  int status = 0;
  g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
  *ms = (double)(g_get_monotonic_time() - t0) / 1e3;
  g_spawn_close_pid(pid);
  ssize_t n = read(err_fd, msg, cap - 1);
  close(err_fd);
  msg[MAX(n, 0)] = '\0';
  return status;
}

/* SIGTERM once the first checkpoint is there: the run stops at the next mini-batch, exit 143 and the
 * line; resumed, it ends as the uninterrupted run (a flush schedule: every mini-batch drains). */
static void test_sigterm(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  g_autofree char *ini = g_build_filename(dir, "checkpoint.ini", NULL);
  const char *opts[] = { "--epochs", "30", NULL };
  g_autofree char *whole = uninterrupted("gpipe", opts, root, NULL);
  const char *argv[] = { NULL, "train", "-s", "gpipe", "-w", "2", "-n", "2", "--batch", "32", "--data", DATA,
                         "--order-from", "slots", "--quiet", "--epochs", "30", "--checkpoint", dir, NULL };
  char msg[4096];
  double ms;
  int status = term_run(argv, ini, 0, msg, sizeof msg, &ms);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 143);
  g_assert_nonnull(strstr(msg, "interrupted: checkpoint at epoch"));
  g_assert_nonnull(strstr(msg, "resume with --resume"));
  TptRun r = train("gpipe", (const char *[]){ "--epochs", "30", "--resume", dir, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *sha = sha_of(&r);
  g_assert_cmpstr(sha, ==, whole);
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* One long segment (-k 20000, no --checkpoint-every: the run is one schedule): SIGTERM stops it at
 * the next mini-batch within seconds, with a checkpoint inside the segment that resumes (and stops
 * again at --stop-after). */
/* data: the replicas (--data-parallel; NULL: one pipeline), which a stop cuts at one mini-batch. */
static void test_sigterm_one_segment(gconstpointer data)
{
  const char *D = data ? data : "1";
  g_autofree char *root = tpt_tmp_dir("tp-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL), *ini = g_build_filename(dir, "checkpoint.ini", NULL);
  const char *argv[] = { NULL, "train", "-s", "timeprest", "-w", "2", "-n", "2", "-k", "20000", "--batch", "32",
                         "--data", DATA, "--order-from", "slots", "--quiet", "--checkpoint", dir, "--data-parallel", D,
                         NULL };
  char msg[4096];
  double ms;
  int status = term_run(argv, NULL, 1500, msg, sizeof msg, &ms);
  g_test_message("stopped %.0f ms after SIGTERM: %s", ms, msg);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 143);
  g_assert_cmpfloat(ms, <, 30000); /* a bound against a hang, not a timing: it takes about a second */
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(ini, &text, NULL, NULL));
  const char *at = strstr(text, "\nindex=");
  g_assert_nonnull(at);
  int index = atoi(at + 7);
  g_assert_cmpint(index, >, 0);
  g_assert_cmpint(index, <, 20000);
  g_autofree char *until = g_strdup_printf("%d", index + 2), *line = g_strdup_printf("mini-batch %d written", index + 2);
  TptRun r = train("timeprest", (const char *[]){ "-k", "20000", "--resume", dir, "--stop-after", until,
                                                  "--data-parallel", D, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.err, line));
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* A run from a schedule file stops only at its segment's end (nothing makes the rest of a file's
 * schedule): the signal is answered at once with a line saying so. */
static void test_sigterm_schedule_file(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL), *file = g_build_filename(root, "s.csv", NULL);
  g_free(tpt_schedule_file(file, "gpipe", "5000")); /* running a second after it starts: 1500 ended within it */
  const char *argv[] = { NULL, "train", "--schedule", file, "--batch", "32", "--data", DATA, "--quiet",
                         "--checkpoint", dir, NULL };
  char msg[4096];
  double ms;
  int status = term_run(argv, NULL, 1000, msg, sizeof msg, &ms);
  g_test_message("ended %.0f ms after SIGTERM: %s", ms, msg);
  g_assert_true(WIFEXITED(status));
  g_assert_nonnull(strstr(msg, "the run from a schedule file stops at the end of its segment"));
  tpt_rm_tree(root);
}

/* Killed (SIGKILL) while writing the second checkpoint, between the new files and the rename of the
 * metadata: the first checkpoint is still whole and resumes to the uninterrupted weights. */
static void test_kill_during_write(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  const char *opts[] = { "-k", "10", "--checkpoint-every", "3", NULL };
  g_autofree char *whole = uninterrupted("gpipe", opts, root, NULL);
  g_setenv("TIMEPREST_CHECKPOINT_KILL", "2", TRUE);
  TptRun k = train("gpipe", (const char *[]){ "-k", "10", "--checkpoint-every", "3", "--checkpoint", dir, NULL });
  g_unsetenv("TIMEPREST_CHECKPOINT_KILL");
  g_assert_cmpint(k.status, ==, 128); /* killed by a signal */
  tpt_run_clear(&k);
  g_autofree char *second = g_build_filename(dir, "state-1.bin", NULL);
  g_assert_true(g_file_test(second, G_FILE_TEST_EXISTS)); /* the write had begun */
  g_autofree char *ini = NULL, *ini_path = g_build_filename(dir, "checkpoint.ini", NULL);
  g_assert_true(g_file_get_contents(ini_path, &ini, NULL, NULL));
  g_assert_nonnull(strstr(ini, "\ndone=3\n"));
  TptRun r = train("gpipe", (const char *[]){ "-k", "10", "--checkpoint-every", "3", "--resume", dir, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *sha = sha_of(&r);
  g_assert_cmpstr(sha, ==, whole);
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* A new run (no --resume) into a directory holding another checkpoint, killed during its first
 * checkpoint's write: the checkpoint that was there is still whole (the new run's state went under
 * another name) and resumes to the uninterrupted weights. */
static void test_new_run_over_checkpoint(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-ckpt");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  const char *opts[] = { "-k", "10", "--checkpoint-every", "3", NULL };
  g_autofree char *whole = uninterrupted("gpipe", opts, root, NULL);
  TptRun s = train("gpipe", (const char *[]){ "-k", "10", "--checkpoint-every", "3", "--checkpoint", dir, "--stop-after",
                                              "1", NULL });
  g_assert_cmpint(s.status, ==, 0);
  tpt_run_clear(&s);
  g_setenv("TIMEPREST_CHECKPOINT_KILL", "1", TRUE);
  TptRun k = train("gpipe", (const char *[]){ "-k", "10", "--checkpoint-every", "3", "--seed", "9", "--checkpoint", dir,
                                              NULL });
  g_unsetenv("TIMEPREST_CHECKPOINT_KILL");
  g_assert_cmpint(k.status, ==, 128);
  tpt_run_clear(&k);
  TptRun r = train("gpipe", (const char *[]){ "-k", "10", "--checkpoint-every", "3", "--resume", dir, NULL });
  if (r.status != 0)
    g_error("the checkpoint there before the new run does not resume: %s", r.err);
  g_autofree char *sha = sha_of(&r);
  g_assert_cmpstr(sha, ==, whole);
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* Bad usage: --checkpoint-every without a directory; resuming from nothing. */
static void test_usage(void)
{
  TptRun r = train("gpipe", (const char *[]){ "-k", "4", "--checkpoint-every", "2", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  g_assert_nonnull(strstr(r.err, "--checkpoint-every"));
  tpt_run_clear(&r);
  g_autofree char *root = tpt_tmp_dir("tp-ckpt");
  r = train("gpipe", (const char *[]){ "-k", "4", "--resume", root, NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  g_assert_nonnull(strstr(r.err, "checkpoint.ini"));
  tpt_run_clear(&r);
  /* resuming from a directory that is not there: said so, and nothing made */
  g_autofree char *none = g_build_filename(root, "none", NULL);
  r = train("gpipe", (const char *[]){ "-k", "4", "--resume", none, NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "no checkpoint here"));
  g_assert_false(g_file_test(none, G_FILE_TEST_EXISTS));
  tpt_run_clear(&r);
  /* a checkpoint directory that cannot be made is refused before training, not at the first
   * checkpoint: exit 2, one line naming the flag, no report */
  g_autofree char *file = g_build_filename(root, "file", NULL), *under = g_build_filename(file, "ck", NULL);
  g_assert_true(g_file_set_contents(file, "", 0, NULL));
  r = train("gpipe", (const char *[]){ "-k", "4", "--checkpoint", under, NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  g_autofree char *says = g_strdup_printf("--checkpoint: %s: cannot create the directory", under);
  if (!strstr(r.err, says))
    g_error("expected '%s' in '%s'", says, r.err);
  g_assert_cmpstr(r.out, ==, "");
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/checkpoint/lib/round-trip", test_lib_round_trip);
  g_test_add_func("/checkpoint/lib/parts", test_lib_parts);
  g_test_add_func("/checkpoint/resume-segments", test_resume_segments);
  g_test_add_func("/checkpoint/resume-epochs", test_resume_epochs);
  g_test_add_func("/checkpoint/resume-batchnorm", test_resume_batchnorm);
  g_test_add_func("/checkpoint/stop-inside-segment", test_stop_inside_segment);
  g_test_add_func("/checkpoint/other-run", test_other_run);
  g_test_add_func("/checkpoint/damaged", test_damaged);
  g_test_add_func("/checkpoint/sigterm", test_sigterm);
  g_test_add_data_func("/checkpoint/sigterm-one-segment", NULL, test_sigterm_one_segment);
  g_test_add_data_func("/checkpoint/sigterm-one-segment/replicas", "2", test_sigterm_one_segment);
  g_test_add_func("/checkpoint/sigterm-schedule-file", test_sigterm_schedule_file);
  g_test_add_func("/checkpoint/kill-during-write", test_kill_during_write);
  g_test_add_func("/checkpoint/new-run-over-checkpoint", test_new_run_over_checkpoint);
  g_test_add_func("/checkpoint/usage", test_usage);
  return g_test_run();
}
