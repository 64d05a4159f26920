/* test-torch.c — PyTorch's pipeline schedule CSV (torch.distributed.pipelining): our flush schedules
 * written and read back the same, each action in the column of its unit-slot step, PyTorch's own files
 * read (communication and composites included) and what is refused, one line naming the file, row
 * and action. */
#include "tp_test.h"

#include "tp_format.h"
#include "tp_index.h"
#include "tp_replay.h"

/* Our flush schedules in PyTorch's CSV and back are the same schedule, order included (W = 1..8,
 * N = W..3W). */
static void test_torch_round_trip(void)
{
  static const char *const presets[] = { "gpipe", "1f1b", "zb-h1", "zb-h2" };
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++)
    for (int W = 1; W <= 8; W++)
      for (int N = W; N <= 3 * W; N++) {
        g_autoptr(TpSchedule) s = tpt_preset(presets[i], W, N, 1);
        g_autoptr(GString) out = g_string_new(NULL);
        GError *err = NULL;
        g_assert_true(tp_format_torch(s, out, &err));
        g_autoptr(TpSchedule) back = tpt_parse(out->str, &err);
        g_assert_no_error(err);
        /* where two orders give the very same operations (W = 1, N = 1: gpipe and 1f1b) the file
         * names the first of them */
        if (back->order != s->order) {
          g_autoptr(TpSchedule) twin = tp_schedule_generate(back->order, TP_POLICY_SYNC, W, N, 1, &err);
          g_assert_no_error(err);
          twin->order = s->order;
          g_assert_true(tp_schedule_equal(s, twin));
          back->order = s->order;
        }
        if (!tp_schedule_equal(s, back))
          g_error("%s W=%d N=%d read back as order %s", presets[i], W, N, tp_order_name(back->order));
      }
}

/* The PyTorch CSV we write puts each action in the column of its unit-slot step: the cell of rank r
 * at column c holds the operation of stage r that the replay starts at slot c, and idle slots are
 * empty (only the read-back was tested: a writer one step off made every file grow empty cells). */
static void test_torch_columns(void)
{
  static const char *const presets[] = { "gpipe", "1f1b", "zb-h1", "zb-h2" };
  static const char kinds[] = "FBUIW";
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++)
    for (int W = 1; W <= 5; W++)
      for (int N = W; N <= 2 * W + 1; N++) {
        g_autoptr(TpSchedule) s = tpt_preset(presets[i], W, N, 1);
        g_autoptr(GString) out = g_string_new(NULL);
        GError *err = NULL;
        g_assert_true(tp_format_torch(s, out, &err));
        g_autoptr(TpIndex) ix = NULL;
        int64_t *start = NULL, *end = NULL;
        g_assert_true(tp_replay_indexed(s, &ix, &start, &end, &err));
        g_auto(GStrv) rows = g_strsplit_set(out->str, "\n", -1);
        long cells = 0;
        for (int r = 0; r < W; r++) {
          g_auto(GStrv) cell = g_strsplit(rows[r], ",", -1);
          for (int c = 0; cell[c]; c++) {
            if (!*cell[c])
              continue;
            int st = -1, micro = -1;
            char kind = 0;
            g_assert_cmpint(sscanf(cell[c], "%d%c%d", &st, &kind, &micro), ==, 3);
            g_assert_cmpint(st, ==, r);
            TpOp op = { .kind = (uint8_t)(strchr(kinds, kind) - kinds), .mb = 1, .micro = (int16_t)micro };
            int32_t k = tp_index_pos(ix, st, &op);
            g_assert_cmpint(k, >=, 0);
            g_assert_cmpint(start[ix->off[st] + k], ==, c);
            cells++;
          }
        }
        /* every computation once: the stages' operations but their updates */
        g_assert_cmpint(cells, ==, tp_schedule_n_ops(s) - W);
        g_free(start);
        g_free(end);
      }
}

