/* tp_net_token.c — the transformer layers of a stage: token embedding, LayerNorm and RMSNorm, the
 * pre-norm block (causal multi-head attention with grouped-query heads and rotary positions, then a
 * GELU or SwiGLU MLP, each with its residual), the language-model head and the token
 * cross-entropy.  Every product is a backend GEMM (the attention's per head, strided and batched
 * over the heads that share a key/value head) and every other step a backend kernel, so the layers
 * run unchanged on any backend.
 *
 * A block keeps, per sample, exactly what the model description counts (tp_model.c's block):
 * its input x, the first norm's output h1, the projections q k v (q and k after the rotation), the
 * attention probabilities, the attention output o, the residual stream y1 = x + o·Woᵀ, the second
 * norm's output h2, the MLP's first projection (gate and up, or up) and its activation m; the
 * norms' statistics are recomputed from x and y1 in the backward.  With dropout (GPT-2's: on the
 * attention probabilities, and on each projection's output before its residual sum) it keeps the
 * dropped probabilities too and the three masks a byte an element, as Korthikanti et al. count
 * them; a sample's masks fill whole floats (up to 3 bytes more than the model counts).  Its
 * parameters, in the stage's flat array: Wqkv [q+2kv][d] (bqkv), Wo [d][q] (bo), W1 [2f or f][d]
 * (b1), W2 [d][f] (b2), the first norm's weight (and bias), the second's.
 *
 * A head tied to the embedding reads the embedding's table and adds its gradient to the table's
 * where both are on one stage; on another stage it holds a copy (tp_net.c). */
#include "config.h"
#include "tp_net_priv.h"
#include "tp_error.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* A block's (or a norm's) shape. */
typedef struct {
  int s, d, a, G, r, hd, qd, kvd, qkvw, f, f1;
  gboolean rms, swiglu, rope, drop;
  float eps, theta;
  size_t mask; /* with dropout: a sample's mask bytes (the attention's a·s², then s·d twice) */
} Geo;

static Geo geo(const NetLayer *L)
{
  const TpBlock *b = &L->d.blk;
  Geo g = { .s = (int)L->d.hin, .d = (int)L->d.cin, .eps = (float)b->eps, .theta = (float)b->theta,
            .rms = L->d.kind == TP_LAYER_RMSNORM || (L->d.kind == TP_LAYER_BLOCK && b->rmsnorm) };
  if (L->d.kind != TP_LAYER_BLOCK)
    return g;
  g.a = b->heads, g.G = b->kv_heads, g.r = g.a / g.G;
  g.hd = b->head_dim ? b->head_dim : g.d / g.a;
  g.qd = g.hd * g.a, g.kvd = g.hd * g.G, g.qkvw = g.qd + 2 * g.kvd;
  g.f = b->ffn, g.swiglu = b->swiglu, g.f1 = g.swiglu ? 2 * g.f : g.f, g.rope = b->rope, g.drop = b->dropout;
  g.mask = g.drop ? (size_t)g.a * g.s * g.s + 2 * (size_t)g.s * g.d : 0;
  return g;
}

/* Offsets of a block's parameters (SIZE_MAX: a bias it has not). */
typedef struct {
  size_t qkv, bqkv, o, bo, w1, b1, w2, b2, n1w, n1b, n2w, n2b, total;
} BlkParams;

static BlkParams blk_params(const NetLayer *L, const Geo *g)
{
  const TpBlock *b = &L->d.blk;
  BlkParams p;
  size_t c = 0, d = (size_t)g->d;
#define TAKE(field, n, have) (void)(p.field = (have) ? c : SIZE_MAX, c += (have) ? (size_t)(n) : 0)
  TAKE(qkv, (size_t)g->qkvw * d, TRUE), TAKE(bqkv, g->qkvw, b->qkv_bias);
  TAKE(o, d * g->qd, TRUE), TAKE(bo, d, b->o_bias);
  TAKE(w1, (size_t)g->f1 * d, TRUE), TAKE(b1, g->f1, b->mlp_bias);
  TAKE(w2, d * g->f, TRUE), TAKE(b2, d, b->mlp_bias);
  TAKE(n1w, d, TRUE), TAKE(n1b, d, !g->rms), TAKE(n2w, d, TRUE), TAKE(n2b, d, !g->rms);
#undef TAKE
  p.total = c;
  return p;
}

static const float *cp(const float *base, size_t off) { return off == SIZE_MAX ? NULL : base + off; }
static float *mp(float *base, size_t off) { return off == SIZE_MAX || !base ? NULL : base + off; }

