/* tp_net.h — one pipeline stage's network: the layers [first, last) of a model description, run
 * on a compute backend.
 *
 * All parameters of a stage are ONE flat float array (layer after layer, each weight then bias), so
 * a weight version is one contiguous buffer: the weight store copies, blends, checkpoints and
 * hashes it whole. Gradients and optimizer state have the same layout and size.
 *
 * The forward keeps what the backward needs in a TpSaved (each layer's input, dropout masks,
 * max-pool argmax, softmax probabilities and labels). The backward may be given a different weight
 * version than the forward: it combines the saved inputs with the weights it is given
 * (linear: dX = dY·W_b, dW += dYᵀ·X_saved), which is what the stash-free weight policies need.
 *
 * A net owns scratch buffers of its backend: calls on one net must not overlap (one stage = one
 * thread). Many TpSaved may be live at once (one per micro-batch in flight). */
#ifndef TP_NET_H
#define TP_NET_H

#include "tp_backend.h"
#include "tp_model.h"

#include <glib.h>

typedef struct TpNet TpNet;
typedef struct TpSaved TpSaved;

/* Dropout layers drop with this probability (the model files give none). */
#define TP_DROPOUT_P 0.5f
/* A transformer block with dropout=1 drops its attention probabilities and its two projections'
 * outputs (before each residual sum) with this one: GPT-2's attn_pdrop and resid_pdrop. */
#define TP_BLOCK_DROPOUT_P 0.1f

/* Whether the executor can run every layer of m: a layer it does not support or a softmax_ce that
 * is not the last layer is a one-line TP_ERROR_INPUT naming the model file and line. */
gboolean tp_net_check_model(const TpModel *m, GError **err);

/* tp_net_check_model, and m ends with its loss (softmax_ce; token_ce for a language model), as
 * training and profiling need: else one line naming the last layer. */
gboolean tp_net_check_trainable(const TpModel *m, GError **err);

/* The stage of layers [first, last) of m on backend be; the whole model must pass
 * tp_net_check_model, and an empty or out-of-range layer range is a TP_ERROR_INPUT. */
TpNet *tp_net_new(const TpModel *m, int first, int last, const TpBackend *be, GError **err);
void tp_net_free(TpNet *net);
/* The scratch floats net holds once it has run batch samples (its buffers between layers and its
 * layers' workspaces; kept for later calls of as many). */
size_t tp_net_scratch_floats(const TpNet *net, int batch);

const TpBackend *tp_net_backend(const TpNet *net);
size_t tp_net_n_params(const TpNet *net);             /* floats in a weight version (= grads, momentum) */
/* This stage's side of a head tied to the embedding across stages (tp_tie_stage, common/tp_tie.h): the
 * embedding's table on the first stage, the head's copy of it on the head's stage, at *off in the
 * stage's parameters, *n floats.  FALSE (and nothing set) on any other stage. */
gboolean tp_net_tied_part(const TpNet *net, size_t *off, size_t *n);
size_t tp_net_param_bytes(const TpNet *net);
size_t tp_net_in_elems(const TpNet *net);             /* per sample */
size_t tp_net_out_elems(const TpNet *net);            /* per sample (class probabilities on the last stage) */
size_t tp_net_out_bytes_per_sample(const TpNet *net);
size_t tp_net_saved_bytes_per_sample(const TpNet *net);
/* What a split backward keeps besides (tp_saved_new_split): the output gradient of each layer with
 * parameters, from its I to its W. */
size_t tp_net_dy_bytes_per_sample(const TpNet *net);
gboolean tp_net_has_loss(const TpNet *net);           /* the stage ends with softmax_ce or token_ce */
/* Labels a sample carries: 1, or a token model's positions (each the next token); the forward's
 * labels and the loss statistics' correct count are per label. */
int tp_net_labels_per_sample(const TpNet *net);
int tp_net_first(const TpNet *net);
int tp_net_last(const TpNet *net);

/* The initial weights, deterministic: weights of the model's layer L, element j, are
 * Kaiming-uniform U(−√(6/fan_in), √(6/fan_in)) drawn from tp_uniform(seed, L, j) (each convolution
 * of a bottleneck by its own fan-in; transformer layers as tp_net_token.c says); biases are 0,
 * batchnorm weights 1.  A split of the model into stages therefore starts from exactly the weights of
 * the whole model. */
gboolean tp_net_init_weights(TpNet *net, guint64 seed, float *weights, GError **err);

/* Batch normalisation's running statistics (each normalisation's means, then its variances): the
 * stage's state beside its weights, updated by every training forward that does not replay, read by
 * inference.  Floats of them (0 without batchnorm); copy them out and in (a checkpoint's). */
size_t tp_net_n_stats(const TpNet *net);
gboolean tp_net_get_stats(TpNet *net, float *host, GError **err);
/* (TP_ERROR_INPUT, one line naming the layer and channel, for a mean that is not finite or a
 * variance that is negative or not finite) */
