/* tp_backend.h — the compute backend interface of the executor, the ggml way: an instance
 * (TpBackend) is an interface (TpBackendIface, one table of function pointers shared by every
 * instance of a backend) and a context (the instance's own state: device, stream, handles).  The
 * interface covers the instance itself (name, release, synchronisation, its device, whether its
 * buffers are host memory, device memory in use), memory, GEMM, every layer family's forward and
 * backward, the optimizer step and the blend.  Each backend lives in its own folder (exec/cpu/,
 * exec/cuda/) and registers itself (name, device count, a constructor) in the registry below; the
 * stage network (tp_net.h) and the runtime call nothing else, so they run unchanged on any of them.
 * docs/backends.md describes how to add one.
 *
 * Conventions shared by every backend:
 *  - Buffers are arrays of float in the backend's memory (host memory where host_memory says so).
 *    A buffer of 32-bit indices (max-pool argmax) is a float buffer of the same length
 *    reinterpreted as gint32.
 *  - Row-major layouts: activations are [batch][channels][height][width]; a linear layer's weight
 *    is [out][in] followed by its bias [out]; a convolution's weight is [cout][cin][k][k] followed
 *    by its bias [cout].
 *  - Forward outputs and input gradients (dx) are overwritten; parameter gradients (dw, db) are
 *    accumulated (+=), so the gradients of several micro-batches sum in one buffer.
 *  - dx may be NULL where the input gradient is not wanted (the first stage's first layer).
 *  - In linear_backward and conv_backward, dw and db may be NULL together where only the input
 *    gradient is wanted (a split backward's I; W then calls them with dx NULL).
 *  - Labels are host arrays of gint32 (a device backend copies them itself).
 *  - Every function returns FALSE with a TP_ERROR_RUNTIME error on failure; none exits.
 *  - Every member is set (tests/test-backend.c runs a case per member), copy_peer excepted. */
#ifndef TP_BACKEND_H
#define TP_BACKEND_H

#include <glib.h>
#include <stddef.h>

typedef struct TpBackend TpBackend;
typedef struct TpBackendIface TpBackendIface;

/* A window over an image: convolution (cout output channels) or pooling (cout == cin). */
typedef struct {
  int cin, hin, win;
  int cout, hout, wout;
  int k, stride, pad;
} TpWindow;

/* One AdamW step's hyper-parameters: the learning rate, the moments' decays, epsilon, the decoupled
 * weight decay, and the bias corrections 1 − β1^t and 1 − β2^t of step t (computed by the caller). */
typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
  float bias1, bias2;
} TpAdamW;

/* An instance: the backend's table and the instance's own state (NULL for cpu). */
struct TpBackend {
  const TpBackendIface *iface;
  void *ctx;
};

struct TpBackendIface {
  /* the instance: its backend's name ("cpu", "cuda"); release it (after its buffers are freed;
   * nothing for an instance shared for the life of the process); wait for everything enqueued on
   * it; the device it runs on (0-based), -1 on the host; whether its buffers are host memory (the
   * host may read and write them directly: callers skip staging copies); the most memory seen in
   * use on its device (after any synchronisation, every allocation of every process included) and
   * the device's total, FALSE where it has no device memory to report. */
  const char *(*get_name)(const TpBackend *be);
  /* address space each host thread that runs the backend's operations maps for itself the first time
   * (OpenBLAS's buffer for cpu; 0 where none): what an address-space limit must leave room for */
  size_t (*thread_bytes)(const TpBackend *be);
  void (*release)(TpBackend *be);
  gboolean (*sync)(const TpBackend *be, GError **err);
  int (*device)(const TpBackend *be);
  gboolean (*host_memory)(const TpBackend *be);
  gboolean (*memory)(const TpBackend *be, guint64 *peak, guint64 *total);

  /* memory: n counts floats */
  float *(*alloc)(const TpBackend *be, size_t n, GError **err);
  void (*free)(const TpBackend *be, float *p);
  gboolean (*zero)(const TpBackend *be, float *p, size_t n, GError **err);
  gboolean (*copy)(const TpBackend *be, float *dst, const float *src, size_t n, GError **err);
  gboolean (*upload)(const TpBackend *be, float *dst, const float *host, size_t n, GError **err);
  gboolean (*download)(const TpBackend *be, float *host, const float *src, size_t n, GError **err);