static int vocab_of(const NetLayer *L)
{
  size_t d = (size_t)L->d.cout, s = (size_t)L->d.hin;
  return L->d.kind == TP_LAYER_EMBEDDING ? (int)((size_t)L->d.params / d - (L->d.blk.learned ? s : 0))
                                         : (int)L->d.cout;
}

void tp_net_token_layout(NetLayer *L)
{
  const TpLayer *d = &L->d;
  Geo g = geo(L);
  size_t s = (size_t)g.s, w = (size_t)g.d;
  switch (d->kind) {
  case TP_LAYER_EMBEDDING: L->n_w = (size_t)d->params, L->n_save = s, L->saves_input = TRUE; break;
  case TP_LAYER_LAYERNORM:
  case TP_LAYER_RMSNORM:
    L->n_w = w, L->n_b = g.rms ? 0 : w, L->n_save = L->in, L->saves_input = TRUE;
    break;
  case TP_LAYER_LM_HEAD: L->n_w = (size_t)d->weights, L->n_save = L->in, L->saves_input = TRUE; break; /* tp_net.c
                                                                                   shares a tied one's */
  case TP_LAYER_TOKEN_CE: L->n_save = L->in; break;
  case TP_LAYER_BLOCK: {
    size_t piece[BLK_N_PIECES] = { [BLK_X] = s * w, [BLK_H1] = s * w, [BLK_QKV] = s * g.qkvw,
                                   [BLK_P] = (size_t)g.a * s * s, [BLK_O] = s * g.qd, [BLK_Y1] = s * w,
                                   [BLK_H2] = s * w, [BLK_A1] = s * g.f1, [BLK_M] = s * g.f,
                                   [BLK_PD] = g.drop ? (size_t)g.a * s * s : 0, [BLK_MASK] = (g.mask + 3) / 4 };
    size_t dys[BLK_N_DYS] = { [BLK_DOUT] = s * w, [BLK_DA1] = s * g.f1, [BLK_DH2] = s * w, [BLK_DY1] = s * w,
                              [BLK_DQKV] = s * g.qkvw, [BLK_DH1] = s * w, [BLK_DZ2] = g.drop ? s * w : 0,
                              [BLK_DZ1] = g.drop ? s * w : 0 };
    memcpy(L->piece, piece, sizeof piece), memcpy(L->dys, dys, sizeof dys);
    for (int i = 0; i < BLK_N_PIECES; i++)
      L->n_save += piece[i];
    for (int i = 0; i < BLK_N_DYS; i++)
      L->n_dy += dys[i];
    L->n_w = blk_params(L, &g).total, L->saves_input = TRUE, L->lead = L->in;
    g_assert(g.drop || (long long)L->n_save == d->stored_elems); /* masks: whole floats of bytes */
    break;
  }
  default: g_assert_not_reached();
  }
}

/* Transformer weights as GPT-2 and Llama start them: matrices (and embeddings) with standard
 * deviation 0.02 (uniform in ±0.02·√3 here, from tp_uniform(seed, L, j) as every layer's), norm
 * weights 1, biases 0. */
void tp_net_token_init(const NetLayer *L, guint64 seed, float *host)
{
  const float bound = 0.02f * sqrtf(3.0f);
  /* a tied head's copy: the embedding's (layer 0's) table, value for value */
  guint64 stream = L->d.kind == TP_LAYER_LM_HEAD && L->d.blk.tied ? 0 : (guint64)L->index;
  for (size_t j = 0; j < L->n_w + L->n_b; j++)
    host[j] = (2.0f * tp_uniform(seed, stream, j) - 1.0f) * bound;
  Geo g = geo(L);
  size_t d = (size_t)g.d;
  if (L->d.kind == TP_LAYER_LAYERNORM || L->d.kind == TP_LAYER_RMSNORM) {
    for (size_t j = 0; j < d; j++)
      host[j] = 1.0f, host[j + (g.rms ? 0 : d)] = g.rms ? 1.0f : 0.0f;
    return;
  }
  if (L->d.kind != TP_LAYER_BLOCK)
    return;
  BlkParams p = blk_params(L, &g);
  size_t bias[] = { p.bqkv, p.bo, p.b1, p.b2, p.n1b, p.n2b };
  size_t len[] = { (size_t)g.qkvw, d, (size_t)g.f1, d, d, d };
  for (size_t i = 0; i < G_N_ELEMENTS(bias); i++)
    if (bias[i] != SIZE_MAX)
      memset(host + bias[i], 0, len[i] * sizeof(float));
  for (size_t j = 0; j < d; j++)
    host[p.n1w + j] = host[p.n2w + j] = 1.0f;
}

