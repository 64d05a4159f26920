/* tp_sweep.c — generate and measure every (W, N) cell of a range, on as many threads as there
 * are cores: the cells are independent, each thread takes the next cell from a shared counter
 * (largest first) and writes its own row, so the rows come out the same on any number of threads. */
#include "tp_sweep.h"
#include "tp_error.h"
#include "tp_metrics.h"
#include "tp_memory.h"

typedef struct {
  TpOrder o;
  TpPolicy p;
  int w0, n0, nn;
  long cells;
  gint next;         /* cells handed out so far (atomic) */
  TpSweepRow *rows;
  GError **errs;     /* per cell: why its generation failed, or NULL */
} Sweep;

/* Whether order o takes N micro-batches on W workers (interleaved-1f1b: a multiple of W). */
static gboolean cell_takes(TpOrder o, int W, int N)
{
  return tp_chunks_check(o, W, tp_order_default_chunks(o), N, NULL) ||
         !tp_chunks_check(o, W, tp_order_default_chunks(o), W, NULL); /* what fails at every N fails the sweep */
}

static void measure(Sweep *sw, long cell)
{
  int W = sw->w0 + (int)(cell / sw->nn), N = sw->n0 + (int)(cell % sw->nn);
  TpSweepRow r = { .W = W, .N = N, .K = tp_sweep_K(W) };
  if ((r.na = !cell_takes(sw->o, W, N))) {
    sw->rows[cell] = r;
    return;
  }
  TpSchedule *s = tp_schedule_generate(sw->o, sw->p, W, N, r.K, &sw->errs[cell]);
  if (!s)
    return;
  r.v_sim = tp_version_difference(s, &r.v_sim_min, NULL);
  tp_schedule_free(s);
  r.v_eq3 = tp_eq3(W, N);
  r.v_closed = tp_closed_form(W, N);
  r.eq2_holds = (W <= N + 1) == (r.v_sim == 1);
  r.multiple_sequences = r.v_sim > 1;
  sw->rows[cell] = r;
}

static gpointer worker(gpointer data)
{
  Sweep *sw = data;
  for (;;) {
    long k = g_atomic_int_add(&sw->next, 1);
    if (k >= sw->cells)
      break;
    measure(sw, sw->cells - 1 - k); /* W-major order: the largest cells first balance the threads */
  }
  return NULL;
}

long long tp_sweep_work(int w0, int w1, int n0, int n1, long long *max_cell)
{
  long long total = 0, top = 0;
  for (int W = w0; W <= w1; W++)
    for (int N = n0; N <= n1; N++) {
      long long ops = (long long)W * tp_sweep_K(W) * (2LL * N + 1);
      total += ops;
      top = MAX(top, ops);
    }
  if (max_cell)
    *max_cell = top;
  return total;
}

/* Whether every cell of the sweep is valid, some cell runs, and the whole is within
 * TP_MAX_SWEEP_WORK; else one line naming the cell or the bound. */
static gboolean sweep_check(TpOrder o, TpPolicy p, int w0, int w1, int n0, int n1, GError **err)
{
  int runnable = 0;
  for (int W = w0; W <= w1; W++)
    for (int N = n0; N <= n1; N++) {
      if (!tp_size_check(W, N, tp_sweep_K(W), err) || !tp_pair_check(o, p, W, N, err) ||
          (cell_takes(o, W, N) && !tp_chunks_check(o, W, tp_order_default_chunks(o), N, err))) {
        g_prefix_error(err, "cell W=%d, N=%d: ", W, N);
        return FALSE;
      }
      runnable += cell_takes(o, W, N);
    }
  if (!runnable) { /* the reason, as the first cell gives it */
    tp_chunks_check(o, w0, tp_order_default_chunks(o), n0, err);
    g_prefix_error(err, "no cell of the sweep runs: ");
    return FALSE;
  }
  long long work = tp_sweep_work(w0, w1, n0, n1, NULL);
  if (work > TP_MAX_SWEEP_WORK) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT,
                "the sweep W=%d..%d, N=%d..%d simulates about %.3g operations in all, more than the bound of "
                "%.3g: narrow -w or -n", w0, w1, n0, n1, (double)work, (double)TP_MAX_SWEEP_WORK);
    return FALSE;
  }
  return TRUE;
}

