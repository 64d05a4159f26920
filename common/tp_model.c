/* tp_model.c — reader of layer-stack descriptions and the per-layer derivations:
 * output shape, parameters, forward/backward FLOPs and activation elements per sample.  A
 * transformer block's FLOPs are its matrix products as Megatron-LM counts them (2 per multiply-add,
 * the full s x s attention); its stored bytes follow Korthikanti et al. (2022). */
#include "config.h"
#include "tp_model.h"
#include "tp_error.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

const char *const tp_layer_names[TP_N_LAYER_KINDS] = {
  "conv", "linear", "relu", "maxpool", "avgpool", "avgpool_to", "flatten", "dropout", "batchnorm", "softmax_ce",
  "bottleneck", "embedding", "layernorm", "rmsnorm", "block", "lm_head", "token_ce"
};

void tp_model_free(TpModel *m)
{
  if (!m)
    return;
  g_free(m->name);
  g_free(m->source);
  if (m->layers)
    g_array_unref(m->layers);
  g_free(m);
}

TpModel *tp_model_copy(const TpModel *m)
{
  TpModel *c = g_new(TpModel, 1);
  *c = *m;
  c->name = g_strdup(m->name), c->source = g_strdup(m->source);
  c->layers = g_array_copy(m->layers);
  return c;
}

G_GNUC_PRINTF(4, 5)
static gboolean bad(GError **err, const char *file, int line, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *why = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: %s", file, line, why);
  return FALSE;
}

static gboolean to_int(const char *t, int lo, int hi, int *out) { return tp_parse_int(t, lo, hi, out, NULL); }

/* A count computed in double, saturated at twice TP_MODEL_MAX_COUNT so that it converts (and sums)
 * without overflow; derive() refuses a layer whose counts pass TP_MODEL_MAX_COUNT. */
static long long count(double v) { return v > 2 * TP_MODEL_MAX_COUNT ? (long long)(2 * TP_MODEL_MAX_COUNT) : (long long)v; }

/* Output size of a window of size k, stride s, padding p over n. */
static long long window(long long n, long long k, long long s, long long p)
{
  return n + 2 * p < k ? 0 : (n + 2 * p - k) / s + 1;
}

/* One convolution cin x h x w -> cout (k, stride, pad), counted into *L. */
static void add_conv(TpLayer *L, long long cin, long long h, long long w, long long cout, int k, int s, int p,
                     gboolean bias, long long *ho, long long *wo)
{
  *ho = window(h, k, s, p);
  *wo = window(w, k, s, p);
  double macs = (double)cin * k * k * cout * *ho * *wo;
  L->params += count((double)cin * k * k * cout + (bias ? cout : 0));
  L->fwd_flops += 2 * macs;
  L->bwd_in_flops += 2 * macs, L->bwd_w_flops += 2 * macs;
  L->stored_elems += count((double)cin * h * w);
}

/* Batch normalisation (2 parameters per channel) and an elementwise op over `elems`. */
static void add_bn(TpLayer *L, long long c, long long elems)
{
  L->params += 2LL * c;
  L->fwd_flops += 4.0 * elems;
  L->bwd_in_flops += 6.0 * elems, L->bwd_w_flops += 2.0 * elems;
  L->stored_elems += elems;
}

static void add_eltwise(TpLayer *L, long long elems)
{
  L->fwd_flops += elems;
  L->bwd_in_flops += elems;
  L->stored_elems += elems;
}

/* torchvision's Bottleneck (v1.5: the stride sits on the 3x3 convolution), convolutions without
 * bias, a projection shortcut when the shape changes. */
