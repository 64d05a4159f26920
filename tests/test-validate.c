/* test-validate.c — the validator rejects hand-made broken schedules, each with its own message
 * naming the operation (and file:line when read from a file). */
#include "tp_cost.h"
#include "tp_costed.h"
#include "tp_policy.h"
#include "tp_replay.h"
#include "tp_test.h"
#include "tp_validate.h"

static void expect_invalid(const TpSchedule *s, const char *needle)
{
  GError *err = NULL;
  g_assert_false(tp_validate(s, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  if (!strstr(err->message, needle))
    g_error("message '%s' lacks '%s'", err->message, needle);
  g_assert_null(strchr(err->message, '\n'));
  g_error_free(err);
}

static int find(const TpSchedule *s, int st, TpOpKind kind, int mb, int micro)
{
  const TpOp *ops = tp_stage_ops(s, st);
  for (int k = 0; k < tp_stage_len(s, st); k++)
    if (ops[k].kind == kind && ops[k].mb == mb && (kind == TP_OP_U || ops[k].micro == micro))
      return k;
  g_assert_not_reached();
  return -1;
}

static void move_op(TpSchedule *s, int st, int from, int to)
{
  TpOp op = tp_stage_ops(s, st)[from];
  g_array_remove_index(s->stage[st], (guint)from);
  g_array_insert_val(s->stage[st], (guint)to, op);
}

static void test_generated_valid(void)
{
  for (int i = 0; i < tp_n_presets; i++)
    for (int W = 1; W <= 6; W++)
      for (int N = 1; N <= 6; N++) {
        if ((tp_presets[i].order == TP_ORDER_2BW && N < W) ||
            (tp_presets[i].order == TP_ORDER_INTERLEAVED_1F1B && N % W) ||
            (tp_presets[i].order == TP_ORDER_DUALPIPE_V && N < 2 * W))
          continue;
        g_autoptr(TpSchedule) s = tpt_preset(tp_presets[i].name, W, N, 2 * W + 3);
        GError *err = NULL;
        g_assert_true(tp_validate(s, &err));
        g_assert_no_error(err);
      }
}

static void test_missing(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 3, 2, 6);
  g_array_remove_index(s->stage[1], (guint)find(s, 1, TP_OP_F, 4, 1));
  expect_invalid(s, "stage 2 has no F(4,B)");
  g_autoptr(TpSchedule) u = tpt_preset("gpipe", 2, 2, 2);
  g_array_remove_index(u->stage[0], (guint)find(u, 0, TP_OP_U, 2, 0));
  expect_invalid(u, "stage 1 has no U(2)");
}

static void test_duplicate(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("1f1b", 3, 3, 2);
  TpOp dup = tp_stage_ops(s, 2)[0];
  g_array_append_val(s->stage[2], dup);
  expect_invalid(s, "F(1,A) at stage 3: duplicate operation");
}

static void test_wrong_order(void)
{
  /* a backward before the forward whose activations it needs */
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 3, 2, 6);
  move_op(s, 2, find(s, 2, TP_OP_B, 1, TP_WHOLE), find(s, 2, TP_OP_F, 1, 1));
  expect_invalid(s, "B(1) at stage 3: needs the activations of F(1,B), which comes later");
  /* an update before its backward */
  g_autoptr(TpSchedule) t = tpt_preset("gpipe", 2, 2, 2);
  move_op(t, 1, find(t, 1, TP_OP_U, 1, 0), 0);
  expect_invalid(t, "U(1) at stage 2: comes before B(1,");
  /* updates out of mini-batch order */
  g_autoptr(TpSchedule) u = tpt_preset("v-timeprest", 2, 1, 3);
  int u2 = find(u, 0, TP_OP_U, 2, 0), u3 = find(u, 0, TP_OP_U, 3, 0);
  TpOp tmp = tp_stage_ops(u, 0)[u2];
  tp_stage_ops(u, 0)[u2] = tp_stage_ops(u, 0)[u3];
  tp_stage_ops(u, 0)[u3] = tmp;
  expect_invalid(u, "mini-batch order");
}