/* Samples a block's inference forward runs at a time through the net's scratch. */
enum { INFER_CHUNK = 4 };

/* The backward's scratch: dM [rows][f], dO [rows][q], one sample's dP [a][s][s], then (a fused
 * backward) the inner output gradients, laid out as a split backward keeps them. */
static size_t block_inner_at(const Geo *g, int batch)
{
  return (size_t)batch * g->s * (size_t)(g->f + g->qd) + (size_t)g->a * g->s * g->s;
}

static size_t block_backward_scratch(const NetLayer *L, const Geo *g, int batch)
{
  return block_inner_at(g, batch) + (size_t)batch * L->n_dy;
}

size_t tp_net_token_scratch(const TpNet *net, int batch)
{
  size_t most = 0;
  for (int i = 0; i < net->n; i++) {
    const NetLayer *L = &net->layers[i];
    if (L->d.kind != TP_LAYER_BLOCK)
      continue;
    Geo g = geo(L);
    most = MAX(most, MAX(block_backward_scratch(L, &g, batch), (size_t)MIN(batch, INFER_CHUNK) * L->n_save));
  }
  return most;
}

/* The pieces of a block's region for the samples of saved (or, saved NULL, of scratch for n). */
static void block_pieces(const NetLayer *L, float *base, size_t stride, size_t off, float **out)
{
  size_t at = 0;
  for (int i = 0; i < BLK_N_PIECES; i++) {
    out[i] = base + at * stride + off * L->piece[i];
    at += L->piece[i];
  }
}

static void block_dys(const NetLayer *L, float *base, size_t stride, size_t off, float **out)
{
  size_t at = 0;
  for (int i = 0; i < BLK_N_DYS; i++) {
    out[i] = base + at * stride + off * L->dys[i];
    at += L->dys[i];
  }
}

/* The pieces and the kept output gradients of block L for the samples of saved. */
static void saved_pieces(const NetLayer *L, const TpSaved *saved, float **pc)
{
  block_pieces(L, saved->data + L->save_off * saved->stride, (size_t)saved->stride, (size_t)saved->off, pc);
}

static void saved_dys(const NetLayer *L, const TpSaved *saved, float **dys)
{
  block_dys(L, saved->dy + L->dy_off * saved->stride, (size_t)saved->stride, (size_t)saved->off, dys);
}

/* ---- dropout: the masks of a training forward ---- */

/* Sample b's mask bytes (the attention's, then the two projections'). */
static guint8 *sample_mask(const NetLayer *L, float **pc, int b)
{
  return (guint8 *)(pc[BLK_MASK] + (size_t)b * L->piece[BLK_MASK]);
}

/* Dropout on n values of sample b of a training forward into sv, at byte `at` of the sample's masks
 * (y may equal x): each block of its rows draws from its own seed, the counter at the sample's
 * place in its block, as a forward of that block alone draws it (as tp_net.c's dropout layers). */
static gboolean drop_forward(const TpBackend *be, const NetLayer *L, const Geo *g, const TpSaved *sv, float **pc, int b,
                             size_t at, size_t n, const float *x, float *y, GError **err)
{
  int blocks = sv->n_seeds > 1 ? sv->n_seeds : 1, per = sv->batch / blocks;
  guint64 seed = tp_mix64((sv->n_seeds ? sv->seeds[b / per] : 0) ^ (guint64)L->index);
  return be->iface->dropout_byte_forward(be, n, TP_BLOCK_DROPOUT_P, seed, (guint64)(b % per) * g->mask + at, x, y,
                                         sample_mask(L, pc, b) + at, err);
}

/* Its backward over the samples of pc: dz = mask·dy/(1 − p) for the projection whose mask is at
 * byte `at` (s·d values a sample). */
static gboolean drop_backward(const TpBackend *be, const NetLayer *L, const Geo *g, int nb, float **pc, size_t at,
                              const float *dy, float *dz, GError **err)
{
  size_t n = (size_t)g->s * g->d;
  for (int b = 0; b < nb; b++)
    if (!be->iface->dropout_byte_backward(be, n, TP_BLOCK_DROPOUT_P, sample_mask(L, pc, b) + at, dy + b * n, dz + b * n,
                                          err))
      return FALSE;
  return TRUE;
}

