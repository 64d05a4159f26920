/* test-schedule.c — orders and weight policies: the published grid, admission limits,
 * vertical synchronisation, v against closed forms, impossible pairs, significance. */
#include "tp_index.h"
#include "tp_metrics.h"
#include "tp_policy.h"
#include "tp_test.h"
#include "tp_validate.h"

#include <math.h>

static void test_timeprest_grid(void)
{
  static const char *const want[] = {
    "1A 1B 2A 2B 3A 3B 1 4A 4B 2 5A 5B 3 6A 6B 4 7A 7B",
    ". 1A 1B 2A 2B 1 3A 3B 2 4A 4B 3 5A 5B 4 6A 6B 5",
    ". . 1A 1B 1 2A 2B 2 3A 3B 3 4A 4B 4 5A 5B 5 6A",
  };
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 3, 2, 10);
  g_autofree char *grid = tpt_grid(s);
  g_auto(GStrv) lines = g_strsplit_set(grid, "\n", -1);
  for (int st = 0; st < 3; st++) {
    g_auto(GStrv) tok = g_strsplit(lines[st], " ", 19); /* 18 slots, then the rest */
    g_assert_cmpuint(g_strv_length(tok), ==, 19);
    char *rest = tok[18];
    tok[18] = NULL;
    g_autofree char *head = g_strjoinv(" ", tok);
    tok[18] = rest;
    g_assert_cmpstr(head, ==, want[st]);
  }
}

/* Every stage line has the same number of tokens, and the forward count per stage is K·N. */
static void test_grid_shape(void)
{
  for (int i = 0; i < tp_n_presets; i++) {
    int W = 4, N = 5, K = 6;
    if (tp_order_chunked(tp_presets[i].order))
      continue; /* W·V lines: tests/test-interleaved */
    g_autoptr(TpSchedule) s = tpt_preset(tp_presets[i].name, W, N, K);
    g_autofree char *grid = tpt_grid(s);
    g_auto(GStrv) lines = g_strsplit_set(grid, "\n", -1);
    g_assert_cmpuint(g_strv_length(lines), ==, (guint)W + 1);
    guint width = 0;
    for (int st = 0; st < W; st++) {
      g_auto(GStrv) tok = g_strsplit(lines[st], " ", -1);
      if (st == 0)
        width = g_strv_length(tok);
      g_assert_cmpuint(g_strv_length(tok), ==, width);
      int busy = 0;
      for (int t = 0; tok[t]; t++)
        busy += strcmp(tok[t], ".") != 0;
      /* a forward and a backward per unit of work: whole mini-batches for 1f1b-async, micro-batches else;
       * a split backward's I and W a slot each */
      int units = tp_presets[i].order == TP_ORDER_1F1B_ASYNC ? 2 * K
                  : tp_presets[i].order == TP_ORDER_NF1B   ? K * N + K
                  : tp_order_split(tp_presets[i].order)    ? 3 * K * N
                                                           : 2 * K * N;
      g_assert_cmpint(busy, ==, units);
    }
  }
}

/* nf1b admission: stage s (1-based) never has more than W-s+1 mini-batches in flight. */
static void test_admission(void)
{
  int W = 6, N = 2, K = 20;
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", W, N, K);
  for (int st = 0; st < W; st++) {
    int inflight = 0, peak = 0;
    const TpOp *ops = tp_stage_ops(s, st);
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      if (ops[k].kind == TP_OP_F && ops[k].micro == 0)
        inflight++;
      if (ops[k].kind == TP_OP_B)
        inflight--;
      peak = MAX(peak, inflight);
    }
    g_assert_cmpint(peak, ==, W - st);
  }
}

/* 1f1b: stage s (1-based) runs min(W-s, N) forwards before its first backward of a mini-batch. */
static void test_1f1b_warmup(void)
{
  int W = 5, K = 3;
  for (int N = 1; N <= 7; N++) {
    g_autoptr(TpSchedule) s = tpt_preset("1f1b", W, N, K);
    for (int st = 0; st < W; st++) {
      const TpOp *ops = tp_stage_ops(s, st);
      int k = 0;
      while (ops[k].kind == TP_OP_F)
        k++;
      g_assert_cmpint(k, ==, MIN(W - st - 1, N) + (N > W - st - 1 ? 1 : 0));
    }
  }
}

