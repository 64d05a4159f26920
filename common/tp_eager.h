/* tp_eager.h — the eager limits of MPI links, which the simulator's memory model and the MPI
 * transport share: a send of more payload bytes than its link's eager limit completes only once
 * the receiver's operation takes it (MPI's rendezvous), so the sender holds its buffer until then.
 * The defaults are Open MPI's (pml ob1) for its shared-memory BTL (vader in 4.x, sm in 5.x) and its
 * TCP BTL; the MPI transport reads the values a job runs with (MCA parameters) where MPI lets it. */
#ifndef TP_EAGER_H
#define TP_EAGER_H

#define TP_EAGER_LIMIT_SHM 4096  /* btl_vader_eager_limit / btl_sm_eager_limit: ranks on one host */
#define TP_EAGER_LIMIT_TCP 65536 /* btl_tcp_eager_limit: ranks on different hosts */

#endif
