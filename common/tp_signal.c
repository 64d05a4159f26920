/* tp_signal.c — the program's one set of signal handlers: the terminating signals and the alarm
 * (tp_signal.h). */
#include "tp_signal.h"
#include <pthread.h>
#include <stdatomic.h>

#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM };
#define MAX_HOOKS 8
static TpSignalHook cleanups[MAX_HOOKS];
static volatile sig_atomic_t n_cleanups;
static TpSignalHook end_hook, stop_hook;
static volatile sig_atomic_t end_on_int, stop_mode, ignore_end;
static atomic_int stop_sig; /* read by every thread, written by the handler: lock-free, so safe in it */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "a signal handler writes an atomic_int");
static gboolean installed;

/* The sections of tp_signal_block: a process-directed signal may run the handler on any thread that
 * does not block it (OpenBLAS's workers, the stages), while another is between making a temporary
 * and registering it.  The handler that will end the process marks it dying and waits until no
 * thread is inside a section; a thread that enters one after that waits for the end instead. */
static atomic_int in_sections;   /* threads inside a section */
static atomic_int dying;         /* a handler runs the clean-ups: the process is ending */
static _Thread_local int depth;  /* this thread's nesting of sections */

/* The handler's side: no section is open on another thread, and none will be. */
static void end_sections(void)
{
  atomic_store(&dying, 1);
  while (atomic_load(&in_sections) > 0)
    ; /* the other threads' sections are a few system calls long */
  depth = 1; /* a hook's own sections, on this thread, go ahead (static TLS: no allocation here) */
}

/* A child forked while another thread had a section open inherits the count, not the thread. */
static void sections_after_fork(void)
{
  atomic_store(&in_sections, depth > 0);
  atomic_store(&dying, 0);
}

static void sections_init(void) { pthread_atfork(NULL, NULL, sections_after_fork); }

static gboolean stopping(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP; }

static void run_cleanups(int sig)
{
  for (int i = 0; i < n_cleanups; i++)
    cleanups[i](sig);
}

static void on_signal(int sig)
{
  if (ignore_end && (sig == SIGTERM || sig == SIGHUP))
    return;
  if (stop_mode && stopping(sig)) {
    if (!atomic_load(&stop_sig)) {
      atomic_store(&stop_sig, sig);
      if (stop_hook)
        stop_hook(sig);
      return;
    }
    end_sections();
    run_cleanups(sig);
    if (end_hook)
      end_hook(sig); /* does not return */
    static const char msg[] = "timeprest: second signal: aborted at once (the last checkpoint stays)\n";
    ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)n;
    _exit(128 + sig);
  }
  end_sections();
  run_cleanups(sig);
  if (end_hook && (sig == SIGTERM || sig == SIGHUP || (sig == SIGINT && end_on_int)))
    end_hook(sig); /* does not return */
  signal(sig, SIG_DFL);
  raise(sig); /* delivered when this handler returns: the process dies of it */
}

void tp_signal_block(sigset_t *old)
{
  sigset_t set;
  sigemptyset(&set);
  for (guint i = 0; i < G_N_ELEMENTS(sigs); i++)
    sigaddset(&set, sigs[i]);
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, sections_init);
  pthread_sigmask(SIG_BLOCK, &set, old);
  if (depth++ > 0)
    return;
  atomic_fetch_add(&in_sections, 1);
  if (atomic_load(&dying)) { /* another thread's handler is removing the temporaries: wait for the end */
    atomic_fetch_sub(&in_sections, 1);
    for (;;)
      pause();
  }
}

void tp_signal_unblock(const sigset_t *old)
{
  if (--depth == 0)
    atomic_fetch_sub(&in_sections, 1);
  pthread_sigmask(SIG_SETMASK, old, NULL);
}

static void install(void)
{
  if (installed)
    return;
  installed = TRUE;
  for (guint i = 0; i < G_N_ELEMENTS(sigs); i++) {
    struct sigaction sa, previous;
    if (sigaction(sigs[i], NULL, &previous) != 0 || previous.sa_handler == SIG_IGN)
      continue; /* a signal the caller ignores (nohup) stays ignored */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (guint j = 0; j < G_N_ELEMENTS(sigs); j++)
      sigaddset(&sa.sa_mask, sigs[j]);
    sigaction(sigs[i], &sa, NULL);
  }
}

void tp_signal_add_cleanup(TpSignalHook hook)
{
  sigset_t old;
  tp_signal_block(&old);
  install();
  gboolean known = FALSE;
  for (int i = 0; i < n_cleanups; i++)
    known = known || cleanups[i] == hook;
  if (!known && n_cleanups < MAX_HOOKS)
    cleanups[n_cleanups] = hook, n_cleanups = n_cleanups + 1;
  tp_signal_unblock(&old);
}

void tp_signal_set_end(TpSignalHook hook, gboolean interrupt)
{
  sigset_t old;
  tp_signal_block(&old);
  install();
  end_hook = hook, end_on_int = interrupt;
  tp_signal_unblock(&old);
}

void tp_signal_catch_stop(TpSignalHook announce)
{
  sigset_t old;
  tp_signal_block(&old);
  install();
  stop_hook = announce, stop_mode = 1;
  tp_signal_unblock(&old);
}

void tp_signal_leave_stop(void) { stop_mode = 0; }

int tp_signal_stop_requested(void) { return atomic_load(&stop_sig); }

void tp_signal_ignore_end(void)
{
  install();
  ignore_end = 1;
}

/* ---- the alarm ------------------------------------------------------------------------------------ */

static TpSignalHook alarm_hook;

static void on_alarm(int sig)
{
  if (alarm_hook)
    alarm_hook(sig);
}

void tp_signal_alarm(double seconds, TpSignalHook hook)
{
  struct itimerval it;
  memset(&it, 0, sizeof it);
  if (seconds > 0 && hook) {
    alarm_hook = hook;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    it.it_value.tv_sec = (time_t)seconds;
    it.it_value.tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6);
    if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0)
      it.it_value.tv_usec = 1;
  }
  setitimer(ITIMER_REAL, &it, NULL); /* zero: disarmed */
}
