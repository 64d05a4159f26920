/* test-staging.c — the runtime's device path without a device: a backend that computes like cpu
 * but is a device backend of its own, registered as one (devices, an instance per device, memory that
 * is not the host's), so the runtime treats its memory as a device's (every datum, label and
 * message staged through host copies, one buffer set per stage backend, a host copy of the
 * weights).  It keeps its own allocations apart and poisons them, and it counts them.  Trained,
 * evaluated and profiled, it must give the cpu backend's weights bit for bit (the staging moves
 * bytes, it computes nothing), on one instance per stage as `train --backend cuda` makes them, and
 * free everything it allocated.  Given a copy between instances (copy_peer), the stages of one process
 * move activations and gradients device to device, none through the host, with the same weights (a
 * split backward's I as B).  And the flags of GPU training refuse what they cannot do with one
 * line and status 2. */
#include "config.h"
#include "tp_data.h"
#include "tp_net.h"
#include "tp_runtime.h"
#include "tp_test.h"

#include <math.h>

enum { BATCH = 32, TRAIN_N = 512, MAX_W = 4 };

static TpModel *model;
static TpDataset *data;
static gint live;      /* allocations of the staged backends not yet freed */
static gint transfers; /* host <-> "device" copies (uploads and downloads) */
static gint peer_copies; /* device-to-device copies between stages */

static float *staged_alloc(const TpBackend *be, size_t n, GError **err)
{
  (void)be, (void)err;
  float *p = g_new(float, n ? n : 1);
  for (size_t i = 0; i < n; i++)
    p[i] = NAN; /* what is read before it is written poisons the weights */
  g_atomic_int_inc(&live);
  return p;
}

static void staged_free(const TpBackend *be, float *p)
{
  (void)be;
  if (p)
    g_atomic_int_add(&live, -1);
  g_free(p);
}

static gboolean staged_up(const TpBackend *be, float *dst, const float *src, size_t n, GError **err)
{
  g_atomic_int_inc(&transfers);
  return tp_backend_cpu()->iface->copy(be, dst, src, n, err);
}

/* Between two instances: both must be staged ones (a "device" copy, never through the host). */
static gboolean staged_copy_peer(const TpBackend *be, float *dst, const TpBackend *dst_be, const float *src, size_t n,
                                 GError **err)
{
  g_assert_true(dst_be->iface == be->iface);
  g_atomic_int_inc(&peer_copies);
  return tp_backend_cpu()->iface->copy(be, dst, src, n, err);
}

static const char *staged_name(const TpBackend *be)
{
  (void)be;
  return "cpu-staged";
}

static const char *staged_peer_name(const TpBackend *be)
{
  (void)be;
  return "cpu-staged-peer";
}

static int staged_device(const TpBackend *be)
{
  return GPOINTER_TO_INT(be->ctx) - 1;
}

static gboolean staged_host_memory(const TpBackend *be)
{
  (void)be;
  return FALSE;
}

static void staged_release(TpBackend *be)
{
  g_free(be);
}

static int staged_count(char **why)
{
  (void)why;
  return MAX_W;
}

/* cpu's table with its own memory and its own instances (one per "device"); with peer, it also
 * copies between instances as the cuda backend does between stages. */
static TpBackendIface staged_iface, staged_peer_iface;

static TpBackend *staged_create(const TpBackendIface *iface, int device, GError **err)
{
  if (device < 0 || device >= MAX_W) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "no staged device %d", device);
    return NULL;
  }
  TpBackend *be = g_new(TpBackend, 1);
  *be = (TpBackend){ .iface = iface, .ctx = GINT_TO_POINTER(device + 1) };
  return be;
}

static TpBackend *staged_new(int device, GError **err)
{
  return staged_create(&staged_iface, device, err);
}

static TpBackend *staged_peer_new(int device, GError **err)
{
  return staged_create(&staged_peer_iface, device, err);
}

static const TpBackendReg staged_reg = {
  .name = "cpu-staged", .device_noun = "staged device", .device_count = staged_count, .create = staged_new
};
static const TpBackendReg staged_peer_reg = {
  .name = "cpu-staged-peer", .device_noun = "staged device", .device_count = staged_count, .create = staged_peer_new
};

static void register_staged(void)
{
  staged_iface = *tp_backend_cpu()->iface;
  staged_iface.get_name = staged_name;
  staged_iface.release = staged_release;
  staged_iface.device = staged_device;
  staged_iface.host_memory = staged_host_memory;
  staged_iface.alloc = staged_alloc;
  staged_iface.free = staged_free;
  staged_iface.upload = staged_up;
  staged_iface.download = staged_up;
  staged_iface.copy_peer = NULL;
  staged_peer_iface = staged_iface;
  staged_peer_iface.get_name = staged_peer_name;
  staged_peer_iface.copy_peer = staged_copy_peer;
  tp_backend_register(&staged_reg);
  tp_backend_register(&staged_peer_reg);
}

