/* test-hostile.c — what a hostile review of the planner, profiles, schedules and presets found,
 * each kept from coming back: bad flags that crashed or passed (now exit 2 and one line naming
 * what), contradictions refused, and words and formulas that said what was not so. */
#include "config.h"
#include "tp_test.h"

#include <math.h>
#include <stdlib.h>

/* Every one of these is refused: exit 2, one line, naming what. */
static void test_refused(void)
{
  struct { const char *args[16]; const char *want; } cases[] = {
    { { "profile", "-m", "mlp", "--micro-batch-sizes", "", NULL }, "--micro-batch-sizes: empty" }, /* was SIGSEGV */
    { { "profile", "-m", "mlp", "--micro-batch-sizes", "8 ,16", NULL }, "got '8 '" }, /* blanks: as every number */
    { { "profile", "-m", "mlp", "--micro-batch-sizes", " 8", NULL }, "got ' 8'" },
    { { "schedule", "--profile", "/nonexistent", NULL }, "--profile: give the model" },           /* was exit 0 */
    { { "schedule", "--batch", "abc", NULL }, "need --model" },
    { { "schedule", "--split", "abc", NULL }, "need --model" },
    { { "schedule", "--fit-memory", NULL }, "need --model" },
    { { "schedule", "-m", "mlp", "--cluster", "A", "--batch", "abc", NULL }, "--batch" },
    { { "compare", "--chunks", "abc", NULL }, "--chunks" },                                      /* was an n/a row */
    { { "compare", "--chunks", "", NULL }, "--chunks" },
    { { "compare", "--chunks", "-5", NULL }, "--chunks" },
    { { "simulate", "-s", "zb-h1", "--recompute", NULL }, "a split backward is not recomputed" }, /* was simulated */
    { { "compare", "-s", "gpipe", "--recompute", NULL }, "compare runs every preset" },
    { { "plan", "-m", "mlp", "--cluster", "A", "-s", "zb-h1,zb-h2", "--recompute", "yes", NULL },
      "every preset asked for splits its backwards" },                                           /* said: no W and N */
    { { "simulate", "-s", "zb-v", "-w", "513", NULL }, "-w 513: 513 workers times 2 chunks" },  /* blamed --chunks 2 */
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++)
    tpt_expect_cli_refused(cases[i].args, cases[i].want);
}

/* compare --recompute: the rows of split-backward presets say why they are not run. */
static void test_compare_recompute(void)
{
  TptRun r = tpt_run((const char *[]){ "compare", "--recompute", NULL });
  g_assert_cmpint(r.status, ==, 0);
  const char *row = strstr(r.out, "\nzb-h1 ");
  g_assert_nonnull(row);
  g_autofree char *cell = g_strndup(row + 7, 48);
  g_assert_true(g_str_has_prefix(g_strstrip(cell), "n/a: --recompute: preset zb-h1 splits"));
  tpt_run_clear(&r);
}

/* A schedule file that says recompute=false is not recomputed behind its back. */
static void test_recompute_false(void)
{
  g_autofree char *path = tpt_tmp_path("g.csv");
  g_autofree char *text = NULL;
  tpt_schedule_csv("gpipe", "2", "2", "2", path, &text);
  char *nl = strchr(text, '\n');
  g_autofree char *edited = g_strdup_printf("%.*s recompute=false%s", (int)(nl - text), text, nl);
  g_assert_true(g_file_set_contents(path, edited, -1, NULL));
  tpt_expect_cli_refused((const char *[]){ "simulate", "-i", path, "--recompute", NULL }, "says recompute=false");
  tpt_expect_cli_refused((const char *[]){ "train", "-w", "2", "--schedule", path, "--recompute", "--data", "synthetic",
                                           NULL }, "says recompute=false");
  TptRun r = tpt_run((const char *[]){ "simulate", "-i", path, NULL }); /* and read as it says */
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "recompute    false"));
  tpt_run_clear(&r);
  tpt_tmp_remove(path);
}

/* Profile times a simulator cannot add up (denormals gave inf samples/s) are refused naming the key,
 * as cost files refuse times below 1e-12. */
