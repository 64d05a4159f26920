/* test-scale.c — what makes large runs possible: sizes the tool must refuse rather than die on
 * (memory each step needs, checked before allocating, against TP_MEMORY_LIMIT here; the total work
 * of a sweep), the sweep's threads, which must give the rows a single thread gives, and the
 * metrics' merge of memory changes when a stage receives in another order than its neighbour sends,
 * and the simulator reusing the index and unit-slot replay the generator built. */
#include "tp_test.h"
#include "tp_cost.h"
#include "tp_metrics.h"
#include "tp_replay.h"
#include "tp_sim.h"
#include "tp_validate.h"
#include "tp_sweep.h"
#include "tp_memory.h"

static void test_sweep_threads_equal(void)
{
  const char *presets[] = { "timeprest", "pipedream", "1f1b" };
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++) {
    const TpPreset *p = tp_preset_find(presets[i]);
    GError *err = NULL;
    g_autoptr(GArray) one = tp_sweep_threads(p->order, p->policy, 1, 14, 1, 9, 1, &err);
    g_assert_no_error(err);
    g_autoptr(GArray) many = tp_sweep_threads(p->order, p->policy, 1, 14, 1, 9, 3, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(one->len, ==, 14 * 9);
    g_assert_cmpuint(many->len, ==, one->len);
    for (guint k = 0; k < one->len; k++) {
      const TpSweepRow *a = &g_array_index(one, TpSweepRow, k), *b = &g_array_index(many, TpSweepRow, k);
      g_assert_cmpint(a->W, ==, 1 + (int)k / 9);
      g_assert_cmpint(a->N, ==, 1 + (int)k % 9);
      g_assert_cmpint(memcmp(a, b, sizeof *a), ==, 0);
    }
  }
}

static void test_sweep_work_bound(void)
{
  GError *err = NULL;
  gint64 t0 = g_get_monotonic_time();
  GArray *rows = tp_sweep(TP_ORDER_NF1B, TP_POLICY_VSYNC_LATEST, 1, 100, 1, 100, &err);
  g_assert_null(rows);
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_assert_nonnull(strstr(err->message, "operations in all, more than the bound"));
  g_assert_cmpint(g_get_monotonic_time() - t0, <, 2 * G_USEC_PER_SEC); /* refused up front */
  g_clear_error(&err);
  long long top, work = tp_sweep_work(2, 3, 1, 2, &top);
  g_assert_cmpint(work, ==, 2LL * 8 * 3 + 2LL * 8 * 5 + 3LL * 11 * 3 + 3LL * 11 * 5);
  g_assert_cmpint(top, ==, 3LL * 11 * 5);
}

