/* tp_cost.c — unit cost model and the cost-file reader (GKeyFile, keys documented in docs/formats.md). */
#include "tp_cost.h"
#include "tp_error.h"
#include "tp_keyfile.h"

#include <math.h>
#include <string.h>

TpCost *tp_cost_unit(int W)
{
  TpCost *c = g_new0(TpCost, 1);
  c->W = W;
  c->unit = TRUE;
  c->samples_per_micro = 1;
  c->time_unit = "slot";
  c->byte_unit = "unit";
  c->tie.stage = -1;
  c->stage = g_new0(TpStageCost, W);
  c->link = g_new0(TpLinkCost, MAX(W - 1, 1));
  for (int s = 0; s < W; s++)
    c->stage[s] = (TpStageCost){ .fwd = 1, .bwd = 1, .act_bytes = 1, .grad_bytes = 1, .stored_bytes = 1,
                                 .weight_bytes = 1, .optimizer_bytes = 1, .grad_buffer_bytes = 1, .device = s,
                                 .input_bytes = 1 };
  tp_cost_update_devices(c);
  return c;
}

void tp_cost_free(TpCost *c)
{
  if (!c)
    return;
  g_free(c->stage);
  g_free(c->link);
  g_free(c->source);
  g_strfreev(c->device_name);
  g_strfreev(c->stage_note);
  g_free(c->capacity);
  tp_tie_clear(&c->tie);
  tp_dp_free(c->dp);
  g_free(c);
}

void tp_cost_update_devices(TpCost *c)
{
  int maxdev = 0;
  for (int s = 0; s < c->W; s++)
    maxdev = MAX(maxdev, c->stage[s].device + 1);
  gboolean *used = g_new0(gboolean, maxdev);
  c->shared_devices = FALSE;
  for (int s = 0; s < c->W; s++) {
    if (used[c->stage[s].device])
      c->shared_devices = TRUE;
    used[c->stage[s].device] = TRUE;
  }
  c->n_devices = maxdev;
  g_free(used);
}

void tp_cost_place_chunks(TpCost *c, const TpSchedule *s)
{
  if (!s->rank_seq || c->W != s->W)
    return;
  /* rank r's device is its first chunk's, stage r (one device per rank unless the model shares
   * them, as the h200 cluster's single device is shared by every stage) */
  int R = tp_schedule_ranks(s), *dev = g_new(int, R);
  for (int r = 0; r < R; r++)
    dev[r] = c->stage[r].device;
  for (int st = 0; st < c->W; st++) {
    c->stage[st].device = dev[tp_stage_rank(s, st)];
    if (st + 1 < c->W && tp_stage_rank(s, st) == tp_stage_rank(s, st + 1))
      c->link[st] = (TpLinkCost){ .latency = 0 }; /* free, every message eager */
  }
  g_free(dev);
  tp_cost_update_devices(c);
}

/* ---- cost file ---------------------------------------------------------------------------- */

/* Bounds of a cost file's numbers: every total the simulator forms (TP_MAX_OPS operations, each
 * at most a compute time plus a transfer of TP_COST_MAX_BYTES at TP_COST_MIN_BANDWIDTH) stays
 * finite, and no time is too small to be a time (4.9e-324 s would make rates infinite). */
#define TP_COST_MAX_TIME 1e9
#define TP_COST_MIN_TIME 1e-12
#define TP_COST_MAX_BYTES 1e18
#define TP_COST_MIN_BANDWIDTH 1e-6

typedef enum { V_TIME, V_BYTES, V_BANDWIDTH, V_DEVICE, V_LINK, V_FRACTION } ValueKind;

/* A key of [stages]/[stage.N] or [links]/[link.N]: where its value goes and what it may be. */
typedef struct {
  const char *name;
  size_t offset; /* in TpStageCost or TpLinkCost */
  ValueKind kind;
} CostKey;

enum { K_FORWARD, K_FORWARD_WHOLE, K_BACKWARD, K_BACKWARD_INPUT, K_UPDATE, K_ACT, K_GRAD, K_STORED, K_STORED_W, K_WEIGHT, K_OPTIMIZER, K_GRAD_BUFFER, K_DEVICE, K_FB_OVERLAP, N_STAGE_KEYS };

