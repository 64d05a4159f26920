/* test-sim-parallel.c — data and tensor parallelism in the cost model: the simulator's all-reduce
 * against the ring formula (computed here), links shared and overlapped in buckets, D = 1 left as it
 * was, the reduction buffer, the cluster layout's links, Korthikanti et al.'s stored activations
 * for tensor-parallel GPT blocks, and plan's search over devices. */
#include "tp_analytic.h"
#include "tp_cost.h"
#include "tp_fit.h"
#include "tp_layout.h"
#include "tp_metrics.h"
#include "tp_model.h"
#include "tp_plan.h"
#include "tp_sim.h"
#include "tp_test.h"

#include <math.h>

/* W=2 stages of 0.01 s forward, 0.02 s backward, 4e8 weight bytes each, and an all-reduce link of
 * 5 µs and 2e10 B/s; extra appends keys to [data_parallel]. */
static TpCost *dp_cost_bw(int D, gboolean overlap, const char *extra, double bw)
{
  g_autofree char *text = g_strdup_printf("[cost]\nsamples_per_micro_batch = 8\n[stages]\nforward = 0.01\n"
                                          "backward = 0.02\nactivation_bytes = 1e6\nweight_bytes = 4e8\n"
                                          "[links]\nlatency = 1e-5\nbandwidth = 1e10\n"
                                          "[data_parallel]\nlatency = 5e-6\nbandwidth = %g\n%s", bw, extra);
  GError *err = NULL;
  TpCost *c = tp_cost_parse(text, strlen(text), "dp.cost", 2, &err);
  g_assert_no_error(err);
  tp_cost_data_parallel(c, D, overlap);
  return c;
}

static TpCost *dp_cost(int D, gboolean overlap, const char *extra) { return dp_cost_bw(D, overlap, extra, 2e10); }

/* 2(D-1)/D x bytes / bandwidth + 2(D-1) x latency */
static double ring(int D, double bytes, double bw, double lat) { return 2.0 * (D - 1) / D * bytes / bw + 2.0 * (D - 1) * lat; }

/* Schedules the simulations read, freed at the end. */
static GPtrArray *schedules;

static TpSim *run(const TpCost *c, const char *preset, int K)
{
  GError *err = NULL;
  TpSchedule *s = tpt_preset(preset, 2, 2, K);
  g_ptr_array_add(schedules, s);
  TpSim *sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  return sim;
}

/* The simulated all-reduce takes the ring formula's time, once per mini-batch, and the update
 * waits exactly that long on a link of its own. */
static void test_ring_time(void)
{
  for (int D = 2; D <= 16; D *= 2) {
    g_autoptr(TpCost) c = dp_cost(D, FALSE, "");
    g_autoptr(TpSim) sim = run(c, "gpipe", 3);
    double want = ring(D, 4e8, 2e10, 5e-6);
    for (int st = 0; st < 2; st++) {
      g_assert_cmpint(sim->ar->count[st], ==, 3);
      double got = sim->ar->busy[st] / sim->ar->count[st];
      g_assert_cmpfloat(fabs(got - want), <=, 0.01 * want);
      g_assert_cmpfloat(fabs(sim->ar->exposed[st] / 3 - want), <=, 1e-9);
    }
    g_autoptr(TpCost) one = dp_cost(1, FALSE, "");
    g_autoptr(TpSim) base = run(one, "gpipe", 3);
    g_assert_cmpfloat(sim->makespan, >=, base->makespan + 3 * want - 1e-9);
    g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
    g_autoptr(TpMetrics) mb = tp_metrics_compute(base);
    /* D replicas: D times the samples in the time of a mini-batch */
    g_assert_cmpfloat(fabs(m->throughput * m->makespan - D * mb->throughput * mb->makespan), <=, 1e-6);
    /* the reduction buffer: the gradients twice */
    g_assert_cmpfloat(m->stage[0].comp_peak[TP_MEM_GRADIENTS], ==, 8e8);
  }
}

