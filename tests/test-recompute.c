/* test-recompute.c — the executor's whole-mini-batch backward run as one backward over all the
 * micro-batches that read one version, and recomputation (--recompute): each against the
 * per-micro-batch path, against finite differences, and against a reference computed here; the
 * simulator's memory and time rules for recomputation; the schedule files' recompute header. */
#include "tp_format.h"
#include "tp_metrics.h"
#include "tp_net.h"
#include "tp_policy.h"
#include "tp_runtime.h"
#include "tp_sim.h"
#include "tp_test.h"
#include "tp_test_run.h"

#include <math.h>

enum { BATCH = 32, TRAIN_N = 512 };

static TpDataset *data;

/* A model with dropout whose stages each keep far more than their input (so that recomputation
 * must lower their stored activations): 8 layers, split 4 + 4. */
static const char wide_model[] = "name wide\ninput 1 28 28\ndataset 60000\nflatten\nlinear 512\nrelu\ndropout\n"
                                 "linear 512\nrelu\nlinear 10\nsoftmax_ce\n";

static TpModel *load_model(const char *text)
{
  g_autofree char *path = tpt_tmp_path("model");
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  GError *err = NULL;
  TpModel *m = tp_model_load(path, &err);
  g_assert_no_error(err);
  tpt_tmp_remove(path);
  return m;
}

typedef struct {
  const TpModel *model;
  const int *bounds;
  float lr, momentum, wd;
  gboolean per_micro;
} Setup;

/* Train s->K mini-batches of the seeded order; every stage's weights concatenated, the record in res. */
static float *train(const Setup *u, const TpSchedule *s, TpRunResult *res, size_t *n_out)
{
  TpRuntimeConfig cfg = { .model = u->model, .bounds = u->bounds, .W = s->W, .N = s->N, .batch = BATCH,
                          .be = tp_backend_cpu(), .train = data, .lr = u->lr, .momentum = u->momentum,
                          .weight_decay = u->wd, .seed = 7, .timeout_s = 60, .recompute = s->recompute,
                          .per_micro_backward = u->per_micro };
  return tpt_train(&cfg, s, res, n_out);
}

/* Tolerance of the batched backward against the per-micro-batch one: the same products, their
 * rows summed in another order (one GEMM of B rows instead of N of B/N accumulated), so float
 * rounding only: relative 1e-5 on the weights after a dozen updates with momentum.  At lr 0.01 the
 * observed difference is about 1e-8 whatever kernels OpenBLAS picks; at lr 0.05 with momentum 0.9
 * TiMePReSt's W = 3 run is chaotic enough that one kernel's rounding grows to 6e-4 (OpenBLAS's
 * Prescott kernels, 3.7e-8 with its AVX-512 ones), so the test stays at the smaller rate. */
#define BATCHED_TOL 1e-5

/* Batched and per-micro-batch backwards give the same weights within rounding, for the policies
 * whose micro-batches share a version (vsync-latest, latest) and those whose may not (stash,
 * intermediate), and read the same versions. */
static void test_batched_equals_per_micro(gconstpointer name)
{
  g_autoptr(TpModel) model = load_model(wide_model);
  const int bounds[] = { 0, 4, 8 }, bounds3[] = { 0, 3, 5, 8 };
  for (int W = 2; W <= 3; W++)
    for (int N = 2; N <= 4; N += 2) {
      TpSchedule *s = tpt_preset(name, W, N, 12);
      Setup u = { model, W == 2 ? bounds : bounds3, 0.01f, 0.9f, 1e-4f, TRUE };
      TpRunResult r1, r2;
      size_t n1, n2;
      float *w1 = train(&u, s, &r1, &n1);
      u.per_micro = FALSE;
      float *w2 = train(&u, s, &r2, &n2);
      g_assert_cmpuint(n1, ==, n2);
      double d = tpt_rel_diff(w2, w1, n1);
      g_test_message("%s W=%d N=%d: batched vs per-micro-batch, relative difference %g", (const char *)name, W, N, d);
      if (!(d <= BATCHED_TOL))
        g_error("%s W=%d N=%d: the batched backward's weights differ by %g (relative)", (const char *)name, W, N, d);
      g_assert_true(r1.versions_match && r2.versions_match);
      for (int st = 0; st < W; st++)
        g_assert_cmpint(r1.stats[st].peak[TP_MEMCAT_ACTIVATIONS], ==, r2.stats[st].peak[TP_MEMCAT_ACTIVATIONS]);
      tp_run_result_clear(&r1), tp_run_result_clear(&r2);
      g_free(w1), g_free(w2);
      tp_schedule_free(s);
    }
}

