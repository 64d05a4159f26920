/* tp_format.c — grid and CSV forms of a schedule; file loading with format detection. */
#include "tp_format.h"
#include "tp_format_priv.h"
#include "tp_error.h"
#include "tp_index.h"
#include "tp_policy.h"
#include "tp_replay.h"
#include "tp_validate.h"
#include "tp_memory.h"
#include "tp_digest.h"
#include "tp_parallel.h"

#include <stdio.h>
#include <string.h>

gboolean tp_format_grid(const TpSchedule *s, GString *out, GError **err)
{
  g_autoptr(TpIndex) ix = NULL;
  int64_t *start, *end;
  gboolean ok = tp_replay_indexed(s, &ix, &start, &end, err);
  int64_t span = 0;
  long long bytes = 0;
  if (ok) {
    long total = ix->off[s->W];
    for (long g = 0; g < total; g++)
      span = MAX(span, end[g]);
    /* a token per slot of every stage: at most "I" or "W", the mini-batch, the micro-batch (".27" when
     * wide), "b", and a space; the text is sized once, so that it does not grow through copies */
    char num[2][24];
    int tok = 1 + snprintf(num[0], sizeof num[0], "%d", s->K) +
              (s->N > 26 ? 1 + snprintf(num[1], sizeof num[1], "%d", s->N) : 1) + 1 + 1;
    bytes = (long long)out->len + (long long)s->W * span * tok + 1;
    ok = tp_memory_check("writing the grid", s->W, s->N, s->K,
                         tp_memory_grown(bytes) + span * (long long)sizeof(long), err);
  }
  if (ok) {
    tp_string_reserve(out, bytes);
    long *slot = g_new(long, span); /* global op index per slot of one stage, -1 idle */
    for (int st = 0; st < s->W; st++) {
      for (int64_t t = 0; t < span; t++)
        slot[t] = -1;
      for (long g = ix->off[st]; g < ix->off[st + 1]; g++)
        if (end[g] > start[g])
          slot[start[g]] = g;
      for (int64_t t = 0; t < span; t++) {
        char tok[32] = ".";
        if (slot[t] >= 0) {
          const TpOp *op = &tp_stage_ops(s, st)[slot[t] - ix->off[st]];
          tp_op_format(TP_NAME_GRID, (TpOpKind)op->kind, op->mb, op->micro, s->N > 26, tok, sizeof tok);
        }
        g_string_append(out, tok);
        g_string_append_c(out, t + 1 < span ? ' ' : '\n');
      }
    }
    g_free(slot);
  }
  g_free(start);
  g_free(end);
  return ok;
}

static void format_header(const TpSchedule *s, GString *out, const char *lead)
{
  g_string_append_printf(out, "%sorder=%s policy=%s workers=%d micro_batches=%d mini_batches=%d fixed_on=%s", lead,
                         tp_order_name(s->order), tp_policy_name(s->policy), tp_schedule_ranks(s), s->N, s->K,
                         tp_fixed_on_name(s->fixed_on));
  if (s->rank_seq) /* absent: one chunk per worker, so every other file reads and writes the same */
    g_string_append_printf(out, " chunks=%d chunk_map=%s", s->V, tp_chunk_map_name(s->map));
  if (s->policy == TP_POLICY_INTERMEDIATE) {
    g_autofree char *sig = tp_significance_to_string(&s->sig);
    g_string_append_printf(out, " significance=%s", sig);
  }
  if (s->recompute) /* absent: false, so files written before recomputation read the same */
    g_string_append(out, " recompute=true");
  g_string_append_c(out, '\n');
}

/* Text or digest bytes gathered in a block that stays in cache, handed on when nearly full. */
enum { SINK_BLOCK = 1 << 16, SINK_ROW_MAX = 64 };
typedef struct {
  GString *text;   /* the CSV's text, or NULL */
  TpSha256 *hash;  /* the digest's, or NULL */
  int prev_st;     /* the digest's previous row */
  int32_t prev_mb;
  gboolean opens;  /* the row handed to a RowFn opens an F&B composite with its worker's next one */
  size_t n;
  char buf[SINK_BLOCK];
} Sink;

#define CSV_COLUMNS "stage,op,mini_batch,micro_batch,version,source"
#define CSV_COMPOSITE ",composite" /* the seventh column, only in files of schedules with F&B composites */

