/* test-token-train.c — training a language model through the program: a small Llama on synthetic
 * tokens ends where it ends on one stage when split over two (gpipe, the same micro-batches: the
 * same products in the same order, so bit for bit — stricter than the 1e-4 relative the loss
 * needs), TiMePReSt trains it over three stages, the report's token fields, the default text
 * corpus, and the refusals of bad text data. */
#include "config.h"
#include "tp_test.h"
#include "tp_test_run.h"
#include "tp_net.h"
#include "tp_tie.h"

#include <glib/gstdio.h>
#include <math.h>
#include <sys/stat.h>

static const char *const tiny = "name tiny-llama\ntokens 16 256\nembedding 32\nrepeat 2 block heads=4 kv_heads=2 ffn=48 "
                                "mlp=swiglu norm=rmsnorm positions=rope\nrmsnorm\nlm_head\ntoken_ce\n";

static char *model_file(void)
{
  char *path = tpt_tmp_path("tiny-llama.model");
  g_assert_true(g_file_set_contents(path, tiny, -1, NULL));
  return path;
}

static TptRun train(const char *model, const char *preset, const char *w, const char *data)
{
  const char *args[] = { "train", "-m", model, "-s", preset, "-w", w, "-n", "4", "-k", "20", "--batch", "8",
                         "--data", data, "--lr", "0.3", "--profile-reps", "1", "--format", "json", "--quiet", NULL };
  TptRun r = tpt_run(args);
  if (r.status != 0)
    g_printerr("%s", r.err);
  g_assert_cmpint(r.status, ==, 0);
  return r;
}

static void test_split_same(void)
{
  g_autofree char *model = model_file();
  TptRun one = train(model, "gpipe", "1", "synthetic:256:32"), two = train(model, "gpipe", "2", "synthetic:256:32");
  g_autofree char *a = tpt_json_value(one.out, "weights_sha256"), *b = tpt_json_value(two.out, "weights_sha256");
  g_assert_cmpstr(a, ==, b);
  double la = tpt_json_num(one.out, "final_train_loss"), lb = tpt_json_num(two.out, "final_train_loss");
  g_assert_cmpfloat(fabs(la - lb), <=, 1e-4 * fabs(la));
  /* the token fields: sequences and tokens per second, the first interval's loss above the last */
  double tps = tpt_json_num(one.out, "tokens_per_second"), sps = tpt_json_num(one.out, "samples_per_second");
  g_assert_cmpfloat(fabs(tps / (16 * sps) - 1), <, 1e-8); /* both printed to 9 digits */
  g_assert_cmpfloat(tpt_json_num(one.out, "first_train_loss"), >, la);
  g_assert_cmpfloat(fabs(tpt_json_num(one.out, "first_train_loss") - log(256.0)), <, 0.1); /* it starts near uniform */
  tpt_run_clear(&one), tpt_run_clear(&two);
  tpt_tmp_remove(model);
}

/* The split backward (zb-h1: I and W apart) and recomputation run the products of gpipe's fused
 * backward from stored activations: recomputing ends with the same weights bit for bit; zb-h1 sums
 * the micro-batches' weight gradients in its own order, so its loss agrees to float rounding. */
static TptRun train_more(const char *model, const char *preset, const char *extra)
{
  const char *args[] = { "train", "-m", model, "-s", preset, "-w", "2", "-n", "4", "-k", "20", "--batch", "8", "--data",
                         "synthetic:256:32", "--lr", "0.3", "--profile-reps", "1", "--format", "json", "--quiet", extra,
                         NULL };
  TptRun r = tpt_run(args);
  g_assert_cmpint(r.status, ==, 0);
  return r;
}