static const CostKey stage_keys[N_STAGE_KEYS] = {
  [K_FORWARD] = { "forward", G_STRUCT_OFFSET(TpStageCost, fwd), V_TIME },
  [K_FORWARD_WHOLE] = { "forward_whole", G_STRUCT_OFFSET(TpStageCost, fwd_whole), V_TIME },
  [K_BACKWARD] = { "backward", G_STRUCT_OFFSET(TpStageCost, bwd), V_TIME },
  [K_BACKWARD_INPUT] = { "backward_input", G_STRUCT_OFFSET(TpStageCost, bwd_input), V_TIME },
  [K_UPDATE] = { "update", G_STRUCT_OFFSET(TpStageCost, upd), V_TIME },
  [K_ACT] = { "activation_bytes", G_STRUCT_OFFSET(TpStageCost, act_bytes), V_BYTES },
  [K_GRAD] = { "gradient_bytes", G_STRUCT_OFFSET(TpStageCost, grad_bytes), V_BYTES },
  [K_STORED] = { "stored_activation_bytes", G_STRUCT_OFFSET(TpStageCost, stored_bytes), V_BYTES },
  [K_STORED_W] = { "stored_for_w_bytes", G_STRUCT_OFFSET(TpStageCost, stored_w_bytes), V_BYTES },
  [K_WEIGHT] = { "weight_bytes", G_STRUCT_OFFSET(TpStageCost, weight_bytes), V_BYTES },
  [K_OPTIMIZER] = { "optimizer_bytes", G_STRUCT_OFFSET(TpStageCost, optimizer_bytes), V_BYTES },
  [K_GRAD_BUFFER] = { "gradient_buffer_bytes", G_STRUCT_OFFSET(TpStageCost, grad_buffer_bytes), V_BYTES },
  [K_DEVICE] = { "device", G_STRUCT_OFFSET(TpStageCost, device), V_DEVICE },
  [K_FB_OVERLAP] = { "fb_overlap", G_STRUCT_OFFSET(TpStageCost, fb_overlap), V_FRACTION },
};

static const CostKey link_keys[] = {
  { "latency", G_STRUCT_OFFSET(TpLinkCost, latency), V_TIME },
  { "bandwidth", G_STRUCT_OFFSET(TpLinkCost, bandwidth), V_BANDWIDTH },
  { "eager_limit", G_STRUCT_OFFSET(TpLinkCost, eager_limit), V_BYTES },
};

/* The entry of `table` named key, or NULL (then the error lists the known names). */
static const CostKey *find_key(const TpKeyFile *r, const char *group, const char *key, const CostKey *table, int n,
                               GError **err)
{
  for (int i = 0; i < n; i++)
    if (strcmp(table[i].name, key) == 0)
      return &table[i];
  g_autoptr(GString) list = g_string_new(NULL);
  for (int i = 0; i < n; i++)
    g_string_append_printf(list, "%s%s", i ? ", " : "", table[i].name);
  tp_kf_fail(r, err, group, key, "unknown key (known: %s)", list->str);
  return NULL;
}

/* Whether v is allowed for a key of that kind; otherwise the reason. */
static const char *value_problem(ValueKind kind, double v)
{
  switch (kind) {
  case V_TIME:
    if (v < 0 || v > TP_COST_MAX_TIME)
      return "expected a time from 0 to " G_STRINGIFY(TP_COST_MAX_TIME);
    if (v > 0 && v < TP_COST_MIN_TIME)
      return "a time below " G_STRINGIFY(TP_COST_MIN_TIME) " is too small to simulate (write 0 for none)";
    return NULL;
  case V_BYTES:
    return v < 0 || v > TP_COST_MAX_BYTES ? "expected a byte count from 0 to " G_STRINGIFY(TP_COST_MAX_BYTES) : NULL;
  case V_BANDWIDTH:
    if (v == 0)
      return "bandwidth must be positive (leave it out for an infinite one)";
    return v < TP_COST_MIN_BANDWIDTH || v > TP_COST_MAX_BYTES
             ? "expected a bandwidth from " G_STRINGIFY(TP_COST_MIN_BANDWIDTH) " to " G_STRINGIFY(TP_COST_MAX_BYTES)
             : NULL;
  case V_DEVICE:
    return v < 1 || v > 4096 || v != floor(v) ? "device numbers are whole numbers from 1 to 4096" : NULL;
  case V_LINK:
    return v < 1 || v > 4096 || v != floor(v) ? "link numbers are whole numbers from 1 to 4096" : NULL;
  case V_FRACTION:
    return v > 1 ? "expected a fraction from 0 to 1" : NULL;
  }
  return NULL;
}

