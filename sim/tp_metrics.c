/* tp_metrics.c — metrics of a simulated timeline (spec §3 and §4). */
#include "tp_metrics.h"
#include "tp_metrics_priv.h"
#include "tp_policy.h"

#include <stdlib.h>
#include <string.h>

const char *const tp_mem_names[TP_N_MEM] = { "weights", "optimizer", "gradients", "activations", "comm" };

/* ---- version difference and chains -------------------------------------------------------- */

/* g[i] = oldest version any backward of mini-batch i reads on stage 1; v[i] = i - g[i]. */
static void version_difference(const TpSchedule *s, int *v, int *g)
{
  for (int i = 0; i <= s->K; i++)
    g[i] = G_MAXINT;
  const TpOp *ops = tp_stage_ops(s, 0);
  for (int k = 0; k < tp_stage_len(s, 0); k++)
    if (tp_op_sends_up(ops[k].kind))
      g[ops[k].mb] = MIN(g[ops[k].mb], ops[k].ver);
  v[0] = g[0] = 0;
  for (int i = 1; i <= s->K; i++)
    v[i] = i - g[i];
}

/* Steady range: mini-batches after the first W and before the last W, else all of them. */
static void steady_range(const TpSchedule *s, TpMetrics *m)
{
  m->ver.steady_lo = s->W + 1;
  m->ver.steady_hi = s->K - s->W;
  m->ver.steady_empty = m->ver.steady_lo > m->ver.steady_hi;
  if (m->ver.steady_empty)
    m->ver.steady_lo = 1, m->ver.steady_hi = s->K;
}

/* The steady range, v over it and the update chains. */
static void steady(const TpSchedule *s, const int *v, TpMetrics *m)
{
  steady_range(s, m);
  m->ver.v_steady = 0;
  m->ver.v_steady_min = G_MAXINT;
  for (int i = m->ver.steady_lo; i <= m->ver.steady_hi; i++) {
    m->ver.v_steady = MAX(m->ver.v_steady, v[i]);
    m->ver.v_steady_min = MIN(m->ver.v_steady_min, v[i]);
  }
  /* chains: follow i -> i - v(i); a chain's first member is the i whose link leaves 1..K */
  int *root = g_new(int, s->K + 1);
  gboolean *seen = g_new0(gboolean, s->K + 1);
  for (int i = 1; i <= s->K; i++)
    root[i] = i - v[i] <= 0 ? i : root[i - v[i]];
  m->ver.chain_first = g_array_new(FALSE, FALSE, sizeof(int));
  /* v consecutive mini-batches lie on v different chains: look at least that far */
  int last = MIN(s->K, MAX(m->ver.steady_hi, m->ver.steady_lo + m->ver.v_steady - 1));
  for (int i = m->ver.steady_lo; i <= last; i++)
    seen[root[i]] = TRUE;
  for (int i = 1; i <= s->K; i++)
    if (seen[i])
      g_array_append_val(m->ver.chain_first, i);
  m->ver.chains = (int)m->ver.chain_first->len;
  m->ver.multiple_sequences = m->ver.v_steady > 1;
  g_free(root);
  g_free(seen);
}

int tp_version_difference(const TpSchedule *s, int *v_min, gboolean *steady_empty)
{
  TpMetrics m = { 0 };
  int *v = g_new(int, s->K + 1), *g = g_new(int, s->K + 1);
  version_difference(s, v, g);
  steady(s, v, &m);
  if (v_min)
    *v_min = m.ver.v_steady_min;
  if (steady_empty)
    *steady_empty = m.ver.steady_empty;
  g_array_unref(m.ver.chain_first);
  g_free(v);
  g_free(g);
  return m.ver.v_steady;
}

/* Spacing of stage 1's updates over the steady range, else makespan / K; sets the steady window
 * (from stage 1's update of steady_lo - 1 to that of steady_hi; the whole run when there is none). */
