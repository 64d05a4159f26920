/* tp_plan_memory.c — whether any split of a plan search's candidate might fit its devices, decided
 * before simulating it (tp_plan.h).  A stage's simulated peak is at least its weights (one version
 * is always live), optimizer state, gradient and reduction buffers, and the activations it holds when
 * its first backward starts: every forward before that backward is still held, and which forwards
 * come first is the order's own, the same on every split (the micro-batches held, from the schedule
 * itself, kept per order and policy, W and N for the whole search; recomputing, one as workspace).  The layers
 * are then tried every way into the stages: no split whose every stage is within its device's
 * memory, no plan that fits.  The same cache keeps each schedule's peaks on unit slots, where the
 * split under the memory starts (tp_fit_memory_from). */
#include "tp_plan.h"
#include "tp_costed.h"
#include "tp_fit.h"
#include "tp_replay.h"

#include <string.h>

/* A bound below its limit by less than this is no proof: sums in another order round otherwise. */
#define MAY_FIT_SLACK 1e-9

struct TpPlanActs {
  GMutex lock;
  GHashTable *held;  /* "order:policy:W:N" -> int[W] */
  GHashTable *peaks; /* "order:policy:W:N:recompute" -> int[2W] */
};

TpPlanActs *tp_plan_acts_new(void)
{
  TpPlanActs *t = g_new0(TpPlanActs, 1);
  g_mutex_init(&t->lock);
  t->held = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  t->peaks = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  return t;
}

void tp_plan_acts_free(TpPlanActs *t)
{
  if (!t)
    return;
  g_hash_table_destroy(t->held);
  g_hash_table_destroy(t->peaks);
  g_mutex_clear(&t->lock);
  g_free(t);
}

void tp_plan_held_acts(const TpPreset *ps, int W, int N, int *held)
{
  for (int st = 0; st < W; st++)
    held[st] = 1; /* a backward consumes at least one micro-batch's activations */
  /* an order fixed on the costs depends on the split: only that one micro-batch is certain */
  if (tp_order_depends_on_costs(ps->order))
    return;
  TpPrepared prep = { .untimed = TRUE }; /* the order alone is read */
  g_autoptr(TpSchedule) s = tp_schedule_generate_prepared(ps->order, ps->policy, W, N, tp_default_mini_batches(W), &prep,
                                                          NULL);
  tp_prepared_clear(&prep);
  for (int st = 0; s && s->W == W && st < W; st++) { /* (a worker's chunks as stages: no bound) */
    const TpOp *ops = tp_stage_ops(s, st);
    int n = tp_stage_len(s, st), count = 0;
    for (int k = 0; k < n && !tp_op_sends_up(ops[k].kind) && ops[k].kind != TP_OP_W; k++)
      count += ops[k].kind == TP_OP_F ? tp_op_count(s, &ops[k]) : 0;
    held[st] = MAX(count, 1);
  }
}

/* The value under key in table (the search's threads share it), or `mine` inserted there: `mine` is
 * freed when another thread inserted first. */
static const int *keep(TpPlanActs *t, GHashTable *table, char *key, int *mine)
{
  g_mutex_lock(&t->lock);
  const int *kept = g_hash_table_lookup(table, key);
  if (!kept)
    g_hash_table_insert(table, key, mine), kept = mine;
  else
    g_free(key), g_free(mine);
  g_mutex_unlock(&t->lock);
  return kept;
}

static const int *lookup(TpPlanActs *t, GHashTable *table, const char *key)
{
  g_mutex_lock(&t->lock);
  const int *kept = g_hash_table_lookup(table, key);
  g_mutex_unlock(&t->lock);
  return kept;
}

/* The micro-batches each stage of p's order holds at its first backward, computed once per key. */
static const int *held_of(TpPlanActs *t, const TpPlan *p)
{
  char *key = g_strdup_printf("%d:%d:%d:%d", p->preset->order, p->preset->policy, p->W, p->N);
  const int *held = lookup(t, t->held, key);
  if (held) {
    g_free(key);
    return held;
  }
  int *mine = g_new(int, p->W);
  tp_plan_held_acts(p->preset, p->W, p->N, mine);
  return keep(t, t->held, key, mine);
}

