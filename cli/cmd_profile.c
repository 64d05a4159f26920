/* cmd_profile.c — `timeprest profile`: each layer of a model timed on this machine's backend at the
 * micro-batch sizes a plan may use, by the executor's own stage profile (tp_runtime_profile) run
 * on a runtime whose every stage is one layer; repeated, the medians and spreads written as a
 * profile file (sim/tp_profile.h, docs/plan.md).  Under mpirun with --transport mpi, the links
 * between the ranks first: an MPI ping-pong (exec/mpi's, as train measures its links) at the
 * message sizes of the model's activations, latency and bandwidth fitted; rank 0 then profiles. */
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_mpi.h"
#include "tp_net.h"
#include "tp_profile.h"
#include "tp_runtime.h"
#include "tp_memory.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *model, *backend, *batch, *sizes, *reps, *output, *seed, *transport, *threads;
} ProfOpts;

/* Message sizes pinged: at most this many, up to this many bytes (larger ones follow from the fit). */
#define LINK_SIZES 12
#define LINK_MAX_BYTES (64.0 * 1024 * 1024)

/* --threads: the backend's threads per call, before its instance exists (a host backend's only). */
static gboolean set_threads(const char *backend, gboolean given, int threads, GError **err)
{
  const TpBackendReg *reg = tp_backend_find(backend ? backend : "cpu", err);
  if (!reg)
    return FALSE;
  if (!given)
    return TRUE;
  if (!reg->set_threads) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--threads: backend %s has no threads per call to set", reg->name);
    return FALSE;
  }
  reg->set_threads(threads);
  return TRUE;
}