/* Mean loss of n samples (inference forward; no dropout in this model) at weights w. */
static double mean_loss(TpNet *net, const float *w, const float *x, const gint32 *y, int n)
{
  TpLossStats st;
  GError *err = NULL;
  g_assert_true(tp_net_forward(net, w, x, n, NULL, NULL, y, &st, &err));
  g_assert_no_error(err);
  return st.loss_sum / n;
}

/* Central differences of the mean loss on the k weights of largest gradient: grad must match
 * within 2 % of the gradient's largest magnitude (float forward, step 1e-2). */
static void check_fd(TpNet *net, const float *w0, const float *x, const gint32 *y, int n, const float *grad)
{
  size_t np = tp_net_n_params(net);
  g_autofree float *w = g_memdup2(w0, sizeof(float) * np);
  float gmax = 0;
  for (size_t k = 0; k < np; k++)
    gmax = MAX(gmax, fabsf(grad[k]));
  g_assert_cmpfloat(gmax, >, 0);
  int checked = 0;
  for (size_t k = 0; k < np && checked < 12; k += np / 97 + 1) {
    if (fabsf(grad[k]) < 0.05f * gmax)
      continue;
    const float h = 1e-2f;
    w[k] = w0[k] + h;
    double lp = mean_loss(net, w, x, y, n);
    w[k] = w0[k] - h;
    double lm = mean_loss(net, w, x, y, n);
    w[k] = w0[k];
    double fd = (lp - lm) / (2 * h);
    if (!(fabs(fd - grad[k]) <= 0.02 * gmax))
      g_error("weight %zu: gradient %g, finite differences %g (largest gradient %g)", k, grad[k], fd, gmax);
    checked++;
  }
  g_assert_cmpint(checked, >=, 4);
}

/* The net-level mechanics the executor uses: N micro-batch forwards into slices of one saved state,
 * one backward of all B samples = the gradient of the mean loss by finite differences; and the
 * recomputing backward (forward again from the input with the backward's weights w_b, then the
 * backward) = the gradient at w_b, where the saved-input rule (forward at w_f, backward with w_b)
 * is not. */
static void test_finite_differences(void)
{
  g_autoptr(TpModel) model = tp_model_load(TP_SRCDIR "/models/mlp.model", NULL);
  g_assert_nonnull(model);
  GError *err = NULL;
  TpNet *net = tp_net_new(model, 0, tp_model_n_layers(model), tp_backend_cpu(), &err);
  g_assert_no_error(err);
  size_t np = tp_net_n_params(net);
  const int N = 4, m = BATCH / N;
  g_autofree float *wf = g_new(float, np), *wb = g_new(float, np), *grad = g_new0(float, np);
  g_autofree float *x = g_new(float, (size_t)BATCH * data->dim);
  gint32 y[BATCH];
  int ids[BATCH];
  for (int i = 0; i < BATCH; i++)
    ids[i] = 3 * i + 1;
  tp_dataset_gather(data, ids, BATCH, x, y);
  g_assert_true(tp_net_init_weights(net, 7, wf, &err));
  g_assert_true(tp_net_init_weights(net, 8, wb, &err)); /* the "newer" version: other weights */
  TpSaved *whole = tp_saved_new(net, BATCH, &err);
  /* the batched backward */
  for (int j = 0; j < N; j++) {
    TpSaved *part = tp_saved_slice(whole, j * m, m);
    g_assert_true(tp_net_forward(net, wf, x + (size_t)j * m * data->dim, m, NULL, part, y + j * m, NULL, &err));
    tp_saved_free(part);
  }
  tp_saved_set_batch(whole, BATCH);
  g_assert_true(tp_net_backward(net, wf, whole, NULL, NULL, grad, BATCH, &err));
  check_fd(net, wf, x, y, BATCH, grad);
  /* recomputation: the forward again with wb from the input, then the backward with wb */
  memset(grad, 0, sizeof(float) * np);
  g_assert_true(tp_net_forward(net, wf, x, BATCH, NULL, whole, y, NULL, &err));
  g_assert_true(tp_net_forward(net, wb, x, BATCH, NULL, whole, y, NULL, &err));
  g_assert_true(tp_net_backward(net, wb, whole, NULL, NULL, grad, BATCH, &err));
  check_fd(net, wb, x, y, BATCH, grad);
  /* the saved-input rule is another gradient (so the check above tells them apart) */
  g_autofree float *stale = g_new0(float, np);
  g_assert_true(tp_net_forward(net, wf, x, BATCH, NULL, whole, y, NULL, &err));
  g_assert_true(tp_net_backward(net, wb, whole, NULL, NULL, stale, BATCH, &err));
  g_assert_cmpfloat(tpt_rel_diff(stale, grad, np), >, 1e-2);
  g_assert_no_error(err);
  tp_saved_free(whole);
  tp_net_free(net);
}