/* Dropout in place on a projection's output y (s·d values a sample) at byte `at` of the masks. */
static gboolean drop_rows(const TpBackend *be, const NetLayer *L, const Geo *g, const TpSaved *sv, int nb, float **pc,
                          size_t at, float *y, GError **err)
{
  size_t n = (size_t)g->s * g->d;
  for (int b = 0; b < nb; b++)
    if (!drop_forward(be, L, g, sv, pc, b, at, n, y + b * n, y + b * n, err))
      return FALSE;
  return TRUE;
}

/* The causal products run in two parts of the rows: the first half of the positions reads only the
 * first half of the keys, the rest reads them all (a quarter of the s×s products skipped); part p
 * is rows [r0, r0 + m) against keys [0, n). */
typedef struct {
  int r0, m, n;
} Part;

static Part causal_part(const Geo *g, int p)
{
  int h0 = g->s / 2;
  return p ? (Part){ .r0 = h0, .m = g->s - h0, .n = g->s } : (Part){ .r0 = 0, .m = h0, .n = h0 };
}

/* Attention of sample b: probabilities P [a][s][s] (0 above the diagonal) and output o [s][q] from
 * its qkv rows; a training forward with dropout (sv) keeps the dropped probabilities in PD and
 * multiplies V by them. */
static gboolean attention_forward(const TpBackend *be, const NetLayer *L, const Geo *g, const TpSaved *sv, float **pc,
                                  int b, GError **err)
{
  const float *qkv = pc[BLK_QKV] + (size_t)b * g->s * g->qkvw;
  float *P = pc[BLK_P] + (size_t)b * L->piece[BLK_P], *o = pc[BLK_O] + (size_t)b * g->s * g->qd, *PV = P;
  size_t ss = (size_t)g->s * g->s;
  for (int p = 0; p < 2; p++)
    for (int k = 0, h = 0; k < g->G && causal_part(g, p).m; k++, h += g->r) {
      Part c = causal_part(g, p);
      if (!be->iface->sgemm_batched(be, FALSE, TRUE, c.m, c.n, g->hd, 1.0f, qkv + (size_t)c.r0 * g->qkvw + h * g->hd,
                                    g->qkvw, g->hd, qkv + g->qd + k * g->hd, g->qkvw, 0, 0.0f, P + h * ss + c.r0 * g->s,
                                    g->s, ss, g->r, err))
        return FALSE;
    }
  if (!be->iface->causal_softmax_forward(be, g->a, g->s, 1.0f / sqrtf((float)g->hd), P, P, err))
    return FALSE;
  if (sv && g->drop && !drop_forward(be, L, g, sv, pc, b, 0, (size_t)g->a * ss, P,
                                     PV = pc[BLK_PD] + (size_t)b * L->piece[BLK_PD], err))
    return FALSE;
  for (int p = 0; p < 2; p++)
    for (int k = 0, h = 0; k < g->G && causal_part(g, p).m; k++, h += g->r) {
      Part c = causal_part(g, p);
      if (!be->iface->sgemm_batched(be, FALSE, FALSE, c.m, g->hd, c.n, 1.0f, PV + h * ss + c.r0 * g->s, g->s, ss,
                                    qkv + g->qd + g->kvd + k * g->hd, g->qkvw, 0, 0.0f,
                                    o + (size_t)c.r0 * g->qd + h * g->hd, g->qd, g->hd, g->r, err))
        return FALSE;
    }
  return TRUE;
}

/* The block's forward over nb samples; sv: a training forward's saved state (its seeds), NULL in
 * inference (no dropout). */
