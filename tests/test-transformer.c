/* test-transformer.c — the transformer model descriptions against published numbers: parameter
 * counts of the shipped models (Hugging Face's, GPT-2's, the zero-bubble paper's names), a block's
 * FLOPs against Megatron-LM's closed forms and its stored bytes against Korthikanti et al.'s,
 * Hugging Face config.json read as the .model it stands for, the repeat syntax, the refusals, and
 * the model command. */
#include "tp_analytic.h"
#include "tp_allreduce.h"
#include "tp_layout.h"
#include "tp_model.h"
#include "tp_test.h"
#include "tp_tie.h"

#include <math.h>

static TpModel *parse(const char *text, GError **err) { return tp_model_parse(text, strlen(text), "t.model", err); }

/* Exact where the publisher gives the count (Hugging Face's TinyLlama and GPT-2, this project's
 * llama-tiny by hand); where only a name gives it (GPT-3, the zero-bubble paper's GPT models, whose
 * Table 3 gives layers, heads and widths but no count), within 1.5 % of the name: the names are
 * rounded, and no one vocabulary fits all four of the paper's (ours: GPT-2's 50257, 0.2–1.4 % off). */
static void test_parameter_counts(void)
{
  struct { const char *name; long long exact; double named; } cases[] = {
    { "llama-tiny", 2951424, 0 },
    { "tinyllama-1.1b", 1100048384, 0 },
    { "gpt2-124m", 124439808, 0 },
    { "gpt-1.5b", 0, 1.5e9 },
    { "gpt-6.2b", 0, 6.2e9 },
    { "gpt-14.6b", 0, 14.6e9 },
    { "gpt-28.3b", 0, 28.3e9 },
    { "gpt3-175b", 0, 175e9 },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(TpModel) m = tpt_model(cases[i].name);
    g_test_message("%s: %lld parameters", cases[i].name, m->params);
    if (cases[i].exact)
      g_assert_cmpint(m->params, ==, cases[i].exact);
    else
      g_assert_cmpfloat(fabs(m->params / cases[i].named - 1), <, 0.015);
  }
  /* llama-tiny by hand: embedding, 4 blocks (q, k, v, o, gate, up, down, two norms), norm, head */
  long long d = 256, kv = 2 * (256 / 8), f = 704;
  long long block = d * d + 2 * d * kv + d * d + 3 * d * f + 2 * d;
  g_autoptr(TpModel) t = tpt_model("llama-tiny");
  g_assert_cmpint(t->params, ==, 256 * d + 4 * block + d + d * 256);
}

/* Megatron-LM's counts for the GPT block with a 4h MLP, per sample of s tokens: forward
 * s·h·(24h + 4s), input gradient s·h·(24h + 8s), weight gradient 24·s·h²; and for the model,
 * 72·s·l·h²·(1 + s/(6h) + V/(12·l·h)) for a forward and backward (the norms' few FLOPs beside). */
static void test_megatron_flops(void)
{
  const char *names[] = { "gpt-1.5b", "gpt-6.2b", "gpt-14.6b", "gpt-28.3b", "gpt3-175b", "gpt2-124m" };
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autoptr(TpModel) m = tpt_model(names[i]);
    const TpLayer *b = tp_model_layer(m, 1);
    g_assert_cmpint(b->kind, ==, TP_LAYER_BLOCK);
    double s = m->context, h = b->cin, l = 0, V = m->vocab;
    g_assert_cmpfloat(b->fwd_flops, ==, s * h * (24 * h + 4 * s));
    g_assert_cmpfloat(b->bwd_in_flops, ==, s * h * (24 * h + 8 * s));
    g_assert_cmpfloat(b->bwd_w_flops, ==, 24 * s * h * h);
    double total = 0;
    for (int k = 0; k < tp_model_n_layers(m); k++) {
      const TpLayer *L = tp_model_layer(m, k);
      l += L->kind == TP_LAYER_BLOCK;
      total += L->fwd_flops + L->bwd_flops;
    }
    double megatron = 72 * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    g_test_message("%s: %.6g FLOPs per sample, Megatron-LM %.6g", names[i], total, megatron);
    g_assert_cmpfloat(fabs(total / megatron - 1), <, 0.005);
  }
}

/* Korthikanti et al. (2022), 16-bit, per sample: a GPT block with dropout keeps s·h·(34 + 5·a·s/h)
 * bytes; without dropout its masks (s·h each after attention and MLP, a·s² after softmax) and the
 * dropped softmax (2·a·s²) go: s·h·32 + 2·a·s². */
