/* tp_net_resnet.c — batch normalisation and torchvision's bottleneck block (ResNet v1.5) on a
 * stage's backend.
 *
 * Batchnorm in training normalises with the statistics of each micro-batch (net->group samples), as
 * pipeline systems do (GPipe, PipeDream, PyTorch's pipelining: a micro-batch is the batch a layer
 * sees); a forward of several micro-batches at once takes each one's statistics apart, so that fused
 * forwards compute what the unfused ones do.  The running mean and variance are the stage's state,
 * beside its weights but not of them: one copy, updated by every training forward in the order the
 * stage runs them (a recomputed forward leaves them), read by evaluation; no weight policy versions
 * them, and checkpoints carry them (docs/training.md, docs/checkpoints.md).
 *
 * A bottleneck is conv 1×1 → bn → relu → conv 3×3 (the stride, v1.5) → bn → relu → conv 1×1 → bn,
 * plus the shortcut (the input, or conv 1×1 with the stride → bn where the shape changes), then relu;
 * convolutions without bias.  Its parameters, in the stage's flat array: W1, γ1, β1, W2, γ2, β2, W3,
 * γ3, β3 (and Ws, γs, βs).  It keeps per sample its input X, each convolution's output A (a
 * batchnorm's input: its statistics are recomputed in the backward), each inner ReLU's output R (the
 * next convolution's input; its sign is the ReLU's mask), the projection's output and the block's
 * output Y (the final ReLU's mask) — what tp_model.c counts. */
#include "config.h"
#include "tp_net_priv.h"
#include "tp_error.h"

#include <math.h>
#include <string.h>

/* ---- batchnorm, per group of the net's samples ---- */

static int groups(const TpNet *net, int batch)
{
  return net->group > 0 && batch > net->group && batch % net->group == 0 ? batch / net->group : 1;
}

gboolean tp_net_bn_forward(TpNet *net, const TpSaved *saved, int batch, int c, int hw, size_t st, const float *x,
                           const float *gamma, float *y, GError **err)
{
  const TpBackend *be = net->be;
  int n = saved ? groups(net, batch) : 1, rows = batch / n;
  size_t len = (size_t)rows * c * hw;
  float *running = net->stats + st;
  for (int k = 0; k < n; k++)
    if (!be->iface->batchnorm_forward(be, rows, c, hw, TP_BN_EPS, TP_BN_MOMENTUM, saved != NULL, x + k * len, gamma,
                                      gamma + c, saved && saved->replay ? NULL : running, y + k * len, err))
      return FALSE;
  return TRUE;
}

gboolean tp_net_bn_backward(TpNet *net, int batch, int c, int hw, const float *x, const float *gamma, const float *dy,
                            float *dx, float *dgamma, GError **err)
{
  const TpBackend *be = net->be;
  int n = groups(net, batch), rows = batch / n;
  size_t len = (size_t)rows * c * hw;
  for (int k = 0; k < n; k++)
    if (!be->iface->batchnorm_backward(be, rows, c, hw, TP_BN_EPS, x + k * len, gamma, dy + k * len,
                                       dx ? dx + k * len : NULL, dgamma, dgamma ? dgamma + c : NULL, err))
      return FALSE;
  return TRUE;
}

/* ---- the bottleneck's shape ---- */

typedef struct {
  TpWindow c1, c2, c3, cs;    /* the convolutions (cs: the projection's) */
  int mid, out, hw1, hw2;     /* widths; planes before and after the stride */
  gboolean proj;
  size_t w1, g1, w2, g2, w3, g3, ws, gs; /* parameter offsets (each β follows its γ) */
  size_t s1, s2, s3, ss;      /* running statistics' offsets in the layer's */
} Res;

static Res res_of(const NetLayer *L)
{
  const TpLayer *d = &L->d;
  int cin = (int)d->cin, h = (int)d->hin, w = (int)d->win, mid = d->mid, out = d->out, s = d->stride;
  int h2 = (int)d->hout, w2 = (int)d->wout;
  Res r = { .c1 = { cin, h, w, mid, h, w, 1, 1, 0 }, .c2 = { mid, h, w, mid, h2, w2, 3, s, 1 },
            .c3 = { mid, h2, w2, out, h2, w2, 1, 1, 0 }, .cs = { cin, h, w, out, h2, w2, 1, s, 0 },
            .mid = mid, .out = out, .hw1 = h * w, .hw2 = h2 * w2, .proj = s != 1 || cin != out };
  size_t m = (size_t)mid, o = (size_t)out;
  r.w1 = 0, r.g1 = m * cin, r.w2 = r.g1 + 2 * m, r.g2 = r.w2 + m * m * 9, r.w3 = r.g2 + 2 * m;
  r.g3 = r.w3 + o * m, r.ws = r.g3 + 2 * o, r.gs = r.ws + o * cin;
  r.s1 = 0, r.s2 = 2 * m, r.s3 = 4 * m, r.ss = 4 * m + 2 * o;
  return r;
}

