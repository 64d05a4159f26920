/* tp_backend_cases.c — the backend parity test's case table and runner (declared in
 * tp_backend_cases.h): inputs from a seeded generator, each op run on a backend, outputs downloaded
 * and compared under a per-op threshold (normalised error ‖a−b‖/‖a‖; bit for bit where the result
 * is discrete or has one rounding only). */
#include "config.h"
#include "tp_backend.h"
#include "tp_backend_ref.h"
#include "tp_error.h"
#include "tp_test.h"
#include <math.h>
#include <stddef.h>
#include <string.h>
#include "tp_backend_cases.h"

const Member tp_backend_members[] = {
  MEMBER(get_name, OP_INSTANCE),
  MEMBER(thread_bytes, OP_INSTANCE),
  MEMBER(release, OP_INSTANCE),
  MEMBER(sync, OP_INSTANCE),
  MEMBER(device, OP_INSTANCE),
  MEMBER(host_memory, OP_INSTANCE),
  MEMBER(memory, OP_INSTANCE),
  MEMBER(alloc, OP_MEMORY),
  MEMBER(free, OP_MEMORY),
  MEMBER(zero, OP_MEMORY),
  MEMBER(copy, OP_MEMORY),
  MEMBER(upload, OP_MEMORY),
  MEMBER(download, OP_MEMORY),
  MEMBER(sgemm, OP_SGEMM),
  MEMBER(linear_forward, OP_LINEAR_FWD),
  MEMBER(linear_backward, OP_LINEAR_BWD),
  MEMBER(conv_workspace, OP_CONV_FWD),
  MEMBER(conv_forward, OP_CONV_FWD),
  MEMBER(conv_backward, OP_CONV_BWD),
  MEMBER(maxpool_forward, OP_MAXPOOL_FWD),
  MEMBER(maxpool_backward, OP_MAXPOOL_BWD),
  MEMBER(avgpool_forward, OP_AVGPOOL_FWD),
  MEMBER(avgpool_backward, OP_AVGPOOL_BWD),
  MEMBER(relu_forward, OP_RELU_FWD),
  MEMBER(relu_backward, OP_RELU_BWD),
  MEMBER(dropout_forward, OP_DROPOUT_FWD),
  MEMBER(dropout_backward, OP_DROPOUT_BWD),
  MEMBER(dropout_byte_forward, OP_DROPOUT_BYTE_FWD),
  MEMBER(dropout_byte_backward, OP_DROPOUT_BYTE_BWD),
  MEMBER(softmax_ce_forward, OP_SOFTMAX_FWD),
  MEMBER(softmax_ce_backward, OP_SOFTMAX_BWD),
  MEMBER(sgd_step, OP_SGD),
  MEMBER(blend, OP_BLEND),
  MEMBER(copy_peer, OP_PEER),
  MEMBER(sgemm_batched, OP_SGEMM_BATCHED),
  MEMBER(axpy, OP_AXPY),
  MEMBER(embedding_forward, OP_EMBED_FWD),
  MEMBER(embedding_backward, OP_EMBED_BWD),
  MEMBER(norm_forward, OP_NORM_FWD),
  MEMBER(norm_backward, OP_NORM_BWD),
  MEMBER(rope, OP_ROPE),
  MEMBER(causal_softmax_forward, OP_CSOFTMAX_FWD),
  MEMBER(causal_softmax_backward, OP_CSOFTMAX_BWD),
  MEMBER(gelu_forward, OP_GELU_FWD),
  MEMBER(gelu_backward, OP_GELU_BWD),
  MEMBER(swiglu_forward, OP_SWIGLU_FWD),
  MEMBER(swiglu_backward, OP_SWIGLU_BWD),
  MEMBER(adamw_step, OP_ADAMW),
  MEMBER(batchnorm_forward, OP_BN_FWD),
  MEMBER(batchnorm_backward, OP_BN_BWD),
};
const size_t tp_backend_n_members = G_N_ELEMENTS(tp_backend_members);

