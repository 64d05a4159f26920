/* tp_runtime_priv.h — the run's state shared by the runtime's files (tp_runtime.c: the stage
 * threads; tp_runtime_eval.c: evaluation and profiling). */
#ifndef TP_RUNTIME_PRIV_H
#define TP_RUNTIME_PRIV_H

#include "tp_net.h"
#include "tp_runtime.h"

typedef struct {
  TpNet *net;
  size_t np;                 /* floats in a weight version */
  float *weights, *mom, *grad; /* latest weights between schedules, momentum, gradient buffer */
} RtStage;

struct TpRuntime {
  TpRuntimeConfig cfg;
  int W;
  int lo, hi;     /* the stages this process runs */
  TpTransport *tr; /* their transport (not owned); NULL: a local one per run */
  int *bounds;
  RtStage *st;
  TpWAlloc alloc; /* weight-store buffers through the backend */
};

#endif
