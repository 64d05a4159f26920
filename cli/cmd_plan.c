/* cmd_plan.c — `timeprest plan`: the options of the plan search (sim/tp_plan.h) and its report —
 * the ranked plans, their Pareto front, the explanation of the top choice, and --run-top's
 * measurements (cmd_plan_run.c) beside the predictions. */
#include "cmd_plan.h"
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_plan.h"
#include "tp_tie.h"
#include "tp_predict.h"
#include "tp_train_report.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

/* Bytes: a number with an optional K, M, G or T suffix (powers of 1024, as TP_MEMORY_LIMIT). */
/* --batch: a comma-separated list of sizes, each B or A-B (A, 2A, 4A, … up to B); ascending, each
 * once. */
static GArray *parse_batches(const char *text, GError **err)
{
  g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(int));
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  for (int i = 0; parts[i]; i++) {
    int a = 0, b = 0;
    if (!tp_cli_range("--batch", g_strstrip(parts[i]), 1, 1 << 24, &a, &b, err))
      return NULL;
    for (int v = a; v <= b; v *= 2)
      g_array_append_val(out, v);
  }
  tp_cli_sort_unique(out);
  return g_steal_pointer(&out);
}

/* --presets a,b,c (default: every preset the executor can train, the zero-bubble ones included (without
 * recomputation); interleaved-1f1b, zb-v and dualpipe-v, whose W·V chunks the search does not split, are
 * refused, and zb-auto, whose limit zb-1p and zb-2p set). */
static GPtrArray *parse_presets(const char *text, GError **err)
{
  GPtrArray *a = g_ptr_array_new();
  if (!text) {
    for (int i = 0; i < tp_n_presets; i++)
      if (!tp_order_chunked(tp_presets[i].order) && tp_presets[i].order != TP_ORDER_ZB_AUTO)
        g_ptr_array_add(a, (gpointer)&tp_presets[i]);
    return a;
  }
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  for (int i = 0; parts[i]; i++) {
    const TpPreset *p = tp_preset_find(g_strstrip(parts[i]));
    if (!p) {
      g_autofree char *names = tp_preset_names();
      g_autofree char *q = tp_quote(parts[i]);
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--presets: unknown preset %s (expected some of: %s)", q, names);
      g_ptr_array_unref(a);
      return NULL;
    }
    if (tp_order_chunked(p->order) || p->order == TP_ORDER_ZB_AUTO) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, p->order == TP_ORDER_ZB_AUTO ? "--presets: %s takes an activation "
                  "limit, which the plan search does not choose; use zb-1p or zb-2p" : "--presets: %s holds several "
                  "model chunks per worker, which the plan search does not split; simulate or compare it", p->name);
      g_ptr_array_unref(a);
      return NULL;
    }
    gboolean seen = FALSE;
    for (guint k = 0; k < a->len; k++)
      seen = seen || a->pdata[k] == p;
    if (!seen)
      g_ptr_array_add(a, (gpointer)p);
  }
  return a;
}

/* ---- printing ------------------------------------------------------------------------------------ */

static gboolean on_front(const TpPlanResult *res, const TpPlan *p)
{
  for (guint i = 0; i < res->pareto->len; i++)
    if (res->pareto->pdata[i] == p)
      return TRUE;
  return FALSE;
}

static void plan_json(GString *out, const TpPlanResult *res, const TpPlan *p, const Measured *m, int reps,
                      gboolean parallel)
{
  g_autofree char *split = tp_plan_split_text(p);
  g_string_append_printf(out, "{\"preset\": \"%s\", \"workers\": %d, \"micro_batches\": %d, \"batch\": %ld, "
                         "\"split\": [%s], \"recompute\": %s, \"fused_forwards\": %s, \"v_steady\": %d, \"max_version_mismatch\": %d, \"pareto\": %s, "
                         "\"bottleneck\": {\"stage\": %d, \"component\": \"%s\"}, \"peak\": {\"stage\": %d, "
                         "\"component\": \"%s\"}, \"predicted\": {\"time_per_mini_batch\": ",
                         p->preset->name, p->W, p->N, p->batch, split, p->recompute ? "true" : "false",
                         p->fused ? "true" : "false", p->sim.v_steady,
                         p->sim.max_mismatch, on_front(res, p) ? "true" : "false", p->sim.bottleneck_stage + 1, p->sim.bottleneck,
                         p->sim.peak_stage + 1, tp_mem_names[p->sim.peak_component]);
  tp_append_num(out, p->sim.t_minibatch);
  g_string_append(out, ", \"samples_per_second\": ");
  tp_append_num(out, p->sim.samples_per_second);
  g_string_append(out, ", \"bubble_fraction\": ");
  tp_append_num(out, p->sim.bubble);
  g_string_append(out, ", \"peak_bytes\": [");
  for (int s = 0; s < p->W; s++) {
    g_string_append(out, s ? ", " : "");
    tp_append_num(out, p->sim.peak_bytes[s]);
  }
  g_string_append(out, "]}");
  if (parallel)
    g_string_append_printf(out, ", \"data_parallel\": %d, \"tensor_parallel\": %d, \"devices\": %d", p->D, p->T,
                           p->D * p->T * p->W);
  if (m) {
    g_string_append(out, ", \"measured\": {\"time_per_mini_batch\": ");
    tp_append_num(out, m->t_minibatch);
    g_string_append(out, ", \"samples_per_second\": ");
    tp_append_num(out, m->samples_per_second);
    g_string_append_printf(out, ", \"mini_batches\": %d, \"repetitions\": %d, \"threads\": %d, \"spread\": ",
                           m->mini_batches, reps, m->threads);
    tp_append_num(out, m->spread);
    g_string_append(out, "}, \"error\": {\"time_per_mini_batch\": ");
    tp_append_num(out, tp_rel_error(p->sim.t_minibatch, m->t_minibatch));
    g_string_append(out, "}");
  }
  g_string_append(out, "}");
}

