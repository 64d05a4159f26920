/* cmd_compare.c — `timeprest compare`: one configuration, every preset side by side. */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_model.h"
#include "tp_report.h"

typedef struct {
  const TpPreset *p;
  TpSchedule *s;
  TpCost *c;
  TpCost *own; /* the row's own cost model (interleaved stages: a split into chunks), or NULL */
  TpSim *sim;
  TpMetrics *m;
  char *skip; /* why this preset does not apply, or NULL */
} Row;

static char *human_bytes(double b, gboolean unit)
{
  if (unit)
    return g_strdup_printf("%.0f", b);
  if (b >= 1e9)
    return g_strdup_printf("%.2fG", b / 1e9);
  if (b >= 1e6)
    return g_strdup_printf("%.1fM", b / 1e6);
  if (b >= 1e3)
    return g_strdup_printf("%.0fk", b / 1e3);
  return g_strdup_printf("%.0f", b); /* bytes: 0 stays 0, not "0k" */
}

/* "a, b" list of the applicable presets whose schedule has a whole-mini-batch op of `kind` and, when
 * `also` >= 0, one of kind `also` too (or, with negate, not). */
static char *presets_with_whole(const Row *rows, int n, TpOpKind kind, int also, gboolean negate)
{
  GString *names = g_string_new(NULL);
  for (int i = 0; i < n; i++) {
    if (rows[i].skip)
      continue;
    gboolean has[2] = { FALSE, FALSE };
    const TpOp *ops = tp_stage_ops(rows[i].s, 0);
    for (int k = 0; k < tp_stage_len(rows[i].s, 0); k++)
      if (ops[k].kind <= TP_OP_B && ops[k].micro == TP_WHOLE)
        has[ops[k].kind] = TRUE;
    if (has[kind] && (also < 0 || has[also] != negate))
      g_string_append_printf(names, "%s%s", names->len ? ", " : "", rows[i].p->name);
  }
  return g_string_free(names, FALSE);
}

/* "a, b" list of the applicable presets whose backward is split into I and W. */
static char *presets_split(const Row *rows, int n)
{
  GString *names = g_string_new(NULL);
  for (int i = 0; i < n; i++)
    if (!rows[i].skip && tp_schedule_has_split(rows[i].s))
      g_string_append_printf(names, "%s%s", names->len ? ", " : "", rows[i].p->name);
  return g_string_free(names, FALSE);
}

/* "a, b" list of the applicable presets with several chunks per worker. */
static char *presets_chunked(const Row *rows, int n)
{
  GString *names = g_string_new(NULL);
  for (int i = 0; i < n; i++)
    if (!rows[i].skip && rows[i].s->rank_seq)
      g_string_append_printf(names, "%s%s", names->len ? ", " : "", rows[i].p->name);
  return g_string_free(names, FALSE);
}

/* Worker r's memory: the sum of its chunks' peaks (an upper bound: they need not peak together), the
 * most weight versions any of them holds, and the most activations. */
static void worker_memory(const Row *r, int w, double *bytes, int *versions, int *acts)
{
  *bytes = 0, *versions = 0, *acts = 0;
  for (int st = 0; st < r->s->W; st++)
    if (tp_stage_rank(r->s, st) == w) {
      *bytes += r->m->stage[st].peak_bytes;
      *versions = MAX(*versions, r->m->stage[st].max_live_versions);
      *acts += r->m->stage[st].peak_activations;
    }
}

static int max_mismatch(const TpMetrics *m)
{
  int worst = 0;
  for (int st = 0; st < m->W; st++)
    worst = MAX(worst, m->stage[st].max_version_mismatch);
  return worst;
}