/* Generating fits under TP_MEMORY_LIMIT, simulating does not: each step is refused before it allocates. */
static void test_memory_limit(void)
{
  GError *err = NULL;
  long long gen = tp_generate_bytes(TP_ORDER_NF1B, 8, 8, 1000);
  g_autofree char *small = g_strdup_printf("%lld", gen - 1), *enough = g_strdup_printf("%lld", gen);
  g_setenv("TP_MEMORY_LIMIT", small, TRUE);
  g_assert_null(tp_schedule_generate(TP_ORDER_NF1B, TP_POLICY_VSYNC_LATEST, 8, 8, 1000, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_assert_nonnull(strstr(err->message, "W=8, N=8, K=1000: generating the schedule needs about"));
  g_clear_error(&err);
  g_setenv("TP_MEMORY_LIMIT", enough, TRUE);
  g_autoptr(TpSchedule) s = tp_schedule_generate(TP_ORDER_NF1B, TP_POLICY_VSYNC_LATEST, 8, 8, 1000, &err);
  g_assert_no_error(err);
  g_autoptr(TpCost) c = tp_cost_unit(8);
  g_assert_cmpint(tp_sim_bytes(s, c), >, gen);
  g_assert_null(tp_sim_run(s, c, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_assert_nonnull(strstr(err->message, "simulating the schedule needs about"));
  g_clear_error(&err);
  g_setenv("TP_MEMORY_LIMIT", "1G", TRUE);
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  g_assert_nonnull(sim);
  g_setenv("TP_MEMORY_LIMIT", "12Q", TRUE);
  g_assert_cmpint(tp_memory_available(), ==, -1);
  g_unsetenv("TP_MEMORY_LIMIT");
  g_assert_cmpint(tp_memory_available(), >, 0);
}

/* Run the program with TP_MEMORY_LIMIT=limit in its environment (not in this process's). */
static void expect_refusal(const char *limit, const char *const *args, const char *needle)
{
  const char *bin = g_getenv("TP_BIN") ? g_getenv("TP_BIN") : "./timeprest";
  GPtrArray *argv = g_ptr_array_new();
  g_ptr_array_add(argv, (char *)bin);
  for (int i = 0; args[i]; i++)
    g_ptr_array_add(argv, (char *)args[i]);
  g_ptr_array_add(argv, NULL);
  g_auto(GStrv) env = g_environ_setenv(g_get_environ(), "TP_MEMORY_LIMIT", limit, TRUE);
  g_autofree char *out = NULL, *errs = NULL;
  int wait = 0;
  GError *e = NULL;
  gint64 t0 = g_get_monotonic_time();
  g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, env, G_SPAWN_DEFAULT, NULL, NULL, &out, &errs, &wait, &e));
  g_assert_no_error(e);
  g_ptr_array_free(argv, TRUE);
  int status = WIFEXITED(wait) ? WEXITSTATUS(wait) : 128;
  if (status != 2 || tpt_lines(errs) != 1 || !strstr(errs, needle))
    g_error("%s: status %d, stderr '%s' (wanted status 2, one line with '%s')", args[0], status, errs, needle);
  g_assert_cmpstr(out, ==, "");
  g_assert_cmpint(g_get_monotonic_time() - t0, <, 5 * G_USEC_PER_SEC);
}

static void test_cli_refusals(void)
{
  g_autofree char *dir = g_dir_make_tmp("tp-scale-XXXXXX", NULL);
  g_autofree char *never = g_build_filename(dir, "never-written.json", NULL);
#define R(limit, needle, ...) expect_refusal(limit, (const char *const[]){ __VA_ARGS__, NULL }, needle)
  R("1G", "W=10, N=10, K=900000: generating the schedule needs about", "simulate", "-w", "10", "-n", "10", "-k",
    "900000");
  R("1G", "W=1024, N=1, K=65000: generating the schedule needs about", "schedule", "-w", "1024", "-n", "1", "-k",
    "65000");
  R("5M", "W=8, N=8, K=1000: simulating the schedule needs about", "simulate", "-w", "8", "-n", "8", "-k", "1000");
  R("1G", "W=1024, N=31, K=3074: one cell of the sweep needs about", "validate", "-w", "1024", "-n", "31");
  R("64G", "more than the bound", "validate", "-w", "1-100", "-n", "1-100");
  R("2500K", "W=16, N=8, K=200: writing the schedule needs about", "schedule", "-w", "16", "-n", "8", "-k", "200",
    "--format", "json");
  R("14M", "W=16, N=8, K=200: writing the trace needs about", "simulate", "-w", "16", "-n", "8", "-k", "200",
    "--trace", never);
  R("1x", "TP_MEMORY_LIMIT: expected a number of bytes", "schedule");
  g_assert_false(g_file_test(never, G_FILE_TEST_EXISTS));
  g_rmdir(dir);
}

/* GPipe with stages 2 and 3 running each mini-batch's first two forwards swapped: their received
 * activations arrive in the other order, so the stream of arrivals is out of time order and must
 * be sorted before it is merged.  Each stage's memory must then be a step function in time order
 * whose largest value is the peak and which ends at the fixed part (optimizer, gradient buffer). */
static void test_memory_out_of_order(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("gpipe", 4, 3, 4);
  for (int st = 1; st <= 2; st++) {
    TpOp *ops = tp_stage_ops(s, st);
    for (int k = 0; k + 1 < tp_stage_len(s, st); k++)
      if (ops[k].kind == TP_OP_F && ops[k].micro == 0) {
        TpOp t = ops[k];
        ops[k] = ops[k + 1], ops[k + 1] = t;
        k++;
      }
  }
  GError *err = NULL;
  tp_validate(s, &err);
  g_assert_no_error(err);
  g_autoptr(TpCost) c = tp_cost_load(TP_SRCDIR "/examples/cluster-4.cost", 4, &err);
  g_assert_no_error(err);
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
  long swapped = 0;
  for (int st = 0; st < 4; st++) {
    g_autoptr(GArray) series = tp_metrics_memory_series(sim, m, st);
    double top = 0;
    for (guint i = 0; i < series->len; i++) {
      const TpMemPoint *p = &g_array_index(series, TpMemPoint, i);
      if (i > 0)
        g_assert_cmpfloat(p->t, >, g_array_index(series, TpMemPoint, i - 1).t);
      top = MAX(top, p->bytes);
    }
    g_assert_cmpfloat(top, ==, m->stage[st].peak_bytes);
    g_assert_cmpfloat(g_array_index(series, TpMemPoint, series->len - 1).bytes, ==,
                      c->stage[st].optimizer_bytes + c->stage[st].grad_buffer_bytes);
    /* the swap did make arrivals come out of order on this stage */
    for (long g = sim->ix->off[st] + 1; st > 0 && g < sim->ix->off[st + 1]; g++)
      swapped += sim->prod[g] >= 0 && sim->prod[g - 1] >= 0 && sim->xend[sim->prod[g]] < sim->xend[sim->prod[g - 1]];
  }
  g_assert_cmpint(swapped, >, 0);
}

/* The simulator on what the generator prepared (its index and unit-slot replay) gives the timeline
 * of the simulator on its own, takes what it uses, and on a cost model still runs the event loop. */
static void test_prepared(void)
{
  for (int i = 0; i < tp_n_presets; i++)
    for (int costs = 0; costs < 2; costs++) {
      const TpPreset *p = &tp_presets[i];
      TpPrepared prep = { 0 };
      int N = p->order == TP_ORDER_DUALPIPE_V ? 8 : 4; /* N >= 2W */
      g_autoptr(TpSchedule) s = tp_schedule_generate_prepared(p->order, p->policy, 4, N, 12, &prep, NULL);
      g_assert_nonnull(s);
      g_assert_true(prep.ix && prep.start && prep.end);
      g_autoptr(TpCost) c = tp_cost_unit(s->W);
      for (int st = 0; costs && st < s->W; st++)
        c->stage[st].fwd = 1 + st, c->stage[st].bwd = 2.5;
      c->unit = !costs;
      g_autoptr(TpSim) want = tp_sim_run(s, c, NULL);
      g_autoptr(TpSim) got = tp_sim_run_prepared(s, c, &prep, NULL);
      g_assert_nonnull(got);
      g_assert_null(prep.ix);
      g_assert_true(prep.start == NULL && prep.end == NULL);
      g_assert_cmpfloat(got->makespan, ==, want->makespan);
      for (long g = 0; g < want->n_ops; g++) {
        g_assert_cmpint(got->cons[g], ==, want->cons[g]);
        g_assert_cmpfloat(got->start[g], ==, want->start[g]);
        g_assert_cmpfloat(got->end[g], ==, want->end[g]);
        g_assert_cmpfloat(got->xstart[g], ==, want->xstart[g]);
        g_assert_cmpfloat(got->xend[g], ==, want->xend[g]);
      }
      tp_prepared_clear(&prep);
    }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  /* first: it sets TP_MEMORY_LIMIT in this process, which is safe only before any thread starts */
  g_test_add_func("/scale/memory-limit", test_memory_limit);
  g_test_add_func("/scale/cli-refusals", test_cli_refusals);
  g_test_add_func("/scale/sweep-threads-equal", test_sweep_threads_equal);
  g_test_add_func("/scale/sweep-work-bound", test_sweep_work_bound);
  g_test_add_func("/scale/memory-out-of-order", test_memory_out_of_order);
  g_test_add_func("/scale/prepared", test_prepared);
  return g_test_run();
}