/* The micro-batch sizes: --micro-batch-sizes, else the divisors of --batch. */
static GArray *parse_sizes(const ProfOpts *o, GError **err)
{
  if (o->sizes && o->batch) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--batch and --micro-batch-sizes: give one (the sizes, or a batch "
                "whose divisors are profiled)");
    return NULL;
  }
  if (o->sizes && !*o->sizes) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--micro-batch-sizes: empty (give sizes such as 8,16,32)");
    return NULL;
  }
  GArray *a = g_array_new(FALSE, FALSE, sizeof(int));
  if (o->sizes) {
    g_auto(GStrv) parts = g_strsplit(o->sizes, ",", -1);
    for (int i = 0; parts[i]; i++) {
      int v;
      if (!tp_cli_int("--micro-batch-sizes", parts[i], 1, 1 << 16, &v, err)) {
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
      return c ? tp_name_clean(c + 1) : NULL; /* read back as a name */
    }
  return NULL;
}

/* The message sizes to ping: from the smallest to the largest message a plan of these micro-batch
 * sizes sends (a micro-batch's activations forward or gradient back between two layers), at most
 * LINK_SIZES geometrically spaced, multiples of 8 bytes, capped at LINK_MAX_BYTES; a range narrower
 * than 16× reaches down to 1/16 of its largest, so that latency and bandwidth separate. */
static GArray *link_sizes(const TpModel *m, const GArray *sizes)
{
  double lo = G_MAXDOUBLE, hi = 0;
  for (int i = 0; i + 1 < tp_model_n_layers(m); i++)
    for (guint k = 0; k < sizes->len; k++) {
      double b = 4.0 * g_array_index(sizes, int, k) *
                 (double)MAX(tp_model_layer(m, i)->out_elems, tp_model_layer(m, i + 1)->in_elems);
      lo = MIN(lo, b), hi = MAX(hi, b);
    }
  hi = MIN(MAX(hi, 8), LINK_MAX_BYTES);
  lo = MAX(8, MIN(lo, hi / 16));
  GArray *a = g_array_new(FALSE, FALSE, sizeof(size_t));
  for (int i = 0; i < LINK_SIZES; i++) {
    size_t b = (size_t)ceil(lo * pow(hi / lo, (double)i / (LINK_SIZES - 1)) / 8) * 8;
    if (!a->len || b > g_array_index(a, size_t, a->len - 1))
      g_array_append_val(a, b);
  }
  return a;
}

/* --transport mpi: the ping-pong between the ranks of this job (every rank), the fit into *l; MPI
 * finalized.  *root: whether this rank goes on to profile the layers (rank 0). */
static gboolean measure_links(const TpModel *m, const GArray *sizes, int reps, TpProfileLinks *l, gboolean *root,
                              GError **err)
{
  tp_mpi_watchdog(120, "starting MPI"); /* MPI_Init and the communicators: no timeout of their own */
  if (!tp_mpi_init(NULL, NULL, err))
    return FALSE;
  GError *e = NULL;
  TpMpi *mpi = tp_mpi_new(1, 120, &e);
  if (!mpi)
    tp_mpi_fail(NULL, e->message, 1);
  tp_mpi_watchdog(0, NULL);
  const int R = tp_mpi_size();
  *root = tp_mpi_rank() == 0;
  if (R < 2) {
    tp_mpi_finalize(mpi);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport mpi: one rank has no links to measure (mpirun -np 2 or "
                "more, on the hosts or cores the stages will use)");
    return FALSE;
  }
  g_autoptr(GArray) bytes = link_sizes(m, sizes);
  const int n = (int)bytes->len;
  g_autofree int *rounds = g_new(int, n);
  for (int i = 0; i < n; i++) /* small messages are cheap: more of them */
    rounds[i] = MAX(5, g_array_index(bytes, size_t, i) < (1u << 20) ? 10 * reps : reps);
  g_autofree double *median = g_new0(double, (size_t)(R - 1) * n);
  g_autofree double *eager = g_new0(double, R - 1);
  if (!tp_mpi_ping_pong(mpi, (const size_t *)bytes->data, rounds, n, FALSE, NULL, median, &e) ||
      !tp_mpi_eager_limits(mpi, eager, &e))
    tp_mpi_fail(mpi, e->message, 1);
  tp_mpi_finalize(mpi);
  l->eager_limit = eager[0]; /* pooled as the rest: the smallest */
  for (int s = 1; s < R - 1; s++)
    l->eager_limit = MIN(l->eager_limit, eager[s]);
  l->transport = g_strdup("mpi");
  l->ranks = R, l->n = n;
  l->bytes = g_new0(double, n), l->one_way = g_new0(double, n);
  for (int i = 0; i < n; i++) {
    l->bytes[i] = (double)g_array_index(bytes, size_t, i);
    for (int s = 0; s < R - 1; s++)
      l->one_way[i] += median[(size_t)s * n + i] / (R - 1);
  }
  tp_profile_fit_links(l);
  return TRUE;
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
    l->fwd[k] = tp_median_spread(f + (size_t)i * reps, reps, &l->fwd_spread[k]);
    l->bwd[k] = tp_median_spread(b + (size_t)i * reps, reps, &l->bwd_spread[k]);
    /* sizes and updates do not depend on the micro-batch: taken at the first size */
    if (k == 0) {
      TpWStoreSizes sz;
      tp_runtime_sizes(rt, i, &sz);
      l->upd = tp_median_spread(u + (size_t)i * reps, reps, &l->upd_spread);
      l->weight_bytes = (double)tp_runtime_n_params(rt, i) * sizeof(float);
      l->stored_bytes = (double)sz.activation_bytes / size;
      l->out_bytes = (double)tp_runtime_act_bytes_per_sample(rt, i);
      l->in_bytes = (double)tp_runtime_grad_bytes_per_sample(rt, i);
    }
  }
  tp_median_spread(tot, reps, total_spread);
  return TRUE;
}

