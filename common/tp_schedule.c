/* tp_schedule.c — names of orders, policies and presets; schedule allocation, comparison and
 * the generation pipeline (order → versions → validation). */
#include "tp_schedule.h"
#include "tp_zbauto.h"
#include "tp_error.h"
#include "tp_policy.h"
#include "tp_replay.h"
#include "tp_validate.h"
#include "tp_memory.h"

#include <stdio.h>
#include <string.h>

static const char *const order_names[TP_N_ORDERS] = { "gpipe", "1f1b", "1f1b-async", "nf1b", "2bw", "zb-h1", "zb-h2",
                                                      "interleaved-1f1b", "zb-v", "zb-1p", "zb-2p",
                                                      "zb-auto", "dualpipe-v" };
static const char *const map_names[TP_N_MAPS] = { "none", "round-robin", "v-shape" };
const char tp_op_letters[TP_N_OP_KINDS + 1] = "FBUIW";
static const char *const policy_names[TP_N_POLICIES] = { "sync", "stash", "vsync-latest", "latest",
                                                         "intermediate", "2bw" };

const TpPreset tp_presets[] = {
  { "gpipe", TP_ORDER_GPIPE, TP_POLICY_SYNC, "GPipe: all forwards, all backwards, flush" },
  { "1f1b", TP_ORDER_1F1B, TP_POLICY_SYNC, "1F1B with a flush (PipeDream-Flush, DAPPLE)" },
  { "pipedream", TP_ORDER_1F1B_ASYNC, TP_POLICY_STASH, "PipeDream: asynchronous 1F1B, weight stashing" },
  { "pipedream-2bw", TP_ORDER_2BW, TP_POLICY_2BW, "PipeDream-2BW: 1F1B, double-buffered weights" },
  { "timeprest", TP_ORDER_NF1B, TP_POLICY_VSYNC_LATEST, "TiMePReSt: nF1B, backward reads c(i) (the latest version only where v = 1)" },
  { "v-timeprest", TP_ORDER_NF1B, TP_POLICY_LATEST, "V-TiMePReSt: nF1B, latest weights everywhere" },
  { "i-timeprest", TP_ORDER_NF1B, TP_POLICY_INTERMEDIATE, "I-TiMePReSt: nF1B, blended stale/latest backward" },
  { "timeprest-stash", TP_ORDER_NF1B, TP_POLICY_STASH, "ablation: nF1B with weight stashing" },
  { "timeprest-1f1b", TP_ORDER_1F1B_ASYNC, TP_POLICY_VSYNC_LATEST, "ablation: asynchronous 1F1B, no stashing" },
  { "zb-h1", TP_ORDER_ZB_H1, TP_POLICY_SYNC, "zero bubble H1: 1F1B's memory, weight gradients deferred" },
  { "zb-h2", TP_ORDER_ZB_H2, TP_POLICY_SYNC, "zero bubble H2: longer warm-up, no bubble once N >= 2W-1" },
  { "zb-1p", TP_ORDER_ZB_1P, TP_POLICY_SYNC, "zero bubble, automatic: built on the costs under W micro-batches' activations" },
  { "zb-2p", TP_ORDER_ZB_2P, TP_POLICY_SYNC, "zero bubble, automatic: built on the costs under 2W micro-batches' activations" },
  { "zb-auto", TP_ORDER_ZB_AUTO, TP_POLICY_SYNC, "zero bubble, automatic: under --activation-limit X micro-batches' activations (default 2W)" },
  { "interleaved-1f1b", TP_ORDER_INTERLEAVED_1F1B, TP_POLICY_SYNC,
    "interleaved 1F1B (Megatron): --chunks V model chunks per worker, round-robin, N a multiple of W" },
  { "zb-v", TP_ORDER_ZB_V, TP_POLICY_SYNC, "zero bubble V: two chunks per worker in a V, split backward" },
  { "dualpipe-v", TP_ORDER_DUALPIPE_V, TP_POLICY_SYNC,
    "DualPipe-V (DeepSeek): two chunks per worker in a V, F&B composites, N >= 2W" },
};
const int tp_n_presets = G_N_ELEMENTS(tp_presets);

