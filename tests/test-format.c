/* test-format.c — text forms: CSV and JSON round trips for every preset, grid tokens for
 * N > 26, and one-line errors with file:line for malformed files. */
#include "tp_policy.h"
#include "tp_cost.h"
#include "tp_events.h"
#include "tp_report.h"
#include "tp_trace.h"
#include "tp_test.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <unistd.h>

#define PINNED_DIGEST "4b495d69d8929f9e0dde2d858c4eb856f520f0d07c8445a7383eeb1cacedb662"
/* zb-v and interleaved-1f1b on 2 workers, 4 micro-batches, 3 mini-batches, as recorded before the
 * records could mark F&B composites: a schedule without them keeps its digest */
#define PINNED_ZBV "ace67d065b8d564b29d5a86298d83da27bd2d06876fabc5bcade3ef98faf51cf"
#define PINNED_INTERLEAVED "9cbf7e12b2e7eb8f8e3b150899bf253dd326029a106dda15d5736766acbc5bdc"

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
      if ((tp_presets[i].order == TP_ORDER_2BW && N < W) || tp_order_chunked(tp_presets[i].order))
        continue; /* interleaved stages: tests/test-interleaved */
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

/* The schedule's digest, built here from its CSV text as docs/formats.md defines the record (the
 * header line led by "timeprest-schedule-digest 2 ", then per row a tag byte — kind, source << 3,
 * 32 when the stage changes, 64 when a micro-batch is named, 128 when the composite column says fb —
 * the stage if it changed, zigzag LEB128 mini-batch minus the row before's, the micro-batch,
 * mini-batch minus version) and hashed by GLib's own SHA-256: an independent reading of the format
 * and of the hash. */
static void put_leb(GByteArray *b, guint64 v)
{
  for (; v >= 0x80; v >>= 7) {
    guint8 c = (guint8)(v | 0x80);
    g_byte_array_append(b, &c, 1);
  }
  guint8 c = (guint8)v;
  g_byte_array_append(b, &c, 1);
}

static guint64 zz(gint64 v) { return v < 0 ? ((guint64)(-v) << 1) - 1 : (guint64)v << 1; }

static char *digest_from_csv(const char *csv)
{
  g_auto(GStrv) lines = g_strsplit_set(csv, "\n", -1);
  g_assert_true(g_str_has_prefix(lines[0], "# timeprest-schedule "));
  g_autoptr(GByteArray) rec = g_byte_array_new();
  g_autofree char *head = g_strdup_printf("timeprest-schedule-digest 2 %s\n", lines[0] + strlen("# timeprest-schedule "));
  g_byte_array_append(rec, (const guint8 *)head, (guint)strlen(head));
  gboolean fb = strcmp(lines[1], "stage,op,mini_batch,micro_batch,version,source,composite") == 0;
  if (!fb)
    g_assert_cmpstr(lines[1], ==, "stage,op,mini_batch,micro_batch,version,source");
  gint64 prev_st = 0, prev_mb = 0;
  for (int i = 2; lines[i] && *lines[i]; i++) {
    g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
    g_assert_cmpuint(g_strv_length(f), ==, fb ? 7 : 6);
    gint64 st = g_ascii_strtoll(f[0], NULL, 10) - 1, mb = g_ascii_strtoll(f[2], NULL, 10),
           ver = g_ascii_strtoll(f[4], NULL, 10);
    int kind = (int)(strchr("FBUIW", f[1][0]) - "FBUIW");
    int src = !strcmp(f[5], "fixed") ? 0 : !strcmp(f[5], "stash") ? 1 : 2;
    gboolean micro = *f[3] != '\0';
    gboolean opens = fb && strcmp(f[6], "fb") == 0;
    guint8 tag = (guint8)(kind | src << 3 | (st != prev_st) << 5 | micro << 6 | opens << 7);
    g_byte_array_append(rec, &tag, 1);
    if (st != prev_st)
      put_leb(rec, (guint64)st);
    put_leb(rec, zz(mb - prev_mb));
    if (micro)
      put_leb(rec, (guint64)(g_ascii_strtoll(f[3], NULL, 10) - 1));
    put_leb(rec, zz(mb - ver));
    prev_st = st, prev_mb = mb;
  }
  return g_compute_checksum_for_data(G_CHECKSUM_SHA256, rec->data, rec->len);
}

