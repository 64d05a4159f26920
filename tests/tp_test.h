/* tp_test.h — helpers shared by the GLib tests: generating presets, grids, and running the
 * timeprest program as a user would. */
#ifndef TP_TEST_H
#define TP_TEST_H

#include "tp_error.h"
#include "tp_format.h"
#include "tp_model.h"
#include "tp_schedule.h"
#include "tp_validate.h"

#include "tp_test_skip.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

static inline TpSchedule *tpt_preset(const char *name, int W, int N, int K)
{
  const TpPreset *p = tp_preset_find(name);
  g_assert_nonnull(p);
  GError *err = NULL;
  TpSchedule *s = tp_schedule_generate(p->order, p->policy, W, N, K, &err);
  g_assert_no_error(err);
  g_assert_nonnull(s);
  return s;
}

/* A model by name or path, loaded or the test fails. */
static inline TpModel *tpt_model(const char *name)
{
  GError *err = NULL;
  TpModel *m = tp_model_load(name, &err);
  g_assert_no_error(err);
  g_assert_nonnull(m);
  return m;
}

/* A model description's text read (as "t.model"), or the test fails. */
static inline TpModel *tpt_model_text(const char *text)
{
  GError *err = NULL;
  TpModel *m = tp_model_parse(text, strlen(text), "t.model", &err);
  g_assert_no_error(err);
  return m;
}

/* A schedule file's text read (as "t.csv") and validated, or NULL with *err. */
static inline TpSchedule *tpt_parse(const char *text, GError **err)
{
  TpSchedule *s = tp_schedule_parse(text, strlen(text), "t.csv", err);
  if (s && !tp_validate(s, err)) {
    tp_schedule_free(s);
    return NULL;
  }
  return s;
}

/* s without its F&B composites (the same operations in the same orders). */
static inline void tpt_drop_fb(TpSchedule *s)
{
  for (int r = 0; s->fb && r < tp_schedule_ranks(s); r++)
    g_array_unref(s->fb[r]);
  g_clear_pointer(&s->fb, g_free);
}

/* The validator refuses s with one line containing want. */
static inline void tpt_expect_invalid(const TpSchedule *s, const char *want)
{
  GError *err = NULL;
  g_assert_false(tp_validate(s, &err));
  g_assert_nonnull(err);
  if (!strstr(err->message, want))
    g_error("expected '%s' in: %s", want, err->message);
  g_assert_null(strchr(err->message, '\n'));
  g_error_free(err);
}

/* The text is refused with one line containing want. */
static inline void tpt_expect_refused(const char *text, const char *want)
{
  GError *err = NULL;
  TpSchedule *s = tpt_parse(text, &err);
  g_assert_null(s);
  g_assert_nonnull(err);
  if (!strstr(err->message, want))
    g_error("expected '%s' in: %s", want, err->message);
  g_assert_null(strchr(err->message, '\n'));
  g_error_free(err);
}

static inline char *tpt_grid(const TpSchedule *s)
{
  GString *g = g_string_new(NULL);
  GError *err = NULL;
  g_assert_true(tp_format_grid(s, g, &err));
  g_assert_no_error(err);
  return g_string_free(g, FALSE);
}

/* Run the built program with argv (NULL-terminated, without the program name). */
typedef struct {
  int status;
  char *out, *err;
} TptRun;

static inline TptRun tpt_run(const char *const *args)
{
  const char *bin = g_getenv("TP_BIN");
  if (!bin)
    bin = "./timeprest";
  GPtrArray *argv = g_ptr_array_new();
  g_ptr_array_add(argv, (char *)bin);
  for (int i = 0; args[i]; i++)
    g_ptr_array_add(argv, (char *)args[i]);
  g_ptr_array_add(argv, NULL);
  TptRun r = { 0 };
  GError *e = NULL;
  int wait = 0;
  g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &r.out, &r.err, &wait, &e));
  g_assert_no_error(e);
  r.status = WIFEXITED(wait) ? WEXITSTATUS(wait) : 128;
  g_ptr_array_free(argv, TRUE);
  return r;
}

/* Run the built program with n arguments base followed by extra (NULL-terminated). */
static inline TptRun tpt_run_more(const char *const *base, size_t n, const char *const *extra)
{
  GPtrArray *a = g_ptr_array_new();
  for (size_t i = 0; i < n; i++)
    g_ptr_array_add(a, (char *)base[i]);
  for (int i = 0; extra[i]; i++)
    g_ptr_array_add(a, (char *)extra[i]);
  g_ptr_array_add(a, NULL);
  TptRun r = tpt_run((const char *const *)a->pdata);
  g_ptr_array_free(a, TRUE);
  return r;
}

/* Run `sh -c script` with $TP (the program, quoted) set; status and outputs. */
static inline TptRun tpt_run_shell(const char *script)
{
  const char *bin = g_getenv("TP_BIN");
  g_autofree char *abs = g_canonicalize_filename(bin ? bin : "./timeprest", NULL);
  g_autofree char *quoted = g_shell_quote(abs);
  g_autofree char *full = g_strdup_printf("TP=%s; %s", quoted, script);
  const char *argv[] = { "/bin/sh", "-c", full, NULL };
  TptRun r = { 0 };
  int wait = 0;
  GError *e = NULL;
  g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &r.out, &r.err, &wait, &e));
  g_assert_no_error(e);
  r.status = WIFEXITED(wait) ? WEXITSTATUS(wait) : 128;
  return r;
}

static inline void tpt_run_clear(TptRun *r)
{
  g_free(r->out);
  g_free(r->err);
}

/* Number of lines in text (a final line without newline counts). */
/* The value of "name" in a JSON report read as text: a string's contents, an array's inside, a
 * number's or word's text (g_free it); NULL when absent. */