void tp_net_res_layout(NetLayer *L)
{
  Res r = res_of(L);
  size_t m1 = (size_t)r.mid * r.hw1, m2 = (size_t)r.mid * r.hw2, o = (size_t)r.out * r.hw2;
  size_t piece[RES_N_PIECES] = { [RES_X] = L->in, [RES_A1] = m1, [RES_R1] = m1, [RES_A2] = m2, [RES_R2] = m2,
                                 [RES_A3] = o, [RES_AS] = r.proj ? o : 0, [RES_Y] = o };
  size_t dys[RES_N_DYS] = { [RES_DZ] = o, [RES_DA3] = o, [RES_DB2] = m2, [RES_DA2] = m2, [RES_DB1] = m1,
                            [RES_DA1] = m1, [RES_DAS] = r.proj ? o : 0 };
  memcpy(L->piece, piece, sizeof piece), memcpy(L->dys, dys, sizeof dys);
  for (int i = 0; i < RES_N_PIECES; i++)
    L->n_save += piece[i];
  for (int i = 0; i < RES_N_DYS; i++)
    L->n_dy += dys[i];
  L->n_w = (r.proj ? r.gs + 2 * (size_t)r.out : r.ws);
  L->n_st = r.proj ? r.ss + 2 * (size_t)r.out : r.ss;
  L->saves_input = TRUE, L->lead = L->in;
  g_assert((long long)L->n_save == L->d.stored_elems);
  g_assert((long long)MAX(L->n_dy + L->in, m1 + m2 + o) == L->d.work_elems); /* tp_net_res_scratch's */
}

size_t tp_net_norm_channels(const NetLayer *L, size_t rel)
{
  if (L->d.kind != TP_LAYER_BOTTLENECK)
    return L->n_st / 2;
  Res r = res_of(L);
  return rel < r.s3 ? (size_t)r.mid : (size_t)r.out; /* bn1, bn2 of mid channels; bn3 (, the projection's) of out */
}

void tp_net_res_init(const NetLayer *L, guint64 seed, float *host)
{
  Res r = res_of(L);
  const TpWindow *conv[] = { &r.c1, &r.c2, &r.c3, &r.cs };
  size_t at[] = { r.w1, r.w2, r.w3, r.ws }, bn[] = { r.g1, r.g2, r.g3, r.gs };
  int c[] = { r.mid, r.mid, r.out, r.out };
  for (int i = 0; i < (r.proj ? 4 : 3); i++) {
    const TpWindow *s = conv[i];
    size_t n = (size_t)s->cout * s->cin * s->k * s->k;
    float bound = sqrtf(6.0f / (float)(s->cin * s->k * s->k));
    for (size_t j = 0; j < n; j++)
      host[at[i] + j] = (2.0f * tp_uniform(seed, (guint64)L->index, at[i] + j) - 1.0f) * bound;
    for (int j = 0; j < c[i]; j++)
      host[bn[i] + j] = 1.0f, host[bn[i] + c[i] + j] = 0.0f;
  }
}

size_t tp_net_res_workspace(const TpNet *net, int batch)
{
  const TpBackend *be = net->be;
  size_t most = 0;
  for (int i = 0; i < net->n; i++) {
    if (net->layers[i].d.kind != TP_LAYER_BOTTLENECK)
      continue;
    Res r = res_of(&net->layers[i]);
    const TpWindow *conv[] = { &r.c1, &r.c2, &r.c3, &r.cs };
    for (int j = 0; j < 4; j++)
      most = MAX(most, be->iface->conv_workspace(be, conv[j], batch));
  }
  return most;
}

/* The kept gradients (a fused backward's, as a split keeps them), then the shortcut's input
 * gradient; an inference forward's one plane of each width, normalised in place (a training
 * forward's shortcut output fits there too). */
size_t tp_net_res_scratch(const TpNet *net, int batch)
{
  size_t most = 0;
  for (int i = 0; i < net->n; i++) {
    const NetLayer *L = &net->layers[i];
    if (L->d.kind == TP_LAYER_BOTTLENECK)
      most = MAX(most, MAX(L->n_dy + L->in, L->piece[RES_A1] + L->piece[RES_A2] + L->out) * (size_t)batch);
  }
  return most;
}

