/* test-cli.c — the timeprest program as users call it: outputs of schedule, simulate and
 * validate, and bad command-line input, which must exit 2 with one short line. */
#include "tp_test.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static void test_bad_input(void)
{
#define E(needle, ...) tpt_expect_cli_refused((const char *const[]){ __VA_ARGS__, NULL }, needle)
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
  E("schedule uses a cost model only to fix the order on it", "schedule", "--model", "cnn", "--cluster", "A",
    "--order-from", "slots");
  E("--model and --cluster go together", "schedule", "--costed-order", "--model", "cnn");
#undef E
}

static void test_bad_cost_file_cli(void)
{
  g_autofree char *path = tpt_tmp_path("tp-cli-bad.cost");
  g_assert_true(g_file_set_contents(path, "[stages]\nforward = 1\nbackward = slow\n", -1, NULL));
  g_autofree char *want = g_strdup_printf("%s:3: [stages] backward", path);
  tpt_expect_cli_refused((const char *const[]){ "simulate", "-w", "2", "--cost", path, NULL }, want);
  tpt_tmp_remove(path);
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
  g_autofree char *path = tpt_tmp_path("tp-cli-sched.json");
  g_autofree char *out = tpt_tmp_path("tp-cli-out.csv");
  TptRun a = tpt_run((const char *const[]){ "schedule", "-s", "i-timeprest", "-w", "4", "-n", "3", "-k", "9",
                                            "--format", "json", "-o", path, NULL });
  g_assert_cmpint(a.status, ==, 0);
  TptRun b = tpt_run((const char *const[]){ "schedule", "--input", path, "--format", "json", NULL });
  g_assert_cmpint(b.status, ==, 0);
  /* the file gives its significance: another one beside it is refused, by every command that reads it */
  tpt_expect_cli_refused((const char *const[]){ "simulate", "-i", path, "--significance", "const:1", NULL },
                     "drop -s/--order/--policy/-w/-n/-k/--chunks/--significance");
  tpt_expect_cli_refused((const char *const[]){ "train", "--schedule", path, "--significance", "const:1", "--data",
                                            "synthetic", "--quiet", NULL },
                     "--schedule: the file gives the schedule; drop -s, -k, --order-from and --significance");
  g_autofree char *want = NULL;
  g_assert_true(g_file_get_contents(path, &want, NULL, NULL));
  g_assert_cmpstr(b.out, ==, want);
  /* break line 12 of the JSON file (an operation) */
  g_auto(GStrv) lines = g_strsplit_set(want, "\n", -1);
  g_assert_nonnull(strstr(lines[11], "\"version\": "));
  char *v = strstr(lines[11], "\"version\": ");
  v[strlen("\"version\": ")] = '9';
  g_autofree char *bad = g_strjoinv("\n", lines);
  g_assert_true(g_file_set_contents(path, bad, -1, NULL));
  g_assert_true(g_file_set_contents(out, "keep", -1, NULL));
  g_autofree char *where = g_strdup_printf("%s:12: ", path);
  tpt_expect_cli_refused((const char *const[]){ "schedule", "--input", path, "--format", "csv", "-o", out, NULL }, where);
  g_autofree char *kept = NULL;
  g_assert_true(g_file_get_contents(out, &kept, NULL, NULL));
  g_assert_cmpstr(kept, ==, "keep");
  tpt_tmp_remove(path);
  tpt_tmp_remove(out);
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
  g_autofree char *path = tpt_tmp_path("tp-cli-events.csv");
  TptRun r = tpt_run((const char *const[]){ "simulate", "-s", "gpipe", "-w", "2", "-n", "2", "-k", "1", "--csv", path, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "bubble       0.3333"));
  g_autofree char *csv = NULL;
  g_assert_true(g_file_get_contents(path, &csv, NULL, NULL));
  /* comment, header, 2 stages x (2 F + 2 B + 1 U) operations, 2 activation and 2 gradient transfers */
  g_assert_cmpint(tpt_lines(csv), ==, 2 + 10 + 4);
  g_assert_true(g_str_has_prefix(csv, "# timeprest-events order_fixed_on=slots\n"
                                      "stage,kind,mini_batch,micro_batch,start,end,version,latest,staleness,bytes,peer,"
                                      "version_mismatch\n1,F,1,1,0,1,0,0,0,,,\n1,send-act,1,1,1,1,,,,1,2,\n"));
  tpt_tmp_remove(path);
  tpt_run_clear(&r);
}

