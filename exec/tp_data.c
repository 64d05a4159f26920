/* tp_data.c — IDX (gzip) loading with every header and payload check, synthetic data, and the
 * seeded mini-batch order with its saveable position. */
#include "tp_data.h"
#include "tp_data_priv.h"
#include "tp_backend.h"
#include "tp_error.h"
#include "tp_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

void tp_dataset_free(TpDataset *d)
{
  if (!d)
    return;
  g_free(d->pixels);
  g_free(d->labels);
  g_free(d->name);
  g_free(d->recipe);
  g_free(d);
}

/* ---- IDX files ------------------------------------------------------------------------------ */

typedef struct {
  gzFile f;
  const char *path;
} Idx;

/* Read exactly n bytes, the part of `what` (total bytes long) after its first `before` bytes;
 * a short read is "truncated", a zlib error is "corrupt". */
static gboolean idx_read(Idx *x, void *buf, size_t n, size_t before, size_t total, const char *what, GError **err)
{
  size_t got = 0;
  while (got < n) {
    unsigned chunk = (unsigned)MIN(n - got, (size_t)1 << 30);
    int r = gzread(x->f, (char *)buf + got, chunk);
    if (r < 0) {
      int zerr = 0, eno = errno;
      const char *msg = gzerror(x->f, &zerr);
      if (msg && g_str_has_prefix(msg, "<fd:") && strstr(msg, ": ")) /* zlib names the descriptor, not the file */
        msg = strstr(msg, ": ") + 2;
      if (zerr == Z_ERRNO) /* the file could not be read: a failure, not damaged data */
        g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "%s: cannot read: %s", x->path, g_strerror(eno));
      else /* zlib reads ahead: the damage lies at or past the compressed offset it has reached */
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: corrupt gzip data (%s) within the first %lld compressed bytes, "
                    "reading the %s", x->path, msg && *msg ? msg : "read error", (long long)gzoffset(x->f), what);
      return FALSE;
    }
    if (r == 0) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: truncated: the %s ends after %zu of %zu bytes", x->path,
                  what, before + got, total);
      return FALSE;
    }
    got += (size_t)r;
  }
  return TRUE;
}

static guint32 be32(const uint8_t *p)
{
  return (guint32)p[0] << 24 | (guint32)p[1] << 16 | (guint32)p[2] << 8 | p[3];
}

/* Open an IDX file and check its magic number; reads the ndim dimensions into dims. */
static gboolean idx_open(Idx *x, const char *path, guint32 magic, const char *kind, int ndim, guint32 *dims,
                         GError **err)
{
  x->path = path;
  /* opened without blocking (a FIFO without a writer) and refused unless a regular file */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: cannot open: %s", path, g_strerror(errno));
    if (fd >= 0)
      close(fd);
    return FALSE;
  }
  if (!S_ISREG(st.st_mode)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %s", path,
                S_ISDIR(st.st_mode) ? "a directory, not an IDX file" : "not a regular file (an IDX file is read whole)");
    close(fd);
    return FALSE;
  }
  errno = 0;
  x->f = gzdopen(fd, "rb");
  if (!x->f) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: cannot open: %s", path,
                errno ? g_strerror(errno) : "out of memory");
    close(fd);
    return FALSE;
  }
  uint8_t head[4 + 4 * 3];
  if (!idx_read(x, head, 4, 0, 4 + 4 * (size_t)ndim, "header", err))
    return FALSE;
  guint32 m = be32(head);
  if (m != magic) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: bad magic number 0x%08x (expected 0x%08x, IDX %s)", path,
                m, magic, kind);
    return FALSE;
  }
  if (!idx_read(x, head + 4, 4 * (size_t)ndim, 4, 4 + 4 * (size_t)ndim, "header", err))
    return FALSE;
  for (int i = 0; i < ndim; i++)
    dims[i] = be32(head + 4 + 4 * i);
  return TRUE;
}

/* After the payload: the stream must end here (this also makes zlib check the gzip trailer). */
static gboolean idx_close(Idx *x, GError **err)
{
  char extra;
  int r = gzread(x->f, &extra, 1);
  if (r < 0) {
    int zerr = 0;
    const char *msg = gzerror(x->f, &zerr);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: corrupt gzip data at the end (%s)", x->path,
                msg && *msg ? msg : "read error");
    return FALSE;
  }
  if (r > 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: corrupt: data continues after the count the header gives",
                x->path);
    return FALSE;
  }
  return TRUE;
}

static void idx_done(Idx *x)
{
  if (x->f)
    gzclose(x->f);
  x->f = NULL;
}

