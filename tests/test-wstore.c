/* test-wstore.c — the weight store driven through the operation lists of every preset: the
 * versions each operation reads, the live versions after every operation against a count made
 * here from the lists, the maxima against the simulator's, byte accounting and resuming. */
#include "tp_cost.h"
#include "tp_metrics.h"
#include "tp_sim.h"
#include "tp_test.h"
#include "tp_wstore.h"

#include <string.h>

/* Host allocator that counts outstanding buffers. */
typedef struct {
  int live, allocs;
  int fail_after; /* > 0: allocations after this many fail */
} Counter;
static float *c_alloc(void *ctx, size_t n, GError **err)
{
  Counter *c = ctx;
  if (c->fail_after > 0 && c->allocs >= c->fail_after) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "out of device memory");
    return NULL;
  }
  c->live++, c->allocs++;
  return g_new(float, n);
}
static void c_free(void *ctx, float *b)
{
  ((Counter *)ctx)->live--;
  g_free(b);
}

enum { NP = 16 };
static const TpWStoreSizes sizes = { NP, 1000, 2000, 300 };

/* ---- the count made here, from the lists alone -------------------------------------------------- */

/* Index of the backward on stage st that consumes forward ops[f]'s activations (of a split backward:
 * its W, which keeps them after the I). */
static int consumer(const TpSchedule *s, int st, int f)
{
  const TpOp *ops = tp_stage_ops(s, st), *fo = &ops[f];
  int whole = -1, same = -1, last = -1;
  for (int k = f + 1; k < tp_stage_len(s, st); k++) {
    if ((ops[k].kind != TP_OP_B && ops[k].kind != TP_OP_W) || ops[k].mb != fo->mb)
      continue;
    if (ops[k].micro == TP_WHOLE)
      whole = k;
    if (ops[k].micro == fo->micro)
      same = k;
    last = k;
  }
  return whole >= 0 ? whole : same >= 0 ? same : last;
}

/* live[k + 1]: versions live after op k (live[0]: before the first); returns the maximum. */
static int count_versions(const TpSchedule *s, int st, int *live)
{
  const TpOp *ops = tp_stage_ops(s, st);
  int n = tp_stage_len(s, st);
  gboolean stashing = s->policy == TP_POLICY_STASH || s->policy == TP_POLICY_INTERMEDIATE;
  int *born = g_new(int, s->K + 2), *last = g_new(int, s->K + 1);
  born[0] = -1;
  born[s->K + 1] = n;
  for (int v = 0; v <= s->K; v++)
    last[v] = -1;
  for (int k = 0; k < n; k++) {
    if (ops[k].kind == TP_OP_U) {
      born[ops[k].mb] = k;
      continue;
    }
    int use = ops[k].kind == TP_OP_F && stashing ? consumer(s, st, k) : k;
    last[ops[k].ver] = MAX(last[ops[k].ver], use);
  }
  int max = 0;
  for (int k = -1; k < n; k++) {
    int c = 0;
    for (int v = 0; v <= s->K; v++)
      c += born[v] <= k && k < MAX(born[v + 1], last[v]);
    live[k + 1] = c;
    max = MAX(max, c);
  }
  g_free(born);
  g_free(last);
  return max;
}

/* Maximum micro-batch activations stored at once: a forward's from its start to its consumer's end. */
static int count_activations(const TpSchedule *s, int st)
{
  const TpOp *ops = tp_stage_ops(s, st);
  int n = tp_stage_len(s, st), max = 0;
  int *during = g_new0(int, n);
  for (int f = 0; f < n; f++)
    if (ops[f].kind == TP_OP_F)
      for (int k = f; k <= consumer(s, st, f); k++)
        during[k] += tp_op_count(s, &ops[f]);
  for (int k = 0; k < n; k++)
    max = MAX(max, during[k]);
  g_free(during);
  return max;
}

/* ---- driving the store ---------------------------------------------------------------------------- */