static void add_bottleneck(TpLayer *L, long long cin, long long h, long long w)
{
  long long mid = L->mid, out = L->out, h1, w1, h2, w2, h3, w3, hs, ws;
  int s = L->stride;
  add_conv(L, cin, h, w, mid, 1, 1, 0, FALSE, &h1, &w1);
  add_bn(L, mid, count((double)mid * h1 * w1));
  add_eltwise(L, count((double)mid * h1 * w1));
  add_conv(L, mid, h1, w1, mid, 3, s, 1, FALSE, &h2, &w2);
  add_bn(L, mid, count((double)mid * h2 * w2));
  add_eltwise(L, count((double)mid * h2 * w2));
  add_conv(L, mid, h2, w2, out, 1, 1, 0, FALSE, &h3, &w3);
  add_bn(L, out, count((double)out * h3 * w3));
  if (s != 1 || cin != out) {
    add_conv(L, cin, h, w, out, 1, s, 0, FALSE, &hs, &ws);
    add_bn(L, out, count((double)out * hs * ws));
  }
  add_eltwise(L, count((double)out * h3 * w3)); /* residual add */
  add_eltwise(L, count((double)out * h3 * w3)); /* final relu */
  L->cout = out, L->hout = h3, L->wout = w3;
  /* what the executor keeps (exec/tp_net_resnet.c): the input, each convolution's output (its
   * batchnorm's input), each inner ReLU's output (the next convolution's input), the block's output */
  double m1 = (double)mid * h1 * w1, m2 = (double)mid * h2 * w2, o = (double)out * h3 * w3;
  gboolean proj = s != 1 || cin != out;
  L->stored_elems = count((double)cin * h * w + 2 * m1 + 2 * m2 + o * (proj ? 3 : 2));
  /* and its scratch: the backward's output gradients (at the sum, each convolution's output, each
   * inner batchnorm's) and the shortcut's input gradient, or an inference's planes */
  L->work_elems = count(MAX(o * (proj ? 3 : 2) + 2 * m2 + 2 * m1 + (double)cin * h * w, m1 + m2 + o));
}

/* One option of a transformer kind (TpBlock); FALSE when the key or its value is not one. */
static gboolean token_option(TpLayer *L, const char *key, const char *val)
{
  TpBlock *b = &L->blk;
  int v = 0;
  double x = 0;
  gboolean num = to_int(val, 1, 1 << 20, &v), real = tp_parse_double(val, 0, 1e9, &x, NULL);
  gboolean flag = !strcmp(val, "0") || !strcmp(val, "1"), on = !strcmp(val, "1"); /* a flag: 0 or 1 as written */
  gboolean block = L->kind == TP_LAYER_BLOCK, norm = L->kind == TP_LAYER_LAYERNORM || L->kind == TP_LAYER_RMSNORM;
  if (block && num && strcmp(key, "heads") == 0)
    b->heads = v;
  else if (block && num && strcmp(key, "kv_heads") == 0)
    b->kv_heads = v;
  else if (block && num && strcmp(key, "ffn") == 0)
    b->ffn = v;
  else if (block && num && strcmp(key, "head_dim") == 0)
    b->head_dim = v;
  else if (block && strcmp(key, "mlp") == 0 && (!strcmp(val, "gelu") || !strcmp(val, "swiglu")))
    b->swiglu = strcmp(val, "swiglu") == 0;
  else if (block && strcmp(key, "norm") == 0 && (!strcmp(val, "layernorm") || !strcmp(val, "rmsnorm")))
    b->rmsnorm = strcmp(val, "rmsnorm") == 0;
  else if (block && strcmp(key, "positions") == 0 && (!strcmp(val, "rope") || !strcmp(val, "none")))
    b->rope = strcmp(val, "rope") == 0;
  else if (L->kind == TP_LAYER_EMBEDDING && strcmp(key, "positions") == 0 && (!strcmp(val, "learned") || !strcmp(val, "none")))
    b->learned = strcmp(val, "learned") == 0;
  else if (block && real && x >= 1 && x <= 1e9 && strcmp(key, "theta") == 0)
    b->theta = x;
  else if ((block || norm) && real && x > 0 && x < 1 && strcmp(key, "eps") == 0)
    b->eps = x;
  else if (block && flag && strcmp(key, "dropout") == 0)
    b->dropout = on;
  else if (block && flag && strcmp(key, "bias") == 0)
    b->qkv_bias = b->o_bias = b->mlp_bias = on;
  else if (block && flag && strcmp(key, "qkv_bias") == 0)
    b->qkv_bias = on;
  else if (block && flag && strcmp(key, "o_bias") == 0)
    b->o_bias = on;
  else if (block && flag && strcmp(key, "mlp_bias") == 0)
    b->mlp_bias = on;
  else if (L->kind == TP_LAYER_LM_HEAD && flag && strcmp(key, "tied") == 0)
    b->tied = on;
  else
    return FALSE;
  return TRUE;
}

