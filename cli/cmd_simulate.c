/* cmd_simulate.c — `timeprest simulate`: run the discrete-event simulator and report metrics. */
#include "tp_cli.h"
#include "tp_cost.h"
#include "tp_error.h"
#include "tp_output.h"
#include "tp_report.h"
#include "tp_trace.h"
#include "tp_memory.h"

gboolean tp_cmd_simulate(int argc, char **argv, GError **err)
{
  TpCliRun r = { 0 };
  g_autofree char *format = NULL, *output = NULL, *csv = NULL, *trace = NULL;
  GOptionEntry entries[] = {
    { "format", 'f', 0, G_OPTION_ARG_STRING, &format, "Report format: text (default) or json", "FORMAT" },
    { "csv", 0, 0, G_OPTION_ARG_FILENAME, &csv, "Write every operation and transfer as CSV to FILE", "FILE" },
    { "trace", 't', 0, G_OPTION_ARG_FILENAME, &trace, "Write a Chrome trace (JSON, opens in Perfetto) to FILE", "FILE" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Write the report to FILE instead of standard output", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- simulate a schedule: timeline, bubbles, memory, staleness, v");
  tp_cli_run_options(ctx, &r);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx,
    "Bubble fraction = idle stage-time / (W x time), over the whole run (fill and drain included) and over the\n"
    "steady state.  v(i) = i - g(i), g(i) the stage-1 version the gradient of mini-batch i is computed against;\n"
    "the steady state is mini-batches W+1 .. K-W.  Version mismatch: per micro-batch of every backward, the\n"
    "version it reads minus the version its forward read on the stage.\n"
    "Cost models: unit slots (default), --cost FILE, or --model NAME --cluster FILE [--batch B]: layer FLOPs\n"
    "and bytes against each device's FLOP/s and bandwidth; the layers are split into stages optimally (or as\n"
    "--split says, or under each device's memory with --fit-memory).  A stage that does not fit its device\n"
    "is reported on standard error.  With a cost model the nf1b and 1f1b-async orders are fixed on it\n"
    "(--order-from costs, the default then); --order-from slots keeps the unit-slot order.\n\n"
    "Example: timeprest simulate -s timeprest -w 4 -n 2 -k 12 --format json\n"
    "         timeprest simulate -s pipedream --model vgg16-tinyimagenet --cluster C -n 4 --batch 128");
  static const char *const formats[] = { "text", "json", NULL };
  int fmt = 0;
  gboolean ok = tp_cli_parse(ctx, &argc, &argv, err) && (!format || tp_cli_choice("--format", format, formats, &fmt, err));
  const char *flags[] = { "--csv", "--trace", "-o" }, *paths[] = { csv, trace, output };
  TpCliInput in[TP_CLI_RUN_INPUTS];
  tp_cli_run_inputs(&r.so, &r.co, in);
  ok = ok && tp_cli_check_outputs(3, flags, paths, TP_CLI_RUN_INPUTS, in, err) && tp_cli_run_simulate(&r, err);
  /* the events CSV (about 96 bytes per operation, written from the event rows) and the trace (about
   * 512) are held before written, each sized once (a power of two: tp_memory_grown) so that it does
   * not grow through copies */
  long long ops = ok ? tp_schedule_n_ops(r.s) : 0, csv_bytes = tp_memory_grown(ops * 96),
            trace_bytes = tp_memory_grown(ops * 512);
  ok = ok && (!csv || tp_memory_check("writing the events CSV", r.s->W, r.s->N, r.s->K,
                                      csv_bytes + tp_events_bytes(r.sim), err)) &&
       (!trace || tp_memory_check("writing the trace", r.s->W, r.s->N, r.s->K, trace_bytes, err));
  if (ok) { /* every output is staged first: all of them are written, or none */
    g_autoptr(TpOutputs) out = tp_outputs_new();
    g_autoptr(GString) text = g_string_new(NULL);
    if (csv) {
      tp_string_reserve(text, csv_bytes);
      tp_report_events_csv(r.sim, text);
      ok = tp_outputs_add_text(out, csv, text, err);
      g_string_truncate(text, 0);
    }
    if (ok && trace) {
      tp_string_reserve(text, trace_bytes);
      tp_trace_json(r.sim, text);
      ok = tp_outputs_add_text(out, trace, text, err);
      g_string_truncate(text, 0);
    }
    if (ok) {
      (fmt ? tp_report_json : tp_report_text)(r.sim, r.m, text);
      ok = tp_outputs_add_text(out, output, text, err);
    }
    if (ok)
      tp_cli_memory_warnings(r.c, r.m, NULL);
    ok = ok && tp_outputs_commit(out, err);
  }
  tp_cli_run_clear(&r);
  return ok;
}