static gboolean block_forward(const TpBackend *be, const NetLayer *L, int nb, float **pc, const float *w, float *y,
                              const TpSaved *sv, GError **err)
{
  Geo g = geo(L);
  size_t as2 = (size_t)g.a * g.s * g.s, sd = (size_t)g.s * g.d;
  gboolean drop = sv && g.drop;
  BlkParams p = blk_params(L, &g);
  int rows = nb * g.s;
  size_t n = (size_t)rows * g.d;
  const TpBackendIface *f = be->iface;
  if (!f->norm_forward(be, rows, g.d, g.eps, g.rms, pc[BLK_X], w + p.n1w, cp(w, p.n1b), pc[BLK_H1], err) ||
      !f->linear_forward(be, rows, g.d, g.qkvw, pc[BLK_H1], w + p.qkv, cp(w, p.bqkv), pc[BLK_QKV], err))
    return FALSE;
  if (g.rope && (!f->rope(be, rows, g.s, g.a, g.hd, g.qkvw, g.theta, 1.0f, pc[BLK_QKV], err) ||
                 !f->rope(be, rows, g.s, g.G, g.hd, g.qkvw, g.theta, 1.0f, pc[BLK_QKV] + g.qd, err)))
    return FALSE;
  for (int b = 0; b < nb; b++)
    if (!attention_forward(be, L, &g, sv, pc, b, err))
      return FALSE;
  if (!f->linear_forward(be, rows, g.qd, g.d, pc[BLK_O], w + p.o, cp(w, p.bo), pc[BLK_Y1], err) ||
      (drop && !drop_rows(be, L, &g, sv, nb, pc, as2, pc[BLK_Y1], err)) ||
      !f->axpy(be, n, 1.0f, pc[BLK_X], pc[BLK_Y1], err) ||
      !f->norm_forward(be, rows, g.d, g.eps, g.rms, pc[BLK_Y1], w + p.n2w, cp(w, p.n2b), pc[BLK_H2], err) ||
      !f->linear_forward(be, rows, g.d, g.f1, pc[BLK_H2], w + p.w1, cp(w, p.b1), pc[BLK_A1], err))
    return FALSE;
  gboolean ok = g.swiglu ? f->swiglu_forward(be, rows, g.f, pc[BLK_A1], pc[BLK_M], err)
                         : f->gelu_forward(be, (size_t)rows * g.f, pc[BLK_A1], pc[BLK_M], err);
  return ok && f->linear_forward(be, rows, g.f, g.d, pc[BLK_M], w + p.w2, cp(w, p.b2), y, err) &&
         (!drop || drop_rows(be, L, &g, sv, nb, pc, as2 + sd, y, err)) && f->axpy(be, n, 1.0f, pc[BLK_Y1], y, err);
}

/* The products of the attention's backward for part c of the rows, with heads h0 … h0 + r − 1 of
 * key/value head k: dP = dO·Vᵀ and V's gradient += PVᵀ·dO (before the softmax's backward, dq
 * NULL), or q's gradient = dP·K and K's += dPᵀ·q (after it). */
static gboolean attention_part(const TpBackend *be, const Geo *g, Part c, int k, const float *qkv, const float *PV,
                               const float *dO, float *dP, float *dqkv, gboolean after, GError **err)
{
  const TpBackendIface *f = be->iface;
  size_t ss = (size_t)g->s * g->s, ro = (size_t)c.r0 * g->s;
  int h0 = k * g->r;
  const float *kv = qkv + g->qd + (after ? 0 : g->kvd) + k * g->hd; /* K after, V before */
  float *dkv = dqkv + g->qd + (after ? 0 : g->kvd) + k * g->hd;
  if (!after ? !f->sgemm_batched(be, FALSE, TRUE, c.m, c.n, g->hd, 1.0f, dO + (size_t)c.r0 * g->qd + h0 * g->hd,
                                 g->qd, g->hd, kv, g->qkvw, 0, 0.0f, dP + h0 * ss + ro, g->s, ss, g->r, err)
             : !f->sgemm_batched(be, FALSE, FALSE, c.m, g->hd, c.n, 1.0f, dP + h0 * ss + ro, g->s, ss, kv, g->qkvw, 0,
                                 0.0f, dqkv + (size_t)c.r0 * g->qkvw + h0 * g->hd, g->qkvw, g->hd, g->r, err))
    return FALSE;
  for (int h = h0; h < h0 + g->r; h++) /* the heads of a group share k and v: their products sum */
    if (!f->sgemm(be, TRUE, FALSE, c.n, g->hd, c.m, 1.0f, (after ? dP : PV) + h * ss + ro, g->s,
                  after ? qkv + (size_t)c.r0 * g->qkvw + h * g->hd : dO + (size_t)c.r0 * g->qd + h * g->hd,
                  after ? g->qkvw : g->qd, 1.0f, dkv, g->qkvw, err))
      return FALSE;
  return TRUE;
}

/* The attention's backward of sample b: from its dO [s][q] to its dqkv (zeroed first), with dP
 * [a][s][s] as scratch; with dropout V's gradient takes the dropped probabilities, and the
 * probabilities' gradient goes back through the mask. */
