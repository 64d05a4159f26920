/* tp_metrics_memory.c — the memory part of the metrics (tp_metrics.c): every stage's bytes over time
 * by component — versions, blend buffer, stored activations, messages — from its changes (streams
 * merged in time order, or summed per instant where every time and amount is a whole number), its
 * peaks, and its series for the memory plot; the stages spread over the cores. */
#include "tp_metrics.h"
#include "tp_metrics_priv.h"
#include "tp_policy.h"

#include <stdlib.h>
#include <string.h>

enum { C_VERSIONS, C_BLEND, C_ACTS, C_COMM, C_N };

/* The changes of one stage, by stream: each stream is written in time order in the usual case (a
 * stage's starts and ends grow with its position, a link delivers in sending order), so they are
 * merged as they are read instead of sorted.  A change's component is its stream's. */
enum { S_ACTS, S_ACTS_END, S_BLEND, S_BLEND_END, S_RECV_F, S_RECV_B, S_RECV_END, S_SEND, S_SEND_END_F, S_SEND_END_B,
       S_VER, S_VER_END, S_N };
static const int stream_comp[S_N] = { C_ACTS, C_ACTS, C_BLEND, C_BLEND, C_COMM, C_COMM,
                                      C_COMM, C_COMM, C_COMM, C_COMM, C_VERSIONS, C_VERSIONS };

typedef struct {
  double t, delta;
} Change;

/* Changes in time order; at one instant frees before allocations, then by component. */
static inline gboolean change_before(const Change *x, int cx, const Change *y, int cy)
{
  if (x->t != y->t)
    return x->t < y->t;
  if (x->delta != y->delta)
    return x->delta < y->delta;
  return cx < cy;
}

static int change_cmp(const void *a, const void *b)
{
  const Change *x = a, *y = b;
  return change_before(x, 0, y, 0) ? -1 : change_before(y, 0, x, 0) ? 1 : 0;
}

/* Merging: a stream's next change, held in the heap itself. */
typedef struct {
  double t, delta;
  int comp, k; /* its component, and the stream */
} Head;

/* The changes at one instant of the instants' table, summed by component; `up` has bit c set when
 * component c grows there. */
typedef struct {
  double sum[C_N];
} Instant;

typedef struct {
  Change *buf; /* the streams one after the other */
  long at[S_N], len[S_N];
  const Change *cur[S_N], *stop[S_N]; /* merging: the next change of each stream, and its end */
  Head heap[S_N]; /* merging: the streams left, by their next change */
  int n_heap;
  /* instead of the streams, when every amount and every time is a whole number (see
   * instants_fit): the changes summed per instant 0..span, in inst and up; `off` set by a time
   * that is not one of them, unless `whole` says every time is one (unit slots) */
  Instant *inst;
  uint8_t *up;
  long span;
  gboolean off, whole, any; /* any: a change was put */
  gboolean by_time;         /* merging with exact sums: by time alone, the peaks per instant */
} Streams;

/* Room for each stream of a stage with nf forwards and nb backwards (and K+1 versions); a forward's
 * activations may be freed in two parts (at its I and its W). */
static long streams_layout(Streams *q, long nf, long nb, int K)
{
  const long cap[S_N] = { nf, 2 * nf, nb, nb, nf, nb, nf + nb, nf + nb, nf, nb, K + 1L, K + 1L };
  long total = 0;
  for (int k = 0; k < S_N; k++)
    q->at[k] = total, q->len[k] = 0, total += cap[k];
  return total;
}

static inline void put(Streams *q, int stream, double t, double delta)
{
  if (q->inst) {
    long i = (long)t;
    if (!q->whole && G_UNLIKELY(!(t >= 0 && t <= q->span) || (double)i != t)) {
      q->off = TRUE;
      return;
    }
    q->inst[i].sum[stream_comp[stream]] += delta;
    q->up[i] |= (uint8_t)((delta > 0) << stream_comp[stream]);
    return;
  }
  Change *c = &q->buf[q->at[stream] + q->len[stream]++];
  c->t = t, c->delta = delta;
}