/* Every operation with its stage, in the order the CSV lists them: stage by stage, or for interleaved
 * stages each worker's operations in its order across its chunks (the file keeps that order); with
 * F&B composites the sink says whether the row opens one. */
typedef void (*RowFn)(Sink *k, int st, const TpOp *op);
static void each_row(const TpSchedule *s, RowFn row, Sink *k)
{
  if (s->rank_seq || s->fb) { /* without chunks a worker's order is its stage's */
    int *pos = g_new0(int, s->W);
    for (int r = 0; r < tp_schedule_ranks(s); r++) {
      int n = s->rank_seq ? (int)s->rank_seq[r]->len : tp_stage_len(s, r);
      guint c = 0; /* the worker's next composite */
      for (int j = 0; j < n; j++) {
        int st = s->rank_seq ? g_array_index(s->rank_seq[r], int32_t, j) : r;
        k->opens = tp_fb_opens(s, r, c, j);
        c += k->opens;
        row(k, st, &tp_stage_ops(s, st)[pos[st]++]);
      }
    }
    g_free(pos);
    return;
  }
  for (int st = 0; st < s->W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    for (int j = 0, n = tp_stage_len(s, st); j < n; j++)
      row(k, st, &ops[j]);
  }
}

static void sink_flush(Sink *k)
{
  if (k->text)
    g_string_append_len(k->text, k->buf, (gssize)k->n);
  else
    tp_sha256_update(k->hash, k->buf, k->n);
  k->n = 0;
}

/* Room for one more row. */
static inline char *sink_row(Sink *k)
{
  if (k->n > SINK_BLOCK - SINK_ROW_MAX)
    sink_flush(k);
  return k->buf + k->n;
}

/* v >= 0 in decimal; the end of what was written. */
static inline char *put_uint(char *p, uint32_t v)
{
  char tmp[10];
  int n = 0;
  do
    tmp[n++] = (char)('0' + v % 10);
  while ((v /= 10) > 0);
  while (n > 0)
    *p++ = tmp[--n];
  return p;
}

static inline char *put_int(char *p, int32_t v)
{
  if (v < 0)
    *p++ = '-';
  return put_uint(p, v < 0 ? 0u - (uint32_t)v : (uint32_t)v);
}

static void csv_put_row(Sink *k, int st, const TpOp *op)
{
  char *p0 = sink_row(k), *p = put_uint(p0, (uint32_t)st + 1);
  *p++ = ',', *p++ = tp_op_letters[op->kind], *p++ = ',';
  p = put_int(p, op->mb);
  *p++ = ',';
  if (op->micro != TP_WHOLE && op->kind != TP_OP_U)
    p = put_int(p, op->micro + 1);
  *p++ = ',';
  p = put_int(p, op->ver);
  *p++ = ',';
  const char *src = tp_source_names[op->src];
  size_t n = strlen(src);
  memcpy(p, src, n);
  p[n] = '\n';
  k->n += (size_t)(p + n + 1 - p0);
}

/* A row with the composite column: "fb" where it opens an F&B composite, else empty. */
static void csv_put_row_fb(Sink *k, int st, const TpOp *op)
{
  csv_put_row(k, st, op);
  k->n--; /* its newline */
  memcpy(k->buf + k->n, k->opens ? ",fb\n" : ",\n", k->opens ? 4 : 2);
  k->n += k->opens ? 4 : 2;
}

/* The digest record's integers: unsigned LEB128, signed ones zigzag-mapped first. */
static inline char *put_leb(char *p, uint64_t v)
{
  while (v >= 0x80) {
    *p++ = (char)(v | 0x80);
    v >>= 7;
  }
  *p++ = (char)v;
  return p;
}

static inline uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)-(v < 0); }

/* One operation of the digest record (docs/formats.md, "The schedule's digest"): a tag byte — kind,
 * source << 3, 32 when the stage differs from the previous row's, 64 when a micro-batch is named —
 * then the stage if it changed, mini-batch minus the previous row's, the micro-batch if named, and
 * mini-batch minus version; written at p, the end returned.  The previous row's stage and mini-batch
 * are the caller's (locals, kept in registers: the record's bytes may alias anything). */
