/* test-train.c — real training by schedules through the runtime, small and on synthetic data: the
 * flush schedules on W stages reach the weights of one stage; the asynchronous ones read exactly the
 * versions their schedule names and keep exactly the versions and activations the simulator counts;
 * I-TiMePReSt's blend at its ends; a cosine rate against plain SGD; the measured timeline against the
 * simulator's; a cut run against its schedule's prefix.  The train command as a user runs it: tests/test-train-program.c. */
#include "tp_cost.h"
#include "tp_events.h"
#include "tp_metrics.h"
#include "tp_net.h"
#include "tp_predict.h"
#include "tp_report.h"
#include "tp_runtime.h"
#include "tp_sim.h"
#include "tp_test.h"
#include "tp_test_run.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>

enum { BATCH = 32, K_RUN = 20, TRAIN_N = 1024 };

typedef struct {
  TpModel *model;
  TpDataset *train;
} Fixture;

static Fixture fx;
static long lr_steps; /* > 0: train() and reference_sgd() decay the learning rate by a cosine */

/* The layers of mlp split evenly by count (a stage may hold only the flatten: no parameters). */
static void even_bounds(int L, int W, int *b)
{
  for (int s = 0; s <= W; s++)
    b[s] = s * L / W;
}

/* Train K mini-batches of the data's seeded order with schedule s; returns every stage's weights,
 * concatenated in stage order, and the run's record in *res. */
static float *train(const TpSchedule *s, TpRunResult *res, size_t *n_out)
{
  int W = s->W, L = tp_model_n_layers(fx.model);
  int *bounds = g_new(int, W + 1);
  even_bounds(L, W, bounds);
  TpRuntimeConfig cfg = { .model = fx.model, .bounds = bounds, .W = W, .N = s->N, .batch = BATCH, .be = tp_backend_cpu(),
                          .train = fx.train, .lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f, .seed = 7,
                          .timeout_s = 60, .lr_steps = lr_steps, .recompute = s->recompute };
  float *w = tpt_train(&cfg, s, res, n_out);
  g_free(bounds);
  return w;
}

/* train() with a progress whose cut_before may cut the run. */
static float *train_progress(const TpSchedule *s, TpProgress *prog, TpRunResult *res, size_t *n_out)
{
  int W = s->W, L = tp_model_n_layers(fx.model);
  g_autofree int *bounds = g_new(int, W + 1);
  even_bounds(L, W, bounds);
  TpRuntimeConfig cfg = { .model = fx.model, .bounds = bounds, .W = W, .N = s->N, .batch = BATCH, .be = tp_backend_cpu(),
                          .train = fx.train, .lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f, .seed = 7,
                          .timeout_s = 60, .lr_steps = lr_steps, .recompute = s->recompute,
                          .split_backward = tp_schedule_has_split(s) };
  return tpt_train_progress(&cfg, s, prog, res, n_out);
}

/* Plain mini-batch SGD computed here, without the runtime: the whole model as one network, the
 * whole mini-batch at once, the same seeds and data order as train(). */
static float *reference_sgd(int K, size_t *n_out)
{
  GError *err = NULL;
  const TpBackend *be = tp_backend_cpu();
  TpNet *net = tp_net_new(fx.model, 0, tp_model_n_layers(fx.model), be, &err);
  g_assert_no_error(err);
  size_t n = tp_net_n_params(net);
  float *w = g_new(float, n), *grad = g_new(float, n), *mom = g_new0(float, n);
  float *x = g_new(float, (size_t)BATCH * fx.train->dim);
  gint32 y[BATCH];
  g_assert_true(tp_net_init_weights(net, 7, w, &err));
  TpBatcher *b = tp_batcher_new(fx.train, BATCH, 1, 3, &err);
  TpSaved *sv = tp_saved_new(net, BATCH, &err);
  g_assert_no_error(err);
  for (int i = 0; i < K; i++) {
    tp_dataset_gather(fx.train, tp_batcher_next(b), BATCH, x, y);
    memset(grad, 0, sizeof(float) * n);
    g_assert_true(tp_net_forward(net, w, x, BATCH, NULL, sv, y, NULL, &err));
    g_assert_true(tp_net_backward(net, w, sv, NULL, NULL, grad, BATCH, &err));
    /* g = grad + wd·w; mom = 0.9·mom + g; w −= lr·mom, lr = 0.05 or its cosine decay over
     * lr_steps mini-batches, computed here in double */
    float lr = lr_steps > 0 ? (float)(0.05 * 0.5 * (1 + cos(G_PI * i / (double)lr_steps))) : 0.05f;
    for (size_t k = 0; k < n; k++) {
      float g = grad[k] + 1e-4f * w[k];
      mom[k] = 0.9f * mom[k] + g;
      w[k] -= lr * mom[k];
    }
  }
  tp_saved_free(sv);
  tp_batcher_free(b);
  tp_net_free(net);
  g_free(grad), g_free(mom), g_free(x);
  *n_out = n;
  return w;
}