static gint64 peak_acts(const TpRunResult *r, int st) { return r->stats[st].peak[TP_MEMCAT_ACTIVATIONS]; }

/* The flush and stashing policies: the same weights bit for bit with and without recomputation
 * (dropout redraws the same masks); under gpipe, lower stored activations on every stage. */
static void test_recompute_same_weights(gconstpointer name)
{
  g_autoptr(TpModel) model = load_model(wide_model);
  const int bounds[] = { 0, 4, 8 };
  for (int N = 2; N <= 4; N += 2) {
    TpSchedule *s = tpt_preset(name, 2, N, 8);
    Setup u = { model, bounds, 0.05f, 0.9f, 1e-4f, FALSE };
    TpRunResult r0, r1;
    size_t n0, n1;
    float *w0 = train(&u, s, &r0, &n0);
    s->recompute = TRUE;
    float *w1 = train(&u, s, &r1, &n1);
    g_assert_cmpuint(n0, ==, n1);
    if (memcmp(w0, w1, sizeof(float) * n0) != 0)
      g_error("%s N=%d: --recompute changed the weights (relative difference %g)", (const char *)name, N,
              tpt_rel_diff(w1, w0, n0));
    g_assert_true(r1.versions_match);
    for (int st = 0; st < 2; st++) {
      g_test_message("%s N=%d stage %d: stored activations %" G_GINT64_FORMAT " B, recomputing %" G_GINT64_FORMAT
                     " B", (const char *)name, N, st + 1, peak_acts(&r0, st), peak_acts(&r1, st));
      if (strcmp(name, "gpipe") == 0) /* all N micro-batches stored at once (a 1F1B last stage keeps one) */
        g_assert_cmpint(peak_acts(&r1, st), <, peak_acts(&r0, st));
    }
    tp_run_result_clear(&r0), tp_run_result_clear(&r1);
    g_free(w0), g_free(w1);
    tp_schedule_free(s);
  }
}

/* vsync-latest, latest and intermediate with recomputation compute the exact gradient at the
 * weights the backward reads (intermediate: its forward's stashed version blended with the latest,
 * as the backend's blend computes it), given the output gradient the stage receives.  Stage 1 holds only the flatten
 * (its output is the data whatever the weights), stage 2 every layer with parameters, stage 3 only
 * the loss: with momentum and weight decay 0 the run must equal, update by update,
 *   θ ← θ_latest − lr · J(θ_b; x)ᵀ · dY,  dY = ∂loss/∂logits at the logits of each micro-batch's
 * forward (at the version that forward read),
 * computed here on separate networks; without recomputation (saved activations of the forward's
 * version) it does not.  Under intermediate the forward's version is still stored, so a recomputed
 * forward run at it instead of at the backward's blend is told apart by value, not by a crash. */