static inline char *digest_op(char *p, int st, const TpOp *op, int *prev_st, int32_t *prev_mb)
{
  gboolean moved = st != *prev_st, micro = op->micro != TP_WHOLE && op->kind != TP_OP_U;
  *p++ = (char)(op->kind | op->src << 3 | moved << 5 | micro << 6);
  if (moved)
    p = put_leb(p, (uint64_t)st);
  p = put_leb(p, zigzag((int64_t)op->mb - *prev_mb));
  if (micro)
    p = put_leb(p, (uint64_t)op->micro);
  p = put_leb(p, zigzag((int64_t)op->mb - op->ver));
  *prev_st = st, *prev_mb = op->mb;
  return p;
}

static void digest_row(Sink *k, int st, const TpOp *op)
{
  int prev_st = k->prev_st;
  int32_t prev_mb = k->prev_mb;
  char *p0 = sink_row(k);
  k->n += (size_t)(digest_op(p0, st, op, &prev_st, &prev_mb) - p0);
  k->prev_st = prev_st, k->prev_mb = prev_mb;
  if (k->opens) /* 128 in its tag: an operation that opens an F&B composite */
    p0[0] = (char)(p0[0] | 0x80);
}

/* Every row of s through row into a block handed on to text or hash. */
static void sink_rows(const TpSchedule *s, RowFn row, GString *text, TpSha256 *hash)
{
  Sink *k = g_new(Sink, 1); /* its block is written before it is read */
  k->text = text, k->hash = hash, k->prev_st = 0, k->prev_mb = 0, k->opens = FALSE, k->n = 0;
  each_row(s, row, k);
  sink_flush(k);
  g_free(k);
}

#define DIGEST_LEAD "timeprest-schedule-digest 2 "

/* The digest record of stages lo..hi-1 (stage by stage), into a sink whose previous row is the last
 * operation of the stages before lo. */
typedef struct {
  const TpSchedule *s;
  TpSha256 *hash;                    /* part 0's sink */
  GString *text[TP_PARALLEL_MAX];    /* the other parts' records */
} DigestWork;

static void digest_range(void *ctx, int part, int lo, int hi)
{
  DigestWork *w = ctx;
  const TpSchedule *s = w->s;
  Sink *k = g_new(Sink, 1);
  k->text = part ? (w->text[part] = g_string_new(NULL)) : NULL, k->hash = part ? NULL : w->hash;
  k->prev_st = 0, k->prev_mb = 0, k->n = 0;
  for (int st = lo - 1; st >= 0; st--)
    if (tp_stage_len(s, st) > 0) {
      k->prev_st = st, k->prev_mb = tp_stage_ops(s, st)[tp_stage_len(s, st) - 1].mb;
      break;
    }
  int prev_st = k->prev_st;
  int32_t prev_mb = k->prev_mb;
  for (int st = lo; st < hi; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    for (int j = 0, n = tp_stage_len(s, st); j < n;) {
      /* a block's worth of rows at a time, its length in a local */
      char *p = sink_row(k), *stop = k->buf + SINK_BLOCK - SINK_ROW_MAX, *p0 = p;
      for (; j < n && p <= stop; j++)
        p = digest_op(p, st, &ops[j], &prev_st, &prev_mb);
      k->n += (size_t)(p - p0);
    }
  }
  sink_flush(k);
  g_free(k);
}

char *tp_schedule_sha256(const TpSchedule *s)
{
  g_autoptr(GString) head = g_string_new(NULL);
  format_header(s, head, DIGEST_LEAD);
  TpSha256 *hash = tp_sha256_new();
  tp_sha256_update(hash, head->str, head->len);
  /* a large schedule's stages in ranges at once: the first range hashed as it is written, the others'
   * records after it, in order (the same bytes as one pass) */
  int parts = s->rank_seq || s->fb ? 1 : tp_parallel_parts(tp_schedule_n_ops(s), s->W);
  if (parts == 1) {
    sink_rows(s, digest_row, NULL, hash);
    return tp_sha256_finish_hex(hash);
  }
  DigestWork w = { .s = s, .hash = hash };
  tp_parallel_ranges(s->W, parts, digest_range, &w);
  for (int p = 1; p < parts; p++) {
    tp_sha256_update(hash, w.text[p]->str, w.text[p]->len);
    g_string_free(w.text[p], TRUE);
  }
  return tp_sha256_finish_hex(hash);
}

