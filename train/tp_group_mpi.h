/* tp_group_mpi.h — the group (tp_group.h) of a run with one MPI rank per stage, over this rank's
 * MPI transport (exec/mpi/tp_mpi.h). */
#ifndef TP_GROUP_MPI_H
#define TP_GROUP_MPI_H

#include "tp_group.h"
#include "tp_mpi.h"

/* The group over mpi (tp_mpi_new), which stays the caller's and must outlive it. */
TpGroup *tp_group_mpi_new(TpMpi *mpi);

#endif
