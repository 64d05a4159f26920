/* tp_train_plan.c — the trainer's second phase, between the set-up (tp_trainer.c) and the run
 * (tp_train_run.c): every stage profiled on the run's first mini-batch, the cost model, the
 * fused-forward decision, the run's schedules fixed, and the prediction — all before any training.
 * The schedules' generation, which a run cut by a stop needs again for the rest of its segment. */
#include "config.h"
#include "tp_train.h"
#include "tp_train_priv.h"
#include "tp_costed.h"
#include "tp_error.h"
#include "tp_format.h"

#include <string.h>

/* Every process profiles its own stages; the profiles (and the first process's core count, for the
 * device map) are gathered onto every process, so each plans from the same numbers.  The links
 * between processes are measured here, before training. */
static gboolean share_profiles(Train *t, GError **err)
{
  typedef struct {
    TpStageProfile p;
    gint64 cores;
  } Part;
  int lo, hi, n = tp_group_size(t->group);
  tp_group_stages(t->group, t->W, &lo, &hi);
  size_t per = (size_t)(hi - lo);
  g_autofree Part *mine = g_new(Part, per), *all = g_new(Part, per * (size_t)n);
  for (int s = lo; s < hi; s++)
    mine[s - lo] = (Part){ .p = t->pred.prof[s], .cores = t->dev.cores };
  if (!tp_group_gather(t->group, -1, mine, per * sizeof(Part), all, err))
    return FALSE;
  for (size_t i = 0; i < per * (size_t)n && i < (size_t)t->W; i++) /* in rank order: stage order */
    t->pred.prof[i] = all[i].p;
  t->dev.cores = (int)all[0].cores;
  return tp_group_measure_links(t->group, t->W, &t->res.links, err);
}

static void links_to_cost(Train *t)
{
  g_autofree double *lat = g_new(double, t->W), *bw = g_new(double, t->W), *eager = g_new(double, t->W);
  for (int l = 0; l < t->W - 1; l++)
    lat[l] = t->res.links[l].latency_s, bw[l] = t->res.links[l].bandwidth_Bps, eager[l] = t->res.links[l].eager_limit;
  tp_predict_set_links(t->cost, lat, bw, eager);
}

/* D replicas: each stage's all-reduce in the cost model takes the time of the run's reduction timed
 * before training (t->res.allreduce): the ring's bandwidth set so that it does, no latency.  Its
 * memory stays what the executor measures (the weight stores): the simulator's reduction buffer
 * is taken out again. */
static void allreduce_to_cost(Train *t)
{
  const int D = t->dp.D;
  tp_cost_data_parallel(t->cost, D, FALSE);
  TpDataParallel *dp = t->cost->dp;
  for (int s = 0; s < t->W; s++) {
    double sec = t->res.allreduce[s];
    t->cost->stage[s].grad_buffer_bytes -= dp->bytes[s];
    dp->latency[s] = 0;
    dp->bandwidth[s] = dp->bytes[s] > 0 && sec > 0 ? 2.0 * (D - 1) / D * dp->bytes[s] / sec : 0; /* 0: free */
  }
}

/* The schedule every process is about to run is the first one's (a digest compared across them). */
static gboolean same_schedule(Train *t, GError **err)
{
  g_autofree char *hex = tp_schedule_sha256(t->s); /* its header names the timeline it was fixed on */
  char mine[64];
  memcpy(mine, hex, sizeof mine);
  int size = tp_group_size(t->group);
  g_autofree char *all = g_malloc((size_t)size * sizeof mine);
  if (!tp_group_gather(t->group, -1, mine, sizeof mine, all, err))
    return FALSE;
  for (int r = 1; r < size; r++)
    if (memcmp(all + (size_t)r * sizeof mine, all, sizeof mine) != 0) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d (rank %d): rank %d (stage %d) fixed another schedule than "
                  "rank 0", t->rank + 1, t->rank, r, r + 1);
      return FALSE;
    }
  return TRUE;
}

