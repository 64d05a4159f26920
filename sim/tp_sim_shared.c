/* tp_sim_shared.c — the costed replay where stages share devices (tp_sim_priv.h): the event loop's
 * timeline, decided device by device without the event queue.
 *
 * When device d frees at T, the event loop offers it to every stage on it, lowest first, once this
 * instant's completions (and the arrivals they make) are in: the device starts, at
 * S = max(T, the earliest next input among its stages), the lowest stage whose next input has
 * arrived by S.  That holds only while no operation that sends takes zero time (a zero-time send
 * would deliver later in the same instant, after a higher stage took the device): the caller checks.
 * A decision needs the next input of every stage on the device; one not computed yet is bounded
 * below (its producer's stage and device cannot end it sooner, nor its link deliver it sooner), and
 * the decision waits unless that bound lies beyond S by more than the rounding of its sums.  Devices are decided as far as they can be,
 * then the devices of the neighbouring stages are woken; if every device waits, the caller runs the
 * event loop instead.  Every time is the event loop's own sum, so the two agree bit for bit. */
#include "tp_sim_priv.h"

#include <math.h>

/* Producers an arrival's bound looks back through. */
#define BOUND_DEPTH 16

typedef struct {
  TpSim *sim;
  const TpSchedule *s;
  const TpCost *c;
  int W;
  int *pos;          /* [W] each stage's next operation */
  double *clock;     /* [W] the end of each stage's last operation */
  double *dev_free;  /* [devices] */
  double *link_free; /* [links] the end of each link's last transfer */
  int *first, *on;   /* the stages of device d: on[first[d] .. first[d+1]), lowest first */
  double *sum;       /* [ops + W] stage st's operations' times summed before each: sum[off[st] + st + k] */
  double *xdur;      /* [ops] each operation's message's time on its link (where it sends one) */
  double *bound;     /* [W] a bound on the arrival of stage st's next input, not known yet; -1: none */
} Shared;

/* The time of stage st's operations k0 .. k1-1 together (summed otherwise than the event loop sums). */
static inline double ops_time(const Shared *x, int st, long k0, long k1)
{
  const double *row = x->sum + x->sim->ix->off[st] + st;
  return row[k1] - row[k0];
}

/* The producer of stage st's next operation, as (stage, global index); FALSE when it has none. */
static gboolean producer(const Shared *x, int st, int *pst, long *p)
{
  const TpIndex *ix = x->sim->ix;
  long g = ix->off[st] + x->pos[st];
  *p = ix->prod[g];
  *pst = tp_stage_ops(x->s, st)[x->pos[st]].kind == TP_OP_F ? st - 1 : st + 1;
  return *p != -1;
}

/* A time before which the message of operation p (global index, at stage pst, not computed yet)
 * cannot arrive: the stage first ends what comes before p (each no sooner than the device frees),
 * p no sooner than its own input arrives (bounded the same way, `depth` producers back), then its
 * link delivers. */
static double arrival_bound(const Shared *x, int pst, long p, int depth)
{
  const TpIndex *ix = x->sim->ix;
  const TpOp *ops = tp_stage_ops(x->s, pst);
  long k = p - ix->off[pst];
  double t = MAX(x->clock[pst], x->dev_free[x->c->stage[pst].device]) + ops_time(x, pst, x->pos[pst], k);
  long q = ix->prod[p];
  if (q >= 0) {
    int qst = ops[k].kind == TP_OP_F ? pst - 1 : pst + 1;
    if (q - ix->off[qst] < x->pos[qst])
      t = MAX(t, x->sim->xend[q]);
    else if (depth > 0)
      t = MAX(t, arrival_bound(x, qst, q, depth - 1));
  }
  t += ops_time(x, pst, k, k + 1);
  double d = x->xdur[p];
  t = MAX(t, x->link_free[tp_link_of(x->W, pst, ops[k].kind)]);
  return d > 0 ? t + d : t;
}

/* Stage st's next operation starts at `at`: its times, its message on its link. */
static void run_op(Shared *x, int st, double at)
{
  TpSim *sim = x->sim;
  const TpOp *op = &tp_stage_ops(x->s, st)[x->pos[st]];
  long g = sim->ix->off[st] + x->pos[st]++;
  x->bound[st] = -1;
  sim->start[g] = at;
  x->clock[st] = x->dev_free[x->c->stage[st].device] = sim->end[g] = at + tp_sim_op_dur(sim, st, op);
  if (sim->cons[g] < 0)
    return;
  int l = tp_link_of(x->W, st, op->kind);
  double t = MAX(sim->end[g], x->link_free[l]), d = x->xdur[g];
  sim->xstart[g] = t;
  sim->xend[g] = x->link_free[l] = d > 0 ? t + d : t;
}

/* Whether a bound b on an arrival, summed otherwise than the event loop sums the arrival, still shows
 * it no sooner than S: by more than the rounding of either sum. */
