/* tp_net.c — a pipeline stage's layers on a backend: parameter layout, deterministic
 * initialisation, and the forward and backward passes over the layer range.
 *
 * Where activations go: each layer that needs its input in the backward (linear, conv, relu) has a
 * region of the TpSaved, and the layer before it writes its output straight there; the other
 * layers keep only what their backward reads (dropout mask, max-pool argmax, softmax
 * probabilities) and pass their outputs through two scratch buffers. So a forward stores exactly
 * the per-sample elements the model description counts (TpLayer.stored_elems), without copies. */
#include "config.h"
#include "tp_net.h"
#include "tp_net_priv.h"
#include "tp_error.h"

#include <math.h>
#include <string.h>

/* Layer L's parameters, saved floats and kept output gradients, from its description. */
static void layout(TpNet *net, NetLayer *L)
{
  const TpLayer *d = &L->d;
  switch (d->kind) {
  case TP_LAYER_LINEAR:
    L->n_w = (size_t)d->cin * d->cout, L->n_b = d->bias ? (size_t)d->cout : 0;
    L->n_save = L->in, L->saves_input = TRUE;
    break;
  case TP_LAYER_CONV:
    L->n_w = (size_t)d->cout * d->cin * d->k * d->k, L->n_b = d->bias ? (size_t)d->cout : 0;
    L->n_save = L->in, L->saves_input = TRUE;
    break;
  case TP_LAYER_RELU: L->n_save = L->in, L->saves_input = TRUE; break;
  case TP_LAYER_DROPOUT: L->n_save = L->in; break;
  case TP_LAYER_MAXPOOL: L->n_save = L->out; break;
  case TP_LAYER_SOFTMAX_CE: L->n_save = L->in, net->has_loss = TRUE; break;
  case TP_LAYER_BATCHNORM:
    L->n_w = L->n_b = (size_t)d->cin, L->n_st = 2 * (size_t)d->cin;
    L->n_save = L->in, L->saves_input = TRUE;
    break;
  case TP_LAYER_BOTTLENECK: tp_net_res_layout(L); break;
  case TP_LAYER_TOKEN_CE:
    net->has_loss = TRUE, net->labels_per_sample = (int)d->hin;
    tp_net_token_layout(L);
    break;
  default:
    if (tp_net_is_token_kind(d->kind))
      tp_net_token_layout(L);
    break;
  }
}

/* Where layer L's parameters, statistics, saved floats and kept output gradients are in the stage's
 * arrays (after the layers before it).  A tied head on the embedding's stage reads the
 * embedding's table; on another stage it holds a copy of it (d->weights). */
static void place(TpNet *net, NetLayer *L)
{
  const TpLayer *d = &L->d;
  if (!L->lead)
    L->lead = L->n_save;
  L->w_off = L->w_at = net->n_params;
  if (d->kind == TP_LAYER_LM_HEAD && d->blk.tied && net->first == 0) /* the embedding's table, on this stage */
    L->n_w = 0, L->w_at = net->layers[0].w_off;
  L->has_w = L->n_w || L->w_at != L->w_off;
  if (L->has_w && !L->n_dy)
    L->n_dy = L->out;
  g_assert((long long)(L->n_w + L->n_b) == (L->w_at != L->w_off ? d->params : d->weights));
  net->n_params += L->n_w + L->n_b;
  L->st_off = net->n_stats;
  net->n_stats += L->n_st;
  L->save_off = net->save_per_sample;
  net->save_per_sample += L->n_save;
  if (L->has_w) {
    L->dy_off = net->dy_per_sample;
    net->dy_per_sample += L->n_dy;
  }
  net->max_elems = MAX(net->max_elems, MAX(L->in, L->out));
}

/* This stage's side of a head tied across stages: the head's copy on a stage after the first; on the
 * first, the embedding's table where the tied head is on a later stage. */
