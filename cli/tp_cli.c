/* tp_cli.c — option helpers shared by the subcommands. */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_output.h"
#include "tp_analytic.h"
#include "tp_costed.h"
#include "tp_fit.h"
#include "tp_keyfile.h"
#include "tp_layout.h"
#include "tp_policy.h"
#include "tp_tie.h"
#include "tp_replay.h"
#include "tp_sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

gboolean tp_cli_int(const char *flag, const char *text, int lo, int hi, int *out, GError **err)
{
  if (tp_parse_int(text, lo, hi, out, err))
    return TRUE;
  g_prefix_error(err, "%s: ", flag);
  return FALSE;
}

gboolean tp_cli_act_limit(const char *text, TpOrder o, double *out, GError **err)
{
  *out = 0;
  if (text && (!tp_kf_parse_number(text, out) || *out <= 0)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--activation-limit %s: not a positive number", text);
    return FALSE;
  }
  return tp_limit_check(o, *out, err);
}

gboolean tp_cli_bytes(const char *flag, const char *text, double *out, GError **err)
{
  if (tp_parse_bytes(text, 1, out, err))
    return TRUE;
  g_prefix_error(err, "%s: ", flag);
  return FALSE;
}

gboolean tp_cli_range(const char *flag, const char *text, int lo, int hi, int *a, int *b, GError **err)
{
  const char *dash = text ? strchr(text + (text[0] == '-'), '-') : NULL;
  if (!dash)
    return tp_cli_int(flag, text, lo, hi, a, err) && tp_cli_int(flag, text, lo, hi, b, err);
  g_autofree char *left = g_strndup(text, (gsize)(dash - text));
  if (!tp_cli_int(flag, left, lo, hi, a, err) || !tp_cli_int(flag, dash + 1, lo, hi, b, err))
    return FALSE;
  if (*a > *b) {
    g_autofree char *q = tp_quote(text);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: range %s is reversed (write %d-%d)", flag, q, *b, *a);
    return FALSE;
  }
  return TRUE;
}

static gint compare_int(gconstpointer a, gconstpointer b)
{
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

void tp_cli_sort_unique(GArray *a)
{
  g_array_sort(a, compare_int);
  for (guint i = 1; i < a->len;)
    if (g_array_index(a, int, i) == g_array_index(a, int, i - 1))
      g_array_remove_index(a, i);
    else
      i++;
}

gboolean tp_cli_choice(const char *flag, const char *text, const char *const *choices, int *out, GError **err)
{
  for (int i = 0; choices[i]; i++)
    if (g_strcmp0(text, choices[i]) == 0) {
      *out = i;
      return TRUE;
    }
  g_autofree char *list = g_strjoinv(", ", (char **)choices);
  g_autofree char *q = tp_quote(text ? text : "");
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: unknown value %s (expected one of: %s)", flag, q, list);
  return FALSE;
}

const TpPreset *tp_cli_preset(const char *name, GError **err)
{
  const TpPreset *p = tp_preset_find(name ? name : "timeprest");
  if (!p) {
    g_autofree char *names = tp_preset_names();
    g_autofree char *q = tp_quote(name);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-s: unknown preset %s (expected one of: %s)", q, names);
  }
  return p;
}

GArray *tp_cli_sweep(const char *wr, const char *nr, const char *preset, long max_cells, const TpPreset **p,
                     int range[4], GError **err)
{
  range[0] = range[2] = 2, range[1] = range[3] = 16;
  if ((wr && !tp_cli_range("-w", wr, 1, TP_MAX_WORKERS, &range[0], &range[1], err)) ||
      (nr && !tp_cli_range("-n", nr, 1, TP_MAX_MICRO, &range[2], &range[3], err)) || !(*p = tp_cli_preset(preset, err)))
    return NULL;
  long cells = (long)(range[1] - range[0] + 1) * (range[3] - range[2] + 1);
  if (cells > max_cells) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "the sweep has %ld cells, more than the limit of %ld", cells, max_cells);
    return NULL;
  }
  return tp_sweep((*p)->order, (*p)->policy, range[0], range[1], range[2], range[3], err);
}