static inline void add(Streams *q, int on, int off, double t0, double t1, double amount)
{
  if (t1 <= t0 || amount == 0)
    return;
  q->any = TRUE;
  put(q, on, t0, amount);
  put(q, off, t1, -amount);
}

static inline gboolean head_before(const Streams *q, const Head *a, const Head *b)
{
  if (a->t != b->t)
    return a->t < b->t;
  if (q->by_time) /* exact sums: the order within an instant does not matter */
    return FALSE;
  if (a->delta != b->delta)
    return a->delta < b->delta;
  return a->comp < b->comp;
}

static void sift_down(Streams *q, int i)
{
  Head x = q->heap[i];
  for (;;) {
    int c = 2 * i + 1;
    if (c >= q->n_heap)
      break;
    if (c + 1 < q->n_heap && head_before(q, &q->heap[c + 1], &q->heap[c]))
      c++;
    if (!head_before(q, &q->heap[c], &x))
      break;
    q->heap[i] = q->heap[c];
    i = c;
  }
  q->heap[i] = x;
}

/* Get ready to merge: a stream out of time order (a schedule file may receive in another order than
 * its neighbour sends) is sorted on its own first. */
static void merge_start(Streams *q)
{
  q->n_heap = 0;
  for (int k = 0; k < S_N; k++) {
    Change *c = q->buf + q->at[k];
    for (long i = 1; i < q->len[k]; i++)
      if (change_before(&c[i], 0, &c[i - 1], 0)) {
        qsort(c, (size_t)q->len[k], sizeof(Change), change_cmp);
        break;
      }
    q->cur[k] = c, q->stop[k] = c + q->len[k];
    if (q->len[k] > 0)
      q->heap[q->n_heap++] = (Head){ .t = c->t, .delta = c->delta, .comp = stream_comp[k], .k = k };
  }
  for (int i = q->n_heap / 2 - 1; i >= 0; i--)
    sift_down(q, i);
}

/* The next change in order and its component; FALSE when none is left. */
static inline gboolean merge_next(Streams *q, Change *out, int *comp)
{
  if (q->n_heap == 0)
    return FALSE;
  Head *h = &q->heap[0];
  out->t = h->t, out->delta = h->delta, *comp = h->comp;
  const Change *next = ++q->cur[h->k];
  if (next == q->stop[h->k])
    *h = q->heap[--q->n_heap];
  else
    h->t = next->t, h->delta = next->delta;
  sift_down(q, 0);
  return TRUE;
}

/* End of the backward that consumes the activations of forward op f at stage st: of its W when
 * the backward is split (a pending W keeps the stage's inputs and output gradients alive). */
static double release_time(const TpSim *sim, int st, const TpOp *f, gboolean *whole)
{
  const TpSchedule *s = sim->s;
  const TpIndex *ix = sim->ix;
  const int32_t *bp = ix->bpos + (size_t)st * ix->nkeys;
  int key = tp_key(s->N, f->mb, TP_WHOLE);
  *whole = bp[key] >= 0; /* one backward for the whole mini-batch: the same time for all its forwards */
  if (bp[key] < 0 && f->micro != TP_WHOLE)
    key = tp_key(s->N, f->mb, f->micro);
  int32_t p = MAX(bp[key], tp_index_wpos(ix, st, key));
  if (bp[key] < 0) /* whole forward, per-micro backwards: the last of them */
    for (int j = 0; j < s->N; j++)
      p = MAX(p, MAX(bp[tp_key(s->N, f->mb, j)], tp_index_wpos(ix, st, tp_key(s->N, f->mb, j))));
  return sim->end[ix->off[st] + p];
}

/* When forward f's micro-batch runs a split backward: the end of its I, after which only M_W stays
 * until its W (release_time); otherwise -1. */
static double input_grad_end(const TpSim *sim, int st, const TpOp *f)
{
  const TpIndex *ix = sim->ix;
  int32_t p = f->micro == TP_WHOLE ? -1 : ix->bpos[(size_t)st * ix->nkeys + tp_key(sim->s->N, f->mb, f->micro)];
  return p >= 0 && tp_stage_ops(sim->s, st)[p].kind == TP_OP_I ? sim->end[ix->off[st] + p] : -1;
}

