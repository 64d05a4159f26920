/* tp_cli_cost.c — the cost model options shared by simulate, compare, plot and schedule: unit
 * slots, a cost file, or a model on a cluster or a measured profile, with data and tensor
 * parallelism, a split, --fit-memory, and the order fixed on the costs (tp_cli.h). */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_analytic.h"
#include "tp_costed.h"
#include "tp_fit.h"
#include "tp_keyfile.h"
#include "tp_layout.h"
#include "tp_tie.h"

#include <stdio.h>
#include <string.h>

void tp_cli_cost_options(GOptionContext *ctx, TpCliCost *o)
{
  GOptionEntry entries[] = {
    { "cost", 'c', 0, G_OPTION_ARG_FILENAME, &o->cost, "Cost file (key file, see docs/formats.md); default: unit slots", "FILE" },
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &o->model, "Model description: a name from models/, a .model file or a config.json",
      "NAME" },
    { "cluster", 0, 0, G_OPTION_ARG_FILENAME, &o->cluster, "Cluster with --model: " TP_CLUSTERS_SHIPPED ", or a .cluster file",
      "FILE" },
    { "profile", 0, 0, G_OPTION_ARG_FILENAME, &o->profile,
      "Measured profile with --model (timeprest profile; a --cluster then gives only the links)", "FILE" },
    { "batch", 'b', 0, G_OPTION_ARG_STRING, &o->batch, "Samples per mini-batch with --model, over all replicas (default 32 N each replica)", "B" },
    { "split", 0, 0, G_OPTION_ARG_STRING, &o->split, "Layers per stage, e.g. 10,12,8,6 (default: the optimal split)",
      "COUNTS" },
    { "fit-memory", 0, 0, G_OPTION_ARG_NONE, &o->fit_memory, "Split so that every stage fits its device's memory",
      NULL },
    { "optimizer", 0, 0, G_OPTION_ARG_STRING, &o->optimizer,
      "The optimizer the model trains with: sgd (default; momentum: one float a parameter) or adamw (two)", "NAME" },
    { "order-from", 0, 0, G_OPTION_ARG_STRING, &o->order_from,
      "Timeline the nf1b/1f1b-async order (and vsync versions) is fixed on: costs (the default with a cost model: "
      "each stage runs what is ready) or slots (the published unit-slot order)", "slots|costs" },
    { "costed-order", 0, 0, G_OPTION_ARG_NONE, &o->costed_order, "The same as --order-from costs", NULL },
    { "data-parallel", 0, 0, G_OPTION_ARG_STRING, &o->data_parallel,
      "D replicas of the pipeline, --batch split over them; each stage's gradients all-reduced (ring) before its "
      "update (default 1)", "D" },
    { "overlap-allreduce", 0, 0, G_OPTION_ARG_NONE, &o->overlap_allreduce,
      "With --data-parallel: all-reduce in 25 MiB buckets behind each stage's last backward", NULL },
    { "tensor-parallel", 0, 0, G_OPTION_ARG_STRING, &o->tensor_parallel,
      "With --model: transformer blocks split T ways on one node (simulated, not executed; default 1)", "T" },
    { "sequence-parallel", 0, 0, G_OPTION_ARG_NONE, &o->sequence_parallel,
      "With --tensor-parallel: the blocks' remaining activations split too (Korthikanti et al. 2022)", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_option_context_add_main_entries(ctx, entries, NULL);
}

gboolean tp_cli_cost_load_model(TpCliCost *o, GError **err)
{
  return !o->model || (o->loaded = tp_model_load(o->model, err)) != NULL;
}

void tp_cli_cost_clear(TpCliCost *o)
{
  tp_model_free(o->loaded);
  g_free(o->cost);
  g_free(o->model);
  g_free(o->cluster);
  g_free(o->profile);
  g_free(o->batch);
  g_free(o->split);
  g_free(o->order_from);
  g_free(o->optimizer);
  g_free(o->data_parallel);
  g_free(o->tensor_parallel);
}

/* --data-parallel D and --tensor-parallel T (1 where not given), and the options that need them. */
static gboolean parallel_options(const TpCliCost *o, GError **err)
{
  int D = 1, T = 1;
  if ((o->data_parallel && !tp_cli_int("--data-parallel", o->data_parallel, 1, 4096, &D, err)) ||
      (o->tensor_parallel && !tp_cli_int("--tensor-parallel", o->tensor_parallel, 1, 1024, &T, err)))
    return FALSE;
  const char *why = D > 1 && !o->cost && !o->model ? "--data-parallel: the all-reduce needs a cost model (--cost FILE, "
                                                     "or --model with --cluster or --profile)"
                    : o->overlap_allreduce && D < 2 ? "--overlap-allreduce needs --data-parallel D with D > 1"
                    : T > 1 && !o->model ? "--tensor-parallel needs --model (it splits the model's transformer blocks)"
                    : o->sequence_parallel && T < 2 ? "--sequence-parallel needs --tensor-parallel T with T > 1"
                                                    : NULL;
  if (why)
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s", why);
  return !why;
}

gboolean tp_cli_cost_defaults(const TpCliCost *o, TpCliSchedule *so, GError **err)
{
  if (o->cost && (o->model || o->cluster || o->profile)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--cost: give a cost file, or --model with --cluster or --profile, not both");
    return FALSE;
  }
  if (o->profile && !o->model) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--profile: give the model it was taken of (--model)");
    return FALSE;
  }
  if (!o->profile && !o->model != !o->cluster) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--model and --cluster go together (or --model with --profile)");
    return FALSE;
  }
  if (!o->model && (o->batch || o->split || o->fit_memory || o->optimizer)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--batch, --split, --fit-memory and --optimizer need --model and --cluster");
    return FALSE;
  }
  if (o->split && o->fit_memory) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--split and --fit-memory exclude each other");
    return FALSE;
  }
  if (!parallel_options(o, err))
    return FALSE;
  static const char *const from[] = { "slots", "costs", NULL };
  int which = -1;
  if (o->order_from && !tp_cli_choice("--order-from", o->order_from, from, &which, err))
    return FALSE;
  if (o->costed_order && which == 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--costed-order is --order-from costs: drop one of them");
    return FALSE;
  }
  if ((o->costed_order || which == 1) && !o->cost && !o->model) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: fixing the order on costs needs a cost model (--cost FILE, or --model "
                "with --cluster or --profile)", o->costed_order ? "--costed-order" : "--order-from costs");
    return FALSE;
  }
  if (o->cluster && !o->profile && !so->workers && !so->input) {
    g_autoptr(TpCluster) c = tp_cluster_load(o->cluster, err);
    if (!c)
      return FALSE;
    if (c->n > 1)
      so->workers = g_strdup_printf("%d", c->n);
  }
  return TRUE;
}

