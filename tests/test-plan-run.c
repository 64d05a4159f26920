/* test-plan-run.c — what checks a plan against this machine: the measured links of a profile (the
 * fit of latency and bandwidth against its optimality conditions, the file's [links] group and its
 * refusals, the cost model taking them), `profile --transport mpi` under mpirun, and
 * `plan --run-top` (repetitions interleaved across the plans, the median kept; over MPI under a
 * launcher).  The MPI cases skip where mpirun cannot start processes, unless TP_REQUIRE=mpi. */
#include "tp_analytic.h"
#include "tp_eager.h"
#include "tp_error.h"
#include "tp_plan.h"
#include "tp_test.h"
#include "tp_test_mpi.h"
#include "tp_test_profile.h"

#include <json-glib/json-glib.h>
#include <math.h>

static const char *bin;

static void assert_rel(double a, double b, double tol)
{
  if (fabs(a - b) > tol * MAX(fabs(a), fabs(b)))
    g_error("%.12g and %.12g differ by more than %g relative", a, b, tol);
}

/* ---- the statistics ----------------------------------------------------------------------------------- */

static void test_median(void)
{
  double odd[] = { 3, 1, 2 }, even[] = { 4, 1, 2, 3 }, zero[] = { 0, 0 }, sp = -1;
  g_assert_cmpfloat(tp_median_spread(odd, 3, &sp), ==, 2);
  g_assert_cmpfloat(sp, ==, 1);
  g_assert_cmpfloat(tp_median_spread(even, 4, &sp), ==, 2.5);
  g_assert_cmpfloat(sp, ==, 3 / 2.5);
  g_assert_cmpfloat(tp_median_spread(zero, 2, &sp), ==, 0);
  g_assert_cmpfloat(sp, ==, 0);
}

/* Links with one-way times t_i at sizes x_i (owned arrays). */
static TpProfileLinks links_of(const double *x, const double *t, int n)
{
  TpProfileLinks l = { .transport = g_strdup("mpi"), .ranks = 2, .n = n, .bytes = g_memdup2(x, n * sizeof *x),
                       .one_way = g_memdup2(t, n * sizeof *t), .eager_limit = 65536 };
  return l;
}

static void links_clear(TpProfileLinks *l)
{
  g_free(l->transport), g_free(l->bytes), g_free(l->one_way);
}

/* The fit's objective: sum of squared relative residuals of a + c x. */
static double objective(const TpProfileLinks *l, double a, double c)
{
  double f = 0;
  for (int i = 0; i < l->n; i++) {
    double r = (a + c * l->bytes[i] - l->one_way[i]) / l->one_way[i];
    f += r * r;
  }
  return f;
}

