/* cpu_backend.c — the `cpu` backend: host memory, OpenBLAS SGEMM (the module tpblas.so, tp_blas.h)
 * and the kernel table.
 *
 * Threads: the executor runs one thread per pipeline stage and each stage calls BLAS itself, so
 * OpenBLAS must not start threads of its own inside a call (W stages × its threads would oversubscribe
 * the cores and make stage times depend on each other). The backend therefore sets OpenBLAS to one
 * thread, once, the first time it is requested (tp_backend_cpu()); OpenBLAS built with pthreads is
 * safe to call from several threads at once. */
#include "config.h"
#include "tp_cpu.h"
#include "tp_error.h"
#include "tp_schedule.h"
#include "tp_memory.h"
#include "tp_blas.h"

#include <sys/resource.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

static const TpBlasModule *blas; /* OpenBLAS, loaded by tp_cpu_instance */

static float *cpu_alloc(const TpBackend *be, size_t n, GError **err)
{
  (void)be;
  /* 64-byte alignment for the vector units; at least one float so that n = 0 is not NULL */
  void *p = NULL;
  size_t bytes = (n ? n : 1) * sizeof(float);
  if (n > G_MAXSIZE / sizeof(float) || posix_memalign(&p, 64, bytes) != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cpu backend: cannot allocate %zu floats", n);
    return NULL;
  }
  tp_memory_advise_huge(p, bytes); /* a saved state of many samples: fewer first-touch faults and TLB misses */
  return p;
}

static void cpu_free(const TpBackend *be, float *p)
{
  (void)be;
  free(p);
}

static gboolean cpu_zero(const TpBackend *be, float *p, size_t n, GError **err)
{
  (void)be, (void)err;
  memset(p, 0, n * sizeof(float));
  return TRUE;
}

static gboolean cpu_copy(const TpBackend *be, float *dst, const float *src, size_t n, GError **err)
{
  (void)be, (void)err;
  if (dst != src)
    memmove(dst, src, n * sizeof(float));
  return TRUE;
}

gboolean tp_cpu_sgemm(const TpBackend *be, gboolean trans_a, gboolean trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc, GError **err)
{
  (void)be, (void)err;
  blas->sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  return TRUE;
}

static const char *cpu_name(const TpBackend *be)
{
  (void)be;
  return "cpu";
}

static size_t cpu_thread_bytes(const TpBackend *be)
{
  (void)be;
  return (size_t)128 << 20; /* OpenBLAS's per-thread buffer (BUFFER_SIZE of its x86_64 builds) */
}

/* One instance for the life of the process: nothing to release. */
static void cpu_release(TpBackend *be)
{
  (void)be;
}

/* Every call has finished when it returns. */
static gboolean cpu_sync(const TpBackend *be, GError **err)
{
  (void)be, (void)err;
  return TRUE;
}

static int cpu_device(const TpBackend *be)
{
  (void)be;
  return -1;
}

static gboolean cpu_host_memory(const TpBackend *be)
{
  (void)be;
  return TRUE;
}

static gboolean cpu_memory(const TpBackend *be, guint64 *peak, guint64 *total)
{
  (void)be;
  *peak = *total = 0;
  return FALSE;
}

static const TpBackendIface cpu_iface = {
  .get_name = cpu_name,
  .thread_bytes = cpu_thread_bytes,
  .release = cpu_release,
  .sync = cpu_sync,
  .device = cpu_device,
  .host_memory = cpu_host_memory,
  .memory = cpu_memory,
  .alloc = cpu_alloc,
  .free = cpu_free,
  .zero = cpu_zero,
  .copy = cpu_copy,
  .upload = cpu_copy,
  .download = cpu_copy,
  .sgemm = tp_cpu_sgemm,
  .linear_forward = tp_cpu_linear_forward,
  .linear_backward = tp_cpu_linear_backward,
  .conv_workspace = tp_cpu_conv_workspace,
  .conv_forward = tp_cpu_conv_forward,
  .conv_backward = tp_cpu_conv_backward,
  .maxpool_forward = tp_cpu_maxpool_forward,
  .maxpool_backward = tp_cpu_maxpool_backward,
  .avgpool_forward = tp_cpu_avgpool_forward,
  .avgpool_backward = tp_cpu_avgpool_backward,
  .batchnorm_forward = tp_cpu_batchnorm_forward,
  .batchnorm_backward = tp_cpu_batchnorm_backward,
  .relu_forward = tp_cpu_relu_forward,
  .relu_backward = tp_cpu_relu_backward,
  .dropout_forward = tp_cpu_dropout_forward,
  .dropout_backward = tp_cpu_dropout_backward,
  .dropout_byte_forward = tp_cpu_dropout_byte_forward,
  .dropout_byte_backward = tp_cpu_dropout_byte_backward,
  .softmax_ce_forward = tp_cpu_softmax_ce_forward,
  .softmax_ce_backward = tp_cpu_softmax_ce_backward,
  .sgemm_batched = tp_cpu_sgemm_batched,
  .axpy = tp_cpu_axpy,
  .embedding_forward = tp_cpu_embedding_forward,
  .embedding_backward = tp_cpu_embedding_backward,
  .norm_forward = tp_cpu_norm_forward,
  .norm_backward = tp_cpu_norm_backward,
  .rope = tp_cpu_rope,
  .causal_softmax_forward = tp_cpu_causal_softmax_forward,
  .causal_softmax_backward = tp_cpu_causal_softmax_backward,
  .gelu_forward = tp_cpu_gelu_forward,
  .gelu_backward = tp_cpu_gelu_backward,
  .swiglu_forward = tp_cpu_swiglu_forward,
  .swiglu_backward = tp_cpu_swiglu_backward,
  .sgd_step = tp_cpu_sgd_step,
  .adamw_step = tp_cpu_adamw_step,
  .blend = tp_cpu_blend,
};

