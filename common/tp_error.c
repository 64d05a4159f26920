/* tp_error.c — error domain of the project, its mapping to exit statuses, and the text helpers
 * of tp_error.h: bounded file reading, strict whole numbers, quoting, finite number printing. */
#include "tp_error.h"
#include "tp_schedule.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

G_DEFINE_QUARK(timeprest-error-quark, tp_error)

const char *tp_error_param_name(const GError *err)
{
  static const char *const names[] = { "batch", "model", "cluster", "split", "data", "workers", "devices", "checkpoint",
                                       "resume", "backend", "transport", "schedule", "significance",
                                       "preset", "format", "data-parallel" };
  if (!err || err->domain != TP_ERROR || err->code < TP_ERROR_PARAM_BATCH ||
      err->code >= TP_ERROR_PARAM_BATCH + (int)G_N_ELEMENTS(names))
    return NULL;
  return names[err->code - TP_ERROR_PARAM_BATCH];
}

void tp_error_about(GError **err, TpErrorCode param)
{
  if (err && *err && (*err)->domain == TP_ERROR && (*err)->code == TP_ERROR_INPUT)
    (*err)->code = param;
}

int tp_error_exit_status(const GError *err)
{
  if (err == NULL)
    return 0;
  if (err->domain == TP_ERROR)
    return err->code == TP_ERROR_RUNTIME ? 1 : 2;
  if (err->domain == G_OPTION_ERROR || err->domain == G_KEY_FILE_ERROR)
    return 2;
  return 1;
}

/* ---- reading ------------------------------------------------------------------------------ */

const char *tp_input_name(const char *path) { return strcmp(path, "-") == 0 ? "standard input" : path; }

gsize tp_max_schedule_bytes(void)
{
  guint64 most = (guint64)TP_MAX_OPS * TP_MAX_OP_TEXT;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) /* parsing needs several times the text: a quarter of the memory at most */
    most = MIN(most, (guint64)pages * (guint64)page / 4);
  return (gsize)MIN(most, (guint64)G_MAXSIZE - 2);
}

static char *size_text(gsize n)
{
  return n >= (1u << 20) ? g_strdup_printf("%.4g MiB", n / 1048576.0) : g_strdup_printf("%" G_GSIZE_FORMAT " bytes", n);
}

G_GNUC_PRINTF(4, 5)
static gboolean read_fail(GError **err, const char *what, const char *path, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *why = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_autofree char *q = strcmp(path, "-") == 0 ? g_strdup("from standard input") : tp_quote(path);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "cannot read %s %s: %s", what, q, why);
  return FALSE;
}

/* path opened for reading ("-": standard input), *cap the buffer a read starts with (a regular
 * file's size + 1); -1 (err set) for a directory, a regular file over max, or an error. */