static void test_fit(void)
{
  const double x[] = { 8, 64, 512, 4096, 32768, 262144, 2097152, 16777216 };
  const int n = G_N_ELEMENTS(x);
  double t[G_N_ELEMENTS(x)];
  /* on a line: recovered exactly */
  for (int i = 0; i < n; i++)
    t[i] = 5e-6 + x[i] / 2e9;
  TpProfileLinks l = links_of(x, t, n);
  tp_profile_fit_links(&l);
  assert_rel(l.latency, 5e-6, 1e-9);
  assert_rel(l.bandwidth, 2e9, 1e-9);
  g_assert_cmpfloat(l.fit_error, <, 1e-9);
  links_clear(&l);
  /* off the line by a few per cent: the optimum of the relative least squares — no step of either
   * parameter lowers the objective, and the gradient vanishes */
  for (int i = 0; i < n; i++)
    t[i] = (5e-6 + x[i] / 2e9) * (1 + 0.07 * sin(3.0 * i));
  l = links_of(x, t, n);
  tp_profile_fit_links(&l);
  double a = l.latency, c = 1 / l.bandwidth, f = objective(&l, a, c);
  for (int k = -3; k <= 3; k++)
    if (k) {
      double h = 1e-3 * k;
      g_assert_cmpfloat(objective(&l, a * (1 + h), c), >=, f);
      g_assert_cmpfloat(objective(&l, a, c * (1 + h)), >=, f);
    }
  double ga = 0, gc = 0, worst = 0;
  for (int i = 0; i < n; i++) {
    double r = (a + c * x[i] - t[i]) / t[i];
    ga += r / t[i], gc += r * x[i] / t[i];
    worst = MAX(worst, fabs(r));
  }
  g_assert_cmpfloat(fabs(ga) * a, <, 1e-9);
  g_assert_cmpfloat(fabs(gc) * c, <, 1e-9);
  assert_rel(l.fit_error, worst, 1e-9);
  links_clear(&l);
  /* a line through a negative latency: latency 0, the best line through the origin */
  for (int i = 0; i < n; i++)
    t[i] = x[i] / 1e9 - 4e-9; /* 4 ns at 8 bytes */
  l = links_of(x, t, n);
  tp_profile_fit_links(&l);
  g_assert_cmpfloat(l.latency, ==, 0);
  c = 1 / l.bandwidth, f = objective(&l, 0, c);
  g_assert_cmpfloat(objective(&l, 0, c * 1.001), >=, f);
  g_assert_cmpfloat(objective(&l, 0, c * 0.999), >=, f);
  links_clear(&l);
  /* no growth with the size: latency only, bandwidth 0 (infinite) */
  for (int i = 0; i < n; i++)
    t[i] = 3e-6;
  l = links_of(x, t, n);
  tp_profile_fit_links(&l);
  g_assert_cmpfloat(l.bandwidth, ==, 0);
  assert_rel(l.latency, 3e-6, 1e-9);
  links_clear(&l);
}

/* ---- the file and the cost model ----------------------------------------------------------------------- */

static TpProfile *profile_with_links(const TpModel *m)
{
  TpProfile *p = synthetic_profile(m, 8, 2, 1e9);
  const double x[] = { 64, 4096, 262144 }, t[] = { 4e-6, 6e-6, 1.3e-4 };
  p->links = links_of(x, t, 3);
  tp_profile_fit_links(&p->links);
  return p;
}