static void bytes_list(GString *out, const TpPlan *p)
{
  for (int s = 0; s < p->W; s++)
    g_string_append_printf(out, "%s%.3g", s ? "/" : "", p->sim.peak_bytes[s] / 1e9);
}

/* The table's optional columns: rc (recompute), shown when recomputing candidates were searched; ff
 * (fused forwards), when a row shown has them. */
typedef struct {
  gboolean rc, batch, ff;
  gboolean dt; /* D and T: data and tensor parallelism searched or given */
} Columns;

static void table_row(GString *out, int rank, const TpPlan *p, const TpPlanResult *res, const Columns *cols)
{
  g_autofree char *split = tp_plan_split_text(p);
  g_autoptr(GString) peaks = g_string_new(NULL);
  bytes_list(peaks, p);
  g_autofree char *bn = g_strdup_printf("stage %d %s", p->sim.bottleneck_stage + 1, p->sim.bottleneck);
  g_string_append_printf(out, "%4d %c %-16s %2d %4d", rank, on_front(res, p) ? '*' : ' ', p->preset->name, p->W, p->N);
  if (cols->batch)
    g_string_append_printf(out, " %6ld", p->batch);
  if (cols->dt)
    g_string_append_printf(out, " %4d %2d", p->D, p->T);
  if (cols->rc)
    g_string_append_printf(out, " %-2s", p->recompute ? "rc" : "");
  if (cols->ff)
    g_string_append_printf(out, " %-2s", p->fused ? "ff" : "");
  g_string_append_printf(out, "  %-14s %2d %3d %12.4f %11.1f  %-22s %s\n", split, p->sim.v_steady, p->sim.max_mismatch,
                         1e3 * p->sim.t_minibatch, p->sim.samples_per_second, bn, peaks->str);
}

static void table_head(GString *out, const Columns *cols)
{
  g_string_append_printf(out, "rank   preset            W    N%s%s%s%s  split           v mis  ms/mini-b  samples/s  "
                         "bottleneck              peak GB per stage\n", cols->batch ? "  batch" : "",
                         cols->dt ? "    D  T" : "", cols->rc ? " rc" : "", cols->ff ? " ff" : "");
}

/* ---- the command -------------------------------------------------------------------------------- */

static void opts_clear(PlanOpts *o)
{
  char **all[] = { &o->model, &o->cluster, &o->profile, &o->batch, &o->limit, &o->workers, &o->micro, &o->presets,
                   &o->run_top, &o->format, &o->show, &o->threads, &o->output, &o->run_k, &o->recompute,
                   &o->run_reps, &o->transport, &o->launcher, &o->optimizer, &o->devices, &o->data_parallel,
                   &o->tensor_parallel, &o->launch_timeout };
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    g_clear_pointer(all[i], g_free);
}

/* The first candidate the simulation refused, in enumeration order; NULL when none was. */
static const TpPlan *first_failure(const TpPlanResult *res)
{
  for (guint i = 0; res->all && i < res->all->len; i++) {
    const TpPlan *p = res->all->pdata[i];
    if (p->status == TP_PLAN_FAILED)
      return p;
  }
  return NULL;
}

