/* tp_wstore.h — a stage's weight store: the weight versions its operations read (spec §2.2, §5),
 * with reference counts derived from the stage's operation list, and the byte accounting that
 * the executor reports as measured memory.
 *
 * Version k is the stage's weights after k updates; the update of mini-batch i turns the latest
 * version into version i.  A version lives from its update until no pending operation reads it
 * and a newer version exists — the same rule by which the simulator counts live versions:
 *   - F reads op->ver; a backward with source FIXED reads op->ver;
 *   - a backward with source STASH or BLEND reads, for each of its micro-batches, the version that
 *     micro-batch's forward read on this stage (BLEND also reads the latest, which is always live);
 *   - the latest version is always live.
 * Stored activations are counted in micro-batches from the start of a forward to the end of the
 * backward that consumes them (a whole-mini-batch forward consumed by per-micro-batch backwards:
 * the last of them; a split backward: to the end of its W, I and W together consuming them), as
 * the simulator counts them.
 *
 * Buffers (n_params floats) come from the allocator given at creation, so that a device backend
 * can keep them in its own memory.  The caller drives the store through the stage's operations in
 * list order: tp_wstore_op_begin, the compute, tp_wstore_op_end. */
#ifndef TP_WSTORE_H
#define TP_WSTORE_H

#include "tp_schedule.h"

#include <glib.h>
#include <stddef.h>

/* Byte categories of a stage's memory (the simulator's components, in its order). */
typedef enum {
  TP_MEMCAT_WEIGHTS,     /* weights × live versions, and the blend's scratch weights */
  TP_MEMCAT_OPTIMIZER,   /* optimizer state (lives with the latest weights) */
  TP_MEMCAT_GRADIENTS,   /* gradient buffer */
  TP_MEMCAT_ACTIVATIONS, /* activations stored for backwards */
  TP_MEMCAT_COMM,        /* message buffers (received and not yet consumed, sent and not yet delivered) */
  TP_N_MEMCAT
} TpMemCat;

extern const char *const tp_wstore_mem_names[TP_N_MEMCAT];

/* Where weight buffers live.  alloc returns NULL with err set when it cannot (the store then fails
 * the operation that needed the buffer, naming its stage). */
typedef struct {
  float *(*alloc)(void *ctx, size_t n_floats, GError **err);
  void (*free)(void *ctx, float *buf);
  void *ctx;
} TpWAlloc;

/* Host memory (g_malloc / memcpy). */
extern const TpWAlloc tp_walloc_host;

typedef struct {
  size_t n_params;            /* floats per weight version */
  gint64 optimizer_bytes;     /* held for the whole run */
  gint64 gradient_bytes;      /* held for the whole run */
  gint64 activation_bytes;    /* stored per micro-batch forward */
} TpWStoreSizes;

typedef struct TpWStore TpWStore;

/* The store of stage `stage` (0-based) of s, positioned before operation first_op of the stage's
 * list (0 for a fresh run; a resumed run passes the position it continues from).  The versions
 * live at that position are allocated (version 0 only, for a fresh run); the caller fills them.
 * TP_ERROR_INPUT when the operation list is not one the store can follow (an update out of
 * order, a read of a version not yet made, a backward without its forward). */
TpWStore *tp_wstore_new(const TpSchedule *s, int stage, int first_op, const TpWStoreSizes *sz,
                        const TpWAlloc *alloc, GError **err);
void tp_wstore_free(TpWStore *w);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpWStore, tp_wstore_free)

/* The buffer of version v, NULL when v is not live. */
float *tp_wstore_version(TpWStore *w, int v);
int tp_wstore_latest(const TpWStore *w);
/* Versions live now, ascending, into out (at most max); returns how many are live. */
int tp_wstore_live(const TpWStore *w, int *out, int max);
/* Index of the next operation to begin (the list's length when all are done). */
int tp_wstore_position(const TpWStore *w);

/* Begin operation k of the stage's list (it must be the next one); returns it.  A forward stores
 * its activations; a blending backward whose stashed versions are older than the latest takes a
 * scratch buffer; an update prepares the new version's buffer. */
const TpOp *tp_wstore_op_begin(TpWStore *w, int k, GError **err);
/* The version micro-batch j (0..N-1; any j for a single-micro-batch op) of the current forward or
 * backward reads: op->ver, or for STASH/BLEND backwards the version its forward read. */
int tp_wstore_read_version(const TpWStore *w, int j);
/* The current update's buffer: the latest version's buffer itself when no pending operation
 * reads it any more, otherwise a buffer of undefined contents; the step reads the latest version
 * (tp_wstore_version(w, tp_wstore_latest(w))) and writes the new one here (no copy is made). */
float *tp_wstore_update_buffer(TpWStore *w);
/* The current blending backward's scratch buffer (n_params floats), NULL when it needs none. */
float *tp_wstore_blend_buffer(TpWStore *w);
/* End the current operation: release what it read, free versions no longer needed, release the
 * activations a backward consumed, make an update's buffer the latest version. */
void tp_wstore_op_end(TpWStore *w);
/* A cut run (tp_runtime.h): operation k, the next in list order, is left out — the versions it
 * would read are released as if it had run, nothing is computed, no version is made. */
void tp_wstore_op_skip(TpWStore *w, int k);
/* The forward begun is left out (its input never came: the run was cut before its mini-batch):
 * its activations are not counted, then as tp_wstore_op_skip. */
void tp_wstore_op_cancel(TpWStore *w);

/* Add delta bytes to a category (communication buffers, or anything the caller holds). */
void tp_wstore_mem_add(TpWStore *w, TpMemCat cat, gint64 delta);
/* The message bytes held for this stage outside the store (what its transport holds that arrived
 * and was not yet received, the buffers it lent to sends not yet done), read from bytes(data) at
 * every change the store notes and at tp_wstore_sample; they count as TP_MEMCAT_COMM besides what
 * tp_wstore_mem_add adds.  bytes may be called from the stage's thread only, but may change from
 * any: the store's peak is exact when they only grow between the stage's own events (nothing else
 * takes them away), as messages queued for the stage do. */
void tp_wstore_set_comm(TpWStore *w, gint64 (*bytes)(void *data), void *data);
/* Note what is held now (before a wait: the messages that came while the stage was busy). */
void tp_wstore_sample(TpWStore *w);

typedef struct {
  gint64 cur[TP_N_MEMCAT], peak[TP_N_MEMCAT]; /* bytes now, and each category's own peak */
  gint64 total, peak_total;             /* the sum now, and its peak */
  gint64 at_peak[TP_N_MEMCAT];             /* each category when the sum peaked */
  int live_versions, max_live_versions;
  int activations, max_activations;     /* micro-batch activations stored */
} TpWStoreStats;

void tp_wstore_stats(const TpWStore *w, TpWStoreStats *out);

#endif
