/* tp_cli_outputs.c — a command's output files checked before any work: each writable as the
 * writer (common/tp_output.c) will write it, none named twice, none an input or standard output's
 * file; and the launcher rank that writes them (rank 0 alone for train and profile over MPI). */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_output.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

gboolean tp_cli_check_outputs(int n, const char *const *flags, const char *const *paths, int n_in,
                              const TpCliInput *inputs, GError **err)
{
  return tp_cli_check_outputs_made(n, flags, paths, NULL, FALSE, n_in, inputs, err);
}

gboolean tp_cli_check_output(const char *path, int n_in, const TpCliInput *inputs, GError **err)
{
  return tp_cli_check_outputs(1, (const char *const[]){ "-o" }, (const char *const[]){ path }, n_in, inputs, err);
}

/* The regular file an input names, for comparing with the outputs; FALSE when it names none here. */
static gboolean input_file(const TpCliInput *in, GStatBuf *st)
{
  if (!in->path || !*in->path || strcmp(in->path, "-") == 0)
    return FALSE;
  g_autofree char *path = in->find ? in->find(in->path) : g_strdup(in->path);
  return path && g_stat(path, st) == 0 && S_ISREG(st->st_mode);
}

/* The rank of this process under an MPI launcher (Open MPI's, PMIx or PMI); 0 without one. */
static int launcher_rank(void)
{
  const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK" };
  for (size_t i = 0; i < G_N_ELEMENTS(vars); i++)
    if (g_getenv(vars[i]))
      return atoi(g_getenv(vars[i]));
  return 0;
}

/* The nearest part of path that exists (*st, as the kernel resolves it) and the names below it that do
 * not, '/'-joined ("" when path exists; NULL when nothing of it does). */
static char *missing_below(const char *path, GStatBuf *st)
{
  g_autofree char *p = g_strdup(path);
  char *rest = g_strdup("");
  while (g_stat(p, st) != 0) {
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

/* Whether making `made` with its missing parents makes the missing directory dir (made itself or one
 * of its parents): both below the same existing directory, dir's missing names a prefix of made's. */
static gboolean made_by(const char *made, const char *dir)
{
  if (!made)
    return FALSE;
  GStatBuf a, b;
  g_autofree char *m = missing_below(made, &a), *d = missing_below(dir, &b);
  if (!m || !d || !*d || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
    return FALSE;
  size_t n = strlen(d);
  return strncmp(m, d, n) == 0 && (m[n] == '\0' || m[n] == '/');
}

/* Whether the output path can be written as the writer (common/tp_output.c) will: what the kernel
 * finds there decides — a character device or FIFO is written in place, a directory, socket or block
 * device refused; a regular file (or a new one, at the end of its symbolic links) is written through
 * a temporary NAME.XXXXXX in its directory, so one is made and removed there now (the directory
 * missing, not one, read-only, taking no new files, a name too long).  A missing directory that the
 * command makes first (made) passes.  Else a TP_ERROR_INPUT error naming flag, path and why. */
static gboolean output_place(const char *flag, const char *path, const char *made, GError **err)
{
  g_autofree char *qp = tp_quote(path);
  GStatBuf st;
  int e = 0;
  if (g_stat(path, &st) == 0) {
    const char *why = S_ISDIR(st.st_mode) ? "it is a directory"
                      : !S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)
                          ? "not a file, character device or FIFO"
                          : NULL;
    if (!why && !S_ISREG(st.st_mode) && g_access(path, W_OK) != 0) /* a device or FIFO: written in place */
      why = g_strerror(errno);
    if (why)
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: cannot write %s: %s", flag, qp, why);
    if (why || !S_ISREG(st.st_mode))
      return !why;
  } else if (errno != ENOENT && errno != ENOTDIR) {
    e = errno;
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: cannot write %s: %s", flag, qp, g_strerror(e));
    return FALSE;
  }
  g_autofree char *target = tp_output_target(path, &e);
  if (!target) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: cannot write %s: %s", flag, qp, g_strerror(e));
    return FALSE;
  }
  g_autofree char *dir = g_path_get_dirname(target), *qd = tp_quote(dir);
  if (g_stat(dir, &st) != 0 && made_by(made, dir))
    return TRUE;
  g_autofree char *probe = g_strdup_printf("%s.XXXXXX", target);
  int fd = g_mkstemp_full(probe, O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) {
    e = errno;
    gboolean is_dir = g_stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (e == ENAMETOOLONG)
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: cannot write %s: %s", flag, qp, g_strerror(e));
    else
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: cannot write %s: %s%s: %s", flag, qp,
                  is_dir ? "no new file can be made in " : "", qd, g_strerror(e));
    return FALSE;
  }
  close(fd);
  g_unlink(probe);
  return TRUE;
}

