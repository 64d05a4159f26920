/* test-cli-plots.c — the pictures and traces users draw with the program: plot's kinds as PNG and
 * SVG (skipped without gnuplot), refused plots writing nothing, and the Chrome trace's events. */
#include "tp_test.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

/* The trace is JSON with one complete event per operation and per transfer. */
static void test_trace(void)
{
  g_autofree char *trace = tpt_tmp_path("tp-cli-trace.json");
  g_autofree char *csv = tpt_tmp_path("tp-cli-trace.csv");
  g_autofree char *cost = tpt_tmp_path("tp-cli-trace.cost");
  g_assert_true(g_file_set_contents(cost, "[stages]\nforward = 0.001\nbackward = 0.002\nactivation_bytes = 1e6\n"
                                          "[links]\nbandwidth = 1e9\n", -1, NULL));
  TptRun r = tpt_run((const char *const[]){ "simulate", "-s", "i-timeprest", "-w", "3", "-n", "3", "-k", "7", "--cost",
                                            cost, "--trace", trace, "--csv", csv, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *events = NULL;
  g_assert_true(g_file_get_contents(csv, &events, NULL, NULL));
  int rows = tpt_lines(events) - 2; /* the comment line and the header */
  g_autoptr(JsonParser) p = json_parser_new();
  GError *err = NULL;
  g_assert_true(json_parser_load_from_file(p, trace, &err));
  g_assert_no_error(err);
  JsonObject *other = json_object_get_object_member(json_node_get_object(json_parser_get_root(p)), "otherData");
  g_assert_cmpstr(json_object_get_string_member(other, "order_fixed_on"), ==, "costs"); /* a cost file: the default */
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
  tpt_tmp_remove(trace);
  tpt_tmp_remove(csv);
  tpt_tmp_remove(cost);
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
  /* a title is drawn as given: gnuplot's markup (_ ^ {/Symbol} @ and backslashes) not interpreted */
  const char *title = "ev_run_1.csv x^2 C:\\dir\\f {/Symbol a} @&";
  r = tpt_run((const char *const[]){ "plot", "timeline", "-w", "2", "-n", "2", "-k", "2", "--title", title, "-o", svg, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(svg, &text, NULL, NULL));
  g_assert_nonnull(strstr(text, "ev_run_1.csv x^2 C:\\dir\\f {/Symbol a} @&amp;"));
  g_unlink(svg);
  /* bad input: no picture, a picture type gnuplot is not asked for, malformed logs and events */
  tpt_expect_cli_refused((const char *const[]){ "plot", "vmap", NULL }, "-o: give the picture to write");
  tpt_expect_cli_refused((const char *const[]){ "plot", "timeline", "--labels", "--no-labels", "-o", png, NULL },
                         "--labels and --no-labels: give one");
  tpt_expect_cli_refused((const char *const[]){ "plot", "vmap", "-o", "x.jpg", NULL }, "must end in .png or .svg");
  tpt_expect_cli_refused((const char *const[]){ "plot", "sketch", "-o", "x.png", NULL }, "expected a plot kind");
  g_autofree char *bad = g_build_filename(dir, "bad.csv", NULL);
  g_assert_true(g_file_set_contents(bad, "epoch,loss\n1,0.5\n2,lots\n", -1, NULL));
  g_autofree char *want = g_strdup_printf("%s:3: 'lots' is not a finite number", bad);
  tpt_expect_cli_refused((const char *const[]){ "plot", "convergence", "-i", bad, "-o", png, NULL }, want);
  g_assert_true(g_file_set_contents(bad, "epoch,accuracy\n1,0.5\n", -1, NULL));
  g_free(want);
  want = g_strdup_printf("%s:1: no column 'loss'", bad);
  tpt_expect_cli_refused((const char *const[]){ "plot", "convergence", "-i", bad, "-o", png, NULL }, want);
  g_assert_true(g_file_set_contents(bad, "stage,kind,mini_batch,micro_batch,start,end,version,latest,staleness,bytes,peer\n"
                                         "1,F,1,1,0,1,0,0,0,,\n1,X,1,1,0,1,0,0,0,,\n", -1, NULL));
  g_free(want);
  want = g_strdup_printf("%s:3: bad kind", bad);
  tpt_expect_cli_refused((const char *const[]){ "plot", "timeline", "--events", bad, "-o", png, NULL }, want);
  g_assert_false(g_file_test(png, G_FILE_TEST_EXISTS));
  g_unlink(bad);
  g_unlink(csv);
  g_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cli/trace", test_trace);
  g_test_add_func("/cli/plots", test_plots);
  return g_test_run();
}