/* Digits, one comma, digits, and nothing else but blanks around: "0,5". */
static gboolean decimal_comma(const char *t)
{
  while (*t == ' ' || *t == '\t')
    t++;
  const char *a = t;
  while (g_ascii_isdigit(*t))
    t++;
  if (t == a || *t++ != ',' || !g_ascii_isdigit(*t))
    return FALSE;
  while (g_ascii_isdigit(*t))
    t++;
  while (*t == ' ' || *t == '\t')
    t++;
  return *t == '\0';
}

/* A key holding one number, or a list of exactly `n` (given: n > 1), each checked for its kind. */
static gboolean read_values(const TpKeyFile *r, const char *group, const CostKey *key, int n, double *vals, int *got,
                            GError **err)
{
  g_autofree char *raw = g_key_file_get_value(r->kf, group, key->name, NULL);
  g_auto(GStrv) parts = g_strsplit(raw ? raw : "", ",", -1);
  int m = (int)g_strv_length(parts);
  /* "0,5": a decimal comma, or two values?  Refused: two values are written "0, 5". */
  if (m == 2 && decimal_comma(raw)) {
    g_autofree char *q = tp_quote(g_strstrip(raw));
    return tp_kf_fail(r, err, group, key->name, "%s: numbers take a decimal point (0.5); to give one value per "
                      "stage, separate them with a comma and a blank (0, 5)", q);
  }
  if (m != 1 && m != n)
    return tp_kf_fail(r, err, group, key->name, "expected one number or %d comma-separated numbers, got %d", n, m);
  for (int i = 0; i < m; i++) {
    const char *why = NULL;
    if (!tp_kf_parse_number(parts[i], &vals[i]) || vals[i] < 0)
      why = "expected a non-negative number";
    else
      why = value_problem(key->kind, vals[i]);
    if (why) {
      g_autofree char *q = tp_quote(g_strstrip(parts[i]));
      return tp_kf_fail(r, err, group, key->name, "%s, got %s", why, q);
    }
  }
  *got = m;
  return TRUE;
}

/* Apply the keys of a stage group to stages [lo, hi); set[s] marks (bit K_…) keys given explicitly. */
static gboolean apply_stage_group(const TpKeyFile *r, const char *group, TpCost *c, int lo, int hi, guint32 *set,
                                  GError **err)
{
  g_auto(GStrv) keys = g_key_file_get_keys(r->kf, group, NULL, NULL);
  g_autofree double *vals = g_new(double, c->W);
  for (int i = 0; keys && keys[i]; i++) {
    int got = 0;
    const CostKey *key = find_key(r, group, keys[i], stage_keys, N_STAGE_KEYS, err);
    if (!key || !read_values(r, group, key, hi - lo, vals, &got, err))
      return FALSE;
    for (int s = lo; s < hi; s++) {
      double v = vals[got == 1 ? 0 : s - lo];
      char *field = (char *)&c->stage[s] + key->offset;
      if (key->kind == V_DEVICE)
        *(int *)field = (int)v - 1;
      else
        *(double *)field = v;
      set[s] |= 1u << (key - stage_keys);
    }
  }
  return TRUE;
}

static gboolean apply_link_group(const TpKeyFile *r, const char *group, TpCost *c, int lo, int hi, GError **err)
{
  g_auto(GStrv) keys = g_key_file_get_keys(r->kf, group, NULL, NULL);
  g_autofree double *vals = g_new(double, MAX(c->W, 1));
  for (int i = 0; keys && keys[i]; i++) {
    int got = 0;
    const CostKey *key = find_key(r, group, keys[i], link_keys, G_N_ELEMENTS(link_keys), err);
    if (!key || !read_values(r, group, key, hi - lo, vals, &got, err))
      return FALSE;
    for (int l = lo; l < hi; l++)
      *(double *)((char *)&c->link[l] + key->offset) = vals[got == 1 ? 0 : l - lo];
  }
  return TRUE;
}

