/* tp_schedule.h — the schedule IR shared by generator, validator, simulator and executor.
 *
 * A schedule is, for each of W stages, an ordered list of operations (forward of a micro-batch or
 * of a whole mini-batch, backward of a micro-batch or of a whole mini-batch, update), each with the
 * weight version it reads.  A backward is one operation (B) or two (split backward, the
 * zero-bubble family): I, the input gradient, sent to the stage before, and W, the weight
 * gradient, local, after its I and before the update that applies it.  Stages and micro-batches are
 * 0-based in memory; mini-batches keep the spec's numbering 1..K (version k = weights after k updates). */
#ifndef TP_SCHEDULE_H
#define TP_SCHEDULE_H

#include <glib.h>
#include <stdint.h>

typedef enum {
  TP_ORDER_GPIPE,
  TP_ORDER_1F1B,
  TP_ORDER_1F1B_ASYNC,
  TP_ORDER_NF1B,
  TP_ORDER_2BW,
  TP_ORDER_ZB_H1,
  TP_ORDER_ZB_H2,
  TP_ORDER_INTERLEAVED_1F1B,
  TP_ORDER_ZB_V,
  TP_ORDER_ZB_1P, /* the automatic zero-bubble orders (tp_zbauto.h) under W and 2W micro-batches' activations */
  TP_ORDER_ZB_2P,
  TP_ORDER_ZB_AUTO, /* the same under TpSchedule.act_limit */
  TP_ORDER_DUALPIPE_V, /* DeepSeek's DualPipe-V: a V of two chunks per rank, F&B composites (TpSchedule.fb) */
  TP_N_ORDERS
} TpOrder;

typedef enum {
  TP_POLICY_SYNC,
  TP_POLICY_STASH,
  TP_POLICY_VSYNC_LATEST,
  TP_POLICY_LATEST,
  TP_POLICY_INTERMEDIATE,
  TP_POLICY_2BW,
  TP_N_POLICIES
} TpPolicy;

/* I and W come after U so that the kinds of schedules without a split backward keep their values. */
typedef enum { TP_OP_F, TP_OP_B, TP_OP_U, TP_OP_I, TP_OP_W } TpOpKind;
#define TP_N_OP_KINDS 5
/* One letter per kind, indexed by TpOpKind: "FBUIW". */
extern const char tp_op_letters[TP_N_OP_KINDS + 1];
/* B or I: the operation that needs the gradient from the stage after and sends one to the stage before. */
static inline gboolean tp_op_sends_up(int kind) { return kind == TP_OP_B || kind == TP_OP_I; }
/* The orders whose backward is split into I and W. */
static inline gboolean tp_order_split(TpOrder o)
{
  return o == TP_ORDER_ZB_H1 || o == TP_ORDER_ZB_H2 || o == TP_ORDER_ZB_V || o == TP_ORDER_ZB_1P || o == TP_ORDER_ZB_2P ||
         o == TP_ORDER_ZB_AUTO || o == TP_ORDER_DUALPIPE_V;
}
/* The orders whose ranks hold several model chunks (interleaved, virtual stages). */
static inline gboolean tp_order_chunked(TpOrder o)
{
  return o == TP_ORDER_INTERLEAVED_1F1B || o == TP_ORDER_ZB_V || o == TP_ORDER_DUALPIPE_V;
}

/* Interleaved (virtual) stages: R ranks hold V model chunks each, W = R·V stages in all.  The map
 * says which rank runs stage st (0-based):
 *   ROUND_ROBIN (interleaved 1F1B, Megatron, PyTorch's ScheduleInterleaved1F1B): chunk c of rank r is
 *               stage c·R + r, so rank(st) = st mod R;
 *   V_SHAPE     (ZB-V, DualPipe-V): rank r holds stages r and 2R−1−r; with more chunks the direction
 *               alternates: rank(st) = st mod R for an even chunk st / R, R−1−(st mod R) for an odd one.
 * NONE is one chunk per rank: rank(st) = st, every schedule without interleaving. */