/* plan's options, into o. */
static GOptionContext *plan_context(PlanOpts *o)
{
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &o->model, "Model name, .model file or config.json", "NAME|FILE" },
    { "cluster", 0, 0, G_OPTION_ARG_FILENAME, &o->cluster,
      "Analytic costs and device memory of a cluster (" TP_CLUSTERS_SHIPPED ", or a .cluster file); with --profile: its links",
      "FILE" },
    { "profile", 0, 0, G_OPTION_ARG_FILENAME, &o->profile, "Measured costs (timeprest profile)", "FILE" },
    { "batch", 'b', 0, G_OPTION_ARG_STRING, &o->batch,
      "Samples per mini-batch (default 128); a comma-separated list, A-B for A, 2A, 4A, ... up to B, searches "
      "each and ranks by samples/s", "B|LIST" },
    { "memory-limit", 0, 0, G_OPTION_ARG_STRING, &o->limit,
      "Bytes per device, K/M/G/T suffixes in powers of 1024: caps each device's memory (default: each device's "
      "memory from the cluster, or the memory available when the profile was taken)", "BYTES" },
    { "workers", 'w', 0, G_OPTION_ARG_STRING, &o->workers, "Stages to consider, A-B (default 1-8)", "RANGE" },
    { "micro-batches", 'n', 0, G_OPTION_ARG_STRING, &o->micro,
      "Micro-batches to consider, A-B; only divisors of the batch (default 1-B)", "RANGE" },
    { "presets", 's', 0, G_OPTION_ARG_STRING, &o->presets, "Presets to consider, comma-separated (default: every preset train runs, zb-h1 and zb-h2 among them)",
      "LIST" },
    { "optimizer", 0, 0, G_OPTION_ARG_STRING, &o->optimizer,
      "The optimizer the plans train with: sgd (default; momentum: one float a parameter) or adamw (two): its state "
      "in every stage's memory, its update time", "NAME" },
    { "recompute", 0, 0, G_OPTION_ARG_STRING, &o->recompute,
      "Candidates that recompute (store each stage's input only, a backward runs its forward again; "
      "docs/recompute.md): no (default), yes or both", "no|yes|both" },
    { "run-top", 0, 0, G_OPTION_ARG_STRING, &o->run_top,
      "Train the K best plans for a short run on this machine and report measured beside predicted", "K" },
    { "run-mini-batches", 0, 0, G_OPTION_ARG_STRING, &o->run_k,
      "Mini-batches of each --run-top run (default: 2W + about 1 s of predicted steady state, at least 4W + 4)", "K" },
    { "run-repetitions", 0, 0, G_OPTION_ARG_STRING, &o->run_reps,
      "Runs of each --run-top plan, interleaved across the plans; the median is kept (default 3)", "R" },
    { "transport", 0, 0, G_OPTION_ARG_STRING, &o->transport,
      "--run-top runs in one process (local, default) or one MPI rank per stage under the launcher (mpi)", "local|mpi" },
    { "launcher", 0, 0, G_OPTION_ARG_STRING, &o->launcher,
      "With --transport mpi: the command that starts W ranks, {W} standing for W (default \"mpirun -np {W}\"; "
      "under Slurm e.g. \"srun -n {W}\")", "CMD" },
    { "launch-timeout", 0, 0, G_OPTION_ARG_STRING, &o->launch_timeout,
      "With --transport mpi: seconds a launched run may take beyond 20 times its prediction, to start and end; "
      "longer, it is killed and named (default 30)", "S" },
    { "show", 0, 0, G_OPTION_ARG_STRING, &o->show, "Rows of the ranked table (default 10; JSON lists every plan)",
      "M" },
    { "threads", 0, 0, G_OPTION_ARG_STRING, &o->threads, "Threads simulating candidates (default: every core)", "T" },
    { "devices", 0, 0, G_OPTION_ARG_STRING, &o->devices,
      "Search D replicas x W stages x T-way tensor-parallel blocks on at most G devices, ranked by samples/s", "G" },
    { "data-parallel", 0, 0, G_OPTION_ARG_STRING, &o->data_parallel,
      "Without --devices: every plan D replicas of its pipeline, --batch split over them (default 1)", "D" },
    { "tensor-parallel", 0, 0, G_OPTION_ARG_STRING, &o->tensor_parallel,
      "Without --devices: every plan's transformer blocks split T ways (simulated, not executed; default 1)", "T" },
    { "overlap-allreduce", 0, 0, G_OPTION_ARG_NONE, &o->overlap_allreduce,
      "The replicas' all-reduce in 25 MiB buckets behind each stage's last backward", NULL },
    { "sequence-parallel", 0, 0, G_OPTION_ARG_NONE, &o->sequence_parallel,
      "Tensor-parallel blocks keep all their activations split (Korthikanti et al. 2022)", NULL },
    { "format", 'f', 0, G_OPTION_ARG_STRING, &o->format, "table (default) or json", "FORMAT" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &o->output, "Write the report to FILE", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GOptionContext *ctx = g_option_context_new("- choose preset, W, N and split for a model under a memory limit");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx,
    "Every preset x W x N (dividing the batch) [x recompute] is split by the exact partitioner on its costs, bounded, and\n"
    "simulated unless a bound rules it out (over the memory limit, or slower and larger than a plan already\n"
    "simulated).  Plans are ranked by steady time per mini-batch (by samples/s over several batches); '*' marks the Pareto front of time against\n"
    "the largest device's peak memory.  Nothing within the limit: exit 2 naming the smallest peak found.\n"
    "--run-top K trains the K best with `timeprest train` (synthetic data; R runs each, interleaved, the median\n"
    "kept; --transport mpi: under the launcher, one rank per stage) and reports the relative error, Kendall's tau\n"
    "of the two orders and whether the top choice is measured fastest.\n\n"
    "Example: timeprest plan --model vgg16-cifar100 --cluster C --batch 128 --memory-limit 12G\n"
    "         timeprest plan --model mlp-deep --profile mlp-deep.profile --batch 128 -w 1-4 --run-top 3");
  return ctx;
}