  /* C[m][n] = alpha·op(A)·op(B) + beta·C, row-major; op(A) is m×k, op(B) is k×n. */
  gboolean (*sgemm)(const TpBackend *be, gboolean trans_a, gboolean trans_b, int m, int n, int k, float alpha,
                    const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc, GError **err);

  /* linear: y = x·wᵀ + b (b may be NULL); backward dx = dy·w, dw += dyᵀ·x, db += Σ dy */
  gboolean (*linear_forward)(const TpBackend *be, int batch, int in, int out, const float *x, const float *w,
                             const float *b, float *y, GError **err);
  gboolean (*linear_backward)(const TpBackend *be, int batch, int in, int out, const float *x, const float *w,
                              const float *dy, float *dx, float *dw, float *db, GError **err);

  /* conv2d by im2col + SGEMM; `work` holds conv_workspace(batch) floats */
  size_t (*conv_workspace)(const TpBackend *be, const TpWindow *s, int batch);
  gboolean (*conv_forward)(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                           const float *b, float *y, float *work, GError **err);
  gboolean (*conv_backward)(const TpBackend *be, const TpWindow *s, int batch, const float *x, const float *w,
                            const float *dy, float *dx, float *dw, float *db, float *work, GError **err);

  /* pooling; padding never wins a max, and an average divides by k·k (padding counts as zero).
   * argmax (index into the input plane, -1 if the window held only padding) may be NULL in
   * inference. */
  gboolean (*maxpool_forward)(const TpBackend *be, const TpWindow *s, int batch, const float *x, float *y,
                              gint32 *argmax, GError **err);
  gboolean (*maxpool_backward)(const TpBackend *be, const TpWindow *s, int batch, const float *dy,
                               const gint32 *argmax, float *dx, GError **err);
  gboolean (*avgpool_forward)(const TpBackend *be, const TpWindow *s, int batch, const float *x, float *y,
                              GError **err);
  gboolean (*avgpool_backward)(const TpBackend *be, const TpWindow *s, int batch, const float *dy, float *dx,
                               GError **err);

  /* batch normalisation over [batch][c][hw], each channel over its batch·hw values.  training: the
   * batch's mean and (biased) variance, y = (x − mean)/√(var + eps)·w + b, and where running is not
   * NULL (2c floats: the means, then the variances) running = (1 − momentum)·running + momentum·stat,
   * the variance unbiased (PyTorch's); inference (training FALSE): y from running's statistics.
   * backward (of a training forward): the batch statistics recomputed from x; dx overwritten (NULL:
   * not wanted), dw and db accumulated (NULL together: not wanted). */
  gboolean (*batchnorm_forward)(const TpBackend *be, int batch, int c, int hw, float eps, float momentum,
                                gboolean training, const float *x, const float *w, const float *b, float *running,
                                float *y, GError **err);
  gboolean (*batchnorm_backward)(const TpBackend *be, int batch, int c, int hw, float eps, const float *x,
                                 const float *w, const float *dy, float *dx, float *dw, float *db, GError **err);

  /* elementwise over n values; relu's backward reads the forward's input x */
  gboolean (*relu_forward)(const TpBackend *be, size_t n, const float *x, float *y, GError **err);
  gboolean (*relu_backward)(const TpBackend *be, size_t n, const float *x, const float *dy, float *dx, GError **err);
  /* inverted dropout: element i is kept when tp_dropout_keep(seed, i, p); mask[i] is 0 or 1/(1-p).
   * mask NULL: inference (y = x). */
  gboolean (*dropout_forward)(const TpBackend *be, size_t n, float p, guint64 seed, const float *x, float *y,
                              float *mask, GError **err);
  gboolean (*dropout_backward)(const TpBackend *be, size_t n, const float *mask, const float *dy, float *dx,
                               GError **err);
  /* the same with a one-byte mask (a transformer block's, kept as PyTorch keeps it) and the
   * element counter starting at `first`: element i is kept when tp_dropout_keep(seed, first + i, p),
   * then mask[i] = 1 and y[i] = x[i]·(1/(1−p)), else both 0 (y may equal x); backward dx[i] =
   * dy[i]·(1/(1−p)) where mask[i] is 1, else 0 (dx may equal dy) */
  gboolean (*dropout_byte_forward)(const TpBackend *be, size_t n, float p, guint64 seed, guint64 first, const float *x,
                                   float *y, guint8 *mask, GError **err);
  gboolean (*dropout_byte_backward)(const TpBackend *be, size_t n, float p, const guint8 *mask, const float *dy,
                                    float *dx, GError **err);