static void fill(float *b, float v)
{
  for (int i = 0; i < NP; i++)
    b[i] = v;
}

/* Run ops [from, to) of stage st through w; each version's buffer holds its number. */
static void drive(TpWStore *w, const TpSchedule *s, int st, int from, int to, const int *live)
{
  const TpOp *ops = tp_stage_ops(s, st);
  GError *e = NULL;
  TpWStoreStats t;
  for (int k = from; k < to; k++) {
    const TpOp *op = tp_wstore_op_begin(w, k, &e);
    g_assert_no_error(e);
    g_assert_true(op == &ops[k]);
    if (op->kind == TP_OP_U) {
      /* the step reads the latest version and writes the update buffer (the latest one itself
       * when updated in place) */
      float *u = tp_wstore_update_buffer(w), *l = tp_wstore_version(w, tp_wstore_latest(w));
      g_assert_cmpfloat(l[0], ==, tp_wstore_latest(w));
      g_assert_cmpfloat(l[NP - 1], ==, tp_wstore_latest(w));
      fill(u, op->mb);
    } else {
      int oldest = G_MAXINT;
      for (int j = 0; j < tp_op_count(s, op); j++) {
        int v = tp_wstore_read_version(w, j);
        oldest = MIN(oldest, v);
        if (op->src == TP_SRC_FIXED)
          g_assert_cmpint(v, ==, op->ver);
        float *b = tp_wstore_version(w, v);
        g_assert_nonnull(b);
        g_assert_cmpfloat(b[0], ==, v);
      }
      g_assert_cmpint(oldest, ==, op->ver);
      gboolean blend = op->src == TP_SRC_BLEND && tp_wstore_latest(w) > op->ver;
      g_assert_true((tp_wstore_blend_buffer(w) != NULL) == blend);
      g_assert_nonnull(tp_wstore_version(w, tp_wstore_latest(w)));
    }
    tp_wstore_op_end(w);
    tp_wstore_stats(w, &t);
    if (t.live_versions != live[k + 1])
      g_error("stage %d op %d: %d live versions, expected %d", st + 1, k, t.live_versions, live[k + 1]);
    g_assert_cmpint(tp_wstore_live(w, NULL, 0), ==, t.live_versions);
    g_assert_cmpint(t.cur[TP_MEMCAT_WEIGHTS], ==, (gint64)t.live_versions * NP * 4);
    g_assert_cmpint(t.cur[TP_MEMCAT_ACTIVATIONS], ==, (gint64)t.activations * sizes.activation_bytes);
    g_assert_cmpint(t.total, ==, t.cur[0] + t.cur[1] + t.cur[2] + t.cur[3] + t.cur[4]);
  }
}

/* costed: simulate on uneven per-stage times, updates that take time and link latency instead of
 * unit slots (the stage's order stays the list's, so the counts must not change). */