/* The options parsed: the search's ranges and inputs, the report's settings. */
typedef struct {
  int fmt, rc, adamw, w0, w1, n0, n1, top, show, threads, run_k, reps, mpi;
  double limit;
  long batch;       /* the first (or only) batch */
  gboolean several; /* several batches: plans ranked by samples/s */
  GPtrArray *presets;
  GArray *batches;
  int devices, D, T;           /* --devices (0: none), --data-parallel, --tensor-parallel */
  gboolean parallel, overlap;  /* any of them: the plans show D and T; --overlap-allreduce */
  gboolean sequence;           /* --sequence-parallel */
  TpModel *split[TP_PLAN_MAX_TENSOR + 1]; /* the model split T ways, T = 2, 4, 8 */
  TpModel *m;
  TpCluster *c;
  TpProfile *prof;
} PlanArgs;

static void args_clear(PlanArgs *a)
{
  g_clear_pointer(&a->presets, g_ptr_array_unref);
  g_clear_pointer(&a->batches, g_array_unref);
  g_clear_pointer(&a->m, tp_model_free);
  for (int t = 0; t <= TP_PLAN_MAX_TENSOR; t++)
    g_clear_pointer(&a->split[t], tp_model_free);
  g_clear_pointer(&a->c, tp_cluster_free);
  g_clear_pointer(&a->prof, tp_profile_free);
}

/* The output, the model and the costs given, the choices and the batches (128 when none is given;
 * -n's upper end the largest). */
static gboolean parse_inputs(const PlanOpts *o, PlanArgs *a, GError **err)
{
  static const char *const formats[] = { "table", "json", NULL };
  static const char *const recomputes[] = { "no", "yes", "both", NULL }; /* in TpPlanRecompute's order */
  static const char *const optimizers[] = { "sgd", "adamw", NULL };
  const TpCliInput in[] = { { "-m", o->model, tp_model_path }, { "--cluster", o->cluster, tp_cluster_path },
                            { "--profile", o->profile, NULL } };
  if (!tp_cli_check_output(o->output, (int)G_N_ELEMENTS(in), in, err))
    return FALSE;
  if (!o->model) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--model: give the model to plan for");
    return FALSE;
  }
  if (!o->cluster && !o->profile) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--cluster or --profile: give the costs to plan with");
    return FALSE;
  }
  if (!(!o->format || tp_cli_choice("--format", o->format, formats, &a->fmt, err)) ||
      !(!o->recompute || tp_cli_choice("--recompute", o->recompute, recomputes, &a->rc, err)) ||
      !(!o->optimizer || tp_cli_choice("--optimizer", o->optimizer, optimizers, &a->adamw, err)) ||
      !(a->batches = o->batch ? parse_batches(o->batch, err) : g_array_new(FALSE, FALSE, sizeof(int))))
    return FALSE;
  if (!a->batches->len) {
    int def = 128;
    g_array_append_val(a->batches, def);
  }
  a->batch = g_array_index(a->batches, int, 0);
  a->n1 = g_array_index(a->batches, int, a->batches->len - 1);
  a->several = a->batches->len > 1;
  return TRUE;
}

/* The ranges and numbers (--launch-timeout's into o), the presets, and the model and costs loaded. */
static gboolean parse_search(PlanOpts *o, PlanArgs *a, GError **err)
{
  static const char *const transports[] = { "local", "mpi", NULL };
  return (!o->workers || tp_cli_range("-w", o->workers, 1, TP_MAX_WORKERS, &a->w0, &a->w1, err)) &&
         (!o->micro || tp_cli_range("-n", o->micro, 1, TP_MAX_MICRO, &a->n0, &a->n1, err)) &&
         (!o->run_top || tp_cli_int("--run-top", o->run_top, 1, 100, &a->top, err)) &&
         (!o->run_k || tp_cli_int("--run-mini-batches", o->run_k, 1, 100000, &a->run_k, err)) &&
         (!o->run_reps || tp_cli_int("--run-repetitions", o->run_reps, 1, 1000, &a->reps, err)) &&
         (!o->transport || tp_cli_choice("--transport", o->transport, transports, &a->mpi, err)) &&
         (!o->launch_timeout || tp_cli_int("--launch-timeout", o->launch_timeout, 1, 86400, &o->launch_s, err)) &&
         (!o->show || tp_cli_int("--show", o->show, 1, 1 << 20, &a->show, err)) &&
         (!o->threads || tp_cli_int("--threads", o->threads, 1, 1024, &a->threads, err)) &&
         (!o->limit || tp_cli_bytes("--memory-limit", o->limit, &a->limit, err)) &&
         (a->presets = parse_presets(o->presets, err)) && (a->m = tp_model_load(o->model, err)) &&
         (!o->cluster || (a->c = tp_cluster_load(o->cluster, err))) &&
         (!o->profile || (a->prof = tp_profile_load(o->profile, err)));
}

/* --devices, --data-parallel, --tensor-parallel: checked, and the model split each way a plan may take
 * (T a power of two dividing every block's heads, key/value heads and MLP width). */