static void test_profile_denormal(void)
{
  g_autofree char *path = tpt_tmp_path("m.profile");
  TptRun r = tpt_run((const char *[]){ "profile", "-m", "mlp", "--micro-batch-sizes", "2", "-r", "1", "-o", path, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.err, ", 1 repetition;")); /* not "1 repetitions" */
  tpt_run_clear(&r);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  char *f = strstr(text, "\nforward=");
  g_assert_nonnull(f);
  g_autofree char *edited = g_strdup_printf("%.*s\nforward=1e-320%s", (int)(f - text), text, strchr(f + 1, '\n'));
  g_assert_true(g_file_set_contents(path, edited, -1, NULL));
  tpt_expect_cli_refused((const char *[]){ "simulate", "-m", "mlp", "--profile", path, "-w", "2", "-n", "2", "-b", "4",
                                           NULL }, "forward: a time of");
  tpt_tmp_remove(path);
}

/* A profile of another model with the same layer kinds is refused (it passed, with the other
 * model's times and parameters). */
static void test_profile_identity(void)
{
  g_autofree char *path = tpt_tmp_path("mlp.profile"), *wide = tpt_tmp_path("wide.model");
  TptRun r = tpt_run((const char *[]){ "profile", "-m", "mlp", "--micro-batch-sizes", "2", "-r", "1", "-o", path, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  g_assert_true(g_file_set_contents(wide, "name mlp\ninput 1 28 28\nflatten\nlinear 256\nrelu\nlinear 4096\nrelu\n"
                                          "linear 10\nsoftmax_ce\n", -1, NULL));
  tpt_expect_cli_refused((const char *[]){ "simulate", "-m", wide, "--profile", path, "-w", "2", "-n", "2", "-b", "4",
                                           NULL }, "layer 4 (linear): weight bytes 131584 in the profile, 4210688");
  r = tpt_run((const char *[]){ "simulate", "-m", "mlp", "--profile", path, "-w", "2", "-n", "2", "-b", "4", NULL });
  g_assert_cmpint(r.status, ==, 0); /* its own model */
  tpt_run_clear(&r);
  /* a byte count off by a fraction: the message shows the two numbers that differ (it showed two 803840s) */
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  char *at = strstr(text, "weight_bytes=803840\n");
  g_assert_nonnull(at);
  g_autoptr(GString) edited = g_string_new_len(text, at - text);
  g_string_append_printf(edited, "weight_bytes=803840.5\n%s", at + strlen("weight_bytes=803840\n"));
  g_assert_true(g_file_set_contents(path, edited->str, -1, NULL));
  tpt_expect_cli_refused((const char *[]){ "simulate", "-m", "mlp", "--profile", path, "-w", "2", "-n", "2", "-b", "4",
                                           NULL }, "weight bytes 803840.5 in the profile, 803840 in model mlp");
  tpt_tmp_remove(path), tpt_tmp_remove(wide);
}

/* A plan can be checked: what plan ranks first at more stages than the cluster's devices, simulate
 * runs with the same split on the same devices (it refused: "use -w 2") and predicts the same time. */
static void test_plan_checkable(void)
{
  TptRun r = tpt_run((const char *[]){ "plan", "-m", "mlp", "--cluster", "A", "-w", "3-4", "-s", "1f1b,timeprest", "-f",
                                       "json", "--show", "1", NULL });
  g_assert_cmpint(r.status, ==, 0);
  const char *first = strstr(r.out, "\"plans\": [");
  g_assert_nonnull(first);
  g_autofree char *preset = tpt_json_value(first, "preset"), *w = tpt_json_value(first, "workers");
  g_autofree char *n = tpt_json_value(first, "micro_batches"), *split = tpt_json_value(first, "split");
  g_autofree char *t = tpt_json_value(strstr(first, "\"predicted\""), "time_per_mini_batch");
  g_auto(GStrv) parts = g_strsplit(split, ", ", -1); /* "4, 1, 1, 1" → "4,1,1,1" */
  g_autofree char *counts = g_strjoinv(",", parts);
  g_assert_cmpint(atoi(w), >, 2);
  TptRun sim = tpt_run((const char *[]){ "simulate", "-m", "mlp", "--cluster", "A", "-s", preset, "-w", w, "-n", n,
                                         "--split", counts, "-b", "128", "-f", "json", NULL });
  if (sim.status != 0)
    g_printerr("%s", sim.err);
  g_assert_cmpint(sim.status, ==, 0);
  g_autofree char *ts = tpt_json_value(sim.out, "time_per_mini_batch");
  g_assert_cmpstr(ts, ==, t);
  tpt_run_clear(&sim);
  tpt_run_clear(&r);
}

/* Words: a --split is not "balancing FLOPs"; a one-layer stage is not "(flatten .. flatten)"; zero
 * bytes are not "0k"; a zb-v timeline of 2 workers is not titled W=4; plan searches zb-h1 and zb-h2
 * by default and its help says so. */
static void test_words(void)
{
  TptRun r = tpt_run((const char *[]){ "train", "--split", "6,1", "-w", "2", "-k", "1", "--data", "synthetic:64:16",
                                       "--batch", "8", "--profile-reps", "1", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "layers 1-6 7-7 (split as --split gave it)"));
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "simulate", "-m", "mlp", "--cluster", "A", "-w", "2", "--split", "1,6", NULL });
  g_assert_nonnull(strstr(r.out, "stage 1    layer 1 (flatten), "));
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "compare", "-m", "mlp", "--cluster", "A", "-w", "2", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_null(strstr(r.out, " 0k"));
  g_assert_nonnull(strstr(r.out, " 5k/1"));
  tpt_run_clear(&r);
  g_autofree char *svg = tpt_tmp_path("zbv.svg");
  r = tpt_run((const char *[]){ "plot", "timeline", "-s", "zb-v", "-w", "2", "-o", svg, NULL });
  if (r.status == 0) { /* gnuplot draws it */
    g_autofree char *pic = NULL;
    g_assert_true(g_file_get_contents(svg, &pic, NULL, NULL));
    g_assert_nonnull(strstr(pic, "W=2 x V=2 chunks"));
    g_assert_null(strstr(pic, "W=4"));
  }
  tpt_run_clear(&r);
  tpt_tmp_remove(svg);
  r = tpt_run((const char *[]){ "plan", "--help", NULL });
  g_assert_nonnull(strstr(r.out, "zb-h1 and zb-h2 among them"));
  tpt_run_clear(&r);
}