static void check_schedule(const char *preset, int W, int N, int K, gboolean costed)
{
  const TpPreset *p = tp_preset_find(preset);
  if (!tp_pair_check(p->order, p->policy, W, N, NULL))
    return;
  g_autoptr(TpSchedule) s = tpt_preset(preset, W, N, K);
  GError *e = NULL;
  /* unit slots with this test's byte sizes and no message bytes: the simulator's memory per stage
   * is then what the store accounts */
  g_autoptr(TpCost) c = tp_cost_unit(W);
  for (int st = 0; st < W; st++) {
    TpStageCost *sc = &c->stage[st];
    sc->act_bytes = sc->grad_bytes = 0;
    sc->weight_bytes = NP * 4;
    sc->stored_bytes = (double)sizes.activation_bytes;
    sc->optimizer_bytes = (double)sizes.optimizer_bytes;
    sc->grad_buffer_bytes = (double)sizes.gradient_bytes;
    if (costed)
      sc->fwd = 1 + 0.37 * st, sc->bwd = 1.9 + 0.21 * (st % 2), sc->upd = 0.05;
  }
  for (int l = 0; costed && l < W - 1; l++)
    c->link[l].latency = 0.3;
  c->unit = !costed;
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &e);
  g_assert_no_error(e);
  g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
  for (int st = 0; st < W; st++) {
    int n = tp_stage_len(s, st);
    int *live = g_new(int, n + 1);
    int max_v = count_versions(s, st, live), max_a = count_activations(s, st);
    Counter cnt = { 0 };
    TpWAlloc a = { .alloc = c_alloc, .free = c_free, .ctx = &cnt };
    TpWStore *w = tp_wstore_new(s, st, 0, &sizes, &a, &e);
    g_assert_no_error(e);
    fill(tp_wstore_version(w, 0), 0);
    drive(w, s, st, 0, n, live);
    TpWStoreStats t;
    tp_wstore_stats(w, &t);
    if (t.max_live_versions != max_v || t.max_live_versions != m->stage[st].max_live_versions)
      g_error("%s W=%d N=%d K=%d costed=%d stage %d: max live versions %d, counted %d, simulator %d", preset, W, N, K, costed, st + 1,
              t.max_live_versions, max_v, m->stage[st].max_live_versions);
    if (t.max_activations != max_a || t.max_activations != m->stage[st].peak_activations)
      g_error("%s W=%d N=%d K=%d stage %d: max activations %d, counted %d, simulator %d", preset, W, N, K, st + 1,
              t.max_activations, max_a, m->stage[st].peak_activations);
    const TpStageMetrics *sm = &m->stage[st];
    if (t.peak_total != (gint64)sm->peak_bytes || t.peak[TP_MEMCAT_WEIGHTS] != (gint64)sm->comp_peak[TP_MEMCAT_WEIGHTS] ||
        t.peak[TP_MEMCAT_ACTIVATIONS] != (gint64)sm->comp_peak[TP_MEMCAT_ACTIVATIONS])
      g_error("%s W=%d N=%d K=%d stage %d: peak bytes %" G_GINT64_FORMAT " (weights %" G_GINT64_FORMAT
              ", activations %" G_GINT64_FORMAT "), simulator %g (%g, %g)",
              preset, W, N, K, st + 1, t.peak_total, t.peak[TP_MEMCAT_WEIGHTS], t.peak[TP_MEMCAT_ACTIVATIONS],
              sm->peak_bytes, sm->comp_peak[TP_MEMCAT_WEIGHTS], sm->comp_peak[TP_MEMCAT_ACTIVATIONS]);
    /* at the end: only the latest version, no activations; the buffers still held are that one
     * and the spares kept for reuse, never more than were in use at once (versions, and a blend) */
    g_assert_cmpint(t.live_versions, ==, 1);
    g_assert_cmpint(tp_wstore_latest(w), ==, K);
    g_assert_cmpint(t.activations, ==, 0);
    g_assert_cmpint(cnt.live, >=, 1);
    g_assert_cmpint(cnt.live, <=, t.max_live_versions + 1);
    g_assert_cmpint(cnt.allocs, <=, t.max_live_versions + 1); /* reused, not allocated per update */
    g_assert_cmpint(t.cur[TP_MEMCAT_OPTIMIZER], ==, 1000);
    g_assert_cmpint(t.cur[TP_MEMCAT_GRADIENTS], ==, 2000);
    g_assert_cmpint(t.peak[TP_MEMCAT_WEIGHTS], >=, (gint64)t.max_live_versions * NP * 4);
    g_assert_cmpint(t.peak[TP_MEMCAT_ACTIVATIONS], ==, (gint64)t.max_activations * 300);
    g_assert_cmpint(t.peak_total, >=, t.at_peak[TP_MEMCAT_WEIGHTS] + 3000);
    g_assert_cmpint(t.peak_total, <=, t.peak[0] + t.peak[1] + t.peak[2] + t.peak[3] + t.peak[4]);
    g_assert_cmpint(t.peak_total, ==, t.at_peak[0] + t.at_peak[1] + t.at_peak[2] + t.at_peak[3] + t.at_peak[4]);
    tp_wstore_free(w);
    g_assert_cmpint(cnt.live, ==, 0);
    g_free(live);
  }
}