/* On unit slots: the presets whose times the slots misstate, and which way. */
static void unit_note(const Row *rows, int n, GString *out)
{
  g_autofree char *fb = presets_with_whole(rows, n, TP_OP_F, TP_OP_B, FALSE);
  g_autofree char *b = presets_with_whole(rows, n, TP_OP_B, TP_OP_F, TRUE);
  g_string_append(out, "unit slots: a whole-mini-batch operation takes one slot like a micro-batch one, so these "
                       "presets look faster than they are:");
  if (*fb)
    g_string_append_printf(out, " whole-mini-batch forward and backward: %s;", fb);
  if (*b)
    g_string_append_printf(out, " whole-mini-batch backward: %s;", b);
  g_autofree char *split = presets_split(rows, n);
  if (*split)
    g_string_append_printf(out, " and these look slower, a backward in two slots (I and W): %s;", split);
  g_autofree char *chunked_u = presets_chunked(rows, n);
  if (*chunked_u)
    g_string_append_printf(out, " and these much slower, each operation of a chunk (1/V of a stage) in a whole "
                           "slot: %s;", chunked_u);
  g_string_append(out, " use a cost model to compare times\n\n");
}

/* The table's head: the configuration (of ref, the first row computed), the legend of its columns and
 * their titles. */
static void table_head(const Row *rows, int n, const Row *ref, long long dataset, GString *out)
{
  const TpCost *c = ref->c;
  const TpSchedule *s = ref->s;
  gboolean unit = c->unit;
  const char *tu = c->time_unit;
  int chunked_K = 0; /* the default K of W·V stages where the presets with chunks got one */
  for (int i = 0; i < n; i++)
    if (rows[i].s && rows[i].s->K != s->K)
      chunked_K = rows[i].s->K;
  g_autofree char *kk = chunked_K ? g_strdup_printf("K=%d (%d for the presets with chunks: their W x V stages)", s->K,
                                                    chunked_K)
                                  : g_strdup_printf("K=%d", s->K);
  g_string_append_printf(out, "compare: W=%d, N=%d, %s; costs: %s; recompute: %s\n", s->W, s->N, kk,
                         unit ? "unit slots" : c->source, s->recompute ? "true" : "false");
  if (tp_cost_replicas(c) > 1)
    g_string_append_printf(out, "replicas  %d (data parallel): throughput counts every replica's samples, times "
                                "include each stage's all-reduce\n", tp_cost_replicas(c));
  g_string_append_printf(out,
                         "steady    the steady state: time = spacing of stage 1's updates; bubble, throughput over that "
                         "window\n"
                         "run       the whole run, fill and drain included: time = makespan / K; bubble = idle / (W x "
                         "makespan)\n"
                         "span      Qi et al.'s bubble rate: 1 - a worker's most compute / the longest worker span (first "
                         "forward to last operation)\n"
                         "t/epoch   %s at the steady time per mini-batch\n"
                         "mismatch  the most versions a backward's weights are newer than its forward's\n"
                         "order     the timeline the order was fixed on: slots or costs\n"
                         "mem       peak per stage (%s) / live weight versions\n\n",
                         dataset ? "dataset / mini-batch size mini-batches" : "K mini-batches", unit ? "units" : "bytes");
  if (unit)
    unit_note(rows, n, out);
  g_autofree char *tcol = g_strdup_printf("t/mini-batch (%s)", tu);
  g_autofree char *qcol = g_strdup_printf("throughput (samples/%s)", tu);
  g_string_append_printf(out, "%-16s %-21s %10s %-20s %-21s\n", "", tcol, "", "bubble", qcol);
  g_string_append_printf(out, "%-16s %10s %10s %10s %6s %6s %6s %10s %10s %3s %6s %8s %5s  %s\n", "preset", "steady",
                         "run", "t/epoch", "steady", "run", "span", "steady", "run", "v", "chains", "mismatch", "order",
                         "mem/versions by stage");
}

/* A computed row (s: the first computed row's schedule, whose N and K the epoch takes); TRUE where a
 * worker's memory exceeds its device's. */