/* profile's options, into o. */
static GOptionContext *profile_context(ProfOpts *o)
{
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &o->model, "Model name, .model file or config.json (default mlp)", "NAME|FILE" },
    { "backend", 0, 0, G_OPTION_ARG_STRING, &o->backend, "Compute backend: cpu (default) or cuda", "NAME" },
    { "threads", 0, 0, G_OPTION_ARG_STRING, &o->threads,
      "--backend cpu: BLAS threads per call, as train --threads (default 1)", "T" },
    { "batch", 'b', 0, G_OPTION_ARG_STRING, &o->batch,
      "Profile the micro-batch sizes a plan of this batch may use: its divisors (default 128)", "B" },
    { "micro-batch-sizes", 0, 0, G_OPTION_ARG_STRING, &o->sizes, "Profile these sizes instead, e.g. 16,32", "LIST" },
    { "repetitions", 'r', 0, G_OPTION_ARG_STRING, &o->reps,
      "Profiles taken; the file keeps their median and spread (default 5)", "R" },
    { "seed", 0, 0, G_OPTION_ARG_STRING, &o->seed, "Seed of the weights and synthetic data (default 1)", "S" },
    { "transport", 0, 0, G_OPTION_ARG_STRING, &o->transport,
      "mpi: under mpirun, also measure the links between the ranks (ping-pong at the activations' message sizes, "
      "latency and bandwidth fitted); local (default): none", "local|mpi" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &o->output, "Write the profile to FILE (default: standard output)", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GOptionContext *ctx = g_option_context_new("- measure each layer's costs on this machine");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx,
    "Each layer is timed alone, as `train` times its stages before training: a forward and a backward of\n"
    "one micro-batch of every size, and an update (three timed calls after a warm-up, the median kept),\n"
    "the whole taken R times; the file holds each median and its spread ((largest - smallest) / median),\n"
    "the weight and activation bytes, and the backend, threads, cores, CPU, host and date.  simulate,\n"
    "compare and plan read it with --model NAME --profile FILE (docs/plan.md).  With --transport mpi under\n"
    "mpirun -np R, the links between the R ranks are measured first and written too; rank 0 profiles the layers.\n\n"
    "Example: timeprest profile --model mlp-deep --batch 128 -o mlp-deep.profile\n"
    "         mpirun -np 2 timeprest profile --model mlp-deep --transport mpi -o mlp-deep.profile");
  return ctx;
}

/* The options parsed: the repetitions, seed, transport and threads, the sizes, the model and the
 * backend's instance. */
typedef struct {
  int reps, seed, mpi, threads;
  GArray *sizes;
  TpModel *m;
  const TpBackend *be;
} ProfArgs;

static gboolean parse_args(const ProfOpts *o, ProfArgs *a, GError **err)
{
  static const char *const transports[] = { "local", "mpi", NULL };
  const TpCliInput in[] = { { "-m", o->model, tp_model_path } };
  if (!tp_cli_check_outputs_made(1, (const char *const[]){ "-o" }, (const char *const[]){ o->output }, NULL,
                                 g_strcmp0(o->transport, "mpi") == 0, (int)G_N_ELEMENTS(in), in, err) ||
      !(!o->reps || tp_cli_int("--repetitions", o->reps, 1, 1000, &a->reps, err)) ||
      !(!o->seed || tp_cli_int("--seed", o->seed, 0, G_MAXINT, &a->seed, err)) || !(a->sizes = parse_sizes(o, err)) ||
      !(!o->transport || tp_cli_choice("--transport", o->transport, transports, &a->mpi, err)) ||
      !(!o->threads || tp_cli_int("--threads", o->threads, 1, 1024, &a->threads, err)) ||
      !set_threads(o->backend, o->threads != NULL, a->threads, err) ||
      !(a->m = tp_model_load(o->model ? o->model : "mlp", err)) || !tp_net_check_trainable(a->m, err) ||
      !(a->be = tp_backend_get(o->backend ? o->backend : "cpu", err)))
    return FALSE;
  if (a->mpi && (!tp_mpi_available() || !tp_mpi_launched())) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--transport mpi: %s", !tp_mpi_available() ? tp_mpi_missing() :
                "start it under mpirun (mpirun -np R timeprest profile --transport mpi ..., R >= 2)");
    return FALSE;
  }
  return TRUE;
}

/* Room for profiling at micro-batches of top: each size is profiled on its own, the largest holding
 * what training holds at that batch, and the synthetic samples (a byte per input element) with their
 * classes' patterns. */
static gboolean check_memory(const ProfArgs *a, int top, GError **err)
{
  TpDataShape shape = tp_data_shape_of(a->m);
  long long dim = (long long)shape.channels * shape.rows * shape.cols;
  g_autofree char *what = g_strdup_printf("profiling %s at micro-batches of %d", a->m->name, top);
  return tp_memory_check(what, 0, 0, 0, tp_model_train_bytes(a->m, top) + (MAX(top, 64) + shape.classes) * dim +
                                          tp_backend_threads_address_bytes(a->be, a->threads), err);
}

