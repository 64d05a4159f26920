/* tp_cli.h — pieces shared by the subcommands: strict number and range parsing, the options that
 * choose a schedule (preset, order, policy, W, N, K, or a schedule file), and atomic output. */
#ifndef TP_CLI_H
#define TP_CLI_H

#include "tp_metrics.h"
#include "tp_model.h"
#include "tp_schedule.h"

typedef gboolean (*TpCommandFn)(int argc, char **argv, GError **err);

gboolean tp_cmd_schedule(int argc, char **argv, GError **err);
gboolean tp_cmd_simulate(int argc, char **argv, GError **err);
gboolean tp_cmd_validate(int argc, char **argv, GError **err);
gboolean tp_cmd_compare(int argc, char **argv, GError **err);
gboolean tp_cmd_plot(int argc, char **argv, GError **err);
gboolean tp_cmd_train(int argc, char **argv, GError **err);
gboolean tp_cmd_profile(int argc, char **argv, GError **err);
gboolean tp_cmd_plan(int argc, char **argv, GError **err);
gboolean tp_cmd_model(int argc, char **argv, GError **err);

/* A positive number of bytes (tp_parse_bytes: "12G", "1.5e9"); the error names the flag. */
gboolean tp_cli_bytes(const char *flag, const char *text, double *out, GError **err);
/* A whole number in [lo, hi] for option `flag`; a usage error otherwise. */
gboolean tp_cli_int(const char *flag, const char *text, int lo, int hi, int *out, GError **err);
/* --activation-limit's value (NULL: 0, none) for order o, checked by tp_limit_check. */
gboolean tp_cli_act_limit(const char *text, TpOrder o, double *out, GError **err);
/* "A-B" or "A" within [lo, hi], A <= B. */
gboolean tp_cli_range(const char *flag, const char *text, int lo, int hi, int *a, int *b, GError **err);
/* --split: W comma-separated layer counts, each at least 1 (their sum is checked by the user). */
gboolean tp_cli_split(const char *text, int W, int *counts, GError **err);
/* One of the words in `choices` (NULL-terminated); its index. */
gboolean tp_cli_choice(const char *flag, const char *text, const char *const *choices, int *out, GError **err);
/* Sorts an array of int ascending and keeps each value once. */
void tp_cli_sort_unique(GArray *a);

/* The preset named by -s (NULL: timeprest); a usage error listing the presets otherwise. */
const TpPreset *tp_cli_preset(const char *name, GError **err);
/* The (W, N) sweep of `validate` and `plot vmap`: -w and -n ranges (NULL: 2-16), -s preset, at most
 * max_cells cells.  Sets *p and range = { w0, w1, n0, n1 }; returns the rows (TpSweepRow). */
GArray *tp_cli_sweep(const char *wr, const char *nr, const char *preset, long max_cells, const TpPreset **p,
                     int range[4], GError **err);

/* Options that select a schedule, shared by `schedule` and `simulate`. */
typedef struct {
  char *preset, *order, *policy, *workers, *micro, *mini, *input, *significance, *chunks;
  char *act_limit; /* --activation-limit: zb-auto's and zb-v's */
  gboolean recompute;
  gboolean fuse; /* --fuse-forwards: the schedule with fused forwards (tp_schedule_fuse_forwards) */
} TpCliSchedule;

/* Add the schedule options to a context's main group. */
void tp_cli_schedule_options(GOptionContext *ctx, TpCliSchedule *o);
/* Generate the schedule the options name, or load and validate --input. */
TpSchedule *tp_cli_schedule_build(const TpCliSchedule *o, GError **err);
void tp_cli_schedule_clear(TpCliSchedule *o);

/* Options that choose a cost model, shared by `simulate`, `compare` and `plot`, and the timeline the
 * nf1b / 1f1b-async orders are fixed on (--order-from slots|costs; --costed-order = costs). */
typedef struct {
  char *cost, *model, *cluster, *profile, *batch, *split, *order_from, *optimizer;
  char *data_parallel, *tensor_parallel; /* D replicas; T-way tensor parallel blocks (simulated) */
  gboolean fit_memory, costed_order, overlap_allreduce, sequence_parallel;
  TpModel *loaded; /* --model read once (tp_cli_cost_load_model), copied for each cost; NULL: read each time */
} TpCliCost;

void tp_cli_cost_options(GOptionContext *ctx, TpCliCost *o);
/* Before the schedule is built: checks the cost and order options (--order-from costs needs a cost
 * model), and a cluster of several workers sets the default -w. */
gboolean tp_cli_cost_defaults(const TpCliCost *o, TpCliSchedule *so, GError **err);
/* Whether the order is to be fixed on the cost model: --order-from costs or --costed-order, or by
 * default whenever a cost model is given (after tp_cli_cost_defaults accepted the options). */
gboolean tp_cli_order_on_costs(const TpCliCost *o);
/* The cost model for schedule s: unit slots, a cost file, or model × cluster or × measured profile
 * (split optimally, by --split, or under the devices' memory with --fit-memory). */
