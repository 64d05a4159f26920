/* test-train-mpi.c — `timeprest train --transport mpi` through the binary ($TP_BIN) under
 * `timeout 60 mpirun`: W = 2, 3 and 4 ranks end with the weights (weights_sha256) of the local
 * transport for gpipe, pipedream, timeprest and the split backwards of zb-h1 and zb-h2 (I sends what
 * B sends) with the same arguments and the unit-slot order, every read of the version the schedule names; -np other than W and a run without mpirun are
 * refused (exit 2, one line); a rank killed or stopped (SIGSTOP) mid-run ends every other rank with
 * one line naming the rank, stage and operation it waited for, well within the outer timeout; a
 * stage that is only a flatten is predicted the peak bytes measured (MPI's rendezvous sends); a head
 * tied across stages sums its gradient with the embedding's over MPI as the local run does.
 * Checkpoints (test-train-mpi-ckpt.c) are tested in a program of their own.  The mpirun cases skip,
 * saying why, where mpirun cannot start processes here or the build has no MPI. */
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp_test.h"
#include "tp_test_mpi.h"

static const char *bin;

typedef TptMpiRun Run;
#define run_clear tpt_mpi_run_clear
#define count tpt_count

/* np > 0: timeout 60 mpirun --oversubscribe -np np BIN train ARGS; np = 0: BIN train ARGS. */
static Run run(int np, const char *args)
{
  return tpt_mpi_run(np, NULL, bin, (const char *const[]){ "train", NULL }, args);
}

static gboolean mpi_usable(void) { return tpt_mpi_train_usable(bin); }

#define json_value tpt_json_value

static void expect_success(const Run *r)
{
  if (r->status != 0)
    g_error("exit status %d\n--- stdout\n%s--- stderr\n%s", r->status, r->out, r->err);
}

/* data: "PRESET W" */
static void test_same_weights(gconstpointer data)
{
  if (!mpi_usable())
    return;
  g_auto(GStrv) pw = g_strsplit(data, " ", 2);
  int W = atoi(pw[1]);
  g_autofree char *args = g_strdup_printf("-s %s -w %d -n 2 -k 8 --batch 16 --data synthetic --seed 3 "
                                          "--order-from slots --format json --quiet --peer-timeout 20",
                                          pw[0], W);
  /* each writes its training log and trace: rank 0 writes them for all stages */
  g_autofree char *dir = g_dir_make_tmp("test-train-mpi-XXXXXX", NULL);
  g_assert_nonnull(dir);
  g_autofree char *largs = g_strdup_printf("%s --csv %s/l.log --trace %s/l.csv", args, dir, dir);
  g_autofree char *margs = g_strdup_printf("--transport mpi %s --csv %s/m.log --trace %s/m.csv", args, dir, dir);
  Run local = run(0, largs);
  expect_success(&local);
  Run mpi = run(W, margs);
  expect_success(&mpi);
  const char *names[] = { "l.log", "m.log", "l.csv", "m.csv", "l.schedule.csv", "m.schedule.csv", "l.predicted.csv",
                          "m.predicted.csv" };
  char *text[G_N_ELEMENTS(names)];
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autofree char *path = g_build_filename(dir, names[i], NULL);
    g_assert_true(g_file_get_contents(path, &text[i], NULL, NULL));
    g_unlink(path);
  }
  g_rmdir(dir);
  /* the same log but for the times (column 3), the same rows of events, the same schedule */
  g_auto(GStrv) ll = g_strsplit_set(text[0], "\n", -1), ml = g_strsplit_set(text[1], "\n", -1);
  g_assert_cmpuint(g_strv_length(ll), ==, g_strv_length(ml));
  g_assert_cmpuint(g_strv_length(ll), >, 2);
  for (int i = 1; ll[i] && *ll[i]; i++) {
    g_auto(GStrv) a = g_strsplit(ll[i], ",", -1), b = g_strsplit(ml[i], ",", -1);
    g_assert_cmpstr(a[3], ==, b[3]); /* loss */
    g_assert_cmpstr(a[4], ==, b[4]); /* accuracy */
  }
  g_assert_cmpint(count(text[2], "\n"), ==, count(text[3], "\n"));
  g_assert_cmpstr(text[4], ==, text[5]);
  g_assert_cmpint(count(text[6], "\n"), ==, count(text[7], "\n"));
  for (guint i = 0; i < G_N_ELEMENTS(names); i++)
    g_free(text[i]);
  g_autofree char *sha_l = json_value(local.out, "weights_sha256"), *sha_m = json_value(mpi.out, "weights_sha256");
  g_autofree char *vm = json_value(mpi.out, "versions_match"), *tr = json_value(mpi.out, "transport");
  g_assert_nonnull(sha_l);
  g_assert_cmpuint(strlen(sha_l), ==, 64);
  g_assert_cmpstr(sha_m, ==, sha_l);
  g_assert_cmpstr(vm, ==, "true");
  g_assert_cmpstr(tr, ==, "mpi");
  g_assert_nonnull(strstr(mpi.out, "\"links\": [{\"from\": 1, \"to\": 2, \"latency\": "));
  g_assert_cmpint(count(mpi.out, "\"weights_sha256\""), ==, 1); /* one report, from rank 0 */
  run_clear(&local);
  run_clear(&mpi);
}