static gboolean load_images(TpDataset *d, const char *path, GError **err)
{
  Idx x = { 0 };
  guint32 dims[3];
  gboolean ok = idx_open(&x, path, TP_IDX_MAGIC_IMAGES, "unsigned-byte images", 3, dims, err);
  if (ok && (dims[0] < 1 || dims[0] > TP_DATA_MAX_SAMPLES)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: bad image count %u (expected 1..%d)", path, dims[0],
                TP_DATA_MAX_SAMPLES);
    ok = FALSE;
  }
  for (int k = 1; ok && k < 3; k++)
    if (dims[k] < 1 || dims[k] > TP_DATA_MAX_SIDE) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: bad image %s %u (expected 1..%d)", path,
                  k == 1 ? "height" : "width", dims[k], TP_DATA_MAX_SIDE);
      ok = FALSE;
    }
  if (ok) {
    d->n = (int)dims[0], d->rows = (int)dims[1], d->cols = (int)dims[2];
    d->dim = d->rows * d->cols;
    size_t bytes = (size_t)d->n * (size_t)d->dim;
    d->pixels = g_try_malloc(bytes);
    if (!d->pixels) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %d images of %d×%d do not fit in memory", path, d->n,
                  d->rows, d->cols);
      ok = FALSE;
    }
    ok = ok && idx_read(&x, d->pixels, bytes, 0, bytes, "pixel data", err) && idx_close(&x, err);
  }
  idx_done(&x);
  return ok;
}

static gboolean load_labels(TpDataset *d, const char *path, const char *images, GError **err)
{
  Idx x = { 0 };
  guint32 n;
  gboolean ok = idx_open(&x, path, TP_IDX_MAGIC_LABELS, "unsigned-byte labels", 1, &n, err);
  if (ok && n != (guint32)d->n) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %u labels but %d images in %s", path, n, d->n, images);
    ok = FALSE;
  }
  if (ok) {
    d->labels = g_malloc((size_t)d->n);
    ok = idx_read(&x, d->labels, (size_t)d->n, 0, (size_t)d->n, "label data", err);
  }
  for (int i = 0; ok && i < d->n; i++)
    if (d->labels[i] >= TP_DATA_CLASSES) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: label %u of sample %d is out of range (0..%d)", path,
                  d->labels[i], i, TP_DATA_CLASSES - 1);
      ok = FALSE;
    }
  ok = ok && idx_close(&x, err);
  idx_done(&x);
  return ok;
}

TpDataset *tp_dataset_load_idx(const char *images, const char *labels, GError **err)
{
  TpDataset *d = g_new0(TpDataset, 1);
  if (!load_images(d, images, err) || !load_labels(d, labels, images, err)) {
    tp_dataset_free(d);
    return NULL;
  }
  d->name = g_strdup(images);
  d->label_dim = 1;
  return d;
}

/* ---- synthetic data ------------------------------------------------------------------------- */

TpDataset *tp_dataset_synthetic(int n, int rows, int cols, guint32 seed)
{
  TpDataShape shape = { .channels = 1, .rows = rows, .cols = cols, .classes = TP_DATA_CLASSES };
  return tp_dataset_synthetic_shaped(n, &shape, seed);
}

TpDataset *tp_dataset_synthetic_shaped(int n, const TpDataShape *shape, guint32 seed)
{
  if (shape->context)
    return tp_dataset_synthetic_tokens(n, shape->context, seed, 0);
  const int rows = shape->rows, cols = shape->cols, classes = shape->classes;
  g_return_val_if_fail(n > 0 && rows > 0 && cols > 0 && shape->channels > 0 && classes > 0 && classes <= 255, NULL);
  TpDataset *d = g_new0(TpDataset, 1);
  d->n = n, d->rows = rows, d->cols = cols, d->dim = shape->channels * rows * cols;
  d->pixels = g_malloc((size_t)n * d->dim);
  d->labels = g_malloc((size_t)n);
  d->label_dim = 1;
  d->name = g_strdup("synthetic");
  d->recipe = g_strdup_printf("synthetic %d of %d×%d×%d, %d classes, seed %u, generator 2", n, shape->channels, rows,
                              cols, classes, seed);
  /* the class patterns depend on the class alone, so train and test sets share them: 160 where a
   * class has its pattern, 0 elsewhere */
  uint8_t *pattern = g_malloc((size_t)classes * d->dim);
  for (int c = 0; c < classes; c++) {
    GRand *r = g_rand_new_with_seed(0x5eed0000u + (guint32)c);
    for (int p = 0; p < d->dim; p++)
      pattern[(size_t)c * d->dim + p] = g_rand_int_range(r, 0, 4) == 0 ? 160 : 0;
    g_rand_free(r);
  }
  /* sample i from (seed, i) alone, eight noise bytes 0..95 from each hash (byte b: 3b / 8, in
   * 16-bit lanes): no sequential generator to walk through (5 million samples of 784 bytes took
   * 45 s of CPU drawn byte by byte from one GRand) */
  const guint64 base = tp_mix64((guint64)seed + G_GUINT64_CONSTANT(0x5e17e71c0000));
  const guint64 lanes = G_GUINT64_CONSTANT(0x00ff00ff00ff00ff);
  for (int i = 0; i < n; i++) {
    guint64 h = tp_mix64(base ^ tp_mix64((guint64)i));
    int c = (int)(((h >> 32) * (guint64)classes) >> 32);
    d->labels[i] = (uint8_t)c;
    uint8_t *px = d->pixels + (size_t)i * d->dim;
    const uint8_t *pat = pattern + (size_t)c * d->dim;
    for (int p = 0; p < d->dim; p += 8) {
      guint64 bits = tp_mix64(h + G_GUINT64_CONSTANT(0x9e3779b97f4a7c15) * (guint64)(p / 8 + 1));
      guint64 lo = bits & lanes, hi = (bits >> 8) & lanes;
      guint64 noise = (((lo * 3) >> 3) & lanes) | ((((hi * 3) >> 3) & lanes) << 8); /* byte j: pixel p + j */
      if (d->dim - p >= 8) { /* at most 160 + 95 a byte: no carry between bytes */
        guint64 v;
        memcpy(&v, pat + p, 8);
        v = GUINT64_TO_LE(GUINT64_FROM_LE(v) + noise);
        memcpy(px + p, &v, 8);
      } else
        for (int j = p; j < d->dim; j++, noise >>= 8)
          px[j] = (uint8_t)(pat[j] + (noise & 0xff));
    }
  }
  g_free(pattern);
  return d;
}