/* A stage's sizes that the components' bytes are made of. */
typedef struct {
  double weight, stored, workspace, fixed, optimizer, grad_buffer;
} Sizes;

/* Every change of stage st, into q (streams or instants); create and last have K+1 entries. */
static void stage_changes(const TpSim *sim, int st, Streams *q, double *create, double *last)
{
  const TpSchedule *s = sim->s;
  const TpStageCost *sc = &sim->c->stage[st];
  const TpOp *ops = tp_stage_ops(s, st);
  const long off = sim->ix->off[st];
  const int n = tp_stage_len(s, st);
  gboolean stashing = s->policy == TP_POLICY_STASH || s->policy == TP_POLICY_INTERMEDIATE;
  const double keep = tp_cost_stored_w(sc) / sc->stored_bytes; /* of a forward's bytes, what waits for its W */
  memset(last, 0, (s->K + 1) * sizeof *last);
  create[0] = 0;
  int latest = 0; /* the stage's latest version when op k runs (m->latest, which may not be ready) */
  int rel_mb = 0; /* the last forward's mini-batch and release time, when it is its mini-batch's */
  gboolean rel_whole = FALSE;
  double rel = 0;
  for (int k = 0; k < n; k++) {
    const TpOp *op = &ops[k];
    long g = off + k;
    if (op->kind == TP_OP_U) {
      create[op->mb] = sim->end[g];
      latest++;
      continue;
    }
    double use = sim->end[g];
    if (op->kind == TP_OP_F) {
      if (op->mb != rel_mb || !rel_whole)
        rel = release_time(sim, st, op, &rel_whole), rel_mb = op->mb;
      double rel_i;
      if (keep < 1 && (rel_i = input_grad_end(sim, st, op)) >= 0) { /* M_B - M_W released at the I */
        q->any = TRUE;
        put(q, S_ACTS, sim->start[g], 1);
        put(q, S_ACTS_END, rel_i, keep - 1);
        put(q, S_ACTS_END, rel, -keep);
      } else
        add(q, S_ACTS, S_ACTS_END, sim->start[g], rel, tp_op_count(s, op));
      if (stashing)
        use = MAX(use, rel);
    } else if (op->src == TP_SRC_BLEND && latest > op->ver) {
      add(q, S_BLEND, S_BLEND_END, sim->start[g], sim->end[g], sc->weight_bytes);
    }
    last[op->ver] = MAX(last[op->ver], use);
    /* messages: received ones wait from arrival to the consuming op's start; sent ones from the
     * end of the producing op to the end of their transfer.  Above their link's eager limit (MPI's
     * rendezvous) a sent one stays with the sender until the consuming op starts, and the
     * receiver holds nothing before */
    long p = sim->prod[g];
    if (p >= 0) {
      /* the producer covers the same micro-batches: its bytes without reading it on its stage */
      const TpStageCost *pc = &sim->c->stage[op->kind == TP_OP_F ? st - 1 : st + 1];
      double bytes = tp_op_count(s, op) * (op->kind == TP_OP_F ? pc->act_bytes : pc->grad_bytes);
      if (!tp_cost_rendezvous(&sim->c->link[op->kind == TP_OP_F ? st - 1 : st], bytes))
        add(q, op->kind == TP_OP_F ? S_RECV_F : S_RECV_B, S_RECV_END, sim->xend[p], sim->start[g], bytes);
    }
    if (sim->cons[g] >= 0) {
      double bytes = tp_sim_op_bytes(sim->c, s, st, op);
      gboolean rv = tp_cost_rendezvous(&sim->c->link[op->kind == TP_OP_F ? st : st - 1], bytes);
      add(q, S_SEND, op->kind == TP_OP_F ? S_SEND_END_F : S_SEND_END_B, sim->end[g],
          rv ? MAX(sim->start[sim->cons[g]], sim->xend[g]) : sim->xend[g], bytes);
    }
  }
  /* version v lives from its update until the next update or its last reader, whichever is later */
  for (int v = 0; v <= s->K; v++)
    add(q, S_VER, S_VER_END, create[v], v == s->K ? sim->makespan : MAX(create[v + 1], last[v]), 1);
}

/* One evaluation of the peaks: cur holds the components' counts and bytes after a change that adds
 * (`grew`: bit c set when component c grew), comp their bytes. */