/* Published Eq. 2: v = 1 exactly when W <= N+1 (timeprest, unit slots). */
static void test_eq2_grid(void)
{
  for (int W = 2; W <= 12; W++)
    for (int N = 1; N <= 12; N++) {
      g_autoptr(TpSchedule) s = tpt_preset("timeprest", W, N, tp_default_mini_batches(W));
      int vmin;
      int v = tp_version_difference(s, &vmin, NULL);
      g_assert_cmpint(v, ==, vmin);
      g_assert_cmpint(v == 1, ==, W <= N + 1);
      g_assert_cmpint(v, ==, (W + N) / (N + 1)); /* ceil(W/(N+1)) */
    }
}

/* v of the other policies: sync 1, latest 1, 2bw 2, PipeDream's stash W. */
static void test_v_by_policy(void)
{
  struct { const char *preset; int W, N, want; } cases[] = {
    { "gpipe", 4, 3, 1 }, { "1f1b", 4, 3, 1 }, { "v-timeprest", 6, 2, 1 }, { "pipedream-2bw", 4, 4, 2 },
    { "pipedream", 4, 3, 4 }, { "pipedream", 7, 1, 7 },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(TpSchedule) s = tpt_preset(cases[i].preset, cases[i].W, cases[i].N, 4 * cases[i].W);
    g_assert_cmpint(tp_version_difference(s, NULL, NULL), ==, cases[i].want);
  }
}

/* vsync-latest: a forward reads the same version on every stage as on stage 1, and that
 * version exists there; backwards read c(i) on every stage. */
static void test_vsync_consistent(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 7, 2, 20);
  g_autoptr(TpIndex) ix = tp_index_new(s, NULL);
  for (int st = 1; st < s->W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      if (ops[k].kind == TP_OP_U)
        continue;
      int ref = ops[k].kind == TP_OP_F ? 0 : s->W - 1;
      const TpOp *r = &tp_stage_ops(s, ref)[tp_index_pos(ix, ref, &ops[k])];
      g_assert_cmpint(ops[k].ver, ==, r->ver);
    }
  }
  /* W=7 > N+1: some backward reads a version older than its stage's latest */
  int stale = 0;
  for (int k = 0, latest = 0; k < tp_stage_len(s, 0); k++) {
    const TpOp *op = &tp_stage_ops(s, 0)[k];
    if (op->kind == TP_OP_U)
      latest++;
    else if (op->kind == TP_OP_B)
      stale += op->ver < latest;
  }
  g_assert_cmpint(stale, >, 0);
}

