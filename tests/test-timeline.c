/* test-timeline.c — the timeline and the files made from it: event CSVs written and read back
 * (a simulated timeline and a measured-style one, with its own versions and clock; the latter's
 * Chrome trace), the training log written and read back, and malformed files of both refused with
 * file:line, also by `timeprest plot` (exit 2, not gnuplot's failure), which draws odd valid ones. */
#include "tp_cost.h"
#include "tp_events.h"
#include "tp_metrics.h"
#include "tp_report.h"
#include "tp_sim.h"
#include "tp_test.h"
#include "tp_timeline.h"
#include "tp_trace.h"
#include "tp_trainlog.h"

#include <math.h>

/* Written with 9 significant digits: equal to that precision. */
static void assert_close(double want, double got)
{
  g_assert_cmpfloat(fabs(want - got), <=, 5e-9 * MAX(1.0, fabs(want)));
}

/* rows → CSV → rows: equal, and the text written again is the same bytes. */
static void assert_round_trip(GArray *rows)
{
  g_autoptr(GString) text = g_string_new(NULL);
  tp_events_write_csv(rows, text);
  GError *err = NULL;
  g_autoptr(GArray) back = tp_events_parse(text->str, "ev.csv", &err);
  g_assert_no_error(err);
  g_assert_cmpuint(back->len, ==, rows->len);
  for (guint i = 0; i < rows->len; i++) {
    const TpEventRow *a = &g_array_index(rows, TpEventRow, i), *b = &g_array_index(back, TpEventRow, i);
    g_assert_cmpint(a->stage, ==, b->stage);
    g_assert_cmpint(a->kind, ==, b->kind);
    g_assert_cmpint(a->mb, ==, b->mb);
    g_assert_cmpint(a->micro, ==, b->micro);
    assert_close(a->start, b->start);
    assert_close(a->end, b->end);
    g_assert_cmpint(a->version, ==, b->version);
    g_assert_cmpint(a->latest, ==, b->latest);
    assert_close(a->bytes, b->bytes);
    g_assert_cmpint(a->peer, ==, b->peer);
    g_assert_cmpint(a->mismatch, ==, b->mismatch);
  }
  g_autoptr(GString) again = g_string_new(NULL);
  tp_events_write_csv(back, again);
  g_assert_cmpstr(again->str, ==, text->str);
}

static TpCost *costs(int W)
{
  TpCost *c = tp_cost_unit(W);
  c->unit = FALSE;
  for (int st = 0; st < W; st++) {
    c->stage[st].fwd = 1.25 + st, c->stage[st].bwd = 2.5, c->stage[st].upd = 0.125;
    c->stage[st].act_bytes = c->stage[st].grad_bytes = 4096;
  }
  for (int l = 0; l < W - 1; l++)
    c->link[l] = (TpLinkCost){ .latency = 0.01, .bandwidth = 1e6 };
  return c;
}

static void test_events_simulated(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("i-timeprest", 3, 2, 8);
  TpCost *c = costs(3);
  GError *err = NULL;
  g_autoptr(TpSim) sim = tp_sim_run(s, c, &err);
  g_assert_no_error(err);
  g_assert_null(sim->version);
  g_assert_cmpfloat(sim->t0, ==, 0);
  g_assert_true(sim->start == sim->tl.start); /* the simulation is its timeline */
  g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
  g_autoptr(GArray) rows = tp_events_from_sim(sim);
  g_assert_cmpuint(rows->len, >, (guint)sim->n_ops); /* operations and transfers */
  gboolean timed_transfer = FALSE;
  for (guint i = 0; i < rows->len; i++) {
    const TpEventRow *r = &g_array_index(rows, TpEventRow, i);
    timed_transfer = timed_transfer || (r->kind >= TP_EV_SEND_ACT && r->end > r->start);
  }
  g_assert_true(timed_transfer);
  assert_round_trip(rows);
  tp_cost_free(c);
}

