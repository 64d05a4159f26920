/* tp_plan.c — the plan search: candidates, bounds, pruning, simulation on a thread pool (ranking,
 * the Pareto front and the explanation of the top choice: tp_plan_rank.c). */
#include "tp_plan.h"
#include "tp_memory.h"
#include "tp_layout.h"
#include "tp_costed.h"
#include "tp_fit.h"
#include "tp_error.h"
#include "tp_replay.h"
#include "tp_tie.h"

#include <math.h>
#include <string.h>

/* A plan already simulated prunes a candidate only when it beats the candidate's time bound by this
 * factor: the steady window's spacing may fall a little below the work bound at its edges. */
#define TP_PLAN_PRUNE_MARGIN 0.9
/* Rounds of simulation that correct a split under the memory limit (tp_fit_memory). */
#define TP_PLAN_FIT_ROUNDS 4
/* Candidates simulated at once, a number of its own so that what is pruned does not depend on the
 * threads: eight for each of two cores, a few for each of many. */
#define TP_PLAN_WAVE 16

static void plan_free(gpointer data)
{
  TpPlan *p = data;
  g_free(p->split);
  g_free(p->sim.peak_bytes);
  g_free(p->failure);
  g_free(p);
}

void tp_plan_result_free(TpPlanResult *res)
{
  if (!res)
    return;
  if (res->ranked)
    g_ptr_array_unref(res->ranked);
  if (res->pareto)
    g_ptr_array_unref(res->pareto);
  if (res->all)
    g_ptr_array_unref(res->all);
  g_free(res);
}

/* A copy of the pointers alone (g_ptr_array_copy takes over the free function: dropped). */
static GPtrArray *borrow(GPtrArray *a)
{
  GPtrArray *b = g_ptr_array_copy(a, NULL, NULL);
  g_ptr_array_set_free_func(b, NULL);
  return b;
}

/* ---- one candidate ------------------------------------------------------------------------------ */

typedef struct {
  const TpPlanRequest *r;
  GPtrArray *all;
} Search;

/* The analytic model of candidate p, its split not chosen yet (NULL with err).  Recomputing: the
 * split is chosen on backwards that cost their forwards again. */
static TpAnalytic *plan_analytic(const TpPlanRequest *r, const TpPlan *p, GError **err)
{
  TpAnalytic *a = tp_analytic_new_on(tp_plan_model(r, p), r->cluster, r->profile, p->W, p->N,
                                     tp_plan_replica_batch(p), TRUE, err);
  if (!a)
    return NULL;
  a->cap = r->memory_limit, a->recompute = p->recompute, a->optimizer_states = r->optimizer_states;
  tp_analytic_parallel(a, p->D, p->T);
  return a;
}

/* The cost model of candidate p (its split set), or NULL with err. */
static TpCost *candidate_cost(const TpPlanRequest *r, TpPlan *p, TpAnalytic **out_a, GError **err)
{
  TpAnalytic *a = plan_analytic(r, p, err);
  if (!a || !tp_analytic_split(a, NULL, NULL, NULL, err) || !tp_tie_check_split(a->model, a->bounds, p->W, err)) {
    tp_analytic_free(a);
    return NULL;
  }
  for (int s = 0; s < p->W; s++)
    p->split[s] = a->bounds[s + 1] - a->bounds[s];
  *out_a = a;
  TpCost *c = tp_analytic_cost(a);
  tp_plan_replicas(r, p, c);
  return c;
}

/* Per-device sums of per-stage values. */
static double device_max(const TpCost *c, const double *per_stage, int *which_stage)
{
  double *dev = g_new0(double, MAX(c->n_devices, 1));
  for (int s = 0; s < c->W; s++)
    dev[c->stage[s].device] += per_stage[s];
  double best = -1;
  for (int s = 0; s < c->W; s++)
    if (dev[c->stage[s].device] > best || (dev[c->stage[s].device] == best && per_stage[s] > per_stage[*which_stage]))
      best = dev[c->stage[s].device], *which_stage = s;
  g_free(dev);
  return best;
}

