/* timeprest.c — the `timeprest` program: dispatches to its subcommands and maps errors to
 * one line on standard error and exit status 2 (bad usage or input) or 1 (runtime failure). */
#include "config.h"
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_backend.h"
#include "tp_memory.h"

#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  const char *name;
  TpCommandFn fn;
  const char *summary;
} Command;

static const Command commands[] = {
  { "schedule", tp_cmd_schedule, "generate, check and print a schedule (grid, csv, json)" },
  { "simulate", tp_cmd_simulate, "simulate a schedule: makespan, bubbles, memory, staleness, v, messages" },
  { "validate", tp_cmd_validate, "sweep (W, N) and check the published version-difference formulas" },
  { "compare", tp_cmd_compare, "every preset on one configuration, side by side (table or CSV)" },
  { "train", tp_cmd_train, "train a network for real with a schedule; predicted vs measured" },
  { "profile", tp_cmd_profile, "measure each layer's costs on this machine: a cost model for simulate and plan" },
  { "plan", tp_cmd_plan, "search preset, W, N and split under a memory limit; --run-top K checks the best" },
  { "model", tp_cmd_model, "a model's layers: shapes, parameters, FLOPs and stored activations per sample" },
  { "plot", tp_cmd_plot, "pictures with gnuplot: timeline, memory, vmap, convergence (PNG or SVG)" },
};

static void usage(FILE *f)
{
  fprintf(f, "Usage: timeprest COMMAND [OPTION…]\n\nPipeline-parallel training schedules: generate, simulate, check.\n\n"
             "Commands:\n");
  for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\nPresets:\n");
  for (int i = 0; i < tp_n_presets; i++)
    fprintf(f, "  %-16s %-10s + %-13s %s\n", tp_presets[i].name, tp_order_name(tp_presets[i].order),
            tp_policy_name(tp_presets[i].policy), tp_presets[i].summary);
  fprintf(f, "\n'timeprest COMMAND --help' describes each command.  Exit status: 0 success, 2 bad usage or input,\n"
             "1 runtime failure.\n");
}

/* At exit: standard output flushed, and a write to it that failed (a full disk, /dev/full) is a
 * runtime failure: exit 1 with its line, --help's text included (GOption prints it and exits 0). */
static gboolean failed; /* a failure already said: its line is the one */

static void check_stdout(void)
{
  errno = 0;
  if ((fflush(stdout) == 0 && !ferror(stdout)) || failed)
    return;
  int e = errno;
  fprintf(stderr, "timeprest: cannot write standard output%s%s\n", e ? ": " : "", e ? g_strerror(e) : "");
  _exit(1);
}

int main(int argc, char **argv)
{
  /* OpenBLAS, in the commands that compute with it (the others never load it), before anything
   * reads the process's size */
  gboolean blas = argc > 1 && (strcmp(argv[1], "train") == 0 || strcmp(argv[1], "profile") == 0);
  GError *settle = NULL;
  if (blas && !tp_backend_cpu_settle(argv, &settle)) {
    int status = tp_error_exit_status(settle);
    if (!tp_cli_silent_rank(&settle)) /* under mpirun: rank 0's line only */
      fprintf(stderr, "timeprest %s: %s\n", argv[1], settle->message);
    _exit(status); /* not exit(): OpenBLAS's destructor would wait for the thread that cannot start */
  }
  if (!blas) /* the simulator's commands: the same sizes allocated and freed over and over */
    tp_memory_keep_freed(4 << 20, 64 << 20);
  setlocale(LC_CTYPE, ""); /* text only: numbers are always written with a '.' */
  atexit(check_stdout);
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("%s\n", PACKAGE_STRING);
    return 0;
  }
  if (strcmp(argv[1], "--") == 0) {
    fprintf(stderr, "timeprest: '--' ends a command's options; give the command first (try 'timeprest --help')\n");
    return 2;
  }
  for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
    if (strcmp(argv[1], commands[i].name) == 0) {
      GError *err = NULL;
      g_autofree char *prg = g_strdup_printf("timeprest %s", commands[i].name);
      g_set_prgname(prg);
      argv[1] = prg;
      /* the memory bound every check reads: a malformed one refused before any work */
      if (tp_memory_limit_valid(&err) && commands[i].fn(argc - 1, argv + 1, &err))
        return 0;
      tp_cli_name_flag(&err);
      g_autofree char *line = tp_one_line(err->message); /* one line, whatever a message quotes */
      fprintf(stderr, "timeprest %s: %s\n", commands[i].name, line);
      int status = tp_error_exit_status(err);
      g_error_free(err);
      failed = TRUE;
      return status;
    }
  g_autofree char *q = tp_quote(argv[1]);
  fprintf(stderr, "timeprest: unknown command %s (commands: schedule, simulate, validate, compare, train, profile, plan, model, plot; try "
                  "'timeprest --help')\n", q);
  return 2;
}
