/* fuzz-model.c — libFuzzer target: model descriptions (layer stacks), then the analytic cost model
 * on cluster A for 2 stages, split and turned into costs as `simulate --model` does. */
#include "fuzz.h"
#include "tp_analytic.h"
#include "tp_cost.h"
#include "tp_model.h"

static TpCluster *cluster;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  tp_fuzz_init();
  cluster = tp_cluster_load("A", NULL);
  return cluster ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (tp_fuzz_skip(data, size))
    return 0;
  g_autofree char *text = tp_fuzz_text(data, size); /* NUL-terminated, as the loaders read files */
  GError *err = NULL;
  TpModel *m = tp_model_parse(text, size, "fuzz.model", &err);
  tp_fuzz_check(m != NULL, err);
  if (!m)
    return 0;
  TpAnalytic *a = tp_analytic_new(m, cluster, 2, 2, 64, &err);
  gboolean ok = a && tp_analytic_split(a, NULL, NULL, NULL, &err);
  tp_fuzz_check(ok, err);
  if (ok)
    tp_cost_free(tp_analytic_cost(a));
  tp_analytic_free(a);
  tp_model_free(m);
  return 0;
}
