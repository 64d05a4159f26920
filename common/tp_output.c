/* tp_output.c — staged outputs (all of a command's files or none) and the registry of temporary
 * paths that a terminating signal removes before the program dies of it (a clean-up hook of
 * common/tp_signal.h). */
#define _XOPEN_SOURCE 700 /* S_ISVTX, the sticky bit */
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
  tp_signal_block(&old);
  int slot = temp_register(path);
  tp_signal_unblock(&old);
  return slot;
}

void tp_temp_forget(int slot)
{
  if (slot < 0 || slot >= MAX_TEMPS)
    return;
  sigset_t old;
  tp_signal_block(&old);
  temps[slot] = NULL;
  tp_signal_unblock(&old);
}

/* ---- staged outputs ------------------------------------------------------------------------- */

typedef struct {
  char *user;   /* the path as given (NULL: standard output) */
  char *target; /* the file a rename replaces: the path, or the file its symbolic link names */
  char *tmp;    /* the temporary beside target; NULL for an output written in place */
  int slot;     /* the temporary's registry slot */
  GString *buf; /* bytes of an output written in place, kept until the commit */
  gboolean to_stdout; /* written to descriptor 1 at the commit (appending where the shell said >>) */
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
  tp_signal_block(&old);
  g_unlink(it->tmp);
  if (it->slot >= 0)
    temps[it->slot] = NULL;
  tp_signal_unblock(&old);
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

gboolean tp_write_all(int fd, const char *data, gsize len)
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

/* The template of a temporary beside target: NAME.XXXXXX in its directory. */
static char *temp_template(const char *target) { return g_strdup_printf("%s.XXXXXX", target); }

int tp_temp_create(char *path, gboolean tmpl, int *slot)
{
  sigset_t mask;
  tp_signal_block(&mask);
  int fd = tmpl ? g_mkstemp_full(path, O_WRONLY | O_CLOEXEC, 0666)
                : g_open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  int errnum = errno;
  *slot = fd >= 0 ? temp_register(path) : -1;
  tp_signal_unblock(&mask);
  errno = errnum;
  return fd;
}

/* Write data to a new temporary beside it->target; with old (an existing file) its owner and mode. */
static gboolean write_temp(Item *it, const struct stat *old, const char *data, gsize len, GError **err)
{
  it->tmp = temp_template(it->target);
  int fd = tp_temp_create(it->tmp, TRUE, &it->slot), errnum = errno;
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
    /* the mode first, while the temporary is ours (once given away, only CAP_FOWNER may change it);
     * the owner then where permitted, which clears set-user and set-group-ID: set again where we may,
     * else the file keeps its bits, not the privilege */
    const mode_t mode = old->st_mode & 07777, setid = S_ISUID | S_ISGID;
    ok = fchmod(fd, mode & ~setid) == 0;
    gboolean owned = old->st_uid == geteuid() && old->st_gid == getegid();
    if (ok && (owned || fchown(fd, old->st_uid, old->st_gid) == 0) && (mode & setid))
      (void)fchmod(fd, mode);
  }
  ok = ok && tp_write_all(fd, data, len) && (!old || fsync(fd) == 0);
  errnum = errno;
  if (close(fd) != 0 && ok)
    ok = FALSE, errnum = errno;
  if (!ok) {
    drop_temp(it);
    return fail(err, it->user, errnum);
  }
  return TRUE;
}

/* How the writer takes path (not standard output): what stat finds there decides.  0 with *in_place
 * for a character device or FIFO (written in place at the commit); 0 with *target (newly allocated: the
 * regular or new file at the end of path's symbolic links, which a temporary beside it replaces) and
 * *exists for a regular file or a new one; else an errno value, EINVAL for a kind it cannot write. */
static int place_of(const char *path, struct stat *st, gboolean *in_place, gboolean *exists, char **target)
{
  int errnum = 0;
  *in_place = *exists = FALSE;
  *target = NULL;
  if (stat(path, st) == 0) {
    if (S_ISCHR(st->st_mode) || S_ISFIFO(st->st_mode))
      *in_place = TRUE;
    else if (S_ISDIR(st->st_mode))
      errnum = EISDIR;
    else if (!S_ISREG(st->st_mode))
      errnum = EINVAL;
    else {
      *exists = TRUE;
      *target = tp_output_target(path, &errnum); /* through symbolic links: the file is replaced, the links kept */
    }
  } else if (errno == ENOENT) {
    *target = tp_output_target(path, &errnum); /* a dangling link creates its file, as '>' does */
  } else {
    errnum = errno;
  }
  return errnum;
}