const char *const tp_source_names[3] = { "fixed", "stash", "blend" };
const char *tp_order_name(TpOrder o) { return o < TP_N_ORDERS ? order_names[o] : "?"; }
const char *tp_fixed_on_name(TpFixedOn f) { return f == TP_FIXED_ON_COSTS ? "costs" : "slots"; }

gboolean tp_fixed_on_from_name(const char *name, TpFixedOn *out)
{
  if (g_strcmp0(name, "slots") != 0 && g_strcmp0(name, "costs") != 0)
    return FALSE;
  *out = g_strcmp0(name, "costs") == 0 ? TP_FIXED_ON_COSTS : TP_FIXED_ON_SLOTS;
  return TRUE;
}
const char *tp_chunk_map_name(TpChunkMap m) { return m < TP_N_MAPS ? map_names[m] : "?"; }

/* The index of name in names[0..n-1] into *out; FALSE (leaving *out) when it is none of them. */
static gboolean name_index(const char *name, const char *const *names, int n, int *out)
{
  for (int i = 0; i < n; i++)
    if (g_strcmp0(name, names[i]) == 0) {
      *out = i;
      return TRUE;
    }
  return FALSE;
}

gboolean tp_chunk_map_from_name(const char *name, TpChunkMap *out)
{
  int i;
  return name_index(name, map_names, TP_N_MAPS, &i) && (*out = (TpChunkMap)i, TRUE);
}

const char *tp_policy_name(TpPolicy p) { return p < TP_N_POLICIES ? policy_names[p] : "?"; }

gboolean tp_order_from_name(const char *name, TpOrder *out)
{
  int i;
  return name_index(name, order_names, TP_N_ORDERS, &i) && (*out = (TpOrder)i, TRUE);
}

gboolean tp_policy_from_name(const char *name, TpPolicy *out)
{
  int i;
  return name_index(name, policy_names, TP_N_POLICIES, &i) && (*out = (TpPolicy)i, TRUE);
}

const TpPreset *tp_preset_find(const char *name)
{
  for (int i = 0; i < tp_n_presets; i++)
    if (g_strcmp0(name, tp_presets[i].name) == 0)
      return &tp_presets[i];
  return NULL;
}

const char *tp_preset_name(TpOrder o, TpPolicy p)
{
  for (int i = 0; i < tp_n_presets; i++)
    if (tp_presets[i].order == o && tp_presets[i].policy == p)
      return tp_presets[i].name;
  return NULL;
}

char *tp_preset_names(void)
{
  GString *g = g_string_new(NULL);
  for (int i = 0; i < tp_n_presets; i++)
    g_string_append_printf(g, "%s%s", i ? ", " : "", tp_presets[i].name);
  return g_string_free(g, FALSE);
}

gboolean tp_pair_check(TpOrder o, TpPolicy p, int W, int N, GError **err)
{
  gboolean flush = o == TP_ORDER_GPIPE || o == TP_ORDER_1F1B || tp_order_split(o) || tp_order_chunked(o);
  if ((tp_order_split(o) || tp_order_chunked(o)) && p != TP_POLICY_SYNC) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "order %s takes policy sync only: it flushes every mini-batch, so no operation ever has a "
                "newer version than i-1 to read, and policy %s would only rename version i-1",
                tp_order_name(o), tp_policy_name(p));
    return FALSE;
  }
  if (p == TP_POLICY_SYNC && !flush) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "policy sync needs a flush order (gpipe or 1f1b): order %s starts mini-batch i before "
                "version i-1 exists", tp_order_name(o));
    return FALSE;
  }
  if (p == TP_POLICY_2BW && o != TP_ORDER_2BW) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "policy 2bw (two weight buffers, version i-2) is defined for order 2bw only, not %s",
                tp_order_name(o));
    return FALSE;
  }
  if (o == TP_ORDER_DUALPIPE_V && N < 2 * W) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "order dualpipe-v needs N >= 2W (got N=%d, W=%d)", N, W);
    return FALSE;
  }
  if (o == TP_ORDER_2BW && N < W) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "order 2bw needs N >= W (got N=%d, W=%d): with fewer micro-batches than stages two "
                "weight buffers do not cover the mini-batches in flight", N, W);
    return FALSE;
  }
  return TRUE;
}