static void find_tie(TpNet *net, const TpModel *m, int total)
{
  for (int i = 0; i < net->n && net->first > 0; i++) {
    const NetLayer *L = &net->layers[i];
    if (L->d.kind == TP_LAYER_LM_HEAD && L->d.blk.tied)
      net->tie_off = L->w_off, net->tie_n = L->n_w;
  }
  for (int i = net->last; i < total && net->first == 0 && net->layers[0].d.kind == TP_LAYER_EMBEDDING; i++) {
    const TpLayer *d = tp_model_layer(m, i);
    if (d->kind == TP_LAYER_LM_HEAD && d->blk.tied)
      net->tie_off = net->layers[0].w_off, net->tie_n = (size_t)d->weights;
  }
}

TpNet *tp_net_new(const TpModel *m, int first, int last, const TpBackend *be, GError **err)
{
  int total = tp_model_n_layers(m);
  if (!tp_net_check_model(m, err))
    return NULL;
  if (first < 0 || last > total || first >= last) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: layers [%d, %d) are not a stage of a %d-layer model", m->source,
                first, last, total);
    return NULL;
  }
  TpNet *net = g_new0(TpNet, 1);
  net->be = be;
  net->first = first, net->last = last, net->n = last - first;
  net->layers = g_new0(NetLayer, net->n);
  net->labels_per_sample = 1;
  for (int i = 0; i < net->n; i++) {
    NetLayer *L = &net->layers[i];
    const TpLayer *d = tp_model_layer(m, first + i);
    L->d = *d;
    L->index = first + i;
    L->in = (size_t)d->in_elems, L->out = (size_t)d->out_elems;
    L->win = (TpWindow){ d->cin, d->hin, d->win, d->cout, d->hout, d->wout, d->k, d->stride, d->pad };
    layout(net, L);
    place(net, L);
  }
  net->in_elems = net->layers[0].in;
  net->out_elems = net->layers[net->n - 1].out;
  find_tie(net, m, total);
  return net;
}

static void release_scratch(TpNet *net)
{
  for (int i = 0; i < 2; i++)
    if (net->buf[i])
      net->be->iface->free(net->be, net->buf[i]), net->buf[i] = NULL;
  if (net->work)
    net->be->iface->free(net->be, net->work), net->work = NULL;
  if (net->tok)
    net->be->iface->free(net->be, net->tok), net->tok = NULL;
  if (net->res)
    net->be->iface->free(net->be, net->res), net->res = NULL;
  net->cap = 0;
}

void tp_net_free(TpNet *net)
{
  if (!net)
    return;
  release_scratch(net);
  if (net->stats)
    net->be->iface->free(net->be, net->stats);
  for (int i = 0; i < net->n; i++)
    if (net->layers[i].pool)
      net->be->iface->free(net->be, net->layers[i].pool);
  g_free(net->layers);
  g_free(net);
}

const TpBackend *tp_net_backend(const TpNet *net) { return net->be; }
size_t tp_net_n_params(const TpNet *net) { return net->n_params; }

gboolean tp_net_tied_part(const TpNet *net, size_t *off, size_t *n)
{
  if (!net->tie_n)
    return FALSE;
  *off = net->tie_off, *n = net->tie_n;
  return TRUE;
}
size_t tp_net_param_bytes(const TpNet *net) { return net->n_params * sizeof(float); }
size_t tp_net_in_elems(const TpNet *net) { return net->in_elems; }
size_t tp_net_out_elems(const TpNet *net) { return net->out_elems; }
size_t tp_net_out_bytes_per_sample(const TpNet *net) { return net->out_elems * sizeof(float); }
gboolean tp_net_has_loss(const TpNet *net) { return net->has_loss; }
int tp_net_labels_per_sample(const TpNet *net) { return net->labels_per_sample; }
int tp_net_first(const TpNet *net) { return net->first; }
int tp_net_last(const TpNet *net) { return net->last; }

size_t tp_net_saved_bytes_per_sample(const TpNet *net)
{
  return net->save_per_sample * sizeof(float) + (net->has_loss ? sizeof(gint32) * net->labels_per_sample : 0);
}

size_t tp_net_dy_bytes_per_sample(const TpNet *net) { return net->dy_per_sample * sizeof(float); }

