/* tp_plot.c — runs the gnuplot scripts of plots/ on data the plot subcommand prepares. */
#include "config.h"
#include "tp_plot.h"
#include "tp_error.h"
#include "tp_model.h"
#include "tp_output.h"
#include "tp_signal.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <signal.h>
#include <sys/prctl.h>
#endif

/* In gnuplot, before it runs: end with the process that started it (a plot killed by a signal does
 * not leave gnuplot drawing on), where the kernel offers it. */
static void end_with_parent(gpointer data)
{
  (void)data;
#ifdef __linux__
  (void)prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
}

/* Make the scratch file path (taken over) and have a terminating signal remove it (tp_temp_create:
 * made and registered in one section, so that a signal handled on another thread never finds it
 * made and not registered).  The open descriptor, or -1 with err set (what names the file). */
static int scratch_create(TpPlot *p, char *path, const char *what, GError **err)
{
  g_ptr_array_add(p->scratch, path);
  int slot, fd = tp_temp_create(path, FALSE, &slot), errnum = errno;
  g_array_append_val(p->slots, slot);
  gboolean full = fd >= 0 && slot < 0;
  if (full) { /* not kept unregistered */
    close(fd);
    g_unlink(path);
    fd = -1;
  }
  if (fd < 0) {
    g_autofree char *q = tp_quote(path);
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot make %s %s: %s", what, q,
                full ? "too many scratch files at once" : g_strerror(errnum));
  }
  return fd;
}

TpPlot *tp_plot_new(GError **err)
{
  /* made and registered in one section, so that no signal finds it made and not registered */
  char *dir = g_build_filename(g_get_tmp_dir(), "timeprest-plot-XXXXXX", NULL), *kept = g_strdup(dir);
  sigset_t old;
  tp_signal_block(&old);
  gboolean made = g_mkdtemp(dir) != NULL;
  int errnum = errno, slot = -1;
  if (made) {
    memcpy(kept, dir, strlen(dir));
    slot = tp_temp_register(kept);
  }
  tp_signal_unblock(&old);
  if (!made) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot make a scratch directory in %s: %s", g_get_tmp_dir(),
                g_strerror(errnum));
    g_free(dir), g_free(kept);
    return NULL;
  }
  TpPlot *p = g_new0(TpPlot, 1);
  p->dir = dir;
  p->vars = g_string_new(NULL);
  p->scratch = g_ptr_array_new_with_free_func(g_free);
  p->slots = g_array_new(FALSE, FALSE, sizeof(int));
  g_ptr_array_add(p->scratch, kept);
  g_array_append_val(p->slots, slot);
  return p;
}

void tp_plot_free(TpPlot *p)
{
  if (!p)
    return;
  /* removed before their slots are forgotten: a signal in between finds nothing or removes it */
  GDir *d = g_dir_open(p->dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name(d))) {
    g_autofree char *f = g_build_filename(p->dir, name, NULL);
    g_unlink(f);
  }
  if (d)
    g_dir_close(d);
  g_rmdir(p->dir);
  for (guint i = 0; i < p->slots->len; i++)
    tp_temp_forget(g_array_index(p->slots, int, i));
  g_free(p->dir);
  g_string_free(p->vars, TRUE);
  g_ptr_array_free(p->scratch, TRUE);
  g_array_free(p->slots, TRUE);
  g_free(p);
}

char *tp_plot_path(const TpPlot *p, const char *name) { return g_build_filename(p->dir, name, NULL); }

gboolean tp_plot_data(TpPlot *p, const char *name, const GString *content, GError **err)
{
  char *path = tp_plot_path(p, name);
  int fd = scratch_create(p, path, "plot data", err); /* written in place: the scratch directory is private */
  if (fd < 0)
    return FALSE;
  gboolean ok = tp_write_all(fd, content->str, content->len);
  int errnum = errno;
  if (close(fd) != 0 && ok) {
    errnum = errno;
    ok = FALSE;
  }
  if (!ok) {
    g_autofree char *q = tp_quote(path);
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot write plot data %s: %s", q, g_strerror(errnum));
    return FALSE;
  }
  return TRUE;
}

char *tp_plot_escape(const char *text)
{
  GString *g = g_string_new(NULL);
  for (const char *c = text; *c; c++) {
    if (*c == '"' || *c == '\\')
      g_string_append_c(g, '\\');
    g_string_append_c(g, *c == '\n' ? ' ' : *c);
  }
  return g_string_free(g, FALSE);
}

void tp_plot_str(TpPlot *p, const char *var, const char *value)
{
  g_autofree char *v = tp_plot_escape(value);
  g_string_append_printf(p->vars, "%s = \"%s\"; ", var, v);
}

