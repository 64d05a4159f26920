/* cmd_plot.c — `timeprest plot KIND`: timeline, memory, vmap and convergence pictures (gnuplot). */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_events.h"
#include "tp_keyfile.h"
#include "tp_plot.h"
#include "tp_report.h"
#include "tp_sweep.h"
#include "tp_trainlog.h"
#include "tp_memory.h"

#include <stdio.h>
#include <string.h>

/* ---- timeline ----------------------------------------------------------------------------- */

static void event_label(const TpEventRow *r, gboolean letters, gboolean versions, char *buf, size_t len)
{
  char v[16] = "";
  if (versions)
    g_snprintf(v, sizeof v, "/%d", r->version);
  tp_op_format(TP_NAME_GRID, (TpOpKind)tp_ev_to_op(r->kind), r->mb, r->micro > 0 ? r->micro - 1 : TP_WHOLE, !letters, buf, len);
  g_strlcat(buf, v, len);
}

/* Pixels a label of n characters needs in the timeline's label fonts (8 and 7 points), with a margin. */
#define LABEL_PX(n) (6.5 * (n) + 4)

/* The most a row of the timeline's data takes: y, start, end, kind, version, height and a label of
 * at most 47 bytes, quoted. */
#define TIMELINE_ROW_BYTES 128

/* Rows "y x0 x1 kind series halfh label" for one event list; a forward's or backward's label only
 * when labels_on and it fits its box at px pixels per unit of time.  Returns the labels written. */
static long timeline_rows(GArray *ev, int series, int nseries, int lanes, double min_half, int labels_on, double px,
                          gboolean versions, GString *out)
{
  long written = 0;
  int maxmicro = 0;
  for (guint i = 0; i < ev->len; i++)
    maxmicro = MAX(maxmicro, g_array_index(ev, TpEventRow, i).micro);
  for (guint i = 0; i < ev->len; i++) {
    const TpEventRow *r = &g_array_index(ev, TpEventRow, i);
    gboolean xfer = !tp_ev_is_op(r->kind);
    if (xfer && (nseries > 1 || r->end <= r->start)) /* instant transfers show nothing */
      continue;
    double lane = lanes - r->stage + 1, y, h;
    if (nseries > 1)
      y = lane + (series == 0 ? 0.2 : -0.2), h = 0.17;
    else if (xfer) /* activations just under the lane, gradients under them */
      y = lane - (r->kind == TP_EV_SEND_ACT ? 0.28 : 0.4), h = 0.045;
    else
      y = lane + 0.07, h = 0.3;
    double x0 = r->start, x1 = r->end;
    if (x1 - x0 < 2 * min_half) { /* zero-time operations stay visible as ticks */
      double c = (x0 + x1) / 2;
      x0 = c - min_half, x1 = c + min_half;
    }
    char label[48] = "";
    if (labels_on && tp_ev_is_compute(r->kind)) {
      event_label(r, maxmicro <= 26, versions, label, sizeof label);
      if ((r->end - r->start) * px < LABEL_PX(g_utf8_strlen(label, -1)))
        label[0] = '\0'; /* it would run over its neighbours */
      written += label[0] != '\0';
    }
    int kind = (int)r->kind; /* 0 F, 1 B, 2 U, 3 activation transfer, 4 gradient transfer, 5 I, 6 W */
    char a[TP_NUM_LEN], b[TP_NUM_LEN];
    g_string_append_printf(out, "%.4f %s %s %d %d %.3f \"%s\"\n", y, tp_num(a, "%.9g", x0), tp_num(b, "%.9g", x1), kind,
                           series, h, label);
  }
  return written;
}

static double events_end(GArray *ev, int *lanes)
{
  double end = 0;
  for (guint i = 0; i < ev->len; i++) {
    const TpEventRow *r = &g_array_index(ev, TpEventRow, i);
    end = MAX(end, r->end);
    *lanes = MAX(*lanes, MAX(r->stage, r->peer));
  }
  return end;
}