static void test_links_file(void)
{
  g_autoptr(TpModel) m = tpt_model("mlp");
  g_autoptr(TpProfile) p = profile_with_links(m);
  g_autofree char *text = profile_text(p);
  g_assert_nonnull(strstr(text, "format_version=2\n"));
  GError *err = NULL;
  g_autoptr(TpProfile) q = tp_profile_parse(text, strlen(text), "links.profile", &err);
  g_assert_no_error(err);
  g_assert_cmpstr(q->links.transport, ==, "mpi");
  g_assert_cmpint(q->links.n, ==, 3);
  g_assert_cmpint(q->links.ranks, ==, 2);
  assert_rel(q->links.latency, p->links.latency, 1e-8);
  assert_rel(q->links.bandwidth, p->links.bandwidth, 1e-8);
  g_autofree char *again = profile_text(q);
  g_assert_cmpstr(text, ==, again);
  /* MPI's eager limit; a profile written before it existed: Open MPI's shared-memory one */
  g_assert_cmpfloat(q->links.eager_limit, ==, 65536);
  g_autofree char *no_eager = edit(text, "eager_limit=65536\n", "");
  g_autoptr(TpProfile) old = tp_profile_parse(no_eager, strlen(no_eager), "old.profile", &err);
  g_assert_no_error(err);
  g_assert_cmpfloat(old->links.eager_limit, ==, TP_EAGER_LIMIT_SHM);
  /* version 1: no [links]; a version 1 file without them is read, with them refused */
  g_autofree char *v1 = edit(text, "format_version=2", "format_version=1");
  expect_refused(v1, "[links]: unknown group");
  g_autoptr(TpProfile) plain = synthetic_profile(m, 8, 2, 1e9);
  g_autofree char *plain_text = profile_text(plain);
  g_autofree char *plain_v1 = edit(plain_text, "format_version=2", "format_version=1");
  g_autoptr(TpProfile) r1 = tp_profile_parse(plain_v1, strlen(plain_v1), "v1.profile", &err);
  g_assert_no_error(err);
  g_assert_null(r1->links.transport);
  g_assert_cmpint(r1->format_version, ==, 1);
  /* malformed [links]: file:line, group and key */
  struct {
    const char *from, *to, *needle;
  } cases[] = {
    { "transport=mpi", "transport=tcp", "[links] transport: expected mpi" },
    { "ranks=2", "ranks=1", "[links] ranks" },
    { "message_bytes=64, 4096", "message_bytes=4096, 64", "[links] message_bytes: expected ascending" },
    { "one_way=", "one_way=1, ", "[links] one_way: expected 3 comma-separated numbers (one per message size)" },
    { "latency=", "latency=-", "[links] latency" },
    { "fit_error=", "colour=red\nfit_error=", "[links] colour" },
    { "bandwidth=", "bandwidth=1e-307\n#", "[links] bandwidth: expected 0 (no time per byte) or a number from 1e-06" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *bad = edit(text, cases[i].from, cases[i].to);
    g_autofree char *where = g_strdup_printf("bad.profile:%d: %s", line_of(bad, cases[i].to), cases[i].needle);
    expect_refused(bad, where);
  }
}

/* Without a cluster the profile's measured links are the cost model's; a cluster beside it wins. */
static void test_links_cost(void)
{
  g_autoptr(TpModel) m = tpt_model("mlp");
  g_autoptr(TpProfile) p = profile_with_links(m);
  GError *err = NULL;
  g_autoptr(TpCluster) c = tp_cluster_load("A", &err);
  g_assert_no_error(err);
  for (int with = 0; with < 2; with++) {
    g_autoptr(TpAnalytic) a = tp_analytic_new_on(m, with ? c : NULL, p, 2, 2, 8, TRUE, &err);
    g_assert_no_error(err);
    g_assert_true(tp_analytic_split(a, NULL, NULL, NULL, &err));
    TpCost *cost = tp_analytic_cost(a);
    double lat = with ? c->link_latency : p->links.latency, bw = with ? c->link_bandwidth : p->links.bandwidth;
    g_assert_cmpfloat(cost->link[0].latency, ==, lat);
    g_assert_cmpfloat(cost->link[0].bandwidth, ==, bw);
    g_assert_cmpfloat(cost->link[0].eager_limit, ==, with ? c->link_eager_limit : p->links.eager_limit);
    g_assert_true((strstr(cost->source, "links measured by MPI") != NULL) == !with);
    tp_cost_free(cost);
  }
}

/* ---- --run-top -------------------------------------------------------------------------------------- */

/* A measured profile of mlp at micro-batches of 2 and 4 samples (the run-top tests' costs). */
static char *mlp_profile(void)
{
  char *path = tpt_tmp_path("mlp-run.profile");
  TptRun r = tpt_run((const char *const[]){ "profile", "--model", "mlp", "--micro-batch-sizes", "2,4", "-r", "1", "-o",
                                            path, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  return path;
}

static JsonObject *member(JsonObject *o, const char *name) { return json_object_get_object_member(o, name); }

/* Two plans, two repetitions: four runs, each round starting one plan later; the median kept. */
/* Kendall's tau follows the ranking's ties: predictions equal to 9 digits are one time (a pair neither
 * concordant nor discordant), whatever their last bits; with one plan measured it is undefined (null,
 * and "undefined" in the table), not 1. */
static void test_tau_ties(void)
{
  TpPlan a = { .rank_time = 0.1234567891 }, b = { .rank_time = 0.12345678914 }, c = { .rank_time = 0.2 };
  g_assert_true(tp_plan_same_time(&a, &b));
  double pt[] = { tp_plan_time_key(&a), tp_plan_time_key(&b) }, mt[] = { 2.0, 1.0 };
  g_assert_cmpfloat(tp_kendall_tau(pt, mt, 2), ==, 0); /* raw times: -1 */
  double raw[] = { a.rank_time, b.rank_time };
  g_assert_cmpfloat(tp_kendall_tau(raw, mt, 2), ==, -1);
  double pc[] = { tp_plan_time_key(&a), tp_plan_time_key(&c) };
  g_assert_cmpfloat(tp_kendall_tau(pc, mt, 2), ==, -1);
  g_autofree char *path = mlp_profile();
  TptRun r = tpt_run((const char *const[]){ "plan", "--model", "mlp", "--profile", path, "--batch", "8", "-w", "1",
                                            "-n", "2", "--presets", "gpipe", "--run-top", "1", "--run-repetitions", "1",
                                            "--run-mini-batches", "5", "--format", "json", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\"kendall_tau\": null"));
  g_assert_nonnull(strstr(r.out, "\"threads\": 1, ")); /* the profile's threads */
  tpt_run_clear(&r);
  r = tpt_run((const char *const[]){ "plan", "--model", "mlp", "--profile", path, "--batch", "8", "-w", "1", "-n", "2",
                                     "--presets", "gpipe", "--run-top", "1", "--run-repetitions", "1",
                                     "--run-mini-batches", "5", NULL });
  g_assert_nonnull(strstr(r.out, "Kendall's tau (predicted vs measured order): undefined (one plan measured)"));
  tpt_run_clear(&r);
  /* a profile taken with two BLAS threads a stage is trained with two (it was trained with one) */
  g_autofree char *two = tpt_tmp_path("mlp-t2.profile");
  r = tpt_run((const char *const[]){ "profile", "--model", "mlp", "--micro-batch-sizes", "2", "-r", "1", "--threads", "2",
                                     "-o", two, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  r = tpt_run((const char *const[]){ "plan", "--model", "mlp", "--profile", two, "--batch", "2", "-w", "1", "-n", "1",
                                     "--presets", "gpipe", "--run-top", "1", "--run-repetitions", "1",
                                     "--run-mini-batches", "5", "--format", "json", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\"repetitions\": 1, \"threads\": 2, "));
  tpt_run_clear(&r);
  tpt_tmp_remove(two);
  tpt_tmp_remove(path);
}

static void test_run_top_interleaved(void)
{
  g_autofree char *path = mlp_profile();
  TptRun r = tpt_run((const char *const[]){ "plan", "--model", "mlp", "--profile", path, "--batch", "8", "-w", "1-2",
                                            "-n", "2-4", "--presets", "gpipe", "--run-top", "2", "--run-repetitions",
                                            "2", "--run-mini-batches", "5", "--format", "json", NULL });
  g_assert_cmpint(r.status, ==, 0);
  const char *order[] = { "round 1 of 2: training plan 1 of 2", "round 1 of 2: training plan 2 of 2",
                          "round 2 of 2: training plan 2 of 2", "round 2 of 2: training plan 1 of 2" };
  const char *at = r.err;
  for (size_t i = 0; i < G_N_ELEMENTS(order); i++) {
    at = strstr(at, order[i]);
    if (!at)
      g_error("no '%s' (in this order) in:\n%s", order[i], r.err);
  }
  g_assert_cmpint(tpt_count(r.err, "training plan"), ==, 4);
  g_autoptr(JsonParser) parser = json_parser_new();
  GError *err = NULL;
  g_assert_true(json_parser_load_from_data(parser, r.out, -1, &err));
  JsonArray *plans = json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)), "plans");
  for (guint i = 0; i < 2; i++) {
    JsonObject *ms = member(json_array_get_object_element(plans, i), "measured");
    g_assert_cmpint(json_object_get_int_member(ms, "repetitions"), ==, 2);
    g_assert_cmpint(json_object_get_int_member(ms, "mini_batches"), ==, 5);
    g_assert_cmpfloat(json_object_get_double_member(ms, "spread"), >=, 0);
    g_assert_cmpfloat(json_object_get_double_member(ms, "time_per_mini_batch"), >, 0);
  }
  tpt_run_clear(&r);
  /* the launcher: only with --transport mpi, and it must say where W goes */
  const char *bad[][4] = { { "--launcher", "mpirun -np {W}", NULL, "--launcher: starts the ranks of --transport mpi" },
                           { "--transport", "mpi", "--launcher=mpirun -np 2", "has no {W}" },
                           { "--launch-timeout", "5", NULL, "--launch-timeout: bounds the runs of --transport mpi" },
                           { "--transport", "mpi", "--launch-timeout=0", "--launch-timeout" },
                           { "--transport", "mpi", "--launcher=mpirun 'unclosed {W}", "cannot split" },
                           { "--transport", "tcp", NULL, "--transport" },
                           /* a run without a steady window to measure against the steady prediction */
                           { "-n", "2", "--run-mini-batches=2", "--run-mini-batches 2: plan 1 (" } };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    r = tpt_run((const char *const[]){ "plan", "--model", "mlp", "--profile", path, "--batch", "8", "--run-top", "1",
                                       bad[i][0], bad[i][1], bad[i][2], NULL });
    g_assert_cmpint(r.status, ==, 2);
    if (!strstr(r.err, bad[i][3]))
      g_error("expected '%s' in: %s", bad[i][3], r.err);
    g_assert_cmpstr(r.out, ==, "");
    tpt_run_clear(&r);
  }
  /* --run-top's settings without it; profile's two ways of naming the sizes at once */
  r = tpt_run((const char *const[]){ "plan", "--model", "mlp", "--profile", path, "--batch", "8", "--run-repetitions",
                                     "2", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "--run-repetitions: sets --run-top's runs; give --run-top K too"));
  tpt_run_clear(&r);
  r = tpt_run((const char *const[]){ "plan", "--model", "mlp", "--profile", path, "--batch", "8", "--transport", "mpi",
                                     NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "--transport: sets --run-top's runs; give --run-top K too"));
  tpt_run_clear(&r);
  r = tpt_run((const char *const[]){ "profile", "--model", "mlp", "-b", "8", "--micro-batch-sizes", "2", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "--batch and --micro-batch-sizes: give one"));
  g_assert_cmpstr(r.out, ==, "");
  tpt_run_clear(&r);
  tpt_tmp_remove(path);
}

/* ---- under mpirun --------------------------------------------------------------------------------------- */

/* mpirun -np 3 profile --transport mpi: one file (rank 0's), links of the three ranks (the middle rank
 * in two pairs, one after the other), the message sizes from the model's largest activations of a
 * micro-batch down; outside mpirun or with one rank: refused; a bad flag: one line for the job. */
static void test_profile_mpi(void)
{
  if (!tpt_mpi_train_usable(bin))
    return;
  g_autofree char *path = tpt_tmp_path("mlp-mpi.profile");
  g_autofree char *line = g_strdup_printf("--model mlp --micro-batch-sizes 2,4 -r 1 --transport mpi -o %s", path);
  TptMpiRun r = tpt_mpi_run(3, NULL, bin, (const char *const[]){ "profile", NULL }, line);
  if (r.status != 0)
    g_error("status %d:\n%s", r.status, r.err);
  g_assert_cmpint(tpt_count(r.err, "profiled "), ==, 1);
  g_assert_cmpint(tpt_count(r.err, "links between 3 MPI ranks"), ==, 1);
  tpt_mpi_run_clear(&r);
  GError *err = NULL;
  g_autoptr(TpProfile) p = tp_profile_load(path, &err);
  g_assert_no_error(err);
  const TpProfileLinks *l = &p->links;
  g_assert_cmpstr(l->transport, ==, "mpi");
  g_assert_cmpint(l->ranks, ==, 3);
  g_assert_cmpint(l->n, >=, 2);
  /* the largest message: 4 samples of the widest activation passed between two layers, in bytes */
  g_autoptr(TpModel) m = tpt_model("mlp");
  long long widest = 0;
  for (int i = 0; i + 1 < tp_model_n_layers(m); i++)
    widest = MAX(widest, MAX(tp_model_layer(m, i)->out_elems, tp_model_layer(m, i + 1)->in_elems));
  g_assert_cmpfloat(l->bytes[l->n - 1], ==, ceil(4.0 * 4 * (double)widest / 8) * 8);
  for (int i = 0; i < l->n; i++)
    g_assert_cmpfloat(l->one_way[i], >, 0);
  g_assert_cmpfloat(l->latency, <, 0.01);
  g_assert_true(l->bandwidth == 0 || l->bandwidth > 1e6);
  /* three ranks on one host: the shared-memory eager limit of the job (Open MPI's 4096 unless set) */
  g_assert_cmpfloat(l->eager_limit, >, 0);
  /* simulate takes them */
  TptRun s = tpt_run((const char *const[]){ "simulate", "-w", "2", "-n", "2", "--batch", "8", "--model", "mlp",
                                            "--profile", path, NULL });
  g_assert_cmpint(s.status, ==, 0);
  g_assert_nonnull(strstr(s.out, "links measured by MPI"));
  tpt_run_clear(&s);
  /* outside mpirun; one rank */
  r = tpt_mpi_run(0, NULL, bin, (const char *const[]){ "profile", NULL }, line);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "--transport mpi: start it under mpirun"));
  tpt_mpi_run_clear(&r);
  r = tpt_mpi_run(1, NULL, bin, (const char *const[]){ "profile", NULL }, line);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "one rank has no links to measure"));
  tpt_mpi_run_clear(&r);
  /* a bad flag: every rank refuses it before MPI starts; the job prints rank 0's line once */
  r = tpt_mpi_run(2, NULL, bin, (const char *const[]){ "profile", NULL }, "--model mlp --transport mpi -r 0");
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(tpt_count(r.err, "timeprest profile: --repetitions"), ==, 1);
  tpt_mpi_run_clear(&r);
  tpt_tmp_remove(path);
}