/* D = 1 (or no --data-parallel): the [data_parallel] group changes nothing. */
static void test_one_replica(void)
{
  g_autoptr(TpCost) c = dp_cost(1, FALSE, "");
  g_autoptr(TpSim) sim = run(c, "1f1b", 4);
  g_assert_null(sim->ar);
  GError *err = NULL;
  const char *plain = "[cost]\nsamples_per_micro_batch = 8\n[stages]\nforward = 0.01\nbackward = 0.02\n"
                      "activation_bytes = 1e6\nweight_bytes = 4e8\n[links]\nlatency = 1e-5\nbandwidth = 1e10\n";
  g_autoptr(TpCost) p = tp_cost_parse(plain, strlen(plain), "plain.cost", 2, &err);
  g_assert_no_error(err);
  g_autoptr(TpSim) base = run(p, "1f1b", 4);
  g_assert_cmpfloat(sim->makespan, ==, base->makespan);
}

/* A [data_parallel] group's bad values are refused naming the key. */
static void test_bad_group(void)
{
  const char *bad[][2] = { { "link = 3", "links are numbered 1 .. 2" }, { "link = 0", "link numbers are whole" },
                           { "latency = 1, 2, 3", "expected one number or 2" }, { "foo = 1", "unknown key" } };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *text = g_strdup_printf("[stages]\nforward = 1\nbackward = 1\n[data_parallel]\n%s\n", bad[i][0]);
    GError *err = NULL;
    g_autoptr(TpCost) c = tp_cost_parse(text, strlen(text), "bad.cost", 2, &err);
    g_assert_null(c);
    g_assert_nonnull(strstr(err->message, "[data_parallel]"));
    g_assert_nonnull(strstr(err->message, bad[i][1]));
    g_error_free(err);
  }
}

/* Two stages on one link: the second all-reduce waits for the first. */
static void test_shared_link(void)
{
  g_autoptr(TpCost) own = dp_cost_bw(8, FALSE, "", 1e9);
  g_autoptr(TpCost) one = dp_cost_bw(8, FALSE, "link = 1\n", 1e9);
  g_assert_cmpint(one->dp->n_links, ==, 1);
  g_autoptr(TpSim) a = run(own, "gpipe", 1);
  g_autoptr(TpSim) b = run(one, "gpipe", 1);
  double t = ring(8, 4e8, 1e9, 5e-6);
  /* stage 2 reaches its update first (0.7 s of all-reduce); stage 1, 0.04 s later, waits for it */
  g_assert_cmpfloat(fabs(a->ar->exposed[0] - t), <=, 1e-9);
  g_assert_cmpfloat(b->ar->exposed[0], >, 2 * t - 0.05);
  g_assert_cmpfloat(b->makespan, >, a->makespan);
}

/* Overlapped: 25 MiB buckets released through the last backward, the update waiting less. */
static void test_overlap(void)
{
  g_autoptr(TpCost) plain = dp_cost(4, FALSE, "");
  g_autoptr(TpCost) over = dp_cost(4, TRUE, "");
  g_autoptr(TpSim) a = run(plain, "gpipe", 2);
  g_autoptr(TpSim) b = run(over, "gpipe", 2);
  const double mib25 = 25.0 * 1024 * 1024;
  int n = (int)ceil(4e8 / mib25);
  g_assert_cmpint(tp_allreduce_buckets(over->dp, 0), ==, n);
  double per = (n - 1) * ring(4, mib25, 2e10, 5e-6) + ring(4, 4e8 - (n - 1) * mib25, 2e10, 5e-6);
  g_assert_cmpfloat(fabs(b->ar->busy[0] / b->ar->count[0] - per), <=, 1e-9 * per);
  g_assert_cmpfloat(b->ar->exposed[0], <, a->ar->exposed[0]);
  g_assert_cmpfloat(b->makespan, <, a->makespan);
  /* 25 MiB buckets, the rest in the last: a byte more than one bucket adds a bucket of one byte, and
   * the run ends where it ended (equal halves had ended it much sooner) */
  g_autoptr(TpCost) one = dp_cost_bw(2, TRUE, "", 1e6);
  g_autoptr(TpCost) more = dp_cost_bw(2, TRUE, "", 1e6);
  one->dp->bytes[0] = one->dp->bytes[1] = mib25, more->dp->bytes[0] = more->dp->bytes[1] = mib25 + 1;
  g_autoptr(TpSim) c1 = run(one, "gpipe", 2);
  g_autoptr(TpSim) c2 = run(more, "gpipe", 2);
  g_assert_cmpint(tp_allreduce_buckets(more->dp, 0), ==, 2);
  g_assert_cmpfloat(tp_allreduce_bucket_time(more->dp, 0, 1), ==, ring(2, 1, 1e6, 5e-6));
  g_assert_cmpfloat(fabs(c2->makespan - c1->makespan), <=, 1e-4 * c1->makespan);
}