/* The bottleneck of p's split: the stage with the most work per mini-batch (compute, or the transfer
 * of its messages if slower) and the largest part of it. */
static void bottleneck(TpPlan *p, const TpCost *c)
{
  int W = p->W, N = p->N;
  double worst = -1;
  static const char *const names[] = { "forward", "backward", "update", "link" };
  for (int s = 0; s < W; s++) {
    const TpStageCost *sc = &c->stage[s];
    double link_out = s < W - 1 ? N * tp_sim_link_time(c, s, sc->act_bytes) : 0;
    double link_in = s > 0 ? N * tp_sim_link_time(c, W - 1 + s - 1, sc->grad_bytes) : 0;
    /* a bound for fused forwards too (a whole forward of forward_whole); recomputing, a backward
     * runs its forwards again, the whole one after a fused forward (tp_sim_op_time) */
    double fwd = MIN(N * sc->fwd, tp_cost_forward_whole(sc, N));
    double parts[] = { fwd, N * sc->bwd + (p->recompute ? fwd : 0), sc->upd, MAX(link_out, link_in) };
    double pace = MAX(parts[0] + parts[1] + parts[2], parts[3]);
    if (pace > worst) {
      int k = 0;
      for (int i = 1; i < 4; i++)
        k = parts[i] > parts[k] ? i : k;
      worst = pace, p->sim.bottleneck_stage = s, p->sim.bottleneck = names[k];
    }
  }
}

/* Lower bounds that hold for every split (the search may split again to fit the memory): time per
 * mini-batch from the fastest split's slowest stage, N micro-batches at its pace (recomputing: the
 * pace of forward twice and backward, as the simulator charges it); the largest device's bytes from
 * the average device's — all stages' weights, optimizer state, gradient buffer and one micro-batch
 * of activations over the devices in use (recomputing too: a stage holds at least one micro-batch's
 * activations as its workspace throughout; its stored inputs depend on the split and are left out).
 * limit: the average device's limit, so that mem_bound > limit says the devices together cannot
 * hold the plan. */
static void bound(TpPlan *p, const TpAnalytic *a, const TpCost *c)
{
  p->t_bound = p->N * a->pace;
  double mem = 0, cap = 0;
  gboolean *seen = g_new0(gboolean, MAX(c->n_devices, 1));
  for (int s = 0; s < p->W; s++) {
    const TpStageCost *sc = &c->stage[s];
    mem += sc->weight_bytes + sc->optimizer_bytes + sc->grad_buffer_bytes + sc->stored_bytes;
    cap += tp_analytic_capacity(a, s), seen[sc->device] = TRUE; /* the stages' shares: their devices whole */
  }
  int used = 0;
  for (int d = 0; d < c->n_devices; d++)
    used += seen[d];
  g_free(seen);
  p->mem_bound = mem / MAX(used, 1);
  p->sim.limit = cap / MAX(used, 1);
}

/* p split under the memory instead of its fastest split (refit_make): the schedule's activations
 * and versions per stage, corrected by simulation a few rounds (tp_fit_memory_from).  Its plan q,
 * not simulated yet, with its costs, its schedule, and what the fit's last round simulated when it
 * fit (q's simulation takes that over). */
typedef struct {
  TpAnalytic *a;
  TpCost *c;
  TpPlan q;
  TpSchedule *s;
  TpFitted fitted;
} Refit;

/* p's timeline on costs c, and its metrics: the fit's last round where that simulated p's schedule on
 * c (a chunked order excepted: its fit simulates the costed V, a candidate the unit pattern), else
 * generated and simulated here; nf1b's forwards fused where they can be, kept when that is faster (as
 * train's auto does; a plan re-simulated on another split decides again).  NULL, p failed, on error. */