const Case tp_backend_cases[] = {
  { "instance", OP_INSTANCE, 3, 0, 0, 0, 0, 0, { 0 } },
  { "memory-1001", OP_MEMORY, 1001, 0, 0, 0, 0, 0, { 0 } },
  { "copy-peer-1001", OP_PEER, 1001, 0, 0, 0, 0, 0, { 0 } },
  { "sgemm-nn-7x5x3", OP_SGEMM, 7, 5, 3, FALSE, FALSE, 0, { 0 } },
  { "sgemm-nt-7x5x3", OP_SGEMM, 7, 5, 3, FALSE, TRUE, 0, { 0 } },
  { "sgemm-tn-7x5x3", OP_SGEMM, 7, 5, 3, TRUE, FALSE, 0, { 0 } },
  { "sgemm-tt-7x5x3", OP_SGEMM, 7, 5, 3, TRUE, TRUE, 0, { 0 } },
  { "sgemm-nn-33x17x65", OP_SGEMM, 33, 17, 65, FALSE, FALSE, 0, { 0 } },
  { "sgemm-nt-33x17x65", OP_SGEMM, 33, 17, 65, FALSE, TRUE, 0, { 0 } },
  { "sgemm-tn-33x17x65", OP_SGEMM, 33, 17, 65, TRUE, FALSE, 0, { 0 } },
  { "sgemm-tt-33x17x65", OP_SGEMM, 33, 17, 65, TRUE, TRUE, 0, { 0 } },
  { "linear-fwd-5x7x3", OP_LINEAR_FWD, 5, 7, 3, 0, 0, TRUE, { 0 } },
  { "linear-fwd-32x784x100", OP_LINEAR_FWD, 32, 784, 100, 0, 0, TRUE, { 0 } },
  { "linear-fwd-6x9x4-nobias", OP_LINEAR_FWD, 6, 9, 4, 0, 0, FALSE, { 0 } },
  { "linear-bwd-5x7x3", OP_LINEAR_BWD, 5, 7, 3, 0, 0, TRUE, { 0 } },
  { "linear-bwd-32x784x100", OP_LINEAR_BWD, 32, 784, 100, 0, 0, TRUE, { 0 } },
  { "linear-bwd-6x9x4-nodx", OP_LINEAR_BWD, 6, 9, 4, 0, 0, FALSE, { 0 } },
  { "conv-fwd-3x1x28x28-k5", OP_CONV_FWD, 3, 0, 0, 0, 0, TRUE, WIN(1, 28, 28, 6, 5, 1, 0) },
  { "conv-fwd-2x3x9x7-k3s2p1", OP_CONV_FWD, 2, 0, 0, 0, 0, TRUE, WIN(3, 9, 7, 5, 3, 2, 1) },
  { "conv-fwd-3x4x6x6-k3p2-nobias", OP_CONV_FWD, 3, 0, 0, 0, 0, FALSE, WIN(4, 6, 6, 3, 3, 1, 2) },
  { "conv-bwd-3x1x28x28-k5", OP_CONV_BWD, 3, 0, 0, 0, 0, TRUE, WIN(1, 28, 28, 6, 5, 1, 0) },
  { "conv-bwd-2x3x9x7-k3s2p1", OP_CONV_BWD, 2, 0, 0, 0, 0, TRUE, WIN(3, 9, 7, 5, 3, 2, 1) },
  { "conv-bwd-3x4x6x6-k3p2-nodx", OP_CONV_BWD, 3, 0, 0, 0, 0, FALSE, WIN(4, 6, 6, 3, 3, 1, 2) },
  { "maxpool-fwd-2x3x8x8-k2s2", OP_MAXPOOL_FWD, 2, 0, 0, 0, 0, 0, WIN(3, 8, 8, 3, 2, 2, 0) },
  { "maxpool-fwd-3x2x7x9-k3s2p1", OP_MAXPOOL_FWD, 3, 0, 0, 0, 0, 0, WIN(2, 7, 9, 2, 3, 2, 1) },
  { "maxpool-bwd-2x3x8x8-k2s2", OP_MAXPOOL_BWD, 2, 0, 0, 0, 0, 0, WIN(3, 8, 8, 3, 2, 2, 0) },
  { "maxpool-bwd-3x2x7x9-k3s2p1", OP_MAXPOOL_BWD, 3, 0, 0, 0, 0, 0, WIN(2, 7, 9, 2, 3, 2, 1) },
  { "avgpool-fwd-2x3x8x8-k2s2", OP_AVGPOOL_FWD, 2, 0, 0, 0, 0, 0, WIN(3, 8, 8, 3, 2, 2, 0) },
  { "avgpool-fwd-3x2x7x9-k3s2p1", OP_AVGPOOL_FWD, 3, 0, 0, 0, 0, 0, WIN(2, 7, 9, 2, 3, 2, 1) },
  { "avgpool-bwd-2x3x8x8-k2s2", OP_AVGPOOL_BWD, 2, 0, 0, 0, 0, 0, WIN(3, 8, 8, 3, 2, 2, 0) },
  { "avgpool-bwd-3x2x7x9-k3s2p1", OP_AVGPOOL_BWD, 3, 0, 0, 0, 0, 0, WIN(2, 7, 9, 2, 3, 2, 1) },
  { "relu-fwd-1001", OP_RELU_FWD, 1001, 0, 0, 0, 0, 0, { 0 } },
  { "relu-bwd-1001", OP_RELU_BWD, 1001, 0, 0, 0, 0, 0, { 0 } },
  { "dropout-fwd-1001", OP_DROPOUT_FWD, 1001, 0, 0, 0, 0, TRUE, { 0 } },
  { "dropout-fwd-1001-inference", OP_DROPOUT_FWD, 1001, 0, 0, 0, 0, FALSE, { 0 } },
  { "dropout-bwd-1001", OP_DROPOUT_BWD, 1001, 0, 0, 0, 0, 0, { 0 } },
  { "dropout-byte-fwd-1001", OP_DROPOUT_BYTE_FWD, 1001, 0, 0, 0, 0, FALSE, { 0 } },
  { "dropout-byte-fwd-1001-in-place", OP_DROPOUT_BYTE_FWD, 1001, 0, 0, 0, 0, TRUE, { 0 } },
  { "dropout-byte-bwd-1001", OP_DROPOUT_BYTE_BWD, 1001, 0, 0, 0, 0, FALSE, { 0 } },
  { "dropout-byte-bwd-1001-in-place", OP_DROPOUT_BYTE_BWD, 1001, 0, 0, 0, 0, TRUE, { 0 } },
  { "softmax-ce-fwd-7x10", OP_SOFTMAX_FWD, 7, 10, 0, 0, 0, 0, { 0 } },
  { "softmax-ce-fwd-128x100", OP_SOFTMAX_FWD, 128, 100, 0, 0, 0, 0, { 0 } },
  { "softmax-ce-bwd-7x10", OP_SOFTMAX_BWD, 7, 10, 0, 0, 0, 0, { 0 } },
  { "softmax-ce-bwd-128x100", OP_SOFTMAX_BWD, 128, 100, 0, 0, 0, 0, { 0 } },
  { "sgd-1001", OP_SGD, 1001, 0, 0, 0, 0, FALSE, { 0 } },
  { "sgd-1001-in-place", OP_SGD, 1001, 0, 0, 0, 0, TRUE, { 0 } },
  { "blend-1001", OP_BLEND, 1001, 0, 0, 0, 0, FALSE, { 0 } },
  { "blend-1001-in-place", OP_BLEND, 1001, 0, 0, 0, 0, TRUE, { 0 } },
  { "sgemm-batched-nt-9x7x5", OP_SGEMM_BATCHED, 9, 7, 5, FALSE, TRUE, 0, { 0 } },
  { "sgemm-batched-nn-9x7x5-shared-b", OP_SGEMM_BATCHED, 9, 7, 5, FALSE, FALSE, TRUE, { 0 } },
  { "sgemm-batched-tn-33x17x65", OP_SGEMM_BATCHED, 33, 17, 65, TRUE, FALSE, 0, { 0 } },
  { "axpy-1001", OP_AXPY, 1001, 0, 0, 0, 0, 0, { 0 } },
  { "embedding-fwd-12x4x9", OP_EMBED_FWD, 12, 4, 9, 0, 0, FALSE, { 0 } },
  { "embedding-fwd-12x4x9-positions", OP_EMBED_FWD, 12, 4, 9, 0, 0, TRUE, { 0 } },
  { "embedding-bwd-40x8x33-positions", OP_EMBED_BWD, 40, 8, 33, 0, 0, TRUE, { 0 } },
  { "layernorm-fwd-37x65", OP_NORM_FWD, 37, 65, 0, 0, 0, FALSE, { 0 } },
  { "rmsnorm-fwd-37x65", OP_NORM_FWD, 37, 65, 0, 0, 0, TRUE, { 0 } },
  { "layernorm-bwd-37x65", OP_NORM_BWD, 37, 65, 0, 0, 0, FALSE, { 0 } },
  { "rmsnorm-bwd-37x65", OP_NORM_BWD, 37, 65, 0, 0, 0, TRUE, { 0 } },
  { "layernorm-fwd-9x1000", OP_NORM_FWD, 9, 1000, 0, 0, 0, FALSE, { 0 } }, /* rows wider than a CUDA block */
  { "rmsnorm-bwd-9x1000", OP_NORM_BWD, 9, 1000, 0, 0, 0, TRUE, { 0 } },
  { "layernorm-bwd-9x1000", OP_NORM_BWD, 9, 1000, 0, 0, 0, FALSE, { 0 } },
  { "rope-30x10x8", OP_ROPE, 30, 10, 8, 0, 0, FALSE, { 0 } },
  { "rope-30x10x8-back", OP_ROPE, 30, 10, 8, 0, 0, TRUE, { 0 } },
  { "causal-softmax-fwd-6x33", OP_CSOFTMAX_FWD, 6, 33, 0, 0, 0, 0, { 0 } },
  { "causal-softmax-bwd-6x33", OP_CSOFTMAX_BWD, 6, 33, 0, 0, 0, 0, { 0 } },
  { "causal-softmax-fwd-2x300", OP_CSOFTMAX_FWD, 2, 300, 0, 0, 0, 0, { 0 } },
  { "causal-softmax-bwd-2x300", OP_CSOFTMAX_BWD, 2, 300, 0, 0, 0, 0, { 0 } },
  { "embedding-bwd-2000x16x40", OP_EMBED_BWD, 2000, 16, 40, 0, 0, FALSE, { 0 } }, /* each token row many times */
  { "gelu-fwd-1001", OP_GELU_FWD, 1001, 0, 0, 0, 0, 0, { 0 } },
  { "gelu-bwd-1001", OP_GELU_BWD, 1001, 0, 0, 0, 0, 0, { 0 } },
  { "swiglu-fwd-13x35", OP_SWIGLU_FWD, 13, 35, 0, 0, 0, 0, { 0 } },
  { "swiglu-bwd-13x35", OP_SWIGLU_BWD, 13, 35, 0, 0, 0, 0, { 0 } },
  { "adamw-1001", OP_ADAMW, 1001, 0, 0, 0, 0, FALSE, { 0 } },
  { "adamw-1001-in-place", OP_ADAMW, 1001, 0, 0, 0, 0, TRUE, { 0 } },
  { "batchnorm-fwd-5x7x9-training", OP_BN_FWD, 5, 7, 9, 0, 0, TRUE, { 0 } },
  { "batchnorm-fwd-5x7x9-inference", OP_BN_FWD, 5, 7, 9, 0, 0, FALSE, { 0 } },
  { "batchnorm-fwd-3x4x1000-training", OP_BN_FWD, 3, 4, 1000, 0, 0, TRUE, { 0 } }, /* channels wider than a CUDA block */
  { "batchnorm-bwd-5x7x9", OP_BN_BWD, 5, 7, 9, 0, 0, TRUE, { 0 } },
  { "batchnorm-bwd-5x7x9-input-only", OP_BN_BWD, 5, 7, 9, 0, 0, FALSE, { 0 } },
  { "batchnorm-bwd-3x4x1000", OP_BN_BWD, 3, 4, 1000, 0, 0, TRUE, { 0 } },
};
const size_t tp_backend_n_cases = G_N_ELEMENTS(tp_backend_cases);


