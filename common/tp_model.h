/* tp_model.h — layer-stack model descriptions (models/NAME.model, or a Hugging Face config.json):
 * shapes are propagated and parameters, activation sizes and FLOPs per sample are derived, never
 * typed in.  Images flow as channels x height x width; token sequences as width x positions x 1. */
#ifndef TP_MODEL_H
#define TP_MODEL_H

#include <glib.h>

typedef enum {
  TP_LAYER_CONV,
  TP_LAYER_LINEAR,
  TP_LAYER_RELU,
  TP_LAYER_MAXPOOL,
  TP_LAYER_AVGPOOL,
  TP_LAYER_AVGPOOL_TO,
  TP_LAYER_FLATTEN,
  TP_LAYER_DROPOUT,
  TP_LAYER_BATCHNORM,
  TP_LAYER_SOFTMAX_CE,
  TP_LAYER_BOTTLENECK,
  TP_LAYER_EMBEDDING,
  TP_LAYER_LAYERNORM,
  TP_LAYER_RMSNORM,
  TP_LAYER_BLOCK,
  TP_LAYER_LM_HEAD,
  TP_LAYER_TOKEN_CE,
  TP_N_LAYER_KINDS
} TpLayerKind;

/* What a transformer block (and the norms, the embedding and the head) is made of. */
typedef struct {
  int heads, kv_heads, ffn; /* attention heads, key/value heads (grouped-query), MLP width */
  int head_dim;             /* a head's width (0: the block's width / heads) */
  gboolean qkv_bias, o_bias, mlp_bias; /* biases of the q, k, v projections, the output one, the MLP's */
  gboolean swiglu;          /* MLP: SwiGLU (gate, up, down) or GELU (up, down) */
  gboolean rmsnorm;         /* norms: RMSNorm (a weight) or LayerNorm (weight and bias) */
  gboolean rope;            /* rotary positions on queries and keys (halves rotated, as Llama) */
  gboolean dropout;         /* attention and hidden dropout in training */
  gboolean learned;         /* embedding: learned positions added */
  gboolean tied;            /* head: the embedding's weights */
  double eps, theta;        /* norm epsilon, rotary base */
} TpBlock;

/* Most layers a model may have: the optimal stage split is O(W L^2). */
#define TP_MODEL_MAX_LAYERS 1000
/* Most elements of one tensor, parameters of one layer, per sample: larger counts are refused
 * (the totals of TP_MODEL_MAX_LAYERS such layers stay within 64 bits). */
#define TP_MODEL_MAX_COUNT 1e15

typedef struct {
  TpLayerKind kind;
  int line;                   /* line in the model file */
  int out, k, stride, pad;    /* as written (out channels/features, kernel, stride, padding) */
  int mid;                    /* bottleneck width */
  gboolean bias;
  long long cin, hin, win;    /* input shape (flat inputs: cin features, 1 x 1) */
  long long cout, hout, wout; /* output shape */
  TpBlock blk;                /* transformer kinds: their shape and choices */
  long long params;           /* its own (a tied head: none) */
  long long weights;          /* the weight elements its stage holds (a tied head: its copy of the embedding's) */
  double fwd_flops, bwd_flops; /* per sample */
  double bwd_in_flops, bwd_w_flops; /* the backward's input-gradient and weight-gradient parts */
  long long in_elems, out_elems; /* per sample */
  long long stored_elems;     /* per sample, kept from forward to backward */
  long long work_elems;       /* per sample, the executor's scratch while the layer runs (a bottleneck's
                                 output gradients in its backward; 0 for the rest) */
  double stored_bytes;        /* their bytes at the model's precision (masks and token ids as they are) */
  double stored_w_bytes;      /* of those, what a split backward's weight gradient W still needs after its
                                 input gradient I: the inputs of the layer's products (a block drops its
                                 attention probabilities and dropout masks); the rest: all of them */
} TpLayer;

