/* tp_backend_cuda.h — the cuda backend's public entry points: one instance per pipeline stage, each
 * with its own device, stream and cuBLAS handle, so stages never serialise on each other. */
#ifndef TP_BACKEND_CUDA_H
#define TP_BACKEND_CUDA_H

#include "tp_backend.h"

/* A backend on CUDA device `device` (0-based), with its own stream and cuBLAS handle; NULL and
 * TP_ERROR_INPUT "no CUDA device: …" when there is none, `device` is out of range or the device
 * cannot run the build's kernels (compiled for sm_90, with compute_90 PTX), or
 * TP_ERROR_RUNTIME when the device cannot be set up. */
TpBackend *tp_backend_cuda_new(int device, GError **err);

/* Synchronises the instance's stream and releases it (NULL is fine). Buffers it allocated must be
 * freed before. */
void tp_backend_cuda_free(TpBackend *be);

/* The number of CUDA devices present; 0 with the reason in `why` (may be NULL) when none is usable. */
int tp_cuda_device_count(char **why);

/* Wait for everything enqueued on the instance's stream. */
gboolean tp_backend_cuda_sync(const TpBackend *be, GError **err);

/* The most memory in use on `device` (cudaMemGetInfo's total − free: every allocation of every
 * process and the CUDA context included) seen after any synchronisation so far, and the device's
 * total; FALSE when none was seen. */
gboolean tp_cuda_memory(int device, guint64 *peak, guint64 *total);

/* The instance `--backend cuda` names: one on device 0, made on first use and kept for the life of
 * the process (the executor makes its own per stage with tp_backend_cuda_new). */
const TpBackend *tp_backend_cuda_default(GError **err);

/* Ask CUDA to load every module (kernels of this backend, cuBLAS's, NCCL's) when a context is made
 * rather than at a kernel's first launch: CUDA_MODULE_LOADING=EAGER unless the environment sets it.
 * A lazy load inside a launch may wait for the whole context, an ncclSend waiting for its peer
 * included, and two ranks would then wait for each other.  To be called before the process's first
 * CUDA call (the setting is read when CUDA starts); FALSE, changing nothing, once the cuda module is
 * loaded (too late) or when the environment asks for another mode. */
gboolean tp_cuda_load_eagerly(void);

/* W instances, one per pipeline stage: stage s (0-based) on device list[s mod len] of devices
 * ("0,1,…", the --devices flag), or on visible device s mod count when devices is NULL; *n_devices (may be NULL)
 * gets the number of distinct devices they use.  only ≥ 0: the instance of stage `only` alone (a
 * process that runs one stage makes no context, stream, handle or pool for the others), the other
 * entries NULL; -1: every stage's.  TP_ERROR_INPUT naming the flag for a bad list,
 * a device not present or no device at all.  (exec/cuda/cuda_stages.c: built into the executor,
 * on the entry points above.) */
TpBackend **tp_backend_cuda_stages(int W, const char *devices, int only, int *n_devices, GError **err);
void tp_backend_cuda_stages_free(TpBackend **be, int W);

/* The device stage s (0-based) runs on under a --devices list already accepted by
 * tp_backend_cuda_stages (NULL: visible device s mod count, 0 where none can be counted). */
int tp_backend_cuda_stage_device(const char *devices, int s);

#endif
