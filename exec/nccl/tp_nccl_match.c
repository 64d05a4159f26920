/* tp_nccl_match.c — the NCCL transport's bookkeeping that needs no GPU and no MPI: which
 * communicator a link uses, whether two ranks would share a GPU (the scheme is in tp_nccl.h; the headers and held messages it shares
 * with the MPI transport are in tp_msg_hdr.h).  Built in every configuration, so the tests check
 * it everywhere. */
#include "config.h"
#include "tp_nccl.h"

#include <string.h>

int tp_nccl_comm_of(int from, int to)
{
  if (from < 0 || to < 0 || (to != from + 1 && to != from - 1))
    return -1;
  int low = MIN(from, to);
  return (to > from ? 0 : 2) + (low & 1);
}


gboolean tp_nccl_shared_gpu(const TpNcclPlace *places, int n, int *a, int *b)
{
  for (int j = 1; j < n; j++)
    for (int i = 0; i < j; i++)
      if (strncmp(places[i].node, places[j].node, sizeof places[i].node) == 0 &&
          memcmp(places[i].uuid, places[j].uuid, sizeof places[i].uuid) == 0) {
        *a = i, *b = j;
        return TRUE;
      }
  return FALSE;
}