static void test_validate_tsv(void)
{
  TptRun r = tpt_run((const char *const[]){ "validate", "-w", "2-8", "-n", "2-4", "--format", "tsv", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_auto(GStrv) lines = g_strsplit_set(r.out, "\n", -1);
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
  g_assert_true(g_str_has_prefix(c.out, "preset,order,policy,applies,order_fixed_on,time_per_mini_batch_steady,"
                                        "time_per_mini_batch_whole_run,time_per_epoch_steady,bubble_fraction_steady,"
                                        "bubble_fraction_whole_run,throughput_steady,throughput_whole_run,v_steady,chains,"
                                        "multiple_sequences,max_version_mismatch,makespan,bubble_rate_span,peak_bytes_1,"));
  g_assert_nonnull(strstr(c.out, "\ngpipe,gpipe,sync,1,slots,"));
  tpt_run_clear(&r);
  tpt_run_clear(&c);
  tpt_expect_cli_refused((const char *const[]){ "compare", "-s", "gpipe", NULL }, "compare runs every preset");
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
  /* --fit-memory keeps what fits: recomputing, a stage stores its inputs and one workspace (an estimate
   * without recomputation found no split, while the fastest split is over on stage 3); a zero-bubble
   * order whose peaks on unit slots overstate the costs' timeline keeps the fastest split, which fits */
  const char *const *fitting[] = {
    (const char *const[]){ "simulate", "-s", "1f1b", "-w", "3", "-n", "8", "--batch", "384", "--model", "gpt2-124m",
                           "--cluster", "C", "--recompute", "--fit-memory", NULL },
    (const char *const[]){ "simulate", "-s", "zb-h2", "-w", "4", "-n", "8", "--batch", "128", "--model", "gpt-1.5b",
                           "--cluster", "dgx-a100", "--data-parallel", "2", "--fit-memory", NULL },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(fitting); i++) {
    TptRun x = tpt_run(fitting[i]);
    g_assert_cmpstr(x.err, ==, "");
    g_assert_cmpint(x.status, ==, 0);
    tpt_run_clear(&x);
  }
  /* the costs line counts every replica's and tensor rank's GPU, and a replica's batch */
  TptRun g = tpt_run((const char *const[]){ "simulate", "-s", "1f1b", "-w", "4", "-n", "8", "--model", "gpt-1.5b",
                                            "--cluster", "dgx-a100", "--data-parallel", "2", "--tensor-parallel", "2",
                                            NULL });
  g_assert_cmpint(g.status, ==, 0);
  g_assert_nonnull(strstr(g.out, "256 samples per mini-batch in each of 2 replicas (512 in all)"));
  g_assert_nonnull(strstr(g.out, "(16 GPUs)\n"));
  tpt_run_clear(&g);
  /* a worker of interleaved chunks is one GPU; on one node's list of devices a tensor group is at home
   * (an untied model: interleaved and asynchronous schedules cannot tie a head, tp_tie.h) */
  TptRun v = tpt_run((const char *const[]){ "simulate", "-s", "interleaved-1f1b", "-w", "4", "-n", "8", "--model",
                                            "tinyllama-1.1b", "--cluster", "a100x8", "--data-parallel", "2", NULL });
  TptRun tg = tpt_run((const char *const[]){ "simulate", "-w", "4", "-n", "4", "--model", "tinyllama-1.1b", "--cluster",
                                             "a100x8", "--tensor-parallel", "2", NULL });
  g_assert_cmpint(v.status, ==, 0);
  g_assert_nonnull(strstr(v.out, "(8 GPUs, some shared)\n"));
  g_assert_cmpint(tg.status, ==, 0);
  tpt_run_clear(&v);
  tpt_run_clear(&tg);
#define E(needle, ...) tpt_expect_cli_refused((const char *const[]){ __VA_ARGS__, NULL }, needle)
  E("--model: no model named 'gpt5'", "simulate", "--model", "gpt5", "--cluster", "C");
  E("--cluster: no cluster named 'Z'", "simulate", "--model", "cnn", "--cluster", "Z");
  E("--model and --cluster go together", "simulate", "--model", "cnn");
  /* (any W runs: stages beyond the devices share them, as plan places them) */
  E("--batch: 10 samples do not split into N=4", "simulate", "--model", "cnn", "--cluster", "C", "--batch", "10");
  E("--split: expected 4 layer counts", "simulate", "--model", "cnn", "--cluster", "C", "--split", "5,6");
  E("--split: the stages get 12 layers, model cnn has 11", "simulate", "--model", "cnn", "--cluster", "C", "--split", "3,3,3,3");
  E("--batch, --split, --fit-memory and --optimizer need --model", "simulate", "--batch", "64");
  /* replicas and tensor ranks need GPUs of their own on a list of devices, a tensor group one node */
  E("8 replicas x 1 stages x 1-way blocks need 8 GPUs, and cluster H200 has 1", "simulate", "-s", "1f1b", "-w", "1",
    "-n", "1", "--batch", "128", "--model", "vgg16-cifar100", "--cluster", "h200", "--data-parallel", "8");
  E("1 replicas x 1 stages x 8-way blocks need 8 GPUs, and cluster H200 has 1", "simulate", "-s", "1f1b", "-w", "1", "-n", "8", "--batch",
    "64", "--model", "gpt-1.5b", "--cluster", "h200", "--tensor-parallel", "8");
  E("2 replicas x 4 stages x 1-way blocks need 8 GPUs, and cluster C has 4", "plan", "--model", "vgg16-cifar100",
    "--cluster", "C", "--batch", "128", "--data-parallel", "2", "-w", "4-8");
  E("--data-parallel 3: the batch of 128 samples does not split evenly over 3 replicas", "plan", "--model",
    "vgg16-cifar100", "--cluster", "C", "--batch", "128", "--data-parallel", "3");
#undef E
  /* a bad cluster file and a bad device file behind a cluster */
  g_autofree char *pdir = g_dir_make_tmp("tp-cli-cluster-XXXXXX", NULL);
  g_autofree char *cdir = g_build_filename(pdir, "clusters", NULL);
  g_autofree char *ddir = g_build_filename(pdir, "devices", NULL);
  g_mkdir_with_parents(cdir, 0700);
  g_autofree char *cl = g_build_filename(cdir, "x.cluster", NULL);
  g_assert_true(g_file_set_contents(cl, "[cluster]\ndevices = rtx-2080\nlink_bandwidth = -1\n", -1, NULL));
  g_autofree char *cwant = g_strdup_printf("%s:3: [cluster] link_bandwidth: expected a number", cl);
  tpt_expect_cli_refused((const char *const[]){ "simulate", "--model", "cnn", "--cluster", cl, "-w", "1", NULL }, cwant);
  g_assert_true(g_file_set_contents(cl, "[cluster]\ndevices = tp-test-gpu\nlink_bandwidth = 1e9\n", -1, NULL));
  g_autofree char *dev = g_build_filename(ddir, "tp-test-gpu.device", NULL);
  g_mkdir_with_parents(ddir, 0700);
  g_assert_true(g_file_set_contents(dev, "[device]\nflops = 1e12\nmemory = 8e9\n", -1, NULL));
  tpt_expect_cli_refused((const char *const[]){ "simulate", "--model", "cnn", "--cluster", cl, "-w", "1", NULL },
                     "[device]: missing key 'memory_bandwidth'");
  g_unlink(dev);
  g_unlink(cl);
  g_rmdir(cdir);
  g_rmdir(ddir);
  g_rmdir(pdir);
  g_autofree char *path = tpt_tmp_path("tp-cli-bad.model");
  g_assert_true(g_file_set_contents(path, "input 3 32 32\nconv 16 3 pad=1\nrelu\nlinear 10\n", -1, NULL));
  g_autofree char *want = g_strdup_printf("%s:4: linear needs a flat input", path);
  tpt_expect_cli_refused((const char *const[]){ "simulate", "--model", path, "--cluster", "A", NULL }, want);
  tpt_tmp_remove(path);
}

/* One JSON report of `timeprest ARGS… --format json`, parsed. */
static JsonParser *simulate_json(const char *const *args)
{
  GPtrArray *a = g_ptr_array_new();
  g_ptr_array_add(a, (char *)"simulate");
  for (int i = 0; args[i]; i++)
    g_ptr_array_add(a, (char *)args[i]);
  g_ptr_array_add(a, (char *)"--format");
  g_ptr_array_add(a, (char *)"json");
  g_ptr_array_add(a, NULL);
  TptRun r = tpt_run((const char *const *)a->pdata);
  g_ptr_array_free(a, TRUE);
  if (r.status != 0)
    g_error("simulate: status %d: %s", r.status, r.err);
  JsonParser *p = json_parser_new();
  GError *err = NULL;
  g_assert_true(json_parser_load_from_data(p, r.out, -1, &err));
  g_assert_no_error(err);
  tpt_run_clear(&r);
  return p;
}

static JsonObject *root_of(JsonParser *p) { return json_node_get_object(json_parser_get_root(p)); }

/* The value of column `col` in the row of `preset` of a compare CSV. */
static char *csv_cell(const char *csv, const char *preset, const char *col)
{
  g_auto(GStrv) lines = g_strsplit_set(csv, "\n", -1);
  g_auto(GStrv) head = g_strsplit(lines[0], ",", -1);
  int c = -1;
  for (int i = 0; head[i]; i++)
    if (strcmp(head[i], col) == 0)
      c = i;
  g_assert_cmpint(c, >=, 0);
  for (int l = 1; lines[l]; l++) {
    g_auto(GStrv) f = g_strsplit(lines[l], ",", -1);
    if (f[0] && strcmp(f[0], preset) == 0 && (int)g_strv_length(f) > c)
      return g_strdup(f[c]);
  }
  g_error("no row %s", preset);
  return NULL;
}

/* With a cost model the nf1b and 1f1b-async orders are fixed on it unless --order-from slots says
 * otherwise; every output names the timeline; --order-from costs without a cost model is refused. */
static void test_order_from(void)
{
  g_autofree char *dir = g_dir_make_tmp("tp-cli-order-XXXXXX", NULL);
  g_autofree char *cost = g_build_filename(dir, "c.cost", NULL), *csv = g_build_filename(dir, "ev.csv", NULL);
  g_autofree char *sched = g_build_filename(dir, "s.csv", NULL), *png = g_build_filename(dir, "t.png", NULL);
  g_assert_true(g_file_set_contents(cost, "[stages]\nforward = 1, 3, 1, 2\nbackward = 2, 5, 2, 4\nupdate = 0.5\n"
                                          "activation_bytes = 100\n[links]\nlatency = 0.25\nbandwidth = 80\n", -1, NULL));
#define E(needle, ...) tpt_expect_cli_refused((const char *const[]){ __VA_ARGS__, NULL }, needle)
  E("--order-from costs: fixing the order on costs needs a cost model", "simulate", "--order-from", "costs");
  E("--costed-order: fixing the order on costs needs a cost model", "simulate", "--costed-order");
  E("--order-from costs: fixing the order on costs needs a cost model", "compare", "--order-from", "costs");
  E("--order-from costs: fixing the order on costs needs a cost model", "plot", "timeline", "--order-from", "costs", "-o", png);
  E("--order-from costs: fixing the order on costs needs a cost model", "schedule", "--order-from", "costs");
  E("--order-from: unknown value 'sideways' (expected one of: slots, costs)", "simulate", "--order-from", "sideways");
  E("--costed-order is --order-from costs", "simulate", "--cost", cost, "--costed-order", "--order-from", "slots");
#undef E
  g_assert_false(g_file_test(png, G_FILE_TEST_EXISTS));
  const char *base[] = { "-s", "timeprest", "-w", "4", "-n", "3", "-k", "12", "--cost", cost };
#define SIM(...) simulate_json((const char *const[]){ base[0], base[1], base[2], base[3], base[4], base[5], base[6], \
                                                      base[7], __VA_ARGS__, NULL })
  g_autoptr(JsonParser) dflt = SIM(base[8], base[9]);
  g_autoptr(JsonParser) costs = SIM(base[8], base[9], "--order-from", "costs");
  g_autoptr(JsonParser) synonym = SIM(base[8], base[9], "--costed-order");
  g_autoptr(JsonParser) slots = SIM(base[8], base[9], "--order-from", "slots");
  g_autoptr(JsonParser) unit = SIM("--order-from", "slots");
  g_autoptr(JsonParser) unit_dflt = SIM("-w", "4");
  g_autoptr(JsonParser) gpipe = simulate_json((const char *const[]){ "-s", "gpipe", "-w", "4", "--cost", cost, NULL });
#undef SIM
  g_assert_cmpstr(json_object_get_string_member(root_of(dflt), "order_fixed_on"), ==, "costs");
  g_assert_cmpstr(json_object_get_string_member(root_of(costs), "order_fixed_on"), ==, "costs");
  g_assert_cmpstr(json_object_get_string_member(root_of(synonym), "order_fixed_on"), ==, "costs");
  g_assert_cmpstr(json_object_get_string_member(root_of(slots), "order_fixed_on"), ==, "slots");
  g_assert_cmpstr(json_object_get_string_member(root_of(unit), "order_fixed_on"), ==, "slots");
  g_assert_cmpstr(json_object_get_string_member(root_of(unit_dflt), "order_fixed_on"), ==, "slots");
  g_assert_cmpstr(json_object_get_string_member(root_of(gpipe), "order_fixed_on"), ==, "slots"); /* no choice to make */
  /* the default is the costed order, and on these costs it runs faster than the unit-slot one */
  double t_costs = json_object_get_double_member(root_of(dflt), "makespan");
  g_assert_cmpfloat(t_costs, ==, json_object_get_double_member(root_of(costs), "makespan"));
  g_assert_cmpfloat(t_costs, ==, json_object_get_double_member(root_of(synonym), "makespan"));
  g_assert_cmpfloat(t_costs, <, json_object_get_double_member(root_of(slots), "makespan"));
  /* text, events CSV and compare say it too */
  TptRun r = tpt_run((const char *const[]){ "simulate", "-w", "4", "-n", "3", "--cost", cost, "--csv", csv, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\norder        fixed on the costs"));
  g_autofree char *events = NULL;
  g_assert_true(g_file_get_contents(csv, &events, NULL, NULL));
  g_assert_true(g_str_has_prefix(events, "# timeprest-events order_fixed_on=costs\nstage,"));
  tpt_run_clear(&r);
  r = tpt_run((const char *const[]){ "simulate", "-w", "4", "-n", "3", "--cost", cost, "--order-from", "slots", NULL });
  g_assert_nonnull(strstr(r.out, "\norder        fixed on unit slots, replayed under the costs"));
  tpt_run_clear(&r);
  TptRun c1 = tpt_run((const char *const[]){ "compare", "-w", "4", "-n", "4", "--cost", cost, "--format", "csv", NULL });
  TptRun c2 = tpt_run((const char *const[]){ "compare", "-w", "4", "-n", "4", "--cost", cost, "--format", "csv",
                                             "--order-from", "slots", NULL });
  g_assert_cmpint(c1.status, ==, 0);
  g_assert_cmpint(c2.status, ==, 0);
  const char *rule_based[] = { "pipedream", "timeprest", "v-timeprest", "i-timeprest", "timeprest-stash", "timeprest-1f1b" };
  for (guint i = 0; i < G_N_ELEMENTS(rule_based); i++) {
    g_autofree char *a = csv_cell(c1.out, rule_based[i], "order_fixed_on");
    g_autofree char *b = csv_cell(c2.out, rule_based[i], "order_fixed_on");
    g_assert_cmpstr(a, ==, "costs");
    g_assert_cmpstr(b, ==, "slots");
  }
  g_autofree char *g1 = csv_cell(c1.out, "gpipe", "order_fixed_on");
  g_assert_cmpstr(g1, ==, "slots");
  tpt_run_clear(&c1);
  tpt_run_clear(&c2);
  /* a schedule file keeps its order under costs; asking for the costed one explicitly is refused */
  r = tpt_run((const char *const[]){ "schedule", "-w", "4", "-n", "3", "--format", "csv", "-o", sched, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  g_autoptr(JsonParser) file = simulate_json((const char *const[]){ "--input", sched, "--cost", cost, NULL });
  g_assert_cmpstr(json_object_get_string_member(root_of(file), "order_fixed_on"), ==, "slots");
  tpt_expect_cli_refused((const char *const[]){ "simulate", "--input", sched, "--cost", cost, "--order-from", "costs", NULL },
                     "--order-from: a schedule file's order is fixed already");
  /* schedule with a cost model writes the costed order */
  TptRun k = tpt_run((const char *const[]){ "schedule", "-w", "4", "-n", "3", "-k", "12", "--cost", cost, "--format", "csv",
                                            NULL });
  TptRun kc = tpt_run((const char *const[]){ "schedule", "-w", "4", "-n", "3", "-k", "12", "--cost", cost, "--format", "csv",
                                             "--costed-order", NULL });
  TptRun ku = tpt_run((const char *const[]){ "schedule", "-w", "4", "-n", "3", "-k", "12", "--format", "csv", NULL });
  g_assert_cmpint(k.status, ==, 0);
  g_assert_cmpstr(k.out, ==, kc.out);
  g_assert_cmpstr(k.out, !=, ku.out);
  tpt_run_clear(&k);
  tpt_run_clear(&kc);
  tpt_run_clear(&ku);
  g_unlink(cost);
  g_unlink(csv);
  g_unlink(sched);
  g_rmdir(dir);
}

/* The weight-inconsistency metric through the command line: V-TiMePReSt (W = 4, N = 4) reads
 * weights 2 versions newer at stage 1's backward than its forward did; PipeDream (stash) and the
 * flush schedules read the same; the JSON report keeps every key of the spec's contract. */
static void test_version_mismatch_cli(void)
{
  const char *const presets[] = { "v-timeprest", "pipedream", "gpipe", "1f1b" };
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++) {
    g_autoptr(JsonParser) p = simulate_json((const char *const[]){ "-s", presets[i], "-w", "4", "-n", "4", NULL });
    JsonObject *o = root_of(p);
    const char *keys[] = { "makespan", "bubble_fraction", "throughput", "v_steady", "chains", "multiple_sequences",
                           "messages", "bytes", "stages", "order_fixed_on", "version_mismatch_histogram",
                           "time_per_mini_batch", "time_per_mini_batch_whole_run", "throughput_steady",
                           "bubble_fraction_steady" };
    for (guint k = 0; k < G_N_ELEMENTS(keys); k++)
      if (!json_object_has_member(o, keys[k]))
        g_error("%s: no key %s", presets[i], keys[k]);
    JsonArray *hist = json_object_get_array_member(o, "version_mismatch_histogram");
    long total = 0;
    for (guint d = 0; d < json_array_get_length(hist); d++)
      total += json_array_get_int_element(hist, d);
    g_assert_cmpint(total, ==, 4 * 14 * 4); /* every micro-batch of every backward on every stage */
    JsonArray *st = json_object_get_array_member(o, "stages");
    const char *skeys[] = { "stage", "busy", "bubble_fraction", "max_live_versions", "peak_activations", "peak_bytes",
                            "max_version_mismatch" };
    int worst = 0;
    for (guint s = 0; s < json_array_get_length(st); s++) {
      JsonObject *so = json_array_get_object_element(st, s);
      for (guint k = 0; k < G_N_ELEMENTS(skeys); k++)
        g_assert_true(json_object_has_member(so, skeys[k]));
      worst = MAX(worst, (int)json_object_get_int_member(so, "max_version_mismatch"));
    }
    int first = (int)json_object_get_int_member(json_array_get_object_element(st, 0), "max_version_mismatch");
    if (i == 0) {
      g_assert_cmpint(first, ==, 2);
      g_assert_cmpuint(json_array_get_length(hist), ==, 3);
    } else {
      g_assert_cmpint(worst, ==, 0);
      g_assert_cmpuint(json_array_get_length(hist), ==, 1);
    }
  }
  TptRun r = tpt_run((const char *const[]){ "simulate", "-s", "v-timeprest", "-w", "4", "-n", "4", NULL });
  g_assert_nonnull(strstr(r.out, "\nmismatch     micro-batch backwards reading weights d versions newer than their forward: "
                                 "d=0:"));
  tpt_run_clear(&r);
  TptRun c = tpt_run((const char *const[]){ "compare", "-w", "4", "-n", "4", "--format", "csv", NULL });
  g_assert_cmpint(c.status, ==, 0);
  g_autofree char *v = csv_cell(c.out, "v-timeprest", "max_version_mismatch_1");
  g_autofree char *pd = csv_cell(c.out, "pipedream", "max_version_mismatch");
  g_assert_cmpstr(v, ==, "2");
  g_assert_cmpstr(pd, ==, "0");
  tpt_run_clear(&c);
}

/* compare labels steady and whole-run values, and on unit slots names every preset with a
 * whole-mini-batch operation. */
static void test_compare_labels(void)
{
  TptRun r = tpt_run((const char *const[]){ "compare", "-w", "4", "-n", "4", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "whole-mini-batch forward and backward: pipedream, timeprest-1f1b;"));
  g_assert_nonnull(strstr(r.out, "whole-mini-batch backward: timeprest, v-timeprest, i-timeprest, timeprest-stash;"));
  g_assert_nonnull(strstr(r.out, "\nsteady    the steady state"));
  g_assert_nonnull(strstr(r.out, "\nrun       the whole run, fill and drain included"));
  tpt_run_clear(&r);
  TptRun c = tpt_run((const char *const[]){ "compare", "-w", "4", "-n", "4", "--format", "csv", NULL });
  /* GPipe: the same bubble in the steady state as over the whole run; TiMePReSt none in the steady state */
  g_autofree char *gs = csv_cell(c.out, "gpipe", "bubble_fraction_steady");
  g_autofree char *gr = csv_cell(c.out, "gpipe", "bubble_fraction_whole_run");
  g_autofree char *ts = csv_cell(c.out, "timeprest", "bubble_fraction_steady");
  g_autofree char *tr = csv_cell(c.out, "timeprest", "bubble_fraction_whole_run");
  g_autofree char *tq = csv_cell(c.out, "timeprest", "throughput_steady");
  g_autofree char *tt = csv_cell(c.out, "timeprest", "time_per_mini_batch_steady");
  g_autofree char *tw = csv_cell(c.out, "timeprest", "time_per_mini_batch_whole_run");
  g_assert_cmpstr(gs, ==, gr);
  g_assert_cmpstr(gs, ==, "0.428571429");
  g_assert_cmpstr(ts, ==, "0");
  g_assert_cmpfloat(g_ascii_strtod(tr, NULL), >, 0);
  g_assert_cmpstr(tq, ==, "0.8");
  g_assert_cmpstr(tt, ==, "5");
  g_assert_cmpfloat(g_ascii_strtod(tw, NULL), >, 5);
  tpt_run_clear(&c);
}

#define run_shell tpt_run_shell

/* Quoted user text is escaped and shortened; "--" ends the options; every integer option goes
 * through one parser with one message. */
static void test_cli_quoting(void)
{
#define E(needle, ...) tpt_expect_cli_refused((const char *const[]){ __VA_ARGS__, NULL }, needle)
  E("-w: expected a whole number from 1 to 1024, got '3\\nx'", "schedule", "-w", "3\nx");
  E("-s: unknown preset 'a\\tb\\x01'", "schedule", "-s", "a\tb\x01");
  g_autofree char *big = g_strnfill(100 * 1024, '7');
  g_autofree char *big60 = g_strnfill(60, '7');
  g_autofree char *want = g_strdup_printf("-k: expected a whole number from 1 to 1000000, got '%s…'", big60);
  E(want, "schedule", "-k", big);
  g_autofree char *want_s = g_strdup_printf("-s: unknown preset '%s…'", big60);
  E(want_s, "schedule", "-s", big);
  E("--format: unknown value '7777", "schedule", "--format", big);
  E("unknown command '\\n'", "\n");
  E("-o: 'x\\ny.txt' must end in .png or .svg", "plot", "vmap", "-o", "x\ny.txt");
  E("unexpected argument 'extra' (the command takes options only)", "schedule", "-w", "2", "--", "extra");
  E("unexpected argument '-w' after --", "schedule", "--", "-w", "3");
  E("'--' ends a command's options", "--", "schedule");
  E("--split: expected a whole number from 1 to 1048576, got 'x'", "simulate", "-w", "2", "--model", "mlp",
    "--cluster", "A", "--split", "x,1");
#undef E
  const char *args[] = { "schedule", "-w", "2", "-n", "1", "-k", "2", "--", NULL };
  TptRun r = tpt_run(args);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpstr(r.out, ==, "1A 2A . 1 . 2\n. 1A 1 2A 2 .\n");
  tpt_run_clear(&r);
}

/* Inputs from pipes and standard input: read to the limit and no further; /dev/zero refused at once;
 * a schedule read back from standard input. */
static void test_cli_input_limits(void)
{
  TptRun r = run_shell("yes | \"$TP\" simulate -w 2 --cost -");
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "cannot read cost file from standard input: longer than the limit of 64 MiB"));
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  tpt_run_clear(&r);
  r = run_shell("\"$TP\" schedule --input /dev/zero");
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "cannot read schedule file '/dev/zero': not a text file"));
  tpt_run_clear(&r);
  r = run_shell("\"$TP\" schedule -s pipedream -w 3 -n 2 -k 4 --format json | \"$TP\" schedule --input -");
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpstr(r.err, ==, "");
  TptRun direct = run_shell("\"$TP\" schedule -s pipedream -w 3 -n 2 -k 4");
  g_assert_cmpint(direct.status, ==, 0);
  g_assert_cmpint(tpt_lines(r.out), ==, 3);
  g_assert_cmpstr(r.out, ==, direct.out);
  tpt_run_clear(&direct);
  tpt_run_clear(&r);
  r = run_shell("printf '{\"order\": \"nf1b\",\\n\"workers\": 1e23}' | \"$TP\" schedule --input -");
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "standard input:2: workers: expected a whole number from 1 to 1024, got '1e23'"));
  tpt_run_clear(&r);
  /* a cost that would overflow the totals is refused at its line, nothing printed */
  r = run_shell("printf '[stages]\\nforward = 1\\nbackward = 1e308\\n' | \"$TP\" simulate -w 2 --cost - --format json");
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpstr(r.out, ==, "");
  g_assert_nonnull(strstr(r.err, "standard input:3: [stages] backward: expected a time from 0 to 1e9"));
  tpt_run_clear(&r);
}