static void test_korthikanti_activations(void)
{
  g_autoptr(TpModel) m = tpt_model("gpt3-175b");
  const TpLayer *b = tp_model_layer(m, 1);
  double s = 2048, h = 12288, a = 96;
  g_assert_cmpfloat(b->stored_bytes, ==, s * h * (34 + 5 * a * s / h));
  /* what a split backward's W still needs after its I (Qi et al.'s M_W): 32·s·h */
  g_assert_cmpfloat(b->stored_w_bytes, ==, 32 * s * h);
  GError *err = NULL;
  g_autoptr(TpModel) nd = parse("tokens 2048 50257\nprecision bf16\nembedding 12288 positions=learned\n"
                                "block heads=96 ffn=49152 bias=1\n", &err);
  g_assert_no_error(err);
  g_assert_cmpfloat(tp_model_layer(nd, 1)->stored_bytes, ==, 32 * s * h + 2 * a * s * s);
  /* fp32 doubles the elements, not the one-byte masks: with dropout, its output (4·a·s²) and masks
   * (a·s² and 2·s·h) beside the rest */
  g_autoptr(TpModel) f32 = parse("tokens 2048 50257\nembedding 12288 positions=learned\n"
                                 "block heads=96 ffn=49152 bias=1 dropout=1\n", &err);
  g_assert_no_error(err);
  g_assert_cmpfloat(tp_model_layer(f32, 1)->stored_bytes, ==, 2 * (32 * s * h + 2 * a * s * s) + 2 * s * h + 5 * a * s * s);
}

/* A config.json is read as the .model text it stands for: the same layers, parameters and FLOPs. */
static void test_config_json(void)
{
  g_autoptr(TpModel) j = tpt_model("tinyllama-1.1b");
  GError *err = NULL;
  g_autoptr(TpModel) t = parse("name tinyllama-1.1b\ntokens 2048 32000\nprecision bf16\nembedding 2048\n"
                               "repeat 22 block heads=32 kv_heads=4 ffn=5632 mlp=swiglu norm=rmsnorm positions=rope\n"
                               "rmsnorm\nlm_head\ntoken_ce\n", &err);
  g_assert_no_error(err);
  g_assert_cmpint(tp_model_n_layers(j), ==, tp_model_n_layers(t));
  for (int i = 0; i < tp_model_n_layers(j); i++) {
    const TpLayer *a = tp_model_layer(j, i), *b = tp_model_layer(t, i);
    g_assert_cmpint(a->kind, ==, b->kind);
    g_assert_cmpint(a->params, ==, b->params);
    g_assert_cmpfloat(a->fwd_flops, ==, b->fwd_flops);
    g_assert_cmpfloat(a->stored_bytes, ==, b->stored_bytes);
  }
  g_assert_cmpstr(j->precision, ==, "bf16");
  g_assert_cmpint(j->elem_bytes, ==, 2);
  /* Mistral's and Qwen2's model_type read as Llama's; a tied head has no weights of its own */
  const char *cfg = "{\"model_type\": \"mistral\", \"vocab_size\": 100, \"hidden_size\": 64, "
                    "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                    "\"max_position_embeddings\": 32, \"tie_word_embeddings\": true}";
  g_autofree char *mistral = tp_model_from_config(cfg, strlen(cfg), "c.json", &err);
  g_assert_no_error(err);
  g_assert_nonnull(strstr(mistral, "kv_heads=4"));
  g_assert_nonnull(strstr(mistral, "lm_head tied=1"));
  /* published counts that need the q/k/v biases (Qwen2, always) and a head width of its own
   * (Mistral-Nemo's head_dim 128 against 5120 / 32 = 160) */
  struct { const char *json; long long params; } pub[] = {
    { "{\"model_type\": \"qwen2\", \"vocab_size\": 151936, \"hidden_size\": 896, \"intermediate_size\": 4864, "
      "\"num_hidden_layers\": 24, \"num_attention_heads\": 14, \"num_key_value_heads\": 2, "
      "\"max_position_embeddings\": 32768, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\"}",
      494032768 },
    { "{\"model_type\": \"mistral\", \"vocab_size\": 131072, \"hidden_size\": 5120, \"intermediate_size\": 14336, "
      "\"num_hidden_layers\": 40, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"head_dim\": 128, "
      "\"max_position_embeddings\": 1024000, \"tie_word_embeddings\": false, \"dtype\": \"bfloat16\"}",
      12247782400LL },
  };
  for (guint i = 0; i < G_N_ELEMENTS(pub); i++) {
    g_autofree char *text = tp_model_from_config(pub[i].json, strlen(pub[i].json), "p.json", &err);
    g_assert_no_error(err);
    g_autoptr(TpModel) pm = parse(text, &err);
    g_assert_no_error(err);
    g_assert_cmpint(pm->params, ==, pub[i].params);
    g_assert_cmpint(pm->elem_bytes, ==, 2);
  }
}

