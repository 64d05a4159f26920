/* tp_report.c — text, JSON and CSV renderings of a simulation and its metrics. */
#include "tp_report.h"
#include "tp_costed.h"
#include "tp_zbauto.h"
#include "tp_error.h"
#include "tp_events.h"
#include "tp_format.h"
#include "tp_memory.h"

static const char *preset_or_pair(const TpSchedule *s, char *buf, size_t len)
{
  const char *p = tp_preset_name(s->order, s->policy);
  g_snprintf(buf, len, "%s%s(order %s, policy %s)", p ? p : "", p ? " " : "", tp_order_name(s->order),
             tp_policy_name(s->policy));
  return buf;
}

/* Every number goes through tp_num / tp_append_num: never "inf" or "nan" in a report. */
static void num(GString *out, double x) { tp_append_num(out, x); }

const char *tp_report_fixed_on(const TpSchedule *s) { return s->fixed_on == TP_FIXED_ON_COSTS ? "costs" : "slots"; }

/* What the order line of the text report says. */
static const char *order_note(const TpSchedule *s, const TpCost *c)
{
  if (s->fixed_on == TP_FIXED_ON_COSTS && s->order == TP_ORDER_ZB_V) /* the heuristic's V, or the pattern */
    return "fixed on the costs: the zero-bubble heuristic's V where it is shorter than PyTorch's pattern, else "
           "that pattern (--order-from slots: always the pattern)";
  if (s->fixed_on == TP_FIXED_ON_COSTS)
    return tp_order_zb_auto_kind(s->order) ? "built on the costs by the zero-bubble heuristic (the other choice: the "
                                             "unit-slot order)"
                                           : "fixed on the costs: each stage ran what was ready under the order's "
                                             "rules (the other choice: the unit-slot order)";
  if (!tp_order_depends_on_costs(s->order))
    return "fixed on unit slots (this order does not depend on costs)";
  if (c->unit)
    return "fixed on unit slots";
  return s->source ? "as the schedule file gives it (fixed on unit slots), replayed under the costs"
                   : "fixed on unit slots, replayed under the costs (the other choice: fixed on the costs)";
}

/* The text report's head: the schedule, its chunks, the costs, the order and recomputation. */
static void text_head(const TpSchedule *s, const TpCost *c, GString *out)
{
  char name[128], a[TP_NUM_LEN], b[TP_NUM_LEN];
  g_autofree char *ssha = tp_schedule_sha256(s);
  g_string_append_printf(out, "schedule     %s: W=%d stages, N=%d micro-batches, K=%d mini-batches; sha256 %s\n",
                         preset_or_pair(s, name, sizeof name), s->W, s->N, s->K, ssha);
  if (s->rank_seq)
    g_string_append_printf(out, "chunks       %d workers hold %d chunks each (map %s); the bubble is each worker's idle "
                           "time across its chunks\n", tp_schedule_ranks(s), s->V, tp_chunk_map_name(s->map));
  if (c->unit)
    g_string_append(out, "costs        unit slots: a forward or backward takes 1 slot; updates and transfers are free\n");
  else
    g_string_append_printf(out, "costs        %s (%ld %s%s%s)\n", c->source, c->gpus ? c->gpus : c->n_devices,
                           c->gpus ? "GPUs" : "device", !c->gpus && c->n_devices > 1 ? "s" : "",
                           c->shared_devices ? ", some shared" : "");
  if (c->stage_note)
    for (int st = 0; st < s->W; st++)
      g_string_append_printf(out, "  stage %-3d  %s on %s: forward %s s, backward %s s per micro-batch\n", st + 1,
                             c->stage_note[st], c->device_name[st], tp_num(a, "%.4g", c->stage[st].fwd),
                             tp_num(b, "%.4g", c->stage[st].bwd));
  g_string_append_printf(out, "order        %s\n", order_note(s, c));
  g_string_append_printf(out, "recompute    %s\n", s->recompute ? "true: a backward first runs its forward again from "
                         "the stored stage input (stored activations: stage inputs and one workspace)" : "false");
}

