/* tp_mpi_module.h — the MPI transport as the module tpmpi.so: its table of tp_mpi.h's functions.
 *
 * Open MPI's libraries (libmpi, its runtime, hwloc, libevent) cost about 7 ms of relocation at every
 * start of a program that links them.  The program links instead the loader (tp_mpi_loader.c),
 * whose functions of the same names load the module the first time one is called and call its
 * table; a command that never does (simulate, plan, …) never maps MPI.  The module takes what it
 * needs of common/ (signals, digests, errors) from the program, which exports its functions
 * (GModule's --export-dynamic), so that their state is the program's own. */
#ifndef TP_MPI_MODULE_H
#define TP_MPI_MODULE_H

#include "tp_mpi.h"

typedef struct {
  gboolean (*launched)(void);
  void (*watchdog)(double seconds, const char *what);
  gboolean (*init)(int *argc, char ***argv, GError **err);
  void (*catch_signals)(void);
  int (*rank)(void);
  int (*size)(void);
  gboolean (*check_size)(int W, GError **err);
  TpMpi *(*create)(int N, double timeout_s, GError **err);
  TpMpi *(*create_split)(int N, double timeout_s, int replicas, GError **err);
  struct TpReduce *(*reduce_new)(TpMpi *m, int replicas, int tie_stage, double timeout_s, GError **err);
  void (*set_micro_batches)(TpMpi *m, int N);
  TpTransport *(*transport)(TpMpi *m);
  gboolean (*check_abort)(TpMpi *m, GError **err);
  void (*fail)(TpMpi *m, const char *line, int status);
  void (*finalize)(TpMpi *m);
  void (*end_said)(TpMpi *m, gboolean says);
  gboolean (*gather)(TpMpi *m, int root, const void *mine, size_t len, void *all, GError **err);
  gboolean (*bcast)(TpMpi *m, int root, void *buf, size_t len, const char *doing, GError **err);
  gboolean (*check_same)(TpMpi *m, const char *text, GError **err);
  gboolean (*measure_links)(TpMpi *m, int reps, size_t large_bytes, gboolean raw, TpMpiLink *links, GError **err);
  gboolean (*eager_limits)(TpMpi *m, double *limits, GError **err);
  gboolean (*ping_pong)(TpMpi *m, const size_t *sizes, const int *rounds, int n, gboolean raw, double *best,
                        double *median, GError **err);
} TpMpiModule;

/* The module's entry point: returns its table. */
#define TP_MPI_MODULE_SYMBOL "tp_mpi_module"

#endif