gboolean tp_net_init_weights(TpNet *net, guint64 seed, float *weights, GError **err)
{
  g_autofree float *host = g_try_new0(float, net->n_params ? net->n_params : 1);
  if (!host) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot allocate %zu floats for the initial weights of layers %d-%d",
                net->n_params, net->first + 1, net->last);
    return FALSE;
  }
  for (int i = 0; i < net->n; i++) {
    const NetLayer *L = &net->layers[i];
    if (!L->n_w)
      continue;
    if (tp_net_is_token_kind(L->d.kind)) {
      tp_net_token_init(L, seed, host + L->w_off);
      continue;
    }
    if (L->d.kind == TP_LAYER_BOTTLENECK) {
      tp_net_res_init(L, seed, host + L->w_off);
      continue;
    }
    if (L->d.kind == TP_LAYER_BATCHNORM) { /* γ 1, β 0 */
      for (size_t j = 0; j < L->n_w; j++)
        host[L->w_off + j] = 1.0f;
      continue;
    }
    int fan_in = L->d.kind == TP_LAYER_CONV ? L->d.cin * L->d.k * L->d.k : L->d.cin;
    float bound = sqrtf(6.0f / (float)fan_in);
    for (size_t j = 0; j < L->n_w; j++)
      host[L->w_off + j] = (2.0f * tp_uniform(seed, (guint64)L->index, j) - 1.0f) * bound;
  }
  return net->be->iface->upload(net->be, weights, host, net->n_params, err);
}

/* avgpool_to (PyTorch's adaptive average pooling) as a matrix product: output cell (i, j) averages
 * input rows ⌊i·hin/hout⌋ … ⌈(i+1)·hin/hout⌉−1 and the same columns, so one channel's output plane
 * is its input plane (a row of hin·win values) times a fixed [hin·win][hout·wout] matrix, and its
 * input gradient the output gradient times the transpose: two SGEMMs on any backend. */
static gboolean make_pool_matrix(const TpBackend *be, NetLayer *L, GError **err)
{
  const TpWindow *s = &L->win;
  size_t in = (size_t)s->hin * s->win, out = (size_t)s->hout * s->wout;
  g_autofree float *m = g_try_new0(float, in * out);
  if (!m) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot allocate the %zu × %zu matrix of avgpool_to", in, out);
    return FALSE;
  }
  for (int i = 0; i < s->hout; i++)
    for (int j = 0; j < s->wout; j++) {
      int r0 = i * s->hin / s->hout, r1 = ((i + 1) * s->hin + s->hout - 1) / s->hout;
      int c0 = j * s->win / s->wout, c1 = ((j + 1) * s->win + s->wout - 1) / s->wout;
      float inv = 1.0f / (float)((r1 - r0) * (c1 - c0));
      for (int r = r0; r < r1; r++)
        for (int c = c0; c < c1; c++)
          m[((size_t)r * s->win + c) * out + (size_t)i * s->wout + j] = inv;
    }
  return (L->pool = be->iface->alloc(be, in * out, err)) != NULL && be->iface->upload(be, L->pool, m, in * out, err);
}

static gboolean avgpool_to_forward(const TpBackend *be, const NetLayer *L, int batch, const float *x, float *y,
                                   GError **err)
{
  int in = L->win.hin * L->win.win, out = L->win.hout * L->win.wout;
  return be->iface->sgemm(be, FALSE, FALSE, batch * L->win.cin, out, in, 1.0f, x, in, L->pool, out, 0.0f, y, out, err);
}

static gboolean avgpool_to_backward(const TpBackend *be, const NetLayer *L, int batch, const float *dy, float *dx,
                                    GError **err)
{
  int in = L->win.hin * L->win.win, out = L->win.hout * L->win.wout;
  return be->iface->sgemm(be, FALSE, TRUE, batch * L->win.cin, in, out, 1.0f, dy, out, L->pool, out, 0.0f, dx, in, err);
}

