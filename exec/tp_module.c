/* tp_module.c — opening the executor's modules (tp_module.h): where they are looked for, GModule's
 * error in one line, their entry points looked up by name, and a module's table loaded once. */
#include "config.h"
#include "tp_module.h"

GModule *tp_module_open(const char *file, const char *env, char **error)
{
  const char *given = g_getenv(env);
  g_autofree char *built = g_build_filename(TP_BUILDDIR, file, NULL);
  g_autofree char *installed = g_build_filename(TP_PKGLIBDIR, file, NULL);
  const char *path = given && *given ? given : g_file_test(built, G_FILE_TEST_EXISTS) ? built : installed;
  GModule *m = g_module_open(path, G_MODULE_BIND_LOCAL);
  if (!m) {
    *error = g_strdup_printf("cannot load %s: %s", file, g_module_error());
    return NULL;
  }
  g_module_make_resident(m);
  return m;
}

gconstpointer tp_module_table(const char *file, const char *env, const char *symbol, const char *what, char **error)
{
  const char *const names[] = { symbol, NULL };
  gconstpointer (*entry)(void) = NULL;
  gpointer *const out[] = { (gpointer *)&entry };
  char *why = NULL;
  GModule *m = tp_module_open(file, env, &why);
  if (!m || !tp_module_symbols(m, names, out, &why)) {
    *error = g_strdup_printf("the %s module: %s", what, why);
    g_free(why);
    return NULL;
  }
  return entry();
}

static gpointer load_once(gpointer data)
{
  TpModuleOnce *m = data;
  return (gpointer)tp_module_table(m->file, m->env, m->symbol, m->what, &m->error);
}

gconstpointer tp_module_get(TpModuleOnce *m, const char **why)
{
  gconstpointer table = g_once(&m->once, load_once, m);
  if (!table)
    *why = m->error;
  return table;
}

gboolean tp_module_symbols(GModule *m, const char *const *names, gpointer *const *out, char **error)
{
  for (int i = 0; names[i]; i++)
    if (!g_module_symbol(m, names[i], out[i]) || !*out[i]) {
      *error = g_strdup_printf("%s has no symbol %s", g_module_name(m), names[i]);
      return FALSE;
    }
  return TRUE;
}