  /* softmax + cross-entropy over `classes` scores per sample: probs = softmax(x); *loss_sum gets
   * Σ −log probs[label], *correct the samples whose first maximal score is the label.
   * backward: dx = scale·(probs − onehot(label)). */
  gboolean (*softmax_ce_forward)(const TpBackend *be, int batch, int classes, const float *x, const gint32 *labels,
                                 float *probs, double *loss_sum, int *correct, GError **err);
  gboolean (*softmax_ce_backward)(const TpBackend *be, int batch, int classes, const float *probs,
                                  const gint32 *labels, float scale, float *dx, GError **err);

  /* ---- transformers: rows are positions (batch·s of them, row r at position r mod s) ---- */

  /* strided batched SGEMM: for i < count, C_i = alpha·op(A_i)·op(B_i) + beta·C_i with
   * A_i = a + i·stride_a (likewise B, C; a stride may be 0: one operand shared by every product) */
  gboolean (*sgemm_batched)(const TpBackend *be, gboolean trans_a, gboolean trans_b, int m, int n, int k, float alpha,
                            const float *a, int lda, size_t stride_a, const float *b, int ldb, size_t stride_b,
                            float beta, float *c, int ldc, size_t stride_c, int count, GError **err);
  /* y += alpha·x over n values */
  gboolean (*axpy)(const TpBackend *be, size_t n, float alpha, const float *x, float *y, GError **err);
  /* token embedding: ids are floats holding token numbers (< the table's rows); y[r] = table[id_r]
   * (+ pos[r mod s] where pos is not NULL); backward: dtable[id_r] += dy[r] (and dpos[r mod s]) */
  gboolean (*embedding_forward)(const TpBackend *be, int rows, int s, int d, const float *ids, const float *table,
                                const float *pos, float *y, GError **err);
  gboolean (*embedding_backward)(const TpBackend *be, int rows, int s, int d, const float *ids, const float *dy,
                                 float *dtable, float *dpos, GError **err);
  /* LayerNorm (rms FALSE: y = (x − mean)/√(var + eps)·w + b) or RMSNorm (y = x/√(mean x² + eps)·w,
   * b unused) over rows of d; the backward recomputes the row statistics from x: dx overwritten
   * (NULL: not wanted), dw (and db) accumulated (NULL together: not wanted). */
  gboolean (*norm_forward)(const TpBackend *be, int rows, int d, float eps, gboolean rms, const float *x,
                           const float *w, const float *b, float *y, GError **err);
  gboolean (*norm_backward)(const TpBackend *be, int rows, int d, float eps, gboolean rms, const float *x,
                            const float *w, const float *dy, float *dx, float *dw, float *db, GError **err);
  /* rotary positions in place on `heads` vectors of hd values per row (row stride ld): element i
   * and i + hd/2 turn by the angle p·theta^(−2i/hd) at position p; sign −1 turns back (the
   * transpose: the backward of sign +1) */
  gboolean (*rope)(const TpBackend *be, int rows, int s, int heads, int hd, int ld, float theta, float sign, float *x,
                   GError **err);
  /* causal softmax of n matrices s×s: y_ij = softmax_j≤i(scale·x_ij), 0 above the diagonal;
   * backward dx = scale·y·(dy − Σ_j y·dy) (dx may equal dy) */
  gboolean (*causal_softmax_forward)(const TpBackend *be, int n, int s, float scale, const float *x, float *y,
                                     GError **err);
  gboolean (*causal_softmax_backward)(const TpBackend *be, int n, int s, float scale, const float *y, const float *dy,
                                      float *dx, GError **err);
  /* GELU, the tanh approximation (GPT-2's), over n values; the backward reads the input x */
  gboolean (*gelu_forward)(const TpBackend *be, size_t n, const float *x, float *y, GError **err);
  gboolean (*gelu_backward)(const TpBackend *be, size_t n, const float *x, const float *dy, float *dx, GError **err);
  /* SwiGLU over rows of 2f values (the gate g in [0, f), the up projection u in [f, 2f)):
   * y[r][j] = silu(g)·u (rows of f); backward writes both halves of dgu */
  gboolean (*swiglu_forward)(const TpBackend *be, int rows, int f, const float *gu, float *y, GError **err);
  gboolean (*swiglu_backward)(const TpBackend *be, int rows, int f, const float *gu, const float *dy, float *dgu,
                              GError **err);

