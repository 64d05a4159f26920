/* tp_validate.c — static validation: completeness, same-stage order, versions, deadlock. */
#include "tp_validate.h"
#include "tp_error.h"
#include "tp_index.h"
#include "tp_memory.h"
#include "tp_parallel.h"
#include "tp_policy.h"
#include "tp_replay.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

G_GNUC_PRINTF(5, 6)
static gboolean fail(GError **err, const TpSchedule *s, int st, const TpOp *op, const char *fmt, ...)
{
  char where[512], what[64];
  tp_op_where(s, op, where, sizeof where);
  tp_op_name(s, op, what, sizeof what);
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *reason = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%s at stage %d: %s", where, what, st + 1, reason);
  return FALSE;
}

static gboolean missing(GError **err, const TpSchedule *s, int st, TpOpKind kind, int mb, int micro)
{
  TpOp op = { .kind = (uint8_t)kind, .mb = mb, .micro = micro };
  char what[64];
  tp_op_name(s, &op, what, sizeof what);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%sstage %d has no %s: the schedule is incomplete",
              s->source ? s->source : "", s->source ? ": " : "", st + 1, what);
  return FALSE;
}

/* A split backward of mini-batch i at stage st: every I has its W, after it; every W has its I. */
static gboolean check_split(const TpSchedule *s, const TpIndex *ix, int st, int i, GError **err)
{
  const int32_t *bp = ix->bpos + (size_t)st * ix->nkeys;
  const TpOp *ops = tp_stage_ops(s, st);
  for (int j = TP_WHOLE; j < s->N; j++) {
    int key = tp_key(s->N, i, j);
    int32_t b = bp[key], w = tp_index_wpos(ix, st, key);
    if (b < 0 && w < 0)
      continue;
    if (w >= 0 && (b < 0 || ops[b].kind != TP_OP_I))
      return fail(err, s, st, &ops[w], "has no input gradient %s on its stage to follow (a W follows the I of "
                  "the same micro-batches)", b < 0 ? "I" : "I (a whole backward B is there)");
    if (w < 0 && ops[b].kind == TP_OP_I)
      return missing(err, s, st, TP_OP_W, i, j);
    if (w >= 0 && w < b)
      return fail(err, s, st, &ops[w], "comes before its input gradient at position %d: a W follows its I",
                  b + 1);
  }
  return TRUE; /* I and W come in the zero-bubble orders only (backwards_of_order), which take sync only */
}

/* Every mini-batch is covered once by forwards and once by backwards (whole or per micro-batch),
 * and has one update, on each of stages lo..hi-1. */
static gboolean check_complete(const TpSchedule *s, const TpIndex *ix, int lo, int hi, GError **err)
{
  for (int st = lo; st < hi; st++) {
    const int32_t *fp = ix->fpos + (size_t)st * ix->nkeys, *bp = ix->bpos + (size_t)st * ix->nkeys;
    for (int i = 1; i <= s->K; i++) {
      const int32_t *p[2] = { fp, bp };
      for (int kind = 0; kind < 2; kind++) {
        gboolean whole = p[kind][tp_key(s->N, i, TP_WHOLE)] >= 0;
        /* the usual case first, in one branch-free count: all micro-batches or none of them */
        const int32_t *part = &p[kind][tp_key(s->N, i, 0)];
        int parts = 0;
        for (int j = 0; j < s->N; j++)
          parts += part[j] >= 0;
        if (parts == (whole ? 0 : s->N))
          continue;
        for (int j = 0; j < s->N; j++) {
          gboolean part = p[kind][tp_key(s->N, i, j)] >= 0;
          if (whole && part) {
            const TpOp *op = &tp_stage_ops(s, st)[p[kind][tp_key(s->N, i, j)]];
            return fail(err, s, st, op, "mini-batch %d is covered twice (also by a whole-mini-batch %s)", i,
                        kind ? "backward" : "forward");
          }
          if (!whole && !part)
            return missing(err, s, st, kind ? TP_OP_B : TP_OP_F, i, j);
        }
      }
      if (ix->upos[(size_t)st * (s->K + 1) + i] < 0)
        return missing(err, s, st, TP_OP_U, i, 0);
      if (!check_split(s, ix, st, i, err))
        return FALSE;
    }
  }
  return TRUE;
}