/* The times: makespan, time per mini-batch, throughput, bubble, the steady v. */
static void text_times(const TpCost *c, const TpMetrics *m, GString *out)
{
  const char *tu = c->time_unit;
  char a[TP_NUM_LEN], b[TP_NUM_LEN];
  g_string_append_printf(out, "makespan     %s %s%s\n", tp_num(a, "%.6g", m->makespan), tu, c->unit ? "s" : "");
  g_string_append_printf(out, "mini-batch   %s %s%s in the steady state (spacing of stage 1's updates); %s over the "
                              "whole run (makespan / K)\n", tp_num(a, "%.6g", m->t_minibatch), tu, c->unit ? "s" : "",
                         tp_num(b, "%.6g", m->t_minibatch_run));
  g_string_append_printf(out, "throughput   %s samples/%s over the whole run (fill and drain included); %s in the "
                              "steady state\n", tp_num(a, "%.6g", m->throughput), tu, tp_num(b, "%.6g", m->throughput_steady));
  g_string_append_printf(out, "bubble       %s over the whole run, %s in the steady state  (idle stage-time / (W x "
                              "time))\n", tp_num(a, "%.4f", m->bubble), tp_num(b, "%.4f", m->bubble_steady));
  g_string_append_printf(out, "bubble rate  %s  (Qi et al.: 1 - a worker's most compute / the longest worker span, first "
                              "forward to last operation)\n",
                         tp_num(a, "%.4f", m->bubble_span));
  g_string_append_printf(out, "v            %d in steady state (mini-batches %d..%d)%s%s\n", m->ver.v_steady,
                         m->ver.steady_lo, m->ver.steady_hi,
                         m->ver.steady_empty ? "; K <= 2W leaves no steady range, so this is over all mini-batches" : "",
                         m->ver.v_steady_min != m->ver.v_steady ? "; values differ there, the largest is shown" : "");
}

/* The versions read (chains, staleness, mismatch) and the messages sent. */
static void text_versions(const TpSchedule *s, const TpCost *c, const TpMetrics *m, GString *out)
{
  char a[TP_NUM_LEN];
  g_string_append_printf(out, "chains       %d (first members:", m->ver.chains);
  for (guint i = 0; i < m->ver.chain_first->len && i < 16; i++)
    g_string_append_printf(out, " %d", g_array_index(m->ver.chain_first, int, i));
  g_string_append_printf(out, "%s); multiple-sequence problem: %s\n", m->ver.chain_first->len > 16 ? " …" : "",
                         m->ver.multiple_sequences ? "yes" : "no");
  g_string_append(out, "staleness    reads d versions behind the latest:");
  for (guint d = 0; d < m->staleness->len; d++)
    if (g_array_index(m->staleness, long, d))
      g_string_append_printf(out, " d=%u:%ld", d, g_array_index(m->staleness, long, d));
  g_string_append_c(out, '\n');
  g_string_append(out, "mismatch     micro-batch backwards reading weights d versions newer than their forward:");
  for (guint d = 0; d < m->mismatch->len; d++)
    if (g_array_index(m->mismatch, long, d))
      g_string_append_printf(out, " d=%u:%ld", d, g_array_index(m->mismatch, long, d));
  if (m->mismatch_older)
    g_string_append_printf(out, "; %ld read older weights than their forward", m->mismatch_older);
  g_string_append_c(out, '\n');
  g_string_append_printf(out, "messages     %ld, %s %s; published model for K mini-batches: naive 2(W-1)NK = %ld, "
                              "TiMePReSt (W-1)(N+1)K = %ld\n",
                         m->messages, tp_num(a, "%.6g", m->bytes), c->byte_unit, 2L * (s->W - 1) * s->N * s->K,
                         (long)(s->W - 1) * (s->N + 1) * s->K);
}

