/* tp_cli.c — option helpers shared by the subcommands. */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_policy.h"

#include <stdio.h>
#include <string.h>

gboolean tp_cli_int(const char *flag, const char *text, int lo, int hi, int *out, GError **err)
{
  gint64 v;
  if (!text || !g_ascii_string_to_signed(text, 10, lo, hi, &v, NULL)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: expected a whole number from %d to %d, got '%s'", flag, lo, hi,
                text ? text : "");
    return FALSE;
  }
  *out = (int)v;
  return TRUE;
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
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: range '%s' is reversed (write %d-%d)", flag, text, *b, *a);
    return FALSE;
  }
  return TRUE;
}

gboolean tp_cli_choice(const char *flag, const char *text, const char *const *choices, int *out, GError **err)
{
  for (int i = 0; choices[i]; i++)
    if (g_strcmp0(text, choices[i]) == 0) {
      *out = i;
      return TRUE;
    }
  g_autofree char *list = g_strjoinv(", ", (char **)choices);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: unknown value '%s' (expected one of: %s)", flag, text, list);
  return FALSE;
}

void tp_cli_schedule_options(GOptionContext *ctx, TpCliSchedule *o)
{
  GOptionEntry entries[] = {
    { "preset", 's', 0, G_OPTION_ARG_STRING, &o->preset, "Schedule preset (default timeprest; see 'timeprest --help')",
      "PRESET" },
    { "order", 0, 0, G_OPTION_ARG_STRING, &o->order, "Order instead of a preset: gpipe, 1f1b, 1f1b-async, nf1b, 2bw",
      "ORDER" },
    { "policy", 0, 0, G_OPTION_ARG_STRING, &o->policy,
      "Weight policy with --order: sync, stash, vsync-latest, latest, intermediate, 2bw", "POLICY" },
    { "workers", 'w', 0, G_OPTION_ARG_STRING, &o->workers, "Workers = pipeline stages (default 4)", "W" },
    { "micro-batches", 'n', 0, G_OPTION_ARG_STRING, &o->micro, "Micro-batches per mini-batch (default 4)", "N" },
    { "mini-batches", 'k', 0, G_OPTION_ARG_STRING, &o->mini, "Mini-batches (default 2W+2, enough for a steady state)",
      "K" },
    { "significance", 0, 0, G_OPTION_ARG_STRING, &o->significance,
      "intermediate policy's s(d): exp[:TAU] (default exp:1), linear, const:C", "S" },
    { "input", 'i', 0, G_OPTION_ARG_FILENAME, &o->input, "Read the schedule from a CSV or JSON file instead",
      "FILE" },
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
}

TpSchedule *tp_cli_schedule_build(const TpCliSchedule *o, GError **err)
{
  if (o->input) {
    if (o->preset || o->order || o->policy || o->workers || o->micro || o->mini) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--input: the file gives the schedule; drop -s/--order/--policy/-w/-n/-k");
      return NULL;
    }
    return tp_schedule_load(o->input, err);
  }
  TpOrder order;
  TpPolicy policy;
  if (o->order || o->policy) {
    if (o->preset) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-s: give a preset or --order with --policy, not both");
      return NULL;
    }
    if (!o->order || !o->policy) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--order and --policy go together");
      return NULL;
    }
    if (!tp_order_from_name(o->order, &order)) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--order: unknown order '%s' (gpipe, 1f1b, 1f1b-async, nf1b, 2bw)",
                  o->order);
      return NULL;
    }
    if (!tp_policy_from_name(o->policy, &policy)) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                  "--policy: unknown policy '%s' (sync, stash, vsync-latest, latest, intermediate, 2bw)", o->policy);
      return NULL;
    }
  } else {
    const TpPreset *p = tp_preset_find(o->preset ? o->preset : "timeprest");
    if (!p) {
      g_autofree char *names = tp_preset_names();
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-s: unknown preset '%s' (expected one of: %s)", o->preset, names);
      return NULL;
    }
    order = p->order;
    policy = p->policy;
  }
  int W = 4, N = 4, K;
  if ((o->workers && !tp_cli_int("-w", o->workers, 1, TP_MAX_WORKERS, &W, err)) ||
      (o->micro && !tp_cli_int("-n", o->micro, 1, TP_MAX_MICRO, &N, err)))
    return NULL;
  K = 2 * W + 2;
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
  if (!tp_size_check(W, N, K, err) || !tp_pair_check(order, policy, W, N, err))
    return NULL;
  TpSchedule *s = tp_schedule_generate(order, policy, W, N, K, err);
  if (s)
    s->sig = sig;
  return s;
}

gboolean tp_cli_parse(GOptionContext *ctx, int *argc, char ***argv, GError **err)
{
  GError *e = NULL;
  if (!g_option_context_parse(ctx, argc, argv, &e)) {
    g_set_error_literal(err, TP_ERROR, TP_ERROR_INPUT, e->message);
    g_error_free(e);
    return FALSE;
  }
  if (*argc > 1) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "unexpected argument '%s'", (*argv)[1]);
    return FALSE;
  }
  return TRUE;
}

gboolean tp_cli_emit(const char *path, const GString *text, GError **err)
{
  if (!path || strcmp(path, "-") == 0) {
    if (fwrite(text->str, 1, text->len, stdout) != text->len || fflush(stdout) != 0) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot write to standard output");
      return FALSE;
    }
    return TRUE;
  }
  GError *e = NULL;
  if (!g_file_set_contents(path, text->str, (gssize)text->len, &e)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "cannot write %s: %s", path, e->message);
    g_error_free(e);
    return FALSE;
  }
  return TRUE;
}
