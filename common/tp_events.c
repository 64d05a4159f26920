/* tp_events.c — event lists to CSV and back (tp_events.h). */
#include "tp_events.h"
#include "tp_error.h"
#include "tp_keyfile.h"
#include "tp_schedule.h"
#include "tp_memory.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>

const char *const tp_ev_kind_names[TP_N_EV_KINDS] = { "F", "B", "U", "send-act", "send-grad", "I", "W" };

/* The columns every event file has; files written since the version mismatch was added have one more. */
#define EVENTS_HEADER "stage,kind,mini_batch,micro_batch,start,end,version,latest,staleness,bytes,peer"
#define EVENTS_MISMATCH ",version_mismatch"

void tp_events_write_csv(GArray *rows, GString *out)
{
  g_string_append(out, EVENTS_HEADER EVENTS_MISMATCH "\n");
  for (guint i = 0; i < rows->len; i++) {
    const TpEventRow *r = &g_array_index(rows, TpEventRow, i);
    char micro[16] = "";
    char t0[TP_NUM_LEN], t1[TP_NUM_LEN], b[TP_NUM_LEN];
    if (r->micro > 0)
      g_snprintf(micro, sizeof micro, "%d", r->micro);
    g_string_append_printf(out, "%d,%s,%d,%s,%s,%s,", r->stage, tp_ev_kind_names[r->kind], r->mb, micro,
                           tp_num(t0, "%.9g", r->start), tp_num(t1, "%.9g", r->end));
    if (tp_ev_is_op(r->kind))
      g_string_append_printf(out, "%d,%d,%d,,,", r->version, r->latest, r->kind == TP_EV_U ? 0 : r->latest - r->version);
    else
      g_string_append_printf(out, ",,,%s,%d,", tp_num(b, "%.9g", r->bytes), r->peer);
    if (r->mismatch >= 0)
      g_string_append_printf(out, "%d", r->mismatch);
    g_string_append_c(out, '\n');
  }
}

void tp_events_renumber(GArray *rows, int mb_offset)
{
  for (guint i = 0; i < rows->len; i++) {
    TpEventRow *r = &g_array_index(rows, TpEventRow, i);
    r->mb += mb_offset;
    if (tp_ev_is_op(r->kind))
      r->version += mb_offset, r->latest += mb_offset;
  }
}

/* A whole number from lo to hi; every count an event file gives is bounded by the project's limits. */
static gboolean field_int(const char *t, int lo, int hi, int *out) { return tp_parse_int(t, lo, hi, out, NULL); }

/* A time or byte count: finite, from 0 to 1e30 (far beyond any run, small enough for any sum). */
static gboolean field_num(const char *t, double *out) { return tp_kf_parse_number(t, out) && *out >= 0 && *out <= 1e30; }

GArray *tp_events_parse(const char *text, const char *name, GError **err)
{
  g_autofree char *what = g_strdup_printf("reading %s", name);
  if (!tp_memory_check_text(what, text, strlen(text), 4, FALSE, err))
    return NULL;
  g_auto(GStrv) lines = g_strsplit_set(text, "\n", -1);
  g_autoptr(GArray) rows = g_array_new(FALSE, FALSE, sizeof(TpEventRow));
  gboolean header = FALSE, has_mismatch = FALSE;
  guint ncols = 0; /* the header's columns: every row has as many fields */
  for (int ln = 0; lines[ln]; ln++) {
    char *line = g_strchomp(lines[ln]);
    if (!*line || line[0] == '#')
      continue;
    if (!header) {
      if (!g_str_has_prefix(line, EVENTS_HEADER)) {
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: expected the header '%s'", name, ln + 1, EVENTS_HEADER);
        return NULL;
      }
      header = TRUE;
      has_mismatch = g_str_has_prefix(line + strlen(EVENTS_HEADER), EVENTS_MISMATCH);
      g_auto(GStrv) cols = g_strsplit(line, ",", -1);
      ncols = g_strv_length(cols);
      continue;
    }
    g_auto(GStrv) f = g_strsplit(line, ",", -1);
    TpEventRow r = { .version = -1, .latest = -1, .mismatch = -1 };
    const char *bad = NULL;
    char nbad[64];
    int k;
    guint nf = g_strv_length(f);
    if (nf != ncols) {
      g_snprintf(nbad, sizeof nbad, "expected %u comma-separated fields (as the header), found %u", ncols, nf);
      bad = nbad;
    } else if (!field_int(f[0], 1, TP_MAX_WORKERS, &r.stage))
      bad = "bad stage (expected 1.." G_STRINGIFY(TP_MAX_WORKERS) ")";
    else {
      for (k = 0; k < TP_N_EV_KINDS && strcmp(f[1], tp_ev_kind_names[k]) != 0; k++)
        ;
      r.kind = (TpEvKind)k;
      if (k == TP_N_EV_KINDS)
        bad = "bad kind (F, B, U, send-act, send-grad)";
      else if (!field_int(f[2], 1, TP_MAX_MINI, &r.mb))
        bad = "bad mini_batch (expected 1.." G_STRINGIFY(TP_MAX_MINI) ")";
      else if (*f[3] && !field_int(f[3], 1, TP_MAX_MICRO, &r.micro))
        bad = "bad micro_batch (expected 1.." G_STRINGIFY(TP_MAX_MICRO) " or empty)";
      else if (!field_num(f[4], &r.start) || !field_num(f[5], &r.end) || r.end < r.start)
        bad = "bad start/end (numbers from 0 to 1e30, end >= start)";
      else if (tp_ev_is_op(r.kind) && (!field_int(f[6], 0, TP_MAX_MINI, &r.version) ||
                                     !field_int(f[7], 0, TP_MAX_MINI, &r.latest)))
        bad = "bad version/latest (expected 0.." G_STRINGIFY(TP_MAX_MINI) ")";
      else if (!tp_ev_is_op(r.kind) && (!field_num(f[9], &r.bytes) || !field_int(f[10], 1, TP_MAX_WORKERS, &r.peer) ||
                                    (r.peer != r.stage + 1 && r.peer != r.stage - 1)))
        bad = "bad bytes/peer of a transfer (a number of bytes; the neighbouring stage it goes to)";
      else if (has_mismatch && *f[11] && ((r.kind != TP_EV_B && r.kind != TP_EV_I) || !field_int(f[11], 0, TP_MAX_MINI, &r.mismatch)))
        bad = "bad version_mismatch (a whole number, on backward rows only)";
    }
    if (bad) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: %s", name, ln + 1, bad);
      return NULL;
    }
    g_array_append_val(rows, r);
  }
  if (!header) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: empty (no header '%s')", name, EVENTS_HEADER);
    return NULL;
  }
  return g_steal_pointer(&rows);
}

GArray *tp_events_load(const char *path, GError **err)
{
  g_autofree char *text = NULL;
  GStatBuf st;
  /* a regular file's size says what parsing holds: the text, its lines, a row per line (30 bytes
   * a line at the least); what a pipe brings is bounded by the reader alone */
  if (strcmp(path, "-") != 0 && g_stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
    long long n = (long long)st.st_size;
    g_autofree char *what = g_strdup_printf("reading %s", tp_input_name(path));
    if (!tp_memory_check(what, 0, 0, 0, 2 * n + tp_memory_grown(n / 30 * (long long)sizeof(TpEventRow)), err))
      return NULL;
  }
  if (!tp_read_file_max(path, "events file", tp_max_schedule_bytes(), &text, NULL, err))
    return NULL;
  return tp_events_parse(text, tp_input_name(path), err);
}