static inline void peaks_at(TpStageMetrics *sm, const Sizes *z, const double *cur, const double *comp, int grew)
{
  if (grew & 1 << C_VERSIONS)
    sm->max_live_versions = MAX(sm->max_live_versions, (int)(cur[C_VERSIONS] + 0.5));
  if (grew & 1 << C_ACTS)
    sm->peak_activations = MAX(sm->peak_activations, (int)(cur[C_ACTS] + 0.5));
  sm->comp_peak[0] = MAX(sm->comp_peak[0], comp[0]);
  sm->comp_peak[3] = MAX(sm->comp_peak[3], comp[3]);
  sm->comp_peak[4] = MAX(sm->comp_peak[4], comp[4]);
  double total = comp[0] + comp[3] + comp[4] + z->fixed;
  if (total > sm->peak_bytes) {
    sm->peak_bytes = total;
    sm->at_peak[0] = comp[0], sm->at_peak[1] = z->optimizer, sm->at_peak[2] = z->grad_buffer;
    sm->at_peak[3] = comp[3], sm->at_peak[4] = comp[4];
  }
}

/* peaks_at with every component's bytes from the sums (an instant's last change). */
static inline void peaks_of_sums(TpStageMetrics *sm, const Sizes *z, const double *cur, int grew)
{
  double comp[TP_N_MEM] = { cur[C_VERSIONS] * z->weight + cur[C_BLEND], 0, 0, cur[C_ACTS] * z->stored + z->workspace,
                            cur[C_COMM] };
  peaks_at(sm, z, cur, comp, grew);
}

/* The peaks from the merged streams: a change that frees (delta <= 0) lowers its component and the
 * total, so only the other changes are compared against the peaks so far. */
static void peaks_merged(Streams *q, const Sizes *z, TpStageMetrics *sm)
{
  double cur[C_N] = { 0 }, comp[TP_N_MEM] = { 0, 0, 0, z->workspace, 0 };
  gboolean first = TRUE;
  int cc;
  for (Change c; merge_next(q, &c, &cc);) {
    cur[cc] += c.delta;
    if (cc == C_ACTS)
      comp[3] = cur[C_ACTS] * z->stored + z->workspace;
    else if (cc == C_COMM)
      comp[4] = cur[C_COMM];
    else
      comp[0] = cur[C_VERSIONS] * z->weight + cur[C_BLEND];
    if (c.delta <= 0 && !first)
      continue;
    first = FALSE;
    peaks_at(sm, z, cur, comp, 1 << cc);
  }
}

/* The peaks from the instants' table, clearing it.  Its sums are exact (instants_fit), so each
 * component's running sum is the merge's whatever the order within an instant; and at an instant
 * the merge takes the frees first, then allocations that only raise each component: its last
 * evaluation there holds every peak it reaches there, and the total's first reaching it has the
 * same components (a later change that leaves an exact total as it is adds nothing). */
static void peaks_instants(Streams *q, const Sizes *z, TpStageMetrics *sm)
{
  double cur[C_N] = { 0 };
  for (long i = 0; i <= q->span; i++) {
    Instant *x = &q->inst[i];
    int grew = q->up[i];
    for (int c = 0; c < C_N; c++)
      cur[c] += x->sum[c];
    *x = (Instant){ { 0 } };
    q->up[i] = 0;
    if (!grew)
      continue;
    peaks_of_sums(sm, z, cur, grew);
  }
}

/* The peaks from the streams merged by time alone (exact sums): once per instant, after all its
 * changes, as peaks_instants does. */
static void peaks_grouped(Streams *q, const Sizes *z, TpStageMetrics *sm)
{
  double cur[C_N] = { 0 };
  int cc, grew = 0;
  for (Change c; merge_next(q, &c, &cc);) {
    cur[cc] += c.delta;
    grew |= (c.delta > 0) << cc;
    if (!grew || (q->n_heap > 0 && q->heap[0].t == c.t))
      continue;
    peaks_of_sums(sm, z, cur, grew);
    grew = 0;
  }
}