/* Whether events (read from path) hold an operation (forward, backward or update) to draw. */
static gboolean has_operations(GArray *ev, const char *path, GError **err)
{
  for (guint i = 0; i < ev->len; i++)
    if (tp_ev_is_op(g_array_index(ev, TpEventRow, i).kind))
      return TRUE;
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: no forward, backward or update events to draw", tp_input_name(path));
  return FALSE;
}

/* "W=4" for a schedule of W workers; "W=2 x V=2 chunks" where its W·V stages are chunks of W workers
 * (-w counts workers). */
static char *chunked_w(const TpSchedule *s)
{
  return s->rank_seq ? g_strdup_printf("W=%d x V=%d chunks", tp_schedule_ranks(s), s->V) : g_strdup_printf("W=%d", s->W);
}

/* timeline's own options. */
typedef struct {
  char *output, *events, *measured, *title;
  gboolean versions, labels, no_labels;
} TimelineOpts;

/* What a timeline draws: the events (simulated, or read from --events), a measured run's (--measured)
 * beside them, and what the title names. */
typedef struct {
  GArray *sim_ev, *meas_ev;
  char *what;
} Timeline;

/* timeline's options (the run's, for simulating, and its own), into r and o. */
static GOptionContext *timeline_context(TpCliRun *r, TimelineOpts *o)
{
  GOptionEntry entries[] = {
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &o->output, "Picture to write: FILE.png or FILE.svg", "FILE" },
    { "events", 'e', 0, G_OPTION_ARG_FILENAME, &o->events, "Draw this event CSV (simulate --csv, or a measured run) "
                                                        "instead of simulating", "FILE" },
    { "measured", 0, 0, G_OPTION_ARG_FILENAME, &o->measured, "Overlay a measured event CSV on the same time axis", "FILE" },
    { "versions", 0, 0, G_OPTION_ARG_NONE, &o->versions, "Label operations with the weight version they read (3B/2)", NULL },
    { "labels", 0, 0, G_OPTION_ARG_NONE, &o->labels, "Label the operations even on long timelines (each where its label fits its box)", NULL },
    { "no-labels", 0, 0, G_OPTION_ARG_NONE, &o->no_labels, "No operation labels", NULL },
    { "title", 0, 0, G_OPTION_ARG_STRING, &o->title, "Title of the picture", "TEXT" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GOptionContext *ctx = g_option_context_new("- timeline: one lane per stage, forward/backward/update boxes");
  tp_cli_run_options(ctx, r);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx, "Example: timeprest plot timeline -s timeprest -w 4 -n 2 -k 8 -o timeline.png\n"
                                        "         timeprest plot timeline --events sim.csv --measured run.csv -o cmp.svg");
  return ctx;
}

/* --events: the file's timeline (which the schedule and cost options cannot change). */
static gboolean timeline_read(const TpCliRun *r, const char *events, Timeline *tl, GError **err)
{
  if (r->so.preset || r->so.order || r->so.input || r->co.cost || r->co.model || r->co.order_from || r->co.costed_order) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--events: the file gives the timeline; drop the schedule and cost options");
    return FALSE;
  }
  tl->what = g_path_get_basename(events);
  return (tl->sim_ev = tp_events_load(events, err)) != NULL;
}

/* The run simulated and its event rows, checked to fit memory with the picture's data text (at most
 * TIMELINE_ROW_BYTES a row). */