void tp_plot_num(TpPlot *p, const char *var, double value)
{
  char buf[TP_NUM_LEN];
  g_string_append_printf(p->vars, "%s = %s; ", var, tp_num(buf, "%.17g", isfinite(value) ? value : 0));
}

gboolean tp_plot_check_output(const char *out, GError **err)
{
  if (!out) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-o: give the picture to write (FILE.png or FILE.svg)");
    return FALSE;
  }
  if (!g_str_has_suffix(out, ".png") && !g_str_has_suffix(out, ".svg")) {
    g_autofree char *q = tp_quote(out);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-o: %s must end in .png or .svg", q);
    return FALSE;
  }
  return TRUE;
}

/* A PNG ends with its IEND chunk (length 0, type, CRC); an SVG with its closing tag and blanks. */
static gboolean picture_complete(const char *pic, gsize len, gboolean svg)
{
  if (!svg) {
    static const unsigned char iend[12] = { 0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82 };
    return len >= 8 + sizeof iend && memcmp(pic + len - sizeof iend, iend, sizeof iend) == 0;
  }
  while (len > 0 && g_ascii_isspace(pic[len - 1]))
    len--;
  return len >= 6 && memcmp(pic + len - 6, "</svg>", 6) == 0;
}

static char *gnuplot_path(void)
{
  const char *env = g_getenv("TP_GNUPLOT");
  if (env && *env)
    return g_strdup(env);
  if (*TP_GNUPLOT_PATH && g_file_test(TP_GNUPLOT_PATH, G_FILE_TEST_IS_EXECUTABLE))
    return g_strdup(TP_GNUPLOT_PATH);
  return g_find_program_in_path("gnuplot");
}

gboolean tp_plot_render(TpPlot *p, const char *script, const char *out, int width, int height, GError **err)
{
  if (!tp_plot_check_output(out, err))
    return FALSE;
  g_autofree char *gp = gnuplot_path();
  if (!gp) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "gnuplot not found (install gnuplot-nox, or set TP_GNUPLOT)");
    return FALSE;
  }
  g_autofree char *path = tp_data_find("TP_PLOTS_DIR", "plots", script, ".gp");
  g_autofree char *common = tp_data_find("TP_PLOTS_DIR", "plots", "common", ".gp");
  if (!path || !common) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "plot script %s.gp not found (set TP_PLOTS_DIR)", script);
    return FALSE;
  }
  gboolean svg = g_str_has_suffix(out, ".svg");
  /* made empty here, so that the directory holds nothing unregistered; gnuplot writes it */
  char *tmp_out = tp_plot_path(p, svg ? "picture.svg" : "picture.png");
  int fd = scratch_create(p, tmp_out, "the picture's scratch file", err);
  if (fd < 0)
    return FALSE;
  close(fd);
  tp_plot_str(p, "out", tmp_out);
  tp_plot_str(p, "fmt", svg ? "svg" : "png");
  tp_plot_str(p, "common", common);
  tp_plot_num(p, "width", width);
  tp_plot_num(p, "height", height);
  char *argv[] = { gp, "-e", p->vars->str, path, NULL };
  g_autofree char *sout = NULL, *serr = NULL;
  int status = 0;
  GError *e = NULL;
  if (!g_spawn_sync(p->dir, argv, NULL, G_SPAWN_DEFAULT, end_with_parent, NULL, &sout, &serr, &status, &e)) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "cannot run gnuplot: %s", e->message);
    g_error_free(e);
    return FALSE;
  }
  if (!g_spawn_check_wait_status(status, &e)) {
    g_strstrip(serr);
    char *nl = strrchr(serr, '\n');
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "gnuplot failed on %s.gp: %s", script,
                *serr ? (nl ? nl + 1 : serr) : e->message);
    g_error_free(e);
    return FALSE;
  }
  g_autofree char *pic = NULL;
  gsize len = 0;
  if (!g_file_get_contents(tmp_out, &pic, &len, &e) || len == 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "gnuplot wrote no picture on %s.gp%s%s", script, e ? ": " : "",
                e ? e->message : "");
    g_clear_error(&e);
    return FALSE;
  }
  /* gnuplot exits 0 after a write it could not finish (a full disk): the picture must end as its format does */
  if (!picture_complete(pic, len, svg)) {
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "gnuplot left an incomplete picture on %s.gp (%" G_GSIZE_FORMAT
                " bytes in %s)", script, len, g_get_tmp_dir());
    return FALSE;
  }
  g_autoptr(TpOutputs) o = tp_outputs_new();
  return tp_outputs_add(o, out, pic, len, err) && tp_outputs_commit(o, err);
}