/* The step function of the stage's total memory, from the merged streams (the peaks on the way). */
static void series_merged(Streams *q, const Sizes *z, TpStageMetrics *sm, GArray *series)
{
  double cur[C_N] = { 0 };
  int cc;
  for (Change c; merge_next(q, &c, &cc);) {
    cur[cc] += c.delta;
    sm->max_live_versions = MAX(sm->max_live_versions, (int)(cur[C_VERSIONS] + 0.5));
    sm->peak_activations = MAX(sm->peak_activations, (int)(cur[C_ACTS] + 0.5));
    double comp[TP_N_MEM] = { cur[C_VERSIONS] * z->weight + cur[C_BLEND], z->optimizer, z->grad_buffer,
                              cur[C_ACTS] * z->stored + z->workspace, cur[C_COMM] };
    double total = comp[0] + comp[3] + comp[4] + z->fixed;
    for (int k = 0; k < TP_N_MEM; k++)
      sm->comp_peak[k] = MAX(sm->comp_peak[k], comp[k]);
    if (total > sm->peak_bytes) {
      sm->peak_bytes = total;
      for (int k = 0; k < TP_N_MEM; k++)
        sm->at_peak[k] = comp[k];
    }
    if (q->n_heap == 0 || q->heap[0].t != c.t) {
      TpMemPoint p = { c.t, total };
      g_array_append_val(series, p);
    }
  }
}

/* Whether stage st's changes sum exactly in a double whatever their order (of `room` at most):
 * every amount a whole number, and their sum well within 2^53. */
static gboolean exact_sums(const TpSim *sim, int st, long room)
{
  const TpSchedule *s = sim->s;
  const TpStageCost *sc = sim->c->stage;
  double most = MAX(s->N, 1), bytes[5] = { sc[st].weight_bytes, sc[st].act_bytes, sc[st].grad_bytes, 0, 0 };
  bytes[3] = st > 0 ? sc[st - 1].act_bytes : 0;
  bytes[4] = st < s->W - 1 ? sc[st + 1].grad_bytes : 0;
  for (int k = 0; k < 5; k++) {
    if (!(bytes[k] >= 0 && bytes[k] <= 0x1p40) || bytes[k] != (double)(long long)bytes[k])
      return FALSE;
    most = MAX(most, bytes[k] * MAX(s->N, 1));
  }
  return most * (double)room < 0x1p53;
}

/* Whether the instants' table of a stage of `room` changes may hold its sums: whole-number times
 * (unit slots), the makespan among them, and no more instants than half the changes (the table
 * takes no more memory than the streams). */
static gboolean instants_fit(const TpSim *sim, long room)
{
  double span = sim->makespan;
  return span >= 0 && span == (double)(long)span && (span + 1) * 2 <= room;
}

/* Scratch of one thread: the streams' changes, or the instants' table (kept cleared). */
typedef struct {
  GArray *changes, *instants, *up;
} Scratch;