gboolean tp_cli_split(const char *text, int W, int *counts, GError **err)
{
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  if ((int)g_strv_length(parts) != W) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--split: expected %d layer counts (one per stage), got %u", W,
                g_strv_length(parts));
    return FALSE;
  }
  for (int s = 0; s < W; s++)
    if (!tp_cli_int("--split", g_strstrip(parts[s]), 1, 1 << 20, &counts[s], err))
      return FALSE;
  return TRUE;
}

gboolean tp_cli_order_on_costs(const TpCliCost *o)
{
  if (o->costed_order)
    return TRUE;
  if (o->order_from)
    return strcmp(o->order_from, "costs") == 0;
  return o->cost || o->model;
}

/* What every cost gets once made (and each cost --fit-memory simulates): the cluster's links for D
 * replicas of T-way blocks, interleaved chunks on their ranks' devices, the replicas' all-reduce. */
typedef struct {
  const TpCliCost *o;
  const TpSchedule *s;
  const TpCluster *cluster; /* NULL: no layout */
  int D, T;
} Dress;

static void dress(TpCost *c, gconstpointer data)
{
  const Dress *d = data;
  if (d->cluster)
    tp_layout_links(c, d->cluster, d->D, d->T, d->s->rank_seq ? d->s->map : TP_MAP_NONE, tp_schedule_ranks(d->s));
  tp_cost_place_chunks(c, d->s);
  tp_cost_data_parallel(c, d->D, d->o->overlap_allreduce);
  if (d->D * d->T > 1) /* every replica's and tensor rank's GPU, a worker of chunks one */
    c->gpus = (long)d->D * tp_schedule_ranks(d->s) * d->T;
}

