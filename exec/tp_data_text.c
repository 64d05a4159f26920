/* tp_data_text.c — token data for language models: bytes are tokens (vocabulary 256), read from a
 * text file or a directory of them (the default corpus: the fortunes package's data files), or
 * generated; cut into a training part (the first 90 %) and a test part, each sampled as windows of
 * context + 1 bytes at seeded positions. */
#include "tp_data_priv.h"
#include "tp_backend.h"
#include "tp_error.h"
#include "tp_memory.h"

#include <glib/gstdio.h>
#include <string.h>

/* ⌊(len − 1) / s⌋ windows of part [text, text + len), window i at a position from (seed, part, i). */
static TpDataset *windows(const uint8_t *text, size_t len, int s, int most, guint64 seed, const char *name,
                          const char *recipe)
{
  int n = (int)MIN((len - 1) / (size_t)s, (size_t)most);
  TpDataset *d = g_new0(TpDataset, 1);
  *d = (TpDataset){ .n = n, .rows = s, .cols = 1, .dim = s, .label_dim = s, .tokens = TRUE,
                    .pixels = g_malloc((size_t)n * s), .labels = g_malloc((size_t)n * s), .name = g_strdup(name),
                    .recipe = recipe ? g_strdup(recipe) : NULL };
  size_t starts = len - (size_t)s; /* positions 0 … len − s − 1 */
  for (int i = 0; i < n; i++) {
    size_t p = (size_t)(tp_mix64(seed ^ tp_mix64((guint64)i + 1)) % starts);
    memcpy(d->pixels + (size_t)i * s, text + p, (size_t)s);
    memcpy(d->labels + (size_t)i * s, text + p + 1, (size_t)s);
  }
  return d;
}

gboolean tp_data_text(const uint8_t *text, size_t len, const char *name, int context, guint32 seed, TpDataset **train,
                      TpDataset **test, GError **err)
{
  size_t cut = len - len / 10, need = (size_t)context + 1;
  if (cut < need || len - cut < need) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %zu bytes of text is too short for sequences of %d tokens (its "
                "test part, the last tenth, needs %zu bytes: at least %zu bytes in all)", name, len, context, need,
                need * 10);
    return FALSE;
  }
  guint64 base = tp_mix64((guint64)seed + G_GUINT64_CONSTANT(0x7e47000000));
  *train = windows(text, cut, context, TP_DATA_MAX_SAMPLES, base, name, NULL);
  *test = windows(text + cut, len - cut, context, TP_TEXT_TEST_MOST, tp_mix64(base ^ 1), name, NULL);
  return TRUE;
}

static gint by_name(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The corpus at path: a file, or a directory's files without a dot in their names in name order. */
static GByteArray *read_corpus(const char *path, gboolean default_dir, GError **err)
{
  GByteArray *all = g_byte_array_new();
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
  if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
    GError *e = NULL;
    g_autoptr(GDir) dir = g_dir_open(path, 0, &e);
    if (!dir) { /* bad input, named as the file errors below are */
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s", e->message);
      g_error_free(e);
      return g_byte_array_unref(all), NULL;
    }
    for (const char *e; (e = g_dir_read_name(dir));) {
      g_autofree char *f = g_build_filename(path, e, NULL);
      if (!strchr(e, '.') && g_file_test(f, G_FILE_TEST_IS_REGULAR))
        g_ptr_array_add(files, g_steal_pointer(&f));
    }
    g_ptr_array_sort(files, by_name);
  } else if (g_file_test(path, G_FILE_TEST_IS_REGULAR))
    g_ptr_array_add(files, g_strdup(path));
  else if (g_file_test(path, G_FILE_TEST_EXISTS)) { /* a FIFO would block, a device never end */
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: not a regular file (text data is a file or a directory of them)",
                path);
    return g_byte_array_unref(all), NULL;
  } else {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: no such text file or directory%s", path,
                default_dir ? " (install the fortunes package for the default corpus, or give --data text:FILE)" : "");
    return g_byte_array_unref(all), NULL;
  }
  /* the corpus, a file's read buffer and the windows cut from it (inputs and labels) at once */
  long long total = 0;
  for (guint i = 0; i < files->len; i++) {
    GStatBuf st;
    if (g_stat(files->pdata[i], &st) == 0 && st.st_size > 0)
      total = MIN(total + st.st_size, (long long)TP_TEXT_MAX_BYTES + 1);
  }
  g_autofree char *what = g_strdup_printf("the text data %s (%lld bytes)", path, total);
  if (!tp_memory_check(what, 0, 0, 0, tp_memory_grown(total) + 3 * total, err))
    return g_byte_array_unref(all), NULL;
  if (total > 0 && total <= TP_TEXT_MAX_BYTES)
    g_byte_array_set_size(all, (guint)total), g_byte_array_set_size(all, 0);
  for (guint i = 0; i < files->len; i++) {
    g_autofree char *text = NULL;
    gsize len = 0;
    GError *e = NULL;
    if (all->len >= TP_TEXT_MAX_BYTES ||
        !tp_read_file_max(files->pdata[i], "text", TP_TEXT_MAX_BYTES - all->len, &text, &len, &e)) {
      if (e)
        g_propagate_error(err, e);
      else
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: more than %d MiB of text (the most read)", path,
                    TP_TEXT_MAX_BYTES >> 20);
      return g_byte_array_unref(all), NULL;
    }
    g_byte_array_append(all, (const guint8 *)text, (guint)len);
  }
  return all;
}