static TpWindow window(const Case *c)
{
  const int *v = c->win;
  TpWindow w = { v[0], v[1], v[2], v[3], 0, 0, v[4], v[5], v[6] };
  if (w.stride > 0) { /* a windowed op */
    w.hout = (w.hin + 2 * w.pad - w.k) / w.stride + 1;
    w.wout = (w.win + 2 * w.pad - w.k) / w.stride + 1;
  }
  return w;
}

/* ---- one run of a case on one backend: inputs from a seeded generator, outputs downloaded ---- */

#define MAX_OUT 4
#define MAX_BUF 10

typedef struct {
  const char *name;
  float *v; /* host copy */
  size_t n;
  double tol; /* EXACT: bit for bit */
} Out;

typedef struct {
  const TpBackend *be;
  GRand *rand;
  float *buf[MAX_BUF];
  int nbuf;
  Out out[MAX_OUT];
  int nout;
  GError *err;
} Run;

/* A backend buffer of n floats: uniform in [lo, hi) (uploaded), or zeros when lo == hi. */
static float *input(Run *r, size_t n, double lo, double hi)
{
  g_assert_cmpint(r->nbuf, <, MAX_BUF);
  float *host = g_new(float, n ? n : 1);
  for (size_t i = 0; i < n; i++)
    host[i] = lo == hi ? (float)lo : (float)g_rand_double_range(r->rand, lo, hi);
  float *d = r->be->iface->alloc(r->be, n, &r->err);
  g_assert_no_error(r->err);
  g_assert_true(r->be->iface->upload(r->be, d, host, n, &r->err));
  g_free(host);
  return r->buf[r->nbuf++] = d;
}

