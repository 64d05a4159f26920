/* test-robust.c — what a hostile user tries against checkpoints and runs, through the program on
 * small synthetic data: checkpoints edited and resealed with a consistent digest (every key checked
 * for meaning), a checkpoint directory owned by one run at a time, a local run under mpirun,
 * checkpoint files that are not regular files or names taken by directories, SIGHUP, data that
 * changed under a checkpoint.  Inputs, outputs and messages are test-robust-io's. */
#include "tp_test_robust.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define SEAL "\n[integrity]\nsha256="

/* A checkpoint of -k 10 --checkpoint-every 3 stopped after 4 mini-batches (index 4, inside the second
 * segment: it holds the rest of it, cut_segment) in root/ck. */
static char *make_checkpoint(const char *root)
{
  char *dir = g_build_filename(root, "ck", NULL);
  TptRun s = train((const char *[]){ "-k", "10", "--checkpoint-every", "3", "--checkpoint", dir, "--stop-after", "4",
                                     NULL });
  g_assert_cmpint(s.status, ==, 0);
  tpt_run_clear(&s);
  return dir;
}

/* checkpoint.ini with the line "key=..." (the first of that key) replaced by "key=value", resealed. */
static void edit_ini(const char *dir, const char *key, const char *value)
{
  g_autofree char *path = g_build_filename(dir, "checkpoint.ini", NULL);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  char *seal = g_strrstr(text, SEAL);
  g_assert_nonnull(seal);
  *seal = '\0';
  g_autofree char *needle = g_strdup_printf("\n%s=", key);
  char *at = strstr(text, needle);
  g_assert_nonnull(at);
  at += strlen(needle);
  char *eol = strchr(at, '\n');
  g_autoptr(GString) body = g_string_new_len(text, at - text);
  g_string_append(body, value);
  g_string_append(body, eol ? eol : "");
  g_autofree char *sha = g_compute_checksum_for_string(G_CHECKSUM_SHA256, body->str, (gssize)body->len);
  g_string_append_printf(body, "%s%s\n", SEAL, sha);
  g_assert_true(g_file_set_contents(path, body->str, (gssize)body->len, NULL));
}

/* A checkpoint written before the schedule digest record names its schedule file by the sha256 of
 * the file's CSV form: it is still resumed, and ends where the run without a stop ends; any other
 * value is another run's schedule. */
static void test_old_schedule_digest(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust-digest");
  g_autofree char *file = g_build_filename(root, "s.csv", NULL), *dir = g_build_filename(root, "ck", NULL);
  g_autofree char *csv = tpt_schedule_file(file, "gpipe", "6");
  g_autofree char *old = g_compute_checksum_for_string(G_CHECKSUM_SHA256, csv, -1);
  const char *base[] = { "train", "--schedule", file, "--epochs", "2", "--batch", "32", "--data", DATA, "--quiet",
                         "--format", "json" };
  TptRun whole = tpt_run_more(base, G_N_ELEMENTS(base), (const char *[]){ NULL });
  g_assert_cmpint(whole.status, ==, 0);
  TptRun part = tpt_run_more(base, G_N_ELEMENTS(base), (const char *[]){ "--checkpoint", dir, "--stop-after", "1", NULL });
  g_assert_cmpint(part.status, ==, 0);
  tpt_run_clear(&part);
  edit_ini(dir, "schedule_sha256", old);
  TptRun resumed = tpt_run_more(base, G_N_ELEMENTS(base), (const char *[]){ "--resume", dir, NULL });
  g_assert_cmpint(resumed.status, ==, 0);
  const char *key = "\"weights_sha256\": \"", *a = strstr(whole.out, key), *b = strstr(resumed.out, key);
  g_assert_nonnull(a);
  g_assert_nonnull(b);
  g_assert_cmpmem(a, strlen(key) + 64, b, strlen(key) + 64);
  tpt_run_clear(&resumed);
  tpt_run_clear(&whole);
  old[0] = old[0] == '0' ? '1' : '0';
  edit_ini(dir, "schedule_sha256", old);
  TptRun other = tpt_run_more(base, G_N_ELEMENTS(base), (const char *[]){ "--resume", dir, NULL });
  assert_refused(&other, "is of another run: schedule_sha256");
  tpt_run_clear(&other);
  tpt_rm_tree(root);
}

