/* tp_json.c — JSON form of a schedule: writer, and reader (json-glib) that keeps each
 * operation's line so that validation errors can name file:line. */
#include "tp_error.h"
#include "tp_format.h"
#include "tp_format_priv.h"
#include "tp_policy.h"

#include <json-glib/json-glib.h>
#include <string.h>

/* Per operation, in stage order (stage st's from off[st]), whether it opens an F&B composite; NULL
 * when the schedule has none. */
static char *fb_opens(const TpSchedule *s)
{
  if (!s->fb)
    return NULL;
  g_autofree long *off = g_new(long, s->W + 1);
  off[0] = 0;
  for (int st = 0; st < s->W; st++)
    off[st + 1] = off[st] + tp_stage_len(s, st);
  char *opens = g_new0(char, off[s->W] + 1);
  g_autofree int *pos = g_new0(int, s->W);
  for (int r = 0; r < tp_schedule_ranks(s); r++)
    for (guint j = 0, c = 0, n = s->rank_seq ? s->rank_seq[r]->len : (guint)tp_stage_len(s, r); j < n; j++) {
      int st = s->rank_seq ? g_array_index(s->rank_seq[r], int32_t, j) : r;
      gboolean o = tp_fb_opens(s, r, c, (int)j);
      c += o;
      opens[off[st] + pos[st]++] = (char)o;
    }
  return opens;
}

void tp_format_json(const TpSchedule *s, GString *out)
{
  g_autofree char *opens = fb_opens(s);
  long g = 0; /* the operation's place in stage order */
  g_string_append_printf(out,
                         "{\n  \"format\": \"" TP_SCHEDULE_FORMAT "\",\n  \"order\": \"%s\",\n  \"policy\": \"%s\",\n"
                         "  \"workers\": %d,\n  \"micro_batches\": %d,\n  \"mini_batches\": %d,\n"
                         "  \"order_fixed_on\": \"%s\",\n",
                         tp_order_name(s->order), tp_policy_name(s->policy), tp_schedule_ranks(s), s->N, s->K,
                         tp_fixed_on_name(s->fixed_on));
  if (s->rank_seq) /* absent: one chunk per worker */
    g_string_append_printf(out, "  \"chunks\": %d,\n  \"chunk_map\": \"%s\",\n", s->V, tp_chunk_map_name(s->map));
  if (s->policy == TP_POLICY_INTERMEDIATE) {
    g_autofree char *sig = tp_significance_to_string(&s->sig);
    g_string_append_printf(out, "  \"significance\": \"%s\",\n", sig);
  }
  if (s->recompute) /* absent: false, so files written before recomputation read the same */
    g_string_append(out, "  \"recompute\": true,\n");
  g_string_append(out, "  \"stages\": [\n");
  for (int st = 0; st < s->W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    int n = tp_stage_len(s, st);
    g_string_append(out, "    [\n");
    for (int k = 0; k < n; k++) {
      const TpOp *op = &ops[k];
      g_string_append_printf(out, "      {\"op\": \"%c\", \"mini_batch\": %d, \"micro_batch\": ", tp_op_letters[op->kind], op->mb);
      if (op->micro == TP_WHOLE || op->kind == TP_OP_U)
        g_string_append(out, "null");
      else
        g_string_append_printf(out, "%d", op->micro + 1);
      g_string_append_printf(out, ", \"version\": %d", op->ver);
      if (op->src != TP_SRC_FIXED)
        g_string_append_printf(out, ", \"source\": \"%s\"", tp_source_names[op->src]);
      if (opens && opens[g])
        g_string_append(out, ", \"composite\": \"fb\"");
      g++;
      g_string_append(out, k + 1 < n ? "},\n" : "}\n");
    }
    g_string_append(out, st + 1 < s->W ? "    ],\n" : "    ]\n");
  }
  g_string_append(out, "  ]");
  for (int r = 0; s->rank_seq && r < tp_schedule_ranks(s); r++) { /* the stage (1-based) of each op a worker runs */
    g_string_append(out, r ? "],\n    [" : ",\n  \"worker_orders\": [\n    [");
    for (guint k = 0; k < s->rank_seq[r]->len; k++)
      g_string_append_printf(out, "%s%d", k ? ", " : "", g_array_index(s->rank_seq[r], int32_t, k) + 1);
  }
  g_string_append(out, s->rank_seq ? "]\n  ]\n}\n" : "\n}\n");
}

