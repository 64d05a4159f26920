/* tp_nccl_loader.c — the NCCL transport's entry points (tp_nccl.h, its all-reduce's too) inside the program.
 *
 * The transport itself (tp_nccl.c, tp_nccl_boot.c) is the module tpnccl.so, linked against NCCL,
 * cudart and MPI; it is loaded here, with GModule, when a run asks for `--transport nccl`, so that
 * `timeprest` links no CUDA or NCCL library and commands that never use them never map them (the
 * cuda backend is loaded the same way, exec/tp_cuda_loader.c).  The module shares the process's one
 * MPI library (that of the MPI transport's module), so MPI started by tp_mpi_init is the module's.
 * Looked for at $TP_NCCL_MODULE, then in the build tree, then in the package's libexec directory. */
#include "config.h"
#include "tp_error.h"
#include "tp_module.h"
#include "tp_nccl.h"

typedef struct {
  char *error;
  TpTransport *(*make)(int N, double timeout_s, const char *devices, GError **err);
  int (*device)(const TpTransport *t);
  TpReduce *(*reduce)(int replicas, double timeout_s, GError **err);
} NcclModule;

static gpointer load(gpointer data)
{
  NcclModule *m = data;
  static const char *const names[] = { "tp_nccl_new", "tp_nccl_device", "tp_nccl_reduce_new", NULL };
  gpointer *const out[] = { (gpointer *)&m->make, (gpointer *)&m->device, (gpointer *)&m->reduce };
  char *why = NULL;
  GModule *mod = tp_module_open("tpnccl.so", "TP_NCCL_MODULE", &why);
  if (!mod || !tp_module_symbols(mod, names, out, &why)) {
    m->error = why;
    return NULL;
  }
  return m;
}

static NcclModule *module(const char **why)
{
  static NcclModule m;
  static GOnce once = G_ONCE_INIT;
  NcclModule *ok = g_once(&once, load, &m);
  if (!ok)
    *why = m.error;
  return ok;
}

gboolean tp_nccl_available(void) { return TRUE; }

TpTransport *tp_nccl_new(int N, double timeout_s, const char *devices, GError **err)
{
  const char *why = NULL;
  NcclModule *m = module(&why);
  if (!m) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_TRANSPORT, "transport nccl: %s", why);
    return NULL;
  }
  return m->make(N, timeout_s, devices, err);
}

int tp_nccl_device(const TpTransport *t)
{
  const char *why = NULL;
  NcclModule *m = module(&why);
  return m ? m->device(t) : -1;
}

TpReduce *tp_nccl_reduce_new(int replicas, double timeout_s, GError **err)
{
  const char *why = NULL;
  NcclModule *m = module(&why);
  if (!m) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "nccl all-reduce: %s", why);
    return NULL;
  }
  return m->reduce(replicas, timeout_s, err);
}
