/* tp_memory.h — how much memory a run may use (TP_MEMORY_LIMIT, the kernel, ulimit, cgroups), the
 * one-line refusal of a step that needs more, and the sizes GLib's growing buffers take. */
#ifndef TP_MEMORY_H
#define TP_MEMORY_H

#include <glib.h>

/* Memory a run may use, in bytes: TP_MEMORY_LIMIT when set (bytes, or with a K, M, G or T suffix),
 * else the least of the kernel's MemAvailable (or free pages), what the process's address-space and
 * data limits (RLIMIT_AS, RLIMIT_DATA) leave and what its cgroup's memory limit (v2 memory.max, v1
 * memory.limit_in_bytes) leaves; -1 when TP_MEMORY_LIMIT is not understood. */
long long tp_memory_available(void);
/* TRUE unless TP_MEMORY_LIMIT is set and not a number of bytes (tp_parse_bytes, from 1): then
 * FALSE with TP_ERROR_INPUT naming it. */
gboolean tp_memory_limit_valid(GError **err);
/* Whether this process runs under an address-space or data limit (ulimit -v or -d): every byte it
 * maps counts there, reserved or not. */
gboolean tp_memory_address_limited(void);
/* Refuse, before allocating, a step that needs `need` bytes while less is available: one
 * TP_ERROR_INPUT line "W=…, N=…, K=…: <what> needs about … of memory, … available" (without the
 * sizes when W is 0).  Without TP_MEMORY_LIMIT, a step that needs less than a quarter of what was
 * left at a reading in the last 0.1 s (any thread's) passes on that reading. */
gboolean tp_memory_check(const char *what, int W, int N, int K, long long need, GError **err);
/* tp_memory_check for reading len bytes of text: per_byte times the text, or where it splits into
 * many small pieces held at once their sum — a JSON tree's nodes (tree), else its lines and the
 * fields of its longest line. */
gboolean tp_memory_check_text(const char *what, const char *text, gsize len, int per_byte, gboolean tree,
                              GError **err);
/* Bytes a GArray or GString holding `bytes` takes: GLib rounds its capacity up to a power of two. */
long long tp_memory_grown(long long bytes);
/* Give s, once, the capacity for `bytes` (tp_memory_grown(bytes) of memory) so that text appended up
 * to that size is not copied as it grows. */
void tp_string_reserve(GString *s, long long bytes);
/* g_malloc(bytes), asking the kernel to back a large block (4 MiB and more) with huge pages where it
 * allows them (transparent huge pages, madvise mode): a million-operation schedule's tables are
 * written once, and four thousand small page faults each cost more than the writes.  g_free frees it. */
gpointer tp_memory_alloc_large(gsize bytes);
/* The pages of n blocks that a pass is about to write, faulted in meanwhile by a thread of its own
 * (Linux's MADV_POPULATE_WRITE, 64 KiB of each block in turn: the order of a pass that writes all of
 * them at once), so that the pass finds most of them there — a block whose last page is there
 * already is left alone (memory used before); on one core, under an address-space or data limit
 * (ulimit -v, -d), or where the kernel lacks it, nothing.  tp_memory_prefault_wait stops that thread and waits for it (before any block is
 * freed): the pass is done, what is left is not faulted in. */
typedef struct TpPrefault TpPrefault;
TpPrefault *tp_memory_prefault(int n, void *const *base, const gsize *bytes);
void tp_memory_prefault_wait(TpPrefault *p);
/* The same advice for the block of `bytes` at p, allocated otherwise (nothing below 4 MiB). */
void tp_memory_advise_huge(gpointer p, gsize bytes);
/* malloc kept from handing memory back and faulting it in again, for a process that allocates and
 * frees the same sizes over and over (the planner's candidates, a sweep's cells): blocks below `below`
 * bytes from the heap, and up to `keep` bytes of free heap kept.  Nothing under a limit that counts
 * what is kept as used (an address-space or data limit, a cgroup's memory limit: work that fits would
 * be refused), nor where the C library has no such settings; FALSE then. */
gboolean tp_memory_keep_freed(int below, int keep);

#endif