static void test_recompute_exact_gradient(gconstpointer name)
{
  g_autoptr(TpModel) model = tp_model_load(TP_SRCDIR "/models/mlp.model", NULL);
  g_assert_nonnull(model);
  const int L = tp_model_n_layers(model), bounds[] = { 0, 1, L - 1, L }, N = 2, K = 10, m = BATCH / N;
  const float lr = 0.1f;
  TpSchedule *s = tpt_preset(name, 3, N, K);
  Setup u = { model, bounds, lr, 0.0f, 0.0f, FALSE };
  TpRunResult r0, r1;
  size_t n;
  g_autofree float *w_saved = train(&u, s, &r0, &n);
  s->recompute = TRUE;
  g_autofree float *w_rc = train(&u, s, &r1, &n);
  g_assert_true(r1.versions_match);
  GError *err = NULL;
  TpNet *body = tp_net_new(model, 1, L - 1, tp_backend_cpu(), &err), *loss = tp_net_new(model, L - 1, L, tp_backend_cpu(), &err);
  g_assert_no_error(err);
  size_t np = tp_net_n_params(body), ne = tp_net_out_elems(body);
  g_assert_cmpuint(np, ==, n);
  float **ver = g_new0(float *, K + 1);
  ver[0] = g_new(float, np);
  g_assert_true(tp_net_init_weights(body, 7, ver[0], &err));
  g_autofree float *grad = g_new(float, np), *x = g_new(float, (size_t)BATCH * data->dim);
  g_autofree float *logits = g_new(float, (size_t)BATCH * ne), *dlogits = g_new(float, (size_t)BATCH * ne);
  gint32 y[BATCH];
  TpSaved *sv = tp_saved_new(body, BATCH, &err), *lsv = tp_saved_new(loss, m, &err);
  TpBatcher *b = tp_batcher_new(data, BATCH, N, 3, &err);
  g_assert_no_error(err);
  /* the versions stage 2 read: each micro-batch's forward, and each backward */
  const TpOp *ops = tp_stage_ops(s, 1);
  int bread[K + 1], fread[K + 1][N];
  gboolean differ = FALSE, blend[K + 1];
  g_autofree float *mix = g_new(float, np);
  for (int k = 0; k < tp_stage_len(s, 1); k++)
    if (ops[k].kind == TP_OP_B)
      bread[ops[k].mb] = r1.rec[1][k].version, blend[ops[k].mb] = ops[k].src == TP_SRC_BLEND;
    else if (ops[k].kind == TP_OP_F)
      fread[ops[k].mb][ops[k].micro] = r1.rec[1][k].version;
  int latest = 0;
  for (int i = 1; i <= K; i++) { /* stage 2 updates in mini-batch order */
    tp_dataset_gather(data, tp_batcher_next(b), BATCH, x, y);
    for (int j = 0; j < N; j++) { /* dY of each micro-batch, at its forward's logits */
      differ = differ || fread[i][j] != bread[i];
      g_assert_true(tp_net_forward(body, ver[fread[i][j]], x + (size_t)j * m * data->dim, m, logits + (size_t)j * m * ne,
                                   NULL, NULL, NULL, &err));
      g_assert_true(tp_net_forward(loss, NULL, logits + (size_t)j * m * ne, m, NULL, lsv, y + j * m, NULL, &err));
      g_assert_true(tp_net_backward(loss, NULL, lsv, NULL, dlogits + (size_t)j * m * ne, NULL, BATCH, &err));
    }
    const float *wb = ver[bread[i]];
    if (blend[i] && latest > bread[i]) { /* the stashed version's significance against the latest */
      float sg = (float)tp_significance(&s->sig, latest - bread[i]), r = 1.0f - sg;
      for (size_t k = 0; k < np; k++)
        mix[k] = sg * ver[bread[i]][k] + r * ver[latest][k];
      wb = mix;
      differ = differ || sg < 1;
    }
    memset(grad, 0, sizeof(float) * np);
    g_assert_true(tp_net_forward(body, wb, x, BATCH, logits, sv, NULL, NULL, &err));
    g_assert_true(tp_net_backward(body, wb, sv, dlogits, NULL, grad, BATCH, &err));
    g_assert_no_error(err);
    ver[i] = g_new(float, np);
    for (size_t k = 0; k < np; k++)
      ver[i][k] = ver[latest][k] - lr * grad[k];
    latest = i;
  }
  g_assert_true(differ); /* some backward read other weights than its forwards */
  double d = tpt_rel_diff(w_rc, ver[K], np), d0 = tpt_rel_diff(w_saved, ver[K], np);
  g_test_message("%s: recomputing %g, saved activations %g from the reference", (const char *)name, d, d0);
  g_assert_cmpfloat(d, <=, 1e-5);
  g_assert_cmpfloat(d0, >, 1e-4); /* the two rules are told apart */
  for (int i = 0; i <= K; i++)
    g_free(ver[i]);
  g_free(ver);
  tp_batcher_free(b);
  tp_saved_free(sv), tp_saved_free(lsv);
  tp_net_free(body), tp_net_free(loss);
  tp_run_result_clear(&r0), tp_run_result_clear(&r1);
  tp_schedule_free(s);
}

/* The simulator: a backward costs its forward again; stored activations are the stage inputs
 * (plus one workspace of the largest operation's full activations). */