/* A measured-style timeline: times on a clock that does not start at 0, versions of its own. */
static void test_events_measured(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("pipedream", 2, 2, 5);
  GError *err = NULL;
  TpTimeline *tl = tp_timeline_new(s, TRUE, &err);
  g_assert_no_error(err);
  g_assert_true(tl->xstart == tl->xend);
  for (int st = 0; st < s->W; st++) {
    int latest = 0;
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOp *op = &tp_stage_ops(s, st)[k];
      long g = tl->ix->off[st] + k;
      tl->start[g] = 1000.123456789 + 0.37 * k + 0.05 * st;
      tl->end[g] = tl->start[g] + 0.3;
      tl->version[g] = op->kind == TP_OP_B ? 37 : op->ver; /* not the schedule's */
      tl->latest[g] = latest;
      latest += op->kind == TP_OP_U;
    }
  }
  tp_timeline_normalise(tl);
  assert_close(1000.123456789, tl->t0);
  g_assert_cmpfloat(tl->start[0], ==, 0);
  double span = 0;
  for (long g = 0; g < tl->n_ops; g++) {
    span = MAX(span, tl->end[g]);
    if (tl->cons[g] >= 0)
      g_assert_cmpfloat(tl->xend[g], ==, tl->end[g]);
  }
  g_assert_cmpfloat(tl->makespan, ==, span);
  TpCost *c = costs(2);
  g_autoptr(TpSim) sim = tp_sim_from_timeline(tl, c);
  g_autoptr(TpMetrics) m = tp_metrics_compute(sim);
  /* the Chrome trace shows the versions the run read */
  g_autoptr(GString) trace = g_string_new(NULL);
  tp_trace_json(sim, trace);
  g_assert_nonnull(strstr(trace->str, "\"version\": 37,"));
  g_autoptr(GArray) rows = tp_events_from_sim(sim);
  tp_events_renumber(rows, 7);
  gboolean own_version = FALSE;
  for (guint i = 0; i < rows->len; i++) {
    const TpEventRow *r = &g_array_index(rows, TpEventRow, i);
    g_assert_cmpint(r->mb, >, 7);
    g_assert_cmpfloat(r->start, >=, 1000.12);
    if (r->kind == TP_EV_B) {
      own_version = TRUE;
      g_assert_cmpint(r->version, ==, 37 + 7);
    }
  }
  g_assert_true(own_version);
  assert_round_trip(rows);
  tp_cost_free(c);
}

/* text in a private file; the error of loading it contains want (with the file's name before it). */
static void expect_load_error(gboolean events, const char *text, const char *want)
{
  g_autofree char *path = tpt_tmp_path(events ? "ev.csv" : "log.csv");
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  GError *err = NULL;
  if (events) {
    g_autoptr(GArray) rows = tp_events_load(path, &err);
    g_assert_null(rows);
  } else {
    g_autoptr(TpTrainLog) log = tp_trainlog_load(path, &err);
    g_autoptr(GArray) rows = log ? tp_trainlog_rows(log, path, &err) : NULL;
    g_assert_null(rows);
  }
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_autofree char *full = g_strdup_printf("%s%s", path, want);
  if (!strstr(err->message, full))
    g_error("expected '%s' in '%s'", full, err->message);
  g_error_free(err);
  tpt_tmp_remove(path);
}

#define EV_HEAD "stage,kind,mini_batch,micro_batch,start,end,version,latest,staleness,bytes,peer,version_mismatch\n"

