/* tp_data.h — training data for the executor: Fashion-MNIST read from gzip IDX files, seeded
 * synthetic data for tests, and the seeded, reproducible mini-batch order with a data position
 * that checkpoints save and restore.
 *
 * Pixels are kept as bytes and handed out as floats in [0, 1] (pixel / 255, no mean/std
 * normalisation).  IDX files may be gzip-compressed or plain (zlib reads both). */
#ifndef TP_DATA_H
#define TP_DATA_H

#include "tp_model.h"

#include <glib.h>
#include <stdint.h>

#define TP_DATA_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define TP_DATA_CLASSES 10
#define TP_IDX_MAGIC_IMAGES 0x00000803u /* unsigned byte, 3 dimensions */
#define TP_IDX_MAGIC_LABELS 0x00000801u /* unsigned byte, 1 dimension */
/* Limits that keep a damaged header from asking for absurd amounts of memory. */
#define TP_DATA_MAX_SAMPLES 10000000
#define TP_DATA_MAX_SIDE 4096

typedef struct {
  int n;            /* samples */
  int rows, cols;   /* image shape */
  int dim;          /* channels × rows × cols, the floats per sample (IDX files: 1 channel) */
  uint8_t *pixels;  /* n × dim bytes */
  uint8_t *labels;  /* n × label_dim labels, each < TP_DATA_CLASSES (synthetic data: < its classes) */
  int label_dim;    /* labels per sample: 1, or a token sample's positions (each the next byte) */
  gboolean tokens;  /* the samples are token numbers (bytes), handed out as they are, not scaled */
  char *name;       /* where it came from (a file, or "synthetic") */
  char *recipe;     /* generated data: what determines every byte (count, shape, classes, seed and the
                       generator's version), which names it as well as its contents do; NULL for files */
} TpDataset;

void tp_dataset_free(TpDataset *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpDataset, tp_dataset_free)

/* Read an image file and its label file (IDX, gzip or plain).  Any problem is one
 * TP_ERROR_INPUT line naming the file and what is wrong. */
TpDataset *tp_dataset_load_idx(const char *images, const char *labels, GError **err);

/* Deterministic, learnable synthetic data: each class has a fixed pattern (from the class
 * number alone), each sample is its class's pattern plus seeded noise; labels are seeded. */
TpDataset *tp_dataset_synthetic(int n, int rows, int cols, guint32 seed);

/* The shape synthetic data takes (a model's input and its number of classes, 1..255); the
 * Fashion-MNIST shape is { 1, 28, 28, 10 }. */
typedef struct {
  int channels, rows, cols, classes;
  int context; /* a token model's: its samples are sequences of `context` byte tokens (0: images) */
} TpDataShape;

/* For a token shape (context > 0): tp_dataset_synthetic_tokens' training part. */
TpDataset *tp_dataset_synthetic_shaped(int n, const TpDataShape *shape, guint32 seed);
/* The shape of model m's data: its input, and the classes its softmax_ce top layer tells apart (at
 * most 255: labels are bytes; TP_DATA_CLASSES without one). */
TpDataShape tp_data_shape_of(const TpModel *m);

/* Where the default text corpus is: the Debian package fortunes' data files (those without a dot
 * in their names, in name order). */
#define TP_TEXT_DEFAULT_DIR "/usr/share/games/fortunes"
/* Bytes of text read at most (a corpus is held whole, with its windows: about three times this). */
#define TP_TEXT_MAX_BYTES (256 << 20)

/* Test sequences a text gives at most: each evaluation runs them all (512 of llama-tiny's 128
 * tokens: 65,536 positions). */
#define TP_TEXT_TEST_MOST 512
/* Token data from text (bytes are tokens, vocabulary 256): the first 90 % of the bytes train, the
 * rest test; each part gives ⌊(bytes − 1) / context⌋ samples (the test part at most
 * TP_TEXT_TEST_MOST), windows of context + 1 bytes at
 * positions drawn from (seed, part, sample): the first `context` bytes the input, the last
 * `context` the labels (each position's next byte).  A part shorter than context + 1 bytes is a
 * TP_ERROR_INPUT naming the text. */
gboolean tp_data_text(const uint8_t *text, size_t len, const char *name, int context, guint32 seed, TpDataset **train,
                      TpDataset **test, GError **err);

/* n sequences of `context` synthetic tokens (a seeded, learnable byte process; part 0 trains, 1
 * tests), as --data synthetic gives a token model. */
TpDataset *tp_dataset_synthetic_tokens(int n, int context, guint32 seed, int part);

/* The training and test sets named by a --data value.  For a token model (shape->context > 0):
 * NULL for the default corpus, "text:PATH" (a file, or a directory read as the default corpus is),
 * or "synthetic[:TRAIN[:TEST]]" (sequences of a seeded, learnable byte process).  For images: NULL for the default directory, a
 * directory holding train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
 * t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz, or "synthetic[:TRAIN[:TEST]]"
 * (28 × 28, default 4096 and 1024 samples, generated from seed). */
gboolean tp_data_open(const char *spec, guint32 seed, TpDataset **train, TpDataset **test, GError **err);
/* The same, with synthetic data of the given shape (files keep their own). */
gboolean tp_data_open_shaped(const char *spec, const TpDataShape *shape, guint32 seed, TpDataset **train,
                             TpDataset **test, GError **err);

/* Sample i as floats in [0, 1] into x (dim floats). */
void tp_dataset_sample(const TpDataset *d, int i, float *x);
/* Samples idx[0..n-1] into x (n × dim floats) and their labels into y (n × label_dim; either may
 * be NULL). */
void tp_dataset_gather(const TpDataset *d, const int *idx, int n, float *x, gint32 *y);

/* Where the mini-batch order stands: the next mini-batch starts at position `index` of epoch
 * `epoch`'s permutation.  Saved in checkpoints; restoring it continues the same order. */
typedef struct {
  int epoch;
  int index;
} TpDataPos;

/* The mini-batch order over a dataset: every epoch a permutation drawn from (seed, epoch);
 * an epoch has n / batch mini-batches (the remainder is left out of that epoch). */
typedef struct TpBatcher TpBatcher;

/* batch samples per mini-batch, split into n_micro micro-batches of batch / n_micro samples
 * (TP_ERROR_INPUT naming --batch when batch is not a positive multiple of n_micro or is larger
 * than the dataset). */
TpBatcher *tp_batcher_new(const TpDataset *d, int batch, int n_micro, guint32 seed, GError **err);
void tp_batcher_free(TpBatcher *b);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpBatcher, tp_batcher_free)

int tp_batcher_per_epoch(const TpBatcher *b);
int tp_batcher_micro_size(const TpBatcher *b);
/* Sample indices of the next mini-batch (batch of them; micro-batch j is [j·m, (j+1)·m) with
 * m = batch / n_micro); valid until the next call.  Moves to the next epoch when one ends. */
const int *tp_batcher_next(TpBatcher *b);
TpDataPos tp_batcher_pos(const TpBatcher *b);
/* Continue from a saved position (TP_ERROR_INPUT when it does not fit this dataset and batch). */
gboolean tp_batcher_seek(TpBatcher *b, TpDataPos pos, GError **err);

/* The permutation of n samples for (seed, epoch), into perm (n ints). */
void tp_data_permutation(guint32 seed, int epoch, int n, int *perm);

#endif