/* Why place_of refused a path, in words. */
static const char *place_error(int errnum)
{
  return errnum == EINVAL ? "not a file, character device or FIFO" : errnum == EISDIR ? "it is a directory" : g_strerror(errnum);
}

/* Stage an output: a new item, with *in_place set when the bytes must wait for the commit. */
static Item *stage(TpOutputs *o, const char *path, gboolean *in_place, struct stat *st, gboolean *exists, GError **err)
{
  Item it = { .user = path && strcmp(path, "-") != 0 ? g_strdup(path) : NULL, .slot = -1 };
  it.to_stdout = tp_output_is_stdout(path); /* "-", or a name of the pipe or file open there (/dev/stdout) */
  *exists = FALSE;
  *in_place = it.to_stdout;
  if (!it.to_stdout) {
    int errnum = place_of(path, st, in_place, exists, &it.target);
    if (errnum) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot write %s: %s", path, place_error(errnum));
      g_free(it.user);
      return NULL;
    }
  }
  if (*in_place)
    it.buf = g_string_new(NULL);
  g_array_append_val(o->items, it);
  return &g_array_index(o->items, Item, o->items->len - 1);
}

/* The nearest part of path that exists (*st, as the kernel resolves it) and the names below it that do
 * not, '/'-joined ("" when path exists; NULL when nothing of it does). */
static char *missing_below(const char *path, struct stat *st)
{
  g_autofree char *p = g_strdup(path);
  for (size_t n = strlen(p); n > 1 && p[n - 1] == '/'; n--) /* "ck/" is "ck" */
    p[n - 1] = '\0';
  char *rest = g_strdup("");
  while (stat(p, st) != 0) {
    g_autofree char *parent = g_path_get_dirname(p), *name = g_path_get_basename(p);
    if (strcmp(parent, p) == 0) {
      g_free(rest);
      return NULL;
    }
    char *r = *rest ? g_strconcat(name, "/", rest, NULL) : g_strdup(name);
    g_free(rest), rest = r;
    g_free(p), p = g_steal_pointer(&parent);
  }
  return rest;
}

/* Whether making `made` with its missing parents makes the missing directory dir, or lets its path
 * resolve (dir made itself, one of made's parents, or reached through them and ".."): both below the
 * same existing directory, every missing name of dir one that making made creates, in its place. */
static gboolean made_by(const char *made, const char *dir)
{
  if (!made)
    return FALSE;
  struct stat a, b;
  g_autofree char *m = missing_below(made, &a), *d = missing_below(dir, &b);
  if (!m || !d || !*d || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
    return FALSE;
  g_auto(GStrv) made_names = g_strsplit(m, "/", -1), names = g_strsplit(d, "/", -1);
  GPtrArray *chain = g_ptr_array_new(); /* the directories making made creates, in order */
  gboolean ok = TRUE;
  for (char **n = made_names; *n && ok; n++)
    if (strcmp(*n, "..") == 0)
      ok = FALSE; /* made climbs back: not followed */
    else if (**n && strcmp(*n, ".") != 0)
      g_ptr_array_add(chain, *n);
  guint depth = 0; /* where dir's walk stands in that chain */
  for (char **n = names; *n && ok; n++) {
    if (strcmp(*n, "..") == 0) {
      ok = depth > 0; /* above the existing directory: not followed */
      depth -= ok;
    } else if (**n && strcmp(*n, ".") != 0) {
      ok = depth < chain->len && strcmp(g_ptr_array_index(chain, depth), *n) == 0;
      depth++;
    }
  }
  g_ptr_array_free(chain, TRUE);
  return ok;
}

/* Whether the process may act as any file's owner (CAP_FOWNER in its effective capabilities, from
 * /proc/self/status on Linux; elsewhere, being root): what a rename over another user's file in a
 * sticky directory needs. */
static gboolean may_own_any(void)
{
  enum { CAP_FOWNER_BIT = 3 };
  g_autofree char *status = NULL;
  const char *caps = NULL;
  if (g_file_get_contents("/proc/self/status", &status, NULL, NULL) && (caps = strstr(status, "\nCapEff:")))
    return (g_ascii_strtoull(caps + strlen("\nCapEff:"), NULL, 16) >> CAP_FOWNER_BIT) & 1;
  return geteuid() == 0;
}

gboolean tp_output_check_stdout(GError **err)
{
  int flags = fcntl(STDOUT_FILENO, F_GETFL); /* (a directory can only be open for reading) */
  const char *why = flags < 0 ? "it is closed"
                    : (flags & O_ACCMODE) == O_RDONLY ? "it is open for reading only"
                                                      : NULL;
  if (why)
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "cannot write to standard output: %s", why);
  return !why;
}

