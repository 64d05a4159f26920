/* cmd_model.c — `timeprest model NAME|FILE`: every layer's shapes, parameters, FLOPs and stored
 * activations per sample, and the totals (what torchinfo shows a PyTorch user). */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_model.h"
#include "tp_output.h"

#include <string.h>

/* "C x H x W", or for a token model's sequences "W x S" (width by positions; token ids: "S tokens"). */
static void shape(const TpModel *m, long long c, long long h, long long w, char *buf, size_t len)
{
  if (m->vocab && w == 1 && c == 1 && h == m->context)
    g_snprintf(buf, len, "%lld tokens", h);
  else if (m->vocab && w == 1)
    g_snprintf(buf, len, "%lldx%lld", c, h);
  else if (h == 1 && w == 1)
    g_snprintf(buf, len, "%lld", c);
  else
    g_snprintf(buf, len, "%lldx%lldx%lld", c, h, w);
}

typedef struct {
  double fwd, bin, bw, stored;
} Totals;

static void text_report(const TpModel *m, GString *out)
{
  g_string_append_printf(out, "model %s: %lld parameters, %s", m->name, m->params, m->precision);
  if (m->vocab)
    g_string_append_printf(out, "; a sample is a sequence of %d tokens of a %d-token vocabulary", m->context, m->vocab);
  else
    g_string_append_printf(out, "; a sample is a %lldx%lldx%lld input", m->in_c, m->in_h, m->in_w);
  g_string_append(out, "\nper sample: FLOPs (2 per multiply-add) of the forward, the backward's input gradient and "
                       "weight gradient; bytes kept from forward to backward\n");
  if (m->tensor_parallel > 1)
    g_string_append_printf(out, "one device's share of blocks split %d ways (tensor parallelism, simulated, not "
                                "executed)\n", m->tensor_parallel);
  g_string_append_c(out, '\n');
  g_string_append_printf(out, "%5s  %-10s %-14s %-14s %14s %12s %12s %12s %14s\n", "layer", "kind", "input", "output",
                         "parameters", "forward", "input grad", "weight grad", "stored bytes");
  Totals t = { 0 };
  for (int i = 0; i < tp_model_n_layers(m); i++) {
    const TpLayer *L = tp_model_layer(m, i);
    char in[48], o[48], f[TP_NUM_LEN], bi[TP_NUM_LEN], bw[TP_NUM_LEN], st[TP_NUM_LEN];
    shape(m, L->cin, L->hin, L->win, in, sizeof in);
    shape(m, L->cout, L->hout, L->wout, o, sizeof o);
    g_string_append_printf(out, "%5d  %-10s %-14s %-14s %14lld %12s %12s %12s %14s\n", i + 1, tp_layer_names[L->kind],
                           in, o, L->params, tp_num(f, "%.4g", L->fwd_flops), tp_num(bi, "%.4g", L->bwd_in_flops),
                           tp_num(bw, "%.4g", L->bwd_w_flops), tp_num(st, "%.6g", L->stored_bytes));
    t.fwd += L->fwd_flops, t.bin += L->bwd_in_flops, t.bw += L->bwd_w_flops, t.stored += L->stored_bytes;
  }
  char f[TP_NUM_LEN], bi[TP_NUM_LEN], bw[TP_NUM_LEN], st[TP_NUM_LEN];
  g_string_append_printf(out, "%5s  %-10s %-14s %-14s %14lld %12s %12s %12s %14s\n", "", "total", "", "", m->params,
                         tp_num(f, "%.4g", t.fwd), tp_num(bi, "%.4g", t.bin), tp_num(bw, "%.4g", t.bw),
                         tp_num(st, "%.6g", t.stored));
}