/* Deepest nesting a schedule file needs is 4 (object, stages, a stage, an operation); anything much
 * deeper is refused before json-glib sees it (its parser recurses once per level). */
#define JSON_MAX_DEPTH 16

/* What the scan keeps of the top-level object: each key's line, and the text of each key whose
 * value is a number, true, false or null, as written. */
typedef struct {
  GHashTable *line; /* key -> line */
  GHashTable *raw;  /* key -> value text */
} TopKeys;

/* "name:line", or "name" where the line is not known. */
static char *where(const char *name, int line)
{
  return line > 0 ? g_strdup_printf("%s:%d", name, line) : g_strdup(name);
}

/* A "name:line: WHY" error; WHY is fmt with arg quoted in place of its %s (arg NULL: nothing). */
static gboolean scan_fail(GError **err, const char *name, int line, const char *fmt, const char *arg)
{
  g_autofree char *q = arg ? tp_quote(arg) : g_strdup("");
  g_autofree char *why = g_strdup_printf(fmt, q);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: %s", name, line, why);
  return FALSE;
}

/* A key as written, for the duplicate check of its object. */
typedef struct {
  const char *p;
  gsize n;
} KeyText;

/* The scan's state: where it is (depth, line), whether the next string is a key, the top-level key
 * whose value comes next, the keys seen in each open object. */
typedef struct {
  const char *name, *end;
  TopKeys *top;
  gboolean whole;
  int depth, line;
  gboolean expect_key;
  const char *key;               /* the top-level key whose value is next, or NULL */
  char *last_key;                /* its text */
  char kind[JSON_MAX_DEPTH + 2]; /* '{' or '[' of each open level */
  GPtrArray *keys;               /* [depth] GArray of KeyText */
} Scan;

/* A key of the object at the current depth, refused when written with an escape or given twice; a
 * top-level one's line kept. */
static gboolean scan_key(Scan *sc, KeyText k, gboolean escaped, GError **err)
{
  GArray *seen = sc->keys->pdata[sc->depth];
  gboolean twice = FALSE;
  for (guint i = 0; i < seen->len && !twice; i++) {
    const KeyText *t = &g_array_index(seen, KeyText, i);
    twice = t->n == k.n && memcmp(t->p, k.p, k.n) == 0;
  }
  if (escaped || twice) {
    g_autofree char *shown = g_strndup(k.p, k.n);
    return scan_fail(err, sc->name, sc->line, escaped ? "key %s: a key is a plain name, without escapes"
                                                      : "key %s given twice", shown);
  }
  g_array_append_val(seen, k);
  if (sc->depth == 1 && sc->top) {
    g_free(sc->last_key);
    sc->last_key = g_strndup(k.p, k.n);
    g_hash_table_insert(sc->top->line, g_strdup(sc->last_key), GINT_TO_POINTER(sc->line));
    sc->key = sc->last_key;
  }
  sc->expect_key = FALSE;
  return TRUE;
}

/* The string opening at *pp (no \u0000 in it; a key checked); *pp left on its closing quote. */
static gboolean scan_string(Scan *sc, const char **pp, GError **err)
{
  const char *p = *pp, *q = p + 1;
  gboolean escaped = FALSE;
  while (q < sc->end && *q != '"') {
    if (*q == '\\' && q + 1 < sc->end) {
      escaped = TRUE;
      if (q[1] == 'u' && sc->end - q >= 6 && strncmp(q + 2, "0000", 4) == 0)
        return scan_fail(err, sc->name, sc->line, "a string holds \\u0000%s", NULL);
      q++;
    } else if (*q == '\n')
      sc->line++;
    q++;
  }
  if (sc->expect_key && !scan_key(sc, (KeyText){ .p = p + 1, .n = (gsize)(q - p - 1) }, escaped, err))
    return FALSE;
  *pp = q < sc->end ? q : sc->end - 1;
  return TRUE;
}

/* An opening or closing bracket or a comma; a single quote or a slash, which json-glib takes (as
 * strings and comments) and JSON has not, refused. */
