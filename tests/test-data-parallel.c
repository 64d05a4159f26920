/* test-data-parallel.c — data parallelism in one process (`train --data-parallel D`): the in-process
 * reduction (the mean in replica order, the same bits for every replica, an abort and a missing
 * replica ending the wait), D replicas of N micro-batches against one pipeline of D·N (the same
 * mathematics, dropout included), the prediction's all-reduce the reduction timed before training,
 * replicas bit-identical under every kind of weight policy, stop and resume, and the refusals. */
#include "tp_test.h"

#include "tp_backend.h"
#include "tp_error.h"
#include "tp_reduce.h"

#include <math.h>

/* ---- the reduction ------------------------------------------------------------------------------ */

typedef struct {
  TpReduce *r;
  int replica;
  float grad[5];
  gboolean ok;
  GError *err;
} Part;

static gpointer part_main(gpointer data)
{
  Part *p = data;
  p->ok = p->r->iface->mean(p->r, 1, p->replica, 7, tp_backend_cpu(), p->grad, G_N_ELEMENTS(p->grad), &p->err);
  return NULL;
}

static void test_reduce_mean(void)
{
  enum { D = 3 };
  TpReduce *r = tp_reduce_local_new(D, 2, 10);
  Part p[D];
  GThread *th[D];
  for (int k = 0; k < D; k++) {
    p[k] = (Part){ .r = r, .replica = k };
    for (int i = 0; i < 5; i++)
      p[k].grad[i] = (float)((k + 1) * 0.1 + i * 1e-3) * (k == 2 ? 1e4f : 1.0f);
  }
  for (int round = 0; round < 2; round++) { /* the rendezvous is reused, update after update */
    float want[5];
    for (int i = 0; i < 5; i++)
      want[i] = ((p[0].grad[i] + p[1].grad[i]) + p[2].grad[i]) / 3.0f; /* replica order */
    for (int k = 0; k < D; k++)
      th[k] = g_thread_new("part", part_main, &p[k]);
    for (int k = 0; k < D; k++)
      g_thread_join(th[k]);
    for (int k = 0; k < D; k++) {
      g_assert_no_error(p[k].err);
      g_assert_true(p[k].ok);
      g_assert_cmpmem(p[k].grad, sizeof want, want, sizeof want);
    }
  }
  tp_reduce_free(r);
}

static void test_reduce_abort_and_timeout(void)
{
  /* one replica waits; another's failure ends its wait with the reason */
  TpReduce *r = tp_reduce_local_new(2, 2, 30);
  Part p = { .r = r, .replica = 0 };
  GThread *th = g_thread_new("part", part_main, &p);
  g_usleep(100000);
  r->iface->abort(r, "stage 2: the loss is NaN");
  g_thread_join(th);
  g_assert_false(p.ok);
  g_assert_error(p.err, TP_ERROR, TP_ERROR_RUNTIME);
  g_assert_nonnull(strstr(p.err->message, "another replica failed (stage 2: the loss is NaN)"));
  g_assert_nonnull(strstr(p.err->message, "mini-batch 7"));
  g_clear_error(&p.err);
  /* a replica that comes after the abort fails too, with the reason (its stage reports an error) */
  p = (Part){ .r = r, .replica = 1 };
  part_main(&p);
  g_assert_false(p.ok);
  g_assert_error(p.err, TP_ERROR, TP_ERROR_RUNTIME);
  g_assert_nonnull(strstr(p.err->message, "stage 2, replica 2: another replica failed (stage 2: the loss is NaN)"));
  g_clear_error(&p.err);
  tp_reduce_free(r);
  /* a replica that never comes: the wait ends after the timeout, naming the stage and replica */
  r = tp_reduce_local_new(2, 2, 0.2);
  p = (Part){ .r = r, .replica = 1 };
  part_main(&p);
  g_assert_false(p.ok);
  g_assert_nonnull(strstr(p.err->message, "stage 2, replica 2: the other replicas did not come"));
  g_clear_error(&p.err);
  tp_reduce_free(r);
}

/* ---- training ----------------------------------------------------------------------------------- */

/* `train ARGS -k K --batch 64 --order-from slots --quiet --format json` on synthetic or real data. */
static char *train_json(const char *const *args, const char *k)
{
  const char *base[] = { "train", "-k", k, "--batch", "64", "--order-from", "slots", "--quiet", "--format", "json",
                         "--data", "synthetic:512:128" };
  TptRun r = tpt_run_more(base, G_N_ELEMENTS(base), args);
  if (r.status != 0)
    g_error("train failed (%d): %s", r.status, r.err);
  char *out = g_steal_pointer(&r.out);
  tpt_run_clear(&r);
  return out;
}

static void assert_close(const char *what, double a, double b, double tol)
{
  if (!(fabs(a - b) <= tol * fabs(b)))
    g_error("%s: %.9g with replicas, %.9g in one pipeline (tolerance %g relative)", what, a, b, tol);
}

/* D replicas of N micro-batches are one pipeline of D·N: each replica's micro-batches are the
 * pipeline's, in order, and the mean of the replicas' means is the mean over the mini-batch.  Only
 * the order of the sums differs: 1e-5 relative. */