char *tp_schedule_sha256_csv(const TpSchedule *s)
{
  g_autoptr(GString) csv = g_string_new(NULL);
  tp_format_csv(s, csv);
  return tp_sha256_hex(csv->str, csv->len);
}

void tp_format_csv(const TpSchedule *s, GString *out)
{
  format_header(s, out, "# timeprest-schedule ");
  g_string_append(out, s->fb ? CSV_COLUMNS CSV_COMPOSITE "\n" : CSV_COLUMNS "\n");
  /* sized once: a row is its stage, mini-batch, micro-batch and version digits, the op's letter, the
   * source (at most 5 letters) and 6 separators (a version above K only makes the text grow) */
  char num[3][16];
  int row = snprintf(num[0], sizeof num[0], "%d", s->W) + 2 * snprintf(num[1], sizeof num[1], "%d", s->K) +
            snprintf(num[2], sizeof num[2], "%d", s->N) + 1 + 5 + 6 + (s->fb ? 3 : 0);
  tp_string_reserve(out, (long long)out->len + tp_schedule_n_ops(s) * row + 1);
  sink_rows(s, s->fb ? csv_put_row_fb : csv_put_row, out, NULL);
}

/* Strict integer in [lo, hi]. */
static gboolean parse_int(const char *text, int lo, int hi, int *out) { return tp_parse_int(text, lo, hi, out, NULL); }

/* A header count from 1 to hi; the error names the key, the range and the value as written. */
static gboolean header_int(const char *key, const char *value, int hi, int *out, GError **err)
{
  if (tp_parse_int(value, 1, hi, out, err))
    return TRUE;
  g_prefix_error(err, "%s: ", key);
  return FALSE;
}

gboolean tp_header_set(TpSchedule *s, const char *key, const char *value, GError **err)
{
  gboolean ok;
  TpOrder order = s->order;
  TpPolicy policy = s->policy;
  if (strcmp(key, "order") == 0)
    ok = tp_order_from_name(value, &order);
  else if (strcmp(key, "policy") == 0)
    ok = tp_policy_from_name(value, &policy);
  else if (strcmp(key, "preset") == 0) {
    const TpPreset *p = tp_preset_find(value);
    if ((ok = p != NULL))
      order = p->order, policy = p->policy;
  } else if (strcmp(key, "workers") == 0)
    return header_int(key, value, TP_MAX_WORKERS, &s->W, err);
  else if (strcmp(key, "micro_batches") == 0)
    return header_int(key, value, TP_MAX_MICRO, &s->N, err);
  else if (strcmp(key, "mini_batches") == 0)
    return header_int(key, value, TP_MAX_MINI, &s->K, err);
  else if (strcmp(key, "fixed_on") == 0 || strcmp(key, "order_fixed_on") == 0) /* CSV, JSON; absent: slots */
    ok = tp_fixed_on_from_name(value, &s->fixed_on);
  else if (strcmp(key, "significance") == 0)
    return tp_significance_parse(value, &s->sig, err);
  else if (strcmp(key, "chunks") == 0)
    return header_int(key, value, TP_MAX_WORKERS, &s->V, err);
  else if (strcmp(key, "chunk_map") == 0)
    ok = tp_chunk_map_from_name(value, &s->map) && s->map != TP_MAP_NONE;
  else if (strcmp(key, "recompute") == 0) {
    if ((ok = strcmp(value, "true") == 0 || strcmp(value, "false") == 0))
      s->recompute = strcmp(value, "true") == 0, s->recompute_said_no = !s->recompute;
  }
  else {
    g_autofree char *q = tp_quote(key);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "unknown header key %s", q);
    return FALSE;
  }
  if (!ok) {
    g_autofree char *q = tp_quote(value);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "bad value %s for %s", q, key);
    return FALSE;
  }
  /* preset and order/policy may both be given where they agree */
  if ((s->order != TP_N_ORDERS && order != s->order) || (s->policy != TP_N_POLICIES && policy != s->policy)) {
    g_autofree char *q = tp_quote(value);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s %s contradicts the header's order %s, policy %s", key, q,
                s->order != TP_N_ORDERS ? tp_order_name(s->order) : "(unset)",
                s->policy != TP_N_POLICIES ? tp_policy_name(s->policy) : "(unset)");
    return FALSE;
  }
  s->order = order, s->policy = policy;
  return TRUE;
}

