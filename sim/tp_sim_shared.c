/* tp_sim_shared.c — the costed replay where stages share devices (tp_sim_priv.h): the event loop's
 * timeline, decided device by device without the event queue.
 *
 * When device d frees at T, the event loop offers it to every stage on it, lowest first, once this
 * instant's completions (and the arrivals they make) are in: the device starts, at
 * S = max(T, the earliest next input among its stages), the lowest stage whose next input has
 * arrived by S.  That holds only while no operation that sends ends at its own start (its message
 * would arrive later in the same instant, after a higher stage took the device): such an operation
 * ends the replay, and the caller runs the event loop.  A decision needs the next input of every
 * stage on the device; one not computed yet is bounded below (its producer's stage and device cannot
 * end it sooner, nor its link deliver it sooner), and the decision waits unless that bound lies
 * beyond S by more than the rounding of both sums.  Devices are decided as far as they can be, the
 * devices of the neighbouring stages woken, and every device tried again while any moved; where none
 * can, the caller runs the event loop.  Every time is the event loop's own sum, so the two agree bit
 * for bit. */
#include "tp_sim_priv.h"

#include <float.h>
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
  double margin;     /* relative: what the rounding of a bound's sums and of the event loop's may take */
} Shared;

enum { WAIT, RAN, GIVE_UP };

/* The time of stage st's operations k0 .. k1-1 together (summed otherwise than the event loop sums). */
static inline double ops_time(const Shared *x, int st, long k0, long k1)
{
  const double *row = x->sum + x->sim->ix->off[st] + st;
  return row[k1] - row[k0];
}

/* The producer of operation g (global index) of stage st, and in *pst its stage: a forward's is the
 * stage before, a backward's the stage after. */
static long producer_of(const Shared *x, int st, long g, int *pst)
{
  const TpIndex *ix = x->sim->ix;
  *pst = tp_stage_ops(x->s, st)[g - ix->off[st]].kind == TP_OP_F ? st - 1 : st + 1;
  return ix->prod[g];
}

/* The producer of stage st's next operation, as (stage, global index); FALSE when it has none. */
static gboolean producer(const Shared *x, int st, int *pst, long *p)
{
  *p = producer_of(x, st, x->sim->ix->off[st] + x->pos[st], pst);
  return *p != -1;
}

/* Where op k of stage st (global index g) has its input, known or bounded `depth` producers back, or
 * 0 when it receives none. */
static double input_bound(const Shared *x, int st, long g, int depth);

/* A time before which the message of operation p (global index, at stage pst, not computed yet)
 * cannot arrive: the stage first ends what comes before p (each no sooner than the device frees, the
 * first no sooner than its input arrives), p no sooner than its own input arrives (bounded the same
 * way, `depth` producers back), then its link delivers. */
static double arrival_bound(const Shared *x, int pst, long p, int depth)
{
  const TpIndex *ix = x->sim->ix;
  const TpOp *ops = tp_stage_ops(x->s, pst);
  long k = p - ix->off[pst], j = x->pos[pst];
  double t = MAX(x->clock[pst], x->dev_free[x->c->stage[pst].device]);
  if (j < k) /* the next operation's input, cheaply */
    t = MAX(t, input_bound(x, pst, ix->off[pst] + j, 0));
  t = MAX(t + ops_time(x, pst, j, k), input_bound(x, pst, p, depth)) + ops_time(x, pst, k, k + 1);
  double d = x->xdur[p];
  t = MAX(t, x->link_free[tp_link_of(x->W, pst, ops[k].kind)]);
  return d > 0 ? t + d : t;
}

static double input_bound(const Shared *x, int st, long g, int depth)
{
  int qst;
  long q = producer_of(x, st, g, &qst);
  if (q < 0)
    return 0;
  if (q - x->sim->ix->off[qst] < x->pos[qst])
    return x->sim->xend[q];
  return depth > 0 ? arrival_bound(x, qst, q, depth - 1) : 0;
}

/* Stage st's next operation starts at `at`: its times, its message on its link; FALSE when it sends and
 * ends at its own start. */
static gboolean run_op(Shared *x, int st, double at)
{
  TpSim *sim = x->sim;
  const TpOp *op = &tp_stage_ops(x->s, st)[x->pos[st]];
  long g = sim->ix->off[st] + x->pos[st]++;
  x->bound[st] = -1;
  sim->start[g] = at;
  x->clock[st] = x->dev_free[x->c->stage[st].device] = sim->end[g] = at + tp_sim_op_dur(sim, st, op);
  if (sim->cons[g] < 0)
    return TRUE;
  if (sim->end[g] == at)
    return FALSE;
  tp_sim_transfer(sim, g, x->xdur[g], &x->link_free[tp_link_of(x->W, st, op->kind)]);
  return TRUE;
}

/* Whether a bound b on an arrival, summed otherwise than the event loop sums the arrival, still shows
 * it no sooner than S. */
static inline gboolean beyond(const Shared *x, double b, double S) { return b > S + fabs(S) * x->margin; }

