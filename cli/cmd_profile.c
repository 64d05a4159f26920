/* cmd_profile.c — `timeprest profile`: each layer of a model timed on this machine's backend at the
 * micro-batch sizes a plan may use, by the executor's own stage profile (tp_runtime_profile) run
 * on a runtime whose every stage is one layer; repeated, the medians and spreads written as a
 * profile file (sim/tp_profile.h, docs/plan.md). */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_net.h"
#include "tp_profile.h"
#include "tp_runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *model, *backend, *batch, *sizes, *reps, *output, *seed;
} ProfOpts;

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorted in place) and (largest − smallest) / median. */
static double median_spread(double *v, int n, double *spread)
{
  qsort(v, n, sizeof *v, cmp_double);
  double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  *spread = med > 0 ? (v[n - 1] - v[0]) / med : 0;
  return med;
}

/* The micro-batch sizes: --micro-batch-sizes, else the divisors of --batch. */
static GArray *parse_sizes(const ProfOpts *o, GError **err)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(int));
  if (o->sizes) {
    g_auto(GStrv) parts = g_strsplit(o->sizes, ",", -1);
    for (int i = 0; parts[i]; i++) {
      int v;
      if (!tp_cli_int("--micro-batch-sizes", g_strstrip(parts[i]), 1, 1 << 16, &v, err)) {
        g_array_unref(a);
        return NULL;
      }
      g_array_append_val(a, v);
    }
  } else {
    int b = 128;
    if (o->batch && !tp_cli_int("--batch", o->batch, 1, 1 << 16, &b, err)) {
      g_array_unref(a);
      return NULL;
    }
    for (int d = 1; d <= b; d++)
      if (b % d == 0)
        g_array_append_val(a, d);
  }
  /* ascending, each once */
  tp_cli_sort_unique(a);
  return a;
}

/* "model name" of the first processor in /proc/cpuinfo, or NULL. */
static char *cpu_model(void)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/cpuinfo", &text, NULL, NULL))
    return NULL;
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (int i = 0; lines[i]; i++)
    if (g_str_has_prefix(lines[i], "model name")) {
      const char *c = strchr(lines[i], ':');
      return c ? g_strstrip(g_strdup(c + 1)) : NULL;
    }
  return NULL;
}

/* Time every layer at m samples, reps times; fill column k of p. */
static gboolean profile_size(TpProfile *p, const TpModel *m, const TpBackend *be, const TpDataset *data, int size,
                             int k, int reps, guint32 seed, double *total_spread, GError **err)
{
  int L = p->L;
  g_autofree int *bounds = g_new(int, L + 1);
  for (int i = 0; i <= L; i++)
    bounds[i] = i;
  TpRuntimeConfig cfg = { .model = m, .bounds = bounds, .W = L, .N = 1, .batch = size, .be = be, .train = data,
                          .lr = 0.01f, .momentum = 0.9f, .weight_decay = 1e-4f, .seed = seed, .timeout_s = 300 };
  g_autoptr(TpRuntime) rt = tp_runtime_new(&cfg, err);
  if (!rt)
    return FALSE;
  g_autofree int *idx = g_new(int, size);
  for (int i = 0; i < size; i++)
    idx[i] = i % data->n;
  g_autofree TpStageProfile *prof = g_new0(TpStageProfile, L);
  g_autofree double *f = g_new(double, (size_t)L * reps), *b = g_new(double, (size_t)L * reps);
  g_autofree double *u = g_new(double, (size_t)L * reps), *tot = g_new0(double, reps);
  for (int r = 0; r < reps; r++) {
    if (!tp_runtime_profile(rt, idx, 3, FALSE, FALSE, prof, err))
      return FALSE;
    for (int i = 0; i < L; i++) {
      f[(size_t)i * reps + r] = prof[i].fwd, b[(size_t)i * reps + r] = prof[i].bwd, u[(size_t)i * reps + r] = prof[i].upd;
      tot[r] += prof[i].fwd + prof[i].bwd;
    }
  }
  for (int i = 0; i < L; i++) {
    TpProfileLayer *l = &p->layer[i];
    l->fwd[k] = median_spread(f + (size_t)i * reps, reps, &l->fwd_spread[k]);
    l->bwd[k] = median_spread(b + (size_t)i * reps, reps, &l->bwd_spread[k]);
    /* sizes and updates do not depend on the micro-batch: taken at the first size */
    if (k == 0) {
      TpWStoreSizes sz;
      tp_runtime_sizes(rt, i, &sz);
      l->upd = median_spread(u + (size_t)i * reps, reps, &l->upd_spread);
      l->weight_bytes = (double)tp_runtime_n_params(rt, i) * sizeof(float);
      l->stored_bytes = (double)sz.activation_bytes / size;
      l->out_bytes = (double)tp_runtime_act_bytes_per_sample(rt, i);
      l->in_bytes = (double)tp_runtime_grad_bytes_per_sample(rt, i);
    }
  }
  median_spread(tot, reps, total_spread);
  return TRUE;
}