/* A checkpoint of `-k 2 --checkpoint-every 1` with options a b, stopped after mini-batch 1, in
 * root/ck (returned): its checkpoint.ini's text in *ini_text, its state file's path in *state and
 * stage 1's parameter count in *np. */
static char *first_checkpoint(const char *root, const char *a, const char *b, char **ini_text, char **state, guint64 *np)
{
  char *dir = g_build_filename(root, "ck", NULL);
  g_autofree char *ini = g_build_filename(dir, "checkpoint.ini", NULL);
  TptRun s = train((const char *[]){ a, b, "-k", "2", "--checkpoint-every", "1", "--checkpoint", dir, "--stop-after", "1",
                                     NULL });
  g_assert_cmpint(s.status, ==, 0);
  tpt_run_clear(&s);
  g_assert_true(g_file_get_contents(ini, ini_text, NULL, NULL));
  g_autoptr(GKeyFile) k = g_key_file_new();
  g_assert_true(g_key_file_load_from_data(k, *ini_text, (gsize)-1, G_KEY_FILE_NONE, NULL));
  g_autofree char *name = g_key_file_get_string(k, "checkpoint", "state", NULL);
  *np = g_key_file_get_uint64(k, "position", "params_1", NULL);
  *state = g_build_filename(dir, name, NULL);
  return dir;
}

/* A resealed state file whose running variance is negative (a batchnorm's, stage 1's first
 * normalisation: its c means, then its c variances, after the weights and the momentum): refused
 * on resuming, in one line naming the stage, the layer and the channel. */
static void test_negative_running_variance(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust-bn"), *good = NULL, *state = NULL, *bytes = NULL;
  guint64 np = 0;
  g_autofree char *dir = first_checkpoint(root, "-m", "resnet-fmnist", &good, &state, &np);
  const char *buffers = strstr(good, "\nbuffers_1=");
  g_assert_nonnull(buffers);
  g_assert_cmpuint(g_ascii_strtoull(buffers + strlen("\nbuffers_1="), NULL, 10), >, 32);
  gsize len = 0;
  g_assert_true(g_file_get_contents(state, &bytes, &len, NULL));
  float bad = -1.0f; /* the stem's batchnorm has 16 channels: its first variance follows 16 means */
  memcpy(bytes + (2 * np + 16) * 4, &bad, 4);
  g_assert_true(g_file_set_contents(state, bytes, (gssize)len, NULL));
  g_autofree char *sha = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)bytes, len);
  edit_ini(dir, "state_sha256", sha);
  TptRun r = train((const char *[]){ "-m", "resnet-fmnist", "-k", "2", "--checkpoint-every", "1", "--resume", dir, NULL });
  assert_refused(&r, "stage 1's buffers: layer 2 (batchnorm): running variance of channel 1 is -1");
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* Resealed state with a number no run holds: a weight NaN or infinite, an AdamW second moment
 * negative: refused on resuming, naming the stage, the kind and the index. */
