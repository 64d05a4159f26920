/* test-plan.c — the plan search (memory limit honoured, Pareto front against a brute-force check,
 * ties, nothing fits, JSON fields, deterministic ranking), through the library and the program.
 * The profile's file is test-profile's. */
#include "tp_plan.h"
#include "tp_costed.h"
#include "tp_test.h"
#include "tp_test_profile.h"

#include <json-glib/json-glib.h>
#include <math.h>

/* ---- the search ---------------------------------------------------------------------------------- */

/* plan's default candidates: every preset train runs (not the split-backward ones) */
static const TpPreset *const *all_presets(int *n)
{
  static const TpPreset *list[64];
  *n = 0;
  for (int i = 0; i < tp_n_presets; i++)
    if (!tp_order_split(tp_presets[i].order) && !tp_order_chunked(tp_presets[i].order))
      list[(*n)++] = &tp_presets[i];
  return list;
}

static TpPlanResult *search(const TpModel *m, const TpProfile *p, double limit, int threads, gboolean no_prune)
{
  TpPlanRequest r = { .model = m, .profile = p, .batch = 64, .w0 = 1, .w1 = 4, .n0 = 1, .n1 = 64,
                      .memory_limit = limit, .threads = threads, .no_prune = no_prune };
  r.presets = all_presets(&r.n_presets);
  GError *err = NULL;
  TpPlanResult *res = tp_plan_search(&r, &err);
  g_assert_no_error(err);
  return res;
}

/* Fused forwards are a plan's choice only where its schedule has them (nf1b), and taken where the
 * simulation says they are faster: the synthetic profile charges each layer call 1 µs, so one
 * forward of the whole mini-batch beats N of its micro-batches by (N - 1) µs per layer. */
static void test_fused_forwards(void)
{
  g_autoptr(TpModel) m = tpt_model("mlp-deep");
  g_autoptr(TpProfile) p = synthetic_profile(m, 64, 2, 1e12);
  TpPlanResult *res = search(m, p, 0, 2, FALSE);
  int fused = 0;
  for (guint i = 0; i < res->all->len; i++) {
    const TpPlan *q = res->all->pdata[i];
    if (q->fused) {
      g_assert_cmpint(q->preset->order, ==, TP_ORDER_NF1B);
      g_assert_cmpint(q->N, >, 1);
      fused++;
    }
  }
  g_assert_cmpint(fused, >, 0);
  tp_plan_result_free(res);
}

static gboolean stashes(const TpPlan *p)
{
  return p->preset->policy == TP_POLICY_STASH || p->preset->policy == TP_POLICY_INTERMEDIATE;
}

/* With a profile the stages share the machine's memory: a plan fits when its stages' peaks together
 * are within the limit (each stage had the whole limit, and plans holding several times it fitted). */
static double total_peak(const TpPlan *q)
{
  double t = 0;
  for (int s = 0; s < q->W; s++)
    t += q->sim.peak_bytes[s];
  return t;
}

static void test_memory_limit(void)
{
  g_autoptr(TpModel) m = tpt_model("mlp-deep");
  g_autoptr(TpProfile) p = synthetic_profile(m, 64, 4, 1e12);
  g_autoptr(TpPlanResult) all = search(m, p, 0, 2, TRUE);
  /* the smallest total of any stashing plan: a limit just below it excludes them all */
  double stash_min = INFINITY, other_min = INFINITY;
  for (guint i = 0; i < all->ranked->len; i++) {
    const TpPlan *q = all->ranked->pdata[i];
    if (stashes(q))
      stash_min = MIN(stash_min, total_peak(q));
    else
      other_min = MIN(other_min, total_peak(q));
  }
  g_assert_cmpfloat(other_min, <, stash_min);
  double limit = 0.5 * (other_min + stash_min);
  g_autoptr(TpPlanResult) res = search(m, p, limit, 2, FALSE);
  g_assert_cmpuint(res->ranked->len, >, 0);
  g_assert_cmpint(res->n_over_memory, >, 0);
  for (guint i = 0; i < res->ranked->len; i++) {
    const TpPlan *q = res->ranked->pdata[i];
    g_assert_false(stashes(q));
    g_assert_cmpfloat(total_peak(q), <=, limit); /* one machine's memory, shared by the stages */
  }
}

/* The front: no listed plan beats a front member in both; every fitting plan off the front is beaten
 * by one on it — against every candidate simulated (no pruning). */
static TpPlanResult *search_cluster(const TpModel *m, const char *cluster, int w1, int n1, double limit,
                                    TpPlanRecompute rc, gboolean no_prune)
{
  GError *err = NULL;
  g_autoptr(TpCluster) c = tp_cluster_load(cluster, &err);
  g_assert_no_error(err);
  TpPlanRequest r = { .model = m, .cluster = c, .batch = 128, .w0 = 1, .w1 = w1, .n0 = 1, .n1 = n1, .threads = 2,
                      .recompute = rc, .memory_limit = limit, .no_prune = no_prune };
  r.presets = all_presets(&r.n_presets);
  TpPlanResult *res = tp_plan_search(&r, &err);
  g_assert_no_error(err);
  return res;
}

