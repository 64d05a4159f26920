/* tp_mpi_run.c — starting and ending an MPI run: MPI_Init_thread and the thread level, the rank
 * count check, the SIGTERM hook (common/tp_signal.h) that names what a rank waited for when mpirun ends the job,
 * tp_mpi_fail (one line, abort notices, MPI_Abort) and a finalize that cannot hang on a lost peer. */
#include "tp_mpi_priv.h"
#include "tp_error.h"
#include "tp_signal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- what the rank waits for, for its signal hooks (common/tp_signal.h; async-signal-safe reads) -- */

enum { NOTE_LEN = 192 };
static char who_line[48];             /* "stage 2 (rank 1)" */
static int first_rank;                 /* this rank runs stage 1, whose signal cuts the run */
static char notes[2][NOTE_LEN];       /* written alternately */
static volatile sig_atomic_t note_at = -1; /* the note in force, -1: none */
static volatile sig_atomic_t line_printed;

void tp_mpi_note_wait(const char *what)
{
  if (!what) {
    note_at = -1;
    return;
  }
  int next = note_at == 0 ? 1 : 0;
  g_strlcpy(notes[next], what, NOTE_LEN);
  note_at = next;
}

static size_t put(char *buf, size_t at, size_t cap, const char *s)
{
  size_t n = strlen(s);
  if (at + n > cap)
    n = cap - at;
  memcpy(buf + at, s, n);
  return at + n;
}

/* The end hook: the line of a rank ended by a signal, who it is and what it waited for; then _exit(1). */
static void on_sigterm(int sig)
{
  (void)sig;
  if (!line_printed) {
    line_printed = 1;
    char line[NOTE_LEN + 160];
    size_t n = put(line, 0, sizeof line, who_line);
    int at = note_at;
    if (at >= 0) {
      n = put(line, n, sizeof line, ": ended by mpirun while waiting for ");
      n = put(line, n, sizeof line, notes[at]);
      n = put(line, n, sizeof line, " (another rank failed, or the job was cancelled)\n");
    } else
      n = put(line, n, sizeof line, ": ended by mpirun (another rank failed, or the job was cancelled)\n");
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
  }
  _exit(1);
}

/* The stop hook (tp_mpi_catch_signals): the first signal's line; a second one ends the rank through
 * the end hook. */
static void on_stop_signal(int sig)
{
  char line[NOTE_LEN + 160];
  size_t n = put(line, 0, sizeof line, who_line);
  n = put(line, n, sizeof line, sig == SIGINT ? ": SIGINT" : sig == SIGHUP ? ": SIGHUP" : ": SIGTERM");
  int at = note_at;
  if (at >= 0) {
    n = put(line, n, sizeof line, " while waiting for ");
    n = put(line, n, sizeof line, notes[at]);
  }
  n = put(line, n, sizeof line, first_rank ? ": the run stops at its next mini-batch\n"
                                            : ": the run stops at its next checkpoint\n");
  ssize_t w = write(STDERR_FILENO, line, n);
  (void)w;
}

void tp_mpi_catch_signals(void) { tp_signal_catch_stop(on_stop_signal); }

/* ---- the watchdog of start-up and shut-down ----------------------------------------------------- */

static char watch_line[NOTE_LEN + 160];
static size_t watch_len;
static double watch_default = 60; /* the last bound armed: for a shut-down without a transport */

static void on_watchdog(int sig)
{
  (void)sig;
  ssize_t w = write(STDERR_FILENO, watch_line, watch_len);
  (void)w;
  _exit(1);
}

void tp_mpi_watchdog(double seconds, const char *what)
{
  if (seconds > 0) {
    const char *rank = g_getenv("OMPI_COMM_WORLD_RANK") ? g_getenv("OMPI_COMM_WORLD_RANK") : g_getenv("PMI_RANK");
    g_snprintf(watch_line, sizeof watch_line, "timeprest: rank %s: no answer from the other ranks within %g s while %s "
               "(a rank never started MPI, is stuck or is lost)\n", rank ? rank : "?", seconds, what);
    watch_len = strlen(watch_line);
    watch_default = seconds;
  }
  tp_signal_alarm(seconds, on_watchdog); /* zero: disarmed */
}

/* ---- start ---------------------------------------------------------------------------------------- */

gboolean tp_mpi_launched(void)
{
  static const char *vars[] = { "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS" };
  for (guint i = 0; i < G_N_ELEMENTS(vars); i++)
    if (g_getenv(vars[i]))
      return TRUE;
  return FALSE;
}

static const char *level_name(int level)
{
  switch (level) {
  case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
  case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
  case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
  default: return "MPI_THREAD_MULTIPLE";
  }
}

gboolean tp_mpi_init(int *argc, char ***argv, GError **err)
{
  int provided = MPI_THREAD_SINGLE, started = 0;
  if (MPI_Initialized(&started) != MPI_SUCCESS) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "MPI_Initialized failed");
    return FALSE;
  }
  if (started) {
    if (MPI_Query_thread(&provided) != MPI_SUCCESS) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "MPI_Query_thread failed");
      return FALSE;
    }
  } else if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "MPI_Init_thread failed");
    return FALSE;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME,
                "the MPI library provides only %s; the MPI transport needs MPI_THREAD_SERIALIZED or more",
                level_name(provided));
    (void)TP_GPU_MPI_TRY(MPI_Finalize());
    return FALSE;
  }
  tp_mpi_renote_who();
  first_rank = tp_mpi_rank() == 0;
  tp_signal_set_end(on_sigterm, FALSE);
  return TRUE;
}