/* Parse "key=value" options of a layer line. */
static gboolean layer_options(TpLayer *L, char **tok, int first, const char *file, int line, GError **err)
{
  gboolean tokens = L->kind >= TP_LAYER_EMBEDDING;
  if (tokens) /* the defaults: a block's own, Llama's norm epsilon and rotary base */
    L->blk = (TpBlock){ .eps = 1e-5, .theta = 10000 };
  for (int i = first; tok[i]; i++) {
    char *eq = strchr(tok[i], '=');
    int v;
    g_autofree char *q = tp_quote(tok[i]);
    if (!eq)
      return bad(err, file, line, "unexpected %s (options are key=value)", q);
    char *key = g_strndup(tok[i], (gsize)(eq - tok[i]));
    const char *val = eq + 1;
    for (int j = first; j < i; j++) /* an option twice: which one was meant is not ours to guess */
      if (strncmp(tok[j], tok[i], (size_t)(eq - tok[i]) + 1) == 0) {
        g_autofree char *qk = tp_quote(key);
        g_free(key);
        return bad(err, file, line, "%s: option %s given twice", tp_layer_names[L->kind], qk);
      }
    gboolean ok = to_int(val, 0, 1 << 20, &v);
    if (tokens)
      ok = token_option(L, key, val);
    else if (ok && strcmp(key, "stride") == 0 && v >= 1 && (L->kind == TP_LAYER_CONV || L->kind == TP_LAYER_MAXPOOL ||
                                                       L->kind == TP_LAYER_AVGPOOL || L->kind == TP_LAYER_BOTTLENECK))
      L->stride = v;
    else if (ok && strcmp(key, "pad") == 0 && (L->kind == TP_LAYER_CONV || L->kind == TP_LAYER_MAXPOOL ||
                                               L->kind == TP_LAYER_AVGPOOL))
      L->pad = v;
    else if (ok && strcmp(key, "bias") == 0 && v <= 1 && (L->kind == TP_LAYER_CONV || L->kind == TP_LAYER_LINEAR))
      L->bias = v;
    else
      ok = FALSE;
    g_free(key);
    if (!ok)
      return bad(err, file, line, "%s: bad option %s", tp_layer_names[L->kind], q);
  }
  if (L->kind == TP_LAYER_BLOCK && (!L->blk.heads || !L->blk.ffn))
    return bad(err, file, line, "block needs heads=H and ffn=F (options: kv_heads=G mlp=gelu|swiglu "
                                "norm=layernorm|rmsnorm positions=rope|none theta=T eps=E dropout=0|1 bias=0|1)");
  if (L->kind == TP_LAYER_BLOCK && !L->blk.kv_heads)
    L->blk.kv_heads = L->blk.heads;
  return TRUE;
}

/* The transformer kinds on a sequence: width d = c at s = h positions (w = 1).  Their elements are
 * at the model's precision e, dropout masks a byte each, token ids 4 bytes; the loss keeps its fp32
 * logits (Korthikanti et al.). */
