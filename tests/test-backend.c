/* test-backend.c — parity of compute backends, op by op: every member of TpBackendIface (the
 * instance's own members, memory, sgemm with each transpose combination, each layer's forward and
 * backward, dropout, the optimizer step, the blend, the copy between instances) runs on random inputs at a few shapes (odd sizes, conv with stride 2 and padding, pooling
 * with padding) on a reference and on the backend under test, and their outputs are compared:
 * normalised error ‖a−b‖/‖a‖ under a per-op threshold, bit-exact where the result is discrete
 * (argmax, dropout masks, correct counts) or has one rounding only. mlp and cnn also run whole,
 * through tp_net, on cuda against cpu.
 *
 * Pairs: cuda against cpu (skipped, with the reason, where there is no CUDA build or device); cpu
 * against a naive double-precision reference (test-backend-ref.c, the GEMM-based ops), so that the
 * harness runs everywhere; and cpu against a deliberately perturbed cpu, which must fail.
 *
 * The list of operations is the interface's: a table maps every member of TpBackendIface (by its
 * offset) to the op whose cases exercise it, and a test fails unless the table covers every member
 * and every op has a case — a member cannot be added to the interface without a case.  The tables
 * and the runner are in tp_backend_cases.c. */
#include "config.h"
#include "tp_backend.h"
#include "tp_backend_cases.h"
#include "tp_backend_ref.h"
#include "tp_test_skip.h"
#include "tp_error.h"
#include "tp_model.h"
#include "tp_net.h"
#include "tp_test.h"
#include <cblas.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

static gboolean ref_has(Op op)
{
  return op == OP_SGEMM || op == OP_LINEAR_FWD || op == OP_LINEAR_BWD || op == OP_CONV_FWD || op == OP_CONV_BWD;
}

static void test_cpu_vs_ref(gconstpointer data)
{
  tp_backend_expect_agree(test_backend_reference(), tp_backend_cpu(), data);
}

/* The ops the reference lacks (the instance's own members, the copy between instances, the
 * transformer kernels, whose references are finite differences and float64 loops in
 * test-token-layers.c), on cpu: the cases run, deterministically. */
static void test_cpu_alone(gconstpointer data)
{
  tp_backend_expect_agree(tp_backend_cpu(), tp_backend_cpu(), data);
}

/* ---- the harness must be able to fail: a cpu backend with one wrong value per op ------------ */

static TpBackendIface bad_iface;
static const TpBackend bad_backend = { .iface = &bad_iface };

static const char *bad_name(const TpBackend *be)
{
  (void)be;
  return "perturbed cpu";
}

static gboolean bad_sgemm(const TpBackend *be, gboolean ta, gboolean tb, int m, int n, int k, float alpha,
                          const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
                          GError **err)
{
  gboolean ok = tp_backend_cpu()->iface->sgemm(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, err);
  c[(size_t)(m - 1) * ldc + n - 1] += 1.0f;
  return ok;
}

static gboolean bad_dropout(const TpBackend *be, size_t n, float p, guint64 seed, const float *x, float *y,
                            float *mask, GError **err)
{
  gboolean ok = tp_backend_cpu()->iface->dropout_forward(be, n, p, seed, x, y, mask, err);
  if (mask) /* the last element's keep decision reversed */
    mask[n - 1] = mask[n - 1] == 0.0f ? 1.0f / (1.0f - p) : 0.0f;
  return ok;
}

static gboolean bad_maxpool(const TpBackend *be, const TpWindow *s, int batch, const float *x, float *y,
                            gint32 *argmax, GError **err)
{
  gboolean ok = tp_backend_cpu()->iface->maxpool_forward(be, s, batch, x, y, argmax, err);
  argmax[0] ^= 1;
  return ok;
}

static gboolean bad_softmax(const TpBackend *be, int batch, int classes, const float *x, const gint32 *labels,
                            float *probs, double *loss_sum, int *correct, GError **err)
{
  gboolean ok = tp_backend_cpu()->iface->softmax_ce_forward(be, batch, classes, x, labels, probs, loss_sum, correct, err);
  *correct += 1;
  return ok;
}

static gboolean bad_sgd(const TpBackend *be, size_t n, float lr, float momentum, float weight_decay,
                        const float *w_in, const float *grad, float *mom, float *w_out, GError **err)
{
  /* the classic slip: weight decay left out */
  return tp_backend_cpu()->iface->sgd_step(be, n, lr, momentum, weight_decay * 0.0f, w_in, grad, mom, w_out, err);
}

