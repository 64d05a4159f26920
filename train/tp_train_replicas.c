/* tp_train_replicas.c — data parallelism: a segment's schedule run by every replica of the pipeline at
 * once, each on its share of every mini-batch's samples, their updates on the mean of their gradients
 * (exec/tp_reduce.h).  In one process the replicas are threads, their losses added up here and their
 * weights compared; over a group of ranks each rank runs its stage of its replica (the group gathers). */
#include "config.h"
#include "tp_train.h"
#include "tp_train_priv.h"
#include "tp_error.h"

#include <string.h>

typedef struct {
  TpRuntime *rt;
  const TpSchedule *s;
  const int **idx;
  int first_mb;
  gint64 origin;
  TpProgress *prog;
  TpProgress own;   /* the other replicas': the cut's question, no ticks */
  TpRunResult r;
} Replica;

static gboolean replica_run(gpointer part, GError **err)
{
  Replica *x = part;
  return tp_runtime_run(x->rt, x->s, x->idx, x->first_mb, x->origin, x->prog, &x->r, err);
}

/* One replica's share of a job: what fn does with part, and how it ended. */
typedef struct {
  gboolean (*fn)(gpointer part, GError **err);
  gpointer part;
  TpReduce *reduce; /* aborted when the part fails: the other replicas stop at their next update */
  GError *err;
  gboolean ok;
} Job;

static gpointer job_main(gpointer data)
{
  Job *j = data;
  j->ok = j->fn(j->part, &j->err);
  if (!j->ok && j->reduce)
    j->reduce->iface->abort(j->reduce, j->err->message);
  return NULL;
}

/* jobs[1..D-1] on threads of their own (named name-k), jobs[0] here; the first failure in replica
 * order into err (the others name it). */
static gboolean run_jobs(Job *jobs, int D, const char *name, GError **err)
{
  GThread **th = g_new0(GThread *, D);
  for (int k = 1; k < D; k++) {
    g_autofree char *n = g_strdup_printf("%s-%d", name, k + 1);
    if (!(th[k] = g_thread_try_new(n, job_main, &jobs[k], &jobs[k].err))) {
      g_prefix_error(&jobs[k].err, "replica %d: cannot start its thread: ", k + 1);
      if (jobs[k].reduce)
        jobs[k].reduce->iface->abort(jobs[k].reduce, jobs[k].err->message);
    }
  }
  job_main(&jobs[0]);
  gboolean ok = TRUE;
  for (int k = 0; k < D; k++) {
    if (k && th[k])
      g_thread_join(th[k]);
    if (!jobs[k].ok && ok)
      g_propagate_error(err, g_steal_pointer(&jobs[k].err)), ok = FALSE;
    g_clear_error(&jobs[k].err);
  }
  g_free(th);
  return ok;
}

/* Whether every replica's weights and buffers equal replica 0's, bit for bit. */
static gboolean replicas_identical(const Train *t)
{
  for (int r = 1; r < t->dp.D; r++)
    for (int st = 0; st < t->W; st++) {
      size_t nb = tp_runtime_n_buffers(t->rt, st);
      g_autofree float *a = g_new(float, MAX(nb, 1)), *b = g_new(float, MAX(nb, 1));
      if (memcmp(tp_runtime_weights(t->dp.rt[r], st), tp_runtime_weights(t->rt, st),
                 tp_runtime_n_params(t->rt, st) * sizeof(float)) != 0 ||
          (nb && (!tp_runtime_get_buffers(t->dp.rt[r], st, a, NULL) || !tp_runtime_get_buffers(t->rt, st, b, NULL) ||
                  memcmp(a, b, nb * sizeof(float)) != 0)))
        return FALSE;
    }
  return TRUE;
}

/* Replica k's rows: each mini-batch's samples k·B/D .. (k+1)·B/D − 1. */
static void start(Train *t, Replica *x, int k, const TpSchedule *s, int *const *idx, int first_mb, TpProgress *prog)
{
  int share = tp_train_replica_batch(t);
  x->idx = g_new(const int *, MAX(s->K, 1));
  for (int i = 0; i < s->K; i++)
    x->idx[i] = idx[i] + (size_t)k * share;
  x->rt = t->dp.rt ? t->dp.rt[k] : t->rt, x->s = s, x->first_mb = first_mb, x->origin = t->prog.origin;
  x->own = (TpProgress){ .data = prog ? prog->data : NULL, .cut_before = prog ? prog->cut_before : NULL };
  x->prog = k == 0 ? prog : &x->own;
}

/* Batchnorm's running statistics of each stage, averaged over the replicas in replica order (each
 * replica moved its own from its samples during the segment): evaluation and checkpoints see the
 * mean, and every replica goes on from it.  Over ranks, this rank's stage through the reduction. */
static gboolean average_buffers(Train *t, GError **err)
{
  for (int st = 0; st < t->W; st++) {
    size_t nb = tp_runtime_n_buffers(t->rt, st);
    gboolean mine = !tp_group_per_stage(t->group) || st == t->rank % t->W;
    if (!nb || !mine)
      continue;
    g_autofree float *sum = g_new(float, nb), *one = g_new(float, nb);
    gboolean ok = tp_runtime_get_buffers(t->rt, st, sum, err);
    if (ok && tp_group_per_stage(t->group))
      ok = t->dp.reduce->iface->mean(t->dp.reduce, st, t->rank / t->W, 0, tp_backend_cpu(), sum, nb, err) &&
           tp_runtime_set_buffers(t->rt, st, sum, err);
    else if (ok) {
      for (int k = 1; k < t->dp.D && ok; k++) {
        ok = tp_runtime_get_buffers(t->dp.rt[k], st, one, err);
        for (size_t i = 0; ok && i < nb; i++)
          sum[i] += one[i];
      }
      for (size_t i = 0; i < nb; i++)
        sum[i] /= (float)t->dp.D;
      for (int k = 0; k < t->dp.D && ok; k++)
        ok = tp_runtime_set_buffers(t->dp.rt[k], st, sum, err);
    }
    if (!ok)
      return FALSE;
  }
  return TRUE;
}