static gboolean scan_mark(Scan *sc, char c, gboolean *done, GError **err)
{
  if (c == '{' || c == '[') {
    if (++sc->depth > JSON_MAX_DEPTH)
      return scan_fail(err, sc->name, sc->line, "nested deeper than " G_STRINGIFY(JSON_MAX_DEPTH) " levels%s", NULL);
    sc->kind[sc->depth] = c;
    if (c == '{')
      g_array_set_size(sc->keys->pdata[sc->depth], 0);
    sc->expect_key = c == '{';
  } else if (c == '}' || c == ']')
    *done = --sc->depth <= 0;
  else if (c == ',')
    sc->expect_key = sc->depth >= 1 && sc->kind[sc->depth] == '{';
  else
    return c == '\'' ? scan_fail(err, sc->name, sc->line, "a single quote: JSON strings take double quotes%s", NULL)
                     : scan_fail(err, sc->name, sc->line, "a slash outside a string: JSON has no comments%s", NULL);
  sc->key = NULL;
  return TRUE;
}

/* A number, true, false or null at *pp, to the next delimiter: a top-level key's value kept as
 * written; with whole, a number below the top level a whole 32-bit one.  *pp left on its last
 * character. */
static gboolean scan_word(Scan *sc, const char **pp, GError **err)
{
  const char *p = *pp, *q = p;
  while (q < sc->end && (*q == '\0' || !strchr(",]}: \t\r\n\"", *q))) /* strchr finds '\0' too */
    q++;
  g_autofree char *tok = g_strndup(p, (gsize)(q - p));
  if (sc->depth == 1 && sc->key && sc->top)
    g_hash_table_insert(sc->top->raw, g_strdup(sc->key), g_strdup(tok));
  else if (sc->whole && sc->depth > 1 && (g_ascii_isdigit(*p) || *p == '-')) {
    gint64 v;
    if (!g_ascii_string_to_signed(tok, 10, G_MININT32, G_MAXINT32, &v, NULL))
      return scan_fail(err, sc->name, sc->line, "number %s: expected a whole number", tok);
  }
  sc->key = NULL;
  *pp = q - 1;
  return TRUE;
}

/* One pass over the text, outside strings: nesting depth, a single top-level value, keys given twice
 * in any object (compared as written: a key holding an escape is refused, so that two spellings of
 * one name cannot pass as two), strings holding \u0000 (a C string would end there), and numbers
 * below the top level that json-glib would not keep exactly (it reads 1e23 as a double and an
 * integer past 64 bits as -1): schedule files hold whole numbers only. */
static gboolean json_scan(const char *text, gsize len, const char *name, TopKeys *top, gboolean whole, GError **err)
{
  Scan sc = { .name = name, .end = text + len, .top = top, .whole = whole, .line = 1,
              .keys = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref) };
  for (int d = 0; d < JSON_MAX_DEPTH + 2; d++)
    g_ptr_array_add(sc.keys, g_array_new(FALSE, FALSE, sizeof(KeyText)));
  gboolean done = FALSE, ok = TRUE;
  for (const char *p = text; ok && p < sc.end; p++) {
    char c = *p;
    if (c == '\n')
      sc.line++;
    else if (c == ' ' || c == '\t' || c == '\r')
      continue;
    else if (done)
      ok = c == '{' || c == '['
             ? scan_fail(err, name, sc.line, "a second JSON value after the first (one object per file)%s", NULL)
             : scan_fail(err, name, sc.line, "text %s after the JSON object", p);
    else if (c == '"')
      ok = scan_string(&sc, &p, err);
    else if (c && strchr("{[}],'/", c))
      ok = scan_mark(&sc, c, &done, err);
    else if (c != ':')
      ok = scan_word(&sc, &p, err);
  }
  g_free(sc.last_key);
  g_ptr_array_unref(sc.keys);
  return ok;
}

char *tp_json_error_line(const GError *e)
{
  /* json-glib says "<data>:LINE:COL: …" and may quote text across lines */
  return tp_one_line(g_str_has_prefix(e->message, "<data>:") ? e->message + 7 : e->message);
}

gboolean tp_json_check(const char *text, gsize len, const char *name, GError **err)
{
  return json_scan(text, len, name, NULL, FALSE, err);
}

/* array-element handler: remember the line each element ends on. */
static void on_element(JsonParser *parser, JsonArray *array, gint index, gpointer lines)
{
  g_hash_table_insert(lines, json_array_get_element(array, (guint)index),
                      GINT_TO_POINTER(json_parser_get_current_line(parser)));
}

/* The text of a member that must be of JSON type `want` (G_TYPE_STRING, G_TYPE_INT64 for a whole
 * number, G_TYPE_BOOLEAN) or null (NULL: absent or null; a number written as a string is not one);
 * `raw`, if given, has the text of numbers as written.  The first member of another type is noted in
 * *bad. */
