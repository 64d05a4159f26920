/* bench-layers.c — each layer's forward + backward on several compute backends: every layer of a
 * model runs as a one-layer stage (tp_net, so exactly the calls the executor makes), at one batch
 * size, and the table gives the wall time per forward + backward in milliseconds for each backend
 * and the ratio of the first backend's time to the last's. Times are the best of three rounds of
 * REPS iterations, each round closed by a download (which waits for a device's stream).
 * Usage: bench-layers MODEL BATCH REPS BACKEND...   (e.g. bench-layers cnn 128 10 cpu cuda) */
#include "tp_backend.h"
#include "tp_error.h"
#include "tp_model.h"
#include "tp_net.h"

#include <stdio.h>
#include <stdlib.h>

static void die(GError *err)
{
  fprintf(stderr, "bench-layers: %s\n", err->message);
  exit(tp_error_exit_status(err));
}

/* A backend buffer of n floats with fixed pseudo-random values in [−0.5, 0.5). */
static float *buffer(const TpBackend *be, size_t n, GError **err)
{
  float *host = g_new(float, n ? n : 1), *d = be->iface->alloc(be, n, err);
  for (size_t i = 0; i < n; i++)
    host[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  if (d && !be->iface->upload(be, d, host, n, err))
    be->iface->free(be, d), d = NULL;
  g_free(host);
  return d;
}

/* Milliseconds per forward + backward of layer L on be; negative where the stage cannot be made. */
static double time_layer(const TpModel *m, int L, const TpBackend *be, int batch, int reps, GError **err)
{
  TpNet *net = tp_net_new(m, L, L + 1, be, err);
  if (!net)
    return -1.0;
  gboolean loss = tp_net_has_loss(net), ok = TRUE;
  size_t in = tp_net_in_elems(net) * batch, out = tp_net_out_elems(net) * batch, np = tp_net_n_params(net);
  float *w = buffer(be, np, err), *g = w ? buffer(be, np, err) : NULL, *x = g ? buffer(be, in, err) : NULL;
  float *y = x ? buffer(be, out, err) : NULL, *dy = y ? buffer(be, out, err) : NULL;
  float *dx = dy ? buffer(be, in, err) : NULL, probe;
  gint32 *labels = g_new(gint32, batch);
  for (int n = 0; n < batch; n++)
    labels[n] = n % (int)MAX(tp_net_out_elems(net), 1);
  TpSaved *s = dx ? tp_saved_new(net, batch, err) : NULL;
  double best = G_MAXDOUBLE;
  ok = s != NULL;
  for (int round = 0; ok && round < 4; round++) { /* round 0 warms up */
    gint64 t0 = g_get_monotonic_time();
    for (int r = 0; ok && r < (round ? reps : 1); r++)
      ok = tp_net_forward(net, w, x, batch, loss ? NULL : y, s, labels, NULL, err) &&
           tp_net_backward(net, w, s, loss ? NULL : dy, L ? dx : NULL, g, batch, err);
    ok = ok && be->iface->download(be, &probe, g ? g : x, 1, err);
    if (ok && round)
      best = MIN(best, (g_get_monotonic_time() - t0) / 1e3 / reps);
  }
  tp_saved_free(s);
  float *bufs[] = { w, g, x, y, dy, dx };
  for (size_t i = 0; i < G_N_ELEMENTS(bufs); i++)
    if (bufs[i])
      be->iface->free(be, bufs[i]);
  g_free(labels);
  tp_net_free(net);
  return ok ? best : -1.0;
}

static const char *kind_name(const TpLayer *l)
{
  static const char *const names[] = {
    [TP_LAYER_CONV] = "conv", [TP_LAYER_LINEAR] = "linear", [TP_LAYER_RELU] = "relu",
    [TP_LAYER_MAXPOOL] = "maxpool", [TP_LAYER_AVGPOOL] = "avgpool", [TP_LAYER_FLATTEN] = "flatten",
    [TP_LAYER_DROPOUT] = "dropout", [TP_LAYER_SOFTMAX_CE] = "softmax_ce",
  };
  return (size_t)l->kind < G_N_ELEMENTS(names) && names[l->kind] ? names[l->kind] : "?";
}

int main(int argc, char **argv)
{
  GError *err = NULL;
  if (argc < 5) {
    fprintf(stderr, "usage: bench-layers MODEL BATCH REPS BACKEND...\n");
    return 2;
  }
  int batch = atoi(argv[2]), reps = atoi(argv[3]), nb = argc - 4;
  if (batch < 1 || reps < 1) {
    fprintf(stderr, "bench-layers: BATCH and REPS must be positive\n");
    return 2;
  }
  TpModel *m = tp_model_load(argv[1], &err);
  if (!m || !tp_net_check_model(m, &err))
    die(err);
  const TpBackend **be = g_new(const TpBackend *, nb);
  for (int b = 0; b < nb; b++)
    if (!(be[b] = tp_backend_get(argv[4 + b], &err)))
      die(err);
  printf("%s, batch %d: ms per forward + backward\n%-3s %-11s", m->name, batch, "L", "layer");
  for (int b = 0; b < nb; b++)
    printf(" %10s", tp_backend_name(be[b]));
  printf(nb > 1 ? " %8s\n" : "\n", "ratio");
  double *total = g_new0(double, nb);
  for (int L = 0; L < tp_model_n_layers(m); L++) {
    double first = 0.0, last = 0.0;
    printf("%-3d %-11s", L, kind_name(tp_model_layer(m, L)));
    for (int b = 0; b < nb; b++) {
      double ms = time_layer(m, L, be[b], batch, reps, &err);
      if (ms < 0.0)
        die(err);
      printf(" %10.3f", ms);
      total[b] += ms;
      first = b ? first : ms, last = ms;
    }
    if (nb > 1)
      printf(" %8.1f", last > 0.0 ? first / last : 0.0);
    printf("\n");
  }
  printf("%-15s", "all layers");
  for (int b = 0; b < nb; b++)
    printf(" %10.3f", total[b]);
  if (nb > 1)
    printf(" %8.1f", total[nb - 1] > 0.0 ? total[0] / total[nb - 1] : 0.0);
  printf("\n");
  g_free(total);
  g_free(be);
  tp_model_free(m);
  return 0;
}