/* gpipe and 1f1b on W = 2, 3, 4 stages end with the weights of the same schedule on one stage. */
static void test_flush_equals_one_stage(gconstpointer data)
{
  const char *preset = data;
  for (int N = 2; N <= 4; N += 2) {
    TpSchedule *s1 = tpt_preset(preset, 1, N, K_RUN);
    TpRunResult r1;
    size_t n1, n;
    float *w1 = train(s1, &r1, &n1);
    g_assert_true(r1.versions_match);
    /* one stage is plain mini-batch SGD */
    size_t nr;
    g_autofree float *wr = reference_sgd(K_RUN, &nr);
    g_assert_cmpuint(nr, ==, n1);
    double dr = tpt_rel_diff(w1, wr, n1);
    if (!(dr <= 1e-5))
      g_error("%s W=1 N=%d: weights differ from plain SGD's by %g (relative)", preset, N, dr);
    for (int W = 2; W <= 4; W++) {
      TpSchedule *s = tpt_preset(preset, W, N, K_RUN);
      TpRunResult r;
      float *w = train(s, &r, &n);
      g_assert_cmpuint(n, ==, n1);
      double d = tpt_rel_diff(w, w1, n);
      g_test_message("%s W=%d N=%d: relative difference %g", preset, W, N, d);
      if (!(d <= 1e-5))
        g_error("%s W=%d N=%d: weights differ from one stage's by %g (relative)", preset, W, N, d);
      g_assert_true(r.versions_match);
      /* the loss of each mini-batch too (the last stage's forward) */
      for (int i = 0; i < K_RUN; i++)
        g_assert_cmpfloat(fabs(r.loss_sum[i] - r1.loss_sum[i]), <=, 1e-3 * fabs(r1.loss_sum[i]) + 1e-6);
      tp_run_result_clear(&r);
      g_free(w);
      tp_schedule_free(s);
    }
    /* and the weights moved: the training did something */
    TpSchedule *s0 = tpt_preset(preset, 1, N, 1);
    TpRunResult r0;
    float *w0 = train(s0, &r0, &n);
    g_assert_cmpfloat(tpt_rel_diff(w0, w1, n), >, 1e-3);
    g_free(w0);
    tp_run_result_clear(&r0);
    tp_schedule_free(s0);
    tp_run_result_clear(&r1);
    g_free(w1);
    tp_schedule_free(s1);
  }
}

/* Every read of the asynchronous presets is of the schedule's version, and each stage keeps at
 * most the versions and micro-batch activations the simulator counts for the same schedule. */
static void test_versions_and_memory(gconstpointer data)
{
  const char *preset = data;
  static const int cases[][2] = { { 2, 2 }, { 3, 4 }, { 4, 2 }, { 4, 4 } };
  for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
    int W = cases[c][0], N = cases[c][1];
    if (strcmp(preset, "pipedream-2bw") == 0 && N < W)
      continue;
    TpOrder o = tp_preset_find(preset)->order;
    while (o == TP_ORDER_DUALPIPE_V && N < 2 * W) /* which takes N >= 2W (a power of 2: it splits the batch) */
      N *= 2;
    int V = tp_order_default_chunks(o); /* interleaved stages: W workers of V chunks, W·V stages */
    if (!tp_chunks_check(o, W, V, N, NULL) || W * V > tp_model_n_layers(fx.model))
      continue;
    TpSchedule *s = tpt_preset(preset, W, N, 12);
    TpRunResult r;
    size_t n;
    g_free(train(s, &r, &n));
    if (!r.versions_match)
      g_error("%s W=%d N=%d: %ld reads of another version than the schedule's", preset, W, N, r.mismatched_reads);
    TpCost *cost = tp_cost_unit(s->W);
    GError *err = NULL;
    TpSim *sim = tp_sim_run(s, cost, &err);
    g_assert_no_error(err);
    TpMetrics *m = tp_metrics_compute(sim);
    for (int st = 0; st < s->W; st++) {
      if (r.stats[st].max_live_versions != m->stage[st].max_live_versions ||
          r.stats[st].max_activations != m->stage[st].peak_activations)
        g_error("%s W=%d N=%d stage %d: live versions %d, activations %d; the simulator counts %d, %d", preset, W, N,
                st + 1, r.stats[st].max_live_versions, r.stats[st].max_activations, m->stage[st].max_live_versions,
                m->stage[st].peak_activations);
      /* everything released at the end */
      g_assert_cmpint(r.stats[st].activations, ==, 0);
      g_assert_cmpint(r.stats[st].live_versions, ==, 1);
    }
    /* the recorded versions are the schedule's, op by op */
    for (int st = 0; st < s->W; st++)
      for (int k = 0; k < tp_stage_len(s, st); k++) {
        const TpOp *op = &tp_stage_ops(s, st)[k];
        if (op->kind == TP_OP_F || op->src == TP_SRC_FIXED || op->kind == TP_OP_U)
          g_assert_cmpint(r.rec[st][k].version, ==, op->ver);
        g_assert_cmpfloat(r.rec[st][k].end, >=, r.rec[st][k].start);
      }
    tp_metrics_free(m);
    tp_sim_free(sim);
    tp_cost_free(cost);
    tp_run_result_clear(&r);
    tp_schedule_free(s);
  }
}

