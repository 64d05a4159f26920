/* test-cli.c — the timeprest program as users call it: outputs of schedule, simulate and
 * validate, and bad command-line input, which must exit 2 with one short line. */
#define _XOPEN_SOURCE 700 /* mknod, S_IFCHR */
#include "tp_test.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

static void expect_usage_error(const char *const *args, const char *needle)
{
  TptRun r = tpt_run(args);
  if (r.status != 2 || tpt_lines(r.err) != 1 || !strstr(r.err, needle))
    g_error("%s %s: status %d, stderr '%s' (wanted status 2, one line with '%s')", args[0], args[1] ? args[1] : "",
            r.status, r.err, needle);
  g_assert_cmpuint(strlen(r.err), <, 300);
  g_assert_cmpstr(r.out, ==, "");
  tpt_run_clear(&r);
}

static void test_bad_input(void)
{
#define E(needle, ...) expect_usage_error((const char *const[]){ __VA_ARGS__, NULL }, needle)
  E("-w: expected a whole number from 1 to 1024, got '0'", "schedule", "-w", "0");
  E("-w: expected a whole number", "schedule", "-w", "-3");
  E("-w: expected a whole number", "schedule", "-w", "99999999999");
  E("-w: expected a whole number", "schedule", "-w", "3x");
  E("-n: expected a whole number from 1 to 4096, got '0'", "schedule", "-n", "0");
  E("-n: expected a whole number", "simulate", "-n", "-1");
  E("-k: expected a whole number from 1 to 1000000, got '0'", "schedule", "-k", "0");
  E("-k: expected a whole number", "schedule", "-k", "10000000000");
  E("limit", "schedule", "-w", "1024", "-n", "4096", "-k", "1000");
  E("-s: unknown preset 'zigzag'", "schedule", "-s", "zigzag");
  E("-s: unknown preset", "validate", "-s", "nope");
  E("--format: unknown value 'xml'", "schedule", "--format", "xml");
  E("-w: range '9-3' is reversed", "validate", "-w", "9-3", "-n", "2-4");
  E("-n: range '5-2' is reversed", "validate", "-w", "2-3", "-n", "5-2");
  E("-w: expected a whole number", "validate", "-w", "0-4");
  E("cannot read cost file", "simulate", "--cost", "/nonexistent/x.cost");
  E("unknown command 'frobnicate'", "frobnicate");
  E("Unknown option --bogus", "schedule", "--bogus");
  E("unexpected argument 'extra'", "schedule", "extra");
  E("policy sync needs a flush order", "schedule", "--order", "nf1b", "--policy", "sync");
  E("--order and --policy go together", "schedule", "--order", "nf1b");
  E("order 2bw needs N >= W", "simulate", "-s", "pipedream-2bw", "-w", "4", "-n", "2");
  E("cannot read schedule file", "schedule", "--input", "/nonexistent.csv");
  E("schedule uses a cost model only with --costed-order", "schedule", "--model", "cnn", "--cluster", "A");
  E("--model and --cluster go together", "schedule", "--costed-order", "--model", "cnn");
#undef E
}

static void test_bad_cost_file_cli(void)
{
  g_autofree char *path = g_build_filename(g_get_tmp_dir(), "tp-cli-bad.cost", NULL);
  g_assert_true(g_file_set_contents(path, "[stages]\nforward = 1\nbackward = slow\n", -1, NULL));
  g_autofree char *want = g_strdup_printf("%s:3: [stages] backward", path);
  expect_usage_error((const char *const[]){ "simulate", "-w", "2", "--cost", path, NULL }, want);
  g_unlink(path);
}