typedef struct {
  const char *key;
  GType want;
} BadMember;

static char *member_text(JsonObject *o, const char *key, GHashTable *raw, GType want, BadMember *bad)
{
  JsonNode *n = json_object_get_member(o, key);
  if (!n || JSON_NODE_HOLDS_NULL(n))
    return NULL;
  GType t = JSON_NODE_HOLDS_VALUE(n) ? json_node_get_value_type(n) : G_TYPE_INVALID;
  if (want == G_TYPE_INT64 && t == G_TYPE_DOUBLE && raw && g_hash_table_lookup(raw, key))
    t = G_TYPE_INT64; /* 1e23 as written: the reader of the text names what is wrong with it */
  if (t == want) {
    if (want == G_TYPE_STRING)
      return g_strdup(json_node_get_string(n));
    if (raw && g_hash_table_lookup(raw, key))
      return g_strdup(g_hash_table_lookup(raw, key));
    if (want == G_TYPE_INT64)
      return g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(n));
    return g_strdup(json_node_get_boolean(n) ? "true" : "false");
  }
  if (!bad->key)
    *bad = (BadMember){ .key = key, .want = want };
  return g_strdup("?");
}

static const char *type_text(GType want)
{
  return want == G_TYPE_STRING ? "a string" : want == G_TYPE_INT64 ? "a whole number" : "true or false";
}

/* The JSON type of a header key's value. */
static GType header_type(const char *key)
{
  if (!strcmp(key, "workers") || !strcmp(key, "micro_batches") || !strcmp(key, "mini_batches") || !strcmp(key, "chunks"))
    return G_TYPE_INT64;
  return strcmp(key, "recompute") == 0 ? G_TYPE_BOOLEAN : G_TYPE_STRING;
}

/* Refuse a member of o not in the NULL-terminated list. */
static gboolean known_members(JsonObject *o, const char *const *known, const char *const *more, const char **unknown)
{
  g_autoptr(GList) members = json_object_get_members(o);
  for (GList *l = members; l; l = l->next) {
    gboolean ok = FALSE;
    for (int i = 0; known[i] && !ok; i++)
      ok = strcmp(l->data, known[i]) == 0;
    for (int i = 0; more && more[i] && !ok; i++)
      ok = strcmp(l->data, more[i]) == 0;
    if (!ok) {
      *unknown = l->data;
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean read_header(TpSchedule *s, JsonObject *root, const TopKeys *top, const char *name, GError **err)
{
  static const char *const keys[] = { "preset", "order", "policy", "workers", "micro_batches", "mini_batches",
                                      "significance", "order_fixed_on", "recompute", "chunks", "chunk_map", NULL };
  static const char *const frame[] = { "format", "stages", "worker_orders", NULL };
  GError *e = NULL;
  const char *unknown = NULL;
  if (!known_members(root, keys, frame, &unknown)) {
    g_autofree char *q = tp_quote(unknown);
    g_autofree char *list = g_strjoinv(", ", (char **)keys);
    g_autofree char *at = where(name, GPOINTER_TO_INT(g_hash_table_lookup(top->line, unknown)));
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: unknown key %s (known: format, %s, stages, worker_orders)", at, q, list);
    return FALSE;
  }
  JsonNode *fmt = json_object_get_member(root, "format");
  if (fmt && (!JSON_NODE_HOLDS_VALUE(fmt) || g_strcmp0(json_node_get_string(fmt), TP_SCHEDULE_FORMAT) != 0)) {
    g_autofree char *at = where(name, GPOINTER_TO_INT(g_hash_table_lookup(top->line, "format")));
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: \"format\" is not \"" TP_SCHEDULE_FORMAT "\"", at);
    return FALSE;
  }
  for (guint i = 0; keys[i]; i++) {
    BadMember bad = { 0 };
    GType want = header_type(keys[i]);
    g_autofree char *v = member_text(root, keys[i], top->raw, want, &bad);
    if (v && (bad.key || !tp_header_set(s, keys[i], v, &e))) {
      g_autofree char *at = where(name, GPOINTER_TO_INT(g_hash_table_lookup(top->line, keys[i])));
      g_autofree char *why = e ? g_strdup(e->message) : g_strdup_printf("%s: expected %s", keys[i], type_text(want));
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %s", at, why);
      g_clear_error(&e);
      return FALSE;
    }
  }
  JsonNode *sig = json_object_get_member(root, "significance");
  if (!tp_header_finish(s, sig && !JSON_NODE_HOLDS_NULL(sig), &e)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %s", name, e->message);
    g_error_free(e);
    return FALSE;
  }
  return TRUE;
}

/* "worker_orders" of a schedule with interleaved stages: per worker, the stage (1-based) of each
 * operation it runs, in its order; needed with chunks, refused without. */
static gboolean read_worker_orders(TpSchedule *s, JsonObject *ro, GHashTable *lines, GHashTable *top_line,
                                   const char *name, GError **err)
{
  JsonNode *wo = json_object_get_member(ro, "worker_orders");
  g_autofree char *at = where(name, GPOINTER_TO_INT(g_hash_table_lookup(top_line, "worker_orders")));
  int R = tp_schedule_ranks(s);
  if (!s->rank_seq && !wo)
    return TRUE;
  if (!s->rank_seq || !wo || !JSON_NODE_HOLDS_ARRAY(wo) || json_array_get_length(json_node_get_array(wo)) != (guint)R) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, s->rank_seq ? "%s: \"worker_orders\" must be an array of %d arrays (one "
                "per worker) of stage numbers" : "%s: \"worker_orders\" is for chunks above 1 (interleaved stages)",
                at, R);
    return FALSE;
  }
  for (int r = 0; r < R; r++) {
    JsonNode *rn = json_array_get_element(json_node_get_array(wo), (guint)r);
    JsonArray *ra = JSON_NODE_HOLDS_ARRAY(rn) ? json_node_get_array(rn) : NULL;
    for (guint k = 0; ra && k < json_array_get_length(ra); k++) {
      JsonNode *n = json_array_get_element(ra, k);
      gint64 v = JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_INT64 ? json_node_get_int(n) : 0;
      if (v < 1 || v > s->W) {
        g_autofree char *el = where(name, GPOINTER_TO_INT(g_hash_table_lookup(lines, n)));
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: worker_orders[%d][%u]: expected a stage number 1..%d", el, r, k,
                    s->W);
        return FALSE;
      }
      int32_t st = (int32_t)v - 1;
      g_array_append_val(s->rank_seq[r], st);
    }
    if (!ra) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: worker_orders[%d] is not an array", at, r);
      return FALSE;
    }
  }
  return TRUE;
}