gboolean tp_header_finish(TpSchedule *s, gboolean sig_given, GError **err)
{
  if (s->W == 0 || s->N == 0 || s->K == 0 || s->order == TP_N_ORDERS || s->policy == TP_N_POLICIES) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "header needs order, policy (or preset), workers, micro_batches and mini_batches");
    return FALSE;
  }
  if (sig_given && s->policy != TP_POLICY_INTERMEDIATE) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "header: significance is the intermediate policy's, not %s's",
                tp_policy_name(s->policy));
    return FALSE;
  }
  if (!tp_size_check(s->W, s->N, s->K, err))
    return FALSE;
  int V = MAX(s->V, 1);
  if ((V > 1) != (s->map != TP_MAP_NONE)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "header: chunks (2 or more) and chunk_map (round-robin or v-shape) go "
                "together");
    return FALSE;
  }
  if ((long long)s->W * V > TP_MAX_WORKERS) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "header: %d workers times %d chunks is more than %d stages", s->W, V,
                TP_MAX_WORKERS);
    return FALSE;
  }
  s->W *= V; /* workers= counts ranks; the IR counts stages */
  s->stage = g_new0(GArray *, s->W);
  for (int st = 0; st < s->W; st++)
    s->stage[st] = g_array_new(FALSE, FALSE, sizeof(TpOp));
  tp_schedule_set_chunks(s, V, s->map);
  return TRUE;
}

TpSchedule *tp_schedule_blank(const char *name)
{
  TpSchedule *s = g_new0(TpSchedule, 1);
  s->order = TP_N_ORDERS;
  s->policy = TP_N_POLICIES;
  s->V = 1;
  s->sig.kind = TP_SIG_EXP;
  s->sig.param = 1.0;
  s->source = g_strdup(name);
  return s;
}

gboolean tp_op_parse(const TpSchedule *s, const char *stage, const char *kind, const char *mb, const char *micro,
                     const char *ver, const char *src, int *st, TpOp *op, GError **err)
{
  const char *bad = NULL, *val = NULL;
  int j = 0; /* the micro-batch, 1-based */
  memset(op, 0, sizeof *op);
  if (!parse_int(stage, 1, s->W, st))
    bad = "stage (expected 1..W)", val = stage;
  else if (strlen(kind) != 1 || !strchr(tp_op_letters, kind[0]))
    bad = "op (expected F, B, U, I or W)", val = kind;
  else if (!parse_int(mb, 1, s->K, &op->mb))
    bad = "mini_batch (expected 1..K)", val = mb;
  else if (micro && *micro && !parse_int(micro, 1, s->N, &j))
    bad = "micro_batch (expected 1..N or empty)", val = micro;
  else if (!parse_int(ver, 0, s->K, &op->ver))
    bad = "version (expected 0..K)", val = ver;
  if (!bad) {
    op->kind = (uint8_t)(strchr(tp_op_letters, kind[0]) - tp_op_letters);
    op->micro = (int16_t)(micro && *micro && op->kind != TP_OP_U ? j - 1 : TP_WHOLE);
    if (micro && *micro && op->kind == TP_OP_U)
      bad = "micro_batch (an update has none)", val = micro;
    (*st)--;
    int i;
    for (i = 0; i < 3 && g_strcmp0(src ? src : "fixed", tp_source_names[i]) != 0; i++)
      ;
    if (i == 3)
      bad = "source (expected fixed, stash or blend)", val = src;
    op->src = (uint8_t)i;
  }
  if (bad) {
    g_autofree char *q = tp_quote(val ? val : "");
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "bad %s: %s", bad, q);
    return FALSE;
  }
  return TRUE;
}

