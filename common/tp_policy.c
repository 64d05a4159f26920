/* tp_policy.c — version assignment for the six weight policies, and the significance function
 * of the intermediate policy. */
#include "tp_policy.h"
#include "tp_parallel.h"
#include "tp_error.h"
#include "tp_index.h"
#include "tp_replay.h"

#include <math.h>
#include <stdlib.h>

/* Versions that depend only on the stage's own order: sync, 2bw, latest, stash, intermediate.
 * fver: scratch [nkeys], the version each forward read on this stage. */
static void assign_local(TpSchedule *s, int st, int32_t *fver)
{
  TpOp *ops = tp_stage_ops(s, st);
  int n = tp_stage_len(s, st), latest = 0;
  for (int k = 0; k < n; k++) {
    TpOp *op = &ops[k];
    int key = tp_key(s->N, op->mb, op->micro);
    if (op->kind == TP_OP_U) {
      op->ver = op->mb - 1;
      op->src = TP_SRC_FIXED;
      latest++;
      continue;
    }
    switch (s->policy) {
    case TP_POLICY_SYNC: op->ver = op->mb - 1; break;
    case TP_POLICY_2BW: op->ver = MAX(op->mb - 2, 0); break;
    case TP_POLICY_LATEST: op->ver = latest; break;
    case TP_POLICY_STASH:
    case TP_POLICY_INTERMEDIATE:
      if (op->kind == TP_OP_F) {
        op->ver = fver[key] = latest;
      } else {
        op->src = s->policy == TP_POLICY_STASH ? TP_SRC_STASH : TP_SRC_BLEND;
        if (op->micro != TP_WHOLE) {
          int fk = tp_key(s->N, op->mb, op->micro), wk = tp_key(s->N, op->mb, TP_WHOLE);
          op->ver = fver[fk] >= 0 ? fver[fk] : fver[wk];
        } else if (fver[key] >= 0) { /* whole-mini-batch forward */
          op->ver = fver[key];
        } else {
          int v = G_MAXINT32;
          for (int j = 0; j < s->N; j++)
            v = MIN(v, fver[tp_key(s->N, op->mb, j)]);
          op->ver = v;
        }
      }
      break;
    default: g_assert_not_reached();
    }
  }
}

gboolean tp_vsync_versions(const TpSchedule *s, const TpIndex *ix, const double *end1, const double *startW,
                           const double *endW, int32_t *c, GError **err)
{
  const TpOp *o0 = tp_stage_ops(s, 0), *ow = tp_stage_ops(s, s->W - 1);
  double *uend = g_new(double, s->K + 1);
  int n_upd = 0;
  gboolean zero = FALSE, ok = TRUE;
  for (int k = 0; k < tp_stage_len(s, 0); k++)
    if (o0[k].kind == TP_OP_U)
      uend[n_upd++] = end1[k];
  for (int i = 0; i <= s->K; i++)
    c[i] = -1;
  for (int k = 0, u = 0; k < tp_stage_len(s, s->W - 1); k++) {
    if (ow[k].kind != TP_OP_B || c[ow[k].mb] >= 0)
      continue;
    while (u < n_upd && uend[u] <= startW[k])
      u++;
    c[ow[k].mb] = u;
    zero |= !(endW[k] > startW[k]);
  }
  c[0] = 0;
  /* A backward of no duration at stage W can start a chain of zero-time operations that reaches
   * stage 1's update of the same instant: that update follows B(i) and is not counted. */
  if (zero) {
    int32_t *lo = g_new(int32_t, s->K + 1), *hi = g_new(int32_t, s->K + 1);
    TpIndex *own = ix ? NULL : tp_index_new(s, NULL); /* built only for this rare case */
    ok = (ix || own) && tp_causal_bounds(s, ix ? ix : own, lo, hi);
    tp_index_free(own);
    for (int i = 1; ok && i <= s->K; i++)
      c[i] = MIN(c[i], hi[i]);
    if (!ok)
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s%sthe stages' orders do not finish (deadlock)",
                  s->source ? s->source : "", s->source ? ": " : "");
    g_free(lo);
    g_free(hi);
  }
  g_free(uend);
  return ok;
}

/* vsync-latest's versions of stages lo..hi-1: a forward's from fver (by key), a backward's c(i). */
typedef struct {
  TpSchedule *s;
  const int32_t *fver, *c;
} VsyncWork;

static void vsync_range(void *ctx, int part, int lo, int hi)
{
  (void)part;
  const VsyncWork *w = ctx;
  for (int st = lo; st < hi; st++) {
    TpOp *ops = tp_stage_ops(w->s, st);
    for (int k = 0; k < tp_stage_len(w->s, st); k++) {
      TpOp *op = &ops[k];
      op->src = TP_SRC_FIXED;
      op->ver = op->kind == TP_OP_U ? op->mb - 1
                : op->kind == TP_OP_F ? w->fver[tp_key(w->s->N, op->mb, op->micro)]
                                      : w->c[op->mb];
    }
  }
}

