/* tp_runtime_priv.h — the run's state shared by the runtime's files (tp_runtime_state.c: the
 * stages' state made and read; tp_runtime.c: the stage threads; tp_runtime_eval.c: evaluation and
 * profiling; tp_runtime_msg.c: the links). */
#ifndef TP_RUNTIME_PRIV_H
#define TP_RUNTIME_PRIV_H

#include "tp_net.h"
#include "tp_runtime.h"

typedef struct {
  const TpBackend *be;       /* the stage's backend */
  TpNet *net;
  size_t np;                 /* floats in a weight version */
  size_t ns;                 /* floats of optimizer state: np · tp_runtime_optimizer_states */
  float *weights, *mom, *grad; /* latest weights between schedules, optimizer state, gradient buffer */
  float *host_w;             /* host copy of weights (weights itself on a host backend) */
} RtStage;

struct TpRuntime {
  TpRuntimeConfig cfg;
  int W;
  int lo, hi;     /* the stages this process runs */
  TpTransport *tr; /* their transport (not owned); NULL: a local one per run */
  int *bounds;
  RtStage *st;
  TpWAlloc *alloc; /* [W] weight-store buffers through each stage's backend */
  gboolean timing; /* a run that times the operations, its updates discarded: a loss that is not
                      finite there is not the run's (the run itself says so when it gets there) */
};

/* Backends whose buffers are not host memory (tp_backend_host_memory) have whatever the host reads
 * or writes (data, labels, messages a transport carries through host memory) staged through host
 * copies; a host-memory backend (cpu) makes no copies at all.  Times are measured after
 * tp_backend_sync, so that they cover the work and not only its launch. */

/* Copy n floats from host to be's memory (nothing when they are the same buffer). */
static inline gboolean tp_rt_up(const TpBackend *be, float *dev, const float *host, size_t n, GError **err)
{
  return dev == host || be->iface->upload(be, dev, host, n, err);
}
static inline gboolean tp_rt_down(const TpBackend *be, float *host, const float *dev, size_t n, GError **err)
{
  return dev == host || be->iface->download(be, host, dev, n, err);
}
/* How one run's stages move activations and gradients, link by link (tp_runtime_msg.c): through
 * host memory, as device buffers through a transport that takes them (device_memory: nccl), or
 * device to device within the process (an in_process transport between stages whose backend has
 * copy_peer).  dev is the
 * stage's buffer in its backend's memory, host its host staging buffer, n the floats. */
typedef struct TpRtLinks TpRtLinks;
TpRtLinks *tp_rt_links_new(const TpRuntime *rt, const TpTransport *tr);
void tp_rt_links_free(TpRtLinks *l);
gboolean tp_rt_send(TpRtLinks *l, TpTransport *tr, const TpBackend *be, int from, int to, const TpTag *tag,
                    const float *dev, float *host, size_t n, GError **err);
/* TRUE where the link from → to moves messages through host memory (the stage then lends its host
 * buffer to the transport itself, tp_outbox.h, instead of calling tp_rt_send). */
gboolean tp_rt_link_via_host(TpRtLinks *l, int from, int to);
gboolean tp_rt_recv(TpRtLinks *l, TpTransport *tr, const TpBackend *be, int to, int from, const TpTag *tag, float *dev,
                    float *host, size_t n, GError **err);

/* n floats in be's memory, or host memory when host is TRUE */
float *tp_rt_buf(const TpBackend *be, gboolean host, size_t n, GError **err);
void tp_rt_buf_free(const TpBackend *be, gboolean host, float *p);
/* The host copy of a stage's latest weights brought up to date (nothing on a host backend). */
gboolean tp_rt_sync_host_weights(RtStage *S, GError **err);
/* The optimizer's update of stage S at global mini-batch g (1-based, AdamW's step): w_out from w_in,
 * the gradient and the optimizer state (S->ns floats). */
gboolean tp_rt_step(const TpRuntime *rt, const RtStage *S, long g, const float *w_in, const float *grad, float *state,
                    float *w_out, GError **err);
/* A stage's weight-store sizes, with or without recomputation (a forward keeping its input only), with
 * or without a split backward (a forward's state also keeping the output gradients from I to W). */
void tp_rt_sizes(const TpRuntime *rt, int stage, gboolean recompute, gboolean split, TpWStoreSizes *out);

#endif
