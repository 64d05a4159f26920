/* tp_checkpoint.c — writing and reading the training checkpoint (tp_checkpoint.h): the metadata as a
 * GKeyFile closed by a sha256 over its own text, the state as one little-endian float32 file whose
 * sha256 the metadata records, both put in place by temporary file, fsync and rename. */
#include "config.h"
#include "tp_checkpoint.h"
#include "tp_checkpoint_priv.h"
#include "tp_digest.h"
#include "tp_error.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#define FORMAT 1
/* More parameters than any stage of a model the project loads can hold (tp_model limits layers far below). */
#define TP_CHECKPOINT_MAX_PARAMS ((guint64)1 << 36)
#define SEAL "\n[integrity]\nsha256="

void tp_checkpoint_init(TpCheckpoint *c, int W, const size_t *np, const size_t *nb, int states)
{
  memset(c, 0, sizeof *c);
  c->id_keys = g_ptr_array_new_with_free_func(g_free);
  c->id_vals = g_ptr_array_new_with_free_func(g_free);
  c->W = W, c->states = states;
  c->lo = 0, c->hi = W;
  c->np = g_new0(size_t, W);
  c->weights = g_new0(float *, W);
  c->mom = g_new0(float *, W);
  c->nb = g_new0(size_t, W);
  c->buf = g_new0(float *, W);
  for (int s = 0; s < W; s++) {
    c->np[s] = np ? np[s] : 0;
    c->nb[s] = nb ? nb[s] : 0;
    c->weights[s] = g_new0(float, c->np[s] ? c->np[s] : 1);
    c->mom[s] = g_new0(float, c->np[s] ? c->np[s] * states : 1);
    c->buf[s] = g_new0(float, c->nb[s] ? c->nb[s] : 1);
  }
  tp_tally_init(&c->tally);
}

void tp_checkpoint_clear(TpCheckpoint *c)
{
  for (int s = 0; s < c->W; s++) {
    g_free(c->weights[s]);
    g_free(c->mom[s]);
    g_free(c->buf[s]);
  }
  g_free(c->weights);
  g_free(c->mom);
  g_free(c->buf);
  g_free(c->np);
  g_free(c->nb);
  if (c->id_keys)
    g_ptr_array_unref(c->id_keys);
  if (c->id_vals)
    g_ptr_array_unref(c->id_vals);
  g_free(c->plan);
  g_free(c->plan_tail);
  g_free(c->plan_cut);
  g_free(c->log);
  tp_tally_clear(&c->tally);
  memset(c, 0, sizeof *c);
}

void tp_checkpoint_id(TpCheckpoint *c, const char *key, const char *value)
{
  g_ptr_array_add(c->id_keys, g_strdup(key));
  g_ptr_array_add(c->id_vals, g_strdup(value));
}

/* ---- writing ----------------------------------------------------------------------------------- */

static gboolean fail_errno(const char *path, const char *what, GError **err)
{
  int e = errno;
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: cannot %s the checkpoint: %s", path, what, g_strerror(e));
  return FALSE;
}

static gboolean sync_dir(const char *dir, GError **err)
{
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0 || fsync(fd) != 0) {
    gboolean r = fail_errno(dir, "sync", err);
    if (fd >= 0)
      close(fd);
    return r;
  }
  close(fd);
  return TRUE;
}

/* data into dir/name by a temporary file, fsync and rename; kill: die between fsync and rename. */
static gboolean put_file(const char *dir, const char *name, const void *data, gsize len, gboolean kill, GError **err)
{
  g_autofree char *final = g_build_filename(dir, name, NULL);
  g_autofree char *tmp = g_strdup_printf("%s/.%s.XXXXXX", dir, name);
  int fd = g_mkstemp(tmp);
  if (fd < 0)
    return fail_errno(final, "create", err);
  (void)fchmod(fd, 0644); /* mkstemp's 0600 otherwise */
  const char *p = data;
  gsize left = len;
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      gboolean r = fail_errno(final, "write", err);
      close(fd);
      g_unlink(tmp);
      return r;
    }
    p += n, left -= (gsize)n;
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    gboolean r = fail_errno(final, "write", err);
    g_unlink(tmp);
    return r;
  }
  if (kill)
    raise(SIGKILL); /* the test hook: as if killed before the rename */
  if (g_rename(tmp, final) != 0) {
    gboolean r = fail_errno(final, "rename", err);
    g_unlink(tmp);
    return r;
  }
  return TRUE;
}