static gboolean table_row(const Row *r, const TpSchedule *s, long long dataset, gboolean unit, GString *out)
{
  const TpMetrics *m = r->m;
  double per_epoch = dataset ? (double)dataset / (r->c->samples_per_micro * tp_cost_replicas(r->c) * s->N) : s->K;
  g_string_append_printf(out, "%-16s %10.5g %10.5g %10.5g %6.4f %6.4f %6.4f %10.5g %10.5g %3d %6d %8d %5s ",
                         r->p->name, m->t_minibatch, m->t_minibatch_run, m->t_minibatch * per_epoch, m->bubble_steady,
                         m->bubble, m->bubble_span, m->throughput_steady, m->throughput, m->ver.v_steady, m->ver.chains,
                         max_mismatch(m), tp_report_fixed_on(r->s));
  gboolean any_over = FALSE;
  for (int w = 0; w < tp_schedule_ranks(r->s); w++) {
    double bytes;
    int versions, acts;
    worker_memory(r, w, &bytes, &versions, &acts);
    g_autofree char *b = human_bytes(bytes, unit);
    gboolean over = r->c->capacity && bytes > r->c->capacity[w];
    any_over |= over;
    g_string_append_printf(out, " %s/%d%s", b, versions, over ? "!" : "");
  }
  g_string_append_c(out, '\n');
  return any_over;
}

static void table(Row *rows, int n, long long dataset, GString *out)
{
  const Row *ref = NULL;
  for (int i = 0; i < n && !ref; i++)
    if (!rows[i].skip)
      ref = &rows[i];
  if (!ref) { /* every preset refused: each one's reason */
    g_string_append(out, "compare: no preset could be computed\n\n");
    for (int i = 0; i < n; i++)
      g_string_append_printf(out, "%-16s %s\n", rows[i].p->name, rows[i].skip);
    return;
  }
  table_head(rows, n, ref, dataset, out);
  gboolean any_over = FALSE;
  for (int i = 0; i < n; i++) {
    if (rows[i].skip)
      g_string_append_printf(out, "%-16s %s\n", rows[i].p->name, rows[i].skip);
    else
      any_over |= table_row(&rows[i], ref->s, dataset, ref->c->unit, out);
  }
  if (any_over)
    g_string_append(out, "\n! = more than the stage's device memory\n");
  g_autofree char *chunked = presets_chunked(rows, n);
  if (*chunked)
    g_string_append_printf(out, "\n%s: mem per worker, its chunks' peaks added (an upper bound)\n", chunked);
}

static void csv(Row *rows, int n, long long dataset, GString *out)
{
  int W = 0;
  for (int i = 0; i < n; i++)
    if (!rows[i].skip)
      W = tp_schedule_ranks(rows[i].s);
  g_string_append(out, "preset,order,policy,applies,order_fixed_on,time_per_mini_batch_steady,"
                       "time_per_mini_batch_whole_run,time_per_epoch_steady,bubble_fraction_steady,"
                       "bubble_fraction_whole_run,throughput_steady,throughput_whole_run,v_steady,chains,"
                       "multiple_sequences,max_version_mismatch,makespan,bubble_rate_span");
  for (int st = 1; st <= W; st++)
    g_string_append_printf(out, ",peak_bytes_%d,live_versions_%d,peak_activations_%d,max_version_mismatch_%d", st, st,
                           st, st);
  int fields = 1;
  for (const char *p = out->str; *p; p++)
    fields += *p == ',';
  g_string_append_c(out, '\n');
  for (int i = 0; i < n; i++) {
    const Row *r = &rows[i];
    g_string_append_printf(out, "%s,%s,%s,%d", r->p->name, tp_order_name(r->p->order), tp_policy_name(r->p->policy),
                           !r->skip);
    if (r->skip) {
      for (int k = 4; k < fields; k++)
        g_string_append_c(out, ',');
      g_string_append_c(out, '\n');
      continue;
    }
    const TpMetrics *m = r->m;
    double per_epoch = dataset ? (double)dataset / (r->c->samples_per_micro * tp_cost_replicas(r->c) * r->s->N) : r->s->K;
    g_string_append_printf(out, ",%s,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%d,%d,%d,%d,%.9g,%.9g", tp_report_fixed_on(r->s),
                           m->t_minibatch, m->t_minibatch_run, m->t_minibatch * per_epoch, m->bubble_steady, m->bubble,
                           m->throughput_steady, m->throughput, m->ver.v_steady, m->ver.chains, m->ver.multiple_sequences,
                           max_mismatch(m), m->makespan, m->bubble_span);
    for (int w = 0; w < W; w++) {
      double bytes;
      int versions, acts, worst = 0;
      worker_memory(r, w, &bytes, &versions, &acts);
      for (int st = 0; st < r->s->W; st++)
        worst = MAX(worst, tp_stage_rank(r->s, st) == w ? m->stage[st].max_version_mismatch : 0);
      g_string_append_printf(out, ",%.9g,%d,%d,%d", bytes, versions, acts, worst);
    }
    g_string_append_c(out, '\n');
  }
}

