/* tp_mpi_loader.c — tp_mpi.h's functions in the program: each loads the module tpmpi.so
 * (tp_mpi_module.h) once, with GModule, and calls its table.  Where the module cannot be loaded
 * the transport is not available: the functions that report errors give the module's reason, the
 * others do what tp_mpi_none.c's do. */
#include "config.h"
#include "tp_mpi_module.h"
#include "tp_error.h"
#include "tp_module.h"

#include <stdio.h>
#include <stdlib.h>

static TpModuleOnce mpi = TP_MODULE_ONCE("tpmpi.so", "TP_MPI_MODULE", TP_MPI_MODULE_SYMBOL, "MPI");

/* The table; NULL with the module's reason in *err. */
static const TpMpiModule *mod(GError **err)
{
  const char *why = NULL;
  const TpMpiModule *m = tp_module_get(&mpi, &why);
  if (!m)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s", why);
  return m;
}

gboolean tp_mpi_available(void) { return mod(NULL) != NULL; }

const char *tp_mpi_missing(void)
{
  const char *why = NULL;
  return tp_module_get(&mpi, &why) ? NULL : why;
}

gboolean tp_mpi_launched(void)
{
  const TpMpiModule *m = mod(NULL);
  return m && m->launched();
}

void tp_mpi_watchdog(double seconds, const char *what)
{
  const TpMpiModule *m = mod(NULL);
  if (m)
    m->watchdog(seconds, what);
}

gboolean tp_mpi_init(int *argc, char ***argv, GError **err)
{
  const TpMpiModule *m = mod(err);
  return m && m->init(argc, argv, err);
}

void tp_mpi_catch_signals(void)
{
  const TpMpiModule *m = mod(NULL);
  if (m)
    m->catch_signals();
}

int tp_mpi_rank(void)
{
  const TpMpiModule *m = mod(NULL);
  return m ? m->rank() : 0;
}

int tp_mpi_size(void)
{
  const TpMpiModule *m = mod(NULL);
  return m ? m->size() : 1;
}

gboolean tp_mpi_check_size(int W, GError **err)
{
  const TpMpiModule *m = mod(err);
  return m && m->check_size(W, err);
}

TpMpi *tp_mpi_new(int N, double timeout_s, GError **err)
{
  const TpMpiModule *m = mod(err);
  return m ? m->create(N, timeout_s, err) : NULL;
}

TpMpi *tp_mpi_new_split(int N, double timeout_s, int replicas, GError **err)
{
  const TpMpiModule *m = mod(err);
  return m ? m->create_split(N, timeout_s, replicas, err) : NULL;
}

/* The functions below take a TpMpi, which only the module makes: it is loaded. */

struct TpReduce *tp_mpi_reduce_new(TpMpi *m, int replicas, int tie_stage, double timeout_s, GError **err)
{
  return mod(NULL)->reduce_new(m, replicas, tie_stage, timeout_s, err);
}

void tp_mpi_set_micro_batches(TpMpi *m, int N) { mod(NULL)->set_micro_batches(m, N); }
TpTransport *tp_mpi_transport(TpMpi *m) { return mod(NULL)->transport(m); }
gboolean tp_mpi_check_abort(TpMpi *m, GError **err) { return mod(NULL)->check_abort(m, err); }
void tp_mpi_end_said(TpMpi *m, gboolean says) { mod(NULL)->end_said(m, says); }

void tp_mpi_fail(TpMpi *m, const char *line, int status)
{
  const TpMpiModule *t = mod(NULL);
  if (t)
    t->fail(m, line, status); /* does not return */
  fprintf(stderr, "%s\n", line);
  exit(status);
}

void tp_mpi_finalize(TpMpi *m)
{
  const TpMpiModule *t = mod(NULL);
  if (t)
    t->finalize(m);
}

gboolean tp_mpi_gather(TpMpi *m, int root, const void *mine, size_t len, void *all, GError **err)
{
  return mod(NULL)->gather(m, root, mine, len, all, err);
}

gboolean tp_mpi_bcast(TpMpi *m, int root, void *buf, size_t len, const char *doing, GError **err)
{
  return mod(NULL)->bcast(m, root, buf, len, doing, err);
}

gboolean tp_mpi_check_same(TpMpi *m, const char *text, GError **err)
{
  return mod(NULL)->check_same(m, text, err);
}

gboolean tp_mpi_measure_links(TpMpi *m, int reps, size_t large_bytes, gboolean raw, TpMpiLink *links,
                              GError **err)
{
  return mod(NULL)->measure_links(m, reps, large_bytes, raw, links, err);
}

gboolean tp_mpi_eager_limits(TpMpi *m, double *limits, GError **err)
{
  return mod(NULL)->eager_limits(m, limits, err);
}

gboolean tp_mpi_ping_pong(TpMpi *m, const size_t *sizes, const int *rounds, int n, gboolean raw, double *best,
                          double *median, GError **err)
{
  return mod(NULL)->ping_pong(m, sizes, rounds, n, raw, best, median, err);
}
