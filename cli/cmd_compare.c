/* cmd_compare.c — `timeprest compare`: one configuration, every preset side by side. */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_model.h"
#include "tp_report.h"

typedef struct {
  const TpPreset *p;
  TpSchedule *s;
  TpCost *c;
  TpSim *sim;
  TpMetrics *m;
  char *skip; /* why this preset does not apply, or NULL */
} Row;

static char *human_bytes(double b, gboolean unit)
{
  if (unit)
    return g_strdup_printf("%.0f", b);
  if (b >= 1e9)
    return g_strdup_printf("%.2fG", b / 1e9);
  if (b >= 1e6)
    return g_strdup_printf("%.1fM", b / 1e6);
  return g_strdup_printf("%.0fk", b / 1e3);
}

static void table(Row *rows, int n, long long dataset, GString *out)
{
  const Row *ref = NULL;
  for (int i = 0; i < n && !ref; i++)
    if (!rows[i].skip)
      ref = &rows[i];
  if (!ref)
    return;
  const TpCost *c = ref->c;
  const TpSchedule *s = ref->s;
  gboolean unit = c->unit;
  g_string_append_printf(out, "compare: W=%d, N=%d, K=%d; costs: %s\n", s->W, s->N, s->K,
                         unit ? "unit slots" : c->source);
  g_string_append_printf(out, "time/mini-batch: steady spacing of stage 1's updates (%s); epoch: %s; bubble: idle / "
                              "(W x makespan); mem: peak per stage (%s) / live weight versions\n\n",
                         c->time_unit, dataset ? "dataset / mini-batch size mini-batches" : "K mini-batches",
                         unit ? "units" : "bytes");
  if (unit)
    g_string_append(out, "unit slots: a whole-mini-batch forward or backward takes one slot like a micro-batch one, so "
                         "PipeDream's orders look N times faster than they are; use a cost model to compare times\n\n");
  gboolean any_over = FALSE;
  g_string_append_printf(out, "%-16s %12s %12s %7s %12s %3s %6s  %s\n", "preset", "t/mini-batch", "t/epoch", "bubble",
                         "throughput", "v", "chains", "mem/versions by stage");
  for (int i = 0; i < n; i++) {
    const Row *r = &rows[i];
    if (r->skip) {
      g_string_append_printf(out, "%-16s %s\n", r->p->name, r->skip);
      continue;
    }
    double per_epoch = dataset ? (double)dataset / (r->c->samples_per_micro * s->N) : s->K;
    g_string_append_printf(out, "%-16s %12.5g %12.5g %7.4f %12.5g %3d %6d ", r->p->name, r->m->t_minibatch, r->m->t_minibatch * per_epoch,
                           r->m->bubble, r->m->throughput, r->m->v_steady, r->m->chains);
    for (int st = 0; st < s->W; st++) {
      g_autofree char *b = human_bytes(r->m->stage[st].peak_bytes, unit);
      gboolean over = c->capacity && r->m->stage[st].peak_bytes > c->capacity[st];
      any_over |= over;
      g_string_append_printf(out, " %s/%d%s", b, r->m->stage[st].max_live_versions, over ? "!" : "");
    }
    g_string_append_c(out, '\n');
  }
  if (any_over)
    g_string_append(out, "\n! = more than the stage's device memory\n");
}