/* A launcher that hangs (and its children) is killed after its bound: plan ends in one line, with no
 * process left (it waited forever). */
static void test_run_top_hung_launcher(void)
{
  if (!tpt_mpi_train_usable(bin))
    return;
  g_autofree char *path = mlp_profile();
  gint64 t0 = g_get_monotonic_time();
  TptRun r = tpt_run((const char *const[]){ "plan", "--model", "mlp", "--profile", path, "--batch", "2", "-w", "1", "-n",
                                            "1", "--presets", "gpipe", "--run-top", "1", "--run-repetitions", "1",
                                            "--run-mini-batches", "5", "--transport", "mpi", "--launch-timeout", "3",
                                            "--launcher", "sh -c 'sleep 1000 & sleep 1000' {W}", NULL });
  double took = (double)(g_get_monotonic_time() - t0) / 1e6;
  g_assert_cmpint(r.status, ==, 1);
  /* 3 s to start and 20 times the predicted run: more than 3 s where the profile was slow (a loaded
   * machine, a sanitizer's build) */
  g_assert_nonnull(strstr(r.err, "did not end within "));
  g_assert_nonnull(strstr(r.err, " s (killed; a launcher that waits?)"));
  g_assert_cmpfloat(took, <, 60);
  tpt_run_clear(&r);
  tpt_tmp_remove(path);
}

