/* tp_test_robust.h — for the programs that try what a hostile user tries (test-robust, the
 * checkpoints and runs; test-robust-io, inputs, outputs and messages): the common small training
 * run through the program, the one-line refusal, and a Fashion-MNIST-shaped data directory. */
#ifndef TP_TEST_ROBUST_H
#define TP_TEST_ROBUST_H

#include "tp_test.h"

#define DATA "synthetic:256:64"

/* train with the common small options, then extra (NULL-terminated). */
static inline TptRun train(const char *const *extra)
{
  const char *base[] = { "train", "-s", "gpipe", "-w", "2", "-n", "2", "--batch", "32", "--data", DATA,
                         "--order-from", "slots", "--quiet", "--format", "json" };
  return tpt_run_more(base, G_N_ELEMENTS(base), extra);
}

/* A refusal: exit 2, one line on stderr holding want, nothing on stdout. */
static inline void assert_refused(const TptRun *r, const char *want)
{
  if (r->status != 2 || tpt_lines(r->err) != 1 || !strstr(r->err, want))
    g_test_message("status %d, stderr: %s", r->status, r->err);
  g_assert_cmpint(r->status, ==, 2);
  g_assert_cmpint(tpt_lines(r->err), ==, 1);
  g_assert_nonnull(strstr(r->err, want));
  g_assert_cmpstr(r->out, ==, "");
}

/* An IDX file (plain; the reader takes gzip or not): magic, dims, then bytes. */
static inline void write_idx(const char *path, guint32 magic, int ndim, const guint32 *dims, const guint8 *data, gsize n)
{
  GByteArray *b = g_byte_array_new();
  guint32 words[4] = { GUINT32_TO_BE(magic) };
  for (int i = 0; i < ndim; i++)
    words[i + 1] = GUINT32_TO_BE(dims[i]);
  g_byte_array_append(b, (const guint8 *)words, 4 * (guint)(ndim + 1));
  g_byte_array_append(b, data, (guint)n);
  g_assert_true(g_file_set_contents(path, (const char *)b->data, (gssize)b->len, NULL));
  g_byte_array_unref(b);
}

/* A Fashion-MNIST-shaped directory of n training and m test samples; labels shifted by shift. */
static inline void write_data(const char *dir, int n, int m, int shift)
{
  g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);
  const char *names[2][2] = { { "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz" },
                              { "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz" } };
  for (int set = 0; set < 2; set++) {
    int k = set ? m : n;
    g_autofree guint8 *px = g_malloc((gsize)k * 784), *lab = g_malloc((gsize)k);
    for (int i = 0; i < k; i++) {
      lab[i] = (guint8)((i + shift) % 10);
      for (int j = 0; j < 784; j++)
        px[(gsize)i * 784 + j] = (guint8)((i * 7 + j * 13 + (i % 10) * 31) & 0xff);
    }
    guint32 di[3] = { (guint32)k, 28, 28 }, dl[1] = { (guint32)k };
    g_autofree char *pi = g_build_filename(dir, names[set][0], NULL), *pl = g_build_filename(dir, names[set][1], NULL);
    write_idx(pi, 0x803, 3, di, px, (gsize)k * 784);
    write_idx(pl, 0x801, 1, dl, lab, (gsize)k);
  }
}

#endif