static gboolean attention_backward(const TpBackend *be, const NetLayer *L, const Geo *g, float **pc, int b,
                                   const float *dO0, float *dqkv0, float *dP, GError **err)
{
  const TpBackendIface *f = be->iface;
  size_t ss = (size_t)g->s * g->s;
  const float *qkv = pc[BLK_QKV] + (size_t)b * g->s * g->qkvw, *P = pc[BLK_P] + (size_t)b * L->piece[BLK_P];
  const float *PV = g->drop ? pc[BLK_PD] + (size_t)b * L->piece[BLK_PD] : P, *dO = dO0 + (size_t)b * g->s * g->qd;
  float *dqkv = dqkv0 + (size_t)b * g->s * g->qkvw;
  if (!f->zero(be, dqkv, (size_t)g->s * g->qkvw, err))
    return FALSE;
  for (int p = 0; p < 2; p++)
    for (int k = 0; k < g->G && causal_part(g, p).m; k++)
      if (!attention_part(be, g, causal_part(g, p), k, qkv, PV, dO, dP, dqkv, FALSE, err))
        return FALSE;
  if ((g->drop &&
       !f->dropout_byte_backward(be, (size_t)g->a * ss, TP_BLOCK_DROPOUT_P, sample_mask(L, pc, b), dP, dP, err)) ||
      !f->causal_softmax_backward(be, g->a, g->s, 1.0f / sqrtf((float)g->hd), P, dP, dP, err))
    return FALSE;
  for (int p = 0; p < 2; p++)
    for (int k = 0; k < g->G && causal_part(g, p).m; k++)
      if (!attention_part(be, g, causal_part(g, p), k, qkv, PV, dO, dP, dqkv, TRUE, err))
        return FALSE;
  return TRUE;
}

/* The block's input gradient: dy (= dys[BLK_DOUT]) → dx, the inner output gradients into dys. */
static gboolean block_backward_input(const TpBackend *be, const NetLayer *L, int nb, float **pc, const float *w,
                                     float **dys, float *dx, float *scratch, GError **err)
{
  Geo g = geo(L);
  BlkParams p = blk_params(L, &g);
  const TpBackendIface *f = be->iface;
  int rows = nb * g.s;
  size_t n = (size_t)rows * g.d, as2 = (size_t)g.a * g.s * g.s;
  float *dM = scratch, *dO = dM + (size_t)rows * g.f, *dP = dO + (size_t)rows * g.qd;
  float *dz2 = g.drop ? dys[BLK_DZ2] : dys[BLK_DOUT], *dz1 = g.drop ? dys[BLK_DZ1] : dys[BLK_DY1];
  if ((g.drop && !drop_backward(be, L, &g, nb, pc, as2 + (size_t)g.s * g.d, dys[BLK_DOUT], dz2, err)) ||
      !f->linear_backward(be, rows, g.f, g.d, pc[BLK_M], w + p.w2, dz2, dM, NULL, NULL, err))
    return FALSE;
  gboolean ok = g.swiglu ? f->swiglu_backward(be, rows, g.f, pc[BLK_A1], dM, dys[BLK_DA1], err)
                         : f->gelu_backward(be, (size_t)rows * g.f, pc[BLK_A1], dM, dys[BLK_DA1], err);
  if (!ok || !f->linear_backward(be, rows, g.d, g.f1, pc[BLK_H2], w + p.w1, dys[BLK_DA1], dys[BLK_DH2], NULL, NULL, err) ||
      !f->norm_backward(be, rows, g.d, g.eps, g.rms, pc[BLK_Y1], w + p.n2w, dys[BLK_DH2], dys[BLK_DY1], NULL, NULL, err) ||
      !f->axpy(be, n, 1.0f, dys[BLK_DOUT], dys[BLK_DY1], err) ||
      (g.drop && !drop_backward(be, L, &g, nb, pc, as2, dys[BLK_DY1], dz1, err)) ||
      !f->linear_backward(be, rows, g.qd, g.d, pc[BLK_O], w + p.o, dz1, dO, NULL, NULL, err))
    return FALSE;
  for (int b = 0; b < nb; b++)
    if (!attention_backward(be, L, &g, pc, b, dO, dys[BLK_DQKV], dP, err))
      return FALSE;
  if (g.rope && (!f->rope(be, rows, g.s, g.a, g.hd, g.qkvw, g.theta, -1.0f, dys[BLK_DQKV], err) ||
                 !f->rope(be, rows, g.s, g.G, g.hd, g.qkvw, g.theta, -1.0f, dys[BLK_DQKV] + g.qd, err)))
    return FALSE;
  return f->linear_backward(be, rows, g.d, g.qkvw, pc[BLK_H1], w + p.qkv, dys[BLK_DQKV], dys[BLK_DH1], NULL, NULL,
                            err) &&
         (!dx || (f->norm_backward(be, rows, g.d, g.eps, g.rms, pc[BLK_X], w + p.n1w, dys[BLK_DH1], dx, NULL, NULL, err) &&
                  f->axpy(be, n, 1.0f, dys[BLK_DY1], dx, err)));
}

