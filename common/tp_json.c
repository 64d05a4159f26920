/* tp_json.c — JSON form of a schedule: writer, and reader (json-glib) that keeps each
 * operation's line so that validation errors can name file:line. */
#include "tp_error.h"
#include "tp_format.h"
#include "tp_format_priv.h"
#include "tp_policy.h"

#include <json-glib/json-glib.h>
#include <string.h>

void tp_format_json(const TpSchedule *s, GString *out)
{
  g_string_append_printf(out,
                         "{\n  \"format\": \"" TP_SCHEDULE_FORMAT "\",\n  \"order\": \"%s\",\n  \"policy\": \"%s\",\n"
                         "  \"workers\": %d,\n  \"micro_batches\": %d,\n  \"mini_batches\": %d,\n"
                         "  \"order_fixed_on\": \"%s\",\n",
                         tp_order_name(s->order), tp_policy_name(s->policy), s->W, s->N, s->K,
                         tp_fixed_on_name(s->fixed_on));
  if (s->policy == TP_POLICY_INTERMEDIATE) {
    g_autofree char *sig = tp_significance_to_string(&s->sig);
    g_string_append_printf(out, "  \"significance\": \"%s\",\n", sig);
  }
  g_string_append(out, "  \"stages\": [\n");
  for (int st = 0; st < s->W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    int n = tp_stage_len(s, st);
    g_string_append(out, "    [\n");
    for (int k = 0; k < n; k++) {
      const TpOp *op = &ops[k];
      g_string_append_printf(out, "      {\"op\": \"%c\", \"mini_batch\": %d, \"micro_batch\": ", "FBU"[op->kind], op->mb);
      if (op->micro == TP_WHOLE || op->kind == TP_OP_U)
        g_string_append(out, "null");
      else
        g_string_append_printf(out, "%d", op->micro + 1);
      g_string_append_printf(out, ", \"version\": %d", op->ver);
      if (op->src != TP_SRC_FIXED)
        g_string_append_printf(out, ", \"source\": \"%s\"", tp_source_names[op->src]);
      g_string_append(out, k + 1 < n ? "},\n" : "}\n");
    }
    g_string_append(out, st + 1 < s->W ? "    ],\n" : "    ]\n");
  }
  g_string_append(out, "  ]\n}\n");
}

/* array-element handler: remember the line each object element ends on. */
static void on_element(JsonParser *parser, JsonArray *array, gint index, gpointer lines)
{
  JsonNode *node = json_array_get_element(array, (guint)index);
  if (JSON_NODE_HOLDS_OBJECT(node))
    g_hash_table_insert(lines, json_node_get_object(node), GINT_TO_POINTER(json_parser_get_current_line(parser)));
}

/* The text of a member that must be an integer, a string or null (NULL: absent or null). */
static char *member_text(JsonObject *o, const char *key, gboolean *bad)
{
  JsonNode *n = json_object_get_member(o, key);
  if (!n || JSON_NODE_HOLDS_NULL(n))
    return NULL;
  if (JSON_NODE_HOLDS_VALUE(n)) {
    GType t = json_node_get_value_type(n);
    if (t == G_TYPE_INT64)
      return g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(n));
    if (t == G_TYPE_STRING)
      return g_strdup(json_node_get_string(n));
  }
  *bad = TRUE;
  return g_strdup("?");
}

static gboolean read_header(TpSchedule *s, JsonObject *root, GError **err)
{
  static const char *const keys[] = { "preset", "order", "policy", "workers", "micro_batches", "mini_batches",
                                      "significance" };
  JsonNode *fmt = json_object_get_member(root, "format");
  if (fmt && g_strcmp0(json_node_get_string(fmt), TP_SCHEDULE_FORMAT) != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "\"format\" is not \"" TP_SCHEDULE_FORMAT "\"");
    return FALSE;
  }
  for (guint i = 0; i < G_N_ELEMENTS(keys); i++) {
    gboolean bad = FALSE;
    g_autofree char *v = member_text(root, keys[i], &bad);
    if (v && !tp_header_set(s, keys[i], v, err))
      return FALSE;
  }
  gboolean bad = FALSE; /* "order_fixed_on" is the header's fixed_on; absent in older files: slots */
  g_autofree char *fixed = member_text(root, "order_fixed_on", &bad);
  if (fixed && !tp_header_set(s, "order_fixed_on", fixed, err))
    return FALSE;
  return tp_header_finish(s, err);
}

