/* tp_torch.c — PyTorch's compute-only pipeline CSV (torch.distributed.pipelining), read and
 * written as one more schedule format: one row per rank, one cell per time step, actions such as
 * "0F0" (stage, kind, micro-batch), empty cells for idle steps.  One mini-batch of N micro-batches,
 * stage s on rank s, or with more stages than ranks the round-robin or V-shaped chunk map the rows
 * show (each rank's row is its order across its chunks), policy sync, one update per stage after
 * its last operation.  What is read, ignored and refused: docs/zero-bubble.md. */
#include "tp_format.h"
#include "tp_format_priv.h"
#include "tp_error.h"
#include "tp_index.h"
#include "tp_replay.h"

#include <stdio.h>
#include <string.h>

/* Actions that move data, wait for it or shard weights, and compute nothing: the transfers they name
 * follow from the compute order, the gradient reduction is data-parallel work outside the pipeline
 * (PyTorch's own orders end every rank with REDUCE_GRAD and WAIT_REDUCE_GRAD). */
static const char *const ignored[] = { "SEND_F",  "RECV_F",      "SEND_B",           "RECV_B",      "WAIT_SEND_F",
                                       "WAIT_SEND_B", "UNSHARD", "RESHARD", "REDUCE_GRAD", "WAIT_REDUCE_GRAD", NULL };

gboolean tp_format_torch(const TpSchedule *s, GString *out, GError **err)
{
  if (s->K != 1 || s->policy != TP_POLICY_SYNC) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_FORMAT, "format torch: PyTorch's CSV holds one flushed mini-batch: K=1 and "
                "policy sync (got K=%d, policy %s)", s->K, tp_policy_name(s->policy));
    return FALSE;
  }
  for (int st = 0; st < s->W; st++)
    for (int k = 0; k < tp_stage_len(s, st); k++)
      if (tp_stage_ops(s, st)[k].kind != TP_OP_U && tp_stage_ops(s, st)[k].micro == TP_WHOLE) {
        g_set_error(err, TP_ERROR, TP_ERROR_PARAM_FORMAT, "format torch: stage %d has a whole-mini-batch operation; "
                    "PyTorch's actions are per micro-batch", st + 1);
        return FALSE;
      }
  g_autoptr(TpIndex) ix = NULL;
  int64_t *start, *end;
  gboolean ok = tp_replay_indexed(s, &ix, &start, &end, err);
  int *pos = g_new0(int, s->W);
  for (int r = 0; ok && r < tp_schedule_ranks(s); r++) {
    /* one cell per unit slot up to the rank's last operation (across its chunks); updates take none; an
     * F&B composite "(0F3;3B1)OVERLAP_F_B" in its F's slot, its B's slot left empty */
    int64_t t = 0;
    int n = s->rank_seq ? (int)s->rank_seq[r]->len : tp_stage_len(s, r);
    guint c = 0;
    gboolean in_fb = FALSE;
    for (int k = 0; k < n; k++) {
      int st = s->rank_seq ? g_array_index(s->rank_seq[r], int32_t, k) : r;
      long g = ix->off[st] + pos[st]++;
      const TpOp *op = &tp_stage_ops(s, st)[g - ix->off[st]];
      if (op->kind == TP_OP_U)
        continue;
      for (; !in_fb && t < start[g]; t++) /* idle steps: empty cells */
        if (t > 0)
          g_string_append_c(out, ',');
      gboolean opens = tp_fb_opens(s, r, c, k);
      c += opens;
      g_string_append_printf(out, "%s%s%d%c%d%s", t > 0 && !in_fb ? "," : "", opens ? "(" : in_fb ? ";" : "", st,
                             tp_op_letters[op->kind], op->micro, in_fb ? ")OVERLAP_F_B" : "");
      t = in_fb ? start[g] : start[g] + 1; /* after a composite, its B's slot is an empty cell */
      in_fb = opens;
    }
    g_string_append_c(out, '\n');
  }
  g_free(pos);
  g_free(start);
  g_free(end);
  return ok;
}

typedef struct {
  int stage, kind, micro; /* kind: TpOpKind, or -1 for an ignored action */
  int col;                /* step (cell) it was read from */
  gboolean fb;            /* the F of an F&B composite, its B the next action */
} Action;