void tp_cli_schedule_options(GOptionContext *ctx, TpCliSchedule *o)
{
  GOptionEntry entries[] = {
    { "preset", 's', 0, G_OPTION_ARG_STRING, &o->preset, "Schedule preset (default timeprest; see 'timeprest --help')",
      "PRESET" },
    { "order", 0, 0, G_OPTION_ARG_STRING, &o->order, "Order instead of a preset: gpipe, 1f1b, 1f1b-async, nf1b, 2bw, zb-h1, zb-h2, interleaved-1f1b, zb-v, "
      "zb-1p, zb-2p, zb-auto, dualpipe-v",
      "ORDER" },
    { "policy", 0, 0, G_OPTION_ARG_STRING, &o->policy,
      "Weight policy with --order: sync, stash, vsync-latest, latest, intermediate, 2bw", "POLICY" },
    { "workers", 'w', 0, G_OPTION_ARG_STRING, &o->workers, "Workers = pipeline stages (default 4)", "W" },
    { "chunks", 0, 0, G_OPTION_ARG_STRING, &o->chunks,
      "Model chunks per worker for interleaved-1f1b (default 2; zb-v holds 2): W x V stages", "V" },
    { "activation-limit", 0, 0, G_OPTION_ARG_STRING, &o->act_limit,
      "zb-auto's and zb-v's limit: micro-batches' stored activations a stage (zb-v: a worker's two chunks) may "
      "hold (a W keeps M_W of them; default 2W, zb-v W)", "X" },
    { "micro-batches", 'n', 0, G_OPTION_ARG_STRING, &o->micro, "Micro-batches per mini-batch (default 4)", "N" },
    { "mini-batches", 'k', 0, G_OPTION_ARG_STRING, &o->mini, "Mini-batches (default 3W+2: W+2 of them in the steady state; "
      "3WV+2 for W workers of V chunks)", "K" },
    { "significance", 0, 0, G_OPTION_ARG_STRING, &o->significance,
      "intermediate policy's s(d): exp[:TAU] (default exp:1), linear, const:C", "S" },
    { "input", 'i', 0, G_OPTION_ARG_FILENAME, &o->input, "Read the schedule from a CSV (ours or PyTorch's compute-only one) or JSON file instead",
      "FILE" },
    { "recompute", 0, 0, G_OPTION_ARG_NONE, &o->recompute,
      "Store only each stage's input of a forward; a backward first runs the forward again (docs/recompute.md)",
      NULL },
    { "fuse-forwards", 0, 0, G_OPTION_ARG_NONE, &o->fuse,
      "Run the N forwards of a mini-batch as one whole-mini-batch forward where they run back to back on every stage "
      "reading one version (nf1b on costs; docs/fused-forwards.md)", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_option_context_add_main_entries(ctx, entries, NULL);
}

void tp_cli_schedule_clear(TpCliSchedule *o)
{
  g_free(o->preset);
  g_free(o->order);
  g_free(o->policy);
  g_free(o->workers);
  g_free(o->micro);
  g_free(o->mini);
  g_free(o->input);
  g_free(o->significance);
  g_free(o->chunks);
  g_free(o->act_limit);
}

/* The order and policy of -s PRESET, or of --order with --policy. */
static gboolean order_policy(const TpCliSchedule *o, TpOrder *order, TpPolicy *policy, GError **err)
{
  if (!o->order && !o->policy) {
    const TpPreset *p = tp_cli_preset(o->preset, err);
    if (p)
      *order = p->order, *policy = p->policy;
    return p != NULL;
  }
  if (o->preset) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-s: give a preset or --order with --policy, not both");
    return FALSE;
  }
  if (!o->order || !o->policy) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--order and --policy go together");
    return FALSE;
  }
  if (!tp_order_from_name(o->order, order)) {
    g_autofree char *q = tp_quote(o->order);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--order: unknown order %s (gpipe, 1f1b, 1f1b-async, nf1b, 2bw, zb-h1, zb-h2, "
                "interleaved-1f1b, zb-v, zb-1p, zb-2p, zb-auto, dualpipe-v)", q);
    return FALSE;
  }
  if (!tp_policy_from_name(o->policy, policy)) {
    g_autofree char *q = tp_quote(o->policy);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "--policy: unknown policy %s (sync, stash, vsync-latest, latest, intermediate, 2bw)", q);
    return FALSE;
  }
  return TRUE;
}

