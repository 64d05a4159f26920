/* tp_format_priv.h — pieces shared by the CSV and JSON schedule readers (not a public API). */
#ifndef TP_FORMAT_PRIV_H
#define TP_FORMAT_PRIV_H

#include "tp_schedule.h"

#define TP_SCHEDULE_FORMAT "timeprest-schedule"

/* A schedule shell with unset header fields, filled by a reader; name is kept for messages. */
TpSchedule *tp_schedule_blank(const char *name);
/* Apply one header item (order, policy, preset, workers, micro_batches, mini_batches, significance,
 * fixed_on, recompute); an order or policy that contradicts one already set (by the other of preset
 * and order/policy) is refused. */
gboolean tp_header_set(TpSchedule *s, const char *key, const char *value, GError **err);
/* Check the header is complete (a significance, sig_given, only for the intermediate policy) and
 * allocate the stage arrays (workers × chunks of them, with the workers' orders empty, when the
 * header gives chunks and chunk_map). */
gboolean tp_header_finish(TpSchedule *s, gboolean sig_given, GError **err);
/* One operation from its textual fields; micro NULL or "" = whole mini-batch, src NULL = fixed.
 * Sets *st (0-based stage).  The error message carries no location: the caller adds it. */
gboolean tp_op_parse(const TpSchedule *s, const char *stage, const char *kind, const char *mb, const char *micro,
                     const char *ver, const char *src, int *st, TpOp *op, GError **err);
/* The composite field of an operation just read (CSV column, JSON key): NULL or "" none, "fb" an F&B
 * composite it opens with its worker's next operation (*opens), read only with chunks and on an F.
 * The error message carries no location. */
gboolean tp_fb_mark_parse(const TpSchedule *s, const char *text, const TpOp *op, gboolean *opens, GError **err);
/* The F&B composites read from a file: each F's worker's next operation is a backward of a
 * micro-batch; refused as "name:line: bad composite: …" at the F's line. */
gboolean tp_fb_check_read(const TpSchedule *s, GError **err);
/* An operation of stage st was read: with interleaved stages it is next in its worker's order. */
static inline void tp_rank_seq_push(TpSchedule *s, int st)
{
  int32_t v = st;
  if (s->rank_seq)
    g_array_append_val(s->rank_seq[tp_stage_rank(s, st)], v);
}
TpSchedule *tp_schedule_parse_json(const char *text, gsize len, const char *name, GError **err);
/* PyTorch's compute-only CSV (tp_torch.c). */
TpSchedule *tp_schedule_parse_torch(const char *text, const char *name, GError **err);

#endif