/* The running statistics, made on first use: means 0, variances 1 (PyTorch's). */
static gboolean ensure_stats(TpNet *net, GError **err)
{
  if (net->stats || !net->n_stats)
    return TRUE;
  g_autofree float *host = g_try_new0(float, net->n_stats);
  if (!host) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot allocate %zu floats of running statistics", net->n_stats);
    return FALSE;
  }
  for (int i = 0; i < net->n; i++) {
    const NetLayer *L = &net->layers[i];
    for (size_t rel = 0, c; rel < L->n_st; rel += 2 * c) {
      c = tp_net_norm_channels(L, rel);
      for (size_t j = 0; j < c; j++)
        host[L->st_off + rel + c + j] = 1.0f;
    }
  }
  return (net->stats = net->be->iface->alloc(net->be, net->n_stats, err)) != NULL &&
         net->be->iface->upload(net->be, net->stats, host, net->n_stats, err);
}

size_t tp_net_n_stats(const TpNet *net) { return net->n_stats; }

gboolean tp_net_get_stats(TpNet *net, float *host, GError **err)
{
  return !net->n_stats || (ensure_stats(net, err) && net->be->iface->download(net->be, host, net->stats, net->n_stats, err));
}

/* Whether host holds running statistics: every mean finite, every variance finite and ≥ 0. */
static gboolean stats_valid(const TpNet *net, const float *host, GError **err)
{
  for (int i = 0; i < net->n; i++) {
    const NetLayer *L = &net->layers[i];
    for (size_t rel = 0, c; rel < L->n_st; rel += 2 * c) {
      c = tp_net_norm_channels(L, rel);
      for (size_t j = 0; j < 2 * c; j++) {
        float v = host[L->st_off + rel + j];
        if (!isfinite(v) || (j >= c && v < 0)) {
          g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "layer %d (%s): running %s of channel %zu is %g, not %s",
                      net->first + i + 1, tp_layer_names[L->d.kind], j < c ? "mean" : "variance", j % c + 1, v,
                      j < c ? "a finite number" : "finite and at least 0");
          return FALSE;
        }
      }
    }
  }
  return TRUE;
}

gboolean tp_net_set_stats(TpNet *net, const float *host, GError **err)
{
  return !net->n_stats || (stats_valid(net, host, err) && ensure_stats(net, err) &&
                           net->be->iface->upload(net->be, net->stats, host, net->n_stats, err));
}

gboolean tp_net_set_group(TpNet *net, int samples, GError **err)
{
  g_return_val_if_fail(samples >= 0, FALSE);
  for (int i = 0; i < net->n && samples > 0; i++) {
    const TpLayer *d = &net->layers[i].d;
    long long plane = tp_layer_norm_plane(d);
    if (plane && (long long)samples * plane < 2) { /* one sample on a 1x1 plane */
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "layer %d (%s, line %d of the model) would normalise one value per "
                  "channel: a micro-batch of %d sample on a 1x1 plane has no variance; use at least 2 samples "
                  "per micro-batch (--batch / -n)", net->first + i + 1, tp_layer_names[d->kind], d->line, samples);
      return FALSE;
    }
  }
  net->group = samples;
  return TRUE;
}

/* Scratch buffers and workspace for `batch` samples (and the avgpool_to matrices and the running
 * statistics, once). */
/* The convolutions' and bottlenecks' workspace for batch samples (floats). */
static size_t workspace(const TpNet *net, int batch)
{
  size_t work = 0;
  for (int i = 0; i < net->n; i++)
    if (net->layers[i].d.kind == TP_LAYER_CONV)
      work = MAX(work, net->be->iface->conv_workspace(net->be, &net->layers[i].win, batch));
  return MAX(work, tp_net_res_workspace(net, batch));
}

size_t tp_net_scratch_floats(const TpNet *net, int batch)
{
  return 2 * net->max_elems * (size_t)batch + workspace(net, batch) + tp_net_token_scratch(net, batch) +
         tp_net_res_scratch(net, batch);
}