static const Case *find_case(const char *name)
{
  for (size_t i = 0; i < tp_backend_n_cases; i++)
    if (strcmp(tp_backend_cases[i].name, name) == 0)
      return &tp_backend_cases[i];
  g_assert_not_reached();
}

static void test_harness_fails(void)
{
  static const char *const broken[] = { "sgemm-tn-33x17x65", "dropout-fwd-1001", "maxpool-fwd-3x2x7x9-k3s2p1",
                                        "softmax-ce-fwd-128x100", "sgd-1001" };
  static const char *const intact[] = { "relu-fwd-1001", "linear-fwd-5x7x3", "dropout-fwd-1001-inference" };
  bad_iface = *tp_backend_cpu()->iface;
  bad_iface.get_name = bad_name;
  bad_iface.sgemm = bad_sgemm;
  bad_iface.dropout_forward = bad_dropout;
  bad_iface.maxpool_forward = bad_maxpool;
  bad_iface.softmax_ce_forward = bad_softmax;
  bad_iface.sgd_step = bad_sgd;
  for (size_t i = 0; i < G_N_ELEMENTS(broken); i++) {
    GString *report = g_string_new(NULL);
    g_assert_false(tp_backend_check_case(tp_backend_cpu(), &bad_backend, find_case(broken[i]), report));
    g_assert_cmpuint(report->len, >, 0);
    g_test_message("as expected: %s", report->str);
    g_string_free(report, TRUE);
  }
  for (size_t i = 0; i < G_N_ELEMENTS(intact); i++)
    tp_backend_expect_agree(tp_backend_cpu(), &bad_backend, find_case(intact[i]));
}

/* ---- cuda ---------------------------------------------------------------------------------- */

/* The cuda backend, or NULL after skipping with the reason (failing instead under TP_REQUIRE=cuda). */
static const TpBackend *cuda_or_skip(void)
{
  GError *err = NULL;
  const TpBackend *be = tp_backend_get("cuda", &err);
  if (!be) {
    g_assert_error(err, TP_ERROR, TP_ERROR_PARAM_BACKEND); /* the program names it --backend */
    g_assert_true(g_str_has_prefix(err->message, "backend cuda: "));
    g_autofree char *why = g_strdup_printf("no GPU (or no driver) here (%s)", err->message + strlen("backend cuda: "));
    tpt_skip_unless_required("cuda", why);
    g_error_free(err);
  }
  return be;
}

static void test_cuda_vs_cpu(gconstpointer data)
{
  const TpBackend *cuda = cuda_or_skip();
  if (cuda)
    tp_backend_expect_agree(tp_backend_cpu(), cuda, data);
}

/* A whole network (every layer through tp_net, as the executor calls them): forward with loss and
 * backward of one micro-batch from the same initial weights; the loss, the correct count, the
 * input gradient and the parameter gradient. */
typedef struct {
  double loss;
  int correct;
  float *din, *grad;
  float *stats, *infer; /* batchnorm's running statistics after the forward; an inference's output */
  size_t in, np, ns, nout;
} NetRun;

