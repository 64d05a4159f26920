/* tp_parallel.h — one large schedule's stages split over the cores: contiguous ranges of stages,
 * each on a thread of its own, the caller's thread taking the first. */
#ifndef TP_PARALLEL_H
#define TP_PARALLEL_H

#include <glib.h>

/* Work on stages lo..hi-1, part `part` of the split. */
typedef void (*TpRangeFn)(void *ctx, int part, int lo, int hi);

/* How many parts a pass over a schedule of `ops` operations on W stages is worth: 1 below 200,000
 * operations (a thread's start costs more than it saves), else the cores, at most TP_PARALLEL_MAX
 * and at most one per 8 stages. */
enum { TP_PARALLEL_MAX = 8 };
int tp_parallel_parts(long long ops, int W);
/* fn over 0..n-1 in `parts` contiguous ranges (part p: p·n/parts up to (p+1)·n/parts), returning
 * when every part is done; one part (or a thread that cannot start) runs on the caller's thread. */
void tp_parallel_ranges(int n, int parts, TpRangeFn fn, void *ctx);

#endif