static void test_bad_pairs(void)
{
  struct { TpOrder o; TpPolicy p; int W, N; const char *needle; } cases[] = {
    { TP_ORDER_NF1B, TP_POLICY_SYNC, 4, 4, "flush" },
    { TP_ORDER_1F1B_ASYNC, TP_POLICY_SYNC, 4, 4, "flush" },
    { TP_ORDER_NF1B, TP_POLICY_2BW, 4, 4, "order 2bw only" },
    { TP_ORDER_2BW, TP_POLICY_2BW, 4, 3, "N >= W" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    GError *err = NULL;
    TpSchedule *s = tp_schedule_generate(cases[i].o, cases[i].p, cases[i].W, cases[i].N, 5, &err);
    g_assert_null(s);
    g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
    g_assert_nonnull(strstr(err->message, cases[i].needle));
    g_error_free(err);
  }
  /* sizes */
  GError *err = NULL;
  g_assert_false(tp_size_check(0, 1, 1, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_clear_error(&err);
  g_assert_false(tp_size_check(1024, 4096, 1000000, &err));
  g_assert_nonnull(strstr(err->message, "limit"));
  g_clear_error(&err);
}

static void test_significance(void)
{
  TpSignificance sig;
  GError *err = NULL;
  g_assert_true(tp_significance_parse("exp", &sig, &err));
  g_assert_cmpfloat(tp_significance(&sig, 0), ==, 1.0);
  g_assert_cmpfloat_with_epsilon(tp_significance(&sig, 2), exp(-2.0), 1e-15);
  g_assert_true(tp_significance_parse("exp:2.5", &sig, &err));
  g_assert_cmpfloat_with_epsilon(tp_significance(&sig, 5), exp(-2.0), 1e-15);
  g_assert_true(tp_significance_parse("linear", &sig, &err));
  g_assert_cmpfloat(tp_significance(&sig, 3), ==, 0.25);
  g_assert_true(tp_significance_parse("const:0.3", &sig, &err));
  g_assert_cmpfloat(tp_significance(&sig, 0), ==, 1.0);
  g_assert_cmpfloat(tp_significance(&sig, 4), ==, 0.3);
  const char *bad[] = { "exp:0", "exp:-1", "const:2", "cubic", "linear:3", "" };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_assert_false(tp_significance_parse(bad[i], &sig, &err));
    g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
    g_clear_error(&err);
  }
}

/* intermediate: forwards read their stage's latest version; a backward blends, and the version it
 * names is the oldest one its forwards stashed on that stage (they may differ: an update can fall
 * between a mini-batch's forwards); with W > N+1 some of them are stale. */
static void test_intermediate_sources(void)
{
  const int sizes[][2] = { { 5, 2 }, { 2, 3 }, { 4, 4 }, { 6, 1 } };
  int stale = 0, straddle = 0;
  for (guint z = 0; z < G_N_ELEMENTS(sizes); z++) {
    g_autoptr(TpSchedule) s = tpt_preset("i-timeprest", sizes[z][0], sizes[z][1], 12);
    for (int st = 0; st < s->W; st++) {
      const TpOp *ops = tp_stage_ops(s, st);
      int latest = 0;
      for (int k = 0; k < tp_stage_len(s, st); k++) {
        const TpOp *op = &ops[k];
        g_assert_cmpint(op->src, ==, op->kind == TP_OP_B ? TP_SRC_BLEND : TP_SRC_FIXED);
        if (op->kind == TP_OP_U) {
          g_assert_cmpint(op->ver, ==, latest);
          latest++;
        } else if (op->kind == TP_OP_F) {
          g_assert_cmpint(op->ver, ==, latest);
        } else {
          int oldest = G_MAXINT, newest = -1;
          for (int f = 0; f < k; f++)
            if (ops[f].kind == TP_OP_F && ops[f].mb == op->mb) {
              oldest = MIN(oldest, ops[f].ver);
              newest = MAX(newest, ops[f].ver);
            }
          g_assert_cmpint(op->ver, ==, oldest);
          stale += op->ver < latest;
          straddle += oldest < newest;
        }
      }
    }
  }
  g_assert_cmpint(stale, >, 0);
  g_assert_cmpint(straddle, >, 0);
  /* by hand, W=2 N=3, stage 1 "1A 1B 1C 2A 2B 1 2C …": F(2,A) and F(2,B) read version 0, F(2,C)
   * reads 1 (after U(1)); B(2) names version 0, the oldest of its stashes */
  g_autoptr(TpSchedule) t = tpt_preset("i-timeprest", 2, 3, 4);
  const TpOp *o = tp_stage_ops(t, 0);
  const int want[][3] = { /* kind, mini-batch, version */
    { TP_OP_F, 1, 0 }, { TP_OP_F, 1, 0 }, { TP_OP_F, 1, 0 }, { TP_OP_F, 2, 0 }, { TP_OP_F, 2, 0 },
    { TP_OP_B, 1, 0 }, { TP_OP_U, 1, 0 }, { TP_OP_F, 2, 1 }, { TP_OP_F, 3, 1 }, { TP_OP_F, 3, 1 },
    { TP_OP_B, 2, 0 },
  };
  for (guint k = 0; k < G_N_ELEMENTS(want); k++) {
    g_assert_cmpint(o[k].kind, ==, want[k][0]);
    g_assert_cmpint(o[k].mb, ==, want[k][1]);
    g_assert_cmpint(o[k].ver, ==, want[k][2]);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/schedule/timeprest-grid", test_timeprest_grid);
  g_test_add_func("/schedule/grid-shape", test_grid_shape);
  g_test_add_func("/schedule/nf1b-admission", test_admission);
  g_test_add_func("/schedule/1f1b-warmup", test_1f1b_warmup);
  g_test_add_func("/schedule/eq2-grid", test_eq2_grid);
  g_test_add_func("/schedule/v-by-policy", test_v_by_policy);
  g_test_add_func("/schedule/vsync-consistent", test_vsync_consistent);
  g_test_add_func("/schedule/bad-pairs", test_bad_pairs);
  g_test_add_func("/schedule/significance", test_significance);
  g_test_add_func("/schedule/intermediate-sources", test_intermediate_sources);
  return g_test_run();
}
