/* test-validate.c — the validator rejects hand-made broken schedules, each with its own message
 * naming the operation (and file:line when read from a file). */
#include "tp_policy.h"
#include "tp_test.h"
#include "tp_validate.h"

#include <glib/gstdio.h>

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
        if (tp_presets[i].order == TP_ORDER_2BW && N < W)
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

static void test_version_future(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 3, 2, 6);
  tp_stage_ops(s, 0)[find(s, 0, TP_OP_F, 2, 0)].ver = 3;
  expect_invalid(s, "F(2,A) at stage 1: reads version 3, which does not exist yet");
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
  g_auto(GStrv) lines = g_strsplit(text->str, "\n", -1);
  g_assert_cmpstr(lines[3], ==, "1,F,2,1,0,fixed");
  g_free(lines[3]);
  lines[3] = g_strdup("1,F,2,1,2,fixed");
  g_autofree char *bad = g_strjoinv("\n", lines);
  g_autofree char *path = g_build_filename(g_get_tmp_dir(), "tp-test-bad.csv", NULL);
  g_assert_true(g_file_set_contents(path, bad, -1, NULL));
  GError *err = NULL;
  g_assert_null(tp_schedule_load(path, &err));
  g_autofree char *want = g_strdup_printf("%s:4: F(2,A) at stage 1: reads version 2", path);
  g_assert_nonnull(err);
  if (!g_str_has_prefix(err->message, want))
    g_error("'%s' does not start with '%s'", err->message, want);
  g_error_free(err);
  g_unlink(path);
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
  g_test_add_func("/validate/version-rule", test_version_rule);
  g_test_add_func("/validate/file-line", test_file_line);
  return g_test_run();
}