/* Floats of state a stage of np parameters holds: its weights, its optimizer state, its buffers. */
static gsize stage_floats(const TpCheckpoint *c, int s) { return (gsize)(1 + c->states) * c->np[s] + c->nb[s]; }

/* Stages lo..hi-1's weights then optimizer state, stage after stage, as little-endian float32. */
static char *state_bytes(const TpCheckpoint *c, int lo, int hi, gsize *len)
{
  gsize n = 0;
  for (int s = lo; s < hi; s++)
    n += stage_floats(c, s);
  guint32 *out = g_new(guint32, n ? n : 1), *q = out;
  for (int s = lo; s < hi; s++) {
    const float *src[3] = { c->weights[s], c->mom[s], c->buf[s] };
    const size_t len_of[3] = { c->np[s], c->np[s] * c->states, c->nb[s] };
    for (int h = 0; h < 3; h++)
      for (size_t i = 0; i < len_of[h]; i++, q++) {
        memcpy(q, &src[h][i], 4);
        *q = GUINT32_TO_LE(*q);
      }
  }
  *len = n * 4;
  return (char *)out;
}

/* The metadata naming n state files (one for every stage, or one per stage) and their sha256. */
static char *metadata(const TpCheckpoint *c, const char *const *state, const char *const *sha, int n, gsize bytes)
{
  g_autoptr(GKeyFile) k = g_key_file_new();
  g_key_file_set_integer(k, "checkpoint", "format", FORMAT);
  g_key_file_set_integer(k, "checkpoint", "generation", c->generation);
  if (n == 1) {
    g_key_file_set_string(k, "checkpoint", "state", state[0]);
    g_key_file_set_string(k, "checkpoint", "state_sha256", sha[0]);
  } else {
    g_key_file_set_string_list(k, "checkpoint", "state", state, (gsize)n);
    g_key_file_set_string_list(k, "checkpoint", "state_sha256", sha, (gsize)n);
  }
  g_key_file_set_uint64(k, "checkpoint", "state_bytes", bytes);
  for (guint i = 0; i < c->id_keys->len; i++)
    g_key_file_set_string(k, "identity", c->id_keys->pdata[i], c->id_vals->pdata[i]);
  const char *ik[] = { "epoch", "index", "done", "data_epoch", "data_index", "stages" };
  int iv[] = { c->epoch, c->index, c->done, c->pos.epoch, c->pos.index, c->W };
  for (size_t i = 0; i < G_N_ELEMENTS(ik); i++)
    g_key_file_set_integer(k, "position", ik[i], iv[i]);
  g_key_file_set_uint64(k, "position", "seed", c->seed);
  g_key_file_set_integer(k, "position", "optimizer_states", c->states);
  for (int s = 0; s < c->W; s++) {
    g_autofree char *key = g_strdup_printf("params_%d", s + 1), *bkey = g_strdup_printf("buffers_%d", s + 1);
    g_key_file_set_uint64(k, "position", key, c->np[s]);
    if (c->nb[s]) /* absent: none, as written before buffers existed */
      g_key_file_set_uint64(k, "position", bkey, c->nb[s]);
  }
  g_key_file_set_string(k, "plan", "segment", c->plan ? c->plan : "");
  g_key_file_set_string(k, "plan", "last_segment", c->plan_tail ? c->plan_tail : "");
  if (c->plan_cut) /* absent: a checkpoint at a segment's end, as written before stops inside one */
    g_key_file_set_string(k, "plan", "cut_segment", c->plan_cut);
  g_key_file_set_string(k, "results", "log", c->log ? c->log : "");
  g_key_file_set_double(k, "results", "elapsed", c->elapsed);
  tp_tally_put(&c->tally, k, "results");
  GString *text = g_string_new(NULL);
  g_autofree char *body = g_key_file_to_data(k, NULL, NULL);
  g_string_append(text, "# timeprest training checkpoint (README: Checkpoints)\n");
  g_string_append(text, body);
  while (text->len && text->str[text->len - 1] == '\n')
    g_string_truncate(text, text->len - 1);
  g_autofree char *seal = tp_sha256_hex(text->str, text->len);
  g_string_append_printf(text, SEAL "%s\n", seal);
  return g_string_free(text, FALSE);
}