/* vsync-latest: F(i,j) reads stage 1's version at F(i,j)'s start there; B(i) reads c(i) on every
 * stage.  end1: end of each of stage 1's operations; startW, endW: start and end of each of stage
 * W's, by position, on the timeline the order was fixed on.  ix may be NULL. */
static gboolean assign_vsync(TpSchedule *s, const TpIndex *ix, const double *end1, const double *startW,
                             const double *endW, GError **err)
{
  int nkeys = s->K * (s->N + 1) + 1;
  int32_t *fver = g_new(int32_t, nkeys), *c = g_new(int32_t, s->K + 1);
  const TpOp *o0 = tp_stage_ops(s, 0);
  for (int k = 0, latest = 0; k < tp_stage_len(s, 0); k++) {
    if (o0[k].kind == TP_OP_U)
      latest++;
    else if (o0[k].kind == TP_OP_F)
      fver[tp_key(s->N, o0[k].mb, o0[k].micro)] = latest;
  }
  gboolean ok = tp_vsync_versions(s, ix, end1, startW, endW, c, err);
  VsyncWork w = { s, fver, c };
  if (ok)
    tp_parallel_ranges(s->W, tp_parallel_parts(tp_schedule_n_ops(s), s->W), vsync_range, &w);
  g_free(fver);
  g_free(c);
  return ok;
}

static void assign_local_all(TpSchedule *s)
{
  int nkeys = s->K * (s->N + 1) + 1;
  int32_t *fver = g_new(int32_t, nkeys);
  for (int st = 0; st < s->W; st++) {
    for (int k = 0; k < nkeys; k++)
      fver[k] = -1;
    assign_local(s, st, fver);
  }
  g_free(fver);
}

gboolean tp_policy_assign_timed(TpSchedule *s, const double *start, const double *end, GError **err)
{
  if (s->policy != TP_POLICY_VSYNC_LATEST) {
    assign_local_all(s);
    return TRUE;
  }
  long offw = tp_schedule_n_ops(s) - tp_stage_len(s, s->W - 1); /* stage W's first global index */
  return assign_vsync(s, NULL, end, start + offw, end + offw, err);
}

gboolean tp_policy_assign_replayed(TpSchedule *s, const TpIndex *ix, const double *start, const double *end,
                                   GError **err)
{
  if (s->policy != TP_POLICY_VSYNC_LATEST) {
    assign_local_all(s);
    return TRUE;
  }
  long offw = ix->off[s->W - 1];
  return assign_vsync(s, ix, end, start + offw, end + offw, err);
}

gboolean tp_policy_assign(TpSchedule *s, GError **err)
{
  if (s->policy != TP_POLICY_VSYNC_LATEST)
    return tp_policy_assign_timed(s, NULL, NULL, err);
  /* the order's own timeline: unit slots */
  g_autoptr(TpIndex) ix = tp_index_new(s, err);
  if (!ix)
    return FALSE;
  long total = ix->off[s->W];
  double *start = g_new(double, total), *end = g_new(double, total);
  gboolean ok = tp_replay_times(s, ix, start, end, err) && tp_policy_assign_replayed(s, ix, start, end, err);
  g_free(start);
  g_free(end);
  return ok;
}

double tp_significance(const TpSignificance *sig, int d)
{
  switch (sig->kind) {
  case TP_SIG_EXP: return exp(-(double)d / sig->param);
  case TP_SIG_LINEAR: return 1.0 / (1.0 + d);
  case TP_SIG_CONST: return d == 0 ? 1.0 : sig->param;
  }
  return 1.0;
}

static gboolean parse_param(const char *text, double lo, double hi, double *out)
{
  return tp_parse_double(text, lo, hi, out, NULL);
}

gboolean tp_significance_parse(const char *text, TpSignificance *out, GError **err)
{
  TpSignificance sig = { TP_SIG_EXP, 1.0 };
  gboolean ok = TRUE;
  if (g_strcmp0(text, "exp") == 0)
    ;
  else if (g_str_has_prefix(text, "exp:"))
    ok = parse_param(text + 4, 1e-6, 1e6, &sig.param);
  else if (g_strcmp0(text, "linear") == 0)
    sig.kind = TP_SIG_LINEAR, sig.param = 0;
  else if (g_str_has_prefix(text, "const:")) {
    sig.kind = TP_SIG_CONST;
    ok = parse_param(text + 6, 0.0, 1.0, &sig.param);
  } else
    ok = FALSE;
  if (!ok) {
    g_autofree char *q = tp_quote(text);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "significance %s not understood: expected exp, exp:TAU (TAU > 0), linear or const:C (0 <= C <= 1)", q);
    return FALSE;
  }
  *out = sig;
  return TRUE;
}

char *tp_significance_to_string(const TpSignificance *sig)
{
  char num[G_ASCII_DTOSTR_BUF_SIZE];
  switch (sig->kind) {
  case TP_SIG_EXP: return g_strdup_printf("exp:%s", g_ascii_dtostr(num, sizeof num, sig->param));
  case TP_SIG_LINEAR: return g_strdup("linear");
  case TP_SIG_CONST: return g_strdup_printf("const:%s", g_ascii_dtostr(num, sizeof num, sig->param));
  }
  return g_strdup("exp");
}
