/* fuzz.h — what every libFuzzer target of fuzz/ shares: the input as a NUL-terminated text, GLib
 * warnings made fatal, and the check that a rejection is one TP_ERROR_INPUT line. */
#ifndef TP_FUZZ_H
#define TP_FUZZ_H

#include "tp_error.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static void tp_fuzz_on_trap(int sig)
{
  (void)sig;
  abort();
}

/* Warnings and criticals are bugs: GLib stops on them with SIGTRAP, turned into an abort that the
 * fuzzer reports (and keeps the input of). */
static inline void tp_fuzz_init(void)
{
  g_log_set_always_fatal(G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
  signal(SIGTRAP, tp_fuzz_on_trap);
  g_setenv("TP_SRCDIR", TP_SRCDIR, FALSE);
}

/* The program's file reader refuses a file with a NUL byte before any parser sees it: such inputs
 * are skipped (TRUE), so that the parsers are fuzzed on what they can be given. */
static inline gboolean tp_fuzz_skip(const uint8_t *data, size_t size)
{
  return memchr(data, '\0', size) != NULL;
}

/* The input as text (NUL-terminated copy; g_free it). */
static inline char *tp_fuzz_text(const uint8_t *data, size_t size)
{
  char *t = g_malloc(size + 1);
  memcpy(t, data, size);
  t[size] = '\0';
  return t;
}

/* ok, or an error that is one line of bad input (at most $TP_FUZZ_MAX_MESSAGE bytes when set). */
static inline void tp_fuzz_check(gboolean ok, GError *err)
{
  static long max_message = -1;
  if (max_message < 0)
    max_message = g_getenv("TP_FUZZ_MAX_MESSAGE") ? atol(g_getenv("TP_FUZZ_MAX_MESSAGE")) : 0;
  if (ok) {
    if (err) {
      fprintf(stderr, "success with an error set: %s\n", err->message);
      abort();
    }
    return;
  }
  if (!err) {
    fprintf(stderr, "failure without an error\n");
    abort();
  }
  if (err->domain != TP_ERROR || err->code != TP_ERROR_INPUT || strchr(err->message, '\n') ||
      (max_message > 0 && strlen(err->message) > (size_t)max_message)) {
    fprintf(stderr, "bad rejection (domain %s, code %d): %s\n", g_quark_to_string(err->domain), err->code,
            err->message);
    abort();
  }
  g_error_free(err);
}

/* Write the input to path for loaders that read files (in place, no fsync: the file is scratch). */
static inline void tp_fuzz_write(const char *path, const uint8_t *data, size_t size)
{
  if (!g_file_set_contents_full(path, (const char *)data, (gssize)size, G_FILE_SET_CONTENTS_NONE, 0600, NULL))
    abort();
}

/* A private scratch directory for the whole run. */
static inline char *tp_fuzz_dir(void)
{
  char *dir = g_dir_make_tmp("tp-fuzz-XXXXXX", NULL);
  if (!dir)
    abort();
  return dir;
}

#endif