static gboolean timeline_simulated(TpCliRun *r, Timeline *tl, GError **err)
{
  if (!tp_cli_run_simulate(r, err))
    return FALSE;
  const TpSchedule *s = r->s;
  if (!tp_memory_check("drawing the timeline", s->W, s->N, s->K,
                       tp_events_bytes(r->sim) + tp_memory_grown(2LL * r->sim->n_ops * TIMELINE_ROW_BYTES), err))
    return FALSE;
  tl->sim_ev = tp_events_from_sim(r->sim);
  const char *pn = tp_preset_name(s->order, s->policy);
  g_autofree char *w = chunked_w(s);
  tl->what = g_strdup_printf("%s, %s, N=%d, K=%d%s%s; order fixed on %s", pn ? pn : tp_order_name(s->order), w, s->N,
                             s->K, r->c->unit ? ", unit slots" : "; ", r->c->unit ? "" : r->c->source,
                             tp_report_fixed_on(s));
  return TRUE;
}

/* The events to draw: read or simulated, and the measured ones; each file with an operation in it. */
static gboolean timeline_events(TpCliRun *r, const TimelineOpts *o, Timeline *tl, GError **err)
{
  TpCliInput in[TP_CLI_RUN_INPUTS + 2];
  if (o->labels && o->no_labels) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--labels and --no-labels: give one");
    return FALSE;
  }
  tp_cli_run_inputs(&r->so, &r->co, in);
  in[TP_CLI_RUN_INPUTS] = (TpCliInput){ "-e", o->events, NULL };
  in[TP_CLI_RUN_INPUTS + 1] = (TpCliInput){ "--measured", o->measured, NULL };
  if (!tp_cli_check_output(o->output, (int)G_N_ELEMENTS(in), in, err) ||
      !(o->events ? timeline_read(r, o->events, tl, err) : timeline_simulated(r, tl, err)) ||
      (o->measured && !(tl->meas_ev = tp_events_load(o->measured, err))))
    return FALSE;
  if (o->events && /* the picture's data text of the rows read (a simulation's was checked with it) */
      !tp_memory_check("drawing the timeline", 0, 0, 0,
                       tp_memory_grown(2LL * (tl->sim_ev->len + (tl->meas_ev ? tl->meas_ev->len : 0)) *
                                       TIMELINE_ROW_BYTES), err))
    return FALSE;
  /* a file of transfers alone (or of nothing) has no operation to draw */
  return (!o->events || has_operations(tl->sim_ev, o->events, err)) &&
         (!tl->meas_ev || has_operations(tl->meas_ev, o->measured, err));
}

/* What the events hold: the compute boxes (of the first series; labelled: of both) and whether updates,
 * transfers and split backwards take time. */
typedef struct {
  long boxes, labelled;
  gboolean has_update, has_xfer, has_split;
} Kinds;

static Kinds timeline_kinds(const Timeline *tl)
{
  Kinds k = { 0 };
  for (guint i = 0; i < tl->sim_ev->len; i++) {
    const TpEventRow *r = &g_array_index(tl->sim_ev, TpEventRow, i);
    k.boxes += tp_ev_is_compute(r->kind);
    k.has_split |= r->kind >= TP_EV_I;
    k.has_update |= r->kind == TP_EV_U && r->end > r->start;
    k.has_xfer |= !tp_ev_is_op(r->kind) && r->end > r->start;
  }
  for (guint i = 0; tl->meas_ev && i < tl->meas_ev->len; i++)
    k.labelled += tp_ev_is_compute(g_array_index(tl->meas_ev, TpEventRow, i).kind);
  k.labelled += k.boxes;
  return k;
}

/* gnuplot's y tics: one per lane, an interleaved stage with its worker. */
static GString *timeline_ytics(const TpSchedule *s, int lanes)
{
  GString *ytics = g_string_new("set ytics (");
  for (int st = 1; st <= lanes; st++)
    if (s && s->rank_seq && st <= s->W)
      g_string_append_printf(ytics, "%s\"stage %d (worker %d)\" %d", st > 1 ? ", " : "", st,
                             tp_stage_rank(s, st - 1) + 1, lanes - st + 1);
    else
      g_string_append_printf(ytics, "%s\"stage %d\" %d", st > 1 ? ", " : "", st, lanes - st + 1);
  g_string_append(ytics, ")");
  return ytics;
}