static void test_events_malformed(void)
{
  expect_load_error(TRUE, "stage,kind\n1,F\n", ":1: expected the header");
  expect_load_error(TRUE, EV_HEAD "1,F,1,1,0,1,0,0,0,,,\n1,X,1,1,0,1,0,0,0,,,\n", ":3: bad kind");
  expect_load_error(TRUE, EV_HEAD "1,F,1,1,0,1,0,0,0,,,\n\n1,F,1,1,0\n", ":4: expected 12 comma-separated fields");
  expect_load_error(TRUE, EV_HEAD "1,B,1,1,2,1,0,0,0,,,0\n", ":2: bad start/end");
  expect_load_error(TRUE, "# only a comment\n", ": empty");
  /* a row with more fields than the header is not read as if it had none */
  expect_load_error(TRUE, EV_HEAD "1,F,1,1,0,1,0,0,0,,,,5,6\n",
                    ":2: expected 12 comma-separated fields (as the header), found 14");
  /* Windows line ends are read */
  GError *err = NULL;
  g_autoptr(GArray) crlf = tp_events_parse("stage,kind,mini_batch,micro_batch,start,end,version,latest,staleness,bytes,"
                                           "peer,version_mismatch\r\n1,B,1,1,0,1,0,0,0,,,0\r\n", "crlf.csv", &err);
  g_assert_no_error(err);
  g_assert_cmpuint(crlf->len, ==, 1);
  g_assert_cmpint(g_array_index(crlf, TpEventRow, 0).mismatch, ==, 0);
}

static void test_trainlog_round_trip(void)
{
  const TpTrainLogRow rows[] = {
    { 0.1, 10, 0.5, 2.302585, 0.125, FALSE },
    { 0.9, 90, 4.0625, 0.75, 0.71875, FALSE },
    { 1, 100, 4.5, 0.693147, 0.8125, TRUE },
    { 1.5, 150, 6.75, 0.5, 0.84375, FALSE },
    { 2, 200, 9.125, 0.45, 0.865, TRUE },
  };
  g_autoptr(GString) text = g_string_new(NULL);
  tp_trainlog_header(text);
  for (guint i = 0; i < G_N_ELEMENTS(rows); i++)
    tp_trainlog_append(text, &rows[i]);
  /* the bytes train --csv has always written */
  g_assert_cmpstr(text->str, ==,
                  "epoch,mini_batch,time,loss,accuracy,test\n"
                  "0.1000,10,0.5000,2.302585,0.125000,0\n"
                  "0.9000,90,4.0625,0.750000,0.718750,0\n"
                  "1,100,4.5000,0.693147,0.812500,1\n"
                  "1.5000,150,6.7500,0.500000,0.843750,0\n"
                  "2,200,9.1250,0.450000,0.865000,1\n");
  GError *err = NULL;
  g_autoptr(TpTrainLog) log = tp_trainlog_parse(text->str, "log.csv", &err);
  g_assert_no_error(err);
  g_assert_cmpint(log->n_columns, ==, 6);
  g_assert_cmpint(tp_trainlog_column(log, "loss"), ==, 3);
  g_assert_cmpint(tp_trainlog_column(log, "nope"), ==, -1);
  g_autoptr(GArray) back = tp_trainlog_rows(log, "log.csv", &err);
  g_assert_no_error(err);
  g_assert_cmpuint(back->len, ==, G_N_ELEMENTS(rows));
  for (guint i = 0; i < back->len; i++) {
    const TpTrainLogRow *a = &rows[i], *b = &g_array_index(back, TpTrainLogRow, i);
    g_assert_cmpfloat(a->epoch, ==, b->epoch);
    g_assert_cmpint(a->mini_batch, ==, b->mini_batch);
    g_assert_cmpfloat(a->time, ==, b->time);
    g_assert_cmpfloat(a->loss, ==, b->loss);
    g_assert_cmpfloat(a->accuracy, ==, b->accuracy);
    g_assert_cmpint(a->test, ==, b->test);
  }
  /* columns in another order, and one more, are read too */
  g_autoptr(TpTrainLog) other = tp_trainlog_parse("test,loss,accuracy,time,mini_batch,epoch,lr\n1,0.5,0.9,3,30,1,0.01\n",
                                                  "other.csv", &err);
  g_assert_no_error(err);
  g_autoptr(GArray) orows = tp_trainlog_rows(other, "other.csv", &err);
  g_assert_no_error(err);
  g_assert_cmpint(g_array_index(orows, TpTrainLogRow, 0).mini_batch, ==, 30);
  g_assert_true(g_array_index(orows, TpTrainLogRow, 0).test);
}

