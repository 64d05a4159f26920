/* test-robust.c — what a hostile user tries, through the program on small synthetic data: checkpoints
 * edited and resealed with a consistent digest (every key checked for meaning), a checkpoint
 * directory owned by one run at a time, checkpoint files that are not regular files, data that
 * changed under a checkpoint, SIGHUP, colliding output paths, FIFOs without a writer, numbers,
 * standard output that cannot be written. */
#include "tp_test.h"

#include <fcntl.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define DATA "synthetic:256:64"
#define SEAL "\n[integrity]\nsha256="

/* train with the common small options, then extra (NULL-terminated). */
static TptRun train(const char *const *extra)
{
  GPtrArray *a = g_ptr_array_new();
  const char *base[] = { "train", "-s", "gpipe", "-w", "2", "-n", "2", "--batch", "32", "--data", DATA,
                         "--order-from", "slots", "--quiet", "--format", "json" };
  for (size_t i = 0; i < G_N_ELEMENTS(base); i++)
    g_ptr_array_add(a, (char *)base[i]);
  for (int i = 0; extra[i]; i++)
    g_ptr_array_add(a, (char *)extra[i]);
  g_ptr_array_add(a, NULL);
  TptRun r = tpt_run((const char *const *)a->pdata);
  g_ptr_array_free(a, TRUE);
  return r;
}

/* A refusal: exit 2, one line on stderr holding want, nothing on stdout. */
static void assert_refused(const TptRun *r, const char *want)
{
  if (r->status != 2 || tpt_lines(r->err) != 1 || !strstr(r->err, want))
    g_test_message("status %d, stderr: %s", r->status, r->err);
  g_assert_cmpint(r->status, ==, 2);
  g_assert_cmpint(tpt_lines(r->err), ==, 1);
  g_assert_nonnull(strstr(r->err, want));
  g_assert_cmpstr(r->out, ==, "");
}

/* A checkpoint of -k 10 --checkpoint-every 3 stopped after 4 mini-batches (index 6) in root/ck. */
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