static void run_net(const TpBackend *be, const char *model, int batch, NetRun *out)
{
  GError *err = NULL;
  g_autoptr(TpModel) m = tp_model_load(model, &err);
  g_assert_no_error(err);
  TpNet *net = tp_net_new(m, 0, tp_model_n_layers(m), be, &err);
  g_assert_no_error(err);
  out->in = tp_net_in_elems(net) * batch, out->np = tp_net_n_params(net);
  float *x = g_new(float, out->in);
  gint32 *labels = g_new(gint32, batch);
  GRand *rand = g_rand_new_with_seed(7);
  for (size_t i = 0; i < out->in; i++)
    x[i] = (float)g_rand_double_range(rand, 0, 1);
  for (int n = 0; n < batch; n++)
    labels[n] = g_rand_int_range(rand, 0, (gint32)tp_net_out_elems(net));
  float *dw = be->iface->alloc(be, out->np, &err), *dgrad = be->iface->alloc(be, out->np, &err);
  float *dx = be->iface->alloc(be, out->in, &err), *din = be->iface->alloc(be, out->in, &err);
  g_assert_no_error(err);
  TpSaved *saved = tp_saved_new(net, batch, &err);
  g_assert_no_error(err);
  TpLossStats st;
  g_assert_true(tp_net_init_weights(net, 42, dw, &err) && be->iface->zero(be, dgrad, out->np, &err) &&
                be->iface->upload(be, dx, x, out->in, &err) &&
                tp_net_forward(net, dw, dx, batch, NULL, saved, labels, &st, &err) &&
                tp_net_backward(net, dw, saved, NULL, din, dgrad, batch, &err));
  out->loss = st.loss_sum, out->correct = st.correct;
  out->din = g_new(float, out->in), out->grad = g_new(float, out->np);
  g_assert_true(be->iface->download(be, out->din, din, out->in, &err) &&
                be->iface->download(be, out->grad, dgrad, out->np, &err));
  g_assert_no_error(err);
  /* the running statistics the forward left, and an inference from them (the stage without its loss) */
  out->ns = tp_net_n_stats(net), out->stats = g_new(float, MAX(out->ns, 1));
  g_assert_true(tp_net_get_stats(net, out->stats, &err));
  int body = tp_model_n_layers(m) - 1;
  TpNet *head = tp_net_new(m, 0, body, be, &err);
  g_assert_no_error(err);
  g_assert_true(tp_net_set_stats(head, out->stats, &err));
  out->nout = tp_net_out_elems(head) * batch;
  float *dout = be->iface->alloc(be, out->nout, &err);
  out->infer = g_new(float, out->nout);
  g_assert_true(tp_net_forward(head, dw, dx, batch, dout, NULL, NULL, NULL, &err) &&
                be->iface->download(be, out->infer, dout, out->nout, &err));
  g_assert_no_error(err);
  be->iface->free(be, dout);
  tp_net_free(head);
  tp_saved_free(saved);
  be->iface->free(be, dw), be->iface->free(be, dgrad), be->iface->free(be, dx), be->iface->free(be, din);
  tp_net_free(net);
  g_rand_free(rand), g_free(x), g_free(labels);
}

static double rel_error(const float *a, const float *b, size_t n)
{
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < n; i++)
    diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), norm += (double)a[i] * a[i];
  return norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
}

static void test_cuda_net(gconstpointer data)
{
  const TpBackend *cuda = cuda_or_skip();
  if (!cuda)
    return;
  NetRun a, b;
  run_net(tp_backend_cpu(), data, 16, &a);
  run_net(cuda, data, 16, &b);
  g_assert_cmpfloat(fabs(a.loss - b.loss), <=, 1e-4 * fabs(a.loss));
  g_assert_cmpint(a.correct, ==, b.correct);
  g_assert_cmpfloat(rel_error(a.din, b.din, a.in), <=, TOL_GEMM);
  g_assert_cmpfloat(rel_error(a.grad, b.grad, a.np), <=, TOL_GEMM);
  g_assert_cmpuint(a.ns, ==, b.ns);
  if (a.ns)
    g_assert_cmpfloat(rel_error(a.stats, b.stats, a.ns), <=, TOL_GEMM);
  g_assert_cmpfloat(rel_error(a.infer, b.infer, a.nout), <=, TOL_GEMM);
  g_free(a.din), g_free(a.grad), g_free(b.din), g_free(b.grad);
  g_free(a.stats), g_free(a.infer), g_free(b.stats), g_free(b.infer);
}

/* The whole-network run the cuda comparison makes, on cpu twice: the same numbers bit for bit (its
 * buffers start defined; the running statistics moved from their start). */
static void test_cpu_net_deterministic(gconstpointer data)
{
  NetRun a, b;
  run_net(tp_backend_cpu(), data, 16, &a);
  run_net(tp_backend_cpu(), data, 16, &b);
  g_assert_cmpfloat(a.loss, ==, b.loss);
  g_assert_cmpmem(a.grad, a.np * sizeof(float), b.grad, b.np * sizeof(float));
  g_assert_cmpmem(a.infer, a.nout * sizeof(float), b.infer, b.nout * sizeof(float));
  g_assert_cmpmem(a.stats, a.ns * sizeof(float), b.stats, b.ns * sizeof(float));
  g_assert_cmpuint(a.ns, >, 0);
  g_assert_cmpfloat(a.stats[0], !=, 0.0f); /* a mean: 0 at the start */
  g_free(a.din), g_free(a.grad), g_free(b.din), g_free(b.grad);
  g_free(a.stats), g_free(a.infer), g_free(b.stats), g_free(b.infer);
}