/* compare's options: the schedule's and the cost model's, and the output's. */
static GOptionContext *compare_context(TpCliSchedule *o, TpCliCost *co, char **format, char **output)
{
  GOptionEntry entries[] = {
    { "format", 'f', 0, G_OPTION_ARG_STRING, format, "table (default) or csv", "FORMAT" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, output, "Write to FILE instead of standard output", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GOptionContext *ctx = g_option_context_new("- every preset on one configuration, side by side");
  tp_cli_schedule_options(ctx, o);
  tp_cli_cost_options(ctx, co);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx,
    "Runs every preset with the same W, N, K and cost model (with --model the layer split is chosen once, for\n"
    "the first preset, so that every preset runs the same stages).  -s, --order and --policy are refused.\n"
    "--input FILE (ours, JSON or PyTorch's CSV) adds the file's schedule as a last row, named after the file;\n"
    "W, N and K are then the file's.\n"
    "With a cost model the nf1b and 1f1b-async orders are fixed on it (--order-from slots: on unit slots).\n"
    "Throughput and bubble are given over the whole run (fill and drain included) and over the steady state.\n\n"
    "Example: timeprest compare --model vgg16-tinyimagenet --cluster C -n 4 --batch 128");
  return ctx;
}

static gboolean check_options(const TpCliSchedule *o, const TpCliCost *co, const char *format, const char *output,
                              int *fmt, GError **err)
{
  static const char *const formats[] = { "table", "csv", NULL };
  TpCliInput in[TP_CLI_RUN_INPUTS];
  tp_cli_run_inputs(o, co, in);
  if (!tp_cli_check_output(output, TP_CLI_RUN_INPUTS, in, err) || (format && !tp_cli_choice("--format", format, formats, fmt, err)))
    return FALSE;
  if (o->preset || o->order || o->policy) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "compare runs every preset: drop -s, --order and --policy");
    return FALSE;
  }
  int chunks_v = 0; /* the value checked here: a row that takes no chunks would let a bad one pass */
  if (o->chunks && !tp_cli_int("--chunks", o->chunks, 1, TP_MAX_WORKERS, &chunks_v, err))
    return FALSE;
  if (o->input && (o->workers || o->micro || o->mini || o->chunks)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--input: the file gives W, N and K; drop -w, -n, -k and --chunks");
    return FALSE;
  }
  return TRUE;
}

/* --input: the file's schedule, its row (named after the file, in *name) and its W, N and K for the
 * presets. */
static gboolean take_file(TpCliSchedule *o, TpSchedule **file, TpPreset *row, char **name, GError **err)
{
  if (!(*file = tp_cli_schedule_build(o, err)))
    return FALSE;
  g_autofree char *base = g_path_get_basename(o->input);
  *name = g_strdelimit(tp_name_clean(base), ",", '_'); /* a row name in the table and its CSV */
  *row = (TpPreset){ .name = *name, .order = (*file)->order, .policy = (*file)->policy, .summary = o->input };
  g_clear_pointer(&o->input, g_free);
  o->workers = g_strdup_printf("%d", tp_schedule_ranks(*file));
  o->micro = g_strdup_printf("%d", (*file)->N);
  o->mini = g_strdup_printf("%d", (*file)->K);
  return TRUE;
}

