/* tp_mpi_entry.c — the module tpmpi.so's entry point (tp_mpi_module.h): the transport's functions
 * in a table. */
#include "tp_mpi_module.h"

const TpMpiModule *tp_mpi_module(void);

static const TpMpiModule table = {
  .launched = tp_mpi_launched,
  .watchdog = tp_mpi_watchdog,
  .init = tp_mpi_init,
  .catch_signals = tp_mpi_catch_signals,
  .rank = tp_mpi_rank,
  .size = tp_mpi_size,
  .check_size = tp_mpi_check_size,
  .create = tp_mpi_new,
  .create_split = tp_mpi_new_split,
  .reduce_new = tp_mpi_reduce_new,
  .set_micro_batches = tp_mpi_set_micro_batches,
  .transport = tp_mpi_transport,
  .check_abort = tp_mpi_check_abort,
  .fail = tp_mpi_fail,
  .finalize = tp_mpi_finalize,
  .end_said = tp_mpi_end_said,
  .gather = tp_mpi_gather,
  .bcast = tp_mpi_bcast,
  .check_same = tp_mpi_check_same,
  .measure_links = tp_mpi_measure_links,
  .eager_limits = tp_mpi_eager_limits,
  .ping_pong = tp_mpi_ping_pong,
};

const TpMpiModule *tp_mpi_module(void)
{
  return &table;
}