/* tp_cli_schedule_build, keeping in prep (NULL: nothing) what generating the schedule computed */
static TpSchedule *schedule_build(const TpCliSchedule *o, TpPrepared *prep, GError **err)
{
  if (o->input) {
    if (o->preset || o->order || o->policy || o->workers || o->micro || o->mini || o->chunks || o->significance ||
        o->act_limit) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--input: the file gives the schedule; drop "
                  "-s/--order/--policy/-w/-n/-k/--chunks/--significance/--activation-limit");
      return NULL;
    }
    TpSchedule *s = tp_schedule_load_prepared(o->input, prep, err);
    if (s && o->recompute && !tp_schedule_ask_recompute(s, err))
      g_clear_pointer(&s, tp_schedule_free);
    return s;
  }
  TpOrder order;
  TpPolicy policy;
  if (!order_policy(o, &order, &policy, err))
    return NULL;
  int W = 4, N = 4, K;
  if ((o->workers && !tp_cli_int("-w", o->workers, 1, TP_MAX_WORKERS, &W, err)) ||
      (o->micro && !tp_cli_int("-n", o->micro, 1, TP_MAX_MICRO, &N, err)))
    return NULL;
  int V = tp_order_default_chunks(order);
  if (o->chunks && !tp_cli_int("--chunks", o->chunks, 1, TP_MAX_WORKERS, &V, err))
    return NULL;
  /* the default reaches a steady state: W + 2 mini-batches of it, W counting the stages (W·V chunks) */
  K = tp_default_mini_batches(tp_order_chunked(order) && (long long)W * V <= TP_MAX_WORKERS ? W * V : W);
  if (o->mini && !tp_cli_int("-k", o->mini, 1, TP_MAX_MINI, &K, err))
    return NULL;
  TpSignificance sig = { TP_SIG_EXP, 1.0 };
  if (o->significance) {
    if (policy != TP_POLICY_INTERMEDIATE) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--significance: only the intermediate policy blends weights");
      return NULL;
    }
    if (!tp_significance_parse(o->significance, &sig, err)) {
      g_prefix_error(err, "--significance: ");
      return NULL;
    }
  }
  double limit;
  if (!tp_size_check(W, N, K, err) || !tp_pair_check(order, policy, W, N, err) || !tp_chunks_check(order, W, V, N, err) ||
      !tp_cli_act_limit(o->act_limit, order, &limit, err))
    return NULL;
  TpSchedule *s = limit > 0 ? tp_schedule_generate_limited(order, policy, W, N, K, limit, prep, err)
                            : tp_schedule_generate_chunked(order, policy, W, V, N, K, prep, err);
  if (s)
    s->sig = sig;
  if (s && o->recompute && !tp_schedule_ask_recompute(s, err))
    g_clear_pointer(&s, tp_schedule_free);
  return s;
}

/* With --fuse-forwards, *s becomes its copy with fused forwards; none to fuse is a usage error. */
static gboolean fuse(const TpCliSchedule *o, TpSchedule **s, GError **err)
{
  if (!o->fuse)
    return TRUE;
  int n = 0;
  TpSchedule *f = tp_schedule_fuse_forwards(*s, &n, err);
  if (!f) {
    if (!err || !*err)
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--fuse-forwards: " TP_FUSE_NOTHING);
    return FALSE;
  }
  tp_schedule_free(*s);
  *s = f;
  return TRUE;
}

TpSchedule *tp_cli_schedule_build(const TpCliSchedule *o, GError **err)
{
  TpSchedule *s = schedule_build(o, NULL, err);
  if (s && !fuse(o, &s, err))
    g_clear_pointer(&s, tp_schedule_free);
  return s;
}

/* GOption converts a string option's value to UTF-8 and, failing, names neither the option nor the
 * value.  A file name may be bytes (GOption does not convert it): the value is the first argument
 * not UTF-8 that, with the arguments before it alone, fails the same way (every option set by such a
 * parse is undone, an unknown option closing it).  It is named with its flag: --flag=VALUE, or the
 * argument before it (--flag VALUE, -x VALUE; of -abc, -c), or -xVALUE. */