/* One row per stage: busy, bubble, versions, activations and its memory at its peak. */
static void text_stages(const TpSchedule *s, const TpCost *c, const TpMetrics *m, GString *out)
{
  char a[TP_NUM_LEN], b[TP_NUM_LEN];
  g_string_append_printf(out, "\n%5s %12s %7s %8s %8s %11s %12s %12s %12s %12s %12s %12s\n", "stage", "busy", "bubble",
                         "mismatch", "versions", "activations", "peak_bytes", "weights", "optimizer", "gradients",
                         "stored_act", "comm");
  for (int st = 0; st < s->W; st++) {
    const TpStageMetrics *sm = &m->stage[st];
    char p[TP_NUM_LEN];
    g_string_append_printf(out, "%5d %12s %7s %8d %8d %11d %12s", st + 1, tp_num(a, "%.6g", sm->busy),
                           tp_num(b, "%.4f", sm->bubble), sm->max_version_mismatch, sm->max_live_versions,
                           sm->peak_activations, tp_num(p, "%.6g", sm->peak_bytes));
    for (int k = 0; k < TP_N_MEM; k++)
      g_string_append_printf(out, " %12s", tp_num(a, "%.6g", sm->at_peak[k]));
    g_string_append_c(out, '\n');
  }
  g_string_append_printf(out, "(bubble over the whole run; mismatch: the largest above; memory in %s at each stage's "
                              "peak; versions and activations are the largest counts held at once)\n", c->byte_unit);
}

/* Interleaved stages: each worker's chunks added up. */
static void text_workers(const TpSchedule *s, const TpMetrics *m, GString *out)
{
  char a[TP_NUM_LEN], b[TP_NUM_LEN];
  g_string_append_printf(out, "\n%6s %-16s %12s %7s %12s\n", "worker", "stages", "busy", "bubble", "peak_bytes");
  for (int r = 0; r < tp_schedule_ranks(s); r++) {
    g_autoptr(GString) list = g_string_new(NULL);
    double busy = 0, peak = 0, bubble = 0;
    for (int st = 0; st < s->W; st++)
      if (tp_stage_rank(s, st) == r) {
        g_string_append_printf(list, "%s%d", list->len ? "," : "", st + 1);
        busy += m->stage[st].busy, peak += m->stage[st].peak_bytes, bubble = m->stage[st].bubble;
      }
    char p[TP_NUM_LEN];
    g_string_append_printf(out, "%6d %-16s %12s %7s %12s\n", r + 1, list->str, tp_num(a, "%.6g", busy),
                           tp_num(b, "%.4f", bubble), tp_num(p, "%.6g", peak));
  }
  g_string_append(out, "(a worker's busy time and its chunks' peaks added: an upper bound on its peak)\n");
}

/* Each link's messages and bytes (two chunks of one worker cross none). */
static void text_links(const TpSchedule *s, const TpMetrics *m, GString *out)
{
  char a[TP_NUM_LEN];
  g_string_append(out, "\nlink         messages        bytes\n");
  for (int l = 0; l < tp_sim_n_links(s->W); l++) {
    int from = tp_link_src(s->W, l) + 1, to = tp_link_dst(s->W, l) + 1;
    char inside[48] = "";
    if (s->rank_seq && tp_stage_rank(s, from - 1) == tp_stage_rank(s, to - 1))
      g_snprintf(inside, sizeof inside, "  (inside worker %d: free)", tp_stage_rank(s, from - 1) + 1);
    g_string_append_printf(out, "%3d -> %-3d %10ld %12s%s\n", from, to, m->link_messages[l],
                           tp_num(a, "%.6g", m->link_bytes[l]), inside);
  }
}

/* Data parallelism: each stage's all-reduce (D > 1 only). */
static void text_allreduce(const TpSim *sim, GString *out)
{
  const TpDataParallel *dp = sim->c->dp;
  char a[TP_NUM_LEN], b[TP_NUM_LEN], t[TP_NUM_LEN];
  g_string_append_printf(out, "\ndata parallel  %d replicas; each stage's gradients all-reduced (ring) %s\n", dp->D,
                         dp->overlap ? "in buckets behind its last backward before the update"
                                     : "after its last backward, before its update");
  g_string_append_printf(out, "%5s %5s %12s %8s %12s %12s\n", "stage", "link", "bytes", "buckets", "time", "exposed");
  for (int st = 0; st < sim->s->W; st++) {
    long n = MAX(sim->ar->count[st], 1);
    g_string_append_printf(out, "%5d %5d %12s %8d %12s %12s\n", st + 1, dp->link[st] + 1,
                           tp_num(a, "%.6g", dp->bytes[st]), tp_allreduce_buckets(dp, st),
                           tp_num(t, "%.6g", sim->ar->busy[st] / n), tp_num(b, "%.6g", sim->ar->exposed[st] / n));
  }
  g_string_append_printf(out, "(per all-reduce, mean over the run: time on its link, and exposed: how long the update "
                              "waited for it; in %s)\n", sim->c->time_unit);
}

