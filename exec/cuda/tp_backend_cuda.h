/* tp_backend_cuda.h — the cuda backend as the executor sees it (no CUDA header).  The backend is the
 * module tpcuda.so; it exports one symbol, tp_cuda_module(), the table of its entry points.  The
 * executor's loader (exec/tp_cuda_loader.c) loads it on first use and gives the registry
 * (tp_backend.c) the functions below.  An instance's own members (sync, release, device, memory
 * and the compute) are in its interface, one table in the module shared by every instance. */
#ifndef TP_BACKEND_CUDA_H
#define TP_BACKEND_CUDA_H

#include "tp_backend.h"

/* The module's entry points. */
typedef struct {
  /* the number of CUDA devices present; 0 with the reason in `why` (may be NULL) when none is usable */
  int (*device_count)(char **why);
  /* an instance on CUDA device `device` (0-based), with its own stream and cuBLAS handle; NULL and
   * TP_ERROR_INPUT "no CUDA device: …" when there is none, `device` is out of range or the device
   * cannot run the build's kernels (compiled for sm_90, with compute_90 PTX), or TP_ERROR_RUNTIME
   * when the device cannot be set up */
  TpBackend *(*create)(int device, GError **err);
} TpCudaModule;

/* The module's one exported symbol (exec/cuda/cuda_backend.c). */
#define TP_CUDA_MODULE_SYMBOL "tp_cuda_module"
const TpCudaModule *tp_cuda_module(void);

/* The loader's (exec/tp_cuda_loader.c): the module's entry points, the module loaded first; where it
 * cannot be, no device (with the reason) and no instance (TP_ERROR_INPUT "no CUDA device: …"). */
int tp_cuda_device_count(char **why);
TpBackend *tp_cuda_create(int device, GError **err);

/* Ask CUDA to load every module (kernels of this backend, cuBLAS's, NCCL's) when a context is made
 * rather than at a kernel's first launch: CUDA_MODULE_LOADING=EAGER unless the environment sets it.
 * A lazy load inside a launch may wait for the whole context, an ncclSend waiting for its peer
 * included, and two ranks would then wait for each other.  To be called before the process's first
 * CUDA call (the setting is read when CUDA starts); FALSE, changing nothing, once the cuda module is
 * loaded (too late) or when the environment asks for another mode. */
gboolean tp_cuda_load_eagerly(void);

#endif