/* The producer of every operation of stages lo..hi-1 on the neighbouring stage exists with the same
 * granularity. */
static gboolean check_producers(const TpSchedule *s, const TpIndex *ix, int lo, int hi, GError **err)
{
  for (int st = lo; st < hi; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      int pst = st;
      if (ix->prod[ix->off[st] + k] == -2 && tp_index_producer(ix, s, st, &ops[k], &pst) == -2) {
        char what[64];
        tp_op_name(s, &ops[k], what, sizeof what);
        return fail(err, s, st, &ops[k], "stage %d has no matching %s to receive from (granularity differs)",
                    pst + 1, what);
      }
    }
  }
  return TRUE;
}

/* Position of the latest forward (at stage st) whose activations op needs, or -1. */
static int32_t last_forward(const TpSchedule *s, const TpIndex *ix, int st, const TpOp *op, int *which)
{
  const int32_t *fp = ix->fpos + (size_t)st * ix->nkeys;
  int32_t whole = fp[tp_key(s->N, op->mb, TP_WHOLE)];
  if (whole >= 0 || op->micro != TP_WHOLE) {
    int32_t p = whole >= 0 ? whole : fp[tp_key(s->N, op->mb, op->micro)];
    *which = whole >= 0 ? TP_WHOLE : op->micro;
    return p;
  }
  int32_t best = -1;
  for (int j = 0; j < s->N; j++)
    if (fp[tp_key(s->N, op->mb, j)] > best) {
      best = fp[tp_key(s->N, op->mb, j)];
      *which = j;
    }
  return best;
}

/* The oldest version any forward of op's micro-batches read at stage st (the stash). */
static int stashed_version(const TpSchedule *s, const TpIndex *ix, int st, const TpOp *op)
{
  const int32_t *fp = ix->fpos + (size_t)st * ix->nkeys;
  const TpOp *ops = tp_stage_ops(s, st);
  int32_t whole = fp[tp_key(s->N, op->mb, TP_WHOLE)];
  if (whole >= 0)
    return ops[whole].ver;
  if (op->micro != TP_WHOLE)
    return ops[fp[tp_key(s->N, op->mb, op->micro)]].ver;
  int v = G_MAXINT;
  for (int j = 0; j < s->N; j++)
    v = MIN(v, ops[fp[tp_key(s->N, op->mb, j)]].ver);
  return v;
}

/* An update at position k of stage st, after `latest` updates: in mini-batch order, turning version
 * mb - 1 into mb, after every backward (and weight gradient) of its mini-batch. */
static gboolean check_update(const TpSchedule *s, const TpIndex *ix, int st, int k, int latest, GError **err)
{
  const TpOp *op = &tp_stage_ops(s, st)[k];
  char need[64];
  if (latest != op->mb - 1)
    return fail(err, s, st, op, "comes after %d updates: updates must run in mini-batch order", latest);
  /* it turns version mb - 1 into mb: its row says so, with no other source */
  if (op->ver != latest || op->src != TP_SRC_FIXED)
    return fail(err, s, st, op, "turns version %d into %d, so its row says version %d, source fixed (not %d, %s)",
                latest, latest + 1, latest, op->ver, tp_source_names[op->src]);
  const int32_t *bp = ix->bpos + (size_t)st * ix->nkeys, *row = &bp[tp_key(s->N, op->mb, TP_WHOLE)];
  int32_t last = -1; /* the usual case first, in one branch-free pass: no backward after k */
  for (int j = 0; j <= s->N; j++)
    last = MAX(last, row[j]);
  for (int j = TP_WHOLE; last > k && j < s->N; j++) {
    int32_t p = bp[tp_key(s->N, op->mb, j)];
    if (p > k) {
      tp_op_name(s, &tp_stage_ops(s, st)[p], need, sizeof need);
      return fail(err, s, st, op, "comes before %s, whose gradient it applies", need);
    }
  }
  for (int j = TP_WHOLE; ix->wpos && j < s->N; j++) {
    int32_t p = tp_index_wpos(ix, st, tp_key(s->N, op->mb, j));
    if (p > k) {
      tp_op_name(s, &tp_stage_ops(s, st)[p], need, sizeof need);
      return fail(err, s, st, op, "comes before %s, the weight gradient it applies", need);
    }
  }
  return TRUE;
}