static void output(Run *r, const char *name, const float *d, size_t n, double tol)
{
  g_assert_cmpint(r->nout, <, MAX_OUT);
  Out *o = &r->out[r->nout++];
  o->name = name, o->n = n, o->tol = tol;
  o->v = g_new(float, n ? n : 1);
  g_assert_true(r->be->iface->download(r->be, o->v, d, n, &r->err));
  g_assert_no_error(r->err);
}

/* n host values as an output. */
static void host_output(Run *r, const char *name, const float *v, size_t n, double tol)
{
  g_assert_cmpint(r->nout, <, MAX_OUT);
  Out *o = &r->out[r->nout++];
  o->name = name, o->n = n, o->tol = tol;
  o->v = g_memdup2(v, sizeof(float) * (n ? n : 1));
}

/* A host scalar as a one-element output. */
static void scalar(Run *r, const char *name, float v, double tol)
{
  host_output(r, name, &v, 1, tol);
}

static gint32 *random_labels(GRand *rand, int batch, int classes)
{
  gint32 *labels = g_new(gint32, batch);
  for (int i = 0; i < batch; i++)
    labels[i] = g_rand_int_range(rand, 0, classes);
  return labels;
}

/* A second instance of be's backend on be's device, from the registry (where be's backend must be):
 * it shares be's interface. */
static TpBackend *twin(const TpBackend *be, GError **err)
{
  const TpBackendReg *reg = tp_backend_find(tp_backend_name(be), err);
  TpBackend *other = reg ? reg->create(MAX(tp_backend_device(be), 0), err) : NULL;
  if (other && (other->iface != be->iface || tp_backend_device(other) != tp_backend_device(be))) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "the registry's %s instance on device %d has another %s",
                tp_backend_name(be), tp_backend_device(be), other->iface != be->iface ? "interface" : "device");
    tp_backend_free(other);
    return NULL;
  }
  return other;
}

/* The instance's own members agree with each other: a name; a host backend (device -1) keeps host
 * memory, which the host reads directly; synchronisation succeeds; device memory, where reported,
 * has 0 < peak ≤ total, and none is reported without a device; a second instance from the registry shares
 * the interface, holds a buffer and is released.  FALSE with the first that does not. */
static gboolean instance_consistent(const TpBackend *be, size_t n, GError **err)
{
  int device = tp_backend_device(be);
  gboolean host = tp_backend_host_memory(be);
  guint64 peak = 0, total = 0;
  const char *wrong = NULL;
  if (!tp_backend_name(be) || !*tp_backend_name(be))
    wrong = "no name";
  else if (device < -1)
    wrong = "a device below -1";
  else if (device < 0 && !host)
    wrong = "no device and no host memory";
  if (wrong) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s", wrong);
    return FALSE;
  }
  float *buf = be->iface->alloc(be, n, err);
  gboolean ok = buf && be->iface->zero(be, buf, n, err) && tp_backend_sync(be, err);
  if (ok && host) { /* written by the host, read back by the backend */
    float back[8] = { 0 };
    g_assert_cmpuint(n, <=, G_N_ELEMENTS(back));
    for (size_t i = 0; i < n; i++)
      buf[i] = (float)i + 0.5f;
    ok = be->iface->download(be, back, buf, n, err);
    for (size_t i = 0; ok && i < n; i++)
      if (back[i] != (float)i + 0.5f)
        ok = FALSE, g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "host memory: element %zu not read back", i);
  }
  if (buf)
    be->iface->free(be, buf);
  if (!ok)
    return FALSE;
  gboolean reported = be->iface->memory(be, &peak, &total);
  if ((reported && device < 0) || (reported && !(peak > 0 && peak <= total))) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "device %d: memory %s (peak %" G_GUINT64_FORMAT ", total %"
                G_GUINT64_FORMAT ")", device, reported ? "reported" : "not reported", peak, total);
    return FALSE;
  }
  TpBackend *other = twin(be, err);
  float *p = other ? other->iface->alloc(other, n, err) : NULL;
  ok = p && tp_backend_sync(other, err);
  if (p)
    other->iface->free(other, p);
  tp_backend_free(other);
  return ok;
}