static inline gboolean beyond(double b, double S) { return b > S + fabs(S) * 1e-9; }

/* Device d's next decision, if every input it needs is known well enough: TRUE when it ran one. */
static gboolean decide(Shared *x, int d)
{
  const TpIndex *ix = x->sim->ix;
  const int n = x->first[d + 1] - x->first[d];
  double T = x->dev_free[d], S = G_MAXDOUBLE, *ready = g_newa(double, n);
  long *unknown = g_newa(long, n); /* the producer not computed yet, or -1 */
  int *from = g_newa(int, n);
  for (int i = 0; i < n; i++) { /* S: the earliest known input */
    int st = x->on[x->first[d] + i];
    long p;
    ready[i] = G_MAXDOUBLE, unknown[i] = -1;
    if (x->pos[st] >= tp_stage_len(x->s, st))
      continue;
    if (!producer(x, st, &from[i], &p))
      ready[i] = T;
    else if (p < 0)
      return FALSE; /* no producer in the schedule: the event loop names the stall */
    else if (p - ix->off[from[i]] < x->pos[from[i]])
      ready[i] = MAX(T, x->sim->xend[p]);
    else
      unknown[i] = p;
    S = MIN(S, ready[i]);
  }
  if (S == G_MAXDOUBLE)
    return FALSE;
  /* an input not known yet must come after S: bounded cheaply first, then through its producers
   * (a bound only grows as more is known: one beyond S stays so) */
  for (int i = 0; i < n; i++) {
    int st = x->on[x->first[d] + i];
    double *b = &x->bound[st];
    if (unknown[i] < 0 || beyond(*b, S))
      continue;
    if (!beyond(*b = arrival_bound(x, from[i], unknown[i], 0), S) &&
        !beyond(*b = arrival_bound(x, from[i], unknown[i], BOUND_DEPTH), S))
      return FALSE;
  }
  for (int i = 0; i < n; i++) /* the lowest stage whose input is there by S */
    if (ready[i] <= S) {
      run_op(x, x->on[x->first[d] + i], S);
      return TRUE;
    }
  return FALSE;
}

gboolean tp_sim_replay_shared(TpSim *sim)
{
  const TpSchedule *s = sim->s;
  const TpCost *c = sim->c;
  const int W = s->W, D = c->n_devices;
  Shared x = { .sim = sim, .s = s, .c = c, .W = W, .pos = g_new0(int, W), .clock = g_new0(double, W),
               .dev_free = g_new0(double, D), .link_free = g_new0(double, MAX(tp_sim_n_links(W), 1)),
               .first = g_new0(int, D + 1), .on = g_new(int, W), .sum = g_new(double, sim->n_ops + W),
               .xdur = g_new(double, sim->n_ops), .bound = g_new(double, W) };
  for (int st = 0; st < W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    double *row = x.sum + sim->ix->off[st] + st;
    row[0] = 0;
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      long g = sim->ix->off[st] + k;
      row[k + 1] = row[k] + tp_sim_op_dur(sim, st, &ops[k]);
      x.xdur[g] = sim->cons[g] < 0 ? 0
                  : tp_sim_link_time(c, tp_link_of(W, st, ops[k].kind), tp_sim_op_bytes(c, s, st, &ops[k]));
    }
    x.bound[st] = -1;
  }
  for (int st = 0; st < W; st++)
    x.first[c->stage[st].device + 1]++;
  for (int d = 0; d < D; d++)
    x.first[d + 1] += x.first[d];
  int *fill = g_memdup2(x.first, sizeof(int) * (D + 1)), *stack = g_new(int, D), top = 0;
  for (int st = 0; st < W; st++)
    x.on[fill[c->stage[st].device]++] = st;
  gboolean *queued = g_new(gboolean, D);
  for (int d = D - 1; d >= 0; d--)
    stack[top++] = d, queued[d] = TRUE;
  while (top > 0) { /* a device as far as it can go, then the devices of its stages' neighbours */
    int d = stack[--top];
    queued[d] = FALSE;
    gboolean moved = FALSE;
    while (decide(&x, d))
      moved = TRUE;
    for (int i = x.first[d]; moved && i < x.first[d + 1]; i++)
      for (int nb = x.on[i] - 1; nb <= x.on[i] + 1; nb += 2)
        if (nb >= 0 && nb < W && !queued[c->stage[nb].device])
          stack[top++] = c->stage[nb].device, queued[c->stage[nb].device] = TRUE;
  }
  gboolean done = TRUE;
  double span = 0;
  for (int st = 0; st < W; st++)
    done = done && x.pos[st] == tp_stage_len(s, st), span = MAX(span, x.clock[st]);
  sim->makespan = span;
  g_free(x.pos), g_free(x.clock), g_free(x.dev_free), g_free(x.link_free), g_free(x.first), g_free(x.on), g_free(x.sum), g_free(x.xdur), g_free(x.bound);
  g_free(fill), g_free(stack), g_free(queued);
  return done;
}
