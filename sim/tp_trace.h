/* tp_trace.h — Chrome trace-event JSON (opens in Perfetto): one process per stage, a compute lane
 * and a lane per link direction, one complete event per operation and per transfer. */
#ifndef TP_TRACE_H
#define TP_TRACE_H

#include "tp_metrics.h"

/* Times in seconds become microseconds; unit slots are drawn as 1 ms each.  Versions are those the
 * timeline records (a measured run's own), else the schedule's. */
void tp_trace_json(const TpSim *sim, GString *out);

#endif