static void test_digest_record(void)
{
  const char *presets[] = { "gpipe", "1f1b", "pipedream", "pipedream-2bw", "timeprest", "i-timeprest",
                            "timeprest-stash", "zb-h2", "interleaved-1f1b", "zb-v", "dualpipe-v" };
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++) {
    g_autoptr(TpSchedule) s = tpt_preset(presets[i], 4, 8, 5);
    if (s->policy == TP_POLICY_INTERMEDIATE)
      s->sig = (TpSignificance){ TP_SIG_CONST, 0.25 };
    s->recompute = i % 2;
    g_autoptr(GString) csv = g_string_new(NULL);
    tp_format_csv(s, csv);
    g_autofree char *mine = tp_schedule_sha256(s), *theirs = digest_from_csv(csv->str);
    g_assert_cmpstr(mine, ==, theirs);
    /* the digest before the record, which old checkpoints carry: the CSV's */
    g_autofree char *old = tp_schedule_sha256_csv(s),
                    *want = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)csv->str, csv->len);
    g_assert_cmpstr(old, ==, want);
  }
  /* large schedules: the record written on ranges of stages at once, the same bytes */
  const char *large[] = { "timeprest", "1f1b" };
  for (guint i = 0; i < G_N_ELEMENTS(large); i++) {
    g_autoptr(TpSchedule) s = tpt_preset(large[i], 16, 8, 2000);
    g_autoptr(GString) csv = g_string_new(NULL);
    tp_format_csv(s, csv);
    g_autofree char *mine = tp_schedule_sha256(s), *theirs = digest_from_csv(csv->str);
    g_assert_cmpstr(mine, ==, theirs);
  }
  /* pinned: the same bytes on every machine and byte order, in every release that reads format 2 */
  g_autoptr(TpSchedule) small = tpt_preset("timeprest", 3, 2, 6);
  g_autofree char *pin = tp_schedule_sha256(small);
  g_assert_cmpstr(pin, ==, PINNED_DIGEST);
  g_autoptr(TpSchedule) zbv = tpt_preset("zb-v", 2, 4, 3), inter = tpt_preset("interleaved-1f1b", 2, 4, 3);
  g_autofree char *pin_zbv = tp_schedule_sha256(zbv), *pin_inter = tp_schedule_sha256(inter);
  g_assert_cmpstr(pin_zbv, ==, PINNED_ZBV);
  g_assert_cmpstr(pin_inter, ==, PINNED_INTERLEAVED);
}