gboolean tp_train_run_replicas(Train *t, const TpSchedule *s, int *const *idx, int first_mb, TpProgress *prog,
                               TpRunResult *r, GError **err)
{
  int D = t->dp.D;
  if (D == 1)
    return tp_runtime_run(t->rt, s, (const int *const *)idx, first_mb, t->prog.origin, prog, r, err);
  if (tp_group_per_stage(t->group)) { /* this rank: its stage of replica rank / W, on that replica's share */
    Replica one = { 0 };
    start(t, &one, t->rank / t->W, s, idx, first_mb, prog);
    gboolean ok = tp_runtime_run(t->rt, s, one.idx, first_mb, t->prog.origin, prog, r, err) && average_buffers(t, err);
    g_free(one.idx);
    return ok;
  }
  Replica *x = g_new0(Replica, D);
  Job *jobs = g_new0(Job, D);
  for (int k = 0; k < D; k++) {
    start(t, &x[k], k, s, idx, first_mb, prog);
    jobs[k] = (Job){ .fn = replica_run, .part = &x[k], .reduce = t->dp.reduce };
  }
  gboolean ok = run_jobs(jobs, D, "replica", err);
  for (int k = 1; k < D; k++) {
    for (int i = 0; ok && i < s->K; i++)
      x[0].r.loss_sum[i] += x[k].r.loss_sum[i], x[0].r.correct[i] += x[k].r.correct[i];
    tp_run_result_clear(&x[k].r);
  }
  if (ok)
    *r = x[0].r;
  else
    tp_run_result_clear(&x[0].r);
  ok = ok && average_buffers(t, err);
  t->dp.identical = t->dp.identical && (!ok || replicas_identical(t));
  for (int k = 0; k < D; k++)
    g_free(x[k].idx);
  g_free(x), g_free(jobs);
  return ok;
}

typedef struct {
  TpRuntime *rt;
  const TpSchedule *s;
  const int *idx;
  TpStageProfile *prof;
} Timed;

static gboolean timed_run(gpointer part, GError **err)
{
  Timed *x = part;
  return tp_runtime_profile_pipelined(x->rt, x->s, x->idx, x->prof, err);
}

gboolean tp_train_profile_replicas(Train *t, const TpSchedule *warm, const int *first_idx, GError **err)
{
  int D = t->dp.rt ? t->dp.D : 1, share = tp_train_replica_batch(t);
  Timed *x = g_new0(Timed, D);
  Job *jobs = g_new0(Job, D);
  for (int k = 0; k < D; k++) { /* the others' profiles are scratch: replica 0's times are the run's */
    x[k] = (Timed){ .rt = k ? t->dp.rt[k] : t->rt, .s = warm, .idx = first_idx + (size_t)k * share,
                    .prof = k ? g_memdup2(t->pred.prof, sizeof(TpStageProfile) * (size_t)t->W) : t->pred.prof };
    jobs[k] = (Job){ .fn = timed_run, .part = &x[k], .reduce = D > 1 ? t->dp.reduce : NULL };
  }
  gboolean ok = run_jobs(jobs, D, "replica-profile", err);
  for (int k = 1; k < D; k++)
    g_free(x[k].prof);
  g_free(x), g_free(jobs);
  return ok;
}

typedef struct {
  TpRuntime *rt;
  int reps;
  double *out; /* [W] */
} ReduceTiming;

static gboolean timed_reduce(gpointer part, GError **err)
{
  ReduceTiming *x = part;
  return tp_runtime_time_reduce(x->rt, x->reps, x->out, err);
}

gboolean tp_train_time_allreduce(Train *t, GError **err)
{
  const int D = t->dp.D, W = t->W, reps = tp_train_allreduce_reps(t);
  if (D < 2)
    return TRUE;
  /* parts: one timing per replica of this process (threads), or this rank's gathered from every rank */
  int parts = t->dp.rt ? D : tp_group_size(t->group);
  g_autofree double *all = g_new0(double, (size_t)parts * W);
  gboolean ok;
  if (t->dp.rt) {
    ReduceTiming *x = g_new0(ReduceTiming, D);
    Job *jobs = g_new0(Job, D);
    for (int k = 0; k < D; k++) {
      x[k] = (ReduceTiming){ .rt = t->dp.rt[k], .reps = reps, .out = all + (size_t)k * W };
      jobs[k] = (Job){ .fn = timed_reduce, .part = &x[k], .reduce = t->dp.reduce };
    }
    ok = run_jobs(jobs, D, "replica-reduce", err);
    g_free(x), g_free(jobs);
  } else {
    g_autofree double *mine = g_new0(double, W);
    ok = tp_runtime_time_reduce(t->rt, reps, mine, err) && tp_group_gather(t->group, -1, mine, W * sizeof(double), all, err);
  }
  if (!ok)
    return FALSE;
  g_free(t->res.allreduce);
  t->res.allreduce = g_new0(double, W);
  for (int p = 0; p < parts; p++) /* a reduction ends when its slowest replica's does */
    for (int st = 0; st < W; st++)
      t->res.allreduce[st] = MAX(t->res.allreduce[st], all[(size_t)p * W + st]);
  return TRUE;
}
