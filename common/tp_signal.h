/* tp_signal.h — the one owner of the program's signal handlers: the terminating signals (SIGHUP,
 * SIGINT, SIGQUIT, SIGPIPE, SIGTERM) and the alarm (SIGALRM, a watchdog's timer).  Libraries install
 * no handler: they say what a signal must do.
 *  - Clean-up hooks run before the process ends by a signal (the staged outputs' temporaries are
 *    removed).  Then the process dies of the signal (its default action), unless
 *  - an end hook is set: SIGTERM and SIGHUP (and SIGINT, when asked) end the process through it
 *    instead (an MPI rank prints what it was waiting for and exits 1).
 *  - In stop mode, SIGINT, SIGTERM and SIGHUP request a stop instead (tp_signal_stop_requested
 *    returns the first; a training run stops at its next mini-batch, with a checkpoint), announced
 *    by a stop hook;
 *    a second one ends the process at once: through the end hook if there is one, else with a
 *    line and status 128 + the signal.
 * A signal the program was started ignoring (nohup) stays ignored.  Hooks run inside the handler:
 * only async-signal-safe calls. */
#ifndef TP_SIGNAL_H
#define TP_SIGNAL_H

#include <glib.h>
#include <signal.h>

typedef void (*TpSignalHook)(int sig);

/* Run hook before the process ends by a signal (at most 8 hooks, each once). */
void tp_signal_add_cleanup(TpSignalHook hook);
/* End the process through hook on SIGTERM and SIGHUP, and on SIGINT too when interrupt. */
void tp_signal_set_end(TpSignalHook hook, gboolean interrupt);
/* Stop mode on (announce: called at the first signal, may be NULL) or off. */
void tp_signal_catch_stop(TpSignalHook announce);
void tp_signal_leave_stop(void);
/* The first signal that requested a stop, 0: none. */
int tp_signal_stop_requested(void);
/* SIGTERM and SIGHUP ignored from now on (a process that ends on its own status). */
void tp_signal_ignore_end(void);
/* An alarm: hook runs (in the handler) once seconds have passed, unless it is re-armed or disarmed
 * first; seconds <= 0 disarms it.  One alarm at a time (the real-time interval timer). */
void tp_signal_alarm(double seconds, TpSignalHook hook);
/* A section: the terminating signals blocked in this thread (the previous mask into old) around a
 * change of what a hook reads, e.g. a temporary made and registered; tp_signal_unblock ends it.  No
 * handler on another thread runs the clean-ups while a section is open: it waits for the section's
 * end, and a section begun while the process is ending waits for that end instead.  So a section
 * takes no lock and allocates nothing (the handler's thread may hold malloc's lock); a hook may open
 * one. */
void tp_signal_block(sigset_t *old);
void tp_signal_unblock(const sigset_t *old);

#endif