/* Steady time per mini-batch of s on c (the simulator's), or -1 when it does not run. */
static double simulated_time(const TpSchedule *s, const TpCost *c)
{
  TpSim *sim = tp_sim_run(s, c, NULL); /* no chunks: fused schedules have none */
  if (!sim)
    return -1;
  TpMetrics *m = tp_metrics_compute(sim);
  double tm = m->t_minibatch;
  tp_metrics_free(m);
  tp_sim_free(sim);
  return tm;
}

/* s, or its copy with fused forwards (then s is freed): as cfg.fuse says, the choice made on the
 * first schedule (on cost model c) and kept for the run's others. */
static TpSchedule *fuse(Train *t, TpSchedule *s, const TpCost *c, GError **err)
{
  TpTrainFuse *f = &t->fuse;
  if (f->decided && !f->on)
    return s;
  int n = 0;
  TpSchedule *fused = tp_schedule_fuse_forwards(s, &n, err);
  if (!fused && !(err && *err) && !f->decided && t->cfg.sched.fuse == TP_FUSE_ON)
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--fuse-forwards on: " TP_FUSE_NOTHING);
  if (!fused) {
    if (err && *err) {
      tp_schedule_free(s);
      return NULL;
    }
    if (!f->decided)
      f->decided = TRUE, f->on = FALSE;
    return s;
  }
  if (!f->decided) {
    f->decided = TRUE, f->mini_batches = n;
    f->on = t->cfg.sched.fuse == TP_FUSE_ON; /* OFF: known to be there, for the report */
    /* auto on unit slots does not fuse: the schedule, and so the run's arithmetic to the last bit,
     * stays independent of this machine's speed */
    if (t->cfg.sched.fuse == TP_FUSE_AUTO && !t->cfg.sched.slots) { /* faster by more than the simulation's rounding */
      f->t_fused = simulated_time(fused, c), f->t_plain = simulated_time(s, c);
      f->on = f->t_fused > 0 && f->t_plain > 0 && f->t_fused < f->t_plain * (1 - 1e-6);
    }
  }
  if (!f->on) {
    tp_schedule_free(fused);
    return s;
  }
  tp_schedule_free(s);
  return fused;
}

TpSchedule *tp_train_generate_order(Train *t, int K, const TpCost *c, GError **err)
{
  const TpTrainConfig *cfg = &t->cfg;
  const TpPreset *p = cfg->sched.preset;
  const double limit = cfg->sched.act_limit; /* zb-auto's and zb-v's */
  const gboolean zbv = p->order == TP_ORDER_ZB_V, slots = cfg->sched.slots || !c;
  TpSchedule *s = limit > 0 ? tp_schedule_generate_limited(p->order, p->policy, t->W / t->V, t->N, K, limit, NULL, err)
                  : t->V > 1 ? tp_schedule_generate_chunked(p->order, p->policy, t->W / t->V, t->V, t->N, K, NULL, err)
                  : slots ? tp_schedule_generate(p->order, p->policy, t->W, t->N, K, err)
                          : tp_schedule_generate_costed_rc(p->order, p->policy, t->W, t->N, K, cfg->sched.recompute, c, NULL, err);
  if (s && (limit > 0 || zbv) && !slots) { /* zb-auto and zb-v built on the costs */
    TpSchedule *costed = tp_schedule_costed_like(s, c, err);
    tp_schedule_free(s);
    s = costed;
  }
  if (!s)
    return NULL;
  s->recompute = cfg->sched.recompute;
  if (cfg->sched.has_sig)
    s->sig = cfg->sched.sig;
  return s;
}

TpSchedule *tp_train_generate(Train *t, int K, const TpCost *c, GError **err)
{
  TpSchedule *s = tp_train_generate_order(t, K, c, err);
  return !s || t->V > 1 ? s : fuse(t, s, c, err);
}

