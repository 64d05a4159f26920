/* cmd_plan_run.c — `timeprest plan --run-top K`: each of the K best plans trained for short runs (in
 * this process through the trainer, given train's arguments; with --transport mpi `timeprest train`
 * under the MPI launcher, its JSON report read back), R repetitions interleaved across the K, each
 * plan's median measurement. */
#include "cmd_plan.h"
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_predict.h"
#include "tp_train_report.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* measured.time_per_mini_batch of a train report. */
static gboolean read_measured(const char *json, double *t, int *threads, GError **err)
{
  g_autoptr(JsonParser) parser = json_parser_new();
  GError *e = NULL;
  if (!json_parser_load_from_data(parser, json, -1, &e)) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "train's report is not JSON: %s", e->message);
    g_error_free(e);
    return FALSE;
  }
  JsonNode *root = json_parser_get_root(parser);
  JsonObject *o = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
  JsonObject *ms = o && json_object_has_member(o, "measured") ? json_object_get_object_member(o, "measured") : NULL;
  if (!ms || !json_object_has_member(ms, "time_per_mini_batch")) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "train's report has no measured.time_per_mini_batch");
    return FALSE;
  }
  *t = json_object_get_double_member(ms, "time_per_mini_batch");
  *threads = json_object_has_member(o, "threads") ? (int)json_object_get_int_member(o, "threads") : 0;
  return TRUE;
}

/* Mini-batches of plan p's runs: --run-mini-batches, else a steady window of about RUN_WINDOW_S
 * predicted seconds after and before the W mini-batches of filling and draining the pipeline (at
 * least 4W + 4, at most 1000). */
static int run_length(const TpPlan *p, int run_k)
{
  if (run_k)
    return run_k;
  double steady = p->sim.t_minibatch > 0 ? ceil(RUN_WINDOW_S / p->sim.t_minibatch) : 1e9;
  return (int)MIN(1000.0, 2.0 * p->W + MAX(2.0 * p->W + 4, steady));
}

GPtrArray *tp_plan_launcher_words(const char *launcher, int W, GError **err)
{
  g_auto(GStrv) words = NULL;
  GError *e = NULL;
  if (!g_shell_parse_argv(launcher, NULL, &words, &e)) {
    g_autofree char *q = tp_quote(launcher);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--launcher: cannot split %s into words: %s", q, e->message);
    g_error_free(e);
    return NULL;
  }
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
  g_autofree char *w = g_strdup_printf("%d", W);
  for (int i = 0; words[i]; i++) {
    g_auto(GStrv) parts = g_strsplit(words[i], "{W}", -1);
    g_ptr_array_add(a, g_strjoinv(w, parts));
  }
  return a;
}

/* A child's stdout and stderr and its end. */
typedef struct {
  char *out, *errtext;
  gboolean done;
  GError *e;
} Child;

static void child_done(GObject *src, GAsyncResult *res, gpointer data)
{
  Child *c = data;
  g_subprocess_communicate_utf8_finish(G_SUBPROCESS(src), res, &c->out, &c->errtext, &c->e);
  c->done = TRUE;
}

/* The child leads a process group of its own, so that a launcher's children die with it. */
static void own_group(gpointer data)
{
  (void)data;
  setpgid(0, 0);
}

/* Run argv to its end, at most limit_s seconds: past it the child's whole process group is killed
 * (a launcher that hangs, and what it started) and the run fails in one line.  The child's outputs in
 * c; FALSE (err) where it could not start, timed out or failed. */
static gboolean run_bounded(char **argv, double limit_s, Child *c, GError **err)
{
  g_autoptr(GSubprocessLauncher) l = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDOUT_PIPE |
                                                                G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_subprocess_launcher_set_child_setup(l, own_group, NULL, NULL);
  g_autoptr(GSubprocess) sp = g_subprocess_launcher_spawnv(l, (const char *const *)argv, err);
  if (!sp)
    return FALSE;
  g_autoptr(GMainContext) ctx = g_main_context_new();
  g_autoptr(GCancellable) cancel = g_cancellable_new();
  g_main_context_push_thread_default(ctx);
  g_subprocess_communicate_utf8_async(sp, NULL, cancel, child_done, c);
  gint64 end = g_get_monotonic_time() + (gint64)(limit_s * 1e6);
  while (!c->done && g_get_monotonic_time() < end)
    if (!g_main_context_iteration(ctx, FALSE))
      g_usleep(10000);
  gboolean late = !c->done;
  if (late) {
    const char *id = g_subprocess_get_identifier(sp);
    if (id)
      kill(-(pid_t)atoi(id), SIGKILL);
    g_cancellable_cancel(cancel); /* what it started may hold the pipes open */
    while (!c->done)
      g_main_context_iteration(ctx, TRUE);
    g_subprocess_wait(sp, NULL, NULL);
  }
  g_main_context_pop_thread_default(ctx);
  if (late) {
    g_clear_error(&c->e);
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "did not end within %.0f s (killed; a launcher that waits?)", limit_s);
    return FALSE;
  }
  if (c->e) {
    g_propagate_error(err, c->e);
    c->e = NULL;
    return FALSE;
  }
  if (!g_subprocess_get_successful(sp)) {
    g_autofree char *why = tp_one_line(c->errtext && *c->errtext ? c->errtext : "no message");
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s", why);
    return FALSE;
  }
  return TRUE;
}

/* Under the launcher (one MPI rank per stage): `timeprest train` as argv starts it, bounded by
 * launch_s to start (a launcher, MPI) and 20 times the predicted run (t_run seconds); its JSON report
 * read back. */
