/* tp_cli_outputs.c — a command's output files checked before any work: each writable as the
 * writer will write it (tp_output_check), none named twice, none an input or standard output's
 * file; and the launcher rank that writes them (rank 0 alone for train and profile over MPI). */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_output.h"

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
  gboolean *file = g_new0(gboolean, n + 1); /* a regular file, a new one or a FIFO: it takes one output */
  gboolean ok = TRUE, writes = !rank0_writes || launcher_rank() == 0;
  g_autofree char *to_stdout = NULL; /* the first output that goes to standard output, in words */
  for (int i = 0; i < n && ok; i++) {
    if (paths[i] && !*paths[i]) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: an empty file name", flags[i]);
      ok = FALSE;
    } else if (!paths[i] && strcmp(flags[i], "-o") != 0) {
      continue; /* an output not asked for (no -o: the report goes to standard output) */
    } else if (tp_output_is_stdout(paths[i])) { /* "-", the report without -o, /dev/stdout into a pipe or file */
      g_autofree char *q = paths[i] ? tp_quote(paths[i]) : NULL;
      char *what = !paths[i] ? g_strdup("the report (no -o)")
                   : strcmp(paths[i], "-") == 0 ? g_strdup(flags[i]) : g_strdup_printf("%s %s", flags[i], q);
      if (to_stdout) { /* written one after the other: a reader of either would get both */
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s and %s: both go to standard output; each output needs a "
                    "file of its own%s", to_stdout, what, strcmp(flags[i], "-o") == 0 ? " (-o /dev/null drops the report)" : "");
        ok = FALSE;
      } else if (writes && !tp_output_check_stdout(err)) {
        g_prefix_error(err, "%s: ", what);
        ok = FALSE;
      }
      g_free(to_stdout), to_stdout = what;
    } else {
      ok = !writes || tp_output_check(paths[i], made, err);
      if (!ok)
        g_prefix_error(err, "%s: ", flags[i]);
      GStatBuf st; /* a character device takes every output written into it (/dev/null twice, a terminal) */
      file[i] = ok && (g_stat(paths[i], &st) != 0 || !S_ISCHR(st.st_mode));
    }
  }
  for (int i = 0; i < n && ok; i++)
    for (int j = i + 1; j < n && ok && file[i]; j++)
      if (file[j] && tp_output_same(paths[i], paths[j])) {
        one_file(i, j, flags, paths, "each output needs a file of its own", err);
        ok = FALSE;
      }
  /* standard output redirected into a file an output names, where it does not count as standard
   * output (1<>: written over, not after): the report through descriptor 1 would be lost in the rename */
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
  /* before MPI starts nothing orders the ranks' ends, and mpirun ends the job at the first rank that
   * exits with an error: this one waits (mpirun ends it at rank 0's exit), so that rank 0's line is
   * out first */
  g_usleep(3 * G_USEC_PER_SEC);
  return TRUE;
}