/* Operation k of stage st: an object of the known keys, read as a CSV row is. */
static gboolean read_op(TpSchedule *s, int st, guint k, JsonNode *on, GHashTable *lines, GArray **marks,
                        const char *name, GError **err)
{
  static const char *const op_keys[] = { "op", "mini_batch", "micro_batch", "version", "source", "composite", NULL };
  int line = GPOINTER_TO_INT(g_hash_table_lookup(lines, on));
  gboolean bad = !JSON_NODE_HOLDS_OBJECT(on);
  BadMember bad_member = { 0 };
  TpOp op;
  int ost = st;
  char stage_txt[16];
  const char *unknown = NULL;
  GError *e = NULL;
  g_snprintf(stage_txt, sizeof stage_txt, "%d", st + 1);
  if (!bad && !known_members(json_node_get_object(on), op_keys, NULL, &unknown)) {
    g_autofree char *q = tp_quote(unknown);
    g_autofree char *at = where(name, line);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: stages[%d][%u]: unknown key %s (known: op, mini_batch, "
                "micro_batch, version, source, composite)", at, st, k, q);
    return FALSE;
  }
  if (!bad) {
    JsonObject *o = json_node_get_object(on);
    g_autofree char *kind = member_text(o, "op", NULL, G_TYPE_STRING, &bad_member),
                    *mb = member_text(o, "mini_batch", NULL, G_TYPE_INT64, &bad_member),
                    *micro = member_text(o, "micro_batch", NULL, G_TYPE_INT64, &bad_member),
                    *ver = member_text(o, "version", NULL, G_TYPE_INT64, &bad_member),
                    *src = member_text(o, "source", NULL, G_TYPE_STRING, &bad_member),
                    *fb = member_text(o, "composite", NULL, G_TYPE_STRING, &bad_member);
    gboolean opens;
    if (bad_member.key)
      g_set_error(&e, TP_ERROR, TP_ERROR_INPUT, "bad %s (expected %s)", bad_member.key, type_text(bad_member.want));
    else if (tp_op_parse(s, stage_txt, kind ? kind : "", mb ? mb : "", micro, ver ? ver : "", src, &ost, &op, &e) &&
             tp_fb_mark_parse(s, fb, &op, &opens, &e)) {
      op.line = line;
      if (opens)
        g_array_append_val(marks[st], k);
      g_array_append_val(s->stage[st], op);
      return TRUE;
    }
  }
  g_autofree char *at = where(name, line);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: stages[%d][%u]: %s", at, st, k,
              e ? e->message : "expected an object with op, mini_batch, micro_batch, version");
  g_clear_error(&e);
  return FALSE;
}