/* A first stage that is only a flatten holds no weights, activations or gradients: its memory is
 * the messages it sends (100 KB each).  MPI sends them above its eager limit as rendezvous sends,
 * which complete only once stage 2's forward takes them, so stage 1 holds each until then: 4 under
 * gpipe, 8 under timeprest (two mini-batches in flight).  The prediction models that (the links'
 * eager limit, read from MPI) and says the same peak bytes as the measurement; it once released a
 * message when its transfer would have ended (0.3011-0.4014 MB and 0.6021-0.7025 MB predicted
 * against 0.4014 and 0.8028 MB measured). */
static void test_flatten_stage_memory(void)
{
  if (!mpi_usable())
    return;
  g_autofree char *dir = g_dir_make_tmp("test-train-mpi-XXXXXX", NULL);
  g_autofree char *model = g_build_filename(dir, "flat.model", NULL);
  g_assert_true(g_file_set_contents(model, "name flat\ninput 1 28 28\ndataset 60000\nflatten\nlinear 1024\nrelu\n"
                                    "linear 1024\nrelu\nlinear 10\nsoftmax_ce\n", -1, NULL));
  const char *presets[] = { "gpipe", "timeprest" };
  for (size_t i = 0; i < G_N_ELEMENTS(presets); i++) {
    g_autofree char *args = g_strdup_printf("--transport mpi -m %s -s %s -w 2 -n 4 --split 1,6 -k 3 "
                                            "--data synthetic:512:64 --quiet --format json --peer-timeout 20",
                                            model, presets[i]);
    Run r = run(2, args);
    expect_success(&r);
    g_autofree char *eager = json_value(r.out, "eager_limit");
    g_assert_nonnull(eager);
    g_assert_cmpfloat(g_ascii_strtod(eager, NULL), >, 0);
    g_autoptr(JsonParser) p = json_parser_new();
    g_assert_true(json_parser_load_from_data(p, r.out, -1, NULL));
    JsonObject *o = json_node_get_object(json_parser_get_root(p));
    double peak[2];
    for (int k = 0; k < 2; k++) {
      JsonArray *st = json_object_get_array_member(json_object_get_object_member(o, k ? "measured" : "predicted"),
                                                   "stages");
      peak[k] = json_object_get_double_member(json_array_get_object_element(st, 0), "peak_bytes");
    }
    g_test_message("%s: stage 1 peak bytes predicted %g, measured %g (eager limit %s B)", presets[i], peak[0],
                   peak[1], eager);
    if (peak[0] != peak[1])
      g_error("%s: stage 1 (a flatten) peak bytes predicted %g, measured %g", presets[i], peak[0], peak[1]);
    run_clear(&r);
  }
  g_unlink(model);
  g_rmdir(dir);
}