void tp_mpi_renote_who(void) { tp_mpi_who(tp_mpi_rank(), who_line, sizeof who_line); }

int tp_mpi_rank(void)
{
  int r = 0;
  if (!TP_GPU_MPI_TRY(MPI_Comm_rank(MPI_COMM_WORLD, &r)))
    tp_mpi_fail(NULL, "MPI_Comm_rank(MPI_COMM_WORLD) failed", 1);
  return r;
}

int tp_mpi_size(void)
{
  int n = 1;
  if (!TP_GPU_MPI_TRY(MPI_Comm_size(MPI_COMM_WORLD, &n)))
    tp_mpi_fail(NULL, "MPI_Comm_size(MPI_COMM_WORLD) failed", 1);
  return n;
}

gboolean tp_mpi_check_size(int W, GError **err)
{
  int n = tp_mpi_size();
  if (n == W)
    return TRUE;
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "mpirun -np %d does not match -w %d", n, W);
  return FALSE;
}

/* ---- end ------------------------------------------------------------------------------------------ */

/* SIGTERM, SIGHUP and SIGINT end the rank at once (silently once its line is printed). */
static void end_on_signals(void)
{
  tp_signal_leave_stop();
  tp_signal_set_end(on_sigterm, TRUE);
}

void tp_mpi_fail(TpMpi *m, const char *line, int status)
{
  if (!line_printed) {
    line_printed = 1;
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
  }
  end_on_signals(); /* a run stopping at a checkpoint no longer can: mpirun's SIGTERM ends it */
  if (m) {
    m->base.abort(&m->base, line);
    /* let the notices go out (at most 1 s), then give the others a moment to print */
    gint64 until = g_get_monotonic_time() + G_USEC_PER_SEC;
    for (;;) {
      int done = 1;
      g_rec_mutex_lock(&m->lock);
      for (guint i = 0; i < m->ctl_sends->len; i++) {
        int d = 0;
        done &= TP_GPU_MPI_TRY(MPI_Test(g_ptr_array_index(m->ctl_sends, i), &d, MPI_STATUS_IGNORE)) ? d : 1;
      }
      g_rec_mutex_unlock(&m->lock);
      if (done || g_get_monotonic_time() > until)
        break;
      g_usleep(1000);
    }
    g_usleep(300000);
  }
  MPI_Abort(MPI_COMM_WORLD, status);
  _exit(status); /* MPI_Abort does not return; should it, the process still ends */
}

/* tp_mpi_finalize, waiting at least at_least_s for the others */
static void finalize(TpMpi *m, double at_least_s)
{
  /* the barrier's bound, and MPI_Finalize's (taken before m is freed) */
  double wait_s = m ? MAX(MAX(m->base.timeout_s, 1.0), at_least_s) : watch_default;
  if (m) {
    TpTransport *t = &m->base;
    char me[40], line[512];
    tp_mpi_who(m->first + m->rank, me, sizeof me);
    gint64 deadline = g_get_monotonic_time() + (gint64)(wait_s * G_USEC_PER_SEC);
    g_rec_mutex_lock(&m->lock);
    MPI_Request req;
    int w = MPI_Ibarrier(m->ctl_comm, &req) == MPI_SUCCESS ? tp_mpi_wait(m, &req, deadline, FALSE) : 1;
    if (w == 1)
      g_snprintf(line, sizeof line, "%s: the other ranks did not reach the end of the run within %g s", me, wait_s);
    else if (w == 2)
      g_snprintf(line, sizeof line, "%s: run aborted after its last operation: %s", me,
                 m->reason ? m->reason : "aborted");
    else if (w == 3)
      g_snprintf(line, sizeof line, "%s: MPI failed at the end of the run (a rank is lost)", me);
    g_rec_mutex_unlock(&m->lock);
    if (w != 0)
      tp_mpi_fail(m, line, 1);
    t->free(t);
  }
  tp_mpi_note_wait(NULL);
  /* MPI_Finalize waits for every rank: bounded like the rest (a rank stopped there, or one that
   * never started MPI, would hold the job forever) */
  tp_mpi_watchdog(wait_s, "ending MPI (MPI_Finalize)");
  if (!TP_GPU_MPI_TRY(MPI_Finalize())) { /* MPI_Abort is no longer allowed: the line, then the end */
    fprintf(stderr, "%s: MPI_Finalize failed (a rank was lost at the end of the run)\n", who_line);
    _exit(1);
  }
  tp_mpi_watchdog(0, NULL);
}

void tp_mpi_finalize(TpMpi *m) { finalize(m, 0); }

static TpMpi *at_exit; /* the transport tp_mpi_end_said left for the process's end */

static void finalize_at_exit(void)
{
  TpMpi *m = at_exit;
  at_exit = NULL;
  fflush(stderr);
  tp_mpi_finalize(m);
}

void tp_mpi_end_said(TpMpi *m, gboolean says)
{
  if (!says) {
    finalize(m, 30.0);
    return;
  }
  g_return_if_fail(at_exit == NULL);
  at_exit = m;
  atexit(finalize_at_exit);
}