/* A learnable byte process: each next byte is 5·b + 1 (mod 256) of the last, except one in eight,
 * drawn at random; n·s + 1 bytes from seed. */
static uint8_t *synthetic_text(size_t len, guint64 seed)
{
  uint8_t *t = g_malloc(len);
  t[0] = (uint8_t)tp_mix64(seed);
  for (size_t i = 1; i < len; i++) {
    guint64 h = tp_mix64(seed ^ tp_mix64(i));
    t[i] = (h & 7) == 0 ? (uint8_t)(h >> 8) : (uint8_t)(5 * t[i - 1] + 1);
  }
  return t;
}

TpDataset *tp_dataset_synthetic_tokens(int n, int context, guint32 seed, int part)
{
  guint64 base = tp_mix64((guint64)seed + G_GUINT64_CONSTANT(0x5e17000000) + (guint64)part);
  size_t len = (size_t)n * context + 1;
  g_autofree uint8_t *t = synthetic_text(len, base);
  g_autofree char *recipe = g_strdup_printf("synthetic tokens %d of %d, seed %u, part %d, generator 1", n, context, seed,
                                            part);
  return windows(t, len, context, TP_DATA_MAX_SAMPLES, tp_mix64(base), "synthetic", recipe);
}

gboolean tp_data_open_text(const char *spec, const TpDataShape *shape, guint32 seed, TpDataset **train,
                           TpDataset **test, GError **err)
{
  const int s = shape->context;
  gboolean synthetic = spec && g_str_has_prefix(spec, "synthetic");
  /* text is bytes, a vocabulary of 256; synthetic bytes are valid tokens of any larger one (speed runs) */
  if (synthetic ? shape->classes < 256 : shape->classes != 256) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_DATA, "the model's vocabulary is %d tokens; byte data has 256 (text: "
                "exactly 256; synthetic tokens: 256 or more)", shape->classes);
    return FALSE;
  }
  if (synthetic) {
    int n[2];
    if (!tp_data_parse_synthetic(spec, "text:FILE", "sequences", &n[0], &n[1], err))
      return FALSE;
    /* each part: its bytes, then windows of them (inputs and labels) */
    long long need = 3 * ((long long)n[0] + n[1]) * s + 2;
    g_autofree char *what = g_strdup_printf("the synthetic token data (%d and %d sequences of %d tokens)", n[0], n[1], s);
    if (!tp_memory_check(what, 0, 0, 0, need, err))
      return FALSE;
    *train = tp_dataset_synthetic_tokens(n[0], s, seed, 0);
    *test = tp_dataset_synthetic_tokens(n[1], s, seed, 1);
    return TRUE;
  }
  if (spec && !g_str_has_prefix(spec, "text:")) {
    g_autofree char *q = tp_quote(spec);
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_DATA, "bad value %s for a token model (expected text:FILE or "
                "synthetic[:TRAIN[:TEST]])", q);
    return FALSE;
  }
  const char *path = spec ? spec + strlen("text:") : TP_TEXT_DEFAULT_DIR;
  GByteArray *text = read_corpus(path, !spec, err);
  if (!text)
    return FALSE;
  if (text->len == 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: no text (an empty file, or a directory without text files)", path);
    g_byte_array_unref(text);
    return FALSE;
  }
  gboolean ok = tp_data_text(text->data, text->len, path, s, seed, train, test, err);
  g_byte_array_unref(text);
  return ok;
}