static double time_per_minibatch(const TpSim *sim, TpMetrics *m)
{
  const TpSchedule *s = sim->s;
  int lo = m->ver.steady_lo - 1, hi = m->ver.steady_hi;
  m->window_start = 0, m->window_end = m->makespan;
  if (m->ver.steady_empty || lo < 1 || hi <= lo)
    return m->makespan / s->K;
  const int32_t *upos = sim->ix->upos; /* stage 1's row */
  if (upos[lo] < 0 || upos[hi] < 0)
    return m->makespan / s->K;
  m->window_start = sim->end[sim->ix->off[0] + upos[lo]];
  m->window_end = sim->end[sim->ix->off[0] + upos[hi]];
  return (m->window_end - m->window_start) / (hi - lo);
}

double tp_metrics_time_per_minibatch(const TpSim *sim)
{
  TpMetrics m = { .makespan = sim->makespan };
  steady_range(sim->s, &m);
  return time_per_minibatch(sim, &m);
}

/* ---- steady state and weight inconsistency (one pass over the operations) ----------------- */

int tp_backward_mismatch(const TpSchedule *s, const TpIndex *ix, int st, const TpOp *b, int latest, GArray *hist,
                         long *older)
{
  const int32_t *fpos = ix->fpos + (size_t)st * ix->nkeys;
  const TpOp *ops = tp_stage_ops(s, st);
  int j0 = b->micro == TP_WHOLE ? 0 : b->micro, j1 = b->micro == TP_WHOLE ? s->N : b->micro + 1, worst = G_MININT;
  for (int j = j0; j < j1; j++) {
    int32_t p = fpos[tp_key(s->N, b->mb, j)];
    if (p < 0) /* one forward for the whole mini-batch */
      p = fpos[tp_key(s->N, b->mb, TP_WHOLE)];
    if (p < 0) /* no forward here: not a schedule the validator accepts */
      continue;
    int fv = ops[p].ver, read = b->ver;
    if (b->src == TP_SRC_STASH)
      read = fv;
    else if (b->src == TP_SRC_BLEND)
      read = latest > fv && tp_significance(&s->sig, latest - fv) < 1 ? latest : fv;
    int d = read - fv;
    worst = MAX(worst, d);
    if (!hist)
      continue;
    if (d < 0) {
      (*older)++;
      continue;
    }
    if (hist->len <= (guint)d)
      g_array_set_size(hist, (guint)d + 1);
    g_array_index(hist, long, d)++;
  }
  return worst;
}

/* ---- all metrics -------------------------------------------------------------------------- */

/* The zero-bubble paper's bubble rate (TpMetrics.bubble_span), over the workers' spans. */
static double span_bubble(const TpSim *sim)
{
  const TpSchedule *s = sim->s;
  const int R = tp_schedule_ranks(s);
  double *first = g_new(double, R), *last = g_new0(double, R), *work = g_new0(double, R), cost = 0, most = 0;
  for (int r = 0; r < R; r++)
    first[r] = G_MAXDOUBLE;
  for (int st = 0; st < s->W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    const double *start = sim->start + sim->ix->off[st], *end = sim->end + sim->ix->off[st];
    int r = tp_stage_rank(s, st);
    double f = first[r], l = last[r], w = work[r]; /* in registers: the same sums in the same order */
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      if (ops[k].kind == TP_OP_U)
        continue;
      if (ops[k].kind == TP_OP_F)
        f = MIN(f, start[k]);
      l = MAX(l, end[k]);
      w += end[k] - start[k];
    }
    first[r] = f, last[r] = l, work[r] = w;
  }
  for (int r = 0; r < R; r++)
    cost = MAX(cost, last[r] - MIN(first[r], last[r])), most = MAX(most, work[r]);
  g_free(first), g_free(last), g_free(work);
  return cost > 0 ? (cost - most) / cost : 0;
}