#define LOG_HEAD TP_TRAINLOG_HEADER "\n"

static void test_trainlog_malformed(void)
{
  expect_load_error(FALSE, LOG_HEAD "0.1,10,0.5,2.3,0.1,0\n0.2,20,0.5,2.3\n", ":3: expected 6 fields, found 4");
  expect_load_error(FALSE, LOG_HEAD "\n0.1,10,0.5,lots,0.1,0\n", ":3: 'lots' is not a finite number");
  expect_load_error(FALSE, LOG_HEAD "0.1,10,0.5,nan,0.1,0\n", ":2: 'nan' is not a finite number");
  expect_load_error(FALSE, LOG_HEAD "\n", ": no data rows");
  expect_load_error(FALSE, "epoch,loss\n1,0.5\n", ":1: no column 'mini_batch'");
  expect_load_error(FALSE, LOG_HEAD "0.1,10.5,0.5,2.3,0.1,0\n", ":2: mini_batch is not a whole number");
  expect_load_error(FALSE, LOG_HEAD "0.1,10,0.5,2.3,0.1,0\n1,20,0.5,2.3,0.1,2\n", ":3: test is neither 0 nor 1");
  /* an empty file is said to be one; numbers too large for any axis are refused where they are */
  expect_load_error(FALSE, "", ": empty (no header line");
  expect_load_error(FALSE, "\r\n\n", ": empty (no header line");
  expect_load_error(FALSE, LOG_HEAD "0.1,10,0.5,2.3,0.1,0\n1e308,20,0.5,2.3,0.1,1\n", ":3: '1e308' is out of range");
  expect_load_error(FALSE, LOG_HEAD "0.1,10,-2e30,2.3,0.1,0\n", ":2: '-2e30' is out of range");
  /* the header is the first line that is not empty: errors name its line */
  expect_load_error(FALSE, "\n\nepoch,loss\n1,0.5\n", ":3: no column 'mini_batch'");
  GError *err = NULL;
  g_autoptr(TpTrainLog) log = tp_trainlog_parse("\r\n" LOG_HEAD "1,10,0.5,2.3,0.1,1\r\n", "crlf.csv", &err);
  g_assert_no_error(err);
  g_assert_cmpint(log->header_line, ==, 2);
  g_assert_cmpint(log->n_rows, ==, 1);
  g_assert_cmpint(log->lines[0], ==, 3);
  g_assert_cmpint(tp_trainlog_column(log, "test"), ==, 5);
}

/* ---- the pictures of such files, through the program -------------------------------------------- */

static gboolean have_gnuplot(void)
{
  g_autofree char *gp = g_find_program_in_path("gnuplot");
  return gp != NULL || g_getenv("TP_GNUPLOT") != NULL;
}

/* `timeprest plot KIND FLAG file(text) [--measured file(measured)] -o picture.svg`: its status; the
 * picture, when made, is removed; err gets its stderr. */
static int plot(const char *kind, const char *flag, const char *text, const char *measured, char **err)
{
  g_autofree char *in = tpt_tmp_path("in.csv"), *meas = tpt_tmp_path("meas.csv"), *out = tpt_tmp_path("p.svg");
  g_assert_true(g_file_set_contents(in, text, -1, NULL));
  if (measured)
    g_assert_true(g_file_set_contents(meas, measured, -1, NULL));
  const char *args[] = { "plot", kind, flag, in, "-o", out, measured ? "--measured" : NULL, meas, NULL };
  TptRun r = tpt_run(args);
  int status = r.status;
  if (status == 0) {
    g_autofree char *svg = NULL;
    g_assert_true(g_file_get_contents(out, &svg, NULL, NULL));
    g_assert_nonnull(strstr(svg, "<svg"));
  } else
    g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
  *err = g_steal_pointer(&r.err);
  tpt_run_clear(&r);
  tpt_tmp_remove(in);
  tpt_tmp_remove(meas);
  tpt_tmp_remove(out);
  return status;
}