/* "stages": an array of W arrays, each stage's operations; marks[st] gets the places of stage st's
 * operations that open an F&B composite. */
static gboolean read_stages(TpSchedule *s, JsonObject *ro, GHashTable *lines, GHashTable *top_line, GArray **marks,
                            const char *name, GError **err)
{
  JsonNode *stages = json_object_get_member(ro, "stages");
  if (!stages || !JSON_NODE_HOLDS_ARRAY(stages) || json_array_get_length(json_node_get_array(stages)) != (guint)s->W) {
    g_autofree char *at = where(name, GPOINTER_TO_INT(g_hash_table_lookup(top_line, "stages")));
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: \"stages\" must be an array of %d arrays (one per stage)", at,
                s->W);
    return FALSE;
  }
  JsonArray *sa = json_node_get_array(stages);
  for (int st = 0; st < s->W; st++) {
    JsonNode *sn = json_array_get_element(sa, (guint)st);
    if (!JSON_NODE_HOLDS_ARRAY(sn)) {
      g_autofree char *at = where(name, GPOINTER_TO_INT(g_hash_table_lookup(lines, sn)));
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: stages[%d] is not an array", at, st);
      return FALSE;
    }
    JsonArray *ops = json_node_get_array(sn);
    for (guint k = 0; k < json_array_get_length(ops); k++)
      if (!read_op(s, st, k, json_array_get_element(ops, k), lines, marks, name, err))
        return FALSE;
  }
  return TRUE;
}

/* The F&B composites of the operations marked in stage order (marks[st]: places in stage st), at their
 * places in their workers' orders. */
static void fb_from_marks(TpSchedule *s, GArray **marks)
{
  g_autofree int *pos = g_new0(int, s->W);
  g_autofree guint *cur = g_new0(guint, s->W);
  for (int r = 0; s->rank_seq && r < tp_schedule_ranks(s); r++)
    for (guint j = 0; j < s->rank_seq[r]->len; j++) {
      int st = g_array_index(s->rank_seq[r], int32_t, j);
      if (cur[st] < marks[st]->len && g_array_index(marks[st], guint, cur[st]) == (guint)pos[st]) {
        tp_schedule_add_fb(s, r, (int)j);
        cur[st]++;
      }
      pos[st]++;
    }
}

TpSchedule *tp_schedule_parse_json(const char *text, gsize len, const char *name, GError **err)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable();
  g_autoptr(GHashTable) lines = g_hash_table_new(NULL, NULL);
  g_autoptr(GHashTable) top_line = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GHashTable) top_raw = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  TopKeys top = { top_line, top_raw };
  g_autoptr(TpSchedule) s = tp_schedule_blank(name);
  GError *e = NULL;
  if (!json_scan(text, len, name, &top, TRUE, err))
    return NULL;
  g_signal_connect(parser, "array-element", G_CALLBACK(on_element), lines);
  if (!json_parser_load_from_data(parser, text, (gssize)len, &e)) {
    g_autofree char *one = tp_json_error_line(e);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%s", name, one);
    g_error_free(e);
    return NULL;
  }
  JsonNode *root = json_parser_get_root(parser);
  if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: expected a JSON object at the top", name);
    return NULL;
  }
  JsonObject *ro = json_node_get_object(root);
  if (!read_header(s, ro, &top, name, err))
    return NULL;
  GArray **marks = g_new(GArray *, s->W);
  for (int st = 0; st < s->W; st++)
    marks[st] = g_array_new(FALSE, FALSE, sizeof(guint));
  gboolean ok = read_stages(s, ro, lines, top_line, marks, name, err) &&
                read_worker_orders(s, ro, lines, top_line, name, err);
  if (ok)
    fb_from_marks(s, marks);
  for (int st = 0; st < s->W; st++)
    g_array_unref(marks[st]);
  g_free(marks);
  return ok && tp_fb_check_read(s, err) ? g_steal_pointer(&s) : NULL;
}
