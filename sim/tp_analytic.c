/* tp_analytic.c — the analytic cost model: model description × cluster → per-stage costs. */
#include "tp_analytic.h"
#include "tp_allreduce.h"
#include "tp_error.h"
#include "tp_costed.h"
#include "tp_metrics.h"
#include "tp_layout.h"
#include "tp_partition.h"
#include "tp_tie.h"

double tp_layer_time(const TpLayer *L, const TpDevice *d, int elem_bytes, double b, gboolean bwd)
{
  double flops = b * (bwd ? L->bwd_flops : L->fwd_flops), peak = elem_bytes == 2 ? tp_device_flops16(d) : d->flops;
  double bytes = elem_bytes * (b * ((bwd ? 2.0 : 1.0) * L->in_elems + L->out_elems) + (bwd ? 2.0 : 1.0) * L->params);
  double t_compute = flops / (peak * d->efficiency), t_memory = bytes / (d->bandwidth * d->efficiency);
  return MAX(t_compute, t_memory);
}

void tp_analytic_free(TpAnalytic *a)
{
  if (!a)
    return;
  g_free(a->bounds);
  g_free(a->device);
  g_free(a->group_memory);
  g_free(a->reserve);
  g_free(a->tab.fwd_prefix);
  g_free(a->tab.bwd_prefix);
  g_free(a->tab.inp_prefix);
  g_free(a->tab.upd_prefix);
  g_free(a->tab.param_prefix);
  g_free(a->tab.copy_prefix);
  g_free(a->tab.copy_upd_prefix);
  g_free(a->tab.stored_prefix);
  g_free(a->tab.storedw_prefix);
  g_free(a->tab.in_bytes);
  g_free(a->tab.out_bytes);
  g_free(a);
}

gboolean tp_profile_check_model(const TpProfile *p, const TpModel *m, GError **err)
{
  int L = tp_model_n_layers(m);
  if (p->L != L) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: a profile of %d layers (model %s), model %s has %d", p->source,
                p->L, p->model, m->name, L);
    return FALSE;
  }
  for (int i = 0; i < L; i++) {
    const TpLayer *l = tp_model_layer(m, i);
    const TpProfileLayer *pl = &p->layer[i];
    if (g_strcmp0(pl->kind, tp_layer_names[l->kind]) != 0) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: layer %d is a %s in the profile, a %s in model %s", p->source,
                  i + 1, pl->kind, tp_layer_names[l->kind], m->name);
      return FALSE;
    }
    /* the same layer, not only the same kind: the executor's float32 bytes of its weights and of a
     * sample's input gradient and output as the profile measured them, each layer a stage (the first
     * may pass no gradient back, the last no activations on: 0) — and so sizes that chain */
    const char *what[] = { "weight bytes", "input bytes per sample", "output bytes per sample" };
    const double have[] = { pl->weight_bytes, pl->in_bytes, pl->out_bytes };
    const double want[] = { 4.0 * (double)l->weights, 4.0 * (double)l->in_elems, 4.0 * (double)l->out_elems };
    const gboolean may_be_0[] = { FALSE, i == 0, i == L - 1 };
    for (int k = 0; k < 3; k++)
      if (have[k] != want[k] && !(may_be_0[k] && have[k] == 0)) {
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: layer %d (%s): %s %.17g in the profile, %.17g in model %s (a "
                    "profile of another model?)", p->source, i + 1, pl->kind, what[k], have[k], want[k], m->name);
        return FALSE;
      }
  }
  return TRUE;
}

/* Tensor parallelism: the two all-reduces of a block's activations among a->tensor (for b samples)
 * that its forward, and again its backward, waits for; 0 for other layers or without it. */
static double tensor_comm(const TpAnalytic *a, const TpLayer *l, double b)
{
  if (a->tensor <= 1 || l->kind != TP_LAYER_BLOCK)
    return 0;
  double bw = a->cluster ? a->cluster->link_bandwidth : 0, lat = a->cluster ? a->cluster->link_latency : 0;
  return 2 * tp_allreduce_ring(a->tensor, b * a->model->elem_bytes * (double)l->hin * (double)l->cin, bw, lat);
}

