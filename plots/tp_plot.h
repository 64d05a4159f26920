/* tp_plot.h — glue between the plot subcommand and gnuplot: a scratch directory for data files,
 * variables handed to a script of plots/, and an atomic write of the PNG or SVG it renders. */
#ifndef TP_PLOT_H
#define TP_PLOT_H

#include <glib.h>

typedef struct {
  char *dir;     /* scratch directory, removed by tp_plot_free */
  GString *vars; /* gnuplot statements run before the script */
  GPtrArray *scratch; /* the directory and its files, removed by a signal that ends the program */
  GArray *slots;      /* their registry slots (tp_output.h) */
} TpPlot;

TpPlot *tp_plot_new(GError **err);
void tp_plot_free(TpPlot *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpPlot, tp_plot_free)

/* Path of a scratch file (g_free it). */
char *tp_plot_path(const TpPlot *p, const char *name);
/* Write a scratch data file. */
gboolean tp_plot_data(TpPlot *p, const char *name, const GString *content, GError **err);
/* Set a gnuplot string variable (quoted and escaped) or a number. */
void tp_plot_str(TpPlot *p, const char *var, const char *value);
void tp_plot_num(TpPlot *p, const char *var, double value);
/* A string safe inside a gnuplot double-quoted string: quotes and backslashes escaped. */
char *tp_plot_escape(const char *text);

/* Most training logs in one convergence picture: eight colours repeat beyond it many times over, and
 * each log is a scratch file the signal registry (tp_output.h, 64 paths) must hold. */
#define TP_PLOT_MAX_LOGS 32

/* Largest picture side in pixels the plots ask gnuplot for. */
#define TP_PLOT_MAX_SIDE 16384

/* Check that out ends in .png or .svg (a usage error otherwise). */
gboolean tp_plot_check_output(const char *out, GError **err);
/* Run plots/SCRIPT.gp and write its picture to out (.png or .svg); nothing is written on failure. */
gboolean tp_plot_render(TpPlot *p, const char *script, const char *out, int width, int height, GError **err);

#endif