static gboolean derive_tokens(const TpModel *m, TpLayer *L, long long c, long long h, long long w, const char *file,
                              GError **err)
{
  const char *kind = tp_layer_names[L->kind];
  const TpBlock *b = &L->blk;
  const double e = m->elem_bytes, s = (double)h, d = (double)c, V = m->vocab;
  if (!m->vocab || w != 1)
    return bad(err, file, L->line, "%s needs a token model ('tokens CONTEXT VOCAB' instead of 'input')", kind);
  if ((L->kind == TP_LAYER_EMBEDDING) != (m->layers->len == 0))
    return bad(err, file, L->line, L->kind == TP_LAYER_EMBEDDING ? "embedding must be the first layer"
                                                                 : "%s must follow the embedding", kind);
  int width = m->layers->len ? g_array_index(m->layers, TpLayer, 0).out : 0;
  if (L->kind != TP_LAYER_EMBEDDING && L->kind != TP_LAYER_TOKEN_CE && c != width)
    return bad(err, file, L->line, "%s takes the model's width, %d, not %lld (after lm_head only token_ce)", kind, width,
               c);
  switch (L->kind) {
  case TP_LAYER_EMBEDDING:
    L->cout = L->out;
    L->params = count(V * L->out + (b->learned ? s * L->out : 0));
    L->fwd_flops = b->learned ? s * L->out : 0;
    L->bwd_w_flops = (b->learned ? 2 : 1) * s * L->out; /* the rows the tokens picked, accumulated */
    L->stored_elems = h, L->stored_bytes = 4 * s;
    break;
  case TP_LAYER_LAYERNORM:
  case TP_LAYER_RMSNORM:
    L->params = count((L->kind == TP_LAYER_RMSNORM ? 1 : 2) * d);
    L->fwd_flops = 5 * s * d, L->bwd_in_flops = 8 * s * d, L->bwd_w_flops = 2 * s * d;
    L->stored_elems = count(s * d);
    break;
  case TP_LAYER_BLOCK: {
    if ((!b->head_dim && c % b->heads != 0) || b->heads % b->kv_heads != 0)
      return bad(err, file, L->line, "block: width %lld is not a multiple of heads=%d (give head_dim=), or heads of "
                 "kv_heads=%d", c, b->heads, b->kv_heads);
    if (b->rope && (b->head_dim ? b->head_dim : c / b->heads) % 2 != 0)
      return bad(err, file, L->line, "block: rotary positions turn pairs: a head's width must be even");
    /* q and the attention output: heads x head_dim wide; k and v: kv_heads x head_dim */
    double hd = b->head_dim ? b->head_dim : d / b->heads, qd = hd * b->heads, kvd = hd * b->kv_heads;
    double f = b->ffn, a = b->heads;
    double proj = 2 * d * qd + 2 * d * kvd, mlp = (b->swiglu ? 3 : 2) * d * f;
    double biases = (b->qkv_bias ? qd + 2 * kvd : 0) + (b->o_bias ? d : 0) + (b->mlp_bias ? (b->swiglu ? 2 : 1) * f + d : 0);
    L->params = count(proj + mlp + biases + 2 * (b->rmsnorm ? 1 : 2) * d);
    double gemm = 2 * s * (proj + mlp), attn = 2 * s * s * qd; /* QK^T, and the probabilities times V */
    L->fwd_flops = gemm + 2 * attn, L->bwd_in_flops = gemm + 4 * attn, L->bwd_w_flops = gemm;
    double norms = 2 * e * s * d;
    double att = e * (s * d + 2 * s * qd + 2 * s * kvd + a * s * s) + (b->dropout ? a * s * s * (1 + e) + s * d : 0);
    double ffn = e * (s * d + (b->swiglu ? 3 : 2) * s * f) + (b->dropout ? s * d : 0);
    L->stored_bytes = norms + att + ffn;
    L->stored_elems = count(L->stored_bytes / e);
    /* the weight gradients need the products' inputs, not the probabilities or the masks (Qi et al.'s
     * M_W, 32sbh of Megatron-LM's 34sbh + 5as^2b) */
    L->stored_w_bytes = L->stored_bytes - e * a * s * s - (b->dropout ? a * s * s * (1 + e) + 2 * s * d : 0);
    break;
  }
  case TP_LAYER_LM_HEAD:
    L->cout = m->vocab;
    L->params = b->tied ? 0 : count(V * d);
    L->weights = count(V * d);
    L->fwd_flops = L->bwd_in_flops = L->bwd_w_flops = 2 * s * d * V;
    L->stored_elems = count(s * d);
    break;
  case TP_LAYER_TOKEN_CE:
    if (c != m->vocab)
      return bad(err, file, L->line, "token_ce needs the vocabulary's %d scores a position, got %lld (add lm_head)",
                 m->vocab, c);
    L->fwd_flops = 5 * s * V, L->bwd_in_flops = 2 * s * V;
    L->stored_elems = count(s * V), L->stored_bytes = 4 * s * V;
    break;
  default: g_assert_not_reached();
  }
  return TRUE;
}

/* A max or average pool's window over a c x h x w input. */
static gboolean add_pool(TpLayer *L, long long c, long long h, long long w, const char *file, GError **err)
{
  L->hout = window(h, L->k, L->stride, L->pad);
  L->wout = window(w, L->k, L->stride, L->pad);
  if (L->hout < 1 || L->wout < 1)
    return bad(err, file, L->line, "%s: a %dx%d window does not fit a %lldx%lld input", tp_layer_names[L->kind],
               L->k, L->k, h, w);
  L->fwd_flops = (double)L->k * L->k * c * L->hout * L->wout;
  L->bwd_in_flops = (double)c * L->hout * L->wout;
  L->stored_elems = L->kind == TP_LAYER_MAXPOOL ? count((double)c * L->hout * L->wout) : 0;
  return TRUE;
}

/* A layer's totals from its parts (the backward's FLOPs, its weights and stored bytes where its kind
 * left them, its output), held to the per-sample bounds. */
static gboolean finish_layer(const TpModel *m, TpLayer *L, long long c, long long h, long long w, const char *file,
                             GError **err)
{
  L->bwd_flops = L->bwd_in_flops + L->bwd_w_flops;
  if (L->weights == 0)
    L->weights = L->params;
  if (L->stored_bytes == 0)
    L->stored_bytes = (double)m->elem_bytes * (double)L->stored_elems;
  if (L->stored_w_bytes == 0)
    L->stored_w_bytes = L->stored_bytes;
  L->out_elems = count((double)L->cout * L->hout * L->wout);
  const double most = TP_MODEL_MAX_COUNT;
  if (L->in_elems > most || L->out_elems > most || L->stored_elems > most || L->params > most || L->cout > most)
    return bad(err, file, L->line, "%s: more than %.0e elements or parameters per sample (input %lldx%lldx%lld)",
               tp_layer_names[L->kind], most, c, h, w);
  if (!isfinite(L->fwd_flops) || !isfinite(L->bwd_flops) || L->fwd_flops > 1e30 || L->bwd_flops > 1e30)
    return bad(err, file, L->line, "%s: more than 1e30 FLOPs per sample", tp_layer_names[L->kind]);
  return TRUE;
}

