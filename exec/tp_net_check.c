/* tp_net_check.c — what the executor runs of a model: its layers, its loss last (tp_net.h). */
#include "config.h"
#include "tp_net.h"
#include "tp_net_priv.h"
#include "tp_error.h"

static gboolean supported(TpLayerKind k)
{
  return k == TP_LAYER_CONV || k == TP_LAYER_LINEAR || k == TP_LAYER_RELU || k == TP_LAYER_MAXPOOL ||
         k == TP_LAYER_AVGPOOL || k == TP_LAYER_AVGPOOL_TO || k == TP_LAYER_FLATTEN || k == TP_LAYER_DROPOUT ||
         k == TP_LAYER_SOFTMAX_CE || k == TP_LAYER_BATCHNORM || k == TP_LAYER_BOTTLENECK || tp_net_is_token_kind(k);
}

gboolean tp_net_check_model(const TpModel *m, GError **err)
{
  int total = tp_model_n_layers(m);
  for (int i = 0; i < total; i++) {
    const TpLayer *d = tp_model_layer(m, i);
    if (!supported(d->kind)) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: layer '%s' is not supported by the executor (supported: conv, "
                  "linear, relu, maxpool, avgpool, avgpool_to, flatten, dropout, batchnorm, softmax_ce, bottleneck, "
                  "embedding, layernorm, rmsnorm, block, lm_head, token_ce)", m->source, d->line,
                  tp_layer_names[d->kind]);
      return FALSE;
    }
    if ((d->kind == TP_LAYER_SOFTMAX_CE || d->kind == TP_LAYER_TOKEN_CE) && i != total - 1) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: %s must be the model's last layer", m->source, d->line,
                  tp_layer_names[d->kind]);
      return FALSE;
    }
  }
  return TRUE;
}

gboolean tp_net_check_trainable(const TpModel *m, GError **err)
{
  if (!tp_net_check_model(m, err))
    return FALSE;
  const TpLayer *d = tp_model_layer(m, tp_model_n_layers(m) - 1);
  if (d->kind != (m->vocab ? TP_LAYER_TOKEN_CE : TP_LAYER_SOFTMAX_CE)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: training needs a loss last: %s", m->source, d->line,
                m->vocab ? "token_ce (a language model's)" : "softmax_ce");
    return FALSE;
  }
  return TRUE;
}