static void test_split_and_recompute(void)
{
  g_autofree char *model = model_file();
  const char *presets[] = { "gpipe", "1f1b", "zb-h1" };
  TptRun ref = train_more(model, "gpipe", NULL);
  double want = tpt_json_num(ref.out, "final_train_loss");
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++) {
    TptRun plain = train_more(model, presets[i], NULL);
    double loss = tpt_json_num(plain.out, "final_train_loss");
    g_test_message("%s: loss %.9g (gpipe %.9g)", presets[i], loss, want);
    g_assert_cmpfloat(fabs(loss - want), <=, 1e-6 * want);
    if (strcmp(presets[i], "zb-h1") != 0) { /* a split backward is not recomputed */
      TptRun rc = train_more(model, presets[i], "--recompute");
      g_autofree char *a = tpt_json_value(plain.out, "weights_sha256"), *b = tpt_json_value(rc.out, "weights_sha256");
      g_assert_cmpstr(a, ==, b);
      tpt_run_clear(&rc);
    }
    tpt_run_clear(&plain);
  }
  tpt_run_clear(&ref);
  tpt_tmp_remove(model);
}

static void test_timeprest_trains(void)
{
  g_autofree char *model = model_file();
  TptRun r = train(model, "timeprest", "3", "synthetic:256:32");
  double first = tpt_json_num(r.out, "first_train_loss"), last = tpt_json_num(r.out, "final_train_loss");
  g_test_message("timeprest W = 3: loss %.4f → %.4f", first, last);
  g_assert_true(isfinite(last));
  g_assert_cmpfloat(last, <, first - 0.05);
  tpt_run_clear(&r);
  tpt_tmp_remove(model);
}

/* GPT-2's block: dropout in it, learned positions, the head tied to the embedding or not. */
static char *gpt_file(gboolean tied)
{
  char *path = tpt_tmp_path(tied ? "tiny-gpt-tied.model" : "tiny-gpt.model");
  g_autofree char *text = g_strdup_printf("tokens 16 256\nembedding 32 positions=learned\nrepeat 2 block heads=4 "
                                          "ffn=64 mlp=gelu norm=layernorm positions=none bias=1 dropout=1\nlayernorm\n"
                                          "lm_head tied=%d\ntoken_ce\n", tied);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  return path;
}

/* train -s preset -w W on synthetic tokens with AdamW (GPT's small initial weights learn slowly
 * under SGD), and one more option or none. */
static TptRun train_gpt(const char *model, const char *preset, const char *w, const char *extra)
{
  const char *args[] = { "train", "-m", model, "-s", preset, "-w", w, "-n", "4", "-k", "20", "--batch", "8", "--data",
                         "synthetic:256:32", "--optimizer", "adamw", "--lr", "0.01", "--profile-reps", "1", "--format",
                         "json", "--quiet", extra, NULL };
  TptRun r = tpt_run(args);
  if (r.status != 0)
    g_printerr("%s", r.err);
  g_assert_cmpint(r.status, ==, 0);
  return r;
}

static gboolean same_weights(const TptRun *a, const TptRun *b)
{
  g_autofree char *x = tpt_json_value(a->out, "weights_sha256"), *y = tpt_json_value(b->out, "weights_sha256");
  return strcmp(x, y) == 0;
}

/* Block dropout trains: its masks follow the micro-batches, not the split (gpipe over one stage or
 * two ends with the same weights, bit for bit), a recomputed forward draws them again (the same
 * weights), they drop something (not the weights without dropout), and the loss falls. */
static void test_dropout_trains(void)
{
  g_autofree char *model = gpt_file(FALSE);
  TptRun one = train_gpt(model, "gpipe", "1", NULL), two = train_gpt(model, "gpipe", "2", NULL);
  TptRun rc = train_gpt(model, "gpipe", "2", "--recompute"), rc1 = train_gpt(model, "1f1b", "2", "--recompute");
  TptRun f1 = train_gpt(model, "1f1b", "2", NULL);
  g_assert_true(same_weights(&one, &two) && same_weights(&two, &rc) && same_weights(&f1, &rc1));
  double first = tpt_json_num(one.out, "first_train_loss"), last = tpt_json_num(one.out, "final_train_loss");
  g_test_message("gpt with dropout: loss %.4f → %.4f", first, last);
  g_assert_cmpfloat(last, <, first - 0.05);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(model, &text, NULL, NULL));
  memcpy(strstr(text, "dropout=1"), "dropout=0", 9);
  g_assert_true(g_file_set_contents(model, text, -1, NULL));
  TptRun none = train_gpt(model, "gpipe", "1", NULL);
  g_assert_false(same_weights(&one, &none));
  tpt_run_clear(&one), tpt_run_clear(&two), tpt_run_clear(&rc), tpt_run_clear(&rc1), tpt_run_clear(&f1);
  tpt_run_clear(&none);
  tpt_tmp_remove(model);
}