/* One simple action "0F0", "2W1", "0UNSHARD", "1SEND_F3"; FALSE with *why when it is not one. */
static gboolean parse_simple(const char *cell, Action *a, const char **why)
{
  const char *p = cell;
  while (g_ascii_isdigit(*p))
    p++;
  const char *q = p;
  while (g_ascii_isupper(*q) || *q == '_')
    q++;
  const char *r = q;
  while (g_ascii_isdigit(*r))
    r++;
  if (p == cell || q == p || *r || p - cell > 6 || r - q > 6 || q - p > 16) {
    *why = "not an action (stage index, kind, micro-batch index: 0F0, 3I2, 1W0, 2B1)";
    return FALSE;
  }
  a->stage = 0; /* at most 6 digits each: in range */
  for (const char *d = cell; d < p; d++)
    a->stage = a->stage * 10 + (*d - '0');
  a->micro = q < r ? 0 : -1;
  for (const char *d = q; d < r; d++)
    a->micro = a->micro * 10 + (*d - '0');
  size_t kn = (size_t)(q - p);
  gboolean known = FALSE;
  a->kind = -1;
  if (kn == 1 && strchr("FBIW", *p))
    a->kind = (int)(strchr(tp_op_letters, *p) - tp_op_letters);
  for (int i = 0; a->kind < 0 && ignored[i] && !known; i++)
    known = strlen(ignored[i]) == kn && strncmp(ignored[i], p, kn) == 0;
  if (a->kind < 0 && !known) {
    *why = "unknown action kind (read: F, I, W, B, OVERLAP_F_B; skipped: SEND_F, RECV_F, SEND_B, RECV_B, "
           "WAIT_SEND_F, WAIT_SEND_B, UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD)";
    return FALSE;
  }
  if (a->kind >= 0 && a->micro < 0) {
    *why = "a computation without its micro-batch index";
    return FALSE;
  }
  return TRUE;
}

static gboolean cell_error(GError **err, const char *name, int row, int col, const char *cell, const char *why)
{
  g_autofree char *q = tp_quote(cell);
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: rank %d, step %d: action %s: %s", name, row, row - 1, col, q, why);
  return FALSE;
}

/* The actions of one cell: none (empty), one, or the parts of "(0F1;0B0)OVERLAP_F_B" in order. */
static gboolean parse_cell(const char *cell, GArray *acts, const char *name, int row, int col, GError **err)
{
  const char *why = NULL;
  Action a;
  if (!*cell)
    return TRUE;
  if (cell[0] == '(') {
    const char *close = strchr(cell, ')');
    if (!close || strcmp(close + 1, "OVERLAP_F_B") != 0)
      return cell_error(err, name, row, col, cell, "a composite action is read only as (A;B)OVERLAP_F_B");
    g_autofree char *inner = g_strndup(cell + 1, (gsize)(close - cell - 1));
    g_auto(GStrv) parts = g_strsplit(inner, ";", -1);
    if (g_strv_length(parts) != 2)
      return cell_error(err, name, row, col, cell, "OVERLAP_F_B overlaps two computations, (A;B)");
    Action two[2];
    for (int i = 0; i < 2; i++) {
      char *part = g_strstrip(parts[i]);
      if (!parse_simple(part, &two[i], &why) || two[i].kind < 0)
        return cell_error(err, name, row, col, cell, why ? why : "a part of OVERLAP_F_B must be a computation");
      two[i].col = col, two[i].fb = FALSE;
    }
    /* a forward then a backward of two chunks is one composite; other pairs are their two actions */
    two[0].fb = two[0].kind == TP_OP_F && two[1].kind == TP_OP_B && two[0].stage != two[1].stage;
    g_array_append_vals(acts, two, 2);
    return TRUE;
  }
  if (!parse_simple(cell, &a, &why))
    return cell_error(err, name, row, col, cell, why);
  a.col = col, a.fb = FALSE;
  if (a.kind >= 0)
    g_array_append_val(acts, a);
  return TRUE;
}

/* Order o's operations for s's ranks, chunks and micro-batches, one mini-batch: what generating it
 * under sync gives (every operation reads version 0), without the versions' replay and the
 * validation; NULL where o does not take these sizes. */