/* The metadata in place: the commit of a checkpoint (kill: the test hook of TP_CHECKPOINT_KILL_ENV). */
static gboolean put_metadata(const char *dir, const TpCheckpoint *c, const char *const *state, const char *const *sha,
                             int n, gsize bytes, GError **err)
{
  static int writes;
  const char *kill_at = g_getenv(TP_CHECKPOINT_KILL_ENV);
  gboolean kill = kill_at && atoi(kill_at) == ++writes;
  g_autofree char *meta = metadata(c, state, sha, n, bytes);
  return put_file(dir, TP_CHECKPOINT_INI, meta, strlen(meta), kill, err) && sync_dir(dir, err);
}

gboolean tp_checkpoint_write(const char *dir, const TpCheckpoint *c, GError **err)
{
  if (g_mkdir_with_parents(dir, 0777) != 0)
    return fail_errno(dir, "create the directory of", err);
  gsize len = 0;
  g_autofree char *bytes = state_bytes(c, 0, c->W, &len);
  g_autofree char *sha = tp_sha256_hex(bytes, len);
  g_autofree char *state = g_strdup_printf("state-%d.bin", c->generation);
  /* the new state under its own name first, then the metadata that names it: until that rename the
   * previous metadata and its state file are the checkpoint */
  const char *names[] = { state }, *shas[] = { sha };
  if (!put_file(dir, state, bytes, len, FALSE, err) || !sync_dir(dir, err) ||
      !put_metadata(dir, c, names, shas, 1, len, err))
    return FALSE;
  tp_checkpoint_remove_files(dir, c->generation, -1);
  return TRUE;
}

gboolean tp_checkpoint_write_part(const char *dir, const TpCheckpoint *c, int stage, char sha[65], GError **err)
{
  if (g_mkdir_with_parents(dir, 0777) != 0)
    return fail_errno(dir, "create the directory of", err);
  gsize len = 0;
  g_autofree char *bytes = state_bytes(c, stage, stage + 1, &len);
  g_autofree char *sum = tp_sha256_hex(bytes, len);
  g_autofree char *state = g_strdup_printf("state-%d-stage%d.bin", c->generation, stage + 1);
  g_strlcpy(sha, sum, 65);
  return put_file(dir, state, bytes, len, FALSE, err) && sync_dir(dir, err);
}

gboolean tp_checkpoint_commit_parts(const char *dir, const TpCheckpoint *c, const char *const *sha, GError **err)
{
  char **names = g_new0(char *, c->W + 1);
  gsize bytes = 0;
  for (int s = 0; s < c->W; s++) {
    names[s] = g_strdup_printf("state-%d-stage%d.bin", c->generation, s + 1);
    bytes += stage_floats(c, s) * 4;
  }
  gboolean ok = put_metadata(dir, c, (const char *const *)names, sha, c->W, bytes, err);
  g_strfreev(names);
  return ok;
}

/* ---- reading ----------------------------------------------------------------------------------- */