/* The message for outputs i and j that name one file: both flags, and both spellings where they differ. */
static void one_file(int i, int j, const char *const *flags, const char *const *paths, const char *what, GError **err)
{
  g_autofree char *qi = tp_quote(paths[i]), *qj = tp_quote(paths[j]);
  if (strcmp(paths[i], paths[j]) == 0)
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s and %s: both name %s; %s", flags[i], flags[j], qj, what);
  else
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s and %s: both name one file (%s, %s); %s", flags[i], flags[j], qi,
                qj, what);
}

gboolean tp_cli_check_outputs_made(int n, const char *const *flags, const char *const *paths, const char *made,
                                   gboolean rank0_writes, int n_in, const TpCliInput *inputs, GError **err)
{
  gboolean *file = g_new0(gboolean, n + 1); /* a regular file or a new one: it takes one output */
  gboolean ok = TRUE, writes = !rank0_writes || launcher_rank() == 0;
  gboolean to_stdout = FALSE;
  for (int i = 0; i < n && ok; i++) {
    if (paths[i] && !*paths[i]) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: an empty file name", flags[i]);
      ok = FALSE;
    } else if (paths[i] && strcmp(paths[i], "-") != 0) {
      ok = !writes || output_place(flags[i], paths[i], made, err);
      GStatBuf st; /* a device or FIFO takes every output written into it (/dev/null twice) */
      file[i] = ok && (g_stat(paths[i], &st) != 0 || S_ISREG(st.st_mode));
    } else {
      to_stdout = to_stdout || paths[i] || strcmp(flags[i], "-o") == 0; /* "-", or no -o: the report */
    }
  }
  for (int i = 0; i < n && ok; i++)
    for (int j = i + 1; j < n && ok && file[i]; j++)
      if (file[j] && tp_output_same(paths[i], paths[j])) {
        one_file(i, j, flags, paths, "each output needs a file of its own", err);
        ok = FALSE;
      }
  /* standard output redirected into a file that an output also names: one of the two would be lost */
  GStatBuf so, out;
  if (ok && to_stdout && fstat(STDOUT_FILENO, &so) == 0 && S_ISREG(so.st_mode))
    for (int i = 0; i < n && ok; i++)
      if (file[i] && g_stat(paths[i], &out) == 0 && out.st_dev == so.st_dev && out.st_ino == so.st_ino) {
        g_autofree char *q = tp_quote(paths[i]);
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s and standard output: both name %s; each output needs a "
                    "file of its own", flags[i], q);
        ok = FALSE;
      }
  /* an output written over an input (-o m.model -m m.model) would lose what the run reads */
  for (int j = 0; j < n_in && ok; j++) {
    GStatBuf in;
    if (!input_file(&inputs[j], &in))
      continue;
    for (int i = 0; i < n && ok; i++) {
      if (!file[i] || g_stat(paths[i], &out) != 0 || out.st_dev != in.st_dev || out.st_ino != in.st_ino)
        continue;
      const char *const two_flags[] = { flags[i], inputs[j].flag }, *const two_paths[] = { paths[i], inputs[j].path };
      one_file(0, 1, two_flags, two_paths, "an output cannot overwrite an input", err);
      ok = FALSE;
    }
  }
  g_free(file);
  return ok;
}

gboolean tp_cli_silent_rank(GError **err)
{
  if (!err || !*err || launcher_rank() <= 0 || tp_error_exit_status(*err) != 2)
    return FALSE;
  g_clear_error(err);
  return TRUE;
}