/* Every field of every operation, the header and the order of rows reach the digest. */
static void test_digest_detects(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 3, 2, 5);
  g_autofree char *base = tp_schedule_sha256(s);
  for (int change = 0; change < 8; change++) {
    g_autoptr(TpSchedule) t = reparse(s, FALSE);
    TpOp *op = &tp_stage_ops(t, 1)[4], *next = &tp_stage_ops(t, 1)[5];
    switch (change) {
    case 0: op->ver++; break;
    case 1: op->mb++; break;
    case 2: op->micro = op->micro == TP_WHOLE ? 0 : TP_WHOLE; break;
    case 3: op->kind = op->kind == TP_OP_F ? TP_OP_B : TP_OP_F; break;
    case 4: op->src = (uint8_t)((op->src + 1) % 3); break;
    case 5: { TpOp x = *op; *op = *next; *next = x; break; }
    case 6: t->fixed_on = TP_FIXED_ON_COSTS; break;
    case 7: t->recompute = TRUE; break;
    }
    g_autofree char *d = tp_schedule_sha256(t);
    g_assert_cmpstr(d, !=, base);
  }
  /* an operation moved to the next stage at the boundary: only the stage marks tell them apart */
  g_autoptr(TpSchedule) u = reparse(s, FALSE);
  TpOp last = tp_stage_ops(u, 0)[tp_stage_len(u, 0) - 1];
  g_array_set_size(u->stage[0], u->stage[0]->len - 1);
  g_array_prepend_val(u->stage[1], last);
  g_autofree char *d = tp_schedule_sha256(u);
  g_assert_cmpstr(d, !=, base);
  /* F&B composites: dropped, or one moved to another forward */
  g_autoptr(TpSchedule) dp = tpt_preset("dualpipe-v", 2, 4, 1), bare = reparse(dp, FALSE), moved = reparse(dp, TRUE);
  tpt_drop_fb(bare);
  g_array_index(moved->fb[0], int32_t, 0)--;
  g_autofree char *with = tp_schedule_sha256(dp), *without = tp_schedule_sha256(bare), *other = tp_schedule_sha256(moved);
  g_assert_cmpstr(with, !=, without);
  g_assert_cmpstr(with, !=, other);
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
                     "bad.sched:1: workers: expected a whole number from 1 to 1024, got '0'");
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
  /* a header that says a thing twice or contradicts itself */
  expect_parse_error("# timeprest-schedule preset=gpipe order=nf1b policy=vsync-latest workers=2 micro_batches=1 "
                     "mini_batches=1\n", "bad.sched:1: order 'nf1b' contradicts the header's order gpipe, policy sync");
  expect_parse_error("# timeprest-schedule order=nf1b policy=vsync-latest preset=gpipe workers=2 micro_batches=1 "
                     "mini_batches=1\n", "bad.sched:1: preset 'gpipe' contradicts the header's order nf1b");
  expect_parse_error("# timeprest-schedule order=nf1b policy=latest workers=2 workers=2 micro_batches=1 "
                     "mini_batches=1\n", "bad.sched:1: header key 'workers' given twice");
  expect_parse_error("# timeprest-schedule order=nf1b policy=latest workers=2 micro_batches=1 mini_batches=1 "
                     "significance=exp:2\n", "bad.sched:1: header: significance is the intermediate policy's, not latest's");
  expect_parse_error("{\"preset\": \"gpipe\", \"order\": \"nf1b\", \"policy\": \"latest\", \"workers\": 1, "
                     "\"micro_batches\": 1, \"mini_batches\": 1, \"stages\": [[]]}",
                     "order 'nf1b' contradicts the header's order gpipe");
  /* JSON: what json-glib would take and JSON has not */
  expect_parse_error("{'order': 'nf1b'}", "bad.sched:1: a single quote: JSON strings take double quotes");
  expect_parse_error("{\"order\": \"nf1b\"\n/* x */}", "bad.sched:2: a slash outside a string: JSON has no comments");
  /* JSON: numbers and truth values are of their JSON types, not strings */
  expect_parse_error("{\"order\": \"nf1b\", \"policy\": \"latest\", \"workers\": \"2\"}",
                     "bad.sched:1: workers: expected a whole number");
  expect_parse_error("{\"order\": \"nf1b\", \"recompute\": \"true\"}", "bad.sched:1: recompute: expected true or false");
  expect_parse_error("{\"order\": \"nf1b\", \"policy\": \"latest\", \"workers\": 1, \"micro_batches\": 1, "
                     "\"mini_batches\": 1, \"stages\": [[\n{\"op\": \"F\", \"mini_batch\": 1, \"micro_batch\": 1, "
                     "\"version\": \"0\"}]]}", "bad.sched:2: stages[0][0]: bad version (expected a whole number)");
  /* JSON: a key twice in any object, a key spelt with an escape, a string cut by \u0000 */
  expect_parse_error("{\"order\": \"nf1b\", \"policy\": \"latest\", \"workers\": 1, \"micro_batches\": 1, "
                     "\"mini_batches\": 1, \"stages\": [[\n{\"op\": \"B\", \"op\": \"F\", \"mini_batch\": 1, "
                     "\"micro_batch\": 1, \"version\": 0}]]}", "bad.sched:2: key 'op' given twice");
  expect_parse_error("{\"order\": \"nf1b\", \"workers\": 1,\n\"work\\u0065rs\": 2}",
                     "bad.sched:2: key 'work\\\\u0065rs': a key is a plain name, without escapes");
  expect_parse_error("{\"order\": \"nf1b\\u0000x\"}", "bad.sched:1: a string holds \\u0000");
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

#define DPV "# timeprest-schedule order=dualpipe-v policy=sync workers=1 micro_batches=2 mini_batches=1 chunks=2 " \
            "chunk_map=v-shape\nstage,op,mini_batch,micro_batch,version,source,composite\n1,F,1,1,0,fixed,\n"    \
            "2,F,1,1,0,fixed,\n1,F,1,2,0,fixed,\n2,B,1,1,0,fixed,\n"