/* The rows (every preset's, then the file's), the cost model the rows of one chunk per worker share,
 * and the options they are built from. */
typedef struct {
  Row *rows;
  int n;
  TpCost *shared;
  TpCliSchedule *o;
  TpCliCost *co;
} Compare;

/* What train refuses of a head tied across stages (tp_tie_check_schedule on c's split) makes row r
 * n/a. */
static gboolean tie_skip(Row *r, const TpCost *c)
{
  GError *e = NULL;
  if (tp_tie_check_schedule(&c->tie, r->s, &e))
    return FALSE;
  r->skip = g_strdup_printf("n/a: %s", e->message);
  g_error_free(e);
  return TRUE;
}

/* Row r on the shared cost model (made for the first such row); costed: its order fixed on the costs. */
static gboolean run_shared(Compare *cmp, Row *r, gboolean costed, GError **err)
{
  if (!cmp->shared && !(cmp->shared = tp_cli_cost_build(cmp->co, r->s, err)))
    return FALSE;
  if (tie_skip(r, cmp->shared))
    return TRUE;
  if ((costed && !tp_cli_costed_order(cmp->co, &r->s, cmp->shared, err)) || !(r->sim = tp_sim_run(r->s, cmp->shared, err)))
    return FALSE;
  r->m = tp_metrics_compute(r->sim);
  r->c = cmp->shared;
  return TRUE;
}

/* A preset of several chunks per worker: its own split of the model into W·V chunks, on the same
 * workers (zb-v's order built on it); what this preset alone cannot take (fewer layers than its chunks, a --split of W counts) is
 * its row's n/a. */
static gboolean run_chunked(Compare *cmp, Row *r, GError **err)
{
  GError *e = NULL;
  if (!(r->c = r->own = tp_cli_cost_build(cmp->co, r->s, &e)) && g_error_matches(e, TP_ERROR, TP_ERROR_INPUT)) {
    r->skip = g_strdup_printf("n/a: %s", e->message);
    g_error_free(e);
    return TRUE;
  }
  if (!r->c) {
    g_propagate_error(err, e);
    return FALSE;
  }
  if (tie_skip(r, r->c))
    return TRUE;
  if (!tp_cli_costed_order(cmp->co, &r->s, r->c, err) || !(r->sim = tp_sim_run(r->s, r->c, err)))
    return FALSE;
  r->m = tp_metrics_compute(r->sim);
  return TRUE;
}

/* Preset i's row: simulated, or n/a with the reason. */
static gboolean run_preset(Compare *cmp, int i, GError **err)
{
  TpCliSchedule *o = cmp->o;
  Row *r = &cmp->rows[i];
  r->p = &tp_presets[i];
  o->preset = (char *)r->p->name;
  char *chunks = o->chunks, *limit = o->act_limit; /* --chunks is interleaved-1f1b's (zb-v holds two), */
  if (r->p->order != TP_ORDER_INTERLEAVED_1F1B)                        /* --activation-limit zb-auto's */
    o->chunks = NULL;
  if (r->p->order != TP_ORDER_ZB_AUTO)
    o->act_limit = NULL;
  GError *e = NULL;
  r->s = tp_cli_schedule_build(o, &e);
  o->preset = NULL, o->chunks = chunks, o->act_limit = limit;
  if (!r->s) {
    r->skip = g_strdup_printf("n/a: %s", e->message);
    g_error_free(e);
    return TRUE;
  }
  if (r->s->rank_seq && cmp->co->cost) {
    r->skip = g_strdup_printf("n/a: the cost file describes %d stages, this preset runs %d chunks (%d per worker): "
                              "compare it with --model, or simulate it with a cost file of its chunks",
                              tp_schedule_ranks(r->s), r->s->W, r->s->V);
    return TRUE;
  }
  return r->s->rank_seq ? run_chunked(cmp, r, err) : run_shared(cmp, r, TRUE, err);
}

