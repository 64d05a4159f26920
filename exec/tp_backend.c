/* tp_backend.c — the registry of compute backends: a name (`--backend`) to its registration
 * (device count, constructor), the built-in ones (cpu; cuda, as a module loaded when first used,
 * or as a name this build lacks) registered first, and the process-wide instance of each; the
 * checked allocation of host buffers. */
#include "config.h"
#include "tp_backend.h"
#include "tp_cpu.h"
#include "tp_error.h"
#include "tp_memory.h"
#include "tp_schedule.h"
#ifdef HAVE_CUDA
#include "tp_backend_cuda.h"
#endif

float *tp_host_floats(size_t n, GError **err)
{
  float *p = g_try_new(float, n ? n : 1);
  if (!p)
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot allocate a buffer of %zu floats", n);
  return p;
}

static int cpu_count(char **why)
{
  (void)why;
  return 1;
}

static const TpBackendReg cpu_reg = {
  .name = "cpu",
  .device_count = cpu_count,
  .create = tp_cpu_instance,
  .set_threads = tp_cpu_set_threads,
};

#ifdef HAVE_CUDA
static const TpBackendReg cuda_reg = {
  .name = "cuda",
  .device_noun = "CUDA device",
  .device_count = tp_cuda_device_count,
  .create = tp_cuda_create,
  .load_eagerly = tp_cuda_load_eagerly,
};
#else
static const TpBackendReg cuda_reg = {
  .name = "cuda",
  .device_noun = "CUDA device",
  .missing = "this build has no CUDA support",
};
#endif

/* The registrations and, beside each, its process-wide instance (made on first use). */
typedef struct {
  const TpBackendReg *reg;
  TpBackend *shared;
} Entry;

static GMutex lock;
static GArray *entries;

static void ensure_builtins(void)
{
  if (!entries) {
    entries = g_array_new(FALSE, TRUE, sizeof(Entry));
    g_array_append_vals(entries, (Entry[]){ { .reg = &cpu_reg }, { .reg = &cuda_reg } }, 2);
  }
}

void tp_backend_register(const TpBackendReg *reg)
{
  g_mutex_lock(&lock);
  ensure_builtins();
  g_array_append_vals(entries, &(Entry){ .reg = reg }, 1);
  g_mutex_unlock(&lock);
}

guint tp_backend_n_registered(void)
{
  g_mutex_lock(&lock);
  ensure_builtins();
  guint n = entries->len;
  g_mutex_unlock(&lock);
  return n;
}

const TpBackendReg *tp_backend_registered(guint i)
{
  g_mutex_lock(&lock);
  ensure_builtins();
  const TpBackendReg *reg = i < entries->len ? g_array_index(entries, Entry, i).reg : NULL;
  g_mutex_unlock(&lock);
  return reg;
}

/* The entry of `name` (lock held), or NULL. */
static Entry *entry_of(const char *name)
{
  ensure_builtins();
  for (guint i = 0; i < entries->len; i++)
    if (g_strcmp0(g_array_index(entries, Entry, i).reg->name, name) == 0)
      return &g_array_index(entries, Entry, i);
  return NULL;
}

/* Unknown or missing: TP_ERROR_PARAM_BACKEND (lock held). */
static Entry *usable_entry(const char *name, GError **err)
{
  Entry *e = entry_of(name);
  if (!e) {
    GString *known = g_string_new(NULL);
    for (guint i = 0; i < entries->len; i++)
      g_string_append_printf(known, "%s%s", i ? ", " : "", g_array_index(entries, Entry, i).reg->name);
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_BACKEND, "unknown backend '%s' (known: %s)", name, known->str);
    g_string_free(known, TRUE);
    return NULL;
  }
  if (e->reg->missing) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_BACKEND, "backend %s: %s", name, e->reg->missing);
    return NULL;
  }
  return e;
}

const TpBackendReg *tp_backend_find(const char *name, GError **err)
{
  g_mutex_lock(&lock);
  Entry *e = usable_entry(name, err);
  const TpBackendReg *reg = e ? e->reg : NULL;
  g_mutex_unlock(&lock);
  return reg;
}

const TpBackend *tp_backend_get(const char *name, GError **err)
{
  g_mutex_lock(&lock);
  Entry *e = usable_entry(name, err);
  GError *why = NULL;
  if (e && !e->shared && !(e->shared = e->reg->create(0, &why))) {
    if (why->domain == TP_ERROR && why->code == TP_ERROR_RUNTIME)
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s backend: %s", name, why->message);
    else
      g_set_error(err, TP_ERROR, TP_ERROR_PARAM_BACKEND, "backend %s: %s", name, why->message);
    g_error_free(why);
  }
  TpBackend *be = e ? e->shared : NULL;
  g_mutex_unlock(&lock);
  return be;
}

long long tp_backend_threads_address_bytes(const TpBackend *be, int threads)
{
  if (!tp_memory_address_limited())
    return 0;
  return (long long)threads * ((64LL << 20) + (long long)be->iface->thread_bytes(be));
}