/* vsync-latest's reference: the version stage 1's forward (fwd) or stage W's backward (bwd) of each
 * key reads, -1 where it has none; every other stage reads the same. */
typedef struct {
  int32_t *fwd, *bwd;
} VsyncRef;

static void vsync_ref_init(const TpSchedule *s, const TpIndex *ix, VsyncRef *r)
{
  r->fwd = r->bwd = NULL;
  if (s->policy != TP_POLICY_VSYNC_LATEST)
    return;
  r->fwd = g_new(int32_t, ix->nkeys), r->bwd = g_new(int32_t, ix->nkeys);
  const int32_t *fp = ix->fpos, *bp = ix->bpos + (size_t)(s->W - 1) * ix->nkeys;
  const TpOp *o0 = tp_stage_ops(s, 0), *ow = tp_stage_ops(s, s->W - 1);
  for (int key = 0; key < ix->nkeys; key++) {
    r->fwd[key] = fp[key] >= 0 ? o0[fp[key]].ver : -1;
    r->bwd[key] = bp[key] >= 0 ? ow[bp[key]].ver : -1;
  }
}

/* The version op (at stage st, after `latest` updates) must read under the policy, -1 when it is
 * free to read any, with the rule that says so and the source it must name. */
static int policy_want(const TpSchedule *s, const TpIndex *ix, const VsyncRef *ref, int st, const TpOp *op,
                       int latest, const char **rule, TpSource *src)
{
  *rule = NULL, *src = TP_SRC_FIXED;
  switch (s->policy) {
  case TP_POLICY_SYNC: *rule = "mini-batch i reads version i-1"; return op->mb - 1;
  case TP_POLICY_2BW: *rule = "mini-batch i reads version max(i-2, 0)"; return MAX(op->mb - 2, 0);
  case TP_POLICY_LATEST: *rule = "every operation reads the latest version"; return latest;
  case TP_POLICY_STASH:
  case TP_POLICY_INTERMEDIATE:
    if (op->kind == TP_OP_F) {
      *rule = "a forward reads the latest version";
      return latest;
    }
    *rule = "a backward reads the versions its forwards stashed";
    *src = s->policy == TP_POLICY_STASH ? TP_SRC_STASH : TP_SRC_BLEND;
    return stashed_version(s, ix, st, op);
  case TP_POLICY_VSYNC_LATEST: /* every stage reads what stage 1 (forward) or stage W (backward) reads */
    if (st != (op->kind == TP_OP_F ? 0 : s->W - 1)) {
      *rule = op->kind == TP_OP_F ? "a forward reads the version stage 1 read (vertical sync)"
                                  : "a backward reads the version it reads on stage W (vertical sync)";
      if (op->kind == TP_OP_W) /* a weight gradient: the one at stage W (not in the table) */
        return tp_stage_ops(s, s->W - 1)[tp_index_pos(ix, s->W - 1, op)].ver;
      return (op->kind == TP_OP_F ? ref->fwd : ref->bwd)[tp_key(s->N, op->mb, op->micro)];
    }
    if (op->kind == TP_OP_F)
      *rule = "on stage 1 a forward reads the latest version";
    return op->kind == TP_OP_F ? latest : -1;
  default: return -1;
  }
}