static gboolean reserve(TpNet *net, int batch, GError **err)
{
  if (!ensure_stats(net, err))
    return FALSE;
  for (int i = 0; i < net->n; i++)
    if (net->layers[i].d.kind == TP_LAYER_AVGPOOL_TO && !net->layers[i].pool &&
        !make_pool_matrix(net->be, &net->layers[i], err))
      return FALSE;
  if (batch <= net->cap)
    return TRUE;
  release_scratch(net);
  size_t work = workspace(net, batch);
  for (int i = 0; i < 2; i++)
    if (!(net->buf[i] = net->be->iface->alloc(net->be, net->max_elems * batch, err)))
      return FALSE;
  if (work && !(net->work = net->be->iface->alloc(net->be, work, err)))
    return FALSE;
  size_t tok = tp_net_token_scratch(net, batch), res = tp_net_res_scratch(net, batch);
  if (tok && !(net->tok = net->be->iface->alloc(net->be, tok, err)))
    return FALSE;
  if (res && !(net->res = net->be->iface->alloc(net->be, res, err)))
    return FALSE;
  net->cap = batch;
  return TRUE;
}

static TpSaved *saved_new(TpNet *net, int max_batch, gboolean split, GError **err)
{
  g_return_val_if_fail(max_batch >= 1, NULL);
  TpSaved *s = g_new0(TpSaved, 1);
  s->net = net, s->max_batch = s->stride = max_batch;
  if (!(s->data = net->be->iface->alloc(net->be, net->save_per_sample * max_batch, err)) ||
      (split && net->dy_per_sample && !(s->dy = net->be->iface->alloc(net->be, net->dy_per_sample * max_batch, err)))) {
    tp_saved_free(s);
    return NULL;
  }
  if (net->has_loss && !(s->labels = g_try_new0(gint32, (size_t)max_batch * net->labels_per_sample))) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot allocate the labels of %d samples", max_batch);
    tp_saved_free(s);
    return NULL;
  }
  return s;
}

TpSaved *tp_saved_new(TpNet *net, int max_batch, GError **err) { return saved_new(net, max_batch, FALSE, err); }
TpSaved *tp_saved_new_split(TpNet *net, int max_batch, GError **err) { return saved_new(net, max_batch, TRUE, err); }

void tp_saved_free(TpSaved *s)
{
  if (!s)
    return;
  if (!s->owner) {
    if (s->data)
      s->net->be->iface->free(s->net->be, s->data);
    if (s->dy)
      s->net->be->iface->free(s->net->be, s->dy);
    g_free(s->labels);
  }
  g_free(s->seeds);
  g_free(s);
}

TpSaved *tp_saved_slice(TpSaved *whole, int off, int n)
{
  g_return_val_if_fail(!whole->owner && off >= 0 && n >= 1 && off + n <= whole->max_batch, NULL);
  TpSaved *s = g_new0(TpSaved, 1);
  *s = (TpSaved){ .net = whole->net, .max_batch = n, .batch = n, .data = whole->data, .dy = whole->dy,
                  .labels = whole->labels ? whole->labels + (size_t)off * whole->net->labels_per_sample : NULL, .stride = whole->stride, .off = off,
                  .owner = whole };
  tp_saved_set_seeds(s, whole->seeds, whole->n_seeds);
  return s;
}

gboolean tp_saved_is_slice(const TpSaved *s) { return s->owner != NULL; }

void tp_saved_set_batch(TpSaved *s, int batch)
{
  g_return_if_fail(batch >= 1 && batch <= s->max_batch);
  s->batch = batch;
}

void tp_saved_set_replay(TpSaved *s, gboolean replay) { s->replay = replay; }

void tp_saved_set_seed(TpSaved *s, guint64 seed) { tp_saved_set_seeds(s, &seed, 1); }

void tp_saved_set_seeds(TpSaved *s, const guint64 *seeds, int n)
{
  g_return_if_fail(n >= 0);
  if (n > s->n_seeds)
    s->seeds = g_renew(guint64, s->seeds, n);
  if (n)
    memcpy(s->seeds, seeds, sizeof(guint64) * n);
  s->n_seeds = n;
}
int tp_saved_batch(const TpSaved *s) { return s->batch; }

