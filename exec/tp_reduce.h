/* tp_reduce.h — the collectives of an update.  Data parallelism's: before every update, each stage's
 * gradient becomes the mean over that stage's D replicas, the same bits on every replica (so the
 * replicas stay identical).  A head tied to the embedding on another stage than the embedding's
 * (tp_tie_stage): the embedding's table on the first stage and the head's copy of it take the
 * sum of their two gradients, so that the two copies update to the same bits.  A reduction is
 * {iface, context}: in-process for stages and replicas that are threads of one process
 * (tp_reduce_local_new); one per transport that carries them elsewhere. */
#ifndef TP_REDUCE_H
#define TP_REDUCE_H

#include "tp_backend.h"

#include <glib.h>

typedef struct TpReduce TpReduce;

typedef struct {
  /* grad, n floats in be's memory, of stage `stage` on replica `replica`, becomes the mean over the
   * replicas once every one has called with its own (for the update of global mini-batch mb, which
   * errors name).  FALSE with err when the reduction was aborted or a replica did not come in time. */
  gboolean (*mean)(TpReduce *r, int stage, int replica, long mb, const TpBackend *be, float *grad, size_t n,
                   GError **err);
  /* Optional (NULL: this reduction cannot tie stages): grad, n floats in be's memory — replica
   * `replica`'s embedding table gradient on the first stage (stage 0) or its tied head's on the
   * head's stage — becomes the sum of the two, the same bits on both, once both have called for
   * the update of mini-batch mb.  FALSE with err as mean. */
  gboolean (*tie)(TpReduce *r, int stage, int replica, long mb, const TpBackend *be, float *grad, size_t n,
                  GError **err);
  /* A replica failed: every replica waiting in mean or tie, and every later call, fails naming why. */
  void (*abort)(TpReduce *r, const char *why);
  void (*free)(TpReduce *r);
} TpReduceIface;

struct TpReduce {
  const TpReduceIface *iface;
  int D; /* replicas */
};

/* Replicas as threads of this process, W stages each (D = 1: one pipeline, for the tie alone): a
 * replica waits at most timeout_s seconds for the others at an update, a side of a tie for the other. */
TpReduce *tp_reduce_local_new(int D, int W, double timeout_s);

static inline void tp_reduce_free(TpReduce *r)
{
  if (r)
    r->iface->free(r);
}

#endif