/* Each stage's prefix sums of layer times on its device (k: the profile's micro-batch size, or -1). */
static void fill_prefixes(TpAnalytic *a, int k)
{
  const TpModel *m = a->model;
  const TpCluster *c = a->cluster;
  const TpProfile *p = a->profile;
  int L = tp_model_n_layers(m);
  a->tab.times_grow = TRUE;
  for (int s = 0; s < a->W; s++) {
    const TpDevice *d = p ? NULL : &c->dev[a->device[s]];
    double *fp = a->tab.fwd_prefix + (size_t)s * (L + 1), *bp = a->tab.bwd_prefix + (size_t)s * (L + 1);
    double *ip = a->tab.inp_prefix + (size_t)s * (L + 1);
    for (int i = 0; i < L; i++) {
      const TpLayer *l = tp_model_layer(m, i);
      double comm = tensor_comm(a, l, a->micro);
      double bwd = comm + (p ? p->layer[i].bwd[k] : tp_layer_time(l, d, m->elem_bytes, a->micro, TRUE));
      fp[i + 1] = fp[i] + comm + (p ? p->layer[i].fwd[k] : tp_layer_time(l, d, m->elem_bytes, a->micro, FALSE));
      bp[i + 1] = bp[i] + bwd;
      ip[i + 1] = ip[i] + (l->bwd_flops > 0 ? bwd * l->bwd_in_flops / l->bwd_flops : bwd / 2);
      a->tab.times_grow &= fp[i + 1] >= fp[i] && bp[i + 1] >= bp[i];
    }
  }
}

/* Stage s's forward of the whole mini-batch over layers lo..hi-1: the profile's times at the
 * mini-batch's size (0 — N micro-batch forwards — where it was not profiled), or the device's model
 * at that size (where the weights' traffic is paid once for B rows, not once per B/N). */
static double forward_whole(const TpAnalytic *a, int s, int lo, int hi)
{
  const TpProfile *p = a->profile;
  int k = p ? tp_profile_size_index(p, (int)a->batch) : -1;
  double t = 0;
  if (p && k < 0)
    return 0;
  for (int i = lo; i < hi; i++)
    t += tensor_comm(a, tp_model_layer(a->model, i), (double)a->batch);
  for (int i = lo; i < hi; i++)
    t += p ? p->layer[i].fwd[k]
           : tp_layer_time(tp_model_layer(a->model, i), &a->cluster->dev[a->device[s]], a->model->elem_bytes,
                         (double)a->batch, FALSE);
  return t;
}

gboolean tp_analytic_place(TpAnalytic *a, const TpSchedule *s, GError **err)
{
  (void)err;
  int R = tp_schedule_ranks(s), n = a->profile ? a->profile->cores : a->cluster->n;
  a->map = s->rank_seq ? s->map : TP_MAP_NONE, a->ranks = R;
  for (int st = 0; st < a->W; st++)
    a->device[st] = !a->profile && n == 1 ? 0 : n > 0 && R > n ? tp_stage_rank(s, st) % n : tp_stage_rank(s, st);
  fill_prefixes(a, a->profile ? tp_profile_size_index(a->profile, (int)(a->batch / a->N)) : -1);
  return TRUE;
}

void tp_analytic_tensor(TpAnalytic *a, int T)
{
  if (T <= 1)
    return;
  a->tensor = T;
  fill_prefixes(a, a->profile ? tp_profile_size_index(a->profile, (int)(a->batch / a->N)) : -1);
}

/* The seconds a forward of the whole model takes on device d, micro-batch samples at a time. */
static double model_time(const TpAnalytic *a, const TpDevice *d)
{
  double t = 0;
  for (int i = 0; i < tp_model_n_layers(a->model); i++)
    t += tp_layer_time(tp_model_layer(a->model, i), d, a->model->elem_bytes, a->micro, FALSE);
  return t;
}

void tp_analytic_parallel(TpAnalytic *a, int D, int T)
{
  a->replicas = D;
  const TpCluster *c = a->cluster;
  long group = (long)MAX(D, 1) * MAX(T, 1);
  if (!a->profile && c && !c->any_count && c->n > 1 && group > 1) {
    g_free(a->group_memory);
    a->group_memory = g_new(double, a->W);
    for (int s = 0; s < a->W; s++) {
      long first = a->device[s] * group; /* the stage's rank (its device before) x its GPUs */
      int slowest = (int)MIN(first, c->n - 1);
      double most = -1, least = c->dev[slowest].memory;
      for (long g = first; g < first + group && g < c->n; g++) {
        double t = model_time(a, &c->dev[g]);
        if (t > most)
          most = t, slowest = (int)g;
        least = MIN(least, c->dev[g].memory);
      }
      const TpDevice *was = &c->dev[a->device[s]], *now = &c->dev[slowest];
      if (g_strcmp0(was->id, now->id) != 0 || was->memory != now->memory) /* else the stage's device, alike */
        a->device[s] = slowest;
      a->group_memory[s] = least;
    }
  }
  if (T > 1)
    tp_analytic_tensor(a, T);
  else if (a->group_memory)
    fill_prefixes(a, -1);
}