#define region tp_net_region
#define dy_region tp_net_dy_region

static float *other(TpNet *net, const float *p) { return p == net->buf[0] ? net->buf[1] : net->buf[0]; }

/* Where layer i writes its output: the saved input region of the next computing layer when it
 * keeps its input, the stage's output after the last computing layer, else a scratch buffer. */
static float *destination(TpNet *net, int i, const TpSaved *saved, float *out, const float *cur)
{
  const NetLayer *L = &net->layers[i];
  if (L->d.kind == TP_LAYER_SOFTMAX_CE || L->d.kind == TP_LAYER_TOKEN_CE)
    return saved ? region(saved, L) : other(net, cur);
  int j = i + 1;
  while (j < net->n && net->layers[j].d.kind == TP_LAYER_FLATTEN)
    j++;
  if (j == net->n)
    return out;
  if (saved && net->layers[j].saves_input)
    return region(saved, &net->layers[j]);
  return other(net, cur);
}

/* Dropout layer L over `batch` samples: each block of rows draws its mask from its own seed, the
 * element counters starting at 0 in each block (as a forward of that block alone would draw it);
 * inference (saved NULL): y = x. */
static gboolean dropout_forward(const TpBackend *be, const NetLayer *L, int batch, const TpSaved *saved,
                                const float *x, float *y, GError **err)
{
  int blocks = saved && saved->n_seeds > 1 ? saved->n_seeds : 1;
  size_t rows = (size_t)(batch / blocks), n = L->in * rows;
  for (int k = 0; k < blocks; k++) {
    guint64 seed = saved && saved->n_seeds ? saved->seeds[k] : 0;
    if (!be->iface->dropout_forward(be, n, TP_DROPOUT_P, tp_mix64(saved ? seed ^ (guint64)L->index : 0), x + k * n,
                                    y + k * n, saved ? region(saved, L) + k * n : NULL, err))
      return FALSE;
  }
  return TRUE;
}

gboolean tp_net_forward(TpNet *net, const float *weights, const float *in, int batch, float *out, TpSaved *saved,
                        const gint32 *labels, TpLossStats *stats, GError **err)
{
  const TpBackend *be = net->be;
  g_return_val_if_fail(batch >= 1 && (!saved || (saved->net == net && batch <= saved->max_batch)), FALSE);
  g_return_val_if_fail(out || net->has_loss, FALSE);
  g_return_val_if_fail(!net->has_loss || !saved || labels, FALSE);
  g_return_val_if_fail(!saved || saved->n_seeds <= 1 || batch % saved->n_seeds == 0, FALSE);
  if (!reserve(net, batch, err))
    return FALSE;
  if (saved) {
    saved->batch = batch;
    if (net->has_loss)
      memcpy(saved->labels, labels, sizeof(gint32) * batch * net->labels_per_sample);
  }
  const float *cur = in;
  for (int i = 0; i < net->n; i++) {
    const NetLayer *L = &net->layers[i];
    const float *w = L->has_w ? weights + L->w_at : NULL, *b = L->n_b ? w + L->n_w : NULL;
    if (saved && L->saves_input && cur != region(saved, L)) {
      if (!be->iface->copy(be, region(saved, L), cur, L->in * batch, err))
        return FALSE;
      cur = region(saved, L);
    }
    if (L->d.kind == TP_LAYER_FLATTEN) {
      if (i == net->n - 1 && !be->iface->copy(be, out, cur, L->in * batch, err))
        return FALSE;
      continue;
    }
    float *dst = destination(net, i, saved, out, cur);
    gboolean ok = TRUE;
    switch (L->d.kind) {
    case TP_LAYER_LINEAR: ok = be->iface->linear_forward(be, batch, (int)L->in, (int)L->out, cur, w, b, dst, err); break;
    case TP_LAYER_CONV: ok = be->iface->conv_forward(be, &L->win, batch, cur, w, b, dst, net->work, err); break;
    case TP_LAYER_RELU: ok = be->iface->relu_forward(be, L->in * batch, cur, dst, err); break;
    case TP_LAYER_DROPOUT: ok = dropout_forward(be, L, batch, saved, cur, dst, err); break;
    case TP_LAYER_MAXPOOL:
      ok = be->iface->maxpool_forward(be, &L->win, batch, cur, dst, saved ? (gint32 *)region(saved, L) : NULL, err);
      break;
    case TP_LAYER_AVGPOOL: ok = be->iface->avgpool_forward(be, &L->win, batch, cur, dst, err); break;
    case TP_LAYER_AVGPOOL_TO: ok = avgpool_to_forward(be, L, batch, cur, dst, err); break;
    case TP_LAYER_BATCHNORM:
      ok = tp_net_bn_forward(net, saved, batch, (int)L->d.cin, (int)tp_layer_norm_plane(&L->d), L->st_off, cur, w, dst, err);
      break;
    case TP_LAYER_BOTTLENECK: ok = tp_net_res_forward(net, L, batch, saved, w, cur, dst, err); break;
    case TP_LAYER_SOFTMAX_CE: {
      double loss = 0.0;
      int correct = 0;
      ok = be->iface->softmax_ce_forward(be, batch, (int)L->in, cur, labels, dst, &loss, &correct, err);
      if (ok && stats)
        stats->loss_sum = loss, stats->correct = correct;
      if (ok && out)
        ok = be->iface->copy(be, out, dst, L->in * batch, err);
      break;
    }
    default: ok = tp_net_token_forward(net, L, batch, saved, w, cur, dst, labels, stats, err); break;
    }
    if (!ok)
      return FALSE;
    cur = dst;
  }
  return TRUE;
}