/* Each refusal names what is wrong, in one line. */
static void test_config_refusals(void)
{
  struct { const char *json, *want; } cases[] = {
    { "{\"model_type\": \"t5\"}", "model_type 't5' is not one timeprest reads" },
    { "{\"vocab_size\": 5}", "model_type '(none)'" },
    { "{\"model_type\": \"llama\", \"vocab_size\": 100}", "has no \"hidden_size\"" },
    { "{\"model_type\": \"llama\", \"vocab_size\": \"100\"}", "has a bad \"vocab_size\"" },
    { "{\"model_type\": \"gpt2\", \"vocab_size\": 100, \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4}",
      "has no \"n_positions\"" },
    { "{\"model_type\": \"llama\", \"torch_dtype\": \"int8\"}", "\"torch_dtype\" (bfloat16, float16 or float32)" },
    { "[1, 2]", "a config.json is one JSON object" },
    { "{\"model_type\": ", "not a config.json" },
    { "{\"model_type\": 7}", "has a bad \"model_type\" (a string)" },
    { "{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_embd\": 65}", "key 'n_embd' given twice" },
    { "{\"model_type\": \"gpt2\" /* c */}", "JSON has no comments" },
    { "{\"a\": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}", "nested deeper than 16 levels" },
    { "{\"model_type\": \"llama\", \"vocab_size\": 100, \"hidden_size\": 65, \"intermediate_size\": 8, "
      "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"max_position_embeddings\": 8}",
      "\"hidden_size\" 65 is not a multiple of \"num_attention_heads\" 4" },
    { "{\"model_type\": \"llama\", \"vocab_size\": 100, \"hidden_size\": 64, \"intermediate_size\": 8, "
      "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"max_position_embeddings\": 8, \"rope_theta\": 0.5}",
      "\"rope_theta\" (a number above 1" },
#define LLAMA_MIN "\"vocab_size\": 100, \"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 1, " \
                  "\"num_attention_heads\": 4, \"max_position_embeddings\": 8"
#define GPT2_MIN "\"model_type\": \"gpt2\", \"vocab_size\": 100, \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4, " \
                 "\"n_positions\": 8"
    /* fields that ask for another network */
    { "{\"model_type\": \"llama\", " LLAMA_MIN ", \"hidden_act\": \"gelu\"}", "bad \"hidden_act\" (silu or swish" },
    { "{\"model_type\": \"llama\", " LLAMA_MIN ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}}",
      "bad \"rope_scaling\" (null" },
    { "{\"model_type\": \"llama\", " LLAMA_MIN ", \"head_dim\": 0}", "bad \"head_dim\"" },
    { "{\"model_type\": \"llama\", " LLAMA_MIN ", \"attention_dropout\": 0.1}", "bad \"attention_dropout\" (0" },
    { "{\"model_type\": \"mistral\", " LLAMA_MIN ", \"sliding_window\": 4}",
      "bad \"sliding_window\" (null, or at least max_position_embeddings 8" },
    { "{\"model_type\": \"qwen2\", " LLAMA_MIN ", \"use_sliding_window\": true, \"sliding_window\": 4}",
      "bad \"sliding_window\"" },
    { "{" GPT2_MIN ", \"activation_function\": \"gelu\"}", "bad \"activation_function\" (gelu_new or" },
    { "{" GPT2_MIN ", \"scale_attn_weights\": false}", "bad \"scale_attn_weights\" (true" },
    { "{" GPT2_MIN ", \"scale_attn_by_inverse_layer_idx\": true}", "bad \"scale_attn_by_inverse_layer_idx\"" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    GError *err = NULL;
    g_autofree char *t = tp_model_from_config(cases[i].json, strlen(cases[i].json), "c.json", &err);
    g_assert_null(t);
    g_assert_nonnull(err);
    g_test_message("%s", err->message);
    g_assert_nonnull(strstr(err->message, cases[i].want));
    g_assert_null(strchr(err->message, '\n'));
    g_error_free(err);
  }
  /* the values that ask for the network these are: read */
  const char *fine[] = {
    "{\"model_type\": \"llama\", " LLAMA_MIN ", \"hidden_act\": \"swish\", \"rope_scaling\": null, \"head_dim\": null}",
    "{\"model_type\": \"mistral\", " LLAMA_MIN ", \"sliding_window\": 8, \"attention_dropout\": 0.0}",
    "{\"model_type\": \"qwen2\", " LLAMA_MIN ", \"use_sliding_window\": false, \"sliding_window\": 4}",
    "{" GPT2_MIN ", \"activation_function\": \"gelu_pytorch_tanh\", \"scale_attn_weights\": true}",
  };
  for (guint i = 0; i < G_N_ELEMENTS(fine); i++) {
    GError *err = NULL;
    g_autofree char *t = tp_model_from_config(fine[i], strlen(fine[i]), "c.json", &err);
    g_assert_no_error(err);
    g_assert_nonnull(t);
  }
}

/* --tensor-parallel on a model whose blocks do not all split: the first block that does not, named
 * with its sizes (it said the model had none that split); a model without blocks says so. */