/* The transformer ops' cases (run_case's part for them). */
static gboolean run_token_case(const TpBackend *be, const Case *c, Run *r)
{
  GError **err = &r->err;
  const TpBackendIface *f = be->iface;
  size_t n = (size_t)c->m, rows = (size_t)c->m;
  gboolean ok = TRUE;
  switch (c->op) {
  case OP_SGEMM_BATCHED: { /* three products, operands at strides beyond their sizes */
    int count = 3, lda = (c->ta ? c->m : c->k) + 3, ldb = (c->tb ? c->k : c->n) + 2, ldc = c->n + 1;
    size_t sa = (size_t)(c->ta ? c->k : c->m) * lda + 5, sb = c->flag ? 0 : (size_t)(c->tb ? c->n : c->k) * ldb + 7;
    size_t sc = (size_t)c->m * ldc + 2;
    float *a = input(r, sa * count, -1, 1), *b = input(r, (c->flag ? (size_t)(c->tb ? c->n : c->k) * ldb : sb * count), -1, 1);
    float *cc = input(r, sc * count, -1, 1);
    if ((ok = f->sgemm_batched(be, c->ta, c->tb, c->m, c->n, c->k, 0.7f, a, lda, sa, b, ldb, sb, 0.3f, cc, ldc, sc,
                               count, err)))
      output(r, "c", cc, sc * count, TOL_GEMM);
    break;
  }
  case OP_AXPY: {
    float *x = input(r, n, -1, 1), *y = input(r, n, -1, 1);
    if ((ok = f->axpy(be, n, -0.35f, x, y, err)))
      output(r, "y", y, n, TOL_ELEM);
    break;
  }
  case OP_EMBED_FWD:
  case OP_EMBED_BWD: { /* rows m at n positions, width k, a vocabulary of 11 */
    int V = 11;
    float *ids = input(r, rows, 0, 0), *table = input(r, (size_t)V * c->k, -1, 1), *pos = input(r, (size_t)c->n * c->k, -1, 1);
    float *y = input(r, rows * c->k, -1, 1);
    g_autofree float *host = g_new(float, rows);
    for (size_t i = 0; i < rows; i++)
      host[i] = (float)g_rand_int_range(r->rand, 0, V);
    ok = f->upload(be, ids, host, rows, err);
    if (ok && c->op == OP_EMBED_FWD && (ok = f->embedding_forward(be, c->m, c->n, c->k, ids, table, c->flag ? pos : NULL, y, err)))
      output(r, "y", y, rows * c->k, EXACT);
    if (ok && c->op == OP_EMBED_BWD && (ok = f->embedding_backward(be, c->m, c->n, c->k, ids, y, table, c->flag ? pos : NULL, err))) {
      output(r, "dtable", table, (size_t)V * c->k, TOL_ELEM);
      output(r, "dpos", pos, (size_t)c->n * c->k, TOL_ELEM);
    }
    break;
  }
  case OP_NORM_FWD:
  case OP_NORM_BWD: {
    size_t rd = rows * c->n;
    float *x = input(r, rd, -2, 3), *w = input(r, c->n, 0.5, 1.5), *b = input(r, c->n, -1, 1);
    float *dy = input(r, rd, -1, 1), *y = input(r, rd, -1, 1), *dw = input(r, c->n, -1, 1);
    if (c->op == OP_NORM_FWD) {
      if ((ok = f->norm_forward(be, c->m, c->n, 1e-5f, c->flag, x, w, b, y, err)))
        output(r, "y", y, rd, TOL_GEMM);
    } else if ((ok = f->norm_backward(be, c->m, c->n, 1e-5f, c->flag, x, w, dy, y, dw, c->flag ? NULL : b, err))) {
      output(r, "dx", y, rd, TOL_GEMM);
      output(r, "dw", dw, c->n, TOL_GEMM);
      output(r, "db", b, c->n, TOL_GEMM);
    }
    break;
  }
  case OP_BN_FWD:
  case OP_BN_BWD: { /* m samples of n channels of k values */
    size_t len = (size_t)c->m * c->n * c->k;
    float *x = input(r, len, -2, 3), *w = input(r, c->n, 0.5, 1.5), *b = input(r, c->n, -1, 1);
    float *run = input(r, 2 * (size_t)c->n, 0.5, 1.5), *y = input(r, len, -1, 1), *dy = input(r, len, -1, 1);
    float *dw = input(r, c->n, -1, 1), *db = input(r, c->n, -1, 1);
    if (c->op == OP_BN_FWD) {
      if ((ok = f->batchnorm_forward(be, c->m, c->n, c->k, 1e-5f, 0.1f, c->flag, x, w, b, run, y, err))) {
        output(r, "y", y, len, TOL_GEMM);
        output(r, "running", run, 2 * (size_t)c->n, TOL_GEMM);
      }
    } else if ((ok = f->batchnorm_backward(be, c->m, c->n, c->k, 1e-5f, x, w, dy, y, c->flag ? dw : NULL,
                                           c->flag ? db : NULL, err))) {
      output(r, "dx", y, len, TOL_GEMM);
      output(r, "dw", dw, c->n, TOL_GEMM);
      output(r, "db", db, c->n, TOL_GEMM);
    }
    break;
  }
  case OP_ROPE: { /* rows m at n positions, 3 heads of width k in rows of 3k + 2 */
    int ld = 3 * c->k + 2;
    float *x = input(r, rows * ld, -1, 1);
    if ((ok = f->rope(be, c->m, c->n, 3, c->k, ld, 10000.0f, c->flag ? -1.0f : 1.0f, x, err)))
      output(r, "x", x, rows * ld, TOL_ELEM);
    break;
  }
  case OP_CSOFTMAX_FWD:
  case OP_CSOFTMAX_BWD: {
    size_t total = (size_t)c->m * c->n * c->n;
    float *x = input(r, total, -3, 3), *y = input(r, total, -1, 1), *dy = input(r, total, -1, 1);
    if ((ok = f->causal_softmax_forward(be, c->m, c->n, 0.6f, x, y, err)) && c->op == OP_CSOFTMAX_FWD)
      output(r, "y", y, total, TOL_ELEM);
    else if (ok && (ok = f->causal_softmax_backward(be, c->m, c->n, 0.6f, y, dy, dy, err))) /* in place */
      output(r, "dx", dy, total, TOL_ELEM);
    break;
  }
  case OP_GELU_FWD:
  case OP_GELU_BWD: {
    float *x = input(r, n, -4, 4), *dy = input(r, n, -1, 1), *y = input(r, n, -1, 1);
    ok = c->op == OP_GELU_FWD ? f->gelu_forward(be, n, x, y, err) : f->gelu_backward(be, n, x, dy, y, err);
    if (ok)
      output(r, c->op == OP_GELU_FWD ? "y" : "dx", y, n, TOL_ELEM);
    break;
  }
  case OP_SWIGLU_FWD:
  case OP_SWIGLU_BWD: {
    size_t half = rows * c->n;
    float *gu = input(r, 2 * half, -4, 4), *dy = input(r, half, -1, 1), *y = input(r, half, -1, 1);
    float *dgu = input(r, 2 * half, -1, 1);
    if (c->op == OP_SWIGLU_FWD) {
      if ((ok = f->swiglu_forward(be, c->m, c->n, gu, y, err)))
        output(r, "y", y, half, TOL_ELEM);
    } else if ((ok = f->swiglu_backward(be, c->m, c->n, gu, dy, dgu, err)))
      output(r, "dgu", dgu, 2 * half, TOL_ELEM);
    break;
  }
  case OP_ADAMW: {
    TpAdamW h = { .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                  .bias1 = 1.0f - 0.9f * 0.9f * 0.9f, .bias2 = 1.0f - 0.95f * 0.95f * 0.95f };
    float *w_in = input(r, n, -1, 1), *grad = input(r, n, -1, 1), *m = input(r, n, -1, 1), *v = input(r, n, 0, 1);
    float *w_out = c->flag ? w_in : input(r, n, -1, 1);
    if ((ok = f->adamw_step(be, n, &h, w_in, grad, m, v, w_out, err))) {
      output(r, "m", m, n, TOL_ELEM);
      output(r, "v", v, n, TOL_ELEM);
      output(r, "w_out", w_out, n, TOL_ELEM);
    }
    break;
  }
  default: g_assert_not_reached();
  }
  return ok;
}