/* ---- --data ----------------------------------------------------------------------------------- */

gboolean tp_data_parse_synthetic(const char *spec, const char *other, const char *unit, int *ntrain, int *ntest,
                                 GError **err)
{
  *ntrain = 4096, *ntest = 1024;
  const char *p = spec + strlen("synthetic");
  if (!*p)
    return TRUE;
  char **parts = g_strsplit(p + 1, ":", -1);
  gboolean ok = *p == ':' && p[1] && g_strv_length(parts) <= 2;
  int *out[2] = { ntrain, ntest };
  for (int k = 0; ok && parts[k]; k++)
    ok = tp_parse_int(parts[k], 1, TP_DATA_MAX_SAMPLES, out[k], NULL);
  g_strfreev(parts);
  if (!ok) {
    g_autofree char *q = tp_quote(spec);
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_DATA, "bad value %s (expected %s or synthetic[:TRAIN[:TEST]], "
                "sizes from 1 to %d %s)", q, other, TP_DATA_MAX_SAMPLES, unit);
  }
  return ok;
}

gboolean tp_data_open(const char *spec, guint32 seed, TpDataset **train, TpDataset **test, GError **err)
{
  TpDataShape shape = { .channels = 1, .rows = 28, .cols = 28, .classes = TP_DATA_CLASSES };
  return tp_data_open_shaped(spec, &shape, seed, train, test, err);
}

gboolean tp_data_open_shaped(const char *spec, const TpDataShape *shape, guint32 seed, TpDataset **train,
                             TpDataset **test, GError **err)
{
  *train = *test = NULL;
  if (shape->context)
    return tp_data_open_text(spec, shape, seed, train, test, err);
  if (spec && g_str_has_prefix(spec, "synthetic")) {
    int ntrain, ntest;
    if (!tp_data_parse_synthetic(spec, "DIR", "samples", &ntrain, &ntest, err))
      return FALSE;
    long long dim = (long long)shape->channels * shape->rows * shape->cols;
    g_autofree char *what = g_strdup_printf("the synthetic data (%d and %d samples of %lld bytes)", ntrain, ntest, dim);
    if (!tp_memory_check(what, 0, 0, 0, ((long long)ntrain + ntest) * (dim + 1), err))
      return FALSE;
    *train = tp_dataset_synthetic_shaped(ntrain, shape, seed);
    *test = tp_dataset_synthetic_shaped(ntest, shape, seed ^ 0x7e57u);
    return TRUE;
  }
  const char *dir = spec ? spec : TP_DATA_DEFAULT_DIR;
  if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
    gboolean exists = g_file_test(dir, G_FILE_TEST_EXISTS);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: %s%s", dir,
                exists ? "not a directory (the data is the directory of the four IDX files)" : "no such data directory",
                spec ? "" : " (install the Fashion-MNIST dataset package or give the data's directory)");
    return FALSE;
  }
  static const char *const files[4] = { "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz" };
  char *path[4];
  for (int k = 0; k < 4; k++)
    path[k] = g_build_filename(dir, files[k], NULL);
  *train = tp_dataset_load_idx(path[0], path[1], err);
  if (*train)
    *test = tp_dataset_load_idx(path[2], path[3], err);
  gboolean ok = *test != NULL;
  if (ok && ((*test)->rows != (*train)->rows || (*test)->cols != (*train)->cols)) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: images are %d×%d but the training images are %d×%d", path[2],
                (*test)->rows, (*test)->cols, (*train)->rows, (*train)->cols);
    ok = FALSE;
  }
  if (!ok) {
    g_clear_pointer(train, tp_dataset_free);
    g_clear_pointer(test, tp_dataset_free);
  }
  for (int k = 0; k < 4; k++)
    g_free(path[k]);
  return ok;
}