/* The picture: the rows as gnuplot's data, the script's settings, the render. */
static gboolean timeline_draw(const TpCliRun *r, const TimelineOpts *o, const Timeline *tl, GError **err)
{
  g_autoptr(TpPlot) p = tp_plot_new(err);
  if (!p)
    return FALSE;
  int lanes = 0, nseries = tl->meas_ev ? 2 : 1;
  double xmax = events_end(tl->sim_ev, &lanes);
  if (tl->meas_ev)
    xmax = MAX(xmax, events_end(tl->meas_ev, &lanes));
  if (xmax <= 0)
    xmax = 1; /* every operation takes no time: ticks on a unit axis */
  Kinds k = timeline_kinds(tl);
  /* labels only where a forward or backward has one (gnuplot fails on a label plot without points) */
  int labels_on = !o->no_labels && k.labelled > 0 && (o->labels || k.boxes <= 400);
  g_autoptr(GString) data = g_string_new(NULL), ytics = timeline_ytics(r->s, lanes);
  tp_string_reserve(data, (long long)(tl->sim_ev->len + (tl->meas_ev ? tl->meas_ev->len : 0)) * TIMELINE_ROW_BYTES);
  gboolean unit = r->c ? r->c->unit : FALSE;
  int width = (int)CLAMP(300 + 28 * (unit ? xmax : 60), 900, 2400);
  double px = (width - 200) / xmax; /* the plot's pixels per unit of time, less the margins */
  long written = timeline_rows(tl->sim_ev, 0, nseries, lanes, xmax / 1500, labels_on, px, o->versions, data);
  if (tl->meas_ev)
    written += timeline_rows(tl->meas_ev, 1, nseries, lanes, xmax / 1500, labels_on, px, o->versions, data);
  labels_on = labels_on && written > 0; /* gnuplot fails on a label plot without points */
  g_autofree char *dpath = tp_plot_path(p, "timeline.dat");
  g_autofree char *t = o->title ? g_strdup(o->title)
                                : g_strdup_printf("%s%s", tl->what,
                                                  tl->meas_ev ? " — simulated (upper) vs measured (lower)" : "");
  if (!tp_plot_data(p, "timeline.dat", data, err))
    return FALSE;
  tp_plot_str(p, "data", dpath);
  tp_plot_num(p, "lanes", lanes);
  tp_plot_str(p, "ytics_cmd", ytics->str);
  tp_plot_str(p, "title", t);
  tp_plot_str(p, "xlabel", unit ? "time (unit slots)" : "time (s)");
  tp_plot_num(p, "series", nseries);
  tp_plot_num(p, "labels", labels_on);
  tp_plot_num(p, "xmax", xmax);
  tp_plot_num(p, "has_update", k.has_update);
  tp_plot_num(p, "has_xfer", k.has_xfer);
  tp_plot_num(p, "has_split", k.has_split);
  /* 70 pixels a lane, in 64 bits; past the picture limit the lanes get thinner */
  gint64 height = 160 + (gint64)70 * lanes * nseries;
  return tp_plot_render(p, "timeline", o->output, width, (int)MIN(height, TP_PLOT_MAX_SIDE), err);
}

static gboolean plot_timeline(int argc, char **argv, GError **err)
{
  TpCliRun r = { 0 };
  TimelineOpts o = { 0 };
  Timeline tl = { 0 };
  g_autoptr(GOptionContext) ctx = timeline_context(&r, &o);
  gboolean ok = tp_cli_parse(ctx, &argc, &argv, err) && tp_plot_check_output(o.output, err) &&
                timeline_events(&r, &o, &tl, err) && timeline_draw(&r, &o, &tl, err);
  g_clear_pointer(&tl.sim_ev, g_array_unref);
  g_clear_pointer(&tl.meas_ev, g_array_unref);
  g_free(tl.what);
  g_free(o.output), g_free(o.events), g_free(o.measured), g_free(o.title);
  tp_cli_run_clear(&r);
  return ok;
}