static void json_report(const TpModel *m, GString *out)
{
  char a[TP_NUM_LEN], b[TP_NUM_LEN], c[TP_NUM_LEN], d[TP_NUM_LEN];
  /* a model's name holds no quote, backslash or control byte (tp_name_problem) */
  g_string_append_printf(out, "{\n  \"model\": \"%s\",\n  \"parameters\": %lld,\n  \"precision\": \"%s\",\n  "
                              "\"element_bytes\": %d,\n", m->name, m->params, m->precision, m->elem_bytes);
  if (m->tensor_parallel > 1)
    g_string_append_printf(out, "  \"tensor_parallel\": %d,\n  \"executed\": false,\n", m->tensor_parallel);
  if (m->vocab)
    g_string_append_printf(out, "  \"context\": %d,\n  \"vocabulary\": %d,\n", m->context, m->vocab);
  else
    g_string_append_printf(out, "  \"input\": [%lld, %lld, %lld],\n", m->in_c, m->in_h, m->in_w);
  g_string_append(out, "  \"layers\": [\n");
  Totals t = { 0 };
  for (int i = 0; i < tp_model_n_layers(m); i++) {
    const TpLayer *L = tp_model_layer(m, i);
    g_string_append_printf(out, "    {\"layer\": %d, \"kind\": \"%s\", \"input\": [%lld, %lld, %lld], "
                                "\"output\": [%lld, %lld, %lld], \"parameters\": %lld, \"forward_flops\": %s, "
                                "\"backward_input_flops\": %s, \"backward_weight_flops\": %s, "
                                "\"stored_activation_bytes\": %s}%s\n",
                           i + 1, tp_layer_names[L->kind], L->cin, L->hin, L->win, L->cout, L->hout, L->wout, L->params,
                           tp_num(a, "%.17g", L->fwd_flops), tp_num(b, "%.17g", L->bwd_in_flops),
                           tp_num(c, "%.17g", L->bwd_w_flops), tp_num(d, "%.17g", L->stored_bytes),
                           i + 1 < tp_model_n_layers(m) ? "," : "");
    t.fwd += L->fwd_flops, t.bin += L->bwd_in_flops, t.bw += L->bwd_w_flops, t.stored += L->stored_bytes;
  }
  g_string_append_printf(out, "  ],\n  \"totals\": {\"forward_flops\": %s, \"backward_input_flops\": %s, "
                              "\"backward_weight_flops\": %s, \"stored_activation_bytes\": %s}\n}\n",
                         tp_num(a, "%.17g", t.fwd), tp_num(b, "%.17g", t.bin), tp_num(c, "%.17g", t.bw),
                         tp_num(d, "%.17g", t.stored));
}

gboolean tp_cmd_model(int argc, char **argv, GError **err)
{
  g_autofree char *format = NULL, *output = NULL, *model = NULL, *tensor = NULL;
  gboolean sequence = FALSE;
  int T = 1;
  g_auto(GStrv) rest = NULL;
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model, "The model: a name, a .model file or a config.json", "NAME" },
    { "format", 'f', 0, G_OPTION_ARG_STRING, &format, "text (default) or json", "FORMAT" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Write to FILE instead of standard output", "FILE" },
    { "tensor-parallel", 0, 0, G_OPTION_ARG_STRING, &tensor,
      "One device's share of the transformer blocks split T ways (simulated, not executed)", "T" },
    { "sequence-parallel", 0, 0, G_OPTION_ARG_NONE, &sequence,
      "With --tensor-parallel: the blocks' remaining activations split too", NULL },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &rest, NULL, "NAME|FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("NAME|FILE - a model's layers: shapes, parameters, FLOPs, memory");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx,
    "Per sample: forward FLOPs, the backward's input-gradient and weight-gradient FLOPs (2 per multiply-add; a\n"
    "transformer block's as Megatron-LM counts them, the full s x s attention) and the bytes kept from forward\n"
    "to backward at the model's precision (Korthikanti et al. for a block).  A model is a name (models/NAME.model\n"
    "or NAME.json), a .model file or a Hugging Face config.json (Llama, Mistral, Qwen2, GPT-2).\n\n"
    "Example: timeprest model llama-tiny\n"
    "         timeprest model gpt2-124m --format json");
  static const char *const formats[] = { "text", "json", NULL };
  int fmt = 0;
  if (!tp_cli_parse(ctx, &argc, &argv, err) || (format && !tp_cli_choice("--format", format, formats, &fmt, err)) ||
      (tensor && !tp_cli_int("--tensor-parallel", tensor, 1, 1024, &T, err)))
    return FALSE;
  if (sequence && T < 2) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--sequence-parallel needs --tensor-parallel T with T > 1");
    return FALSE;
  }
  guint n = rest ? g_strv_length(rest) : 0;
  if ((n == 0) == (model == NULL) || n > 1) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "give one model, as NAME|FILE or with -m");
    return FALSE;
  }
  const char *which = model ? model : rest[0];
  const TpCliInput in[] = { { model ? "-m" : "the model", which, tp_model_path } };
  if (!tp_cli_check_output(output, 1, in, err))
    return FALSE;
  g_autoptr(TpModel) m = tp_model_load(which, err);
  if (!m)
    return FALSE;
  if (!tp_model_tensor_check(m, T, err))
    return FALSE;
  tp_model_tensor_parallel(m, T, sequence);
  g_autoptr(GString) out = g_string_new(NULL);
  (fmt ? json_report : text_report)(m, out);
  return tp_cli_emit(output, out, err);
}
