/* test-signal.c — the program's one signal module (common/tp_signal.h), each case in a child
 * process: clean-up hooks run before the process dies of the signal, after any section another thread
 * has open; in stop mode SIGINT, SIGTERM
 * and SIGHUP request a stop and a second one ends the process with 128 + the signal; an end hook
 * ends it instead of the signal; an alarm runs its hook once its time has passed, never once
 * disarmed. */
#include "tp_signal.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static char *marker;

static void remove_marker(int sig)
{
  (void)sig;
  unlink(marker);
}

static void end_with_7(int sig)
{
  (void)sig;
  _exit(7);
}

/* Run body in a child; its wait status. */
static int in_child(void (*body)(void))
{
  fflush(NULL);
  pid_t pid = fork();
  g_assert_cmpint(pid, >=, 0);
  if (pid == 0) {
    /* the cases are about the module, not about what the test was started with: a shell without job
     * control starts a background job with SIGINT and SIGQUIT ignored, which the module keeps */
    static const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM };
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(sigs); i++)
      signal(sigs[i], SIG_DFL);
    body();
    _exit(99); /* not reached when the signal ends it */
  }
  int status = 0;
  g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
  return status;
}

static void cleanup_then_die(void)
{
  tp_signal_add_cleanup(remove_marker);
  raise(SIGTERM);
}

/* Make the marker, run body in a child: it must die of SIGTERM with the marker removed. */
static void assert_dies_clean(void (*body)(void))
{
  marker = g_build_filename(g_get_tmp_dir(), "tp-signal-XXXXXX", NULL);
  int fd = g_mkstemp(marker);
  g_assert_cmpint(fd, >=, 0);
  close(fd);
  int status = in_child(body);
  gboolean left = g_file_test(marker, G_FILE_TEST_EXISTS);
  g_unlink(marker);
  g_assert_true(WIFSIGNALED(status));
  g_assert_cmpint(WTERMSIG(status), ==, SIGTERM);
  g_assert_false(left);
  g_clear_pointer(&marker, g_free);
}

static void test_cleanup(void) { assert_dies_clean(cleanup_then_die); }

static volatile sig_atomic_t registered;

static void remove_registered_marker(int sig)
{
  if (registered)
    remove_marker(sig);
}

static void *idle(void *arg)
{
  (void)arg;
  for (;;)
    pause();
  return NULL;
}

/* A section open on the main thread (a temporary made, not yet registered) while the signal's
 * handler runs on another thread: the clean-ups wait for the section's end and remove the marker. */
static void signal_during_section(void)
{
  tp_signal_add_cleanup(remove_registered_marker);
  pthread_t t;
  g_assert_cmpint(pthread_create(&t, NULL, idle, NULL), ==, 0);
  sigset_t old;
  tp_signal_block(&old);
  pthread_kill(t, SIGTERM);
  g_usleep(100000); /* the handler has begun on t by now */
  registered = 1;
  tp_signal_unblock(&old);
  for (;;)
    pause();
}

static void test_section(void) { assert_dies_clean(signal_during_section); }

/* A clean-up hook may open a section itself (remove a temporary, forget its slot): the process still
 * ends by the signal (an alarm ends a child that would hang). */
static void remove_marker_in_section(int sig)
{
  sigset_t old;
  tp_signal_block(&old);
  remove_marker(sig);
  tp_signal_unblock(&old);
}

static void hook_with_section(void)
{
  alarm(5);
  tp_signal_add_cleanup(remove_marker_in_section);
  raise(SIGTERM);
}

static void test_hook_section(void) { assert_dies_clean(hook_with_section); }

static void stop_then_second(void)
{
  tp_signal_catch_stop(NULL);
  raise(SIGHUP);
  if (tp_signal_stop_requested() != SIGHUP)
    _exit(3);
  raise(SIGINT); /* a second signal ends the process at once */
}

static void test_stop_hup(void)
{
  int status = in_child(stop_then_second);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 128 + SIGINT);
}

static void end_hook_on_hup(void)
{
  tp_signal_set_end(end_with_7, FALSE);
  raise(SIGHUP);
}

static void test_end_hook(void)
{
  int status = in_child(end_hook_on_hup);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 7);
}

static void alarm_fires(void)
{
  tp_signal_alarm(0.05, end_with_7);
  g_usleep(5 * G_USEC_PER_SEC); /* the alarm ends it first */
}

static void alarm_disarmed(void)
{
  tp_signal_alarm(0.05, end_with_7);
  tp_signal_alarm(0, NULL);
  g_usleep(G_USEC_PER_SEC / 5);
  _exit(5);
}

static void test_alarm(void)
{
  int status = in_child(alarm_fires);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 7);
  status = in_child(alarm_disarmed);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 5);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/signal/cleanup", test_cleanup);
  g_test_add_func("/signal/section-on-another-thread", test_section);
  g_test_add_func("/signal/section-in-a-hook", test_hook_section);
  g_test_add_func("/signal/stop-on-sighup", test_stop_hup);
  g_test_add_func("/signal/end-hook", test_end_hook);
  g_test_add_func("/signal/alarm", test_alarm);
  return g_test_run();
}
