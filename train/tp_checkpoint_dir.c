/* tp_checkpoint_dir.c — a checkpoint directory as a place (tp_checkpoint.h): which of its files
 * belong to a checkpoint, the generation a new run starts at, the checks before training (made,
 * writable, its names not taken by other kinds of files), the lock one run holds for its life, and
 * the removal of older checkpoints' files once a newer one is committed. */
#include "config.h"
#include "tp_checkpoint.h"
#include "tp_checkpoint_priv.h"
#include "tp_error.h"
#include "tp_output.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

/* What a file of a checkpoint directory is: a state file "state-G.bin" (every stage: stage 0) or
 * "state-G-stageS.bin", or a temporary one of those (".NAME.XXXXXX"), or the metadata's temporary
 * (ini); FALSE for anything else. */
static gboolean file_kind(const char *name, gboolean *ini, int *gen, int *stage)
{
  *ini = FALSE, *gen = -1, *stage = 0;
  if (g_str_has_prefix(name, "." TP_CHECKPOINT_INI "."))
    return *ini = TRUE;
  const char *p = name + (name[0] == '.');
  if (!g_str_has_prefix(p, "state-"))
    return FALSE;
  char *end = NULL;
  guint64 g = g_ascii_strtoull(p + 6, &end, 10);
  if (end == p + 6 || g > G_MAXINT)
    return FALSE;
  *gen = (int)g;
  if (g_str_has_prefix(end, "-stage")) {
    guint64 st = g_ascii_strtoull(end + 6, &end, 10);
    if (st < 1 || st > 4096)
      return FALSE;
    *stage = (int)st;
  }
  return g_str_has_prefix(end, ".bin");
}

gboolean tp_checkpoint_owns(const char *dir, const char *path)
{
  int e = 0;
  g_autofree char *target = tp_output_target(path, &e);
  if (!target)
    return FALSE;
  g_autofree char *parent = g_path_get_dirname(target), *name = g_path_get_basename(target);
  gboolean ini;
  int gen, stage;
  return tp_output_same(path, dir) ||
         (tp_output_same(parent, dir) && (strcmp(name, TP_CHECKPOINT_INI) == 0 ||
                                          strcmp(name, TP_CHECKPOINT_LOCK) == 0 || file_kind(name, &ini, &gen, &stage)));
}

void tp_checkpoint_remove_files(const char *dir, int keep, int stage)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name(d))) {
    gboolean ini, tmp = name[0] == '.';
    int gen, st;
    if (!file_kind(name, &ini, &gen, &st))
      continue;
    gboolean mine = ini ? stage <= 0 : stage < 0 || st == stage;
    gboolean current = !ini && !tmp && gen == keep && (stage < 0 ? st == 0 : st == stage);
    if (mine && !current) {
      g_autofree char *p = g_build_filename(dir, name, NULL);
      g_unlink(p);
    }
  }
}

int tp_checkpoint_first_generation(const char *dir)
{
  int next = 0;
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name(d))) {
    gboolean ini;
    int gen, st;
    if (!file_kind(name, &ini, &gen, &st) || ini || gen >= G_MAXINT / 2) /* others: not of a run */
      continue;
    g_autofree char *path = g_build_filename(dir, name, NULL);
    if (g_file_test(path, G_FILE_TEST_IS_REGULAR)) /* a file, not whatever else took such a name */
      next = MAX(next, gen + 1);
  }
  return next;
}

gboolean tp_checkpoint_check_dir(const char *dir, GError **err)
{
  if (g_mkdir_with_parents(dir, 0777) != 0) {
    int e = errno;
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: cannot create the directory: %s", dir, g_strerror(e));
    return FALSE;
  }
  /* the checkpoint's own names taken by something that is not a file: refused now, not at the first
   * checkpoint after training */
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name(d))) {
    gboolean ini;
    int gen, st;
    gboolean ours = strcmp(name, TP_CHECKPOINT_INI) == 0 || strcmp(name, TP_CHECKPOINT_LOCK) == 0 ||
                    (file_kind(name, &ini, &gen, &st) && !ini && name[0] != '.');
    g_autofree char *p = g_build_filename(dir, name, NULL);
    struct stat sb;
    /* gone between the listing and now: a run writing there removed an older file (its lock, taken
     * next, says who) */
    if (ours && stat(p, &sb) != 0 && errno == ENOENT)
      continue;
    if (ours && !g_file_test(p, G_FILE_TEST_IS_REGULAR)) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: a checkpoint's file name taken by something that is not a "
                  "regular file (a checkpoint directory holds only the checkpoint's files)", p);
      return FALSE;
    }
  }
  g_autofree char *probe = g_build_filename(dir, ".write-test.XXXXXX", NULL);
  int fd = g_mkstemp(probe);
  if (fd < 0) {
    int e = errno;
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: cannot write there: %s", dir, g_strerror(e));
    return FALSE;
  }
  close(fd);
  g_unlink(probe);
  return TRUE;
}

/* "DIR is in use by another run (…)": what the lock file of fd (held by another process) says. */
static void in_use(int fd, const char *dir, GError **err)
{
  char who[256] = "";
  ssize_t n = pread(fd, who, sizeof who - 1, 0);
  who[n > 0 ? n : 0] = '\0';
  g_strchomp(who);
  g_autofree char *q = tp_quote(*who ? who : "an unknown process");
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s is in use by another run (%s holds %s); one run at a time "
              "writes a checkpoint directory", dir, q, TP_CHECKPOINT_LOCK);
}

/* The lock this process holds, kept open for its life: closing any descriptor of the file drops it. */
static int held = -1;
static char *held_dir;

gboolean tp_checkpoint_in_use(const char *dir, GError **err)
{
  if (held >= 0 && g_strcmp0(held_dir, dir) == 0)
    return FALSE; /* ours: and opening the file again to ask would drop it at the close */
  g_autofree char *path = g_build_filename(dir, TP_CHECKPOINT_LOCK, NULL);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return FALSE;
  struct stat st;
  struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
  gboolean busy = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK &&
                  fl.l_pid != getpid();
  if (busy)
    in_use(fd, dir, err);
  close(fd);
  return busy;
}

gboolean tp_checkpoint_lock(const char *dir, GError **err)
{
  if (held >= 0 && g_strcmp0(held_dir, dir) == 0)
    return TRUE;
  g_autofree char *path = g_build_filename(dir, TP_CHECKPOINT_LOCK, NULL);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int e = fd < 0 ? errno : EINVAL;
    if (fd >= 0)
      close(fd);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: cannot take the directory's lock: %s", path,
                e == EINVAL ? "not a regular file" : g_strerror(e));
    return FALSE;
  }
  struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
  if (fcntl(fd, F_SETLK, &fl) != 0) {
    int e = errno;
    if (e == EAGAIN || e == EACCES)
      in_use(fd, dir, err);
    else
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: cannot take the directory's lock: %s", path, g_strerror(e));
    close(fd);
    return FALSE;
  }
  /* who holds it, for the message of a run refused */
  g_autofree char *me = g_strdup_printf("PID %d on %s\n", (int)getpid(), g_get_host_name());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, me, strlen(me), 0) < 0) {
    /* the lock holds without its text */
  }
  held = fd;
  g_free(held_dir);
  held_dir = g_strdup(dir);
  return TRUE;
}

void tp_checkpoint_remove_stale(const char *dir, int generation, int stage)
{
  tp_checkpoint_remove_files(dir, generation, stage < 0 ? 0 : stage + 1);
}