/* Times equal to 9 significant digits tie (sums in another order), and the smaller peak ranks first
 * and alone is on the front; a difference in the ninth digit does not tie; a slower plan with a
 * faster one's peak is not on the front, nor is the second of two equal plans. */
static void test_ties(void)
{
  TpPlan a = { .rank_time = 1.1878e-3, .sim.peak = 4.842e8, .index = 0 };
  TpPlan b = { .rank_time = 1.1878e-3 * (1 + 1e-12), .sim.peak = 4.79e8, .index = 1 };
  TpPlan c = { .rank_time = 1.1878e-3 * (1 + 1e-8), .sim.peak = 1e8, .index = 2 };
  g_assert_true(tp_plan_same_time(&a, &b));
  g_assert_false(tp_plan_same_time(&a, &c));
  g_assert_cmpint(tp_plan_compare(&b, &a), <, 0);
  g_assert_cmpint(tp_plan_compare(&a, &c), <, 0);
  TpPlan d = { .rank_time = 2e-3, .sim.peak = 1e8, .index = 3 }, e = { .rank_time = 2e-3, .sim.peak = 1e8, .index = 4 };
  g_autoptr(GPtrArray) all = g_ptr_array_new();
  g_ptr_array_add(all, &e), g_ptr_array_add(all, &d);
  g_ptr_array_add(all, &a), g_ptr_array_add(all, &b), g_ptr_array_add(all, &c);
  g_autoptr(GPtrArray) front = tp_plan_pareto(all);
  g_assert_cmpuint(front->len, ==, 2);
  g_assert_true(front->pdata[0] == &b);
  g_assert_true(front->pdata[1] == &c);
  /* alone, the equal pair keeps its first in ranking */
  g_autoptr(GPtrArray) pair = g_ptr_array_new();
  g_ptr_array_add(pair, &e), g_ptr_array_add(pair, &d);
  g_autoptr(GPtrArray) one = tp_plan_pareto(pair);
  g_assert_cmpuint(one->len, ==, 1);
  g_assert_true(one->pdata[0] == &d);
}

static void test_pareto_brute(void)
{
  /* VGG-16 on cluster C: a front from fast and large to slow and small */
  g_autoptr(TpModel) m = tpt_model("vgg16-imagenet");
  g_autoptr(TpPlanResult) pruned = search_cluster(m, "C", 8, 128, 0, TP_PLAN_RECOMPUTE_NO, FALSE);
  g_autoptr(TpPlanResult) full = search_cluster(m, "C", 8, 128, 0, TP_PLAN_RECOMPUTE_NO, TRUE);
  g_assert_cmpint(pruned->n_dominated, >, 0); /* the pruning is exercised */
  g_assert_cmpint(full->n_dominated, ==, 0);
  /* brute force over every fitting plan: not strictly beaten, first of its (time, peak) ties */
  GPtrArray *fit = full->ranked;
  g_autoptr(GPtrArray) front = g_ptr_array_new();
  for (guint i = 0; i < fit->len; i++) {
    const TpPlan *a = fit->pdata[i];
    gboolean beaten = FALSE;
    for (guint j = 0; j < fit->len && !beaten; j++) {
      const TpPlan *b = fit->pdata[j];
      gboolean same = tp_plan_same_time(a, b); /* one batch: rank_time is t_minibatch */
      gboolean le = (same || b->sim.t_minibatch < a->sim.t_minibatch) && b->sim.peak <= a->sim.peak;
      gboolean lt = (!same && b->sim.t_minibatch < a->sim.t_minibatch) || b->sim.peak < a->sim.peak;
      beaten = j != i && le && (lt || j < i);
    }
    if (!beaten)
      g_ptr_array_add(front, (gpointer)a);
  }
  g_assert_cmpuint(front->len, >, 5);
  g_assert_cmpuint(pruned->pareto->len, ==, front->len);
  g_assert_cmpuint(full->pareto->len, ==, front->len);
  for (guint i = 0; i < front->len; i++) {
    const TpPlan *a = front->pdata[i], *b = pruned->pareto->pdata[i];
    g_assert_true(a->preset == b->preset);
    g_assert_cmpint(a->W, ==, b->W);
    g_assert_cmpint(a->N, ==, b->N);
    g_assert_cmpfloat(a->sim.t_minibatch, ==, b->sim.t_minibatch);
  }
  /* pruning keeps the top of the ranking */
  for (guint i = 0; i < 5; i++) {
    const TpPlan *a = full->ranked->pdata[i], *b = pruned->ranked->pdata[i];
    g_assert_true(a->preset == b->preset && a->W == b->W && a->N == b->N);
  }
}

/* A plan whose fastest split is over the limit is split under the memory instead: VGG-16's nf1b
 * plans on two or three Quadros fit 12 GiB with fewer layers on stage 1. */