#define DPV_END "1,B,1,1,0,fixed,\n2,B,1,2,0,fixed,\n1,I,1,2,0,fixed,\n1,W,1,2,0,fixed,\n1,U,1,,0,fixed,\n2,U,1,,0,fixed,\n"

/* text with the first `from` on line `line` (1-based) replaced by `to`. */
static char *edit_line(const char *text, int line, const char *from, const char *to)
{
  g_auto(GStrv) lines = g_strsplit_set(text, "\n", -1);
  char *at = strstr(lines[line - 1], from);
  g_assert_nonnull(at);
  g_autofree char *edited = g_strdup_printf("%.*s%s%s", (int)(at - lines[line - 1]), lines[line - 1], to, at + strlen(from));
  g_free(lines[line - 1]);
  lines[line - 1] = g_steal_pointer(&edited);
  return g_strjoinv("\n", lines);
}

/* F&B composites in our CSV (the composite column) and JSON ("composite"): the one a format reads
 * holds them, an old file without the column reads as before, and a wrong mark is refused in one
 * line naming the file, the line and the field. */
static void test_composite_marks(void)
{
  GError *err = NULL;
  g_autoptr(TpSchedule) ok = tpt_parse(DPV "2,F,1,2,0,fixed,fb\n" DPV_END, &err);
  g_assert_no_error(err);
  g_assert_cmpuint(ok->fb[0]->len, ==, 1);
  g_assert_cmpint(g_array_index(ok->fb[0], int32_t, 0), ==, 4);
  /* JSON: dualpipe-v on 1 worker, 2 micro-batches; its composite on line 23 (stage 2's F of micro-batch 2),
   * line 13 stage 1's first F, whose worker runs stage 2's F (line 21) next, line 16 an I */
  g_autoptr(TpSchedule) dp = tpt_preset("dualpipe-v", 1, 2, 1);
  g_autoptr(GString) j = g_string_new(NULL);
  tp_format_json(dp, j);
  g_autoptr(TpSchedule) json = tpt_parse(j->str, &err);
  g_assert_no_error(err);
  g_assert_true(tp_schedule_equal(dp, json));
  g_autofree char *old = edit_line(j->str, 23, ", \"composite\": \"fb\"", "");
  g_autoptr(TpSchedule) bare = tp_schedule_parse(old, strlen(old), "old.json", &err);
  g_assert_no_error(err);
  g_assert_null(bare->fb);
  g_autofree char *truth = edit_line(j->str, 23, "\"fb\"", "true"), *on_f = edit_line(old, 13, "0}", "0, \"composite\": \"fb\"}"),
                  *on_i = edit_line(old, 16, "0}", "0, \"composite\": \"fb\"}");
  expect_parse_error(truth, "bad.sched:23: stages[1][2]: bad composite (expected a string)");
  expect_parse_error(on_i, "bad.sched:16: stages[0][3]: bad composite: an F&B composite opens on an F, not I");
  expect_parse_error(on_f, "bad.sched:13: bad composite: worker 1's next operation after this F is F (line 21), not a B "
                     "of a micro-batch");
  expect_parse_error(DPV "2,F,1,2,0,fixed,yes\n" DPV_END, "bad.sched:7: bad composite (expected fb or empty): 'yes'");
  expect_parse_error(DPV "2,F,1,2,0,fixed\n" DPV_END, "bad.sched:7: expected 7 comma-separated fields, found 6");
  expect_parse_error(DPV "2,F,1,2,0,fixed,\n1,B,1,1,0,fixed,fb\n", "bad.sched:8: bad composite: an F&B composite opens "
                     "on an F, not B");
  expect_parse_error(DPV "2,F,1,2,0,fixed,\n1,B,1,1,0,fixed,\n2,B,1,2,0,fixed,\n1,I,1,2,0,fixed,\n1,W,1,2,0,fixed,\n"
                     "1,F,1,2,0,fixed,fb\n", "bad.sched:12: bad composite: worker 1's next operation after this F is "
                     "nothing, not a B of a micro-batch");
  expect_parse_error(DPV "2,F,1,2,0,fixed,fb\n1,I,1,2,0,fixed,\n", "bad.sched:7: bad composite: worker 1's next operation "
                     "after this F is I (line 8), not a B of a micro-batch");
  expect_parse_error("# timeprest-schedule order=1f1b policy=sync workers=1 micro_batches=1 mini_batches=1\n"
                     "stage,op,mini_batch,micro_batch,version,source,composite\n1,F,1,1,0,fixed,fb\n1,B,1,1,0,fixed,\n",
                     "bad.sched:3: bad composite: F&B composites need chunks (interleaved stages)");
}