void tp_report_text(const TpSim *sim, const TpMetrics *m, GString *out)
{
  const TpSchedule *s = sim->s;
  text_head(s, sim->c, out);
  text_times(sim->c, m, out);
  text_versions(s, sim->c, m, out);
  text_stages(s, sim->c, m, out);
  if (s->rank_seq)
    text_workers(s, m, out);
  if (s->W > 1)
    text_links(s, m, out);
  if (sim->ar)
    text_allreduce(sim, out);
}

/* The JSON report's head: the schedule and the cost model. */
static void json_head(const TpSchedule *s, const TpCost *c, GString *out)
{
  const char *preset = tp_preset_name(s->order, s->policy);
  g_string_append(out, "{\n");
  g_string_append_printf(out, "  \"preset\": %s%s%s,\n", preset ? "\"" : "", preset ? preset : "null",
                         preset ? "\"" : "");
  g_string_append_printf(out, "  \"order\": \"%s\",\n  \"policy\": \"%s\",\n", tp_order_name(s->order),
                         tp_policy_name(s->policy));
  g_string_append_printf(out, "  \"workers\": %d,\n  \"micro_batches\": %d,\n  \"mini_batches\": %d,\n", s->W, s->N, s->K);
  g_string_append_printf(out, "  \"cost_model\": \"%s\",\n  \"time_unit\": \"%s\",\n  \"byte_unit\": \"%s\",\n",
                         c->unit ? "unit" : "file", c->time_unit, c->byte_unit);
  g_autofree char *ssha = tp_schedule_sha256(s);
  g_string_append_printf(out, "  \"order_fixed_on\": \"%s\",\n  \"schedule_sha256\": \"%s\",\n", tp_report_fixed_on(s),
                         ssha);
  g_string_append_printf(out, "  \"recompute\": %s,\n", s->recompute ? "true" : "false");
}

/* The times, over the whole run and the steady window. */
static void json_times(const TpCost *c, const TpMetrics *m, GString *out)
{
  g_string_append(out, "  \"makespan\": "), num(out, m->makespan);
  g_string_append(out, ",\n  \"bubble_fraction\": "), num(out, m->bubble);
  g_string_append(out, ",\n  \"bubble_definition\": \"idle stage-time / (W * makespan)\"");
  g_string_append(out, ",\n  \"bubble_rate_span\": "), num(out, m->bubble_span);
  g_string_append(out, ",\n  \"bubble_rate_span_definition\": \"(cost - work) / cost: cost the longest worker span "
                       "from its first forward's start to its last operation's end, updates left out; work a "
                       "worker's most compute time (Qi et al., Zero Bubble Pipeline Parallelism)\"");
  g_string_append(out, ",\n  \"throughput\": "), num(out, m->throughput);
  g_string_append(out, ",\n  \"time_per_mini_batch\": "), num(out, m->t_minibatch);
  g_string_append(out, ",\n  \"time_per_mini_batch_whole_run\": "), num(out, m->t_minibatch_run);
  g_string_append(out, ",\n  \"throughput_steady\": "), num(out, m->throughput_steady);
  g_string_append(out, ",\n  \"bubble_fraction_steady\": "), num(out, m->bubble_steady);
  g_string_append(out, ",\n  \"steady_window\": ["), num(out, m->window_start);
  g_string_append(out, ", "), num(out, m->window_end);
  g_string_append(out, "],\n  \"steady_definition\": \"makespan, bubble_fraction and throughput cover the whole run; "
                       "time_per_mini_batch and the _steady values the steady_window, from stage 1's update of "
                       "mini-batch v_steady_range[0] - 1 to that of v_steady_range[1]\"");
  g_string_append_printf(out, ",\n  \"throughput_unit\": \"samples/%s\"", c->time_unit);
}