static gboolean check_op(const TpSchedule *s, const TpIndex *ix, const VsyncRef *ref, int st, int k, int latest,
                         GError **err)
{
  const TpOp *op = &tp_stage_ops(s, st)[k];
  char need[64];
  if (op->kind == TP_OP_U)
    return check_update(s, ix, st, k, latest, err);
  if (tp_op_sends_up(op->kind)) {
    const int32_t *fp = ix->fpos + (size_t)st * ix->nkeys, *row = &fp[tp_key(s->N, op->mb, TP_WHOLE)];
    int32_t p = row[0];
    if (p < 0 && op->micro != TP_WHOLE)
      p = row[1 + op->micro];
    else if (p < 0) /* the usual case first, in one branch-free pass: the latest forward */
      for (int j = 1; j <= s->N; j++)
        p = MAX(p, row[j]);
    int which = TP_WHOLE;
    if (p > k && (p = last_forward(s, ix, st, op, &which)) > k) {
      TpOp f = { .kind = TP_OP_F, .mb = op->mb, .micro = which };
      tp_op_name(s, &f, need, sizeof need);
      return fail(err, s, st, op, "needs the activations of %s, which comes later in that stage's order", need);
    }
  }
  if (op->ver > latest)
    return fail(err, s, st, op, "reads version %d, which does not exist yet (stage %d has version %d here)",
                op->ver, st + 1, latest);
  int keep = s->policy == TP_POLICY_SYNC || s->policy == TP_POLICY_LATEST ? 1 : s->policy == TP_POLICY_2BW ? 2 : 0;
  if (keep > 0 && op->ver <= latest - keep)
    return fail(err, s, st, op, "reads version %d after it was freed (policy %s keeps %s; latest is %d)", op->ver,
                tp_policy_name(s->policy), keep == 1 ? "only the latest version" : "the two latest versions",
                latest);
  const char *rule;
  TpSource src;
  int want = policy_want(s, ix, ref, st, op, latest, &rule, &src);
  if (op->src != src)
    return fail(err, s, st, op, "weight source does not fit policy %s", tp_policy_name(s->policy));
  if (want >= 0 && op->ver != want)
    return fail(err, s, st, op, "reads version %d, but under policy %s %s: version %d", op->ver,
                tp_policy_name(s->policy), rule, want);
  return TRUE;
}

/* vsync-latest's backward versions, at the first backward of each mini-batch on stage W (the
 * other stages must read the same, checked above).  Fixed on unit slots: exactly c(i) on the
 * unit-slot replay.  Fixed on costs, whose times are not in the schedule: what every timeline of
 * these orders allows, between the updates of stage 1 that happen before B(i) starts at stage W
 * and those that do not happen after it (at most i-1). */
static gboolean check_vsync(const TpSchedule *s, const TpIndex *ix, const int64_t *start, const int64_t *end,
                            GError **err)
{
  const int W = s->W, n1 = tp_stage_len(s, 0), nw = tp_stage_len(s, W - 1);
  const TpOp *ow = tp_stage_ops(s, W - 1);
  int32_t *lo = g_new(int32_t, s->K + 1), *hi = g_new(int32_t, s->K + 1);
  gboolean ok = TRUE, slots = s->fixed_on == TP_FIXED_ON_SLOTS;
  if (slots) {
    double *e1 = g_new(double, n1), *sw = g_new(double, nw), *ew = g_new(double, nw);
    for (int k = 0; k < n1; k++)
      e1[k] = (double)end[ix->off[0] + k];
    for (int k = 0; k < nw; k++)
      sw[k] = (double)start[ix->off[W - 1] + k], ew[k] = (double)end[ix->off[W - 1] + k];
    ok = tp_vsync_versions(s, ix, e1, sw, ew, lo, err);
    memcpy(hi, lo, (s->K + 1) * sizeof *hi);
    g_free(e1);
    g_free(sw);
    g_free(ew);
  } else {
    ok = tp_causal_bounds(s, ix, lo, hi);
  }
  gboolean *seen = g_new0(gboolean, s->K + 1);
  for (int k = 0; ok && k < nw; k++) {
    const TpOp *op = &ow[k];
    int i = op->mb;
    if (op->kind != TP_OP_B || seen[i])
      continue;
    seen[i] = TRUE;
    if (slots && op->ver != lo[i])
      ok = fail(err, s, W - 1, op,
                "reads version %d, expected %d: under policy vsync-latest B(%d) reads c(%d), the updates stage 1 "
                "has finished when B(%d) starts at stage %d, on the unit-slot timeline the order was fixed on",
                op->ver, lo[i], i, i, i, W);
    else if (!slots && (op->ver < lo[i] || op->ver > hi[i]))
      ok = fail(err, s, W - 1, op,
                "reads version %d, expected %d to %d: under policy vsync-latest B(%d) reads c(%d), the updates "
                "stage 1 has finished when B(%d) starts at stage %d; whatever the costs, these orders put at "
                "least %d and at most %d of them before that start",
                op->ver, lo[i], hi[i], i, i, i, W, lo[i], hi[i]);
  }
  g_free(seen);
  g_free(lo);
  g_free(hi);
  return ok;
}