/* The bytes of the sweep's largest cell, which every thread may hold at once; -1 (err set) when it
 * does not fit the memory. */
static long long cell_bytes_checked(TpOrder o, int w0, int w1, int n0, int n1, GError **err)
{
  long long cell_bytes = 0;
  int cw = w0, cn = n0;
  for (int W = w0; W <= w1; W++)
    for (int N = n0; N <= n1; N++)
      if (tp_generate_bytes(o, W, N, tp_sweep_K(W)) > cell_bytes)
        cell_bytes = tp_generate_bytes(o, W, N, tp_sweep_K(W)), cw = W, cn = N;
  return tp_memory_check("one cell of the sweep", cw, cn, tp_sweep_K(cw), cell_bytes, err) ? cell_bytes : -1;
}

/* The cells measured on threads (0: one per processor) as many as the memory holds cells. */
static void run_cells(Sweep *sw, int threads, long long cell_bytes)
{
  long long avail = tp_memory_available();
  if (threads <= 0)
    threads = (int)g_get_num_processors();
  /* under an address-space or data limit every byte mapped counts, the heap a cell keeps for the
   * next and each thread's malloc arena included, while each cell's own check sees the others'
   * cells as used: one thread, and freed memory given back, so that a sweep whose largest cell fits
   * runs whole instead of refusing cells partway */
  gboolean limited = tp_memory_address_limited();
  if (limited)
    threads = 1;
  /* every cell allocates and frees arrays of a few megabytes: kept in the heap for the next cell
   * instead of mapping fresh (zeroed) pages each time */
  tp_memory_keep_freed(32 << 20, 1 << 30);
  threads = (int)MIN((long)threads, sw->cells);
  threads = (int)MAX(1, MIN((long long)threads, avail / MAX(cell_bytes, 1)));
  GThread **t = g_new(GThread *, MAX(threads, 1));
  for (int i = 1; i < threads; i++)
    t[i] = g_thread_new("sweep", worker, sw);
  worker(sw);
  for (int i = 1; i < threads; i++)
    g_thread_join(t[i]);
  g_free(t);
}

GArray *tp_sweep_threads(TpOrder o, TpPolicy p, int w0, int w1, int n0, int n1, int threads, GError **err)
{
  long long cell_bytes;
  if (!sweep_check(o, p, w0, w1, n0, n1, err) || (cell_bytes = cell_bytes_checked(o, w0, w1, n0, n1, err)) < 0)
    return NULL;
  Sweep sw = { .o = o, .p = p, .w0 = w0, .n0 = n0, .nn = n1 - n0 + 1 };
  sw.cells = (long)(w1 - w0 + 1) * sw.nn;
  if (sw.cells > G_MAXINT / 2) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "the sweep has %ld cells, too many", sw.cells);
    return NULL;
  }
  GArray *rows = g_array_sized_new(FALSE, TRUE, sizeof(TpSweepRow), (guint)sw.cells);
  g_array_set_size(rows, (guint)sw.cells);
  sw.rows = (TpSweepRow *)rows->data;
  sw.errs = g_new0(GError *, sw.cells);
  run_cells(&sw, threads, cell_bytes);
  /* the first failing cell in row order, whatever thread met it */
  gboolean ok = TRUE;
  for (long c = 0; c < sw.cells; c++)
    if (sw.errs[c]) {
      if (ok)
        g_propagate_error(err, sw.errs[c]);
      else
        g_error_free(sw.errs[c]);
      ok = FALSE;
    }
  g_free(sw.errs);
  if (!ok) {
    g_array_unref(rows);
    return NULL;
  }
  return rows;
}

GArray *tp_sweep(TpOrder o, TpPolicy p, int w0, int w1, int n0, int n1, GError **err)
{
  return tp_sweep_threads(o, p, w0, w1, n0, n1, 0, err);
}