static gboolean parse_parallel(const PlanOpts *o, PlanArgs *a, GError **err)
{
  a->D = a->T = 1;
  if ((o->devices && !tp_cli_int("--devices", o->devices, 1, 1 << 20, &a->devices, err)) ||
      (o->data_parallel && !tp_cli_int("--data-parallel", o->data_parallel, 1, 4096, &a->D, err)) ||
      (o->tensor_parallel && !tp_cli_int("--tensor-parallel", o->tensor_parallel, 1, TP_PLAN_MAX_TENSOR, &a->T, err)))
    return FALSE;
  const char *why = a->devices && (o->data_parallel || o->tensor_parallel)
                      ? "--devices searches D and T: drop --data-parallel and --tensor-parallel"
                    : (a->T & (a->T - 1)) ? "--tensor-parallel: T is a power of two up to 8"
                    : o->sequence_parallel && a->T < 2 && !a->devices ? "--sequence-parallel needs --tensor-parallel or --devices"
                    : o->overlap_allreduce && a->D < 2 && !a->devices ? "--overlap-allreduce needs --data-parallel or --devices"
                    : o->run_top && (a->devices || a->D > 1 || a->T > 1)
                      ? "--run-top trains one pipeline on this machine: drop --devices, --data-parallel, --tensor-parallel"
                      : NULL;
  if (why) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s", why);
    return FALSE;
  }
  if (!tp_model_tensor_check(a->m, a->T, err))
    return FALSE;
  a->parallel = a->devices || a->D > 1 || a->T > 1;
  a->overlap = o->overlap_allreduce, a->sequence = o->sequence_parallel;
  if (a->c)
    tp_cluster_expand(a->c, a->w1);
  for (int t = 2; t <= TP_PLAN_MAX_TENSOR; t *= 2)
    if ((a->devices || t == a->T) && tp_model_tensor_splits(a->m, t)) {
      a->split[t] = tp_model_copy(a->m);
      tp_model_tensor_parallel(a->split[t], t, o->sequence_parallel);
    }
  return TRUE;
}

/* --run-top's options, checked against each other and the costs. */
static gboolean check_run_options(const PlanOpts *o, const PlanArgs *a, GError **err)
{
  if (o->run_top && !a->prof) {
    /* measured against costs of this machine only; a cluster's roofline says nothing about it */
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--run-top: trains on this machine; plan with its --profile");
    return FALSE;
  }
  g_autofree char *path = o->run_top && o->model ? tp_model_path(o->model) : NULL;
  if (path && !g_file_test(path, G_FILE_TEST_IS_REGULAR)) { /* a pipe gives its text once */
    g_autofree char *q = tp_quote(o->model);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--run-top: its runs read --model %s again; give a file", q);
    return FALSE;
  }
  if (!o->run_top && (o->run_k || o->run_reps || o->transport)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: sets --run-top's runs; give --run-top K too",
                o->run_k ? "--run-mini-batches" : o->run_reps ? "--run-repetitions" : "--transport");
    return FALSE;
  }
  if ((o->launcher || o->launch_timeout) && !a->mpi) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s of --transport mpi; give that too",
                o->launcher ? "--launcher: starts the ranks" : "--launch-timeout: bounds the runs");
    return FALSE;
  }
  if (o->launcher && !strstr(o->launcher, "{W}")) {
    g_autofree char *q = tp_quote(o->launcher);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--launcher: %s has no {W} (the number of ranks to start)", q);
    return FALSE;
  }
  g_autoptr(GPtrArray) words = o->launcher ? tp_plan_launcher_words(o->launcher, 1, err) : NULL; /* words that split */
  return !o->launcher || words != NULL;
}

/* No plan fits: why, in one line (the smallest peak found, or the first candidate refused). */
static void nothing_fits(const TpPlanResult *res, int rc, GError **err)
{
  const TpPlan *s = res->smallest;
  char dt[48] = ""; /* replicas and tensor ranks, where the search had them */
  if (s && (s->D > 1 || s->T > 1))
    g_snprintf(dt, sizeof dt, " D=%d T=%d", MAX(s->D, 1), MAX(s->T, 1));
  if (s) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "nothing fits: %d candidates over the memory limit; the smallest peak "
                "found is %.4g GB against %.4g GB (%s W=%d N=%d%s%s, stage %d), dominated by its %s%s",
                res->n_over_memory, s->sim.peak / 1e9, s->sim.limit / 1e9, s->preset->name, s->W, s->N, dt,
                s->recompute ? " recompute" : "", s->sim.peak_stage + 1, tp_mem_names[s->sim.peak_component],
                rc == TP_PLAN_RECOMPUTE_NO && s->sim.peak_component == TP_MEM_ACTIVATIONS ? " (--recompute both stores "
                "less of them)" : "");
    return;
  }
  const TpPlan *f = first_failure(res);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "nothing fits: no candidate could be simulated (%d failed; %s W=%d "
              "N=%d: %s)", res->n_failed, f ? f->preset->name : "?", f ? f->W : 0, f ? f->N : 0,
              f && f->failure ? f->failure : "no reason given");
}