/* The docs say what the program does: plan's "nothing fits" line is the program's, word for word;
 * ZB-H1's first mini-batch takes 3N + max(W − 1, 2W − 1 − N) slots (W − 1 only once N ≥ W). */
static void test_docs_agree(void)
{
  TptRun r = tpt_run((const char *[]){ "plan", "--model", "vgg16-cifar100", "--cluster", "C", "--batch", "64", "-w",
                                       "1-3", "-n", "1-4", "--memory-limit", "1M", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_autofree char *doc = NULL, *zb = NULL;
  g_assert_true(g_file_get_contents(TP_SRCDIR "/docs/plan.md", &doc, NULL, NULL));
  g_assert_true(g_file_get_contents(TP_SRCDIR "/docs/zero-bubble.md", &zb, NULL, NULL));
  g_autofree char *said = g_strndup(r.err, strcspn(r.err, "\n"));
  g_autofree char *flat = g_strdup(doc); /* the docs wrap the line: compare without the wraps */
  g_strdelimit(flat, "\n", ' ');
  while (strstr(flat, "  "))
    memmove(strstr(flat, "  "), strstr(flat, "  ") + 1, strlen(strstr(flat, "  ")));
  g_assert_nonnull(strstr(flat, said));
  tpt_run_clear(&r);
  g_assert_nonnull(strstr(zb, "| `zb-h1` | max(W−1, 2W−1−N): W−1 once N ≥ W |"));
  for (int W = 2; W <= 5; W++)
    for (int N = 1; N <= 2 * W; N++) {
      g_autofree char *w = g_strdup_printf("%d", W), *n = g_strdup_printf("%d", N);
      r = tpt_run((const char *[]){ "simulate", "-s", "zb-h1", "-w", w, "-n", n, "-k", "1", "-f", "json", NULL });
      const char *m = strstr(r.out, "\"makespan\": ");
      g_assert_nonnull(m);
      g_assert_cmpfloat(g_ascii_strtod(m + 12, NULL), ==, 3 * N + MAX(W - 1, 2 * W - 1 - N));
      tpt_run_clear(&r);
    }
}

/* PyTorch's CSV: a composite overlaps exactly two computations (an empty one read as idle, a
 * one-part one passed); CR-only line ends are named (they read as one rank, then a deadlock). */
static void test_torch_csv(void)
{
  tpt_expect_refused("0F0,()OVERLAP_F_B\n", "OVERLAP_F_B overlaps two computations");
  tpt_expect_refused("0F0,(0F1)OVERLAP_F_B,0B1,0B0\n", "OVERLAP_F_B overlaps two computations");
  tpt_expect_refused("0F0,0B0\r1F0,1B0\r", "a line ends in a carriage return alone");
  g_autoptr(TpSchedule) crlf = tpt_parse("0F0,0B0\r\n", NULL); /* CR LF is a line end */
  g_assert_nonnull(crlf);
}

/* validate and plot vmap sweep interleaved-1f1b over every N: the cells whose N is not a multiple of
 * W are n/a (compare shows them so), not the end of the sweep; a sweep with no such cell is refused. */
static void test_sweep_na(void)
{
  TptRun r = tpt_run((const char *[]){ "validate", "-s", "interleaved-1f1b", "-w", "2-3", "-n", "1-6", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "cells 5   Eq. 2 holds in 5"));
  g_assert_nonnull(strstr(r.out, "n/a   7 cells whose N the order does not take"));
  g_assert_nonnull(strstr(r.out, "      2 n/a    1  n/a    1  n/a    1 \n"));
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "validate", "-s", "interleaved-1f1b", "-w", "2-3", "-n", "1-6", "-f", "tsv", NULL });
  g_assert_cmpint(tpt_lines(r.out), ==, 1 + 5);
  tpt_run_clear(&r);
  tpt_expect_cli_refused((const char *[]){ "validate", "-s", "interleaved-1f1b", "-w", "3", "-n", "1-2", NULL },
                         "no cell of the sweep runs");
  g_autofree char *png = tpt_tmp_path("v.png");
  r = tpt_run((const char *[]){ "plot", "vmap", "-s", "interleaved-1f1b", "-w", "2-3", "-n", "1-6", "-o", png, NULL });
  g_assert_true(r.status == 0 || strstr(r.err, "gnuplot")); /* drawn where gnuplot is */
  tpt_run_clear(&r);
  tpt_tmp_remove(png);
}