static void test_size(void)
{
  if (!mpi_usable())
    return;
  Run r = run(2, "--transport mpi -w 3 -k 2 --batch 16 --data synthetic --quiet");
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(count(r.err, "timeprest train: mpirun -np 2 does not match -w 3\n"), ==, 1);
  g_assert_cmpint(count(r.err, "timeprest train:"), ==, 1);
  run_clear(&r);
}

/* --data-parallel 2 over MPI (rank r: replica r / W, stage r mod W): the weights, the losses and the
 * replicas' identity of the same run with the replicas as threads of one process, bit for bit (a
 * sum of two gradients does not depend on their order); stopped at a segment's end and resumed under
 * MPI, the uninterrupted run's weights; a -np that is not D·W refused once. */
static void test_data_parallel(gconstpointer preset)
{
  if (!mpi_usable())
    return;
  g_autofree char *dir = g_dir_make_tmp("test-train-mpi-XXXXXX", NULL);
  g_autofree char *args = g_strdup_printf("-s %s -w 2 -n 2 --data-parallel 2 -k 8 --batch 32 --data synthetic "
                                          "--seed 3 --order-from slots --format json --quiet --peer-timeout 20 "
                                          "--checkpoint-every 4", (const char *)preset);
  g_autofree char *largs = g_strdup_printf("%s --checkpoint %s/l", args, dir);
  g_autofree char *margs = g_strdup_printf("--transport mpi %s --checkpoint %s/m", args, dir);
  g_autofree char *sargs = g_strdup_printf("--transport mpi %s --checkpoint %s/s --stop-after 4", args, dir);
  g_autofree char *rargs = g_strdup_printf("--transport mpi %s --resume %s/s", args, dir);
  Run local = run(0, largs), mpi = run(4, margs), stop = run(4, sargs);
  expect_success(&local);
  expect_success(&mpi);
  g_assert_cmpint(stop.status, ==, 0);
  Run resumed = run(4, rargs);
  expect_success(&resumed);
  const char *keys[] = { "weights_sha256", "final_train_loss", "final_test_loss", "replicas_identical" };
  for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
    g_autofree char *l = json_value(local.out, keys[i]), *m = json_value(mpi.out, keys[i]);
    g_assert_nonnull(l);
    g_assert_cmpstr(m, ==, l);
  }
  g_autofree char *id = json_value(mpi.out, "replicas_identical");
  g_assert_cmpstr(id, ==, "true");
  tpt_assert_allreduce_fed(mpi.out, 2); /* the reduction over MPI, timed before training */
  g_autofree char *wl = json_value(local.out, "weights_sha256"), *wr = json_value(resumed.out, "weights_sha256");
  g_assert_cmpstr(wr, ==, wl);
  g_assert_cmpint(count(mpi.out, "\"weights_sha256\""), ==, 1); /* one report, from rank 0 */
  Run r = run(3, "--transport mpi -w 2 -n 2 --data-parallel 2 -k 2 --batch 16 --data synthetic --quiet");
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(count(r.err, "timeprest train: mpirun -np 3 does not match --data-parallel 2 times -w 2 (4 ranks)\n"),
                  ==, 1);
  g_assert_cmpint(count(r.err, "timeprest train:"), ==, 1);
  run_clear(&r), run_clear(&local), run_clear(&mpi), run_clear(&stop), run_clear(&resumed);
  g_autofree char *rm = g_strdup_printf("rm -rf '%s'", dir);
  g_assert_cmpint(system(rm), ==, 0);
}