TpCost *tp_cli_cost_build(const TpCliCost *o, const TpSchedule *s, GError **err);
/* --model (if given) read into o->loaded, for a command that builds several costs. */
gboolean tp_cli_cost_load_model(TpCliCost *o, GError **err);
void tp_cli_cost_clear(TpCliCost *o);
/* When tp_cli_order_on_costs, fix the order of a generated rule-based schedule (nf1b, 1f1b-async) on
 * cost model c instead of unit slots, replacing *s.  A schedule file keeps its order (asking for
 * --order-from costs explicitly with one is an error). */
gboolean tp_cli_costed_order(const TpCliCost *o, TpSchedule **s, const TpCost *c, GError **err);
/* Schedule, then its cost model, then (by default with a cost model) the order fixed on it. */
gboolean tp_cli_build_all(const TpCliSchedule *so, TpCliCost *co, TpSchedule **s, TpCost **c, GError **err);
/* One warning line per device whose stages' peaks exceed its memory; returns how many. */
int tp_cli_memory_warnings(const TpCost *c, const TpMetrics *m, const char *label);

/* A schedule simulated under a cost model, as simulate, plot timeline and plot memory need it. */
typedef struct {
  TpCliSchedule so;
  TpCliCost co;
  TpSchedule *s;
  TpCost *c;
  TpSim *sim;
  TpMetrics *m;
} TpCliRun;

/* Add the schedule and cost options. */
void tp_cli_run_options(GOptionContext *ctx, TpCliRun *r);
/* Build schedule and costs from the options, simulate, compute the metrics. */
gboolean tp_cli_run_simulate(TpCliRun *r, GError **err);
void tp_cli_run_clear(TpCliRun *r);

/* A library's error about a parameter's value (tp_error_param_name) named by its flag ("--batch: ";
 * "backend cuda: …" becomes "--backend cuda: …"), then a plain TP_ERROR_INPUT; other errors are left
 * as they are. */
void tp_cli_name_flag(GError **err);

/* Under mpirun every rank parses the same flags and refuses them alike: TRUE where this process is
 * a rank other than 0 and *err a refusal of input (exit 2), *err then cleared — the caller ends with
 * status 2 and says nothing, so that the job prints rank 0's line once.  Before MPI starts nothing
 * orders the ranks' ends: it returns 3 s later (mpirun ends it sooner, at rank 0's exit), so that
 * rank 0's line is out first but under extreme load. */
gboolean tp_cli_silent_rank(GError **err);

/* Parse argv with ctx; no positional arguments allowed. */
gboolean tp_cli_parse(GOptionContext *ctx, int *argc, char ***argv, GError **err);

/* An input file of a command for tp_cli_check_outputs: given by flag (NULL path: not given).  With
 * find (tp_model_path, tp_cluster_path), the value is what the loader takes, a path or a name it
 * looks up elsewhere (-m mlp), and find says which file that is. */
typedef struct {
  const char *flag, *path;
  char *(*find)(const char *name_or_path);
} TpCliInput;

/* The n output files of a command, paths[i] given by flags[i] (NULL: not given; "-": standard
 * output), checked before any work: a usage error when one is empty, cannot be written (what the
 * kernel finds at the path a directory, a socket, a block device, or a device or FIFO the user may
 * not write; for a regular or new file, no temporary can be made beside the file its links end at:
 * the directory missing, not one, read-only, a name too long), two name one file (existing files
 * by identity, new ones by name in a directory matched by identity; a device or FIFO may take
 * several), standard output redirected into a file an output names, or one names a regular file
 * among the n_in inputs. */
gboolean tp_cli_check_outputs(int n, const char *const *flags, const char *const *paths, int n_in,
                              const TpCliInput *inputs, GError **err);
/* The same for a command that first makes the directory `made` (NULL: none) with its missing
 * parents (train --checkpoint): an output there is checked as in a directory that exists; and, with
 * rank0_writes (train, profile --transport mpi), where the outputs are checked: by rank 0 alone
 * under an MPI launcher, the rank that writes them. */
gboolean tp_cli_check_outputs_made(int n, const char *const *flags, const char *const *paths, const char *made,
                                   gboolean rank0_writes, int n_in, const TpCliInput *inputs, GError **err);

/* The one output file of a command, -o PATH (NULL: not given): tp_cli_check_outputs of it alone
 * against the n_in inputs, so that an empty name or an input's is refused before any work. */
gboolean tp_cli_check_output(const char *path, int n_in, const TpCliInput *inputs, GError **err);

/* The input files of the schedule and cost options (-i, -c, -m, --cluster, --profile), into in. */
#define TP_CLI_RUN_INPUTS 5
void tp_cli_run_inputs(const TpCliSchedule *so, const TpCliCost *co, TpCliInput in[TP_CLI_RUN_INPUTS]);

/* Write text to path atomically (nothing half-written), or to stdout for NULL or "-" (see tp_output.h;
 * a command with several outputs stages them all in one TpOutputs).  Text written to standard output
 * or a device is taken over, not copied: text is then left empty. */
gboolean tp_cli_emit(const char *path, GString *text, GError **err);

#endif