static int open_text(const char *path, const char *what, gsize max, gsize *cap, GError **err)
{
  gboolean is_stdin = strcmp(path, "-") == 0;
  /* opened without blocking: a FIFO without a writer reads as empty instead of blocking in open() */
  int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return read_fail(err, what, path, "%s", g_strerror(errno)), -1;
  if (!is_stdin) {
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
      (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* then read as usual: a writer's data is waited for */
  }
  struct stat st;
  *cap = MIN((gsize)1 << 16, max + 2);
  gboolean fstat_ok = fstat(fd, &st) == 0;
  if (fstat_ok && S_ISDIR(st.st_mode)) {
    read_fail(err, what, path, "is a directory");
  } else if (fstat_ok && S_ISREG(st.st_mode) && (guint64)st.st_size > max) {
    g_autofree char *sz = size_text((gsize)st.st_size), *lim = size_text(max);
    read_fail(err, what, path, "%s, more than the limit of %s", sz, lim);
  } else {
    if (fstat_ok && S_ISREG(st.st_mode))
      *cap = (gsize)st.st_size + 1;
    return fd;
  }
  if (!is_stdin)
    close(fd);
  return -1;
}

/* Everything fd holds, up to max bytes, NUL-terminated, into *buf (of *cap bytes, grown) and *n;
 * FALSE (err set) over max, on a read error or a NUL byte. */
static gboolean read_text(int fd, const char *path, const char *what, gsize max, char **buf, gsize *cap, gsize *n,
                          GError **err)
{
  g_autofree char *lim = size_text(max);
  for (*n = 0;;) {
    if (*n > max)
      return read_fail(err, what, path, "longer than the limit of %s", lim);
    if (*n + 1 >= *cap) {
      *cap = MIN(*cap * 2, max + 2);
      *buf = g_realloc(*buf, *cap);
    }
    ssize_t r = read(fd, *buf + *n, MIN(*cap - 1 - *n, (gsize)1 << 24));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return read_fail(err, what, path, "%s", g_strerror(errno));
    if (r == 0)
      break;
    const char *nul = memchr(*buf + *n, '\0', (size_t)r);
    if (nul)
      return read_fail(err, what, path, "not a text file (a NUL byte at offset %" G_GSIZE_FORMAT ")",
                       (gsize)(nul - *buf));
    *n += (gsize)r;
  }
  (*buf)[*n] = '\0';
  return TRUE;
}

gboolean tp_read_file_max(const char *path, const char *what, gsize max, char **text, gsize *len, GError **err)
{
  gsize cap, n = 0;
  int fd = open_text(path, what, max, &cap, err);
  if (fd < 0)
    return FALSE;
  char *buf = g_malloc(cap);
  gboolean ok = read_text(fd, path, what, max, &buf, &cap, &n, err);
  if (strcmp(path, "-") != 0)
    close(fd);
  if (!ok) {
    g_free(buf);
    return FALSE;
  }
  static const char bom[] = "\xEF\xBB\xBF";
  if (n >= 3 && memcmp(buf, bom, 3) == 0) {
    memmove(buf, buf + 3, n - 2);
    n -= 3;
  }
  *text = buf;
  if (len)
    *len = n;
  return TRUE;
}

gboolean tp_read_file(const char *path, const char *what, char **text, gsize *len, GError **err)
{
  return tp_read_file_max(path, what, TP_MAX_TEXT_BYTES, text, len, err);
}

/* ---- whole numbers ------------------------------------------------------------------------ */

gboolean tp_parse_int64(const char *text, gint64 lo, gint64 hi, gint64 *out, GError **err)
{
  if (text && lo <= hi && g_ascii_string_to_signed(text, 10, lo, hi, out, NULL))
    return TRUE;
  g_autofree char *q = tp_quote(text ? text : "");
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "expected a whole number from %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT
              ", got %s", lo, hi, q);
  return FALSE;
}

gboolean tp_parse_int(const char *text, int lo, int hi, int *out, GError **err)
{
  gint64 v;
  if (!tp_parse_int64(text, lo, hi, &v, err))
    return FALSE;
  *out = (int)v;
  return TRUE;
}

gboolean tp_parse_bytes(const char *text, double lo, double *out, GError **err)
{
  static const char units[] = "KMGT";
  const double hi = 0x1p60;
  size_t n = text ? strlen(text) : 0;
  const char *u = n > 1 ? strchr(units, g_ascii_toupper(text[n - 1])) : NULL;
  g_autofree char *num = g_strndup(text ? text : "", u && *u ? n - 1 : n);
  double x = 0;
  if (tp_parse_double(num, 0, hi, &x, NULL)) {
    x = floor(x * (u && *u ? pow(1024, (double)(u - units + 1)) : 1)); /* whole bytes */
    if (x >= lo && x <= hi) {
      *out = x;
      return TRUE;
    }
  }
  g_autofree char *q = tp_quote(text ? text : "");
  char a[G_ASCII_DTOSTR_BUF_SIZE];
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "expected a number of bytes from %s to 2^60 with an optional K, M, G or T "
              "suffix (powers of 1024), got %s", g_ascii_formatd(a, sizeof a, "%g", lo), q);
  return FALSE;
}

gboolean tp_parse_double(const char *text, double lo, double hi, double *out, GError **err)
{
  char *end = NULL;
  double x = 0;
  /* only decimal digits, a sign, a point and an exponent: no blanks, no 0x…, no inf or nan */
  gboolean ok = text && *text && strspn(text, "0123456789+-.eE") == strlen(text);
  if (ok) {
    errno = 0;
    x = g_ascii_strtod(text, &end);
    /* out of range: an overflow (not finite) or an underflow to 0; a subnormal value stays itself */
    ok = end != text && !*end && !(errno == ERANGE && x == 0) && isfinite(x) && x >= lo && x <= hi;
  }
  if (ok) {
    *out = x;
    return TRUE;
  }
  g_autofree char *q = tp_quote(text ? text : "");
  char a[G_ASCII_DTOSTR_BUF_SIZE], b[G_ASCII_DTOSTR_BUF_SIZE];
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "expected a decimal number from %s to %s, got %s",
              g_ascii_formatd(a, sizeof a, "%g", lo), g_ascii_formatd(b, sizeof b, "%g", hi), q);
  return FALSE;
}