/* Profile the stages on mini-batch first_idx, build the cost model, fix the schedules, predict. */
static gboolean plan_on(Train *t, const int *first_idx, GError **err)
{
  const TpTrainConfig *cfg = &t->cfg;
  const TpPreset *p = cfg->sched.preset;
  gboolean whole = t->s ? tp_stage_ops(t->s, 0)[0].micro == TP_WHOLE : p->order == TP_ORDER_1F1B_ASYNC;
  /* nf1b: forwards per micro-batch, one backward of the whole mini-batch (run as one where its
   * micro-batches read one version) */
  gboolean whole_bwd = whole || (t->s ? t->s->order : p->order) == TP_ORDER_NF1B;
  t->pred.prof = g_new0(TpStageProfile, t->W);
  if (!tp_runtime_profile(t->rt, first_idx, cfg->reps, whole, whole_bwd, t->pred.prof, err) || !share_profiles(t, err) ||
      !tp_train_time_allreduce(t, err))
    return FALSE;
  /* where every stage has a device (core) of its own, time the operations as the run will see them:
   * in a short pipelined run of the preset in the run's kind of order (fixed on the costs of the
   * stages alone, or on slots), the first mini-batch warming up and reps more timed, its updates
   * discarded; with replicas in this process, every replica at once, its updates on the replicas'
   * mean (their memory in the times; the reduction, timed apart, taken out of the updates).  With
   * more stages than cores the simulator shares the devices itself, so the stages are timed alone,
   * as they are when each process runs one stage. */
  int devices = tp_train_prediction_devices(t);
  if (!t->s && tp_group_size(t->group) == 1 && t->W / t->V <= devices) { /* a worker's chunks take turns */
    int kw = 2 * t->W + cfg->reps + 1;
    g_autoptr(TpCost) alone = tp_predict_cost(t->rt, t->pred.prof, t->N, tp_train_replica_batch(t), devices);
    g_autoptr(TpSchedule) warm = tp_train_generate(t, kw, alone, err); /* timed as the run will do it */
    if (!warm || !tp_train_profile_replicas(t, warm, first_idx, err))
      return FALSE;
    for (int st = 0; t->res.allreduce && st < t->W; st++) { /* updates that waited for the reduction, which */
      double *u = &t->pred.prof[st].upd;                      /* the cost model's all-reduce carries */
      *u = MAX(*u - t->res.allreduce[st], 0.1 * *u);
    }
  }
  t->cost = tp_predict_cost(t->rt, t->pred.prof, t->N, tp_train_replica_batch(t), devices);
  if (t->res.links)
    links_to_cost(t);
  if (t->res.allreduce)
    allreduce_to_cost(t);
  if (!t->s) {
    /* with checkpoints every M mini-batches, a run is cut into segments of M, each a whole schedule */
    int seg = tp_train_segment_length(t), tail = cfg->ck.every ? t->K % cfg->ck.every : 0;
    TpSchedule **to[] = { &t->s, &t->pos.s_tail };
    int ks[] = { seg, tail };
    for (int i = 0; i < 2; i++) {
      if (!ks[i])
        continue;
      if (!(*to[i] = tp_train_generate(t, ks[i], t->cost, err)))
        return FALSE;
    }
  }
  if (t->fuse.decided) { /* what the report counts: the run's plan, not the warm-up's */
    int n = tp_schedule_fused_forwards(t->s);
    if (!t->fuse.on)
      tp_schedule_free(tp_schedule_fuse_forwards(t->s, &n, NULL));
    t->fuse.mini_batches = n;
  }
  if (!same_schedule(t, err))
    return FALSE;
  tp_cost_place_chunks(t->cost, t->s); /* a worker's chunks on its device, the links between them free */
  if (!(t->pred.sim = tp_sim_run(t->s, t->cost, err)))
    return FALSE;
  t->pred.m = tp_metrics_compute(t->pred.sim);
  tp_comparison_init(&t->res.cmp, t->pred.m);
  t->res.cmp_ready = TRUE;
  return TRUE;
}

gboolean tp_train_plan(Train *t, GError **err)
{
  /* the run's first mini-batch (a resumed run's next), read ahead: the data goes on from here */
  TpDataPos at = tp_batcher_pos(t->batcher);
  g_autofree int *first = g_memdup2(tp_batcher_next(t->batcher), sizeof(int) * (size_t)t->cfg.batch);
  return tp_batcher_seek(t->batcher, at, err) && plan_on(t, first, err) && tp_group_barrier(t->group, err);
}