typedef enum { TP_MAP_NONE, TP_MAP_ROUND_ROBIN, TP_MAP_V_SHAPE, TP_N_MAPS } TpChunkMap;
const char *tp_chunk_map_name(TpChunkMap m);
gboolean tp_chunk_map_from_name(const char *name, TpChunkMap *out);
/* The rank of stage st under map m with R ranks. */
static inline int tp_chunk_map_rank(TpChunkMap m, int R, int st)
{
  if (m == TP_MAP_NONE)
    return st;
  int c = st / R, p = st % R;
  return m == TP_MAP_V_SHAPE && c % 2 ? R - 1 - p : p;
}


/* Where a backward's weights come from.  FIXED: the version in `ver`.  STASH: each micro-batch
 * uses the version its own forward read on this stage (`ver` is the oldest of them).  BLEND:
 * s(d)·stashed + (1−s(d))·latest per micro-batch (`ver` is the oldest stashed version). */
typedef enum { TP_SRC_FIXED, TP_SRC_STASH, TP_SRC_BLEND } TpSource;
/* Their names in the schedule files: fixed, stash, blend. */
extern const char *const tp_source_names[3];

/* Significance s(d) of stale weights for the intermediate policy. */
typedef enum { TP_SIG_EXP, TP_SIG_LINEAR, TP_SIG_CONST } TpSigKind;
typedef struct {
  TpSigKind kind;
  double param; /* tau for EXP, the constant for CONST, unused for LINEAR */
} TpSignificance;

#define TP_WHOLE (-1) /* micro value of an operation that covers the whole mini-batch */

/* 16 bytes: a schedule of a million operations is written, read and paged in at every step. */
typedef struct {
  uint8_t kind;  /* TpOpKind */
  uint8_t src;   /* TpSource */
  int16_t micro; /* micro-batch 0..N-1 (N <= TP_MAX_MICRO), or TP_WHOLE */
  int32_t mb;    /* mini-batch, 1..K */
  int32_t ver;   /* version read (for an update: the version it turns into version mb) */
  int32_t line;  /* line of the file it was read from, 0 when generated */
} TpOp;

/* The timeline an order (and vsync-latest's versions) was fixed on: unit slots, or a cost model. */
typedef enum { TP_FIXED_ON_SLOTS, TP_FIXED_ON_COSTS } TpFixedOn;

typedef struct {
  TpOrder order;
  TpPolicy policy;
  int W, N, K;
  TpFixedOn fixed_on; /* COSTS when tp_schedule_generate_costed fixed the order (or a file says so) */
  TpSignificance sig;
  gboolean recompute; /* a backward first re-runs its stage's forward from the stored stage input,
                         with the weights the backward reads (only stage inputs are stored) */
  gboolean recompute_said_no; /* a file's header says recompute=false (a --recompute contradicts it) */
  GArray **stage; /* W arrays of TpOp, in execution order */
  char *source;   /* file the schedule was read from, NULL when generated */
  /* Interleaved stages (V > 1): W = R·V stages on R = W / V ranks by `map`; rank_seq[r] lists the
   * stages (int32) whose next operation rank r runs, one entry per operation of its stages (updates
   * included), in the rank's execution order: a rank runs one operation at a time across its
   * chunks.  V = 1, map NONE and rank_seq NULL otherwise (stage st runs on rank st). */
  int V;
  TpChunkMap map;
  GArray **rank_seq;
  /* F&B composites (PyTorch's OVERLAP_F_B): per rank, the ascending places k in its order (rank_seq[r],
   * or stage r's operations with one chunk per rank) whose operation, an F, and the next, a B, run
   * as one operation; NULL when there is none. */
  GArray **fb;
  double act_limit; /* zb-auto's activations per stage, in micro-batches' stored bytes (zb-v's per rank, in
                       its two chunks'); 0: the default (and for the other orders) */
} TpSchedule;