static TpMetrics *timeline(TpPlan *p, const TpCost *c, const Refit *fit)
{
  GError *e = NULL;
  g_autoptr(TpSchedule) own = NULL;
  g_autoptr(TpSim) own_sim = NULL;
  const TpSchedule *s = NULL;
  const TpSim *sim = NULL;
  const TpStageMetrics *memory = NULL; /* sim's, when known */
  if (fit && fit->fitted.sim && !tp_order_chunked(p->preset->order)) {
    s = fit->fitted.order ? fit->fitted.order : fit->s, sim = fit->fitted.sim, memory = fit->fitted.memory;
  } else {
    TpPrepared prep = { .untimed = TRUE }; /* simulated on costs */
    s = own = tp_schedule_generate_costed_rc(p->preset->order, p->preset->policy, p->W, p->N,
                                             tp_default_mini_batches(p->W), p->recompute, c, &prep, &e);
    sim = own_sim = s ? tp_sim_run_prepared(s, c, &prep, &e) : NULL;
    tp_prepared_clear(&prep);
  }
  if (!sim) {
    p->status = TP_PLAN_FAILED;
    p->failure = g_strdup(e->message);
    g_error_free(e);
    return NULL;
  }
  int nf = 0;
  g_autoptr(TpSchedule) f = tp_schedule_fuse_forwards(s, &nf, NULL);
  g_autoptr(TpSim) fsim = f ? tp_sim_run(f, c, NULL) : NULL;
  p->fused = fsim && tp_metrics_time_per_minibatch(fsim) < tp_metrics_time_per_minibatch(sim) * (1 - 1e-6);
  return p->fused ? tp_metrics_compute(fsim) : tp_metrics_compute_with(sim, memory);
}

/* Whether p's peaks are over the limit on any memory: the stages on it together against their shares
 * of it together (a profile's machine is one memory for all its cores); p->sim.limit, the memory of
 * the peak's stage, all its shares. */
static gboolean over_memory(TpPlan *p, const TpCost *c, const TpAnalytic *a)
{
  gboolean over = FALSE;
  double *need = g_new0(double, MAX(c->n_devices, 1)), *cap = g_new0(double, MAX(c->n_devices, 1));
  for (int st = 0; st < p->W; st++) {
    int mem = a->profile ? 0 : c->stage[st].device;
    need[mem] += p->sim.peak_bytes[st], cap[mem] += tp_analytic_capacity(a, st);
  }
  for (int d = 0; d < MAX(c->n_devices, 1); d++)
    over = over || need[d] > cap[d];
  p->sim.limit = cap[a->profile ? 0 : c->stage[p->sim.peak_stage].device];
  g_free(need), g_free(cap);
  return over;
}

static void simulate(TpPlan *p, const TpCost *c, const TpAnalytic *a, const Refit *fit)
{
  bottleneck(p, c);
  g_autoptr(TpMetrics) m = timeline(p, c, fit);
  if (!m)
    return;
  p->simulated = TRUE;
  p->sim.t_minibatch = m->t_minibatch;
  p->sim.samples_per_second = m->throughput_steady;
  p->sim.bubble = m->bubble_steady;
  p->sim.v_steady = m->ver.v_steady;
  p->sim.max_mismatch = 0;
  for (int st = 0; st < p->W; st++) {
    p->sim.peak_bytes[st] = m->stage[st].peak_bytes;
    p->sim.max_mismatch = MAX(p->sim.max_mismatch, m->stage[st].max_version_mismatch);
  }
  int ps = 0;
  p->sim.peak = device_max(c, p->sim.peak_bytes, &ps);
  p->sim.peak_stage = ps;
  int comp = 0;
  for (int k = 1; k < TP_N_MEM; k++)
    if (m->stage[ps].at_peak[k] > m->stage[ps].at_peak[comp])
      comp = k;
  p->sim.peak_component = comp;
  p->status = over_memory(p, c, a) ? TP_PLAN_OVER_MEMORY : TP_PLAN_FITS;
}