/* An instance of the staged backend (with copy_peer or without) on device 0, from the registry. */
static TpBackend *staged_backend(gboolean peer)
{
  GError *err = NULL;
  const TpBackendReg *reg = tp_backend_find(peer ? "cpu-staged-peer" : "cpu-staged", &err);
  g_assert_no_error(err);
  TpBackend *be = reg->create(0, &err);
  g_assert_no_error(err);
  return be;
}

typedef struct {
  float *w;
  size_t n;
  double acc, loss;
  gboolean match;
} Outcome;

static Outcome run(const char *preset, int W, int N, int K, const TpBackend *be, gboolean per_stage, gboolean peer)
{
  int L = tp_model_n_layers(model), bounds[MAX_W + 1];
  for (int s = 0; s <= W; s++)
    bounds[s] = s * L / W;
  GError *err = NULL;
  /* one instance per stage, as `train --backend cuda` makes them: stage s on device s */
  int devices = 0;
  TpBackend **inst = tp_backend_stages(tp_backend_find(peer ? "cpu-staged-peer" : "cpu-staged", NULL), W, NULL, -1,
                                       &devices, &err);
  g_assert_no_error(err);
  g_assert_cmpint(devices, ==, W);
  const TpBackend *stage_be[MAX_W];
  for (int s = 0; s < W; s++) {
    stage_be[s] = inst[s];
    g_assert_cmpint(tp_backend_device(inst[s]), ==, s);
  }
  TpRuntimeConfig cfg = { .model = model, .bounds = bounds, .W = W, .N = N, .batch = BATCH, .be = be, .train = data,
                          .lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f, .seed = 7, .timeout_s = 60 };
  TpRuntime *rt = tp_runtime_new_on(&cfg, per_stage ? stage_be : NULL, &err);
  g_assert_no_error(err);
  for (int s = 0; per_stage && s < W; s++)
    g_assert_true(tp_runtime_backend(rt, s) == inst[s]);
  TpSchedule *s = tpt_preset(preset, W, N, K);
  TpBatcher *b = tp_batcher_new(data, BATCH, N, 3, &err);
  g_assert_no_error(err);
  int **idx = g_new(int *, K);
  for (int i = 0; i < K; i++)
    idx[i] = g_memdup2(tp_batcher_next(b), sizeof(int) * BATCH);
  TpStageProfile prof[MAX_W];
  g_assert_true(tp_runtime_profile(rt, idx[0], 1, FALSE, FALSE, prof, &err));
  g_assert_no_error(err);
  double busy = 0;
  for (int st = 0; st < W; st++) {
    g_assert_true(prof[st].fwd >= 0 && prof[st].bwd >= 0 && prof[st].upd >= 0);
    busy += prof[st].fwd + prof[st].bwd;
  }
  g_assert_cmpfloat(busy, >, 0);
  TpRunResult res;
  g_assert_true(tp_runtime_run(rt, s, (const int *const *)idx, 1, g_get_monotonic_time(), NULL, &res, &err));
  g_assert_no_error(err);
  Outcome o = { NULL, 0, 0, 0, res.versions_match };
  for (int st = 0; st < W; st++)
    o.n += tp_runtime_n_params(rt, st);
  o.w = g_new(float, o.n);
  for (int st = 0, at = 0; st < W; at += (int)tp_runtime_n_params(rt, st), st++)
    memcpy(o.w + at, tp_runtime_weights(rt, st), sizeof(float) * tp_runtime_n_params(rt, st));
  g_assert_true(tp_runtime_evaluate(rt, data, &o.acc, &o.loss, &err));
  g_assert_no_error(err);
  tp_run_result_clear(&res);
  for (int i = 0; i < K; i++)
    g_free(idx[i]);
  g_free(idx);
  tp_batcher_free(b);
  tp_schedule_free(s);
  tp_runtime_free(rt);
  tp_backend_stages_free(inst, W);
  return o;
}

static void check(const char *preset, int W, int N, int K, gboolean per_stage)
{
  TpBackend *shared = staged_backend(FALSE);
  Outcome c = run(preset, W, N, K, tp_backend_cpu(), FALSE, FALSE);
  Outcome g = run(preset, W, N, K, shared, per_stage, FALSE);
  tp_backend_free(shared);
  g_assert_cmpint(g_atomic_int_get(&live), ==, 0);
  g_assert_true(c.match && g.match);
  g_assert_cmpuint(c.n, ==, g.n);
  for (size_t i = 0; i < c.n; i++)
    g_assert_true(isfinite(g.w[i]));
  g_assert_cmpmem(c.w, sizeof(float) * c.n, g.w, sizeof(float) * g.n);
  g_assert_cmpfloat(c.acc, ==, g.acc);
  g_assert_cmpfloat(c.loss, ==, g.loss);
  g_assert_cmpfloat(c.acc, >, 0.2); /* it learnt something: the comparison is not of two no-ops */
  g_free(c.w);
  g_free(g.w);
}

static void test_one_stage(void) { check("gpipe", 1, 2, 6, FALSE); }
static void test_shared_instance(void) { check("pipedream", 3, 2, 8, FALSE); }
static void test_instance_per_stage(void) { check("timeprest", 4, 4, 10, TRUE); }
static void test_blend(void) { check("i-timeprest", 3, 2, 8, TRUE); }

