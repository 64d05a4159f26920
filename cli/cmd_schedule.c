/* cmd_schedule.c — `timeprest schedule`: generate (or read) a schedule, validate it, print it. */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_cost.h"
#include "tp_format.h"
#include "tp_memory.h"

gboolean tp_cmd_schedule(int argc, char **argv, GError **err)
{
  TpCliSchedule o = { 0 };
  TpCliCost co = { 0 };
  g_autofree char *format = NULL, *output = NULL;
  GOptionEntry entries[] = {
    { "format", 'f', 0, G_OPTION_ARG_STRING, &format, "Output format: grid (default), csv, json, torch (PyTorch's compute-only CSV; K=1)", "FORMAT" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Write to FILE instead of standard output", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- generate, check and print a pipeline schedule");
  tp_cli_schedule_options(ctx, &o);
  tp_cli_cost_options(ctx, &co);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx,
    "Grid tokens, one per unit slot: 3B = forward of mini-batch 3, micro-batch B; 3 = backward of the whole\n"
    "mini-batch 3; 3b = backward of micro-batch B of mini-batch 3; . = idle (updates take no slot).\n"
    "For N > 26 micro-batches are numbered: 3.27 (forward), 3.27b (backward).\n"
    "Every schedule, generated or read with --input, is validated before it is printed.\n"
    "With a cost model (--cost, or --model with --cluster) the nf1b/1f1b-async order is fixed on it\n"
    "(--order-from costs, the default then; --costed-order is the same).\n\n"
    "Example: timeprest schedule -s timeprest -w 3 -n 2 -k 6");
  static const char *const formats[] = { "grid", "csv", "json", "torch", NULL };
  int fmt = 0;
  TpSchedule *s = NULL;
  TpCost *c = NULL;
  TpCliInput in[TP_CLI_RUN_INPUTS];
  gboolean ok = tp_cli_parse(ctx, &argc, &argv, err);
  tp_cli_run_inputs(&o, &co, in); /* the files as parsed */
  ok = ok && tp_cli_check_output(output, TP_CLI_RUN_INPUTS, in, err) && (!format || tp_cli_choice("--format", format, formats, &fmt, err));
  gboolean costs = co.cost || co.model || co.cluster || co.profile || co.batch || co.split || co.fit_memory ||
                   co.optimizer || co.costed_order || co.order_from; /* any of them: checked as simulate checks them */
  ok = ok && (costs ? tp_cli_build_all(&o, &co, &s, &c, err) : (s = tp_cli_schedule_build(&o, err)) != NULL);
  if (ok && (co.cost || co.model) && !tp_cli_order_on_costs(&co)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--order-from slots: schedule uses a cost model only to fix the order on it");
    ok = FALSE;
  }
  /* the text held before it is written: about 32 (csv), 96 (json) or 16 (torch) bytes per operation,
   * sized once (GLib rounds a GString's capacity up to a power of two) so that it does not grow
   * through copies; the grid checks its own size once replayed (about 40 bytes per operation) */
  static const long long text_bytes[] = { 40, 32, 96, 16 };
  long long need = ok ? tp_schedule_n_ops(s) * text_bytes[fmt] : 0;
  need = fmt ? tp_memory_grown(need) : need;
  ok = ok && tp_memory_check(fmt ? "writing the schedule" : "replaying the schedule for its grid", s->W, s->N, s->K,
                             need, err);
  if (ok) {
    g_autoptr(GString) text = g_string_new(NULL);
    if (fmt)
      tp_string_reserve(text, need);
    if (fmt == 0)
      ok = tp_format_grid(s, text, err);
    else if (fmt == 1)
      tp_format_csv(s, text);
    else if (fmt == 2)
      tp_format_json(s, text);
    else
      ok = tp_format_torch(s, text, err);
    ok = ok && tp_cli_emit(output, text, err);
  }
  tp_schedule_free(s);
  tp_cost_free(c);
  tp_cli_schedule_clear(&o);
  tp_cli_cost_clear(&co);
  return ok;
}