static TpSchedule *order_only(TpOrder o, const TpSchedule *s)
{
  int R = tp_schedule_ranks(s);
  if (!tp_pair_check(o, TP_POLICY_SYNC, R, s->N, NULL) || !tp_chunks_check(o, R, s->V, s->N, NULL))
    return NULL;
  TpSchedule *g = tp_schedule_new(o, TP_POLICY_SYNC, R * s->V, s->N, 1);
  tp_schedule_set_chunks(g, s->V, tp_order_chunk_map(o, s->V));
  tp_order_fill(g);
  return g;
}

/* The order a file's operations are: the flush preset that generates the very same, else 1f1b
 * (zb-h1 with a split backward), which then only names the family. */
static TpOrder infer_order(const TpSchedule *s)
{
  static const TpOrder flat[] = { TP_ORDER_GPIPE, TP_ORDER_1F1B, TP_ORDER_ZB_H1, TP_ORDER_ZB_H2 };
  static const TpOrder chunked[] = { TP_ORDER_INTERLEAVED_1F1B, TP_ORDER_ZB_V, TP_ORDER_DUALPIPE_V };
  const TpOrder *cand = s->rank_seq ? chunked : flat;
  guint n = s->rank_seq ? G_N_ELEMENTS(chunked) : G_N_ELEMENTS(flat);
  gboolean split = tp_schedule_has_split(s);
  for (guint i = 0; i < n; i++) {
    if (!s->rank_seq && tp_order_split(cand[i]) != split)
      continue; /* a backward of the other shape */
    g_autoptr(TpSchedule) g = order_only(cand[i], s);
    TpOrder keep = ((TpSchedule *)s)->order;
    ((TpSchedule *)s)->order = cand[i];
    gboolean same = g && tp_schedule_equal(g, s);
    ((TpSchedule *)s)->order = keep;
    if (same)
      return cand[i];
  }
  if (s->rank_seq)
    return split && s->map == TP_MAP_V_SHAPE ? TP_ORDER_ZB_V : TP_ORDER_INTERLEAVED_1F1B;
  return split ? TP_ORDER_ZB_H1 : TP_ORDER_1F1B;
}

/* The chunk map of S stages on R ranks that puts each stage where the file runs it (rank[st]):
 * round-robin or V-shaped (where both fit, on one rank, V-shaped for a split backward, as zb-v's);
 * FALSE with a message naming the first stage that fits neither. */
static gboolean derive_map(const int *rank, int S, int R, gboolean split, TpChunkMap *m, const char *name, GError **err)
{
  const TpChunkMap maps[] = { split ? TP_MAP_V_SHAPE : TP_MAP_ROUND_ROBIN, split ? TP_MAP_ROUND_ROBIN : TP_MAP_V_SHAPE };
  for (guint i = 0; i < G_N_ELEMENTS(maps); i++) {
    int st = 0;
    while (st < S && rank[st] == tp_chunk_map_rank(maps[i], R, st))
      st++;
    if (st == S) {
      *m = maps[i];
      return TRUE;
    }
  }
  int bad = 0;
  while (bad < S && rank[bad] == tp_chunk_map_rank(TP_MAP_ROUND_ROBIN, R, bad))
    bad++;
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %d stages on %d ranks: stage %d runs on rank %d, which fits neither a "
              "round-robin map (rank %d) nor a V-shaped one (rank %d)", name, S, R, bad, rank[bad],
              tp_chunk_map_rank(TP_MAP_ROUND_ROBIN, R, bad), tp_chunk_map_rank(TP_MAP_V_SHAPE, R, bad));
  return FALSE;
}

/* A carriage return that is no CR LF (old Mac line ends: the whole file would read as one rank). */
static gboolean check_line_ends(const char *text, const char *name, GError **err)
{
  const char *cr = strchr(text, '\r');
  if (!cr || cr[1] == '\n')
    return TRUE;
  int line = 1;
  for (const char *p = text; p < cr; p++)
    line += *p == '\n';
  g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: a line ends in a carriage return alone (rows end in LF or "
              "CR LF)", name, line);
  return FALSE;
}

/* The actions read, per rank (row), and what they say: the stages, the micro-batches, each stage's
 * rank. */
typedef struct {
  const char *name;
  int rows, stages, N;
  GArray **acts; /* [rows] of Action */
  int *rank_of;  /* [TP_MAX_WORKERS]: each stage's rank, -1 while none */
} Torch;