/* The search on the options; NULL with err when it fails or no plan fits. */
static TpPlanResult *search(const PlanArgs *a, GError **err)
{
  TpPlanRequest req = { .model = a->m, .cluster = a->c, .profile = a->prof, .batch = a->batch,
                        .batches = (const int *)a->batches->data, .n_batches = (int)a->batches->len,
                        .w0 = a->w0, .w1 = a->w1, .n0 = a->n0, .n1 = a->n1,
                        .presets = (const TpPreset *const *)a->presets->pdata, .n_presets = (int)a->presets->len,
                        .recompute = (TpPlanRecompute)a->rc, .memory_limit = a->limit, .threads = a->threads,
                        .optimizer_states = 1 + a->adamw, .devices = a->devices, .data_parallel = a->D,
                        .tensor_parallel = a->T, .overlap_allreduce = a->overlap };
  for (int t = 1; t <= TP_PLAN_MAX_TENSOR; t++)
    req.by_tensor[t] = t == 1 ? a->m : a->split[t];
  TpPlanResult *res = tp_plan_search(&req, err);
  if (res && !res->ranked->len) {
    nothing_fits(res, a->rc, err);
    g_clear_pointer(&res, tp_plan_result_free);
  }
  return res;
}

/* The --run-top measurements and how their order agrees with the ranking's. */
typedef struct {
  int runs;           /* plans measured (the best ones) */
  Measured *meas;     /* [runs] */
  double tau;         /* Kendall's tau of the predicted and measured orders; NaN for one plan */
  int fastest;        /* the plan measured fastest */
  gboolean confirmed; /* the top choice is */
} Runs;

static void agreement(const TpPlanResult *res, gboolean several, Runs *r)
{
  r->tau = NAN, r->fastest = 0, r->confirmed = TRUE;
  if (r->runs == 0)
    return;
  g_autofree double *pt = g_new(double, r->runs), *mt = g_new(double, r->runs);
  for (int i = 0; i < r->runs; i++) {
    /* the ranking's times: per sample over several batches */
    const TpPlan *p = res->ranked->pdata[i];
    pt[i] = tp_plan_time_key(p), mt[i] = /* tied predictions stay tied, as the ranking has them */ several ? r->meas[i].t_minibatch / (double)p->batch : r->meas[i].t_minibatch;
    if (mt[i] < mt[r->fastest])
      r->fastest = i;
  }
  if (r->runs > 1)
    r->tau = tp_kendall_tau(pt, mt, r->runs);
  r->confirmed = r->fastest == 0;
}

/* What the report is made of. */
typedef struct {
  const PlanArgs *a;
  const TpPlanResult *res;
  const Runs *runs;
  Columns cols;
} Report;

static void report_json(GString *out, const Report *r)
{
  const PlanArgs *a = r->a;
  const TpPlanResult *res = r->res;
  g_string_append_printf(out, "{\"model\": \"%s\", ", a->m->name);
  if (a->several) {
    g_string_append(out, "\"batches\": [");
    for (guint i = 0; i < a->batches->len; i++)
      g_string_append_printf(out, "%s%d", i ? ", " : "", g_array_index(a->batches, int, i));
    g_string_append(out, "], \"ranked_by\": \"samples_per_second\", ");
  } else
    g_string_append_printf(out, "\"batch\": %ld, ", a->batch);
  /* the limit in whole bytes; and what a plan needs beside its own fields to be simulated again */
  g_string_append_printf(out, "\"cost_source\": \"%s\", \"memory_limit\": %.0f, \"optimizer\": \"%s\", "
                         "\"overlap_allreduce\": %s, \"sequence_parallel\": %s", a->prof ? "profile" : "cluster",
                         a->limit, a->adamw ? "adamw" : "sgd", a->overlap ? "true" : "false",
                         a->sequence ? "true" : "false");
  g_string_append_printf(out, ", \"candidates\": %d, \"simulated\": %d, \"over_memory\": %d, \"dominated\": %d, "
                         "\"failed\": %d, \"left_out_tied\": %d, \"plans\": [", res->n_candidates, res->n_simulated,
                         res->n_over_memory, res->n_dominated, res->n_failed, res->n_tied);
  for (guint i = 0; i < res->ranked->len; i++) {
    g_string_append(out, i ? ",\n  " : "\n  ");
    plan_json(out, res, res->ranked->pdata[i], (int)i < r->runs->runs ? &r->runs->meas[i] : NULL, a->reps,
              a->parallel);
  }
  g_string_append(out, "]");
  if (r->runs->runs > 0) {
    g_string_append(out, ", \"kendall_tau\": ");
    if (isnan(r->runs->tau))
      g_string_append(out, "null"); /* one plan: no pair to order */
    else
      tp_append_num(out, r->runs->tau);
    g_string_append_printf(out, ", \"top_choice_confirmed\": %s", r->runs->confirmed ? "true" : "false");
  }
  g_string_append(out, "}\n");
}