/* Stage st's part of the one pass: its busy time, its reads' staleness, its backwards' version
 * mismatch, its messages and bytes (its two links are its own: summed here, in its order), and its
 * share of the busy time inside [t0, t1] added to *busy_steady in the stages' order. */
static void stage_pass(const TpSim *sim, TpMetrics *m, int st, double t0, double t1, double *busy_steady)
{
  const TpSchedule *s = sim->s;
  const TpOp *ops = tp_stage_ops(s, st);
  const long off = sim->ix->off[st];
  const double *start = sim->start + off, *end = sim->end + off;
  const int32_t *cons = sim->cons + off;
  int latest = 0, worst = 0;
  double busy = 0, steady = *busy_steady, bytes_f = 0, bytes_b = 0; /* sent on the forward link, the backward one */
  long sent_f = 0, sent_b = 0;
  for (int k = 0; k < tp_stage_len(s, st); k++) {
    const TpOp *op = &ops[k];
    busy += end[k] - start[k];
    steady += MAX(0.0, MIN(end[k], t1) - MAX(start[k], t0));
    if (op->kind == TP_OP_U) {
      latest++;
      continue;
    }
    guint d = (guint)(latest - op->ver);
    if (m->staleness->len <= d)
      g_array_set_size(m->staleness, d + 1);
    /* a whole-mini-batch forward reads for its N micro-batches (fused forwards count as the forwards
     * they stand for) */
    g_array_index(m->staleness, long, d) += op->kind == TP_OP_F ? tp_op_count(s, op) : 1;
    if (tp_op_sends_up(op->kind)) {
      int d_b = tp_backward_mismatch(s, sim->ix, st, op, latest, m->mismatch, &m->mismatch_older);
      worst = MAX(worst, d_b);
    }
    if (cons[k] >= 0 && op->kind == TP_OP_F) /* scalars, not indexed: no sum waits on memory */
      sent_f++, bytes_f += tp_sim_op_bytes(sim->c, s, st, op);
    else if (cons[k] >= 0)
      sent_b++, bytes_b += tp_sim_op_bytes(sim->c, s, st, op);
  }
  const double bytes[2] = { bytes_f, bytes_b };
  const long messages[2] = { sent_f, sent_b };
  for (int up = 0; up < 2; up++)
    if (messages[up] > 0) {
      int l = tp_link_of(s->W, st, up ? TP_OP_B : TP_OP_F);
      m->link_messages[l] += messages[up], m->link_bytes[l] += bytes[up];
    }
  m->stage[st].busy = busy;
  m->stage[st].max_version_mismatch = worst;
  *busy_steady = steady;
}

/* The memory fields of a stage's metrics (what tp_metrics_memory computes). */
static void memory_fields(TpStageMetrics *to, const TpStageMetrics *from)
{
  to->peak_bytes = from->peak_bytes, to->max_live_versions = from->max_live_versions;
  to->peak_activations = from->peak_activations;
  memcpy(to->at_peak, from->at_peak, sizeof to->at_peak);
  memcpy(to->comp_peak, from->comp_peak, sizeof to->comp_peak);
}

/* One pass over the timeline: busy times (the whole run, and inside the steady window from
 * m->window_start to m->window_end), bubbles, staleness, messages, the version mismatch of every
 * backward, and the throughputs. */
