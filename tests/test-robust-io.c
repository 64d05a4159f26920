/* test-robust-io.c — what a hostile user tries with inputs, numbers and messages, through the
 * program on small synthetic data: the process's own memory limit, FIFOs without a writer, numbers,
 * the reports' schedule digest and steady state, TP_REQUIRE, messages naming what and where,
 * convergence and timeline plots.  Outputs are test-robust-output's; checkpoints and runs
 * test-robust's. */
#include "config.h"
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

/* Out of memory by the process's own limit (ulimit -v): refused or failed in one line, never an
 * abort in GLib's allocator.  Each command checks what it holds: the schedule and its simulation,
 * every preset of a comparison, a timeline's rows and picture data, a schedule's text (a GString's
 * capacity is a power of two), a profile's largest micro-batch. */
static void test_memory_limit(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *svg = g_build_filename(root, "t.svg", NULL);
  g_autofree char *plot = g_strdup_printf("plot timeline -w 10 -n 10 -k 30000 -o '%s'", svg);
  /* a JSON schedule read back (its tree of nodes: 16 times the text; it aborted in GLib) */
  g_autofree char *json = g_build_filename(root, "big.json", NULL);
  TptRun w = tpt_run((const char *[]){ "schedule", "-s", "gpipe", "-w", "1", "-n", "4096", "-k", "20", "-f", "json", "-o",
                                       json, NULL });
  g_assert_cmpint(w.status, ==, 0);
  tpt_run_clear(&w);
  g_autofree char *read_json = g_strdup_printf("simulate -i '%s'", json);
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
    { "150000", read_json, "big.json (JSON, 11.8 MB) needs about" },
    /* the test set's evaluation counted: it failed after training, its chunks' scratch left out */
    { "1600000", "train -m llama-tiny --optimizer adamw -k 10 -w 2 -n 2 -b 8 --data synthetic --order-from slots "
                 "--profile-reps 1 --quiet", "training llama-tiny with mini-batches of 8 needs about" },
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
  /* simulate with its events CSV and trace near the limit: the checks before the staged outputs hold
   * (it aborted in GLib between 415 and 440 MB while freed heap stayed mapped), and a refusal leaves
   * no file */
  g_autofree char *ev = g_build_filename(root, "ev.csv", NULL), *tr = g_build_filename(root, "tr.json", NULL);
  g_autofree char *sim = g_strdup_printf("simulate -s timeprest -w 32 -n 16 -k 512 --csv '%s' --trace '%s'", ev, tr);
  const char *near[] = { "400000", "420000", "430000", "440000" };
  for (size_t i = 0; i < G_N_ELEMENTS(near); i++) {
    TptRun r = run_limited(near[i], sim);
    g_test_message("%s KB: status %d, stderr: %s", near[i], r.status, r.err);
    g_assert_true(r.status == 0 || (r.status == 2 && tpt_lines(r.err) == 1));
    g_autoptr(GDir) d = g_dir_open(root, 0, NULL);
    int files = 0;
    for (const char *n; (n = g_dir_read_name(d));)
      files += g_str_has_prefix(n, "ev.csv") || g_str_has_prefix(n, "tr.json");
    g_assert_cmpint(files, ==, r.status == 0 ? 2 : 0);
    (void)g_unlink(ev), (void)g_unlink(tr);
    tpt_run_clear(&r);
  }
  /* a validate sweep near the limit runs (on one thread, its freed memory given back) or is refused
   * in one line (OpenBLAS's own buffers may not fit beside it), never aborted */
  TptRun r = run_limited("300000", "validate -w 40-52 -n 56-64");
  g_test_message("validate: status %d, stderr: %s", r.status, r.err);
  g_assert_true(r.status == 0 || (r.status == 2 && tpt_lines(r.err) == 1));
  tpt_run_clear(&r);
  /* a plan under a small limit: its search on one thread (it hung waiting for a pool's threads that
   * could not start, or died in GLib's allocator), refused in one line where even that does not fit */
  const char *plan_kb[] = { "16000", "20000", "30000", "60000", "120000" };
  for (size_t i = 0; i < G_N_ELEMENTS(plan_kb); i++) {
    r = run_limited(plan_kb[i], "plan --model tinyllama-1.1b --cluster dgx-h100 --batch 32 --devices 16 --threads 2");
    g_test_message("plan at %s KB: status %d, stderr: %s", plan_kb[i], r.status, r.err);
    g_assert_true(r.status == 0 || (r.status == 2 && tpt_lines(r.err) == 1));
    tpt_run_clear(&r);
  }
  tpt_rm_tree(root);
}