/* The versions: v, its chains, the staleness and mismatch histograms. */
static void json_versions(const TpSchedule *s, const TpMetrics *m, GString *out)
{
  g_string_append_printf(out, ",\n  \"v_steady\": %d,\n  \"v_steady_min\": %d,\n  \"v_steady_range\": [%d, %d],\n"
                              "  \"v_steady_range_empty\": %s,\n",
                         m->ver.v_steady, m->ver.v_steady_min, m->ver.steady_lo, m->ver.steady_hi, m->ver.steady_empty ? "true" : "false");
  g_string_append_printf(out, "  \"chains\": %d,\n  \"chain_first_members\": [", m->ver.chains);
  for (guint i = 0; i < m->ver.chain_first->len; i++)
    g_string_append_printf(out, "%s%d", i ? ", " : "", g_array_index(m->ver.chain_first, int, i));
  g_string_append_printf(out, "],\n  \"multiple_sequences\": %s,\n", m->ver.multiple_sequences ? "true" : "false");
  g_string_append(out, "  \"v\": [");
  for (int i = 1; i <= s->K; i++)
    g_string_append_printf(out, "%s%d", i > 1 ? ", " : "", m->ver.v[i]);
  g_string_append(out, "],\n  \"staleness_histogram\": [");
  for (guint d = 0; d < m->staleness->len; d++)
    g_string_append_printf(out, "%s%ld", d ? ", " : "", g_array_index(m->staleness, long, d));
  g_string_append(out, "],\n  \"version_mismatch_histogram\": [");
  for (guint d = 0; d < m->mismatch->len; d++)
    g_string_append_printf(out, "%s%ld", d ? ", " : "", g_array_index(m->mismatch, long, d));
  g_string_append_printf(out, "],\n  \"version_mismatch_older\": %ld,\n  \"version_mismatch_definition\": \"per "
                              "micro-batch backward: the version it reads minus the version its forward read on the stage; "
                              "the histogram counts them by that difference, 0 first\"", m->mismatch_older);
}

/* The messages, against the published counts, and each link's. */
static void json_messages(const TpSchedule *s, const TpMetrics *m, GString *out)
{
  g_string_append_printf(out, ",\n  \"messages\": %ld,\n  \"bytes\": ", m->messages);
  num(out, m->bytes);
  g_string_append_printf(out, ",\n  \"published_messages\": {\"naive\": %ld, \"timeprest\": %ld},\n",
                         2L * (s->W - 1) * s->N * s->K, (long)(s->W - 1) * (s->N + 1) * s->K);
  g_string_append(out, "  \"links\": [");
  for (int l = 0; l < tp_sim_n_links(s->W); l++) {
    int from = tp_link_src(s->W, l) + 1, to = tp_link_dst(s->W, l) + 1;
    g_string_append_printf(out, "%s\n    {\"from\": %d, \"to\": %d, \"messages\": %ld, \"bytes\": ", l ? "," : "", from,
                           to, m->link_messages[l]);
    num(out, m->link_bytes[l]);
    g_string_append(out, "}");
  }
}

/* Stage st's object: its times, versions and memory. */
static void json_stage(const TpCost *c, const TpMetrics *m, int st, GString *out)
{
  const TpStageMetrics *sm = &m->stage[st];
  g_string_append_printf(out, "%s\n    {\"stage\": %d, \"device\": %d, \"busy\": ", st ? "," : "", st + 1,
                         c->stage[st].device + 1);
  num(out, sm->busy);
  g_string_append(out, ", \"bubble_fraction\": "), num(out, sm->bubble);
  g_string_append_printf(out, ", \"max_version_mismatch\": %d, \"max_live_versions\": %d, \"peak_activations\": %d, "
                              "\"peak_bytes\": ", sm->max_version_mismatch, sm->max_live_versions, sm->peak_activations);
  num(out, sm->peak_bytes);
  if (c->stage_note) {
    g_string_append_printf(out, ", \"device_name\": \"%s\", \"layers\": \"%s\", \"device_memory\": ", c->device_name[st],
                           c->stage_note[st]);
    num(out, c->capacity[st]);
  }
  g_string_append(out, ", \"forward_time\": "), num(out, c->unit ? 1 : c->stage[st].fwd);
  g_string_append(out, ", \"backward_time\": "), num(out, c->unit ? 1 : c->stage[st].bwd);
  for (int which = 0; which < 2; which++) {
    g_string_append_printf(out, ", \"%s\": {", which ? "memory_component_peaks" : "memory_at_peak");
    for (int k = 0; k < TP_N_MEM; k++) {
      g_string_append_printf(out, "%s\"%s\": ", k ? ", " : "", tp_mem_names[k]);
      num(out, which ? sm->comp_peak[k] : sm->at_peak[k]);
    }
    g_string_append(out, "}");
  }
  g_string_append(out, "}");
}

