/* tp_profile.h — a measured profile (`timeprest profile`, docs/plan.md): each layer's forward,
 * backward and update time on one machine at several micro-batch sizes, its weight and activation
 * bytes, where it was measured, and optionally the links between processes measured by an MPI
 * ping-pong (`timeprest profile --transport mpi`).  A profile is the fourth cost-model source of SPEC §4: read by
 * `simulate`, `compare` and `plan` (--profile FILE), turned into per-stage costs by tp_analytic.h. */
#ifndef TP_PROFILE_H
#define TP_PROFILE_H

#include <glib.h>

/* The version this writer writes; the reader accepts it and version 1 (the same without [links]). */
#define TP_PROFILE_FORMAT_VERSION 2

typedef struct {
  char *kind;            /* layer kind, as in the model file (checked against the model) */
  double weight_bytes;   /* one weight version (optimizer state and gradient buffer: the same) */
  double out_bytes;      /* per sample: the activations it passes on */
  double in_bytes;       /* per sample: the gradient it passes back (its input's size) */
  double stored_bytes;   /* per sample, kept from its forward to its backward */
  double upd, upd_spread; /* seconds of one update; spread as below */
  double *fwd, *bwd;     /* [n_sizes] median seconds of one forward / backward of sizes[i] samples */
  double *fwd_spread, *bwd_spread; /* [n_sizes] (largest − smallest) / median over the repetitions */
} TpProfileLayer;

/* Links measured between the ranks of an MPI job: one-way times at message sizes, and the fit
 * one-way = latency + bytes / bandwidth that simulate, compare and plan use for every link. */
typedef struct {
  char *transport;       /* "mpi"; NULL: no links were measured (the group is absent) */
  int ranks;             /* processes of the job (links: ranks − 1, pooled) */
  int n;                 /* message sizes */
  double *bytes;         /* [n] ascending */
  double *one_way;       /* [n] seconds: each link's median over its round trips, the mean over the links */
  double latency;        /* fitted seconds per message */
  double bandwidth;      /* fitted bytes per second; 0: no cost per byte was found (latency only) */
  double fit_error;      /* the fit's largest |fitted − measured| / measured over the sizes */
  double eager_limit;    /* bytes: larger messages are MPI rendezvous sends (TpLinkCost); the
                            smallest over the links; absent from the file: TP_EAGER_LIMIT_SHM */
} TpProfileLinks;

typedef struct {
  int format_version;
  char *model;           /* the model's name */
  char *backend;         /* cpu or cuda */
  int threads;           /* BLAS threads per stage when measured */
  int cores;             /* processors of the machine: stages beyond share them */
  char *machine, *hostname, *date;
  double memory;         /* bytes available when measured (plan's default memory limit) */
  int repetitions;       /* profiles the medians and spreads are taken over */
  int n_sizes;
  int *sizes;            /* [n_sizes] micro-batch sizes in samples, ascending */
  int L;
  TpProfileLayer *layer; /* [L] */
  TpProfileLinks links;  /* transport NULL: none measured */
  char *source;          /* file it was read from */
} TpProfile;

/* An empty profile of L layers at n_sizes sizes (arrays allocated, zero). */
TpProfile *tp_profile_new(int L, int n_sizes);
void tp_profile_free(TpProfile *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TpProfile, tp_profile_free)

/* The key file (documented in docs/plan.md). */
void tp_profile_format(const TpProfile *p, GString *out);
/* Errors (TP_ERROR_INPUT) name file:line, the group and the key. */
TpProfile *tp_profile_parse(const char *text, gsize len, const char *name, GError **err);
TpProfile *tp_profile_load(const char *path, GError **err);

/* Index of micro-batch size m among p->sizes, -1 when not profiled. */
int tp_profile_size_index(const TpProfile *p, int m);
/* The sizes as "1, 2, 4", for messages. */
char *tp_profile_sizes_text(const TpProfile *p);

/* Fit l->latency and l->bandwidth to l's n one-way times: least squares of the relative residuals
 * (a message of 8 bytes weighs as much as one of 8 MB), latency ≥ 0; bandwidth 0 when the times do
 * not grow with the size.  Sets l->fit_error.  n ≥ 1. */
void tp_profile_fit_links(TpProfileLinks *l);

/* Median of v[0..n) (sorted in place, n >= 1) and *spread = (largest − smallest) / median (0 when
 * the median is 0): the statistic of a profile's repetitions, and of plan --run-top's. */
double tp_median_spread(double *v, int n, double *spread);

#endif