/* The text report's head: the model, batches, costs, memory limit and the search's counts. */
static void text_head(GString *out, const Report *r)
{
  const PlanArgs *a = r->a;
  const TpPlanResult *res = r->res;
  g_autoptr(GString) bs = g_string_new(NULL);
  for (guint i = 0; i < a->batches->len; i++)
    g_string_append_printf(bs, "%s%d", i ? ", " : "", g_array_index(a->batches, int, i));
  g_string_append_printf(out, "plan: model %s, %s samples per mini-batch%s, costs from %s%s%s\n", a->m->name, bs->str,
                         a->several ? " (ranked by samples/s: the batches differ)" : "", a->prof ? "profile " : "cluster ",
                         a->prof ? a->prof->source : a->c->name, a->prof && a->c ? " (links of that cluster)" : "");
  if (a->limit > 0)
    g_string_append_printf(out, "memory limit: %.4g GB per device (or the device's own memory, if smaller)\n",
                           a->limit / 1e9);
  else
    g_string_append(out, "memory limit: each device's own memory\n");
  g_string_append_printf(out, "candidates: %d (%spresets x W x N dividing the batch%s); simulated %d; over the memory "
                         "limit %d (dropped); dominated before simulating %d; failed %d; fitting %u\n\n",
                         res->n_candidates, a->several ? "batches x " : "", a->rc == TP_PLAN_RECOMPUTE_BOTH ? " x recompute no/yes"
                         : a->rc == TP_PLAN_RECOMPUTE_YES ? ", recomputing" : "", res->n_simulated,
                         res->n_over_memory, res->n_dominated, res->n_failed, res->ranked->len);
  if (res->n_tied)
    g_string_append_printf(out, "left out: %d candidate%s of presets that cannot train the model's head tied to "
                           "its embedding across stages (only " TP_TIE_PRESETS " can)\n\n",
                           res->n_tied, res->n_tied == 1 ? "" : "s");
  if (a->parallel && a->devices)
    g_string_append_printf(out, "parallelism: D replicas x W stages x T-way tensor-parallel blocks on at most %d "
                           "devices; tensor parallelism is simulated, not executed\n\n", a->devices);
  else if (a->parallel)
    g_string_append(out, "parallelism: D replicas x W stages x T-way tensor-parallel blocks; tensor parallelism is "
                         "simulated, not executed\n\n");
  const TpPlan *f = first_failure(res);
  if (f)
    g_string_append_printf(out, "failed, for one: %s W=%d N=%d%s: %s\n\n", f->preset->name, f->W, f->N,
                           f->recompute ? " recompute" : "", f->failure ? f->failure : "no reason given");
}

/* The ranked table (--show rows), its legend and the Pareto front. */
static void text_table(GString *out, const Report *r)
{
  const PlanArgs *a = r->a;
  const TpPlanResult *res = r->res;
  table_head(out, &r->cols);
  for (guint i = 0; i < res->ranked->len && (int)i < a->show; i++)
    table_row(out, (int)i + 1, res->ranked->pdata[i], res, &r->cols);
  if ((int)res->ranked->len > a->show)
    g_string_append_printf(out, "  … %u more (--show, or --format json for all)\n", res->ranked->len - a->show);
  g_string_append_printf(out, "v: steady version difference; mis: largest backward-forward version mismatch; "
                         "%s%sbottleneck: the stage with the most work per mini-batch and its largest part\n",
                         r->cols.rc ? "rc: recomputes (stores stage inputs, a backward runs its forward again); " : "",
                         r->cols.ff ? "ff: fused forwards (a mini-batch's forwards as one; docs/fused-forwards.md); " : "");
  g_string_append_printf(out, "\nPareto front (%s against the largest device's peak), %u plan%s:\n",
                         a->several ? "samples/s" : "time per mini-batch", res->pareto->len,
                         res->pareto->len == 1 ? "" : "s");
  for (guint i = 0; i < res->pareto->len; i++) {
    const TpPlan *p = res->pareto->pdata[i];
    g_autofree char *b = a->several ? g_strdup_printf(" B=%-6ld", p->batch) : g_strdup("");
    g_autofree char *dt = r->cols.dt ? g_strdup_printf(" D=%-4d T=%d", p->D, p->T) : g_strdup("");
    g_string_append_printf(out, "  %-16s W=%-2d N=%-4d%s%s%s %10.4f ms  %8.4g GB", p->preset->name, p->W, p->N, dt, b,
                           !r->cols.rc ? "" : p->recompute ? " rc" : "   ", 1e3 * p->sim.t_minibatch, p->sim.peak / 1e9);
    if (a->several)
      g_string_append_printf(out, "  %11.1f samples/s", p->sim.samples_per_second);
    g_string_append_c(out, '\n');
  }
}

