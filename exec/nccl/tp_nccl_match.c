/* tp_nccl_match.c — the NCCL transport's bookkeeping that needs no GPU and no MPI: which
 * communicator a link uses (the scheme is in tp_nccl.h; the headers and held messages it shares
 * with the MPI transport are in tp_msg_hdr.h).  Built in every configuration, so the tests check
 * it everywhere. */
#include "config.h"
#include "tp_nccl.h"

int tp_nccl_comm_of(int from, int to)
{
  if (from < 0 || to < 0 || (to != from + 1 && to != from - 1))
    return -1;
  int low = MIN(from, to);
  return (to > from ? 0 : 2) + (low & 1);
}

