/* test-data.c — IDX loading (good, missing, corrupt, truncated, bad magic, mismatched files), the
 * synthetic data, the seeded mini-batch order and its saved position. */
#include "tp_data.h"
#include "tp_error.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <zlib.h>

typedef struct {
  char *dir;
} Tmp;

static void tmp_setup(Tmp *t, gconstpointer data)
{
  (void)data;
  GError *e = NULL;
  t->dir = g_dir_make_tmp("tp-data-XXXXXX", &e);
  g_assert_no_error(e);
}

static void tmp_teardown(Tmp *t, gconstpointer data)
{
  (void)data;
  GDir *d = g_dir_open(t->dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name(d))) {
    char *p = g_build_filename(t->dir, name, NULL);
    g_unlink(p);
    g_free(p);
  }
  if (d)
    g_dir_close(d);
  g_rmdir(t->dir);
  g_free(t->dir);
}

static void put32(GByteArray *a, guint32 v)
{
  uint8_t b[4] = { v >> 24, v >> 16 & 0xff, v >> 8 & 0xff, v & 0xff };
  g_byte_array_append(a, b, 4);
}

/* An IDX image file's bytes: n images of rows × cols, pixel (i, p) = (i·7 + p) mod 256. */
static GByteArray *idx_images(guint32 magic, int n, int rows, int cols)
{
  GByteArray *a = g_byte_array_new();
  put32(a, magic);
  put32(a, (guint32)n);
  put32(a, (guint32)rows);
  put32(a, (guint32)cols);
  for (int i = 0; i < n; i++)
    for (int p = 0; p < rows * cols; p++) {
      uint8_t v = (uint8_t)((i * 7 + p) % 256);
      g_byte_array_append(a, &v, 1);
    }
  return a;
}

static GByteArray *idx_labels(guint32 magic, int n, int bad_at)
{
  GByteArray *a = g_byte_array_new();
  put32(a, magic);
  put32(a, (guint32)n);
  for (int i = 0; i < n; i++) {
    uint8_t v = i == bad_at ? 10 : (uint8_t)(i % 10);
    g_byte_array_append(a, &v, 1);
  }
  return a;
}

/* Write len bytes of a through gzip into dir/name; returns the path. */
static char *write_gz(const char *dir, const char *name, const uint8_t *data, gsize len)
{
  char *path = g_build_filename(dir, name, NULL);
  gzFile f = gzopen(path, "wb");
  g_assert_nonnull(f);
  if (len)
    g_assert_cmpint(gzwrite(f, data, (unsigned)len), ==, (int)len);
  g_assert_cmpint(gzclose(f), ==, Z_OK);
  return path;
}

static char *write_gz_array(const char *dir, const char *name, GByteArray *a)
{
  char *p = write_gz(dir, name, a->data, a->len);
  g_byte_array_unref(a);
  return p;
}

/* Load and expect one TP_ERROR_INPUT line that names `names` and contains `what`. */
static void expect_error(const char *images, const char *labels, const char *names, const char *what)
{
  GError *e = NULL;
  TpDataset *d = tp_dataset_load_idx(images, labels, &e);
  g_assert_null(d);
  g_assert_error(e, TP_ERROR, TP_ERROR_INPUT);
  if (!strstr(e->message, names) || !strstr(e->message, what))
    g_error("message '%s' should name %s and say '%s'", e->message, names, what);
  g_assert_null(strchr(e->message, '\n'));
  g_error_free(e);
}

