/* test-robust-io.c — what a hostile user tries with inputs and outputs, through the program on
 * small synthetic data: the process's own memory limit, FIFOs without a writer, colliding output
 * paths, file names that are bytes, standard output that cannot be written, numbers, the reports'
 * schedule digest and steady state, TP_REQUIRE, messages naming what and where, convergence and
 * timeline plots.  Checkpoints and runs are test-robust's. */
#include "tp_test_robust.h"

#include <fcntl.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* The program under a shell's `ulimit -v KB`: its status and stderr. */
static TptRun run_limited(const char *kb, const char *cmd)
{
  /* bounded: a command that hangs under the limit (BLAS retrying a buffer) fails the test */
  g_autofree char *script = g_strdup_printf("ulimit -v %s && exec timeout 60 \"$TP\" %s", kb, cmd);
  return tpt_run_shell(script);
}

/* 2. Out of memory by the process's own limit (ulimit -v): refused or failed in one line, never an
 * abort in GLib's allocator.  Each command checks what it holds: the schedule and its simulation,
 * every preset of a comparison, a timeline's rows and picture data, a schedule's text (a GString's
 * capacity is a power of two), a profile's largest micro-batch. */
static void test_memory_limit(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *svg = g_build_filename(root, "t.svg", NULL);
  g_autofree char *plot = g_strdup_printf("plot timeline -w 10 -n 10 -k 30000 -o '%s'", svg);
  struct {
    const char *kb, *cmd, *want;
  } cases[] = {
    { "2000000", "simulate -w 10 -n 10 -k 900000", "address-space limit" },
    { "2000000", "train -w 2 -k 2 -m vgg16-imagenet --batch 32 --data synthetic:100 --quiet", "address-space limit" },
    { "200000", "compare -w 10 -n 10 -k 30000", "address-space limit" },
    { "200000", "schedule -w 10 -n 10 -k 30000 --format csv", "address-space limit" },
    { "900000", plot, "drawing the timeline needs about" },
    { "2000000", "profile -m vgg16-imagenet --micro-batch-sizes 32 -r 1",
      "profiling vgg16-imagenet at micro-batches of 32 needs about" },
    /* each stage thread's BLAS buffer and heap counted: it hung in OpenBLAS's retry */
    { "400000", "train -w 2 -k 2 --batch 64 --data synthetic --quiet", "address-space limit" },
    { "600000", "train -w 4 -k 2 --batch 64 --data synthetic --quiet", "address-space limit" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    TptRun r = run_limited(cases[i].kb, cases[i].cmd);
    if (strstr(r.err, "Sanitizer")) {
      g_test_skip("a sanitizer build needs an unlimited address space");
      tpt_run_clear(&r);
      tpt_rm_tree(root);
      return;
    }
    g_test_message("%s: status %d, stderr: %s", cases[i].cmd, r.status, r.err);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    g_assert_nonnull(strstr(r.err, cases[i].want));
    tpt_run_clear(&r);
  }
  g_assert_false(g_file_test(svg, G_FILE_TEST_EXISTS));
  /* a validate sweep near the limit runs (on one thread, its freed memory given back) or is refused
   * in one line (OpenBLAS's own buffers may not fit beside it), never aborted */
  TptRun r = run_limited("300000", "validate -w 40-52 -n 56-64");
  g_test_message("validate: status %d, stderr: %s", r.status, r.err);
  g_assert_true(r.status == 0 || (r.status == 2 && tpt_lines(r.err) == 1));
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* 2. The memory a step needs, against TP_MEMORY_LIMIT: a schedule's JSON text counts the power of two
 * its GString grows to (346 MB of text take 512 MB); a comparison where every preset is refused
 * says why for each and fails, instead of printing nothing with exit 0. */
static void test_memory_limit_env(void)
{
  TptRun r = tpt_run_shell("TP_MEMORY_LIMIT=400M exec \"$TP\" schedule -w 10 -n 10 -k 30000 --format json");
  g_test_message("schedule: status %d, stderr: %s", r.status, r.err);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  g_assert_nonnull(strstr(r.err, "writing the schedule needs about 537 MB of memory"));
  g_assert_cmpstr(r.out, ==, "");
  tpt_run_clear(&r);
  for (int csv = 0; csv < 2; csv++) {
    g_autofree char *cmd = g_strdup_printf("TP_MEMORY_LIMIT=1G exec \"$TP\" compare -w 10 -n 10 -k 900000%s",
                                           csv ? " --format csv" : "");
    r = tpt_run_shell(cmd);
    g_test_message("compare: status %d, stderr: %s", r.status, r.err);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    g_assert_nonnull(strstr(r.err, "no preset could be computed"));
    g_assert_nonnull(strstr(r.err, "needs about"));
    if (!csv) /* every preset's row, with its reason */
      g_assert_nonnull(strstr(r.out, "pipedream        n/a: W=10, N=10, K=900000: generating the schedule needs about"));
    tpt_run_clear(&r);
  }
  /* a timeline drawn from an events file: the reading and the picture's data checked too */
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *ev = g_build_filename(root, "ev.csv", NULL), *png = g_build_filename(root, "tl.png", NULL);
  g_autofree char *make = g_strdup_printf("exec \"$TP\" simulate -w 4 -n 4 -k 40 --csv '%s' -o /dev/null", ev);
  r = tpt_run_shell(make);
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  const char *limits[][2] = { { "1", "reading " }, { "300K", "drawing the timeline needs about" } };
  for (size_t i = 0; i < G_N_ELEMENTS(limits); i++) {
    g_autofree char *cmd = g_strdup_printf("TP_MEMORY_LIMIT=%s exec \"$TP\" plot timeline -e '%s' -o '%s'", limits[i][0],
                                           ev, png);
    r = tpt_run_shell(cmd);
    g_test_message("plot -e: status %d, stderr: %s", r.status, r.err);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    g_assert_nonnull(strstr(r.err, limits[i][1]));
    g_assert_false(g_file_test(png, G_FILE_TEST_EXISTS));
    tpt_run_clear(&r);
  }
  tpt_rm_tree(root);
}

/* 11, 12. A FIFO without a writer given where a file is read (model, schedule, simulate, compare and
 * plot -i, events, cost, cluster, profile, data) ends at once with exit 2 naming it, never blocks in
 * open(); a directory given as a data file says so. */
static void test_fifo_inputs(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *fifo = g_build_filename(root, "in.fifo", NULL);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  g_autofree char *data = g_build_filename(root, "data", NULL);
  g_autofree char *images = g_build_filename(data, "train-images-idx3-ubyte.gz", NULL);
  g_assert_cmpint(g_mkdir_with_parents(data, 0700), ==, 0);
  g_assert_cmpint(mkfifo(images, 0600), ==, 0);
  g_autofree char *png = g_build_filename(root, "out.png", NULL);
  struct {
    const char *const *args;
    const char *names;
  } cases[] = {
    { (const char *[]){ "train", "-m", fifo, "-k", "2", "--quiet", NULL }, fifo },
    { (const char *[]){ "train", "--schedule", fifo, "--quiet", NULL }, fifo },
    { (const char *[]){ "simulate", "-i", fifo, NULL }, fifo },
    { (const char *[]){ "compare", "-i", fifo, NULL }, fifo },
    { (const char *[]){ "plot", "timeline", "-i", fifo, "-o", png, NULL }, fifo },
    { (const char *[]){ "plot", "convergence", "-i", fifo, "-o", png, NULL }, fifo },
    { (const char *[]){ "plot", "timeline", "--events", fifo, "-o", png, NULL }, fifo },
    { (const char *[]){ "simulate", "-c", fifo, NULL }, fifo },
    { (const char *[]){ "simulate", "-m", "mlp", "--cluster", fifo, NULL }, fifo },
    { (const char *[]){ "plan", "-m", "mlp", "--profile", fifo, NULL }, fifo },
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

/* 7, 13. Outputs that name one file twice, and an empty output name, are refused before any work:
 * exit 2, one line naming both flags (or the empty one), nothing written. */
static void test_output_collisions(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *x = g_build_filename(root, "x", NULL), *run = g_build_filename(root, "run", NULL);
  g_autofree char *run_plan = g_build_filename(root, "run.schedule.csv", NULL);
  g_autofree char *dotted = g_build_filename(root, ".", "x", NULL);
  /* a link to a directory elsewhere: "far/x" and the directory's own name for x are one new file */
  g_autofree char *elsewhere = g_build_filename(root, "sub", "d", NULL), *far = g_build_filename(root, "far", NULL);
  g_autofree char *far_x = g_build_filename(far, "x", NULL), *d_x = g_build_filename(elsewhere, "x", NULL);
  g_assert_cmpint(g_mkdir_with_parents(elsewhere, 0755), ==, 0);
  g_assert_cmpint(symlink(elsewhere, far), ==, 0);
  struct {
    const char *const *args;
    const char *want;
  } cases[] = {
    { (const char *[]){ "simulate", "--csv", far_x, "-o", d_x, NULL }, "--csv and -o" },
    { (const char *[]){ "train", "-k", "2", "--quiet", "--csv", x, "-o", x, NULL }, "--csv and -o" },
    { (const char *[]){ "train", "-k", "2", "--quiet", "--csv", x, "--trace", dotted, NULL }, "--csv and --trace" },
    { (const char *[]){ "train", "-k", "2", "--quiet", "--csv", run_plan, "--trace", run, NULL }, "--csv and --trace" },
    { (const char *[]){ "train", "-k", "2", "--quiet", "-o", "", NULL }, "-o" },
    { (const char *[]){ "schedule", "-o", "", NULL }, "-o: an empty file name" },
    { (const char *[]){ "simulate", "-o", "", NULL }, "-o: an empty file name" },
    { (const char *[]){ "validate", "-o", "", NULL }, "-o: an empty file name" },
    { (const char *[]){ "compare", "-o", "", NULL }, "-o: an empty file name" },
    { (const char *[]){ "profile", "-o", "", NULL }, "-o: an empty file name" },
    { (const char *[]){ "plan", "--cluster", "C", "-o", "", NULL }, "-o: an empty file name" },
    { (const char *[]){ "simulate", "--csv", x, "-o", x, NULL }, "--csv and -o" },
    { (const char *[]){ "simulate", "--trace", x, "--csv", x, NULL }, "--csv and --trace" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    TptRun r = tpt_run(cases[i].args);
    g_test_message("case %zu: %s", i, r.err);
    assert_refused(&r, cases[i].want);
    g_assert_false(g_file_test(x, G_FILE_TEST_EXISTS));
    g_assert_false(g_file_test(run_plan, G_FILE_TEST_EXISTS));
    g_assert_false(g_file_test(d_x, G_FILE_TEST_EXISTS));
    tpt_run_clear(&r);
  }
  /* "far/../x" is sub/x (beside d), not root's x: two files, both written */
  g_autofree char *far_up = g_build_filename(far, "..", "x", NULL);
  TptRun two = tpt_run((const char *[]){ "simulate", "--csv", far_up, "-o", x, NULL });
  g_test_message("far/../x and x: %s", two.err);
  g_assert_cmpint(two.status, ==, 0);
  g_assert_true(g_file_test(x, G_FILE_TEST_IS_REGULAR));
  g_autofree char *root_parent = g_path_get_dirname(elsewhere), *beside_d = g_build_filename(root_parent, "x", NULL);
  g_assert_true(g_file_test(beside_d, G_FILE_TEST_IS_REGULAR));
  tpt_run_clear(&two);
  /* an input reached through a link the same way: far/../s.csv is sub/s.csv, the schedule read */
  g_autofree char *sub_s = g_build_filename(root_parent, "s.csv", NULL), *far_s = g_build_filename(far, "..", "s.csv", NULL);
  TptRun made = tpt_run((const char *[]){ "schedule", "-w", "2", "-o", sub_s, NULL });
  g_assert_cmpint(made.status, ==, 0);
  g_autofree char *sched_text = NULL;
  g_assert_true(g_file_get_contents(sub_s, &sched_text, NULL, NULL));
  TptRun over = tpt_run((const char *[]){ "simulate", "-i", sub_s, "-o", far_s, NULL });
  g_test_message("-i sub/s.csv -o far/../s.csv: %s", over.err);
  assert_refused(&over, "-o and -i: both name one file");
  g_autofree char *after = NULL;
  g_assert_true(g_file_get_contents(sub_s, &after, NULL, NULL));
  g_assert_cmpstr(after, ==, sched_text);
  tpt_run_clear(&made), tpt_run_clear(&over);
  /* standard output redirected into the file an output names: one of the two would be lost */
  g_autofree char *clash = g_strdup_printf("cd %s && \"$TP\" simulate -w 2 --csv out.csv > out.csv", root);
  TptRun so = tpt_run_shell(clash);
  g_test_message("--csv out.csv > out.csv: %s", so.err);
  g_assert_cmpint(so.status, ==, 2);
  g_assert_nonnull(strstr(so.err, "--csv 'out.csv' and the report (no -o): both go to standard output"));
  tpt_run_clear(&so);
  g_autofree char *fine = g_strdup_printf("cd %s && \"$TP\" simulate -w 2 -o /dev/stdout > out.csv", root);
  so = tpt_run_shell(fine);
  g_assert_cmpint(so.status, ==, 0);
  tpt_run_clear(&so);
  /* a name of standard output is written through it: >> appends, as it does for -o - */
  g_autofree char *append = g_strdup_printf("cd %s && echo kept > out.csv && \"$TP\" simulate -w 2 -o /dev/stdout >> out.csv "
                                            "&& head -n 1 out.csv", root);
  so = tpt_run_shell(append);
  g_assert_cmpint(so.status, ==, 0);
  g_assert_cmpstr(so.out, ==, "kept\n");
  tpt_run_clear(&so);
  /* standard output that cannot take the report is refused before the work: closed (and then no
   * file the command opens takes its place: the checkpoint's lock once did) or read-only (a directory
   * can only be);
   * a file it is open on read-only, or over its start (1<>), is replaced as any named file */
  const char *shell[][3] = {
    { "\"$TP\" simulate -w 2 >&-", "it is closed", "" },
    { "\"$TP\" train -w 2 -k 2 --data synthetic --checkpoint ck >&-; s=$?; test ! -e ck && exit $s", "it is closed", "" },
    { "echo kept > o.txt && \"$TP\" simulate -w 2 1<o.txt", "it is open for reading only", "" },
    { "echo kept > o.txt && \"$TP\" simulate -w 2 --csv o.txt 1<>o.txt", "--csv and standard output: both name 'o.txt'", "" },
    { "echo kept > o.txt && \"$TP\" simulate -w 2 -o o.txt 1<o.txt && head -c 8 o.txt", NULL, "schedule" },
    { "seq 1000 > o.txt && \"$TP\" simulate -w 2 -o o.txt 1<>o.txt && tail -n 1 o.txt", NULL, "  2 -> 1" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(shell); i++) {
    g_autofree char *line = g_strdup_printf("cd %s && %s", root, shell[i][0]);
    so = tpt_run_shell(line);
    g_test_message("%s: %d %s%s", shell[i][0], so.status, so.out, so.err);
    if (shell[i][1]) {
      g_assert_cmpint(so.status, ==, 2);
      g_assert_cmpint(tpt_lines(so.err), ==, 1);
      g_assert_nonnull(strstr(so.err, shell[i][1]));
    } else {
      g_assert_cmpint(so.status, ==, 0);
      g_assert_true(g_str_has_prefix(so.out, shell[i][2]));
    }
    tpt_run_clear(&so);
  }
  g_autofree char *o_txt = g_build_filename(root, "o.txt", NULL);
  g_unlink(o_txt);
  g_autofree char *out_csv = g_build_filename(root, "out.csv", NULL);
  g_unlink(out_csv), g_unlink(sub_s);
  g_unlink(x), g_unlink(beside_d), g_unlink(far), g_rmdir(elsewhere), g_rmdir(root_parent);
  /* an output naming an input file (by its name, another spelling or a hard link) is refused before
   * anything runs, the input left as it was (a model and a cluster that would run) */
  const char *src = g_getenv("TP_SRCDIR") ? g_getenv("TP_SRCDIR") : ".";
  g_autofree char *mlp_file = g_build_filename(src, "models", "mlp.model", NULL);
  g_autofree char *a_file = g_build_filename(src, "models", "clusters", "A.cluster", NULL);
  g_autofree char *mlp_text = NULL, *a_text = NULL;
  g_assert_true(g_file_get_contents(mlp_file, &mlp_text, NULL, NULL));
  g_assert_true(g_file_get_contents(a_file, &a_text, NULL, NULL));
  const char *text = "an input the run reads\n";
  g_autofree char *model = g_build_filename(root, "m.model", NULL), *cluster = g_build_filename(root, "a.cluster", NULL);
  g_autofree char *cost = g_build_filename(root, "c.cost", NULL), *sched = g_build_filename(root, "s.csv", NULL);
  g_autofree char *png = g_build_filename(root, "p.png", NULL), *png2 = g_build_filename(root, ".", "p.png", NULL);
  g_autofree char *hard = g_build_filename(root, "link.csv", NULL), *dmodel = g_build_filename(root, ".", "m.model", NULL);
  const char *files[] = { model, cluster, cost, sched, run_plan, png };
  const char *held[] = { mlp_text, a_text, text, text, text, text };
  for (size_t i = 0; i < G_N_ELEMENTS(files); i++)
    g_assert_true(g_file_set_contents(files[i], held[i], -1, NULL));
  g_assert_cmpint(link(sched, hard), ==, 0);
  struct {
    const char *const *args;
    const char *want;
  } inputs[] = {
    { (const char *[]){ "profile", "-m", model, "-r", "1", "-b", "2", "-o", model, NULL }, "-o and -m: both name" },
    { (const char *[]){ "plan", "-m", model, "-o", model, NULL }, "-o and -m: both name" },
    { (const char *[]){ "plan", "--cluster", cluster, "-o", cluster, NULL }, "-o and --cluster: both name" },
    { (const char *[]){ "simulate", "-c", cost, "-o", cost, NULL }, "-o and -c: both name" },
    { (const char *[]){ "simulate", "-i", sched, "-o", hard, NULL }, "-o and -i: both name" },
    { (const char *[]){ "schedule", "-i", sched, "-o", sched, NULL }, "-o and -i: both name" },
    { (const char *[]){ "compare", "-m", model, "--cluster", "A", "-o", dmodel, NULL }, "-o and -m: both name" },
    { (const char *[]){ "train", "-k", "2", "--quiet", "-m", model, "-o", model, NULL }, "-o and -m: both name" },
    { (const char *[]){ "train", "-k", "2", "--quiet", "-m", model, "--csv", dmodel, NULL }, "--csv and -m: both name" },
    { (const char *[]){ "train", "--quiet", "--schedule", sched, "--trace", sched, NULL }, "--trace and --schedule" },
    { (const char *[]){ "train", "--quiet", "--schedule", run_plan, "--trace", run, NULL }, "--trace and --schedule" },
    { (const char *[]){ "plot", "convergence", "-i", png, "-o", png, NULL }, "-o and -i: both name" },
    { (const char *[]){ "plot", "timeline", "-e", png, "-o", png2, NULL }, "-o and -e: both name" },
    { (const char *[]){ "plot", "timeline", "--measured", png, "-o", png, NULL }, "-o and --measured: both name" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(inputs); i++) {
    TptRun r = tpt_run(inputs[i].args);
    g_test_message("input case %zu: %s", i, r.err);
    assert_refused(&r, inputs[i].want);
    g_assert_nonnull(strstr(r.err, "an output cannot overwrite an input"));
    for (size_t f = 0; f < G_N_ELEMENTS(files); f++) {
      g_autofree char *now = NULL;
      g_assert_true(g_file_get_contents(files[f], &now, NULL, NULL));
      g_assert_cmpstr(now, ==, held[f]);
    }
    tpt_run_clear(&r);
  }
  /* a model or cluster given by name is the file the loader reads for it: -o over that file is refused */
  g_setenv("TP_MODELS_DIR", root, TRUE);
  g_setenv("TP_CLUSTERS_DIR", root, TRUE);
  const char *const *named[] = { (const char *[]){ "plan", "-m", "m", "-o", model, NULL },
                                 (const char *[]){ "plan", "--cluster", "a", "-o", cluster, NULL },
                                 (const char *[]){ "simulate", "-m", "m", "--cluster", "a", "-o", dmodel, NULL } };
  const char *named_want[] = { "-o and -m: both name", "-o and --cluster: both name", "-o and -m: both name" };
  for (size_t i = 0; i < G_N_ELEMENTS(named); i++) {
    TptRun r = tpt_run(named[i]);
    g_test_message("by name %zu: %s", i, r.err);
    assert_refused(&r, named_want[i]);
    tpt_run_clear(&r);
  }
  g_unsetenv("TP_MODELS_DIR");
  g_unsetenv("TP_CLUSTERS_DIR");
  for (size_t f = 0; f < G_N_ELEMENTS(files); f++) {
    g_autofree char *now = NULL;
    g_assert_true(g_file_get_contents(files[f], &now, NULL, NULL));
    g_assert_cmpstr(now, ==, held[f]);
  }
  /* a model given by name is read from the models directory, not from the file of that name here */
  g_autofree char *mlp = g_build_filename(root, "mlp", NULL), *qroot = g_shell_quote(root);
  g_assert_true(g_file_set_contents(mlp, text, -1, NULL));
  g_autofree char *script = g_strdup_printf("cd %s && \"$TP\" simulate -m mlp --cluster A -w 2 -o mlp", qroot);
  TptRun r = tpt_run_shell(script);
  g_test_message("%s", r.err);
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* 9. File names are bytes: a model file and a data directory whose names are not UTF-8 are read, by
 * every command that takes them. */
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
  /* every command that takes a model */
  const char *more[][12] = {
    { "simulate", "-w", "2", "-m", model, "--cluster", "A", NULL },
    { "compare", "-w", "2", "-n", "2", "-m", model, "--cluster", "A", NULL },
    { "profile", "-m", model, "--micro-batch-sizes", "2", "-r", "1", NULL },
    { "plan", "-m", model, "--cluster", "A", "--batch", "8", "-w", "1-2", "--presets", "gpipe", NULL },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(more); i++) {
    r = tpt_run(more[i]);
    g_test_message("%s: %s", more[i][0], r.err);
    g_assert_cmpint(r.status, ==, 0);
    tpt_run_clear(&r);
  }
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
  /* byte counts by the same rule (plan --memory-limit, TP_MEMORY_LIMIT), with their suffixes */
  const char *bytes[] = { "0x10G", " 12G", "12G ", "12Q", "inf", "0" };
  for (size_t i = 0; i < G_N_ELEMENTS(bytes); i++) {
    TptRun r = tpt_run((const char *[]){ "plan", "-m", "mlp", "--cluster", "C", "--memory-limit", bytes[i], NULL });
    g_test_message("--memory-limit '%s': %s", bytes[i], r.err);
    assert_refused(&r, "--memory-limit: expected a number of bytes");
    tpt_run_clear(&r);
    g_autofree char *line = g_strdup_printf("TP_MEMORY_LIMIT='%s' exec \"$TP\" schedule -w 2 -n 2 -k 3", bytes[i]);
    r = tpt_run_shell(line);
    g_test_message("TP_MEMORY_LIMIT='%s': %s", bytes[i], r.err);
    assert_refused(&r, "TP_MEMORY_LIMIT: expected a number of bytes from 1");
    tpt_run_clear(&r);
  }
  TptRun r = tpt_run((const char *[]){ "plan", "-m", "mlp", "--cluster", "C", "--memory-limit", "1.5G", "-w", "1-2",
                                       "--presets", "gpipe", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "memory limit: 1.611 GB per device"));
  tpt_run_clear(&r);
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

/* An option's value that is not UTF-8 (GOption converts string options and, failing, names neither
 * the option nor the value) is refused naming its flag, in every form a flag takes its value, even
 * after a file name that is bytes. */
static void test_not_utf8_values(void)
{
  struct {
    const char *const *args;
    const char *want;
  } cases[] = {
    { (const char *[]){ "plan", "-m", "mlp", "--cluster", "A", "--memory-limit", "1\xffG", NULL },
      "--memory-limit: '1\\xFFG' is not UTF-8 text" },
    { (const char *[]){ "train", "--fuse-forwards", "o\xffn", NULL }, "--fuse-forwards: 'o\\xFFn' is not UTF-8" },
    { (const char *[]){ "schedule", "-s", "x\xff", NULL }, "-s: 'x\\xFF' is not UTF-8" },
    { (const char *[]){ "profile", "--transport", "m\xff", NULL }, "--transport: 'm\\xFF' is not UTF-8" },
    { (const char *[]){ "schedule", "-w", "2", "--preset=x\xff", NULL }, "--preset: 'x\\xFF' is not UTF-8" },
    { (const char *[]){ "simulate", "-m", "m\xfe.model", "--cluster", "A", "-s", "t\xff", NULL },
      "-s: 't\\xFF' is not UTF-8" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    TptRun r = tpt_run(cases[i].args);
    g_test_message("case %zu: %s", i, r.err);
    assert_refused(&r, cases[i].want);
    tpt_run_clear(&r);
  }
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
  g_test_add_func("/robust-io/memory-limit", test_memory_limit);
  g_test_add_func("/robust-io/memory-limit-env", test_memory_limit_env);
  g_test_add_func("/robust-io/fifo-inputs", test_fifo_inputs);
  g_test_add_func("/robust-io/output-collisions", test_output_collisions);
  g_test_add_func("/robust-io/byte-names", test_byte_names);
  g_test_add_func("/robust-io/stdout-full", test_stdout_full);
  g_test_add_func("/robust-io/numbers", test_numbers);
  g_test_add_func("/robust-io/schedule-digest", test_schedule_digest);
  g_test_add_func("/robust-io/steady-state-text", test_steady_state_text);
  g_test_add_func("/robust-io/require", test_require);
  g_test_add_func("/robust-io/messages", test_messages);
  g_test_add_func("/robust-io/not-utf8-values", test_not_utf8_values);
  g_test_add_func("/robust-io/convergence-series", test_convergence_series);
  g_test_add_func("/robust-io/timeline-labels", test_timeline_labels);
  g_test_add_func("/robust-io/gzip-messages", test_gzip_messages);
  return g_test_run();
}
