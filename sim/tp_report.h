/* tp_report.h — the simulator's outputs: text report, JSON object (spec §6 keys), event CSV. */
#ifndef TP_REPORT_H
#define TP_REPORT_H

#include "tp_events.h"
#include "tp_metrics.h"

/* "slots" or "costs": the timeline the schedule's order was fixed on (JSON and CSV `order_fixed_on`). */
const char *tp_report_fixed_on(const TpSchedule *s);

void tp_report_text(const TpSim *sim, const TpMetrics *m, GString *out);
void tp_report_json(const TpSim *sim, const TpMetrics *m, GString *out);
/* A comment line naming the order's timeline, then one row per operation and per transfer,
 * ordered by stage and start time. */
void tp_report_events_csv(const TpSim *sim, GString *out);
/* The event rows of a timeline under its cost model (transfer bytes), with each operation's version
 * and its stage's latest version (a measured timeline's own where it has them), times on the run's
 * clock (t0 added). */
GArray *tp_events_from_sim(const TpSim *sim);
/* Bytes tp_events_from_sim's rows take: room for two (an operation and its transfer) per operation. */
long long tp_events_bytes(const TpSim *sim);

#endif