/* Ranks (devices) of a schedule: W / V. */
static inline int tp_schedule_ranks(const TpSchedule *s) { return s->rank_seq ? s->W / s->V : s->W; }
static inline int tp_stage_rank(const TpSchedule *s, int st)
{
  return s->rank_seq ? tp_chunk_map_rank(s->map, s->W / s->V, st) : st;
}
/* Mark places k and k+1 of rank r's order as one F&B composite (k ascending on each rank). */
void tp_schedule_add_fb(TpSchedule *s, int r, int k);
/* Whether rank r's composite c (its c-th, in its order) opens at place k of the order: FALSE past its
 * last one, and where s has none. */
static inline gboolean tp_fb_opens(const TpSchedule *s, int r, guint c, int k)
{
  return s->fb && c < s->fb[r]->len && g_array_index(s->fb[r], int32_t, c) == k;
}
/* Give s (W stages) the chunk map m with V chunks per rank and empty rank sequences (V > 1). */
void tp_schedule_set_chunks(TpSchedule *s, int V, TpChunkMap m);

/* Limits that keep every size computation in range. */
#define TP_MAX_WORKERS 1024
#define TP_MAX_MICRO 4096
#define TP_MAX_MINI 1000000
#define TP_MAX_OPS 200000000LL

/* Mini-batches when none are asked for (the CLI's -k default, and each cell of a (W, N) sweep):
 * 3W+2 leaves W+2 of them in the steady range, after the first W and before the last W. */
static inline int tp_default_mini_batches(int W) { return 3 * W + 2; }

typedef struct {
  const char *name;
  TpOrder order;
  TpPolicy policy;
  const char *summary;
} TpPreset;

extern const TpPreset tp_presets[];
extern const int tp_n_presets;

const char *tp_order_name(TpOrder o);
/* "slots" or "costs": the fixed_on value in schedule files and reports. */
const char *tp_fixed_on_name(TpFixedOn f);
gboolean tp_fixed_on_from_name(const char *name, TpFixedOn *out);
const char *tp_policy_name(TpPolicy p);
gboolean tp_order_from_name(const char *name, TpOrder *out);
gboolean tp_policy_from_name(const char *name, TpPolicy *out);
const TpPreset *tp_preset_find(const char *name);
/* Preset name for an order × policy pair, or NULL if no preset has it. */
const char *tp_preset_name(TpOrder o, TpPolicy p);
/* Comma-separated list of names, for help texts and error messages. */
char *tp_preset_names(void);

/* Whether an order × policy pair makes sense for W, N; sets a TP_ERROR_INPUT error if not. */
gboolean tp_pair_check(TpOrder o, TpPolicy p, int W, int N, GError **err);
/* Whether W, N, K are in range and the schedule stays below TP_MAX_OPS operations. */
gboolean tp_size_check(int W, int N, int K, GError **err);

/* Bytes generating (order, index, replay, versions, validation) a W, N, K schedule takes at peak. */
long long tp_generate_bytes(TpOrder o, int W, int N, int K);
/* Operations per stage of a generated schedule of order o. */
long long tp_stage_ops_count(TpOrder o, int N, int K);

TpSchedule *tp_schedule_new(TpOrder o, TpPolicy p, int W, int N, int K);
void tp_schedule_free(TpSchedule *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpSchedule, tp_schedule_free)

static inline TpOp *tp_stage_ops(const TpSchedule *s, int st) { return (TpOp *)s->stage[st]->data; }
static inline int tp_stage_len(const TpSchedule *s, int st) { return (int)s->stage[st]->len; }
/* Whether any operation of s is an I or a W (a split backward). */
gboolean tp_schedule_has_split(const TpSchedule *s);
/* --recompute asked of s: TRUE and s recomputes; FALSE with a one-line TP_ERROR_INPUT where s splits
 * its backwards (a W needs the forward's saved state: it is not recomputed) or its file's header
 * says recompute=false. */
gboolean tp_schedule_ask_recompute(TpSchedule *s, GError **err);
static inline void tp_push(TpSchedule *s, int st, TpOpKind k, int mb, int micro)
{
  TpOp op = { .kind = (uint8_t)k, .src = TP_SRC_FIXED, .mb = mb, .micro = (int16_t)micro };
  g_array_append_val(s->stage[st], op);
}
long long tp_schedule_n_ops(const TpSchedule *s);

