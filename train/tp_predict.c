/* tp_predict.c — the simulator's prediction of a training run from the executor's profile, and the
 * prediction and the measurement (the executor's timeline through the simulator's metrics) side by
 * side. */
#include "tp_predict.h"
#include "tp_sim.h"

#include <math.h>
#include <string.h>

TpCost *tp_predict_cost(const TpRuntime *rt, const TpStageProfile *prof, int N, int batch, int cores)
{
  int W = tp_runtime_stages(rt);
  double m = (double)batch / N;
  TpCost *c = tp_cost_unit(W);
  c->unit = FALSE;
  c->samples_per_micro = m;
  c->time_unit = "s";
  c->byte_unit = "B";
  for (int s = 0; s < W; s++) {
    TpWStoreSizes sz;
    tp_runtime_sizes(rt, s, &sz);
    double pb = (double)sz.n_params * sizeof(float);
    c->stage[s] = (TpStageCost){
      .fwd = prof[s].fwd,
      .fwd_whole = prof[s].fwd_whole,
      .bwd = prof[s].bwd,
      .upd = prof[s].upd,
      .act_bytes = m * (double)tp_runtime_act_bytes_per_sample(rt, s),
      .grad_bytes = m * (double)tp_runtime_grad_bytes_per_sample(rt, s),
      .stored_bytes = m * (double)tp_runtime_saved_bytes_per_sample(rt, s),
      .weight_bytes = pb,
      .optimizer_bytes = (double)sz.optimizer_bytes,
      .grad_buffer_bytes = (double)sz.gradient_bytes,
      .device = cores > 0 && W > cores ? s % cores : s,
      .input_bytes = m * (double)tp_runtime_input_bytes_per_sample(rt, s),
      .bwd_input = prof[s].inp, /* a split backward's I as profiled (0: not split) */
    };
    if (prof[s].inp > 0 && prof[s].wgt > 0) /* the backward the schedule runs: I + W */
      c->stage[s].bwd = prof[s].inp + prof[s].wgt;
  }
  for (int l = 0; l < MAX(W - 1, 1); l++)
    c->link[l] = (TpLinkCost){ .latency = 0 };
  c->source = g_strdup("the profile of this run");
  tp_cost_update_devices(c);
  return c;
}

void tp_predict_set_links(TpCost *c, const double *latency_s, const double *bandwidth_Bps, const double *eager_limit)
{
  for (int l = 0; l < c->W - 1; l++)
    c->link[l] = (TpLinkCost){ .latency = latency_s[l], .bandwidth = bandwidth_Bps[l],
                               .eager_limit = eager_limit ? eager_limit[l] : 0 };
  g_free(c->source);
  c->source = g_strdup("the profile of this run and the measured links");
}

static void side_alloc(TpSide *d, int W)
{
  d->busy = g_new0(double, W);
  d->peak_bytes = g_new0(double, W);
  d->max_live_versions = g_new0(int, W);
  d->peak_activations = g_new0(int, W);
}

static void side_clear(TpSide *d)
{
  g_free(d->busy);
  g_free(d->peak_bytes);
  g_free(d->max_live_versions);
  g_free(d->peak_activations);
}

void tp_comparison_init(TpComparison *c, const TpMetrics *p)
{
  memset(c, 0, sizeof *c);
  c->W = p->W;
  side_alloc(&c->predicted, p->W);
  side_alloc(&c->measured, p->W);
  c->predicted.t_minibatch = p->t_minibatch;
  c->predicted.makespan = p->makespan;
  for (int s = 0; s < p->W; s++) {
    c->predicted.busy[s] = p->stage[s].busy;
    c->predicted.max_live_versions[s] = p->stage[s].max_live_versions;
    c->predicted.peak_activations[s] = p->stage[s].peak_activations;
    c->predicted.peak_bytes[s] = p->stage[s].peak_bytes;
  }
}

void tp_comparison_add(TpComparison *c, const TpMetrics *m, const TpRunResult *r)
{
  TpSide *d = &c->measured;
  int n = ++c->n_measured;
  d->t_minibatch += (m->t_minibatch - d->t_minibatch) / n;
  d->makespan += (m->makespan - d->makespan) / n;
  for (int s = 0; s < c->W; s++) {
    d->busy[s] += (m->stage[s].busy - d->busy[s]) / n;
    d->max_live_versions[s] = MAX(d->max_live_versions[s], r->stats[s].max_live_versions);
    d->peak_activations[s] = MAX(d->peak_activations[s], r->stats[s].max_activations);
    d->peak_bytes[s] = MAX(d->peak_bytes[s], (double)r->stats[s].peak_total);
  }
}

void tp_comparison_clear(TpComparison *c)
{
  side_clear(&c->predicted);
  side_clear(&c->measured);
}

