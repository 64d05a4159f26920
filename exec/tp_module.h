/* tp_module.h — opening a module of the executor that links libraries the program itself must
 * not (the cuda backend's tpcuda.so: cudart and cuBLAS; the NCCL transport's tpnccl.so: NCCL),
 * so that commands that never use them never map them.  A module is looked for at $ENV (when
 * set), then in the build tree (uninstalled runs and tests), then in the package's libexec
 * directory. */
#ifndef TP_MODULE_H
#define TP_MODULE_H

#include <gmodule.h>

/* The module `file` ("tpcuda.so"), made resident; NULL with the reason in *error (to be freed). */
GModule *tp_module_open(const char *file, const char *env, char **error);

/* Look up names[i] into *out[i] for every i up to a NULL name; FALSE with the first missing one
 * named in *error (to be freed). */
gboolean tp_module_symbols(GModule *m, const char *const *names, gpointer *const *out, char **error);

/* The table that the module's entry point `symbol` (a function without arguments) returns, the
 * module opened as tp_module_open does; NULL with "the WHAT module: reason" in *error (to be freed). */
gconstpointer tp_module_table(const char *file, const char *env, const char *symbol, const char *what, char **error);

/* A module whose table is loaded once, the first time it is asked for (TP_MODULE_ONCE). */
typedef struct {
  const char *file, *env, *symbol, *what; /* as tp_module_table takes them */
  GOnce once;
  char *error; /* why the module could not be loaded */
} TpModuleOnce;

#define TP_MODULE_ONCE(FILE, ENV, SYMBOL, WHAT)                                                              \
  { .file = (FILE), .env = (ENV), .symbol = (SYMBOL), .what = (WHAT), .once = G_ONCE_INIT, .error = NULL }

/* m's table, loaded by the first call (tp_module_table); NULL with the reason in *why (m's, not to
 * be freed) where it cannot be loaded. */
gconstpointer tp_module_get(TpModuleOnce *m, const char **why);

#endif