static TpCost *cost_build(const Dress *d, GError **err);

TpCost *tp_cli_cost_build(const TpCliCost *o, const TpSchedule *s, GError **err)
{
  Dress d = { .o = o, .s = s, .D = 1, .T = 1 };
  if ((o->data_parallel && !tp_cli_int("--data-parallel", o->data_parallel, 1, 4096, &d.D, err)) ||
      (o->tensor_parallel && !tp_cli_int("--tensor-parallel", o->tensor_parallel, 1, 1024, &d.T, err)))
    return NULL;
  return cost_build(&d, err);
}

/* Whether a run on c takes time: an operation's, a message's on a link, or an all-reduce's. */
static gboolean takes_time(const TpCost *c)
{
  for (int st = 0; st < c->W; st++) {
    const TpStageCost *sc = &c->stage[st];
    if (sc->fwd > 0 || sc->bwd > 0 || sc->upd > 0)
      return TRUE;
    const TpLinkCost *l = st + 1 < c->W ? &c->link[st] : NULL;
    if (l && (l->latency > 0 || (l->bandwidth > 0 && (sc->act_bytes > 0 || c->stage[st + 1].grad_bytes > 0))))
      return TRUE;
    const TpDataParallel *dp = c->dp && c->dp->D > 1 ? c->dp : NULL;
    if (dp && (dp->latency[st] > 0 || (dp->bandwidth[st] > 0 && dp->bytes[st] > 0)))
      return TRUE;
  }
  return FALSE;
}

/* --cost FILE's costs for d's schedule, dressed. */
static TpCost *cost_from_file(const char *path, const Dress *d, GError **err)
{
  TpCost *c = tp_cost_load(path, d->s->W, err);
  if (c)
    dress(c, d);
  if (c && !takes_time(c)) { /* a run of no time has no rate: refuse rather than report 0 samples/s */
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: every time is 0 (operations, messages%s), so a run takes no "
                "time and its rates are undefined; give at least one of them a time", path,
                d->D > 1 ? ", all-reduces" : "");
    tp_cost_free(c);
    return NULL;
  }
  return c;
}

