/* tp_output.h — the files a command writes, all or none: each output is staged to a temporary
 * beside its target and the temporaries are renamed only when every output is written; devices,
 * FIFOs and standard output are written in place at that moment.  A signal that ends the program
 * removes the temporaries first. */
#ifndef TP_OUTPUT_H
#define TP_OUTPUT_H

#include <glib.h>

typedef struct TpOutputs TpOutputs;

TpOutputs *tp_outputs_new(void);
/* The path at the end of path's chain of symbolic links (path itself when it is no link; newly
 * allocated): the file an output replaces or creates.  NULL with *errnum set where the chain cannot
 * be followed (ELOOP after 40 links, readlink's error). */
char *tp_output_target(const char *path, int *errnum);

/* Whether outputs p and q are one file as the write resolves them: where both exist, by identity;
 * where neither does, the same name in one directory (the directory by identity, as the kernel
 * resolves its path), or the same canonical name where that directory is missing; never where only
 * one exists. */
gboolean tp_output_same(const char *p, const char *q);

/* Whether standard output can take an output, checked before the work: not closed, open for
 * writing.  Else a TP_ERROR_INPUT error "cannot write to standard output: why". */
gboolean tp_output_check_stdout(GError **err);
/* Whether path is standard output: NULL, "-", or a name of the file open for writing on descriptor 1
 * where that is a pipe, FIFO, socket or regular file written at its end (> or >>: not a terminal,
 * /dev/null or 1<>), by identity (/dev/stdout, /proc/self/fd/1, the file a shell redirected it
 * into).  Such an output is written to descriptor 1, not replaced by a rename. */
gboolean tp_output_is_stdout(const char *path);

/* Whether path can be written as tp_outputs_add and tp_outputs_commit will write it, checked before
 * any work: a character device or FIFO must be writable; a directory, socket or block device is
 * refused; for a regular or new file (at the end of its symbolic links) a temporary NAME.XXXXXX is made
 * and removed beside it now (the directory missing, not one, read-only or taking no new file, a name
 * too long), and an existing file must be one the process may replace (not another user's in a
 * sticky directory without CAP_FOWNER); access is checked with the effective ids, as the write.  A missing directory that the command makes first (made, with its missing parents;
 * NULL: none) passes.  Else a TP_ERROR_INPUT error "cannot write PATH: why", PATH quoted. */
gboolean tp_output_check(const char *path, const char *made, GError **err);

/* Removes every temporary not committed. */
void tp_outputs_free(TpOutputs *o);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpOutputs, tp_outputs_free)

/* Stage len bytes for path (NULL or "-": standard output).  A regular file (or a new one) is written
 * now to a temporary in its directory, through a symbolic link to the file it names; a character
 * device, a FIFO and standard output keep the bytes until tp_outputs_commit.  Errors are runtime
 * errors naming path. */
gboolean tp_outputs_add(TpOutputs *o, const char *path, const char *data, gsize len, GError **err);
/* The same for a GString, whose buffer is taken over (text is left empty). */
gboolean tp_outputs_add_text(TpOutputs *o, const char *path, GString *text, GError **err);
/* Write the in-place outputs, then rename every temporary onto its target (keeping an existing
 * file's mode and, where permitted, its owner).  On failure no regular file has been replaced. */
gboolean tp_outputs_commit(TpOutputs *o, GError **err);

/* Register a temporary file or directory (path stays the caller's and must outlive the
 * registration) that a terminating signal removes; returns the slot for tp_temp_forget, or -1
 * when the registry is full.  Files are removed before directories. */
int tp_temp_register(char *path);
void tp_temp_forget(int slot);
/* Make path — mkstemp's template (its XXXXXX filled in, mode 0666 less the umask) where tmpl, else a
 * new file of mode 0600 — and register it, in one signal section, so that no signal finds it made
 * and not registered: its descriptor open for writing, or -1 with errno set; *slot is the registry
 * slot (-1: the registry was full, the file made and not registered: the caller removes it). */
int tp_temp_create(char *path, gboolean tmpl, int *slot);
/* Write all of data to fd (EINTR retried): FALSE with errno set (EIO where write made no progress). */
gboolean tp_write_all(int fd, const char *data, gsize len);

#endif