/* [data_parallel]: the all-reduce's links, one value or one per stage each: latency, bandwidth, and
 * link (stages given one number share that link; by default each stage has its own). */
static gboolean apply_dp_group(const TpKeyFile *r, const char *g, TpCost *c, GError **err)
{
  static const CostKey keys[] = {
    { "latency", 0, V_TIME }, { "bandwidth", 0, V_BANDWIDTH }, { "link", 0, V_LINK },
  };
  if (!c->dp)
    c->dp = tp_dp_new(c->W);
  TpDataParallel *dp = c->dp;
  double *dest[] = { dp->latency, dp->bandwidth, NULL };
  g_auto(GStrv) names = g_key_file_get_keys(r->kf, g, NULL, NULL);
  g_autofree double *vals = g_new(double, c->W);
  for (int i = 0; names && names[i]; i++) {
    int got = 0;
    const CostKey *key = find_key(r, g, names[i], keys, G_N_ELEMENTS(keys), err);
    if (!key || !read_values(r, g, key, c->W, vals, &got, err))
      return FALSE;
    for (int s = 0; s < c->W; s++) {
      double v = vals[got == 1 ? 0 : s];
      if (dest[key - keys])
        dest[key - keys][s] = v;
      else if (v > c->W)
        return tp_kf_fail(r, err, g, "link", "link %g: links are numbered 1 .. %d (one per stage at most)", v, c->W);
      else
        dp->link[s] = (int)v - 1;
    }
  }
  tp_dp_update_links(dp);
  return TRUE;
}

/* "prefixN" with N in 1..n: its index from 0.  FALSE when there is no such index (also when n < 1). */
static gboolean group_index(const char *group, const char *prefix, int n, int *out)
{
  int v;
  if (!g_str_has_prefix(group, prefix) || n < 1 || !tp_parse_int(group + strlen(prefix), 1, n, &v, NULL))
    return FALSE;
  *out = v - 1;
  return TRUE;
}

/* [cost]: samples_per_micro_batch. */
static gboolean apply_cost_group(const TpKeyFile *r, const char *g, TpCost *c, GError **err)
{
  g_auto(GStrv) keys = g_key_file_get_keys(r->kf, g, NULL, NULL);
  for (int k = 0; keys[k]; k++) {
    if (strcmp(keys[k], "samples_per_micro_batch") != 0)
      return tp_kf_fail(r, err, g, keys[k], "unknown key (known: samples_per_micro_batch)");
    g_autofree char *v = g_key_file_get_value(r->kf, g, keys[k], NULL);
    if (!tp_kf_parse_number(v, &c->samples_per_micro) || c->samples_per_micro <= 0 || c->samples_per_micro > 1e12) {
      g_autofree char *q = tp_quote(v);
      return tp_kf_fail(r, err, g, keys[k], "expected a positive number up to 1e12, got %s", q);
    }
  }
  return TRUE;
}

/* Group g in pass 0 ([cost] and the [stages]/[links] defaults) or pass 1 (the [stage.N]/[link.N]
 * overrides); a group of no known name, or of a stage or link the run has not, refused in either. */
static gboolean apply_group(const TpKeyFile *r, const char *g, int pass, TpCost *c, int W, guint32 *set, GError **err)
{
  int idx;
  if (strcmp(g, "cost") == 0)
    return pass || apply_cost_group(r, g, c, err);
  if (strcmp(g, "stages") == 0)
    return pass || apply_stage_group(r, g, c, 0, W, set, err);
  if (strcmp(g, "links") == 0)
    return pass || W <= 1 || apply_link_group(r, g, c, 0, W - 1, err);
  if (strcmp(g, "data_parallel") == 0)
    return pass || apply_dp_group(r, g, c, err);
  if (g_str_has_prefix(g, "stage.")) {
    if (!group_index(g, "stage.", W, &idx))
      return tp_kf_fail(r, err, g, NULL, "no such stage: stages are stage.1 .. stage.%d", W);
    return !pass || apply_stage_group(r, g, c, idx, idx + 1, set, err);
  }
  if (g_str_has_prefix(g, "link.")) {
    if (W == 1)
      return tp_kf_fail(r, err, g, NULL, "no such link: a single stage has no links");
    if (!group_index(g, "link.", W - 1, &idx))
      return tp_kf_fail(r, err, g, NULL, "no such link: links are link.1 .. link.%d (link.S joins stages S and S+1)",
                        W - 1);
    return !pass || apply_link_group(r, g, c, idx, idx + 1, err);
  }
  return tp_kf_fail(r, err, g, NULL, "unknown group (known: cost, stages, stage.N, links, link.N, data_parallel)");
}