/* Input size: a file over the limit, a device that never ends, a pipe; a byte-order mark is skipped;
 * the schedule limit holds the largest schedule the project accepts. */
static void test_read_limits(void)
{
  g_autofree char *dir = g_dir_make_tmp("tp-read-XXXXXX", NULL);
  g_assert_nonnull(dir);
  g_autofree char *big = g_build_filename(dir, "big.cost", NULL);
  g_assert_true(g_file_set_contents(big, "[stages]\nforward = 1\nbackward = 2\n", -1, NULL));
  char *text = NULL;
  gsize len = 0;
  GError *err = NULL;
  g_assert_false(tp_read_file_max(big, "cost file", 16, &text, &len, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_assert_nonnull(strstr(err->message, "more than the limit of 16 bytes"));
  g_clear_error(&err);
  g_assert_true(tp_read_file_max(big, "cost file", 64, &text, &len, &err));
  g_assert_cmpuint(len, ==, 34);
  g_free(text);
  /* a character device with no end: refused at once, not read to the limit */
  g_assert_false(tp_read_file("/dev/zero", "cost file", &text, &len, &err));
  g_assert_nonnull(strstr(err->message, "not a text file"));
  g_clear_error(&err);
  /* a pipe longer than the limit */
  int fds[2];
  g_assert_cmpint(pipe(fds), ==, 0);
  g_autofree char *fifo = g_strdup_printf("/dev/fd/%d", fds[0]);
  g_assert_cmpint(write(fds[1], "0123456789abcdefghij", 20), ==, 20);
  close(fds[1]);
  g_assert_false(tp_read_file_max(fifo, "cost file", 10, &text, &len, &err));
  g_assert_nonnull(strstr(err->message, "longer than the limit of 10 bytes"));
  g_clear_error(&err);
  close(fds[0]);
  /* a byte-order mark is skipped: the schedule loads, its lines count as written */
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 2, 2, 3);
  g_autoptr(GString) csv = g_string_new("\xEF\xBB\xBF");
  tp_format_csv(s, csv);
  g_autofree char *bom = g_build_filename(dir, "bom.csv", NULL);
  g_assert_true(g_file_set_contents(bom, csv->str, (gssize)csv->len, NULL));
  g_autoptr(TpSchedule) back = tp_schedule_load(bom, &err);
  g_assert_no_error(err);
  g_assert_true(tp_schedule_equal(s, back));
  g_assert_cmpint(tp_stage_ops(back, 0)[0].line, ==, 3);
  /* the longest operation the JSON form writes fits TP_MAX_OP_TEXT, so the largest schedule loads */
  g_autoptr(TpSchedule) wide = tp_schedule_new(TP_ORDER_NF1B, TP_POLICY_STASH, 1, TP_MAX_MICRO, TP_MAX_MINI);
  TpOp op = { .kind = TP_OP_B, .src = TP_SRC_STASH, .mb = -TP_MAX_MINI, .micro = TP_MAX_MICRO - 1, .ver = -TP_MAX_MINI };
  g_array_append_val(wide->stage[0], op);
  g_autoptr(GString) json = g_string_new(NULL);
  tp_format_json(wide, json);
  g_auto(GStrv) lines = g_strsplit_set(json->str, "\n", -1);
  gsize longest = 0;
  for (int i = 0; lines[i]; i++)
    longest = MAX(longest, strlen(lines[i]) + 1);
  g_assert_cmpuint(longest, >, 60);
  g_assert_cmpuint(longest, <=, TP_MAX_OP_TEXT);
  guint64 quarter = (guint64)sysconf(_SC_PHYS_PAGES) * (guint64)sysconf(_SC_PAGESIZE) / 4;
  g_assert_cmpuint(tp_max_schedule_bytes(), >=, MIN((guint64)TP_MAX_OPS * longest, quarter));
  g_assert_cmpuint(tp_max_schedule_bytes(), <=, quarter);
  g_unlink(big);
  g_unlink(bom);
  g_rmdir(dir);
}

/* JSON: nesting bounded before json-glib recurses, unknown keys, a second value, numbers as written,
 * and every error names file:line (never line 0). */
static void test_json_strict(void)
{
  g_autoptr(GString) deep = g_string_new(NULL);
  for (int i = 0; i < 100000; i++)
    g_string_append(deep, "{\"a\":");
  expect_parse_error(deep->str, "bad.sched:1: nested deeper than 16 levels");
#define JH "{\"order\": \"nf1b\", \"policy\": \"latest\", \"micro_batches\": 1, \"mini_batches\": 1,\n"
  expect_parse_error(JH "\"workers\": 1e23, \"stages\": [[]]}", "bad.sched:2: workers: expected a whole number from 1 "
                                                                 "to 1024, got '1e23'");
  expect_parse_error(JH "\"workers\": 99999999999999999999, \"stages\": [[]]}", "got '99999999999999999999'");
  expect_parse_error(JH "\"workers\": 1,\n\"colour\": 1, \"stages\": [[]]}", "bad.sched:3: unknown key 'colour'");
  expect_parse_error(JH "\"workers\": 1, \"stages\": [[]]}\n{}", "bad.sched:3: a second JSON value after the first");
  expect_parse_error(JH "\"workers\": 1, \"stages\": [[]]}\nx", "bad.sched:3: text 'x' after the JSON object");
  expect_parse_error(JH "\"workers\": 1, \"workers\": 1, \"stages\": [[]]}", "bad.sched:2: key 'workers' given twice");
  /* a NUL byte inside the given length (the library API; files with one are refused when read) */
  GError *nul_err = NULL;
  g_assert_null(tp_schedule_parse("{\0}", 3, "nul.sched", &nul_err));
  g_assert_error(nul_err, TP_ERROR, TP_ERROR_INPUT);
  g_clear_error(&nul_err);
  expect_parse_error(JH "\"workers\": 1, \"stages\": [[\n{\"op\": \"F\", \"mini_batch\": 1, \"micro_batch\": 1, "
                        "\"version\": 0, \"colour\": 2}]]}", "bad.sched:3: stages[0][0]: unknown key 'colour'");
  expect_parse_error(JH "\"workers\": 1, \"stages\": [[\n{\"op\": \"F\", \"mini_batch\": 99999999999999999999}]]}",
                     "bad.sched:3: number '99999999999999999999': expected a whole number");
  expect_parse_error(JH "\"workers\": 1, \"stages\": [\n7]}", "bad.sched:3: stages[0] is not an array");
  expect_parse_error(JH "\"workers\": 2, \"stages\": 5}", "bad.sched:2: \"stages\" must be an array");
  /* a lone surrogate: json-glib quotes its bytes, which are not UTF-8: escaped in the one line */
  expect_parse_error("{\"order\": \"nf1b\\ud800\", \"policy\": \"latest\"}", "\"nf1b\\xED\\xA0\\x80");
#undef JH
}

static void expect_events_error(const char *row, const char *needle)
{
  g_autofree char *text = g_strconcat("stage,kind,mini_batch,micro_batch,start,end,version,latest,staleness,bytes,peer\n",
                                      row, NULL);
  GError *err = NULL;
  GArray *rows = tp_events_parse(text, "ev.csv", &err);
  g_assert_null(rows);
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  if (!strstr(err->message, needle))
    g_error("message '%s' lacks '%s'", err->message, needle);
  g_error_free(err);
}

/* Every count an event file gives is bounded before anything is sized by it. */
static void test_events_bounds(void)
{
  GError *err = NULL;
  g_autoptr(GArray) ok = tp_events_parse("stage,kind,mini_batch,micro_batch,start,end,version,latest,staleness,bytes,peer\n"
                                         "1,F,1,1,0,1,0,0,0,,\n1,send-act,1,1,1,2,,,,64,2\n", "ev.csv", &err);
  g_assert_no_error(err);
  g_assert_cmpuint(ok->len, ==, 2);
  expect_events_error("2147483647,F,1,1,0,1,0,0,0,,", "ev.csv:2: bad stage (expected 1..1024)");
  expect_events_error("1,F,2147483647,1,0,1,0,0,0,,", "ev.csv:2: bad mini_batch");
  expect_events_error("1,F,1,40000000,0,1,0,0,0,,", "ev.csv:2: bad micro_batch");
  expect_events_error("1,F,1,1,0,1,2147483647,0,0,,", "ev.csv:2: bad version");
  expect_events_error("1,send-act,1,1,0,1,,,,64,40000000", "ev.csv:2: bad bytes/peer");
  expect_events_error("1,send-act,1,1,0,1,,,,64,5", "ev.csv:2: bad bytes/peer");
  expect_events_error("1,F,1,1,0,1e308,0,0,0,,", "ev.csv:2: bad start/end");
  expect_events_error("1,F,1,1,0,inf,0,0,0,,", "ev.csv:2: bad start/end");
}

static void expect_cost_file_error(const char *text, int W, const char *needle)
{
  GError *err = NULL;
  TpCost *c = tp_cost_parse(text, strlen(text), "t.cost", W, &err);
  g_assert_null(c);
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  if (!strstr(err->message, needle))
    g_error("message '%s' lacks '%s'", err->message, needle);
  g_assert_null(strstr(err->message, ":0:"));
  g_assert_null(strchr(err->message, '\n'));
  g_assert_cmpuint(strlen(err->message), <, 400);
  g_error_free(err);
}

/* Cost files stop at the first error (one GError, no GLib warning or critical under
 * G_DEBUG=fatal-warnings), bound every number so that the simulation's totals stay finite,
 * refuse a decimal comma with a hint, and never say file:0. */
static void test_cost_file_strict(void)
{
#define ST "[stages]\nforward = 1\nbackward = 1\n"
  expect_cost_file_error(ST "[links]\nbandwidth = 0\n", 4, "t.cost:5: [links] bandwidth: bandwidth must be positive");
  expect_cost_file_error(ST "[links]\nlatency = 1, 2, x\n", 4, "t.cost:5: [links] latency: expected a non-negative");
  expect_cost_file_error(ST "[link.1]\nbandwidth = 3\n", 1, "t.cost:4: [link.1]: no such link: a single stage");
  expect_cost_file_error(ST "[link.0]\nbandwidth = 3\n", 3, "t.cost:4: [link.0]: no such link");
  expect_cost_file_error("[stages]\nforward = 0,5\nbackward = 1\n", 2, "t.cost:2: [stages] forward: '0,5': numbers take "
                                                                       "a decimal point");
  expect_cost_file_error("[stages]\nforward = 1e308\nbackward = 1\n", 2, "t.cost:2: [stages] forward: expected a time "
                                                                         "from 0 to 1e9, got '1e308'");
  expect_cost_file_error("[stages]\nforward = 4.9e-324\nbackward = 1\n", 2, "t.cost:2: [stages] forward: a time below");
  expect_cost_file_error(ST "activation_bytes = 1e300\n", 2, "t.cost:4: [stages] activation_bytes: expected a byte count");
  expect_cost_file_error(ST "[links]\nbandwidth = 4.9e-324\n", 2, "t.cost:5: [links] bandwidth: expected a bandwidth");
  expect_cost_file_error("[cost]\nsamples_per_micro_batch = 1e300\n" ST, 2, "t.cost:2: [cost] samples_per_micro_batch");
  expect_cost_file_error(ST "device = 2.5\n", 2, "t.cost:4: [stages] device: device numbers");
  expect_cost_file_error("[stages]\nforward = 1\nbackward = 1\n\x01junk\n", 2, "t.cost:4: '\\x01junk' is not a [group]");
  g_autoptr(GString) longkey = g_string_new(ST);
  for (int i = 0; i < 100000; i++)
    g_string_append_c(longkey, 'k');
  g_string_append(longkey, " = 1\n");
  expect_cost_file_error(longkey->str, 2, "t.cost:4: [stages] 'kkkk");
#undef ST
  /* two values are written with a blank after the comma; the named keys land in their fields */
  const char *two = "[stages]\nforward = 0, 5\nbackward = 1\nupdate = 0.5\nweight_bytes = 8\ndevice = 1\n";
  GError *err = NULL;
  g_autoptr(TpCost) c = tp_cost_parse(two, strlen(two), "t.cost", 2, &err);
  g_assert_no_error(err);
  g_assert_cmpfloat(c->stage[0].fwd, ==, 0);
  g_assert_cmpfloat(c->stage[1].fwd, ==, 5);
  g_assert_cmpfloat(c->stage[1].upd, ==, 0.5);
  g_assert_cmpfloat(c->stage[1].optimizer_bytes, ==, 8); /* defaults to weight_bytes */
  g_assert_cmpint(c->stage[1].device, ==, 0);
  g_assert_true(c->shared_devices);
}

/* Numbers out: never inf or nan; the largest costs a cost file may give simulate to finite totals
 * and a valid JSON report and trace. */
static void test_finite_numbers(void)
{
  char b[TP_NUM_LEN];
  g_assert_cmpstr(tp_num(b, "%.9g", INFINITY), ==, "null");
  g_assert_cmpstr(tp_num(b, "%.4f", NAN), ==, "null");
  g_assert_cmpstr(tp_num(b, "%.4f", 0.25), ==, "0.2500");
  const char *huge = "[stages]\nforward = 1e9\nbackward = 1e9\nupdate = 1e9\nactivation_bytes = 1e18\n"
                     "weight_bytes = 1e18\n[links]\nbandwidth = 1e-6\nlatency = 1e9\n"
                     "[cost]\nsamples_per_micro_batch = 1e12\n";
  const char *tiny = "[stages]\nforward = 1e-12\nbackward = 0\n[cost]\nsamples_per_micro_batch = 1e12\n";
  const char *texts[] = { huge, tiny };
  for (int i = 0; i < 2; i++) {
    GError *err = NULL;
    g_autoptr(TpCost) c = tp_cost_parse(texts[i], strlen(texts[i]), "t.cost", 3, &err);
    g_assert_no_error(err);
    g_autoptr(TpSchedule) s = tpt_preset("pipedream", 3, 4, 12);
    g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
    g_assert_no_error(err);
    g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
    g_assert_true(isfinite(m->makespan) && isfinite(m->throughput) && isfinite(m->bubble) && isfinite(m->bytes));
    g_autoptr(GString) json = g_string_new(NULL), trace = g_string_new(NULL), text = g_string_new(NULL);
    tp_report_json(sim, m, json);
    tp_trace_json(sim, trace);
    tp_report_text(sim, m, text);
    GString *outs[] = { json, trace, text };
    for (int k = 0; k < 3; k++) {
      g_autofree char *low = g_ascii_strdown(outs[k]->str, -1);
      g_assert_null(strstr(low, "inf"));
      g_assert_null(strstr(low, "nan"));
    }
    for (int k = 0; k < 2; k++) {
      g_autoptr(JsonParser) p = json_parser_new();
      g_assert_true(json_parser_load_from_data(p, outs[k]->str, -1, &err));
      g_assert_no_error(err);
      JsonObject *o = json_node_get_object(json_parser_get_root(p));
      if (k == 0)
        for (int f = 0; f < 3; f++) {
          const char *key = (const char *[]){ "makespan", "throughput", "bubble_fraction" }[f];
          g_assert_true(JSON_NODE_HOLDS_VALUE(json_object_get_member(o, key)));
        }
    }
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/format/round-trips", test_round_trips);
  g_test_add_func("/format/equal-detects", test_equal_detects);
  g_test_add_func("/format/digest-record", test_digest_record);
  g_test_add_func("/format/digest-detects", test_digest_detects);
  g_test_add_func("/format/wide-tokens", test_wide_tokens);
  g_test_add_func("/format/op-names", test_op_names);
  g_test_add_func("/format/fixed-on-absent", test_fixed_on_absent);
  g_test_add_func("/format/parse-errors", test_parse_errors);
  g_test_add_func("/format/composite-marks", test_composite_marks);
  g_test_add_func("/format/read-limits", test_read_limits);
  g_test_add_func("/format/json-strict", test_json_strict);
  g_test_add_func("/format/events-bounds", test_events_bounds);
  g_test_add_func("/format/cost-file-strict", test_cost_file_strict);
  g_test_add_func("/format/finite-numbers", test_finite_numbers);
  return g_test_run();
}
