/* tp_output.c — staged outputs (all of a command's files or none) and the registry of temporary
 * paths that a terminating signal removes before the program dies of it (a clean-up hook of
 * common/tp_signal.h). */
#include "tp_output.h"
#include "tp_error.h"
#include "tp_signal.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- temporaries removed on signals --------------------------------------------------------- */

#define MAX_TEMPS 64
static char *volatile temps[MAX_TEMPS];

/* The clean-up hook (common/tp_signal.h), async-signal-safe: unlink files, then remove directories. */
static void remove_temps(int sig)
{
  (void)sig;
  for (int i = 0; i < MAX_TEMPS; i++)
    if (temps[i])
      unlink(temps[i]);
  for (int i = MAX_TEMPS - 1; i >= 0; i--)
    if (temps[i])
      rmdir(temps[i]);
}

static void block_signals(sigset_t *old) { tp_signal_block(old); }

/* Register path (signals blocked by the caller); the slot, or -1 when the registry is full. */
static int temp_register(char *path)
{
  tp_signal_add_cleanup(remove_temps);
  for (int i = 0; i < MAX_TEMPS; i++)
    if (!temps[i]) {
      temps[i] = path;
      return i;
    }
  return -1;
}

int tp_temp_register(char *path)
{
  sigset_t old;
  block_signals(&old);
  int slot = temp_register(path);
  sigprocmask(SIG_SETMASK, &old, NULL);
  return slot;
}

void tp_temp_forget(int slot)
{
  if (slot < 0 || slot >= MAX_TEMPS)
    return;
  sigset_t old;
  block_signals(&old);
  temps[slot] = NULL;
  sigprocmask(SIG_SETMASK, &old, NULL);
}

/* ---- staged outputs ------------------------------------------------------------------------- */

typedef struct {
  char *user;   /* the path as given (NULL: standard output) */
  char *target; /* the file a rename replaces: the path, or the file its symbolic link names */
  char *tmp;    /* the temporary beside target; NULL for an output written in place */
  int slot;     /* the temporary's registry slot */
  GString *buf; /* bytes of an output written in place, kept until the commit */
} Item;

struct TpOutputs {
  GArray *items;
};

TpOutputs *tp_outputs_new(void)
{
  TpOutputs *o = g_new0(TpOutputs, 1);
  o->items = g_array_new(FALSE, TRUE, sizeof(Item));
  return o;
}

static void drop_temp(Item *it)
{
  if (!it->tmp)
    return;
  sigset_t old;
  block_signals(&old);
  g_unlink(it->tmp);
  if (it->slot >= 0)
    temps[it->slot] = NULL;
  sigprocmask(SIG_SETMASK, &old, NULL);
  g_clear_pointer(&it->tmp, g_free);
}

void tp_outputs_free(TpOutputs *o)
{
  if (!o)
    return;
  for (guint i = 0; i < o->items->len; i++) {
    Item *it = &g_array_index(o->items, Item, i);
    drop_temp(it);
    g_free(it->user);
    g_free(it->target);
    if (it->buf)
      g_string_free(it->buf, TRUE);
  }
  g_array_free(o->items, TRUE);
  g_free(o);
}

static gboolean fail(GError **err, const char *path, int errnum)
{
  g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot write %s: %s", path ? path : "standard output",
              g_strerror(errnum));
  return FALSE;
}

char *tp_output_target(const char *path, int *errnum)
{
  char *p = g_strdup(path);
  for (int hops = 0; hops < 40; hops++) {
    struct stat ls;
    if (lstat(p, &ls) != 0 || !S_ISLNK(ls.st_mode))
      return p;
    char link[PATH_MAX];
    ssize_t n = readlink(p, link, sizeof link - 1);
    if (n < 0) {
      *errnum = errno;
      g_free(p);
      return NULL;
    }
    link[n] = '\0';
    char *next = g_path_is_absolute(link) ? g_strdup(link) : NULL;
    if (!next) {
      g_autofree char *dir = g_path_get_dirname(p);
      next = g_build_filename(dir, link, NULL);
    }
    g_free(p);
    p = next;
  }
  g_free(p);
  *errnum = ELOOP;
  return NULL;
}

gboolean tp_output_same(const char *p, const char *q)
{
  struct stat a, b;
  gboolean pe = stat(p, &a) == 0, qe = stat(q, &b) == 0;
  if (pe || qe)
    return pe && qe && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  int e = 0;
  g_autofree char *tp = tp_output_target(p, &e), *tq = tp_output_target(q, &e);
  if (!tp || !tq)
    return FALSE;
  g_autofree char *np = g_path_get_basename(tp), *nq = g_path_get_basename(tq);
  g_autofree char *dp = g_path_get_dirname(tp), *dq = g_path_get_dirname(tq);
  if (strcmp(np, nq) != 0)
    return FALSE;
  if (stat(dp, &a) == 0 && stat(dq, &b) == 0)
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  g_autofree char *cp = g_canonicalize_filename(tp, NULL), *cq = g_canonicalize_filename(tq, NULL);
  return strcmp(cp, cq) == 0;
}

static gboolean write_all(int fd, const char *data, gsize len)
{
  while (len > 0) {
    ssize_t n = write(fd, data, MIN(len, (gsize)1 << 30));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      return FALSE;
    }
    data += n, len -= (gsize)n;
  }
  return TRUE;
}