TpAnalytic *tp_analytic_new(const TpModel *m, const TpCluster *c, int W, int N, long batch, GError **err)
{
  return tp_analytic_new_on(m, c, NULL, W, N, batch, FALSE, err);
}

/* Whether W stages of m, N micro-batches of batch samples, can be costed on c or profile p: the
 * cluster's workers (unless any_width), the layers, the batch, the profile's model and micro-batch
 * size (its index into *k, else -1); else one line. */
static gboolean new_check(const TpModel *m, const TpCluster *c, const TpProfile *p, int W, int N, long batch,
                          gboolean any_width, int *k, GError **err)
{
  int L = tp_model_n_layers(m);
  *k = -1;
  if (c && !any_width && c->n != 1 && c->n != W) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "cluster %s has %d workers, the pipeline %d stages (use -w %d)", c->name,
                c->n, W, c->n);
    return FALSE;
  }
  if (W > L) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "model %s has %d layers, fewer than the %d stages", m->name, L, W);
    return FALSE;
  }
  if (batch < N || batch % N != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_BATCH, "%ld samples do not split into N=%d equal micro-batches",
                batch, N);
    return FALSE;
  }
  if (p && (!tp_profile_check_model(p, m, err)))
    return FALSE;
  if (p && (*k = tp_profile_size_index(p, (int)(batch / N))) < 0) {
    g_autofree char *have = tp_profile_sizes_text(p);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: no micro-batch of %ld samples (batch %ld / N=%d) was profiled "
                "(it has %s); profile micro-batches of %ld samples", p->source, batch / N, batch, N, have,
                batch / N);
    return FALSE;
  }
  return TRUE;
}

/* The per-layer tables that do not depend on the stage: weight and stored bytes, message bytes, a
 * profile's update times, and the tied heads' copies of the table. */
static void layer_tables(TpAnalytic *a)
{
  const TpModel *m = a->model;
  const TpProfile *p = a->profile;
  int L = tp_model_n_layers(m);
  for (int i = 0; i < L; i++) {
    const TpLayer *ly = tp_model_layer(m, i);
    if (p) {
      const TpProfileLayer *pl = &p->layer[i];
      a->tab.param_prefix[i + 1] = a->tab.param_prefix[i] + pl->weight_bytes;
      a->tab.stored_prefix[i + 1] = a->tab.stored_prefix[i] + pl->stored_bytes;
      a->tab.storedw_prefix[i + 1] = a->tab.storedw_prefix[i] + pl->stored_bytes; /* the executor keeps it all until W */
      a->tab.in_bytes[i] = pl->in_bytes, a->tab.out_bytes[i] = pl->out_bytes;
    } else {
      const double e = m->elem_bytes;
      a->tab.param_prefix[i + 1] = a->tab.param_prefix[i] + e * (double)ly->weights;
      a->tab.stored_prefix[i + 1] = a->tab.stored_prefix[i] + ly->stored_bytes;
      a->tab.storedw_prefix[i + 1] = a->tab.storedw_prefix[i] + ly->stored_w_bytes;
      a->tab.in_bytes[i] = e * (double)ly->in_elems, a->tab.out_bytes[i] = e * (double)ly->out_elems;
    }
  }
  if (p) {
    a->tab.upd_prefix = g_new0(double, L + 1);
    for (int i = 0; i < L; i++)
      a->tab.upd_prefix[i + 1] = a->tab.upd_prefix[i] + p->layer[i].upd;
  }
  a->tab.copy_prefix = g_new0(double, L + 1), a->tab.copy_upd_prefix = g_new0(double, L + 1);
  gboolean lm = tp_model_layer(m, 0)->kind == TP_LAYER_EMBEDDING;
  for (int i = 0; i < L; i++) {
    gboolean tied = lm && i > 0 && tp_model_layer(m, i)->kind == TP_LAYER_LM_HEAD && tp_model_layer(m, i)->blk.tied;
    double bytes = tied ? a->tab.param_prefix[i + 1] - a->tab.param_prefix[i] : 0;
    a->tab.copy_prefix[i + 1] = a->tab.copy_prefix[i] + bytes;
    a->tab.copy_upd_prefix[i + 1] = a->tab.copy_upd_prefix[i] + (tied && p ? p->layer[i].upd : 0);
    if (tied)
      a->tab.tied_bytes = bytes;
  }
}