/* Messages of the schedule: every forward but the last stage's, every backward but the first's. */
static int messages(const char *preset, int W, int N, int K)
{
  TpSchedule *s = tpt_preset(preset, W, N, K);
  int n = 0;
  for (int st = 0; st < W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOp *op = &tp_stage_ops(s, st)[k];
      n += (op->kind == TP_OP_F && st < W - 1) || (tp_op_sends_up(op->kind) && st > 0);
    }
  tp_schedule_free(s);
  return n;
}

/* Stages whose backend copies device to device (copy_peer, as cuda's): every activation and
 * gradient moves that way, none through the host, and the weights are still cpu's bit for bit. */
static void check_peer(const char *preset, int W, int N, int K)
{
  TpBackend *shared = staged_backend(FALSE);
  Outcome c = run(preset, W, N, K, tp_backend_cpu(), FALSE, FALSE);
  g_atomic_int_set(&transfers, 0);
  g_atomic_int_set(&peer_copies, 0);
  Outcome h = run(preset, W, N, K, shared, TRUE, FALSE);
  int staged = g_atomic_int_get(&transfers);
  g_assert_cmpint(g_atomic_int_get(&peer_copies), ==, 0);
  g_atomic_int_set(&transfers, 0);
  Outcome g = run(preset, W, N, K, shared, TRUE, TRUE);
  tp_backend_free(shared);
  int m = messages(preset, W, N, K);
  g_assert_cmpint(m, >, 0);
  g_assert_cmpint(g_atomic_int_get(&peer_copies), ==, m);
  g_assert_cmpint(staged - g_atomic_int_get(&transfers), ==, 2 * m); /* a download and an upload each */
  g_assert_cmpint(g_atomic_int_get(&live), ==, 0);
  g_assert_true(c.match && g.match && h.match);
  g_assert_cmpuint(c.n, ==, g.n);
  g_assert_cmpmem(c.w, sizeof(float) * c.n, g.w, sizeof(float) * g.n);
  g_assert_cmpfloat(c.acc, ==, g.acc);
  g_assert_cmpfloat(c.loss, ==, g.loss);
  g_free(c.w), g_free(g.w), g_free(h.w);
}

static void test_peer(void)
{
  check_peer("timeprest", 4, 4, 10);
  check_peer("pipedream", 3, 2, 8);
  check_peer("i-timeprest", 3, 2, 8);
}

/* A split backward (I then W): its input gradients staged or copied device to device as B's are. */
static void test_split(void)
{
  check("zb-h1", 3, 4, 8, TRUE);
  check_peer("zb-h2", 3, 4, 8);
}

/* One line on standard error that begins with prefix, status 2, nothing on standard output. */
static void expect_refusal(const char *const *args, const char *prefix)
{
  TptRun r = tpt_run(args);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpstr(r.out, ==, "");
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  if (!g_str_has_prefix(r.err, prefix))
    g_error("expected '%s...', got '%s'", prefix, r.err);
  tpt_run_clear(&r);
}

static void test_flags(void)
{
  const char *devices[] = { "train", "--devices", "0,1", "--data", "synthetic", "-k", "2", "-q", NULL };
  expect_refusal(devices, "timeprest train: --devices: only with --backend cuda");
  const char *nccl[] = { "train", "--transport", "nccl", "--data", "synthetic", "-k", "2", "-q", NULL };
  expect_refusal(nccl, "timeprest train: --transport nccl: ");
  const char *threads[] = { "train", "--backend", "cuda", "--threads", "2", "--data", "synthetic", "-k", "2", "-q", NULL };
#ifdef HAVE_CUDA
  expect_refusal(threads, "timeprest train: --threads: backend cuda has no threads per call to set");
#else /* a build without CUDA refuses the backend first */
  expect_refusal(threads, "timeprest train: --backend cuda: this build has no CUDA support");
#endif
  const char *cuda[] = { "train", "--backend", "cuda", "--data", "synthetic", "-k", "2", "-q", NULL };
  TptRun r = tpt_run(cuda);
  if (r.status == 0) {
    g_test_message("a GPU is present: --backend cuda trained");
  } else {
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    g_assert_true(g_str_has_prefix(r.err, "timeprest train: --backend cuda: "));
  }
  tpt_run_clear(&r);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  register_staged();
  GError *err = NULL;
  model = tp_model_load(TP_SRCDIR "/models/mlp.model", &err);
  g_assert_no_error(err);
  data = tp_dataset_synthetic(TRAIN_N, 28, 28, 5);
  g_test_add_func("/staging/one-stage", test_one_stage);
  g_test_add_func("/staging/shared-instance", test_shared_instance);
  g_test_add_func("/staging/instance-per-stage", test_instance_per_stage);
  g_test_add_func("/staging/blend", test_blend);
  g_test_add_func("/staging/peer", test_peer);
  g_test_add_func("/staging/split", test_split);
  g_test_add_func("/staging/flags", test_flags);
  int rc = g_test_run();
  tp_dataset_free(data);
  tp_model_free(model);
  return rc;
}
