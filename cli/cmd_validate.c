/* cmd_validate.c — `timeprest validate`: sweep (W, N), compare simulated v with Eq. 2 and Eq. 3. */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_sweep.h"

static void table(GArray *rows, const char *label, int w0, int w1, int n0, int n1, GString *out)
{
  int eq2 = 0, eq3 = 0, closed = 0, n = (int)rows->len, varies = 0, na = 0;
  for (int i = 0; i < n; i++) {
    const TpSweepRow *r = &g_array_index(rows, TpSweepRow, i);
    if (r->na) {
      na++;
      continue;
    }
    eq2 += r->eq2_holds, eq3 += r->v_sim == r->v_eq3, closed += r->v_sim == r->v_closed;
    varies += r->v_sim != r->v_sim_min;
  }
  g_string_append_printf(out, "validate: %s on unit slots, W=%d..%d, N=%d..%d, K=3W+2 mini-batches per cell\n", label,
                          w0, w1, n0, n1);
  g_string_append(out, "v_sim: steady-state v (largest v(i) for i in W+1..K-W)\n"
                       "Eq. 2: W <= N+1 <=> v = 1    Eq. 3: v = floor((W+N-2)/N)    closed form: v = ceil(W/(N+1))\n"
                       "(the published equations are stated for W >= 2, N >= 2)\n\n");
  g_string_append_printf(out, "cells %d   Eq. 2 holds in %d   Eq. 3 agrees in %d   ceil(W/(N+1)) agrees in %d%s\n", n - na,
                         eq2, eq3, closed, varies ? "   (v(i) varies inside the steady range in some cells)" : "");
  if (na)
    g_string_append_printf(out, "n/a   %d cell%s whose N the order does not take (interleaved-1f1b: N a multiple of W)\n", na,
                           na == 1 ? "" : "s");
  n -= na; /* the counts below are of the cells run */
  if (n1 - n0 < 40) {
    g_string_append(out, "\nv_sim by W (rows) and N (columns); * marks a cell where Eq. 3 disagrees\n    W\\N");
    for (int N = n0; N <= n1; N++)
      g_string_append_printf(out, " %3d ", N);
    g_string_append_c(out, '\n');
    for (guint i = 0; i < rows->len; i++) {
      const TpSweepRow *r = &g_array_index(rows, TpSweepRow, i);
      if (r->N == n0)
        g_string_append_printf(out, "%7d", r->W);
      if (r->na)
        g_string_append(out, " n/a ");
      else
        g_string_append_printf(out, " %3d%c", r->v_sim, r->v_sim != r->v_eq3 ? '*' : ' ');
      if (r->N == n1)
        g_string_append_c(out, '\n');
    }
  }
  if (eq2 < n || eq3 < n || closed < n) {
    g_string_append(out, "\ndisagreements\n    W     N  v_sim  v_eq3  v_closed  eq2_holds\n");
    for (guint i = 0; i < rows->len; i++) {
      const TpSweepRow *r = &g_array_index(rows, TpSweepRow, i);
      if (r->na || (r->eq2_holds && r->v_sim == r->v_eq3 && r->v_sim == r->v_closed))
        continue;
      g_string_append_printf(out, "%5d %5d %6d %6d %9d %10s\n", r->W, r->N, r->v_sim, r->v_eq3, r->v_closed,
                             r->eq2_holds ? "yes" : "no");
    }
  } else {
    g_string_append(out, "\nno disagreements\n");
  }
}

static void tsv(GArray *rows, GString *out)
{
  g_string_append(out, "workers\tmicro_batches\tv_sim\tv_eq3\teq2_holds\tmultiple_sequences\tv_closed\teq3_agrees\t"
                       "closed_agrees\tv_sim_min\tmini_batches\n");
  for (guint i = 0; i < rows->len; i++) {
    const TpSweepRow *r = &g_array_index(rows, TpSweepRow, i);
    if (r->na) /* not run: no numbers (the text report counts them) */
      continue;
    g_string_append_printf(out, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", r->W, r->N, r->v_sim, r->v_eq3,
                           r->eq2_holds, r->multiple_sequences, r->v_closed, r->v_sim == r->v_eq3,
                           r->v_sim == r->v_closed, r->v_sim_min, r->K);
  }
}

gboolean tp_cmd_validate(int argc, char **argv, GError **err)
{
  g_autofree char *wr = NULL, *nr = NULL, *preset = NULL, *format = NULL, *output = NULL;
  GOptionEntry entries[] = {
    { "workers", 'w', 0, G_OPTION_ARG_STRING, &wr, "Range of workers A-B or a single A (default 2-16)", "A-B" },
    { "micro-batches", 'n', 0, G_OPTION_ARG_STRING, &nr, "Range of micro-batches C-D (default 2-16)", "C-D" },
    { "preset", 's', 0, G_OPTION_ARG_STRING, &preset, "Preset to sweep (default timeprest)", "PRESET" },
    { "format", 'f', 0, G_OPTION_ARG_STRING, &format, "table (default) or tsv", "FORMAT" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Write to FILE instead of standard output", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- check the published version-difference formulas by simulation");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx,
    "For each (W, N) the schedule is generated on unit slots with K = 3W+2 mini-batches and its steady-state\n"
    "version difference v is compared with Eq. 2 (W <= N+1 <=> v = 1), Eq. 3 (v = floor((W+N-2)/N)) and the\n"
    "closed form the simulation shows, v = ceil(W/(N+1)).  tsv columns: workers micro_batches v_sim v_eq3\n"
    "eq2_holds multiple_sequences v_closed eq3_agrees closed_agrees v_sim_min mini_batches.\n\n"
    "Example: timeprest validate -w 2-32 -n 2-32 --format tsv");
  static const char *const formats[] = { "table", "tsv", NULL };
  int fmt = 0, range[4];
  const TpPreset *p = NULL;
  if (!tp_cli_parse(ctx, &argc, &argv, err) || !tp_cli_check_output(output, 0, NULL, err) || (format && !tp_cli_choice("--format", format, formats, &fmt, err)))
    return FALSE;
  g_autoptr(GArray) rows = tp_cli_sweep(wr, nr, preset, 100000, &p, range, err);
  if (!rows)
    return FALSE;
  int w0 = range[0], w1 = range[1], n0 = range[2], n1 = range[3];
  g_autoptr(GString) out = g_string_new(NULL);
  g_autofree char *label = g_strdup_printf("preset %s (order %s, policy %s)", p->name, tp_order_name(p->order),
                                           tp_policy_name(p->policy));
  if (fmt == 0)
    table(rows, label, w0, w1, n0, n1, out);
  else
    tsv(rows, out);
  return tp_cli_emit(output, out, err);
}
