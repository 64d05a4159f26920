/* tp_memory.c — the memory left to this process (TP_MEMORY_LIMIT, else the least of MemAvailable,
 * the address-space and data limits and the cgroup's limit), the refusal of a step that needs more,
 * GLib's growth of arrays and strings, and malloc kept from giving freed memory back. */
#define _DEFAULT_SOURCE /* madvise, mincore and MADV_HUGEPAGE */
#include "tp_memory.h"
#include "tp_error.h"

#include <stdint.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* A number of kB on the line "key: N kB" of /proc/self/status text, -1 when absent. */
static long long status_kb(const char *status, const char *key)
{
  const char *line = status ? strstr(status, key) : NULL;
  return line ? (long long)g_ascii_strtoull(line + strlen(key), NULL, 10) * 1024 : -1;
}

/* A cgroup's memory file: a number of bytes, or -1 ("max", absent, unreadable). */
static long long cgroup_value(const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename(dir, name, NULL), *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return -1;
  char *end = NULL;
  guint64 v = g_ascii_strtoull(text, &end, 10);
  return end == text || v > (guint64)G_MAXINT64 ? -1 : (long long)v;
}

/* The memory controllers of this process's cgroups (v2, or v1's memory line: what a Slurm job with
 * --mem runs under), in /proc/self/cgroup's order, found once: a process does not change cgroups
 * under a run.  dirs[i] with v2[i]; NULL-terminated. */
typedef struct {
  char **dirs;
  gboolean *v2;
} Cgroups;

