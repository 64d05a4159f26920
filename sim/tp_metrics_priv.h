/* tp_metrics_priv.h — what the metrics' files share: the memory of every stage, computed on
 * threads while the caller goes on (tp_metrics_memory.c). */
#ifndef TP_METRICS_PRIV_H
#define TP_METRICS_PRIV_H

#include "tp_metrics.h"

/* Memory of every stage: the stages are independent, so large schedules spread them over the cores
 * (each thread takes the next stage from a shared counter and writes only that stage's entry). */
typedef struct {
  const TpSim *sim;
  TpMetrics *m;
  gint next;
} TpStageWork;

/* Start the memory of every stage on threads-1 more threads (none when one is enough) while the
 * caller goes on; tp_metrics_memory_finish joins in and waits for them. */
GThread **tp_metrics_memory_start(const TpSim *sim, TpStageWork *w, int *threads);
void tp_metrics_memory_finish(TpStageWork *w, GThread **t, int threads);

#endif
