/* tp_test_skip.h — a test that cannot run here skips, saying why, unless TP_REQUIRE names the
 * missing component (TP_REQUIRE=mpi,cuda,nccl, any subset): then it fails, so that a machine meant
 * to have the component (CI, a GPU node) cannot pass by skipping. */
#ifndef TP_TEST_SKIP_H
#define TP_TEST_SKIP_H

#include <glib.h>

/* Whether TP_REQUIRE names component. */
static inline gboolean tpt_required(const char *component)
{
  g_auto(GStrv) parts = g_strsplit(g_getenv("TP_REQUIRE") ? g_getenv("TP_REQUIRE") : "", ",", -1);
  for (int i = 0; parts[i]; i++)
    if (strcmp(g_strstrip(parts[i]), component) == 0)
      return TRUE;
  return FALSE;
}

/* Skip the current test for why (component missing here), or fail it when TP_REQUIRE names component. */
static inline void tpt_skip_missing(const char *component, const char *why)
{
  if (!tpt_required(component)) {
    g_test_skip(why);
    return;
  }
  g_test_message("TP_REQUIRE names %s, which is missing here: %s", component, why);
  g_test_fail();
}

#endif