static Cgroups find_cgroups(void)
{
  GPtrArray *dirs = g_ptr_array_new();
  GArray *v2s = g_array_new(FALSE, FALSE, sizeof(gboolean));
  g_autofree char *cg = NULL;
  if (g_file_get_contents("/proc/self/cgroup", &cg, NULL, NULL)) {
    g_auto(GStrv) lines = g_strsplit(cg, "\n", -1);
    for (int i = 0; lines[i]; i++) {
      g_auto(GStrv) f = g_strsplit(lines[i], ":", 3);
      if (!f[0] || !f[1] || !f[2])
        continue;
      gboolean v2 = !*f[1], v1 = FALSE;
      g_auto(GStrv) ctl = g_strsplit(f[1], ",", -1);
      for (int j = 0; ctl[j]; j++)
        v1 = v1 || strcmp(ctl[j], "memory") == 0;
      if (!v1 && !v2)
        continue;
      g_ptr_array_add(dirs, g_build_filename(v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory", f[2], NULL));
      g_array_append_val(v2s, v2);
    }
  }
  g_ptr_array_add(dirs, NULL);
  return (Cgroups){ (char **)g_ptr_array_free(dirs, FALSE), (gboolean *)(void *)g_array_free(v2s, FALSE) };
}

/* What this process's cgroup still allows (v2 memory.max − memory.current, v1 memory.limit_in_bytes −
 * memory.usage_in_bytes), the first limited one's; -1 when unlimited or unknown.  The files are read
 * anew each time: usage moves and a limit may be raised under a run. */
static long long cgroup_left(void)
{
  static Cgroups cg;
  static gsize found;
  if (g_once_init_enter(&found)) {
    cg = find_cgroups();
    g_once_init_leave(&found, 1);
  }
  for (int i = 0; cg.dirs[i]; i++) {
    long long max = cgroup_value(cg.dirs[i], cg.v2[i] ? "memory.max" : "memory.limit_in_bytes");
    long long used = cgroup_value(cg.dirs[i], cg.v2[i] ? "memory.current" : "memory.usage_in_bytes");
    if (max >= 0 && max < (1LL << 60)) /* v1 says "no limit" with a huge number */
      return MAX(max - MAX(used, 0), 0);
  }
  return -1;
}

/* The memory left to this process and what bounds it: the least of the kernel's MemAvailable (or free
 * pages), the address-space and data limits (RLIMIT_AS, RLIMIT_DATA: ulimit -v, -d) less what the
 * process uses of them, and its cgroup's memory limit less its usage. */
static long long memory_left(const char **source)
{
  long long best = G_MAXINT64;
  *source = "available (MemAvailable)";
  g_autofree char *info = NULL, *status = NULL;
  long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (g_file_get_contents("/proc/meminfo", &info, NULL, NULL) && strstr(info, "MemAvailable:"))
    best = (long long)g_ascii_strtoull(strstr(info, "MemAvailable:") + 13, NULL, 10) * 1024;
  else if (pages > 0 && size > 0)
    best = (long long)pages * size;
  const int res[] = { RLIMIT_AS, RLIMIT_DATA };
  const char *key[] = { "VmSize:", "VmData:" };
  const char *what[] = { "left under the address-space limit (ulimit -v)", "left under the data limit (ulimit -d)" };
  for (int i = 0; i < 2; i++) {
    struct rlimit rl;
    if (getrlimit(res[i], &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
      continue;
    if (!status) /* what the process uses of its limits: read only under one */
      (void)g_file_get_contents("/proc/self/status", &status, NULL, NULL);
    long long left = MAX((long long)MIN(rl.rlim_cur, (rlim_t)G_MAXINT64) - MAX(status_kb(status, key[i]), 0), 0);
    if (left < best)
      best = left, *source = what[i];
  }
  long long cg = cgroup_left();
  if (cg >= 0 && cg < best)
    best = cg, *source = "left under the cgroup's memory limit";
  return best;
}

gboolean tp_memory_limit_valid(GError **err)
{
  const char *env = g_getenv("TP_MEMORY_LIMIT");
  double v = 0;
  if (!env || !*env || tp_parse_bytes(env, 1, &v, err))
    return TRUE;
  g_prefix_error(err, "TP_MEMORY_LIMIT: ");
  return FALSE;
}

gboolean tp_memory_address_limited(void)
{
  const int res[] = { RLIMIT_AS, RLIMIT_DATA };
  for (int i = 0; i < 2; i++) {
    struct rlimit rl;
    if (getrlimit(res[i], &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      return TRUE;
  }
  return FALSE;
}

long long tp_memory_available(void)
{
  const char *env = g_getenv("TP_MEMORY_LIMIT");
  if (env && *env) {
    double v = 0;
    return tp_parse_bytes(env, 1, &v, NULL) ? (long long)v : -1;
  }
  const char *source;
  return memory_left(&source);
}

static const char *bytes_text(char buf[32], long long b)
{
  static const char *const unit[] = { "B", "kB", "MB", "GB", "TB" };
  double v = (double)b;
  int u = 0;
  while (v >= 1000 && u < 4)
    v /= 1000, u++;
  snprintf(buf, 32, u ? "%.3g %s" : "%.0f %s", v, unit[u]);
  return buf;
}

/* The memory left as last read and when (monotonic µs), shared by every thread. */
G_LOCK_DEFINE_STATIC(recent);
static long long recent_left = -1;
static gint64 recent_at;

gboolean tp_memory_check(const char *what, int W, int N, int K, long long need, GError **err)
{
  /* a step that needs less than a quarter of what was left at a reading in the last 0.1 s passes
   * without reading /proc and the cgroup again (a search checks thousands of small steps) */
  const char *env = g_getenv("TP_MEMORY_LIMIT");
  gboolean read = env && *env, small = FALSE;
  gint64 now = g_get_monotonic_time();
  if (!read) {
    G_LOCK(recent);
    small = recent_left >= 0 && need < recent_left / 4 && now - recent_at < G_USEC_PER_SEC / 10;
    G_UNLOCK(recent);
  }
  if (small)
    return TRUE;
  long long avail = tp_memory_available();
  if (!read) {
    G_LOCK(recent);
    recent_left = avail, recent_at = now;
    G_UNLOCK(recent);
  }
  if (avail < 0)
    return tp_memory_limit_valid(err);
  if (need <= avail)
    return TRUE;
  char n[32], a[32];
  const char *source = "allowed by TP_MEMORY_LIMIT";
  if (!g_getenv("TP_MEMORY_LIMIT") || !*g_getenv("TP_MEMORY_LIMIT"))
    (void)memory_left(&source);
  g_autofree char *size = W > 0 ? g_strdup_printf("W=%d, N=%d, K=%d: ", W, N, K) : g_strdup("");
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%s needs about %s of memory, %s %s", size, what, bytes_text(n, need),
              bytes_text(a, avail), source);
  return FALSE;
}

long long tp_memory_grown(long long bytes)
{
  long long cap = 16;
  while (cap < bytes && cap < G_MAXINT64 / 2)
    cap <<= 1;
  return cap;
}

void tp_string_reserve(GString *s, long long bytes)
{
  gsize len = s->len;
  if (bytes > (long long)len + 1) {
    g_string_set_size(s, (gsize)bytes - 1);
    g_string_truncate(s, len);
  }
}

void tp_memory_advise_huge(gpointer p, gsize bytes)
{
#ifdef MADV_HUGEPAGE
  const uintptr_t huge = 2u << 20, lo = ((uintptr_t)p + huge - 1) & ~(huge - 1), hi = ((uintptr_t)p + bytes) & ~(huge - 1);
  if (bytes >= 2 * huge && hi > lo)
    (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* advice: where it is not taken, small pages */
#else
  (void)p, (void)bytes;
#endif
}

gpointer tp_memory_alloc_large(gsize bytes)
{
  gpointer p = g_malloc(bytes);
  tp_memory_advise_huge(p, bytes);
  return p;
}

struct TpPrefault {
  int n;
  char **base;
  gsize *bytes;
  GThread *thread;
  gint stop; /* set when the pass is done: what is left would be faulted for nothing */
};

/* A chunk of each block in turn: a pass that writes every block at once finds its pages there. */
static gpointer prefault_run(gpointer data)
{
#ifdef MADV_POPULATE_WRITE
  TpPrefault *p = data;
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), chunk = 64u << 10;
  for (int b = 0; b < p->n; b++) { /* a block whose last page is there already: memory used before */
    unsigned char there = 0;
    uintptr_t last = ((uintptr_t)p->base[b] + p->bytes[b] - 1) & ~(page - 1);
    if (p->bytes[b] > 0 && mincore((void *)last, page, &there) == 0 && (there & 1))
      p->bytes[b] = 0;
  }
  for (gsize off = 0, more = 1; more; off += chunk) {
    more = 0;
    for (int b = 0; b < p->n && !g_atomic_int_get(&p->stop); b++) {
      if (off >= p->bytes[b])
        continue;
      uintptr_t lo = ((uintptr_t)p->base[b] + off) & ~(page - 1),
                hi = ((uintptr_t)p->base[b] + MIN(off + chunk, p->bytes[b]) + page - 1) & ~(page - 1);
      if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) != 0)
        return NULL; /* a kernel without it (before Linux 5.14): the writes fault as usual */
      more = 1;
    }
  }
#else
  (void)data;
#endif
  return NULL;
}

TpPrefault *tp_memory_prefault(int n, void *const *base, const gsize *bytes)
{
  TpPrefault *p = g_new0(TpPrefault, 1);
  p->n = n;
  p->base = g_memdup2(base, n * sizeof *base);
  p->bytes = g_memdup2(bytes, n * sizeof *bytes);
  /* under an address-space limit a thread's stack counts there: none */
  if (g_get_num_processors() > 1 && !tp_memory_address_limited())
    p->thread = g_thread_try_new("prefault", prefault_run, p, NULL);
  return p;
}

void tp_memory_prefault_wait(TpPrefault *p)
{
  if (!p)
    return;
  g_atomic_int_set(&p->stop, 1);
  if (p->thread)
    g_thread_join(p->thread);
  g_free(p->base);
  g_free(p->bytes);
  g_free(p);
}

gboolean tp_memory_keep_freed(int below, int keep)
{
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
  if (tp_memory_address_limited() || cgroup_left() >= 0)
    return FALSE;
  return mallopt(M_MMAP_THRESHOLD, below) == 1 && mallopt(M_TRIM_THRESHOLD, keep) == 1;
#else
  (void)below, (void)keep;
  return FALSE;
#endif
}

gboolean tp_memory_check_text(const char *what, const char *text, gsize len, int per_byte, gboolean tree,
                              GError **err)
{
  /* the pieces held at once: a tree's nodes (64 bytes each, as json-glib's take), or the lines and the
   * fields of the longest line (48 bytes each: a pointer and a small string) */
  long long lines = 0, fields = 0, most = 0, nodes = 0;
  for (gsize i = 0; i < len; i++) {
    char c = text[i];
    nodes += c == ',' || c == '[' || c == '{' || c == ':';
    fields += c == ',';
    if (c == '\n')
      lines++, most = MAX(most, fields), fields = 0;
  }
  long long pieces = tree ? nodes : lines + MAX(most, fields);
  return tp_memory_check(what, 0, 0, 0, MAX((long long)len * per_byte, (long long)len + (tree ? 64 : 48) * pieces),
                         err);
}
