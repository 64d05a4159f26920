/* test-alloc.c — the training path's allocations under the process's own address-space limit
 * (RLIMIT_AS, what `ulimit -v` sets): an outgoing message's buffer, the local transport's copy of a
 * message, a weight version and the weight store's bookkeeping, the run's records.  Each fails with a
 * TP_ERROR_RUNTIME naming what could not be allocated, never an abort in GLib's allocator.  Every
 * case runs in a subprocess of its own, the limit set there (a sanitizer build reserves more address
 * space than any limit leaves: the cases skip there). */
#include "tp_test.h"
#include "tp_test_run.h"

#include "tp_backend.h"
#include "tp_local.h"
#include "tp_outbox.h"
#include "tp_wstore.h"

#include <stdio.h>
#include <sys/resource.h>

#if defined(__SANITIZE_ADDRESS__)
#define TPT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TPT_SANITIZED 1
#endif
#endif

#define GIB ((size_t)1 << 30)

/* The process's address space now (VmSize), in bytes. */
static size_t vm_size(void)
{
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents("/proc/self/status", &text, NULL, NULL));
  const char *p = strstr(text, "VmSize:");
  g_assert_nonnull(p);
  return (size_t)g_ascii_strtoull(p + 7, NULL, 10) * 1024;
}

/* Leave the process 256 MiB of address space beyond what it holds now. */
static void limit_address_space(void)
{
  struct rlimit r = { .rlim_cur = vm_size() + 256 * 1024 * 1024, .rlim_max = RLIM_INFINITY };
  g_assert_cmpint(setrlimit(RLIMIT_AS, &r), ==, 0);
}

/* Whether this is the subprocess that runs the case under the limit (the parent checks it passed). */
static gboolean in_limited_child(void)
{
#ifdef TPT_SANITIZED
  g_test_skip("a sanitizer build needs an unlimited address space");
  return FALSE;
#else
  if (g_test_subprocess()) {
    limit_address_space();
    return TRUE;
  }
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  return FALSE;
#endif
}

static void assert_cannot(GError *e, const char *what)
{
  g_assert_error(e, TP_ERROR, TP_ERROR_RUNTIME);
  if (!strstr(e->message, what) || !strstr(e->message, "cannot allocate"))
    g_error("\"%s\" does not say it cannot allocate %s", e->message, what);
  g_assert_null(strchr(e->message, '\n'));
}

/* An outgoing message's buffer (the outbox makes one when every buffer is lent). */
static void test_outbox(void)
{
  if (!in_limited_child())
    return;
  GError *e = NULL;
  TpOutbox *o = tp_outbox_new(GIB / sizeof(float));
  g_assert_null(tp_outbox_take(o, &e));
  assert_cannot(e, "a buffer of 268435456 floats");
  g_error_free(e);
  tp_outbox_release(o);
}

/* The local transport's copy of a message sent. */
static void test_local_copy(void)
{
  if (!in_limited_child())
    return;
  /* the payload is mapped before the limit is lowered, the copy would need as much again */
  struct rlimit open = { RLIM_INFINITY, RLIM_INFINITY };
  g_assert_cmpint(setrlimit(RLIMIT_AS, &open), ==, 0);
  const size_t len = GIB / 2;
  char *payload = g_malloc(len);
  limit_address_space();
  g_autoptr(TpTransport) t = tp_local_new(2, 1, 5);
  TpTag tag = { TP_OP_F, 1, 0 };
  GError *e = NULL;
  g_assert_false(t->send(t, tp_link_ends(0, 1), &tag, payload, len, &e));
  assert_cannot(e, "the copy of F(1,A)");
  g_assert_nonnull(strstr(e->message, "stage 1"));
  g_error_free(e);
  g_free(payload);
}

/* A weight version in host memory, and the weight store's bookkeeping of a long schedule. */
static void test_weight_store(void)
{
  if (!in_limited_child())
    return;
  g_autoptr(TpSchedule) s = tpt_preset("gpipe", 1, 1, 1);
  TpWStoreSizes big = { .n_params = GIB / sizeof(float) };
  GError *e = NULL;
  g_assert_null(tp_wstore_new(s, 0, 0, &big, NULL, &e));
  assert_cannot(e, "a weight version of 268435456 floats");
  g_clear_error(&e);
  /* 2^28 mini-batches (no operations listed): 1 GiB of reference counts alone */
  g_autoptr(TpSchedule) longer = tp_schedule_new(TP_ORDER_GPIPE, TP_POLICY_SYNC, 1, 1, 1 << 28);
  TpWStoreSizes small = { .n_params = 1 };
  g_assert_null(tp_wstore_new(longer, 0, 0, &small, NULL, &e));
  assert_cannot(e, "the weight store's bookkeeping");
  g_error_free(e);
}

/* The records of a run of 2^28 mini-batches (their losses alone take 2 GiB). */
static void test_run_records(void)
{
  if (!in_limited_child())
    return;
  GError *e = NULL;
  g_autoptr(TpModel) model = tp_model_load(TP_SRCDIR "/models/mlp.model", &e);
  g_assert_no_error(e);
  g_autoptr(TpDataset) data = tp_dataset_synthetic(64, 28, 28, 5);
  int bounds[] = { 0, tp_model_n_layers(model) };
  TpRuntimeConfig cfg = { .model = model, .bounds = bounds, .W = 1, .N = 1, .batch = 8, .be = tp_backend_cpu(),
                          .train = data, .lr = 0.05f, .seed = 7, .timeout_s = 5 };
  g_autoptr(TpRuntime) rt = tp_runtime_new(&cfg, &e);
  g_assert_no_error(e);
  g_autoptr(TpSchedule) s = tp_schedule_new(TP_ORDER_GPIPE, TP_POLICY_SYNC, 1, 1, 1 << 28);
  TpRunResult r;
  g_assert_false(tp_runtime_run(rt, s, NULL, 1, g_get_monotonic_time(), NULL, &r, &e));
  assert_cannot(e, "the run's records");
  g_error_free(e);
  g_assert_null(r.rec);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/alloc/outbox", test_outbox);
  g_test_add_func("/alloc/local-copy", test_local_copy);
  g_test_add_func("/alloc/weight-store", test_weight_store);
  g_test_add_func("/alloc/run-records", test_run_records);
  return g_test_run();
}
