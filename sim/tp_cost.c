/* tp_cost.c — unit cost model and the cost-file reader (GKeyFile, keys documented in README). */
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
  c->stage = g_new0(TpStageCost, W);
  c->link = g_new0(TpLinkCost, MAX(W - 1, 1));
  for (int s = 0; s < W; s++)
    c->stage[s] = (TpStageCost){ 1, 1, 0, 1, 1, 1, 1, 1, 1, s };
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

/* ---- cost file ---------------------------------------------------------------------------- */

/* A key holding one non-negative number, or a list of exactly `n` (given: n > 1). */
static gboolean read_values(const TpKeyFile *r, const char *group, const char *key, int n, double *vals, int *got,
                            GError **err)
{
  g_autofree char *raw = g_key_file_get_value(r->kf, group, key, NULL);
  g_auto(GStrv) parts = g_strsplit(raw, ",", -1);
  int m = (int)g_strv_length(parts);
  if (m != 1 && m != n)
    return tp_kf_fail(r, err, group, key, "expected one number or %d comma-separated numbers, got %d", n, m);
  for (int i = 0; i < m; i++)
    if (!tp_kf_parse_number(parts[i], &vals[i]) || vals[i] < 0)
      return tp_kf_fail(r, err, group, key, "expected a non-negative number, got '%s'", g_strstrip(parts[i]));
  *got = m;
  return TRUE;
}

static const char *const stage_keys[] = { "forward", "backward", "update", "activation_bytes", "gradient_bytes",
                                          "stored_activation_bytes", "weight_bytes", "optimizer_bytes",
                                          "gradient_buffer_bytes", "device", NULL };
static const char *const link_keys[] = { "latency", "bandwidth", NULL };

/* Apply the keys of a stage group to stages [lo, hi); `set` marks keys given explicitly. */
static gboolean apply_stage_group(const TpKeyFile *r, const char *group, TpCost *c, int lo, int hi, gboolean *set,
                                  GError **err)
{
  g_auto(GStrv) keys = g_key_file_get_keys(r->kf, group, NULL, NULL);
  double *vals = g_new(double, c->W);
  gboolean ok = TRUE;
  if (!tp_kf_known_keys(r, group, stage_keys, err))
    ok = FALSE;
  for (int i = 0; keys && keys[i] && ok; i++) {
    int got = 0, k;
    if (!(ok = read_values(r, group, keys[i], hi - lo, vals, &got, err)))
      break;
    for (k = 0; stage_keys[k] && strcmp(stage_keys[k], keys[i]) != 0; k++)
      ;
    for (int s = lo; s < hi; s++) {
      double v = vals[got == 1 ? 0 : s - lo];
      TpStageCost *sc = &c->stage[s];
      double *field[] = { &sc->fwd, &sc->bwd, &sc->upd, &sc->act_bytes, &sc->grad_bytes, &sc->stored_bytes,
                          &sc->weight_bytes, &sc->optimizer_bytes, &sc->grad_buffer_bytes };
      if (k == 9) {
        if (v < 1 || v > 4096 || v != floor(v)) {
          ok = tp_kf_fail(r, err, group, keys[i], "device numbers are whole numbers from 1");
          break;
        }
        sc->device = (int)v - 1;
      } else {
        *field[k] = v;
      }
      set[s * 10 + k] = TRUE;
    }
  }
  g_free(vals);
  return ok;
}

static gboolean apply_link_group(const TpKeyFile *r, const char *group, TpCost *c, int lo, int hi, GError **err)
{
  g_auto(GStrv) keys = g_key_file_get_keys(r->kf, group, NULL, NULL);
  double *vals = g_new(double, MAX(c->W, 1));
  gboolean ok = TRUE;
  if (!tp_kf_known_keys(r, group, link_keys, err))
    ok = FALSE;
  for (int i = 0; keys && keys[i] && ok; i++) {
    int got = 0;
    if (!(ok = read_values(r, group, keys[i], hi - lo, vals, &got, err)))
      break;
    for (int l = lo; l < hi; l++) {
      double v = vals[got == 1 ? 0 : l - lo];
      if (keys[i][0] == 'l')
        c->link[l].latency = v;
      else if (v <= 0)
        ok = tp_kf_fail(r, err, group, keys[i], "bandwidth must be positive (leave it out for an infinite one)");
      else
        c->link[l].bandwidth = v;
    }
  }
  g_free(vals);
  return ok;
}

