/* tp_events.h — the event list of a timeline (tp_timeline.h), simulated or measured: one row per
 * operation and per transfer, written and read as CSV (stage,kind,mini_batch,micro_batch,start,end,
 * version,latest,staleness,bytes,peer,version_mismatch; files without the last column are read
 * too), so that predictions and measurements can be compared and plotted. */
#ifndef TP_EVENTS_H
#define TP_EVENTS_H

#include <glib.h>

/* A split backward's parts (I, W) come last so that the other kinds keep their values. */
typedef enum { TP_EV_F, TP_EV_B, TP_EV_U, TP_EV_SEND_ACT, TP_EV_SEND_GRAD, TP_EV_I, TP_EV_W, TP_N_EV_KINDS } TpEvKind;
/* An operation (F, B, U, I, W), not a transfer. */
static inline gboolean tp_ev_is_op(int k) { return k <= TP_EV_U || k >= TP_EV_I; }
/* A computation that carries a micro-batch label: F, B, I, W. */
static inline gboolean tp_ev_is_compute(int k) { return k <= TP_EV_B || k >= TP_EV_I; }
/* The event kind of an operation kind (TpOpKind: F, B, U, I, W = 0..4) and back. */
static inline TpEvKind tp_ev_from_op(int op_kind) { return (TpEvKind)(op_kind <= TP_EV_U ? op_kind : op_kind + 2); }
static inline int tp_ev_to_op(TpEvKind k) { return k <= TP_EV_U ? (int)k : (int)k - 2; }
extern const char *const tp_ev_kind_names[TP_N_EV_KINDS];

typedef struct {
  int stage;      /* 1-based */
  TpEvKind kind;
  int mb, micro;  /* micro 1-based, 0 = whole mini-batch or none */
  double start, end;
  int version, latest; /* -1 for transfers */
  double bytes;   /* transfers */
  int peer;       /* receiving stage of a transfer, 0 otherwise */
  int mismatch;   /* backward: version read minus its forward's, the largest over its micro-batches; else -1 */
} TpEventRow;

/* The header line, then one line per row (rows of TpEventRow). */
void tp_events_write_csv(GArray *rows, GString *out);
/* The rows of a schedule run after mb_offset mini-batches of the same run: mini-batches, versions
 * and latest versions numbered as the run's (version k of that schedule is version k + mb_offset). */
void tp_events_renumber(GArray *rows, int mb_offset);
/* Read an event CSV (lines starting with '#' are comments); errors (TP_ERROR_INPUT) name file:line.
 * parse: text, named name in errors. */
GArray *tp_events_load(const char *path, GError **err);
GArray *tp_events_parse(const char *text, const char *name, GError **err);

#endif
