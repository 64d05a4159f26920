/* tp_partition.h — contiguous split of L layers into W stages that minimises the slowest stage,
 * optionally under a per-stage feasibility test (memory); exact, by dynamic programming. */
#ifndef TP_PARTITION_H
#define TP_PARTITION_H

#include <glib.h>

/* Cost of giving layers [lo, hi) to stage s (stages may differ: heterogeneous devices). */
typedef double (*TpRangeCost)(int s, int lo, int hi, gpointer data);
/* Whether layers [lo, hi) fit stage s; NULL = always. */
typedef gboolean (*TpRangeFits)(int s, int lo, int hi, gpointer data);

/* What a split is judged on.  floor (NULL: none) is a lower bound of cost that never grows when a
 * stage starts later (gives up layers): floor(s, lo, hi) <= cost(s, lo, hi) and floor(s, lo + 1, hi)
 * <= floor(s, lo, hi); with it the search stops looking at earlier starts that cannot win. */
typedef struct {
  TpRangeCost cost, floor;
  TpRangeFits fits;
  gpointer data;
} TpRanges;

/* bounds[0..W]: stage s gets layers [bounds[s], bounds[s+1]); every stage at least one layer.
 * Among optimal splits: the last stage's earliest start, then each earlier stage's earliest start
 * among the best splits of the layers before it.  FALSE when L < W or no split fits.  At most
 * O(W·L²) calls of cost, fits and floor each, far fewer where the best start moves little as layers
 * are added. */
gboolean tp_partition(int L, int W, const TpRanges *r, int *bounds, double *best);
/* The same optimum by enumerating every split (for tests; exponential). */
gboolean tp_partition_brute(int L, int W, const TpRanges *r, int *bounds, double *best);

#endif
