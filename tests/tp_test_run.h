/* tp_test_run.h — for the tests that train through the runtime: run a schedule on the seeded order
 * of a data set and collect every stage's weights. */
#ifndef TP_TEST_RUN_H
#define TP_TEST_RUN_H

#include "tp_runtime.h"
#include "tp_test.h"

#include <glib.h>
#include <math.h>
#include <string.h>

/* ||a − b|| / ||b|| */
static inline double tpt_rel_diff(const float *a, const float *b, size_t n)
{
  double d = 0, r = 0;
  for (size_t i = 0; i < n; i++)
    d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r += (double)b[i] * b[i];
  return sqrt(d / r);
}

/* The runtime tests' run of model on data: s->W stages of equal layer counts (bounds: s->W + 1 ints,
 * filled here), plain SGD with momentum 0.9, weight decay 1e-4, lr 0.02, seed 11, on the cpu. */
static inline TpRuntimeConfig tpt_even_config(const TpModel *model, const TpDataset *data, int batch,
                                              const TpSchedule *s, int *bounds)
{
  int L = tp_model_n_layers(model);
  for (int i = 0; i <= s->W; i++)
    bounds[i] = i * L / s->W;
  return (TpRuntimeConfig){ .model = model, .bounds = bounds, .W = s->W, .N = s->N, .batch = batch,
                            .be = tp_backend_cpu(), .train = data, .lr = 0.02f, .momentum = 0.9f,
                            .weight_decay = 1e-4f, .seed = 11, .timeout_s = 60,
                            .split_backward = tp_schedule_has_split(s) };
}

/* Train s->K mini-batches of cfg->train's seeded order (batcher seed 3) with the run cfg describes;
 * returns every stage's weights, concatenated in stage order, and the run's record in *res. */
static inline float *tpt_train_progress(const TpRuntimeConfig *cfg, const TpSchedule *s, TpProgress *progress,
                                        TpRunResult *res, size_t *n_out);
static inline float *tpt_train(const TpRuntimeConfig *cfg, const TpSchedule *s, TpRunResult *res, size_t *n_out)
{
  return tpt_train_progress(cfg, s, NULL, res, n_out);
}

/* tpt_train with a progress (its cut_before may cut the run); the weights at the run's end. */
static inline float *tpt_train_progress(const TpRuntimeConfig *cfg, const TpSchedule *s, TpProgress *progress,
                                        TpRunResult *res, size_t *n_out)
{
  GError *err = NULL;
  TpRuntime *rt = tp_runtime_new(cfg, &err);
  g_assert_no_error(err);
  TpBatcher *b = tp_batcher_new(cfg->train, cfg->batch, s->N, 3, &err);
  g_assert_no_error(err);
  int **idx = g_new(int *, s->K);
  for (int i = 0; i < s->K; i++)
    idx[i] = g_memdup2(tp_batcher_next(b), sizeof(int) * cfg->batch);
  g_assert_true(tp_runtime_run(rt, s, (const int *const *)idx, 1, g_get_monotonic_time(), progress, res, &err));
  g_assert_no_error(err);
  size_t n = 0;
  for (int st = 0; st < s->W; st++)
    n += tp_runtime_n_params(rt, st);
  float *w = g_new(float, n), *p = w;
  for (int st = 0; st < s->W; st++) {
    memcpy(p, tp_runtime_weights(rt, st), sizeof(float) * tp_runtime_n_params(rt, st));
    p += tp_runtime_n_params(rt, st);
  }
  *n_out = n;
  for (int i = 0; i < s->K; i++)
    g_free(idx[i]);
  g_free(idx);
  tp_batcher_free(b);
  tp_runtime_free(rt);
  return w;
}

/* tpt_train with tpt_even_config's run of model on data. */
static inline float *tpt_train_even(const TpModel *model, const TpDataset *data, int batch, const TpSchedule *s,
                                    TpRunResult *res, size_t *n)
{
  g_autofree int *bounds = g_new(int, s->W + 1);
  TpRuntimeConfig cfg = tpt_even_config(model, data, batch, s, bounds);
  return tpt_train(&cfg, s, res, n);
}

/* The weights gpipe and 1f1b end with on W stages (N micro-batches, K mini-batches, tpt_train_even):
 * what a flush schedule of the same mathematics is held against — 1f1b's bit for bit where it sums
 * its backwards in 1f1b's order, gpipe's (the reverse order) within 1e-5.  Returns the weights'
 * count; *gpipe and *f1b to be freed. */
static inline size_t tpt_flush_references(const TpModel *model, const TpDataset *data, int batch, int W, int N, int K,
                                          float **gpipe, float **f1b)
{
  TpSchedule *g = tpt_preset("gpipe", W, N, K), *f = tpt_preset("1f1b", W, N, K);
  TpRunResult r;
  size_t n, n1;
  *gpipe = tpt_train_even(model, data, batch, g, &r, &n);
  tp_run_result_clear(&r);
  *f1b = tpt_train_even(model, data, batch, f, &r, &n1);
  tp_run_result_clear(&r);
  g_assert_cmpuint(n, ==, n1);
  tp_schedule_free(g);
  tp_schedule_free(f);
  return n;
}

#endif