/* ---- quoting ------------------------------------------------------------------------------ */

const char *tp_name_problem(const char *text)
{
  if (!g_utf8_validate(text, -1, NULL))
    return "not UTF-8";
  for (const char *p = text; *p; p = g_utf8_next_char(p)) {
    gunichar c = g_utf8_get_char(p);
    if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || c == 0x2028 || c == 0x2029)
      return "a control character";
    if (c == '"')
      return "a double quote";
    if (c == '\\')
      return "a backslash";
  }
  return NULL;
}

char *tp_name_clean(const char *text)
{
  g_autofree char *valid = g_utf8_make_valid(text, -1);
  GString *out = g_string_new(NULL);
  for (const char *p = valid; *p; p = g_utf8_next_char(p)) {
    char one[8] = { 0 };
    g_unichar_to_utf8(g_utf8_get_char(p), one);
    g_string_append(out, tp_name_problem(one) ? "_" : one);
  }
  return g_strstrip(g_string_free(out, FALSE));
}

char *tp_name_from_file(const char *path)
{
  g_autofree char *base = g_path_get_basename(path);
  char *dot = strrchr(base, '.');
  if (dot && dot != base)
    *dot = '\0';
  char *name = tp_name_clean(base);
  if (!*name) { /* a name of blanks: a name still */
    g_free(name);
    name = g_strdup("unnamed");
  }
  return name;
}

char *tp_quote(const char *text)
{
  GString *q = g_string_new("'");
  int shown = 0;
  const char *p = text;
  while (*p) {
    if (shown >= TP_QUOTE_MAX) {
      g_string_append(q, "…");
      break;
    }
    const char *next = g_utf8_find_next_char(p, NULL);
    gunichar c = g_utf8_get_char_validated(p, -1);
    if (c == (gunichar)-1 || c == (gunichar)-2) {
      g_string_append_printf(q, "\\x%02X", (guchar)*p);
      next = p + 1;
    } else if (c == '\n')
      g_string_append(q, "\\n");
    else if (c == '\t')
      g_string_append(q, "\\t");
    else if (c == '\r')
      g_string_append(q, "\\r");
    else if (c == '\\' || c == '\'')
      g_string_append_printf(q, "\\%c", (char)c);
    else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !g_unichar_isprint(c)))
      g_string_append_printf(q, c < 0x100 ? "\\x%02X" : "\\u%04X", c);
    else
      g_string_append_len(q, p, next - p);
    shown++;
    p = next;
  }
  g_string_append_c(q, '\'');
  return g_string_free(q, FALSE);
}

char *tp_one_line(const char *msg)
{
  GString *g = g_string_new(NULL);
  int shown = 0;
  for (const char *c = msg; *c; c++, shown++) {
    if (shown >= TP_LINE_MAX) {
      g_string_append(g, "…");
      break;
    }
    if (*c == '\n' || *c == '\r' || *c == '\t') {
      while (c[1] == ' ' || c[1] == '\n' || c[1] == '\r' || c[1] == '\t')
        c++;
      g_string_append_c(g, ' ');
    } else if ((guchar)*c < 0x20 || *c == 0x7f) {
      g_string_append_printf(g, "\\x%02X", (guchar)*c);
    } else if ((guchar)*c >= 0x80) { /* a whole UTF-8 character, else the byte escaped */
      gunichar u = g_utf8_get_char_validated(c, -1);
      if (u == (gunichar)-1 || u == (gunichar)-2) {
        g_string_append_printf(g, "\\x%02X", (guchar)*c);
        continue;
      }
      int n = g_utf8_skip[(guchar)*c];
      g_string_append_len(g, c, n);
      c += n - 1;
    } else {
      g_string_append_c(g, *c);
    }
  }
  return g_string_free(g, FALSE);
}

/* ---- numbers out -------------------------------------------------------------------------- */

const char *tp_num(char buf[TP_NUM_LEN], const char *fmt, double x)
{
  if (!isfinite(x))
    g_strlcpy(buf, "null", TP_NUM_LEN);
  else
    g_snprintf(buf, TP_NUM_LEN, fmt, x);
  return buf;
}

void tp_append_num(GString *out, double x)
{
  char b[TP_NUM_LEN];
  g_string_append(out, tp_num(b, "%.9g", x));
}