static TpBackend cpu_backend = { .iface = &cpu_iface, .ctx = NULL };
static gint threads_set;

static gint blas_rested; /* its threads were joined by tp_backend_cpu_settle */

void tp_cpu_set_threads(int n)
{
  if (!tp_cpu_instance(0, NULL))
    return;
  /* growing the pool past its first size while it is joined would start those threads twice */
  if (n > 1 && g_atomic_int_compare_and_exchange(&blas_rested, 1, 0))
    blas->thread_init();
  blas->set_num_threads(MAX(n, 1));
  g_atomic_int_set(&threads_set, 1);
}

TpBackend *tp_cpu_instance(int device, GError **err)
{
  (void)device;
  static gsize once = 0;
  if (g_once_init_enter(&once)) {
    const TpBlasModule *m = tp_blas(NULL);
    if (m && !g_atomic_int_get(&threads_set))
      m->set_num_threads(1);
    g_atomic_pointer_set(&blas, m);
    g_once_init_leave(&once, 1);
  }
  if (!g_atomic_pointer_get(&blas)) {
    tp_blas(err); /* the module's reason */
    return NULL;
  }
  return &cpu_backend;
}

const TpBackend *tp_backend_cpu(void)
{
  return tp_cpu_instance(0, NULL);
}

static GMutex blas_lock;
static GCond blas_cond;
static gboolean blas_joined;

static gpointer blas_join(gpointer data)
{
  (void)data;
  tp_blas(NULL)->thread_shutdown();
  g_atomic_int_set(&blas_rested, 1);
  g_mutex_lock(&blas_lock);
  blas_joined = TRUE;
  g_cond_signal(&blas_cond);
  g_mutex_unlock(&blas_lock);
  return NULL;
}

const char *tp_cpu_better_core(const char *core)
{
  if (!core || g_ascii_strncasecmp(core, "prescott", 8) != 0)
    return NULL;
#if defined(__x86_64__) && defined(__GNUC__)
  /* names OpenBLAS 0.3.21 takes (OPENBLAS_CORETYPE=Cooperlake says "Core not found" there and falls
   * back on its own detection; Cooperlake's SGEMM kernels are SkylakeX's) */
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
#endif
  return NULL;
}

gboolean tp_backend_cpu_settle(char **argv, GError **err)
{
  gboolean limited = tp_memory_address_limited();
  /* OpenBLAS reads its thread count as it loads: under a limit it loads with one (no worker
   * threads, nothing mapped behind the checks; train --threads asks for more where it wants them),
   * unless the user chose a count */
  if (limited && !g_getenv("OPENBLAS_NUM_THREADS") && !g_getenv("OMP_NUM_THREADS") && !g_getenv("GOTO_NUM_THREADS"))
    g_setenv("OPENBLAS_NUM_THREADS", "1", TRUE);
  const TpBlasModule *m = tp_blas(err);
  if (!m)
    return FALSE;
  /* OpenBLAS picks its kernels as it loads; one older than the CPU takes its generic ones */
  const char *core = g_getenv("OPENBLAS_CORETYPE") ? NULL : tp_cpu_better_core(m->corename());
  if (core) {
    g_setenv("OPENBLAS_CORETYPE", core, TRUE);
    execv("/proc/self/exe", argv); /* returns only where it cannot: then, under a limit, the threads are joined */
  }
  if (!limited) {
    /* the threads OpenBLAS starts as it loads spin for about 0.1 s waiting for work, a core's worth
     * taken from the command until its first product: joined now */
    blas_join(NULL);
    return TRUE;
  }
  GThread *t = g_thread_try_new("blas-join", blas_join, NULL, NULL);
  if (!t)
    return TRUE;
  gint64 until = g_get_monotonic_time() + 5 * G_TIME_SPAN_SECOND;
  g_mutex_lock(&blas_lock);
  while (!blas_joined && g_cond_wait_until(&blas_cond, &blas_lock, until))
    ;
  gboolean joined = blas_joined;
  g_mutex_unlock(&blas_lock);
  if (!joined) {
    struct rlimit rl;
    gboolean as = getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
    if (!as)
      getrlimit(RLIMIT_DATA, &rl);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "OpenBLAS cannot map its threads' buffers under the %s limit "
                "(ulimit %s %llu): raise it", as ? "address-space" : "data", as ? "-v" : "-d",
                (unsigned long long)rl.rlim_cur / 1024);
    return FALSE; /* the blocked thread is left: the process ends */
  }
  g_thread_join(t);
  return TRUE;
}