/* Run case c on be; FALSE (with r->err) where the backend failed. Outputs in r->out. */
static gboolean run_case(const TpBackend *be, const Case *c, Run *r)
{
  memset(r, 0, sizeof *r);
  r->be = be;
  r->rand = g_rand_new_with_seed(0x5eed0000u + (guint32)(c - tp_backend_cases));
  TpWindow w = window(c);
  size_t in_n = (size_t)c->m * w.cin * w.hin * w.win, out_n = (size_t)c->m * w.cout * w.hout * w.wout;
  size_t n = (size_t)c->m;
  GError **err = &r->err;
  gboolean ok = TRUE;
  switch (c->op) {
  case OP_INSTANCE:
    if ((ok = instance_consistent(be, n, err)))
      scalar(r, "consistent", 1.0f, EXACT);
    break;
  case OP_PEER: { /* to a second instance: by copy_peer where the backend has it, else through the host */
    float *a = input(r, n, -1, 1), *back = g_new(float, n);
    TpBackend *other = twin(be, err);
    float *b = other ? other->iface->alloc(other, n, err) : NULL;
    if (be->iface->copy_peer)
      ok = b && be->iface->copy_peer(be, b, other, a, n, err) && tp_backend_sync(be, err);
    else
      ok = b && be->iface->download(be, back, a, n, err) && other->iface->upload(other, b, back, n, err);
    if (ok && (ok = other->iface->download(other, back, b, n, err)))
      host_output(r, "copy", back, n, EXACT);
    if (b)
      other->iface->free(other, b);
    tp_backend_free(other);
    g_free(back);
    break;
  }
  case OP_MEMORY: { /* upload and download are every case's; here copy and zero, on parts */
    float *a = input(r, n, -1, 1), *b = input(r, n, -1, 1);
    ok = be->iface->copy(be, b + 1, a, n - 2, err) && be->iface->zero(be, a + 2, n - 3, err);
    if (ok) {
      output(r, "a", a, n, EXACT);
      output(r, "b", b, n, EXACT);
    }
    break;
  }
  case OP_SGEMM: {
    int lda = (c->ta ? c->m : c->k) + 3, ldb = (c->tb ? c->k : c->n) + 2, ldc = c->n + 1;
    float *a = input(r, (size_t)(c->ta ? c->k : c->m) * lda, -1, 1);
    float *b = input(r, (size_t)(c->tb ? c->n : c->k) * ldb, -1, 1);
    float *cc = input(r, (size_t)c->m * ldc, -1, 1);
    ok = be->iface->sgemm(be, c->ta, c->tb, c->m, c->n, c->k, 0.7f, a, lda, b, ldb, 0.3f, cc, ldc, err);
    if (ok)
      output(r, "c", cc, (size_t)c->m * ldc, TOL_GEMM);
    break;
  }
  case OP_LINEAR_FWD: {
    float *x = input(r, (size_t)c->m * c->n, -1, 1), *wt = input(r, (size_t)c->k * c->n, -1, 1);
    float *b = input(r, c->k, -1, 1), *y = input(r, (size_t)c->m * c->k, -1, 1);
    ok = be->iface->linear_forward(be, c->m, c->n, c->k, x, wt, c->flag ? b : NULL, y, err);
    if (ok)
      output(r, "y", y, (size_t)c->m * c->k, TOL_GEMM);
    break;
  }
  case OP_LINEAR_BWD: {
    float *x = input(r, (size_t)c->m * c->n, -1, 1), *wt = input(r, (size_t)c->k * c->n, -1, 1);
    float *dy = input(r, (size_t)c->m * c->k, -1, 1), *dx = input(r, (size_t)c->m * c->n, -1, 1);
    float *dw = input(r, (size_t)c->k * c->n, -1, 1), *db = input(r, c->k, -1, 1);
    ok = be->iface->linear_backward(be, c->m, c->n, c->k, x, wt, dy, c->flag ? dx : NULL, dw, db, err);
    if (ok) {
      output(r, "dx", dx, (size_t)c->m * c->n, TOL_GEMM);
      output(r, "dw", dw, (size_t)c->k * c->n, TOL_GEMM);
      output(r, "db", db, c->k, TOL_GEMM);
    }
    break;
  }
  case OP_CONV_FWD:
  case OP_CONV_BWD: {
    size_t wn = (size_t)w.cout * w.cin * w.k * w.k;
    float *x = input(r, in_n, -1, 1), *wt = input(r, wn, -1, 1), *b = input(r, w.cout, -1, 1);
    float *y = input(r, out_n, -1, 1), *dx = input(r, in_n, -1, 1), *dw = input(r, wn, -1, 1);
    float *work = input(r, be->iface->conv_workspace(be, &w, c->m), 0, 0);
    if (c->op == OP_CONV_FWD) {
      ok = be->iface->conv_forward(be, &w, c->m, x, wt, c->flag ? b : NULL, y, work, err);
      if (ok)
        output(r, "y", y, out_n, TOL_GEMM);
      break;
    }
    ok = be->iface->conv_backward(be, &w, c->m, x, wt, y, c->flag ? dx : NULL, dw, b, work, err); /* y is dy */
    if (ok) {
      output(r, "dx", dx, in_n, TOL_GEMM);
      output(r, "dw", dw, wn, TOL_GEMM);
      output(r, "db", b, w.cout, TOL_GEMM);
    }
    break;
  }
  case OP_MAXPOOL_FWD:
  case OP_MAXPOOL_BWD: {
    float *x = input(r, in_n, -1, 1), *y = input(r, out_n, -1, 1), *arg = input(r, out_n, 0, 0);
    float *dy = input(r, out_n, -1, 1), *dx = input(r, in_n, -1, 1);
    ok = be->iface->maxpool_forward(be, &w, c->m, x, y, (gint32 *)arg, err);
    if (ok && c->op == OP_MAXPOOL_FWD) {
      output(r, "y", y, out_n, EXACT);
      output(r, "argmax", arg, out_n, EXACT);
    } else if (ok && (ok = be->iface->maxpool_backward(be, &w, c->m, dy, (gint32 *)arg, dx, err)))
      output(r, "dx", dx, in_n, EXACT);
    break;
  }
  case OP_AVGPOOL_FWD:
  case OP_AVGPOOL_BWD: {
    float *x = input(r, in_n, -1, 1), *y = input(r, out_n, -1, 1), *dx = input(r, in_n, -1, 1);
    if (c->op == OP_AVGPOOL_FWD) {
      if ((ok = be->iface->avgpool_forward(be, &w, c->m, x, y, err)))
        output(r, "y", y, out_n, TOL_ELEM);
    } else if ((ok = be->iface->avgpool_backward(be, &w, c->m, y, dx, err)))
      output(r, "dx", dx, in_n, TOL_ELEM);
    break;
  }
  case OP_RELU_FWD:
  case OP_RELU_BWD: {
    float *x = input(r, n, -1, 1), *dy = input(r, n, -1, 1), *y = input(r, n, -1, 1);
    if (c->op == OP_RELU_FWD)
      ok = be->iface->relu_forward(be, n, x, y, err);
    else
      ok = be->iface->relu_backward(be, n, x, dy, y, err);
    if (ok)
      output(r, c->op == OP_RELU_FWD ? "y" : "dx", y, n, EXACT);
    break;
  }
  case OP_DROPOUT_FWD: {
    float *x = input(r, n, -1, 1), *y = input(r, n, -1, 1), *mask = input(r, n, -1, 1);
    ok = be->iface->dropout_forward(be, n, 0.3f, G_GUINT64_CONSTANT(0x1234567890abcdef), x, y, c->flag ? mask : NULL, err);
    if (ok) {
      output(r, "y", y, n, EXACT);
      if (c->flag)
        output(r, "mask", mask, n, EXACT);
    }
    break;
  }
  case OP_DROPOUT_BWD: {
    float *mask = input(r, n, 0, 2), *dy = input(r, n, -1, 1), *dx = input(r, n, -1, 1);
    if ((ok = be->iface->dropout_backward(be, n, mask, dy, dx, err)))
      output(r, "dx", dx, n, EXACT);
    break;
  }
  case OP_DROPOUT_BYTE_FWD:
  case OP_DROPOUT_BYTE_BWD: { /* the mask (bytes in a float buffer) from the forward, its counter from 77 */
    float *x = input(r, n, -1, 1), *y = c->flag ? x : input(r, n, -1, 1), *mask = input(r, (n + 3) / 4, 0, 0);
    float *dy = input(r, n, -1, 1), *dx = c->flag ? dy : input(r, n, -1, 1);
    ok = be->iface->dropout_byte_forward(be, n, 0.3f, G_GUINT64_CONSTANT(0x1234567890abcdef), 77, x, y, (guint8 *)mask,
                                         err);
    if (ok && c->op == OP_DROPOUT_BYTE_FWD) {
      output(r, "y", y, n, EXACT);
      g_autofree float *packed = g_new(float, (n + 3) / 4), *kept = g_new(float, n);
      g_assert_true(be->iface->download(be, packed, mask, (n + 3) / 4, &r->err));
      for (size_t i = 0; i < n; i++)
        kept[i] = ((const guint8 *)packed)[i];
      host_output(r, "mask", kept, n, EXACT);
    } else if (ok && (ok = be->iface->dropout_byte_backward(be, n, 0.3f, (const guint8 *)mask, dy, dx, err)))
      output(r, "dx", dx, n, EXACT);
    break;
  }
  case OP_SOFTMAX_FWD:
  case OP_SOFTMAX_BWD: {
    size_t bc = (size_t)c->m * c->n;
    gint32 *labels = random_labels(r->rand, c->m, c->n);
    float *x = input(r, bc, -3, 3), *probs = input(r, bc, -1, 1), *dx = input(r, bc, -1, 1);
    if (c->op == OP_SOFTMAX_FWD) {
      double loss = -1.0;
      int correct = -1;
      if ((ok = be->iface->softmax_ce_forward(be, c->m, c->n, x, labels, probs, &loss, &correct, err))) {
        output(r, "probs", probs, bc, TOL_ELEM);
        scalar(r, "loss", (float)loss, TOL_ELEM);
        scalar(r, "correct", (float)correct, EXACT);
      }
    } else if ((ok = be->iface->softmax_ce_backward(be, c->m, c->n, probs, labels, 1.0f / c->m, dx, err)))
      output(r, "dx", dx, bc, TOL_ELEM);
    g_free(labels);
    break;
  }
  case OP_SGD: {
    float *w_in = input(r, n, -1, 1), *grad = input(r, n, -1, 1), *mom = input(r, n, -1, 1);
    float *w_out = c->flag ? w_in : input(r, n, -1, 1);
    if ((ok = be->iface->sgd_step(be, n, 0.05f, 0.9f, 5e-4f, w_in, grad, mom, w_out, err))) {
      output(r, "mom", mom, n, TOL_ELEM);
      output(r, "w_out", w_out, n, TOL_ELEM);
    }
    break;
  }
  case OP_BLEND: {
    float *a = input(r, n, -1, 1), *b = input(r, n, -1, 1), *out = c->flag ? a : input(r, n, -1, 1);
    if ((ok = be->iface->blend(be, n, 0.25f, a, b, out, err)))
      output(r, "out", out, n, TOL_ELEM);
    break;
  }
  default: ok = run_token_case(be, c, r); break;
  }
  return ok;
}

