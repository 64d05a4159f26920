/* tp_keyfile.c — GKeyFile loading and messages with file:line for the project's key files. */
#include "tp_keyfile.h"
#include "tp_error.h"
#include "tp_memory.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

/* Line (from 1) of the first line GKeyFile cannot take: not blank, a # comment, a [group] or a
 * key = value; 0 if every line looks right. */
static int first_bad_line(const char *text, char **shown)
{
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (int i = 0; lines[i]; i++) {
    char *l = g_strstrip(lines[i]);
    gsize n = strlen(l);
    if (n == 0 || l[0] == '#' || (l[0] == '[' && l[n - 1] == ']') || (l[0] != '[' && strchr(l, '=')))
      continue;
    *shown = tp_quote(l);
    return i + 1;
  }
  return 0;
}

static char *plain(const char *t);

/* The first group or key given twice: fail with both lines. */
static gboolean no_repeats(const TpKeyFile *k, GError **err)
{
  g_auto(GStrv) lines = g_strsplit(k->text, "\n", -1);
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *group = g_strdup("");
  for (int i = 0; lines[i]; i++) {
    char *l = g_strstrip(lines[i]);
    gsize n = strlen(l);
    g_autofree char *id = NULL, *key = NULL; /* key NULL: a group's line */
    if (n == 0 || l[0] == '#')
      continue;
    if (l[0] == '[') {
      g_free(group);
      group = g_strndup(l + 1, n - 2);
      id = g_strdup_printf("[%s]", group);
    } else {
      char *eq = strchr(l, '=');
      if (!eq)
        continue;
      key = g_strstrip(g_strndup(l, (gsize)(eq - l)));
      id = g_strdup_printf("[%s] %s", group, key);
    }
    gpointer first = g_hash_table_lookup(seen, id);
    if (first) {
      g_autofree char *g = plain(group), *kk = key ? plain(key) : NULL;
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: [%s]%s%s: %sgiven twice (first on line %d)", k->name, i + 1, g,
                  kk ? " " : "", kk ? kk : "", kk ? "" : "group ", GPOINTER_TO_INT(first));
      return FALSE;
    }
    g_hash_table_insert(seen, g_steal_pointer(&id), GINT_TO_POINTER(i + 1));
  }
  return TRUE;
}

gboolean tp_kf_open(TpKeyFile *k, const char *name, const char *text, gsize len, GError **err)
{
  GError *e = NULL;
  g_autofree char *what = g_strdup_printf("reading %s", name);
  if (!tp_memory_check_text(what, text, len, 6, FALSE, err)) /* GKeyFile's copy, its lines and ours */
    return FALSE;
  k->name = name;
  k->text = g_strndup(text, len);
  k->kf = g_key_file_new();
  if (!g_key_file_load_from_data(k->kf, text, len, G_KEY_FILE_NONE, &e)) {
    g_autofree char *shown = NULL;
    int line = first_bad_line(k->text, &shown);
    if (line)
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: %s is not a [group], a key = value or a # comment", name, line,
                  shown);
    else {
      g_autofree char *q = tp_quote(e->message);
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %s", name, q);
    }
    g_error_free(e);
    tp_kf_close(k);
    return FALSE;
  }
  if (!no_repeats(k, err)) {
    tp_kf_close(k);
    return FALSE;
  }
  return TRUE;
}

gboolean tp_kf_open_file(TpKeyFile *k, const char *path, const char *what, GError **err)
{
  g_autofree char *text = NULL;
  gsize len;
  if (!tp_read_file(path, what, &text, &len, err))
    return FALSE;
  return tp_kf_open(k, tp_input_name(path), text, len, err);
}

void tp_kf_close(TpKeyFile *k)
{
  g_free(k->text);
  k->text = NULL;
  if (k->kf)
    g_key_file_unref(k->kf);
  k->kf = NULL;
}