/* The costed replay's all-reduce: one whose buckets are all delivered before the stage reaches its
 * update exposes nothing (the event loop adds exposure only while the stage waits), even where the
 * last instant bucket is ready at t0 + (1.4 x 3) / 3, a rounding before t0 + 1.4. */
static void test_replay_early(void)
{
  g_autoptr(TpCost) c = dp_cost(2, TRUE, "");
  c->dp->bytes[0] = 6e7, c->dp->latency[0] = c->dp->bandwidth[0] = 0; /* bandwidth 0: infinite */
  g_assert_cmpint(tp_allreduce_buckets(c->dp, 0), ==, 3);
  g_assert_cmpfloat((1.4 * 3) / 3, <, 1.4);
  TpAllreduceStats *st = tp_allreduce_stats_new(2);
  double pending = -1;
  tp_ar_replay_before_update(c->dp, st, 0, 0, 1.4, &pending);
  g_assert_cmpfloat(pending, <=, 1.4);
  g_assert_cmpfloat(tp_ar_replay_update(c->dp, st, 0, 1.4, &pending), ==, 1.4);
  g_assert_cmpfloat(st->exposed[0], ==, 0);
  g_assert_cmpint(st->count[0], ==, 1);
  g_assert_cmpfloat(pending, ==, -1);
  /* not behind a backward: reduced whole from the update's reach, the wait all exposed */
  c->dp->bandwidth[0] = 1e8, c->dp->latency[0] = 0.5;
  double t = tp_allreduce_time(c->dp, 0);
  g_assert_cmpfloat(fabs(tp_ar_replay_update(c->dp, st, 0, 10, &pending) - (10 + t)), <=, 1e-12 * t);
  g_assert_cmpfloat(fabs(st->exposed[0] - t), <=, 1e-12 * t);
  g_assert_cmpint(st->count[0], ==, 2);
  tp_allreduce_stats_free(st);
}

/* dgx-a100: a stage's D x T GPUs inside a node reduce on NVLink; across nodes on the network, each
 * GPU its share of the node's; pipeline links cross nodes when a stage fills one. */
static void test_layout(void)
{
  GError *err = NULL;
  g_autoptr(TpCluster) cl = tp_cluster_load("dgx-a100", &err);
  g_assert_no_error(err);
  g_assert_true(cl->any_count);
  g_autoptr(TpCost) in = dp_cost(1, FALSE, "");
  tp_layout_links(in, cl, 2, 2, TP_MAP_NONE, 2);
  g_assert_cmpfloat(in->dp->bandwidth[0], ==, cl->link_bandwidth);
  g_assert_cmpfloat(in->link[0].bandwidth, ==, 1e10); /* stages 1 and 2 on one node: the cost's link */
  g_autoptr(TpCost) across = dp_cost(1, FALSE, "");
  tp_layout_links(across, cl, 2, 8, TP_MAP_NONE, 2);
  g_assert_cmpfloat(across->dp->bandwidth[1], ==, cl->network_bandwidth / 8);
  g_assert_cmpfloat(across->dp->latency[1], ==, cl->network_latency);
  g_assert_cmpfloat(across->link[0].bandwidth, ==, cl->network_bandwidth / 8);
  g_assert_cmpint(across->dp->link[0], !=, across->dp->link[1]);
}

/* One pipeline on a cluster of nodes: stages 8 and 9 of 16 sit on two nodes, their link is the
 * network's (it had been the GPU link); a list of devices, which has no nodes, keeps the cost's.
 * Chunks are placed by worker: 4 chunks of 2 workers (round robin) and 3 replicas, 6 GPUs of one
 * node, reduce on NVLink, a worker's chunks on its link. */
