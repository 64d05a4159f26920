/* tp_test_mpi.h — what the tests that start programs under mpirun share (test-mpi.c, test-train-mpi.c):
 * the command line (`timeout 60 mpirun --oversubscribe -np N PROGRAM ARGS`, or PROGRAM ARGS alone),
 * the environment (root allowed through Open MPI's variables, the SIGTERM → SIGKILL wait, no
 * leak reports for MPI's own allocations, a mark to find the job's processes by), running it with
 * its status, time and output, whether mpirun can start processes here at all, and finding the
 * process of one rank. */
#ifndef TP_TEST_MPI_H
#define TP_TEST_MPI_H

#include <glib.h>
#include <string.h>
#include "tp_test_skip.h"
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* For a job whose ranks must print their line from a SIGTERM handler when a peer is lost: 1 s is
 * too short under load for that (and costs every aborted job twice the wait). */
#define TPT_MPI_PATIENT "OMPI_MCA_odls_base_sigkill_timeout=4"

typedef struct {
  int status; /* exit status, or 128 + signal */
  double secs;
  char *out, *err;
} TptMpiRun;

static inline void tpt_mpi_run_clear(TptMpiRun *r)
{
  g_clear_pointer(&r->out, g_free);
  g_clear_pointer(&r->err, g_free);
}

/* The environment of a job: env (NAME=VALUE, NULL-ended, may be NULL) on top of this process's,
 * and TP_TEST_MARK=mark when mark is not NULL. */
static inline char **tpt_mpi_env(const char *const *env, const char *mark)
{
  char **envp = g_get_environ();
  envp = g_environ_setenv(envp, "OMPI_ALLOW_RUN_AS_ROOT", "1", TRUE);
  envp = g_environ_setenv(envp, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", TRUE);
  /* an aborted job: mpirun sends the ranks SIGTERM, then SIGKILL after this many seconds, and
   * waits them out twice even where every rank has ended; Open MPI's 1 s unless env says
   * TPT_MPI_PATIENT */
  envp = g_environ_setenv(envp, "OMPI_MCA_odls_base_sigkill_timeout", "1", TRUE);
  const char *asan = g_environ_getenv(envp, "ASAN_OPTIONS"); /* MPI's own allocations are not ours */
  g_autofree char *asan2 = g_strdup_printf("%s%sdetect_leaks=0", asan ? asan : "", asan ? ":" : "");
  envp = g_environ_setenv(envp, "ASAN_OPTIONS", asan2, TRUE);
  for (int i = 0; env && env[i]; i++) {
    g_auto(GStrv) kv = g_strsplit(env[i], "=", 2);
    envp = g_environ_setenv(envp, kv[0], kv[1] ? kv[1] : "", TRUE);
  }
  if (mark)
    envp = g_environ_setenv(envp, "TP_TEST_MARK", mark, TRUE);
  return envp;
}

/* argv (NULL-ended, owned): np > 0: timeout 60 mpirun --oversubscribe -np np PROGRAM ARGS;
 * np = 0: PROGRAM ARGS.  args: NULL-ended words, then the words of line (split at spaces; may be NULL). */
static inline GPtrArray *tpt_mpi_command(int np, const char *program, const char *const *args, const char *line)
{
  GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
  if (np > 0) {
    const char *head[] = { "timeout", "60", "mpirun", "--oversubscribe", "-np" };
    for (guint i = 0; i < G_N_ELEMENTS(head); i++)
      g_ptr_array_add(argv, g_strdup(head[i]));
    g_ptr_array_add(argv, g_strdup_printf("%d", np));
  }
  g_ptr_array_add(argv, g_strdup(program));
  for (int i = 0; args && args[i]; i++)
    g_ptr_array_add(argv, g_strdup(args[i]));
  g_auto(GStrv) words = g_strsplit(line ? line : "", " ", -1);
  for (int i = 0; words[i]; i++)
    if (*words[i])
      g_ptr_array_add(argv, g_strdup(words[i]));
  g_ptr_array_add(argv, NULL);
  return argv;
}

/* Run argv (from tpt_mpi_command) with envp to its end. */
static inline TptMpiRun tpt_mpi_spawn(GPtrArray *argv, char **envp)
{
  TptMpiRun r = { 0 };
  GError *e = NULL;
  int wait = 0;
  gint64 t0 = g_get_monotonic_time();
  g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, &r.out, &r.err, &wait,
                             &e));
  g_assert_no_error(e);
  r.secs = (double)(g_get_monotonic_time() - t0) / 1e6;
  r.status = WIFEXITED(wait) ? WEXITSTATUS(wait) : 128 + WTERMSIG(wait);
  return r;
}