/* The chunked orders' default K reaches a steady state: K counts their W·V stages (at 3W + 2 of the
 * workers there was none, and the "steady" columns printed the whole run's values). */
static void test_chunked_steady(void)
{
  const char *orders[] = { "interleaved-1f1b", "zb-v" };
  for (guint i = 0; i < G_N_ELEMENTS(orders); i++) {
    TptRun r = tpt_run((const char *[]){ "simulate", "-s", orders[i], "-f", "json", NULL });
    g_assert_cmpint(r.status, ==, 0);
    g_autofree char *k = tpt_json_value(r.out, "mini_batches"), *empty = tpt_json_value(r.out, "v_steady_range_empty");
    g_assert_cmpstr(k, ==, "26"); /* 3 · (4 workers × 2 chunks) + 2 */
    g_assert_cmpstr(empty, ==, "false");
    tpt_run_clear(&r);
  }
  TptRun c = tpt_run((const char *[]){ "compare", NULL });
  g_assert_nonnull(strstr(c.out, "K=14 (26 for the presets with chunks: their W x V stages)"));
  tpt_run_clear(&c);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/hostile/refused", test_refused);
  g_test_add_func("/hostile/compare-recompute", test_compare_recompute);
  g_test_add_func("/hostile/recompute-false", test_recompute_false);
  g_test_add_func("/hostile/profile-denormal", test_profile_denormal);
  g_test_add_func("/hostile/profile-identity", test_profile_identity);
  g_test_add_func("/hostile/plan-checkable", test_plan_checkable);
  g_test_add_func("/hostile/words", test_words);
  g_test_add_func("/hostile/docs-agree", test_docs_agree);
  g_test_add_func("/hostile/torch-csv", test_torch_csv);
  g_test_add_func("/hostile/sweep-na", test_sweep_na);
  g_test_add_func("/hostile/chunked-steady", test_chunked_steady);
  return g_test_run();
}