static gboolean group_index(const char *group, const char *prefix, int n, int *out)
{
  gint64 v;
  if (!g_str_has_prefix(group, prefix) || !g_ascii_string_to_signed(group + strlen(prefix), 10, 1, n, &v, NULL))
    return FALSE;
  *out = (int)v - 1;
  return TRUE;
}

TpCost *tp_cost_parse(const char *text, gsize len, const char *name, int W, GError **err)
{
  TpKeyFile r;
  if (!tp_kf_open(&r, name, text, len, err))
    return NULL;
  GKeyFile *kf = r.kf;
  g_autoptr(TpCost) c = tp_cost_unit(W);
  c->unit = FALSE;
  c->time_unit = "s";
  c->byte_unit = "B";
  c->source = g_strdup(name);
  for (int s = 0; s < W; s++)
    c->stage[s] = (TpStageCost){ 0, 0, 0, 0, 0, 0, 0, 0, 0, s };
  gboolean *set = g_new0(gboolean, (size_t)W * 10);
  gboolean ok = TRUE;
  g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
  /* [cost] and [stages]/[links] defaults first, then [stage.N]/[link.N] overrides */
  for (int pass = 0; pass < 2 && ok; pass++)
    for (int i = 0; groups[i] && ok; i++) {
      const char *g = groups[i];
      int idx;
      if (strcmp(g, "cost") == 0) {
        if (pass)
          continue;
        g_auto(GStrv) keys = g_key_file_get_keys(kf, g, NULL, NULL);
        for (int k = 0; keys[k] && ok; k++) {
          if (strcmp(keys[k], "samples_per_micro_batch") != 0) {
            ok = tp_kf_fail(&r, err, g, keys[k], "unknown key (known: samples_per_micro_batch)");
            break;
          }
          g_autofree char *v = g_key_file_get_value(kf, g, keys[k], NULL);
          if (!tp_kf_parse_number(v, &c->samples_per_micro) || c->samples_per_micro <= 0)
            ok = tp_kf_fail(&r, err, g, keys[k], "expected a positive number, got '%s'", v);
        }
      } else if (strcmp(g, "stages") == 0) {
        if (!pass)
          ok = apply_stage_group(&r, g, c, 0, W, set, err);
      } else if (strcmp(g, "links") == 0) {
        if (!pass && W > 1)
          ok = apply_link_group(&r, g, c, 0, W - 1, err);
      } else if (g_str_has_prefix(g, "stage.")) {
        if (!group_index(g, "stage.", W, &idx))
          ok = tp_kf_fail(&r, err, g, NULL, "no such stage: stages are stage.1 .. stage.%d", W);
        else if (pass)
          ok = apply_stage_group(&r, g, c, idx, idx + 1, set, err);
      } else if (g_str_has_prefix(g, "link.")) {
        if (!group_index(g, "link.", W - 1, &idx))
          ok = tp_kf_fail(&r, err, g, NULL, "no such link: links are link.1 .. link.%d (link.S joins stages S and S+1)",
                   W - 1);
        else if (pass)
          ok = apply_link_group(&r, g, c, idx, idx + 1, err);
      } else {
        ok = tp_kf_fail(&r, err, g, NULL, "unknown group (known: cost, stages, stage.N, links, link.N)");
      }
    }
  if (ok)
    for (int s = 0; s < W; s++) {
      TpStageCost *sc = &c->stage[s];
      if (!set[s * 10 + 0] || !set[s * 10 + 1]) {
        ok = tp_kf_fail(&r, err, "stages", NULL, "stage %d has no %s time: give forward and backward", s + 1,
                 set[s * 10 + 0] ? "backward" : "forward");
        break;
      }
      if (!set[s * 10 + 4])
        sc->grad_bytes = sc->act_bytes;
      if (!set[s * 10 + 5])
        sc->stored_bytes = sc->act_bytes;
      if (!set[s * 10 + 7])
        sc->optimizer_bytes = sc->weight_bytes;
      if (!set[s * 10 + 8])
        sc->grad_buffer_bytes = sc->weight_bytes;
    }
  g_free(set);
  tp_kf_close(&r);
  if (!ok)
    return NULL;
  tp_cost_update_devices(c);
  return g_steal_pointer(&c);
}

TpCost *tp_cost_load(const char *path, int W, GError **err)
{
  g_autofree char *text = NULL;
  gsize len;
  if (!tp_read_file(path, "cost file", &text, &len, err))
    return NULL;
  return tp_cost_parse(text, len, path, W, err);
}