static void test_equals_one_pipeline(gconstpointer model)
{
  const char *two[] = { "-s", "gpipe", "-w", "2", "-n", "2", "--data-parallel", "2", "-m", model, NULL };
  const char *one[] = { "-s", "gpipe", "-w", "2", "-n", "4", "-m", model, NULL };
  g_autofree char *a = train_json(two, "12"), *b = train_json(one, "12");
  assert_close("final train loss", tpt_json_num(a, "final_train_loss"), tpt_json_num(b, "final_train_loss"), 1e-5);
  assert_close("test loss", tpt_json_num(a, "final_test_loss"), tpt_json_num(b, "final_test_loss"), 1e-5);
  g_assert_nonnull(strstr(a, "\"data_parallel\": 2, \"replicas_identical\": true"));
  tpt_assert_allreduce_fed(a, 2);
  g_assert_null(strstr(b, "data_parallel")); /* one pipeline's report is as before */
  g_assert_null(strstr(b, "allreduce"));
}

/* The same with dropout: each replica's micro-batches draw the masks the pipeline's draw. */
static void test_dropout_equals_one_pipeline(void)
{
  g_autofree char *path = tpt_tmp_path("mlp-dropout.model");
  g_assert_true(g_file_set_contents(path, "name mlp-dropout\ninput 1 28 28\nflatten\nlinear 64\nrelu\ndropout\n"
                                          "linear 32\nrelu\nlinear 10\nsoftmax_ce\n", -1, NULL));
  test_equals_one_pipeline(path);
  tpt_tmp_remove(path);
}

/* The replicas stay bit-identical whatever the schedule: every update uses the same mean. */
static void test_identical(gconstpointer preset)
{
  const char *args[] = { "-s", preset, "-w", "2", "-n", "2", "--data-parallel", "2", NULL };
  g_autofree char *a = train_json(args, "10");
  if (!strstr(a, "\"replicas_identical\": true"))
    g_error("%s: the replicas differ:\n%s", (const char *)preset, a);
  const char *rc[] = { "-s", preset, "-w", "2", "-n", "2", "--data-parallel", "3", "--batch", "96", "--recompute", NULL };
  if (strcmp(preset, "zb-h1") != 0) { /* a split backward runs without recomputation */
    g_autofree char *c = train_json(rc, "6");
    g_assert_nonnull(strstr(c, "\"replicas_identical\": true"));
  }
}

/* Batchnorm's running statistics: each replica moves its own, and at a segment's end they become the
 * replicas' mean, so the replicas are identical there, buffers included. */
/* One stage per replica fits the cores: the plan times every replica at once (their updates on the
 * reduction too), and the run goes on from the same state. */
static void test_profile_replicas(void)
{
  const char *args[] = { "-s", "timeprest", "-w", "1", "-n", "2", "--data-parallel", "2", "--order-from", "costs", NULL };
  const char *base[] = { "train", "-k", "6", "--batch", "64", "--quiet", "--format", "json", "--data",
                         "synthetic:512:128" };
  TptRun r = tpt_run_more(base, G_N_ELEMENTS(base), args);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\"replicas_identical\": true"));
  g_assert_cmpfloat(tpt_json_num(r.out, "samples_per_second"), >, 0);
  tpt_assert_allreduce_fed(r.out, 1);
  tpt_run_clear(&r);
}

static void test_identical_batchnorm(void)
{
  const char *args[] = { "-s", "timeprest", "-w", "2", "-n", "2", "--data-parallel", "2", "-m", "resnet-fmnist", NULL };
  g_autofree char *a = train_json(args, "4");
  if (!strstr(a, "\"replicas_identical\": true"))
    g_error("the replicas differ:\n%s", a);
}

/* Stopped at a segment's end and resumed: the uninterrupted run's weights; a checkpoint of two
 * replicas is no one pipeline's. */
static void test_resume(void)
{
  g_autofree char *dir = tpt_tmp_dir("tp-dp"), *ck = g_build_filename(dir, "ck", NULL);
  g_autofree char *ck_whole = g_build_filename(dir, "whole", NULL);
  const char *whole[] = { "-s", "gpipe", "-w", "2", "-n", "2", "--data-parallel", "2", "--checkpoint-every", "4",
                          "--checkpoint", ck_whole, NULL };
  const char *stop[] = { "-s", "gpipe", "-w", "2", "-n", "2", "--data-parallel", "2", "--checkpoint-every", "4",
                         "--checkpoint", ck, "--stop-after", "4", NULL };
  const char *resume[] = { "-s", "gpipe", "-w", "2", "-n", "2", "--data-parallel", "2", "--checkpoint-every", "4",
                           "--resume", ck, NULL };
  g_autofree char *a = train_json(whole, "8");
  const char *base[] = { "train", "-k", "8", "--batch", "64", "--order-from", "slots", "--quiet", "--format", "json",
                         "--data", "synthetic:512:128" };
  TptRun r = tpt_run_more(base, G_N_ELEMENTS(base), stop);
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  g_autofree char *b = train_json(resume, "8");
  g_autofree char *wa = tpt_json_value(a, "weights_sha256"), *wb = tpt_json_value(b, "weights_sha256");
  g_assert_cmpstr(wa, ==, wb);
  const char *one[] = { "-s", "gpipe", "-w", "2", "-n", "2", "--checkpoint-every", "4", "--resume", ck, NULL };
  r = tpt_run_more(base, G_N_ELEMENTS(base), one);
  g_assert_cmpint(r.status, ==, 2);
  if (!strstr(r.err, "data_parallel '2' there, '(none)' here"))
    g_error("%s", r.err);
  tpt_run_clear(&r);
  tpt_rm_tree(dir);
}