static void test_schedule_grid(void)
{
  TptRun r = tpt_run((const char *const[]){ "schedule", "-s", "timeprest", "-w", "3", "-n", "2", "-k", "8", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_true(g_str_has_prefix(r.out, "1A 1B 2A 2B 3A 3B 1 4A 4B 2 5A 5B 3 6A 6B 4 7A 7B"));
  g_assert_cmpint(tpt_lines(r.out), ==, 3);
  tpt_run_clear(&r);
}

/* schedule --format csv > file; schedule --input file --format csv gives the same bytes;
 * a broken file is refused with file:line and leaves --output untouched. */
static void test_schedule_file_round_trip(void)
{
  g_autofree char *path = g_build_filename(g_get_tmp_dir(), "tp-cli-sched.json", NULL);
  g_autofree char *out = g_build_filename(g_get_tmp_dir(), "tp-cli-out.csv", NULL);
  TptRun a = tpt_run((const char *const[]){ "schedule", "-s", "i-timeprest", "-w", "4", "-n", "3", "-k", "9",
                                            "--format", "json", "-o", path, NULL });
  g_assert_cmpint(a.status, ==, 0);
  TptRun b = tpt_run((const char *const[]){ "schedule", "--input", path, "--format", "json", NULL });
  g_assert_cmpint(b.status, ==, 0);
  g_autofree char *want = NULL;
  g_assert_true(g_file_get_contents(path, &want, NULL, NULL));
  g_assert_cmpstr(b.out, ==, want);
  /* break line 12 of the JSON file (an operation) */
  g_auto(GStrv) lines = g_strsplit(want, "\n", -1);
  g_assert_nonnull(strstr(lines[11], "\"version\": "));
  char *v = strstr(lines[11], "\"version\": ");
  v[strlen("\"version\": ")] = '9';
  g_autofree char *bad = g_strjoinv("\n", lines);
  g_assert_true(g_file_set_contents(path, bad, -1, NULL));
  g_assert_true(g_file_set_contents(out, "keep", -1, NULL));
  g_autofree char *where = g_strdup_printf("%s:12: ", path);
  expect_usage_error((const char *const[]){ "schedule", "--input", path, "--format", "csv", "-o", out, NULL }, where);
  g_autofree char *kept = NULL;
  g_assert_true(g_file_get_contents(out, &kept, NULL, NULL));
  g_assert_cmpstr(kept, ==, "keep");
  g_unlink(path);
  g_unlink(out);
  tpt_run_clear(&a);
  tpt_run_clear(&b);
}

static void test_simulate_json(void)
{
  TptRun r = tpt_run((const char *const[]){ "simulate", "-s", "timeprest", "-w", "6", "-n", "2", "-k", "20",
                                            "--format", "json", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_autoptr(JsonParser) p = json_parser_new();
  GError *err = NULL;
  g_assert_true(json_parser_load_from_data(p, r.out, -1, &err));
  g_assert_no_error(err);
  JsonObject *o = json_node_get_object(json_parser_get_root(p));
  const char *keys[] = { "makespan", "bubble_fraction", "throughput", "v_steady", "chains", "multiple_sequences",
                         "messages", "bytes", "stages" };
  for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
    g_assert_true(json_object_has_member(o, keys[i]));
  g_assert_cmpint(json_object_get_int_member(o, "v_steady"), ==, 2); /* ceil(6/3) */
  g_assert_cmpint(json_object_get_int_member(o, "chains"), ==, 2);
  g_assert_true(json_object_get_boolean_member(o, "multiple_sequences"));
  g_assert_cmpint(json_object_get_int_member(o, "messages"), ==, 5 * 3 * 20);
  JsonArray *st = json_object_get_array_member(o, "stages");
  g_assert_cmpuint(json_array_get_length(st), ==, 6);
  const char *skeys[] = { "stage", "busy", "bubble_fraction", "max_live_versions", "peak_activations", "peak_bytes" };
  for (guint s = 0; s < 6; s++) {
    JsonObject *so = json_array_get_object_element(st, s);
    for (guint i = 0; i < G_N_ELEMENTS(skeys); i++)
      g_assert_true(json_object_has_member(so, skeys[i]));
    g_assert_cmpint(json_object_get_int_member(so, "stage"), ==, s + 1);
  }
  tpt_run_clear(&r);
}

static void test_simulate_csv(void)
{
  g_autofree char *path = g_build_filename(g_get_tmp_dir(), "tp-cli-events.csv", NULL);
  TptRun r = tpt_run((const char *const[]){ "simulate", "-s", "gpipe", "-w", "2", "-n", "2", "-k", "1", "--csv", path, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "bubble       0.3333"));
  g_autofree char *csv = NULL;
  g_assert_true(g_file_get_contents(path, &csv, NULL, NULL));
  /* header, 2 stages x (2 F + 2 B + 1 U) operations, 2 activation and 2 gradient transfers */
  g_assert_cmpint(tpt_lines(csv), ==, 1 + 10 + 4);
  g_assert_true(g_str_has_prefix(csv, "stage,kind,mini_batch,micro_batch,start,end,version,latest,staleness,bytes,peer\n"
                                      "1,F,1,1,0,1,0,0,0,,\n1,send-act,1,1,1,1,,,,1,2\n"));
  g_unlink(path);
  tpt_run_clear(&r);
}

static void test_validate_tsv(void)
{
  TptRun r = tpt_run((const char *const[]){ "validate", "-w", "2-8", "-n", "2-4", "--format", "tsv", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_auto(GStrv) lines = g_strsplit(r.out, "\n", -1);
  g_assert_true(g_str_has_prefix(lines[0], "workers\tmicro_batches\tv_sim\tv_eq3\teq2_holds\tmultiple_sequences"));
  g_assert_cmpint(g_strv_length(lines), ==, 1 + 7 * 3 + 1);
  /* W=6, N=2: simulation gives 2, Eq. 3 says 3 */
  gboolean seen = FALSE;
  for (int i = 1; lines[i] && *lines[i]; i++)
    if (g_str_has_prefix(lines[i], "6\t2\t")) {
      g_assert_true(g_str_has_prefix(lines[i], "6\t2\t2\t3\t1\t1\t2\t0\t1\t"));
      seen = TRUE;
    }
  g_assert_true(seen);
  tpt_run_clear(&r);
}

static void test_help(void)
{
  const char *cmds[] = { "schedule", "simulate", "validate", "compare" };
  for (guint i = 0; i < G_N_ELEMENTS(cmds); i++) {
    TptRun r = tpt_run((const char *const[]){ cmds[i], "--help", NULL });
    g_assert_cmpint(r.status, ==, 0);
    g_assert_nonnull(strstr(r.out, "Example: timeprest"));
    tpt_run_clear(&r);
  }
  TptRun r = tpt_run((const char *const[]){ "--help", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "i-timeprest"));
  tpt_run_clear(&r);
}

static void test_compare(void)
{
  TptRun r = tpt_run((const char *const[]){ "compare", "-w", "4", "-n", "2", NULL });
  g_assert_cmpint(r.status, ==, 0);
  for (int i = 0; i < tp_n_presets; i++) {
    g_autofree char *row = g_strdup_printf("\n%s ", tp_presets[i].name);
    g_assert_nonnull(strstr(r.out, row));
  }
  g_assert_nonnull(strstr(r.out, "pipedream-2bw    n/a: order 2bw needs N >= W"));
  TptRun c = tpt_run((const char *const[]){ "compare", "-w", "3", "-n", "4", "--format", "csv", NULL });
  g_assert_cmpint(c.status, ==, 0);
  g_assert_cmpint(tpt_lines(c.out), ==, 1 + tp_n_presets);
  g_assert_true(g_str_has_prefix(c.out, "preset,order,policy,applies,time_per_mini_batch,time_per_epoch,bubble_fraction,"
                                        "throughput,v_steady,chains,multiple_sequences,makespan,peak_bytes_1,"));
  g_assert_nonnull(strstr(c.out, "\ngpipe,gpipe,sync,1,"));
  tpt_run_clear(&r);
  tpt_run_clear(&c);
  expect_usage_error((const char *const[]){ "compare", "-s", "gpipe", NULL }, "compare runs every preset");
}

/* The trace is JSON with one complete event per operation and per transfer. */
static void test_trace(void)
{
  g_autofree char *trace = g_build_filename(g_get_tmp_dir(), "tp-cli-trace.json", NULL);
  g_autofree char *csv = g_build_filename(g_get_tmp_dir(), "tp-cli-trace.csv", NULL);
  g_autofree char *cost = g_build_filename(g_get_tmp_dir(), "tp-cli-trace.cost", NULL);
  g_assert_true(g_file_set_contents(cost, "[stages]\nforward = 0.001\nbackward = 0.002\nactivation_bytes = 1e6\n"
                                          "[links]\nbandwidth = 1e9\n", -1, NULL));
  TptRun r = tpt_run((const char *const[]){ "simulate", "-s", "i-timeprest", "-w", "3", "-n", "3", "-k", "7", "--cost",
                                            cost, "--trace", trace, "--csv", csv, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *events = NULL;
  g_assert_true(g_file_get_contents(csv, &events, NULL, NULL));
  int rows = tpt_lines(events) - 1;
  g_autoptr(JsonParser) p = json_parser_new();
  GError *err = NULL;
  g_assert_true(json_parser_load_from_file(p, trace, &err));
  g_assert_no_error(err);
  JsonArray *ev = json_object_get_array_member(json_node_get_object(json_parser_get_root(p)), "traceEvents");
  int complete = 0, sends = 0, pids_ok = 1;
  for (guint i = 0; i < json_array_get_length(ev); i++) {
    JsonObject *o = json_array_get_object_element(ev, i);
    if (g_strcmp0(json_object_get_string_member(o, "ph"), "X") != 0)
      continue;
    complete++;
    sends += json_object_get_int_member(o, "tid") != 1;
    pids_ok &= json_object_get_int_member(o, "pid") >= 1 && json_object_get_int_member(o, "pid") <= 3;
    JsonObject *args = json_object_get_object_member(o, "args");
    g_assert_true(json_object_has_member(args, "mini_batch") && json_object_has_member(args, "micro_batch") &&
                  json_object_has_member(args, "version"));
  }
  /* 3 stages x (7x3 forwards + 7 backwards + 7 updates); 2 links x 2 directions of messages */
  g_assert_cmpint(rows, ==, 3 * (21 + 7 + 7) + 2 * (21 + 7));
  g_assert_cmpint(complete, ==, rows);
  g_assert_cmpint(sends, ==, 2 * (21 + 7));
  g_assert_true(pids_ok);
  g_unlink(trace);
  g_unlink(csv);
  g_unlink(cost);
  tpt_run_clear(&r);
}

static gboolean have_gnuplot(void)
{
  g_autofree char *gp = g_find_program_in_path("gnuplot");
  return gp != NULL || g_getenv("TP_GNUPLOT") != NULL;
}

static void expect_picture(const char *const *args, const char *path)
{
  TptRun r = tpt_run(args);
  if (r.status != 0)
    g_error("plot failed: %s", r.err);
  g_autofree char *data = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(path, &data, &len, NULL));
  g_assert_cmpuint(len, >, 2000);
  if (g_str_has_suffix(path, ".png"))
    g_assert_cmpmem(data, 8, "\x89PNG\r\n\x1a\n", 8);
  else
    g_assert_nonnull(strstr(data, "<svg"));
  g_unlink(path);
  tpt_run_clear(&r);
}

static void test_plots(void)
{
  if (!have_gnuplot()) {
    g_test_skip("gnuplot is not installed");
    return;
  }
  g_autofree char *dir = g_dir_make_tmp("tp-plots-XXXXXX", NULL);
  g_autofree char *png = g_build_filename(dir, "p.png", NULL), *svg = g_build_filename(dir, "p.svg", NULL);
  g_autofree char *csv = g_build_filename(dir, "sim.csv", NULL);
  const char *src = g_getenv("TP_SRCDIR") ? g_getenv("TP_SRCDIR") : ".";
  g_autofree char *log1 = g_build_filename(src, "tests", "data", "train-timeprest.csv", NULL);
  g_autofree char *log2 = g_build_filename(src, "tests", "data", "train-pipedream.csv", NULL);
  expect_picture((const char *const[]){ "plot", "timeline", "-s", "timeprest", "-w", "3", "-n", "2", "-k", "6", "--versions",
                                        "-o", png, NULL }, png);
  expect_picture((const char *const[]){ "plot", "timeline", "-s", "1f1b", "-w", "3", "-n", "4", "-k", "2", "-o", svg, NULL },
                 svg);
  TptRun r = tpt_run((const char *const[]){ "simulate", "-s", "gpipe", "-w", "2", "-n", "2", "-k", "2", "--csv", csv, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  expect_picture((const char *const[]){ "plot", "timeline", "--events", csv, "--measured", csv, "-o", png, NULL }, png);
  expect_picture((const char *const[]){ "plot", "memory", "-s", "pipedream", "--model", "cnn", "--cluster", "A", "-n", "2",
                                        "-o", png, NULL }, png);
  expect_picture((const char *const[]){ "plot", "memory", "-s", "timeprest", "-w", "3", "-o", svg, NULL }, svg);
  expect_picture((const char *const[]){ "plot", "vmap", "-w", "2-8", "-n", "2-6", "-o", png, NULL }, png);
  expect_picture((const char *const[]){ "plot", "convergence", "-i", log1, "-i", log2, "-o", png, NULL }, png);
  expect_picture((const char *const[]){ "plot", "convergence", "-i", log1, "--x", "time", "--y", "accuracy", "-o", svg,
                                        NULL }, svg);
  /* bad input: no picture, a picture type gnuplot is not asked for, malformed logs and events */
  expect_usage_error((const char *const[]){ "plot", "vmap", NULL }, "-o: give the picture to write");
  expect_usage_error((const char *const[]){ "plot", "vmap", "-o", "x.jpg", NULL }, "must end in .png or .svg");
  expect_usage_error((const char *const[]){ "plot", "sketch", "-o", "x.png", NULL }, "expected a plot kind");
  g_autofree char *bad = g_build_filename(dir, "bad.csv", NULL);
  g_assert_true(g_file_set_contents(bad, "epoch,loss\n1,0.5\n2,lots\n", -1, NULL));
  g_autofree char *want = g_strdup_printf("%s:3: 'lots' is not a number", bad);
  expect_usage_error((const char *const[]){ "plot", "convergence", "-i", bad, "-o", png, NULL }, want);
  g_assert_true(g_file_set_contents(bad, "epoch,accuracy\n1,0.5\n", -1, NULL));
  g_free(want);
  want = g_strdup_printf("%s:1: no column 'loss'", bad);
  expect_usage_error((const char *const[]){ "plot", "convergence", "-i", bad, "-o", png, NULL }, want);
  g_assert_true(g_file_set_contents(bad, "stage,kind,mini_batch,micro_batch,start,end,version,latest,staleness,bytes,peer\n"
                                         "1,F,1,1,0,1,0,0,0,,\n1,X,1,1,0,1,0,0,0,,\n", -1, NULL));
  g_free(want);
  want = g_strdup_printf("%s:3: bad kind", bad);
  expect_usage_error((const char *const[]){ "plot", "timeline", "--events", bad, "-o", png, NULL }, want);
  g_assert_false(g_file_test(png, G_FILE_TEST_EXISTS));
  g_unlink(bad);
  g_unlink(csv);
  g_rmdir(dir);
}

static void test_model_cli(void)
{
  /* --costed-order: the order fixed on the cost model is valid and differs from the unit-slot one */
  TptRun u = tpt_run((const char *const[]){ "schedule", "-s", "timeprest", "-n", "4", "-k", "10", "--format", "csv", NULL });
  TptRun k = tpt_run((const char *const[]){ "schedule", "-s", "timeprest", "-n", "4", "-k", "10", "--format", "csv",
                                            "--model", "vgg16-tinyimagenet", "--cluster", "C", "--costed-order", NULL });
  g_assert_cmpint(u.status, ==, 0);
  g_assert_cmpint(k.status, ==, 0);
  g_assert_cmpstr(u.out, !=, k.out);
  g_assert_cmpint(tpt_lines(u.out), ==, tpt_lines(k.out));
  tpt_run_clear(&u);
  tpt_run_clear(&k);
  TptRun r = tpt_run((const char *const[]){ "simulate", "-s", "timeprest", "--model", "vgg16-tinyimagenet", "--cluster", "C",
                                            "-n", "4", "--batch", "128", "--format", "json", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\"device_name\": \"RTX 2080\""));
  g_assert_nonnull(strstr(r.out, "\"workers\": 4")); /* W taken from cluster C */
  tpt_run_clear(&r);
  /* a stage that does not fit its device is reported, and --fit-memory avoids it */
  TptRun w = tpt_run((const char *const[]){ "simulate", "-s", "pipedream", "--model", "vgg16-tinyimagenet", "--cluster", "A",
                                            "-n", "2", "--batch", "2048", NULL });
  g_assert_cmpint(w.status, ==, 0);
  g_assert_nonnull(strstr(w.err, "warning: stage 1 on Quadro RTX 6000 needs"));
  TptRun f = tpt_run((const char *const[]){ "simulate", "-s", "pipedream", "--model", "vgg16-tinyimagenet", "--cluster", "A",
                                            "-n", "2", "--batch", "2048", "--fit-memory", NULL });
  g_assert_cmpint(f.status, ==, 0);
  g_assert_cmpstr(f.err, ==, "");
  tpt_run_clear(&w);
  tpt_run_clear(&f);
#define E(needle, ...) expect_usage_error((const char *const[]){ __VA_ARGS__, NULL }, needle)
  E("--model: no model named 'gpt5'", "simulate", "--model", "gpt5", "--cluster", "C");
  E("--cluster: no cluster named 'Z'", "simulate", "--model", "cnn", "--cluster", "Z");
  E("--model and --cluster go together", "simulate", "--model", "cnn");
  E("cluster C has 4 workers, the pipeline 3 stages", "simulate", "--model", "cnn", "--cluster", "C", "-w", "3");
  E("--batch: 10 samples do not split into N=4", "simulate", "--model", "cnn", "--cluster", "C", "--batch", "10");
  E("--split: expected 4 layer counts", "simulate", "--model", "cnn", "--cluster", "C", "--split", "5,6");
  E("--split: the stages get 12 layers, model cnn has 11", "simulate", "--model", "cnn", "--cluster", "C", "--split", "3,3,3,3");
  E("--batch, --split and --fit-memory need --model", "simulate", "--batch", "64");
#undef E
  /* a bad cluster file and a bad device file behind a cluster */
  g_autofree char *pdir = g_dir_make_tmp("tp-cli-cluster-XXXXXX", NULL);
  g_autofree char *cdir = g_build_filename(pdir, "clusters", NULL);
  g_autofree char *ddir = g_build_filename(pdir, "devices", NULL);
  g_mkdir_with_parents(cdir, 0700);
  g_autofree char *cl = g_build_filename(cdir, "x.cluster", NULL);
  g_assert_true(g_file_set_contents(cl, "[cluster]\ndevices = rtx-2080\nlink_bandwidth = -1\n", -1, NULL));
  g_autofree char *cwant = g_strdup_printf("%s:3: [cluster] link_bandwidth: expected a number", cl);
  expect_usage_error((const char *const[]){ "simulate", "--model", "cnn", "--cluster", cl, "-w", "1", NULL }, cwant);
  g_assert_true(g_file_set_contents(cl, "[cluster]\ndevices = tp-test-gpu\nlink_bandwidth = 1e9\n", -1, NULL));
  g_autofree char *dev = g_build_filename(ddir, "tp-test-gpu.device", NULL);
  g_mkdir_with_parents(ddir, 0700);
  g_assert_true(g_file_set_contents(dev, "[device]\nflops = 1e12\nmemory = 8e9\n", -1, NULL));
  expect_usage_error((const char *const[]){ "simulate", "--model", "cnn", "--cluster", cl, "-w", "1", NULL },
                     "[device]: missing key 'memory_bandwidth'");
  g_unlink(dev);
  g_unlink(cl);
  g_rmdir(cdir);
  g_rmdir(ddir);
  g_rmdir(pdir);
  g_autofree char *path = g_build_filename(g_get_tmp_dir(), "tp-cli-bad.model", NULL);
  g_assert_true(g_file_set_contents(path, "input 3 32 32\nconv 16 3 pad=1\nrelu\nlinear 10\n", -1, NULL));
  g_autofree char *want = g_strdup_printf("%s:4: linear needs a flat input", path);
  expect_usage_error((const char *const[]){ "simulate", "--model", path, "--cluster", "A", NULL }, want);
  g_unlink(path);
}

/* ---- outputs: devices, links, modes, failures, signals --------------------------------------- */

static int compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir, sorted, joined by commas. */
static char *dir_listing(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  g_assert_nonnull(d);
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  const char *name;
  while ((name = g_dir_read_name(d)))
    g_ptr_array_add(names, g_strdup(name));
  g_dir_close(d);
  g_ptr_array_sort(names, compare_names);
  g_ptr_array_add(names, NULL);
  char *joined = g_strjoinv(",", (char **)names->pdata);
  g_ptr_array_free(names, TRUE);
  return joined;
}

static void remove_dir(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name(d))) {
    g_autofree char *f = g_build_filename(dir, name, NULL);
    g_unlink(f);
  }
  if (d)
    g_dir_close(d);
  g_assert_cmpint(g_rmdir(dir), ==, 0);
}

static char *read_text(const char *path)
{
  char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  return text;
}

/* -o on a character device writes into it and leaves the node (a private null device, not /dev/null). */
static void test_output_device(void)
{
  g_autofree char *dir = g_dir_make_tmp("tp-out-XXXXXX", NULL);
  g_autofree char *dev = g_build_filename(dir, "null", NULL);
  if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) != 0) {
    g_test_skip("cannot make a device node (not root)");
    remove_dir(dir);
    return;
  }
  TptRun r = tpt_run((const char *const[]){ "simulate", "-w", "3", "-n", "2", "--csv", dev, "-o", dev, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpstr(r.out, ==, "");
  struct stat st;
  g_assert_cmpint(lstat(dev, &st), ==, 0);
  g_assert_true(S_ISCHR(st.st_mode));
  g_assert_cmpint(major(st.st_rdev), ==, 1);
  g_autofree char *names = dir_listing(dir);
  g_assert_cmpstr(names, ==, "null");
  tpt_run_clear(&r);
  remove_dir(dir);
}

/* -o through a symbolic link replaces the file it names and keeps the link; a dangling link creates
 * its file; an existing file keeps its mode; a new file gets 0666 less the umask. */
static void test_output_links_and_modes(void)
{
  g_autofree char *dir = g_dir_make_tmp("tp-out-XXXXXX", NULL);
  g_autofree char *file = g_build_filename(dir, "sched.txt", NULL);
  g_autofree char *link = g_build_filename(dir, "link", NULL);
  g_autofree char *dangling = g_build_filename(dir, "dangling", NULL);
  g_autofree char *made = g_build_filename(dir, "made.txt", NULL);
  g_autofree char *fresh = g_build_filename(dir, "fresh.txt", NULL);
  g_assert_true(g_file_set_contents(file, "old\n", -1, NULL));
  g_assert_cmpint(g_chmod(file, 0640), ==, 0);
  g_assert_cmpint(symlink("sched.txt", link), ==, 0);
  g_assert_cmpint(symlink("made.txt", dangling), ==, 0);
  TptRun want = tpt_run((const char *const[]){ "schedule", "-w", "3", "-n", "2", NULL });
  g_assert_cmpint(want.status, ==, 0);
  const char *targets[] = { link, dangling, fresh };
  for (guint i = 0; i < G_N_ELEMENTS(targets); i++) {
    TptRun r = tpt_run((const char *const[]){ "schedule", "-w", "3", "-n", "2", "-o", targets[i], NULL });
    g_assert_cmpint(r.status, ==, 0);
    tpt_run_clear(&r);
  }
  struct stat st;
  g_assert_cmpint(lstat(link, &st), ==, 0);
  g_assert_true(S_ISLNK(st.st_mode));
  g_assert_cmpint(lstat(dangling, &st), ==, 0);
  g_assert_true(S_ISLNK(st.st_mode));
  g_assert_cmpint(stat(file, &st), ==, 0);
  g_assert_cmpint(st.st_mode & 07777, ==, 0640);
  mode_t mask = umask(0);
  umask(mask);
  g_assert_cmpint(stat(fresh, &st), ==, 0);
  g_assert_cmpint(st.st_mode & 07777, ==, 0666 & ~mask);
  const char *written[] = { file, made, fresh };
  for (guint i = 0; i < G_N_ELEMENTS(written); i++) {
    g_autofree char *text = read_text(written[i]);
    g_assert_cmpstr(text, ==, want.out);
  }
  g_autofree char *names = dir_listing(dir);
  g_assert_cmpstr(names, ==, "dangling,fresh.txt,link,made.txt,sched.txt");
  tpt_run_clear(&want);
  remove_dir(dir);
}

/* A write that fails is a runtime failure (exit 1, one line naming the user's file), and the
 * command's other outputs are not written either: existing ones keep their bytes, no temporaries. */
static void test_output_all_or_nothing(void)
{
  g_autofree char *dir = g_dir_make_tmp("tp-out-XXXXXX", NULL);
  g_autofree char *csv = g_build_filename(dir, "events.csv", NULL);
  g_autofree char *trace = g_build_filename(dir, "trace.json", NULL);
  g_autofree char *missing = g_build_filename(dir, "no-such-dir", "report.json", NULL);
  g_assert_true(g_file_set_contents(csv, "keep\n", -1, NULL));
  const char *reports[] = { "/dev/full", missing, dir };
  for (guint i = 0; i < G_N_ELEMENTS(reports); i++) {
    if (i == 0 && !g_file_test("/dev/full", G_FILE_TEST_EXISTS))
      continue;
    TptRun r = tpt_run((const char *const[]){ "simulate", "-w", "3", "-n", "2", "--csv", csv, "--trace", trace, "-o",
                                              reports[i], "--format", "json", NULL });
    g_autofree char *want = g_strdup_printf("cannot write %s: ", reports[i]);
    if (r.status != 1 || tpt_lines(r.err) != 1 || !strstr(r.err, want))
      g_error("-o %s: status %d, stderr '%s' (wanted status 1 and '%s')", reports[i], r.status, r.err, want);
    g_assert_cmpstr(r.out, ==, "");
    g_autofree char *names = dir_listing(dir);
    g_assert_cmpstr(names, ==, "events.csv");
    g_autofree char *kept = read_text(csv);
    g_assert_cmpstr(kept, ==, "keep\n");
    tpt_run_clear(&r);
  }
  /* a failing standard output takes the files with it too */
  if (g_file_test("/dev/full", G_FILE_TEST_EXISTS)) {
    const char *bin = g_getenv("TP_BIN") ? g_getenv("TP_BIN") : "./timeprest";
    g_autofree char *cmd = g_strdup_printf("sh -c \"'%s' simulate -w 3 -n 2 --trace '%s' > /dev/full\"", bin, trace);
    int wait = 0;
    g_autofree char *out = NULL, *errs = NULL;
    g_assert_true(g_spawn_command_line_sync(cmd, &out, &errs, &wait, NULL));
    g_assert_true(WIFEXITED(wait) && WEXITSTATUS(wait) == 1);
    g_assert_nonnull(strstr(errs, "cannot write to standard output"));
    g_autofree char *names = dir_listing(dir);
    g_assert_cmpstr(names, ==, "events.csv");
  }
  remove_dir(dir);
}

static void default_signals(gpointer data)
{
  (void)data;
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
}

/* A signal while outputs are staged removes the temporaries and ends the program by that signal.
 * The report goes to a FIFO nobody reads, so the program waits there with both files staged. */
static void test_output_signal(void)
{
  const int sigs[] = { SIGTERM, SIGINT };
  for (guint i = 0; i < G_N_ELEMENTS(sigs); i++) {
    g_autofree char *dir = g_dir_make_tmp("tp-out-XXXXXX", NULL);
    g_autofree char *fifo = g_build_filename(dir, "report", NULL);
    g_autofree char *csv = g_build_filename(dir, "events.csv", NULL);
    g_autofree char *trace = g_build_filename(dir, "trace.json", NULL);
    g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
    const char *bin = g_getenv("TP_BIN") ? g_getenv("TP_BIN") : "./timeprest";
    const char *argv[] = { bin, "simulate", "-w", "4", "-n", "4", "-k", "200", "--csv", csv, "--trace", trace,
                           "-o", fifo, NULL };
    GPid pid;
    GError *e = NULL;
    g_assert_true(g_spawn_async(NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL |
                                G_SPAWN_STDERR_TO_DEV_NULL, default_signals, NULL, &pid, &e));
    g_assert_no_error(e);
    int entries = 0;
    for (int tries = 0; tries < 3000 && entries < 3; tries++) { /* both temporaries beside the FIFO: 30 s at most */
      g_usleep(10000);
      g_autofree char *names = dir_listing(dir);
      entries = 1;
      for (const char *c = names; *c; c++)
        entries += *c == ',';
    }
    g_autofree char *staged = dir_listing(dir);
    g_assert_true(g_str_has_prefix(staged, "events.csv.") && strstr(staged, ",trace.json."));
    kill(pid, entries == 3 ? sigs[i] : SIGKILL);
    int wait = 0;
    g_assert_cmpint(waitpid(pid, &wait, 0), ==, pid);
    g_spawn_close_pid(pid);
    g_assert_cmpint(entries, ==, 3);
    g_assert_true(WIFSIGNALED(wait));
    g_assert_cmpint(WTERMSIG(wait), ==, sigs[i]);
    g_autofree char *names = dir_listing(dir);
    g_assert_cmpstr(names, ==, "report");
    remove_dir(dir);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cli/bad-input", test_bad_input);
  g_test_add_func("/cli/bad-cost-file", test_bad_cost_file_cli);
  g_test_add_func("/cli/schedule-grid", test_schedule_grid);
  g_test_add_func("/cli/schedule-file-round-trip", test_schedule_file_round_trip);
  g_test_add_func("/cli/simulate-json", test_simulate_json);
  g_test_add_func("/cli/simulate-csv", test_simulate_csv);
  g_test_add_func("/cli/validate-tsv", test_validate_tsv);
  g_test_add_func("/cli/help", test_help);
  g_test_add_func("/cli/compare", test_compare);
  g_test_add_func("/cli/trace", test_trace);
  g_test_add_func("/cli/plots", test_plots);
  g_test_add_func("/cli/model", test_model_cli);
  g_test_add_func("/cli/output/device", test_output_device);
  g_test_add_func("/cli/output/links-and-modes", test_output_links_and_modes);
  g_test_add_func("/cli/output/all-or-nothing", test_output_all_or_nothing);
  g_test_add_func("/cli/output/signal", test_output_signal);
  return g_test_run();
}
