/* tp_mpi_none.c — the MPI transport's functions in a build without MPI: each says so
 * (TP_MPI_MISSING), so --transport mpi is refused with one clear line. */
#include "tp_mpi.h"
#include "tp_error.h"

#include <stdio.h>
#include <stdlib.h>

static void missing(GError **err) { g_set_error_literal(err, TP_ERROR, TP_ERROR_INPUT, TP_MPI_MISSING); }

gboolean tp_mpi_available(void) { return FALSE; }
const char *tp_mpi_missing(void) { return TP_MPI_MISSING; }
gboolean tp_mpi_launched(void) { return FALSE; }

gboolean tp_mpi_init(int *argc, char ***argv, GError **err)
{
  (void)argc, (void)argv;
  missing(err);
  return FALSE;
}

void tp_mpi_watchdog(double seconds, const char *what) { (void)seconds, (void)what; }
int tp_mpi_rank(void) { return 0; }
int tp_mpi_size(void) { return 1; }
gboolean tp_mpi_check_size(int W, GError **err)
{
  (void)W;
  missing(err);
  return FALSE;
}

TpMpi *tp_mpi_new(int N, double timeout_s, GError **err)
{
  (void)N, (void)timeout_s;
  missing(err);
  return NULL;
}

TpMpi *tp_mpi_new_split(int N, double timeout_s, int replicas, GError **err)
{
  (void)N, (void)timeout_s, (void)replicas;
  missing(err);
  return NULL;
}

struct TpReduce *tp_mpi_reduce_new(TpMpi *m, int replicas, int tie_stage, double timeout_s, GError **err)
{
  (void)m, (void)replicas, (void)tie_stage, (void)timeout_s;
  missing(err);
  return NULL;
}

void tp_mpi_set_micro_batches(TpMpi *m, int N) { (void)m, (void)N; }

TpTransport *tp_mpi_transport(TpMpi *m)
{
  (void)m;
  return NULL;
}

gboolean tp_mpi_check_abort(TpMpi *m, GError **err)
{
  (void)m, (void)err;
  return FALSE;
}

void tp_mpi_fail(TpMpi *m, const char *line, int status)
{
  (void)m;
  fprintf(stderr, "%s\n", line);
  exit(status);
}

void tp_mpi_finalize(TpMpi *m) { (void)m; }

void tp_mpi_end_said(TpMpi *m, gboolean says) { (void)m, (void)says; }

gboolean tp_mpi_measure_links(TpMpi *m, int reps, size_t large_bytes, gboolean raw, TpMpiLink *links,
                              GError **err)
{
  (void)m, (void)reps, (void)large_bytes, (void)raw, (void)links;
  missing(err);
  return FALSE;
}

gboolean tp_mpi_eager_limits(TpMpi *m, double *limits, GError **err)
{
  (void)m, (void)limits;
  missing(err);
  return FALSE;
}

gboolean tp_mpi_ping_pong(TpMpi *m, const size_t *sizes, const int *rounds, int n, gboolean raw, double *best,
                          double *median, GError **err)
{
  (void)m, (void)sizes, (void)rounds, (void)n, (void)raw, (void)best, (void)median;
  missing(err);
  return FALSE;
}

gboolean tp_mpi_gather(TpMpi *m, int root, const void *mine, size_t len, void *all, GError **err)
{
  (void)m, (void)root, (void)mine, (void)len, (void)all;
  missing(err);
  return FALSE;
}

gboolean tp_mpi_check_same(TpMpi *m, const char *text, GError **err)
{
  (void)m, (void)text;
  missing(err);
  return FALSE;
}

gboolean tp_mpi_bcast(TpMpi *m, int root, void *buf, size_t len, const char *doing, GError **err)
{
  (void)m, (void)root, (void)buf, (void)len, (void)doing;
  missing(err);
  return FALSE;
}

void tp_mpi_catch_signals(void) {}
