/* tp_analytic.c — the analytic cost model: model description × cluster → per-stage costs. */
#include "tp_analytic.h"
#include "tp_error.h"
#include "tp_partition.h"

#define FLOAT_BYTES 4.0

double tp_layer_time(const TpLayer *L, const TpDevice *d, double b, gboolean bwd)
{
  double flops = b * (bwd ? L->bwd_flops : L->fwd_flops);
  double bytes = FLOAT_BYTES * (b * ((bwd ? 2.0 : 1.0) * L->in_elems + L->out_elems) + (bwd ? 2.0 : 1.0) * L->params);
  double t_compute = flops / (d->flops * d->efficiency), t_memory = bytes / (d->bandwidth * d->efficiency);
  return MAX(t_compute, t_memory);
}

void tp_analytic_free(TpAnalytic *a)
{
  if (!a)
    return;
  g_free(a->bounds);
  g_free(a->reserve);
  g_free(a->fwd_prefix);
  g_free(a->bwd_prefix);
  g_free(a);
}

TpAnalytic *tp_analytic_new(const TpModel *m, const TpCluster *c, int W, int N, long batch, GError **err)
{
  int L = tp_model_n_layers(m);
  if (c->n != 1 && c->n != W) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "cluster %s has %d workers, the pipeline %d stages (use -w %d)", c->name,
                c->n, W, c->n);
    return NULL;
  }
  if (W > L) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "model %s has %d layers, fewer than the %d stages", m->name, L, W);
    return NULL;
  }
  if (batch < N || batch % N != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_BATCH, "%ld samples do not split into N=%d equal micro-batches",
                batch, N);
    return NULL;
  }
  TpAnalytic *a = g_new0(TpAnalytic, 1);
  a->model = m, a->cluster = c, a->W = W, a->N = N, a->batch = batch, a->micro = (double)batch / N;
  a->bounds = g_new0(int, W + 1);
  a->reserve = g_new0(double, W);
  a->fwd_prefix = g_new0(double, (size_t)W * (L + 1));
  a->bwd_prefix = g_new0(double, (size_t)W * (L + 1));
  for (int s = 0; s < W; s++) {
    const TpDevice *d = &c->dev[tp_cluster_device_of(c, s)];
    double *fp = a->fwd_prefix + (size_t)s * (L + 1), *bp = a->bwd_prefix + (size_t)s * (L + 1);
    for (int i = 0; i < L; i++) {
      fp[i + 1] = fp[i] + tp_layer_time(tp_model_layer(m, i), d, a->micro, FALSE);
      bp[i + 1] = bp[i] + tp_layer_time(tp_model_layer(m, i), d, a->micro, TRUE);
    }
  }
  return a;
}

static double link_time(const TpAnalytic *a, double elems)
{
  return a->cluster->link_latency + FLOAT_BYTES * a->micro * elems / a->cluster->link_bandwidth;
}

/* A stage's share of the pipeline's pace for one micro-batch: its compute, or the transfer of its
 * output activations downstream or of its input gradient upstream if slower (they overlap). */
static double range_cost(int s, int lo, int hi, gpointer data)
{
  const TpAnalytic *a = data;
  size_t row = (size_t)s * (tp_model_n_layers(a->model) + 1);
  double t = a->fwd_prefix[row + hi] - a->fwd_prefix[row + lo] + a->bwd_prefix[row + hi] - a->bwd_prefix[row + lo];
  if (s < a->W - 1)
    t = MAX(t, link_time(a, (double)tp_model_layer(a->model, hi - 1)->out_elems));
  if (s > 0)
    t = MAX(t, link_time(a, (double)tp_model_layer(a->model, lo)->in_elems));
  return t;
}

static void range_sums(const TpAnalytic *a, int lo, int hi, double *params, double *stored)
{
  *params = *stored = 0;
  for (int i = lo; i < hi; i++) {
    *params += (double)tp_model_layer(a->model, i)->params;
    *stored += (double)tp_model_layer(a->model, i)->stored_elems;
  }
}