/* The backward through the layers; split: the input gradient only, each layer with parameters'
 * output gradient kept in saved for tp_net_backward_weight (grad is not touched). */
static gboolean backward(TpNet *net, const float *weights, TpSaved *saved, const float *dout, float *din, float *grad,
                         int minibatch_samples, gboolean split, GError **err)
{
  const TpBackend *be = net->be;
  int batch = saved->batch;
  g_return_val_if_fail(saved->net == net && batch >= 1, FALSE);
  g_return_val_if_fail(!split || saved->dy || !net->dy_per_sample, FALSE);
  g_return_val_if_fail(net->has_loss ? minibatch_samples >= 1 : dout != NULL, FALSE);
  if (!reserve(net, batch, err))
    return FALSE;
  /* without din, no layer up to the first one with parameters needs its input gradient */
  int stop = 0;
  while (!din && stop < net->n && !net->layers[stop].has_w)
    stop++;
  const float *g = dout;
  for (int i = net->n - 1; i >= stop; i--) {
    const NetLayer *L = &net->layers[i];
    const float *w = L->has_w ? weights + L->w_at : NULL;
    float *gw = L->has_w && !split ? grad + L->w_at : NULL, *gb = L->n_b && !split ? gw + L->n_w : NULL;
    float *dst = i == 0 ? din : i == stop && !din ? NULL : other(net, g);
    gboolean ok = TRUE;
    if (tp_net_is_token_kind(L->d.kind) || L->d.kind == TP_LAYER_BOTTLENECK) { /* they keep their own output
                                                                                 gradients in a split */
      if (!(L->d.kind == TP_LAYER_BOTTLENECK ? tp_net_res_backward(net, L, saved, w, g, dst, gw, err)
                                              : tp_net_token_backward(net, L, saved, w, g, dst, gw, minibatch_samples, err)))
        return FALSE;
      g = dst;
      continue;
    }
    if (split && L->has_w) { /* W reads it later; without an input gradient to compute, nothing more */
      if (!be->iface->copy(be, dy_region(saved, L), g, L->out * batch, err))
        return FALSE;
      if (!dst)
        continue;
    }
    switch (L->d.kind) {
    case TP_LAYER_FLATTEN:
      if (i == 0 && !be->iface->copy(be, din, g, L->in * batch, err))
        return FALSE;
      continue;
    case TP_LAYER_SOFTMAX_CE:
      ok = be->iface->softmax_ce_backward(be, batch, (int)L->in, region(saved, L), saved->labels,
                                   1.0f / (float)minibatch_samples, dst, err);
      break;
    case TP_LAYER_LINEAR:
      ok = be->iface->linear_backward(be, batch, (int)L->in, (int)L->out, region(saved, L), w, g, dst, gw, gb, err);
      break;
    case TP_LAYER_CONV:
      ok = be->iface->conv_backward(be, &L->win, batch, region(saved, L), w, g, dst, gw, gb, net->work, err);
      break;
    case TP_LAYER_RELU: ok = be->iface->relu_backward(be, L->in * batch, region(saved, L), g, dst, err); break;
    case TP_LAYER_DROPOUT: ok = be->iface->dropout_backward(be, L->in * batch, region(saved, L), g, dst, err); break;
    case TP_LAYER_MAXPOOL:
      ok = be->iface->maxpool_backward(be, &L->win, batch, g, (const gint32 *)region(saved, L), dst, err);
      break;
    case TP_LAYER_AVGPOOL: ok = be->iface->avgpool_backward(be, &L->win, batch, g, dst, err); break;
    case TP_LAYER_AVGPOOL_TO: ok = avgpool_to_backward(be, L, batch, g, dst, err); break;
    case TP_LAYER_BATCHNORM:
      ok = tp_net_bn_backward(net, batch, (int)L->d.cin, (int)tp_layer_norm_plane(&L->d), region(saved, L), w, g, dst, gw, err);
      break;
    default: g_assert_not_reached();
    }
    if (!ok)
      return FALSE;
    g = dst;
  }
  return TRUE;
}

