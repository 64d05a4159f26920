/* tp_partition.c — min-max contiguous partition by dynamic programming, and a brute-force twin. */
#include "tp_partition.h"

gboolean tp_partition(int L, int W, TpRangeCost cost, TpRangeFits fits, gpointer data, int *bounds, double *best)
{
  if (W < 1 || L < W)
    return FALSE;
  /* f[s][j]: best bottleneck of layers [0, j) over stages 0..s; arg[s][j]: where stage s starts */
  double *f = g_new(double, (size_t)W * (L + 1));
  int *arg = g_new(int, (size_t)W * (L + 1));
  for (size_t i = 0; i < (size_t)W * (L + 1); i++)
    f[i] = G_MAXDOUBLE, arg[i] = -1;
  for (int j = 1; j <= L - (W - 1); j++)
    if (!fits || fits(0, 0, j, data))
      f[j] = cost(0, 0, j, data), arg[j] = 0;
  for (int s = 1; s < W; s++)
    for (int j = s + 1; j <= L - (W - 1 - s); j++)
      for (int i = s; i < j; i++) {
        double prev = f[(size_t)(s - 1) * (L + 1) + i];
        if (prev == G_MAXDOUBLE || (fits && !fits(s, i, j, data)))
          continue;
        double v = MAX(prev, cost(s, i, j, data));
        if (v < f[(size_t)s * (L + 1) + j])
          f[(size_t)s * (L + 1) + j] = v, arg[(size_t)s * (L + 1) + j] = i;
      }
  double b = f[(size_t)(W - 1) * (L + 1) + L];
  gboolean ok = b < G_MAXDOUBLE;
  if (ok) {
    bounds[W] = L;
    for (int s = W - 1; s >= 0; s--)
      bounds[s] = arg[(size_t)s * (L + 1) + bounds[s + 1]];
    if (best)
      *best = b;
  }
  g_free(f);
  g_free(arg);
  return ok;
}

static void brute(int L, int W, int s, int lo, int *cur, double worst, TpRangeCost cost, TpRangeFits fits,
                  gpointer data, int *bounds, double *best, gboolean *found)
{
  if (s == W - 1) {
    if (fits && !fits(s, lo, L, data))
      return;
    double v = MAX(worst, cost(s, lo, L, data));
    if (!*found || v < *best) {
      *found = TRUE;
      *best = v;
      for (int i = 0; i < W; i++)
        bounds[i] = cur[i];
      bounds[W] = L;
    }
    return;
  }
  for (int hi = lo + 1; hi <= L - (W - 1 - s); hi++) {
    if (fits && !fits(s, lo, hi, data))
      continue;
    cur[s + 1] = hi;
    brute(L, W, s + 1, hi, cur, MAX(worst, cost(s, lo, hi, data)), cost, fits, data, bounds, best, found);
  }
}

gboolean tp_partition_brute(int L, int W, TpRangeCost cost, TpRangeFits fits, gpointer data, int *bounds,
                            double *best)
{
  if (W < 1 || L < W)
    return FALSE;
  int *cur = g_new0(int, W + 1);
  double b = 0;
  gboolean found = FALSE;
  brute(L, W, 0, 0, cur, 0, cost, fits, data, bounds, &b, &found);
  g_free(cur);
  if (found && best)
    *best = b;
  return found;
}