static void test_simulator(void)
{
  TpSchedule *s = tpt_preset("gpipe", 2, 4, 6);
  TpCost *c = tp_cost_unit(2);
  c->unit = FALSE;
  for (int st = 0; st < 2; st++)
    c->stage[st] = (TpStageCost){ .fwd = 1, .bwd = 2, .upd = 0, .act_bytes = 10, .grad_bytes = 10,
                                  .stored_bytes = 100, .weight_bytes = 1, .optimizer_bytes = 1,
                                  .grad_buffer_bytes = 1, .device = st, .input_bytes = 10 };
  tp_cost_update_devices(c);
  GError *err = NULL;
  TpSim *a = tp_sim_run(s, c, &err);
  TpMetrics *ma = tp_metrics_compute(a);
  s->recompute = TRUE;
  TpSim *b = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  TpMetrics *mb = tp_metrics_compute(b);
  /* per mini-batch: 4 forwards and 4 backwards per stage, pipelined over 2 stages:
   * (4+1)·fwd + (4+1)·bwd; with recomputation bwd → fwd + bwd */
  g_assert_cmpfloat(fabs(ma->makespan - 6 * (5 * 1 + 5 * 2)), <, 1e-9);
  g_assert_cmpfloat(fabs(mb->makespan - 6 * (5 * 1 + 5 * 3)), <, 1e-9);
  for (int st = 0; st < 2; st++) {
    g_assert_cmpfloat(ma->stage[st].comp_peak[3], ==, 4 * 100);
    g_assert_cmpfloat(mb->stage[st].comp_peak[3], ==, 4 * 10 + 100);
    g_assert_cmpint(mb->stage[st].peak_activations, ==, 4);
  }
  tp_metrics_free(ma), tp_metrics_free(mb);
  tp_sim_free(a), tp_sim_free(b);
  tp_cost_free(c);
  tp_schedule_free(s);
}

/* The header: recompute=true in CSV and JSON when set, absent (= false) otherwise; read back. */
static void test_header(void)
{
  TpSchedule *s = tpt_preset("timeprest", 3, 2, 5);
  GError *err = NULL;
  for (int rc = 0; rc < 2; rc++) {
    s->recompute = rc;
    g_autoptr(GString) csv = g_string_new(NULL), json = g_string_new(NULL);
    tp_format_csv(s, csv);
    tp_format_json(s, json);
    g_assert_true((strstr(csv->str, " recompute=true\n") != NULL) == rc);
    g_assert_true((strstr(json->str, "\"recompute\": true") != NULL) == rc);
    g_assert_null(strstr(csv->str, "recompute=false"));
    TpSchedule *a = tp_schedule_parse(csv->str, csv->len, "x.csv", &err);
    g_assert_no_error(err);
    TpSchedule *j = tp_schedule_parse(json->str, json->len, "x.json", &err);
    g_assert_no_error(err);
    g_assert_cmpint(a->recompute, ==, rc);
    g_assert_cmpint(j->recompute, ==, rc);
    g_assert_true(tp_schedule_equal(a, s) && tp_schedule_equal(j, s));
    tp_schedule_free(a), tp_schedule_free(j);
  }
  /* a bad value is refused with the key named */
  const char bad[] = "# timeprest-schedule order=gpipe policy=sync workers=1 micro_batches=1 mini_batches=1 "
                     "recompute=yes\nstage,op,mini_batch,micro_batch,version,source\n";
  g_assert_null(tp_schedule_parse(bad, sizeof bad - 1, "bad.csv", &err));
  g_assert_nonnull(strstr(err->message, "recompute"));
  g_clear_error(&err);
  tp_schedule_free(s);
}

/* The commands say which rule ran, in JSON and in text. */
static void test_reports(void)
{
  const char *json[] = { "simulate", "-s", "timeprest", "-w", "3", "-n", "2", "--recompute", "--format", "json", NULL };
  TptRun t = tpt_run(json);
  g_assert_cmpint(t.status, ==, 0);
  g_assert_nonnull(strstr(t.out, "\"recompute\": true"));
  tpt_run_clear(&t);
  const char *text[] = { "simulate", "-s", "timeprest", "-w", "3", "-n", "2", NULL };
  t = tpt_run(text);
  g_assert_cmpint(t.status, ==, 0);
  g_assert_nonnull(strstr(t.out, "\nrecompute    false\n"));
  tpt_run_clear(&t);
  const char *sched[] = { "schedule", "-s", "gpipe", "-w", "2", "-n", "2", "--recompute", "--format", "csv", NULL };
  t = tpt_run(sched);
  g_assert_cmpint(t.status, ==, 0);
  g_assert_nonnull(strstr(t.out, " recompute=true\n"));
  tpt_run_clear(&t);
  const char *train[] = { "train", "-s", "gpipe", "-w", "2", "-n", "2", "-k", "3", "--batch", "16", "--data",
                          "synthetic:128:32", "--recompute", "--quiet", "--format", "json", NULL };
  t = tpt_run(train);
  g_assert_cmpint(t.status, ==, 0);
  g_assert_nonnull(strstr(t.out, "\"recompute\": true"));
  tpt_run_clear(&t);
}