/* Derive shape, parameters, FLOPs and activations of L from its input shape. */
static gboolean derive(const TpModel *m, TpLayer *L, long long c, long long h, long long w, const char *file,
                       GError **err)
{
  long long in = count((double)c * h * w);
  L->cin = c, L->hin = h, L->win = w, L->in_elems = in;
  L->cout = c, L->hout = h, L->wout = w;
  switch (L->kind) {
  case TP_LAYER_CONV:
    if (window(h, L->k, L->stride, L->pad) < 1 || window(w, L->k, L->stride, L->pad) < 1)
      return bad(err, file, L->line, "conv: a %dx%d kernel does not fit a %lldx%lld input", L->k, L->k, h, w);
    add_conv(L, c, h, w, L->out, L->k, L->stride, L->pad, L->bias, &L->hout, &L->wout);
    L->cout = L->out;
    break;
  case TP_LAYER_LINEAR:
    if (h != 1 || w != 1)
      return bad(err, file, L->line, "linear needs a flat input, got %lldx%lldx%lld (add flatten)", c, h, w);
    L->params = count((double)c * L->out + (L->bias ? L->out : 0));
    L->fwd_flops = 2.0 * c * L->out;
    L->bwd_in_flops = L->bwd_w_flops = 2.0 * c * L->out;
    L->stored_elems = c;
    L->cout = L->out;
    break;
  case TP_LAYER_MAXPOOL:
  case TP_LAYER_AVGPOOL:
    if (!add_pool(L, c, h, w, file, err))
      return FALSE;
    break;
  case TP_LAYER_AVGPOOL_TO:
    L->hout = L->k, L->wout = L->out;
    L->fwd_flops = L->bwd_in_flops = (double)in + (double)c * L->hout * L->wout;
    break;
  case TP_LAYER_FLATTEN:
    L->cout = in, L->hout = L->wout = 1;
    break;
  case TP_LAYER_RELU:
  case TP_LAYER_DROPOUT:
    add_eltwise(L, in);
    break;
  case TP_LAYER_BATCHNORM:
    add_bn(L, c, in);
    break;
  case TP_LAYER_SOFTMAX_CE:
    if (h != 1 || w != 1)
      return bad(err, file, L->line, "softmax_ce needs a flat input (class scores)");
    L->fwd_flops = 5.0 * c;
    L->bwd_in_flops = 2.0 * c;
    L->stored_elems = c;
    break;
  case TP_LAYER_EMBEDDING:
  case TP_LAYER_LAYERNORM:
  case TP_LAYER_RMSNORM:
  case TP_LAYER_BLOCK:
  case TP_LAYER_LM_HEAD:
  case TP_LAYER_TOKEN_CE:
    if (!derive_tokens(m, L, c, h, w, file, err))
      return FALSE;
    break;
  case TP_LAYER_BOTTLENECK:
    if (window(h, 3, L->stride, 1) < 1)
      return bad(err, file, L->line, "bottleneck: input %lldx%lld too small", h, w);
    add_bottleneck(L, c, h, w);
    break;
  default: g_assert_not_reached();
  }
  return finish_layer(m, L, c, h, w, file, err);
}