  /* SGD with momentum and weight decay (the PyTorch formulation), over n parameters:
   * g = grad + wd·w_in; mom = momentum·mom + g; w_out = w_in − lr·mom. w_out may equal w_in. */
  gboolean (*sgd_step)(const TpBackend *be, size_t n, float lr, float momentum, float weight_decay,
                       const float *w_in, const float *grad, float *mom, float *w_out, GError **err);
  /* AdamW (Loshchilov & Hutter, PyTorch's formulation) over n parameters: m = β1·m + (1−β1)·g,
   * v = β2·v + (1−β2)·g², w_out = w_in·(1 − lr·wd) − lr·(m/bias1)/(√(v/bias2) + eps).  w_out may
   * equal w_in. */
  gboolean (*adamw_step)(const TpBackend *be, size_t n, const TpAdamW *h, const float *w_in, const float *grad, float *m,
                         float *v, float *w_out, GError **err);
  /* I-TiMePReSt's blend: out = s·a + (1−s)·b; out may equal a or b. */
  gboolean (*blend)(const TpBackend *be, size_t n, float s, const float *a, const float *b, float *out,
                    GError **err);
  /* Copy n floats from src (this instance's memory) to dst, memory of dst_be, another instance of
   * the same backend (possibly on another device), enqueued on this instance's stream after its
   * earlier work.  NULL where a backend has none: the runtime then moves messages between its
   * stages through host memory. */
  gboolean (*copy_peer)(const TpBackend *be, float *dst, const TpBackend *dst_be, const float *src, size_t n,
                        GError **err);
};

static inline const char *tp_backend_name(const TpBackend *be)
{
  return be->iface->get_name(be);
}
static inline int tp_backend_device(const TpBackend *be)
{
  return be->iface->device(be);
}
/* Address space `threads` host threads running be's operations take beyond the data: under an
 * address-space or data limit each maps be's thread_bytes and glibc's arena for itself (64 MiB
 * reserved); 0 without such a limit, where reservations cost nothing. */
long long tp_backend_threads_address_bytes(const TpBackend *be, int threads);
static inline gboolean tp_backend_host_memory(const TpBackend *be)
{
  return be->iface->host_memory(be);
}
static inline gboolean tp_backend_sync(const TpBackend *be, GError **err)
{
  return be->iface->sync(be, err);
}
/* n floats of host memory (at least one; freed with g_free), or NULL and a TP_ERROR_RUNTIME line
 * "cannot allocate a buffer of n floats" where the process has no room: the checked allocation of
 * every host buffer on the training path (no abort in GLib's allocator). */
float *tp_host_floats(size_t n, GError **err);
/* Release an instance (NULL is fine). */
static inline void tp_backend_free(TpBackend *be)
{
  if (be)
    be->iface->release(be);
}

/* ---- the registry ---- */

/* A backend as the registry knows it.  A device backend (device_noun set) makes an instance per
 * device and the executor one per pipeline stage; a host backend (device_noun NULL) makes one
 * instance, shared by every stage (create ignores the device).  `missing` says why a backend the
 * project knows is not in this build (create and device_count are then NULL). */
typedef struct {
  const char *name;        /* as --backend names it */
  const char *device_noun; /* "CUDA device"; NULL for a host backend */
  const char *missing;     /* "this build has no CUDA support", or NULL */
  /* the devices present; 0 with the reason in *why (to be freed; why may be NULL) when none is usable */
  int (*device_count)(char **why);
  /* an instance on `device` (0-based); NULL and TP_ERROR_INPUT when there is no such device */
  TpBackend *(*create)(int device, GError **err);
  /* optional: ask the backend to load all its code when it starts rather than lazily (before any
   * instance exists; FALSE, changing nothing, when it is too late or the environment chose) */
  gboolean (*load_eagerly)(void);
  /* optional, host backends: the threads each call may use from now on (cpu: OpenBLAS's; 1, the
   * default, keeps each stage's GEMMs on the stage's own core); NULL where the backend has none */
  void (*set_threads)(int n);
} TpBackendReg;

/* Add a backend to the registry (reg must live as long as the process); the built-in ones (cpu,
 * cuda) are there from the start. */
void tp_backend_register(const TpBackendReg *reg);

/* The registered backends, in the order registered (n_registered of them). */
guint tp_backend_n_registered(void);
const TpBackendReg *tp_backend_registered(guint i);

/* The backend named `name`; TP_ERROR_INPUT naming the flag for an unknown or missing one. */
const TpBackendReg *tp_backend_find(const char *name, GError **err);

