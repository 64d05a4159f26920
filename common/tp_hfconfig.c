/* tp_hfconfig.c — a Hugging Face config.json as a model description (tp_model.h): the fields of
 * LlamaForCausalLM (and Mistral's and Qwen2's, which mean the same) and of GPT2LMHeadModel, written
 * as the .model text the reader takes, so that one reader derives every model. */
#include "tp_model.h"
#include "tp_error.h"
#include "tp_format.h"

#include <json-glib/json-glib.h>
#include <string.h>

typedef struct {
  JsonObject *o;
  const char *file;
  GError **err;
} Config;

static gboolean missing(Config *c, const char *key, const char *want)
{
  g_set_error(c->err, TP_ERROR, TP_ERROR_INPUT, "%s: config.json %s \"%s\" (%s)", c->file,
              json_object_has_member(c->o, key) ? "has a bad" : "has no", key, want);
  return FALSE;
}

/* An integer member in [lo, hi]; absent: *out = dflt when dflt >= lo, else refused. */
static gboolean int_member(Config *c, const char *key, gint64 lo, gint64 hi, gint64 dflt, gint64 *out)
{
  JsonNode *n = json_object_get_member(c->o, key);
  if (!n || JSON_NODE_HOLDS_NULL(n)) {
    *out = dflt;
    return dflt >= lo || missing(c, key, "a whole number");
  }
  if (json_node_get_value_type(n) != G_TYPE_INT64 || json_node_get_int(n) < lo || json_node_get_int(n) > hi) {
    g_autofree char *want = g_strdup_printf("a whole number from %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT, lo, hi);
    return missing(c, key, want);
  }
  *out = json_node_get_int(n);
  return TRUE;
}

/* A number member in (lo, hi] (lo 0: [0, hi]); absent: dflt. */
static gboolean num_member(Config *c, const char *key, double lo, double hi, double dflt, double *out)
{
  JsonNode *n = json_object_get_member(c->o, key);
  *out = dflt;
  if (!n || JSON_NODE_HOLDS_NULL(n))
    return TRUE;
  GType t = JSON_NODE_HOLDS_VALUE(n) ? json_node_get_value_type(n) : G_TYPE_INVALID;
  if (t != G_TYPE_DOUBLE && t != G_TYPE_INT64)
    return missing(c, key, "a number");
  *out = json_node_get_double(n);
  if ((lo > 0 ? *out > lo : *out >= 0) && *out <= hi)
    return TRUE;
  g_autofree char *want = g_strdup_printf("a number %s %g and at most %g", lo > 0 ? "above" : "from", lo, hi);
  return missing(c, key, want);
}

static gboolean bool_member(Config *c, const char *key, gboolean dflt, gboolean *out)
{
  JsonNode *n = json_object_get_member(c->o, key);
  *out = dflt;
  if (!n || JSON_NODE_HOLDS_NULL(n))
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_BOOLEAN)
    return missing(c, key, "true or false");
  *out = json_node_get_boolean(n);
  return TRUE;
}

/* A string member, or NULL (absent, or not a string). */
static const char *str_member(JsonObject *o, const char *key)
{
  JsonNode *n = json_object_get_member(o, key);
  return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING ? json_node_get_string(n) : NULL;
}

/* Whether member key is absent or null. */
static gboolean is_null(Config *c, const char *key)
{
  JsonNode *n = json_object_get_member(c->o, key);
  return !n || JSON_NODE_HOLDS_NULL(n);
}

/* A member that changes the network, where timeprest builds one value of it: absent or null, or a
 * string among `ok` (a NULL-ended list; NULL itself: none but null). */
static gboolean only(Config *c, const char *key, const char *const *ok, const char *want)
{
  if (is_null(c, key))
    return TRUE;
  const char *v = str_member(c->o, key);
  for (int i = 0; v && ok && ok[i]; i++)
    if (!strcmp(v, ok[i]))
      return TRUE;
  return missing(c, key, want);
}

/* A boolean member that changes the network, where timeprest builds the network of `is` only. */
static gboolean only_bool(Config *c, const char *key, gboolean is, const char *want)
{
  gboolean v;
  if (!bool_member(c, key, is, &v))
    return FALSE;
  return v == is || missing(c, key, want);
}

/* Attention over a window shorter than the context (Mistral's sliding_window, Qwen2's with
 * use_sliding_window): a network timeprest does not build. */
static gboolean no_window(Config *c, gint64 ctx, gboolean qwen2)
{
  gboolean use = TRUE;
  if (qwen2 && !bool_member(c, "use_sliding_window", FALSE, &use))
    return FALSE;
  gint64 w;
  if (!use || !int_member(c, "sliding_window", 1, 1 << 30, 1 << 30, &w))
    return use ? FALSE : TRUE;
  if (w >= ctx)
    return TRUE;
  g_autofree char *want = g_strdup_printf("null, or at least max_position_embeddings %" G_GINT64_FORMAT ": attention "
                                          "over a window shorter than the context is not modelled", ctx);
  return missing(c, "sliding_window", want);
}