/* A stop inside a segment (--stop-after, no --checkpoint-every: the run is one segment) cuts every
 * replica at the same mini-batch; resumed, a flush schedule ends with the uninterrupted run's weights. */
static void test_cut(void)
{
  g_autofree char *dir = tpt_tmp_dir("tp-dp-cut"), *ck = g_build_filename(dir, "ck", NULL);
  const char *whole[] = { "-s", "gpipe", "-w", "2", "-n", "2", "--data-parallel", "2", NULL };
  const char *stop[] = { "-s", "gpipe", "-w", "2", "-n", "2", "--data-parallel", "2", "--checkpoint", ck,
                         "--stop-after", "3", NULL };
  const char *resume[] = { "-s", "gpipe", "-w", "2", "-n", "2", "--data-parallel", "2", "--resume", ck, NULL };
  g_autofree char *a = train_json(whole, "8");
  const char *base[] = { "train", "-k", "8", "--batch", "64", "--order-from", "slots", "--quiet", "--format", "json",
                         "--data", "synthetic:512:128" };
  TptRun r = tpt_run_more(base, G_N_ELEMENTS(base), stop);
  g_assert_cmpint(r.status, ==, 0);
  if (!strstr(r.err, "mini-batch 3 written"))
    g_error("the stop is not where --stop-after put it: %s", r.err);
  tpt_run_clear(&r);
  g_autofree char *b = train_json(resume, "8");
  g_autofree char *wa = tpt_json_value(a, "weights_sha256"), *wb = tpt_json_value(b, "weights_sha256");
  g_assert_cmpstr(wa, ==, wb);
  tpt_rm_tree(dir);
}

static void test_refusals(void)
{
  const char *base[] = { "train", "-s", "gpipe", "-w", "2", "-n", "2", "-k", "2", "--data", "synthetic", "--quiet" };
  const char *uneven[] = { "--batch", "128", "--data-parallel", "3", NULL };
  TptRun r = tpt_run_more(base, G_N_ELEMENTS(base), uneven);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "--data-parallel 3: 3 replicas of 2 micro-batches each do not divide the batch of 128"));
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  tpt_run_clear(&r);
  const char *zero[] = { "--data-parallel", "0", NULL };
  r = tpt_run_more(base, G_N_ELEMENTS(base), zero);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "--data-parallel"));
  tpt_run_clear(&r);
}

/* A replica that fails mid-run (the loss NaN) ends the run with its reason, the other replicas'
 * stages reaching their update after the abort included (they failed without an error: a crash). */
static void test_replica_fails(void)
{
  const char *base[] = { "train", "-s", "timeprest", "-w", "2", "-n", "2", "-k", "20", "--batch", "64", "--data",
                         "synthetic:512:128", "--quiet", "--lr", "1e6" };
  const char *dp[] = { "--data-parallel", "2", NULL };
  for (int i = 0; i < 3; i++) {
    TptRun r = tpt_run_more(base, G_N_ELEMENTS(base), dp);
    if (r.status != 1 || !strstr(r.err, "the loss is NaN"))
      g_error("exit %d: %s", r.status, r.err);
    tpt_run_clear(&r);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/data-parallel/reduce/mean", test_reduce_mean);
  g_test_add_func("/data-parallel/reduce/abort-and-timeout", test_reduce_abort_and_timeout);
  g_test_add_data_func("/data-parallel/equals-one-pipeline/mlp", "mlp", test_equals_one_pipeline);
  g_test_add_func("/data-parallel/equals-one-pipeline/dropout", test_dropout_equals_one_pipeline);
  const char *presets[] = { "gpipe", "1f1b", "pipedream", "pipedream-2bw", "timeprest", "v-timeprest", "i-timeprest",
                            "zb-h1" };
  for (size_t i = 0; i < G_N_ELEMENTS(presets); i++) {
    g_autofree char *path = g_strdup_printf("/data-parallel/identical/%s", presets[i]);
    g_test_add_data_func(path, presets[i], test_identical);
  }
  g_test_add_func("/data-parallel/resume", test_resume);
  g_test_add_func("/data-parallel/cut", test_cut);
  g_test_add_func("/data-parallel/identical/batchnorm", test_identical_batchnorm);
  g_test_add_func("/data-parallel/profile-replicas", test_profile_replicas);
  g_test_add_func("/data-parallel/refusals", test_refusals);
  g_test_add_func("/data-parallel/replica-fails", test_replica_fails);
  return g_test_run();
}
