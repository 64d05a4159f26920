/* tp_tally.c — a run's counts so far (tp_tally.h), through one table of their fields: the key each
 * is stored under, its kind, and whether a list holds one value per run or per mini-batch. */
#include "config.h"
#include "tp_tally.h"
#include "tp_error.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

typedef enum { T_DOUBLE, T_BOOL, T_LONG, T_DOUBLES, T_INTS } Kind;

typedef struct {
  const char *key;
  Kind kind;
  size_t off;
  gboolean per_run; /* a list: one value per run complete (else per mini-batch of the current run) */
} Field;

static const Field fields[] = {
  { "train_time", T_DOUBLE, offsetof(TpTally, train_time), FALSE },
  { "samples", T_DOUBLE, offsetof(TpTally, samples), FALSE },
  { "epoch_wall", T_DOUBLE, offsetof(TpTally, epoch_wall), FALSE },
  { "versions_match", T_BOOL, offsetof(TpTally, versions_match), FALSE },
  { "mismatched_reads", T_LONG, offsetof(TpTally, mismatched), FALSE },
  { "test_accuracy", T_DOUBLES, offsetof(TpTally, test_acc), TRUE },
  { "test_loss", T_DOUBLES, offsetof(TpTally, test_loss), TRUE },
  { "epoch_time", T_DOUBLES, offsetof(TpTally, epoch_time), TRUE },
  { "train_loss", T_DOUBLES, offsetof(TpTally, train_loss), TRUE },
  { "loss_sum", T_DOUBLES, offsetof(TpTally, loss_sum), FALSE },
  { "update_time", T_DOUBLES, offsetof(TpTally, upd_time), FALSE },
  { "correct", T_INTS, offsetof(TpTally, correct), FALSE },
};

#define AT(t, f, type) ((type *)((char *)(t) + (f)->off))
#define IS_LIST(f) ((f)->kind == T_DOUBLES || (f)->kind == T_INTS)

void tp_tally_init(TpTally *t)
{
  *t = (TpTally){ .versions_match = TRUE };
  for (size_t i = 0; i < G_N_ELEMENTS(fields); i++)
    if (IS_LIST(&fields[i]))
      *AT(t, &fields[i], GArray *) = g_array_new(FALSE, FALSE, fields[i].kind == T_INTS ? sizeof(int) : sizeof(double));
}

void tp_tally_clear(TpTally *t)
{
  for (size_t i = 0; i < G_N_ELEMENTS(fields); i++)
    if (IS_LIST(&fields[i]) && *AT(t, &fields[i], GArray *))
      g_array_unref(*AT(t, &fields[i], GArray *));
  *t = (TpTally){ 0 };
}

static const size_t scalar_size[] = { [T_DOUBLE] = sizeof(double), [T_BOOL] = sizeof(gboolean), [T_LONG] = sizeof(long) };

void tp_tally_copy(TpTally *dst, const TpTally *src)
{
  for (size_t i = 0; i < G_N_ELEMENTS(fields); i++) {
    const Field *f = &fields[i];
    if (IS_LIST(f)) {
      GArray *to = *AT(dst, f, GArray *), *from = *AT(src, f, GArray *);
      g_array_set_size(to, 0);
      g_array_append_vals(to, from->data, from->len);
    } else
      memcpy(AT(dst, f, char), AT(src, f, const char), scalar_size[f->kind]);
  }
}

static char *join(const GArray *a, gboolean ints)
{
  GString *s = g_string_new(NULL);
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  for (guint i = 0; i < a->len; i++)
    if (ints)
      g_string_append_printf(s, "%s%d", i ? ";" : "", g_array_index(a, int, i));
    else
      g_string_append_printf(s, "%s%s", i ? ";" : "", g_ascii_dtostr(buf, sizeof buf, g_array_index(a, double, i)));
  return g_string_free(s, FALSE);
}

void tp_tally_put(const TpTally *t, GKeyFile *k, const char *group)
{
  for (size_t i = 0; i < G_N_ELEMENTS(fields); i++) {
    const Field *f = &fields[i];
    if (f->kind == T_DOUBLE)
      g_key_file_set_double(k, group, f->key, *AT(t, f, const double));
    else if (f->kind == T_BOOL)
      g_key_file_set_boolean(k, group, f->key, *AT(t, f, const gboolean));
    else if (f->kind == T_LONG)
      g_key_file_set_int64(k, group, f->key, *AT(t, f, const long));
    else {
      g_autofree char *v = join(*AT(t, f, GArray *const), f->kind == T_INTS);
      g_key_file_set_string(k, group, f->key, v);
    }
  }
}