/* torch_dtype (dtype in newer configs) as the model's precision: bfloat16, float16, float32 (absent or
 * null: fp32); NULL with *key where it is something else. */
static const char *precision(Config *c, const char **key)
{
  *key = json_object_has_member(c->o, "torch_dtype") ? "torch_dtype" : "dtype";
  JsonNode *n = json_object_get_member(c->o, *key);
  const char *d = !n || JSON_NODE_HOLDS_NULL(n) ? "float32" : str_member(c->o, *key);
  return !d ? NULL : !strcmp(d, "bfloat16") ? "bf16" : !strcmp(d, "float16") ? "fp16" : !strcmp(d, "float32") ? "fp32" : NULL;
}

/* The block's shape checked here, so that a config's own numbers are what a refusal names. */
static gboolean shape_ok(Config *c, gint64 d, gint64 h, gint64 kv, gint64 hd, const char *hidden, const char *heads,
                         const char *kvs)
{
  if (hd == 0 && d % h != 0) {
    g_set_error(c->err, TP_ERROR, TP_ERROR_INPUT, "%s: config.json \"%s\" %" G_GINT64_FORMAT " is not a multiple of \"%s\" %"
                G_GINT64_FORMAT, c->file, hidden, d, heads, h);
    return FALSE;
  }
  if (h % kv != 0) {
    g_set_error(c->err, TP_ERROR, TP_ERROR_INPUT, "%s: config.json \"%s\" %" G_GINT64_FORMAT " is not a multiple of \"%s\" %"
                G_GINT64_FORMAT, c->file, heads, h, kvs, kv);
    return FALSE;
  }
  return TRUE;
}