/* Candidate p's links and replicas on a cost of the analytic model. */
typedef struct {
  const TpPlanRequest *r;
  const TpPlan *p;
} PlanDress;

static void plan_dress(TpCost *c, gconstpointer data)
{
  const PlanDress *d = data;
  tp_plan_replicas(d->r, d->p, c);
}

static gboolean refit_make(const TpPlanRequest *r, TpPlanActs *acts, const TpPlan *p, Refit *f)
{
  GError *e = NULL;
  const int *peaks = NULL; /* its unit-slot activations, then versions, per stage */
  g_autoptr(TpSchedule) s = tp_plan_schedule_peaks(acts, p, &peaks, &e);
  TpAnalytic *a = s ? plan_analytic(r, p, &e) : NULL;
  PlanDress pd = { r, p };
  const TpCostDress dress = { plan_dress, &pd };
  TpFitted fitted = { 0 };
  TpCost *c = a ? tp_fit_memory_from(a, s, peaks, peaks + p->W, TRUE, TP_PLAN_FIT_ROUNDS, &dress, &fitted, &e) : NULL;
  if (!c) {
    g_clear_error(&e);
    tp_analytic_free(a);
    return FALSE;
  }
  *f = (Refit){ .a = a, .c = c, .q = *p, .s = g_steal_pointer(&s), .fitted = fitted };
  f->q.split = g_new(int, p->W), f->q.sim.peak_bytes = g_new(double, p->W), f->q.failure = NULL;
  f->q.simulated = FALSE, f->q.status = TP_PLAN_OVER_MEMORY;
  for (int st = 0; st < p->W; st++)
    f->q.split[st] = a->bounds[st + 1] - a->bounds[st];
  return TRUE;
}

/* p takes q when q fits, or when q brings the peak down (both simulated, over the limit); f freed. */
static void refit_keep(TpPlan *p, Refit *f)
{
  TpPlan *q = &f->q;
  if (q->simulated && (q->status == TP_PLAN_FITS || (q->status == TP_PLAN_OVER_MEMORY && q->sim.peak < p->sim.peak))) {
    TpPlan old = *p;
    *p = *q;
    *q = old;
  }
  g_free(q->split), g_free(q->sim.peak_bytes), g_free(q->failure);
  tp_fitted_clear(&f->fitted);
  tp_schedule_free(f->s);
  tp_cost_free(f->c);
  tp_analytic_free(f->a);
}

/* What the pool's threads do to each candidate (evaluate): bound it, or simulate it. */
typedef struct {
  const TpPlanRequest *r;
  gboolean simulate;
  gboolean per_sample; /* several batches: rank by time per sample */
  TpPlanActs *acts;    /* the activations each order holds */
  gboolean exact;      /* simulate every split tried, bounds or not (every plan's details) */
} Job;

/* p simulated, and split again under the memory when over the limit (refit_make), keeping the split
 * under the memory when it fits or brings the peak down.  A split that a bound shows over the limit
 * (tp_plan_split_over) is simulated only where its details could matter: p fits as it would have, and
 * a p over the limit without them is `pending` (they matter only when nothing fits). */