static gboolean bad(GError **err, const char *path, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean bad(GError **err, const char *path, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %s", path, msg);
  return FALSE;
}

/* The metadata's text (path names it in errors) checked against its seal, then parsed. */
static GKeyFile *parse_metadata(const char *path, const char *text, gsize len, GError **err)
{
  if (memchr(text, '\0', len))
    return bad(err, path, "not a whole checkpoint (truncated or not one)"), NULL;
  const char *seal = g_strrstr_len(text, (gssize)len, SEAL);
  if (!seal)
    return bad(err, path, "not a whole checkpoint (truncated or not one)"), NULL;
  g_autofree char *sha = tp_sha256_hex(text, (gsize)(seal - text));
  const char *rec = seal + strlen(SEAL);
  if ((gsize)(rec - text) + 65 != len || strncmp(rec, sha, 64) != 0 || rec[64] != '\n')
    return bad(err, path, "corrupt: its sha256 does not match its contents"), NULL;
  GKeyFile *k = g_key_file_new();
  GError *e = NULL;
  if (!g_key_file_load_from_data(k, text, len, G_KEY_FILE_NONE, &e)) {
    bad(err, path, "%s", e->message);
    g_error_free(e);
    g_key_file_free(k);
    return NULL;
  }
  return k;
}

/* A regular file of the checkpoint, whole: at most max bytes, or exactly `exact` when >= 0.  Opened
 * without blocking (a FIFO without a writer) and refused unless a regular file, so that neither a
 * device nor a pipe is read without end.  *what: the reason on failure (errno's text, or ours). */
static char *read_regular(const char *path, guint64 max, gint64 exact, gsize *len, int *eno, const char **what)
{
  *eno = 0, *what = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    *eno = errno;
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  if (!S_ISREG(st.st_mode))
    *what = S_ISDIR(st.st_mode) ? "a directory, not a regular file" : "not a regular file";
  else if (exact >= 0 && (guint64)st.st_size != (guint64)exact)
    *what = "of another size than the checkpoint says (truncated or corrupt)";
  else if ((guint64)st.st_size > max)
    *what = "larger than a checkpoint's metadata can be";
  char *buf = *what ? NULL : g_try_malloc((gsize)st.st_size + 1);
  if (!*what && !buf)
    *what = "too large to hold in memory";
  gsize n = 0;
  while (buf && n < (gsize)st.st_size) {
    ssize_t r = read(fd, buf + n, MIN((gsize)st.st_size - n, (gsize)1 << 24));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      *eno = r < 0 ? errno : 0, *what = r < 0 ? NULL : "shorter than its size (changed while read)";
      g_clear_pointer(&buf, g_free);
      break;
    }
    n += (gsize)r;
  }
  close(fd);
  if (buf) {
    buf[n] = '\0';
    *len = n;
  }
  return buf;
}

char *tp_checkpoint_read_meta(const char *dir, gsize *len, GError **err)
{
  g_autofree char *path = g_build_filename(dir, TP_CHECKPOINT_INI, NULL);
  int eno;
  const char *what;
  char *text = read_regular(path, tp_max_schedule_bytes() * 2 + TP_MAX_TEXT_BYTES, -1, len, &eno, &what);
  if (!text) {
    if (eno == ENOENT)
      bad(err, path, "no checkpoint here");
    else
      bad(err, path, "cannot read the checkpoint: %s", what ? what : g_strerror(eno));
  }
  return text;
}

/* Every params_S and buffers_S key of [position] names a stage 1..W in plain digits (no sign, no
 * leading zero), and its value is plain digits too: a stray key is not another stage's. */
static gboolean stage_keys_known(GKeyFile *k, int W, const char *path, GError **err)
{
  g_auto(GStrv) keys = g_key_file_get_keys(k, "position", NULL, NULL);
  for (int i = 0; keys && keys[i]; i++) {
    const char *key = keys[i], *num = g_str_has_prefix(key, "params_")    ? key + strlen("params_")
                                      : g_str_has_prefix(key, "buffers_") ? key + strlen("buffers_")
                                                                          : NULL;
    if (!num)
      continue;
    g_autofree char *v = g_key_file_get_value(k, "position", key, NULL);
    gboolean plain = *num && *num != '0' && strspn(num, "0123456789") == strlen(num) && v && *v &&
                     (v[0] != '0' || !v[1]) && strspn(v, "0123456789") == strlen(v);
    if (!plain || g_ascii_strtoll(num, NULL, 10) > W)
      return bad(err, path, "%s=%s: not a key of stage 1 to %d with a count in plain digits", key, v ? v : "", W);
  }
  return TRUE;
}