/* Data larger than the memory left: refused before it is generated or read, in one line naming
 * it (it had aborted in GLib's allocator under a ulimit); and a test loss that is not a number
 * ends the run with exit 1 naming it, instead of a report with "nan" in its JSON. */
static void test_data_memory(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust-data");
  g_autofree char *text = g_build_filename(root, "t.txt", NULL), *model = g_build_filename(root, "m.model", NULL);
  g_autofree char *big = g_strnfill(8 << 20, 'a');
  g_assert_true(g_file_set_contents(text, big, -1, NULL));
  const char *cases[][2] = {
    { "-m mlp --data synthetic:5000000", "the synthetic data (5000000 and 1024 samples of 784 bytes) needs about" },
    { "-m llama-tiny --data synthetic:2000000", "the synthetic token data (2000000 and 1024 sequences of 128 tokens) "
                                                "needs about" },
    { "-m llama-tiny --data text:%s", "t.txt (8388608 bytes) needs about" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *opts = g_strdup_printf(cases[i][0], text);
    g_autofree char *cmd = g_strdup_printf("TP_MEMORY_LIMIT=20M exec \"$TP\" train %s -w 2 -n 2 -b 8 -k 2 -q", opts);
    TptRun r = tpt_run_shell(cmd);
    g_test_message("%s: status %d, stderr: %s", opts, r.status, r.err);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    g_assert_nonnull(strstr(r.err, cases[i][1]));
    g_assert_nonnull(strstr(r.err, "allowed by TP_MEMORY_LIMIT"));
    tpt_run_clear(&r);
  }
  /* files that split into many small pieces at once (a line of commas, lines of nothing: 48 bytes a
   * piece against 2 MB of text) are refused before they are split (they took 40-60 times their size
   * and aborted in GLib under a limit) */
  g_autofree char *sched = g_build_filename(root, "s.csv", NULL), *cost = g_build_filename(root, "c.cost", NULL);
  g_autofree char *commas = g_strnfill(2 << 20, ','), *blank = g_strnfill(2 << 20, '\n');
  g_autofree char *stext = g_strdup_printf("# timeprest-schedule order=gpipe policy=sync workers=1 micro_batches=1 "
                                           "mini_batches=1\nstage,kind,mini_batch,micro_batch,version,source\n1,F,1,1,0,"
                                           "fixed%s\n", commas);
  g_autofree char *ctext = g_strdup_printf("[stages]\nforward = 1\nbackward = 1\n%s", blank);
  g_assert_true(g_file_set_contents(sched, stext, -1, NULL));
  g_assert_true(g_file_set_contents(cost, ctext, -1, NULL));
  const char *pieces[][2] = { { "simulate -i '%s'", "s.csv (CSV, 2.1 MB) needs about" },
                              { "simulate -w 2 -n 2 -c '%s'", "c.cost needs about" } };
  for (size_t i = 0; i < G_N_ELEMENTS(pieces); i++) {
    g_autofree char *c = g_strdup_printf(pieces[i][0], i ? cost : sched);
    g_autofree char *cmd = g_strdup_printf("TP_MEMORY_LIMIT=50M exec \"$TP\" %s", c);
    TptRun p = tpt_run_shell(cmd);
    g_test_message("%s: status %d, stderr: %s", c, p.status, p.err);
    g_assert_cmpint(p.status, ==, 2);
    g_assert_cmpint(tpt_lines(p.err), ==, 1);
    g_assert_nonnull(strstr(p.err, pieces[i][1]));
    tpt_run_clear(&p);
  }
  g_assert_true(g_file_set_contents(model, "name micro\ntokens 16 256\nembedding 32\nrepeat 2 block heads=2 kv_heads=1 "
                                    "ffn=64 mlp=swiglu norm=rmsnorm positions=rope theta=10000 eps=1e-5\nrmsnorm eps=1e-5\n"
                                    "lm_head\ntoken_ce\n", -1, NULL));
  g_autofree char *json = g_build_filename(root, "r.json", NULL);
  g_autofree char *cmd = g_strdup_printf("exec \"$TP\" train -m '%s' -k 8 -w 1 -n 1 -b 8 --data synthetic --optimizer "
                                         "adamw --lr 1000 -q --format json -o '%s'", model, json);
  TptRun r = tpt_run_shell(cmd);
  g_test_message("status %d, stderr: %s", r.status, r.err);
  g_assert_cmpint(r.status, ==, 1);
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  g_assert_nonnull(strstr(r.err, "the test loss at the end of epoch 1 is NaN"));
  g_assert_false(g_file_test(json, G_FILE_TEST_EXISTS));
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* The memory a step needs, against TP_MEMORY_LIMIT: a schedule's JSON text counts the power of two
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

/* Every report carries the digest of the schedule it ran (schedule_sha256: the sha256 of the
 * schedule's digest record, docs/formats.md), and train's text report says which order and plan ran. */
static void test_schedule_digest(void)
{
  TptRun csv = tpt_run((const char *[]){ "schedule", "-s", "gpipe", "-w", "2", "-n", "2", "-k", "2", "--format", "csv",
                                         NULL });
  g_assert_cmpint(csv.status, ==, 0);
  GError *e = NULL;
  g_autoptr(TpSchedule) ran = tp_schedule_parse(csv.out, strlen(csv.out), "csv", &e);
  g_assert_no_error(e);
  g_autofree char *want = tp_schedule_sha256(ran);
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

/* text with its first `from` replaced by `to`. */
static char *replace_first(const char *text, const char *from, const char *to)
{
  const char *at = strstr(text, from);
  g_assert_nonnull(at);
  return g_strdup_printf("%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
}

/* F&B composites in our schedule files: a dualpipe-v file reports the native schedule's digest, and
 * the same operations without the marks another; a wrong mark is refused by every command that reads
 * the file in one line naming the file, the line and the field, and nothing is written. */
static void test_composite_marks(void)
{
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *path = g_build_filename(root, "dpv.csv", NULL), *out = g_build_filename(root, "out.json", NULL);
  const char *gen[] = { "schedule", "-s", "dualpipe-v", "-w", "2", "-n", "4", "-k", "1", NULL, NULL, NULL };
  TptRun csv = tpt_run((const char *[]){ "schedule", "-s", "dualpipe-v", "-w", "2", "-n", "4", "-k", "1", "--format", "csv",
                                         NULL });
  g_assert_cmpint(csv.status, ==, 0);
  gen[0] = "simulate", gen[9] = "--format", gen[10] = "json";
  TptRun native = tpt_run(gen);
  g_autofree char *want = json_string(native.out, "schedule_sha256");
  g_autofree char *unmarked = replace_first(csv.out, ",fb\n", ",\n"), *wrong = replace_first(csv.out, ",fb\n", ",FB\n");
  const char *texts[] = { csv.out, unmarked, wrong };
  for (int i = 0; i < 3; i++) {
    g_assert_true(g_file_set_contents(path, texts[i], -1, NULL));
    TptRun sim = tpt_run((const char *[]){ "simulate", "-i", path, "--format", "json", NULL });
    if (i < 2) {
      g_autofree char *sha = json_string(sim.out, "schedule_sha256");
      if (i == 0)
        g_assert_cmpstr(sha, ==, want);
      else
        g_assert_cmpstr(sha, !=, want);
      tpt_run_clear(&sim);
      continue;
    }
    int line = 1; /* the marked row's */
    for (const char *p = csv.out; p < strstr(csv.out, ",fb\n"); p++)
      line += *p == '\n';
    g_autofree char *where = g_strdup_printf("%s:%d: bad composite (expected fb or empty): 'FB'", path, line);
    assert_refused(&sim, where);
    TptRun runs[2] = { tpt_run((const char *[]){ "schedule", "-i", path, "--format", "json", "-o", out, NULL }),
                       tpt_run((const char *[]){ "train", "--schedule", path, "--batch", "32", "--data", DATA, "--quiet",
                                                 NULL }) };
    for (int r = 0; r < 2; r++) {
      assert_refused(&runs[r], where);
      tpt_run_clear(&runs[r]);
    }
    g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
    tpt_run_clear(&sim);
  }
  tpt_run_clear(&csv);
  tpt_run_clear(&native);
  /* the brief's case end to end: written as CSV or JSON, simulated from the file, the same report and
   * events as the native schedule's */
  g_autofree char *file = g_build_filename(root, "dpv", NULL), *ev = g_build_filename(root, "ev.csv", NULL),
                  *ev_native = g_build_filename(root, "ev-native.csv", NULL);
  TptRun want_sim = tpt_run((const char *[]){ "simulate", "-s", "dualpipe-v", "-w", "3", "-n", "8", "--csv", ev_native,
                                              NULL });
  g_assert_cmpint(want_sim.status, ==, 0);
  g_autofree char *want_ev = NULL;
  g_assert_true(g_file_get_contents(ev_native, &want_ev, NULL, NULL));
  for (int json = 0; json < 2; json++) {
    TptRun w = tpt_run((const char *[]){ "schedule", "-s", "dualpipe-v", "-w", "3", "-n", "8", "--format",
                                         json ? "json" : "csv", "-o", file, NULL });
    g_assert_cmpint(w.status, ==, 0);
    TptRun sim = tpt_run((const char *[]){ "simulate", "-i", file, "--csv", ev, NULL });
    g_assert_cmpstr(sim.out, ==, want_sim.out);
    g_autofree char *got_ev = NULL;
    g_assert_true(g_file_get_contents(ev, &got_ev, NULL, NULL));
    g_assert_cmpstr(got_ev, ==, want_ev);
    tpt_run_clear(&w);
    tpt_run_clear(&sim);
  }
  tpt_run_clear(&want_sim);
  tpt_rm_tree(root);
}

/* The text report says what the steady state holds as the JSON does (v, chains, the
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

/* A GPU test on a machine without one skips saying so, and fails instead when TP_REQUIRE names
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
#ifdef HAVE_CUDA
    g_assert_nonnull(strstr(out[0], "no GPU (or no driver) here"));
#else
    g_assert_nonnull(strstr(out[0], "no CUDA support"));
#endif
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

/* plot convergence on a train --csv log draws its tenth-of-an-epoch training rows and its
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

/* Timeline labels are drawn only where they fit their box: on a short timeline every operation
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

/* A gzip data file damaged far into its compressed bytes is not said to be damaged "in the
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
  g_test_add_func("/robust-io/numbers", test_numbers);
  g_test_add_func("/robust-io/data-memory", test_data_memory);
  g_test_add_func("/robust-io/schedule-digest", test_schedule_digest);
  g_test_add_func("/robust-io/composite-marks", test_composite_marks);
  g_test_add_func("/robust-io/steady-state-text", test_steady_state_text);
  g_test_add_func("/robust-io/require", test_require);
  g_test_add_func("/robust-io/messages", test_messages);
  g_test_add_func("/robust-io/not-utf8-values", test_not_utf8_values);
  g_test_add_func("/robust-io/convergence-series", test_convergence_series);
  g_test_add_func("/robust-io/timeline-labels", test_timeline_labels);
  g_test_add_func("/robust-io/gzip-messages", test_gzip_messages);
  return g_test_run();
}