/* Interleaved stages: V divides W, a named map, and every rank's order lists each operation of its own
 * stages exactly once (the replay checks that the orders can run). */
static gboolean check_chunks(const TpSchedule *s, GError **err)
{
  const char *src = s->source ? s->source : "", *sep = s->source ? ": " : "";
  if (!s->rank_seq)
    return TRUE;
  if (s->V < 2 || s->W % s->V != 0 || s->map == TP_MAP_NONE) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%s%d stages do not split into %d chunks per worker by map %s", src, sep,
                s->W, s->V, tp_chunk_map_name(s->map));
    return FALSE;
  }
  int R = tp_schedule_ranks(s);
  int *count = g_new0(int, s->W);
  gboolean ok = TRUE;
  for (int r = 0; r < R && ok; r++)
    for (guint k = 0; k < s->rank_seq[r]->len && ok; k++) {
      int st = g_array_index(s->rank_seq[r], int32_t, k);
      if (st < 0 || st >= s->W || tp_stage_rank(s, st) != r) {
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%sworker %d runs an operation of stage %d, which map %s puts on "
                    "worker %d", src, sep, r + 1, st + 1, tp_chunk_map_name(s->map),
                    st >= 0 && st < s->W ? tp_stage_rank(s, st) + 1 : 0);
        ok = FALSE;
      } else
        count[st]++;
    }
  for (int st = 0; st < s->W && ok; st++)
    if (count[st] != tp_stage_len(s, st)) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%sstage %d has %d operations, its worker's order runs %d of them",
                  src, sep, st + 1, tp_stage_len(s, st), count[st]);
      ok = FALSE;
    }
  g_free(count);
  return ok;
}

/* F&B composites: each a forward then a whole backward of another chunk on the rank, no two sharing an
 * operation. */
static gboolean check_fb(const TpSchedule *s, GError **err)
{
  for (int r = 0; s->fb && r < tp_schedule_ranks(s); r++) {
    int n = s->rank_seq ? (int)s->rank_seq[r]->len : tp_stage_len(s, r), next = 0, k = 0;
    g_autofree int *pos = g_new0(int, s->W);
    const TpOp *prev = NULL;
    int prev_st = r;
    for (guint c = 0; c < s->fb[r]->len; c++) {
      int at = g_array_index(s->fb[r], int32_t, c);
      for (; k < n && k <= at + 1; k++) {
        int st = s->rank_seq ? g_array_index(s->rank_seq[r], int32_t, k) : r;
        const TpOp *op = pos[st] < tp_stage_len(s, st) ? &tp_stage_ops(s, st)[pos[st]++] : NULL;
        if (k == at + 1 && op && prev && (prev->kind != TP_OP_F || op->kind != TP_OP_B || op->micro == TP_WHOLE))
          return fail(err, s, prev_st, prev, "an F&B composite is a forward then a backward of a micro-batch "
                      "(PyTorch's OVERLAP_F_B), not %c then %c", tp_op_letters[prev->kind], tp_op_letters[op->kind]);
        if (k == at + 1 && op && prev && st == prev_st)
          return fail(err, s, prev_st, prev, "an F&B composite overlaps a forward of one chunk with a backward of "
                      "another, not of the same stage %d", st + 1);
        prev = op, prev_st = st;
      }
      if (at < next || at + 1 >= n) {
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%sworker %d: F&B composite at place %d of %d in its order",
                    s->source ? s->source : "", s->source ? ": " : "", r + 1, at + 1, n);
        return FALSE;
      }
      next = at + 2;
    }
  }
  return TRUE;
}