/* 1. Every key of a resealed checkpoint is checked for meaning: exit 2, one line naming the key. */
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
  /* the untouched checkpoint still resumes */
  g_assert_true(g_file_set_contents(ini, good, -1, NULL));
  TptRun r = train((const char *[]){ "-k", "10", "--checkpoint-every", "3", "--resume", dir, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* The program under a shell's `ulimit -v KB`: its status and stderr. */
static TptRun run_limited(const char *kb, const char *cmd)
{
  g_autofree char *script = g_strdup_printf("ulimit -v %s && exec \"$TP\" %s", kb, cmd);
  return tpt_run_shell(script);
}

/* 2. Out of memory by the process's own limit (ulimit -v): refused or failed in one line, never an
 * abort in GLib's allocator. */
static void test_memory_limit(void)
{
  struct {
    const char *cmd, *want;
  } cases[] = {
    { "simulate -w 10 -n 10 -k 900000", "address-space limit" },
    { "train -w 2 -k 2 -m vgg16-imagenet --batch 32 --data synthetic:100 --quiet", "address-space limit" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    TptRun r = run_limited("2000000", cases[i].cmd);
    if (strstr(r.err, "Sanitizer")) {
      g_test_skip("a sanitizer build needs an unlimited address space");
      tpt_run_clear(&r);
      return;
    }
    g_test_message("%s: status %d, stderr: %s", cases[i].cmd, r.status, r.err);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    g_assert_nonnull(strstr(r.err, cases[i].want));
    tpt_run_clear(&r);
  }
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

/* 3. A checkpoint directory is one run's at a time: a second run into it, while the first trains, is
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

/* 3. train with the local transport started by mpirun (several processes) is refused: each process
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

/* 4. Checkpoint files that are not regular files (a device, a FIFO without a writer) are refused at
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

/* 10. A checkpoint directory where a checkpoint's file name is taken by something that is not a
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

/* 11, 12. A FIFO without a writer given where a file is read (model, schedule, simulate -i, data) ends
 * at once with exit 2 naming it, never blocks in open(); a directory given as a data file says so. */
static void test_fifo_inputs(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *fifo = g_build_filename(root, "in.fifo", NULL);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  g_autofree char *data = g_build_filename(root, "data", NULL);
  g_autofree char *images = g_build_filename(data, "train-images-idx3-ubyte.gz", NULL);
  g_assert_cmpint(g_mkdir_with_parents(data, 0700), ==, 0);
  g_assert_cmpint(mkfifo(images, 0600), ==, 0);
  struct {
    const char *const *args;
    const char *names;
  } cases[] = {
    { (const char *[]){ "train", "-m", fifo, "-k", "2", "--quiet", NULL }, fifo },
    { (const char *[]){ "train", "--schedule", fifo, "--quiet", NULL }, fifo },
    { (const char *[]){ "simulate", "-i", fifo, NULL }, fifo },
    { (const char *[]){ "train", "--data", data, "-k", "2", "--quiet", NULL }, images },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    TptRun r = tpt_run(cases[i].args);
    g_test_message("%s", r.err);
    assert_refused(&r, cases[i].names);
    tpt_run_clear(&r);
  }
  g_assert_cmpint(g_unlink(images), ==, 0);
  g_assert_cmpint(g_mkdir(images, 0700), ==, 0);
  TptRun r = tpt_run((const char *[]){ "train", "--data", data, "-k", "2", "--quiet", NULL });
  assert_refused(&r, "a directory");
  g_assert_null(strstr(r.err, "gzip"));
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* 6. SIGHUP (a closed terminal) stops a run with --checkpoint as SIGTERM does: at the next checkpoint,
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

/* An IDX file (plain; the reader takes gzip or not): magic, dims, then bytes. */
static void write_idx(const char *path, guint32 magic, int ndim, const guint32 *dims, const guint8 *data, gsize n)
{
  GByteArray *b = g_byte_array_new();
  guint32 words[4] = { GUINT32_TO_BE(magic) };
  for (int i = 0; i < ndim; i++)
    words[i + 1] = GUINT32_TO_BE(dims[i]);
  g_byte_array_append(b, (const guint8 *)words, 4 * (guint)(ndim + 1));
  g_byte_array_append(b, data, (guint)n);
  g_assert_true(g_file_set_contents(path, (const char *)b->data, (gssize)b->len, NULL));
  g_byte_array_unref(b);
}

/* A Fashion-MNIST-shaped directory of n training and m test samples; labels shifted by shift. */
static void write_data(const char *dir, int n, int m, int shift)
{
  g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);
  const char *names[2][2] = { { "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz" },
                              { "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz" } };
  for (int set = 0; set < 2; set++) {
    int k = set ? m : n;
    g_autofree guint8 *px = g_malloc((gsize)k * 784), *lab = g_malloc((gsize)k);
    for (int i = 0; i < k; i++) {
      lab[i] = (guint8)((i + shift) % 10);
      for (int j = 0; j < 784; j++)
        px[(gsize)i * 784 + j] = (guint8)((i * 7 + j * 13 + (i % 10) * 31) & 0xff);
    }
    guint32 di[3] = { (guint32)k, 28, 28 }, dl[1] = { (guint32)k };
    g_autofree char *pi = g_build_filename(dir, names[set][0], NULL), *pl = g_build_filename(dir, names[set][1], NULL);
    write_idx(pi, 0x803, 3, di, px, (gsize)k * 784);
    write_idx(pl, 0x801, 1, dl, lab, (gsize)k);
  }
}

/* 5. A checkpoint names its data by content: the same files elsewhere (or the path with a trailing
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
  tpt_rm_tree(root);
}

/* 7, 13. Outputs that name one file twice, and an empty output name, are refused before any work:
 * exit 2, one line naming both flags (or the empty one), nothing written. */
static void test_output_collisions(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *x = g_build_filename(root, "x", NULL), *run = g_build_filename(root, "run", NULL);
  g_autofree char *run_plan = g_build_filename(root, "run.schedule.csv", NULL);
  g_autofree char *dotted = g_build_filename(root, ".", "x", NULL);
  struct {
    const char *const *args;
    const char *want;
  } cases[] = {
    { (const char *[]){ "train", "-k", "2", "--quiet", "--csv", x, "-o", x, NULL }, "--csv and -o" },
    { (const char *[]){ "train", "-k", "2", "--quiet", "--csv", x, "--trace", dotted, NULL }, "--csv and --trace" },
    { (const char *[]){ "train", "-k", "2", "--quiet", "--csv", run_plan, "--trace", run, NULL }, "--csv and --trace" },
    { (const char *[]){ "train", "-k", "2", "--quiet", "-o", "", NULL }, "-o" },
    { (const char *[]){ "simulate", "--csv", x, "-o", x, NULL }, "--csv and -o" },
    { (const char *[]){ "simulate", "--trace", x, "--csv", x, NULL }, "--csv and --trace" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    TptRun r = tpt_run(cases[i].args);
    g_test_message("case %zu: %s", i, r.err);
    assert_refused(&r, cases[i].want);
    g_assert_false(g_file_test(x, G_FILE_TEST_EXISTS));
    g_assert_false(g_file_test(run_plan, G_FILE_TEST_EXISTS));
    tpt_run_clear(&r);
  }
  tpt_rm_tree(root);
}

/* 9. File names are bytes: a model file and a data directory whose names are not UTF-8 are read. */
static void test_byte_names(void)
{
  const char *src = g_getenv("TP_SRCDIR") ? g_getenv("TP_SRCDIR") : ".";
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *model = g_build_filename(root, "m\xff.model", NULL), *data = g_build_filename(root, "d\xfe", NULL);
  g_autofree char *orig = g_build_filename(src, "models", "mlp.model", NULL), *text = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(orig, &text, &len, NULL));
  g_assert_true(g_file_set_contents(model, text, (gssize)len, NULL));
  write_data(data, 64, 32, 0);
  TptRun r = tpt_run((const char *[]){ "train", "-w", "2", "-n", "2", "--batch", "32", "-k", "2", "--quiet", "-m", model,
                                       "--data", data, "--order-from", "slots", NULL });
  g_test_message("%s", r.err);
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "simulate", "-w", "2", "-m", model, "--cluster", "A", NULL });
  g_test_message("%s", r.err);
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* 14. Standard output that cannot be written (a full device) is a failure, --help included. */
static void test_stdout_full(void)
{
  if (!g_file_test("/dev/full", G_FILE_TEST_EXISTS)) {
    g_test_skip("no /dev/full here");
    return;
  }
  const char *cmds[] = { "--help", "schedule --help", "schedule -w 2 -n 2 -k 3" };
  for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
    g_autofree char *line = g_strdup_printf("exec \"$TP\" %s > /dev/full", cmds[i]);
    TptRun r = tpt_run_shell(line);
    g_test_message("%s: %d %s", cmds[i], r.status, r.err);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    g_assert_nonnull(strstr(r.err, "standard output"));
    tpt_run_clear(&r);
  }
}

/* 15, 16. One rule for every number: no hexadecimal, no blanks around it, no value that underflows
 * to 0, integers and floats alike; the synthetic: sizes say their limit. */
static void test_numbers(void)
{
  struct {
    const char *flag, *value, *want;
  } cases[] = {
    { "--lr", "1e-400", "--lr" },          { "--lr", "0x10", "--lr" },          { "--lr", " 0.1", "--lr" },
    { "--lr", "0.1 ", "--lr" },            { "--momentum", "nan", "--momentum" }, { "--timeout", "1e999", "--timeout" },
    { "--data", "synthetic: 100", "--data" }, { "--data", "synthetic:0x40", "--data" },
    { "--data", "synthetic:99999999", "10000000" }, { "--significance", "const:0x1", "--significance" },
    { "--batch", " 32", "--batch" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    TptRun r = tpt_run((const char *[]){ "train", "-s", "i-timeprest", "-k", "2", "--quiet", cases[i].flag,
                                         cases[i].value, NULL });
    g_test_message("%s '%s': %s", cases[i].flag, cases[i].value, r.err);
    assert_refused(&r, cases[i].want);
    tpt_run_clear(&r);
  }
}

/* The value of "key": "…" in a JSON text (NULL when absent). */
static char *json_string(const char *json, const char *key)
{
  g_autofree char *k = g_strdup_printf("\"%s\": \"", key);
  const char *p = strstr(json, k);
  return p ? g_strndup(p + strlen(k), strcspn(p + strlen(k), "\"")) : NULL;
}

/* 25. Every report carries the digest of the schedule it ran (schedule_sha256: the sha256 of the
 * schedule's CSV form), and train's text report says which order and plan ran. */
static void test_schedule_digest(void)
{
  TptRun csv = tpt_run((const char *[]){ "schedule", "-s", "gpipe", "-w", "2", "-n", "2", "-k", "2", "--format", "csv",
                                         NULL });
  g_assert_cmpint(csv.status, ==, 0);
  g_autofree char *want = g_compute_checksum_for_string(G_CHECKSUM_SHA256, csv.out, -1);
  tpt_run_clear(&csv);
  TptRun sim = tpt_run((const char *[]){ "simulate", "-s", "gpipe", "-w", "2", "-n", "2", "-k", "2", "--format", "json",
                                         NULL });
  g_autofree char *sim_sha = json_string(sim.out, "schedule_sha256");
  g_assert_cmpstr(sim_sha, ==, want);
  tpt_run_clear(&sim);
  sim = tpt_run((const char *[]){ "simulate", "-s", "gpipe", "-w", "2", "-n", "2", "-k", "2", NULL });
  g_assert_nonnull(strstr(sim.out, want));
  tpt_run_clear(&sim);
  TptRun r = train((const char *[]){ "-k", "2", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *train_sha = json_string(r.out, "schedule_sha256");
  g_assert_cmpstr(train_sha, ==, want);
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "train", "-s", "gpipe", "-w", "2", "-n", "2", "--batch", "32", "--data", DATA,
                                "--order-from", "slots", "--quiet", "-k", "2", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, want));
  g_assert_nonnull(strstr(r.out, "gpipe"));
  tpt_run_clear(&r);
}

/* 23. The text report says what the steady state holds as the JSON does (v, chains, the
 * multiple-sequence problem): pipedream W=2 N=4 on unit slots has v = 2 on 2 chains. */
static void test_steady_state_text(void)
{
  const char *args[] = { "train", "-s", "pipedream", "-w", "2", "-n", "4", "--batch", "32", "--data", DATA,
                         "--order-from", "slots", "--quiet", "-k", "12", NULL, NULL, NULL };
  TptRun text = tpt_run(args);
  args[16] = "--format", args[17] = "json";
  TptRun json = tpt_run(args);
  g_assert_cmpint(text.status, ==, 0);
  g_assert_cmpint(json.status, ==, 0);
  g_assert_nonnull(strstr(json.out, "\"multiple_sequences\": true"));
  g_test_message("%s", text.out);
  g_assert_nonnull(strstr(text.out, "multiple-sequence problem: yes"));
  g_assert_nonnull(strstr(text.out, "steady state v = 2, 2 chains"));
  tpt_run_clear(&text);
  tpt_run_clear(&json);
}

/* 19. A GPU test on a machine without one skips saying so, and fails instead when TP_REQUIRE names
 * cuda (a machine meant to have one must not pass by skipping). */
static void test_require(void)
{
  const char *bin = g_getenv("TP_BIN") ? g_getenv("TP_BIN") : "./timeprest";
  g_autofree char *dir = g_path_get_dirname(bin);
  g_autofree char *prog = g_build_filename(dir, "tests", "test-backend", NULL);
  const char *argv[] = { prog, "-p", "/backend/cuda/instances", NULL };
  char **envs[2] = { g_environ_unsetenv(g_get_environ(), "TP_REQUIRE"),
                     g_environ_setenv(g_get_environ(), "TP_REQUIRE", "mpi,cuda", TRUE) };
  int status[2];
  char *out[2], *err[2];
  for (int i = 0; i < 2; i++)
    g_assert_true(g_spawn_sync(NULL, (char **)argv, envs[i], G_SPAWN_DEFAULT, NULL, NULL, &out[i], &err[i], &status[i],
                               NULL));
  if (!strstr(out[0], "# SKIP"))
    g_test_skip("the cuda backend runs here: nothing is skipped");
  else {
    g_test_message("without TP_REQUIRE: %s", out[0]);
    g_assert_nonnull(strstr(out[0], "no GPU (or no driver) here"));
    g_assert_true(WIFEXITED(status[0]) && WEXITSTATUS(status[0]) == 0);
    g_test_message("TP_REQUIRE=mpi,cuda: %s", out[1]);
    g_assert_false(WIFEXITED(status[1]) && WEXITSTATUS(status[1]) == 0);
  }
  for (int i = 0; i < 2; i++)
    g_free(out[i]), g_free(err[i]), g_strfreev(envs[i]);
}

/* 12, 16. Messages name what is wrong: a file given as the data directory, labels that are not classes
 * of the model (naming the labels' file and the model), the --trace help naming the files it writes. */
static void test_messages(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *data = g_build_filename(root, "fm", NULL), *model = g_build_filename(root, "five.model", NULL);
  g_autofree char *labels = g_build_filename(data, "train-labels-idx1-ubyte.gz", NULL);
  write_data(data, 64, 32, 0);
  g_assert_true(g_file_set_contents(model, "name five\ninput 1 28 28\nflatten\nlinear 16\nrelu\nlinear 5\nsoftmax_ce\n",
                                    -1, NULL));
  TptRun r = tpt_run((const char *[]){ "train", "-k", "1", "-w", "2", "--quiet", "--data", labels, NULL });
  assert_refused(&r, "not a directory");
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "train", "-k", "1", "-w", "2", "-n", "2", "--batch", "32", "--quiet", "--data", data,
                                "-m", model, NULL });
  assert_refused(&r, data);
  g_assert_nonnull(strstr(r.err, "is not a class of model five"));
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "train", "--help", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_null(strstr(r.out, "to FILE.csv"));
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* 20. plot convergence on a train --csv log draws its tenth-of-an-epoch training rows and its
 * per-epoch rows as separate series (not one curve that jumps at each epoch). */
static void test_convergence_series(void)
{
  g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
  if (!gnuplot) {
    g_test_skip("gnuplot is not installed");
    return;
  }
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *log = g_build_filename(root, "run.csv", NULL), *svg = g_build_filename(root, "conv.svg", NULL);
  TptRun r = train((const char *[]){ "--epochs", "2", "--csv", log, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "plot", "convergence", "-i", log, "-o", svg, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(svg, &text, NULL, NULL));
  g_assert_nonnull(strstr(text, "run loss (tenth of an epoch)"));
  g_assert_nonnull(strstr(text, "run loss (per epoch)"));
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* Whether `plot timeline ARGS -o x.svg` draws the label text. */
static gboolean timeline_has_label(const char *const *args, const char *text)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *svg = g_build_filename(root, "t.svg", NULL);
  const char *argv[24] = { "plot", "timeline" };
  int n = 2;
  for (int i = 0; args[i]; i++)
    argv[n++] = args[i];
  argv[n++] = "-o", argv[n++] = svg, argv[n] = NULL;
  TptRun r = tpt_run(argv);
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *data = NULL, *want = g_strdup_printf(">%s<", text);
  g_assert_true(g_file_get_contents(svg, &data, NULL, NULL));
  tpt_run_clear(&r);
  tpt_rm_tree(root);
  return strstr(data, want) != NULL;
}

/* 21. Timeline labels are drawn only where they fit their box: on a short timeline every operation
 * is labelled; on a long one (--labels asks for them) the boxes are too narrow and none is. */
static void test_timeline_labels(void)
{
  g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
  if (!gnuplot) {
    g_test_skip("gnuplot is not installed");
    return;
  }
  g_assert_true(timeline_has_label((const char *[]){ "-s", "timeprest", "-w", "2", "-n", "2", "-k", "3", NULL }, "1A"));
  g_assert_false(timeline_has_label((const char *[]){ "-s", "timeprest", "-w", "2", "-n", "2", "-k", "400", "--labels",
                                                      NULL }, "1A"));
}

/* 12. A gzip data file damaged far into its compressed bytes is not said to be damaged "in the
 * header"; an I/O error while reading data is a failure (exit 1), not corrupt data (exit 2). */
static void test_gzip_messages(void)
{
  g_autofree char *gzip = g_find_program_in_path("gzip");
  if (!gzip) {
    g_test_skip("gzip is not installed");
    return;
  }
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *data = g_build_filename(root, "fm", NULL);
  write_data(data, 256, 64, 0);
  g_autofree char *images = g_build_filename(data, "train-images-idx3-ubyte.gz", NULL);
  g_autofree char *text = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(images, &text, &len, NULL));
  GRand *rng = g_rand_new_with_seed(7);
  for (gsize i = 16; i < len; i++)
    text[i] = (char)g_rand_int_range(rng, 0, 256); /* incompressible pixels */
  g_rand_free(rng);
  g_assert_true(g_file_set_contents(images, text, (gssize)len, NULL));
  g_autofree char *cmd = g_strdup_printf("gzip -n -c '%s' > '%s.z' && mv '%s.z' '%s'", images, images, images, images);
  g_assert_cmpint(system(cmd), ==, 0);
  g_autofree char *gz = NULL;
  g_assert_true(g_file_get_contents(images, &gz, &len, NULL));
  g_assert_cmpuint(len, >, 20000);
  gz[5000] ^= 0x5a;
  g_assert_true(g_file_set_contents(images, gz, (gssize)len, NULL));
  TptRun r = tpt_run((const char *[]){ "train", "-k", "1", "-w", "2", "--quiet", "--data", data, NULL });
  g_test_message("%s", r.err);
  assert_refused(&r, images);
  g_assert_null(strstr(r.err, "in the header"));
  tpt_run_clear(&r);
  if (g_file_test("/proc/self/mem", G_FILE_TEST_EXISTS)) {
    g_assert_cmpint(g_unlink(images), ==, 0);
    g_assert_cmpint(symlink("/proc/self/mem", images), ==, 0);
    r = tpt_run((const char *[]){ "train", "-k", "1", "-w", "2", "--quiet", "--data", data, NULL });
    g_test_message("%s", r.err);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    g_assert_nonnull(strstr(r.err, images));
    tpt_run_clear(&r);
  }
  tpt_rm_tree(root);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/robust/edited-checkpoint", test_edited_checkpoint);
  g_test_add_func("/robust/memory-limit", test_memory_limit);
  g_test_add_func("/robust/directory-lock", test_directory_lock);
  g_test_add_func("/robust/local-under-mpirun", test_local_under_mpirun);
  g_test_add_func("/robust/not-regular", test_not_regular);
  g_test_add_func("/robust/names-taken", test_names_taken);
  g_test_add_func("/robust/fifo-inputs", test_fifo_inputs);
  g_test_add_func("/robust/sighup", test_sighup);
  g_test_add_func("/robust/data-identity", test_data_identity);
  g_test_add_func("/robust/output-collisions", test_output_collisions);
  g_test_add_func("/robust/byte-names", test_byte_names);
  g_test_add_func("/robust/stdout-full", test_stdout_full);
  g_test_add_func("/robust/numbers", test_numbers);
  g_test_add_func("/robust/schedule-digest", test_schedule_digest);
  g_test_add_func("/robust/steady-state-text", test_steady_state_text);
  g_test_add_func("/robust/require", test_require);
  g_test_add_func("/robust/messages", test_messages);
  g_test_add_func("/robust/convergence-series", test_convergence_series);
  g_test_add_func("/robust/timeline-labels", test_timeline_labels);
  g_test_add_func("/robust/gzip-messages", test_gzip_messages);
  return g_test_run();
}