static void test_layout_workers(void)
{
  GError *err = NULL;
  g_autoptr(TpCluster) cl = tp_cluster_load("dgx-a100", &err);
  g_autoptr(TpCluster) list = tp_cluster_load("C", &err);
  g_assert_no_error(err);
  const char *text = "[stages]\nforward = 0.01\nbackward = 0.02\nweight_bytes = 4e8\n[links]\nlatency = 1e-5\n"
                     "bandwidth = 1e10\n";
  g_autoptr(TpCost) one = tp_cost_parse(text, strlen(text), "w.cost", 16, &err);
  g_autoptr(TpCost) flat = tp_cost_parse(text, strlen(text), "w.cost", 4, &err);
  g_assert_no_error(err);
  tp_layout_links(one, cl, 1, 1, TP_MAP_NONE, 16);
  tp_layout_links(flat, list, 1, 1, TP_MAP_NONE, 4);
  for (int s = 0; s < 15; s++) {
    g_assert_cmpfloat(one->link[s].bandwidth, ==, s == 7 ? cl->network_bandwidth : 1e10);
    g_assert_cmpfloat(one->link[s].latency, ==, s == 7 ? cl->network_latency : 1e-5);
  }
  for (int s = 0; s < 3; s++)
    g_assert_cmpfloat(flat->link[s].bandwidth, ==, 1e10);
  g_assert_null(one->dp);
  g_autoptr(TpCost) ch = tp_cost_parse(text, strlen(text), "w.cost", 4, &err);
  g_assert_no_error(err);
  tp_layout_links(ch, cl, 3, 1, TP_MAP_ROUND_ROBIN, 2);
  g_assert_cmpint(ch->dp->link[0], ==, ch->dp->link[2]);
  g_assert_cmpint(ch->dp->link[1], ==, ch->dp->link[3]);
  g_assert_cmpint(ch->dp->link[0], !=, ch->dp->link[1]);
  for (int s = 0; s < 4; s++) {
    g_assert_cmpfloat(ch->dp->bandwidth[s], ==, cl->link_bandwidth);
    g_assert_cmpfloat(s < 3 ? ch->link[s].bandwidth : 1e10, ==, 1e10);
  }
}

/* Replicas on a list of devices of two kinds (cluster C: three Quadro RTX 6000, an RTX 2080): stage
 * 2's two replicas are GPUs 3 and 4, the Quadro and the RTX 2080 — it runs at the RTX 2080's pace and
 * holds what the RTX 2080 holds (it had been costed on the Quadro alone); stage 1's, two Quadros. */
static void test_replica_devices(void)
{
  GError *err = NULL;
  g_autoptr(TpCluster) cl = tp_cluster_load("C", &err);
  g_autoptr(TpModel) m = tp_model_load("gpt2-124m", &err);
  g_assert_no_error(err);
  g_autoptr(TpAnalytic) one = tp_analytic_new_on(m, cl, NULL, 2, 2, 16, TRUE, &err);
  g_autoptr(TpAnalytic) two = tp_analytic_new_on(m, cl, NULL, 2, 2, 16, TRUE, &err);
  g_assert_no_error(err);
  tp_analytic_parallel(one, 1, 1);
  tp_analytic_parallel(two, 2, 1);
  g_assert_cmpint(one->device[1], ==, 1);
  g_assert_cmpint(two->device[0], <=, 1);
  g_assert_cmpstr(cl->dev[two->device[0]].name, ==, cl->dev[0].name);
  g_assert_cmpint(two->device[1], ==, 3);
  g_assert_cmpfloat(tp_analytic_capacity(two, 1), ==, cl->dev[3].memory);
  g_assert_cmpfloat(tp_analytic_capacity(two, 0), ==, cl->dev[0].memory);
  /* the RTX 2080's pace: stage 2's backward prefix on it is slower than on the Quadro */
  int L = tp_model_n_layers(m);
  g_assert_cmpfloat(two->tab.bwd_prefix[(size_t)2 * (L + 1) - 1], >, one->tab.bwd_prefix[(size_t)2 * (L + 1) - 1]);
  /* GPUs all alike (a100x8): each stage keeps its device, as reports number them */
  g_autoptr(TpCluster) same = tp_cluster_load("a100x8", &err);
  g_assert_no_error(err);
  g_autoptr(TpAnalytic) alike = tp_analytic_new_on(m, same, NULL, 4, 2, 16, TRUE, &err);
  g_assert_no_error(err);
  tp_analytic_parallel(alike, 2, 1);
  for (int s = 0; s < 4; s++)
    g_assert_cmpint(alike->device[s], ==, s);
}