static void test_load_good(Tmp *t, gconstpointer data)
{
  (void)data;
  char *im = write_gz_array(t->dir, "im.gz", idx_images(TP_IDX_MAGIC_IMAGES, 5, 3, 4));
  char *lb = write_gz_array(t->dir, "lb.gz", idx_labels(TP_IDX_MAGIC_LABELS, 5, -1));
  GError *e = NULL;
  g_autoptr(TpDataset) d = tp_dataset_load_idx(im, lb, &e);
  g_assert_no_error(e);
  g_assert_cmpint(d->n, ==, 5);
  g_assert_cmpint(d->rows, ==, 3);
  g_assert_cmpint(d->cols, ==, 4);
  g_assert_cmpint(d->dim, ==, 12);
  for (int i = 0; i < 5; i++) {
    g_assert_cmpint(d->labels[i], ==, i % 10);
    float x[12];
    tp_dataset_sample(d, i, x);
    for (int p = 0; p < 12; p++)
      g_assert_cmpfloat_with_epsilon(x[p], ((i * 7 + p) % 256) / 255.0f, 1e-7);
  }
  int idx[2] = { 4, 1 };
  float x[24];
  gint32 y[2];
  tp_dataset_gather(d, idx, 2, x, y);
  g_assert_cmpint(y[0], ==, 4);
  g_assert_cmpint(y[1], ==, 1);
  g_assert_cmpfloat_with_epsilon(x[12 + 3], (7 + 3) / 255.0f, 1e-7);
  g_free(im);
  g_free(lb);
}

static void test_load_errors(Tmp *t, gconstpointer data)
{
  (void)data;
  char *im = write_gz_array(t->dir, "im.gz", idx_images(TP_IDX_MAGIC_IMAGES, 6, 2, 2));
  char *lb = write_gz_array(t->dir, "lb.gz", idx_labels(TP_IDX_MAGIC_LABELS, 6, -1));
  char *missing = g_build_filename(t->dir, "nothere.gz", NULL);
  expect_error(missing, lb, missing, "cannot open");
  expect_error(im, missing, missing, "cannot open");

  /* magic numbers swapped: labels where images are expected and the other way round */
  expect_error(lb, im, lb, "bad magic number 0x00000801");
  char *im_as_lb = write_gz_array(t->dir, "wrong-lb.gz", idx_images(TP_IDX_MAGIC_IMAGES, 6, 1, 1));
  expect_error(im, im_as_lb, im_as_lb, "bad magic number 0x00000803");

  /* counts that disagree, a label out of range, impossible dimensions */
  char *lb5 = write_gz_array(t->dir, "lb5.gz", idx_labels(TP_IDX_MAGIC_LABELS, 5, -1));
  expect_error(im, lb5, lb5, "5 labels but 6 images");
  char *lbbad = write_gz_array(t->dir, "lbbad.gz", idx_labels(TP_IDX_MAGIC_LABELS, 6, 3));
  expect_error(im, lbbad, lbbad, "label 10 of sample 3 is out of range");
  char *im0 = write_gz_array(t->dir, "im0.gz", idx_images(TP_IDX_MAGIC_IMAGES, 0, 2, 2));
  expect_error(im0, lb, im0, "bad image count 0");
  char *imw = write_gz_array(t->dir, "imw.gz", idx_images(TP_IDX_MAGIC_IMAGES, 1, 2, 0));
  expect_error(imw, lb, imw, "bad image width 0");

  /* a valid gzip stream whose payload stops early: in the header, in the pixels, in the labels */
  GByteArray *full = idx_images(TP_IDX_MAGIC_IMAGES, 6, 2, 2);
  char *cut_head = write_gz(t->dir, "cut-head.gz", full->data, 10);
  expect_error(cut_head, lb, cut_head, "truncated: the header ends after 10 of 16 bytes");
  char *cut_px = write_gz(t->dir, "cut-px.gz", full->data, full->len - 3);
  expect_error(cut_px, lb, cut_px, "truncated: the pixel data ends after 21 of 24 bytes");
  char *empty = write_gz(t->dir, "empty.gz", full->data, 0);
  expect_error(empty, lb, empty, "truncated: the header ends after 0 of 16 bytes");
  GByteArray *lfull = idx_labels(TP_IDX_MAGIC_LABELS, 6, -1);
  char *cut_lb = write_gz(t->dir, "cut-lb.gz", lfull->data, lfull->len - 1);
  expect_error(im, cut_lb, cut_lb, "truncated: the label data ends after 5 of 6 bytes");
  /* more data than the header says */
  GByteArray *longer = idx_images(TP_IDX_MAGIC_IMAGES, 6, 2, 2);
  uint8_t zero[2] = { 0, 0 };
  g_byte_array_append(longer, zero, 2);
  char *lng = write_gz_array(t->dir, "long.gz", longer);
  expect_error(lng, lb, lng, "data continues after the count");

  /* the gzip file itself damaged: cut short, and bytes of the deflate stream overwritten */
  char *gz;
  gsize len;
  g_assert_true(g_file_get_contents(im, &gz, &len, NULL));
  char *cut_gz = g_build_filename(t->dir, "cut-gz.gz", NULL);
  g_assert_true(g_file_set_contents(cut_gz, gz, (gssize)len - 12, NULL));
  expect_error(cut_gz, lb, cut_gz, "");
  GError *e = NULL;
  g_assert_null(tp_dataset_load_idx(cut_gz, lb, &e));
  g_assert_true(strstr(e->message, "truncated") || strstr(e->message, "corrupt"));
  g_clear_error(&e);
  char *bad_crc = g_build_filename(t->dir, "bad-crc.gz", NULL);
  gz[len - 6] ^= 0x5a; /* inside the CRC-32 of the trailer */
  g_assert_true(g_file_set_contents(bad_crc, gz, (gssize)len, NULL));
  expect_error(bad_crc, lb, bad_crc, "corrupt gzip data");
  char *bad_deflate = g_build_filename(t->dir, "bad-deflate.gz", NULL);
  gz[len - 6] ^= 0x5a;
  memset(gz + 10, 0xff, 6); /* the first bytes of the deflate stream */
  g_assert_true(g_file_set_contents(bad_deflate, gz, (gssize)len, NULL));
  expect_error(bad_deflate, lb, bad_deflate, "corrupt gzip data");
  g_free(gz);
  /* a plain (not gzip) file with a text header: zlib reads it as is, the magic is wrong */
  char *plain = g_build_filename(t->dir, "plain.gz", NULL);
  g_assert_true(g_file_set_contents(plain, "this is not an IDX file at all", -1, NULL));
  expect_error(plain, lb, plain, "bad magic number 0x74686973");

  g_byte_array_unref(full);
  g_byte_array_unref(lfull);
  char *paths[] = { im, lb, missing, im_as_lb, lb5, lbbad, im0, imw, cut_head, cut_px, empty, cut_lb, lng, cut_gz,
                    bad_crc, bad_deflate, plain };
  for (guint k = 0; k < G_N_ELEMENTS(paths); k++)
    g_free(paths[k]);
}