/* Pieces (or gradients) of sizes len at base: piece i at at·stride + off·len[i], at the floats before it. */
static void pieces(const size_t *len, int n, float *base, size_t stride, size_t off, float **out)
{
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    out[i] = base + at * stride + off * len[i];
    at += len[i];
  }
}

/* ---- forward ---- */

/* conv → bn (→ relu when r is not NULL): a into its output, the normalised into b */
static gboolean conv_bn(TpNet *net, const TpSaved *saved, int batch, const TpWindow *s, const float *x,
                        const float *w, const float *gamma, size_t st, float *a, float *b, gboolean relu, GError **err)
{
  const TpBackend *be = net->be;
  size_t n = (size_t)batch * s->cout * s->hout * s->wout;
  return be->iface->conv_forward(be, s, batch, x, w, NULL, a, net->work, err) &&
         tp_net_bn_forward(net, saved, batch, s->cout, s->hout * s->wout, st, a, gamma, b, err) &&
         (!relu || be->iface->relu_forward(be, n, b, b, err));
}

gboolean tp_net_res_forward(TpNet *net, const NetLayer *L, int batch, TpSaved *saved, const float *w, const float *x,
                            float *y, GError **err)
{
  const TpBackend *be = net->be;
  Res r = res_of(L);
  float *pc[RES_N_PIECES], *t = net->res; /* t: the projection's normalised output */
  if (saved)
    pieces(L->piece, RES_N_PIECES, saved->data + L->save_off * saved->stride, (size_t)saved->stride,
           (size_t)saved->off, pc);
  else { /* inference: each batchnorm in place, in one scratch plane per width; the output into y */
    size_t b = (size_t)batch;
    pc[RES_A1] = pc[RES_R1] = net->res, pc[RES_A2] = pc[RES_R2] = net->res + L->piece[RES_A1] * b;
    pc[RES_AS] = t = pc[RES_A2] + L->piece[RES_A2] * b, pc[RES_A3] = pc[RES_Y] = y;
  }
  size_t st = L->st_off, o = (size_t)batch * r.out * r.hw2;
  if (!conv_bn(net, saved, batch, &r.c1, x, w + r.w1, w + r.g1, st + r.s1, pc[RES_A1], pc[RES_R1], TRUE, err) ||
      !conv_bn(net, saved, batch, &r.c2, pc[RES_R1], w + r.w2, w + r.g2, st + r.s2, pc[RES_A2], pc[RES_R2], TRUE, err) ||
      !conv_bn(net, saved, batch, &r.c3, pc[RES_R2], w + r.w3, w + r.g3, st + r.s3, pc[RES_A3], pc[RES_Y], FALSE, err))
    return FALSE;
  if (r.proj && !conv_bn(net, saved, batch, &r.cs, x, w + r.ws, w + r.gs, st + r.ss, pc[RES_AS], t, FALSE, err))
    return FALSE;
  return be->iface->axpy(be, o, 1.0f, r.proj ? t : x, pc[RES_Y], err) &&
         be->iface->relu_forward(be, o, pc[RES_Y], pc[RES_Y], err) &&
         (!saved || be->iface->copy(be, y, pc[RES_Y], o, err));
}

/* ---- backward ---- */

static void saved_parts(const NetLayer *L, TpNet *net, TpSaved *saved, gboolean split, float **pc, float **dys)
{
  pieces(L->piece, RES_N_PIECES, saved->data + L->save_off * saved->stride, (size_t)saved->stride, (size_t)saved->off,
         pc);
  if (split)
    pieces(L->dys, RES_N_DYS, saved->dy + L->dy_off * saved->stride, (size_t)saved->stride, (size_t)saved->off, dys);
  else
    pieces(L->dys, RES_N_DYS, net->res, (size_t)saved->batch, 0, dys);
}

/* The weight gradients from the kept output gradients: each convolution's dW = dAᵀ·input, each
 * batchnorm's dγ, dβ from its input A and its output gradient. */
