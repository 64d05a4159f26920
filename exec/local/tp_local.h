/* tp_local.h — the local transport: stages are threads of one process, each link direction a
 * queue of tagged messages. */
#ifndef TP_LOCAL_H
#define TP_LOCAL_H

#include "tp_transport.h"

/* A transport between W stage threads (N: micro-batches per mini-batch, for message names);
 * receives wait at most timeout_s. */
TpTransport *tp_local_new(int W, int N, double timeout_s);

#endif