static gboolean fails_at(GOptionContext *ctx, char **args, int k)
{
  char **a = g_new0(char *, k + 3);
  memcpy(a, args, sizeof *a * (size_t)(k + 1));
  a[k + 1] = (char *)"--\x01"; /* no option's name: the parse ends in an error, its changes undone */
  int n = k + 2;
  char **v = a;
  GError *e = NULL;
  gboolean ok = g_option_context_parse(ctx, &n, &v, &e);
  gboolean at = !ok && e->domain == G_CONVERT_ERROR;
  g_clear_error(&e);
  g_free(a);
  return at;
}

static void not_utf8(GOptionContext *ctx, char **args, int n, GError **err)
{
  int k = 1, first = 0;
  for (; k < n && strcmp(args[k], "--") != 0; k++) {
    if (g_utf8_validate(args[k], -1, NULL))
      continue;
    first = first ? first : k;
    if (fails_at(ctx, args, k))
      break;
  }
  if (k >= n || strcmp(args[k], "--") == 0)
    k = first;
  if (!k) {
    g_set_error_literal(err, TP_ERROR, TP_ERROR_INPUT, "an option's value is not UTF-8 text (only file names may be bytes)");
    return;
  }
  const char *a = args[k], *prev = k > 1 ? args[k - 1] : "", *eq = strchr(a, '=');
  g_autofree char *flag = NULL;
  const char *value = a;
  if (g_str_has_prefix(a, "--") && eq)
    flag = g_strndup(a, (gsize)(eq - a)), value = eq + 1;
  else if (g_str_has_prefix(prev, "--") && prev[2] && !strchr(prev, '='))
    flag = g_strdup(prev);
  else if (prev[0] == '-' && prev[1] && prev[1] != '-')
    flag = g_strdup_printf("-%c", prev[strlen(prev) - 1]);
  else if (a[0] == '-' && a[1] && a[1] != '-')
    flag = g_strdup_printf("-%c", a[1]), value = a + 2;
  g_autofree char *q = tp_quote(value);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%s%s is not UTF-8 text (only file names may be bytes)",
              flag ? flag : "", flag ? ": " : "", q);
}

gboolean tp_cli_parse(GOptionContext *ctx, int *argc, char ***argv, GError **err)
{
  GError *e = NULL;
  int n = *argc;
  g_auto(GStrv) args = g_new0(char *, n + 1); /* as given: GOption may rearrange argv */
  for (int i = 0; i < n; i++)
    args[i] = g_strdup((*argv)[i]);
  if (!g_option_context_parse(ctx, argc, argv, &e)) {
    if (e->domain == G_CONVERT_ERROR) {
      not_utf8(ctx, args, n, err);
    } else {
      g_autofree char *one = tp_one_line(e->message); /* GOption quotes the argument as given */
      g_set_error_literal(err, TP_ERROR, TP_ERROR_INPUT, one);
    }
    g_error_free(e);
    return FALSE;
  }
  /* "--" ends the options (GOption drops it when nothing follows); no command takes a positional argument */
  int first = *argc > 1 && strcmp((*argv)[1], "--") == 0 ? 2 : 1;
  if (*argc > first) {
    g_autofree char *q = tp_quote((*argv)[first]);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "unexpected argument %s%s (the command takes options only)", q,
                first == 2 ? " after --" : "");
    return FALSE;
  }
  return TRUE;
}

void tp_cli_run_inputs(const TpCliSchedule *so, const TpCliCost *co, TpCliInput in[TP_CLI_RUN_INPUTS])
{
  in[0] = (TpCliInput){ "-i", so->input, NULL };
  in[1] = (TpCliInput){ "-c", co->cost, NULL };
  in[2] = (TpCliInput){ "-m", co->model, tp_model_path };
  in[3] = (TpCliInput){ "--cluster", co->cluster, tp_cluster_path };
  in[4] = (TpCliInput){ "--profile", co->profile, NULL };
}

gboolean tp_cli_emit(const char *path, GString *text, GError **err)
{
  g_autoptr(TpOutputs) o = tp_outputs_new();
  return tp_outputs_add_text(o, path, text, err) && tp_outputs_commit(o, err);
}

/* ---- cost model options ------------------------------------------------------------------- */

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
    tp_layout_links(c, d->cluster, d->D, d->T);
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