/* tpt_mpi_command + tpt_mpi_env + tpt_mpi_spawn. */
static inline TptMpiRun tpt_mpi_run(int np, const char *const *env, const char *program, const char *const *args,
                                    const char *line)
{
  g_autoptr(GPtrArray) argv = tpt_mpi_command(np, program, args, line);
  g_auto(GStrv) envp = tpt_mpi_env(env, NULL);
  return tpt_mpi_spawn(argv, envp);
}

/* NULL when mpirun (and timeout) can start 2 processes of `true` here, else why not (static). */
static inline const char *tpt_mpi_unusable(void)
{
  static int checked;
  static char *why;
  if (!checked) {
    checked = 1;
    g_autofree char *mpirun = g_find_program_in_path("mpirun"), *timeout = g_find_program_in_path("timeout");
    if (!mpirun || !timeout)
      why = g_strdup(!mpirun ? "mpirun not found" : "timeout not found");
    else {
      TptMpiRun r = tpt_mpi_run(2, NULL, "true", NULL, NULL);
      if (r.status != 0)
        why = g_strdup_printf("mpirun cannot start 2 processes here (status %d): %.300s", r.status, r.err);
      tpt_mpi_run_clear(&r);
    }
  }
  return why;
}

/* Whether mpirun can start `BIN train --transport mpi` here (a build without MPI, or an mpirun that
 * cannot start processes, makes the calling test skip, saying why). */
static inline gboolean tpt_mpi_train_usable(const char *bin)
{
  static int usable = -1;
  static const char *why;
  if (usable < 0) {
    TptMpiRun r = tpt_mpi_run(0, NULL, bin, (const char *const[]){ "train", NULL }, "--transport mpi -w 2");
    why = strstr(r.err, "no MPI support") ? "this build has no MPI support" : tpt_mpi_unusable();
    tpt_mpi_run_clear(&r);
    usable = why == NULL;
  }
  if (!usable)
    tpt_skip_unless_required("mpi", why);
  return usable;
}

/* Start argv with envp without waiting: its pid and a pipe of its stderr (stdout goes to /dev/null). */
static inline GPid tpt_mpi_start(GPtrArray *argv, char **envp, int *err_fd)
{
  GPid child;
  GError *e = NULL;
  g_assert_true(g_spawn_async_with_pipes(NULL, (char **)argv->pdata, envp,
                                         G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL,
                                         NULL, NULL, &child, NULL, NULL, err_fd, &e));
  g_assert_no_error(e);
  return child;
}

/* The end of a job started by tpt_mpi_start at t0 (monotonic µs): its status, time and stderr. */
static inline TptMpiRun tpt_mpi_finish(GPid child, int err_fd, gint64 t0)
{
  GString *err = g_string_new(NULL);
  char buf[4096];
  for (ssize_t n; (n = read(err_fd, buf, sizeof buf)) > 0;)
    g_string_append_len(err, buf, n);
  close(err_fd);
  int wait = 0;
  waitpid(child, &wait, 0);
  g_spawn_close_pid(child);
  TptMpiRun r = { 0 };
  r.secs = (double)(g_get_monotonic_time() - t0) / 1e6;
  r.status = WIFEXITED(wait) ? WEXITSTATUS(wait) : 128 + WTERMSIG(wait);
  r.out = g_strdup("");
  r.err = g_string_free(err, FALSE);
  return r;
}

/* Occurrences of what in text. */
static inline int tpt_count(const char *text, const char *what)
{
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)); p++)
    n++;
  return n;
}

/* The pid of rank `rank` of the job whose environment carries TP_TEST_MARK=mark, or 0. */
static inline pid_t tpt_mpi_find_rank(const char *mark, int rank)
{
  g_autofree char *want_mark = g_strdup_printf("TP_TEST_MARK=%s", mark);
  g_autofree char *want_rank = g_strdup_printf("OMPI_COMM_WORLD_RANK=%d", rank);
  GDir *d = g_dir_open("/proc", 0, NULL);
  pid_t found = 0;
  for (const char *name; d && !found && (name = g_dir_read_name(d));) {
    if (!g_ascii_isdigit(name[0]))
      continue;
    g_autofree char *path = g_strdup_printf("/proc/%s/environ", name);
    g_autofree char *env = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &env, &len, NULL))
      continue;
    gboolean m = FALSE, r = FALSE;
    for (gsize at = 0; at < len; at += strlen(env + at) + 1)
      m = m || !strcmp(env + at, want_mark), r = r || !strcmp(env + at, want_rank);
    if (m && r)
      found = (pid_t)atoi(name);
  }
  if (d)
    g_dir_close(d);
  return found;
}

#endif
