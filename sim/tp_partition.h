/* tp_partition.h — contiguous split of L layers into W stages that minimises the slowest stage,
 * optionally under a per-stage feasibility test (memory); exact, by dynamic programming. */
#ifndef TP_PARTITION_H
#define TP_PARTITION_H

#include <glib.h>

/* Cost of giving layers [lo, hi) to stage s (stages may differ: heterogeneous devices). */
typedef double (*TpRangeCost)(int s, int lo, int hi, gpointer data);
/* Whether layers [lo, hi) fit stage s; NULL = always. */
typedef gboolean (*TpRangeFits)(int s, int lo, int hi, gpointer data);

/* bounds[0..W]: stage s gets layers [bounds[s], bounds[s+1]); every stage at least one layer.
 * Among optimal splits the one with the earliest boundaries is returned.
 * FALSE when L < W or no split fits. O(W·L²) cost calls. */
gboolean tp_partition(int L, int W, TpRangeCost cost, TpRangeFits fits, gpointer data, int *bounds, double *best);
/* The same by enumerating every split (for tests; exponential). */
gboolean tp_partition_brute(int L, int W, TpRangeCost cost, TpRangeFits fits, gpointer data, int *bounds,
                            double *best);

#endif