static void test_deadlock(void)
{
  /* stage 1 runs B(1) before F(2,A); stage 2 runs F(2,A) before B(1): each waits for the other */
  g_autoptr(TpSchedule) s = tpt_preset("v-timeprest", 2, 2, 3);
  int b1 = find(s, 0, TP_OP_B, 1, TP_WHOLE);
  move_op(s, 0, b1, find(s, 0, TP_OP_F, 2, 0));
  move_op(s, 0, find(s, 0, TP_OP_U, 1, 0), find(s, 0, TP_OP_B, 1, TP_WHOLE) + 1);
  move_op(s, 1, find(s, 1, TP_OP_F, 2, 0), find(s, 1, TP_OP_B, 1, TP_WHOLE));
  GError *err = NULL;
  g_assert_true(tp_policy_assign(s, &err));
  expect_invalid(s, "deadlock: ");
  expect_invalid(s, "deadlock: stage 1 waits at B(1) for B(1) from stage 2; stage 2 waits at F(2,A) for F(2,A) from stage 1, a cycle");
}

static void test_version_freed(void)
{
  /* latest keeps one version: reading an older one means reading freed weights */
  g_autoptr(TpSchedule) s = tpt_preset("v-timeprest", 3, 2, 6);
  tp_stage_ops(s, 1)[find(s, 1, TP_OP_F, 4, 0)].ver -= 1;
  expect_invalid(s, "F(4,A) at stage 2: reads version");
  expect_invalid(s, "after it was freed (policy latest keeps only the latest version");
  g_autoptr(TpSchedule) t = tpt_preset("pipedream-2bw", 2, 2, 6);
  tp_stage_ops(t, 0)[find(t, 0, TP_OP_F, 5, 1)].ver = 1;
  expect_invalid(t, "after it was freed (policy 2bw keeps the two latest versions");
}

/* A file's order names the shape of its backwards: a relabelled file is refused at its first backward
 * of another shape. */
static void test_order_label(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 2, 2, 4);
  s->order = TP_ORDER_GPIPE, s->policy = TP_POLICY_SYNC;
  expect_invalid(s, "B(1) at stage 1: order gpipe runs each backward on one micro-batch (B(i,A), …)");
  g_autoptr(TpSchedule) g = tpt_preset("gpipe", 2, 2, 4);
  g->order = TP_ORDER_NF1B, g->policy = TP_POLICY_VSYNC_LATEST;
  expect_invalid(g, "order nf1b runs each backward on the whole mini-batch (B(i), no micro-batch)");
}