static void test_presets(void)
{
  static const int wnk[][3] = { { 1, 1, 3 }, { 2, 2, 6 }, { 3, 2, 8 }, { 3, 3, 9 }, { 4, 2, 12 },
                                { 4, 4, 12 }, { 5, 2, 14 }, { 6, 3, 16 } };
  for (int p = 0; p < tp_n_presets; p++)
    for (guint i = 0; i < G_N_ELEMENTS(wnk) && !tp_order_chunked(tp_presets[p].order); i++) /* no chunks in exec */
      for (int costed = 0; costed < 2; costed++)
        check_schedule(tp_presets[p].name, wnk[i][0], wnk[i][1], wnk[i][2], costed);
}

/* A store created at a position of the list continues exactly as the store that got there. */
static void test_resume(void)
{
  const char *presets[] = { "pipedream", "timeprest", "i-timeprest", "pipedream-2bw", "gpipe" };
  GError *e = NULL;
  for (guint p = 0; p < G_N_ELEMENTS(presets); p++) {
    g_autoptr(TpSchedule) s = tpt_preset(presets[p], 3, 3, 10);
    for (int st = 0; st < 3; st++) {
      int n = tp_stage_len(s, st);
      int *live = g_new(int, n + 1);
      count_versions(s, st, live);
      for (int at = 0; at <= n; at += 5) {
        TpWStore *a = tp_wstore_new(s, st, 0, &sizes, NULL, &e);
        fill(tp_wstore_version(a, 0), 0);
        drive(a, s, st, 0, at, live);
        TpWStore *b = tp_wstore_new(s, st, at, &sizes, NULL, &e);
        g_assert_no_error(e);
        int va[64], vb[64];
        int na = tp_wstore_live(a, va, 64), nb = tp_wstore_live(b, vb, 64);
        g_assert_cmpint(na, ==, nb);
        g_assert_cmpmem(va, na * sizeof(int), vb, nb * sizeof(int));
        g_assert_cmpint(tp_wstore_latest(a), ==, tp_wstore_latest(b));
        g_assert_cmpint(tp_wstore_position(b), ==, at);
        for (int i = 0; i < nb; i++)
          memcpy(tp_wstore_version(b, vb[i]), tp_wstore_version(a, va[i]), NP * sizeof(float));
        TpWStoreStats ta, tb;
        tp_wstore_stats(a, &ta);
        tp_wstore_stats(b, &tb);
        g_assert_cmpint(ta.activations, ==, tb.activations);
        drive(b, s, st, at, n, live);
        drive(a, s, st, at, n, live);
        tp_wstore_free(a);
        tp_wstore_free(b);
      }
      g_free(live);
    }
  }
}

/* An allocator that fails: the update that needs a new version's buffer fails with the allocator's
 * error naming the stage, instead of a missing buffer later. */
static void test_alloc_fails(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("pipedream", 2, 1, 4);
  Counter cnt = { .fail_after = 1 };
  TpWAlloc a = { .alloc = c_alloc, .free = c_free, .ctx = &cnt };
  GError *e = NULL;
  TpWStore *w = tp_wstore_new(s, 0, 0, &sizes, &a, &e);
  g_assert_no_error(e);
  const TpOp *ops = tp_stage_ops(s, 0), *op = NULL;
  int k = 0;
  for (; k < tp_stage_len(s, 0) && (op = tp_wstore_op_begin(w, k, &e)); k++)
    tp_wstore_op_end(w);
  g_assert_null(op);
  g_assert_cmpint(ops[k].kind, ==, TP_OP_U);
  g_assert_error(e, TP_ERROR, TP_ERROR_RUNTIME);
  g_assert_cmpstr(e->message, ==, "stage 1: a weight version of 16 floats: out of device memory");
  g_clear_error(&e);
  tp_wstore_free(w);
  g_assert_cmpint(cnt.live, ==, 0);
}