/* Action a of cell (row r, step c) within the limits, its stage on one rank. */
static gboolean take_action(Torch *t, const Action *a, int r, int c, const char *cell, GError **err)
{
  gboolean ok = TRUE;
  t->stages = MAX(t->stages, a->stage + 1);
  if (a->micro >= TP_MAX_MICRO)
    ok = cell_error(err, t->name, r + 1, c, cell, "micro-batch index beyond the limit");
  else if (a->stage >= TP_MAX_WORKERS)
    ok = cell_error(err, t->name, r + 1, c, cell, "stage index beyond the limit");
  else if (a->kind >= 0 && t->rank_of[a->stage] >= 0 && t->rank_of[a->stage] != r) {
    g_autofree char *why = g_strdup_printf("stage %d runs on rank %d already: a stage runs on one rank",
                                           a->stage, t->rank_of[a->stage]);
    ok = cell_error(err, t->name, r + 1, c, cell, why);
  } else if (a->kind >= 0)
    t->rank_of[a->stage] = r;
  t->N = MAX(t->N, a->micro + 1);
  return ok;
}

/* Row r's cells (the row in place: each comma ends one) into its actions. */
static gboolean read_row(Torch *t, int r, char *row, GError **err)
{
  char *next = g_strstrip(row);
  guint cells = 1;
  for (const char *c = next; *c; c++)
    cells += *c == ',';
  t->acts[r] = g_array_sized_new(FALSE, FALSE, sizeof(Action), cells);
  gboolean ok = TRUE;
  for (int c = 0; next && ok; c++) {
    char *cell = next, *end = cell;
    while (*end && *end != ',') /* most cells are a few bytes or none: no call per cell */
      end++;
    next = *end ? end + 1 : NULL;
    while (cell < end && g_ascii_isspace(*cell)) /* g_strstrip's trim, without moving the text */
      cell++;
    while (end > cell && g_ascii_isspace(end[-1]))
      end--;
    *end = '\0';
    guint before = t->acts[r]->len;
    ok = parse_cell(cell, t->acts[r], t->name, r + 1, c, err);
    for (guint i = before; ok && i < t->acts[r]->len; i++)
      ok = take_action(t, &g_array_index(t->acts[r], Action, i), r, c, cell, err);
  }
  return ok;
}

/* The stages and their ranks: as many chunks on every rank, each stage computing somewhere, stage s
 * on rank s where there are as many stages as ranks. */
static gboolean check_stages(const Torch *t, GError **err)
{
  if (t->stages > t->rows && t->stages % t->rows != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %d stages on %d ranks: interleaved stages need the same number of "
                "chunks on every rank", t->name, t->stages, t->rows);
    return FALSE;
  }
  for (int st = 0; st < t->stages; st++)
    if (t->rank_of[st] < 0) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: stage %d runs no computation on any rank", t->name, st);
      return FALSE;
    } else if (t->stages <= t->rows && t->rank_of[st] != st) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s:%d: stage %d runs on rank %d: with as many stages as ranks "
                  "stage s runs on rank s", t->name, t->rank_of[st] + 1, st, t->rank_of[st]);
      return FALSE;
    }
  return TRUE;
}

/* Whether a backward is split into I and W anywhere. */
static gboolean has_split(const Torch *t)
{
  for (int r = 0; r < t->rows; r++)
    for (guint i = 0; i < t->acts[r]->len; i++)
      if (g_array_index(t->acts[r], Action, i).kind == TP_OP_I || g_array_index(t->acts[r], Action, i).kind == TP_OP_W)
        return TRUE;
  return FALSE;
}

/* A forward names the micro-batch the stage before sent: PyTorch 2.15's Schedule1F1B numbers the
 * last rank's forwards 1..M instead of 0..M-1, refused here at the first such action (the forwards
 * each stage runs, by micro-batch, looked up in one table). */