static void busy_fields(const TpSim *sim, TpMetrics *m)
{
  const TpSchedule *s = sim->s;
  const int W = s->W, L = tp_sim_n_links(W);
  const double t0 = m->window_start, t1 = m->window_end;
  double busy_steady = 0;
  m->mismatch = g_array_new(FALSE, TRUE, sizeof(long));
  for (int st = 0; st < W; st++) {
    stage_pass(sim, m, st, t0, t1, &busy_steady);
    m->busy += m->stage[st].busy;
    m->stage[st].bubble = m->makespan > 0 ? 1.0 - m->stage[st].busy / m->makespan : 0;
  }
  for (int l = 0; l < L; l++)
    m->messages += m->link_messages[l], m->bytes += m->link_bytes[l];
  /* interleaved stages: a rank's bubble is its idle time across its chunks, shown on each of them */
  const int R = tp_schedule_ranks(s);
  for (int r = 0; s->rank_seq && r < R; r++) {
    double busy = 0;
    for (int st = 0; st < W; st++)
      busy += tp_stage_rank(s, st) == r ? m->stage[st].busy : 0;
    for (int st = 0; st < W; st++)
      if (tp_stage_rank(s, st) == r)
        m->stage[st].bubble = m->makespan > 0 ? 1.0 - busy / m->makespan : 0;
  }
  m->bubble = m->makespan > 0 ? 1.0 - m->busy / (R * m->makespan) : 0;
  /* samples of every replica (data parallelism: D pipelines in step) */
  double per_micro = sim->c->samples_per_micro * tp_cost_replicas(sim->c);
  m->throughput = m->makespan > 0 ? (double)s->K * s->N * per_micro / m->makespan : 0;
  m->t_minibatch_run = m->makespan / s->K;
  m->throughput_steady = m->t_minibatch > 0 ? s->N * per_micro / m->t_minibatch : 0;
  m->bubble_steady = t1 > t0 ? 1.0 - busy_steady / (R * (t1 - t0)) : m->bubble;
}

TpMetrics *tp_metrics_compute(const TpSim *sim) { return tp_metrics_compute_with(sim, NULL); }

TpMetrics *tp_metrics_compute_with(const TpSim *sim, const TpStageMetrics *memory)
{
  const TpSchedule *s = sim->s;
  const int W = s->W, L = tp_sim_n_links(W);
  TpMetrics *m = g_new0(TpMetrics, 1);
  m->W = W, m->N = s->N, m->K = s->K;
  m->makespan = sim->makespan;
  m->stage = g_new0(TpStageMetrics, W);
  m->link_messages = g_new0(long, MAX(L, 1));
  m->link_bytes = g_new0(double, MAX(L, 1));
  m->staleness = g_array_new(FALSE, TRUE, sizeof(long));

  /* the stages' memory needs only the timeline: on other threads while this one does the rest */
  TpStageWork w = { sim, m, 0 };
  int threads = 0;
  GThread **t = memory ? NULL : tp_metrics_memory_start(sim, &w, &threads);

  m->ver.v = g_new(int, s->K + 1);
  m->ver.g = g_new(int, s->K + 1);
  version_difference(s, m->ver.v, m->ver.g);
  steady(s, m->ver.v, m);
  m->t_minibatch = time_per_minibatch(sim, m);
  m->bubble_span = span_bubble(sim);
  busy_fields(sim, m);

  if (memory)
    for (int st = 0; st < W; st++)
      memory_fields(&m->stage[st], &memory[st]);
  else
    tp_metrics_memory_finish(&w, t, threads);
  return m;
}

TpStageMetrics *tp_metrics_memory(const TpSim *sim)
{
  TpMetrics m = { .W = sim->s->W, .stage = g_new0(TpStageMetrics, sim->s->W) };
  TpStageWork w = { sim, &m, 0 };
  int threads;
  GThread **t = tp_metrics_memory_start(sim, &w, &threads);
  tp_metrics_memory_finish(&w, t, threads);
  return m.stage;
}

void tp_metrics_free(TpMetrics *m)
{
  if (!m)
    return;
  g_free(m->ver.v);
  g_free(m->ver.g);
  if (m->ver.chain_first)
    g_array_unref(m->ver.chain_first);
  g_free(m->link_messages);
  g_free(m->link_bytes);
  g_array_unref(m->staleness);
  if (m->mismatch)
    g_array_unref(m->mismatch);
  g_free(m->stage);
  g_free(m);
}