/* The instance of backend `name` on its first device, made on first use and kept for the life of
 * the process (the cpu instance on the host); TP_ERROR_INPUT naming the flag for an unknown or
 * unavailable one. */
const TpBackend *tp_backend_get(const char *name, GError **err);

/* W instances of a device backend, one per pipeline stage: stage s (0-based) on device
 * list[s mod len] of devices ("0,1,…", the --devices flag), or on device s mod count when devices is
 * NULL; *n_devices (may be NULL) gets the number of distinct devices they use.  only ≥ 0: the
 * instance of stage `only` alone (a process that runs one stage makes nothing for the others), the
 * other entries NULL; -1: every stage's.  TP_ERROR_INPUT naming the flag for a bad list, a device
 * not present or no device at all.  (exec/tp_backend_stages.c) */
TpBackend **tp_backend_stages(const TpBackendReg *reg, int W, const char *devices, int only, int *n_devices,
                              GError **err);
void tp_backend_stages_free(TpBackend **be, int W);

/* The cpu backend's one instance. Its first use sets OpenBLAS to one thread per call (unless the
 * registration's set_threads asked for more): the executor runs one thread per stage and each
 * stage's GEMMs must stay on that stage's core. */
const TpBackend *tp_backend_cpu(void);

/* The OpenBLAS kernels to ask for (OPENBLAS_CORETYPE) where OpenBLAS chose `core` as it loaded
 * and this CPU can do better: an OpenBLAS older than the CPU (Debian 12's 0.3.21 on Emerald Rapids)
 * does not know its model and falls back to Prescott's SSE3 kernels, 2.6 times slower there than
 * the AVX-512 ones.  "SkylakeX" (AVX-512 F, VL, BW, DQ) or "Haswell" (AVX2, FMA) where core is
 * Prescott and the CPU has them; NULL otherwise. */
const char *tp_cpu_better_core(const char *core);

/* Called first thing by the commands that compute with OpenBLAS (argv): loads it (the module
 * tpblas.so; FALSE, TP_ERROR_RUNTIME where it cannot be).  Where OpenBLAS fell back to its generic
 * kernels on a CPU that has better ones (tp_cpu_better_core) and the user set no OPENBLAS_CORETYPE,
 * the program starts again with that core type.  OpenBLAS starts its worker threads as it loads, and
 * each maps its buffer (128 MB) when it first runs, at a moment of its own.  Under an address-space
 * or data limit (ulimit -v, -d) a memory check would read a size growing behind it and allow an
 * allocation that then fails, so OpenBLAS loads with OPENBLAS_NUM_THREADS=1 where no thread count was
 * chosen; otherwise the threads are joined (OpenBLAS starts them again when a product needs them),
 * and one that cannot map its buffer under the limit retries forever, so the limit is then refused
 * (FALSE, TP_ERROR_INPUT) instead of the program hanging.  Without such a limit TRUE, after the
 * restart for the core where there was one. */
gboolean tp_backend_cpu_settle(char **argv, GError **err);

/* Counter-based random numbers shared by every backend and by the initialisation, so that a value
 * depends only on (seed, stream, index) — never on the order of calls, the stage split or the device.
 * The CUDA kernels (exec/cuda/) call these same functions, so dropout masks agree bit for bit. */
#ifdef __CUDACC__
#define TP_HOSTDEV __host__ __device__
#else
#define TP_HOSTDEV
#endif

static inline TP_HOSTDEV guint64 tp_mix64(guint64 x)
{
  x ^= x >> 30;
  x *= G_GUINT64_CONSTANT(0xbf58476d1ce4e5b9);
  x ^= x >> 27;
  x *= G_GUINT64_CONSTANT(0x94d049bb133111eb);
  x ^= x >> 31;
  return x;
}

/* Uniform in [0, 1) with 24 random bits (exact in float). */
static inline TP_HOSTDEV float tp_uniform(guint64 seed, guint64 stream, guint64 index)
{
  guint64 h = tp_mix64(tp_mix64(seed + G_GUINT64_CONSTANT(0x9e3779b97f4a7c15) * (stream + 1)) ^ index);
  return (float)(h >> 40) * (1.0f / 16777216.0f);
}

static inline TP_HOSTDEV gboolean tp_dropout_keep(guint64 seed, size_t i, float p)
{
  return tp_uniform(seed, 0, i) >= p;
}

#endif
