/* tp_tensor.c — tensor parallelism in the cost model (Megatron-LM's split of a transformer block over
 * T devices of one node): a block's FLOPs and weights divided by T; its stored activations as
 * Korthikanti et al. (2022, "Reducing Activation Recomputation in Large Transformer Models") give
 * them — the layer norms' inputs, the inputs of the attention's and the MLP's first products and the
 * two dropout masks stay whole on every device (10·s·h bytes a sample for a GPT block), the rest is
 * divided by T; with sequence parallelism all of it is.  Simulated, not executed. */
#include "tp_error.h"
#include "tp_model.h"

/* Bytes a sample of block L keeps that tensor parallelism leaves whole on every device. */
static double replicated_bytes(const TpModel *m, const TpLayer *L)
{
  double e = m->elem_bytes, sd = (double)L->hin * (double)L->cin;
  return 2 * e * sd /* the norms' inputs */ + 2 * e * sd /* the inputs of the first products */ +
         (L->blk.dropout ? 2 * sd : 0) /* the dropout masks after attention and MLP */;
}

void tp_model_tensor_parallel(TpModel *m, int T, gboolean sequence)
{
  if (T <= 1)
    return;
  m->params = 0, m->fwd_flops = m->bwd_flops = 0;
  for (int i = 0; i < tp_model_n_layers(m); i++) {
    TpLayer *L = &g_array_index(m->layers, TpLayer, i);
    if (L->kind == TP_LAYER_BLOCK) {
      double whole = sequence ? 0 : MIN(replicated_bytes(m, L), L->stored_bytes);
      L->stored_bytes = whole + (L->stored_bytes - whole) / T;
      L->stored_elems = (long long)(L->stored_bytes / m->elem_bytes);
      L->params /= T, L->weights /= T;
      L->fwd_flops /= T, L->bwd_flops /= T, L->bwd_in_flops /= T, L->bwd_w_flops /= T;
    }
    m->params += L->params;
    m->fwd_flops += L->fwd_flops, m->bwd_flops += L->bwd_flops;
  }
  m->tensor_parallel = T;
}

gboolean tp_model_tensor_splits(const TpModel *m, int T)
{
  int blocks = 0;
  for (int i = 0; i < tp_model_n_layers(m); i++) {
    const TpLayer *L = tp_model_layer(m, i);
    if (L->kind != TP_LAYER_BLOCK)
      continue;
    blocks++;
    if (L->blk.heads % T || L->blk.kv_heads % T || L->blk.ffn % T)
      return FALSE;
  }
  return blocks > 0;
}

gboolean tp_model_tensor_check(const TpModel *m, int T, GError **err)
{
  if (T <= 1 || tp_model_tensor_splits(m, T))
    return TRUE;
  for (int i = 0; i < tp_model_n_layers(m); i++) { /* the first block that does not split */
    const TpLayer *L = tp_model_layer(m, i);
    if (L->kind == TP_LAYER_BLOCK && (L->blk.heads % T || L->blk.kv_heads % T || L->blk.ffn % T)) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--tensor-parallel %d: layer %d of model %s has %d heads, "
                  "%d KV heads and MLP width %d, not all multiples of %d", T, i + 1, m->name, L->blk.heads,
                  L->blk.kv_heads, L->blk.ffn, T);
      return FALSE;
    }
  }
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--tensor-parallel %d: model %s has no transformer blocks to split", T,
              m->name);
  return FALSE;
}