/* Every operation of stages lo..hi-1 on its own: order, versions and sources. */
static gboolean check_ops(const TpSchedule *s, const TpIndex *ix, const VsyncRef *ref, int lo, int hi, GError **err)
{
  for (int st = lo; st < hi; st++) {
    int latest = 0;
    const TpOp *ops = tp_stage_ops(s, st);
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      if (ops[k].ver < 0)
        return fail(err, s, st, &ops[k], "version %d out of range", ops[k].ver);
      if (!check_op(s, ix, ref, st, k, latest, err))
        return FALSE;
      if (ops[k].kind == TP_OP_U)
        latest++;
    }
  }
  return TRUE;
}

/* The three passes over a range of stages; the pass that failed first (3: none) and its error. */
typedef struct {
  const TpSchedule *s;
  const TpIndex *ix;
  VsyncRef ref;
  int failed[TP_PARALLEL_MAX];
  GError *err[TP_PARALLEL_MAX];
} StaticWork;

static void static_range(void *ctx, int part, int lo, int hi)
{
  StaticWork *w = ctx;
  GError **e = &w->err[part];
  w->failed[part] = !check_complete(w->s, w->ix, lo, hi, e)    ? 0
                    : !check_producers(w->s, w->ix, lo, hi, e) ? 1
                    : !check_ops(w->s, w->ix, &w->ref, lo, hi, e) ? 2
                                                               : 3;
}

gboolean tp_validate_static(const TpSchedule *s, const TpIndex *ix, GError **err)
{
  if (!check_chunks(s, err) || !check_fb(s, err))
    return FALSE;
  /* the passes one after the other over every stage, on ranges of stages at once: the error is the
   * one of the earliest pass that fails, on its first range that fails (the same as in one range) */
  StaticWork w = { .s = s, .ix = ix };
  vsync_ref_init(s, ix, &w.ref);
  int parts = tp_parallel_parts(ix->off[s->W], s->W), first = -1;
  tp_parallel_ranges(s->W, parts, static_range, &w);
  g_free(w.ref.fwd);
  g_free(w.ref.bwd);
  for (int p = 0; p < parts; p++)
    if (w.failed[p] < 3 && (first < 0 || w.failed[p] < w.failed[first]))
      first = p;
  for (int p = 0; p < parts; p++)
    if (p != first)
      g_clear_error(&w.err[p]);
  if (first < 0)
    return TRUE;
  g_propagate_error(err, w.err[first]);
  return FALSE;
}

/* An nf1b schedule fixed on unit slots with whole-mini-batch forwards: fused forwards
 * (tp_schedule_fuse_forwards), whose versions are those of the schedule they were fused from. */
static gboolean fused_on_slots(const TpSchedule *s)
{
  if (s->order != TP_ORDER_NF1B || s->fixed_on != TP_FIXED_ON_SLOTS)
    return FALSE;
  for (int st = 0; st < s->W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++)
      if (tp_stage_ops(s, st)[k].kind == TP_OP_F && tp_stage_ops(s, st)[k].micro == TP_WHOLE)
        return TRUE;
  return FALSE;
}

/* vsync-latest's versions of a fused schedule, on the unit-slot timeline of the schedule it was
 * fused from (its whole forwards as micro-batch ones). */
static gboolean check_vsync_unfused(const TpSchedule *s, GError **err)
{
  g_autoptr(TpSchedule) u = tp_schedule_unfuse_forwards(s);
  g_autoptr(TpIndex) ix = tp_index_new(u, err);
  if (!ix)
    return FALSE;
  long total = ix->off[u->W];
  int64_t *start = g_new(int64_t, total), *end = g_new(int64_t, total);
  gboolean ok = tp_replay(u, ix, start, end, err) && check_vsync(u, ix, start, end, err);
  g_free(start);
  g_free(end);
  return ok;
}

/* The shape of a backward the order names: I and W only in the zero-bubble orders and in
 * interleaved-1f1b (PyTorch's interleaved zero-bubble schedule on round-robin chunks reads as that
 * family), which may also keep a backward unsplit (B); one whole mini-batch's in nf1b and
 * 1f1b-async, a micro-batch's in the others.
 * A file's order is what it says, and reports, fusion and the profiling follow it, so its backwards
 * must be the order's. */