static void settle(const Job *j, TpPlan *p, const TpCost *c, const TpAnalytic *a)
{
  if (j->exact || !tp_plan_split_over(j->acts, p, a, c)) {
    simulate(p, c, a, NULL);
    if (p->status != TP_PLAN_OVER_MEMORY)
      return;
  }
  Refit f;
  if (!refit_make(j->r, j->acts, p, &f)) { /* no split fits: the fastest one stays, over the limit */
    if (!p->simulated)
      simulate(p, c, a, NULL);
    return;
  }
  if (j->exact || !tp_plan_split_over(j->acts, &f.q, f.a, f.c))
    simulate(&f.q, f.c, f.a, &f);
  gboolean tried = p->simulated || f.q.simulated;
  if (f.q.simulated && f.q.status == TP_PLAN_FAILED && !p->simulated)
    simulate(p, c, a, NULL); /* the refused split is not kept: p as simulated */
  else if (!(f.q.simulated && f.q.status == TP_PLAN_FITS) && !(p->simulated && f.q.simulated))
    p->status = TP_PLAN_OVER_MEMORY, p->pending = TRUE;
  refit_keep(p, &f);
  p->tried = tried || p->simulated;
}

/* Build, bound and (unless pruned) simulate: the pool's work item. */
static void evaluate(gpointer data, gpointer user)
{
  TpPlan *p = data;
  const Job *j = user;
  GError *e = NULL;
  TpAnalytic *a = NULL;
  g_autoptr(TpCost) c = candidate_cost(j->r, p, &a, &e);
  if (!c) {
    p->status = TP_PLAN_FAILED;
    p->failure = g_strdup(e->message);
    g_error_free(e);
    return;
  }
  double scale = j->per_sample ? 1.0 / (double)p->batch : 1.0;
  if (!j->simulate) {
    bound(p, a, c);
    p->rank_bound = p->t_bound * scale;
    p->may_fit = j->r->no_prune || tp_plan_may_fit(j->acts, p, a, c);
  } else {
    settle(j, p, c, a);
    p->rank_time = p->sim.t_minibatch * scale;
  }
  tp_analytic_free(a);
}

/* Workers taking items in turn: this thread and up to threads − 1 more (fewer where a thread cannot
 * start: nothing waits on one that never ran). */
typedef struct {
  GPtrArray *items;
  const Job *job;
  gint next;
} Pool;

static gpointer pool_worker(gpointer data)
{
  Pool *w = data;
  for (guint i; (i = (guint)g_atomic_int_add(&w->next, 1)) < w->items->len;)
    evaluate(w->items->pdata[i], (gpointer)w->job);
  return NULL;
}

static void run_pool(GPtrArray *items, const Job *job, int threads)
{
  /* under an address-space limit every thread's stack and heap count there: one thread */
  int n = tp_memory_address_limited() ? 1 : (int)MIN((guint)MAX(threads, 1), MAX(items->len, 1));
  Pool w = { .items = items, .job = job };
  GThread **t = g_new0(GThread *, n);
  for (int i = 1; i < n; i++)
    t[i] = g_thread_try_new("plan", pool_worker, &w, NULL);
  pool_worker(&w);
  for (int i = 1; i < n; i++)
    if (t[i])
      g_thread_join(t[i]);
  g_free(t);
}