/* --cost FILE's costs for W stages. */
static TpCost *cost_from_file(const char *path, int W, GError **err)
{
  TpCost *c = tp_cost_load(path, W, err);
  gboolean work = FALSE;
  for (int st = 0; c && st < c->W; st++)
    work = work || c->stage[st].fwd > 0 || c->stage[st].bwd > 0;
  if (c && !work) { /* a run of no time has no rate: refuse rather than report 0 samples/s */
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: every forward and backward time is 0, so a run takes no time "
                "and its rates are undefined; give at least one of them a time", path);
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
    TpCost *c = o->cost ? cost_from_file(o->cost, s->W, err) : tp_cost_unit(s->W);
    if (c)
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
  a->optimizer_states = 1 + adamw, a->replicas = D, a->recompute = s->recompute;
  tp_analytic_tensor(a, T);
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

gboolean tp_cli_build_all(const TpCliSchedule *so, TpCliCost *co, TpSchedule **s, TpCost **c, GError **err)
{
  return tp_cli_cost_defaults(co, (TpCliSchedule *)so, err) && (*s = schedule_build(so, NULL, err)) != NULL &&
         (*c = tp_cli_cost_build(co, *s, err)) != NULL && tp_tie_check_schedule(&(*c)->tie, *s, err) &&
         tp_cli_costed_order(co, s, *c, err) && fuse(so, s, err);
}

void tp_cli_run_options(GOptionContext *ctx, TpCliRun *r)
{
  tp_cli_schedule_options(ctx, &r->so);
  tp_cli_cost_options(ctx, &r->co);
}

gboolean tp_cli_run_simulate(TpCliRun *r, GError **err)
{
  /* tp_cli_build_all, the simulator reusing the generator's index and replay while the schedule is
   * the one generated (fixing the order on costs may replace it: then they are dropped first) */
  TpPrepared prep = { 0 };
  TpSchedule *generated = NULL;
  gboolean ok = tp_cli_cost_defaults(&r->co, &r->so, err) && (generated = r->s = schedule_build(&r->so, &prep, err)) &&
                (r->c = tp_cli_cost_build(&r->co, r->s, err)) && tp_tie_check_schedule(&r->c->tie, r->s, err);
  if (tp_cli_order_on_costs(&r->co))
    tp_prepared_clear(&prep);
  ok = ok && tp_cli_costed_order(&r->co, &r->s, r->c, err) && fuse(&r->so, &r->s, err) &&
       (r->sim = tp_sim_run_prepared(r->s, r->c, r->s == generated ? &prep : NULL, err));
  tp_prepared_clear(&prep);
  if (!ok)
    return FALSE;
  r->m = tp_metrics_compute(r->sim);
  /* the cost readers bound every number so that this holds; kept as the rule for every cost source */
  if (!isfinite(r->m->makespan) || !isfinite(r->m->throughput) || !isfinite(r->m->bubble) ||
      !isfinite(r->m->t_minibatch)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "the costs make the simulation's totals overflow (no finite makespan)");
    return FALSE;
  }
  return TRUE;
}

void tp_cli_run_clear(TpCliRun *r)
{
  tp_metrics_free(r->m);
  tp_sim_free(r->sim);
  tp_cost_free(r->c);
  tp_schedule_free(r->s);
  tp_cli_schedule_clear(&r->so);
  tp_cli_cost_clear(&r->co);
}


void tp_cli_name_flag(GError **err)
{
  const char *param = err ? tp_error_param_name(*err) : NULL;
  if (!param)
    return;
  g_autofree char *flag = strcmp(param, "workers") == 0  ? g_strdup("-w")
                          : strcmp(param, "preset") == 0 ? g_strdup("-s")
                                                         : g_strdup_printf("--%s", param);
  size_t n = strlen(param);
  char *msg = (*err)->message;
  if (strncmp(msg, param, n) == 0 && msg[n] == ' ') { /* "backend cuda: …": the flag for the name */
    (*err)->message = g_strconcat(flag, msg + n, NULL);
    g_free(msg);
  } else {
    g_prefix_error(err, "%s: ", flag);
  }
  (*err)->code = TP_ERROR_INPUT;
}
