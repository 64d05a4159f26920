/* tp_profile.c — the measured profile's key file: written by `timeprest profile`, read wherever a
 * cost model is taken (keys documented in docs/plan.md). */
#include "tp_profile.h"
#include "tp_eager.h"
#include "tp_error.h"
#include "tp_keyfile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Bounds of the numbers a profile may hold (those of a cost file: every total stays finite). */
#define PROF_MAX_TIME 1e9
#define PROF_MAX_BYTES 1e18
#define PROF_MAX_SIZES 64
#define PROF_MAX_LAYERS 1000

TpProfile *tp_profile_new(int L, int n_sizes)
{
  TpProfile *p = g_new0(TpProfile, 1);
  p->format_version = TP_PROFILE_FORMAT_VERSION;
  p->L = L, p->n_sizes = n_sizes;
  p->sizes = g_new0(int, MAX(n_sizes, 1));
  p->layer = g_new0(TpProfileLayer, MAX(L, 1));
  for (int i = 0; i < L; i++) {
    TpProfileLayer *l = &p->layer[i];
    l->fwd = g_new0(double, MAX(n_sizes, 1)), l->bwd = g_new0(double, MAX(n_sizes, 1));
    l->fwd_spread = g_new0(double, MAX(n_sizes, 1)), l->bwd_spread = g_new0(double, MAX(n_sizes, 1));
  }
  return p;
}

void tp_profile_free(TpProfile *p)
{
  if (!p)
    return;
  for (int i = 0; i < p->L; i++) {
    TpProfileLayer *l = &p->layer[i];
    g_free(l->kind);
    g_free(l->fwd), g_free(l->bwd), g_free(l->fwd_spread), g_free(l->bwd_spread);
  }
  g_free(p->layer);
  g_free(p->sizes);
  g_free(p->links.transport), g_free(p->links.bytes), g_free(p->links.one_way);
  g_free(p->model), g_free(p->backend), g_free(p->machine), g_free(p->hostname), g_free(p->date);
  g_free(p->source);
  g_free(p);
}

int tp_profile_size_index(const TpProfile *p, int m)
{
  for (int i = 0; i < p->n_sizes; i++)
    if (p->sizes[i] == m)
      return i;
  return -1;
}

char *tp_profile_sizes_text(const TpProfile *p)
{
  GString *s = g_string_new(NULL);
  for (int i = 0; i < p->n_sizes; i++)
    g_string_append_printf(s, "%s%d", i ? ", " : "", p->sizes[i]);
  return g_string_free(s, FALSE);
}