static void test_split_under_memory(void)
{
  g_autoptr(TpModel) m = tpt_model("vgg16-imagenet");
  double limit = 12.0 * (1 << 30);
  g_autoptr(TpPlanResult) uncapped = search_cluster(m, "C", 3, 4, 0, TP_PLAN_RECOMPUTE_NO, FALSE);
  g_autoptr(TpPlanResult) capped = search_cluster(m, "C", 3, 4, limit, TP_PLAN_RECOMPUTE_NO, FALSE);
  int moved = 0;
  for (guint i = 0; i < capped->ranked->len; i++) {
    const TpPlan *p = capped->ranked->pdata[i];
    g_assert_cmpfloat(p->sim.peak, <=, limit);
    g_autofree char *split = tp_plan_split_text(p);
    for (guint j = 0; j < uncapped->all->len; j++) {
      const TpPlan *q = uncapped->all->pdata[j];
      g_autofree char *fast = tp_plan_split_text(q);
      if (q->simulated && q->preset == p->preset && q->W == p->W && q->N == p->N && strcmp(fast, split) != 0) {
        g_assert_cmpfloat(q->sim.peak, >, limit); /* split again only because the fastest split is over */
        g_assert_cmpfloat(p->sim.t_minibatch, >=, q->sim.t_minibatch);
        moved++;
      }
    }
  }
  g_assert_cmpint(moved, >, 0);
}