/* Fused forwards (tp_fuse.c): a copy of s in which each mini-batch whose N forwards run back to back
 * on every stage — in micro-batch order, reading one version — and whose backward is one whole
 * backward on every stage has them as one whole-mini-batch forward of that version; *fused counts
 * those mini-batches.  NULL with *fused = 0 when there is none (N = 1, interleaved stages, a split
 * backward, backwards per micro-batch, an order that interleaves them), or with err set when the
 * copy does not validate. */
TpSchedule *tp_schedule_fuse_forwards(const TpSchedule *s, int *fused, GError **err);
/* The converse: every whole-mini-batch forward as its N micro-batch forwards in its place (the
 * schedule a fused one came from; its timeline is the one vsync-latest's versions were fixed on). */
TpSchedule *tp_schedule_unfuse_forwards(const TpSchedule *s);
/* Why a schedule has nothing to fuse, for messages. */
#define TP_FUSE_NOTHING                                                                                          \
  "no mini-batch has its forwards back to back on every stage, reading one version, before one whole backward " \
  "(nf1b orders fixed on costs have them, with N >= 2)"
/* How many mini-batches of s have fused forwards (an nf1b schedule's whole-mini-batch forwards). */
int tp_schedule_fused_forwards(const TpSchedule *s);

/* Number of micro-batches an operation covers (N for a whole-mini-batch op, 1 otherwise). */
static inline int tp_op_count(const TpSchedule *s, const TpOp *op)
{
  return op->micro == TP_WHOLE ? s->N : 1;
}

/* Operations compare equal when kind, mini-batch, micro-batch, version and source agree (the
 * header's order, policy, sizes, significance and recompute too; fixed_on is not compared). */
/* The operations of mini-batches 1..j of s (1 <= j <= K), in each stage's order and each rank's, as
 * a schedule of K = j: what a run cut after mini-batch j ran.  Versions stay as they are (an
 * operation of mini-batch i reads a version below i); the source, header and chunks are s's. */
TpSchedule *tp_schedule_prefix(const TpSchedule *s, int j);
gboolean tp_schedule_equal(const TpSchedule *a, const TpSchedule *b);

/* How an operation is named.  CALL, in messages: "F(3,B)", "F(3)", "B(3)", "B(3,B)", "U(3)",
 * "F(3.27)", "I(3,B)", "W(3)".  GRID, in grids and timeline labels: "3B", "3A" (whole-mini-batch
 * forward), "3" (whole backward), "3b", "3.27", "3.27b"; a split backward's parts lead with their
 * letter, which no other token does: "I3b", "W3b", "I3" (whole mini-batch), "I3.27".  LABEL, in
 * traces: "F 3B", "F 3", "B 3", "U 3", "F 3.27", "I 3B", "W 3B". */
typedef enum { TP_NAME_CALL, TP_NAME_GRID, TP_NAME_LABEL } TpNameStyle;
/* The one formatter of operation names.  micro: 0-based or TP_WHOLE; wide: N > 26 (micro-batch j
 * written ".j" instead of a letter). */
void tp_op_format(TpNameStyle style, TpOpKind kind, int mb, int micro, gboolean wide, char *buf, size_t len);
/* An operation's name in messages: tp_op_format's CALL style for this schedule. */
void tp_op_name(const TpSchedule *s, const TpOp *op, char *buf, size_t len);
/* "file:line: " or "" — the location prefix of an op read from a file. */
void tp_op_where(const TpSchedule *s, const TpOp *op, char *buf, size_t len);

/* Generate a schedule: the order, then versions by the policy, then a full validation.  W is the
 * number of ranks; the chunked orders (tp_order_chunked) take tp_order_default_chunks(o) chunks per
 * rank here (tp_schedule_generate_chunked for others). */
TpSchedule *tp_schedule_generate(TpOrder o, TpPolicy p, int W, int N, int K, GError **err);
/* The chunk map order o generates with V chunks per rank: V-shaped for zb-v, round-robin for the
 * other orders with V > 1, none with V = 1. */