/* Device d's next decision, if every input it needs is known well enough: RAN, WAIT or GIVE_UP. */
static int decide(Shared *x, int d)
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
      return GIVE_UP; /* a producer the index did not find: left to the event loop */
    else if (p - ix->off[from[i]] < x->pos[from[i]])
      ready[i] = MAX(T, x->sim->xend[p]);
    else
      unknown[i] = p;
    S = MIN(S, ready[i]);
  }
  if (S == G_MAXDOUBLE)
    return WAIT;
  /* an input not known yet must come after S: bounded cheaply first, then through its producers
   * (a bound only grows as more is known: one beyond S stays so) */
  for (int i = 0; i < n; i++) {
    int st = x->on[x->first[d] + i];
    double *b = &x->bound[st];
    if (unknown[i] < 0 || beyond(x, *b, S))
      continue;
    if (!beyond(x, *b = arrival_bound(x, from[i], unknown[i], 0), S) &&
        !beyond(x, *b = arrival_bound(x, from[i], unknown[i], BOUND_DEPTH), S))
      return WAIT;
  }
  for (int i = 0; i < n; i++) /* the lowest stage whose input is there by S */
    if (ready[i] <= S)
      return run_op(x, x->on[x->first[d] + i], S) ? RAN : GIVE_UP;
  return WAIT;
}

/* Each stage's operations' times summed, each message's link time, the stages of each device, and
 * the rounding margin: a bound's prefix differences through BOUND_DEPTH producers and the event
 * loop's chain of sums err by at most that many operations' unit roundoffs, relative (doubled). */
static void setup(Shared *x)
{
  TpSim *sim = x->sim;
  const TpSchedule *s = x->s;
  const TpCost *c = x->c;
  long longest = 0;
  for (int st = 0; st < x->W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    double *row = x->sum + sim->ix->off[st] + st;
    row[0] = 0;
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      long g = sim->ix->off[st] + k;
      row[k + 1] = row[k] + tp_sim_op_dur(sim, st, &ops[k]);
      x->xdur[g] = sim->cons[g] < 0 ? 0
                   : tp_sim_link_time(c, tp_link_of(x->W, st, ops[k].kind), tp_sim_op_bytes(c, s, st, &ops[k]));
    }
    x->bound[st] = -1;
    longest = MAX(longest, (long)tp_stage_len(s, st));
    x->first[c->stage[st].device + 1]++;
  }
  x->margin = MAX(1e-9, 2 * (sim->n_ops + 2.0 * (BOUND_DEPTH + 2) * longest) * DBL_EPSILON);
  for (int d = 0; d < c->n_devices; d++)
    x->first[d + 1] += x->first[d];
  int *fill = g_memdup2(x->first, sizeof(int) * (c->n_devices + 1));
  for (int st = 0; st < x->W; st++)
    x->on[fill[c->stage[st].device]++] = st;
  g_free(fill);
}

/* Devices as far as they go, each waking the devices of its stages' neighbours, until none moves:
 * FALSE when the replay must give up. */
static gboolean sweep(Shared *x)
{
  const int D = x->c->n_devices;
  int *stack = g_new(int, D), top = 0, state = RAN;
  gboolean *queued = g_new0(gboolean, D), moved_any = TRUE;
  while (moved_any && state != GIVE_UP) { /* every device again while any moved */
    moved_any = FALSE;
    for (int d = D - 1; d >= 0; d--)
      if (!queued[d])
        stack[top++] = d, queued[d] = TRUE;
    while (top > 0 && state != GIVE_UP) {
      int d = stack[--top];
      gboolean moved = FALSE;
      queued[d] = FALSE;
      while ((state = decide(x, d)) == RAN)
        moved = moved_any = TRUE;
      for (int i = x->first[d]; moved && i < x->first[d + 1]; i++)
        for (int nb = x->on[i] - 1; nb <= x->on[i] + 1; nb += 2)
          if (nb >= 0 && nb < x->W && !queued[x->c->stage[nb].device])
            stack[top++] = x->c->stage[nb].device, queued[x->c->stage[nb].device] = TRUE;
    }
  }
  g_free(stack);
  g_free(queued);
  return state != GIVE_UP;
}

gboolean tp_sim_replay_shared(TpSim *sim)
{
  const TpSchedule *s = sim->s;
  const int W = s->W, D = sim->c->n_devices;
  Shared x = { .sim = sim, .s = s, .c = sim->c, .W = W, .pos = g_new0(int, W), .clock = g_new0(double, W),
               .dev_free = g_new0(double, D), .link_free = g_new0(double, MAX(tp_sim_n_links(W), 1)),
               .first = g_new0(int, D + 1), .on = g_new(int, W), .sum = g_new(double, sim->n_ops + W),
               .xdur = g_new(double, sim->n_ops), .bound = g_new(double, W) };
  setup(&x);
  gboolean done = sweep(&x);
  double span = 0;
  for (int st = 0; st < W; st++)
    done = done && x.pos[st] == tp_stage_len(s, st), span = MAX(span, x.clock[st]);
  sim->makespan = span;
  g_free(x.pos), g_free(x.clock), g_free(x.dev_free), g_free(x.link_free);
  g_free(x.first), g_free(x.on), g_free(x.sum), g_free(x.xdur), g_free(x.bound);
  return done;
}