static gboolean check_forwards(const Torch *t, GError **err)
{
  g_autofree guint8 *fwd = g_malloc0((size_t)t->stages * (size_t)t->N);
  for (int r = 0; r < t->rows; r++)
    for (guint i = 0; i < t->acts[r]->len; i++) {
      const Action *a = &g_array_index(t->acts[r], Action, i);
      if (a->kind == TP_OP_F)
        fwd[(size_t)a->stage * (size_t)t->N + (size_t)a->micro] = 1;
    }
  for (int r = 0; r < t->rows; r++)
    for (guint i = 0; i < t->acts[r]->len; i++) {
      const Action *a = &g_array_index(t->acts[r], Action, i);
      if (a->kind != TP_OP_F || a->stage == 0 || fwd[(size_t)(a->stage - 1) * (size_t)t->N + (size_t)a->micro])
        continue;
      char cell[32];
      g_snprintf(cell, sizeof cell, "%dF%d", a->stage, a->micro);
      g_autofree char *why = t->stages > t->rows
                               ? g_strdup_printf("stage %d (rank %d) runs no forward of micro-batch %d to send it",
                                                 a->stage - 1, t->rank_of[a->stage - 1], a->micro)
                               : g_strdup_printf("rank %d runs no forward of micro-batch %d to send it", a->stage - 1,
                                                 a->micro);
      return cell_error(err, t->name, r + 1, a->col, cell, why);
    }
  return TRUE;
}

/* The schedule of the actions read: each rank's in its order, each stage's update after the rank's
 * last action, the order inferred. */
static TpSchedule *build(const Torch *t, TpChunkMap map, GError **err)
{
  TpSchedule *s = tp_schedule_blank(t->name);
  s->order = TP_ORDER_1F1B, s->policy = TP_POLICY_SYNC, s->W = t->rows, s->N = t->N, s->K = 1;
  if (t->stages > t->rows)
    s->V = t->stages / t->rows, s->map = map;
  if (!tp_header_finish(s, FALSE, err)) {
    tp_schedule_free(s);
    return NULL;
  }
  for (int r = 0; r < t->rows; r++) {
    for (guint i = 0; i < t->acts[r]->len; i++) {
      const Action *a = &g_array_index(t->acts[r], Action, i);
      TpOp op = { .kind = (uint8_t)a->kind, .src = TP_SRC_FIXED, .mb = 1, .micro = a->micro, .ver = 0, .line = r + 1 };
      if (a->fb && s->rank_seq) /* composites of one chunk per rank are read as their two actions */
        tp_schedule_add_fb(s, r, (int)s->rank_seq[r]->len);
      g_array_append_val(s->stage[a->stage], op);
      tp_rank_seq_push(s, a->stage);
    }
    for (int st = 0; st < s->W; st++) /* each of the rank's stages applies its update after its last action */
      if (tp_stage_rank(s, st) == r) {
        TpOp u = { .kind = TP_OP_U, .src = TP_SRC_FIXED, .mb = 1, .micro = TP_WHOLE, .ver = 0, .line = r + 1 };
        g_array_append_val(s->stage[st], u);
        tp_rank_seq_push(s, st);
      }
  }
  s->order = infer_order(s);
  return s;
}

TpSchedule *tp_schedule_parse_torch(const char *text, const char *name, GError **err)
{
  if (!check_line_ends(text, name, err))
    return NULL;
  g_auto(GStrv) lines = g_strsplit_set(text, "\n", -1);
  int rows = g_strv_length(lines);
  while (rows > 0 && !*g_strstrip(lines[rows - 1]))
    rows--;
  if (rows < 1 || rows > TP_MAX_WORKERS) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: PyTorch schedule CSV with %d ranks (rows), expected 1..%d", name,
                rows, TP_MAX_WORKERS);
    return NULL;
  }
  Torch t = { .name = name, .rows = rows, .acts = g_new0(GArray *, rows), .rank_of = g_new(int, TP_MAX_WORKERS) };
  for (int st = 0; st < TP_MAX_WORKERS; st++)
    t.rank_of[st] = -1;
  TpChunkMap map = TP_MAP_NONE;
  gboolean ok = TRUE;
  for (int r = 0; r < rows && ok; r++)
    ok = read_row(&t, r, lines[r], err);
  ok = ok && check_stages(&t, err) &&
       (t.stages <= rows || derive_map(t.rank_of, t.stages, rows, has_split(&t), &map, name, err)) &&
       check_forwards(&t, err);
  if (ok && t.N == 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: no computation in the PyTorch schedule CSV", name);
    ok = FALSE;
  }
  TpSchedule *s = ok ? build(&t, map, err) : NULL;
  g_free(t.rank_of);
  for (int r = 0; r < rows; r++)
    if (t.acts[r])
      g_array_unref(t.acts[r]);
  g_free(t.acts);
  return s;
}