/* Korthikanti et al. (2022), per sample of a GPT block at 16 bits: s·h·(10 + 24/t + 5as/(ht)) bytes,
 * with sequence parallelism s·h·(34/t + 5as/(ht)); FLOPs and weights / t. */
static void test_tensor_activations(void)
{
  GError *err = NULL;
  g_autoptr(TpModel) m = tp_model_load("gpt3-175b", &err);
  g_assert_no_error(err);
  const TpLayer *b1 = tp_model_layer(m, 1);
  g_assert_cmpint(b1->kind, ==, TP_LAYER_BLOCK);
  double s = 2048, h = 12288, a = 96, fwd = b1->fwd_flops;
  long long params = b1->params;
  g_assert_true(tp_model_tensor_splits(m, 8));
  g_assert_false(tp_model_tensor_splits(m, 7));
  for (int sp = 0; sp < 2; sp++) {
    g_autoptr(TpModel) t = tp_model_load("gpt3-175b", &err);
    tp_model_tensor_parallel(t, 8, sp);
    const TpLayer *b = tp_model_layer(t, 1);
    double want = sp ? s * h * (34.0 / 8 + 5 * a * s / (h * 8)) : s * h * (10 + 24.0 / 8 + 5 * a * s / (h * 8));
    g_assert_cmpfloat(fabs(b->stored_bytes - want), <=, 1e-9 * want);
    g_assert_cmpfloat(b->fwd_flops, ==, fwd / 8);
    g_assert_cmpint(b->params, ==, params / 8);
  }
}

static void dress_replicas(TpCost *c, gconstpointer data)
{
  tp_layout_links(c, data, 8, 8, TP_MAP_NONE, c->W);
  tp_cost_data_parallel(c, 8, FALSE);
}

/* --fit-memory with replicas: the split holds each stage's reduction buffer too (gpt3-175b, 1f1b
 * W = 16, N = 96, T = 8, D = 8 on A100s, where a split fitted without it needs 81-83 GB of 80): the
 * analytic estimate counts it, and where it does not (replicas left at 1 there) the rounds, which
 * simulate the dressed cost, hold back what it took. */
static void test_fit_replicas(void)
{
  GError *err = NULL;
  g_autoptr(TpModel) m = tp_model_load("gpt3-175b", &err);
  g_autoptr(TpCluster) cl = tp_cluster_load("dgx-a100", &err);
  g_assert_no_error(err);
  tp_cluster_expand(cl, 16);
  tp_model_tensor_parallel(m, 8, FALSE);
  g_autoptr(TpSchedule) s = tpt_preset("1f1b", 16, 96, 3 * 16 + 2);
  for (int counted = 0; counted < 2; counted++) {
    g_autoptr(TpAnalytic) a = tp_analytic_new_on(m, cl, NULL, 16, 96, 192, TRUE, &err);
    g_assert_no_error(err);
    a->optimizer_states = 2, a->replicas = counted ? 8 : 1;
    tp_analytic_tensor(a, 8);
    const TpCostDress dress = { dress_replicas, cl };
    g_autoptr(TpCost) c = tp_fit_memory(a, s, NULL, TRUE, 16, &dress, &err);
    g_assert_no_error(err);
    g_assert_cmpint(c->dp->D, ==, 8);
    g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
    g_assert_no_error(err);
    g_autofree TpStageMetrics *mem = tp_metrics_memory(sim);
    double held = 0;
    for (int st = 0; st < 16; st++) {
      g_assert_cmpfloat(mem[st].peak_bytes, <=, c->capacity[st]);
      g_assert_cmpfloat(mem[st].at_peak[TP_MEM_GRADIENTS], ==, 2 * c->stage[st].weight_bytes); /* and the reduction's */
      held += a->reserve[st];
    }
    if (counted)
      g_assert_cmpfloat(held, ==, 0); /* the estimate was right: no round corrected it */
    else
      g_assert_cmpfloat(held, >, 0);
  }
}

/* A 1f1b search of llama-tiny (batch 16, T = 1 or 2) over W w0..w1 on at most `devices` GPUs of
 * cluster `cluster` (expanded to 4 where it has any count); NULL with err where it finds none. */