gboolean tp_net_set_stats(TpNet *net, const float *host, GError **err);
/* Samples whose statistics a training batchnorm takes together: the micro-batch (0, the default:
 * the whole batch of each call).  A forward or backward of a multiple of them takes each group
 * apart, as separate calls would (any other batch is one group).  TP_ERROR_INPUT, one line naming
 * the layer, where a batchnorm would see one value per channel (one sample on a 1x1 plane). */
gboolean tp_net_set_group(TpNet *net, int samples, GError **err);

/* Saved state of one forward, for at most max_batch samples. */
TpSaved *tp_saved_new(TpNet *net, int max_batch, GError **err);
/* The same with room for a split backward's output gradients (tp_net_backward_input keeps them
 * there for tp_net_backward_weight); slices of it share them. */
TpSaved *tp_saved_new_split(TpNet *net, int max_batch, GError **err);
void tp_saved_free(TpSaved *saved);
/* Seed of the dropout masks of the next forward (layer L's mask uses tp_mix64(seed ^ L)). */
void tp_saved_set_seed(TpSaved *saved, guint64 seed);
/* The same in n blocks (n ≥ 1; 0 is seed 0): the next forward, of a multiple of n samples, draws
 * each dropout mask for its k-th block of batch/n rows from seeds[k], as a forward of those rows
 * alone with tp_saved_set_seed(seeds[k]) would — one forward of a mini-batch draws the masks of the
 * forwards of its micro-batches. */
void tp_saved_set_seeds(TpSaved *saved, const guint64 *seeds, int n);
int tp_saved_batch(const TpSaved *saved);           /* samples of the forward it holds */
/* The forwards into saved recompute ones already run (recomputation), until it is set FALSE:
 * batchnorm normalises as it did, and the running statistics are left as they are.  A slice starts
 * FALSE, whatever its owner's. */
void tp_saved_set_replay(TpSaved *saved, gboolean replay);
/* Samples [off, off+n) of `whole` as a TpSaved of their own, sharing whole's memory (freed with
 * tp_saved_free, which then frees only the slice; whole must outlive it).  A forward into a slice
 * writes its samples' part of whole, so the forwards of consecutive micro-batches into slices
 * leave in whole what one forward of all their samples would: one backward of all of them
 * (a slice of several micro-batches, or whole with tp_saved_set_batch) then runs products of
 * all their rows.  The slice starts with n samples (its batch) and the seeds whole had. */
TpSaved *tp_saved_slice(TpSaved *whole, int off, int n);
/* Declare that saved holds `batch` samples (at most its max_batch): after forwards into slices. */
void tp_saved_set_batch(TpSaved *saved, int batch);
gboolean tp_saved_is_slice(const TpSaved *saved);

typedef struct {
  double loss_sum; /* Σ over the samples of −log p(label) */
  int correct;     /* samples whose highest score is the label */
} TpLossStats;

/* Forward of `batch` samples: in [batch][in_elems] → out [batch][out_elems] (out may be NULL on the
 * last stage). saved NULL: inference (nothing kept, dropout off). labels and stats: the last stage's
 * (labels required there when training; stats may be NULL). */
gboolean tp_net_forward(TpNet *net, const float *weights, const float *in, int batch, float *out, TpSaved *saved,
                        const gint32 *labels, TpLossStats *stats, GError **err);

/* Backward of the forward held in saved, with `weights` (any version): dout [batch][out_elems]
 * (NULL on the last stage, whose loss gradient is scaled by 1/minibatch_samples so that the
 * micro-batch gradients of a mini-batch sum to its mean gradient); din [batch][in_elems] is
 * overwritten (NULL: not wanted); grad accumulates. */
gboolean tp_net_backward(TpNet *net, const float *weights, TpSaved *saved, const float *dout, float *din, float *grad,
                         int minibatch_samples, GError **err);

/* The same backward split in two (zero-bubble schedules' I and W).  backward_input: din as
 * tp_net_backward computes it, grad untouched; each layer with parameters' output gradient dY is
 * kept in saved (made by tp_saved_new_split), which must then live until backward_weight.
 * backward_weight: grad accumulates each such layer's dW = dYᵀ·X (and db = Σ dY) from the kept dY
 * and the saved inputs X — the same products as tp_net_backward's, so I then W leave the gradient
 * tp_net_backward leaves, bit for bit.  weights: any version (W reads none: the products need only
 * dY and X; a backend may be given them). */
gboolean tp_net_backward_input(TpNet *net, const float *weights, TpSaved *saved, const float *dout, float *din,
                               int minibatch_samples, GError **err);
gboolean tp_net_backward_weight(TpNet *net, const float *weights, TpSaved *saved, float *grad, GError **err);

#endif