static gboolean weight_pass(TpNet *net, const NetLayer *L, int batch, float **pc, float **dys, const float *w,
                            float *grad, GError **err)
{
  const TpBackend *be = net->be;
  Res r = res_of(L);
  const float *x = pc[RES_X];
  return be->iface->conv_backward(be, &r.c3, batch, pc[RES_R2], w + r.w3, dys[RES_DA3], NULL, grad + r.w3, NULL,
                                  net->work, err) &&
         tp_net_bn_backward(net, batch, r.out, r.hw2, pc[RES_A3], w + r.g3, dys[RES_DZ], NULL, grad + r.g3, err) &&
         be->iface->conv_backward(be, &r.c2, batch, pc[RES_R1], w + r.w2, dys[RES_DA2], NULL, grad + r.w2, NULL,
                                  net->work, err) &&
         tp_net_bn_backward(net, batch, r.mid, r.hw2, pc[RES_A2], w + r.g2, dys[RES_DB2], NULL, grad + r.g2, err) &&
         be->iface->conv_backward(be, &r.c1, batch, x, w + r.w1, dys[RES_DA1], NULL, grad + r.w1, NULL, net->work,
                                  err) &&
         tp_net_bn_backward(net, batch, r.mid, r.hw1, pc[RES_A1], w + r.g1, dys[RES_DB1], NULL, grad + r.g1, err) &&
         (!r.proj ||
          (be->iface->conv_backward(be, &r.cs, batch, x, w + r.ws, dys[RES_DAS], NULL, grad + r.ws, NULL, net->work,
                                    err) &&
           tp_net_bn_backward(net, batch, r.out, r.hw2, pc[RES_AS], w + r.gs, dys[RES_DZ], NULL, grad + r.gs, err)));
}

/* relu backward (the mask from its output r), then bn backward: dB in place, then dA */
static gboolean relu_bn_back(TpNet *net, int batch, int c, int hw, const float *r, const float *a, const float *gamma,
                             float *db, float *da, GError **err)
{
  const TpBackend *be = net->be;
  return be->iface->relu_backward(be, (size_t)batch * c * hw, r, db, db, err) &&
         tp_net_bn_backward(net, batch, c, hw, a, gamma, db, da, NULL, err);
}

gboolean tp_net_res_backward(TpNet *net, const NetLayer *L, TpSaved *saved, const float *w, const float *dy, float *dx,
                             float *grad, GError **err)
{
  const TpBackend *be = net->be;
  Res r = res_of(L);
  int batch = saved->batch;
  float *pc[RES_N_PIECES], *d[RES_N_DYS];
  saved_parts(L, net, saved, grad == NULL, pc, d);
  float *t = net->res + L->n_dy * batch; /* the projection's input gradient */
  size_t in = (size_t)batch * L->in;
  gboolean ok = be->iface->relu_backward(be, (size_t)batch * r.out * r.hw2, pc[RES_Y], dy, d[RES_DZ], err) &&
                tp_net_bn_backward(net, batch, r.out, r.hw2, pc[RES_A3], w + r.g3, d[RES_DZ], d[RES_DA3], NULL, err) &&
                be->iface->conv_backward(be, &r.c3, batch, pc[RES_R2], w + r.w3, d[RES_DA3], d[RES_DB2], NULL, NULL,
                                         net->work, err) &&
                relu_bn_back(net, batch, r.mid, r.hw2, pc[RES_R2], pc[RES_A2], w + r.g2, d[RES_DB2], d[RES_DA2], err) &&
                be->iface->conv_backward(be, &r.c2, batch, pc[RES_R1], w + r.w2, d[RES_DA2], d[RES_DB1], NULL, NULL,
                                         net->work, err) &&
                relu_bn_back(net, batch, r.mid, r.hw1, pc[RES_R1], pc[RES_A1], w + r.g1, d[RES_DB1], d[RES_DA1], err) &&
                (!r.proj ||
                 tp_net_bn_backward(net, batch, r.out, r.hw2, pc[RES_AS], w + r.gs, d[RES_DZ], d[RES_DAS], NULL, err));
  if (ok && dx)
    ok = be->iface->conv_backward(be, &r.c1, batch, pc[RES_X], w + r.w1, d[RES_DA1], dx, NULL, NULL, net->work, err) &&
         (r.proj ? be->iface->conv_backward(be, &r.cs, batch, pc[RES_X], w + r.ws, d[RES_DAS], t, NULL, NULL,
                                            net->work, err) &&
                     be->iface->axpy(be, in, 1.0f, t, dx, err)
                 : be->iface->axpy(be, in, 1.0f, d[RES_DZ], dx, err));
  return ok && (!grad || weight_pass(net, L, batch, pc, d, w, grad, err));
}

gboolean tp_net_res_weight(TpNet *net, const NetLayer *L, TpSaved *saved, const float *w, float *grad, GError **err)
{
  float *pc[RES_N_PIECES], *d[RES_N_DYS];
  saved_parts(L, net, saved, TRUE, pc, d);
  return weight_pass(net, L, saved->batch, pc, d, w, grad, err);
}