/* Bad input is one line with exit 2 (not gnuplot's failure, exit 1); odd but valid files draw. */
static void test_plot_inputs(void)
{
  if (!have_gnuplot()) {
    g_test_skip("gnuplot is not installed");
    return;
  }
  struct {
    const char *kind, *flag, *text, *measured, *says; /* says NULL: a picture */
  } cases[] = {
    { "convergence", "-i", "epoch,loss\n1,1e308\n2,-1e308\n", NULL, ":2: '1e308' is out of range" },
    { "convergence", "-i", "", NULL, ": empty (no header line" },
    { "convergence", "-i", "\n" TP_TRAINLOG_HEADER "\r\n1,10,0.5,2.3,0.1,1\r\n2,20,0.4,2.1,0.2,1\r\n", NULL, NULL },
    { "timeline", "--events", EV_HEAD, NULL, ": no forward, backward or update events to draw" },
    { "timeline", "--events", EV_HEAD "1,send-act,1,1,0,0,,,,8,2,\n", NULL, ": no forward, backward or update" },
    { "timeline", "--events", EV_HEAD "1,F,1,1,0,1,0,0,0,,,\n", EV_HEAD, ": no forward, backward or update" },
    { "timeline", "--events", EV_HEAD "1,U,1,,0,1,0,0,0,,,\n", NULL, NULL },               /* no label to draw */
    { "timeline", "--events", EV_HEAD "1,U,1,,0,1,0,0,0,,,\n", EV_HEAD "1,U,1,,0,2,0,0,0,,,\n", NULL },
    { "timeline", "--events", EV_HEAD "1,F,1,1,0,0,0,0,0,,,\n", NULL, NULL },              /* every event instant */
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *err = NULL;
    int status = plot(cases[i].kind, cases[i].flag, cases[i].text, cases[i].measured, &err);
    g_test_message("case %u: status %d: %s", i, status, err);
    if (!cases[i].says) {
      g_assert_cmpint(status, ==, 0);
      continue;
    }
    g_assert_cmpint(status, ==, 2);
    g_assert_cmpint(tpt_lines(err), ==, 1);
    if (!strstr(err, cases[i].says))
      g_error("case %u: expected '%s' in '%s'", i, cases[i].says, err);
  }
}

/* The consumers are the producers turned round: cons[p] = g exactly when prod[g] = p, for every
 * preset (split backwards and chunks included), on one range and on several (a large schedule). */
static void test_consumers(void)
{
  for (int i = 0; i < tp_n_presets; i++)
    for (int large = 0; large < 2; large++) {
      int W = large ? 16 : 4, N = tp_presets[i].order == TP_ORDER_DUALPIPE_V ? 2 * W : W; /* dualpipe-v: N >= 2W */
      g_autoptr(TpSchedule) s = tpt_preset(tp_presets[i].name, W, N, large ? 800 : 6);
      g_autoptr(TpTimeline) tl = tp_timeline_new(s, FALSE, NULL);
      g_assert_nonnull(tl);
      long linked = 0;
      for (long g = 0; g < tl->n_ops; g++)
        if (tl->prod[g] >= 0) {
          g_assert_cmpint(tl->cons[tl->prod[g]], ==, g);
          linked++;
        }
      for (long p = 0; p < tl->n_ops; p++) {
        if (tl->cons[p] >= 0) {
          g_assert_cmpint(tl->prod[tl->cons[p]], ==, p);
          linked--;
        } else {
          g_assert_cmpint(tl->cons[p], ==, -1);
        }
      }
      g_assert_cmpint(linked, ==, 0);
    }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/timeline/events-simulated", test_events_simulated);
  g_test_add_func("/timeline/events-measured", test_events_measured);
  g_test_add_func("/timeline/events-malformed", test_events_malformed);
  g_test_add_func("/timeline/consumers", test_consumers);
  g_test_add_func("/trainlog/round-trip", test_trainlog_round_trip);
  g_test_add_func("/trainlog/malformed", test_trainlog_malformed);
  g_test_add_func("/plot/inputs", test_plot_inputs);
  return g_test_run();
}