static inline TpChunkMap tp_order_chunk_map(TpOrder o, int V)
{
  return V == 1 ? TP_MAP_NONE : o == TP_ORDER_ZB_V || o == TP_ORDER_DUALPIPE_V ? TP_MAP_V_SHAPE : TP_MAP_ROUND_ROBIN;
}
/* Chunks per rank an order takes when none are asked for: 2 for the chunked orders, else 1. */
static inline int tp_order_default_chunks(TpOrder o) { return tp_order_chunked(o) ? 2 : 1; }
/* Whether V chunks per rank fit order o on W ranks with N micro-batches: interleaved-1f1b needs
 * V >= 2 and N a multiple of W (Megatron's and PyTorch's rule), zb-v V = 2, dualpipe-v V = 2 and N >= 2W,
 * the others V = 1. */
gboolean tp_chunks_check(TpOrder o, int W, int V, int N, GError **err);
/* The same, keeping in *prep (tp_replay.h; NULL: keep nothing) the index and unit-slot replay the
 * generation built, for tp_sim_run_prepared. */
typedef struct TpPrepared TpPrepared;
TpSchedule *tp_schedule_generate_prepared(TpOrder o, TpPolicy p, int W, int N, int K, TpPrepared *prep, GError **err);
/* The same with V chunks per rank (W ranks, so W·V stages; V = 1 for orders without chunks). */
TpSchedule *tp_schedule_generate_chunked(TpOrder o, TpPolicy p, int W, int V, int N, int K, TpPrepared *prep,
                                         GError **err);
/* The same for orders zb-auto and zb-v (W ranks), which take an activation limit (TpSchedule.act_limit, at
 * least 1; 0: their default, tp_zbauto.h); limit 0 for the other orders. */
TpSchedule *tp_schedule_generate_limited(TpOrder o, TpPolicy p, int W, int N, int K, double limit, TpPrepared *prep,
                                         GError **err);
/* Whether limit suits order o: 0 (none), or at least 1 for zb-auto and zb-v; otherwise a one-line
 * TP_ERROR_INPUT. */
gboolean tp_limit_check(TpOrder o, double limit, GError **err);

/* orders.c: fill the per-stage operation lists (versions left at 0) of an empty schedule. */
void tp_order_fill(TpSchedule *s);
/* The same; for the orders fixed on unit slots (nf1b, 1f1b-async), also their unit-slot times by
 * global operation index (start, end: every stage's operations, stage 1 first), the very times
 * tp_replay_times gives, and TRUE; FALSE (times untouched) for the others. */
gboolean tp_order_fill_timed(TpSchedule *s, double *start, double *end);

/* The nf1b rule (and 1f1b-async's, its case of one forward unit per mini-batch), spec §2.1: what an
 * idle stage st of W runs next, on any timeline.  Backward first: the next backward, mini-batch
 * nb (1..K), when b_ready — its gradient has arrived from stage st+1, or on the last stage all its
 * forward units (per of them) are done there, nf >= nb·per; else the next forward unit nf
 * (0..K·per-1) when f_ready — its activations have arrived (always on stage 1) — and admitted: a
 * new mini-batch starts only while fewer than W-st are in flight on the stage.  fj is nf's micro-batch,
 * nf mod per (kept by the callers, which count it anyway: no division here). */
typedef enum { TP_NEXT_IDLE, TP_NEXT_FORWARD, TP_NEXT_BACKWARD } TpNext;
static inline TpNext tp_nf1b_next(int W, int K, int per, int st, long nf, int fj, int nb, int inflight,
                                  gboolean f_ready, gboolean b_ready)
{
  if (nb <= K && (st == W - 1 ? nf >= (long)nb * per : b_ready))
    return TP_NEXT_BACKWARD;
  if (nf >= (long)K * per || (fj == 0 && inflight >= W - st) || (st > 0 && !f_ready))
    return TP_NEXT_IDLE;
  return TP_NEXT_FORWARD;
}

#endif