static TpPlanResult *plan_llama(const char *cluster, int w0, int w1, int devices, GError **err)
{
  g_autoptr(TpModel) m = tp_model_load("llama-tiny", NULL);
  g_autoptr(TpModel) m2 = tp_model_load("llama-tiny", NULL);
  g_autoptr(TpCluster) cl = tp_cluster_load(cluster, NULL);
  g_assert_true(m && m2 && cl);
  tp_cluster_expand(cl, 4);
  tp_model_tensor_parallel(m2, 2, FALSE);
  const TpPreset *ps[] = { tp_preset_find("1f1b") };
  TpPlanRequest r = { .model = m, .cluster = cl, .batch = 16, .w0 = w0, .w1 = w1, .n0 = 1, .n1 = 16, .presets = ps,
                      .n_presets = 1, .threads = 1, .devices = devices, .by_tensor = { NULL, m, m2 } };
  return tp_plan_search(&r, err);
}

/* plan --devices on a list of devices (cluster C, four GPUs): replicas and tensor ranks each on a GPU
 * of their own, so D x W x T <= 4 wherever D x T > 1; one pipeline shares them at any W. */
static void test_plan_devices_list(void)
{
  GError *err = NULL;
  g_autoptr(TpPlanResult) res = plan_llama("C", 1, 6, 64, &err);
  g_assert_no_error(err);
  gboolean shared = FALSE, replicated = FALSE;
  for (guint i = 0; i < res->all->len; i++) {
    const TpPlan *p = res->all->pdata[i];
    if (p->D * p->T > 1)
      g_assert_cmpint(p->D * p->W * p->T, <=, 4);
    shared = shared || p->W > 4, replicated = replicated || p->D * p->T > 1;
  }
  g_assert_true(shared && replicated);
}

/* plan --devices: every plan within the devices, D and T searched, the top one the fastest. */
static void test_plan_devices(void)
{
  GError *err = NULL;
  g_autoptr(TpPlanResult) res = plan_llama("dgx-a100", 1, 4, 8, &err);
  g_assert_no_error(err);
  g_assert_cmpuint(res->ranked->len, >, 0);
  gboolean dp = FALSE, tp = FALSE;
  for (guint i = 0; i < res->all->len; i++) {
    const TpPlan *p = res->all->pdata[i];
    g_assert_cmpint(p->D * p->T * p->W, <=, 8);
    g_assert_cmpint(16 % p->D, ==, 0);
    dp = dp || p->D > 1, tp = tp || p->T > 1;
  }
  g_assert_true(dp && tp);
  const TpPlan *top = res->ranked->pdata[0];
  for (guint i = 1; i < res->ranked->len; i++)
    g_assert_cmpfloat(top->sim.samples_per_second, >=, ((const TpPlan *)res->ranked->pdata[i])->sim.samples_per_second * (1 - 1e-9));
  /* more stages than devices: no candidate, and the line names the devices */
  g_assert_null(plan_llama("dgx-a100", 4, 4, 2, &err));
  g_assert_nonnull(err);
  g_assert_nonnull(strstr(err->message, "on at most 2 devices"));
  g_clear_error(&err);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/parallel/ring-time", test_ring_time);
  g_test_add_func("/parallel/one-replica", test_one_replica);
  g_test_add_func("/parallel/bad-group", test_bad_group);
  g_test_add_func("/parallel/shared-link", test_shared_link);
  g_test_add_func("/parallel/overlap", test_overlap);
  g_test_add_func("/parallel/replay-early", test_replay_early);
  g_test_add_func("/parallel/layout", test_layout);
  g_test_add_func("/parallel/layout-workers", test_layout_workers);
  g_test_add_func("/parallel/replica-devices", test_replica_devices);
  g_test_add_func("/parallel/tensor-activations", test_tensor_activations);
  g_test_add_func("/parallel/fit-replicas", test_fit_replicas);
  g_test_add_func("/parallel/plan-devices", test_plan_devices);
  g_test_add_func("/parallel/plan-devices-list", test_plan_devices_list);
  schedules = g_ptr_array_new_with_free_func((GDestroyNotify)tp_schedule_free);
  int rc = g_test_run();
  g_ptr_array_unref(schedules);
  return rc;
}