static void test_errors(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 2, 2, 4);
  GError *e = NULL;
  g_autoptr(TpWStore) w = tp_wstore_new(s, 0, 0, &sizes, NULL, &e);
  g_assert_null(tp_wstore_op_begin(w, 1, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_RUNTIME);
  g_clear_error(&e);
  g_assert_nonnull(tp_wstore_op_begin(w, 0, &e));
  g_assert_null(tp_wstore_op_begin(w, 1, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_RUNTIME);
  g_assert_nonnull(strstr(e->message, "still running"));
  g_clear_error(&e);
  tp_wstore_op_end(w);

  /* a read of a version not yet made, an update out of order, a backward before its forward */
  TpOp *ops = tp_stage_ops(s, 0);
  int n = tp_stage_len(s, 0), f = 0, u = 0, b = 0;
  for (int k = n - 1; k >= 0; k--) {
    if (ops[k].kind == TP_OP_F)
      f = k;
    if (ops[k].kind == TP_OP_U)
      u = k;
    if (ops[k].kind == TP_OP_B)
      b = k;
  }
  ops[f].ver = 3;
  g_assert_null(tp_wstore_new(s, 0, 0, &sizes, NULL, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_INPUT);
  g_assert_nonnull(strstr(e->message, "not made yet"));
  g_assert_nonnull(strstr(e->message, "stage 1: F(1"));
  g_clear_error(&e);
  ops[f].ver = 0;
  ops[u].mb = 2;
  g_assert_null(tp_wstore_new(s, 0, 0, &sizes, NULL, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_INPUT);
  g_assert_nonnull(strstr(e->message, "out of order"));
  g_clear_error(&e);
  ops[u].mb = 1;
  TpOp tmp = ops[b];
  memmove(ops + 1, ops, b * sizeof(TpOp));
  ops[0] = tmp;
  ops[0].src = TP_SRC_STASH;
  g_assert_null(tp_wstore_new(s, 0, 0, &sizes, NULL, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_INPUT);
  g_clear_error(&e);
}

static gint64 read_bytes(void *data) { return *(gint64 *)data; }

static void test_comm_bytes(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("gpipe", 2, 2, 2);
  g_autoptr(TpWStore) w = tp_wstore_new(s, 1, 0, &sizes, NULL, NULL);
  TpWStoreStats t;
  tp_wstore_mem_add(w, TP_MEMCAT_COMM, 5000);
  tp_wstore_mem_add(w, TP_MEMCAT_COMM, -5000);
  tp_wstore_stats(w, &t);
  g_assert_cmpint(t.cur[TP_MEMCAT_COMM], ==, 0);
  g_assert_cmpint(t.peak[TP_MEMCAT_COMM], ==, 5000);
  g_assert_cmpint(t.peak_total, ==, 5000 + 3000 + NP * 4);
  g_assert_cmpint(t.at_peak[TP_MEMCAT_COMM], ==, 5000);
  /* bytes held outside the store (messages queued for the stage), read when it notes a change or
   * samples: on top of what was added */
  gint64 outside = 7000;
  tp_wstore_set_comm(w, read_bytes, &outside);
  tp_wstore_mem_add(w, TP_MEMCAT_COMM, 100);
  outside = 0;
  tp_wstore_sample(w);
  tp_wstore_stats(w, &t);
  g_assert_cmpint(t.cur[TP_MEMCAT_COMM], ==, 100);
  g_assert_cmpint(t.peak[TP_MEMCAT_COMM], ==, 7100);
  g_assert_cmpint(t.peak_total, ==, 7100 + 3000 + NP * 4);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/wstore/presets", test_presets);
  g_test_add_func("/wstore/resume", test_resume);
  g_test_add_func("/wstore/errors", test_errors);
  g_test_add_func("/wstore/alloc-fails", test_alloc_fails);
  g_test_add_func("/wstore/comm-bytes", test_comm_bytes);
  return g_test_run();
}