/* Each stage's forward and backward given (a backward_input below the backward), the byte counts
 * not given taken from those they default to. */
static gboolean stage_defaults(const TpKeyFile *r, TpCost *c, int W, const guint32 *set, GError **err)
{
  for (int s = 0; s < W; s++) {
    TpStageCost *sc = &c->stage[s];
#define GIVEN(k) ((set[s] >> (k)) & 1u)
    if (!GIVEN(K_FORWARD) || !GIVEN(K_BACKWARD))
      return tp_kf_fail(r, err, "stages", NULL, "stage %d has no %s time: give forward and backward", s + 1,
                        GIVEN(K_FORWARD) ? "backward" : "forward");
    if (GIVEN(K_BACKWARD_INPUT) && sc->bwd_input >= sc->bwd)
      return tp_kf_fail(r, err, "stages", "backward_input",
                        "stage %d: backward_input %g is not less than backward %g (the weight gradient W takes the "
                        "rest of the backward)", s + 1, sc->bwd_input, sc->bwd);
    if (!GIVEN(K_GRAD))
      sc->grad_bytes = sc->act_bytes;
    if (!GIVEN(K_STORED))
      sc->stored_bytes = sc->act_bytes;
    if (GIVEN(K_STORED_W) && sc->stored_w_bytes > sc->stored_bytes)
      return tp_kf_fail(r, err, "stages", "stored_for_w_bytes",
                        "stage %d: stored_for_w_bytes %g is more than stored_activation_bytes %g (what a W keeps is "
                        "part of what the forward stored)", s + 1, sc->stored_w_bytes, sc->stored_bytes);
    if (!GIVEN(K_OPTIMIZER))
      sc->optimizer_bytes = sc->weight_bytes;
    if (!GIVEN(K_GRAD_BUFFER))
      sc->grad_buffer_bytes = sc->weight_bytes;
#undef GIVEN
  }
  return TRUE;
}

TpCost *tp_cost_parse(const char *text, gsize len, const char *name, int W, GError **err)
{
  TpKeyFile r;
  if (!tp_kf_open(&r, name, text, len, err))
    return NULL;
  g_autoptr(TpCost) c = tp_cost_unit(W);
  c->unit = FALSE;
  c->time_unit = "s";
  c->byte_unit = "B";
  c->source = g_strdup(name);
  for (int s = 0; s < W; s++)
    c->stage[s] = (TpStageCost){ .device = s };
  guint32 *set = g_new0(guint32, W);
  gboolean ok = TRUE;
  g_auto(GStrv) groups = g_key_file_get_groups(r.kf, NULL);
  /* [cost] and [stages]/[links] defaults first, then [stage.N]/[link.N] overrides */
  for (int pass = 0; pass < 2 && ok; pass++)
    for (int i = 0; groups[i] && ok; i++)
      ok = apply_group(&r, groups[i], pass, c, W, set, err);
  ok = ok && stage_defaults(&r, c, W, set, err);
  g_free(set);
  tp_kf_close(&r);
  if (!ok)
    return NULL;
  tp_cost_update_devices(c);
  return g_steal_pointer(&c);
}

void tp_cost_data_parallel(TpCost *c, int D, gboolean overlap)
{
  if (D <= 1)
    return;
  if (!c->dp)
    c->dp = tp_dp_new(c->W);
  c->dp->D = D;
  c->dp->overlap = overlap;
  for (int s = 0; s < c->W; s++) {
    c->dp->bytes[s] = c->stage[s].weight_bytes;
    c->stage[s].grad_buffer_bytes += c->stage[s].weight_bytes; /* the reduction buffer */
  }
}

TpCost *tp_cost_load(const char *path, int W, GError **err)
{
  g_autofree char *text = NULL;
  gsize len;
  if (!tp_read_file(path, "cost file", &text, &len, err))
    return NULL;
  return tp_cost_parse(text, len, tp_input_name(path), W, err);
}