TpAnalytic *tp_analytic_new_on(const TpModel *m, const TpCluster *c, const TpProfile *p, int W, int N, long batch,
                               gboolean any_width, GError **err)
{
  int L = tp_model_n_layers(m), k;
  if (!new_check(m, c, p, W, N, batch, any_width, &k, err))
    return NULL;
  TpAnalytic *a = g_new0(TpAnalytic, 1);
  a->model = m, a->cluster = c, a->profile = p, a->W = W, a->N = N, a->batch = batch, a->micro = (double)batch / N;
  a->bounds = g_new0(int, W + 1);
  a->device = g_new0(int, W);
  a->reserve = g_new0(double, W);
  a->tab.fwd_prefix = g_new0(double, (size_t)W * (L + 1));
  a->tab.bwd_prefix = g_new0(double, (size_t)W * (L + 1));
  a->tab.inp_prefix = g_new0(double, (size_t)W * (L + 1));
  a->tab.param_prefix = g_new0(double, L + 1);
  a->tab.stored_prefix = g_new0(double, L + 1);
  a->tab.storedw_prefix = g_new0(double, L + 1);
  a->tab.in_bytes = g_new0(double, L);
  a->tab.out_bytes = g_new0(double, L);
  if (c) /* a cluster given beside a profile: its links */
    a->link_latency = c->link_latency, a->link_bandwidth = c->link_bandwidth, a->link_eager_limit = c->link_eager_limit;
  else if (p && p->links.transport) /* measured between MPI ranks */
    a->link_latency = p->links.latency, a->link_bandwidth = p->links.bandwidth, a->link_eager_limit = p->links.eager_limit;
  int n_dev = p ? p->cores : c->n;
  for (int s = 0; s < W; s++)
    a->device[s] = !p && c->n == 1 ? 0 : n_dev > 0 && W > n_dev ? s % n_dev : s;
  layer_tables(a);
  fill_prefixes(a, k);
  return a;
}

static double link_time(const TpAnalytic *a, double bytes_per_sample)
{
  if (a->link_bandwidth <= 0)
    return a->link_latency;
  return a->link_latency + a->micro * bytes_per_sample / a->link_bandwidth;
}

/* Stage s's compute for one micro-batch on layers [lo, hi). */
static double range_compute(int s, int lo, int hi, gpointer data)
{
  const TpAnalytic *a = data;
  size_t row = (size_t)s * (tp_model_n_layers(a->model) + 1);
  double fwd = a->tab.fwd_prefix[row + hi] - a->tab.fwd_prefix[row + lo];
  /* recomputing: the backward runs the forward again */
  return (a->recompute ? 2 : 1) * fwd + a->tab.bwd_prefix[row + hi] - a->tab.bwd_prefix[row + lo];
}

/* A stage's share of the pipeline's pace for one micro-batch: its compute, or the transfer of its
 * output activations downstream or of its input gradient upstream if slower (they overlap). */
static double range_cost(int s, int lo, int hi, gpointer data)
{
  const TpAnalytic *a = data;
  double t = range_compute(s, lo, hi, data);
  if (s < a->W - 1)
    t = MAX(t, link_time(a, a->tab.out_bytes[hi - 1]));
  if (s > 0)
    t = MAX(t, link_time(a, a->tab.in_bytes[lo]));
  return t;
}

static int optimizer_states(const TpAnalytic *a) { return a->optimizer_states > 1 ? a->optimizer_states : 1; }

/* A head tied to the embedding on a later stage h than the embedding's: at every update the table's
 * gradient on stage 1 and the copy's on stage h are summed, an all-reduce of two over the stages'
 * link, which both updates wait for (the executor's tie, exec/tp_reduce.h); where both stages are
 * on one device (a V's first and last chunks, more stages than devices), a sum in its memory: two
 * arrays read, one written. */