static void stage_memory(const TpSim *sim, int st, TpStageMetrics *sm, Scratch *sc_, GArray *series)
{
  const TpSchedule *s = sim->s;
  const TpStageCost *sc = &sim->c->stage[st];
  const TpOp *ops = tp_stage_ops(s, st);
  const int n = tp_stage_len(s, st);
  double *create = g_new(double, s->K + 1), *last = g_new(double, s->K + 1);
  Streams q = { 0 };
  long nf = 0, nb = 0;
  for (int k = 0; k < n; k++)
    nf += ops[k].kind == TP_OP_F, nb += tp_op_sends_up(ops[k].kind);
  long room = streams_layout(&q, nf, nb, s->K);
  gboolean exact = !series && exact_sums(sim, st, room);
  if (exact && instants_fit(sim, room)) {
    /* unit slots: every time is a whole number of slots from 0 to the makespan */
    q.span = (long)sim->makespan, q.whole = sim->c->unit;
    if (sc_->instants->len < (guint)q.span + 1) {
      g_array_set_size(sc_->instants, (guint)q.span + 1);
      g_array_set_size(sc_->up, (guint)q.span + 1);
    }
    q.inst = (Instant *)sc_->instants->data, q.up = (uint8_t *)sc_->up->data;
    stage_changes(sim, st, &q, create, last);
    if (q.off) { /* a time that is not a whole number: clear the table, and the streams instead */
      memset(q.inst, 0, (q.span + 1) * sizeof(Instant));
      memset(q.up, 0, q.span + 1);
      q.inst = NULL;
    }
  }
  if (!q.inst) {
    g_array_set_size(sc_->changes, (guint)room);
    q.buf = (Change *)sc_->changes->data;
    stage_changes(sim, st, &q, create, last);
    q.by_time = exact;
    merge_start(&q);
  }
  /* recomputation stores each forward's stage input, and holds one workspace for the largest
   * operation's saved activations (its forward, and a backward's forwards run again) */
  Sizes z = { .weight = sc->weight_bytes, .stored = sc->stored_bytes, .optimizer = sc->optimizer_bytes,
              .grad_buffer = sc->grad_buffer_bytes, .fixed = sc->optimizer_bytes + sc->grad_buffer_bytes };
  if (s->recompute) {
    int most = 1;
    for (int k = 0; k < n; k++)
      most = MAX(most, ops[k].kind == TP_OP_U ? 1 : tp_op_count(s, &ops[k]));
    z.stored = sc->input_bytes > 0 ? sc->input_bytes : sc->grad_bytes;
    z.workspace = most * sc->stored_bytes;
  }
  /* the peaks in a copy, written back once: the stage's other fields are another thread's */
  TpStageMetrics p = { .peak_bytes = -1 };
  if (!series && (q.inst ? q.any : q.n_heap > 0)) {
    p.comp_peak[1] = MAX(p.comp_peak[1], sc->optimizer_bytes);
    p.comp_peak[2] = MAX(p.comp_peak[2], sc->grad_buffer_bytes);
    (q.inst ? peaks_instants : q.by_time ? peaks_grouped : peaks_merged)(&q, &z, &p);
  }
  if (series)
    series_merged(&q, &z, &p, series);
  sm->peak_bytes = p.peak_bytes, sm->max_live_versions = p.max_live_versions;
  sm->peak_activations = p.peak_activations;
  memcpy(sm->at_peak, p.at_peak, sizeof p.at_peak);
  memcpy(sm->comp_peak, p.comp_peak, sizeof p.comp_peak);
  g_free(create);
  g_free(last);
}

static gpointer stage_memory_worker(gpointer data)
{
  TpStageWork *w = data;
  Scratch sc = { g_array_new(FALSE, FALSE, sizeof(Change)), g_array_new(FALSE, TRUE, sizeof(Instant)),
                 g_array_new(FALSE, TRUE, 1) };
  for (int st; (st = g_atomic_int_add(&w->next, 1)) < w->m->W;)
    stage_memory(w->sim, st, &w->m->stage[st], &sc, NULL);
  g_array_unref(sc.changes);
  g_array_unref(sc.instants);
  g_array_unref(sc.up);
  return NULL;
}

GThread **tp_metrics_memory_start(const TpSim *sim, TpStageWork *w, int *threads)
{
  /* each thread holds one stage's changes: spread only many small stages (the memory stays that of
   * a few stages, not of a large share of the schedule) */
  int n = sim->n_ops < 200000 || w->m->W < 16 ? 1 : (int)MIN(g_get_num_processors(), (guint)w->m->W / 8);
  GThread **t = g_new(GThread *, n);
  for (int i = 1; i < n; i++)
    t[i] = g_thread_new("metrics", stage_memory_worker, w);
  *threads = n;
  return t;
}

void tp_metrics_memory_finish(TpStageWork *w, GThread **t, int threads)
{
  stage_memory_worker(w);
  for (int i = 1; i < threads; i++)
    g_thread_join(t[i]);
  g_free(t);
}

GArray *tp_metrics_memory_series(const TpSim *sim, const TpMetrics *m, int st)
{
  GArray *series = g_array_new(FALSE, FALSE, sizeof(TpMemPoint));
  Scratch sc = { g_array_new(FALSE, FALSE, sizeof(Change)), NULL, NULL };
  TpStageMetrics scratch = { 0 };
  (void)m;
  stage_memory(sim, st, &scratch, &sc, series);
  g_array_unref(sc.changes);
  return series;
}

