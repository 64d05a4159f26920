/* tp_error.h — the project's GError domain and the exit status each error maps to, and the text
 * helpers every reader and message uses: bounded file reading, strict whole numbers, user text
 * quoted safely in messages, and numbers printed only when finite.
 * Bad usage or bad input is TP_ERROR_INPUT (exit 2); a runtime failure is TP_ERROR_RUNTIME (exit 1). */
#ifndef TP_ERROR_H
#define TP_ERROR_H

#include <glib.h>

#define TP_ERROR (tp_error_quark())

typedef enum {
  TP_ERROR_RUNTIME = 1, /* something failed while running: exit 1 */
  TP_ERROR_INPUT = 2,   /* bad flag, file or schedule: exit 2 */
  TP_ERROR_CUT = 3,     /* a receive met the marker of a cut run (exec/tp_transport.h): no failure,
                           the runtime leaves out the mini-batches after the cut */
  /* A parameter's value refused (exit 2, as TP_ERROR_INPUT).  The message says what is wrong with
   * the value, not how it was given: the caller that knows (the command line: its flag) names it
   * with g_prefix_error (tp_error_param_name says which parameter).  A message may open with the
   * parameter's name and its value ("backend cuda: no GPU …"): the caller then writes its own name
   * for the parameter in place of the first word. */
  TP_ERROR_PARAM_BATCH = 16, /* samples per mini-batch */
  TP_ERROR_PARAM_MODEL,      /* the model's name or file */
  TP_ERROR_PARAM_CLUSTER,    /* the cluster's name or file */
  TP_ERROR_PARAM_SPLIT,      /* the layers per stage */
  TP_ERROR_PARAM_DATA,       /* the data set's directory or synthetic spec */
  TP_ERROR_PARAM_WORKERS,    /* the pipeline's stages W */
  TP_ERROR_PARAM_DEVICES,    /* the stages' GPUs */
  TP_ERROR_PARAM_CHECKPOINT, /* the directory checkpoints go to */
  TP_ERROR_PARAM_RESUME,     /* the checkpoint a run continues from */
  TP_ERROR_PARAM_BACKEND,    /* the backend the stages compute on */
  TP_ERROR_PARAM_TRANSPORT,  /* the transport between the stages */
  TP_ERROR_PARAM_SCHEDULE,   /* the schedule file a run follows */
  TP_ERROR_PARAM_SIGNIFICANCE, /* the weight blending of the intermediate policy */
  TP_ERROR_PARAM_PRESET,     /* the preset schedule a run follows */
  TP_ERROR_PARAM_FORMAT,     /* the format a schedule is written in */
  TP_ERROR_PARAM_DATA_PARALLEL, /* the replicas of the pipeline */
} TpErrorCode;

/* For a TP_ERROR_PARAM_* error, the parameter's name ("batch", "model", ...); NULL otherwise. */
const char *tp_error_param_name(const GError *err);
/* An error about the value of parameter param: a TP_ERROR_INPUT one becomes param (the caller
 * names the parameter); others (a runtime failure) stay as they are. */
void tp_error_about(GError **err, TpErrorCode param);

GQuark tp_error_quark(void);

/* Largest description file read (cost, cluster, device, model, training log): 64 MiB. */
#define TP_MAX_TEXT_BYTES ((gsize)64 << 20)
/* Most bytes a schedule or event file the project writes spends on one operation (its longest
 * line, JSON form); schedule and event files may hold TP_MAX_OPS operations of that size. */
#define TP_MAX_OP_TEXT 160

/* Read a whole text file of at most TP_MAX_TEXT_BYTES; "-" is standard input.  Pipes and devices
 * are read up to the limit, never further; a NUL byte refuses the file (no input here is binary);
 * a UTF-8 byte-order mark at the start is skipped.  On failure a TP_ERROR_INPUT "cannot read WHAT
 * NAME: reason" (len may be NULL). */
gboolean tp_read_file(const char *path, const char *what, char **text, gsize *len, GError **err);
/* The same with another limit in bytes. */
gboolean tp_read_file_max(const char *path, const char *what, gsize max, char **text, gsize *len, GError **err);
/* The limit for schedule and event files: TP_MAX_OPS operations of TP_MAX_OP_TEXT bytes, or a
 * quarter of the machine's memory if that is less (reading more could never be parsed). */
gsize tp_max_schedule_bytes(void);
/* How messages name an input: "standard input" for "-", the path otherwise. */
const char *tp_input_name(const char *path);

/* A whole number in [lo, hi], nothing else around it (no blanks, no sign on 0x…, no exponent).
 * The error (TP_ERROR_INPUT, without a location: the caller adds it) says the range and quotes
 * the text. */
gboolean tp_parse_int64(const char *text, gint64 lo, gint64 hi, gint64 *out, GError **err);
gboolean tp_parse_int(const char *text, int lo, int hi, int *out, GError **err);
/* A finite decimal number in [lo, hi] by the same rule: nothing around it (no blanks), no
 * hexadecimal, no infinity or NaN, and none so small that it would be read as 0 (1e-400).  The error
 * (TP_ERROR_INPUT, without a location) says the range and quotes the text. */
gboolean tp_parse_double(const char *text, double lo, double hi, double *out, GError **err);
/* A number of bytes in [lo, 2^60]: a decimal number by tp_parse_double's rule, then at most one of
 * K, M, G, T (powers of 1024, either case) — "12G", "1.5e9", "512k" — rounded down to whole bytes.
 * The error as above. */
gboolean tp_parse_bytes(const char *text, double lo, double *out, GError **err);

/* User text for a message, in single quotes: control and non-UTF-8 bytes escaped (\n, \xNN),
 * at most TP_QUOTE_MAX characters of it, then an ellipsis.  g_free the result. */
#define TP_QUOTE_MAX 60
char *tp_quote(const char *text);
/* Why text cannot be a name the reports carry (a model's, a device's, a cluster's, a profile's
 * fields): NULL when it can, else the reason ("not UTF-8", "a control character", "a double quote",
 * "a backslash").  Reports write names as they are, into JSON and CSV strings. */
const char *tp_name_problem(const char *text);
/* text made a name: bytes that are not UTF-8 become U+FFFD and what tp_name_problem refuses '_',
 * surrounding blanks dropped.  g_free the result. */
char *tp_name_clean(const char *text);
/* A name made from a file's name: its basename less the last extension, cleaned ("unnamed" where
 * nothing is left). */
char *tp_name_from_file(const char *path);

/* A message from elsewhere (GOption, json-glib) made one line: a newline or tab and the blanks after
 * it become one space, other control bytes and bytes that are not UTF-8 are escaped (\xNN), and past
 * TP_LINE_MAX characters it ends in an ellipsis.  g_free the result. */
#define TP_LINE_MAX 240
char *tp_one_line(const char *msg);

/* A double through one printf conversion (e.g. "%.9g", "%.4f"); a non-finite x gives "null",
 * never "inf" or "nan" (valid in JSON, plainly not a number elsewhere).  Returns buf. */
#define TP_NUM_LEN 48
const char *tp_num(char buf[TP_NUM_LEN], const char *fmt, double x);
/* Append x as "%.9g" (or "null", see tp_num). */
void tp_append_num(GString *out, double x);

/* The process exit status for an error of any domain (GOption errors are usage errors). */
int tp_error_exit_status(const GError *err);

#endif