static inline char *tpt_json_value(const char *json, const char *name)
{
  g_autofree char *key = g_strdup_printf("\"%s\": ", name);
  const char *p = strstr(json, key);
  if (!p)
    return NULL;
  p += strlen(key);
  if (*p == '"')
    return g_strndup(p + 1, strcspn(p + 1, "\""));
  if (*p == '[')
    return g_strndup(p + 1, strcspn(p + 1, "]"));
  return g_strndup(p, strcspn(p, ",}"));
}

/* A number's value; the test fails where it is absent. */
static inline double tpt_json_num(const char *json, const char *key)
{
  g_autofree char *t = tpt_json_value(json, key);
  g_assert_nonnull(t);
  return g_ascii_strtod(t, NULL);
}

static inline int tpt_lines(const char *text)
{
  int n = 0;
  for (const char *p = text; *p; p++)
    n += *p == '\n';
  return n + (*text && text[strlen(text) - 1] != '\n');
}

/* The program refuses args: exit 2, nothing on standard output, and one short line on standard
 * error, which holds want. */
static inline void tpt_expect_cli_refused(const char *const *args, const char *want)
{
  TptRun r = tpt_run(args);
  if (r.status != 2 || tpt_lines(r.err) != 1 || !strstr(r.err, want))
    g_error("%s %s: status %d, stderr '%s' (wanted status 2, one line with '%s')", args[0], args[1] ? args[1] : "",
            r.status, r.err, want);
  g_assert_cmpuint(strlen(r.err), <, 300);
  g_assert_cmpstr(r.out, ==, "");
  tpt_run_clear(&r);
}

/* path/NAME in a fresh private directory, so that concurrent test runs never share a file;
 * tpt_tmp_remove removes the file and the directory. */
static inline char *tpt_tmp_path(const char *name)
{
  GError *e = NULL;
  g_autofree char *dir = g_dir_make_tmp("tp-test-XXXXXX", &e);
  g_assert_no_error(e);
  return g_build_filename(dir, name, NULL);
}

static inline void tpt_tmp_remove(const char *path)
{
  g_autofree char *dir = g_path_get_dirname(path);
  g_unlink(path);
  g_rmdir(dir);
}

/* `timeprest schedule -s PRESET -w W -n N -k K -f csv -o path`, and the CSV it wrote into *text
 * (g_free). */
static inline void tpt_schedule_csv(const char *preset, const char *w, const char *n, const char *k, const char *path,
                                    char **text)
{
  TptRun r = tpt_run((const char *[]){ "schedule", "-s", preset, "-w", w, "-n", n, "-k", k, "-f", "csv", "-o", path,
                                       NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  g_assert_true(g_file_get_contents(path, text, NULL, NULL));
}

/* A fresh private directory (PREFIX-XXXXXX in the temporary directory), and its removal with
 * everything below it. */
static inline char *tpt_tmp_dir(const char *prefix)
{
  GError *e = NULL;
  g_autofree char *tmpl = g_strdup_printf("%s-XXXXXX", prefix);
  char *d = g_dir_make_tmp(tmpl, &e);
  g_assert_no_error(e);
  return d;
}

static inline void tpt_rm_tree(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name(d))) {
    g_autofree char *p = g_build_filename(dir, name, NULL);
    if (g_file_test(p, G_FILE_TEST_IS_DIR) && !g_file_test(p, G_FILE_TEST_IS_SYMLINK))
      tpt_rm_tree(p);
    else
      g_unlink(p);
  }
  g_rmdir(dir);
}

/* `timeprest schedule -s preset -w 2 -n 2 -k k --format csv` written to path; its text (to free). */
static inline char *tpt_schedule_file(const char *path, const char *preset, const char *k)
{
  TptRun r = tpt_run((const char *[]){ "schedule", "-s", preset, "-w", "2", "-n", "2", "-k", k, "--format", "csv", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_true(g_file_set_contents(path, r.out, -1, NULL));
  char *text = g_strdup(r.out);
  tpt_run_clear(&r);
  return text;
}

/* A train report with W stages and replicas (JSON): each stage's all-reduce in the prediction is
 * the reduction timed before training (the plumbing, not a timing: within the printed digits), of
 * its gradient's bytes (stages[].params floats), positive where it has any; and the predicted
 * time per mini-batch holds stage 1's (gpipe's updates wait for it). */
static inline void tpt_assert_allreduce_fed(const char *json, int W)
{
  const char *p = strstr(json, "\"allreduce\": [");
  g_assert_nonnull(p);
  double slowest = 0;
  for (int st = 1; st <= W; st++) {
    g_autofree char *head = g_strdup_printf("{\"stage\": %d, \"bytes\": ", st), *param = g_strdup_printf(
                                                                  "{\"stage\": %d, \"first_layer\": ", st);
    p = strstr(p, head);
    const char *q = strstr(json, param);
    g_assert_nonnull(p);
    g_assert_nonnull(q);
    double bytes = 0, measured = -1, predicted = -1, params = -1;
    g_assert_cmpint(sscanf(p + strlen(head), "%lf, \"measured\": %lf, \"predicted\": %lf", &bytes, &measured, &predicted),
                    ==, 3);
    g_assert_cmpint(sscanf(strstr(q, "\"params\": ") + 10, "%lf", &params), ==, 1);
    g_assert_cmpfloat(bytes, ==, 4 * params);
    if (bytes > 0)
      g_assert_cmpfloat(measured, >, 0);
    g_assert_cmpfloat(fabs(predicted - measured), <=, 1e-8 * measured);
    slowest = st == 1 ? measured : slowest;
    p++;
  }
  g_assert_cmpfloat(tpt_json_num(strstr(json, "\"predicted\": {"), "time_per_mini_batch"), >=, slowest);
}

#endif
