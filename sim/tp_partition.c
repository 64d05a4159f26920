/* tp_partition.c — min-max contiguous partition by dynamic programming, and a brute-force twin. */
#include "tp_partition.h"

/* The table: f[s][j], the least bottleneck of layers [0, j) over stages 0..s (G_MAXDOUBLE: none
 * fits); arg[s][j], where stage s then starts, the earliest among equals; low[j], the least f[s-1][i]
 * over i >= j (what stage s's predecessors hold at best when it starts there or later). */
typedef struct {
  int L;
  const TpRanges *r;
  double *f, *low;
  int *arg;
} Dp;

/* f[s][j] from row s - 1: every start i of stage s is tried that could still beat the best so far,
 * down from `guess` while the stage's floor (more layers, never less) is at most the best, then up
 * while its predecessors' least is below it; the earliest start among equals wins, as in a plain
 * scan up from s. */
static void best_start(const Dp *d, int s, int j, int guess)
{
  const TpRanges *r = d->r;
  const double *prev = d->f + (size_t)(s - 1) * (d->L + 1);
  double best = G_MAXDOUBLE;
  int at = -1;
  for (int i = guess; i >= s; i--) {
    if (r->floor && r->floor(s, i, j, r->data) > best)
      break;
    if (prev[i] == G_MAXDOUBLE || prev[i] > best || (r->fits && !r->fits(s, i, j, r->data)))
      continue;
    double v = MAX(prev[i], r->cost(s, i, j, r->data));
    if (v < best || (v == best && at >= 0))
      best = v, at = i;
  }
  for (int i = guess + 1; i < j && d->low[i] < best; i++) {
    if (prev[i] >= best || (r->fits && !r->fits(s, i, j, r->data)))
      continue;
    double v = MAX(prev[i], r->cost(s, i, j, r->data));
    if (v < best)
      best = v, at = i;
  }
  d->f[(size_t)s * (d->L + 1) + j] = best, d->arg[(size_t)s * (d->L + 1) + j] = at;
}

gboolean tp_partition(int L, int W, const TpRanges *r, int *bounds, double *best)
{
  if (W < 1 || L < W)
    return FALSE;
  Dp d = { .L = L, .r = r, .f = g_new(double, (size_t)W * (L + 1)), .low = g_new(double, L + 2),
           .arg = g_new(int, (size_t)W * (L + 1)) };
  for (size_t i = 0; i < (size_t)W * (L + 1); i++)
    d.f[i] = G_MAXDOUBLE, d.arg[i] = -1;
  for (int j = 1; j <= L - (W - 1); j++)
    if (!r->fits || r->fits(0, 0, j, r->data))
      d.f[j] = r->cost(0, 0, j, r->data), d.arg[j] = 0;
  for (int s = 1; s < W; s++) {
    const double *prev = d.f + (size_t)(s - 1) * (L + 1);
    d.low[L + 1] = G_MAXDOUBLE;
    for (int i = L; i >= 0; i--)
      d.low[i] = MIN(prev[i], d.low[i + 1]);
    int *arg = d.arg + (size_t)s * (L + 1);
    /* the best start moves little from one end to the next: the search begins where the last one ended */
    for (int j = s + 1; j <= L - (W - 1 - s); j++)
      best_start(&d, s, j, arg[j - 1] >= s ? arg[j - 1] : j - 1);
  }
  double b = d.f[(size_t)(W - 1) * (L + 1) + L];
  gboolean ok = b < G_MAXDOUBLE;
  if (ok) {
    bounds[W] = L;
    for (int s = W - 1; s >= 0; s--)
      bounds[s] = d.arg[(size_t)s * (L + 1) + bounds[s + 1]];
    if (best)
      *best = b;
  }
  g_free(d.f);
  g_free(d.low);
  g_free(d.arg);
  return ok;
}

static void brute(int L, int W, int s, int lo, int *cur, double worst, const TpRanges *r, int *bounds, double *best,
                  gboolean *found)
{
  if (s == W - 1) {
    if (r->fits && !r->fits(s, lo, L, r->data))
      return;
    double v = MAX(worst, r->cost(s, lo, L, r->data));
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
    if (r->fits && !r->fits(s, lo, hi, r->data))
      continue;
    cur[s + 1] = hi;
    brute(L, W, s + 1, hi, cur, MAX(worst, r->cost(s, lo, hi, r->data)), r, bounds, best, found);
  }
}

gboolean tp_partition_brute(int L, int W, const TpRanges *r, int *bounds, double *best)
{
  if (W < 1 || L < W)
    return FALSE;
  int *cur = g_new0(int, W + 1);
  double b = 0;
  gboolean found = FALSE;
  brute(L, W, 0, 0, cur, 0, r, bounds, &b, &found);
  g_free(cur);
  if (found && best)
    *best = b;
  return found;
}