static gboolean plot_memory(int argc, char **argv, GError **err)
{
  TpCliRun r = { 0 };
  g_autofree char *output = NULL, *title = NULL;
  GOptionEntry entries[] = {
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Picture to write: FILE.png or FILE.svg", "FILE" },
    { "title", 0, 0, G_OPTION_ARG_STRING, &title, "Title of the picture", "TEXT" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- memory: each stage's memory over time");
  tp_cli_run_options(ctx, &r);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx, "Example: timeprest plot memory -s pipedream --model vgg16-tinyimagenet --cluster C "
                                        "-n 4 --batch 128 -o memory.png");
  gboolean ok = tp_cli_parse(ctx, &argc, &argv, err) && tp_plot_check_output(output, err);
  TpCliInput in[TP_CLI_RUN_INPUTS];
  tp_cli_run_inputs(&r.so, &r.co, in);
  ok = ok && tp_cli_check_output(output, TP_CLI_RUN_INPUTS, in, err) && tp_cli_run_simulate(&r, err);
  if (ok) {
    const TpSchedule *s = r.s;
    const TpCost *c = r.c;
    g_autoptr(TpPlot) p = tp_plot_new(err);
    g_autoptr(GString) data = g_string_new(NULL);
    for (int st = 0; st < s->W; st++) {
      g_autoptr(GArray) series = tp_metrics_memory_series(r.sim, r.m, st);
      char a[TP_NUM_LEN], b[TP_NUM_LEN];
      g_string_append_printf(data, "# stage %d\n0 %s\n", st + 1,
                             tp_num(a, "%.9g", series->len ? g_array_index(series, TpMemPoint, 0).bytes : 0.0));
      for (guint i = 0; i < series->len; i++)
        g_string_append_printf(data, "%s %s\n", tp_num(a, "%.9g", g_array_index(series, TpMemPoint, i).t),
                               tp_num(b, "%.9g", g_array_index(series, TpMemPoint, i).bytes));
      g_string_append(data, "\n\n");
    }
    const char *pn = tp_preset_name(s->order, s->policy);
    g_autofree char *chunks_w = chunked_w(s);
    g_autofree char *t = title ? g_strdup(title)
                               : g_strdup_printf("memory per stage: %s, %s, N=%d, K=%d%s%s; order fixed on %s",
                                                 pn ? pn : tp_order_name(s->order), chunks_w, s->N, s->K,
                                                 c->unit ? ", unit costs" : "; ", c->unit ? "" : c->source,
                                                 tp_report_fixed_on(s));
    g_autofree char *dpath = p ? tp_plot_path(p, "memory.dat") : NULL;
    ok = p && tp_plot_data(p, "memory.dat", data, err);
    if (ok) {
      tp_plot_str(p, "data", dpath);
      tp_plot_num(p, "lanes", s->W);
      tp_plot_str(p, "title", t);
      tp_plot_str(p, "xlabel", c->unit ? "time (unit slots)" : "time (s)");
      tp_plot_str(p, "ylabel", c->unit ? "memory (units: weights, activations, messages)" : "memory (GB)");
      tp_plot_num(p, "scale", c->unit ? 1 : 1e9);
      ok = tp_plot_render(p, "memory", output, 1200, 600, err);
    }
  }
  tp_cli_run_clear(&r);
  return ok;
}

/* ---- v heat-map --------------------------------------------------------------------------- */

static gboolean plot_vmap(int argc, char **argv, GError **err)
{
  g_autofree char *wr = NULL, *nr = NULL, *preset = NULL, *output = NULL, *title = NULL;
  GOptionEntry entries[] = {
    { "workers", 'w', 0, G_OPTION_ARG_STRING, &wr, "Range of workers A-B (default 2-16)", "A-B" },
    { "micro-batches", 'n', 0, G_OPTION_ARG_STRING, &nr, "Range of micro-batches C-D (default 2-16)", "C-D" },
    { "preset", 's', 0, G_OPTION_ARG_STRING, &preset, "Preset (default timeprest)", "PRESET" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Picture to write: FILE.png or FILE.svg", "FILE" },
    { "title", 0, 0, G_OPTION_ARG_STRING, &title, "Title of the picture", "TEXT" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- vmap: simulated steady-state v over (W, N), Eq. 3's misses circled");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx, "Example: timeprest plot vmap -w 2-24 -n 2-24 -o vmap.png");
  int range[4];
  const TpPreset *pr = NULL;
  if (!tp_cli_parse(ctx, &argc, &argv, err) || !tp_plot_check_output(output, err) ||
      !tp_cli_check_output(output, 0, NULL, err))
    return FALSE;
  g_autoptr(GArray) rows = tp_cli_sweep(wr, nr, preset, 10000, &pr, range, err);
  if (!rows)
    return FALSE;
  int w0 = range[0], w1 = range[1], n0 = range[2], n1 = range[3];
  g_autoptr(TpPlot) p = tp_plot_new(err);
  if (!p)
    return FALSE;
  g_autoptr(GString) data = g_string_new(NULL);
  int vmax = 1, miss = 0;
  for (guint i = 0; i < rows->len; i++) {
    const TpSweepRow *r = &g_array_index(rows, TpSweepRow, i);
    if (r->na) /* a cell the order does not take: left blank */
      continue;
    g_string_append_printf(data, "%d %d %d %d %d\n", r->W, r->N, r->v_sim, r->v_eq3, r->v_sim != r->v_eq3);
    vmax = MAX(vmax, r->v_sim);
    miss += r->v_sim != r->v_eq3;
  }
  g_autofree char *dpath = tp_plot_path(p, "vmap.dat");
  g_autofree char *t = title ? g_strdup(title)
                             : g_strdup_printf("%s: steady-state v on unit slots (Eq. 3 disagrees in %d of %u cells; "
                                               "v = ceil(W/(N+1)) everywhere)", pr->name, miss, rows->len);
  if (!tp_plot_data(p, "vmap.dat", data, err))
    return FALSE;
  tp_plot_str(p, "data", dpath);
  tp_plot_str(p, "title", t);
  tp_plot_num(p, "wmin", w0), tp_plot_num(p, "wmax", w1), tp_plot_num(p, "nmin", n0), tp_plot_num(p, "nmax", n1);
  tp_plot_num(p, "vmax", vmax);
  tp_plot_num(p, "cells", (w1 - w0 + 1) <= 24 && (n1 - n0 + 1) <= 24);
  int side = (int)CLAMP(40 * MAX(w1 - w0 + 1, n1 - n0 + 1), 600, 1400);
  return tp_plot_render(p, "vmap", output, side + 200, side + 60, err);
}

/* ---- convergence -------------------------------------------------------------------------- */

/* Read a training log (tp_trainlog.h) and check that it has the first two columns of cols; has[k]:
 * whether it has cols[k]; *header_line: the line of its column names; *xmax raised to the largest
 * value of cols[0].  Returns the table as read (column names, then numbers), for gnuplot to read
 * exactly what was checked. */
static GString *read_log(const char *path, const char *const *cols, gboolean *has, int *header_line, double *xmax,
                         GError **err)
{
  g_autoptr(TpTrainLog) log = tp_trainlog_load(path, err);
  if (!log)
    return NULL;
  *header_line = log->header_line;
  for (int k = 0; cols[k]; k++)
    if (!(has[k] = tp_trainlog_column(log, cols[k]) >= 0) && k < 2) {
      g_autofree char *q = tp_quote(cols[k]);
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: no column %s in the header", tp_input_name(path),
                  log->header_line, q);
      return NULL;
    }
  int xc = tp_trainlog_column(log, cols[0]);
  for (int i = 0; i < log->n_rows; i++)
    *xmax = MAX(*xmax, log->values[(size_t)i * log->n_columns + xc]);
  GString *table = g_string_new(NULL);
  for (int j = 0; j < log->n_columns; j++)
    g_string_append_printf(table, "%s%s", j ? "," : "", log->columns[j]);
  for (int i = 0; i < log->n_rows; i++)
    for (int j = 0; j < log->n_columns; j++) {
      char b[TP_NUM_LEN];
      double v = log->values[(size_t)i * log->n_columns + j];
      g_string_append_printf(table, "%s%s", j ? "," : "\n", tp_num(b, "%.17g", v));
    }
  g_string_append_c(table, '\n');
  return table;
}

/* The logs to draw: each an input file, one at least, at most TP_PLOT_MAX_LOGS. */
static gboolean check_logs(const char *output, char **inputs, GError **err)
{
  int n_in = inputs ? (int)g_strv_length(inputs) : 0;
  g_autofree TpCliInput *in = g_new(TpCliInput, n_in + 1);
  for (int i = 0; i < n_in; i++)
    in[i] = (TpCliInput){ "-i", inputs[i], NULL };
  if (!tp_cli_check_output(output, n_in, in, err))
    return FALSE;
  if (!inputs || !inputs[0]) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-i: give at least one training log");
    return FALSE;
  }
  if (n_in > TP_PLOT_MAX_LOGS) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-i: at most %d training logs in one picture (got %d)", TP_PLOT_MAX_LOGS,
                n_in);
    return FALSE;
  }
  return TRUE;
}

