/* tp_sweep.c — generate and measure every (W, N) cell of a range. */
#include "tp_sweep.h"
#include "tp_metrics.h"

GArray *tp_sweep(TpOrder o, TpPolicy p, int w0, int w1, int n0, int n1, GError **err)
{
  for (int W = w0; W <= w1; W++)
    for (int N = n0; N <= n1; N++)
      if (!tp_size_check(W, N, tp_sweep_K(W), err) || !tp_pair_check(o, p, W, N, err)) {
        g_prefix_error(err, "cell W=%d, N=%d: ", W, N);
        return NULL;
      }
  GArray *rows = g_array_new(FALSE, FALSE, sizeof(TpSweepRow));
  for (int W = w0; W <= w1; W++)
    for (int N = n0; N <= n1; N++) {
      TpSweepRow r = { .W = W, .N = N, .K = tp_sweep_K(W) };
      TpSchedule *s = tp_schedule_generate(o, p, W, N, r.K, err);
      if (!s) {
        g_array_unref(rows);
        return NULL;
      }
      r.v_sim = tp_version_difference(s, &r.v_sim_min, NULL);
      tp_schedule_free(s);
      r.v_eq3 = tp_eq3(W, N);
      r.v_closed = tp_closed_form(W, N);
      r.eq2_holds = (W <= N + 1) == (r.v_sim == 1);
      r.multiple_sequences = r.v_sim > 1;
      g_array_append_val(rows, r);
    }
  return rows;
}