static gboolean parse_layer(TpModel *m, char **tok, int line, long long *c, long long *h, long long *w, const char *file,
                            GError **err)
{
  TpLayer L = { .line = line, .stride = 1, .bias = TRUE };
  int i;
  for (i = 0; i < TP_N_LAYER_KINDS && strcmp(tok[0], tp_layer_names[i]) != 0; i++)
    ;
  if (i == TP_N_LAYER_KINDS) {
    g_autofree char *q = tp_quote(tok[0]);
    return bad(err, file, line, "unknown layer %s (known: conv, linear, relu, maxpool, avgpool, avgpool_to, "
                                "flatten, dropout, batchnorm, softmax_ce, bottleneck, embedding, layernorm, rmsnorm, "
                                "block, lm_head, token_ce)", q);
  }
  L.kind = (TpLayerKind)i;
  /* positional arguments */
  static const int npos[TP_N_LAYER_KINDS] = { 2, 1, 0, 1, 1, 2, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0 };
  static const char *const usage[TP_N_LAYER_KINDS] = {
    "conv OUT K [stride=S] [pad=P] [bias=0|1]", "linear OUT [bias=0|1]", "relu", "maxpool K [stride=S] [pad=P]",
    "avgpool K [stride=S] [pad=P]", "avgpool_to H W", "flatten", "dropout", "batchnorm", "softmax_ce",
    "bottleneck MID OUT [stride=S]", "embedding WIDTH [positions=learned|none]", "layernorm [eps=E]",
    "rmsnorm [eps=E]", "block heads=H ffn=F [...]", "lm_head [tied=0|1]", "token_ce"
  };
  int vals[2] = { 0, 0 };
  for (int a = 0; a < npos[i]; a++) {
    if (!tok[1 + a] || strchr(tok[1 + a], '='))
      return bad(err, file, line, "expected '%s'", usage[i]);
    if (!to_int(tok[1 + a], 1, 1 << 20, &vals[a])) /* a number out of range, or not a number */
      return bad(err, file, line, "expected '%s': '%s' is not a whole number from 1 to %d", usage[i], tok[1 + a],
                 1 << 20);
  }
  switch (L.kind) {
  case TP_LAYER_CONV: L.out = vals[0], L.k = vals[1]; break;
  case TP_LAYER_LINEAR: L.out = vals[0]; break;
  case TP_LAYER_MAXPOOL:
  case TP_LAYER_AVGPOOL: L.k = vals[0], L.stride = vals[0]; break;
  case TP_LAYER_AVGPOOL_TO: L.k = vals[0], L.out = vals[1]; break;
  case TP_LAYER_BOTTLENECK: L.mid = vals[0], L.out = vals[1]; break;
  case TP_LAYER_EMBEDDING: L.out = vals[0]; break;
  default: break;
  }
  if (m->layers->len >= TP_MODEL_MAX_LAYERS)
    return bad(err, file, line, "more than %d layers (the limit keeps the stage split fast)", TP_MODEL_MAX_LAYERS);
  if (m->layers->len && g_array_index(m->layers, TpLayer, m->layers->len - 1).kind == TP_LAYER_TOKEN_CE)
    return bad(err, file, line, "%s after token_ce: the loss is the model's last layer", tp_layer_names[L.kind]);
  if (m->vocab && L.kind < TP_LAYER_EMBEDDING)
    return bad(err, file, line, "%s in a token model (it takes embedding, layernorm, rmsnorm, block, lm_head, "
               "token_ce)", tp_layer_names[L.kind]);
  if (!layer_options(&L, tok, 1 + npos[i], file, line, err) || !derive(m, &L, *c, *h, *w, file, err))
    return FALSE;
  *c = L.cout, *h = L.hout, *w = L.wout;
  g_array_append_val(m->layers, L);
  return TRUE;
}

/* A model file being read: the model so far, the shape the next layer takes, whether the input was
 * given, the file's name for messages. */
typedef struct {
  TpModel *m;
  long long c, h, w;
  gboolean have_input;
  const char *file;
} Reader;

/* "name NAME": a name a report can print as it is. */
static gboolean read_name(Reader *r, char **tok, int line, GError **err)
{
  if (!tok[1] || tok[2])
    return bad(err, r->file, line, "expected 'name NAME'");
  const char *why = tp_name_problem(tok[1]);
  if (why) {
    g_autofree char *q = tp_quote(tok[1]);
    return bad(err, r->file, line, "name %s holds %s, which a name may not", q, why);
  }
  g_free(r->m->name);
  r->m->name = g_strdup(tok[1]);
  return TRUE;
}

/* "dataset SAMPLES": the samples per epoch. */
static gboolean read_dataset(Reader *r, char **tok, int line, GError **err)
{
  gint64 v;
  if (!tok[1] || tok[2] || !tp_parse_int64(tok[1], 1, G_MAXINT64 / 2, &v, NULL))
    return bad(err, r->file, line, "expected 'dataset SAMPLES' (samples per epoch)");
  r->m->dataset = v;
  return TRUE;
}