/* The logs as the picture has them: gnuplot's files, their titles, which split into two series (a
 * "test" column), whether every one has the right axis' column, the x axis' end. */
typedef struct {
  GString *files, *titles, *split;
  gboolean all_y2;
  double xmax;
} Logs;

/* Each log read and checked (y2: the right axis' column asked for, which each must have) and handed to
 * the plot as run<i>.csv. */
static gboolean add_logs(TpPlot *p, char **inputs, const char *const *cols, const char *y2, Logs *l, GError **err)
{
  for (int i = 0; inputs[i]; i++) {
    gboolean has[4];
    int header_line = 1;
    g_autoptr(GString) table = read_log(inputs[i], cols, has, &header_line, &l->xmax, err);
    if (!table)
      return FALSE;
    if (!has[2] && y2) {
      g_autofree char *q = tp_quote(y2);
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: no column %s in the header", tp_input_name(inputs[i]),
                  header_line, q);
      return FALSE;
    }
    l->all_y2 = l->all_y2 && has[2];
    g_autofree char *name = g_strdup_printf("run%d.csv", i + 1);
    if (!tp_plot_data(p, name, table, err))
      return FALSE;
    g_autofree char *base = g_path_get_basename(inputs[i]);
    if (g_str_has_suffix(base, ".csv"))
      base[strlen(base) - 4] = '\0';
    g_strdelimit(base, " \t\"\\", '_');
    g_string_append_printf(l->files, "%s%s", i ? " " : "", name);
    g_string_append_printf(l->titles, "%s%s", i ? " " : "", base);
    g_string_append_printf(l->split, "%s%d", i ? " " : "", has[3]);
  }
  return TRUE;
}