/* A head tied to the embedding on another stage: its gradient summed with the table's over MPI ends
 * with the weights of the local run, one pipeline (2 ranks) and two replicas (4 ranks). */
static void test_tied(void)
{
  if (!mpi_usable())
    return;
  g_autofree char *model = tpt_tmp_path("tied-gpt.model");
  g_assert_true(g_file_set_contents(model, "tokens 16 256\nembedding 32 positions=learned\nrepeat 2 block heads=4 "
                                    "ffn=64 mlp=gelu norm=layernorm positions=none bias=1 dropout=1\nlayernorm\n"
                                    "lm_head tied=1\ntoken_ce\n", -1, NULL));
  for (int D = 1; D <= 2; D++) {
    g_autofree char *args = g_strdup_printf("-m %s -s 1f1b -w 2 -n 4 --data-parallel %d -k 6 --batch %d --data "
                                            "synthetic:256:32 --optimizer adamw --lr 0.01 --profile-reps 1 --format "
                                            "json --quiet --peer-timeout 20", model, D, 8 * D);
    g_autofree char *margs = g_strdup_printf("--transport mpi %s", args);
    Run local = run(0, args), mpi = run(2 * D, margs);
    expect_success(&local);
    expect_success(&mpi);
    const char *keys[] = { "weights_sha256", "final_train_loss" };
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
      g_autofree char *l = json_value(local.out, keys[i]), *m = json_value(mpi.out, keys[i]);
      g_assert_nonnull(l);
      g_assert_cmpstr(m, ==, l);
    }
    run_clear(&local), run_clear(&mpi);
  }
  /* an asynchronous schedule, where the two would wait for each other: refused before any work, one
   * line, exit 2 (as every rank's input error) */
  g_autofree char *args = g_strdup_printf("--transport mpi -m %s -s pipedream -w 2 -n 4 -k 6 --batch 8 --data "
                                          "synthetic:256:32 --quiet --peer-timeout 20", model);
  Run r = run(2, args);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(count(r.err, "timeprest train:"), ==, 1);
  g_assert_cmpint(count(r.err, "stage 1 runs F(2) before the update of mini-batch 1"), ==, 1);
  run_clear(&r);
  tpt_tmp_remove(model);
}

/* Run a launcher's command line (words split at spaces: mpirun's A : B forms) to its end: its exit
 * status (asserted to have exited), standard error into *err (owned). */
static int run_line(const char *line, char **err)
{
  g_auto(GStrv) argv = g_strsplit(line, " ", -1);
  g_auto(GStrv) envp = tpt_mpi_env(NULL, NULL);
  g_autofree char *out = NULL;
  int wait = 0;
  GError *e = NULL;
  g_assert_true(g_spawn_sync(NULL, argv, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, err, &wait, &e));
  g_assert_no_error(e);
  g_assert_true(WIFEXITED(wait));
  return WEXITSTATUS(wait);
}

/* Ranks started with other arguments (mpirun's A : B form): exit 2, one line (rank 0's). */
static void test_other_args(void)
{
  if (!mpi_usable())
    return;
  const char *common = "--transport mpi -w 2 -k 2 --batch 16 --data synthetic --quiet";
  g_autofree char *line = g_strdup_printf("timeout 60 mpirun --oversubscribe -np 1 %s train %s -s gpipe : -np 1 %s "
                                          "train %s -s timeprest", bin, common, bin, common);
  g_autofree char *err = NULL;
  g_assert_cmpint(run_line(line, &err), ==, 2);
  g_assert_cmpint(count(err, "timeprest train: rank 1 (stage 2) was started with other arguments than rank 0\n"), ==,
                  1);
  g_assert_cmpint(count(err, "timeprest train:"), ==, 1);
}

/* Only rank 0 writes the outputs, so only rank 0 checks where they go: ranks in different working
 * directories (nodes with their own /tmp) where the output's directory exists for rank 0 alone train
 * and rank 0 writes; where it is missing for rank 0, exit 2 with rank 0's one line. */