/* "precision fp32|bf16|fp16", before the layers. */
static gboolean read_precision(Reader *r, char **tok, int line, GError **err)
{
  static const char *const names[] = { "fp32", "bf16", "fp16" };
  int p = 0;
  while (p < 3 && (!tok[1] || tok[2] || strcmp(tok[1], names[p]) != 0))
    p++;
  if (p == 3 || r->m->layers->len)
    return bad(err, r->file, line, "expected 'precision fp32|bf16|fp16' before the layers");
  r->m->precision = names[p], r->m->elem_bytes = p ? 2 : 4;
  return TRUE;
}

/* "tokens CONTEXT VOCAB": a sample is one sequence of tokens (the input, once, before the layers). */
static gboolean read_tokens(Reader *r, char **tok, int line, GError **err)
{
  int ctx, voc;
  if (r->have_input || r->m->layers->len || !tok[1] || !tok[2] || tok[3] || !to_int(tok[1], 1, 1 << 20, &ctx) ||
      !to_int(tok[2], 2, 1 << 24, &voc))
    return bad(err, r->file, line, "expected 'tokens CONTEXT VOCAB' once, before the layers (a sample: one sequence of "
                                   "CONTEXT tokens of a VOCAB-token vocabulary)");
  r->m->context = ctx, r->m->vocab = voc;
  r->m->in_c = r->c = 1, r->m->in_h = r->h = ctx, r->m->in_w = r->w = 1;
  r->have_input = TRUE;
  return TRUE;
}

/* "input CHANNELS HEIGHT WIDTH", once, before the layers. */
static gboolean read_input(Reader *r, char **tok, int line, GError **err)
{
  if (r->have_input || r->m->layers->len)
    return bad(err, r->file, line, "'input' must come once, before the layers");
  int ic, ih, iw;
  if (!tok[1] || !tok[2] || !tok[3] || tok[4] || !to_int(tok[1], 1, 1 << 20, &ic) ||
      !to_int(tok[2], 1, 1 << 16, &ih) || !to_int(tok[3], 1, 1 << 16, &iw))
    return bad(err, r->file, line, "expected 'input CHANNELS HEIGHT WIDTH' (at most %d x %d x %d)", 1 << 20, 1 << 16,
               1 << 16);
  r->m->in_c = r->c = ic, r->m->in_h = r->h = ih, r->m->in_w = r->w = iw;
  r->have_input = TRUE;
  return TRUE;
}

/* A layer after the input, or "repeat N LAYER …": N identical layers, each a unit of its own. */
static gboolean read_layers(Reader *r, char **tok, int line, GError **err)
{
  if (!r->have_input)
    return bad(err, r->file, line, "expected 'input CHANNELS HEIGHT WIDTH' (or 'tokens CONTEXT VOCAB') before the first "
                                   "layer");
  int times = 1;
  if (strcmp(tok[0], "repeat") == 0 &&
      (!tok[1] || !tok[2] || !to_int(tok[1], 1, TP_MODEL_MAX_LAYERS, &times) || strcmp(tok[2], "repeat") == 0))
    return bad(err, r->file, line, "expected 'repeat N LAYER [ARGS]' with N from 1 to %d", TP_MODEL_MAX_LAYERS);
  char **layer = strcmp(tok[0], "repeat") == 0 ? tok + 2 : tok;
  for (int i = 0; i < times; i++)
    if (!parse_layer(r->m, layer, line, &r->c, &r->h, &r->w, r->file, err))
      return FALSE;
  return TRUE;
}

/* One line's words (tok, NULL-terminated), by its first. */
static gboolean read_line(Reader *r, char **tok, int line, GError **err)
{
  static const struct {
    const char *word;
    gboolean (*read)(Reader *r, char **tok, int line, GError **err);
  } keys[] = { { "name", read_name }, { "dataset", read_dataset }, { "precision", read_precision },
               { "tokens", read_tokens }, { "input", read_input } };
  for (size_t i = 0; i < G_N_ELEMENTS(keys); i++)
    if (strcmp(tok[0], keys[i].word) == 0)
      return keys[i].read(r, tok, line, err);
  return read_layers(r, tok, line, err);
}

/* The model's totals over its layers, once it has one. */
static gboolean model_totals(TpModel *m, const char *name, GError **err)
{
  if (m->layers->len == 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: no layers", name);
    return FALSE;
  }
  if (!m->name)
    m->name = tp_name_from_file(name);
  for (int i = 0; i < tp_model_n_layers(m); i++) {
    const TpLayer *L = tp_model_layer(m, i);
    m->params += L->params;
    m->fwd_flops += L->fwd_flops;
    m->bwd_flops += L->bwd_flops;
  }
  if (!isfinite(m->fwd_flops + m->bwd_flops)) { /* cannot happen with the per-layer bounds; kept as the rule */
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: the model's FLOPs per sample are not a finite number", name);
    return FALSE;
  }
  return TRUE;
}