static gboolean backwards_of_order(const TpSchedule *s, GError **err)
{
  gboolean split = tp_order_split(s->order) || tp_order_chunked(s->order);
  gboolean whole = s->order == TP_ORDER_NF1B || s->order == TP_ORDER_1F1B_ASYNC;
  const char *o = tp_order_name(s->order);
  for (int st = 0; st < s->W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOp *op = &tp_stage_ops(s, st)[k];
      if ((op->kind == TP_OP_I || op->kind == TP_OP_W) && !split)
        return fail(err, s, st, op, "order %s runs unsplit backwards (B): I and W are the zero-bubble and "
                    "interleaved orders' (zb-h1, zb-h2, zb-v, interleaved-1f1b)", o);
      if (op->kind == TP_OP_B && !split && whole != (op->micro == TP_WHOLE))
        return fail(err, s, st, op, "order %s runs each backward on %s", o,
                    whole ? "the whole mini-batch (B(i), no micro-batch)" : "one micro-batch (B(i,A), …)");
    }
  return TRUE;
}

gboolean tp_validate(const TpSchedule *s, GError **err) { return tp_validate_prepared(s, NULL, err); }

gboolean tp_validate_prepared(const TpSchedule *s, TpPrepared *prep, GError **err)
{
  if (!tp_size_check(s->W, s->N, s->K, err) || !tp_pair_check(s->order, s->policy, tp_schedule_ranks(s), s->N, err)) {
    if (s->source)
      g_prefix_error(err, "%s: ", s->source);
    return FALSE;
  }
  if (tp_order_chunked(s->order) != (s->rank_seq != NULL)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%sorder %s %s", s->source ? s->source : "", s->source ? ": " : "",
                tp_order_name(s->order), s->rank_seq ? "holds one chunk per worker: chunks= and chunk_map= are for "
                "interleaved-1f1b, zb-v and dualpipe-v" : "needs several chunks per worker (chunks= and chunk_map= in the header)");
    return FALSE;
  }
  if (!backwards_of_order(s, err))
    return FALSE;
  /* a forward, a backward and an update at least, per mini-batch and stage: a file of fewer rows is
   * refused before its header's sizes are allocated for */
  long long ops = 0, least = 3LL * s->W * s->K;
  for (int st = 0; st < s->W; st++)
    ops += tp_stage_len(s, st);
  if (ops < least) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%s%lld operations, fewer than the %lld of any complete schedule of "
                "W=%d stages and K=%d mini-batches (a forward, a backward and an update of each on each stage)",
                s->source ? s->source : "", s->source ? ": " : "", ops, least, s->W, s->K);
    return FALSE;
  }
  long long nkeys = (long long)s->K * (s->N + 1) + 1;
  if (!tp_memory_check("validating the schedule", s->W, s->N, s->K,
                       4 * (3 * s->W * nkeys + (long long)s->W * (s->K + 1)) + 16 * ops, err)) {
    if (s->source)
      g_prefix_error(err, "%s: ", s->source);
    return FALSE;
  }
  g_autoptr(TpIndex) ix = tp_index_new(s, err);
  if (!ix || !tp_validate_static(s, ix, err))
    return FALSE;
  long total = ix->off[s->W];
  int64_t *start = g_new(int64_t, total), *end = g_new(int64_t, total);
  gboolean ok = tp_replay(s, ix, start, end, err);
  if (ok && s->policy == TP_POLICY_VSYNC_LATEST)
    ok = fused_on_slots(s) ? check_vsync_unfused(s, err) : check_vsync(s, ix, start, end, err);
  if (ok && prep) {
    tp_prepared_clear(prep);
    prep->start = g_new(double, total), prep->end = g_new(double, total);
    for (long g = 0; g < total; g++)
      prep->start[g] = (double)start[g], prep->end[g] = (double)end[g];
    prep->ix = g_steal_pointer(&ix);
  }
  g_free(start);
  g_free(end);
  return ok;
}