static gboolean run_launched(char **argv, int launch_s, double t_run, double *t, int *threads, GError **err)
{
  Child c = { 0 };
  gboolean ok = run_bounded(argv, launch_s + 20.0 * t_run, &c, err) && read_measured(c.out, t, threads, err);
  g_free(c.out), g_free(c.errtext);
  return ok;
}

/* Train plan p for k mini-batches (with mpi: under the launcher, one MPI rank per stage); *t its
 * measured steady time per mini-batch. */
static gboolean run_plan(const TpPlan *p, const PlanOpts *o, int k, const TpProfile *prof, gboolean mpi, double *t,
                         int *ran_threads, GError **err)
{
  /* the threads each stage's BLAS calls used when it was profiled, where the backend has threads */
  const TpBackendReg *reg = tp_backend_find(prof->backend, NULL);
  g_autofree char *threads = g_strdup_printf("%d", MAX(prof->threads, 1));
  gboolean with_threads = reg && reg->set_threads;
  const char *backend = prof->backend;
  g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);
  g_autofree char *w = g_strdup_printf("%d", p->W), *n = g_strdup_printf("%d", p->N);
  g_autofree char *b = g_strdup_printf("%ld", p->batch), *kk = g_strdup_printf("%d", k);
  g_autofree char *split = tp_plan_split_text(p);
  const char *args[] = { self ? self : "timeprest", "train", "-s", p->preset->name, "-w", w, "-n", n, "--batch", b,
                         "--split", split, "-k", kk, "--model", o->model, "--data", "synthetic", "--backend", backend,
                         "--format", "json", "--quiet", "--transport", mpi ? "mpi" : "local",
                         "--optimizer", o->optimizer ? o->optimizer : "sgd", "--fuse-forwards", p->fused ? "on" : "off" };
  g_autoptr(GPtrArray) argv = mpi ? tp_plan_launcher_words(o->launcher ? o->launcher : "mpirun -np {W}", p->W, err)
                                  : g_ptr_array_new_with_free_func(g_free);
  if (!argv)
    return FALSE;
  for (size_t i = 0; i < G_N_ELEMENTS(args); i++)
    g_ptr_array_add(argv, g_strdup(args[i]));
  if (with_threads)
    g_ptr_array_add(argv, g_strdup("--threads")), g_ptr_array_add(argv, g_strdup(threads));
  if (p->recompute)
    g_ptr_array_add(argv, g_strdup("--recompute"));
  g_ptr_array_add(argv, NULL);
  GError *e = NULL;
  /* the option parser drops what it reads from the vector it is given: hand it a copy of the
   * pointers, so that argv still owns (and frees) every word */
  g_autofree char **words = g_memdup2(argv->pdata + 1, (argv->len - 1) * sizeof(char *));
  gboolean ok = mpi ? run_launched((char **)argv->pdata, o->launch_s, k * p->sim.t_minibatch, t, ran_threads, &e)
                    : tp_train_measure((int)argv->len - 2, words, t, ran_threads, &e);
  if (!ok) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "--run-top: training %s W=%d N=%d%s failed: %s", p->preset->name,
                p->W, p->N, p->recompute ? " recompute" : "", e->message);
    g_error_free(e);
  }
  return ok;
}

/* --run-top: the K best plans, each trained reps times; the runs interleaved (round r trains every
 * plan once, starting one plan later than round r − 1), so that a drift of the machine's speed
 * reaches every plan alike and no plan always runs first; each plan's median and spread. */
gboolean tp_plan_run_top(const TpPlanResult *res, int runs, int reps, const PlanOpts *o, int run_k,
                         const TpProfile *prof, gboolean mpi, Measured *meas, GError **err)
{
  g_autofree double *t = g_new0(double, (size_t)runs * reps);
  for (int i = 0; run_k && i < runs; i++) {
    /* the prediction is the steady state's: the run must have one (mini-batches W + 1 .. K - W) */
    const TpPlan *p = res->ranked->pdata[i];
    if (run_k < 2 * p->W + 1) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--run-mini-batches %d: plan %d (%s W=%d) needs at least 2W + 1 = %d "
                  "for a steady window to measure", run_k, i + 1, p->preset->name, p->W, 2 * p->W + 1);
      return FALSE;
    }
  }
  for (int r = 0; r < reps; r++)
    for (int j = 0; j < runs; j++) {
      int i = (j + r) % runs;
      const TpPlan *p = res->ranked->pdata[i];
      meas[i].mini_batches = run_length(p, run_k);
      fprintf(stderr, "timeprest plan: round %d of %d: training plan %d of %d (%s W=%d N=%d%s, %d mini-batches%s)\n",
              r + 1, reps, i + 1, runs, p->preset->name, p->W, p->N, p->recompute ? " recompute" : "",
              meas[i].mini_batches, mpi ? ", MPI" : "");
      if (!run_plan(p, o, meas[i].mini_batches, prof, mpi, &t[(size_t)i * reps + r], &meas[i].threads, err))
        return FALSE;
    }
  for (int i = 0; i < runs; i++) {
    const TpPlan *p = res->ranked->pdata[i];
    meas[i].t_minibatch = tp_median_spread(t + (size_t)i * reps, reps, &meas[i].spread);
    meas[i].samples_per_second = meas[i].t_minibatch > 0 ? (double)p->batch / meas[i].t_minibatch : 0;
  }
  return TRUE;
}