/* A tied head trains on the embedding's stage (the loss falls; recomputing and the split backward
 * end where the fused backward does); on another stage its copy of the table and the table sum
 * their gradients at each update: the flushing schedules over two and three stages end where one
 * stage ends (the sums differ only in their order: 1e-6 relative), and the schedules where the two
 * stages could wait on each other at an update are refused in one line.  Profiling times each layer
 * alone, the head with its own copy. */
static void test_tied_trains(void)
{
  g_autofree char *model = gpt_file(TRUE);
  TptRun r = train_gpt(model, "gpipe", "1", NULL), rc = train_gpt(model, "gpipe", "1", "--recompute");
  TptRun zb = train_gpt(model, "zb-h1", "1", NULL);
  double first = tpt_json_num(r.out, "first_train_loss"), last = tpt_json_num(r.out, "final_train_loss");
  g_test_message("tied gpt: loss %.4f → %.4f (zb-h1 %.9g)", first, last, tpt_json_num(zb.out, "final_train_loss"));
  g_assert_cmpfloat(last, <, first - 0.05);
  g_assert_true(same_weights(&r, &rc));
  g_assert_cmpfloat(fabs(tpt_json_num(zb.out, "final_train_loss") - last), <=, 1e-6 * last);
  const char *split[][2] = { { "gpipe", "2" },           { "1f1b", "2" }, { "zb-h1", "2" },     { "1f1b", "3" },
                             { "interleaved-1f1b", "2" }, { "zb-v", "2" }, { "dualpipe-v", "2" } };
  for (guint i = 0; i < G_N_ELEMENTS(split); i++) {
    TptRun w = train_gpt(model, split[i][0], split[i][1], NULL);
    double loss = tpt_json_num(w.out, "final_train_loss");
    g_test_message("tied gpt, %s W = %s: loss %.9g (one stage %.9g)", split[i][0], split[i][1], loss, last);
    g_assert_cmpfloat(fabs(loss - last), <=, 1e-6 * last);
    tpt_run_clear(&w);
  }
  const char *refused[][2] = { { "pipedream", "stage 1 runs F(2) before the update of mini-batch 1" },
                               { "timeprest", "before the update of mini-batch 1" } };
  for (guint i = 0; i < G_N_ELEMENTS(refused); i++)
    tpt_expect_cli_refused((const char *[]){ "train", "-m", model, "-s", refused[i][0], "-w", "2", "-n", "4", "-k", "2",
                                             "--batch", "8", "--data", "synthetic:64:16", "--profile-reps", "1", NULL },
                           refused[i][1]);
  /* a schedule file whose worker orders let the tied sides meet at no update: zb-v's with the head's
   * first update moved after stage 1's next forward, on the same worker (the run would hang) */
  g_autofree char *zbv = tpt_tmp_path("tied-zbv.csv");
  g_autofree char *csv = NULL;
  tpt_schedule_csv("zb-v", "2", "4", "2", zbv, &csv);
  char *u = strstr(csv, "\n4,U,1,,0,fixed\n"), *f = strstr(csv, "\n1,F,2,1,1,fixed\n");
  g_assert_true(u && f && u < f);
  GString *moved = g_string_new_len(csv, u - csv + 1);
  g_string_append_len(moved, u + 16, f + 17 - (u + 16));
  g_string_append(moved, "4,U,1,,0,fixed\n");
  g_string_append(moved, f + 17);
  g_assert_true(g_file_set_contents(zbv, moved->str, -1, NULL));
  g_string_free(moved, TRUE);
  tpt_expect_cli_refused((const char *[]){ "simulate", "-m", model, "--cluster", "A", "-i", zbv, "--batch", "8", NULL },
                         "worker 1 would stop at F(2,A) of stage 1");
  tpt_expect_cli_refused((const char *[]){ "train", "-m", model, "--schedule", zbv, "--batch", "8", "--data",
                                           "synthetic:64:16", NULL },
                         "worker 1 would stop at F(2,A) of stage 1, the updates waiting for each other");
  tpt_tmp_remove(zbv);
  /* two heads tied to the table, one off its stage: each would need the table's gradient */
  g_autofree char *two = tpt_tmp_path("tied-two.model");
  g_assert_true(g_file_set_contents(two, "tokens 16 256\nembedding 256\nblock heads=4 ffn=64\nlayernorm\nlm_head tied=1\n"
                                    "lm_head tied=1\ntoken_ce\n", -1, NULL));
  tpt_expect_cli_refused((const char *[]){ "train", "-m", two, "-s", "1f1b", "-w", "2", "--split", "4,2", "-n", "4", "-k", "2",
                                           "--batch", "8", "--data", "synthetic:64:16", NULL },
                         "tied-two.model:6: a second lm_head tied=1 on stage 2");
  tpt_expect_cli_refused((const char *[]){ "train", "-m", two, "-s", "1f1b", "-w", "3", "--split", "3,2,1", "-n", "4", "-k",
                                           "2", "--batch", "8", "--data", "synthetic:64:16", NULL },
                         "tied-two.model:6: a second lm_head tied=1 on stage 2");
  tpt_tmp_remove(two);
  TptRun prof = tpt_run((const char *[]){ "profile", "-m", model, "--micro-batch-sizes", "1,2", NULL }); /* a layer alone: the
                                                                                          head's copy, untied */
  g_assert_cmpint(prof.status, ==, 0);
  tpt_run_clear(&r), tpt_run_clear(&rc), tpt_run_clear(&zb), tpt_run_clear(&prof);
  tpt_tmp_remove(model);
}

