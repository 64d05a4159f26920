/* tp_backend_cases.h — the backend parity test's cases (tests/test-backend.c): every member of
 * TpBackendIface mapped to the op whose cases exercise it, the cases (an op at one shape), and the
 * runner that runs a case on two backends from the same seeded inputs and compares their outputs
 * (tests/tp_backend_cases.c). */
#ifndef TP_BACKEND_CASES_H
#define TP_BACKEND_CASES_H

#include "tp_backend.h"
#include <glib.h>
#include <stddef.h>

typedef enum {
  OP_INSTANCE,
  OP_MEMORY,
  OP_PEER,
  OP_SGEMM,
  OP_LINEAR_FWD,
  OP_LINEAR_BWD,
  OP_CONV_FWD,
  OP_CONV_BWD,
  OP_MAXPOOL_FWD,
  OP_MAXPOOL_BWD,
  OP_AVGPOOL_FWD,
  OP_AVGPOOL_BWD,
  OP_RELU_FWD,
  OP_RELU_BWD,
  OP_DROPOUT_FWD,
  OP_DROPOUT_BWD,
  OP_DROPOUT_BYTE_FWD,
  OP_DROPOUT_BYTE_BWD,
  OP_SOFTMAX_FWD,
  OP_SOFTMAX_BWD,
  OP_SGD,
  OP_BLEND,
  OP_SGEMM_BATCHED,
  OP_AXPY,
  OP_EMBED_FWD,
  OP_EMBED_BWD,
  OP_NORM_FWD,
  OP_NORM_BWD,
  OP_ROPE,
  OP_CSOFTMAX_FWD,
  OP_CSOFTMAX_BWD,
  OP_GELU_FWD,
  OP_GELU_BWD,
  OP_SWIGLU_FWD,
  OP_SWIGLU_BWD,
  OP_ADAMW,
  OP_BN_FWD,
  OP_BN_BWD,
} Op;

/* One case: an op at one shape. m, n, k: sgemm's dims; linear: batch, in, out; softmax: batch,
 * classes; elementwise ops: n; embedding: rows, positions, width; norms: rows, width; rope: rows,
 * positions, head width; causal softmax: matrices, size; swiglu: rows, width; batchnorm: batch, channels, plane. w: the window (batch in m). flag: bias / dx wanted / mask (dropout
 * in training) / in place (a byte dropout's too) / positions (embedding) / RMSNorm / turning back (rope) / training (batchnorm's forward) / weight gradients (its backward),
 * depending on the op. */
typedef struct {
  const char *name;
  Op op;
  int m, n, k;
  gboolean ta, tb, flag;
  int win[7]; /* cin, hin, win, cout, k, stride, pad */
} Case;

#define WIN(cin, h, w, cout, k, s, p) { cin, h, w, cout, k, s, p }

/* Every member of the interface and the op whose cases exercise it. */
typedef struct {
  size_t offset;
  const char *member;
  Op op;
} Member;

#define MEMBER(name, op) { offsetof(TpBackendIface, name), #name, op }

/* thresholds: GEMM-based sums reorder freely; elementwise results differ by a contraction at most */
#define TOL_GEMM 1e-4
#define TOL_ELEM 1e-6
#define EXACT 0.0

extern const Member tp_backend_members[];
extern const size_t tp_backend_n_members;
extern const Case tp_backend_cases[];
extern const size_t tp_backend_n_cases;

/* Does `test` agree with `ref` on case c? A line per output that does not goes to `report`. */
gboolean tp_backend_check_case(const TpBackend *ref, const TpBackend *test, const Case *c, GString *report);
/* The test fails (with the report) unless they agree. */
void tp_backend_expect_agree(const TpBackend *ref, const TpBackend *test, const Case *c);

#endif