static void test_outputs_rank0(void)
{
  if (!mpi_usable())
    return;
  g_autofree char *root = g_dir_make_tmp("tp-mpi-out-XXXXXX", NULL);
  g_autofree char *a = g_build_filename(root, "a", NULL), *b = g_build_filename(root, "b", NULL);
  g_autofree char *out = g_build_filename(a, "out", NULL), *report = g_build_filename(out, "r.json", NULL);
  g_assert_cmpint(g_mkdir_with_parents(out, 0755), ==, 0);
  g_assert_cmpint(g_mkdir_with_parents(b, 0755), ==, 0);
  g_autofree char *abs = g_canonicalize_filename(bin, NULL);
  const char *common = "--transport mpi -w 2 -k 2 --batch 16 --data synthetic --quiet -o out/r.json";
  for (int missing = 0; missing <= 1; missing++) {
    const char *first = missing ? b : a, *second = missing ? a : b;
    g_autofree char *line = g_strdup_printf("timeout 60 mpirun --oversubscribe -np 1 --wdir %s %s train %s : -np 1 "
                                            "--wdir %s %s train %s", first, abs, common, second, abs, common);
    g_autofree char *serr = NULL;
    int status = run_line(line, &serr);
    g_test_message("rank 0 %s the output's directory: status %d, %s", missing ? "without" : "with", status, serr);
    if (!missing) {
      g_assert_cmpint(status, ==, 0);
      g_assert_true(g_file_test(report, G_FILE_TEST_IS_REGULAR));
    } else {
      g_assert_cmpint(status, ==, 2);
      g_assert_cmpint(count(serr, "timeprest train: -o: cannot write 'out/r.json': 'out': No such file"), ==, 1);
      g_assert_cmpint(count(serr, "timeprest train:"), ==, 1);
    }
  }
  g_remove(report), g_rmdir(out), g_rmdir(a), g_rmdir(b);
  g_assert_cmpint(g_rmdir(root), ==, 0);
}

/* A bad flag under mpirun: every rank refuses it before MPI starts; one line (rank 0's), exit 2. */
static void test_flag_error_once(void)
{
  if (!mpi_usable())
    return;
  Run r = run(2, "--transport mpi -w 2 -k 2 --batch 16 --data synthetic --quiet --lr abc");
  g_test_message("%s", r.err);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(count(r.err, "timeprest train: --lr:"), ==, 1);
  run_clear(&r);
}

/* A rank that never starts MPI (mpirun's A : B form with a program that is not timeprest): the
 * start-up is bounded by --peer-timeout, the job ends non-zero (not killed by `timeout`) with a line
 * saying what was waited for. */
static void test_startup_bounded(void)
{
  if (!mpi_usable())
    return;
  const char *common = "--transport mpi -w 2 -k 2 --batch 16 --data synthetic --quiet --peer-timeout 2";
  g_autofree char *line = g_strdup_printf("timeout 60 mpirun --oversubscribe -np 1 %s train %s : -np 1 true", bin,
                                          common);
  g_autofree char *err = NULL;
  gint64 t0 = g_get_monotonic_time();
  int status = run_line(line, &err);
  double secs = (double)(g_get_monotonic_time() - t0) / 1e6;
  g_test_message("status %d after %.1f s: %s", status, secs, err);
  g_assert_cmpint(status, !=, 0);
  g_assert_cmpint(status, !=, 124);
  g_assert_cmpfloat(secs, <, 30);
  /* our line; or, where this rank started MPI before the other process ended (a loaded machine),
   * mpirun's own ending of the job */
  g_assert_true(strstr(err, "within 2 s while starting MPI") || strstr(err, "exiting improperly"));
}

