/* cpu_loss.c — softmax with cross-entropy: the last layer of a network, fed the labels; it keeps
 * the probabilities for the backward dx = scale·(probs − onehot). */
#include "config.h"
#include "tp_cpu.h"
#include "tp_error.h"

#include <math.h>

gboolean tp_cpu_softmax_ce_forward(const TpBackend *be, int batch, int classes, const float *x,
                                   const gint32 *labels, float *probs, double *loss_sum, int *correct, GError **err)
{
  (void)be;
  double loss = 0.0;
  int right = 0;
  g_autofree double *e = g_new(double, classes); /* a sample's exponentials, each computed once */
  for (int n = 0; n < batch; n++) {
    const float *s = x + (size_t)n * classes;
    float *p = probs + (size_t)n * classes;
    int best = 0;
    for (int c = 1; c < classes; c++)
      if (s[c] > s[best])
        best = c;
    double sum = 0.0;
    for (int c = 0; c < classes; c++)
      sum += e[c] = exp((double)s[c] - s[best]);
    for (int c = 0; c < classes; c++)
      p[c] = (float)(e[c] / sum);
    if (labels) {
      gint32 y = labels[n];
      if (y < 0 || y >= classes) {
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "label %d of sample %d is not a class (0..%d)", y, n, classes - 1);
        return FALSE;
      }
      loss += log(sum) - ((double)s[y] - s[best]);
      right += best == y;
    }
  }
  if (loss_sum)
    *loss_sum = loss;
  if (correct)
    *correct = right;
  return TRUE;
}

gboolean tp_cpu_softmax_ce_backward(const TpBackend *be, int batch, int classes, const float *probs,
                                    const gint32 *labels, float scale, float *dx, GError **err)
{
  (void)be, (void)err;
  for (int n = 0; n < batch; n++) {
    const float *p = probs + (size_t)n * classes;
    float *d = dx + (size_t)n * classes;
    for (int c = 0; c < classes; c++)
      d[c] = scale * (p[c] - (c == labels[n] ? 1.0f : 0.0f));
  }
  return TRUE;
}