void tp_profile_fit_links(TpProfileLinks *l)
{
  /* minimise sum ((a + c x_i - t_i) / t_i)^2: weights 1 / t_i^2, normal equations of the line */
  double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (int i = 0; i < l->n; i++) {
    double x = l->bytes[i], t = l->one_way[i], w = t > 0 ? 1 / (t * t) : 1;
    sw += w, sx += w * x, sxx += w * x * x, st += w * t, sxt += w * x * t;
  }
  double det = sw * sxx - sx * sx, a = 0, c = 0;
  if (l->n >= 2 && det > 1e-12 * sw * sxx)
    a = (sxx * st - sx * sxt) / det, c = (sw * sxt - sx * st) / det;
  if (a < 0 || l->n < 2 || det <= 1e-12 * sw * sxx) /* through the origin */
    a = 0, c = sxx > 0 ? sxt / sxx : 0;
  double xmax = l->n > 0 ? l->bytes[l->n - 1] : 0;
  if (c <= 0 || c * xmax <= 1e-9 * a) /* no cost per byte (to rounding): the weighted mean time */
    c = 0, a = sw > 0 ? st / sw : 0;
  l->latency = a, l->bandwidth = c > 0 ? 1 / c : 0;
  l->fit_error = 0;
  for (int i = 0; i < l->n; i++)
    if (l->one_way[i] > 0)
      l->fit_error = MAX(l->fit_error, fabs(a + c * l->bytes[i] - l->one_way[i]) / l->one_way[i]);
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double tp_median_spread(double *v, int n, double *spread)
{
  qsort(v, n, sizeof *v, cmp_double);
  double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  *spread = med > 0 ? (v[n - 1] - v[0]) / med : 0;
  return med;
}

/* ---- writing ------------------------------------------------------------------------------------- */

static void put_num(GKeyFile *kf, const char *g, const char *k, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_key_file_set_value(kf, g, k, g_ascii_formatd(buf, sizeof buf, "%.9g", v));
}

static void put_list(GKeyFile *kf, const char *g, const char *k, const double *v, int n)
{
  GString *s = g_string_new(NULL);
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  for (int i = 0; i < n; i++)
    g_string_append_printf(s, "%s%s", i ? ", " : "", g_ascii_formatd(buf, sizeof buf, "%.9g", v[i]));
  g_key_file_set_value(kf, g, k, s->str);
  g_string_free(s, TRUE);
}

void tp_profile_format(const TpProfile *p, GString *out)
{
  g_autoptr(GKeyFile) kf = g_key_file_new();
  const char *g = "profile";
  g_key_file_set_integer(kf, g, "format_version", p->format_version);
  g_key_file_set_string(kf, g, "model", p->model ? p->model : "");
  g_key_file_set_string(kf, g, "backend", p->backend ? p->backend : "");
  g_key_file_set_integer(kf, g, "threads", p->threads);
  g_key_file_set_integer(kf, g, "cores", p->cores);
  g_key_file_set_string(kf, g, "machine", p->machine ? p->machine : "");
  g_key_file_set_string(kf, g, "hostname", p->hostname ? p->hostname : "");
  g_key_file_set_string(kf, g, "date", p->date ? p->date : "");
  put_num(kf, g, "memory_available", p->memory);
  g_key_file_set_integer(kf, g, "repetitions", p->repetitions);
  g_key_file_set_integer(kf, g, "layers", p->L);
  g_autofree double *sz = g_new(double, MAX(p->n_sizes, 1));
  for (int i = 0; i < p->n_sizes; i++)
    sz[i] = p->sizes[i];
  put_list(kf, g, "micro_batch_sizes", sz, p->n_sizes);
  for (int i = 0; i < p->L; i++) {
    const TpProfileLayer *l = &p->layer[i];
    g_autofree char *lg = g_strdup_printf("layer.%d", i + 1);
    g_key_file_set_string(kf, lg, "kind", l->kind ? l->kind : "");
    put_num(kf, lg, "weight_bytes", l->weight_bytes);
    put_num(kf, lg, "output_bytes_per_sample", l->out_bytes);
    put_num(kf, lg, "input_bytes_per_sample", l->in_bytes);
    put_num(kf, lg, "stored_bytes_per_sample", l->stored_bytes);
    put_num(kf, lg, "update", l->upd);
    put_num(kf, lg, "update_spread", l->upd_spread);
    put_list(kf, lg, "forward", l->fwd, p->n_sizes);
    put_list(kf, lg, "forward_spread", l->fwd_spread, p->n_sizes);
    put_list(kf, lg, "backward", l->bwd, p->n_sizes);
    put_list(kf, lg, "backward_spread", l->bwd_spread, p->n_sizes);
  }
  const TpProfileLinks *ln = &p->links;
  if (ln->transport) {
    g_key_file_set_string(kf, "links", "transport", ln->transport);
    g_key_file_set_integer(kf, "links", "ranks", ln->ranks);
    put_list(kf, "links", "message_bytes", ln->bytes, ln->n);
    put_list(kf, "links", "one_way", ln->one_way, ln->n);
    put_num(kf, "links", "latency", ln->latency);
    put_num(kf, "links", "bandwidth", ln->bandwidth);
    put_num(kf, "links", "fit_error", ln->fit_error);
    if (ln->eager_limit > 0)
      put_num(kf, "links", "eager_limit", ln->eager_limit);
  }
  gsize len;
  g_autofree char *text = g_key_file_to_data(kf, &len, NULL);
  g_string_append(out, "# timeprest profile: each layer's measured forward and backward seconds per micro-batch\n"
                       "# of each size in micro_batch_sizes (medians over the repetitions; *_spread: (largest -\n"
                       "# smallest) / median), update seconds, and bytes; [links]: one-way seconds of messages\n"
                       "# between MPI ranks and their fit.  Keys: docs/plan.md.\n");
  g_string_append_len(out, text, (gssize)len);
}

/* ---- reading ------------------------------------------------------------------------------------- */

/* Exactly n comma-separated numbers in [lo, hi]. */
static gboolean get_list(const TpKeyFile *r, const char *g, const char *k, int n, double lo, double hi, double *out,
                         GError **err)
{
  g_autofree char *raw = g_key_file_get_value(r->kf, g, k, NULL);
  if (!raw)
    return tp_kf_fail(r, err, g, NULL, "missing key '%s'", k);
  g_auto(GStrv) parts = g_strsplit(raw, ",", -1);
  int m = (int)g_strv_length(parts);
  if (m != n)
    return tp_kf_fail(r, err, g, k, "expected %d comma-separated numbers (one per %s size), got %d", n,
                      strcmp(g, "links") ? "micro-batch" : "message", m);
  for (int i = 0; i < n; i++)
    if (!tp_kf_parse_number(parts[i], &out[i]) || out[i] < lo || out[i] > hi) {
      g_autofree char *q = tp_quote(g_strstrip(parts[i]));
      return tp_kf_fail(r, err, g, k, "expected numbers from %g to %g, got %s", lo, hi, q);
    }
  return TRUE;
}

/* Times the simulator can add up: 0 (none) or at least PROF_MIN_TIME, as in cost files (a denormal
 * time made rates of inf samples/s). */
#define PROF_MIN_TIME 1e-12
static gboolean times_ok(const TpKeyFile *r, const char *g, const char *k, const double *v, int n, GError **err)
{
  for (int i = 0; i < n; i++)
    if (v[i] > 0 && v[i] < PROF_MIN_TIME)
      return tp_kf_fail(r, err, g, k, "a time of %g s is too small to simulate (below 1e-12 s; write 0 for none)", v[i]);
  return TRUE;
}

static gboolean get_int(const TpKeyFile *r, const char *g, const char *k, int lo, int hi, int *out, GError **err)
{
  double v = 0;
  if (!tp_kf_number(r, g, k, TRUE, lo, hi, &v, err))
    return FALSE;
  if (v != (int)v)
    return tp_kf_fail(r, err, g, k, "expected a whole number");
  *out = (int)v;
  return TRUE;
}

static gboolean read_layer(const TpKeyFile *r, TpProfile *p, int i, GError **err)
{
  static const char *const known[] = { "kind", "weight_bytes", "output_bytes_per_sample", "input_bytes_per_sample",
                                       "stored_bytes_per_sample", "update", "update_spread", "forward",
                                       "forward_spread", "backward", "backward_spread", NULL };
  g_autofree char *g = g_strdup_printf("layer.%d", i + 1);
  TpProfileLayer *l = &p->layer[i];
  if (!g_key_file_has_group(r->kf, g))
    return tp_kf_fail(r, err, "profile", "layers", "%d layers, but there is no [%s]", p->L, g);
  return tp_kf_known_keys(r, g, known, err) && tp_kf_name(r, g, "kind", TRUE, FALSE, &l->kind, err) &&
         tp_kf_number(r, g, "weight_bytes", TRUE, 0, PROF_MAX_BYTES, &l->weight_bytes, err) &&
         tp_kf_number(r, g, "output_bytes_per_sample", TRUE, 0, PROF_MAX_BYTES, &l->out_bytes, err) &&
         tp_kf_number(r, g, "input_bytes_per_sample", TRUE, 0, PROF_MAX_BYTES, &l->in_bytes, err) &&
         tp_kf_number(r, g, "stored_bytes_per_sample", TRUE, 0, PROF_MAX_BYTES, &l->stored_bytes, err) &&
         tp_kf_number(r, g, "update", TRUE, 0, PROF_MAX_TIME, &l->upd, err) &&
         tp_kf_number(r, g, "update_spread", TRUE, 0, 1e6, &l->upd_spread, err) &&
         get_list(r, g, "forward", p->n_sizes, 0, PROF_MAX_TIME, l->fwd, err) &&
         get_list(r, g, "forward_spread", p->n_sizes, 0, 1e6, l->fwd_spread, err) &&
         get_list(r, g, "backward", p->n_sizes, 0, PROF_MAX_TIME, l->bwd, err) &&
         get_list(r, g, "backward_spread", p->n_sizes, 0, 1e6, l->bwd_spread, err) &&
         times_ok(r, g, "update", &l->upd, 1, err) && times_ok(r, g, "forward", l->fwd, p->n_sizes, err) &&
         times_ok(r, g, "backward", l->bwd, p->n_sizes, err);
}

/* [links]: the transport, the ranks, ascending message sizes with a one-way time each, the fit. */
static gboolean read_links(const TpKeyFile *r, TpProfile *p, GError **err)
{
  static const char *const known[] = { "transport", "ranks", "message_bytes", "one_way", "latency", "bandwidth",
                                       "fit_error", "eager_limit", NULL };
  const char *g = "links";
  TpProfileLinks *l = &p->links;
  g_autofree char *raw = g_key_file_get_value(r->kf, g, "message_bytes", NULL);
  double ranks = 0;
  if (!tp_kf_known_keys(r, g, known, err) || !tp_kf_name(r, g, "transport", TRUE, FALSE, &l->transport, err))
    return FALSE;
  if (strcmp(l->transport, "mpi") != 0)
    return tp_kf_fail(r, err, g, "transport", "expected mpi (the only transport whose links are measured)");
  if (!tp_kf_number(r, g, "ranks", TRUE, 2, 1 << 20, &ranks, err))
    return FALSE;
  if (ranks != (int)ranks)
    return tp_kf_fail(r, err, g, "ranks", "expected a whole number");
  l->ranks = (int)ranks;
  if (!raw)
    return tp_kf_fail(r, err, g, NULL, "missing key 'message_bytes'");
  g_auto(GStrv) parts = g_strsplit(raw, ",", -1);
  l->n = (int)g_strv_length(parts);
  if (l->n < 1 || l->n > PROF_MAX_SIZES)
    return tp_kf_fail(r, err, g, "message_bytes", "expected 1 to %d sizes, got %d", PROF_MAX_SIZES, l->n);
  l->bytes = g_new0(double, l->n), l->one_way = g_new0(double, l->n);
  if (!get_list(r, g, "message_bytes", l->n, 1, PROF_MAX_BYTES, l->bytes, err))
    return FALSE;
  for (int i = 1; i < l->n; i++)
    if (l->bytes[i] <= l->bytes[i - 1])
      return tp_kf_fail(r, err, g, "message_bytes", "expected ascending sizes");
  l->eager_limit = TP_EAGER_LIMIT_SHM; /* a profile written before the key existed: one host's */
  if (!get_list(r, g, "one_way", l->n, 0, PROF_MAX_TIME, l->one_way, err) ||
      !tp_kf_number(r, g, "latency", TRUE, 0, PROF_MAX_TIME, &l->latency, err) ||
      !tp_kf_number(r, g, "bandwidth", TRUE, 0, PROF_MAX_BYTES, &l->bandwidth, err) ||
      !tp_kf_number(r, g, "fit_error", TRUE, 0, 1e6, &l->fit_error, err) ||
      !tp_kf_number(r, g, "eager_limit", FALSE, 1, PROF_MAX_BYTES, &l->eager_limit, err))
    return FALSE;
  /* 0: no time per byte (the fit found none); else a cost file's bounds, which keep every time finite */
  if (l->bandwidth > 0 && l->bandwidth < 1e-6)
    return tp_kf_fail(r, err, g, "bandwidth", "expected 0 (no time per byte) or a number from 1e-06 to %g, got %g",
                      PROF_MAX_BYTES, l->bandwidth);
  return TRUE;
}

TpProfile *tp_profile_parse(const char *text, gsize len, const char *name, GError **err)
{
  static const char *const known[] = { "format_version", "model", "backend", "threads", "cores", "machine",
                                       "hostname", "date", "memory_available", "repetitions", "layers",
                                       "micro_batch_sizes", NULL };
  TpKeyFile r;
  if (!tp_kf_open(&r, name, text, len, err))
    return NULL;
  const char *g = "profile";
  int version = 0, L = 0;
  gboolean ok = TRUE;
  if (!g_key_file_has_group(r.kf, g))
    ok = tp_kf_fail(&r, err, g, NULL, "no [profile] group: not a profile file (write one with timeprest profile)");
  ok = ok && get_int(&r, g, "format_version", 1, 1000, &version, err);
  if (ok && version != TP_PROFILE_FORMAT_VERSION && version != 1)
    ok = tp_kf_fail(&r, err, g, "format_version", "version %d; this timeprest reads versions 1 and %d (profile again)",
                    version, TP_PROFILE_FORMAT_VERSION);
  ok = ok && tp_kf_known_keys(&r, g, known, err) && get_int(&r, g, "layers", 1, PROF_MAX_LAYERS, &L, err);
  /* the sizes: at least one, whole, ascending */
  g_autofree char *raw = ok ? g_key_file_get_value(r.kf, g, "micro_batch_sizes", NULL) : NULL;
  if (ok && !raw)
    ok = tp_kf_fail(&r, err, g, NULL, "missing key 'micro_batch_sizes'");
  g_auto(GStrv) parts = raw ? g_strsplit(raw, ",", -1) : NULL;
  int n = parts ? (int)g_strv_length(parts) : 0;
  if (ok && (n < 1 || n > PROF_MAX_SIZES))
    ok = tp_kf_fail(&r, err, g, "micro_batch_sizes", "expected 1 to %d sizes, got %d", PROF_MAX_SIZES, n);
  g_autoptr(TpProfile) p = ok ? tp_profile_new(L, n) : NULL;
  for (int i = 0; ok && i < n; i++) {
    double v;
    if (!tp_kf_parse_number(parts[i], &v) || v < 1 || v > (1 << 24) || v != (int)v ||
        (i && (int)v <= p->sizes[i - 1])) {
      g_autofree char *q = tp_quote(g_strstrip(parts[i]));
      ok = tp_kf_fail(&r, err, g, "micro_batch_sizes", "expected ascending whole numbers of samples, got %s", q);
    } else
      p->sizes[i] = (int)v;
  }
  ok = ok && tp_kf_name(&r, g, "model", TRUE, FALSE, &p->model, err) &&
       tp_kf_name(&r, g, "backend", TRUE, FALSE, &p->backend, err) &&
       get_int(&r, g, "threads", 1, 4096, &p->threads, err) && get_int(&r, g, "cores", 1, 65536, &p->cores, err) &&
       get_int(&r, g, "repetitions", 1, 100000, &p->repetitions, err) &&
       tp_kf_number(&r, g, "memory_available", TRUE, 0, PROF_MAX_BYTES, &p->memory, err) &&
       tp_kf_name(&r, g, "machine", FALSE, TRUE, &p->machine, err) &&
       tp_kf_name(&r, g, "hostname", FALSE, TRUE, &p->hostname, err) &&
       tp_kf_name(&r, g, "date", FALSE, TRUE, &p->date, err);
  for (int i = 0; ok && i < L; i++)
    ok = read_layer(&r, p, i, err);
  gboolean work = FALSE; /* a run of no time has no rate: refused as a cost file of no time is */
  for (int i = 0; ok && i < L; i++)
    for (int k = 0; k < p->n_sizes; k++)
      work = work || p->layer[i].fwd[k] > 0 || p->layer[i].bwd[k] > 0;
  if (ok && !work)
    ok = tp_kf_fail(&r, err, g, NULL, "every forward and backward time is 0, so a run takes no time and its rates "
                                      "are undefined");
  if (ok)
    p->format_version = version;
  gboolean links = version >= 2 && g_key_file_has_group(r.kf, "links");
  ok = ok && (!links || read_links(&r, p, err));
  g_auto(GStrv) groups = ok ? g_key_file_get_groups(r.kf, NULL) : NULL;
  for (int i = 0; ok && groups[i]; i++) {
    int idx;
    if (strcmp(groups[i], g) != 0 && !(links && !strcmp(groups[i], "links")) &&
        !(g_str_has_prefix(groups[i], "layer.") && tp_parse_int(groups[i] + 6, 1, L, &idx, NULL)))
      ok = tp_kf_fail(&r, err, groups[i], NULL, "unknown group (known: profile, layer.1 .. layer.%d%s)", L,
                      version >= 2 ? ", links" : "; links from format_version 2");
  }
  tp_kf_close(&r);
  if (!ok)
    return NULL;
  p->source = g_strdup(name);
  return g_steal_pointer(&p);
}

TpProfile *tp_profile_load(const char *path, GError **err)
{
  g_autofree char *text = NULL;
  gsize len;
  if (!tp_read_file(path, "profile", &text, &len, err))
    return NULL;
  return tp_profile_parse(text, len, tp_input_name(path), err);
}