static void csv(Row *rows, int n, long long dataset, GString *out)
{
  int W = 0;
  for (int i = 0; i < n; i++)
    if (!rows[i].skip)
      W = rows[i].s->W;
  g_string_append(out, "preset,order,policy,applies,time_per_mini_batch,time_per_epoch,bubble_fraction,throughput,"
                       "v_steady,chains,multiple_sequences,makespan");
  for (int st = 1; st <= W; st++)
    g_string_append_printf(out, ",peak_bytes_%d,live_versions_%d,peak_activations_%d", st, st, st);
  g_string_append_c(out, '\n');
  for (int i = 0; i < n; i++) {
    const Row *r = &rows[i];
    g_string_append_printf(out, "%s,%s,%s,%d", r->p->name, tp_order_name(r->p->order), tp_policy_name(r->p->policy),
                           !r->skip);
    if (r->skip) {
      for (int k = 0; k < 8 + 3 * W; k++)
        g_string_append_c(out, ',');
      g_string_append_c(out, '\n');
      continue;
    }
    double per_epoch = dataset ? (double)dataset / (r->c->samples_per_micro * r->s->N) : r->s->K;
    g_string_append_printf(out, ",%.9g,%.9g,%.9g,%.9g,%d,%d,%d,%.9g", r->m->t_minibatch, r->m->t_minibatch * per_epoch, r->m->bubble,
                           r->m->throughput, r->m->v_steady, r->m->chains, r->m->multiple_sequences, r->m->makespan);
    for (int st = 0; st < W; st++)
      g_string_append_printf(out, ",%.9g,%d,%d", r->m->stage[st].peak_bytes, r->m->stage[st].max_live_versions,
                             r->m->stage[st].peak_activations);
    g_string_append_c(out, '\n');
  }
}

gboolean tp_cmd_compare(int argc, char **argv, GError **err)
{
  TpCliSchedule o = { 0 };
  TpCliCost co = { 0 };
  g_autofree char *format = NULL, *output = NULL;
  GOptionEntry entries[] = {
    { "format", 'f', 0, G_OPTION_ARG_STRING, &format, "table (default) or csv", "FORMAT" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Write to FILE instead of standard output", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- every preset on one configuration, side by side");
  tp_cli_schedule_options(ctx, &o);
  tp_cli_cost_options(ctx, &co);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx,
    "Runs every preset with the same W, N, K and cost model (with --model the layer split is chosen once, for\n"
    "the first preset, so that every preset runs the same stages).  -s, --order, --policy and --input do not apply.\n\n"
    "Example: timeprest compare --model vgg16-tinyimagenet --cluster C -n 4 --batch 128");
  static const char *const formats[] = { "table", "csv", NULL };
  int fmt = 0;
  if (!tp_cli_parse(ctx, &argc, &argv, err) || (format && !tp_cli_choice("--format", format, formats, &fmt, err)))
    goto fail;
  if (o.preset || o.order || o.policy || o.input) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "compare runs every preset: drop -s, --order, --policy and --input");
    goto fail;
  }
  if (!tp_cli_cost_defaults(&co, &o, err))
    goto fail;
  Row *rows = g_new0(Row, tp_n_presets);
  TpCost *shared = NULL;
  long long dataset = 0;
  gboolean ok = TRUE;
  for (int i = 0; i < tp_n_presets && ok; i++) {
    Row *r = &rows[i];
    r->p = &tp_presets[i];
    o.preset = (char *)r->p->name;
    GError *e = NULL;
    r->s = tp_cli_schedule_build(&o, &e);
    o.preset = NULL;
    if (!r->s) {
      r->skip = g_strdup_printf("n/a: %s", e->message);
      g_error_free(e);
      continue;
    }
    if (!shared && !(shared = tp_cli_cost_build(&co, r->s, err)))
      ok = FALSE;
    else if (!tp_cli_costed_order(&co, &r->s, shared, err) || !(r->sim = tp_sim_run(r->s, shared, err)))
      ok = FALSE;
    else {
      r->m = tp_metrics_compute(r->sim);
      r->c = shared;
    }
  }
  if (ok && co.model) {
    g_autoptr(TpModel) m = tp_model_load(co.model, NULL);
    dataset = m ? m->dataset : 0;
  }
  if (ok) {
    g_autoptr(GString) out = g_string_new(NULL);
    (fmt ? csv : table)(rows, tp_n_presets, dataset, out);
    ok = tp_cli_emit(output, out, err);
  }
  for (int i = 0; i < tp_n_presets; i++) {
    tp_metrics_free(rows[i].m);
    tp_sim_free(rows[i].sim);
    tp_schedule_free(rows[i].s);
    g_free(rows[i].skip);
  }
  g_free(rows);
  tp_cost_free(shared);
  tp_cli_schedule_clear(&o);
  tp_cli_cost_clear(&co);
  return ok;
fail:
  tp_cli_schedule_clear(&o);
  tp_cli_cost_clear(&co);
  return FALSE;
}