/* Without mpirun (or in a build without MPI): exit 2, one line. */
static void test_no_mpirun(void)
{
  Run r = run(0, "--transport mpi -w 2 -k 2 --data synthetic");
  g_assert_cmpint(r.status, ==, 2);
  g_assert_true(g_str_has_prefix(r.err, "timeprest train: --transport mpi: "));
  g_assert_cmpint(count(r.err, "\n"), ==, 1);
  g_assert_cmpstr(r.out, ==, "");
  run_clear(&r);
}

/* Whether process pid has a thread named name (the runtime names each stage's thread "stage-S"). */
static gboolean has_thread(pid_t pid, const char *name)
{
  g_autofree char *dir = g_strdup_printf("/proc/%d/task", (int)pid);
  GDir *d = g_dir_open(dir, 0, NULL);
  gboolean found = FALSE;
  for (const char *task; d && !found && (task = g_dir_read_name(d));) {
    g_autofree char *path = g_strdup_printf("%s/%s/comm", dir, task), *comm = NULL;
    found = g_file_get_contents(path, &comm, NULL, NULL) && g_str_has_prefix(comm, name);
  }
  if (d)
    g_dir_close(d);
  return found;
}

/* Rank 1 (stage 2 of 3) is killed, or stopped, once training runs: ranks 0 and 2 each end with one
 * line naming stage 2 (rank 1) and the operation they waited for; mpirun exits non-zero, within
 * the peer timeout and well before the outer timeout. */
/* mpirun -np np BIN train ARGS, and signal sig to rank `rank` once its stage thread (stage-2) runs
 * (*victim: its process, 0 where it was not found); the run to its end. */
static Run run_and_kill(int np, const char *args, int rank, int sig, pid_t *victim)
{
  g_autofree char *mark = g_strdup_printf("%d-%d-%d", (int)getpid(), sig, g_random_int_range(0, 1 << 30));
  g_autoptr(GPtrArray) argv = tpt_mpi_command(np, bin, (const char *const[]){ "train", NULL }, args);
  g_auto(GStrv) envp = tpt_mpi_env((const char *const[]){ TPT_MPI_PATIENT, NULL }, mark);
  int err_fd = -1;
  gint64 t0 = g_get_monotonic_time();
  GPid child = tpt_mpi_start(argv, envp, &err_fd);
  *victim = 0;
  for (int i = 0; i < 400 && !(*victim = tpt_mpi_find_rank(mark, rank)); i++)
    g_usleep(25000);
  /* once its stage thread runs, training has begun */
  for (int i = 0; *victim && i < 800 && !has_thread(*victim, "stage-2"); i++)
    g_usleep(25000);
  if (*victim) {
    g_usleep(300000);
    kill(*victim, sig);
  }
  return tpt_mpi_finish(child, err_fd, t0);
}

static void test_fault(gconstpointer data)
{
  if (!mpi_usable())
    return;
  int sig = GPOINTER_TO_INT(data);
  pid_t victim = 0;
  Run r = run_and_kill(3, "--transport mpi -s timeprest -w 3 -n 2 -k 3000 --batch 64 --data synthetic "
                       "--order-from slots --quiet --peer-timeout 5", 1, sig, &victim);
  double secs = r.secs;
  int status = r.status;
  GString *err = g_string_new(r.err);
  run_clear(&r);
  g_test_message("signal %d: status %d after %.2f s\n%s", sig, status, secs, err->str);
  if (!victim) {
    g_string_free(err, TRUE);
    g_test_skip("rank 1's process was not found (OMPI_COMM_WORLD_RANK in /proc/PID/environ)");
    return;
  }
  g_assert_cmpint(status, !=, 0);
  g_assert_cmpint(status, !=, 124); /* the outer timeout: a hang */
  /* well before the outer timeout; a stopped rank is only killed after mpirun's SIGTERM → SIGKILL
   * wait (OMPI_MCA_odls_base_sigkill_timeout, 4 s here), which may come more than once */
  g_assert_cmpfloat(secs, <, 45);
  g_auto(GStrv) lines = g_strsplit_set(err->str, "\n", -1);
  GRegex *op = g_regex_new("(waiting for|no message) [FB]\\([0-9]+(,[A-Z])?\\) from stage 2 \\(rank 1\\)", 0, 0, NULL);
  for (int rank = 0; rank < 3; rank += 2) {
    char prefix[40];
    g_snprintf(prefix, sizeof prefix, "stage %d (rank %d): ", rank + 1, rank);
    int n = 0;
    for (int i = 0; lines[i]; i++)
      if (g_str_has_prefix(lines[i], prefix)) {
        n++;
        if (!g_regex_match(op, lines[i], 0, NULL))
          g_error("the line does not name the operation and the peer: %s", lines[i]);
      }
    if (n != 1)
      g_error("%d lines from %s\n%s", n, prefix, err->str);
  }
  g_regex_unref(op);
  g_string_free(err, TRUE);
}