gboolean tp_chunks_check(TpOrder o, int W, int V, int N, GError **err)
{
  if (o == TP_ORDER_INTERLEAVED_1F1B && V < 2) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--chunks %d: interleaved-1f1b needs at least 2 chunks per worker "
                "(with 1 it is 1f1b)", V);
    return FALSE;
  }
  if ((o == TP_ORDER_ZB_V || o == TP_ORDER_DUALPIPE_V) && V != 2) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--chunks %d: %s holds exactly 2 chunks per worker (a V)", V,
                tp_order_name(o));
    return FALSE;
  }
  if (!tp_order_chunked(o) && V != 1) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--chunks %d: order %s holds one chunk per worker (chunks are for "
                "interleaved-1f1b, zb-v and dualpipe-v)", V, tp_order_name(o));
    return FALSE;
  }
  if (V < 1 || (long long)W * V > TP_MAX_WORKERS) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "-w %d: %d workers times %d chunks a worker is %lld stages, out of "
                "range 1..%d", W, W, V, (long long)W * V, TP_MAX_WORKERS);
    return FALSE;
  }
  if (o == TP_ORDER_INTERLEAVED_1F1B && N % W != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "interleaved-1f1b needs N a multiple of W (Megatron's and PyTorch's "
                "rule: micro-batches go round the workers in groups of W), got N=%d, W=%d", N, W);
    return FALSE;
  }
  return TRUE;
}

gboolean tp_size_check(int W, int N, int K, GError **err)
{
  if (W < 1 || W > TP_MAX_WORKERS) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "workers W=%d out of range 1..%d", W, TP_MAX_WORKERS);
    return FALSE;
  }
  if (N < 1 || N > TP_MAX_MICRO) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "micro-batches N=%d out of range 1..%d", N, TP_MAX_MICRO);
    return FALSE;
  }
  if (K < 1 || K > TP_MAX_MINI) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "mini-batches K=%d out of range 1..%d", K, TP_MAX_MINI);
    return FALSE;
  }
  long long ops = (long long)W * K * (2LL * N + 1);
  if (ops > TP_MAX_OPS) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "W=%d, N=%d, K=%d gives up to %lld operations, more than the limit of %lld", W, N, K, ops,
                TP_MAX_OPS);
    return FALSE;
  }
  return TRUE;
}

long long tp_stage_ops_count(TpOrder o, int N, int K)
{
  gboolean whole_f = o == TP_ORDER_1F1B_ASYNC, whole_b = whole_f || o == TP_ORDER_NF1B;
  return (long long)K * ((whole_f ? 1 : N) + (whole_b ? 1 : N) * (tp_order_split(o) ? 2 : 1) + 1);
}

void tp_schedule_add_fb(TpSchedule *s, int r, int k)
{
  if (!s->fb) {
    s->fb = g_new0(GArray *, tp_schedule_ranks(s));
    for (int i = 0; i < tp_schedule_ranks(s); i++)
      s->fb[i] = g_array_new(FALSE, FALSE, sizeof(int32_t));
  }
  int32_t v = k;
  g_array_append_val(s->fb[r], v);
}

void tp_schedule_set_chunks(TpSchedule *s, int V, TpChunkMap m)
{
  s->V = V;
  s->map = m;
  if (V <= 1)
    return;
  int R = s->W / V;
  s->rank_seq = g_new0(GArray *, R);
  for (int r = 0; r < R; r++)
    s->rank_seq[r] = g_array_new(FALSE, FALSE, sizeof(int32_t));
}

gboolean tp_schedule_has_split(const TpSchedule *s)
{
  for (int st = 0; st < s->W; st++) {
    const TpOp *ops = tp_stage_ops(s, st);
    for (int k = 0; k < tp_stage_len(s, st); k++)
      if (ops[k].kind == TP_OP_I || ops[k].kind == TP_OP_W)
        return TRUE;
  }
  return FALSE;
}