/* ';'-separated numbers appended to a (ints or doubles); FALSE on anything else. */
static gboolean split(const char *text, GArray *a, gboolean ints)
{
  g_auto(GStrv) parts = g_strsplit(text, ";", -1);
  for (int i = 0; *text && parts[i]; i++) {
    char *end = NULL;
    int n = 0;
    double x = ints ? 0 : g_ascii_strtod(parts[i], &end);
    if (ints ? !tp_parse_int(parts[i], G_MININT, G_MAXINT, &n, NULL) : end == parts[i] || *end)
      return FALSE;
    if (ints)
      g_array_append_val(a, n);
    else
      g_array_append_val(a, x);
  }
  return TRUE;
}

static gboolean get_one(TpTally *t, GKeyFile *k, const char *group, const Field *f)
{
  GError *e = NULL;
  if (f->kind == T_DOUBLE)
    *AT(t, f, double) = g_key_file_get_double(k, group, f->key, &e);
  else if (f->kind == T_BOOL)
    *AT(t, f, gboolean) = g_key_file_get_boolean(k, group, f->key, &e);
  else if (f->kind == T_LONG)
    *AT(t, f, long) = (long)g_key_file_get_int64(k, group, f->key, &e);
  else {
    g_autofree char *v = g_key_file_get_string(k, group, f->key, NULL);
    return v && split(v, *AT(t, f, GArray *), f->kind == T_INTS);
  }
  gboolean ok = !e;
  g_clear_error(&e);
  return ok;
}

gboolean tp_tally_get(TpTally *t, GKeyFile *k, const char *group, gboolean lists, const char **which)
{
  for (size_t i = 0; i < G_N_ELEMENTS(fields); i++)
    if (IS_LIST(&fields[i]) == lists && !get_one(t, k, group, &fields[i])) {
      *which = fields[i].key;
      return FALSE;
    }
  return TRUE;
}

/* NULL when every value of list field f is a count or a number it may hold, else a line naming it. */
static char *list_check(const Field *f, const GArray *a, int most_correct)
{
  for (guint i = 0; i < a->len; i++) {
    if (f->kind == T_INTS) {
      int v = g_array_index(a, int, i);
      if (v < 0 || v > most_correct)
        return g_strdup_printf("%s value %u is %d, not a count from 0 to %d (the labels of a mini-batch)", f->key,
                               i + 1, v, most_correct);
      continue;
    }
    double v = g_array_index(a, double, i), hi = strcmp(f->key, "test_accuracy") == 0 ? 1 : G_MAXDOUBLE;
    if (!(isfinite(v) && v >= 0 && v <= hi))
      return g_strdup_printf("%s value %u is not a finite number from 0%s", f->key, i + 1, hi == 1 ? " to 1" : " up");
  }
  return NULL;
}

char *tp_tally_check(const TpTally *t, int runs, int index, int K, int batch, int labels)
{
  for (size_t i = 0; i < G_N_ELEMENTS(fields); i++) {
    const Field *f = &fields[i];
    if (f->kind == T_DOUBLE && !(isfinite(*AT(t, f, const double)) && *AT(t, f, const double) >= 0))
      return g_strdup_printf("%s is not a finite number of 0 or more", f->key);
    guint want = (guint)(f->per_run ? runs : index);
    if (IS_LIST(f) && (*AT(t, f, GArray *const))->len != want)
      return g_strdup_printf("%s holds %u values, the position says %u", f->key, (*AT(t, f, GArray *const))->len, want);
    char *bad = IS_LIST(f) ? list_check(f, *AT(t, f, GArray *const), batch * labels) : NULL;
    if (bad)
      return bad;
  }
  double samples = ((double)runs * K + index) * batch;
  if (t->samples != samples)
    return g_strdup_printf("samples is %.17g, the position says %.17g (%d mini-batches of %d)", t->samples, samples,
                           runs * K + index, batch);
  if (t->versions_match != (t->mismatched == 0))
    return g_strdup_printf("versions_match is %s with %ld mismatched_reads", t->versions_match ? "true" : "false",
                           t->mismatched);
  return NULL;
}