static int compare_bound(gconstpointer a, gconstpointer b)
{
  const TpPlan *x = *(const TpPlan *const *)a, *y = *(const TpPlan *const *)b;
  if (x->rank_bound != y->rank_bound)
    return x->rank_bound < y->rank_bound ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

/* ---- the search --------------------------------------------------------------------------------- */

/* Nothing fits: the candidates over the limit by a bound (over_bound) and those pending are simulated
 * in full by job, so that the smallest peak named is one found, not a bound. */
static void simulate_over(GPtrArray *all, GPtrArray *over_bound, const Job *job, int threads)
{
  for (guint i = 0; i < all->len; i++) {
    TpPlan *p = all->pdata[i];
    if (p->pending)
      p->pending = FALSE, g_ptr_array_add(over_bound, p);
  }
  run_pool(over_bound, job, threads);
}

/* The b-th mini-batch size of the request. */
static long batch_of(const TpPlanRequest *r, int b)
{
  return r->n_batches > 0 ? r->batches[b] : r->batch;
}

/* Every applicable candidate, in enumeration order: batch, preset, W, N, recompute, into res->all;
 * the others counted. */
static void candidates(const TpPlanRequest *r, TpPlanResult *res)
{
  GPtrArray *all = res->all;
  int inapplicable = 0, L = tp_model_n_layers(r->model);
  long long plane = tp_model_least_norm_plane(r->model);
  /* a head tied to the embedding beyond the first layer is on another stage at any W > 1 */
  gboolean tied = tp_tie_stage(r->model, (const int[]){ 0, 1, L }, 2) >= 0;
  int *pD = g_new(int, TP_PLAN_MAX_PAIRS), *pT = g_new(int, TP_PLAN_MAX_PAIRS);
  for (int b = 0; b < MAX(r->n_batches, 1); b++) {
    long B = batch_of(r, b);
    int pairs = tp_plan_pairs(r, B, pD, pT);
    for (int k = 0; k < r->n_presets; k++)
      for (int q = 0; q < pairs; q++)
      for (int W = r->w0; W <= MIN(tp_plan_max_width(r, pD[q], pT[q]), L); W++)
        for (int N = r->n0; N <= r->n1 && N <= B / pD[q]; N++) {
          if ((B / pD[q]) % N)
            continue;
          for (int rc = r->recompute == TP_PLAN_RECOMPUTE_YES; rc <= (r->recompute != TP_PLAN_RECOMPUTE_NO); rc++) {
            const TpPreset *ps = r->presets[k];
            /* 1f1b-async runs whole mini-batches: N is no dimension of it, only N = 1 is a candidate */
            if (ps->order == TP_ORDER_1F1B_ASYNC && N != 1)
              continue;
            /* a split backward's W needs the forward's saved state: the executor does not recompute it */
            if (rc && tp_order_split(ps->order)) {
              inapplicable++;
              continue;
            }
            /* a batchnorm that would normalise one value per channel (train refuses it) */
            if (!tp_pair_check(ps->order, ps->policy, W, N, NULL) ||
                !tp_size_check(W, N, tp_default_mini_batches(W), NULL) || (plane && (B / pD[q] / N) * plane < 2)) {
              inapplicable++;
              continue;
            }
            /* train refuses a head tied across stages on the order (tp_tie.h) */
            if (tied && W > 1 && !tp_order_ties(ps->order)) {
              res->n_tied++;
              continue;
            }
            TpPlan *p = g_new0(TpPlan, 1);
            *p = (TpPlan){ .preset = ps, .batch = B, .W = W, .N = N, .D = pD[q], .T = pT[q], .recompute = rc,
                           .split = g_new0(int, W), .sim.peak_bytes = g_new0(double, W), .index = (int)all->len };
            g_ptr_array_add(all, p);
          }
        }
  }
  g_free(pD), g_free(pT);
  res->n_inapplicable = inapplicable;
}

/* One candidate of a wave, by its bounds: over the memory limit, dominated by a fitting plan of an
 * earlier wave, over the limit on every split (tp_plan_may_fit), or to simulate (into batch). */
static void triage(const TpPlanRequest *r, TpPlan *p, const GPtrArray *fitting, GPtrArray *over_bound, GPtrArray *batch)
{
  if (p->status == TP_PLAN_FAILED)
    return;
  if (!r->no_prune && p->mem_bound > p->sim.limit) {
    p->status = TP_PLAN_OVER_MEMORY;
    g_ptr_array_add(over_bound, p);
    return;
  }
  gboolean dominated = FALSE;
  for (guint k = 0; !r->no_prune && k < fitting->len && !dominated; k++) {
    const TpPlan *f = fitting->pdata[k];
    dominated = f->rank_time <= TP_PLAN_PRUNE_MARGIN * p->rank_bound && f->sim.peak <= p->mem_bound;
  }
  if (dominated)
    p->status = TP_PLAN_DOMINATED;
  else if (!p->may_fit) { /* no split of it fits: over the limit, like one simulated */
    p->status = TP_PLAN_OVER_MEMORY;
    g_ptr_array_add(over_bound, p);
  } else
    g_ptr_array_add(batch, p);
}

/* The result's counts, and the smallest simulated peak over the limit (the first in enumeration
 * order among equals). */
static void tally(TpPlanResult *res)
{
  for (guint i = 0; i < res->all->len; i++) {
    const TpPlan *p = res->all->pdata[i];
    res->n_simulated += p->simulated || p->tried;
    res->n_over_memory += p->status == TP_PLAN_OVER_MEMORY;
    res->n_dominated += p->status == TP_PLAN_DOMINATED;
    res->n_failed += p->status == TP_PLAN_FAILED;
    if (p->simulated && p->status == TP_PLAN_OVER_MEMORY &&
        (!res->smallest || p->sim.peak < res->smallest->sim.peak ||
         (p->sim.peak == res->smallest->sim.peak && p->index < res->smallest->index)))
      res->smallest = p;
  }
}

/* Replicas and tensor ranks asked for (without --devices): every batch splits over the replicas, and
 * the cluster has GPUs for them at the fewest stages. */
static gboolean replicas_check(const TpPlanRequest *r, GError **err)
{
  int D = MAX(r->data_parallel, 1), T = MAX(r->tensor_parallel, 1);
  if (r->devices > 0 || D * T == 1)
    return TRUE;
  for (int b = 0; b < MAX(r->n_batches, 1); b++)
    if (batch_of(r, b) % D) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--data-parallel %d: the batch of %ld samples does not split "
                  "evenly over %d replicas", D, batch_of(r, b), D);
      return FALSE;
    }
  return !r->cluster || tp_layout_check(r->cluster, D, MAX(r->w0, 1), T, err);
}