TpSchedule *tp_plan_schedule_peaks(TpPlanActs *t, const TpPlan *p, const int **peaks, GError **err)
{
  char *key = g_strdup_printf("%d:%d:%d:%d:%d", p->preset->order, p->preset->policy, p->W, p->N, p->recompute);
  *peaks = lookup(t, t->peaks, key);
  TpPrepared prep = { .untimed = *peaks != NULL }; /* known peaks: the order alone is read */
  TpSchedule *s = tp_schedule_generate_prepared(p->preset->order, p->preset->policy, p->W, p->N,
                                                tp_default_mini_batches(p->W), &prep, err);
  if (s)
    s->recompute = p->recompute;
  if (s && !*peaks) {
    int *mine = g_new(int, 2 * p->W);
    if (tp_fit_unit_peaks(s, &prep, mine, mine + p->W, err))
      *peaks = keep(t, t->peaks, g_steal_pointer(&key), mine);
    else {
      g_free(mine);
      g_clear_pointer(&s, tp_schedule_free);
    }
  }
  tp_prepared_clear(&prep);
  g_free(key);
  return s;
}

/* Stage s's least bytes on layers [lo, hi): what every weight byte brings (`per_weight`: itself,
 * optimizer state, buffers) and `held` micro-batches of its stored activations.  Recomputing, one
 * micro-batch's activations as workspace: the stored inputs are left out (a simulated peak need not
 * hold them beside it: gpipe W = 1 recomputing peaks at its weights and workspace alone). */
static double least_bytes(const TpAnalytic *a, int lo, int hi, double per_weight, int held)
{
  const TpAnalyticTables *tab = &a->tab;
  double params = tp_tables_params(tab, lo, hi), stored = tab->stored_prefix[hi] - tab->stored_prefix[lo];
  return per_weight * params + a->micro * (a->recompute ? 1 : held) * stored;
}

/* Bytes per weight byte that cost model c gives each stage: all are proportional to the weights. */
static double per_weight(const TpCost *c)
{
  for (int s = 0; s < c->W; s++) {
    const TpStageCost *sc = &c->stage[s];
    if (sc->weight_bytes > 0)
      return (sc->weight_bytes + sc->optimizer_bytes + sc->grad_buffer_bytes) / sc->weight_bytes;
  }
  return 1;
}

/* Whether stages share a memory: then they are judged together (the simulation's test), not here. */
static gboolean shared_memory(const TpAnalytic *a, const TpCost *c)
{
  for (int s = 0; s < c->W; s++)
    for (int u = 0; u < s; u++)
      if (c->stage[s].device == c->stage[u].device)
        return TRUE;
  return a->profile != NULL;
}

gboolean tp_plan_split_over(TpPlanActs *t, const TpPlan *p, const TpAnalytic *a, const TpCost *c)
{
  if (shared_memory(a, c))
    return FALSE;
  const int *held = held_of(t, p);
  for (int s = 0; s < c->W; s++) {
    const TpStageCost *sc = &c->stage[s];
    double acts = (p->recompute ? 1 : held[s]) * sc->stored_bytes; /* as least_bytes counts them */
    if (sc->weight_bytes + sc->optimizer_bytes + sc->grad_buffer_bytes + acts > tp_analytic_capacity(a, s) * (1 + MAY_FIT_SLACK))
      return TRUE;
  }
  return FALSE;
}

gboolean tp_plan_may_fit(TpPlanActs *t, const TpPlan *p, const TpAnalytic *a, const TpCost *c)
{
  int W = p->W, L = tp_model_n_layers(a->model);
  if (shared_memory(a, c))
    return TRUE;
  const int *held = held_of(t, p);
  double pw = per_weight(c);
  /* reach[l]: layers [0, l) split over the stages so far, each within its memory */
  g_autofree gboolean *reach = g_new0(gboolean, L + 1);
  g_autofree int *starts = g_new0(int, L + 2);
  reach[0] = TRUE;
  for (int s = 0; s < W; s++) {
    double cap = tp_analytic_capacity(a, s) * (1 + MAY_FIT_SLACK);
    if (!(cap > 0))
      return TRUE;
    int last = L - (W - 1 - s); /* every later stage keeps a layer */
    memset(starts, 0, (L + 2) * sizeof *starts);
    for (int lo = 0; lo < last; lo++) {
      if (!reach[lo] || least_bytes(a, lo, lo + 1, pw, held[s]) > cap)
        continue;
      int ok = lo + 1, bad = last + 1; /* bytes grow with hi: the last hi within cap */
      while (bad - ok > 1) {
        int mid = (ok + bad) / 2;
        if (least_bytes(a, lo, mid, pw, held[s]) <= cap)
          ok = mid;
        else
          bad = mid;
      }
      starts[lo + 1]++, starts[ok + 1]--; /* [lo + 1, ok], as differences */
    }
    gboolean any = FALSE;
    for (int l = 0, open = 0; l <= L; l++)
      open += starts[l], reach[l] = open > 0, any = any || open > 0;
    if (!any)
      return FALSE;
  }
  return reach[L];
}