TpSchedule *tp_schedule_parse_json(const char *text, gsize len, const char *name, GError **err)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable();
  g_autoptr(GHashTable) lines = g_hash_table_new(NULL, NULL);
  g_autoptr(TpSchedule) s = tp_schedule_blank(name);
  GError *e = NULL;
  g_signal_connect(parser, "array-element", G_CALLBACK(on_element), lines);
  if (!json_parser_load_from_data(parser, text, (gssize)len, &e)) {
    /* json-glib says "<data>:LINE:COL: …" and may quote text across lines: one line, our file name */
    const char *msg = g_str_has_prefix(e->message, "<data>:") ? e->message + 7 : e->message;
    g_autoptr(GString) one = g_string_new(NULL);
    for (const char *c = msg; *c && one->len < 200; c++)
      if (*c == '\n' || *c == '\r' || *c == '\t') {
        while (c[1] == ' ' || c[1] == '\n' || c[1] == '\r' || c[1] == '\t')
          c++;
        g_string_append_c(one, ' ');
      } else {
        g_string_append_c(one, *c);
      }
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%s", name, one->str);
    g_error_free(e);
    return NULL;
  }
  JsonNode *root = json_parser_get_root(parser);
  if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: expected a JSON object at the top", name);
    return NULL;
  }
  JsonObject *ro = json_node_get_object(root);
  if (!read_header(s, ro, &e)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %s", name, e->message);
    g_error_free(e);
    return NULL;
  }
  JsonNode *stages = json_object_get_member(ro, "stages");
  if (!stages || !JSON_NODE_HOLDS_ARRAY(stages) || json_array_get_length(json_node_get_array(stages)) != (guint)s->W) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: \"stages\" must be an array of %d arrays (one per stage)", name,
                s->W);
    return NULL;
  }
  JsonArray *sa = json_node_get_array(stages);
  for (int st = 0; st < s->W; st++) {
    JsonNode *sn = json_array_get_element(sa, (guint)st);
    if (!JSON_NODE_HOLDS_ARRAY(sn)) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: stages[%d] is not an array", name, st);
      return NULL;
    }
    JsonArray *ops = json_node_get_array(sn);
    for (guint k = 0; k < json_array_get_length(ops); k++) {
      JsonNode *on = json_array_get_element(ops, k);
      int line = 0;
      if (JSON_NODE_HOLDS_OBJECT(on))
        line = GPOINTER_TO_INT(g_hash_table_lookup(lines, json_node_get_object(on)));
      gboolean bad = !JSON_NODE_HOLDS_OBJECT(on);
      TpOp op;
      int ost = st;
      char stage_txt[16];
      g_snprintf(stage_txt, sizeof stage_txt, "%d", st + 1);
      if (!bad) {
        JsonObject *o = json_node_get_object(on);
        g_autofree char *kind = member_text(o, "op", &bad), *mb = member_text(o, "mini_batch", &bad),
                        *micro = member_text(o, "micro_batch", &bad), *ver = member_text(o, "version", &bad),
                        *src = member_text(o, "source", &bad);
        if (!bad && tp_op_parse(s, stage_txt, kind ? kind : "", mb ? mb : "", micro, ver ? ver : "", src, &ost, &op, &e)) {
          op.line = line;
          g_array_append_val(s->stage[st], op);
          continue;
        }
      }
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: stages[%d][%u]: %s", name, line, st, k,
                  e ? e->message : "expected an object with op, mini_batch, micro_batch, version");
      g_clear_error(&e);
      return NULL;
    }
  }
  return g_steal_pointer(&s);
}