/* Bytes of stages lo..hi-1's state. */
static gsize range_bytes(const TpCheckpoint *c, int lo, int hi)
{
  gsize n = 0;
  for (int s = lo; s < hi; s++)
    n += stage_floats(c, s) * 4;
  return n;
}

/* One state file, holding stages lo..hi-1, checked against its sha256; the stages of c->lo..c->hi-1
 * among them decoded into c. */
/* Stage s's state as read: every weight, optimizer state and buffer finite, AdamW's second moments
 * (the second half of its states) not negative. */
static gboolean state_meaningful(const TpCheckpoint *c, int s, const char *path, GError **err)
{
  const float *src[3] = { c->weights[s], c->mom[s], c->buf[s] };
  const size_t len_of[3] = { c->np[s], c->np[s] * c->states, c->nb[s] };
  static const char *const name[3] = { "weight", "optimizer state", "buffer" };
  for (int h = 0; h < 3; h++)
    for (size_t i = 0; i < len_of[h]; i++) {
      gboolean second = h == 1 && c->states == 2 && i >= c->np[s];
      if (isfinite(src[h][i]) && !(second && src[h][i] < 0))
        continue;
      return bad(err, path, "stage %d's %s %zu is %s (a checkpoint holds finite numbers%s)", s + 1, name[h],
                 second ? i - c->np[s] : i, isnan(src[h][i]) ? "NaN" : isinf(src[h][i]) ? "infinite" : "negative",
                 second ? ", AdamW's second moments 0 or more" : "");
    }
  return TRUE;
}

static gboolean read_state_file(const char *dir, const char *name, const char *want, int lo, int hi, TpCheckpoint *c,
                                GError **err)
{
  g_autofree char *path = g_build_filename(dir, name ? name : "?", NULL);
  g_autofree char *bytes = NULL;
  gsize len = 0, n = range_bytes(c, lo, hi);
  int eno = 0;
  const char *what = NULL;
  if (!name || !*name || strchr(name, '/') || !want ||
      !(bytes = read_regular(path, n, (gint64)n, &len, &eno, &what)))
    return bad(err, path, "cannot read the checkpoint's state: %s", what ? what : eno ? g_strerror(eno) : "not named");
  g_autofree char *sha = tp_sha256_hex(bytes, len);
  if (strcmp(sha, want) != 0)
    return bad(err, path, "corrupt: its sha256 does not match the checkpoint's");
  const guint32 *q = (const guint32 *)(gpointer)bytes;
  for (int s = lo; s < hi; s++) {
    gboolean wanted = s >= c->lo && s < c->hi;
    float *dst[3] = { c->weights[s], c->mom[s], c->buf[s] };
    const size_t len_of[3] = { c->np[s], c->np[s] * c->states, c->nb[s] };
    for (int h = 0; h < 3; h++)
      for (size_t i = 0; i < len_of[h]; i++, q++) {
        if (!wanted)
          continue;
        guint32 u = GUINT32_FROM_LE(*q);
        memcpy(&dst[h][i], &u, 4);
      }
    if (wanted && !state_meaningful(c, s, path, err))
      return FALSE;
  }
  return TRUE;
}

/* The state files the metadata names: one holding every stage, or one per stage. */
static gboolean read_state(const char *dir, const char *path, GKeyFile *k, TpCheckpoint *c, GError **err)
{
  gsize n = 0, m = 0;
  g_auto(GStrv) names = g_key_file_get_string_list(k, "checkpoint", "state", &n, NULL);
  g_auto(GStrv) shas = g_key_file_get_string_list(k, "checkpoint", "state_sha256", &m, NULL);
  if (!names || !shas || n != m || (n != 1 && n != (gsize)c->W))
    return bad(err, path, "not a checkpoint of this format (its state files)");
  if (n == 1)
    return read_state_file(dir, names[0], shas[0], 0, c->W, c, err);
  for (int s = c->lo; s < c->hi; s++)
    if (!read_state_file(dir, names[s], shas[s], s, s + 1, c, err))
      return FALSE;
  return TRUE;
}