int tp_kf_line(const TpKeyFile *k, const char *group, const char *key)
{
  g_auto(GStrv) lines = g_strsplit(k->text, "\n", -1);
  gboolean in = FALSE;
  size_t gl = strlen(group);
  for (int i = 0; lines[i]; i++) {
    char *l = g_strstrip(lines[i]);
    if (l[0] == '[') {
      in = strncmp(l + 1, group, gl) == 0 && l[gl + 1] == ']';
      if (in && !key)
        return i + 1;
    } else if (in && key && g_str_has_prefix(l, key)) {
      const char *p = l + strlen(key);
      while (*p == ' ' || *p == '\t')
        p++;
      if (*p == '=')
        return i + 1;
    }
  }
  return 0;
}

/* A group or key name as written when it is short and plain, quoted (tp_quote) otherwise. */
static char *plain(const char *t)
{
  gboolean ok = strlen(t) <= TP_QUOTE_MAX;
  for (const char *c = t; *c && ok; c++)
    ok = g_ascii_isprint(*c) && *c != '\'';
  return ok ? g_strdup(t) : tp_quote(t);
}

gboolean tp_kf_fail(const TpKeyFile *k, GError **err, const char *group, const char *key, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *why = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  int line = tp_kf_line(k, group, key);
  g_autofree char *at = line ? g_strdup_printf("%s:%d", k->name, line) : g_strdup(k->name);
  g_autofree char *g = plain(group), *kk = key ? plain(key) : NULL;
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: [%s]%s%s: %s", at, g, kk ? " " : "", kk ? kk : "", why);
  return FALSE;
}

gboolean tp_kf_parse_number(const char *t, double *out)
{
  /* a key file's value may have blanks around it; the number itself follows tp_parse_double's rule */
  g_autofree char *v = g_strstrip(g_strdup(t));
  return tp_parse_double(v, -G_MAXDOUBLE, G_MAXDOUBLE, out, NULL);
}

gboolean tp_kf_number(const TpKeyFile *k, const char *group, const char *key, gboolean required, double lo, double hi,
                      double *out, GError **err)
{
  g_autofree char *v = g_key_file_get_value(k->kf, group, key, NULL);
  if (!v)
    return required ? tp_kf_fail(k, err, group, NULL, "missing key '%s'", key) : TRUE;
  if (!tp_kf_parse_number(v, out) || *out < lo || *out > hi) {
    g_autofree char *q = tp_quote(g_strstrip(v));
    return tp_kf_fail(k, err, group, key, "expected a number from %g to %g, got %s", lo, hi, q);
  }
  return TRUE;
}

gboolean tp_kf_name(const TpKeyFile *k, const char *group, const char *key, gboolean required, gboolean empty_ok,
                    char **out, GError **err)
{
  *out = NULL;
  g_autofree char *v = g_key_file_get_value(k->kf, group, key, NULL);
  if (!v)
    return required ? tp_kf_fail(k, err, group, NULL, "missing key '%s'", key) : TRUE;
  g_strstrip(v);
  const char *why = tp_name_problem(v);
  if (!*v && !empty_ok)
    return tp_kf_fail(k, err, group, key, "empty (give a name)");
  if (why) {
    g_autofree char *q = tp_quote(v);
    return tp_kf_fail(k, err, group, key, "%s holds %s, which a name may not", q, why);
  }
  *out = g_steal_pointer(&v);
  return TRUE;
}

gboolean tp_kf_known_keys(const TpKeyFile *k, const char *group, const char *const *known, GError **err)
{
  g_auto(GStrv) keys = g_key_file_get_keys(k->kf, group, NULL, NULL);
  for (int i = 0; keys && keys[i]; i++) {
    gboolean ok = FALSE;
    for (int j = 0; known[j] && !ok; j++)
      ok = strcmp(keys[i], known[j]) == 0;
    if (!ok) {
      g_autofree char *list = g_strjoinv(", ", (char **)known);
      return tp_kf_fail(k, err, group, keys[i], "unknown key (known: %s)", list);
    }
  }
  return TRUE;
}