static gboolean plot_convergence(int argc, char **argv, GError **err)
{
  g_auto(GStrv) inputs = NULL;
  g_autofree char *output = NULL, *x = NULL, *y = NULL, *y2 = NULL, *title = NULL;
  GOptionEntry entries[] = {
    { "input", 'i', 0, G_OPTION_ARG_FILENAME_ARRAY, &inputs, "Training log (CSV with a header); repeat for several runs",
      "FILE" },
    { "x", 0, 0, G_OPTION_ARG_STRING, &x, "Column for the x axis (default epoch)", "COLUMN" },
    { "y", 0, 0, G_OPTION_ARG_STRING, &y, "Column for the left axis (default loss)", "COLUMN" },
    { "y2", 0, 0, G_OPTION_ARG_STRING, &y2,
      "Column for the right axis (default: accuracy, or loss when --y accuracy; shown when every log has it)", "COLUMN" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Picture to write: FILE.png or FILE.svg", "FILE" },
    { "title", 0, 0, G_OPTION_ARG_STRING, &title, "Title of the picture", "TEXT" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- convergence: loss (and accuracy) curves of training runs");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx, "Example: timeprest plot convergence -i timeprest.csv -i pipedream.csv -o conv.png");
  if (!tp_cli_parse(ctx, &argc, &argv, err) || !tp_plot_check_output(output, err) || !check_logs(output, inputs, err))
    return FALSE;
  const char *ycol = y ? y : "loss";
  /* the right axis shows the other of loss and accuracy unless told otherwise */
  /* "test" (train --csv's logs): its tenth-of-an-epoch training rows (0) and its per-epoch rows (1) are
   * drawn as two series */
  const char *cols[] = { x ? x : "epoch", ycol, y2 ? y2 : strcmp(ycol, "accuracy") == 0 ? "loss" : "accuracy", "test",
                         NULL };
  g_autoptr(TpPlot) p = tp_plot_new(err);
  g_autoptr(GString) files = g_string_new(NULL), titles = g_string_new(NULL), split = g_string_new(NULL);
  Logs l = { .files = files, .titles = titles, .split = split, .all_y2 = TRUE };
  if (!p || !add_logs(p, inputs, cols, y2, &l, err))
    return FALSE;
  tp_plot_str(p, "files", files->str);
  tp_plot_str(p, "titles", titles->str);
  tp_plot_str(p, "xcol", cols[0]);
  tp_plot_str(p, "ycol", cols[1]);
  tp_plot_str(p, "y2col", l.all_y2 ? cols[2] : "");
  tp_plot_str(p, "title", title ? title : "convergence");
  tp_plot_str(p, "xlabel", cols[0]);
  tp_plot_str(p, "split", split->str);
  /* epochs are whole numbers: one tick per epoch while they fit */
  tp_plot_num(p, "xint", strcmp(cols[0], "epoch") == 0 && l.xmax <= 30 ? 1 : 0);
  return tp_plot_render(p, "convergence", output, 1100, 600, err);
}

gboolean tp_cmd_plot(int argc, char **argv, GError **err)
{
  static const struct {
    const char *name;
    TpCommandFn fn;
  } kinds[] = { { "timeline", plot_timeline }, { "memory", plot_memory }, { "vmap", plot_vmap },
                { "convergence", plot_convergence } };
  if (argc >= 2)
    for (guint i = 0; i < G_N_ELEMENTS(kinds); i++)
      if (strcmp(argv[1], kinds[i].name) == 0) {
        g_autofree char *prg = g_strdup_printf("timeprest plot %s", kinds[i].name);
        g_set_prgname(prg);
        argv[1] = prg;
        return kinds[i].fn(argc - 1, argv + 1, err);
      }
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("Usage: timeprest plot KIND [OPTION…] -o FILE.png|FILE.svg\n\nKinds:\n"
           "  timeline     one lane per stage, forward/backward/update boxes; --measured overlays a run\n"
           "  memory       each stage's memory over time\n"
           "  vmap         simulated steady-state v over (W, N), Eq. 3's misses circled\n"
           "  convergence  loss and accuracy curves of training logs\n\n"
           "'timeprest plot KIND --help' lists each kind's options.\n"
           "Example: timeprest plot timeline -s timeprest -w 4 -n 2 -k 8 -o timeline.png\n");
    return TRUE;
  }
  g_autofree char *q = argc >= 2 ? tp_quote(argv[1]) : NULL;
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "expected a plot kind: timeline, memory, vmap or convergence%s%s%s",
              q ? " (got " : "", q ? q : "", q ? ")" : "");
  return FALSE;
}