gboolean tp_schedule_ask_recompute(TpSchedule *s, GError **err)
{
  const char *preset = tp_preset_name(s->order, s->policy);
  g_autofree char *name = s->source ? g_strdup(s->source)
                                    : g_strdup_printf("%s%s", preset ? "preset " : "order ", preset ? preset : tp_order_name(s->order));
  if (s->recompute_said_no) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--recompute: %s says recompute=false; drop one of them", name);
    return FALSE;
  }
  if (tp_schedule_has_split(s)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--recompute: %s splits its backwards into I and W, and a split "
                "backward is not recomputed (its W needs the forward's saved state); drop --recompute", name);
    return FALSE;
  }
  s->recompute = TRUE;
  return TRUE;
}

long long tp_generate_bytes(TpOrder o, int W, int N, int K)
{
  long long per_stage = tp_stage_ops_count(o, N, K), ops = W * per_stage,
            keys = (long long)W * ((long long)K * (N + 1) + 1);
  /* each stage's operations (20 B each, in a GArray: its capacity a power of two), producers (4 B)
   * and the replay's start and end (16 B) per operation; the index's forward, backward and weight
   * positions per key and update positions per mini-batch; the slot orders' forward ends */
  return W * tp_memory_grown(per_stage * (long long)sizeof(TpOp)) + ops * (4 + 16) + keys * 12 +
         (long long)W * (K + 1) * 4 + (o == TP_ORDER_NF1B || o == TP_ORDER_1F1B_ASYNC ? (long long)W * K * N * 4 : 0);
}

TpSchedule *tp_schedule_new(TpOrder o, TpPolicy p, int W, int N, int K)
{
  TpSchedule *s = g_new0(TpSchedule, 1);
  s->order = o;
  s->policy = p;
  s->W = W;
  s->N = N;
  s->K = K;
  s->V = 1;
  s->sig.kind = TP_SIG_EXP;
  s->sig.param = 1.0;
  s->stage = g_new0(GArray *, W);
  for (int st = 0; st < W; st++)
    s->stage[st] = g_array_new(FALSE, FALSE, sizeof(TpOp));
  return s;
}

void tp_schedule_free(TpSchedule *s)
{
  if (!s)
    return;
  for (int st = 0; s->stage && st < s->W; st++)
    g_array_unref(s->stage[st]);
  for (int r = 0; s->rank_seq && r < tp_schedule_ranks(s); r++)
    g_array_unref(s->rank_seq[r]);
  for (int r = 0; s->fb && r < tp_schedule_ranks(s); r++)
    g_array_unref(s->fb[r]);
  g_free(s->rank_seq);
  g_free(s->fb);
  g_free(s->stage);
  g_free(s->source);
  g_free(s);
}

TpSchedule *tp_schedule_prefix(const TpSchedule *s, int j)
{
  g_return_val_if_fail(j >= 1 && j <= s->K, NULL);
  TpSchedule *t = tp_schedule_new(s->order, s->policy, s->W, s->N, j);
  t->fixed_on = s->fixed_on, t->sig = s->sig, t->recompute = s->recompute;
  t->recompute_said_no = s->recompute_said_no, t->source = g_strdup(s->source);
  if (s->rank_seq)
    tp_schedule_set_chunks(t, s->V, s->map);
  for (int st = 0; st < s->W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++)
      if (tp_stage_ops(s, st)[k].mb <= j)
        g_array_append_val(t->stage[st], tp_stage_ops(s, st)[k]);
  /* each rank's order: its entries whose operation is kept, counted stage by stage */
  for (int r = 0; s->rank_seq && r < tp_schedule_ranks(s); r++) {
    g_autofree int *pos = g_new0(int, s->W);
    guint c = 0; /* the rank's next composite (both its operations are of one mini-batch) */
    for (guint k = 0; k < s->rank_seq[r]->len; k++) {
      int32_t st = g_array_index(s->rank_seq[r], int32_t, k);
      gboolean fb = tp_fb_opens(s, r, c, (int)k);
      c += fb;
      if (tp_stage_ops(s, st)[pos[st]++].mb > j)
        continue;
      if (fb)
        tp_schedule_add_fb(t, r, (int)t->rank_seq[r]->len);
      g_array_append_val(t->rank_seq[r], st);
    }
  }
  return t;
}