/* The two copies of a table tied across stages end the same bits: the embedding's on stage 1, the
 * head's on a later one (AdamW, whose state each stage keeps for its copy) — on another worker
 * (1f1b, W = 2) or on the same worker as the embedding's, a chunk later in its order (zb-v's V). */
static void test_tied_copies(gconstpointer data)
{
  const char *preset = data;
  g_autoptr(TpModel) m = tpt_model_text("tokens 16 256\nembedding 32 positions=learned\nrepeat 2 block heads=4 ffn=64 "
                                        "mlp=gelu norm=layernorm positions=none bias=1 dropout=1\nlayernorm\n"
                                        "lm_head tied=1\ntoken_ce\n");
  g_autoptr(TpSchedule) s = tp_schedule_generate_chunked(tp_preset_find(preset)->order, tp_preset_find(preset)->policy,
                                                         2, tp_order_default_chunks(tp_preset_find(preset)->order), 4,
                                                         5, NULL, NULL);
  TpDataset *data_set = tp_dataset_synthetic_tokens(64, 16, 5, 0);
  int bounds[5];
  TpRuntimeConfig cfg = tpt_even_config(m, data_set, 8, s, bounds);
  if (s->W == 2)
    bounds[1] = 2; /* the embedding and a block; the other block, the norm, the head and the loss */
  int h = tp_tie_stage(m, bounds, s->W);
  g_assert_cmpint(h, ==, s->W - 1);
  cfg.adamw = TRUE, cfg.lr = 0.01f, cfg.beta1 = 0.9f, cfg.beta2 = 0.999f, cfg.eps = 1e-8f, cfg.weight_decay = 0.1f;
  cfg.reduce = tp_reduce_local_new(1, s->W, 60);
  GError *err = NULL;
  size_t at = 0, at_h = 0, off0 = 0, n0 = 0, off1 = 0, n1 = 0, n, np0 = 0;
  for (int st = 0; st < s->W; st++) {
    TpNet *net = tp_net_new(m, bounds[st], bounds[st + 1], tp_backend_cpu(), &err);
    g_assert_no_error(err);
    g_assert_true(tp_net_tied_part(net, st ? &off1 : &off0, st ? &n1 : &n0) == (st == 0 || st == h));
    if (st == 0)
      np0 = tp_net_n_params(net);
    if (st == h)
      at_h = at;
    at += tp_net_n_params(net);
    tp_net_free(net);
  }
  g_assert_cmpuint(n0, ==, n1);
  g_assert_cmpuint(n0, ==, 256 * 32);
  TpRunResult res;
  g_autofree float *w = tpt_train(&cfg, s, &res, &n);
  g_assert_cmpuint(n, ==, at);
  const float *table = w + off0, *copy = w + at_h + off1;
  g_assert_cmpmem(table, n0 * sizeof(float), copy, n1 * sizeof(float));
  g_autofree float *w0 = g_new(float, np0);
  TpNet *emb = tp_net_new(m, 0, bounds[1], tp_backend_cpu(), &err);
  g_assert_true(tp_net_init_weights(emb, 11, w0, &err));
  g_assert_cmpfloat(tpt_rel_diff(table, w0 + off0, n0), >, 1e-3); /* they moved */
  tp_run_result_clear(&res);
  tp_net_free(emb);
  tp_reduce_free(cfg.reduce);
  tp_dataset_free(data_set);
}