/* I-TiMePReSt's blend s(d)·stashed + (1−s(d))·latest, checked at its ends: s = 0 trains exactly as
 * V-TiMePReSt (latest weights), s = 1 exactly as TiMePReSt with stashing; the default s(d) = e^−d
 * lies between, different from both. */
static void test_blend(void)
{
  const int W = 3, N = 2, K = 12;
  TpSchedule *blend = tpt_preset("i-timeprest", W, N, K), *latest = tpt_preset("v-timeprest", W, N, K);
  TpSchedule *stash = tpt_preset("timeprest-stash", W, N, K);
  TpRunResult r;
  size_t n;
  float *wl = train(latest, &r, &n);
  tp_run_result_clear(&r);
  float *ws = train(stash, &r, &n);
  tp_run_result_clear(&r);
  float *wb = train(blend, &r, &n);
  g_assert_true(r.versions_match);
  tp_run_result_clear(&r);
  g_assert_cmpfloat(tpt_rel_diff(wb, wl, n), >, 1e-6);
  g_assert_cmpfloat(tpt_rel_diff(wb, ws, n), >, 1e-6);
  blend->sig = (TpSignificance){ TP_SIG_CONST, 0.0 };
  float *w0 = train(blend, &r, &n);
  tp_run_result_clear(&r);
  blend->sig = (TpSignificance){ TP_SIG_CONST, 1.0 };
  float *w1 = train(blend, &r, &n);
  tp_run_result_clear(&r);
  g_assert_cmpfloat(tpt_rel_diff(w0, wl, n), <=, 1e-7);
  g_assert_cmpfloat(tpt_rel_diff(w1, ws, n), <=, 1e-7);
  g_free(wl), g_free(ws), g_free(wb), g_free(w0), g_free(w1);
  tp_schedule_free(blend), tp_schedule_free(latest), tp_schedule_free(stash);
}

/* The measured side of the comparison: a run whose operations took exactly the simulated times
 * (shifted by an offset) gives back the simulator's metrics, and its event rows the run's versions. */