gboolean tp_cmd_profile(int argc, char **argv, GError **err)
{
  ProfOpts o = { 0 };
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_STRING, &o.model, "Model name or .model file (default mlp)", "NAME|FILE" },
    { "backend", 0, 0, G_OPTION_ARG_STRING, &o.backend, "Compute backend: cpu (default) or cuda", "NAME" },
    { "batch", 'b', 0, G_OPTION_ARG_STRING, &o.batch,
      "Profile the micro-batch sizes a plan of this batch may use: its divisors (default 128)", "B" },
    { "micro-batch-sizes", 0, 0, G_OPTION_ARG_STRING, &o.sizes, "Profile these sizes instead, e.g. 16,32", "LIST" },
    { "repetitions", 'r', 0, G_OPTION_ARG_STRING, &o.reps,
      "Profiles taken; the file keeps their median and spread (default 5)", "R" },
    { "seed", 0, 0, G_OPTION_ARG_STRING, &o.seed, "Seed of the weights and synthetic data (default 1)", "S" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &o.output, "Write the profile to FILE (default: standard output)", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- measure each layer's costs on this machine");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx,
    "Each layer is timed alone, as `train` times its stages before training: a forward and a backward of\n"
    "one micro-batch of every size, and an update (three timed calls after a warm-up, the median kept),\n"
    "the whole taken R times; the file holds each median and its spread ((largest - smallest) / median),\n"
    "the weight and activation bytes, and the backend, threads, cores, CPU, host and date.  simulate,\n"
    "compare and plan read it with --model NAME --profile FILE (docs/plan.md).\n\n"
    "Example: timeprest profile --model mlp-deep --batch 128 -o mlp-deep.profile");
  gboolean ok = tp_cli_parse(ctx, &argc, &argv, err);
  int reps = 5, seed = 1;
  g_autoptr(GArray) sizes = NULL;
  g_autoptr(TpModel) m = NULL;
  const TpBackend *be = NULL;
  ok = ok && (!o.reps || tp_cli_int("--repetitions", o.reps, 1, 1000, &reps, err)) &&
       (!o.seed || tp_cli_int("--seed", o.seed, 0, G_MAXINT, &seed, err)) && (sizes = parse_sizes(&o, err)) &&
       (m = tp_model_load(o.model ? o.model : "mlp", err)) && tp_net_check_model(m, err) &&
       (be = tp_backend_get(o.backend ? o.backend : "cpu", err));
  if (ok) {
    int L = tp_model_n_layers(m), top = g_array_index(sizes, int, sizes->len - 1);
    TpDataShape shape = tp_data_shape_of(m);
    g_autoptr(TpDataset) data = tp_dataset_synthetic_shaped(MAX(top, 64), &shape, (guint32)seed);
    g_autoptr(TpProfile) p = tp_profile_new(L, (int)sizes->len);
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    p->model = g_strdup(m->name);
    p->backend = g_strdup(tp_backend_name(be));
    p->threads = 1; /* one BLAS thread per stage, as training runs them */
    p->cores = (int)g_get_num_processors();
    p->machine = cpu_model();
    p->hostname = g_strdup(g_get_host_name());
    p->date = g_date_time_format_iso8601(now);
    p->memory = (double)MAX(tp_memory_available(), 0);
    p->repetitions = reps;
    for (int i = 0; i < L; i++)
      p->layer[i].kind = g_strdup(tp_layer_names[tp_model_layer(m, i)->kind]);
    g_autoptr(GString) spread = g_string_new(NULL);
    for (guint k = 0; k < sizes->len && ok; k++) {
      p->sizes[k] = g_array_index(sizes, int, k);
      double sp = 0;
      ok = profile_size(p, m, be, data, p->sizes[k], (int)k, reps, (guint32)seed, &sp, err);
      g_string_append_printf(spread, "%s%d: %.1f %%", k ? ", " : "", p->sizes[k], 100 * sp);
    }
    if (ok) {
      g_autoptr(GString) text = g_string_new(NULL);
      tp_profile_format(p, text);
      ok = tp_cli_emit(o.output, text, err);
      if (ok)
        fprintf(stderr, "profiled %d layers of %s on %s, %d repetitions; spread of the whole model's forward + "
                "backward per micro-batch size: %s\n", L, m->name, tp_backend_name(be), reps, spread->str);
    }
  }
  g_free(o.model), g_free(o.backend), g_free(o.batch), g_free(o.sizes), g_free(o.reps), g_free(o.output);
  g_free(o.seed);
  return ok;
}