/* The default corpus (the fortunes package), and a text file of one's own. */
static void test_text(void)
{
  g_autofree char *model = model_file();
  if (g_file_test("/usr/share/games/fortunes/fortunes", G_FILE_TEST_EXISTS)) {
    const char *args[] = { "train", "-m", model, "-w", "1", "-n", "1", "-k", "2", "--batch", "4", "--profile-reps", "1",
                           "--format", "json", "--quiet", NULL };
    TptRun r = tpt_run(args);
    g_assert_cmpint(r.status, ==, 0);
    g_assert_true(isfinite(tpt_json_num(r.out, "final_test_loss")));
    tpt_run_clear(&r);
  } else
    g_test_message("no default corpus here (the fortunes package): skipped that part");
  g_autofree char *text = tpt_tmp_path("corpus.txt");
  GString *t = g_string_new(NULL);
  for (int i = 0; i < 200; i++)
    g_string_append(t, "the quick brown fox jumps over the lazy dog. ");
  g_assert_true(g_file_set_contents(text, t->str, (gssize)t->len, NULL));
  g_string_free(t, TRUE);
  g_autofree char *spec = g_strconcat("text:", text, NULL);
  TptRun r = train(model, "1f1b", "2", spec);
  g_assert_true(isfinite(tpt_json_num(r.out, "final_test_loss")));
  g_assert_cmpfloat(tpt_json_num(r.out, "final_test_loss"), <, log(256.0)); /* a repeated sentence: learnt at once */
  tpt_run_clear(&r);
  tpt_tmp_remove(text);
  tpt_tmp_remove(model);
}

/* train on data refused: exit 2, one line naming want */
static void expect_refused(const char *model, const char *data, const char *want)
{
  tpt_expect_cli_refused((const char *[]){ "train", "-m", model, "-w", "1", "-n", "1", "-k", "1", "--batch", "2", "--data",
                                           data, NULL }, want);
}

