/* test-profile.c — the measured profile's file: round trip, malformed files refused with
 * file:line, the threads it was taken with, and through the program (a measured profile drives
 * simulate and plan --run-top; a micro-batch size not profiled is named). */
#include "config.h"
#include "tp_test.h"
#include "tp_test_profile.h"
#include "tp_analytic.h"

#include <json-glib/json-glib.h>

static void test_profile_roundtrip(void)
{
  g_autoptr(TpModel) m = tpt_model("mlp-deep");
  g_autoptr(TpProfile) p = synthetic_profile(m, 64, 2, 3.5e9);
  g_autofree char *text = profile_text(p);
  GError *err = NULL;
  g_autoptr(TpProfile) q = tp_profile_parse(text, strlen(text), "a.profile", &err);
  g_assert_no_error(err);
  g_assert_cmpint(q->format_version, ==, TP_PROFILE_FORMAT_VERSION);
  g_assert_cmpstr(q->model, ==, p->model);
  g_assert_cmpstr(q->backend, ==, "cpu");
  g_assert_cmpstr(q->machine, ==, "test machine");
  g_assert_cmpint(q->cores, ==, 2);
  g_assert_cmpint(q->threads, ==, 1);
  g_assert_cmpint(q->repetitions, ==, 3);
  assert_close(q->memory, 3.5e9);
  g_assert_cmpint(q->n_sizes, ==, p->n_sizes);
  g_assert_cmpint(q->L, ==, p->L);
  for (int k = 0; k < p->n_sizes; k++)
    g_assert_cmpint(q->sizes[k], ==, p->sizes[k]);
  for (int i = 0; i < p->L; i++) {
    const TpProfileLayer *a = &p->layer[i], *b = &q->layer[i];
    g_assert_cmpstr(a->kind, ==, b->kind);
    assert_close(a->weight_bytes, b->weight_bytes);
    assert_close(a->out_bytes, b->out_bytes);
    assert_close(a->in_bytes, b->in_bytes);
    assert_close(a->stored_bytes, b->stored_bytes);
    assert_close(a->upd, b->upd);
    assert_close(a->upd_spread, b->upd_spread);
    for (int k = 0; k < p->n_sizes; k++) {
      assert_close(a->fwd[k], b->fwd[k]);
      assert_close(a->bwd[k], b->bwd[k]);
      assert_close(a->fwd_spread[k], b->fwd_spread[k]);
      assert_close(a->bwd_spread[k], b->bwd_spread[k]);
    }
  }
  /* the same text again: formatting is a function of the profile */
  g_autofree char *again = profile_text(q);
  g_assert_cmpstr(text, ==, again);
  g_assert_true(tp_profile_check_model(q, m, &err));
  g_autoptr(TpModel) other = tpt_model("mlp");
  g_assert_false(tp_profile_check_model(q, other, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_clear_error(&err);
}

static void test_profile_malformed(void)
{
  g_autoptr(TpModel) m = tpt_model("mlp");
  g_autoptr(TpProfile) p = synthetic_profile(m, 4, 2, 1e9);
  g_autofree char *text = profile_text(p);
  struct {
    const char *from, *to, *key;
  } cases[] = {
    { "format_version=2", "format_version=3", "format_version=3" },
    { "forward=", "forward=x, ", "forward=x" },
    { "backward=", "backward=1, ", "backward=1" },
    { "output_bytes_per_sample=", "output_bytes_per_sample=-", "output_bytes_per_sample=-" },
    { "micro_batch_sizes=1, 2, 4", "micro_batch_sizes=1, 4, 2", "micro_batch_sizes=" },
    { "cores=2", "cores=2\ncolour=red", "colour=red" },
    { "update=", "update=1e99", "update=1e99" },
    { "cores=2", "cores=1.5", "cores=1.5" },
    { "backend=cpu", "backend=c\"pu", "backend=c" },
    { "machine=test machine", "machine=a\\nb", "machine=a" },
    { "cores=2", "cores=2\ncores=3", "cores=3" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *bad = edit(text, cases[i].from, cases[i].to);
    g_autofree char *where = g_strdup_printf("bad.profile:%d: ", line_of(bad, cases[i].key));
    expect_refused(bad, where);
  }
  /* a missing layer group, an unknown group, a line that is no key file's, no [profile] */
  g_autofree char *no_layer = edit(text, "[layer.2]", "[extra]");
  expect_refused(no_layer, "no [layer.2]");
  g_autofree char *junk = edit(text, "[layer.1]", "[layer.1]\nnot a key");
  g_autofree char *junk_at = g_strdup_printf("bad.profile:%d: ", line_of(junk, "not a key"));
  expect_refused(junk, junk_at);
  expect_refused("[cost]\nx=1\n", "no [profile] group");
  /* every time 0 (a model too small for the clock): a run of no time, refused as a cost file's */
  for (int i = 0; i < p->L; i++)
    for (int k = 0; k < p->n_sizes; k++)
      p->layer[i].fwd[k] = p->layer[i].bwd[k] = 0;
  g_autofree char *idle = profile_text(p);
  expect_refused(idle, "every forward and backward time is 0");
  p->layer[p->L - 1].bwd[0] = 1e-9;
  g_autofree char *busy = profile_text(p);
  GError *err = NULL;
  g_autoptr(TpProfile) q = tp_profile_parse(busy, strlen(busy), "busy.profile", &err);
  g_assert_no_error(err);
}

/* profile --threads T: the file says the threads it was taken with; a backend without threads
 * refuses the flag in one line. */
static void test_profile_threads(void)
{
  g_autofree char *path = tpt_tmp_path("mlp-t2.profile");
  TptRun r = tpt_run((const char *const[]){ "profile", "--model", "mlp", "--micro-batch-sizes", "2", "-r", "1",
                                            "--threads", "2", "-o", path, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  GError *err = NULL;
  g_autoptr(TpProfile) p = tp_profile_load(path, &err);
  g_assert_no_error(err);
  g_assert_cmpint(p->threads, ==, 2);
  r = tpt_run((const char *const[]){ "profile", "--backend", "cuda", "--threads", "2", NULL });
  g_assert_cmpint(r.status, ==, 2);
#ifdef HAVE_CUDA
  g_assert_cmpstr(r.err, ==, "timeprest profile: --threads: backend cuda has no threads per call to set\n");
#else /* a build without CUDA refuses the backend first */
  g_assert_cmpstr(r.err, ==, "timeprest profile: --backend cuda: this build has no CUDA support\n");
#endif
  g_assert_cmpstr(r.out, ==, "");
  tpt_run_clear(&r);
}

/* Through the program: a malformed profile is exit 2 naming file:line; a measured one round-trips
 * and drives simulate; a micro-batch size not profiled is named. */
static void test_profile_program(void)
{
  g_autofree char *path = tpt_tmp_path("mlp.profile");
  TptRun r = tpt_run((const char *const[]){ "profile", "--model", "mlp", "--micro-batch-sizes", "4,2", "-r", "2", "-o",
                                            path, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.err, "spread"));
  tpt_run_clear(&r);
  GError *err = NULL;
  g_autoptr(TpProfile) p = tp_profile_load(path, &err);
  g_assert_no_error(err);
  g_autoptr(TpModel) m = tpt_model("mlp");
  g_assert_true(tp_profile_check_model(p, m, &err));
  g_assert_cmpint(p->n_sizes, ==, 2);
  g_assert_cmpint(p->sizes[0], ==, 2);
  g_assert_cmpint(p->repetitions, ==, 2);
  g_assert_cmpint(p->threads, ==, 1);
  double total = 0, params = 0;
  for (int i = 0; i < p->L; i++)
    total += p->layer[i].fwd[1] + p->layer[i].bwd[1], params += p->layer[i].weight_bytes / 4;
  g_assert_cmpfloat(total, >, 0);
  g_assert_cmpfloat(params, ==, (double)m->params);
  r = tpt_run((const char *const[]){ "simulate", "-s", "timeprest", "-w", "2", "-n", "2", "--batch", "8", "--model",
                                     "mlp", "--profile", path, "--format", "json", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\"makespan\""));
  tpt_run_clear(&r);
  r = tpt_run((const char *const[]){ "simulate", "-w", "2", "-n", "2", "--batch", "12", "--model", "mlp",
                                     "--profile", path, NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "no micro-batch of 6 samples"));
  tpt_run_clear(&r);
  /* --run-top: the best two trained by train --split, measured beside predicted */
  r = tpt_run((const char *const[]){ "plan", "--model", "mlp", "--profile", path, "--batch", "8", "-w", "1-2", "-n",
                                     "2-4", "--presets", "gpipe,1f1b", "--run-top", "2", "--run-mini-batches", "6",
                                     "--format", "json", NULL });
  g_assert_cmpint(r.status, ==, 0);
  {
    g_autoptr(JsonParser) parser = json_parser_new();
    g_assert_true(json_parser_load_from_data(parser, r.out, -1, &err));
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));
    JsonArray *plans = json_object_get_array_member(o, "plans");
    g_assert_cmpuint(json_array_get_length(plans), >=, 2);
    for (guint i = 0; i < json_array_get_length(plans); i++) {
      JsonObject *pl = json_array_get_object_element(plans, i);
      g_assert_true(json_object_has_member(pl, "measured") == (i < 2));
      if (i < 2) {
        double t = json_object_get_double_member(json_object_get_object_member(pl, "measured"), "time_per_mini_batch");
        g_assert_cmpfloat(t, >, 0);
        g_assert_true(json_object_has_member(pl, "error"));
      }
    }
    double tau = json_object_get_double_member(o, "kendall_tau");
    g_assert_cmpfloat(fabs(tau), <=, 1);
    g_assert_true(json_object_has_member(o, "top_choice_confirmed"));
  }
  tpt_run_clear(&r);
  /* train --split: the layers per stage as given, their sum checked */
  r = tpt_run((const char *const[]){ "train", "-s", "gpipe", "-w", "2", "-n", "2", "--batch", "8", "-k", "2", "--model",
                                     "mlp", "--data", "synthetic", "--split", "1,99", "--quiet", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "--split: the stages get 100 layers"));
  tpt_run_clear(&r);
  /* broken: exit 2 with file:line */
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_autofree char *bad = edit(text, "backward=", "backward=oops, ");
  g_assert_true(g_file_set_contents(path, bad, -1, NULL));
  g_autofree char *where = g_strdup_printf("mlp.profile:%d: [layer.1] backward", line_of(bad, "backward=oops"));
  r = tpt_run((const char *const[]){ "plan", "--model", "mlp", "--profile", path, "--batch", "8", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, where));
  g_assert_cmpstr(r.out, ==, "");
  tpt_run_clear(&r);
  tpt_tmp_remove(path);
}

/* A profile's bytes make the cost model's messages, stored activations and weights as the model's
 * own sizes do: a synthetic profile carries cnn's sizes, so at every split the stages' numbers equal
 * the roofline model's (a profile's input bytes read as its output bytes doubled cnn's gradient
 * messages at W = 3 and 4, and every profile test agreed with itself). */
static void test_profile_bytes(void)
{
  g_autoptr(TpModel) m = tpt_model("cnn");
  g_autoptr(TpProfile) p = synthetic_profile(m, 32, 8, 1e12);
  GError *err = NULL;
  g_autoptr(TpCluster) c = tp_cluster_load("h200", &err);
  g_assert_no_error(err);
  const int splits[][4] = { { 6, 5 }, { 4, 4, 3 }, { 3, 3, 3, 2 } };
  for (int W = 2; W <= 4; W++) {
    g_autoptr(TpAnalytic) fromp = tp_analytic_new_on(m, NULL, p, W, 4, 32, TRUE, &err);
    g_assert_no_error(err);
    g_autoptr(TpAnalytic) fromm = tp_analytic_new_on(m, c, NULL, W, 4, 32, TRUE, &err);
    g_assert_no_error(err);
    g_assert_true(tp_analytic_split(fromp, splits[W - 2], NULL, NULL, &err));
    g_assert_true(tp_analytic_split(fromm, splits[W - 2], NULL, NULL, &err));
    TpCost *a = tp_analytic_cost(fromp), *b = tp_analytic_cost(fromm);
    for (int s = 0; s < W; s++) {
      g_assert_cmpfloat(a->stage[s].act_bytes, ==, b->stage[s].act_bytes);
      g_assert_cmpfloat(a->stage[s].grad_bytes, ==, b->stage[s].grad_bytes);
      g_assert_cmpfloat(a->stage[s].stored_bytes, ==, b->stage[s].stored_bytes);
      g_assert_cmpfloat(a->stage[s].weight_bytes, ==, b->stage[s].weight_bytes);
    }
    tp_cost_free(a);
    tp_cost_free(b);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/profile/roundtrip", test_profile_roundtrip);
  g_test_add_func("/profile/malformed", test_profile_malformed);
  g_test_add_func("/profile/program", test_profile_program);
  g_test_add_func("/profile/threads", test_profile_threads);
  g_test_add_func("/profile/bytes", test_profile_bytes);
  return g_test_run();
}