/* plan --run-top --transport mpi: each plan trained under the launcher with W ranks (a launcher that
 * logs its W, then starts mpirun); a launcher that fails is the plan's failure, named. */
static void test_run_top_mpi(void)
{
  if (!tpt_mpi_train_usable(bin))
    return;
  g_autofree char *path = mlp_profile();
  g_autofree char *log = tpt_tmp_path("launcher.log");
  g_autofree char *launcher = g_strdup_printf("sh -c 'echo {W} >> %s; exec timeout 60 mpirun --oversubscribe -np {W} "
                                              "\"$@\"' sh", log);
  g_autofree char *line = g_strdup_printf("--model mlp --profile %s --batch 8 -w 2 -n 2-4 --presets gpipe,1f1b "
                                          "--run-top 2 --run-repetitions 1 --run-mini-batches 5 --transport mpi "
                                          "--format json", path);
  g_autoptr(GPtrArray) argv = tpt_mpi_command(0, bin, (const char *const[]){ "plan", "--launcher", launcher, NULL },
                                              line);
  g_auto(GStrv) envp = tpt_mpi_env(NULL, NULL);
  TptMpiRun r = tpt_mpi_spawn(argv, envp);
  if (r.status != 0)
    g_error("status %d:\n%s", r.status, r.err);
  g_assert_cmpint(tpt_count(r.err, ", MPI)"), ==, 2);
  g_autofree char *json = g_strdup(r.out);
  tpt_mpi_run_clear(&r);

  g_autoptr(JsonParser) parser = json_parser_new();
  GError *err = NULL;
  g_assert_true(json_parser_load_from_data(parser, json, -1, &err));
  JsonArray *plans = json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)), "plans");
  for (guint i = 0; i < 2; i++) {
    JsonObject *pl = json_array_get_object_element(plans, i);
    g_assert_cmpint(json_object_get_int_member(pl, "workers"), ==, 2);
    g_assert_cmpfloat(json_object_get_double_member(member(pl, "measured"), "time_per_mini_batch"), >, 0);
  }
  /* the table says the prediction's links were free (this profile has none measured) */
  g_autofree char *line1 = g_strdup_printf("--model mlp --profile %s --batch 8 -w 2 -n 2-4 --presets gpipe --run-top 1 "
                                           "--run-repetitions 1 --run-mini-batches 5 --transport mpi", path);
  g_autoptr(GPtrArray) argv1 = tpt_mpi_command(0, bin, (const char *const[]){ "plan", "--launcher", launcher, NULL },
                                               line1);
  r = tpt_mpi_spawn(argv1, envp);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "one MPI rank per stage"));
  g_assert_nonnull(strstr(r.out, "note: the predictions count the links as free"));
  tpt_mpi_run_clear(&r);
  /* a launcher that fails */
  g_autoptr(GPtrArray) argv2 = tpt_mpi_command(0, bin, (const char *const[]){ "plan", "--launcher", "false {W}", NULL },
                                               line);
  r = tpt_mpi_spawn(argv2, envp);
  g_assert_cmpint(r.status, ==, 1);
  g_assert_nonnull(strstr(r.err, "--run-top: training "));
  g_assert_cmpstr(r.out, ==, "");
  tpt_mpi_run_clear(&r);
  g_autofree char *logged = NULL; /* the runs that went through the logging launcher: 2 + 1 */
  g_assert_true(g_file_get_contents(log, &logged, NULL, NULL));
  g_assert_cmpstr(logged, ==, "2\n2\n2\n");
  tpt_tmp_remove(log);
  tpt_tmp_remove(path);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  bin = g_getenv("TP_BIN");
  if (!bin)
    bin = "./timeprest";
  g_test_add_func("/plan-run/median", test_median);
  g_test_add_func("/plan-run/fit", test_fit);
  g_test_add_func("/plan-run/links-file", test_links_file);
  g_test_add_func("/plan-run/links-cost", test_links_cost);
  g_test_add_func("/plan-run/run-top-interleaved", test_run_top_interleaved);
  g_test_add_func("/plan-run/tau-ties", test_tau_ties);
  g_test_add_func("/plan-run/profile-mpi", test_profile_mpi);
  g_test_add_func("/plan-run/run-top-mpi", test_run_top_mpi);
  g_test_add_func("/plan-run/run-top-hung-launcher", test_run_top_hung_launcher);
  return g_test_run();
}