static void test_measured_timeline(void)
{
  TpSchedule *s = tpt_preset("timeprest", 3, 2, 10);
  TpCost *c = tp_cost_unit(3);
  c->unit = FALSE;
  for (int st = 0; st < 3; st++)
    c->stage[st].fwd = 1 + st, c->stage[st].bwd = 2.5, c->stage[st].upd = 0.25;
  GError *err = NULL;
  TpSim *sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  TpMetrics *pm = tp_metrics_compute(sim);
  TpRunResult r = { .W = 3, .K = 10 };
  r.rec = g_new0(TpOpRecord *, 3);
  r.stats = g_new0(TpWStoreStats, 3);
  for (int st = 0; st < 3; st++) {
    r.rec[st] = g_new0(TpOpRecord, tp_stage_len(s, st));
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      long g = sim->ix->off[st] + k;
      r.rec[st][k] = (TpOpRecord){ sim->start[g] + 5, sim->end[g] + 5, tp_stage_ops(s, st)[k].ver, 0, TRUE, 0 };
    }
    r.stats[st].max_live_versions = pm->stage[st].max_live_versions;
    r.stats[st].max_activations = pm->stage[st].peak_activations;
    r.stats[st].peak_total = (gint64)pm->stage[st].peak_bytes;
  }
  TpTimeline *tl = tp_run_result_timeline(&r, s, &err);
  g_assert_no_error(err);
  g_assert_cmpfloat(tl->t0, ==, 5);
  g_assert_cmpfloat(tl->start[0], ==, sim->start[0]);
  g_assert_nonnull(tl->version);
  TpSim *msim = tp_sim_from_timeline(tl, c);
  TpMetrics *mm = tp_metrics_compute(msim);
  g_assert_cmpfloat(fabs(mm->t_minibatch - pm->t_minibatch), <, 1e-9);
  g_assert_cmpfloat(fabs(mm->makespan - pm->makespan), <, 1e-9);
  TpComparison cmp;
  tp_comparison_init(&cmp, pm);
  tp_comparison_add(&cmp, mm, &r);
  for (int st = 0; st < 3; st++) {
    g_assert_cmpfloat(fabs(cmp.measured.busy[st] - cmp.predicted.busy[st]), <, 1e-9);
    g_assert_cmpint(cmp.measured.max_live_versions[st], ==, cmp.predicted.max_live_versions[st]);
  }
  g_assert_cmpfloat(tp_rel_error(cmp.predicted.t_minibatch, cmp.measured.t_minibatch), ==, 0);
  g_assert_cmpfloat(tp_rel_error(1.1, 1.0), >, 0.0999);
  GString *json = g_string_new(NULL);
  tp_comparison_json(&cmp, json);
  g_assert_nonnull(strstr(json->str, "\"error\": {\"time_per_mini_batch\": 0,"));
  g_string_free(json, TRUE);
  /* event rows of the second of two schedules: times back at the offset, mini-batches and versions
   * numbered as the run's */
  GArray *rows = tp_events_from_sim(msim);
  tp_events_renumber(rows, 10);
  for (guint i = 0; i < rows->len; i++) {
    const TpEventRow *e = &g_array_index(rows, TpEventRow, i);
    g_assert_cmpint(e->mb, >, 10);
    g_assert_cmpfloat(e->start, >=, 5);
    if (e->kind == TP_EV_U)
      g_assert_cmpint(e->version, ==, e->mb - 1);
  }
  g_array_unref(rows);
  tp_comparison_clear(&cmp);
  tp_metrics_free(mm);
  tp_sim_free(msim);
  tp_run_result_clear(&r);
  tp_metrics_free(pm);
  tp_sim_free(sim);
  tp_cost_free(c);
  tp_schedule_free(s);
}

/* mlp-deep: the model that splits evenly, with the parameters its header promises. */
static void test_mlp_deep(void)
{
  GError *err = NULL;
  TpModel *m = tp_model_load(TP_SRCDIR "/models/mlp-deep.model", &err);
  g_assert_no_error(err);
  g_assert_cmpint(m->params, ==, 6062090);
  g_assert_true(tp_net_check_model(m, &err));
  tp_model_free(m);
}

/* --lr-schedule cosine: the rate at its ends and middle, and GPipe on 2 stages ends with the weights of
 * plain SGD whose rate decays the same way (computed independently in reference_sgd). */
static void test_lr_cosine(void)
{
  TpRuntimeConfig cfg = { .lr = 0.5f, .lr_steps = 10 };
  g_assert_cmpfloat(tp_runtime_lr(&cfg, 1), ==, 0.5f);
  g_assert_cmpfloat(fabs(tp_runtime_lr(&cfg, 6) - 0.25), <, 1e-7);
  g_assert_cmpfloat(fabs(tp_runtime_lr(&cfg, 11)), <, 1e-7);
  g_assert_cmpfloat(fabs(tp_runtime_lr(&cfg, 50)), <, 1e-7); /* past the end: stays at 0 */
  cfg.lr_steps = 0;
  g_assert_cmpfloat(tp_runtime_lr(&cfg, 6), ==, 0.5f);
  TpSchedule *s = tpt_preset("gpipe", 2, 2, K_RUN);
  TpRunResult r, rc;
  size_t n, nr, nc;
  lr_steps = K_RUN;
  float *w = train(s, &r, &n);
  float *wr = reference_sgd(K_RUN, &nr);
  lr_steps = 0;
  float *wc = train(s, &rc, &nc);
  g_assert_cmpuint(n, ==, nr);
  double d = tpt_rel_diff(w, wr, n);
  if (!(d <= 1e-5))
    g_error("cosine lr: GPipe W=2 differs from plain SGD with the same decay by %g (relative)", d);
  /* and the decay changed something */
  g_assert_cmpfloat(tpt_rel_diff(w, wc, n), >, 1e-3);
  tp_run_result_clear(&r);
  tp_run_result_clear(&rc);
  g_free(w), g_free(wr), g_free(wc);
  tp_schedule_free(s);
  /* the report says which rate the run used, in JSON and in text */
  const char *formats[] = { "json", "text" };
  const char *says[] = { "\"lr\": 0.05, \"lr_schedule\": \"cosine\", \"momentum\": 0.9, \"weight_decay\": 0.0001",
                         "optimizer    SGD, lr 0.05 decayed by a cosine to 0 over the run's 4 mini-batches, momentum 0.9" };
  for (int i = 0; i < 2; i++) {
    const char *args[] = { "train", "-s", "gpipe", "-w", "2", "-n", "2", "-k", "4", "--batch", "32", "--data",
                           "synthetic:256:64", "--lr", "0.05", "--lr-schedule", "cosine", "--quiet", "--format",
                           formats[i], NULL };
    TptRun t = tpt_run(args);
    g_assert_cmpint(t.status, ==, 0);
    if (!strstr(t.out, says[i]))
      g_error("no '%s' in the report:\n%s", says[i], t.out);
    tpt_run_clear(&t);
  }
}