/* The parameter and buffer floats of each of W stages (params_S, buffers_S), in range, and state_bytes
 * agreeing with them. */
static gboolean read_sizes(GKeyFile *k, const char *path, int W, int states, size_t *np, size_t *nb, GError **err)
{
  GError *e = NULL;
  guint64 sum = 0;
  for (int s = 0; s < W; s++) {
    g_autofree char *key = g_strdup_printf("params_%d", s + 1), *bkey = g_strdup_printf("buffers_%d", s + 1);
    guint64 v = g_key_file_get_uint64(k, "position", key, &e), b = 0;
    if (e) {
      g_clear_error(&e);
      return bad(err, path, "stages=%d, but %s is missing or not a count", W, key);
    }
    if (v > TP_CHECKPOINT_MAX_PARAMS)
      return bad(err, path, "%s=%" G_GUINT64_FORMAT " is more parameters than a stage holds", key, v);
    if (g_key_file_has_key(k, "position", bkey, NULL) &&
        ((b = g_key_file_get_uint64(k, "position", bkey, &e)), e || b == 0 || b > TP_CHECKPOINT_MAX_PARAMS)) {
      g_clear_error(&e);
      return bad(err, path, "%s is not a count of buffer floats a stage holds", bkey);
    }
    np[s] = (size_t)v, nb[s] = (size_t)b;
    sum += (guint64)(1 + states) * 4 * v + 4 * b;
  }
  guint64 bytes = g_key_file_get_uint64(k, "checkpoint", "state_bytes", &e);
  if (e || bytes != sum) {
    g_clear_error(&e);
    return bad(err, path, "state_bytes disagrees with params_1..params_%d and buffers (%" G_GUINT64_FORMAT
               " bytes of state)", W, sum);
  }
  return TRUE;
}

static gboolean read_into(const char *dir, const char *meta, gsize meta_len, int lo, int hi, TpCheckpoint *c,
                          GError **err)
{
  g_autofree char *path = g_build_filename(dir, TP_CHECKPOINT_INI, NULL);
  g_autoptr(GKeyFile) k = parse_metadata(path, meta, meta_len, err);
  if (!k)
    return FALSE;
  GError *e = NULL;
  if (g_key_file_get_integer(k, "checkpoint", "format", NULL) != FORMAT)
    return bad(err, path, "not a checkpoint of this format");
  int W = g_key_file_get_integer(k, "position", "stages", &e);
  if (e || W < 1 || W > 4096) {
    g_clear_error(&e);
    return bad(err, path, "stages is not a number of stages (1 to 4096)");
  }
  /* the optimizer's state per parameter (1 where a checkpoint written before AdamW does not say) */
  int states = 1;
  if (g_key_file_has_key(k, "position", "optimizer_states", NULL)) {
    states = g_key_file_get_integer(k, "position", "optimizer_states", &e);
    if (e || states < 1 || states > 2) {
      g_clear_error(&e);
      return bad(err, path, "optimizer_states is not 1 (SGD) or 2 (AdamW)");
    }
  }
  if (!stage_keys_known(k, W, path, err))
    return FALSE;
  /* the parameter counts, each in range (before anything is allocated for it), and the state's size
   * agree */
  g_autofree size_t *np = g_new0(size_t, W), *nb = g_new0(size_t, W);
  if (!read_sizes(k, path, W, states, np, nb, err))
    return FALSE;
  tp_checkpoint_init(c, W, np, nb, states);
  c->lo = hi < 0 ? 0 : MIN(MAX(lo, 0), W);
  c->hi = hi < 0 ? W : MIN(MAX(hi, c->lo), W);
  g_auto(GStrv) keys = g_key_file_get_keys(k, "identity", NULL, NULL);
  for (int i = 0; keys && keys[i]; i++) {
    g_autofree char *v = g_key_file_get_string(k, "identity", keys[i], NULL);
    tp_checkpoint_id(c, keys[i], v ? v : "");
  }
  const char *which = NULL; /* the key missing or malformed */
  int *iv[] = { &c->generation, &c->epoch, &c->index, &c->done, &c->pos.epoch, &c->pos.index };
  const char *ig[] = { "checkpoint", "position", "position", "position", "position", "position" };
  const char *ik[] = { "generation", "epoch", "index", "done", "data_epoch", "data_index" };
  for (size_t i = 0; i < G_N_ELEMENTS(iv) && !e; i++)
    *iv[i] = g_key_file_get_integer(k, ig[i], ik[i], &e), which = ik[i];
  guint64 seed = 0;
  if (!e)
    seed = g_key_file_get_uint64(k, "position", "seed", &e), which = "seed";
  if (!e && seed > G_MAXUINT32)
    return bad(err, path, "seed=%" G_GUINT64_FORMAT " is not a seed (0 to %u)", seed, G_MAXUINT32);
  c->seed = (guint32)seed;
  if (!e)
    c->elapsed = g_key_file_get_double(k, "results", "elapsed", &e), which = "elapsed";
  gboolean ok = !e && tp_tally_get(&c->tally, k, "results", FALSE, &which);
  char **sv[] = { &c->plan, &c->plan_tail, &c->log };
  const char *sg[] = { "plan", "plan", "results" }, *sk[] = { "segment", "last_segment", "log" };
  for (size_t i = 0; i < G_N_ELEMENTS(sv) && ok; i++)
    *sv[i] = g_key_file_get_string(k, sg[i], sk[i], &e), which = sk[i], ok = !e;
  ok = ok && tp_tally_get(&c->tally, k, "results", TRUE, &which);
  g_clear_error(&e);
  if (!ok)
    return bad(err, path, "not a checkpoint of this format (%s is missing or malformed)", which);
  if (c->plan_tail && !*c->plan_tail)
    g_clear_pointer(&c->plan_tail, g_free);
  c->plan_cut = g_key_file_get_string(k, "plan", "cut_segment", NULL);
  if (c->plan_cut && !*c->plan_cut) /* empty: none, as an absent key */
    g_clear_pointer(&c->plan_cut, g_free);
  return read_state(dir, path, k, c, err);
}