/* The file's row, last: its chunks on a split of their own, else on the shared cost model. */
static gboolean run_file(Compare *cmp, Row *r, GError **err)
{
  if (!r->s->rank_seq)
    return run_shared(cmp, r, FALSE, err);
  if (!(r->c = r->own = tp_cli_cost_build(cmp->co, r->s, err)))
    return FALSE;
  if (tie_skip(r, r->c))
    return TRUE;
  if (!(r->sim = tp_sim_run(r->s, r->c, err)))
    return FALSE;
  r->m = tp_metrics_compute(r->sim);
  return TRUE;
}

/* The table or CSV written; a comparison with no row computed is refused after it (the rows say why). */
static gboolean emit(const Compare *cmp, int fmt, const char *output, GError **err)
{
  long long dataset = cmp->co->loaded ? cmp->co->loaded->dataset : 0;
  g_autoptr(GString) out = g_string_new(NULL);
  (fmt ? csv : table)(cmp->rows, cmp->n, dataset, out);
  if (!tp_cli_emit(output, out, err))
    return FALSE;
  for (int i = 0; i < cmp->n; i++)
    if (!cmp->rows[i].skip)
      return TRUE;
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "no preset could be computed%s (%s: %s)",
              fmt ? "" : ", every row says why", cmp->rows[0].p->name, cmp->rows[0].skip + strlen("n/a: "));
  return FALSE;
}

static void compare_clear(Compare *cmp)
{
  for (int i = 0; i < cmp->n; i++) {
    tp_metrics_free(cmp->rows[i].m);
    tp_sim_free(cmp->rows[i].sim);
    tp_schedule_free(cmp->rows[i].s);
    tp_cost_free(cmp->rows[i].own);
    g_free(cmp->rows[i].skip);
  }
  g_free(cmp->rows);
  tp_cost_free(cmp->shared);
}

/* Every preset's row and the file's (taken over), simulated and written. */
static gboolean compare(TpCliSchedule *o, TpCliCost *co, TpSchedule *file, const TpPreset *file_row, int fmt,
                        const char *output, GError **err)
{
  Compare cmp = { .n = tp_n_presets + (file != NULL), .o = o, .co = co };
  cmp.rows = g_new0(Row, cmp.n);
  if (file) {
    cmp.rows[cmp.n - 1].p = file_row;
    cmp.rows[cmp.n - 1].s = file;
  }
  gboolean ok = TRUE;
  for (int i = 0; i < tp_n_presets && ok; i++)
    ok = run_preset(&cmp, i, err);
  ok = ok && (!file || run_file(&cmp, &cmp.rows[cmp.n - 1], err)) && emit(&cmp, fmt, output, err);
  compare_clear(&cmp);
  return ok;
}

gboolean tp_cmd_compare(int argc, char **argv, GError **err)
{
  TpCliSchedule o = { 0 };
  TpCliCost co = { 0 };
  g_autofree char *format = NULL, *output = NULL, *file_name = NULL;
  TpSchedule *file = NULL;
  TpPreset file_row = { 0 };
  int fmt = 0;
  g_autoptr(GOptionContext) ctx = compare_context(&o, &co, &format, &output);
  gboolean ok = tp_cli_parse(ctx, &argc, &argv, err) && check_options(&o, &co, format, output, &fmt, err) &&
                (!o.input || take_file(&o, &file, &file_row, &file_name, err)) && tp_cli_cost_defaults(&co, &o, err) &&
                tp_cli_cost_load_model(&co, err);
  if (ok)
    ok = compare(&o, &co, file, &file_row, fmt, output, err);
  else
    tp_schedule_free(file);
  tp_cli_schedule_clear(&o);
  tp_cli_cost_clear(&co);
  return ok;
}