gboolean tp_fb_mark_parse(const TpSchedule *s, const char *text, const TpOp *op, gboolean *opens, GError **err)
{
  *opens = text && *text;
  gboolean ok = !*opens || (strcmp(text, "fb") == 0 && s->rank_seq && op->kind == TP_OP_F);
  if (ok)
    return TRUE;
  if (strcmp(text, "fb") != 0) {
    g_autofree char *q = tp_quote(text);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "bad composite (expected fb or empty): %s", q);
  } else if (!s->rank_seq)
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "bad composite: F&B composites need chunks (interleaved stages)");
  else
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "bad composite: an F&B composite opens on an F, not %c",
                tp_op_letters[op->kind]);
  return FALSE;
}

gboolean tp_fb_check_read(const TpSchedule *s, GError **err)
{
  for (int r = 0; s->fb && r < tp_schedule_ranks(s); r++) {
    g_autofree int *pos = g_new0(int, s->W);
    const TpOp *open = NULL, *op = NULL;
    guint c = 0;
    for (guint j = 0; j < s->rank_seq[r]->len && c < s->fb[r]->len; j++) {
      int st = g_array_index(s->rank_seq[r], int32_t, j);
      if (pos[st] >= tp_stage_len(s, st))
        break; /* more entries than operations: validation names it */
      op = &tp_stage_ops(s, st)[pos[st]++];
      if (open && (op->kind != TP_OP_B || op->micro == TP_WHOLE))
        break;
      c += open != NULL;
      open = open ? NULL : tp_fb_opens(s, r, c, (int)j) ? op : NULL;
    }
    if (open) {
      g_autofree char *next = op == open ? g_strdup("nothing") : g_strdup_printf("%c (line %d)",
                                                                                  tp_op_letters[op->kind], op->line);
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: bad composite: worker %d's next operation after this F is %s, "
                  "not a B of a micro-batch", s->source, open->line, r + 1, next);
      return FALSE;
    }
  }
  return TRUE;
}

/* Wrap a field-level error with "name:line: ". */
static gboolean at_line(GError **err, const char *name, int line, GError *e)
{
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: %s", name, line, e->message);
  g_error_free(e);
  return FALSE;
}

static gboolean csv_header(TpSchedule *s, const char *items, const char *name, int line, GError **err)
{
  g_auto(GStrv) kv = g_strsplit_set(items, " \t", -1);
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  GError *e = NULL;
  for (int i = 0; kv[i]; i++) {
    char *eq;
    if (kv[i][0] == '\0')
      continue;
    if (!(eq = strchr(kv[i], '='))) {
      g_autofree char *q = tp_quote(kv[i]);
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: header item %s is not key=value", name, line, q);
      return FALSE;
    }
    *eq = '\0';
    if (!g_hash_table_add(seen, kv[i])) {
      g_autofree char *q = tp_quote(kv[i]);
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: header key %s given twice", name, line, q);
      return FALSE;
    }
    if (!tp_header_set(s, kv[i], eq + 1, &e))
      return at_line(err, name, line, e);
  }
  return tp_header_finish(s, g_hash_table_contains(seen, "significance"), &e) || at_line(err, name, line, e);
}

/* A row of `cols` fields (6, or 7 with the composite column). */
static gboolean csv_row(TpSchedule *s, const char *text, int cols, const char *name, int line, GError **err)
{
  g_auto(GStrv) f = g_strsplit(text, ",", -1);
  GError *e = NULL;
  if (g_strv_length(f) != (guint)cols) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: expected %d comma-separated fields, found %u", name, line, cols,
                g_strv_length(f));
    return FALSE;
  }
  int st;
  TpOp op;
  gboolean opens;
  if (!tp_op_parse(s, f[0], f[1], f[2], f[3], f[4], f[5], &st, &op, &e) || !tp_fb_mark_parse(s, f[6], &op, &opens, &e))
    return at_line(err, name, line, e);
  op.line = line;
  if (opens) /* rows of a worker come in its order: this one is next in it */
    tp_schedule_add_fb(s, tp_stage_rank(s, st), (int)s->rank_seq[tp_stage_rank(s, st)]->len);
  g_array_append_val(s->stage[st], op);
  tp_rank_seq_push(s, st);
  return TRUE;
}