gboolean tp_checkpoint_parse(const char *dir, const char *meta, gsize len, int lo, int hi, TpCheckpoint *c,
                             GError **err)
{
  memset(c, 0, sizeof *c);
  if (read_into(dir, meta, len, lo, hi, c, err))
    return TRUE;
  tp_checkpoint_clear(c);
  return FALSE;
}

gboolean tp_checkpoint_read(const char *dir, TpCheckpoint *c, GError **err)
{
  gsize len = 0;
  g_autofree char *meta = tp_checkpoint_read_meta(dir, &len, err);
  memset(c, 0, sizeof *c);
  return meta && tp_checkpoint_parse(dir, meta, len, 0, -1, c, err);
}

/* The value of identity key `key` in c, or NULL. */
static const char *id_of(const TpCheckpoint *c, const char *key)
{
  for (guint j = 0; j < c->id_keys->len; j++)
    if (strcmp(c->id_keys->pdata[j], key) == 0)
      return c->id_vals->pdata[j];
  return NULL;
}

char *tp_checkpoint_id_diff(const TpCheckpoint *c, const TpCheckpoint *run)
{
  static const char *const either[] = { "data_parallel" }; /* absent on one side: a difference too */
  for (guint i = 0; i < run->id_keys->len + G_N_ELEMENTS(either); i++) {
    gboolean theirs = i >= run->id_keys->len;
    const char *key = theirs ? either[i - run->id_keys->len] : run->id_keys->pdata[i];
    const char *here = id_of(run, key), *there = id_of(c, key);
    if (theirs && (!there || here))
      continue;
    if (!there || !here || strcmp(there, here) != 0) {
      g_autofree char *qt = tp_quote(there ? there : "(none)"), *qh = tp_quote(here ? here : "(none)");
      return g_strdup_printf("%s %s there, %s here", key, qt, qh);
    }
  }
  return NULL;
}