/* The block's weight gradients from the inner output gradients (the fused backward's order). */
static gboolean block_backward_weight(const TpBackend *be, const NetLayer *L, int nb, float **pc, const float *w,
                                      float **dys, float *gw, GError **err)
{
  Geo g = geo(L);
  BlkParams p = blk_params(L, &g);
  const TpBackendIface *f = be->iface;
  int rows = nb * g.s;
  float *dz2 = g.drop ? dys[BLK_DZ2] : dys[BLK_DOUT], *dz1 = g.drop ? dys[BLK_DZ1] : dys[BLK_DY1];
  return f->linear_backward(be, rows, g.f, g.d, pc[BLK_M], w + p.w2, dz2, NULL, gw + p.w2, mp(gw, p.b2), err) &&
         f->linear_backward(be, rows, g.d, g.f1, pc[BLK_H2], w + p.w1, dys[BLK_DA1], NULL, gw + p.w1, mp(gw, p.b1), err) &&
         f->norm_backward(be, rows, g.d, g.eps, g.rms, pc[BLK_Y1], w + p.n2w, dys[BLK_DH2], NULL, gw + p.n2w,
                          mp(gw, p.n2b), err) &&
         f->linear_backward(be, rows, g.qd, g.d, pc[BLK_O], w + p.o, dz1, NULL, gw + p.o, mp(gw, p.bo), err) &&
         f->linear_backward(be, rows, g.d, g.qkvw, pc[BLK_H1], w + p.qkv, dys[BLK_DQKV], NULL, gw + p.qkv,
                            mp(gw, p.bqkv), err) &&
         f->norm_backward(be, rows, g.d, g.eps, g.rms, pc[BLK_X], w + p.n1w, dys[BLK_DH1], NULL, gw + p.n1w,
                          mp(gw, p.n1b), err);
}

static gboolean block_infer(TpNet *net, const NetLayer *L, int batch, const float *w, const float *x, float *y,
                            GError **err)
{
  size_t sd = (size_t)L->d.hin * L->d.cin;
  for (int c0 = 0; c0 < batch; c0 += INFER_CHUNK) {
    int nb = MIN(INFER_CHUNK, batch - c0);
    float *pc[BLK_N_PIECES];
    block_pieces(L, net->tok, (size_t)nb, 0, pc);
    pc[BLK_X] = (float *)x + (size_t)c0 * sd; /* read only */
    if (!block_forward(net->be, L, nb, pc, w, y + (size_t)c0 * sd, NULL, err))
      return FALSE;
  }
  return TRUE;
}

gboolean tp_net_token_forward(TpNet *net, const NetLayer *L, int batch, TpSaved *saved, const float *w, const float *x,
                              float *y, const gint32 *labels, TpLossStats *stats, GError **err)
{
  const TpBackend *be = net->be;
  Geo g = geo(L);
  int rows = batch * g.s, V = vocab_of(L);
  switch (L->d.kind) {
  case TP_LAYER_EMBEDDING:
    return be->iface->embedding_forward(be, rows, g.s, (int)L->d.cout, x, w,
                                        L->d.blk.learned ? w + (size_t)V * L->d.cout : NULL, y, err);
  case TP_LAYER_LAYERNORM:
  case TP_LAYER_RMSNORM:
    return be->iface->norm_forward(be, rows, g.d, g.eps, g.rms, x, w, g.rms ? NULL : w + g.d, y, err);
  case TP_LAYER_LM_HEAD: return be->iface->linear_forward(be, rows, g.d, V, x, w, NULL, y, err);
  case TP_LAYER_TOKEN_CE: {
    double loss = 0.0;
    int correct = 0;
    if (!be->iface->softmax_ce_forward(be, rows, g.d, x, labels, y, &loss, &correct, err))
      return FALSE;
    if (stats) /* a sample's loss is the mean over its positions; correct counts positions */
      stats->loss_sum = loss / g.s, stats->correct = correct;
    return TRUE;
  }
  case TP_LAYER_BLOCK: {
    if (!saved)
      return block_infer(net, L, batch, w, x, y, err);
    float *pc[BLK_N_PIECES];
    saved_pieces(L, saved, pc);
    g_assert(pc[BLK_X] == x);
    return block_forward(be, L, batch, pc, w, y, saved, err);
  }
  default: g_assert_not_reached();
  }
}