static void test_nothing_fits(void)
{
  g_autoptr(TpModel) m = tpt_model("mlp-deep");
  g_autoptr(TpProfile) p = synthetic_profile(m, 64, 2, 1e12);
  g_autoptr(TpPlanResult) res = search(m, p, 1e6, 2, FALSE);
  g_assert_cmpuint(res->ranked->len, ==, 0);
  g_assert_nonnull(res->smallest);
  g_assert_cmpfloat(res->smallest->sim.peak, >, 1e6);
  g_assert_cmpint(res->n_over_memory, ==, res->n_candidates);
  /* the smallest is the smallest of all simulated */
  for (guint i = 0; i < res->all->len; i++) {
    const TpPlan *q = res->all->pdata[i];
    g_assert_true(q->simulated);
    g_assert_cmpfloat(q->sim.peak, >=, res->smallest->sim.peak);
  }
  TptRun r = tpt_run((const char *const[]){ "plan", "--model", "vgg16-cifar100", "--cluster", "C", "--batch", "64",
                                            "-w", "1-3", "-n", "1-4", "--memory-limit", "1M", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "nothing fits"));
  g_assert_nonnull(strstr(r.err, "dominated by its weights"));
  g_assert_cmpstr(r.out, ==, "");
  g_assert_null(strstr(r.err, " D="));
  tpt_run_clear(&r);
  /* a search over replicas and tensor ranks names the smallest peak's D and T: its peak is theirs */
  r = tpt_run((const char *const[]){ "plan", "--model", "gpt2-124m", "--cluster", "dgx-h100", "--batch", "32",
                                     "--devices", "4", "-n", "4-8", "--memory-limit", "50M", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_test_message("%s", r.err);
  g_assert_nonnull(strstr(r.err, "nothing fits"));
  g_assert_nonnull(strstr(r.err, " D="));
  g_assert_nonnull(strstr(r.err, " T="));
  tpt_run_clear(&r);
  /* 8 stages on cluster C's 4 devices, two on each: the peak's device against that device's limit, not
   * against one stage's half of it */
  r = tpt_run((const char *const[]){ "plan", "--model", "vgg16-cifar100", "--cluster", "C", "--batch", "128", "-s",
                                     "1f1b", "-w", "8-8", "-n", "128-128", "--memory-limit", "1G", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "against 1.074 GB (1f1b W=8 N=128, stage 7)"));
  tpt_run_clear(&r);
  /* every candidate refused by the simulation (the process's own memory limit): one of them says why */
  r = tpt_run_shell("TP_MEMORY_LIMIT=6M exec \"$TP\" plan --model cnn --cluster A --batch 8 -w 1-2 -n 1-2");
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  g_assert_nonnull(strstr(r.err, "no candidate could be simulated"));
  g_assert_nonnull(strstr(r.err, "gpipe W=1 N=1: "));
  g_assert_nonnull(strstr(r.err, "allowed by TP_MEMORY_LIMIT"));
  tpt_run_clear(&r);
  /* less than the search itself holds: refused before it starts (it died in GLib's allocator) */
  r = tpt_run_shell("TP_MEMORY_LIMIT=2M exec \"$TP\" plan --model cnn --cluster A --batch 8 -w 1-2 -n 1-2");
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  g_assert_nonnull(strstr(r.err, "planning needs about 4.19 MB of memory"));
  tpt_run_clear(&r);
  /* a search whose exact splits alone would take hours: refused up front */
  g_autoptr(GString) deep = g_string_new("input 1 4 4\nflatten\n");
  for (int i = 0; i < 997; i++)
    g_string_append(deep, "linear 4\n");
  g_string_append(deep, "softmax_ce\n");
  g_autofree char *path = tpt_tmp_path("deep.model");
  g_assert_true(g_file_set_contents(path, deep->str, -1, NULL));
  r = tpt_run((const char *const[]){ "plan", "--model", path, "--cluster", "h200", "--batch", "1", "-w", "1-1024", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "the search splits 999 layers"));
  g_assert_nonnull(strstr(r.err, "narrow -w, -n or --presets"));
  tpt_run_clear(&r);
  tpt_tmp_remove(path);
}

static void test_json(void)
{
  TptRun r = tpt_run((const char *const[]){ "plan", "--model", "vgg16-cifar100", "--cluster", "C", "--batch", "64",
                                            "-w", "1-4", "-n", "1-8", "--memory-limit", "20G", "--optimizer", "adamw",
                                            "--format", "json", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_autoptr(JsonParser) parser = json_parser_new();
  GError *err = NULL;
  g_assert_true(json_parser_load_from_data(parser, r.out, -1, &err));
  g_assert_no_error(err);
  JsonObject *o = json_node_get_object(json_parser_get_root(parser));
  /* the limit to the byte, and what the plans were searched with */
  g_assert_cmpint(json_object_get_int_member(o, "memory_limit"), ==, 20LL << 30);
  g_assert_cmpstr(json_object_get_string_member(o, "optimizer"), ==, "adamw");
  g_assert_false(json_object_get_boolean_member(o, "overlap_allreduce"));
  g_assert_false(json_object_get_boolean_member(o, "sequence_parallel"));
  JsonArray *plans = json_object_get_array_member(o, "plans");
  g_assert_cmpuint(json_array_get_length(plans), >, 1);
  g_assert_cmpint(json_object_get_int_member(o, "candidates"), >=, (gint64)json_array_get_length(plans));
  double prev = 0;
  for (guint i = 0; i < json_array_get_length(plans); i++) {
    JsonObject *p = json_array_get_object_element(plans, i);
    const char *keys[] = { "preset", "workers", "micro_batches", "split", "recompute", "v_steady",
                           "max_version_mismatch", "predicted" };
    for (size_t k = 0; k < G_N_ELEMENTS(keys); k++)
      g_assert_true(json_object_has_member(p, keys[k]));
    g_assert_nonnull(tp_preset_find(json_object_get_string_member(p, "preset")));
    g_assert_false(json_object_get_boolean_member(p, "recompute"));
    int W = (int)json_object_get_int_member(p, "workers");
    JsonArray *split = json_object_get_array_member(p, "split");
    g_assert_cmpuint(json_array_get_length(split), ==, W);
    JsonObject *pr = json_object_get_object_member(p, "predicted");
    double t = json_object_get_double_member(pr, "time_per_mini_batch");
    g_assert_cmpfloat(t, >=, prev); /* best first */
    prev = t;
    g_assert_cmpfloat(json_object_get_double_member(pr, "samples_per_second"), >, 0);
    g_assert_cmpuint(json_array_get_length(json_object_get_array_member(pr, "peak_bytes")), ==, W);
    g_assert_cmpint(64 % json_object_get_int_member(p, "micro_batches"), ==, 0);
  }
  tpt_run_clear(&r);
}

/* Recomputation as a candidate dimension: a limit between a plan's peak with and without it lists the
 * recomputing plan within the limit and drops the other; the bounds hold for recomputing plans and
 * their time bound counts the forward run again; pruning keeps the ranking's top and the front. */
/* A pruned search keeps the unpruned one's Pareto front and the top five of its ranking. */
static void assert_same_top(const TpPlanResult *pruned, const TpPlanResult *full)
{
  g_assert_cmpuint(pruned->pareto->len, ==, full->pareto->len);
  for (guint i = 0; i < full->pareto->len; i++)
    g_assert_cmpint(((const TpPlan *)pruned->pareto->pdata[i])->index, ==, ((const TpPlan *)full->pareto->pdata[i])->index);
  for (guint i = 0; i < 5; i++)
    g_assert_cmpint(((const TpPlan *)pruned->ranked->pdata[i])->index, ==, ((const TpPlan *)full->ranked->pdata[i])->index);
}

/* Memory before simulating: the micro-batches an order holds at a stage's first backward (1F1B's
 * W - s of them, GPipe's N, one where the order is fixed on the costs). */
static void test_held_activations(void)
{
  const TpPreset *f = tp_preset_find("1f1b"), *g = tp_preset_find("gpipe"), *t = tp_preset_find("timeprest");
  int held[8];
  for (int W = 1; W <= 6; W++)
    for (int N = 1; N <= 8; N++) {
      tp_plan_held_acts(f, W, N, held);
      for (int s = 0; s < W; s++)
        g_assert_cmpint(held[s], ==, MIN(W - s, N));
      tp_plan_held_acts(g, W, N, held);
      for (int s = 0; s < W; s++)
        g_assert_cmpint(held[s], ==, N);
      tp_plan_held_acts(t, W, N, held);
      for (int s = 0; s < W; s++)
        g_assert_cmpint(held[s], ==, 1);
    }
}

/* Whether p on the split `counts` fits its devices: simulated, every stage's peak within its memory. */
static gboolean split_fits(const TpModel *m, const TpCluster *cl, const TpPlan *p, const int *counts, double limit)
{
  GError *err = NULL;
  g_autoptr(TpAnalytic) a = tp_analytic_new_on(m, cl, NULL, p->W, p->N, p->batch, TRUE, &err);
  g_assert_no_error(err);
  a->cap = limit, a->recompute = p->recompute;
  g_assert_true(tp_analytic_split(a, counts, NULL, NULL, &err));
  g_autoptr(TpCost) c = tp_analytic_cost(a);
  g_autoptr(TpSchedule) s = tp_schedule_generate_costed_rc(p->preset->order, p->preset->policy, p->W, p->N,
                                                           tp_default_mini_batches(p->W), p->recompute, c, NULL, &err);
  g_assert_no_error(err);
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  g_autoptr(TpMetrics) mm = tp_metrics_compute(sim);
  for (int st = 0; st < p->W; st++)
    if (mm->stage[st].peak_bytes > c->capacity[st])
      return FALSE;
  return TRUE;
}

/* Whether any split of p's L layers (stages s.. with `left` layers to give) fits. */
static gboolean some_split_fits(const TpModel *m, const TpCluster *cl, const TpPlan *p, int *counts, int s, int left,
                                double limit)
{
  if (s == p->W - 1) {
    counts[s] = left;
    return split_fits(m, cl, p, counts, limit);
  }
  for (counts[s] = 1; counts[s] <= left - (p->W - 1 - s); counts[s]++)
    if (some_split_fits(m, cl, p, counts, s + 1, left - counts[s], limit))
      return TRUE;
  return FALSE;
}

/* Candidates dropped because no split of them may fit, under limits at the peaks of plans that fit
 * (each such plan just within its limit): over the limit in the unpruned search too, and every
 * split of each simulated over its devices' memory (brute force); what fits is listed the same. */
/* Every plan that fits is listed as the unpruned search lists it, unless a faster one dominated it;
 * the same front, the top choice first. */
static void lists_as_unpruned(const TpPlanResult *pruned, const TpPlanResult *full)
{
  guint listed = 0;
  for (guint i = 0; i < full->ranked->len; i++) {
    const TpPlan *q = full->ranked->pdata[i], *p = pruned->all->pdata[q->index];
    g_assert_true(p->status == TP_PLAN_DOMINATED || p->status == TP_PLAN_FITS);
    if (p->status != TP_PLAN_FITS)
      continue;
    g_assert_cmpfloat(p->sim.t_minibatch, ==, q->sim.t_minibatch);
    g_assert_cmpfloat(p->sim.peak, ==, q->sim.peak);
    listed++;
  }
  g_assert_cmpuint(listed, ==, pruned->ranked->len);
  g_assert_cmpuint(pruned->pareto->len, ==, full->pareto->len);
  for (guint i = 0; i < full->pareto->len; i++)
    g_assert_cmpint(((const TpPlan *)pruned->pareto->pdata[i])->index, ==, ((const TpPlan *)full->pareto->pdata[i])->index);
}

static void check_may_fit(const TpModel *m, const TpCluster *cl, double limit, int dropped[2], int *pending)
{
  g_autoptr(TpPlanResult) pruned = search_cluster(m, "C", 3, 8, limit, TP_PLAN_RECOMPUTE_BOTH, FALSE);
  g_autoptr(TpPlanResult) full = search_cluster(m, "C", 3, 8, limit, TP_PLAN_RECOMPUTE_BOTH, TRUE);
  for (guint i = 0; i < pruned->all->len; i++) {
    const TpPlan *p = pruned->all->pdata[i], *q = full->all->pdata[i];
    if (p->pending) { /* over the limit without its details: so it is in full */
      g_assert_cmpint(q->status, ==, TP_PLAN_OVER_MEMORY);
      (*pending)++;
    }
    if (p->may_fit)
      continue;
    g_assert_cmpint(p->status, !=, TP_PLAN_FITS);
    g_assert_cmpint(q->status, ==, TP_PLAN_OVER_MEMORY);
    int counts[8];
    g_assert_false(some_split_fits(m, cl, p, counts, 0, tp_model_n_layers(m), limit));
    dropped[p->recompute]++;
  }
  lists_as_unpruned(pruned, full);
}

static void test_may_fit(void)
{
  g_autoptr(TpModel) m = tpt_model("vgg16-imagenet");
  GError *err = NULL;
  g_autoptr(TpCluster) cl = tp_cluster_load("C", &err);
  g_assert_no_error(err);
  g_autoptr(TpPlanResult) open = search_cluster(m, "C", 3, 8, 0, TP_PLAN_RECOMPUTE_BOTH, TRUE);
  g_assert_cmpuint(open->ranked->len, >, 20);
  int dropped[2] = { 0, 0 }, pending = 0; /* without and with recomputation */
  for (guint k = 0; k < open->ranked->len; k += 8)
    check_may_fit(m, cl, ((const TpPlan *)open->ranked->pdata[k])->sim.peak, dropped, &pending);
  g_assert_cmpint(dropped[0], >, 0);
  g_assert_cmpint(dropped[1], >, 0);
  g_assert_cmpint(pending, >, 0);
  /* nothing fits (and plans over the limit were left without their details till then): the smallest
   * peak named and the counts are the unpruned search's */
  double least = INFINITY;
  for (guint k = 0; k < open->ranked->len; k++)
    if (!((const TpPlan *)open->ranked->pdata[k])->recompute)
      least = MIN(least, ((const TpPlan *)open->ranked->pdata[k])->sim.peak);
  g_autoptr(TpPlanResult) pruned = search_cluster(m, "C", 3, 8, 0.86 * least, TP_PLAN_RECOMPUTE_NO, FALSE);
  g_autoptr(TpPlanResult) full = search_cluster(m, "C", 3, 8, 0.86 * least, TP_PLAN_RECOMPUTE_NO, TRUE);
  g_assert_cmpuint(full->ranked->len, ==, 0);
  g_assert_cmpuint(pruned->ranked->len, ==, 0);
  g_assert_cmpint(pruned->smallest->index, ==, full->smallest->index);
  g_assert_cmpfloat(pruned->smallest->sim.peak, ==, full->smallest->sim.peak);
  g_assert_cmpint(pruned->n_over_memory, ==, full->n_over_memory);
  g_assert_cmpint(pruned->n_simulated, ==, full->n_simulated);
}

/* Stages that share a memory (a profile's machine holds them all): the bound sets their bytes against
 * the whole memory, not one stage's share of it, so that no plan that fits is dropped unsimulated. */
static void test_bound_shared(void)
{
  g_autoptr(TpModel) m = tpt_model("mlp-deep");
  g_autoptr(TpProfile) p = synthetic_profile(m, 64, 2, 1e12);
  g_autoptr(TpPlanResult) open = search(m, p, 0, 2, TRUE);
  g_assert_cmpuint(open->ranked->len, >, 20);
  double limit = ((const TpPlan *)open->ranked->pdata[open->ranked->len / 2])->sim.peak;
  g_autoptr(TpPlanResult) pruned = search(m, p, limit, 2, FALSE);
  g_autoptr(TpPlanResult) full = search(m, p, limit, 2, TRUE);
  g_assert_cmpuint(full->ranked->len, >, 0);
  lists_as_unpruned(pruned, full);
}

static TpPlanResult *search_rc(const TpModel *m, const TpProfile *p, const char *presets, int w1, int n0, int n1,
                               TpPlanRecompute rc, double limit, gboolean no_prune)
{
  g_auto(GStrv) names = g_strsplit(presets, ",", -1);
  const TpPreset *list[64];
  int n = 0;
  if (!*presets)
    memcpy(list, all_presets(&n), sizeof list);
  for (int i = 0; names[i] && *presets; i++)
    g_assert_nonnull(list[n++] = tp_preset_find(names[i]));
  TpPlanRequest r = { .model = m, .profile = p, .batch = 64, .w0 = 1, .w1 = w1, .n0 = n0, .n1 = n1, .presets = list,
                      .n_presets = n, .recompute = rc, .memory_limit = limit, .threads = 2, .no_prune = no_prune };
  GError *err = NULL;
  TpPlanResult *res = tp_plan_search(&r, &err);
  g_assert_no_error(err);
  return res;
}

static const TpPlan *find_plan(const TpPlanResult *res, const char *preset, int W, int N, gboolean rc)
{
  for (guint i = 0; i < res->all->len; i++) {
    const TpPlan *p = res->all->pdata[i];
    if (strcmp(p->preset->name, preset) == 0 && p->W == W && p->N == N && p->recompute == rc)
      return p;
  }
  return NULL;
}

static void test_recompute(void)
{
  g_autoptr(TpModel) m = tpt_model("mlp-deep");
  g_autoptr(TpProfile) p = synthetic_profile(m, 64, 4, 1e12);
  /* GPipe on one stage with 8 micro-batches: without recomputation it stores every layer's
   * activations of the mini-batch, with it the inputs and one micro-batch's */
  g_autoptr(TpPlanResult) both = search_rc(m, p, "gpipe", 1, 8, 8, TP_PLAN_RECOMPUTE_BOTH, 0, TRUE);
  g_assert_cmpint(both->n_candidates, ==, 2);
  const TpPlan *plain = find_plan(both, "gpipe", 1, 8, FALSE), *rc = find_plan(both, "gpipe", 1, 8, TRUE);
  g_assert_nonnull(plain);
  g_assert_nonnull(rc);
  g_assert_cmpfloat(rc->sim.peak, <, plain->sim.peak);
  g_assert_cmpfloat(rc->sim.t_minibatch, >, plain->sim.t_minibatch);     /* the forward again */
  g_assert_cmpfloat(rc->t_bound, >, 1.2 * plain->t_bound);       /* counted by the bound */
  double limit = 0.5 * (rc->sim.peak + plain->sim.peak);
  g_autoptr(TpPlanResult) none = search_rc(m, p, "gpipe", 1, 8, 8, TP_PLAN_RECOMPUTE_NO, limit, FALSE);
  g_assert_cmpuint(none->ranked->len, ==, 0); /* the limit excludes the plan without recomputation */
  g_autoptr(TpPlanResult) fit = search_rc(m, p, "gpipe", 1, 8, 8, TP_PLAN_RECOMPUTE_BOTH, limit, FALSE);
  g_assert_cmpuint(fit->ranked->len, ==, 1);
  const TpPlan *listed = fit->ranked->pdata[0];
  g_assert_true(listed->recompute);
  g_assert_cmpfloat(listed->sim.peak, <=, limit);
  g_assert_cmpint(fit->n_over_memory, ==, 1);
  g_autoptr(TpPlanResult) yes = search_rc(m, p, "gpipe", 1, 8, 8, TP_PLAN_RECOMPUTE_YES, limit, FALSE);
  g_assert_cmpint(yes->n_candidates, ==, 1);
  g_assert_cmpuint(yes->ranked->len, ==, 1);
  /* every preset, W 1-4, N | 64, both ways: the bounds hold for every plan simulated (the time bound
   * within the pruning margin, as the steady window's edges may fall a little below it) */
  g_autoptr(TpPlanResult) full = search_rc(m, p, "", 4, 1, 64, TP_PLAN_RECOMPUTE_BOTH, 0, TRUE);
  g_autoptr(TpPlanResult) pruned = search_rc(m, p, "", 4, 1, 64, TP_PLAN_RECOMPUTE_BOTH, 0, FALSE);
  int checked = 0;
  for (guint i = 0; i < full->all->len; i++) {
    const TpPlan *q = full->all->pdata[i];
    if (!q->simulated || !q->recompute)
      continue;
    g_assert_cmpfloat(q->sim.peak, >=, q->mem_bound);
    g_assert_cmpfloat(q->sim.t_minibatch, >=, 0.9 * q->t_bound);
    const TpPlan *twin = find_plan(full, q->preset->name, q->W, q->N, FALSE);
    g_assert_cmpfloat(q->t_bound, >, twin->t_bound);
    checked++;
  }
  g_assert_cmpint(checked, >, 50);
  g_assert_cmpint(pruned->n_dominated, >, 0);
  assert_same_top(pruned, full);
  /* through the program: the column, the JSON field, a bad value */
  TptRun r = tpt_run((const char *const[]){ "plan", "--model", "vgg16-cifar100", "--cluster", "C", "--batch", "64",
                                            "-w", "1-2", "-n", "1-4", "--presets", "gpipe", "--recompute", "both",
                                            "--show", "100", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "x recompute no/yes)"));
  g_assert_nonnull(strstr(r.out, "   N rc  split"));
  g_assert_nonnull(strstr(r.out, " rc  "));
  tpt_run_clear(&r);
  r = tpt_run((const char *const[]){ "plan", "--model", "vgg16-cifar100", "--cluster", "C", "--batch", "64", "-w",
                                     "1-2", "-n", "1-4", "--presets", "gpipe", "--recompute", "yes", "--format", "json",
                                     NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\"recompute\": true"));
  g_assert_null(strstr(r.out, "\"recompute\": false"));
  tpt_run_clear(&r);
  r = tpt_run((const char *const[]){ "plan", "--model", "mlp", "--cluster", "C", "--recompute", "maybe", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "--recompute"));
  g_assert_cmpstr(r.out, ==, "");
  tpt_run_clear(&r);
}

/* Several batches: candidates over each, ranked by samples/s; the top is the best of the batches
 * searched one by one; pruning (per sample) keeps the ranking's top and the front. */
static TpPlanResult *search_batches(const TpModel *m, const TpProfile *p, const int *batches, int n,
                                    gboolean no_prune)
{
  TpPlanRequest r = { .model = m, .profile = p, .batch = batches[0], .batches = batches, .n_batches = n, .w0 = 1,
                      .w1 = 4, .n0 = 1, .n1 = 64, .threads = 2, .no_prune = no_prune };
  r.presets = all_presets(&r.n_presets);
  GError *err = NULL;
  TpPlanResult *res = tp_plan_search(&r, &err);
  g_assert_no_error(err);
  return res;
}

static void test_batches(void)
{
  g_autoptr(TpModel) m = tpt_model("mlp-deep");
  g_autoptr(TpProfile) p = synthetic_profile(m, 64, 2, 1e12);
  const int both[] = { 8, 64 };
  g_autoptr(TpPlanResult) res = search_batches(m, p, both, 2, FALSE);
  g_autoptr(TpPlanResult) full = search_batches(m, p, both, 2, TRUE);
  g_autoptr(TpPlanResult) small = search_batches(m, p, both, 1, FALSE);
  g_autoptr(TpPlanResult) large = search_batches(m, p, both + 1, 1, FALSE);
  g_assert_cmpint(res->n_candidates, ==, small->n_candidates + large->n_candidates);
  gboolean seen[2] = { FALSE, FALSE };
  for (guint i = 0; i < res->ranked->len; i++) {
    const TpPlan *q = res->ranked->pdata[i];
    g_assert_true(q->batch == 8 || q->batch == 64);
    g_assert_cmpint(q->batch % q->N, ==, 0);
    seen[q->batch == 64] = TRUE;
    assert_close(q->sim.samples_per_second, (double)q->batch / q->sim.t_minibatch);
    if (i > 0) /* by samples/s, not by time per mini-batch (times equal to 9 digits tie) */
      g_assert_cmpfloat(q->sim.samples_per_second, <=,
                        ((const TpPlan *)res->ranked->pdata[i - 1])->sim.samples_per_second * (1 + 1e-8));
  }
  g_assert_true(seen[0] && seen[1]);
  const TpPlan *top = res->ranked->pdata[0], *a = small->ranked->pdata[0], *b = large->ranked->pdata[0];
  const TpPlan *best = a->sim.samples_per_second > b->sim.samples_per_second ? a : b;
  g_assert_cmpfloat(top->sim.samples_per_second, ==, best->sim.samples_per_second);
  /* here the larger batch pipelines better and wins, though its mini-batch takes longer */
  g_assert_cmpint(top->batch, ==, 64);
  g_assert_cmpfloat(top->sim.t_minibatch, >, a->sim.t_minibatch);
  assert_same_top(res, full);
  /* through the program: A-B doubles from A, a list is sorted and each size searched once */
  TptRun r = tpt_run((const char *const[]){ "plan", "--model", "vgg16-cifar100", "--cluster", "C", "--batch",
                                            "256,32-128,64", "-w", "1-2", "-n", "1-2", "--presets", "gpipe", "--format",
                                            "json", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\"batches\": [32, 64, 128, 256], \"ranked_by\": \"samples_per_second\""));
  g_assert_nonnull(strstr(r.out, "\"batch\": 32, "));
  g_assert_nonnull(strstr(r.out, "\"batch\": 256, "));
  tpt_run_clear(&r);
  r = tpt_run((const char *const[]){ "plan", "--model", "vgg16-cifar100", "--cluster", "C", "--batch", "64,128", "-w",
                                     "1-2", "-n", "1-2", "--presets", "gpipe", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "64, 128 samples per mini-batch (ranked by samples/s: the batches differ)"));
  g_assert_nonnull(strstr(r.out, "   N  batch  split"));
  tpt_run_clear(&r);
  const char *bad[] = { "128-64", "0", "64,", "64-x" };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    r = tpt_run((const char *const[]){ "plan", "--model", "mlp", "--cluster", "C", "--batch", bad[i], NULL });
    g_assert_cmpint(r.status, ==, 2);
    g_assert_nonnull(strstr(r.err, "--batch"));
    g_assert_cmpstr(r.out, ==, "");
    tpt_run_clear(&r);
  }
}

static char *ranking(const TpPlanResult *res)
{
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < res->ranked->len; i++) {
    const TpPlan *p = res->ranked->pdata[i];
    g_autofree char *split = tp_plan_split_text(p);
    g_string_append_printf(s, "%s %d %d %s %.17g\n", p->preset->name, p->W, p->N, split, p->sim.t_minibatch);
  }
  return g_string_free(s, FALSE);
}

static void test_deterministic(void)
{
  g_autoptr(TpModel) m = tpt_model("mlp-deep");
  g_autoptr(TpProfile) p = synthetic_profile(m, 64, 2, 1e12);
  g_autoptr(TpPlanResult) a = search(m, p, 0, 1, FALSE);
  g_autoptr(TpPlanResult) b = search(m, p, 0, 2, FALSE);
  g_autoptr(TpPlanResult) c = search(m, p, 0, 3, FALSE);
  g_autoptr(TpPlanResult) d = search(m, p, 0, 64, FALSE); /* more threads than a wave has candidates */
  g_autofree char *ra = ranking(a), *rb = ranking(b), *rc = ranking(c), *rd = ranking(d);
  g_assert_cmpstr(ra, ==, rb);
  g_assert_cmpstr(ra, ==, rc);
  g_assert_cmpstr(ra, ==, rd);
  g_assert_cmpint(a->n_dominated, >, 0); /* pruning at work, and the same whatever the threads */
  g_assert_cmpint(a->n_dominated, ==, d->n_dominated);
  g_assert_cmpint(a->n_simulated, ==, d->n_simulated);
  for (guint i = 1; i < a->ranked->len; i++)
    g_assert_cmpint(tp_plan_compare(a->ranked->pdata[i - 1], a->ranked->pdata[i]), <, 0);
}

static void test_kendall(void)
{
  double x[] = { 1, 2, 3, 4 }, up[] = { 10, 20, 30, 40 }, down[] = { 4, 3, 2, 1 }, one[] = { 1, 3, 2, 4 };
  g_assert_cmpfloat(tp_kendall_tau(x, up, 4), ==, 1);
  g_assert_cmpfloat(tp_kendall_tau(x, down, 4), ==, -1);
  /* one swapped pair of six */
  g_assert_cmpfloat(fabs(tp_kendall_tau(x, one, 4) - 4.0 / 6.0), <, 1e-12);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/fused-forwards", test_fused_forwards);
  g_test_add_func("/plan/memory-limit", test_memory_limit);
  g_test_add_func("/plan/pareto-brute-force", test_pareto_brute);
  g_test_add_func("/plan/ties", test_ties);
  g_test_add_func("/plan/split-under-memory", test_split_under_memory);
  g_test_add_func("/plan/held-activations", test_held_activations);
  g_test_add_func("/plan/may-fit", test_may_fit);
  g_test_add_func("/plan/bound-shared", test_bound_shared);
  g_test_add_func("/plan/nothing-fits", test_nothing_fits);
  g_test_add_func("/plan/json", test_json);
  g_test_add_func("/plan/recompute", test_recompute);
  g_test_add_func("/plan/batches", test_batches);
  g_test_add_func("/plan/deterministic", test_deterministic);
  g_test_add_func("/plan/kendall", test_kendall);
  return g_test_run();
}