/* Write data to a new temporary beside it->target; with old (an existing file) its owner and mode. */
static gboolean write_temp(Item *it, const struct stat *old, const char *data, gsize len, GError **err)
{
  g_autofree char *dir = g_path_get_dirname(it->target), *base = g_path_get_basename(it->target);
  it->tmp = g_strdup_printf("%s%s%s.XXXXXX", dir, G_DIR_SEPARATOR_S, base);
  sigset_t mask;
  block_signals(&mask);
  int fd = g_mkstemp_full(it->tmp, O_WRONLY | O_CLOEXEC, 0666);
  int errnum = errno;
  it->slot = fd >= 0 ? temp_register(it->tmp) : -1;
  sigprocmask(SIG_SETMASK, &mask, NULL);
  if (fd < 0) {
    g_clear_pointer(&it->tmp, g_free);
    return fail(err, it->user, errnum);
  }
  if (it->slot < 0) {
    close(fd);
    drop_temp(it);
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot write %s: too many outputs at once", it->user);
    return FALSE;
  }
  gboolean ok = TRUE;
  if (old) {
    mode_t mode = old->st_mode & 07777;
    if ((old->st_uid != geteuid() || old->st_gid != getegid()) && fchown(fd, old->st_uid, old->st_gid) != 0)
      mode &= ~(mode_t)(S_ISUID | S_ISGID); /* not ours to give away: keep the bits, not the privilege */
    ok = fchmod(fd, mode) == 0;
  }
  ok = ok && write_all(fd, data, len) && (!old || fsync(fd) == 0);
  errnum = errno;
  if (close(fd) != 0 && ok)
    ok = FALSE, errnum = errno;
  if (!ok) {
    drop_temp(it);
    return fail(err, it->user, errnum);
  }
  return TRUE;
}

/* Stage an output: a new item, with *in_place set when the bytes must wait for the commit. */
static Item *stage(TpOutputs *o, const char *path, gboolean *in_place, struct stat *st, gboolean *exists, GError **err)
{
  Item it = { .user = path && strcmp(path, "-") != 0 ? g_strdup(path) : NULL, .slot = -1 };
  *exists = FALSE;
  *in_place = it.user == NULL;
  if (it.user) {
    int errnum = 0;
    if (stat(path, st) == 0) {
      if (S_ISCHR(st->st_mode) || S_ISFIFO(st->st_mode))
        *in_place = TRUE;
      else if (S_ISDIR(st->st_mode))
        errnum = EISDIR;
      else if (!S_ISREG(st->st_mode))
        errnum = EINVAL;
      else {
        *exists = TRUE;
        it.target = tp_output_target(path, &errnum); /* through symbolic links: the file is replaced, the links kept */
      }
    } else if (errno == ENOENT) {
      it.target = tp_output_target(path, &errnum); /* a dangling link creates its file, as '>' does */
    } else {
      errnum = errno;
    }
    if (errnum == EINVAL) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot write %s: not a file, character device or FIFO", path);
      g_free(it.user);
      return NULL;
    }
    if (errnum) {
      g_free(it.user);
      fail(err, path, errnum);
      return NULL;
    }
  }
  if (*in_place)
    it.buf = g_string_new(NULL);
  g_array_append_val(o->items, it);
  return &g_array_index(o->items, Item, o->items->len - 1);
}

gboolean tp_outputs_add(TpOutputs *o, const char *path, const char *data, gsize len, GError **err)
{
  gboolean in_place, exists;
  struct stat st;
  Item *it = stage(o, path, &in_place, &st, &exists, err);
  if (!it)
    return FALSE;
  if (in_place) {
    g_string_append_len(it->buf, data, (gssize)len);
    return TRUE;
  }
  return write_temp(it, exists ? &st : NULL, data, len, err);
}

gboolean tp_outputs_add_text(TpOutputs *o, const char *path, GString *text, GError **err)
{
  gboolean in_place, exists;
  struct stat st;
  Item *it = stage(o, path, &in_place, &st, &exists, err);
  if (!it)
    return FALSE;
  if (in_place) { /* take the buffer over instead of copying it */
    GString swap = *it->buf;
    *it->buf = *text;
    *text = swap;
    return TRUE;
  }
  return write_temp(it, exists ? &st : NULL, text->str, text->len, err);
}

gboolean tp_outputs_commit(TpOutputs *o, GError **err)
{
  for (guint i = 0; i < o->items->len; i++) {
    Item *it = &g_array_index(o->items, Item, i);
    if (!it->buf)
      continue;
    if (!it->user) {
      if (fwrite(it->buf->str, 1, it->buf->len, stdout) != it->buf->len || fflush(stdout) != 0) {
        g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot write to standard output");
        return FALSE;
      }
      continue;
    }
    int fd;
    do
      fd = open(it->user, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
      return fail(err, it->user, errno);
    gboolean ok = write_all(fd, it->buf->str, it->buf->len);
    int errnum = errno;
    if (close(fd) != 0 && ok)
      ok = FALSE, errnum = errno;
    if (!ok)
      return fail(err, it->user, errnum);
  }
  for (guint i = 0; i < o->items->len; i++) {
    Item *it = &g_array_index(o->items, Item, i);
    if (!it->tmp)
      continue;
    if (rename(it->tmp, it->target) != 0)
      return fail(err, it->user, errno);
    tp_temp_forget(it->slot);
    g_clear_pointer(&it->tmp, g_free);
  }
  return TRUE;
}