static void test_torch_read(void)
{
  GError *err = NULL;
  /* OVERLAP_F_B as its parts, the transfers and the gradient reduction skipped */
  g_autoptr(TpSchedule) s = tpt_parse("0F0,0UNSHARD,0SEND_F0,,0RECV_B0,(0F1;0B0)OVERLAP_F_B,0B1,0REDUCE_GRAD,"
                                  "0WAIT_REDUCE_GRAD\n"
                                  ",1RECV_F0,1F0,1B0,1SEND_B0,1F1,1B1\n", &err);
  g_assert_no_error(err);
  g_assert_cmpint(s->W, ==, 2);
  g_assert_cmpint(s->N, ==, 2);
  g_assert_cmpint(tp_stage_len(s, 0), ==, 5);
  g_assert_cmpint(tp_stage_ops(s, 0)[1].kind, ==, TP_OP_F);
  g_assert_cmpint(tp_stage_ops(s, 0)[2].kind, ==, TP_OP_B);
  g_assert_cmpint(s->order, ==, TP_ORDER_1F1B);
  tpt_expect_refused("0F0,0B0\n1F0,1B0,1F1\n", "t.csv:2: rank 1, step 2: action '1F1': rank 0 runs no forward of micro-batch 1");
  tpt_expect_refused("0F0,0X0\n", "t.csv:1: rank 0, step 1: action '0X0': unknown action kind");
  tpt_expect_refused("0F0,(0F1;0SEND_F0)OVERLAP_F_B\n", "a part of OVERLAP_F_B must be a computation");
  tpt_expect_refused("0F0,(0F1;0B0)OVERLAP_X\n", "a composite action is read only as (A;B)OVERLAP_F_B");
  tpt_expect_refused("0F0,2F0\n1F0\n", "3 stages on 2 ranks: interleaved stages need the same number of chunks");
  tpt_expect_refused("0F0,1F0\n1F0\n", "stage 1 runs on rank 0 already: a stage runs on one rank");
  tpt_expect_refused("1F0\n0F0\n", "t.csv:2: stage 0 runs on rank 1: with as many stages as ranks stage s runs on rank s");
  tpt_expect_refused("0F,0B0\n", "a computation without its micro-batch index");
  tpt_expect_refused("0F0\n1F0,1I0,1W0\n", "stage 1 has no B(1,A)");
  /* an error in a row before others: the rows not read are not looked at (was a crash) */
  tpt_expect_refused("0F0,0X0\n1F0,1B0\n2F0\n", "t.csv:1: rank 0, step 1: action '0X0': unknown action kind");
  /* the grid `schedule` prints is a picture: named, not read as PyTorch's CSV */
  tpt_expect_refused("1A 1B 2A 2B 1 . . 2\n. 1A 1B 1 2A 2B 2 .\n",
                     "t.csv:1: a schedule grid (the picture `schedule` prints) is not read back");
}

/* PyTorch 2.15's Schedule1F1B numbers the last rank's forwards 1..M: refused naming the action and rank. */
static void test_torch_broken_1f1b(void)
{
  g_autofree char *path = g_build_filename(TP_SRCDIR, "tests", "data", "torch-1f1b-last-rank-1-based.csv", NULL);
  GError *err = NULL;
  g_autoptr(TpSchedule) s = tp_schedule_load(path, &err);
  g_assert_null(s);
  g_assert_nonnull(strstr(err->message, "torch-1f1b-last-rank-1-based.csv:4: rank 3, step 9: action '3F4': rank 2 runs "
                                        "no forward of micro-batch 4 to send it"));
  g_error_free(err);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/torch/round-trip", test_torch_round_trip);
  g_test_add_func("/torch/columns", test_torch_columns);
  g_test_add_func("/torch/read", test_torch_read);
  g_test_add_func("/torch/broken-1f1b", test_torch_broken_1f1b);
  return g_test_run();
}
