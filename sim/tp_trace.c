/* tp_trace.c — writer of the Chrome trace-event format for a timeline, simulated or measured. */
#include "tp_trace.h"
#include "tp_report.h"
#include "tp_error.h"

enum { LANE_COMPUTE = 1, LANE_SEND_DOWN = 2, LANE_SEND_UP = 3 };

static void micro_arg(GString *out, const TpOp *op)
{
  if (op->kind == TP_OP_U || op->micro == TP_WHOLE)
    g_string_append(out, "null");
  else
    g_string_append_printf(out, "%d", op->micro + 1);
}

void tp_trace_json(const TpSim *sim, GString *out)
{
  const TpSchedule *s = sim->s;
  const double scale = sim->c->unit ? 1e3 : 1e6; /* to microseconds */
  static const char *const cat[TP_N_OP_KINDS] = { "forward", "backward", "update", "input-gradient",
                                                  "weight-gradient" };
  g_string_append_printf(out, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"time_unit\": \"%s\", \"note\": \"%s\", "
                              "\"order_fixed_on\": \"%s\"},\n\"traceEvents\": [\n",
                         sim->c->time_unit, sim->c->unit ? "1 unit slot is drawn as 1 ms" : "times in microseconds",
                         tp_report_fixed_on(s));
  for (int st = 0; st < s->W; st++) {
    /* interleaved stages: named with their worker, and a worker's chunks drawn next to each other */
    char pname[48];
    int sort = st + 1;
    if (s->rank_seq)
      g_snprintf(pname, sizeof pname, "worker %d, stage %d", tp_stage_rank(s, st) + 1, st + 1),
        sort = tp_stage_rank(s, st) * s->W + st + 1;
    else
      g_snprintf(pname, sizeof pname, "stage %d", st + 1);
    g_string_append_printf(out,
                           "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"%s\"}},\n"
                           "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"sort_index\": %d}},\n"
                           "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"compute\"}},\n",
                           st + 1, pname, st + 1, sort, st + 1, LANE_COMPUTE);
    if (st < s->W - 1)
      g_string_append_printf(out, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": "
                                  "{\"name\": \"send to stage %d\"}},\n", st + 1, LANE_SEND_DOWN, st + 2);
    if (st > 0)
      g_string_append_printf(out, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": "
                                  "{\"name\": \"send to stage %d\"}},\n", st + 1, LANE_SEND_UP, st);
  }
  gboolean first = TRUE;
  for (int st = 0; st < s->W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    int latest = 0; /* the stage's latest version when op k runs */
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOp *op = &ops[k];
      long g = sim->ix->off[st] + k;
      char name[48];
      tp_op_format(TP_NAME_LABEL, (TpOpKind)op->kind, op->mb, op->micro, s->N > 26, name, sizeof name);
      char ts[TP_NUM_LEN], dur[TP_NUM_LEN], by[TP_NUM_LEN];
      g_string_append_printf(out, "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
                                  "\"ts\": %s, \"dur\": %s, \"args\": {\"mini_batch\": %d, \"micro_batch\": ",
                             first ? "" : ",\n", name, cat[op->kind], st + 1, LANE_COMPUTE,
                             tp_num(ts, "%.3f", sim->start[g] * scale),
                             tp_num(dur, "%.3f", (sim->end[g] - sim->start[g]) * scale), op->mb);
      micro_arg(out, op);
      int ver = tp_timeline_version(&sim->tl, g, op);
      g_string_append_printf(out, ", \"version\": %d, \"latest\": %d}}", ver, latest);
      latest += op->kind == TP_OP_U;
      first = FALSE;
      if (sim->cons[g] >= 0) {
        gboolean down = op->kind == TP_OP_F;
        g_string_append_printf(out, ",\n{\"name\": \"%s %s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
                                    "\"ts\": %s, \"dur\": %s, \"args\": {\"mini_batch\": %d, \"micro_batch\": ",
                               down ? "act" : "grad", name + 2, down ? "send-act" : "send-grad", st + 1,
                               down ? LANE_SEND_DOWN : LANE_SEND_UP, tp_num(ts, "%.3f", sim->xstart[g] * scale),
                               tp_num(dur, "%.3f", (sim->xend[g] - sim->xstart[g]) * scale), op->mb);
        micro_arg(out, op);
        g_string_append_printf(out, ", \"version\": %d, \"to\": %d, \"bytes\": %s}}", ver,
                               down ? st + 2 : st, tp_num(by, "%.9g", tp_sim_op_bytes(sim->c, s, st, op)));
      }
    }
  }
  g_string_append(out, "\n]}\n");
}