/* The embedding's table (and positions) gradient from output gradients dy: the tokens' rows. */
static gboolean embedding_weight(const TpBackend *be, const NetLayer *L, const TpSaved *saved, const float *dy,
                                 float *grad, GError **err)
{
  Geo g = geo(L);
  size_t table = (size_t)vocab_of(L) * L->d.cout;
  return be->iface->embedding_backward(be, saved->batch * g.s, g.s, (int)L->d.cout, tp_net_region(saved, L), dy, grad,
                                       L->d.blk.learned ? grad + table : NULL, err);
}

gboolean tp_net_token_backward(TpNet *net, const NetLayer *L, TpSaved *saved, const float *w, const float *dy,
                               float *dx, float *grad, int minibatch_samples, GError **err)
{
  const TpBackend *be = net->be;
  Geo g = geo(L);
  int batch = saved->batch, rows = batch * g.s, V = vocab_of(L);
  const float *x = tp_net_region(saved, L);
  if (L->has_w && !grad && L->d.kind != TP_LAYER_BLOCK &&
      !be->iface->copy(be, tp_net_dy_region(saved, L), dy, L->n_dy * batch, err)) /* for the split's W */
    return FALSE;
  switch (L->d.kind) {
  case TP_LAYER_EMBEDDING:
    if (dx && !be->iface->zero(be, dx, L->in * batch, err)) /* token numbers have no gradient */
      return FALSE;
    return !grad || embedding_weight(be, L, saved, dy, grad, err);
  case TP_LAYER_LAYERNORM:
  case TP_LAYER_RMSNORM:
    return (!dx && !grad) ||
           be->iface->norm_backward(be, rows, g.d, g.eps, g.rms, x, w, dy, dx, grad, grad && !g.rms ? grad + g.d : NULL,
                                    err);
  case TP_LAYER_LM_HEAD:
    return (!dx && !grad) || be->iface->linear_backward(be, rows, g.d, V, x, w, dy, dx, grad, NULL, err);
  case TP_LAYER_TOKEN_CE:
    return be->iface->softmax_ce_backward(be, rows, g.d, tp_net_region(saved, L), saved->labels,
                                          1.0f / ((float)minibatch_samples * g.s), dx, err);
  case TP_LAYER_BLOCK: {
    float *pc[BLK_N_PIECES], *dys[BLK_N_DYS];
    saved_pieces(L, saved, pc);
    float *scratch = net->tok;
    if (grad) { /* the inner gradients in scratch, after the attention's */
      block_dys(L, scratch + block_inner_at(&g, batch), (size_t)batch, 0, dys);
      dys[BLK_DOUT] = (float *)dy;
    } else {
      saved_dys(L, saved, dys);
      if (!be->iface->copy(be, dys[BLK_DOUT], dy, L->dys[BLK_DOUT] * batch, err))
        return FALSE;
    }
    return block_backward_input(be, L, batch, pc, w, dys, dx, scratch, err) &&
           (!grad || block_backward_weight(be, L, batch, pc, w, dys, grad, err));
  }
  default: g_assert_not_reached();
  }
}

gboolean tp_net_token_weight(TpNet *net, const NetLayer *L, TpSaved *saved, const float *w, float *grad, GError **err)
{
  const TpBackend *be = net->be;
  Geo g = geo(L);
  int batch = saved->batch, rows = batch * g.s, V = vocab_of(L);
  const float *x = tp_net_region(saved, L), *dy = tp_net_dy_region(saved, L);
  switch (L->d.kind) {
  case TP_LAYER_EMBEDDING: return embedding_weight(be, L, saved, dy, grad, err);
  case TP_LAYER_LAYERNORM:
  case TP_LAYER_RMSNORM:
    return be->iface->norm_backward(be, rows, g.d, g.eps, g.rms, x, w, dy, NULL, grad, g.rms ? NULL : grad + g.d, err);
  case TP_LAYER_LM_HEAD: return be->iface->linear_backward(be, rows, g.d, V, x, w, dy, NULL, grad, NULL, err);
  case TP_LAYER_BLOCK: {
    float *pc[BLK_N_PIECES], *dys[BLK_N_DYS];
    saved_pieces(L, saved, pc), saved_dys(L, saved, dys);
    return block_backward_weight(be, L, batch, pc, w, dys, grad, err);
  }
  default: g_assert_not_reached();
  }
}