/* A checkpoint continues under the rule it was written with: resuming it with the other rule is
 * refused, resuming it with the same one ends where the uninterrupted run ends. */
static void test_resume(void)
{
  g_autofree char *dir = tpt_tmp_dir("tp-recompute"), *ck = g_build_filename(dir, "ck", NULL);
  const char *base[] = { "train", "-s", "timeprest", "-w", "3", "-n", "2", "-k", "8", "--batch", "16", "--data",
                         "synthetic:256:32", "--order-from", "slots", "--checkpoint-every", "4", "--quiet",
                         "--format", "json", "--recompute" };
  const int nb = G_N_ELEMENTS(base);
  const char *args[G_N_ELEMENTS(base) + 5];
  char *sha[2] = { NULL, NULL };
  for (int k = 0; k < 2; k++) { /* the whole run, then the run stopped after 4 mini-batches and resumed */
    memcpy(args, base, sizeof base);
    int n = nb;
    args[n++] = "--checkpoint", args[n++] = ck;
    if (k)
      args[n++] = "--stop-after", args[n++] = "4";
    args[n] = NULL;
    TptRun t = tpt_run(args);
    g_assert_cmpint(t.status, ==, 0);
    if (k == 0) {
      sha[0] = g_strdup(strstr(t.out, "\"weights_sha256\""));
      tpt_rm_tree(ck);
    }
    tpt_run_clear(&t);
  }
  memcpy(args, base, sizeof base);
  args[nb - 1] = "--resume", args[nb] = ck, args[nb + 1] = NULL; /* without --recompute */
  TptRun t = tpt_run(args);
  g_assert_cmpint(t.status, ==, 2);
  g_assert_nonnull(strstr(t.err, "recompute 'true' there, 'false' here"));
  tpt_run_clear(&t);
  args[nb - 1] = "--recompute", args[nb] = "--resume", args[nb + 1] = ck, args[nb + 2] = NULL;
  t = tpt_run(args);
  g_assert_cmpint(t.status, ==, 0);
  sha[1] = g_strdup(strstr(t.out, "\"weights_sha256\""));
  g_assert_nonnull(sha[0]);
  g_assert_nonnull(sha[1]);
  g_assert_cmpint(strncmp(sha[0], sha[1], 86), ==, 0); /* the key and its 64 hex digits */
  tpt_run_clear(&t);
  g_free(sha[0]), g_free(sha[1]);
  tpt_rm_tree(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  data = tp_dataset_synthetic(TRAIN_N, 28, 28, 5);
  static const char *const batched[] = { "timeprest", "v-timeprest", "i-timeprest", "timeprest-stash", "pipedream" };
  for (size_t i = 0; i < G_N_ELEMENTS(batched); i++) {
    g_autofree char *path = g_strdup_printf("/batched/equals-per-micro-batch/%s", batched[i]);
    g_test_add_data_func(path, batched[i], test_batched_equals_per_micro);
  }
  g_test_add_func("/batched/finite-differences", test_finite_differences);
  static const char *const same[] = { "gpipe", "1f1b", "pipedream", "pipedream-2bw", "timeprest-stash" };
  for (size_t i = 0; i < G_N_ELEMENTS(same); i++) {
    g_autofree char *path = g_strdup_printf("/recompute/same-weights/%s", same[i]);
    g_test_add_data_func(path, same[i], test_recompute_same_weights);
  }
  static const char *const exact[] = { "timeprest", "v-timeprest", "i-timeprest" };
  for (size_t i = 0; i < G_N_ELEMENTS(exact); i++) {
    g_autofree char *path = g_strdup_printf("/recompute/exact-gradient/%s", exact[i]);
    g_test_add_data_func(path, exact[i], test_recompute_exact_gradient);
  }
  g_test_add_func("/recompute/simulator", test_simulator);
  g_test_add_func("/recompute/header", test_header);
  g_test_add_func("/recompute/reports", test_reports);
  g_test_add_func("/recompute/resume", test_resume);
  int rc = g_test_run();
  tp_dataset_free(data);
  return rc;
}