/* --run-top's table: each plan measured beside its prediction, and how the orders agree. */
static void text_measured(GString *out, const Report *r)
{
  const PlanArgs *a = r->a;
  const Runs *m = r->runs;
  const char *rc = r->cols.rc ? " rc" : "";
  g_string_append_printf(out, "\nMeasured (%d plan%s x %d run%s of timeprest train on this machine%s, interleaved; "
                         "the median of each plan's runs):\n", m->runs, m->runs == 1 ? "" : "s", a->reps,
                         a->reps == 1 ? "" : "s", a->mpi ? ", one MPI rank per stage" : "");
  g_string_append_printf(out, "  %-16s %2s %4s%s %14s %14s %9s %6s %7s\n", "preset", "W", "N", rc, "predicted ms",
                         "measured ms", "error", "mini-b", "spread");
  for (int i = 0; i < m->runs; i++) {
    const TpPlan *p = r->res->ranked->pdata[i];
    g_string_append_printf(out, "  %-16s %2d %4d%s %14.3f %14.3f %+8.1f%% %6d %6.1f%%\n", p->preset->name, p->W,
                           p->N, !r->cols.rc ? "" : p->recompute ? " rc" : "   ",
                           1e3 * p->sim.t_minibatch, 1e3 * m->meas[i].t_minibatch,
                           100 * tp_rel_error(p->sim.t_minibatch, m->meas[i].t_minibatch), m->meas[i].mini_batches,
                           100 * m->meas[i].spread);
  }
  g_string_append(out, "spread: (slowest - fastest) / median of a plan's runs\n");
  if (a->mpi && !a->c && !a->prof->links.transport)
    g_string_append(out, "note: the predictions count the links as free (the profile has no [links]; mpirun -np 2 "
                         "timeprest profile --transport mpi measures them), the runs pay MPI's messages\n");
  if (isnan(m->tau))
    g_string_append(out, "Kendall's tau (predicted vs measured order): undefined (one plan measured)\n");
  else
    g_string_append_printf(out, "Kendall's tau (predicted vs measured order): %.3f\n", m->tau);
  if (m->confirmed) {
    g_string_append(out, "top choice confirmed: yes (measured fastest)\n");
    return;
  }
  const TpPlan *f = r->res->ranked->pdata[m->fastest];
  const Measured *top = &m->meas[0], *fast = &m->meas[m->fastest];
  double slower = (top->t_minibatch - fast->t_minibatch) / fast->t_minibatch;
  g_string_append_printf(out, "top choice confirmed: no (%s W=%d N=%d%s measured fastest; the top choice %.1f %% "
                         "slower%s)\n", f->preset->name, f->W, f->N, f->recompute ? " recompute" : "",
                         100 * slower, slower <= MAX(top->spread, fast->spread) ?
                         ", less than the spread of their runs" : "");
}

static void report_text(GString *out, const Report *r)
{
  text_head(out, r);
  text_table(out, r);
  g_autofree char *why = tp_plan_explain(r->res->ranked->pdata[0], r->res->ranked->len > 1 ? r->res->ranked->pdata[1] : NULL);
  g_string_append_printf(out, "\nTop choice: %s", why);
  if (r->runs->runs > 0)
    text_measured(out, r);
}

/* The report of the search and the runs, as --format asks. */
static GString *report(const PlanArgs *a, const TpPlanResult *res, const Runs *runs)
{
  gboolean ff = FALSE;
  for (guint i = 0; i < MIN(res->ranked->len, (guint)a->show); i++)
    ff = ff || ((const TpPlan *)res->ranked->pdata[i])->fused;
  const Report r = { .a = a, .res = res, .runs = runs,
                     .cols = { .rc = a->rc != TP_PLAN_RECOMPUTE_NO, .batch = a->several, .ff = ff, .dt = a->parallel } };
  GString *out = g_string_new(NULL);
  if (a->fmt == 1)
    report_json(out, &r);
  else
    report_text(out, &r);
  return out;
}

gboolean tp_cmd_plan(int argc, char **argv, GError **err)
{
  PlanOpts o = { .launch_s = 30 };
  PlanArgs a = { .rc = TP_PLAN_RECOMPUTE_NO, .w0 = 1, .w1 = 8, .n0 = 1, .show = 10, .reps = RUN_REPS };
  g_autoptr(GOptionContext) ctx = plan_context(&o);
  g_autoptr(TpPlanResult) res = NULL;
  gboolean ok = tp_cli_parse(ctx, &argc, &argv, err) && parse_inputs(&o, &a, err) && parse_search(&o, &a, err) &&
                check_run_options(&o, &a, err) && parse_parallel(&o, &a, err) && (res = search(&a, err));
  /* --run-top: the K best measured */
  Runs runs = { .runs = ok ? MIN(a.top, (int)res->ranked->len) : 0 };
  runs.meas = g_new0(Measured, MAX(runs.runs, 1));
  ok = ok && (runs.runs == 0 || tp_plan_run_top(res, runs.runs, a.reps, &o, a.run_k, a.prof, a.mpi, runs.meas, err));
  if (ok) {
    agreement(res, a.several, &runs);
    g_autoptr(GString) out = report(&a, res, &runs);
    ok = tp_cli_emit(o.output, out, err);
  }
  g_free(runs.meas);
  args_clear(&a);
  opts_clear(&o);
  return ok;
}