double tp_analytic_stage_bytes(const TpAnalytic *a, int s, int lo, int hi, int acts, int versions)
{
  (void)s;
  double params, stored;
  range_sums(a, lo, hi, &params, &stored);
  /* weight versions, optimizer state, gradient buffer; stored activations */
  return FLOAT_BYTES * params * (versions + 2) + FLOAT_BYTES * a->micro * stored * acts;
}

static gboolean range_fits(int s, int lo, int hi, gpointer data)
{
  const TpAnalytic *a = data;
  const TpDevice *d = &a->cluster->dev[tp_cluster_device_of(a->cluster, s)];
  return tp_analytic_stage_bytes(a, s, lo, hi, a->acts[s], a->versions[s]) + a->reserve[s] <= d->memory;
}

gboolean tp_analytic_split(TpAnalytic *a, const int *counts, const int *acts, const int *versions, GError **err)
{
  int L = tp_model_n_layers(a->model);
  if (counts) {
    int sum = 0;
    for (int s = 0; s < a->W; s++) {
      a->bounds[s] = sum;
      sum += counts[s];
    }
    a->bounds[a->W] = sum;
    if (sum != L) {
      g_set_error(err, TP_ERROR, TP_ERROR_PARAM_SPLIT, "the stages get %d layers, model %s has %d", sum,
                  a->model->name, L);
      return FALSE;
    }
    return TRUE;
  }
  a->acts = acts, a->versions = versions;
  gboolean ok = tp_partition(L, a->W, range_cost, acts && versions ? range_fits : NULL, a, a->bounds, NULL);
  a->acts = a->versions = NULL;
  if (!ok)
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "no split of model %s into %d stages fits the devices' memory (try a smaller batch or more stages)",
                a->model->name, a->W);
  return ok;
}

TpCost *tp_analytic_cost(const TpAnalytic *a)
{
  const TpCluster *c = a->cluster;
  TpCost *cost = tp_cost_unit(a->W);
  cost->unit = FALSE;
  cost->time_unit = "s";
  cost->byte_unit = "B";
  cost->samples_per_micro = a->micro;
  cost->source = g_strdup_printf("model %s on cluster %s, %ld samples per mini-batch", a->model->name, c->name,
                                 a->batch);
  cost->device_name = g_new0(char *, a->W + 1);
  cost->stage_note = g_new0(char *, a->W + 1);
  cost->capacity = g_new0(double, a->W);
  for (int s = 0; s < a->W; s++) {
    int lo = a->bounds[s], hi = a->bounds[s + 1];
    const TpDevice *d = &c->dev[tp_cluster_device_of(c, s)];
    const TpLayer *first = tp_model_layer(a->model, lo), *last = tp_model_layer(a->model, hi - 1);
    size_t row = (size_t)s * (tp_model_n_layers(a->model) + 1);
    double params, stored;
    range_sums(a, lo, hi, &params, &stored);
    TpStageCost *sc = &cost->stage[s];
    sc->fwd = a->fwd_prefix[row + hi] - a->fwd_prefix[row + lo];
    sc->bwd = a->bwd_prefix[row + hi] - a->bwd_prefix[row + lo];
    sc->upd = 5 * FLOAT_BYTES * params / (d->bandwidth * d->efficiency); /* SGD momentum: 3 reads, 2 writes */
    sc->act_bytes = FLOAT_BYTES * a->micro * (double)last->out_elems;
    sc->grad_bytes = FLOAT_BYTES * a->micro * (double)first->in_elems;
    sc->stored_bytes = FLOAT_BYTES * a->micro * stored;
    sc->weight_bytes = sc->optimizer_bytes = sc->grad_buffer_bytes = FLOAT_BYTES * params;
    sc->device = tp_cluster_device_of(c, s);
    cost->device_name[s] = g_strdup(d->name);
    cost->capacity[s] = d->memory;
    cost->stage_note[s] = g_strdup_printf("layers %d-%d (%s .. %s), %.4g M parameters", lo + 1, hi,
                                          tp_layer_names[first->kind], tp_layer_names[last->kind], params / 1e6);
  }
  for (int l = 0; l < a->W - 1; l++)
    cost->link[l] = (TpLinkCost){ c->link_latency, c->link_bandwidth };
  tp_cost_update_devices(cost);
  return cost;
}