long long tp_schedule_n_ops(const TpSchedule *s)
{
  long long n = 0;
  for (int st = 0; st < s->W; st++)
    n += tp_stage_len(s, st);
  return n;
}

gboolean tp_schedule_equal(const TpSchedule *a, const TpSchedule *b)
{
  if (a->order != b->order || a->policy != b->policy || a->W != b->W || a->N != b->N || a->K != b->K ||
      a->recompute != b->recompute || a->V != b->V || a->map != b->map)
    return FALSE;
  for (int r = 0; a->rank_seq && r < tp_schedule_ranks(a); r++)
    if (a->rank_seq[r]->len != b->rank_seq[r]->len ||
        memcmp(a->rank_seq[r]->data, b->rank_seq[r]->data, a->rank_seq[r]->len * sizeof(int32_t)) != 0)
      return FALSE;
  for (int r = 0; (a->fb || b->fb) && r < tp_schedule_ranks(a); r++)
    if (!a->fb || !b->fb || a->fb[r]->len != b->fb[r]->len ||
        memcmp(a->fb[r]->data, b->fb[r]->data, a->fb[r]->len * sizeof(int32_t)) != 0)
      return FALSE;
  if (a->policy == TP_POLICY_INTERMEDIATE && (a->sig.kind != b->sig.kind || a->sig.param != b->sig.param))
    return FALSE;
  for (int st = 0; st < a->W; st++) {
    int n = tp_stage_len(a, st);
    if (n != tp_stage_len(b, st))
      return FALSE;
    const TpOp *x = tp_stage_ops(a, st), *y = tp_stage_ops(b, st);
    for (int i = 0; i < n; i++)
      if (x[i].kind != y[i].kind || x[i].src != y[i].src || x[i].mb != y[i].mb || x[i].micro != y[i].micro ||
          x[i].ver != y[i].ver)
        return FALSE;
  }
  return TRUE;
}

void tp_op_format(TpNameStyle style, TpOpKind kind, int mb, int micro, gboolean wide, char *buf, size_t len)
{
  const char k = tp_op_letters[kind];
  gboolean part = kind != TP_OP_U && micro != TP_WHOLE, split = kind == TP_OP_I || kind == TP_OP_W;
  char mp[16] = ""; /* the micro-batch: "B", "b", ".27"; "A" for a whole forward in a grid */
  if (part && wide)
    snprintf(mp, sizeof mp, ".%d", micro + 1);
  else if (part)
    mp[0] = (char)((style == TP_NAME_GRID && kind != TP_OP_F ? 'a' : 'A') + micro);
  else if (style == TP_NAME_GRID && kind == TP_OP_F)
    mp[0] = 'A';
  switch (style) {
  case TP_NAME_CALL: snprintf(buf, len, part && !wide ? "%c(%d,%s)" : "%c(%d%s)", k, mb, mp); break;
  case TP_NAME_GRID:
    snprintf(buf, len, "%s%d%s%s", split ? (kind == TP_OP_I ? "I" : "W") : "", mb, mp,
             part && wide && kind == TP_OP_B ? "b" : "");
    break;
  case TP_NAME_LABEL: snprintf(buf, len, "%c %d%s", k, mb, mp); break;
  }
}

void tp_op_name(const TpSchedule *s, const TpOp *op, char *buf, size_t len)
{
  tp_op_format(TP_NAME_CALL, (TpOpKind)op->kind, op->mb, op->micro, s->N > 26, buf, len);
}

void tp_op_where(const TpSchedule *s, const TpOp *op, char *buf, size_t len)
{
  if (s->source && op->line > 0)
    snprintf(buf, len, "%s:%d: ", s->source, op->line);
  else if (s->source)
    snprintf(buf, len, "%s: ", s->source);
  else
    buf[0] = '\0';
}

TpSchedule *tp_schedule_generate(TpOrder o, TpPolicy p, int W, int N, int K, GError **err)
{
  return tp_schedule_generate_prepared(o, p, W, N, K, NULL, err);
}

TpSchedule *tp_schedule_generate_prepared(TpOrder o, TpPolicy p, int W, int N, int K, TpPrepared *prep, GError **err)
{
  return tp_schedule_generate_chunked(o, p, W, tp_order_default_chunks(o), N, K, prep, err);
}

