/* tp_net_priv.h — what tp_net.c, tp_net_token.c (the transformer layers) and tp_net_resnet.c (the
 * bottleneck block, batch normalisation) share: a stage's layer as the executor lays it out, the
 * stage, and the saved state of a forward. */
#ifndef TP_NET_PRIV_H
#define TP_NET_PRIV_H

#include "tp_net.h"

/* A transformer block's saved pieces, per sample, in this order (tp_net_token.c); with dropout also
 * the dropped probabilities and the masks' bytes (empty without) */
enum { BLK_X, BLK_H1, BLK_QKV, BLK_P, BLK_O, BLK_Y1, BLK_H2, BLK_A1, BLK_M, BLK_PD, BLK_MASK, BLK_N_PIECES };
/* and the output gradients a split backward keeps from its I to its W (with dropout, those of the
 * two projections before their dropouts: the MLP's and the attention's) */
enum { BLK_DOUT, BLK_DA1, BLK_DH2, BLK_DY1, BLK_DQKV, BLK_DH1, BLK_DZ2, BLK_DZ1, BLK_N_DYS };
/* A bottleneck's saved pieces (tp_net_resnet.c): its input, each convolution's output A and each
 * inner ReLU's output R, the shortcut convolution's output (a projection's), the block's output */
enum { RES_X, RES_A1, RES_R1, RES_A2, RES_R2, RES_A3, RES_AS, RES_Y, RES_N_PIECES };
/* and its output gradients kept from I to W: at the sum (after the final ReLU), at each
 * convolution's output (A) and each inner batchnorm's output (B) */
enum { RES_DZ, RES_DA3, RES_DB2, RES_DA2, RES_DB1, RES_DA1, RES_DAS, RES_N_DYS };
#define NET_PIECES 11 /* the most of BLK_N_PIECES, RES_N_PIECES */
#define NET_DYS 8 /* the most of BLK_N_DYS, RES_N_DYS */

G_STATIC_ASSERT(NET_PIECES >= (int)BLK_N_PIECES && NET_PIECES >= (int)RES_N_PIECES);
G_STATIC_ASSERT(NET_DYS >= (int)BLK_N_DYS && NET_DYS >= (int)RES_N_DYS);

typedef struct {
  TpLayer d;              /* the description */
  int index;              /* in the model */
  TpWindow win;           /* conv and pooling geometry */
  size_t w_off, n_w, n_b; /* weights at w_off, then n_b bias values */
  gboolean has_w;         /* it has weights: its own, or a tied head's on the embedding's stage */
  size_t w_at;            /* where its weights are read and its gradient accumulated: w_off, or for
                             a tied head on the embedding's stage the embedding's table (its own
                             n_w is then 0) */
  size_t save_off, n_save; /* per-sample floats kept for the backward (offset is per sample) */
  size_t dy_off;          /* a layer with parameters: its output gradient's offset in a split
                             backward's TpSaved (per sample, L->out floats) */
  gboolean saves_input;
  size_t in, out;         /* elements per sample */
  size_t lead;            /* floats per sample of the region's first piece (the saved input) */
  size_t n_dy;            /* a layer with parameters: the output-gradient floats per sample a split backward keeps */
  size_t piece[NET_PIECES], dys[NET_DYS]; /* a block, a bottleneck: each piece's floats per sample */
  size_t st_off, n_st;    /* batchnorm's running statistics (means, then variances, per normalisation)
                             at st_off of the stage's statistics */
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
  float *res;     /* the bottlenecks' scratch (tp_net_res_scratch floats) */
  float *stats;   /* the batch normalisations' running statistics (n_stats floats; stage state, not
                     weights: no version, no gradient) */
  size_t n_stats;
  int group;      /* samples whose statistics a training batchnorm takes together (the micro-batch; 0:
                     the whole batch) */
  int labels_per_sample; /* 1, or a token model's positions */
  size_t tie_off, tie_n;  /* its side of a head tied across stages (tp_net_tied_part; tie_n 0: none) */
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
  gboolean replay; /* the next forward recomputes one already run: running statistics stay */
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

/* ---- batch normalisation and the bottleneck (tp_net_resnet.c) ---- */

#define TP_BN_EPS 1e-5f
#define TP_BN_MOMENTUM 0.1f

/* Batchnorm over batch samples of c channels of hw values, the statistics taken per group of the
 * net's samples: training (saved not NULL) from the batch, the running statistics at st (2c floats of
 * net->stats) updated unless saved replays; inference from them. */
gboolean tp_net_bn_forward(TpNet *net, const TpSaved *saved, int batch, int c, int hw, size_t st, const float *x,
                           const float *gamma, float *y, GError **err);
/* Its backward: dx (NULL: not wanted); dgamma NULL or dgamma and dbeta (at dgamma + c) accumulated. */
gboolean tp_net_bn_backward(TpNet *net, int batch, int c, int hw, const float *x, const float *gamma, const float *dy,
                            float *dx, float *dgamma, GError **err);
/* Channels of layer L's normalisation whose running statistics start at rel of L's (n_st floats:
 * each normalisation's c means, then its c variances, normalisation after normalisation). */
size_t tp_net_norm_channels(const NetLayer *L, size_t rel);
/* A bottleneck's parameters, statistics, saved pieces and kept gradients, from its description. */
void tp_net_res_layout(NetLayer *L);
/* Its initial weights into host: Kaiming-uniform convolutions, batchnorm weights 1, biases 0. */
void tp_net_res_init(const NetLayer *L, guint64 seed, float *host);
/* Convolution workspace and scratch floats the bottlenecks of net need for `batch` samples. */
size_t tp_net_res_workspace(const TpNet *net, int batch);
size_t tp_net_res_scratch(const TpNet *net, int batch);
gboolean tp_net_res_forward(TpNet *net, const NetLayer *L, int batch, TpSaved *saved, const float *w, const float *x,
                            float *y, GError **err);
/* dy → dx (NULL: not wanted); grad NULL: the input gradient only (a split's I), the output
 * gradients kept in saved's dy region for tp_net_res_weight. */
gboolean tp_net_res_backward(TpNet *net, const NetLayer *L, TpSaved *saved, const float *w, const float *dy, float *dx,
                             float *grad, GError **err);
gboolean tp_net_res_weight(TpNet *net, const NetLayer *L, TpSaved *saved, const float *w, float *grad, GError **err);

/* ---- the transformer layers (tp_net_token.c) ---- */

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