/* Data parallelism (D > 1 only): the replicas and each stage's all-reduce. */
static void json_allreduce(const TpSim *sim, GString *out)
{
  const TpDataParallel *dp = sim->c->dp;
  g_string_append_printf(out, ",\n  \"data_parallel\": %d,\n  \"overlap_allreduce\": %s,\n  \"allreduce\": [", dp->D,
                         dp->overlap ? "true" : "false");
  for (int st = 0; st < sim->s->W; st++) {
    long n = MAX(sim->ar->count[st], 1);
    g_string_append_printf(out, "%s\n    {\"stage\": %d, \"link\": %d, \"buckets\": %d, \"bytes\": ", st ? "," : "",
                           st + 1, dp->link[st] + 1, tp_allreduce_buckets(dp, st));
    num(out, dp->bytes[st]);
    g_string_append(out, ", \"count\": ");
    g_string_append_printf(out, "%ld, \"time\": ", sim->ar->count[st]);
    num(out, sim->ar->busy[st] / n);
    g_string_append(out, ", \"exposed\": "), num(out, sim->ar->exposed[st] / n);
    g_string_append(out, "}");
  }
  g_string_append(out, "\n  ]");
}

void tp_report_json(const TpSim *sim, const TpMetrics *m, GString *out)
{
  const TpSchedule *s = sim->s;
  json_head(s, sim->c, out);
  json_times(sim->c, m, out);
  json_versions(s, m, out);
  json_messages(s, m, out);
  g_string_append(out, "\n  ],\n  \"stages\": [");
  for (int st = 0; st < s->W; st++)
    json_stage(sim->c, m, st, out);
  g_string_append(out, "\n  ]");
  if (sim->ar)
    json_allreduce(sim, out);
  g_string_append(out, "\n}\n");
}

long long tp_events_bytes(const TpSim *sim)
{
  return tp_memory_grown(2LL * sim->n_ops * (long long)sizeof(TpEventRow));
}

GArray *tp_events_from_sim(const TpSim *sim)
{
  const TpSchedule *s = sim->s;
  const double t0 = sim->t0;
  GArray *rows = g_array_sized_new(FALSE, FALSE, sizeof(TpEventRow), (guint)(2 * sim->n_ops));
  for (int st = 0; st < s->W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    int latest = 0;
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOp *op = &ops[k];
      long g = sim->ix->off[st] + k;
      int micro = op->kind != TP_OP_U && op->micro != TP_WHOLE ? op->micro + 1 : 0;
      int mismatch = tp_op_sends_up(op->kind) ? tp_backward_mismatch(s, sim->ix, st, op, latest, NULL, NULL) : -1;
      TpEventRow r = { st + 1, tp_ev_from_op(op->kind), op->mb, micro, t0 + sim->start[g], t0 + sim->end[g],
                       tp_timeline_version(&sim->tl, g, op), sim->latest ? sim->latest[g] : latest, 0, 0, mismatch };
      latest += op->kind == TP_OP_U;
      g_array_append_val(rows, r);
      if (sim->cons[g] >= 0) {
        TpEventRow x = { st + 1, op->kind == TP_OP_F ? TP_EV_SEND_ACT : TP_EV_SEND_GRAD, op->mb, micro,
                         t0 + sim->xstart[g], t0 + sim->xend[g], -1, -1, tp_sim_op_bytes(sim->c, s, st, op),
                         op->kind == TP_OP_F ? st + 2 : st, -1 };
        g_array_append_val(rows, x);
      }
    }
  }
  return rows;
}

void tp_report_events_csv(const TpSim *sim, GString *out)
{
  g_autoptr(GArray) rows = tp_events_from_sim(sim);
  g_string_append_printf(out, "# timeprest-events order_fixed_on=%s\n", tp_report_fixed_on(sim->s));
  tp_events_write_csv(rows, out);
}