static void test_tensor_refusal(void)
{
  GError *err = NULL;
  g_autoptr(TpModel) m = parse("tokens 8 16\nembedding 24\nblock heads=8 ffn=32\nblock heads=6 ffn=32\nlm_head\n"
                               "token_ce\n", &err);
  g_assert_no_error(err);
  g_assert_true(tp_model_tensor_check(m, 2, &err));
  g_assert_false(tp_model_tensor_check(m, 4, &err));
  g_assert_cmpstr(err->message, ==, "--tensor-parallel 4: layer 3 of model t has 6 heads, 6 KV heads and MLP width 32, "
                                    "not all multiples of 4");
  g_clear_error(&err);
  g_autoptr(TpModel) flat = parse("input 1 4 4\nflatten\nlinear 8\nlinear 2\nsoftmax_ce\n", &err);
  g_assert_no_error(err);
  g_assert_false(tp_model_tensor_check(flat, 2, &err));
  g_assert_nonnull(strstr(err->message, "has no transformer blocks to split"));
  g_clear_error(&err);
}

/* "repeat N LAYER" is N layers; the transformer kinds' refusals. */
static void test_syntax(void)
{
  GError *err = NULL;
  g_autoptr(TpModel) r = parse("input 1 4 4\nflatten\nrepeat 3 linear 8\nlinear 2\nsoftmax_ce\n", &err);
  g_assert_no_error(err);
  g_assert_cmpint(tp_model_n_layers(r), ==, 6);
  g_assert_cmpint(r->params, ==, 16 * 8 + 8 + 2 * (8 * 8 + 8) + 8 * 2 + 2);
  struct { const char *text, *want; } bad[] = {
    { "tokens 8 16\nrepeat 0 block heads=2 ffn=4\n", "expected 'repeat N LAYER" },
    { "tokens 8 16\nrepeat 2\n", "expected 'repeat N LAYER" },
    { "tokens 8 16\nembedding 8\nblock ffn=4\n", "block needs heads=H and ffn=F" },
    { "tokens 8 16\nembedding 8\nblock heads=3 ffn=4\n", "not a multiple of heads=3" },
    { "tokens 8 16\nembedding 8\nblock heads=4 kv_heads=3 ffn=4\n", "kv_heads=3" },
    { "tokens 8 16\nembedding 8\nblock heads=2 ffn=4 mlp=relu\n", "bad option 'mlp=relu'" },
    { "tokens 8 16\nembedding 8\nblock heads=2 ffn=4 dropout=01\n", "bad option 'dropout=01'" },
    { "input 1 8 8\nembedding 8\n", "needs a token model" },
    { "tokens 8 16\nblock heads=2 ffn=4\n", "must follow the embedding" },
    { "tokens 8 16\nembedding 8\nembedding 8\n", "embedding must be the first layer" },
    { "tokens 8 16\nembedding 8\nlm_head\ntoken_ce\ntoken_ce\n", "token_ce" },
    { "tokens 8 16\nembedding 8\nlayernorm\nlinear 4\n", "linear in a token model" },
    { "tokens 8 16\nrelu\n", "relu in a token model" },
    { "tokens 8 16\nembedding 8\nlm_head\nlm_head\n", "lm_head takes the model's width, 8, not 16" },
    { "tokens 8 16\nembedding 8\nlm_head\nblock heads=2 ffn=4\n", "block takes the model's width" },
    { "tokens 8 16\nembedding 6\nblock heads=2 ffn=4 positions=rope\n", "a head's width must be even" },
    { "tokens 8 16\nembedding 8\ntoken_ce\n", "needs the vocabulary's 16 scores" },
    { "tokens 8 16\nembedding 8\nprecision bf16\n", "before the layers" },
    { "tokens 8 1\nembedding 8\n", "expected 'tokens CONTEXT VOCAB'" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    GError *e = NULL;
    g_autoptr(TpModel) m = parse(bad[i].text, &e);
    g_assert_null(m);
    g_assert_nonnull(e);
    g_test_message("%s", e->message);
    g_assert_nonnull(strstr(e->message, bad[i].want));
    g_error_free(e);
  }
}

/* The model command: every layer in JSON with the fields a script reads; unknown models refused. */
static void test_model_command(void)
{
  TptRun r = tpt_run((const char *[]){ "model", "llama-tiny", "--format", "json", NULL });
  g_assert_cmpint(r.status, ==, 0);
  const char *keys[] = { "\"parameters\": 2951424", "\"kind\": \"block\"", "\"forward_flops\"",
                         "\"backward_input_flops\"", "\"backward_weight_flops\"", "\"stored_activation_bytes\"",
                         "\"layers\": [", "\"totals\"" };
  for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
    g_assert_nonnull(strstr(r.out, keys[i]));
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "model", "vgg16-cifar100", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "134670244 parameters"));
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "model", "no-such-model", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "model", NULL });
  g_assert_cmpint(r.status, ==, 2);
  tpt_run_clear(&r);
  /* the report may not overwrite the model it reads */
  g_autofree char *dir = tpt_tmp_dir("tp-model"), *path = g_build_filename(dir, "x.model", NULL);
  g_assert_true(g_file_set_contents(path, "tokens 8 16\nembedding 8\nlm_head\ntoken_ce\n", -1, NULL));
  r = tpt_run((const char *[]){ "model", path, "-o", path, NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpint(tpt_lines(r.err), ==, 1);
  g_autofree char *still = NULL;
  g_assert_true(g_file_get_contents(path, &still, NULL, NULL));
  g_assert_true(g_str_has_prefix(still, "tokens 8 16"));
  tpt_run_clear(&r);
  tpt_rm_tree(dir);
}

/* The analytic model times a 16-bit model at the device's 16-bit FLOP/s, and counts its bytes at two
 * per element. */
static void test_costs(void)
{
  TptRun r = tpt_run((const char *[]){ "simulate", "-s", "1f1b", "--model", "gpt-1.5b", "--cluster", "h100x8", "-n",
                                       "8", "--batch", "16", "-k", "4", "--format", "json", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\"makespan\""));
  tpt_run_clear(&r);
  g_autoptr(TpModel) m = tpt_model("gpt-1.5b");
  const TpLayer *b = tp_model_layer(m, 1);
  TpDevice d = { .flops = 67e12, .flops16 = 989e12, .memory = 80e9, .bandwidth = 3.35e12, .efficiency = 1 };
  g_assert_cmpfloat(fabs(tp_layer_time(b, &d, 2, 1, FALSE) / (b->fwd_flops / 989e12) - 1), <, 1e-12);
  g_assert_cmpfloat(fabs(tp_layer_time(b, &d, 4, 1, FALSE) / (b->fwd_flops / 67e12) - 1), <, 1e-12);
}

/* GPT-2's head tied to the embedding: beside the embedding it has no weights of its own (the
 * model's 124,439,808 parameters, 16 bits each, on one stage); on a later stage it holds a copy
 * of the table (V·d more), with its optimizer state and gradient, and both stages' updates wait
 * for the sum of the two gradients. */
/* m's heads untied after an analytic model was made of it: its costs lose the sum (add_tie), its
 * tables stay those of the tied model. */
static void untie(const TpModel *m)
{
  for (int i = 0; i < tp_model_n_layers(m); i++)
    if (tp_model_layer(m, i)->kind == TP_LAYER_LM_HEAD)
      ((TpLayer *)tp_model_layer(m, i))->blk.tied = FALSE;
}

static void test_tied_bytes(void)
{
  g_autoptr(TpModel) m = tpt_model("gpt2-124m");
  g_autoptr(TpCluster) c = tp_cluster_load("dgx-a100", NULL);
  const double table = 2.0 * 50257 * 768;
  for (int W = 1; W <= 2; W++) {
    GError *err = NULL;
    g_autoptr(TpAnalytic) a = tp_analytic_new_on(m, c, NULL, W, 2, 8, TRUE, &err);
    g_assert_no_error(err);
    g_assert_true(tp_analytic_split(a, NULL, NULL, NULL, &err));
    g_autoptr(TpCost) cost = tp_analytic_cost(a);
    double weights = 0, states = 0;
    for (int s = 0; s < W; s++)
      weights += cost->stage[s].weight_bytes, states += cost->stage[s].optimizer_bytes;
    g_test_message("W = %d: %.0f weight bytes", W, weights);
    g_assert_cmpfloat(weights, ==, 2.0 * 124439808 + (W > 1 ? table : 0));
    g_assert_cmpfloat(states, ==, weights); /* SGD's momentum: one state a weight */
    if (W == 1)
      continue;
    /* the sum of the two gradients at each update: an all-reduce of two on the stages' link, in the
     * updates of both stages (the links made free, none) */
    double bw = a->link_bandwidth, lat = a->link_latency, upd[2] = { cost->stage[0].upd, cost->stage[1].upd };
    g_assert_cmpfloat(bw, >, 0);
    a->link_bandwidth = 0;
    g_autoptr(TpCost) free_links = tp_analytic_cost(a);
    for (int s = 0; s < 2; s++)
      g_assert_cmpfloat(fabs(upd[s] - free_links->stage[s].upd - tp_allreduce_ring(2, table, bw, lat)), <,
                        1e-12 * upd[s]);
    /* 8 replicas a stage: stage 2 on the next node, the sum on the nodes' network (tp_layout_links) */
    a->link_bandwidth = bw, a->replicas = 8;
    g_autoptr(TpCost) apart = tp_analytic_cost(a);
    g_autoptr(TpModel) m_untied = tpt_model("gpt2-124m");
    a->model = m_untied;
    untie(m_untied);
    g_autoptr(TpCost) untied = tp_analytic_cost(a);
    a->model = m;
    double net = tp_allreduce_ring(2, table, tp_layout_network_share(c, 8), c->network_latency);
    g_assert_cmpfloat(net, >, 2 * tp_allreduce_ring(2, table, bw, lat));
    for (int s = 0; s < 2; s++)
      g_assert_cmpfloat(fabs(apart->stage[s].upd - untied->stage[s].upd - net), <, 1e-12 * apart->stage[s].upd);
  }
  /* twelve stages, chunks of 4 workers (interleaved): the head's chunk, stage 11 (the loss's the
   * last), is worker 3's, on stage 1's node: the sum on the GPU link, where twelve workers would put
   * it on the next node's network (it was charged the network: the node was found from the chunk) */
  GError *e12 = NULL;
  g_autoptr(TpAnalytic) v = tp_analytic_new_on(m, c, NULL, 12, 8, 64, TRUE, &e12);
  g_assert_no_error(e12);
  g_assert_true(tp_analytic_split(v, NULL, NULL, NULL, &e12));
  g_autoptr(TpCost) twelve = tp_analytic_cost(v);
  v->map = TP_MAP_ROUND_ROBIN, v->ranks = 4;
  g_autoptr(TpCost) chunks = tp_analytic_cost(v);
  int h = chunks->tie.stage;
  g_assert_cmpint(h, ==, 10);
  double nv = tp_allreduce_ring(2, table, v->link_bandwidth, v->link_latency);
  double nw = tp_allreduce_ring(2, table, tp_layout_network_share(c, 1), c->network_latency);
  g_assert_cmpfloat(nw, >, nv);
  g_assert_cmpfloat(fabs(twelve->stage[h].upd - chunks->stage[h].upd - (nw - nv)), <, 1e-9 * twelve->stage[h].upd);
  /* two heads tied beside the embedding: neither holds a copy (the model's own parameter count) */
  g_autoptr(TpModel) two = tpt_model_text("tokens 8 256\nembedding 256\nblock heads=4 ffn=64\nlm_head tied=1\n"
                                          "lm_head tied=1\ntoken_ce\n");
  g_autoptr(TpAnalytic) a2 = tp_analytic_new_on(two, c, NULL, 1, 1, 8, TRUE, NULL);
  g_assert_true(tp_analytic_split(a2, NULL, NULL, NULL, NULL));
  g_autoptr(TpCost) cost2 = tp_analytic_cost(a2);
  g_assert_cmpfloat(cost2->stage[0].weight_bytes, ==, two->elem_bytes * (double)two->params);
  /* both stages on one device (h200: one GPU): a sum in its memory, two tables read and one written */
  g_autoptr(TpCluster) one = tp_cluster_load("h200", NULL);
  GError *err = NULL;
  g_autoptr(TpAnalytic) a = tp_analytic_new_on(m, one, NULL, 2, 2, 8, TRUE, &err);
  g_assert_no_error(err);
  g_assert_true(tp_analytic_split(a, NULL, NULL, NULL, &err));
  g_autoptr(TpCost) cost = tp_analytic_cost(a);
  const TpDevice *d = &one->dev[0];
  untie(m); /* no sum */
  g_autoptr(TpCost) untied = tp_analytic_cost(a);
  for (int s = 0; s < 2; s++)
    g_assert_cmpfloat(fabs(cost->stage[s].upd - untied->stage[s].upd - 3 * table / (d->bandwidth * d->efficiency)), <,
                      1e-12 * cost->stage[s].upd);
}

/* tp_order_ties says what tp_tie_check finds in every preset's generated schedules at W 2-4 and
 * N 1-4 (those the preset takes), the head on the last stage: the orders that flush and run one chunk
 * per worker can tie, the others not.  And a head beside the embedding ties under any schedule. */
static void test_tie_orders(void)
{
  g_autoptr(TpModel) m = tpt_model_text("tokens 8 256\nembedding 16\nrepeat 8 block heads=2 ffn=32\nlm_head tied=1\n"
                                        "token_ce\n");
  const int L = tp_model_n_layers(m);
  int seen[2] = { 0, 0 };
  for (int p = 0; p < tp_n_presets; p++)
    for (int W = 2; W <= 4; W++)
      for (int N = 1; N <= 4; N++) {
        const TpPreset *ps = &tp_presets[p];
        g_autoptr(TpSchedule) s = tp_schedule_generate_chunked(ps->order, ps->policy, W, tp_order_default_chunks(ps->order),
                                                               N, 2 * W + 2, NULL, NULL);
        if (!s)
          continue;
        int bounds[TP_MAX_WORKERS + 1];
        for (int st = 0; st <= s->W; st++)
          bounds[st] = st * L / s->W;
        g_assert_cmpint(tp_tie_stage(m, bounds, s->W), ==, s->W - 1);
        GError *err = NULL;
        gboolean ties = tp_tie_check(m, bounds, s, &err);
        g_assert_cmpint(ties, ==, tp_order_ties(ps->order));
        g_assert_true(ties || strstr(err->message, "t.model:4: lm_head tied=1 on stage"));
        g_clear_error(&err);
        seen[ties]++;
        int beside[] = { 0, L - 1, L }; /* the head on the embedding's stage */
        g_assert_true(s->W != 2 || tp_tie_check(m, beside, s, NULL));
      }
  g_assert_cmpint(seen[0], >, 20);
  g_assert_cmpint(seen[1], >, 20);
}

/* What train refuses of a head tied across stages, simulate, compare and plot refuse alike, and plan
 * leaves out: its --run-top trains the plans it ranks. */
static void test_tie_refused(void)
{
  TptRun r = tpt_run((const char *[]){ "simulate", "-s", "timeprest", "--model", "gpt2-124m", "--cluster", "dgx-a100", "-w",
                                       "2", "-n", "4", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "gpt2-124m.json: the head (tie_word_embeddings) on stage 2 sums its gradient with "
                                 "stage 1's at each update, but stage 1 runs F(2,A) before the update of mini-batch 1"));
  g_assert_null(strchr(strchr(r.err, '\n') + 1, '\n')); /* one line */
  tpt_run_clear(&r);
  g_autofree char *png = tpt_tmp_path("tie.png");
  r = tpt_run((const char *[]){ "plot", "timeline", "-s", "pipedream", "--model", "gpt2-124m", "--cluster", "dgx-a100",
                                "-w", "2", "-o", png, NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "stage 1 runs F(2) before the update of mini-batch 1"));
  g_assert_false(g_file_test(png, G_FILE_TEST_EXISTS));
  tpt_run_clear(&r);
  tpt_tmp_remove(png);
  r = tpt_run((const char *[]){ "compare", "--model", "gpt2-124m", "--cluster", "dgx-a100", "-w", "2", "-n", "4", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "\npipedream        n/a: "));
  g_assert_null(strstr(r.out, "\n1f1b             n/a"));
  g_assert_null(strstr(r.out, "\nzb-v             n/a")); /* interleaved stages tie too */
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "plan", "--model", "gpt2-124m", "--cluster", "dgx-a100", "--batch", "16", "-w", "2", "-n",
                                "1-2", "--format", "json", NULL });
  g_assert_cmpint(r.status, ==, 0);
  /* the asynchronous presets searched, at W = 2 and N = 1, 2 (pipedream at N = 1, pipedream-2bw at N = 2) */
  g_assert_nonnull(strstr(r.out, "\"left_out_tied\": 11,"));
  g_assert_null(strstr(r.out, "\"preset\": \"pipedream"));
  g_assert_nonnull(strstr(r.out, "\"preset\": \"zb-h1\""));
  tpt_run_clear(&r);
  /* a tiny tied GPT profiled here: the plan asked for pipedream and 1f1b runs its top one */
  g_autofree char *model = tpt_tmp_path("tied-plan.model"), *prof = tpt_tmp_path("tied-plan.profile");
  g_assert_true(g_file_set_contents(model, "tokens 8 256\nembedding 32\nblock heads=4 ffn=64\nlayernorm\nlm_head tied=1\n"
                                    "token_ce\n", -1, NULL));
  r = tpt_run((const char *[]){ "profile", "--model", model, "--micro-batch-sizes", "2,4", "-r", "1", "-o", prof, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "plan", "--model", model, "--profile", prof, "--batch", "4", "-w", "2", "-n", "1-2",
                                "--presets", "pipedream,1f1b", "--run-top", "1", "--run-repetitions", "1",
                                "--run-mini-batches", "5", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "left out: 1 candidate of presets that cannot train"));
  g_assert_nonnull(strstr(r.out, "top choice confirmed: yes"));
  tpt_run_clear(&r);
  /* one candidate: a Pareto front of "1 plan" (how many the run above has depends on the profile) */
  r = tpt_run((const char *[]){ "plan", "--model", model, "--profile", prof, "--batch", "4", "-w", "2", "-n", "1",
                                "--presets", "1f1b", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "), 1 plan:\n"));
  tpt_run_clear(&r);
  r = tpt_run((const char *[]){ "plan", "--model", model, "--profile", prof, "--batch", "4", "-w", "2", "-n", "1",
                                "--presets", "pipedream", NULL });
  g_assert_cmpint(r.status, ==, 2);
  g_assert_nonnull(strstr(r.err, "tied head trains on another stage than its embedding only under gpipe"));
  tpt_run_clear(&r);
  tpt_tmp_remove(model), tpt_tmp_remove(prof);
}