static void test_state_not_finite(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust-state"), *good = NULL, *state = NULL, *bytes = NULL;
  guint64 np = 0;
  g_autofree char *dir = first_checkpoint(root, "--optimizer", "adamw", &good, &state, &np);
  g_autofree char *ini = g_build_filename(dir, "checkpoint.ini", NULL);
  gsize len = 0;
  g_assert_true(g_file_get_contents(state, &bytes, &len, NULL));
  struct { guint64 at; float v; const char *want; } cases[] = {
    { 0, NAN, "stage 1's weight 0 is NaN" },
    { 3, INFINITY, "stage 1's weight 3 is infinite" },
    { np + 2, NAN, "stage 1's optimizer state 2 is NaN" },
    { 2 * np + 5, -1.0f, "stage 1's optimizer state 5 is negative (a checkpoint holds finite numbers, AdamW's second" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *b = g_memdup2(bytes, len);
    memcpy(b + cases[i].at * 4, &cases[i].v, 4);
    g_assert_true(g_file_set_contents(state, b, (gssize)len, NULL));
    g_autofree char *sha = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)b, len);
    g_assert_true(g_file_set_contents(ini, good, -1, NULL));
    edit_ini(dir, "state_sha256", sha);
    TptRun r = train((const char *[]){ "--optimizer", "adamw", "-k", "2", "--checkpoint-every", "1", "--resume", dir,
                                       NULL });
    assert_refused(&r, cases[i].want);
    tpt_run_clear(&r);
  }
  tpt_rm_tree(root);
}