static TpSchedule *parse_csv(const char *text, const char *name, GError **err)
{
  static const char tag[] = "# timeprest-schedule";
  g_autoptr(TpSchedule) s = tp_schedule_blank(name);
  g_autoptr(GString) buf = g_string_new(NULL); /* one line at a time, copied out of the text */
  gboolean have_header = FALSE;
  int cols = 0; /* the column line's fields, once read */
  const char *end = text + strlen(text), *p = text;
  for (int ln = 0; p; ln++) { /* lines split by memchr: linear whatever the text's length */
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    g_string_truncate(buf, 0);
    g_string_append_len(buf, p, nl ? nl - p : end - p);
    p = nl ? nl + 1 : NULL;
    char *line = g_strchomp(buf->str);
    if (line[0] == '\0')
      continue;
    if (g_str_has_prefix(line, tag)) {
      if (have_header) {
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: second schedule header", name, ln + 1);
        return NULL;
      }
      if (!csv_header(s, line + strlen(tag), name, ln + 1, err))
        return NULL;
      have_header = TRUE;
    } else if (line[0] == '#') {
      continue;
    } else if (!have_header) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: expected the '%s order=…' header first", name, ln + 1, tag);
      return NULL;
    } else if (!cols) {
      if (strcmp(line, CSV_COLUMNS) != 0 && strcmp(line, CSV_COLUMNS CSV_COMPOSITE) != 0) {
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: expected the column line '%s'", name, ln + 1, CSV_COLUMNS);
        return NULL;
      }
      cols = strcmp(line, CSV_COLUMNS) == 0 ? 6 : 7;
    } else if (!csv_row(s, line, cols, name, ln + 1, err)) {
      return NULL;
    }
  }
  if (!cols) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: no schedule header and column line found", name);
    return NULL;
  }
  return tp_fb_check_read(s, err) ? g_steal_pointer(&s) : NULL;
}

/* Whether the memory left holds what reading `len` bytes of a format takes, `per_byte` times the
 * text at its peak as measured (JSON's tree of nodes: about 16 times; PyTorch's CSV: about 8), so
 * that a large file is refused in one line instead of aborting in the allocator. */
static gboolean room_to_read(const char *name, const char *format, const char *text, gsize len, int per_byte,
                             GError **err)
{
  g_autofree char *what = g_strdup_printf("reading %s (%s, %.3g MB)", name, format, (double)len / 1e6);
  return tp_memory_check_text(what, text, len, per_byte, strcmp(format, "JSON") == 0, err);
}

TpSchedule *tp_schedule_parse(const char *text, gsize len, const char *name, GError **err)
{
  const char *p = text;
  while (p < text + len && g_ascii_isspace(*p))
    p++;
  if (p < text + len && *p == '{')
    return room_to_read(name, "JSON", text, len, 18, err) ? tp_schedule_parse_json(text, len, name, err) : NULL;
  if (memchr(text, '\0', len)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: not a text file", name);
    return NULL;
  }
  if (p < text + len && (g_ascii_isdigit(*p) || *p == ',' || *p == '(')) {
    /* the grid `schedule` prints (cells between spaces, no comma) is a picture, not read back */
    const char *eol = memchr(p, '\n', (size_t)(text + len - p));
    gsize n = eol ? (gsize)(eol - p) : (gsize)(text + len - p);
    if (!memchr(p, ',', n) && memchr(p, ' ', n)) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:1: a schedule grid (the picture `schedule` prints) is not read "
                  "back; write the schedule with --format csv or json", name);
      return NULL;
    }
    return room_to_read(name, "PyTorch's CSV", text, len, 10, err) ? tp_schedule_parse_torch(text, name, err) : NULL;
  }
  return room_to_read(name, "CSV", text, len, 4, err) ? parse_csv(text, name, err) : NULL;
}

TpSchedule *tp_schedule_load(const char *path, GError **err) { return tp_schedule_load_prepared(path, NULL, err); }

TpSchedule *tp_schedule_load_prepared(const char *path, TpPrepared *prep, GError **err)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  if (!tp_read_file_max(path, "schedule file", tp_max_schedule_bytes(), &text, &len, err))
    return NULL;
  TpSchedule *s = tp_schedule_parse(text, len, tp_input_name(path), err);
  g_clear_pointer(&text, g_free); /* the text is not needed beside the validation's arrays */
  if (s && !tp_validate_prepared(s, prep, err)) {
    tp_schedule_free(s);
    return NULL;
  }
  return s;
}