static void run_clear(Run *r)
{
  for (int i = 0; i < r->nbuf; i++)
    r->be->iface->free(r->be, r->buf[i]);
  for (int i = 0; i < r->nout; i++)
    g_free(r->out[i].v);
  g_clear_error(&r->err);
  g_rand_free(r->rand);
}

/* ---- comparison ------------------------------------------------------------------------------ */

/* Does `test` agree with `ref` on case c? A line per output that does not goes to `report`. */
gboolean tp_backend_check_case(const TpBackend *ref, const TpBackend *test, const Case *c, GString *report)
{
  Run a, b;
  gboolean ok = run_case(ref, c, &a), same = TRUE;
  g_assert_no_error(a.err);
  g_assert_true(ok);
  if (!run_case(test, c, &b)) {
    g_string_append_printf(report, "%s on %s: %s\n", c->name, tp_backend_name(test), b.err->message);
    same = FALSE;
  } else {
    g_assert_cmpint(a.nout, ==, b.nout);
  }
  for (int i = 0; same && i < a.nout; i++) {
    const Out *x = &a.out[i], *y = &b.out[i];
    if (x->tol == EXACT) {
      for (size_t j = 0; j < x->n; j++)
        if (memcmp(&x->v[j], &y->v[j], sizeof(float)) != 0) {
          gint32 xi, yi; /* argmax buffers hold gint32 */
          memcpy(&xi, &x->v[j], sizeof xi), memcpy(&yi, &y->v[j], sizeof yi);
          if (strcmp(x->name, "argmax") == 0)
            g_string_append_printf(report, "%s: %s[%zu] is %d on %s, %d on %s (must be equal)\n", c->name, x->name,
                                   j, yi, tp_backend_name(test), xi, tp_backend_name(ref));
          else
            g_string_append_printf(report, "%s: %s[%zu] is %.9g on %s, %.9g on %s (must be equal)\n", c->name,
                                   x->name, j, y->v[j], tp_backend_name(test), x->v[j], tp_backend_name(ref));
          same = FALSE;
          break;
        }
      continue;
    }
    double diff = 0.0, norm = 0.0;
    for (size_t j = 0; j < x->n; j++) {
      double d = (double)x->v[j] - y->v[j];
      diff += d * d, norm += (double)x->v[j] * x->v[j];
    }
    double e = norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
    if (!(e <= x->tol)) { /* NaN fails too */
      g_string_append_printf(report, "%s: %s differs between %s and %s by %.3g (limit %.0e)\n", c->name, x->name,
                             tp_backend_name(test), tp_backend_name(ref), e, x->tol);
      same = FALSE;
    }
  }
  run_clear(&a);
  run_clear(&b);
  return same;
}

void tp_backend_expect_agree(const TpBackend *ref, const TpBackend *test, const Case *c)
{
  GString *report = g_string_new(NULL);
  if (!tp_backend_check_case(ref, test, c, report))
    g_test_fail_printf("%s", report->str);
  g_string_free(report, TRUE);
}
