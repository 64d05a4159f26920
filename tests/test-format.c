/* test-format.c — text forms: CSV and JSON round trips for every preset, grid tokens for
 * N > 26, and one-line errors with file:line for malformed files. */
#include "tp_policy.h"
#include "tp_test.h"

static TpSchedule *reparse(const TpSchedule *s, gboolean json)
{
  g_autoptr(GString) text = g_string_new(NULL);
  (json ? tp_format_json : tp_format_csv)(s, text);
  GError *err = NULL;
  TpSchedule *back = tp_schedule_parse(text->str, text->len, json ? "x.json" : "x.csv", &err);
  g_assert_no_error(err);
  g_assert_nonnull(back);
  return back;
}

static void test_round_trips(void)
{
  const int sizes[][3] = { { 1, 1, 1 }, { 2, 2, 3 }, { 3, 2, 7 }, { 4, 4, 6 }, { 5, 8, 4 }, { 6, 2, 13 }, { 2, 30, 3 } };
  for (int i = 0; i < tp_n_presets; i++)
    for (guint z = 0; z < G_N_ELEMENTS(sizes); z++) {
      int W = sizes[z][0], N = sizes[z][1], K = sizes[z][2];
      if (tp_presets[i].order == TP_ORDER_2BW && N < W)
        continue;
      g_autoptr(TpSchedule) s = tpt_preset(tp_presets[i].name, W, N, K);
      if (s->policy == TP_POLICY_INTERMEDIATE)
        s->sig = (TpSignificance){ TP_SIG_CONST, 0.25 };
      for (int json = 0; json < 2; json++) {
        g_autoptr(TpSchedule) back = reparse(s, json);
        g_assert_true(tp_schedule_equal(s, back));
        g_assert_cmpint(back->fixed_on, ==, TP_FIXED_ON_SLOTS);
        /* printing again gives the same bytes */
        g_autoptr(GString) a = g_string_new(NULL), b = g_string_new(NULL);
        (json ? tp_format_json : tp_format_csv)(s, a);
        (json ? tp_format_json : tp_format_csv)(back, b);
        g_assert_cmpstr(a->str, ==, b->str);
      }
    }
}

/* A changed version or micro-batch is seen by the comparison (the round trip test can fail). */
static void test_equal_detects(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 3, 2, 5);
  g_autoptr(TpSchedule) t = reparse(s, TRUE);
  tp_stage_ops(t, 1)[4].ver++;
  g_assert_false(tp_schedule_equal(s, t));
}

/* A header without fixed_on (files written before it existed) means unit slots. */
static void test_fixed_on_absent(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 3, 2, 5);
  s->fixed_on = TP_FIXED_ON_COSTS;
  for (int json = 0; json < 2; json++) {
    g_autoptr(GString) text = g_string_new(NULL);
    (json ? tp_format_json : tp_format_csv)(s, text);
    g_autoptr(TpSchedule) costs = reparse(s, json);
    g_assert_cmpint(costs->fixed_on, ==, TP_FIXED_ON_COSTS);
    g_assert_cmpuint(g_string_replace(text, json ? "  \"order_fixed_on\": \"costs\",\n" : " fixed_on=costs", "", 0), ==, 1);
    GError *err = NULL;
    g_autoptr(TpSchedule) old = tp_schedule_parse(text->str, text->len, "old", &err);
    g_assert_no_error(err);
    g_assert_cmpint(old->fixed_on, ==, TP_FIXED_ON_SLOTS);
  }
}

static void test_wide_tokens(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("gpipe", 2, 30, 1);
  g_autofree char *grid = tpt_grid(s);
  g_assert_true(g_str_has_prefix(grid, "1.1 1.2 1.3 "));
  g_assert_nonnull(strstr(grid, " 1.27 "));
  g_assert_nonnull(strstr(grid, " 1.27b "));
  g_autoptr(TpSchedule) p = tpt_preset("pipedream", 2, 4, 2);
  g_autofree char *pg = tpt_grid(p);
  g_assert_cmpstr(pg, ==, "1A 2A . 1 . 2\n. 1A 1 2A 2 .\n");
}