/* A cut run (TpProgress.cut_before) of every preset: it ends with the weights of its schedule's
 * prefix run whole (tp_schedule_prefix: the operations of the mini-batches before the cut, in each
 * stage's order), bit for bit, its records those of the prefix; cut before the first mini-batch,
 * nothing runs; never cut, the whole run. */
static gboolean cut_at(TpProgress *p, void *data, int mb)
{
  (void)p;
  return mb == *(const int *)data;
}

static void test_cut(gconstpointer name)
{
  const TpPreset *p = tp_preset_find(name);
  /* interleaved orders: 2 workers of 2 chunks, 4 stages of mlp's 7 layers */
  int chunked = tp_order_chunked(p->order), N = 4, K = 8;
  TpSchedule *s = tpt_preset(name, chunked ? 2 : 3, N, K);
  const int W = s->W;
  for (int at = 1; at <= K + 1; at += 3) { /* cut before mini-batch 1, 4 and 7; 10 never comes */
    TpProgress prog = { .cut_before = cut_at, .data = &at };
    TpRunResult r, rp;
    size_t n, np;
    g_autofree float *w = train_progress(s, &prog, &r, &n);
    int done = MIN(at - 1, K);
    g_assert_cmpint(r.done, ==, done);
    if (done == 0) { /* nothing ran */
      g_assert_cmpfloat(r.wall, ==, 0);
      g_assert_true(r.versions_match);
    } else {
      TpSchedule *pre = tp_schedule_prefix(s, done);
      g_autofree float *wp = train_progress(pre, NULL, &rp, &np);
      g_assert_cmpuint(n, ==, np);
      if (memcmp(w, wp, n * sizeof(float)) != 0)
        g_error("%s cut before %d: weights differ from the prefix's (relative %g)", (const char *)name, at,
                tpt_rel_diff(w, wp, n));
      tp_run_result_cut(&r, s);
      g_assert_cmpint(r.K, ==, done);
      for (int st = 0; st < W; st++)
        for (int k = 0; k < tp_stage_len(pre, st); k++)
          g_assert_cmpint(r.rec[st][k].version, ==, rp.rec[st][k].version);
      g_assert_true(r.versions_match);
      tp_run_result_clear(&rp);
      tp_schedule_free(pre);
    }
    tp_run_result_clear(&r);
  }
  tp_schedule_free(s);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  GError *err = NULL;
  fx.model = tp_model_load(TP_SRCDIR "/models/mlp.model", &err);
  g_assert_no_error(err);
  fx.train = tp_dataset_synthetic(TRAIN_N, 28, 28, 5);
  g_test_add_data_func("/train/gpipe-equals-one-stage", "gpipe", test_flush_equals_one_stage);
  g_test_add_data_func("/train/1f1b-equals-one-stage", "1f1b", test_flush_equals_one_stage);
  for (int i = 0; i < tp_n_presets; i++) { /* every preset, the asynchronous ones above all */
    g_autofree char *path = g_strdup_printf("/train/versions-and-memory/%s", tp_presets[i].name);
    g_test_add_data_func(path, tp_presets[i].name, test_versions_and_memory);
  }
  for (int i = 0; i < tp_n_presets; i++) {
    g_autofree char *path = g_strdup_printf("/train/cut/%s", tp_presets[i].name);
    g_test_add_data_func(path, tp_presets[i].name, test_cut);
  }
  g_test_add_func("/train/blend", test_blend);
  g_test_add_func("/train/lr-cosine", test_lr_cosine);
  g_test_add_func("/train/measured-timeline", test_measured_timeline);
  g_test_add_func("/train/mlp-deep", test_mlp_deep);
  int rc = g_test_run();
  tp_model_free(fx.model);
  tp_dataset_free(fx.train);
  return rc;
}