/* AdamW in the analytic model: two optimizer floats a parameter (its state's bytes twice SGD's, in
 * the memory test too) and an update that streams seven arrays' worth of bytes to SGD's five. */
static void test_adamw_costs(void)
{
  g_autoptr(TpModel) m = tpt_model("llama-tiny");
  g_autoptr(TpCluster) c = tp_cluster_load("A", NULL);
  TpCost *cost[2];
  double held[2];
  for (int k = 0; k < 2; k++) {
    GError *err = NULL;
    g_autoptr(TpAnalytic) a = tp_analytic_new(m, c, 2, 4, 32, &err);
    g_assert_no_error(err);
    a->optimizer_states = 1 + k;
    int counts[2] = { 4, 4 };
    g_assert_true(tp_analytic_split(a, counts, NULL, NULL, &err));
    cost[k] = tp_analytic_cost(a);
    held[k] = tp_analytic_stage_bytes(a, 0, 0, 4, 1, 1);
  }
  for (int s = 0; s < 2; s++) {
    const TpStageCost *sgd = &cost[0]->stage[s], *adamw = &cost[1]->stage[s];
    g_assert_cmpfloat(sgd->optimizer_bytes, ==, sgd->weight_bytes);
    g_assert_cmpfloat(adamw->optimizer_bytes, ==, 2 * sgd->weight_bytes);
    g_assert_cmpfloat(fabs(adamw->upd / sgd->upd - 7.0 / 5.0), <, 1e-12);
    g_assert_cmpfloat(adamw->fwd, ==, sgd->fwd);
  }
  g_assert_cmpfloat(held[1] - held[0], ==, cost[0]->stage[0].weight_bytes);
  tp_cost_free(cost[0]), tp_cost_free(cost[1]);
  /* through the program, and refused without a model */
  TptRun r = tpt_run((const char *[]){ "simulate", "-m", "llama-tiny", "--cluster", "A", "-w", "2", "--optimizer", "adamw",
                                       NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  tpt_expect_cli_refused((const char *[]){ "simulate", "--optimizer", "adamw", NULL }, "--optimizer need --model");
  tpt_expect_cli_refused((const char *[]){ "simulate", "-m", "llama-tiny", "--cluster", "A", "-w", "2", "--optimizer",
                                           "adam", NULL }, "--optimizer");
}

/* A split backward's I in the analytic model is the layers' input-gradient share, Megatron-LM's
 * s·h·(24h + 8s) of the block's s·h·(48h + 8s) FLOPs: on a stage of blocks alone, exactly that
 * fraction of the stage's backward (a block is compute-bound on an H100), not the half a cost file
 * without backward_input gets. */
static void test_input_grad_share(void)
{
  g_autoptr(TpModel) m = tpt_model("gpt-1.5b");
  g_autoptr(TpCluster) c = tp_cluster_load("h100x8", NULL);
  GError *err = NULL;
  g_autoptr(TpAnalytic) a = tp_analytic_new_on(m, c, NULL, 3, 4, 16, TRUE, &err);
  g_assert_no_error(err);
  int L = tp_model_n_layers(m), counts[3] = { 1, L - 4, 3 }; /* embedding | the blocks | norm, head, loss */
  g_assert_true(tp_analytic_split(a, counts, NULL, NULL, &err));
  g_autoptr(TpCost) cost = tp_analytic_cost(a);
  const TpLayer *b = tp_model_layer(m, 1);
  double s = m->context, h = b->cin, want = (24 * h + 8 * s) / (48 * h + 8 * s);
  const TpStageCost *blocks = &cost->stage[1];
  g_assert_cmpfloat(fabs(blocks->bwd_input / blocks->bwd - want), <, 1e-12);
  g_assert_cmpfloat(fabs(tp_cost_input_grad(blocks) + tp_cost_weight_grad(blocks) - blocks->bwd), <, 1e-15);
  g_assert_cmpfloat(cost->stage[0].bwd_input, <=, cost->stage[0].bwd);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/transformer/parameter-counts", test_parameter_counts);
  g_test_add_func("/transformer/adamw-costs", test_adamw_costs);
  g_test_add_func("/transformer/input-grad-share", test_input_grad_share);
  g_test_add_func("/transformer/megatron-flops", test_megatron_flops);
  g_test_add_func("/transformer/korthikanti-activations", test_korthikanti_activations);
  g_test_add_func("/transformer/config-json", test_config_json);
  g_test_add_func("/transformer/config-refusals", test_config_refusals);
  g_test_add_func("/transformer/tensor-refusal", test_tensor_refusal);
  g_test_add_func("/transformer/syntax", test_syntax);
  g_test_add_func("/transformer/model-command", test_model_command);
  g_test_add_func("/transformer/costs", test_costs);
  g_test_add_func("/transformer/tied-bytes", test_tied_bytes);
  g_test_add_func("/transformer/tie-orders", test_tie_orders);
  g_test_add_func("/transformer/tie-refused", test_tie_refused);
  return g_test_run();
}