static void test_refusals(void)
{
  g_autofree char *model = model_file(), *empty = tpt_tmp_path("empty.txt"), *shrt = tpt_tmp_path("short.txt");
  g_assert_true(g_file_set_contents(empty, "", 0, NULL));
  g_assert_true(g_file_set_contents(shrt, "too short for sixteen tokens", -1, NULL));
  g_autofree char *e = g_strconcat("text:", empty, NULL), *s = g_strconcat("text:", shrt, NULL);
  expect_refused(model, e, "no text");
  expect_refused(model, s, "too short for sequences of 16 tokens");
  expect_refused(model, "text:/nonexistent/corpus", "/nonexistent/corpus: no such text file");
  expect_refused(model, "synthetic:0", "bad value 'synthetic:0'");
  expect_refused(model, "/usr/share", "for a token model");
  g_autofree char *v100 = tpt_tmp_path("v100.model");
  g_assert_true(g_file_set_contents(v100, "tokens 16 100\nembedding 32\nblock heads=4 ffn=48\nlm_head\ntoken_ce\n", -1,
                                    NULL));
  expect_refused(v100, "synthetic", "vocabulary is 100 tokens; byte data has 256");
  /* a FIFO would block the read, a device never end it: refused before reading */
  g_autofree char *fifo = tpt_tmp_path("fifo");
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  g_autofree char *f = g_strconcat("text:", fifo, NULL);
  expect_refused(model, f, "not a regular file");
  expect_refused(model, "text:/dev/zero", "/dev/zero: not a regular file");
  /* a language model without its loss: named at its last line (the labels' check said 0..9) */
  g_autofree char *noce = tpt_tmp_path("noce.model");
  g_assert_true(g_file_set_contents(noce, "tokens 16 256\nembedding 32\nblock heads=4 ffn=48\nrmsnorm\nlm_head\n", -1,
                                    NULL));
  expect_refused(noce, "synthetic:64:16", "noce.model:5: training needs a loss last: token_ce");
  /* an option twice; a warm-up longer than the run (it was cut to the run, silently) */
  g_autofree char *twice = tpt_tmp_path("twice.model");
  g_assert_true(g_file_set_contents(twice, "tokens 16 256\nembedding 32\nblock heads=4 heads=2 ffn=48\nlm_head\n"
                                           "token_ce\n", -1, NULL));
  expect_refused(twice, "synthetic:64:16", "twice.model:3: block: option 'heads' given twice");
  tpt_expect_cli_refused((const char *[]){ "train", "-m", model, "--data", "synthetic:64:16", "-w", "1", "-n", "1", "-k",
                                           "4", "--batch", "4", "--optimizer", "adamw", "--lr-schedule",
                                           "warmup-cosine", "--warmup", "5", NULL }, "--warmup 5: longer than the run's 4");
  /* the memory a long context needs counts its attention probabilities (the estimate was 35 times low),
   * and the test set's evaluation in chunks of 16 sequences, whose scratch stays (it was left out) */
  g_autofree char *c4k = tpt_tmp_path("c4k.model");
  g_assert_true(g_file_set_contents(c4k, "tokens 4096 256\nembedding 32\nblock heads=4 ffn=64\nrmsnorm\nlm_head\n"
                                         "token_ce\n", -1, NULL));
  g_setenv("TP_MEMORY_LIMIT", "500M", TRUE);
  expect_refused(c4k, "synthetic:64:16", "training c4k with mini-batches of 2 needs about 1.38 GB");
  g_unsetenv("TP_MEMORY_LIMIT");
  tpt_tmp_remove(fifo), tpt_tmp_remove(noce), tpt_tmp_remove(twice), tpt_tmp_remove(c4k);
  tpt_tmp_remove(v100), tpt_tmp_remove(empty), tpt_tmp_remove(shrt), tpt_tmp_remove(model);
}

/* A resumed run's report against the uninterrupted run's, field by field: what counts and what the
 * training computed exactly; its time is the stopped part's carried over and the rest's added (more
 * than the part's alone, which a time not carried over could not pass: the rest is a sixth of the
 * run), and its rates are the whole run's samples and tokens over that time.  No bound on a time
 * itself: the machine is shared. */
static void expect_same_report(const char *whole, double t_part, const char *resumed, double samples,
                               double tokens_per_sample)
{
  const char *exact[] = { "weights_sha256", "mini_batches", "epochs", "first_train_loss", "final_train_loss",
                          "final_test_loss", "final_test_accuracy", "train_loss", "test_accuracy", "versions_match",
                          "mismatched_reads", "schedule_sha256", "optimizer", "warmup", "lr_schedule" };
  for (guint i = 0; i < G_N_ELEMENTS(exact); i++) {
    g_autofree char *x = tpt_json_value(whole, exact[i]), *y = tpt_json_value(resumed, exact[i]);
    g_assert_nonnull(x);
    if (g_strcmp0(x, y) != 0)
      g_error("%s: %s uninterrupted, %s resumed", exact[i], x, y ? y : "(absent)");
  }
  double t = tpt_json_num(resumed, "train_time");
  g_test_message("train_time: %g stopped part, %g resumed", t_part, t);
  g_assert_cmpfloat(t_part, >, 0);
  g_assert_cmpfloat(t, >, t_part);
  g_assert_cmpfloat(fabs(tpt_json_num(resumed, "samples_per_second") * t - samples), <, 1e-6 * samples);
  g_assert_cmpfloat(fabs(tpt_json_num(resumed, "tokens_per_second") * t - samples * tokens_per_sample), <,
                    1e-6 * samples * tokens_per_sample);
}

/* AdamW's state lives with the latest weights and travels in checkpoints: a run stopped after 10 of 12
 * mini-batches and resumed ends with the uninterrupted run's weights, bit for bit, and reports what
 * the uninterrupted run reports; it lowers the
 * loss where SGD at its default barely moves it; and AdamW's flags are refused with SGD. */
