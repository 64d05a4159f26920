/* tp_net_priv.h — what tp_net.c and tp_net_token.c (the transformer layers) share: a stage's layer
 * as the executor lays it out, the stage, and the saved state of a forward. */
#ifndef TP_NET_PRIV_H
#define TP_NET_PRIV_H

#include "tp_net.h"

/* A transformer block's saved pieces, per sample, in this order (tp_net_token.c) */
enum { BLK_X, BLK_H1, BLK_QKV, BLK_P, BLK_O, BLK_Y1, BLK_H2, BLK_A1, BLK_M, BLK_N_PIECES };
/* and the output gradients a split backward keeps from its I to its W */
enum { BLK_DOUT, BLK_DA1, BLK_DH2, BLK_DY1, BLK_DQKV, BLK_DH1, BLK_N_DYS };

typedef struct {
  TpLayer d;              /* the description */
  int index;              /* in the model */
  TpWindow win;           /* conv and pooling geometry */
  size_t w_off, n_w, n_b; /* weights at w_off, then n_b bias values */
  size_t save_off, n_save; /* per-sample floats kept for the backward (offset is per sample) */
  size_t dy_off;          /* a layer with parameters: its output gradient's offset in a split
                             backward's TpSaved (per sample, L->out floats) */
  gboolean saves_input;
  size_t in, out;         /* elements per sample */
  size_t lead;            /* floats per sample of the region's first piece (the saved input) */
  size_t n_dy;            /* a layer with parameters: the output-gradient floats per sample a split backward keeps */
  size_t piece[BLK_N_PIECES], dys[BLK_N_DYS]; /* a block: each piece's floats per sample */
  float *pool;            /* avgpool_to: its [hin·win][hout·wout] averaging matrix, in the backend's memory */
} NetLayer;

struct TpNet {
  const TpBackend *be;
  int first, last;
  NetLayer *layers;
  int n;
  size_t n_params, save_per_sample, in_elems, out_elems, max_elems;
  size_t dy_per_sample; /* output gradients of the layers with parameters, kept from I to W */
  gboolean has_loss;
  int cap;        /* samples the scratch buffers hold */
  float *buf[2];  /* activations and gradients between layers */
  float *work;    /* convolution workspace */
  float *tok;     /* the transformer layers' scratch (tp_net_token_scratch floats) */
  int labels_per_sample; /* 1, or a token model's positions */
};

struct TpSaved {
  TpNet *net;
  int max_batch, batch;
  float *data;    /* layer regions, each n_save × stride floats */
  float *dy;      /* split backward (tp_saved_new_split): each layer with parameters' output
                     gradient, L->out × stride floats at L->dy_off × stride; NULL otherwise */
  gint32 *labels; /* host copy, last stage only */
  guint64 *seeds; /* the dropout seeds of the next forward, one per block of its rows (its own copy) */
  int n_seeds;    /* 0: one block, seed 0 */
  int stride;     /* samples per layer region: the owner's max_batch */
  int off;        /* a slice's first sample in its owner's regions (0 for an owner) */
  TpSaved *owner; /* a slice's owner, NULL for an owner */
};


/* The layer's region of saved (its first piece at the saved input). */
static inline float *tp_net_region(const TpSaved *s, const NetLayer *L)
{
  return s->data + L->save_off * s->stride + (size_t)s->off * L->lead;
}

/* A split backward's output gradients of layer L (one with parameters). */
static inline float *tp_net_dy_region(const TpSaved *s, const NetLayer *L)
{
  return s->dy + L->dy_off * s->stride + (size_t)s->off * L->n_dy;
}

static inline gboolean tp_net_is_token_kind(TpLayerKind k)
{
  return k >= TP_LAYER_EMBEDDING && k <= TP_LAYER_TOKEN_CE;
}

/* ---- the transformer layers (tp_net_token.c) ---- */

/* Why the executor cannot run transformer layer d of model m (a TP_ERROR_INPUT line), or TRUE. */
gboolean tp_net_token_check(const TpModel *m, const TpLayer *d, GError **err);
/* L's parameters, saved floats, saved input, kept output gradients, from its description. */
void tp_net_token_layout(NetLayer *L);
/* Initial weights of L into host (its n_w + n_b values at host). */
void tp_net_token_init(const NetLayer *L, guint64 seed, float *host);
/* Scratch floats the transformer layers of net need for `batch` samples. */
size_t tp_net_token_scratch(const TpNet *net, int batch);
gboolean tp_net_token_forward(TpNet *net, const NetLayer *L, int batch, TpSaved *saved, const float *w, const float *x,
                              float *y, const gint32 *labels, TpLossStats *stats, GError **err);
/* dy → dx (NULL: not wanted); grad NULL: the input gradient only (a split's I), L's output
 * gradients kept in saved's dy region for tp_net_token_weight. */
gboolean tp_net_token_backward(TpNet *net, const NetLayer *L, TpSaved *saved, const float *w, const float *dy,
                               float *dx, float *grad, int minibatch_samples, GError **err);
gboolean tp_net_token_weight(TpNet *net, const NetLayer *L, TpSaved *saved, const float *w, float *grad, GError **err);

#endif