/* Why the search has no candidate (res->all empty): one line into err. */
static void no_candidate(const TpPlanRequest *r, const TpPlanResult *res, GError **err)
{
  gboolean all_split = r->n_presets > 0;
  for (int k = 0; k < r->n_presets; k++)
    all_split = all_split && tp_order_split(r->presets[k]->order);
  if (all_split && r->recompute == TP_PLAN_RECOMPUTE_YES) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "no candidate: every preset asked for splits its backwards into I and "
                "W, and a split backward is not recomputed (its W needs the forward's saved state); --recompute no "
                "or both");
    return;
  }
  g_autofree char *on = r->devices > 0 ? g_strdup_printf(" on at most %d devices", r->devices) : g_strdup("");
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "no candidate: no W in %d-%d and N in %d-%d dividing the batch%s of %ld "
              "suits any of the presets%s%s", r->w0, r->w1, r->n0, r->n1, r->n_batches > 1 ? "es" : "",
              batch_of(r, 0), on, res->n_tied ? " (the model's tied head trains on another stage than its "
              "embedding only under " TP_TIE_PRESETS ")"
              : tp_model_least_norm_plane(r->model) ? " (a micro-batch must give each batchnorm more than one "
              "value per channel)" : "");
}

/* Whether the candidates can be searched: their exact splits (O(W·L²) each) within minutes on the
 * threads, and a profile with every micro-batch size they need; else one line, up front. */
static gboolean searchable(const TpPlanRequest *r, const TpPlanResult *res, int threads, GError **err)
{
  double L = tp_model_n_layers(r->model), work = 0;
  for (guint i = 0; i < res->all->len; i++)
    work += ((const TpPlan *)res->all->pdata[i])->W * L * L;
  if (work / threads > TP_PLAN_MAX_SPLIT_WORK) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "the search splits %d layers %d times (about %.2g steps, more than "
                "%.0g on each of %d threads): narrow -w, -n or --presets", (int)L, res->n_candidates, work,
                TP_PLAN_MAX_SPLIT_WORK, threads);
    return FALSE;
  }
  for (guint i = 0; r->profile && i < res->all->len; i++) {
    const TpPlan *p = res->all->pdata[i];
    if (tp_profile_size_index(r->profile, (int)(p->batch / p->N)) < 0) {
      g_autofree char *have = tp_profile_sizes_text(r->profile);
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: no micro-batch of %ld samples (batch %ld / N=%d) was profiled "
                  "(it has %s); profile micro-batches of %ld samples, or narrow the micro-batch counts",
                  r->profile->source, p->batch / p->N, p->batch, p->N, have, p->batch / p->N);
      return FALSE;
    }
  }
  return TRUE;
}