void tp_dataset_sample(const TpDataset *d, int i, float *x)
{
  const uint8_t *px = d->pixels + (size_t)i * d->dim;
  const float scale = d->tokens ? 1.0f : 1.0f / 255.0f;
  for (int p = 0; p < d->dim; p++)
    x[p] = px[p] * scale;
}

void tp_dataset_gather(const TpDataset *d, const int *idx, int n, float *x, gint32 *y)
{
  const size_t ld = (size_t)d->label_dim;
  for (int k = 0; k < n; k++) {
    if (x)
      tp_dataset_sample(d, idx[k], x + (size_t)k * d->dim);
    for (size_t j = 0; y && j < ld; j++)
      y[k * ld + j] = d->labels[idx[k] * ld + j];
  }
}

/* ---- mini-batch order ------------------------------------------------------------------------ */

struct TpBatcher {
  const TpDataset *d;
  int batch, n_micro;
  guint32 seed;
  TpDataPos pos;
  int perm_epoch; /* the epoch perm holds */
  int *perm;
};

void tp_data_permutation(guint32 seed, int epoch, int n, int *perm)
{
  guint32 key[2] = { seed, (guint32)epoch };
  GRand *r = g_rand_new_with_seed_array(key, 2);
  for (int i = 0; i < n; i++)
    perm[i] = i;
  for (int i = n - 1; i > 0; i--) { /* Fisher–Yates */
    int j = g_rand_int_range(r, 0, i + 1);
    int t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  g_rand_free(r);
}

TpBatcher *tp_batcher_new(const TpDataset *d, int batch, int n_micro, guint32 seed, GError **err)
{
  if (n_micro < 1 || batch < 1 || batch % n_micro != 0) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_BATCH,
                "%d samples cannot be split into %d equal micro-batches (use a multiple of %d)", batch,
                n_micro, MAX(n_micro, 1));
    return NULL;
  }
  if (batch > d->n) {
    g_set_error(err, TP_ERROR, TP_ERROR_PARAM_BATCH, "%d samples per mini-batch but %s has only %d", batch,
                d->name, d->n);
    return NULL;
  }
  TpBatcher *b = g_new0(TpBatcher, 1);
  b->d = d, b->batch = batch, b->n_micro = n_micro, b->seed = seed;
  b->perm = g_new(int, d->n);
  b->perm_epoch = -1;
  return b;
}

void tp_batcher_free(TpBatcher *b)
{
  if (!b)
    return;
  g_free(b->perm);
  g_free(b);
}

int tp_batcher_per_epoch(const TpBatcher *b) { return b->d->n / b->batch; }
int tp_batcher_micro_size(const TpBatcher *b) { return b->batch / b->n_micro; }
TpDataPos tp_batcher_pos(const TpBatcher *b) { return b->pos; }

const int *tp_batcher_next(TpBatcher *b)
{
  if (b->pos.index + b->batch > tp_batcher_per_epoch(b) * b->batch)
    b->pos.epoch++, b->pos.index = 0;
  if (b->perm_epoch != b->pos.epoch) {
    tp_data_permutation(b->seed, b->pos.epoch, b->d->n, b->perm);
    b->perm_epoch = b->pos.epoch;
  }
  const int *out = b->perm + b->pos.index;
  b->pos.index += b->batch;
  return out;
}

gboolean tp_batcher_seek(TpBatcher *b, TpDataPos pos, GError **err)
{
  if (pos.epoch < 0 || pos.index < 0 || pos.index > tp_batcher_per_epoch(b) * b->batch) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "data position (epoch %d, sample %d) does not fit %s with mini-batches of %d", pos.epoch, pos.index,
                b->d->name, b->batch);
    return FALSE;
  }
  b->pos = pos;
  return TRUE;
}

TpDataShape tp_data_shape_of(const TpModel *m)
{
  const TpLayer *top = tp_model_layer(m, tp_model_n_layers(m) - 1);
  if (m->vocab)
    return (TpDataShape){ .channels = 1, .rows = m->context, .cols = 1, .classes = m->vocab, .context = m->context };
  return (TpDataShape){ .channels = (int)m->in_c, .rows = (int)m->in_h, .cols = (int)m->in_w,
                        .classes = top->kind == TP_LAYER_SOFTMAX_CE ? (int)MIN(top->in_elems, 255) : TP_DATA_CLASSES };
}