/* A header of large sizes over too few rows is refused before its sizes are allocated for. */
static void test_too_few_rows(void)
{
  const char *text = "# timeprest-schedule order=nf1b policy=vsync-latest workers=1 micro_batches=4096 "
                     "mini_batches=24000\nstage,op,mini_batch,micro_batch,version,source\n1,F,1,1,0,fixed\n";
  GError *err = NULL;
  g_autoptr(TpSchedule) s = tp_schedule_parse(text, strlen(text), "big.csv", &err);
  g_assert_no_error(err);
  g_assert_false(tp_validate(s, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_assert_cmpstr(err->message, ==, "big.csv: 1 operations, fewer than the 72000 of any complete schedule of W=1 "
                  "stages and K=24000 mini-batches (a forward, a backward and an update of each on each stage)");
  g_clear_error(&err);
  /* enough rows, but an index larger than the process may take: refused before it is made */
  g_autoptr(GString) rows = g_string_new("# timeprest-schedule order=nf1b policy=vsync-latest workers=1 "
                                         "micro_batches=4096 mini_batches=1000\nstage,op,mini_batch,micro_batch,version,source\n");
  for (int i = 1; i <= 1000; i++)
    g_string_append_printf(rows, "1,F,%d,,%d,fixed\n1,B,%d,,%d,fixed\n1,U,%d,,%d,fixed\n", i, i - 1, i, i - 1, i, i - 1);
  g_autoptr(TpSchedule) t = tp_schedule_parse(rows->str, rows->len, "wide.csv", &err);
  g_assert_no_error(err);
  g_setenv("TP_MEMORY_LIMIT", "10M", TRUE);
  g_assert_false(tp_validate(t, &err));
  g_unsetenv("TP_MEMORY_LIMIT");
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_assert_nonnull(g_strstr_len(err->message, -1, "wide.csv: W=1, N=4096, K=1000: validating the schedule needs about"));
  g_clear_error(&err);
  g_assert_true(tp_validate(t, &err)); /* and it is a valid schedule */
}

static void test_version_future(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 3, 2, 6);
  tp_stage_ops(s, 0)[find(s, 0, TP_OP_F, 2, 0)].ver = 3;
  expect_invalid(s, "F(2,A) at stage 1: reads version 3, which does not exist yet");
  /* an update's row: the version it turns into the next, from no other source */
  g_autoptr(TpSchedule) u = tpt_preset("timeprest", 2, 2, 4);
  tp_stage_ops(u, 0)[find(u, 0, TP_OP_U, 1, TP_WHOLE)].ver = 3;
  expect_invalid(u, "U(1) at stage 1: turns version 0 into 1, so its row says version 0, source fixed (not 3, fixed)");
  g_autoptr(TpSchedule) b = tpt_preset("timeprest", 2, 2, 4);
  tp_stage_ops(b, 1)[find(b, 1, TP_OP_U, 2, TP_WHOLE)].src = TP_SRC_BLEND;
  expect_invalid(b, "U(2) at stage 2: turns version 1 into 2, so its row says version 1, source fixed (not 1, blend)");
}

static void test_version_rule(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("pipedream", 3, 2, 8);
  TpOp *b = &tp_stage_ops(s, 0)[find(s, 0, TP_OP_B, 6, TP_WHOLE)];
  b->ver += 1;
  expect_invalid(s, "B(6) at stage 1: reads version");
  expect_invalid(s, "a backward reads the versions its forwards stashed");
  g_autoptr(TpSchedule) t = tpt_preset("timeprest", 5, 2, 12);
  tp_stage_ops(t, 2)[find(t, 2, TP_OP_F, 7, 1)].ver -= 1;
  expect_invalid(t, "vertical sync");
}

/* A schedule file names file:line of the first offending operation. */
static void test_file_line(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("v-timeprest", 2, 1, 2);
  g_autoptr(GString) text = g_string_new(NULL);
  tp_format_csv(s, text);
  /* line 4 is stage 1's second op (F(2)) in this schedule: make it read a future version */
  g_auto(GStrv) lines = g_strsplit_set(text->str, "\n", -1);
  g_assert_cmpstr(lines[3], ==, "1,F,2,1,0,fixed");
  g_free(lines[3]);
  lines[3] = g_strdup("1,F,2,1,2,fixed");
  g_autofree char *bad = g_strjoinv("\n", lines);
  g_autofree char *path = tpt_tmp_path("bad.csv");
  g_assert_true(g_file_set_contents(path, bad, -1, NULL));
  GError *err = NULL;
  g_assert_null(tp_schedule_load(path, &err));
  g_autofree char *want = g_strdup_printf("%s:4: F(2,A) at stage 1: reads version 2", path);
  g_assert_nonnull(err);
  if (!g_str_has_prefix(err->message, want))
    g_error("'%s' does not start with '%s'", err->message, want);
  g_error_free(err);
  tpt_tmp_remove(path);
}

/* Set the version of every backward of mini-batch mb (0: of every mini-batch) on every stage. */
static void set_backward_versions(TpSchedule *s, int mb, int ver)
{
  for (int st = 0; st < s->W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      TpOp *op = &tp_stage_ops(s, st)[k];
      if (op->kind == TP_OP_B && (mb == 0 || op->mb == mb))
        op->ver = ver;
    }
}

/* The reported case: timeprest W=4 N=2 K=12 as CSV with every backward's version set to 0 is
 * refused by the library (file:line, operation, expected and found version) and by the program. */
static void test_vsync_backward_zeroed(void)
{
  TptRun g = tpt_run((const char *const[]){ "schedule", "-s", "timeprest", "-w", "4", "-n", "2", "-k", "12",
                                            "--format", "csv", NULL });
  g_assert_cmpint(g.status, ==, 0);
  g_auto(GStrv) lines = g_strsplit_set(g.out, "\n", -1);
  int b3 = 0; /* line of B(3) at stage 4, the first backward whose c(i) is not 0 */
  for (int ln = 0; lines[ln]; ln++) {
    g_auto(GStrv) f = g_strsplit(lines[ln], ",", -1);
    if (g_strv_length(f) == 6 && strcmp(f[1], "B") == 0) {
      g_free(lines[ln]);
      lines[ln] = g_strdup_printf("%s,B,%s,%s,0,%s", f[0], f[2], f[3], f[5]);
      if (!b3 && strcmp(f[0], "4") == 0 && strcmp(f[2], "3") == 0)
        b3 = ln + 1;
    }
  }
  g_assert_cmpint(b3, >, 0);
  g_autofree char *bad = g_strjoinv("\n", lines);
  g_autofree char *path = tpt_tmp_path("zeroed.csv");
  g_assert_true(g_file_set_contents(path, bad, -1, NULL));
  g_autofree char *want = g_strdup_printf("%s:%d: B(3) at stage 4: reads version 0, expected 1: ", path, b3);
  GError *err = NULL;
  g_assert_null(tp_schedule_load(path, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  if (!g_str_has_prefix(err->message, want))
    g_error("'%s' does not start with '%s'", err->message, want);
  g_assert_null(strchr(err->message, '\n'));
  g_clear_error(&err);
  const char *cmds[] = { "schedule", "simulate" };
  for (guint i = 0; i < G_N_ELEMENTS(cmds); i++) {
    TptRun r = tpt_run((const char *const[]){ cmds[i], "--input", path, NULL });
    g_assert_cmpint(r.status, ==, 2);
    g_assert_nonnull(strstr(r.err, want));
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    g_assert_cmpstr(r.out, ==, "");
    tpt_run_clear(&r);
  }
  tpt_run_clear(&g);
  tpt_tmp_remove(path);
}

/* Each backward version off by one from c(i), the same on every stage, is refused; so is a
 * forward version that all stages agree on but that is not stage 1's latest. */
static void test_vsync_versions_checked(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 5, 2, 14);
  for (int i = 1; i <= s->K; i++) {
    int c = tp_stage_ops(s, 0)[find(s, 0, TP_OP_B, i, TP_WHOLE)].ver;
    g_autofree char *what = g_strdup_printf("B(%d) at stage 5: reads version %d, expected %d", i, c + 1, c);
    set_backward_versions(s, i, c + 1);
    expect_invalid(s, "B(");
    if (c > 0) {
      set_backward_versions(s, i, c - 1);
      g_autofree char *lower = g_strdup_printf("B(%d) at stage 5: reads version %d, expected %d", i, c - 1, c);
      expect_invalid(s, lower);
    }
    set_backward_versions(s, i, c);
  }
  GError *err = NULL;
  g_assert_true(tp_validate(s, &err));
  for (int st = 0; st < s->W; st++)
    tp_stage_ops(s, st)[find(s, st, TP_OP_F, 9, 1)].ver -= 1;
  expect_invalid(s, "F(9,B) at stage 1: reads version");
  expect_invalid(s, "on stage 1 a forward reads the latest version");
}

/* The causal bounds hold c(i) on unit slots, stay at most i-1, and are not all tight. */
static void test_causal_bounds(void)
{
  const char *presets[] = { "timeprest", "timeprest-1f1b" };
  int loose = 0;
  for (guint p = 0; p < G_N_ELEMENTS(presets); p++)
    for (int W = 1; W <= 6; W++)
      for (int N = 1; N <= 4; N++) {
        g_autoptr(TpSchedule) s = tpt_preset(presets[p], W, N, 3 * W + 4);
        g_autoptr(TpIndex) ix = tp_index_new(s, NULL);
        int32_t *lo = g_new(int32_t, s->K + 1), *hi = g_new(int32_t, s->K + 1);
        g_assert_true(tp_causal_bounds(s, ix, lo, hi));
        for (int i = 1; i <= s->K; i++) {
          int c = tp_stage_ops(s, W - 1)[find(s, W - 1, TP_OP_B, i, TP_WHOLE)].ver;
          g_assert_cmpint(lo[i], <=, c);
          g_assert_cmpint(c, <=, hi[i]);
          g_assert_cmpint(hi[i], <=, i - 1);
          loose += lo[i] < hi[i];
        }
        g_free(lo);
        g_free(hi);
      }
  g_assert_cmpint(loose, >, 0);
  /* timeprest W=3 N=2: U(1) ends at stage 1 as B(2) starts at stage 3 (slot 7), without a message
   * between them: c(2) = 1 on unit slots, 0 to 1 on any timeline */
  g_autoptr(TpSchedule) t = tpt_preset("timeprest", 3, 2, 6);
  g_autoptr(TpIndex) ix = tp_index_new(t, NULL);
  int32_t lo[7], hi[7];
  g_assert_true(tp_causal_bounds(t, ix, lo, hi));
  g_assert_cmpint(lo[2], ==, 0);
  g_assert_cmpint(hi[2], ==, 1);
  g_assert_cmpint(tp_stage_ops(t, 2)[find(t, 2, TP_OP_B, 2, TP_WHOLE)].ver, ==, 1);
}

static TpSchedule *costed_timeprest(void)
{
  const char *text = "[stages]\nforward = 1, 3, 1, 2\nbackward = 2, 5, 2, 4\nupdate = 0.5\n"
                     "activation_bytes = 100\ndevice = 1, 2, 1, 3\n[links]\nlatency = 0.25\nbandwidth = 80\n";
  GError *err = NULL;
  g_autoptr(TpCost) c = tp_cost_parse(text, strlen(text), "test.cost", 4, &err);
  g_assert_no_error(err);
  TpSchedule *s = tp_schedule_generate_costed(TP_ORDER_NF1B, TP_POLICY_VSYNC_LATEST, 4, 3, 12, c, &err);
  g_assert_no_error(err);
  g_assert_cmpint(s->fixed_on, ==, TP_FIXED_ON_COSTS);
  return s;
}

/* A schedule fixed on costs keeps fixed_on through CSV and JSON and validates; read as fixed on
 * unit slots (the header says so, or, as in older files, says nothing) its versions are refused. */
static void test_costs_round_trip(void)
{
  g_autoptr(TpSchedule) s = costed_timeprest();
  for (int json = 0; json < 2; json++) {
    g_autoptr(GString) text = g_string_new(NULL);
    (json ? tp_format_json : tp_format_csv)(s, text);
    const char *key = json ? "\"order_fixed_on\": \"costs\"" : " fixed_on=costs";
    g_assert_nonnull(strstr(text->str, key));
    GError *err = NULL;
    g_autoptr(TpSchedule) back = tp_schedule_parse(text->str, text->len, "x", &err);
    g_assert_no_error(err);
    g_assert_cmpint(back->fixed_on, ==, TP_FIXED_ON_COSTS);
    g_assert_true(tp_schedule_equal(s, back));
    g_assert_true(tp_validate(back, &err));
    g_assert_no_error(err);
    const char *as_slots[] = { json ? "\"order_fixed_on\": \"slots\"" : " fixed_on=slots", "" };
    for (guint i = 0; i < G_N_ELEMENTS(as_slots); i++) {
      g_autoptr(GString) other = g_string_new(text->str);
      g_assert_cmpint(g_string_replace(other, json && !*as_slots[i] ? "  \"order_fixed_on\": \"costs\",\n" : key,
                                       as_slots[i], 1), ==, 1);
      g_autoptr(TpSchedule) t = tp_schedule_parse(other->str, other->len, "x", &err);
      g_assert_no_error(err);
      g_assert_cmpint(t->fixed_on, ==, TP_FIXED_ON_SLOTS);
      expect_invalid(t, "on the unit-slot timeline the order was fixed on");
    }
  }
}

/* A costs-fixed schedule whose backward version leaves the causal bounds is refused. */
static void test_costs_tampered(void)
{
  g_autoptr(TpSchedule) s = costed_timeprest();
  g_autoptr(TpIndex) ix = tp_index_new(s, NULL);
  int32_t lo[13], hi[13];
  g_assert_true(tp_causal_bounds(s, ix, lo, hi));
  int below = 0, above = 0;
  for (int i = 1; i <= s->K; i++) {
    int c = tp_stage_ops(s, 3)[find(s, 3, TP_OP_B, i, TP_WHOLE)].ver;
    g_assert_cmpint(lo[i], <=, c);
    g_assert_cmpint(c, <=, hi[i]);
    int bad[2] = { lo[i] - 1, hi[i] + 1 };
    for (int b = 0; b < 2; b++) {
      if (bad[b] < 0)
        continue;
      set_backward_versions(s, i, bad[b]);
      GError *err = NULL;
      g_assert_false(tp_validate(s, &err));
      g_autofree char *want = g_strdup_printf("B(%d) at stage 4: reads version %d, expected %d to %d: ", i, bad[b],
                                              lo[i], hi[i]);
      if (strstr(err->message, want))
        *(b ? &above : &below) += 1;
      else if (!strstr(err->message, "does not exist yet"))
        g_error("B(%d) reading %d: unexpected '%s'", i, bad[b], err->message);
      g_error_free(err);
    }
    set_backward_versions(s, i, c);
  }
  /* above hi[i], the version does not exist yet on stage 1 when B(i) runs there (hi[i] counts at
   * least the updates before B(i) in stage 1's order): that check comes first */
  g_assert_cmpint(below, >, 0);
  g_assert_cmpint(above, ==, 0);
  GError *err = NULL;
  g_assert_true(tp_validate(s, &err));
  g_assert_no_error(err);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/validate/generated-valid", test_generated_valid);
  g_test_add_func("/validate/missing", test_missing);
  g_test_add_func("/validate/duplicate", test_duplicate);
  g_test_add_func("/validate/wrong-order", test_wrong_order);
  g_test_add_func("/validate/deadlock", test_deadlock);
  g_test_add_func("/validate/version-freed", test_version_freed);
  g_test_add_func("/validate/version-future", test_version_future);
  g_test_add_func("/validate/too-few-rows", test_too_few_rows);
  g_test_add_func("/validate/order-label", test_order_label);
  g_test_add_func("/validate/version-rule", test_version_rule);
  g_test_add_func("/validate/file-line", test_file_line);
  g_test_add_func("/validate/vsync-backward-zeroed", test_vsync_backward_zeroed);
  g_test_add_func("/validate/vsync-versions-checked", test_vsync_versions_checked);
  g_test_add_func("/validate/causal-bounds", test_causal_bounds);
  g_test_add_func("/validate/costs-round-trip", test_costs_round_trip);
  g_test_add_func("/validate/costs-tampered", test_costs_tampered);
  return g_test_run();
}