gboolean tp_limit_check(TpOrder o, double limit, GError **err)
{
  gboolean takes = o == TP_ORDER_ZB_AUTO || o == TP_ORDER_ZB_V;
  if (takes && limit != 0 && !(limit >= 1 && limit <= 1e9)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--activation-limit %g: from 1 (one micro-batch's stored activations) "
                "to 1e9", limit);
    return FALSE;
  }
  if (!takes && limit != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--activation-limit: only zb-auto and zb-v take one (order %s)",
                tp_order_name(o));
    return FALSE;
  }
  return TRUE;
}

static TpSchedule *generate(TpOrder o, TpPolicy p, int R, int V, int N, int K, double limit, TpPrepared *prep,
                            GError **err);

TpSchedule *tp_schedule_generate_chunked(TpOrder o, TpPolicy p, int R, int V, int N, int K, TpPrepared *prep,
                                         GError **err)
{
  return generate(o, p, R, V, N, K, 0, prep, err);
}

TpSchedule *tp_schedule_generate_limited(TpOrder o, TpPolicy p, int W, int N, int K, double limit, TpPrepared *prep,
                                         GError **err)
{
  return generate(o, p, W, tp_order_default_chunks(o), N, K, limit, prep, err);
}

static TpSchedule *generate(TpOrder o, TpPolicy p, int R, int V, int N, int K, double limit, TpPrepared *prep,
                            GError **err)
{
  if (!tp_size_check(R, N, K, err) || !tp_pair_check(o, p, R, N, err) || !tp_chunks_check(o, R, V, N, err) ||
      !tp_limit_check(o, limit, err) || (o == TP_ORDER_ZB_V && !tp_zbv_limit_check(R, limit, err)))
    return NULL;
  int W = R * V; /* stages */
  if (W * tp_stage_ops_count(o, N, K) > TP_MAX_OPS) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "W=%d, N=%d, K=%d gives %lld operations under order %s, more than the "
                "limit of %lld", W, N, K, W * tp_stage_ops_count(o, N, K), tp_order_name(o), TP_MAX_OPS);
    return NULL;
  }
  if (!tp_memory_check("generating the schedule", W, N, K, tp_generate_bytes(o, W, N, K), err))
    return NULL;
  TpSchedule *s = tp_schedule_new(o, p, W, N, K);
  tp_schedule_set_chunks(s, V, tp_order_chunk_map(o, V));
  s->act_limit = limit;
  /* one index and one unit-slot timeline serve the versions and the validation (and, kept in prep,
   * the simulator): the orders fixed on unit slots make it as they are filled, the others replay;
   * for a caller that needs no times, only where the versions do (TpPrepared.untimed) */
  TpPrepared mine = { 0 };
  gboolean times = !prep || !prep->untimed || p == TP_POLICY_VSYNC_LATEST, timed = FALSE;
  if (times) {
    long long total = W * tp_stage_ops_count(o, N, K);
    mine.start = tp_memory_alloc_large(total * sizeof(double));
    mine.end = tp_memory_alloc_large(total * sizeof(double));
    timed = tp_order_fill_timed(s, mine.start, mine.end);
  } else {
    tp_order_fill(s);
  }
  TpIndex *ix = mine.ix = tp_index_new(s, err);
  gboolean ok = ix != NULL && (!times || timed || tp_replay_times(s, ix, mine.start, mine.end, err)) &&
                tp_policy_assign_replayed(s, ix, mine.start, mine.end, err);
  ok = ok && tp_validate_static(s, ix, err);
  if (ok && prep) {
    tp_prepared_clear(prep);
    mine.untimed = prep->untimed;
    *prep = mine;
  } else {
    tp_prepared_clear(&mine);
  }
  if (!ok) {
    g_prefix_error(err, "generated %s/%s schedule is invalid (a bug): ", tp_order_name(o), tp_policy_name(p));
    if (err && *err)
      (*err)->code = TP_ERROR_RUNTIME;
    tp_schedule_free(s);
    return NULL;
  }
  return s;
}