/* A model read from a pipe (`-m /dev/stdin`) is read once: compare costs its chunked presets on it
 * too, and plan splits it for tensor parallelism, without reading it again (a second read of a
 * pipe finds nothing); plan --run-top, whose runs are other processes, refuses it. */
static void test_model_pipe(void)
{
  const char *bin = g_getenv("TP_BIN"), *src = g_getenv("TP_SRCDIR");
  if (!bin || !src) {
    g_test_skip("TP_BIN and TP_SRCDIR are set by make check");
    return;
  }
  const char *cmds[] = { "compare -m /dev/stdin --cluster C -w 2 -n 4", "plan -m /dev/stdin --cluster dgx-a100 "
                         "--devices 8 --batch 64 -w 1-4 -s 1f1b --format json" };
  const char *models[] = { "llama-tiny.model", "gpt-1.5b.model" };
  for (int i = 0; i < 2; i++) {
    g_autofree char *line = g_strdup_printf("sh -c 'cat \"%s/models/%s\" | \"%s\" %s'", src, models[i], bin, cmds[i]);
    g_autofree char *out = NULL, *err = NULL;
    int wait = 0;
    g_assert_true(g_spawn_command_line_sync(line, &out, &err, &wait, NULL));
    g_assert_true(WIFEXITED(wait) && WEXITSTATUS(wait) == 0);
    g_assert_null(strstr(out, "n/a"));
    g_assert_nonnull(strstr(out, i ? "\"tensor_parallel\": 2" : "zb-v  "));
  }
  /* --run-top's runs read the model again: a pipe is refused up front */
  g_autofree char *prof = tpt_tmp_path("pipe-mlp.profile");
  TptRun p = tpt_run((const char *[]){ "profile", "-m", "mlp", "--micro-batch-sizes", "32", "-r", "1", "-o", prof, NULL });
  g_assert_cmpint(p.status, ==, 0);
  tpt_run_clear(&p);
  g_autofree char *line = g_strdup_printf("sh -c 'cat \"%s/models/mlp.model\" | \"%s\" plan -m /dev/stdin --profile \"%s\" "
                                          "--batch 64 -w 1-2 -n 2 --run-top 1'", src, bin, prof);
  g_autofree char *out = NULL, *err = NULL;
  int wait = 0;
  g_assert_true(g_spawn_command_line_sync(line, &out, &err, &wait, NULL));
  g_assert_true(WIFEXITED(wait) && WEXITSTATUS(wait) == 2);
  g_assert_nonnull(strstr(err, "--run-top: its runs read --model '/dev/stdin' again; give a file"));
  tpt_tmp_remove(prof);
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
  g_test_add_func("/cli/model", test_model_cli);
  g_test_add_func("/cli/model-pipe", test_model_pipe);
  g_test_add_func("/cli/order-from", test_order_from);
  g_test_add_func("/cli/version-mismatch", test_version_mismatch_cli);
  g_test_add_func("/cli/compare-labels", test_compare_labels);
  g_test_add_func("/cli/quoting", test_cli_quoting);
  g_test_add_func("/cli/input-limits", test_cli_input_limits);
  return g_test_run();
}