TpModel *tp_model_parse(const char *text, gsize len, const char *name, GError **err)
{
  g_autoptr(TpModel) m = g_new0(TpModel, 1);
  m->source = g_strdup(name);
  m->elem_bytes = 4, m->precision = "fp32";
  m->layers = g_array_new(FALSE, TRUE, sizeof(TpLayer));
  g_autofree char *copy = g_strndup(text, len);
  g_auto(GStrv) lines = g_strsplit(copy, "\n", -1);
  Reader r = { .m = m, .file = name };
  for (int ln = 0; lines[ln]; ln++) {
    char *hash = strchr(lines[ln], '#');
    if (hash)
      *hash = '\0';
    g_auto(GStrv) raw = g_strsplit_set(g_strstrip(lines[ln]), " \t", -1);
    g_autoptr(GPtrArray) tv = g_ptr_array_new(); /* the words, without the empty ones between blanks */
    for (int i = 0; raw[i]; i++)
      if (raw[i][0])
        g_ptr_array_add(tv, raw[i]);
    if (tv->len == 0)
      continue;
    g_ptr_array_add(tv, NULL);
    if (!read_line(&r, (char **)tv->pdata, ln + 1, err))
      return NULL;
  }
  return model_totals(m, name, err) ? g_steal_pointer(&m) : NULL;
}

char *tp_data_find(const char *env_var, const char *sub, const char *name, const char *ext)
{
  g_autofree char *file = g_strconcat(name, ext, NULL);
  const char *dirs[3] = { g_getenv(env_var), TP_DATADIR, TP_SRCDIR };
  for (int i = 0; i < 3; i++) {
    if (!dirs[i])
      continue;
    char *p = i == 0 ? g_build_filename(dirs[i], file, NULL) : g_build_filename(dirs[i], sub, file, NULL);
    if (g_file_test(p, G_FILE_TEST_IS_REGULAR))
      return p;
    g_free(p);
  }
  return NULL;
}

char *tp_model_path(const char *name_or_path)
{
  if (strchr(name_or_path, '/') || g_str_has_suffix(name_or_path, ".model") || g_str_has_suffix(name_or_path, ".json"))
    return g_strdup(name_or_path);
  char *p = tp_data_find("TP_MODELS_DIR", "models", name_or_path, ".model");
  return p ? p : tp_data_find("TP_MODELS_DIR", "models", name_or_path, ".json");
}

TpModel *tp_model_load(const char *name_or_path, GError **err)
{
  g_autofree char *path = tp_model_path(name_or_path);
  if (!path) {
    g_autofree char *q = tp_quote(name_or_path);
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_MODEL, "no model named %s (looked for NAME.model in $TP_MODELS_DIR, "
                                                     "%s/models and %s/models; or NAME.json)", q, TP_DATADIR,
                TP_SRCDIR);
    return NULL;
  }
  g_autofree char *text = NULL;
  gsize len;
  if (!tp_read_file(path, "model file", &text, &len, err))
    return NULL;
  const char *file = tp_input_name(path), *first = text;
  while (first < text + len && g_ascii_isspace(*first))
    first++;
  if ((first < text + len && *first == '{') || g_str_has_suffix(path, ".json")) { /* a Hugging Face config.json */
    g_autofree char *desc = tp_model_from_config(text, len, file, err);
    return desc ? tp_model_parse(desc, strlen(desc), file, err) : NULL;
  }
  return tp_model_parse(text, len, file, err);
}

long long tp_layer_norm_plane(const TpLayer *d)
{
  return d->kind == TP_LAYER_BATCHNORM ? d->hin * d->win : d->kind == TP_LAYER_BOTTLENECK ? d->hout * d->wout : 0;
}

long long tp_model_least_norm_plane(const TpModel *m)
{
  long long least = 0;
  for (int i = 0; i < tp_model_n_layers(m); i++) {
    long long plane = tp_layer_norm_plane(tp_model_layer(m, i));
    if (plane && (!least || plane < least))
      least = plane;
  }
  return least;
}

long long tp_model_train_bytes(const TpModel *m, int batch)
{
  long long need = 0, work = 0;
  for (int i = 0; i < tp_model_n_layers(m); i++) {
    const TpLayer *ly = tp_model_layer(m, i);
    need += 4 * (4 * ly->params + (long long)batch * (ly->stored_elems + ly->out_elems));
    work = MAX(work, ly->work_elems);
  }
  return need + 4 * (long long)batch * work;
}