static void test_open_dir(Tmp *t, gconstpointer data)
{
  (void)data;
  GError *e = NULL;
  TpDataset *train, *test;
  /* missing directory, then a directory where one file is missing */
  char *nodir = g_build_filename(t->dir, "none", NULL);
  g_assert_false(tp_data_open(nodir, 1, &train, &test, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_INPUT);
  g_assert_nonnull(strstr(e->message, nodir));
  g_clear_error(&e);
  g_free(write_gz_array(t->dir, "train-images-idx3-ubyte.gz", idx_images(TP_IDX_MAGIC_IMAGES, 8, 2, 2)));
  g_free(write_gz_array(t->dir, "train-labels-idx1-ubyte.gz", idx_labels(TP_IDX_MAGIC_LABELS, 8, -1)));
  g_free(write_gz_array(t->dir, "t10k-images-idx3-ubyte.gz", idx_images(TP_IDX_MAGIC_IMAGES, 3, 2, 2)));
  g_assert_false(tp_data_open(t->dir, 1, &train, &test, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_INPUT);
  g_assert_nonnull(strstr(e->message, "t10k-labels-idx1-ubyte.gz: cannot open"));
  g_assert_null(train);
  g_assert_null(test);
  g_clear_error(&e);
  g_free(write_gz_array(t->dir, "t10k-labels-idx1-ubyte.gz", idx_labels(TP_IDX_MAGIC_LABELS, 3, -1)));
  g_assert_true(tp_data_open(t->dir, 1, &train, &test, &e));
  g_assert_no_error(e);
  g_assert_cmpint(train->n, ==, 8);
  g_assert_cmpint(test->n, ==, 3);
  tp_dataset_free(train);
  tp_dataset_free(test);
  g_free(nodir);
}

/* Synthetic data of a model's shape: VGG-16 on CIFAR-100 takes 3×32×32 inputs and 100 classes. */
static void test_synthetic_shaped(void)
{
  GError *e = NULL;
  TpDataset *train, *test;
  TpDataShape shape = { .channels = 3, .rows = 32, .cols = 32, .classes = 100 };
  g_assert_true(tp_data_open_shaped("synthetic:3000:10", &shape, 7, &train, &test, &e));
  g_assert_no_error(e);
  g_assert_cmpint(train->dim, ==, 3 * 32 * 32);
  g_assert_cmpint(test->dim, ==, 3 * 32 * 32);
  gboolean seen[100] = { FALSE };
  int n_seen = 0;
  for (int i = 0; i < train->n; i++) {
    g_assert_cmpint(train->labels[i], <, 100);
    n_seen += !seen[train->labels[i]];
    seen[train->labels[i]] = TRUE;
  }
  g_assert_cmpint(n_seen, ==, 100); /* every class drawn */
  tp_dataset_free(train);
  tp_dataset_free(test);
}

static void test_synthetic(void)
{
  GError *e = NULL;
  TpDataset *train, *test, *again, *test2;
  g_assert_true(tp_data_open("synthetic:2000:500", 3, &train, &test, &e));
  g_assert_no_error(e);
  g_assert_cmpint(train->n, ==, 2000);
  g_assert_cmpint(test->n, ==, 500);
  g_assert_true(tp_data_open("synthetic:2000:500", 3, &again, &test2, &e));
  g_assert_cmpmem(train->pixels, 2000 * 784, again->pixels, 2000 * 784);
  g_assert_cmpmem(train->labels, 2000, again->labels, 2000);
  g_assert_false(memcmp(train->pixels, test->pixels, 500 * 784) == 0);
  /* learnable: the nearest class mean of the training set classifies the test set */
  double *mean = g_new0(double, 10 * 784);
  int count[10] = { 0 };
  float x[784];
  for (int i = 0; i < train->n; i++) {
    tp_dataset_sample(train, i, x);
    count[train->labels[i]]++;
    for (int p = 0; p < 784; p++)
      mean[train->labels[i] * 784 + p] += x[p];
  }
  int right = 0;
  for (int i = 0; i < test->n; i++) {
    tp_dataset_sample(test, i, x);
    int best = -1;
    double bd = 0;
    for (int c = 0; c < 10; c++) {
      g_assert_cmpint(count[c], >, 0);
      double dd = 0;
      for (int p = 0; p < 784; p++) {
        double diff = x[p] - mean[c * 784 + p] / count[c];
        dd += diff * diff;
      }
      if (best < 0 || dd < bd)
        best = c, bd = dd;
    }
    right += best == test->labels[i];
  }
  g_assert_cmpfloat((double)right / test->n, >, 0.95);
  g_free(mean);
  tp_dataset_free(train);
  tp_dataset_free(test);
  const char *bad[] = { "synthetic:", "synthetic:0", "synthetic:5:x", "synthetic:1:2:3", "synthetics" };
  for (guint k = 0; k < G_N_ELEMENTS(bad); k++) {
    g_assert_false(tp_data_open(bad[k], 1, &train, &test, &e));
    g_assert_error(e, TP_ERROR, TP_ERROR_PARAM_DATA); /* the program names it --data */
    g_assert_cmpstr(tp_error_param_name(e), ==, "data");
    g_clear_error(&e);
  }
  tp_dataset_free(again);
  tp_dataset_free(test2);
  tp_data_open("synthetic", 3, &train, &test, &e);
  g_assert_cmpint(train->n, ==, 4096);
  g_assert_cmpint(test->n, ==, 1024);
  tp_dataset_free(train);
  tp_dataset_free(test);
}

/* Synthetic pixels of a shape whose size is not a multiple of eight (75 bytes): each pixel is its
 * class's pattern (160, the same positions for every sample of a class) or 0, plus noise 0..95 that
 * reaches both ends; sample i depends on (seed, i) alone, not on the set's size. */
static void test_synthetic_values(void)
{
  TpDataShape shape = { .channels = 3, .rows = 5, .cols = 5, .classes = 7 };
  g_autoptr(TpDataset) d = tp_dataset_synthetic_shaped(2000, &shape, 11);
  g_autoptr(TpDataset) few = tp_dataset_synthetic_shaped(100, &shape, 11);
  g_assert_cmpint(d->dim, ==, 75);
  g_assert_cmpmem(few->pixels, 100 * 75, d->pixels, 100 * 75);
  g_assert_cmpmem(few->labels, 100, d->labels, 100);
  int first[7], lo = 255, hi = 0;
  for (int c = 0; c < 7; c++)
    first[c] = -1;
  for (int i = 0; i < d->n; i++) {
    int c = d->labels[i];
    g_assert_cmpint(c, <, 7);
    if (first[c] < 0)
      first[c] = i;
    for (int p = 0; p < 75; p++) {
      int v = d->pixels[i * 75 + p], on = v >= 160, on0 = d->pixels[first[c] * 75 + p] >= 160;
      int noise = on ? v - 160 : v;
      g_assert_cmpint(on, ==, on0);
      g_assert_cmpint(noise, <=, 95);
      lo = MIN(lo, noise), hi = MAX(hi, noise);
    }
  }
  g_assert_cmpint(lo, ==, 0);
  g_assert_cmpint(hi, ==, 95);
  for (int c = 0; c < 7; c++)
    g_assert_cmpint(first[c], >=, 0);
}

static void test_permutation(void)
{
  int n = 1000;
  int *a = g_new(int, n), *b = g_new(int, n), *c = g_new(int, n);
  tp_data_permutation(7, 0, n, a);
  tp_data_permutation(7, 0, n, b);
  g_assert_cmpmem(a, n * sizeof(int), b, n * sizeof(int));
  tp_data_permutation(7, 1, n, c);
  g_assert_false(memcmp(a, c, n * sizeof(int)) == 0);
  tp_data_permutation(8, 0, n, c);
  g_assert_false(memcmp(a, c, n * sizeof(int)) == 0);
  gboolean *seen = g_new0(gboolean, n);
  int fixed = 0;
  for (int i = 0; i < n; i++) {
    g_assert_cmpint(a[i], >=, 0);
    g_assert_cmpint(a[i], <, n);
    g_assert_false(seen[a[i]]);
    seen[a[i]] = TRUE;
    fixed += a[i] == i;
  }
  g_assert_cmpint(fixed, <, 20); /* it does shuffle */
  g_free(seen);
  g_free(a);
  g_free(b);
  g_free(c);
}

static void test_batcher(void)
{
  g_autoptr(TpDataset) d = tp_dataset_synthetic(103, 2, 2, 1);
  GError *e = NULL;
  g_assert_null(tp_batcher_new(d, 10, 4, 5, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_PARAM_BATCH); /* the program names it --batch */
  g_assert_cmpstr(tp_error_param_name(e), ==, "batch");
  g_clear_error(&e);
  g_assert_null(tp_batcher_new(d, 104, 4, 5, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_PARAM_BATCH);
  g_clear_error(&e);
  g_autoptr(TpBatcher) b = tp_batcher_new(d, 20, 4, 5, &e);
  g_assert_no_error(e);
  g_assert_cmpint(tp_batcher_per_epoch(b), ==, 5);
  g_assert_cmpint(tp_batcher_micro_size(b), ==, 5);
  /* one epoch: 5 disjoint mini-batches of the epoch-0 permutation */
  int perm[103];
  tp_data_permutation(5, 0, 103, perm);
  gboolean seen[103] = { 0 };
  for (int m = 0; m < 5; m++) {
    const int *idx = tp_batcher_next(b);
    g_assert_cmpmem(idx, 20 * sizeof(int), perm + 20 * m, 20 * sizeof(int));
    for (int k = 0; k < 20; k++) {
      g_assert_false(seen[idx[k]]);
      seen[idx[k]] = TRUE;
    }
  }
  TpDataPos p = tp_batcher_pos(b);
  g_assert_cmpint(p.epoch, ==, 0);
  g_assert_cmpint(p.index, ==, 100);
  const int *idx = tp_batcher_next(b); /* the next epoch begins */
  tp_data_permutation(5, 1, 103, perm);
  g_assert_cmpmem(idx, 20 * sizeof(int), perm, 20 * sizeof(int));
  p = tp_batcher_pos(b);
  g_assert_cmpint(p.epoch, ==, 1);
  g_assert_cmpint(p.index, ==, 20);

  /* save and restore the position: the continuation is the same */
  for (int m = 0; m < 3; m++)
    tp_batcher_next(b);
  TpDataPos saved = tp_batcher_pos(b);
  int want[12][20];
  for (int m = 0; m < 12; m++)
    memcpy(want[m], tp_batcher_next(b), sizeof want[m]);
  g_autoptr(TpBatcher) r = tp_batcher_new(d, 20, 4, 5, &e);
  g_assert_true(tp_batcher_seek(r, saved, &e));
  g_assert_no_error(e);
  for (int m = 0; m < 12; m++)
    g_assert_cmpmem(tp_batcher_next(r), 20 * sizeof(int), want[m], sizeof want[m]);
  TpDataPos bad = { 0, 120 };
  g_assert_false(tp_batcher_seek(r, bad, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_INPUT);
  g_clear_error(&e);
  bad.epoch = -1, bad.index = 0;
  g_assert_false(tp_batcher_seek(r, bad, &e));
  g_clear_error(&e);
}

static void test_real(void)
{
  const char *dir = TP_DATA_DEFAULT_DIR;
  char *f = g_build_filename(dir, "train-images-idx3-ubyte.gz", NULL);
  gboolean have = g_file_test(f, G_FILE_TEST_EXISTS);
  g_free(f);
  if (!have) {
    g_test_skip("the Fashion-MNIST dataset is not installed");
    return;
  }
  TpDataset *train, *test;
  GError *e = NULL;
  g_assert_true(tp_data_open(NULL, 1, &train, &test, &e));
  g_assert_no_error(e);
  g_assert_cmpint(train->n, ==, 60000);
  g_assert_cmpint(test->n, ==, 10000);
  g_assert_cmpint(train->rows, ==, 28);
  g_assert_cmpint(train->cols, ==, 28);
  g_assert_cmpint(test->dim, ==, 784);
  int count[10] = { 0 };
  for (int i = 0; i < test->n; i++)
    count[test->labels[i]]++;
  for (int c = 0; c < 10; c++)
    g_assert_cmpint(count[c], ==, 1000);
  tp_dataset_free(train);
  tp_dataset_free(test);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add("/data/load-good", Tmp, NULL, tmp_setup, test_load_good, tmp_teardown);
  g_test_add("/data/load-errors", Tmp, NULL, tmp_setup, test_load_errors, tmp_teardown);
  g_test_add("/data/open-dir", Tmp, NULL, tmp_setup, test_open_dir, tmp_teardown);
  g_test_add_func("/data/synthetic", test_synthetic);
  g_test_add_func("/data/synthetic-values", test_synthetic_values);
  g_test_add_func("/data/synthetic-shaped", test_synthetic_shaped);
  g_test_add_func("/data/permutation", test_permutation);
  g_test_add_func("/data/batcher", test_batcher);
  g_test_add_func("/data/fashion-mnist", test_real);
  return g_test_run();
}