static void test_adamw_resume(void)
{
  g_autofree char *model = model_file(), *dir = tpt_tmp_dir("tp-adamw-ck"), *dir1 = tpt_tmp_dir("tp-adamw-whole");
  const char *base[] = { "train", "-m", model, "-s", "1f1b", "-w", "2", "-n", "2", "-k", "12", "--batch", "8", "--data",
                         "synthetic:256:32", "--optimizer", "adamw", "--lr", "3e-3", "--beta2", "0.95",
                         "--lr-schedule", "warmup-cosine", "--warmup", "2", "--checkpoint-every", "2",
                         "--profile-reps", "1", "--format", "json", "--quiet" };
  TptRun whole = tpt_run_more(base, G_N_ELEMENTS(base), (const char *[]){ "--checkpoint", dir1, NULL });
  g_assert_cmpint(whole.status, ==, 0);
  g_assert_cmpfloat(tpt_json_num(whole.out, "final_train_loss"), <, tpt_json_num(whole.out, "first_train_loss") - 0.1);
  TptRun part = tpt_run_more(base, G_N_ELEMENTS(base), (const char *[]){ "--checkpoint", dir, "--stop-after", "10", NULL });
  g_assert_cmpint(part.status, ==, 0);
  g_autoptr(GKeyFile) ck = g_key_file_new();
  g_autofree char *ini = g_build_filename(dir, "checkpoint.ini", NULL);
  g_assert_true(g_key_file_load_from_file(ck, ini, G_KEY_FILE_NONE, NULL));
  double t_part = g_key_file_get_double(ck, "results", "train_time", NULL);
  TptRun rest = tpt_run_more(base, G_N_ELEMENTS(base), (const char *[]){ "--resume", dir, NULL });
  if (rest.status != 0)
    g_printerr("%s", rest.err);
  g_assert_cmpint(rest.status, ==, 0);
  g_autofree char *a = tpt_json_value(whole.out, "weights_sha256"), *b = tpt_json_value(rest.out, "weights_sha256");
  g_assert_cmpstr(a, ==, b);
  expect_same_report(whole.out, t_part, rest.out, 12 * 8, 16);
  /* resuming with SGD, or other betas, is refused in one line */
  const char *sgd[] = { "train", "-m", model, "-s", "1f1b", "-w", "2", "-n", "2", "-k", "12", "--batch", "8", "--data",
                        "synthetic:256:32", "--checkpoint-every", "2", "--resume", dir, "--quiet", NULL };
  TptRun r = tpt_run(sgd);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  tpt_run_clear(&r);
  tpt_run_clear(&whole), tpt_run_clear(&part), tpt_run_clear(&rest);
  tpt_expect_cli_refused((const char *[]){ "train", "--beta1", "0.8", NULL }, "--beta1: AdamW's");
  tpt_expect_cli_refused((const char *[]){ "train", "--optimizer", "adamw", "--momentum", "0.8", NULL }, "--momentum: SGD's");
  tpt_expect_cli_refused((const char *[]){ "train", "--warmup", "3", NULL }, "--warmup: only with");
  tpt_expect_cli_refused((const char *[]){ "train", "--optimizer", "adam", NULL }, "--optimizer");
  tpt_rm_tree(dir), tpt_rm_tree(dir1);
  tpt_tmp_remove(model);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/token-train/split-same", test_split_same);
  g_test_add_func("/token-train/split-and-recompute", test_split_and_recompute);
  g_test_add_func("/token-train/timeprest", test_timeprest_trains);
  g_test_add_func("/token-train/dropout", test_dropout_trains);
  g_test_add_func("/token-train/tied", test_tied_trains);
  g_test_add_data_func("/token-train/tied-copies/1f1b", "1f1b", test_tied_copies);
  g_test_add_data_func("/token-train/tied-copies/zb-v", "zb-v", test_tied_copies);
  g_test_add_func("/token-train/text", test_text);
  g_test_add_func("/token-train/refusals", test_refusals);
  g_test_add_func("/token-train/adamw-resume", test_adamw_resume);
  return g_test_run();
}