static void add_tie(const TpAnalytic *a, TpCost *cost)
{
  int h = cost->tie.stage; /* tp_analytic_cost's, of this split */
  if (h < 0)
    return;
  const TpCluster *c = a->cluster;
  gboolean one_device = a->device[0] == a->device[h] && !(c && c->any_count && c->n == 1); /* not a GPU each */
  double t = 0, bw = a->link_bandwidth, lat = a->link_latency;
  long group = (long)MAX(a->replicas, 1) * MAX(a->tensor, 1), gpn = c ? MAX(c->gpus_per_node, 1) : 1;
  long hr = a->map != TP_MAP_NONE ? tp_chunk_map_rank(a->map, a->ranks, h) : h; /* its worker */
  if (c && (group > 1 || tp_layout_nodes_differ(c)) && hr * group / gpn != 0) /* on another node than stage 1's
                                                                            worker, as tp_layout_links places them */
    bw = tp_layout_network_share(c, (int)MIN(group, gpn)), lat = c->network_latency;
  if (!one_device && bw > 0)
    t = tp_allreduce_ring(2, a->tab.tied_bytes, bw, lat);
  else if (one_device && !a->profile) {
    const TpDevice *d = &c->dev[a->device[0]];
    t = 3 * a->tab.tied_bytes / (d->bandwidth * d->efficiency);
  }
  cost->stage[0].upd += t, cost->stage[h].upd += t;
}

double tp_analytic_stage_bytes(const TpAnalytic *a, int s, int lo, int hi, int acts, int versions)
{
  (void)s;
  double params = tp_tables_params(&a->tab, lo, hi), stored = a->tab.stored_prefix[hi] - a->tab.stored_prefix[lo];
  /* weight versions, optimizer state, gradient buffer, with replicas the reduction buffer; stored
   * activations (recomputing: the stage's input per micro-batch in flight and one workspace of a
   * micro-batch's activations, as the simulator counts them; tp_fit_memory corrects a larger
   * workspace by simulation) */
  double held = params * (versions + 1 + optimizer_states(a) + (a->replicas > 1));
  if (a->recompute)
    return held + a->micro * (a->tab.in_bytes[lo] * acts + stored);
  return held + a->micro * stored * acts;
}

static gboolean range_fits(int s, int lo, int hi, gpointer data)
{
  const TpAnalytic *a = data;
  return tp_analytic_stage_bytes(a, s, lo, hi, a->acts[s], a->versions[s]) + a->reserve[s] <= tp_analytic_capacity(a, s);
}

gboolean tp_analytic_split(TpAnalytic *a, const int *counts, const int *acts, const int *versions, GError **err)
{
  int L = tp_model_n_layers(a->model);
  if (counts) {
    int sum = 0;
    for (int s = 0; s < a->W; s++) {
      a->bounds[s] = sum;
      sum += counts[s];
    }
    a->bounds[a->W] = sum;
    if (sum != L) {
      g_set_error(err, TP_ERROR, TP_ERROR_PARAM_SPLIT, "the stages get %d layers, model %s has %d", sum,
                  a->model->name, L);
      return FALSE;
    }
    return TRUE;
  }
  a->acts = acts, a->versions = versions;
  const TpRanges r = { .cost = range_cost, .floor = a->tab.times_grow ? range_compute : NULL,
                       .fits = acts && versions ? range_fits : NULL, .data = a };
  gboolean ok = tp_partition(L, a->W, &r, a->bounds, &a->pace);
  a->acts = a->versions = NULL;
  if (!ok)
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "no split of model %s into %d stages fits the devices' memory (try a smaller batch or more stages)",
                a->model->name, a->W);
  return ok;
}

double tp_analytic_capacity(const TpAnalytic *a, int s)
{
  double own = a->profile ? a->profile->memory : a->group_memory ? a->group_memory[s] : a->cluster->dev[a->device[s]].memory;
  double whole = a->cap > 0 && (own <= 0 || a->cap < own) ? a->cap : own;
  /* the stages that share a memory share it evenly: a profile's machine holds every stage (its cores
   * are no memories of their own), a cluster's device the stages placed on it */
  int sharing = 0;
  for (int t = 0; t < a->W; t++)
    sharing += a->profile || a->device[t] == a->device[s];
  return whole > 0 ? whole / MAX(sharing, 1) : whole;
}

/* The cost's source: model and cluster or profile, the batch, replicas and tensor parallelism. */
static char *cost_source(const TpAnalytic *a)
{
  const TpCluster *c = a->cluster;
  const TpProfile *p = a->profile;
  GString *t = g_string_new(NULL);
  if (p)
    g_string_printf(t, "model %s profiled in %s (%s, %s)%s%s, %ld samples per mini-batch", a->model->name, p->source,
                    p->backend, p->machine ? p->machine : "?",
                    c ? ", links of cluster " : p->links.transport ? ", links measured by MPI" : "", c ? c->name : "",
                    a->batch);
  else
    g_string_printf(t, "model %s on cluster %s, %ld samples per mini-batch", a->model->name, c->name, a->batch);
  if (a->replicas > 1) /* a replica's batch above */
    g_string_append_printf(t, " in each of %d replicas (%ld in all)", a->replicas, a->batch * a->replicas);
  if (a->tensor > 1) /* one line of the report says it */
    g_string_append_printf(t, "; its blocks tensor-parallel over %d devices of a node (simulated, not executed)",
                           a->tensor);
  return g_string_free(t, FALSE);
}