/* An empty profile of the model, with what it was taken on and the links measured (taken over). */
static TpProfile *new_profile(const ProfArgs *a, TpProfileLinks *links)
{
  int L = tp_model_n_layers(a->m);
  TpProfile *p = tp_profile_new(L, (int)a->sizes->len);
  g_autoptr(GDateTime) now = g_date_time_new_now_utc();
  p->model = g_strdup(a->m->name);
  p->backend = g_strdup(tp_backend_name(a->be));
  p->threads = a->threads; /* BLAS threads per stage, as training runs them (train --threads) */
  p->cores = (int)g_get_num_processors();
  p->machine = cpu_model();
  p->hostname = tp_name_clean(g_get_host_name());
  p->date = g_date_time_format_iso8601(now);
  p->memory = (double)MAX(tp_memory_available(), 0);
  p->repetitions = a->reps;
  p->links = *links; /* the profile's now */
  *links = (TpProfileLinks){ 0 };
  for (int i = 0; i < L; i++)
    p->layer[i].kind = g_strdup(tp_layer_names[tp_model_layer(a->m, i)->kind]);
  return p;
}

/* The profile written, and on standard error what was profiled and how much the repetitions spread
 * (and the links fitted). */
static gboolean write_profile(const TpProfile *p, const ProfArgs *a, const char *output, const char *spread,
                              GError **err)
{
  g_autoptr(GString) text = g_string_new(NULL);
  tp_profile_format(p, text);
  if (!tp_cli_emit(output, text, err))
    return FALSE;
  int L = tp_model_n_layers(a->m);
  fprintf(stderr, "profiled %d layer%s of %s on %s, %d repetition%s; spread of the whole model's forward + "
          "backward per micro-batch size: %s\n", L, L == 1 ? "" : "s", a->m->name, tp_backend_name(a->be), a->reps,
          a->reps == 1 ? "" : "s", spread);
  if (p->links.transport)
    fprintf(stderr, "links between %d MPI ranks, %d message sizes from %.0f to %.0f bytes: latency %.3g us, "
            "bandwidth %.3g GB/s (the fit within %.1f %% of every size's median)\n", p->links.ranks, p->links.n,
            p->links.bytes[0], p->links.bytes[p->links.n - 1], 1e6 * p->links.latency, p->links.bandwidth / 1e9,
            100 * p->links.fit_error);
  return TRUE;
}

/* Rank 0's part (or the one process's): every size profiled on synthetic data, the profile written. */
static gboolean profile_layers(const ProfOpts *o, const ProfArgs *a, TpProfileLinks *links, GError **err)
{
  int top = g_array_index(a->sizes, int, a->sizes->len - 1);
  if (!check_memory(a, top, err))
    return FALSE;
  TpDataShape shape = tp_data_shape_of(a->m);
  g_autoptr(TpDataset) data = tp_dataset_synthetic_shaped(MAX(top, 64), &shape, (guint32)a->seed);
  g_autoptr(TpProfile) p = new_profile(a, links);
  g_autoptr(GString) spread = g_string_new(NULL);
  for (guint k = 0; k < a->sizes->len; k++) {
    p->sizes[k] = g_array_index(a->sizes, int, k);
    double sp = 0;
    if (!profile_size(p, a->m, a->be, data, p->sizes[k], (int)k, a->reps, (guint32)a->seed, &sp, err))
      return FALSE;
    g_string_append_printf(spread, "%s%d: %.1f %%", k ? ", " : "", p->sizes[k], 100 * sp);
  }
  return write_profile(p, a, o->output, spread->str, err);
}

gboolean tp_cmd_profile(int argc, char **argv, GError **err)
{
  ProfOpts o = { 0 };
  ProfArgs a = { .reps = 5, .seed = 1, .threads = 1 };
  g_autoptr(GOptionContext) ctx = profile_context(&o);
  gboolean ok = tp_cli_parse(ctx, &argc, &argv, err) && parse_args(&o, &a, err);
  /* a flag refused before MPI starts is refused alike by every rank: rank 0's line only */
  gboolean silent = !ok && tp_cli_silent_rank(err);
  TpProfileLinks links = { 0 };
  gboolean root = TRUE;
  ok = ok && (!a.mpi || measure_links(a.m, a.sizes, a.reps, &links, &root, err)) &&
       (!root || profile_layers(&o, &a, &links, err)); /* the other ranks' part is done */
  g_free(links.transport), g_free(links.bytes), g_free(links.one_way);
  g_free(o.model), g_free(o.backend), g_free(o.batch), g_free(o.sizes), g_free(o.reps), g_free(o.output);
  g_free(o.seed), g_free(o.transport), g_free(o.threads);
  g_clear_pointer(&a.sizes, g_array_unref);
  g_clear_pointer(&a.m, tp_model_free);
  if (silent)
    exit(2);
  return ok;
}