gboolean tp_output_is_stdout(const char *path)
{
  if (!path || strcmp(path, "-") == 0)
    return TRUE;
  struct stat o, p;
  int flags = fcntl(STDOUT_FILENO, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY || fstat(STDOUT_FILENO, &o) != 0 ||
      !(S_ISFIFO(o.st_mode) || S_ISSOCK(o.st_mode) || S_ISREG(o.st_mode)) || stat(path, &p) != 0 ||
      o.st_dev != p.st_dev || o.st_ino != p.st_ino)
    return FALSE;
  /* a regular file counts where what is written goes after what is there (> or >>), not over it (1<>) */
  return !S_ISREG(o.st_mode) || (flags & O_APPEND) || lseek(STDOUT_FILENO, 0, SEEK_CUR) == o.st_size;
}

gboolean tp_output_check(const char *path, const char *made, GError **err)
{
  struct stat st;
  gboolean in_place, exists;
  g_autofree char *target = NULL, *dir = NULL, *in_dir = NULL;
  int errnum = place_of(path, &st, &in_place, &exists, &target);
  if (errnum == ENOTDIR) /* a file where a directory should be: say which, as a missing one is named */
    errnum = 0, target = g_strdup(path);
  if (!errnum && in_place && faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) != 0) /* as the write: effective ids */
    errnum = errno;
  struct stat tty;
  if (!errnum && in_place && S_ISCHR(st.st_mode) && stat("/dev/tty", &tty) == 0 && st.st_rdev == tty.st_rdev) {
    int fd = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC); /* the controlling terminal: is there one? */
    if (fd < 0)
      errnum = errno;
    else
      close(fd);
  }
  if (!errnum && !in_place) {
    uid_t owner = st.st_uid;
    dir = g_path_get_dirname(target);
    if (stat(dir, &st) != 0 && made_by(made, dir))
      return TRUE;
    /* a sticky directory (/tmp) lets only a file's owner, the directory's or CAP_FOWNER rename over it */
    if (exists && (st.st_mode & S_ISVTX) && owner != geteuid() && st.st_uid != geteuid() && !may_own_any()) {
      g_autofree char *q = tp_quote(path), *qd = tp_quote(dir);
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "cannot write %s: another user's file in the sticky directory %s "
                  "(only the file's owner, the directory's or a privileged process may replace it)", q, qd);
      return FALSE;
    }
    g_autofree char *probe = temp_template(target);
    int slot, fd = tp_temp_create(probe, TRUE, &slot);
    if (fd < 0) {
      errnum = errno;
      g_autofree char *qd = tp_quote(dir);
      if (errnum != ENAMETOOLONG) /* the directory: missing, not one, or taking no new file */
        in_dir = stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? g_strdup_printf("no new file can be made in %s: ", qd)
                                                              : g_strdup_printf("%s: ", qd);
    } else {
      close(fd);
      g_unlink(probe);
      tp_temp_forget(slot);
    }
  }
  if (!errnum)
    return TRUE;
  g_autofree char *q = tp_quote(path);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "cannot write %s: %s%s", q, in_dir ? in_dir : "", place_error(errnum));
  return FALSE;
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
    if (it->to_stdout) {
      if (fwrite(it->buf->str, 1, it->buf->len, stdout) != it->buf->len || fflush(stdout) != 0) {
        g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot write to standard output: %s", g_strerror(errno));
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
    gboolean ok = tp_write_all(fd, it->buf->str, it->buf->len);
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