gboolean tp_net_backward(TpNet *net, const float *weights, TpSaved *saved, const float *dout, float *din, float *grad,
                         int minibatch_samples, GError **err)
{
  return backward(net, weights, saved, dout, din, grad, minibatch_samples, FALSE, err);
}

gboolean tp_net_backward_input(TpNet *net, const float *weights, TpSaved *saved, const float *dout, float *din,
                               int minibatch_samples, GError **err)
{
  return backward(net, weights, saved, dout, din, NULL, minibatch_samples, TRUE, err);
}

gboolean tp_net_backward_weight(TpNet *net, const float *weights, TpSaved *saved, float *grad, GError **err)
{
  const TpBackend *be = net->be;
  int batch = saved->batch;
  g_return_val_if_fail(saved->net == net && batch >= 1 && (saved->dy || !net->dy_per_sample), FALSE);
  if (!reserve(net, batch, err))
    return FALSE;
  for (int i = net->n - 1; i >= 0; i--) { /* the fused backward's order */
    const NetLayer *L = &net->layers[i];
    if (!L->has_w)
      continue;
    const float *w = weights + L->w_at;
    float *gw = grad + L->w_at, *gb = L->n_b ? gw + L->n_w : NULL;
    if (tp_net_is_token_kind(L->d.kind)) {
      if (!tp_net_token_weight(net, L, saved, w, gw, err))
        return FALSE;
      continue;
    }
    gboolean ok = L->d.kind == TP_LAYER_BOTTLENECK ? tp_net_res_weight(net, L, saved, w, gw, err)
                  : L->d.kind == TP_LAYER_BATCHNORM
                    ? tp_net_bn_backward(net, batch, (int)L->d.cin, (int)tp_layer_norm_plane(&L->d), region(saved, L), w,
                                         dy_region(saved, L), NULL, gw, err)
                  : L->d.kind == TP_LAYER_LINEAR
                    ? be->iface->linear_backward(be, batch, (int)L->in, (int)L->out, region(saved, L), w,
                                                 dy_region(saved, L), NULL, gw, gb, err)
                    : be->iface->conv_backward(be, &L->win, batch, region(saved, L), w, dy_region(saved, L), NULL, gw,
                                               gb, net->work, err);
    if (!ok)
      return FALSE;
  }
  return TRUE;
}
