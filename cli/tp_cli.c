/* tp_cli.c — option helpers shared by the subcommands. */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_output.h"
#include "tp_keyfile.h"
#include "tp_layout.h"
#include "tp_policy.h"
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