/* One formatter names operations in messages, grids, plots and traces. */
static void test_op_names(void)
{
  struct { TpNameStyle style; TpOpKind kind; int mb, micro; gboolean wide; const char *want; } cases[] = {
    { TP_NAME_CALL, TP_OP_F, 3, 1, FALSE, "F(3,B)" },   { TP_NAME_CALL, TP_OP_B, 3, TP_WHOLE, FALSE, "B(3)" },
    { TP_NAME_CALL, TP_OP_B, 3, 0, FALSE, "B(3,A)" },   { TP_NAME_CALL, TP_OP_U, 3, TP_WHOLE, FALSE, "U(3)" },
    { TP_NAME_CALL, TP_OP_F, 3, 26, TRUE, "F(3.27)" },  { TP_NAME_CALL, TP_OP_F, 12, TP_WHOLE, FALSE, "F(12)" },
    { TP_NAME_GRID, TP_OP_F, 3, 1, FALSE, "3B" },       { TP_NAME_GRID, TP_OP_F, 3, TP_WHOLE, FALSE, "3A" },
    { TP_NAME_GRID, TP_OP_B, 3, TP_WHOLE, FALSE, "3" }, { TP_NAME_GRID, TP_OP_B, 3, 1, FALSE, "3b" },
    { TP_NAME_GRID, TP_OP_F, 3, 26, TRUE, "3.27" },     { TP_NAME_GRID, TP_OP_B, 3, 26, TRUE, "3.27b" },
    { TP_NAME_LABEL, TP_OP_F, 3, 1, FALSE, "F 3B" },    { TP_NAME_LABEL, TP_OP_B, 3, 1, FALSE, "B 3B" },
    { TP_NAME_LABEL, TP_OP_F, 3, TP_WHOLE, FALSE, "F 3" }, { TP_NAME_LABEL, TP_OP_U, 3, TP_WHOLE, FALSE, "U 3" },
    { TP_NAME_LABEL, TP_OP_F, 3, 26, TRUE, "F 3.27" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char buf[32];
    tp_op_format(cases[i].style, cases[i].kind, cases[i].mb, cases[i].micro, cases[i].wide, buf, sizeof buf);
    g_assert_cmpstr(buf, ==, cases[i].want);
  }
  g_autoptr(TpSchedule) s = tpt_preset("gpipe", 2, 30, 1);
  char buf[32];
  tp_op_name(s, &tp_stage_ops(s, 0)[26], buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "F(1.27)");
}

static void expect_parse_error(const char *text, const char *needle)
{
  GError *err = NULL;
  TpSchedule *s = tp_schedule_parse(text, strlen(text), "bad.sched", &err);
  g_assert_null(s);
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  if (!strstr(err->message, needle))
    g_error("message '%s' lacks '%s'", err->message, needle);
  g_assert_null(strchr(err->message, '\n'));
  g_assert_null(strstr(err->message, "<data>"));
  g_error_free(err);
}

#define HDR "# timeprest-schedule order=nf1b policy=latest workers=2 micro_batches=1 mini_batches=1\n" \
            "stage,op,mini_batch,micro_batch,version,source\n"

static void test_parse_errors(void)
{
  expect_parse_error("stage,op\n", "bad.sched:1: expected the '# timeprest-schedule");
  expect_parse_error("# timeprest-schedule order=nf1b policy=latest workers=2 micro_batches=1\n", "header needs");
  expect_parse_error("# timeprest-schedule order=zigzag policy=latest workers=2 micro_batches=1 mini_batches=1\n",
                     "bad.sched:1: bad value 'zigzag' for order");
  expect_parse_error("# timeprest-schedule order=nf1b policy=latest workers=0 micro_batches=1 mini_batches=1\n",
                     "bad value '0' for workers");
  expect_parse_error("# timeprest-schedule order=nf1b policy=latest workers=2 micro_batches=1 mini_batches=1\nx,y\n",
                     "bad.sched:2: expected the column line");
  expect_parse_error(HDR "1,F,1,1,0,fixed\n1,Q,1,1,0,fixed\n", "bad.sched:4: bad op");
  expect_parse_error("# timeprest-schedule order=nf1b policy=latest workers=2 micro_batches=1 mini_batches=1 "
                     "fixed_on=hours\n", "bad.sched:1: bad value 'hours' for fixed_on");
  expect_parse_error("{\"order\": \"nf1b\", \"policy\": \"latest\", \"workers\": 1, \"micro_batches\": 1, "
                     "\"mini_batches\": 1, \"order_fixed_on\": \"x\", \"stages\": [[]]}",
                     "bad value 'x' for order_fixed_on");
  expect_parse_error(HDR "3,F,1,1,0,fixed\n", "bad.sched:3: bad stage");
  expect_parse_error(HDR "1,F,2,1,0,fixed\n", "bad.sched:3: bad mini_batch");
  expect_parse_error(HDR "1,F,1,2,0,fixed\n", "bad.sched:3: bad micro_batch");
  expect_parse_error(HDR "1,F,1,1,-1,fixed\n", "bad.sched:3: bad version");
  expect_parse_error(HDR "1,F,1,1,0,shiny\n", "bad.sched:3: bad source");
  expect_parse_error(HDR "1,F,1,1,0\n", "bad.sched:3: expected 6 comma-separated fields");
  expect_parse_error("{\"format\": \"timeprest-schedule\", \"order\": \"nf1b\",\n \"policy\": ", "bad.sched:2:");
  /* json-glib quotes the offending text, newlines and all: still one line, no "<data>" */
  expect_parse_error("{\"stages\": [[{\"op\": \"F\", \"version\n   {\"op\": 1}]]}", "bad.sched:2:");
  expect_parse_error("{\"order\": \"nf1b\", \"policy\": \"latest\", \"workers\": 1, \"micro_batches\": 1, "
                     "\"mini_batches\": 1, \"stages\": [[\n{\"op\": \"F\", \"mini_batch\": 1, \"micro_batch\": 1, "
                     "\"version\": 0},\n{\"op\": \"F\", \"mini_batch\": \"x\", \"micro_batch\": 1, \"version\": 0}\n]]}",
                     "bad.sched:3: stages[0][1]: bad mini_batch");
  expect_parse_error("{\"order\": \"nf1b\", \"policy\": \"latest\", \"workers\": 2, \"micro_batches\": 1, "
                     "\"mini_batches\": 1, \"stages\": [[]]}", "one per stage");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/format/round-trips", test_round_trips);
  g_test_add_func("/format/equal-detects", test_equal_detects);
  g_test_add_func("/format/wide-tokens", test_wide_tokens);
  g_test_add_func("/format/op-names", test_op_names);
  g_test_add_func("/format/fixed-on-absent", test_fixed_on_absent);
  g_test_add_func("/format/parse-errors", test_parse_errors);
  return g_test_run();
}
