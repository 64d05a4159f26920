/* tp_test_skip.h — a test that cannot run here skips, saying why, unless TP_REQUIRE names the
 * missing component (TP_REQUIRE=mpi,cuda,nccl, any subset): then it fails, so that a machine meant
 * to have the component (CI, a GPU node) cannot pass by skipping. */
#ifndef TP_TEST_SKIP_H
#define TP_TEST_SKIP_H

#include <glib.h>
#include <string.h>

/* Whether TP_REQUIRE (a comma-separated list, no blanks) names component. */
static inline gboolean tpt_required(const char *component)
{
  g_auto(GStrv) list = g_getenv("TP_REQUIRE") ? g_strsplit(g_getenv("TP_REQUIRE"), ",", -1) : NULL;
  return list && g_strv_contains((const char *const *)list, component);
}

static gboolean tpt_failed_as_required; /* set when tpt_skip_unless_required failed a case */

/* Skip the current test for why (component missing here), or fail it when TP_REQUIRE names component. */
static inline void tpt_skip_unless_required(const char *component, const char *why)
{
  if ((tpt_failed_as_required = tpt_required(component)))
    g_test_fail_printf("%s is required here (TP_REQUIRE=%s) but unavailable: %s", component, g_getenv("TP_REQUIRE"), why);
  else
    g_test_skip(why);
}

#endif