double tp_rel_error(double p, double m)
{
  if (m == 0)
    return p == 0 ? 0 : INFINITY;
  return (p - m) / m;
}

static void num(GString *out, double x)
{
  if (isfinite(x))
    g_string_append_printf(out, "%.9g", x);
  else
    g_string_append(out, "null");
}

static void side_json(const TpSide *d, int W, GString *out)
{
  g_string_append(out, "{\"time_per_mini_batch\": ");
  num(out, d->t_minibatch);
  g_string_append(out, ", \"makespan\": ");
  num(out, d->makespan);
  g_string_append(out, ", \"stages\": [");
  for (int s = 0; s < W; s++) {
    g_string_append_printf(out, "%s{\"stage\": %d, \"busy\": ", s ? ", " : "", s + 1);
    num(out, d->busy[s]);
    g_string_append_printf(out, ", \"max_live_versions\": %d, \"peak_activations\": %d, \"peak_bytes\": ",
                           d->max_live_versions[s], d->peak_activations[s]);
    num(out, d->peak_bytes[s]);
    g_string_append_c(out, '}');
  }
  g_string_append(out, "]}");
}

void tp_comparison_json(const TpComparison *c, GString *out)
{
  const TpSide *p = &c->predicted, *m = &c->measured;
  g_string_append(out, "\"predicted\": ");
  side_json(p, c->W, out);
  if (!c->n_measured) { /* no whole segment ran here (the rest of a cut one, a shorter last one) */
    g_string_append(out, ", \"measured\": null, \"error\": null");
    return;
  }
  g_string_append(out, ", \"measured\": ");
  side_json(m, c->W, out);
  g_string_append(out, ", \"error\": {\"time_per_mini_batch\": ");
  num(out, tp_rel_error(p->t_minibatch, m->t_minibatch));
  g_string_append(out, ", \"makespan\": ");
  num(out, tp_rel_error(p->makespan, m->makespan));
  g_string_append(out, ", \"stages\": [");
  for (int s = 0; s < c->W; s++) {
    g_string_append_printf(out, "%s{\"stage\": %d, \"busy\": ", s ? ", " : "", s + 1);
    num(out, tp_rel_error(p->busy[s], m->busy[s]));
    g_string_append_printf(out, ", \"max_live_versions\": %d, \"peak_activations\": %d, \"peak_bytes\": ",
                           p->max_live_versions[s] - m->max_live_versions[s],
                           p->peak_activations[s] - m->peak_activations[s]);
    num(out, tp_rel_error(p->peak_bytes[s], m->peak_bytes[s]));
    g_string_append_c(out, '}');
  }
  g_string_append(out, "]}");
}

static void row(GString *out, const char *what, double p, double m, const char *unit, double scale)
{
  g_string_append_printf(out, "  %-28s %12.4f %12.4f %+9.1f%%  %s\n", what, p * scale, m * scale,
                         100 * tp_rel_error(p, m), unit);
}

void tp_comparison_text(const TpComparison *c, GString *out)
{
  const TpSide *p = &c->predicted, *m = &c->measured;
  if (!c->n_measured) {
    g_string_append(out, "  no whole segment of the plan ran in this process (the rest of a cut one, or a shorter "
                         "last one): nothing measured to set beside the prediction\n");
    return;
  }
  g_string_append_printf(out, "  %-28s %12s %12s %10s\n", "", "predicted", "measured", "error");
  row(out, "time per mini-batch", p->t_minibatch, m->t_minibatch, "ms (steady: spacing of stage 1's updates)", 1e3);
  row(out, "schedule makespan", p->makespan, m->makespan, "s", 1);
  for (int s = 0; s < c->W; s++) {
    char what[64];
    g_snprintf(what, sizeof what, "stage %d busy", s + 1);
    row(out, what, p->busy[s], m->busy[s], "s", 1);
    g_snprintf(what, sizeof what, "stage %d max live versions", s + 1);
    g_string_append_printf(out, "  %-28s %12d %12d %10s\n", what, p->max_live_versions[s], m->max_live_versions[s],
                           p->max_live_versions[s] == m->max_live_versions[s] ? "equal" : "DIFFER");
    g_snprintf(what, sizeof what, "stage %d peak activations", s + 1);
    g_string_append_printf(out, "  %-28s %12d %12d %10s\n", what, p->peak_activations[s], m->peak_activations[s],
                           p->peak_activations[s] == m->peak_activations[s] ? "equal" : "DIFFER");
    g_snprintf(what, sizeof what, "stage %d peak bytes", s + 1);
    row(out, what, p->peak_bytes[s], m->peak_bytes[s], "MB", 1e-6);
  }
}