/* The cost of d's schedule under d's options, dressed (with the cluster's layout where one is given). */
static TpCost *cost_build(const Dress *d, GError **err)
{
  const TpCliCost *o = d->o;
  const TpSchedule *s = d->s;
  const int D = d->D, T = d->T;
  if (o->cost || !o->model) {
    TpCost *c = o->cost ? cost_from_file(o->cost, d, err) : tp_cost_unit(s->W);
    if (c && !o->cost)
      dress(c, d);
    return c;
  }
  g_autoptr(TpModel) m = o->loaded ? tp_model_copy(o->loaded) : tp_model_load(o->model, err);
  g_autoptr(TpCluster) c = m && o->cluster ? tp_cluster_load(o->cluster, err) : NULL;
  g_autoptr(TpProfile) prof = m && o->profile && (c || !o->cluster) ? tp_profile_load(o->profile, err) : NULL;
  if (!m || (o->cluster && !c) || (o->profile && !prof))
    return NULL;
  if (c)
    tp_cluster_expand(c, s->W);
  if (c && !prof && !tp_layout_check(c, D, tp_schedule_ranks(s), T, err)) /* (with a profile: its links) */
    return NULL;
  int batch = 32 * s->N * D;
  if (o->batch && !tp_cli_int("--batch", o->batch, 1, 1 << 24, &batch, err))
    return NULL;
  if (batch % D != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--batch: %d samples do not split evenly over %d replicas", batch, D);
    return NULL;
  }
  batch /= D; /* each replica's */
  if (!tp_model_tensor_check(m, T, err))
    return NULL;
  tp_model_tensor_parallel(m, T, o->sequence_parallel);
  static const char *const optimizers[] = { "sgd", "adamw", NULL };
  int adamw = 0;
  if (o->optimizer && !tp_cli_choice("--optimizer", o->optimizer, optimizers, &adamw, err))
    return NULL;
  /* any W, on the devices as plan places it: fewer stages take the first devices, more share them */
  g_autoptr(TpAnalytic) a = tp_analytic_new_on(m, c, prof, s->W, s->N, batch, TRUE, err);
  if (!a || (s->rank_seq && !tp_analytic_place(a, s, err)))
    return NULL;
  a->optimizer_states = 1 + adamw, a->recompute = s->recompute;
  tp_analytic_parallel(a, D, T);
  g_autofree int *counts = NULL;
  if (o->split) {
    counts = g_new(int, s->W);
    if (!tp_cli_split(o->split, s->W, counts, err))
      return NULL;
  }
  const Dress laid = { .o = o, .s = s, .cluster = c, .D = D, .T = T };
  const TpCostDress fit_dress = { dress, &laid };
  TpCost *cost = NULL;
  if (o->fit_memory)
    cost = tp_fit_memory(a, s, NULL, tp_cli_order_on_costs(o) && !s->source, 16, &fit_dress, err);
  else if (tp_analytic_split(a, counts, NULL, NULL, err) && (cost = tp_analytic_cost(a)))
    dress(cost, &laid);
  if (cost && !tp_tie_check_split(m, a->bounds, a->W, err)) /* two heads tied across stages */
    g_clear_pointer(&cost, tp_cost_free);
  return cost;
}



int tp_cli_memory_warnings(const TpCost *c, const TpMetrics *m, const char *label)
{
  if (!c->capacity)
    return 0;
  int warned = 0;
  for (int d = 0; d < c->n_devices; d++) {
    double need = 0, cap = 0;
    int first = -1;
    for (int s = 0; s < c->W; s++)
      if (c->stage[s].device == d) {
        need += m->stage[s].peak_bytes;
        cap += c->capacity[s]; /* each stage's share of the memory */
        first = first < 0 ? s : first;
      }
    if (first >= 0 && need > cap) {
      fprintf(stderr, "timeprest: warning: %s%sstage%s %d%s on %s needs %.3g GB at peak, the device has %.3g GB\n",
              label ? label : "", label ? ": " : "", c->shared_devices ? "s" : "", first + 1,
              c->shared_devices ? " and the others sharing it" : "", c->device_name[first], need / 1e9, cap / 1e9);
      warned++;
    }
  }
  return warned;
}

gboolean tp_cli_costed_order(const TpCliCost *o, TpSchedule **s, const TpCost *c, GError **err)
{
  if (!tp_cli_order_on_costs(o))
    return TRUE;
  if ((*s)->source) {
    if (!o->costed_order && !o->order_from)
      return TRUE; /* the default: a file's order stays as written */
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: a schedule file's order is fixed already",
                o->costed_order ? "--costed-order" : "--order-from");
    return FALSE;
  }
  if (!tp_order_depends_on_costs((*s)->order))
    return TRUE;
  TpSchedule *t = tp_schedule_costed_like(*s, c, err);
  if (!t)
    return FALSE;
  tp_schedule_free(*s);
  *s = t;
  return TRUE;
}

