/* tp_nccl_none.c — the NCCL transport's stand-in for builds without NCCL or without MPI: the same
 * entry points, refusing `--transport nccl` (and NCCL's all-reduce) with one clear line. */
#include "config.h"
#include "tp_error.h"
#include "tp_nccl.h"

gboolean tp_nccl_available(void) { return FALSE; }

TpTransport *tp_nccl_new(int N, double timeout_s, const char *devices, GError **err)
{
  (void)N, (void)timeout_s, (void)devices;
  g_set_error(err, TP_ERROR, TP_ERROR_PARAM_TRANSPORT, "transport nccl: " TP_NCCL_MISSING);
  return NULL;
}

int tp_nccl_device(const TpTransport *t)
{
  (void)t;
  return -1;
}

TpReduce *tp_nccl_reduce_new(int replicas, double timeout_s, GError **err)
{
  (void)replicas, (void)timeout_s;
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "nccl all-reduce: " TP_NCCL_MISSING);
  return NULL;
}
