/* tp_test_profile.h — a synthetic measured profile for the tests of the plan search and of the
 * profile's file (test-plan.c, test-plan-run.c), and editing a profile's text to see it refused. */
#ifndef TP_TEST_PROFILE_H
#define TP_TEST_PROFILE_H

#include "tp_error.h"
#include "tp_model.h"
#include "tp_profile.h"

#include <math.h>
#include <string.h>

/* A profile of model m with times from its FLOPs (1 ns per FLOP, plus 1 µs) and bytes from its
 * sizes, at the divisors of `batch`; `cores` processors, `memory` bytes. */
static inline TpProfile *synthetic_profile(const TpModel *m, int batch, int cores, double memory)
{
  int n = 0, L = tp_model_n_layers(m);
  for (int d = 1; d <= batch; d++)
    n += batch % d == 0;
  TpProfile *p = tp_profile_new(L, n);
  p->model = g_strdup(m->name), p->backend = g_strdup("cpu"), p->machine = g_strdup("test machine");
  p->hostname = g_strdup("host"), p->date = g_strdup("2026-01-01T00:00:00Z");
  p->threads = 1, p->cores = cores, p->memory = memory, p->repetitions = 3;
  p->source = g_strdup("synthetic");
  for (int d = 1, k = 0; d <= batch; d++)
    if (batch % d == 0)
      p->sizes[k++] = d;
  for (int i = 0; i < L; i++) {
    const TpLayer *ly = tp_model_layer(m, i);
    TpProfileLayer *l = &p->layer[i];
    l->kind = g_strdup(tp_layer_names[ly->kind]);
    l->weight_bytes = 4.0 * (double)ly->params;
    l->out_bytes = 4.0 * (double)ly->out_elems, l->in_bytes = 4.0 * (double)ly->in_elems;
    l->stored_bytes = 4.0 * (double)ly->stored_elems;
    l->upd = 1e-6 + 1e-9 * (double)ly->params, l->upd_spread = 0.01 * i;
    for (int k = 0; k < n; k++) {
      l->fwd[k] = 1e-6 + 1e-9 * ly->fwd_flops * p->sizes[k];
      l->bwd[k] = 1e-6 + 1e-9 * ly->bwd_flops * p->sizes[k];
      l->fwd_spread[k] = 0.05, l->bwd_spread[k] = 0.1 + 0.01 * k;
    }
  }
  return p;
}

/* a and b equal to 1e-8 of the larger (a profile's numbers after a round trip through its text) */
static inline void assert_close(double a, double b)
{
  g_assert_cmpfloat(fabs(a - b), <=, 1e-8 * MAX(fabs(a), fabs(b)));
}

/* A profile's file text (g_free it). */
static inline char *profile_text(const TpProfile *p)
{
  GString *s = g_string_new(NULL);
  tp_profile_format(p, s);
  return g_string_free(s, FALSE);
}

/* Profile texts, edited and refused: */

/* Replace the first occurrence of `from` in text by `to`. */
static inline char *edit(const char *text, const char *from, const char *to)
{
  const char *at = strstr(text, from);
  g_assert_nonnull(at);
  return g_strdup_printf("%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
}

/* The line (from 1) where `what` first appears. */
static inline int line_of(const char *text, const char *what)
{
  const char *at = strstr(text, what);
  g_assert_nonnull(at);
  int line = 1;
  for (const char *c = text; c < at; c++)
    line += *c == '\n';
  return line;
}

static inline void expect_refused(const char *text, const char *needle)
{
  GError *err = NULL;
  g_autoptr(TpProfile) p = tp_profile_parse(text, strlen(text), "bad.profile", &err);
  g_assert_null(p);
  g_assert_error(err, TP_ERROR, TP_ERROR_INPUT);
  if (!strstr(err->message, needle))
    g_error("expected '%s' in: %s", needle, err->message);
  g_error_free(err);
}

#endif