/* Stage s's costs, device and note from layers [bounds[s], bounds[s+1]). */
static void stage_cost(const TpAnalytic *a, int s, TpCost *cost)
{
  const TpCluster *c = a->cluster;
  const TpProfile *p = a->profile;
  int lo = a->bounds[s], hi = a->bounds[s + 1];
  const TpLayer *first = tp_model_layer(a->model, lo), *last = tp_model_layer(a->model, hi - 1);
  size_t row = (size_t)s * (tp_model_n_layers(a->model) + 1);
  double params = tp_tables_params(&a->tab, lo, hi), stored = a->tab.stored_prefix[hi] - a->tab.stored_prefix[lo];
  TpStageCost *sc = &cost->stage[s];
  sc->fwd = a->tab.fwd_prefix[row + hi] - a->tab.fwd_prefix[row + lo];
  sc->bwd = a->tab.bwd_prefix[row + hi] - a->tab.bwd_prefix[row + lo];
  /* a split backward's I: the layers' input-gradient shares (Megatron-LM's counts for a block;
   * a range without input-gradient FLOPs keeps the cost model's half) */
  sc->bwd_input = MIN(a->tab.inp_prefix[row + hi] - a->tab.inp_prefix[row + lo], sc->bwd);
  sc->fwd_whole = forward_whole(a, s, lo, hi);
  /* the update streams its arrays: SGD reads weights, gradient and momentum and writes two (5);
   * AdamW reads two moments and writes them (7); a profile's measured SGD update scaled alike */
  double streams = 3 + 2 * optimizer_states(a);
  if (p)
    sc->upd = tp_tables_upd(&a->tab, lo, hi) * streams / 5;
  else {
    const TpDevice *d = &c->dev[a->device[s]];
    sc->upd = streams * params / (d->bandwidth * d->efficiency);
  }
  sc->act_bytes = a->micro * a->tab.out_bytes[hi - 1];
  sc->grad_bytes = a->micro * a->tab.in_bytes[lo];
  sc->stored_bytes = a->micro * stored;
  sc->stored_w_bytes = a->micro * (a->tab.storedw_prefix[hi] - a->tab.storedw_prefix[lo]);
  sc->weight_bytes = sc->grad_buffer_bytes = params;
  sc->optimizer_bytes = params * optimizer_states(a);
  sc->device = a->device[s];
  cost->device_name[s] = p ? g_strdup_printf("%s core %d", p->backend, a->device[s] + 1)
                           : g_strdup(c->dev[a->device[s]].name);
  cost->capacity[s] = tp_analytic_capacity(a, s);
  double mparams = params / a->model->elem_bytes / 1e6;
  cost->stage_note[s] = hi - lo == 1 ? g_strdup_printf("layer %d (%s), %.4g M parameters", hi,
                                                       tp_layer_names[first->kind], mparams)
                                     : g_strdup_printf("layers %d-%d (%s .. %s), %.4g M parameters", lo + 1, hi,
                                                       tp_layer_names[first->kind], tp_layer_names[last->kind], mparams);
}

TpCost *tp_analytic_cost(const TpAnalytic *a)
{
  TpCost *cost = tp_cost_unit(a->W);
  cost->unit = FALSE;
  cost->time_unit = "s";
  cost->byte_unit = "B";
  cost->samples_per_micro = a->micro;
  cost->source = cost_source(a);
  cost->device_name = g_new0(char *, a->W + 1);
  cost->stage_note = g_new0(char *, a->W + 1);
  cost->capacity = g_new0(double, a->W);
  cost->tie = tp_tie_of(a->model, a->bounds, a->W);
  for (int s = 0; s < a->W; s++)
    stage_cost(a, s, cost);
  for (int l = 0; l < a->W - 1; l++)
    cost->link[l] = (TpLinkCost){ .latency = a->link_latency, .bandwidth = a->link_bandwidth,
                                  .eager_limit = a->link_eager_limit };
  add_tie(a, cost);
  tp_cost_update_devices(cost);
  return cost;
}
