/* test-robust-output.c — what a hostile user tries with the outputs, through the program on small
 * synthetic data: output paths that name one file twice (by any spelling, standard output, FIFOs,
 * checkpoint directories), file names that are bytes, standard output that cannot be written, the
 * plot's scratch files.
 * Inputs, numbers, messages and plots are test-robust-io's; checkpoints and runs test-robust's. */
#include "tp_test_robust.h"

#include <fcntl.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

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

/* File names are bytes: a model file and a data directory whose names are not UTF-8 are read, by
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

/* Standard output that cannot be written (a full device) is a failure, --help included. */
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

/* The plot's scratch directory: gone after a picture, after gnuplot wrote none or an incomplete one
 * (exit 1, one line, no picture) and after SIGTERM while gnuplot runs; its picture is made before
 * gnuplot runs (the directory never holds a file it has not registered for removal on a signal).
 * Stand-ins for gnuplot write into what they find.  More logs than a picture takes: exit 2. */
static void test_plot_scratch(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *tmp = g_build_filename(root, "tmp", NULL), *png = g_build_filename(root, "v.png", NULL);
  g_assert_cmpint(g_mkdir(tmp, 0700), ==, 0);
  /* a PNG's signature and its closing IEND chunk, as bytes and as printf(1) writes them */
  static const char png_bytes[] = "\211PNG\r\n\032\n\0\0\0\0IEND\256B`\202";
  struct {
    const char *name, *body, *want; /* want: a line of the refusal; NULL for a picture */
    int status;                     /* 128 + SIGTERM: ended by the signal while the stand-in sleeps */
  } gp[] = {
    { "fills", "printf '\\211PNG\\r\\n\\032\\n\\0\\0\\0\\0IEND\\256B`\\202' > \"$f\"", NULL, 0 },
    { "cut", "printf '\\211PNG\\r\\n\\032\\n\\0\\0\\0\\0IE' > \"$f\"", "incomplete picture", 1 },
    { "idle", ":", "gnuplot wrote no picture", 1 },
    { "slow", ": > ../../started; sleep 5", NULL, 128 + SIGTERM }, /* its directory is in $TMPDIR in root */
  };
  for (size_t i = 0; i < G_N_ELEMENTS(gp); i++) {
    g_autofree char *path = g_build_filename(root, gp[i].name, NULL);
    g_autofree char *script = g_strdup_printf("#!/bin/sh\nfor f in picture.*; do [ -f \"$f\" ] && %s; done\nexit 0\n",
                                              gp[i].body);
    g_assert_true(g_file_set_contents(path, script, -1, NULL));
    g_assert_cmpint(g_chmod(path, 0755), ==, 0);
    g_autofree char *qt = g_shell_quote(tmp), *qg = g_shell_quote(path), *qp = g_shell_quote(png);
    g_autofree char *qr = g_shell_quote(root);
    g_autofree char *line =
      gp[i].status == 128 + SIGTERM
        ? g_strdup_printf("TMPDIR=%s TP_GNUPLOT=%s \"$TP\" plot vmap -w 2-3 -n 2-3 -o %s & pid=$!; "
                          "for t in $(seq 200); do [ -f %s/started ] && break; sleep 0.05; done; "
                          "kill -TERM $pid; wait $pid",
                          qt, qg, qp, qr)
        : g_strdup_printf("TMPDIR=%s TP_GNUPLOT=%s exec \"$TP\" plot vmap -w 2-3 -n 2-3 -o %s", qt, qg, qp);
    TptRun r = tpt_run_shell(line);
    g_test_message("%s: %d %s", gp[i].name, r.status, r.err);
    g_assert_cmpint(r.status, ==, gp[i].status);
    if (gp[i].want) {
      g_assert_cmpint(tpt_lines(r.err), ==, 1);
      g_assert_nonnull(strstr(r.err, gp[i].want));
    }
    if (gp[i].status == 0) {
      g_autofree char *pic = NULL;
      gsize len = 0;
      g_assert_true(g_file_get_contents(png, &pic, &len, NULL));
      g_assert_cmpmem(pic, len, png_bytes, sizeof png_bytes - 1);
      g_assert_cmpint(g_unlink(png), ==, 0);
    }
    g_assert_false(g_file_test(png, G_FILE_TEST_EXISTS));
    if (gp[i].status == 128 + SIGTERM) { /* ended while the stand-in ran */
      g_autofree char *started = g_build_filename(root, "started", NULL);
      g_assert_true(g_file_test(started, G_FILE_TEST_EXISTS));
    }
    GDir *d = g_dir_open(tmp, 0, NULL);
    g_assert_nonnull(d);
    g_assert_null(g_dir_read_name(d));
    g_dir_close(d);
    tpt_run_clear(&r);
  }
  /* one log more than a picture takes, refused before any is read */
  GPtrArray *args = g_ptr_array_new();
  g_ptr_array_add(args, "plot");
  g_ptr_array_add(args, "convergence");
  for (int i = 0; i < 33; i++) {
    g_ptr_array_add(args, "-i");
    g_ptr_array_add(args, "no-such-log.csv");
  }
  g_ptr_array_add(args, "-o");
  g_ptr_array_add(args, png);
  g_ptr_array_add(args, NULL);
  TptRun r = tpt_run((const char *const *)args->pdata);
  assert_refused(&r, "-i: at most 32 training logs in one picture (got 33)");
  tpt_run_clear(&r);
  g_ptr_array_free(args, TRUE);
  tpt_rm_tree(root);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/robust-output/output-collisions", test_output_collisions);
  g_test_add_func("/robust-output/byte-names", test_byte_names);
  g_test_add_func("/robust-output/stdout-full", test_stdout_full);
  g_test_add_func("/robust-output/plot-scratch", test_plot_scratch);
  return g_test_run();
}