/* Two instances (two streams, two cuBLAS handles) side by side, and a device that is not there. */
static void test_cuda_instances(void)
{
  GError *err = NULL;
  const TpBackendReg *reg = tp_backend_find("cuda", &err);
  if (!reg) { /* a build without CUDA: the registry knows the name and says why */
    g_assert_error(err, TP_ERROR, TP_ERROR_PARAM_BACKEND);
    g_assert_cmpstr(err->message, ==, "backend cuda: this build has no CUDA support");
    tpt_skip_unless_required("cuda", err->message);
    g_error_free(err);
    return;
  }
  if (!cuda_or_skip())
    return;
  TpBackend *one = reg->create(0, &err);
  g_assert_no_error(err);
  TpBackend *two = reg->create(0, &err);
  g_assert_no_error(err);
  g_assert_true(one->iface == two->iface); /* one table, shared */
  g_assert_cmpint(tp_backend_device(one), ==, 0);
  g_assert_false(tp_backend_host_memory(one));
  guint64 peak = 0, total = 0;
  g_assert_true(tp_backend_sync(one, &err) && one->iface->memory(one, &peak, &total)); /* seen at a sync */
  tp_backend_expect_agree(tp_backend_cpu(), one, find_case("conv-bwd-2x3x9x7-k3s2p1"));
  tp_backend_expect_agree(tp_backend_cpu(), two, find_case("softmax-ce-fwd-128x100"));
  g_assert_true(tp_backend_sync(one, &err));
  tp_backend_free(one);
  tp_backend_free(two);
  g_assert_null(reg->create(1 << 20, &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  g_error_free(err);
}

/* Where no GPU answers, TP_REQUIRE=cuda turns the cuda cases' skip into a failure (the GPU check's
 * guarantee that its parity run did run). */
static void test_require(void)
{
  if (g_test_subprocess()) {
    g_setenv("TP_REQUIRE", "mpi,cuda", TRUE);
    cuda_or_skip();
    g_print("%s\n", tpt_failed_as_required ? "failed, as required" : "passed or skipped");
    return;
  }
  const char *const lists[] = { "cuda", "mpi,cuda", "cuda,nccl" }, *const not[] = { "", "cudax", "mpi, cuda" };
  for (guint i = 0; i < G_N_ELEMENTS(lists); i++) {
    g_setenv("TP_REQUIRE", lists[i], TRUE);
    g_assert_true(tpt_required("cuda"));
    g_setenv("TP_REQUIRE", not[i], TRUE);
    g_assert_false(tpt_required("cuda"));
  }
  g_unsetenv("TP_REQUIRE");
  g_assert_false(tpt_required("cuda"));
  GError *err = NULL;
  const TpBackend *be = tp_backend_get("cuda", &err);
  g_clear_error(&err);
  if (be) {
    g_test_skip("a GPU answers here: nothing to refuse");
    return;
  }
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_failed();
  g_test_trap_assert_stdout("*failed, as required*");
}

/* CUDA_MODULE_LOADING=EAGER is asked for before CUDA starts (a fresh process: the module is not
 * loaded yet), never over the environment's own choice, and not at all once CUDA may have started. */
static void test_load_eagerly(void)
{
  const TpBackendReg *reg = tp_backend_find("cuda", NULL);
  if (!reg || !reg->load_eagerly) {
    g_test_skip("this build has no CUDA support");
    return;
  }
  if (!g_test_subprocess()) {
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    g_test_trap_assert_stdout("*eager: kept LAZY, set EAGER, too late*");
    return;
  }
  GString *said = g_string_new("eager:");
  g_setenv("CUDA_MODULE_LOADING", "LAZY", TRUE);
  if (!reg->load_eagerly() && !g_strcmp0(g_getenv("CUDA_MODULE_LOADING"), "LAZY"))
    g_string_append(said, " kept LAZY,");
  g_unsetenv("CUDA_MODULE_LOADING");
  if (reg->load_eagerly() && !g_strcmp0(g_getenv("CUDA_MODULE_LOADING"), "EAGER"))
    g_string_append(said, " set EAGER,");
  g_unsetenv("CUDA_MODULE_LOADING");
  reg->device_count(NULL); /* the module is loaded: CUDA may have started */
  if (!reg->load_eagerly() && !g_getenv("CUDA_MODULE_LOADING"))
    g_string_append(said, " too late");
  g_print("%s\n", said->str);
  g_string_free(said, TRUE);
}

/* ---- the list of operations is the interface's --------------------------------------------- */

static gboolean op_has_case(Op op)
{
  for (size_t i = 0; i < tp_backend_n_cases; i++)
    if (tp_backend_cases[i].op == op)
      return TRUE;
  return FALSE;
}

/* Every member of TpBackendIface (all function pointers) has a row in `members`, once, and every
 * row's op has a case. */
static void test_members(void)
{
  size_t n = sizeof(TpBackendIface) / sizeof(void (*)(void));
  g_assert_cmpuint(sizeof(TpBackendIface) % sizeof(void (*)(void)), ==, 0);
  if (tp_backend_n_members != n)
    g_test_fail_printf("TpBackendIface has %zu members, the parity table %zu: give every member a case", n,
                       tp_backend_n_members);
  gboolean *seen = g_new0(gboolean, n);
  for (size_t i = 0; i < tp_backend_n_members; i++) {
    size_t at = tp_backend_members[i].offset / sizeof(void (*)(void));
    g_assert_cmpuint(tp_backend_members[i].offset % sizeof(void (*)(void)), ==, 0);
    g_assert_cmpuint(at, <, n);
    if (seen[at])
      g_test_fail_printf("member %s appears twice", tp_backend_members[i].member);
    seen[at] = TRUE;
    if (!op_has_case(tp_backend_members[i].op))
      g_test_fail_printf("member %s: its op has no case", tp_backend_members[i].member);
  }
  g_free(seen);
  /* every member of the backends' own tables is set (copy_peer may be NULL) */
  for (guint b = 0; b < 2; b++) {
    const TpBackend *be = b ? tp_backend_cpu() : test_backend_reference();
    for (size_t i = 0; i < tp_backend_n_members; i++) {
      void (*fn)(void);
      memcpy(&fn, (const char *)be->iface + tp_backend_members[i].offset, sizeof fn);
      if (!fn && tp_backend_members[i].op != OP_PEER)
        g_test_fail_printf("%s: member %s is not set", tp_backend_name(be), tp_backend_members[i].member);
    }
  }
}

/* The registry: cpu and cuda from the start (cuda with the reason where the build lacks it), in
 * that order; an unknown name refused with the known ones; a backend registered later found by
 * its name, listed, and its instances made by its own constructor. */
static int one_device(char **why)
{
  (void)why;
  return 1;
}

static TpBackend *make_reference(int device, GError **err)
{
  (void)device, (void)err;
  return (TpBackend *)test_backend_reference();
}

static void test_registry(void)
{
  static const TpBackendReg ref = { .name = "reference", .device_count = one_device, .create = make_reference };
  GError *err = NULL;
  guint n = tp_backend_n_registered();
  g_assert_cmpuint(n, >=, 2);
  g_assert_cmpstr(tp_backend_registered(0)->name, ==, "cpu");
  g_assert_null(tp_backend_registered(0)->device_noun);
  g_assert_cmpstr(tp_backend_registered(1)->name, ==, "cuda");
  g_assert_cmpstr(tp_backend_registered(1)->device_noun, ==, "CUDA device");
  g_assert_true(!tp_backend_registered(1)->missing == (tp_backend_registered(1)->create != NULL));
  g_assert_null(tp_backend_registered(n));
  g_assert_null(tp_backend_find("tpu", &err));
  g_assert_error(err, TP_ERROR, TP_ERROR_PARAM_BACKEND);
  g_assert_cmpstr(err->message, ==, "unknown backend 'tpu' (known: cpu, cuda)");
  g_clear_error(&err);
  g_assert_true(tp_backend_get("cpu", &err) == tp_backend_cpu());
  g_assert_cmpint(tp_backend_device(tp_backend_cpu()), ==, -1);
  g_assert_true(tp_backend_host_memory(tp_backend_cpu()));
  tp_backend_register(&ref);
  g_assert_cmpuint(tp_backend_n_registered(), ==, n + 1);
  g_assert_true(tp_backend_registered(n) == &ref);
  g_assert_true(tp_backend_find("reference", &err) == &ref);
  g_assert_true(tp_backend_get("reference", &err) == test_backend_reference());
  g_assert_no_error(err);
  g_assert_null(tp_backend_find("tpu", &err));
  g_assert_cmpstr(err->message, ==, "unknown backend 'tpu' (known: cpu, cuda, reference)");
  g_clear_error(&err);
}

/* The cpu registration's set_threads sets OpenBLAS's threads per call; the default stays one. */
static void test_cpu_threads(void)
{
  const TpBackendReg *reg = tp_backend_find("cpu", NULL);
  g_assert_nonnull(reg);
  g_assert_nonnull(tp_backend_get("cpu", NULL));
  g_assert_cmpint(openblas_get_num_threads(), ==, 1);
  g_assert_nonnull(reg->set_threads);
  reg->set_threads(2);
  g_assert_cmpint(openblas_get_num_threads(), ==, 2);
  reg->set_threads(1);
  g_assert_cmpint(openblas_get_num_threads(), ==, 1);
}

/* Whether /proc/cpuinfo's first "flags" line lists every one of the NULL-terminated flags. */
static gboolean cpu_has(const char *const *flags)
{
  g_autofree char *info = NULL;
  if (!g_file_get_contents("/proc/cpuinfo", &info, NULL, NULL))
    return FALSE;
  const char *line = strstr(info, "\nflags");
  if (!line)
    return FALSE;
  g_autofree char *first = g_strndup(line + 1, strcspn(line + 1, "\n"));
  g_auto(GStrv) words = g_strsplit_set(strchr(first, ':') ? strchr(first, ':') + 1 : "", " \t", -1);
  for (int i = 0; flags[i]; i++)
    if (!g_strv_contains((const char *const *)words, flags[i]))
      return FALSE;
  return TRUE;
}

/* The last "Core: NAME" OpenBLAS printed (OPENBLAS_VERBOSE=2) in text; NULL when none. */
static char *last_core(const char *text)
{
  char *name = NULL;
  for (const char *p = text; (p = strstr(p, "Core: ")); p += 6) {
    g_free(name);
    name = g_strndup(p + 6, strcspn(p + 6, "\n"));
  }
  return name;
}

/* OpenBLAS's generic fallback (Prescott, SSE3) is replaced by the kernels the CPU has, as its
 * /proc/cpuinfo flags say; any other core is left alone; the program restarts on the better core
 * unless the user chose one (OPENBLAS_CORETYPE). */
static void test_cpu_core(void)
{
  g_assert_null(tp_cpu_better_core(NULL));
  g_assert_null(tp_cpu_better_core("SkylakeX"));
  g_assert_null(tp_cpu_better_core("Haswell"));
  g_assert_null(tp_cpu_better_core("Zen"));
  const char *want = NULL;
#if defined(__x86_64__)
  if (cpu_has((const char *const[]){ "avx512f", "avx512vl", "avx512bw", "avx512dq", NULL }))
    want = "SkylakeX";
  else if (cpu_has((const char *const[]){ "avx2", "fma", NULL }))
    want = "Haswell";
#endif
  g_assert_cmpstr(tp_cpu_better_core("Prescott"), ==, want);
  /* through the program: the core it computes with, and a core the user chose (train loads
   * OpenBLAS; --version does not) */
  g_setenv("OPENBLAS_VERBOSE", "2", TRUE);
  g_unsetenv("OPENBLAS_CORETYPE");
  TptRun r = tpt_run((const char *[]){ "train", "--help", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *core = last_core(r.err);
  g_test_message("OpenBLAS computes on %s (the fallback's replacement here: %s)", core ? core : "?", want ? want : "none");
  if (core && want)
    g_assert_cmpstr(core, !=, "Prescott");
  tpt_run_clear(&r);
  g_setenv("OPENBLAS_CORETYPE", "Prescott", TRUE);
  r = tpt_run((const char *[]){ "train", "--help", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *chosen = last_core(r.err);
  if (chosen)
    g_assert_cmpstr(chosen, ==, "Prescott");
  tpt_run_clear(&r);
  /* a command that makes no product never loads OpenBLAS (its start would pay for it) */
  r = tpt_run((const char *[]){ "--version", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *none = last_core(r.err);
  g_assert_null(none);
  tpt_run_clear(&r);
  g_unsetenv("OPENBLAS_CORETYPE");
  g_unsetenv("OPENBLAS_VERBOSE");
}

/* The commands that make no product map neither OpenBLAS nor Open MPI (their modules tpblas.so and
 * tpmpi.so are loaded only by train and profile): glibc's loader names each library it opens. */
static void test_start_libraries(void)
{
  g_setenv("LD_DEBUG", "libs", TRUE);
  const char *const cmds[][8] = {
    { "--version", NULL },
    { "simulate", "-s", "timeprest", "-w", "4", "-n", "8", NULL },
    { "train", "--help", NULL },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
    TptRun r = tpt_run(cmds[i]);
    g_assert_cmpint(r.status, ==, 0);
    gboolean loader = strstr(r.err, "find library=") != NULL; /* glibc's LD_DEBUG */
    if (!loader) {
      tpt_run_clear(&r);
      g_unsetenv("LD_DEBUG");
      g_test_skip("the loader printed no LD_DEBUG trace (not glibc's, or a program it does not trace)");
      return;
    }
    gboolean blas = strstr(r.err, "libopenblas") != NULL, mpi = strstr(r.err, "libmpi") != NULL;
    g_test_message("%s: OpenBLAS %s, MPI %s", cmds[i][0], blas ? "loaded" : "not loaded", mpi ? "loaded" : "not loaded");
    if (strcmp(cmds[i][0], "train") == 0)
      g_assert_true(blas); /* what the check below looks for is there when the library is */
    else {
      g_assert_false(blas);
      g_assert_false(mpi);
    }
    tpt_run_clear(&r);
  }
  g_unsetenv("LD_DEBUG");
}

/* Whether some member of the interface is exercised by op's cases. */
static gboolean op_in_interface(Op op)
{
  for (size_t i = 0; i < tp_backend_n_members; i++)
    if (tp_backend_members[i].op == op)
      return TRUE;
  return FALSE;
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/backend/interface/every-member-has-a-case", test_members);
  g_test_add_func("/backend/interface/registry", test_registry);
  g_test_add_func("/backend/cpu/threads", test_cpu_threads);
  g_test_add_func("/backend/cpu/core", test_cpu_core);
  g_test_add_func("/backend/cpu/start-libraries", test_start_libraries);
  for (size_t i = 0; i < tp_backend_n_cases; i++) {
    char *path;
    if (!op_in_interface(tp_backend_cases[i].op))
      continue;
    if (ref_has(tp_backend_cases[i].op)) {
      path = g_strdup_printf("/backend/cpu-vs-reference/%s", tp_backend_cases[i].name);
      g_test_add_data_func(path, &tp_backend_cases[i], test_cpu_vs_ref);
      g_free(path);
    } else if (tp_backend_cases[i].op == OP_INSTANCE || tp_backend_cases[i].op == OP_PEER ||
               tp_backend_cases[i].op >= OP_SGEMM_BATCHED) { /* the transformer ops: against FD in test-token-layers */
      path = g_strdup_printf("/backend/cpu/%s", tp_backend_cases[i].name);
      g_test_add_data_func(path, &tp_backend_cases[i], test_cpu_alone);
      g_free(path);
    }
    path = g_strdup_printf("/backend/cuda-vs-cpu/%s", tp_backend_cases[i].name);
    g_test_add_data_func(path, &tp_backend_cases[i], test_cuda_vs_cpu);
    g_free(path);
  }
  g_test_add_func("/backend/harness/detects-wrong-results", test_harness_fails);
  g_test_add_func("/backend/cuda/instances", test_cuda_instances);
  g_test_add_func("/backend/cuda/required-fails", test_require);
  g_test_add_func("/backend/cuda/load-eagerly", test_load_eagerly);
  g_test_add_data_func("/backend/cuda-vs-cpu/net-mlp", "mlp", test_cuda_net);
  g_test_add_data_func("/backend/cuda-vs-cpu/net-cnn", "cnn", test_cuda_net);
  g_test_add_data_func("/backend/cuda-vs-cpu/net-resnet-fmnist", "resnet-fmnist", test_cuda_net);
  g_test_add_data_func("/backend/cpu/net-resnet-fmnist-deterministic", "resnet-fmnist", test_cpu_net_deterministic);
  return g_test_run();
}