/* Bounds of every candidate, then simulation in waves of increasing time bound, each of TP_PLAN_WAVE
 * candidates to simulate (those pruned on the way do not count): a candidate is pruned when its
 * memory bound exceeds the limit, or when a fitting plan of an earlier wave is faster than its time
 * bound and smaller than its memory bound (it cannot rank above that plan nor lie on the front), or
 * when no split of it may fit (tp_plan_may_fit).  Waves of a fixed size, not a shared running best,
 * keep the outcome independent of the threads and their timing.  Nothing fits: every candidate over
 * the limit simulated in full. */
static void search(const TpPlanRequest *r, TpPlanResult *res, int threads)
{
  gboolean per_sample = FALSE;
  for (int b = 1; b < r->n_batches; b++)
    per_sample = per_sample || r->batches[b] != r->batches[0];
  g_autoptr(TpPlanActs) acts = tp_plan_acts_new();
  Job bjob = { .r = r, .per_sample = per_sample, .acts = acts },
      sjob = { .r = r, .simulate = TRUE, .per_sample = per_sample, .acts = acts, .exact = r->no_prune };
  run_pool(res->all, &bjob, threads);
  g_autoptr(GPtrArray) order = borrow(res->all);
  g_ptr_array_sort(order, compare_bound);
  g_autoptr(GPtrArray) fitting = g_ptr_array_new();
  g_autoptr(GPtrArray) over_bound = g_ptr_array_new();
  for (guint i = 0; i < order->len;) {
    g_autoptr(GPtrArray) batch = g_ptr_array_new();
    for (; i < order->len && batch->len < TP_PLAN_WAVE; i++)
      triage(r, order->pdata[i], fitting, over_bound, batch);
    run_pool(batch, &sjob, threads);
    for (guint j = 0; j < batch->len; j++)
      if (((TpPlan *)batch->pdata[j])->status == TP_PLAN_FITS)
        g_ptr_array_add(fitting, batch->pdata[j]);
  }
  res->ranked = tp_plan_ranked(fitting);
  if (!res->ranked->len) {
    Job exact = { .r = r, .simulate = TRUE, .per_sample = per_sample, .acts = acts, .exact = TRUE };
    simulate_over(res->all, over_bound, &exact, threads);
  }
}

TpPlanResult *tp_plan_search(const TpPlanRequest *r, GError **err)
{
  if (r->profile && !tp_profile_check_model(r->profile, r->model, err))
    return NULL;
  /* the least a search holds before its candidates' simulations, each checked on its own: the table
   * of candidates and the heap the program works in */
  if (!tp_memory_check("planning", 0, 0, 0, 4LL << 20, err))
    return NULL;
  if (!replicas_check(r, err))
    return NULL;
  g_autoptr(TpPlanResult) res = g_new0(TpPlanResult, 1);
  res->all = g_ptr_array_new_with_free_func(plan_free);
  candidates(r, res);
  res->n_candidates = (int)res->all->len;
  if (!res->all->len) {
    no_candidate(r, res, err);
    return NULL;
  }
  int threads = r->threads > 0 ? r->threads : (int)g_get_num_processors();
  if (!searchable(r, res, threads, err))
    return NULL;
  search(r, res, threads);
  tally(res);
  res->pareto = tp_plan_pareto(res->ranked);
  return g_steal_pointer(&res);
}