/* A replica's rank killed while training (rank 3: stage 2 of replica 2): the job ends, with a
 * non-zero status, well before the outer timeout (the other replicas wait for it at their next
 * update at most --peer-timeout). */
static void test_fault_replica(void)
{
  if (!mpi_usable())
    return;
  pid_t victim = 0;
  Run r = run_and_kill(4, "--transport mpi -s timeprest -w 2 -n 2 --data-parallel 2 -k 3000 --batch 64 "
                       "--data synthetic --order-from slots --quiet --peer-timeout 5 --timeout 5", 3, SIGKILL, &victim);
  g_test_message("status %d after %.2f s\n%s", r.status, r.secs, r.err);
  if (!victim) {
    run_clear(&r);
    g_test_skip("rank 3's process was not found (OMPI_COMM_WORLD_RANK in /proc/PID/environ)");
    return;
  }
  g_assert_cmpint(r.status, !=, 0);
  g_assert_cmpint(r.status, !=, 124); /* the outer timeout: a hang */
  g_assert_cmpfloat(r.secs, <, 45);
  run_clear(&r);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  bin = g_getenv("TP_BIN");
  if (!bin) {
    fprintf(stderr, "TP_BIN is not set (make check sets it)\n");
    return 1;
  }
  g_test_add_func("/train-mpi/no-mpirun", test_no_mpirun);
  static const char *const cases[] = { "gpipe 2", "pipedream 2", "timeprest 2", "gpipe 3", "pipedream 3",
                                       "timeprest 3", "gpipe 4", "pipedream 4", "timeprest 4", "zb-h1 2",
                                       "zb-h2 3" };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *path = g_strdup_printf("/train-mpi/weights/%s", cases[i]);
    *strchr(path + strlen("/train-mpi/weights/"), ' ') = '-';
    g_test_add_data_func(path, cases[i], test_same_weights);
  }
  g_test_add_func("/train-mpi/size", test_size);
  g_test_add_data_func("/train-mpi/data-parallel/gpipe", "gpipe", test_data_parallel);
  g_test_add_data_func("/train-mpi/data-parallel/timeprest", "timeprest", test_data_parallel);
  g_test_add_func("/train-mpi/tied", test_tied);
  g_test_add_func("/train-mpi/flatten-stage-memory", test_flatten_stage_memory);
  g_test_add_func("/train-mpi/other-arguments", test_other_args);
  g_test_add_func("/train-mpi/startup-bounded", test_startup_bounded);
  g_test_add_func("/train-mpi/flag-error-once", test_flag_error_once);
  g_test_add_func("/train-mpi/outputs-rank-0", test_outputs_rank0);
  g_test_add_data_func("/train-mpi/fault/kill", GINT_TO_POINTER(SIGKILL), test_fault);
  g_test_add_data_func("/train-mpi/fault/stop", GINT_TO_POINTER(SIGSTOP), test_fault);
  g_test_add_func("/train-mpi/fault/replica", test_fault_replica);
  return g_test_run();
}