typedef struct {
  char *name;   /* the model's name line, or the file's base name */
  char *source; /* file it was read from */
  long long in_c, in_h, in_w; /* input shape: channels, height, width (tokens: 1, context, 1) */
  int context, vocab; /* a token model's sequence length and vocabulary; 0 for images */
  int elem_bytes;     /* bytes of a weight or activation element: 4 (fp32), 2 (bf16, fp16) */
  const char *precision; /* "fp32", "bf16" or "fp16" */
  long long dataset; /* samples per epoch (0 if not given) */
  GArray *layers;    /* TpLayer */
  long long params;
  double fwd_flops, bwd_flops;
  int tensor_parallel; /* > 1: its blocks are one device's share of T (tp_model_tensor_parallel) */
} TpModel;

extern const char *const tp_layer_names[TP_N_LAYER_KINDS];

TpModel *tp_model_parse(const char *text, gsize len, const char *name, GError **err);
/* A path (contains '/', or ends in .model or .json), or a name looked up as NAME.model, then
 * NAME.json, in $TP_MODELS_DIR, the installed models directory, then the source tree's models/.  A
 * file whose first character other than blanks is '{' is a Hugging Face config.json
 * (tp_model_from_config). */
TpModel *tp_model_load(const char *name_or_path, GError **err);
/* A copy of m, its own to change (tp_model_tensor_parallel): a file is read once, which a pipe
 * allows. */
TpModel *tp_model_copy(const TpModel *m);
/* A Hugging Face config.json as a model description's text (without a name line: the model takes
 * its file's): LlamaForCausalLM (model_type llama, mistral, qwen2) and GPT2LMHeadModel (gpt2); an
 * unknown model_type or a missing or malformed field is refused in one line naming it.  g_free the
 * result. */
char *tp_model_from_config(const char *json, gsize len, const char *file, GError **err);
/* The file tp_model_load reads for name_or_path (newly allocated); NULL for a name found nowhere. */
char *tp_model_path(const char *name_or_path);
void tp_model_free(TpModel *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpModel, tp_model_free)

static inline const TpLayer *tp_model_layer(const TpModel *m, int i) { return &g_array_index(m->layers, TpLayer, i); }
static inline int tp_model_n_layers(const TpModel *m) { return (int)m->layers->len; }
/* The least memory training m with mini-batches of `batch` samples holds, in bytes, at the
 * executor's float32: every layer's weights, momentum, gradient and initial weights, one
 * mini-batch's stored activations (a transformer's attention probabilities: its s² term) and
 * outputs, and the largest layer scratch of a mini-batch. */
long long tp_model_train_bytes(const TpModel *m, int batch);
/* The fewest values per channel a batchnorm of layer d normalises in one sample (its plane: height
 * × width; a bottleneck's smallest, after its stride); 0 for a layer without batchnorm.  A micro-batch
 * of n samples gives it n times as many: one value alone has no variance (the executor refuses it). */
long long tp_layer_norm_plane(const TpLayer *d);
/* The least of tp_layer_norm_plane over m's layers with batchnorm; 0 without any. */
long long tp_model_least_norm_plane(const TpModel *m);

/* Tensor parallelism, simulated: every transformer block becomes one device's share of a T-way
 * split (FLOPs and weights / T; stored activations per Korthikanti et al. 2022, all of them / T with
 * sequence parallelism); the totals follow.  T <= 1: nothing changes. */
void tp_model_tensor_parallel(TpModel *m, int T, gboolean sequence);
/* Whether m has transformer blocks and each splits T ways (heads, key/value heads, MLP width). */
gboolean tp_model_tensor_splits(const TpModel *m, int T);
/* The same as a refusal naming --tensor-parallel (TP_ERROR_INPUT); TRUE for T <= 1. */
gboolean tp_model_tensor_check(const TpModel *m, int T, GError **err);

/* Find a data file: `sub/NAME.ext` under $env_var, the installed data directory, the source tree.
 * Returns a newly allocated path or NULL. */
char *tp_data_find(const char *env_var, const char *sub, const char *name, const char *ext);

#endif