/* Llama, Mistral and Qwen2 (whose q, k and v projections always have biases). */
static gboolean llama(Config *c, const char *prec, gboolean mistral, gboolean qwen2, GString *m)
{
  gint64 V, d, f, L, h, kv, hd, ctx;
  double eps, theta;
  gboolean tied, attn_bias, mlp_bias;
  if (!int_member(c, "vocab_size", 2, 1 << 24, -1, &V) || !int_member(c, "hidden_size", 1, 1 << 20, -1, &d) ||
      !int_member(c, "intermediate_size", 1, 1 << 20, -1, &f) ||
      !int_member(c, "num_hidden_layers", 1, TP_MODEL_MAX_LAYERS - 4, -1, &L) ||
      !int_member(c, "num_attention_heads", 1, 1 << 16, -1, &h) ||
      !int_member(c, "num_key_value_heads", 1, 1 << 16, h, &kv) ||
      !(hd = 0, is_null(c, "head_dim") || int_member(c, "head_dim", 1, 1 << 16, -1, &hd)) ||
      !int_member(c, "max_position_embeddings", 1, 1 << 20, -1, &ctx) ||
      !num_member(c, "rms_norm_eps", 0, 0.5, 1e-6, &eps) || !num_member(c, "rope_theta", 1, 1e9, 10000, &theta) ||
      !bool_member(c, "tie_word_embeddings", FALSE, &tied) || !bool_member(c, "attention_bias", FALSE, &attn_bias) ||
      !bool_member(c, "mlp_bias", FALSE, &mlp_bias) ||
      !shape_ok(c, d, h, kv, hd, "hidden_size", "num_attention_heads", "num_key_value_heads"))
    return FALSE;
  static const char *const silu[] = { "silu", "swish", NULL };
  double drop;
  if (!only(c, "hidden_act", silu, "silu or swish: the SwiGLU MLP timeprest builds") ||
      !only(c, "rope_scaling", NULL, "null: scaled rotary positions are not modelled") ||
      !num_member(c, "attention_dropout", 0, 1, 0, &drop) ||
      (drop > 0 && !missing(c, "attention_dropout", "0: attention dropout is not modelled for this model type")) ||
      (mistral && !no_window(c, ctx, FALSE)) || (qwen2 && !no_window(c, ctx, TRUE)))
    return FALSE;
  char e[G_ASCII_DTOSTR_BUF_SIZE], t[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_dtostr(e, sizeof e, eps), g_ascii_dtostr(t, sizeof t, theta);
  g_string_append_printf(m, "tokens %" G_GINT64_FORMAT " %" G_GINT64_FORMAT "\nprecision %s\nembedding %" G_GINT64_FORMAT
                            "\nrepeat %" G_GINT64_FORMAT " block heads=%" G_GINT64_FORMAT " kv_heads=%" G_GINT64_FORMAT
                            " head_dim=%" G_GINT64_FORMAT " ffn=%" G_GINT64_FORMAT " mlp=swiglu norm=rmsnorm positions=rope"
                            " theta=%s eps=%s qkv_bias=%d o_bias=%d mlp_bias=%d\nrmsnorm eps=%s\nlm_head tied=%d\n"
                            "token_ce\n",
                         ctx, V, prec, d, L, h, kv, hd ? hd : d / h, f, t, e, attn_bias || qwen2, attn_bias, mlp_bias, e,
                         tied);
  return TRUE;
}

static gboolean gpt2(Config *c, const char *prec, GString *m)
{
  gint64 V, d, f, L, h, ctx, ctx_old;
  double eps, pdrop;
  if (!int_member(c, "vocab_size", 2, 1 << 24, -1, &V) || !int_member(c, "n_embd", 1, 1 << 20, -1, &d) ||
      !int_member(c, "n_layer", 1, TP_MODEL_MAX_LAYERS - 4, -1, &L) || !int_member(c, "n_head", 1, 1 << 16, -1, &h) ||
      !int_member(c, "n_ctx", 0, 1 << 20, 0, &ctx_old) ||
      !int_member(c, "n_positions", 1, 1 << 20, ctx_old > 0 ? ctx_old : -1, &ctx) ||
      !int_member(c, "n_inner", 1, 1 << 20, MIN(4 * d, 1 << 20), &f) ||
      !num_member(c, "layer_norm_epsilon", 0, 0.5, 1e-5, &eps) ||
      !num_member(c, "resid_pdrop", 0, 1, 0.1, &pdrop) || /* GPT2Config's defaults where absent */
      !shape_ok(c, d, h, h, 0, "n_embd", "n_head", "n_head"))
    return FALSE;
  static const char *const tanh_gelu[] = { "gelu_new", "gelu_pytorch_tanh", NULL };
  if (!only(c, "activation_function", tanh_gelu, "gelu_new or gelu_pytorch_tanh: the tanh GELU timeprest builds") ||
      !only_bool(c, "scale_attn_weights", TRUE, "true: attention scores are scaled by 1/sqrt(head size)") ||
      !only_bool(c, "scale_attn_by_inverse_layer_idx", FALSE, "false: scaling by the layer's index is not modelled"))
    return FALSE;
  char e[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_dtostr(e, sizeof e, eps);
  g_string_append_printf(m, "tokens %" G_GINT64_FORMAT " %" G_GINT64_FORMAT "\nprecision %s\nembedding %" G_GINT64_FORMAT
                            " positions=learned\nrepeat %" G_GINT64_FORMAT " block heads=%" G_GINT64_FORMAT
                            " ffn=%" G_GINT64_FORMAT " mlp=gelu norm=layernorm bias=1 dropout=%d eps=%s\n"
                            "layernorm eps=%s\nlm_head tied=1\ntoken_ce\n",
                         ctx, V, prec, d, L, h, f, pdrop > 0, e, e);
  return TRUE;
}

char *tp_model_from_config(const char *json, gsize len, const char *file, GError **err)
{
  g_autoptr(JsonParser) p = json_parser_new_immutable();
  GError *e = NULL;
  if (!tp_json_check(json, len, file, err))
    return NULL;
  if (!json_parser_load_from_data(p, json, (gssize)len, &e)) {
    g_autofree char *one = tp_json_error_line(e);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%s (not a config.json)", file, one);
    g_error_free(e);
    return NULL;
  }
  JsonNode *root = json_parser_get_root(p);
  if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: a config.json is one JSON object", file);
    return NULL;
  }
  Config c = { json_node_get_object(root), file, err };
  const char *type = str_member(c.o, "model_type"), *key;
  const char *prec = precision(&c, &key);
  if (!prec) {
    missing(&c, key, "bfloat16, float16 or float32");
    return NULL;
  }
  if (!type && json_object_has_member(c.o, "model_type")) {
    missing(&c, "model_type", "a string");
    return NULL;
  }
  g_autoptr(GString) m = g_string_new(NULL); /* no name line: the reader takes the file's */
  gboolean ok;
  if (type && (!strcmp(type, "llama") || !strcmp(type, "mistral") || !strcmp(type, "qwen2")))
    ok = llama(&c, prec, strcmp(type, "mistral") == 0, strcmp(type, "qwen2") == 0, m);
  else if (type && !strcmp(type, "gpt2"))
    ok = gpt2(&c, prec, m);
  else {
    g_autofree char *q = tp_quote(type ? type : "(none)");
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: model_type %s is not one timeprest reads (llama, mistral, qwen2, "
                "gpt2)", file, q);
    return NULL;
  }
  return ok ? g_string_free(g_steal_pointer(&m), FALSE) : NULL;
}