/* Every key of a resealed checkpoint is checked for meaning: exit 2, one line naming the key. */
static void test_edited_checkpoint(void)
{
  struct {
    const char *key, *value;
  } cases[] = {
    { "index", "5" },     /* not a segment boundary */
    { "index", "-1" },    { "index", "1000" },    { "epoch", "-1" },      { "done", "7" },
    { "data_index", "1281" }, { "data_epoch", "1" }, { "generation", "-5" }, { "stages", "3" },
    { "seed", "77" },     { "loss_sum", "1;2" }, { "correct", "1;2;3;4;5;6;7" }, { "test_accuracy", "0.5" },
    { "elapsed", "-1" },  { "mismatched_reads", "-3" }, { "epoch_wall", "nan" }, { "params_1", "12" },
    { "state_bytes", "12" },
    /* values that say nothing a run holds, each in its place */
    { "loss_sum", "nan;1;1;1" }, { "loss_sum", "-5;1;1;1" }, { "update_time", "inf;1;1;1" },
    { "correct", "-1;1;1;1" },   { "correct", "33;1;1;1" },  { "samples", "127" },      { "samples", "1e20" },
    { "seed", "4294967297" },    { "versions_match", "false" }, { "log", "garbage" },
    { "log", "epoch,mini_batch,time,loss,accuracy,test\\n1,10,0.5,2.0,0.5,1" },
  };
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *dir = make_checkpoint(root);
  g_autofree char *ini = g_build_filename(dir, "checkpoint.ini", NULL);
  g_autofree char *good = NULL;
  g_assert_true(g_file_get_contents(ini, &good, NULL, NULL));
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_assert_true(g_file_set_contents(ini, good, -1, NULL));
    edit_ini(dir, cases[i].key, cases[i].value);
    TptRun r = train((const char *[]){ "-k", "10", "--checkpoint-every", "3", "--resume", dir, NULL });
    g_autofree char *want = g_strdup_printf("%s", cases[i].key);
    g_test_message("%s=%s", cases[i].key, cases[i].value);
    assert_refused(&r, want);
    g_assert_nonnull(strstr(r.err, "checkpoint.ini"));
    tpt_run_clear(&r);
  }
  /* a stray stage key (a stage the run does not have, a sign or a leading zero), beside the right
   * ones: refused, naming it */
  const char *p1 = strstr(good, "\nparams_1=");
  g_assert_nonnull(p1);
  g_autofree char *n1 = g_strndup(p1 + 10, strcspn(p1 + 10, "\n"));
  const char *strays[][2] = { { "params_3", "5" }, { "buffers_99", "992" }, { "buffers_0", "992" },
                              { "buffers_1", "+992" }, { "params_01", "5" } };
  for (size_t i = 0; i < G_N_ELEMENTS(strays); i++) {
    g_assert_true(g_file_set_contents(ini, good, -1, NULL));
    g_autofree char *v = g_strdup_printf("%s\n%s=%s", n1, strays[i][0], strays[i][1]);
    edit_ini(dir, "params_1", v);
    TptRun r = train((const char *[]){ "-k", "10", "--checkpoint-every", "3", "--resume", dir, NULL });
    g_autofree char *want = g_strdup_printf("%s=%s: not a key of stage 1 to 2", strays[i][0], strays[i][1]);
    assert_refused(&r, want);
    tpt_run_clear(&r);
  }
  /* the rest of the segment missing, or another schedule than its rest (the segment's, 3 mini-batches) */
  const char *seg = strstr(good, "\nsegment=");
  g_assert_nonnull(seg);
  g_autofree char *whole_seg = g_strndup(seg + 9, strcspn(seg + 9, "\n"));
  /* the rest's own header saying it recomputes, which the plan does not */
  const char *cut = strstr(good, "\ncut_segment=");
  g_assert_nonnull(cut);
  g_autofree char *rest = g_strndup(cut + 13, strcspn(cut + 13, "\n"));
  char *eoh = strstr(rest, "\\n"); /* the header line's end, escaped in the key file */
  g_assert_nonnull(eoh);
  g_autofree char *rc = g_strdup_printf("%.*s recompute=true%s", (int)(eoh - rest), rest, eoh);
  const char *cut_cases[][2] = { { "", "index=4 is not a segment boundary" },
                                 { whole_seg, "cut_segment is not the rest" },
                                 { rc, "(recompute true there; recompute false here)" } };
  for (size_t i = 0; i < G_N_ELEMENTS(cut_cases); i++) {
    g_assert_true(g_file_set_contents(ini, good, -1, NULL));
    edit_ini(dir, "cut_segment", cut_cases[i][0]);
    TptRun c = train((const char *[]){ "-k", "10", "--checkpoint-every", "3", "--resume", dir, NULL });
    assert_refused(&c, cut_cases[i][1]);
    tpt_run_clear(&c);
  }
  /* the untouched checkpoint still resumes */
  g_assert_true(g_file_set_contents(ini, good, -1, NULL));
  TptRun r = train((const char *[]){ "-k", "10", "--checkpoint-every", "3", "--resume", dir, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* A run of many epochs checkpointing into dir, started (stdout to /dev/null; stderr to *err_fd, or
 * to /dev/null when err_fd is NULL) and waited for until its first checkpoint is there. */
static GPid start_long_run(const char *dir, int *err_fd)
{
  g_autofree char *ini = g_build_filename(dir, "checkpoint.ini", NULL);
  const char *bin = g_getenv("TP_BIN") ? g_getenv("TP_BIN") : "./timeprest";
  const char *argv[] = { bin, "train", "-s", "gpipe", "-w", "2", "-n", "2", "--batch", "32", "--data", DATA,
                         "--order-from", "slots", "--quiet", "--epochs", "100000", "--checkpoint", dir, NULL };
  GPid pid;
  GError *e = NULL;
  GSpawnFlags fl = G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL | (err_fd ? 0 : G_SPAWN_STDERR_TO_DEV_NULL);
  g_assert_true(g_spawn_async_with_pipes(NULL, (char **)argv, NULL, fl, NULL, NULL, &pid, NULL, NULL, err_fd, &e));
  g_assert_no_error(e);
  for (int i = 0; i < 600 && !g_file_test(ini, G_FILE_TEST_EXISTS); i++)
    g_usleep(50000);
  if (!g_file_test(ini, G_FILE_TEST_EXISTS)) {
    kill(pid, SIGKILL);
    g_error("no checkpoint in %s after 30 s", dir);
  }
  return pid;
}

/* A checkpoint directory is one run's at a time: a second run into it, while the first trains, is
 * refused with exit 2 naming the holder; once the holder is gone the directory is free again. */
static void test_directory_lock(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  GPid pid = start_long_run(dir, NULL);
  g_autofree char *holder = g_strdup_printf("PID %d", (int)pid);
  const char *const flags[] = { "--checkpoint", "--resume" };
  TptRun second[2];
  for (size_t i = 0; i < G_N_ELEMENTS(flags); i++)
    second[i] = train((const char *[]){ "--epochs", "100000", flags[i], dir, "--stop-after", "1", NULL });
  kill(pid, SIGKILL); /* before any assertion: never left running */
  int status = 0;
  waitpid(pid, &status, 0);
  g_spawn_close_pid(pid);
  for (size_t i = 0; i < G_N_ELEMENTS(flags); i++) {
    assert_refused(&second[i], holder);
    g_assert_nonnull(strstr(second[i].err, flags[i]));
    tpt_run_clear(&second[i]);
  }
  TptRun r = train((const char *[]){ "--epochs", "100000", "--resume", dir, "--stop-after", "1", NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* train with the local transport started by mpirun (several processes) is refused: each process
 * would run every stage. */
static void test_local_under_mpirun(void)
{
  const char *vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE" };
  for (size_t i = 0; i < G_N_ELEMENTS(vars); i++) {
    g_setenv(vars[i], "2", TRUE);
    TptRun r = train((const char *[]){ "-k", "2", NULL });
    g_unsetenv(vars[i]);
    assert_refused(&r, "mpirun");
    g_assert_nonnull(strstr(r.err, "--transport mpi"));
    tpt_run_clear(&r);
  }
  g_setenv("OMPI_COMM_WORLD_SIZE", "1", TRUE); /* one process: nothing to say */
  TptRun r = train((const char *[]){ "-k", "2", NULL });
  g_unsetenv("OMPI_COMM_WORLD_SIZE");
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
}

/* The state file a checkpoint.ini names (the whole-run one). */
static char *state_file(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name(d)))
    if (g_str_has_prefix(name, "state-"))
      return g_build_filename(dir, name, NULL);
  g_assert_not_reached();
}

/* Checkpoint files that are not regular files (a device, a FIFO without a writer) are refused at
 * once, naming the file, instead of being read without end or blocking. */
static void test_not_regular(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *dir = make_checkpoint(root);
  g_autofree char *ini = g_build_filename(dir, "checkpoint.ini", NULL), *state = state_file(dir);
  g_autofree char *good = NULL;
  g_assert_true(g_file_get_contents(ini, &good, NULL, NULL));
  g_assert_cmpint(g_unlink(state), ==, 0);
  g_assert_cmpint(symlink("/dev/zero", state), ==, 0);
  TptRun r = train((const char *[]){ "-k", "10", "--checkpoint-every", "3", "--resume", dir, NULL });
  assert_refused(&r, state);
  g_assert_nonnull(strstr(r.err, "not a regular file"));
  tpt_run_clear(&r);
  g_assert_cmpint(g_unlink(ini), ==, 0);
  g_assert_cmpint(mkfifo(ini, 0600), ==, 0);
  r = train((const char *[]){ "-k", "10", "--checkpoint-every", "3", "--resume", dir, NULL });
  assert_refused(&r, ini);
  g_assert_nonnull(strstr(r.err, "not a regular file"));
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* A checkpoint directory where a checkpoint's file name is taken by something that is not a
 * file is refused before training. */
static void test_names_taken(void)
{
  const char *names[] = { "checkpoint.ini", "state-0.bin", "checkpoint.lock" };
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autofree char *root = tpt_tmp_dir("tp-robust");
    g_autofree char *dir = g_build_filename(root, "ck", NULL);
    g_autofree char *taken = g_build_filename(dir, names[i], NULL);
    g_assert_cmpint(g_mkdir_with_parents(taken, 0700), ==, 0);
    TptRun r = train((const char *[]){ "-k", "4", "--checkpoint", dir, NULL });
    assert_refused(&r, taken);
    g_assert_nonnull(strstr(r.err, "--checkpoint"));
    tpt_run_clear(&r);
    tpt_rm_tree(root);
  }
}

/* SIGHUP (a closed terminal) stops a run with --checkpoint as SIGTERM does: at the next checkpoint,
 * with its line, exit 128 + 1. */
static void test_sighup(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  int err_fd = -1;
  GPid pid = start_long_run(dir, &err_fd);
  kill(pid, SIGHUP);
  int status = 0;
  for (int i = 0; i < 600 && waitpid(pid, &status, WNOHANG) == 0; i++)
    g_usleep(50000);
  if (!WIFEXITED(status) && !WIFSIGNALED(status)) { /* still running: never left behind */
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  g_spawn_close_pid(pid);
  char buf[4096];
  ssize_t n = read(err_fd, buf, sizeof buf - 1);
  close(err_fd);
  buf[MAX(n, 0)] = '\0';
  g_test_message("status 0x%x, stderr: %s", status, buf);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 128 + SIGHUP);
  g_assert_nonnull(strstr(buf, "interrupted: checkpoint at epoch"));
  tpt_rm_tree(root);
}

/* A checkpoint names its data by content: the same files elsewhere (or the path with a trailing
 * slash) continue it; the same path with other labels is refused, naming the data. */
static void test_data_identity(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *data = g_build_filename(root, "fm", NULL), *copy = g_build_filename(root, "copy", NULL);
  g_autofree char *slash = g_strconcat(copy, "/", NULL);
  g_autofree char *dir = g_build_filename(root, "ck", NULL);
  write_data(data, 256, 64, 0);
  write_data(copy, 256, 64, 0);
  TptRun s = train((const char *[]){ "--data", data, "-k", "6", "--checkpoint-every", "2", "--checkpoint", dir,
                                     "--stop-after", "2", NULL });
  g_assert_cmpint(s.status, ==, 0);
  tpt_run_clear(&s);
  write_data(data, 256, 64, 3); /* the same path, every training label shifted */
  TptRun r = train((const char *[]){ "--data", data, "-k", "6", "--checkpoint-every", "2", "--resume", dir, NULL });
  assert_refused(&r, "is of another run: data");
  tpt_run_clear(&r);
  r = train((const char *[]){ "--data", slash, "-k", "6", "--checkpoint-every", "2", "--resume", dir,
                              "--stop-after", "4", NULL });
  g_test_message("%s", r.err);
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  /* generated data is named by what generates it: other sizes are other data, the same are not */
  g_autofree char *gen = g_build_filename(root, "ck-synthetic", NULL);
  s = train((const char *[]){ "-k", "6", "--checkpoint-every", "2", "--checkpoint", gen, "--stop-after", "2", NULL });
  g_assert_cmpint(s.status, ==, 0);
  tpt_run_clear(&s);
  r = train((const char *[]){ "--data", "synthetic:256:32", "-k", "6", "--checkpoint-every", "2", "--resume", gen,
                              NULL });
  assert_refused(&r, "is of another run: data");
  tpt_run_clear(&r);
  r = train((const char *[]){ "-k", "6", "--checkpoint-every", "2", "--resume", gen, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/robust/edited-checkpoint", test_edited_checkpoint);
  g_test_add_func("/robust/old-schedule-digest", test_old_schedule_digest);
  g_test_add_func("/robust/negative-running-variance", test_negative_running_variance);
  g_test_add_func("/robust/state-not-finite", test_state_not_finite);
  g_test_add_func("/robust/directory-lock", test_directory_lock);
  g_test_add_func("/robust/local-under-mpirun", test_local_under_mpirun);
  g_test_add_func("/robust/not-regular", test_not_regular);
  g_test_add_func("/robust/names-taken", test_names_taken);
  g_test_add_func("/robust/sighup", test_sighup);
  g_test_add_func("/robust/data-identity", test_data_identity);
  return g_test_run();
}
