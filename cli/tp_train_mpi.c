/* tp_train_mpi.c — `mpirun -np W timeprest train --transport mpi …`: one rank per stage; the
 * profiles and the links shared before planning, the schedule compared across ranks, rank 0
 * reporting. */
#include "config.h"
#include "tp_train.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_nccl.h"
#ifdef HAVE_CUDA
#include "tp_backend_cuda.h"
#endif

#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* ---- --transport mpi: one rank per stage ----------------------------------------------------------- */

/* Every rank profiles its own stage; the profiles (and rank 0's core count, for the device map)
 * are gathered onto every rank, so each plans from the same numbers.  The links are measured here,
 * before training, by a ping-pong between neighbours. */
gboolean tp_train_mpi_share_profile(Train *t, GError **err)
{
  typedef struct {
    TpStageProfile p;
    gint64 cores;
  } Part;
  Part mine = { t->prof[t->rank], t->cores };
  g_autofree Part *all = g_new(Part, t->W);
  if (!tp_mpi_gather(t->mpi, -1, &mine, sizeof mine, all, err))
    return FALSE;
  for (int s = 0; s < t->W; s++)
    t->prof[s] = all[s].p;
  t->cores = (int)all[0].cores;
  t->links = g_new0(TpMpiLink, MAX(t->W - 1, 1));
  return tp_mpi_measure_links(t->mpi, 5, 0, FALSE, t->links, err);
}

void tp_train_mpi_links_to_cost(Train *t)
{
  g_autofree double *lat = g_new(double, t->W), *bw = g_new(double, t->W);
  for (int l = 0; l < t->W - 1; l++)
    lat[l] = t->links[l].latency_s, bw[l] = t->links[l].bandwidth_Bps;
  tp_predict_set_links(t->cost, lat, bw);
}

/* The schedule every rank is about to run is rank 0's (a digest compared across ranks). */
gboolean tp_train_mpi_same_schedule(Train *t, GError **err)
{
  g_autoptr(GString) text = g_string_new(NULL);
  tp_format_csv(t->s, text);
  g_string_append_printf(text, "fixed_on=%s\n", tp_report_fixed_on(t->s));
  guint8 mine[32];
  gsize n = sizeof mine;
  GChecksum *c = g_checksum_new(G_CHECKSUM_SHA256);
  g_checksum_update(c, (const guchar *)text->str, (gssize)text->len);
  g_checksum_get_digest(c, mine, &n);
  g_checksum_free(c);
  g_autofree guint8 *all = g_malloc((size_t)t->W * sizeof mine);
  if (!tp_mpi_gather(t->mpi, -1, mine, sizeof mine, all, err))
    return FALSE;
  for (int r = 1; r < t->W; r++)
    if (memcmp(all + (size_t)r * sizeof mine, all, sizeof mine) != 0) {
      g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d (rank %d): rank %d (stage %d) fixed another schedule than "
                  "rank 0", t->rank + 1, t->rank, r, r + 1);
      return FALSE;
    }
  return TRUE;
}

/* Every rank reaches this point (training starts together: each rank's times are from here). */
gboolean tp_train_mpi_barrier(Train *t, GError **err)
{
  gint64 one = 1;
  g_autofree gint64 *all = g_new(gint64, t->W);
  return tp_mpi_gather(t->mpi, -1, &one, sizeof one, all, err);
}

void tp_train_mpi_links_json(const Train *t, GString *out)
{
  g_string_append(out, "\"links\": [");
  for (int l = 0; l < t->W - 1; l++)
    g_string_append_printf(out, "%s{\"from\": %d, \"to\": %d, \"latency\": %.9g, \"bandwidth\": %.9g}", l ? ", " : "",
                           l + 1, l + 2, t->links[l].latency_s, t->links[l].bandwidth_Bps);
  g_string_append(out, "], ");
}

void tp_train_mpi_links_text(const Train *t, GString *out)
{
  g_string_append_printf(out, "transport    %s: %d rank%s, rank r runs stage r+1; %s", t->o.transport, t->W,
                         t->W == 1 ? "" : "s",
                         t->W == 1 ? "no links" : "links (ping-pong before training):");
  for (int l = 0; l < t->W - 1; l++)
    g_string_append_printf(out, "%s %d-%d %.1f us, %.2f GB/s", l ? "," : "", l + 1, l + 2,
                           t->links[l].latency_s * 1e6, t->links[l].bandwidth_Bps / 1e9);
  g_string_append_c(out, '\n');
}

/* ---- checkpoints over MPI --------------------------------------------------------------------------- */

gboolean tp_train_mpi_read_checkpoint(Train *t, const char *dir, TpCheckpoint *c, GError **err)
{
  const char *doing = "reading the checkpoint";
  gint64 len = -1;
  g_autofree char *meta = NULL;
  GError *e = NULL;
  if (t->rank == 0) {
    gsize n = 0;
    if ((meta = tp_checkpoint_read_meta(dir, &n, &e)))
      len = (gint64)n;
  }
  if (!tp_mpi_bcast(t->mpi, 0, &len, sizeof len, doing, err)) {
    g_clear_error(&e);
    return FALSE;
  }
  if (len < 0) { /* rank 0 says why */
    if (e)
      g_propagate_error(err, e);
    else
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--resume: rank 0 cannot read the checkpoint in %s", dir);
    return FALSE;
  }
  if (t->rank != 0)
    meta = g_malloc((gsize)len + 1);
  return tp_mpi_bcast(t->mpi, 0, meta, (size_t)len, doing, err) &&
         tp_checkpoint_parse(dir, meta, (gsize)len, t->rank, t->rank + 1, c, err);
}

/* Each rank writes its stage's part durably; a gather, which also shares the signals the ranks
 * caught, tells rank 0 that every part is on disk; rank 0 commits the metadata and says so; only
 * then does each rank remove its stage's files of older checkpoints.  A rank that fails returns
 * FALSE (the caller ends the job): until the commit the previous checkpoint is the one in force. */
gboolean tp_train_mpi_save(Train *t, const TpCheckpoint *c, int *sig, GError **err)
{
  typedef struct {
    gint32 sig;
    char sha[65];
  } Part;
  Part mine;
  memset(&mine, 0, sizeof mine);
  if (!tp_checkpoint_write_part(t->ck.dir, c, t->rank, mine.sha, err)) {
    g_prefix_error(err, "stage %d (rank %d): ", t->rank + 1, t->rank); /* the line of the rank that failed */
    return FALSE;
  }
  mine.sig = tp_mpi_signal();
  g_autofree Part *all = g_new0(Part, t->W);
  if (!tp_mpi_gather(t->mpi, -1, &mine, sizeof mine, all, err))
    return FALSE;
  *sig = 0;
  for (int r = 0; r < t->W && !*sig; r++)
    *sig = all[r].sig;
  gint64 committed = 0;
  if (t->rank == 0) {
    g_autofree const char **shas = g_new(const char *, t->W);
    for (int r = 0; r < t->W; r++)
      shas[r] = all[r].sha;
    if (!tp_checkpoint_commit_parts(t->ck.dir, c, shas, err)) {
      g_prefix_error(err, "stage 1 (rank 0): ");
      return FALSE;
    }
    committed = 1;
  }
  if (!tp_mpi_bcast(t->mpi, 0, &committed, sizeof committed, "committing the checkpoint", err))
    return FALSE;
  tp_checkpoint_remove_stale(t->ck.dir, c->generation, t->rank);
  if (t->rank == 0)
    tp_checkpoint_remove_stale(t->ck.dir, c->generation, -1);
  return TRUE;
}

/* --transport nccl, once every rank is set up: the NCCL transport on the GPU of this rank's stage
 * (collective), carrying the stages' activations and gradients between GPU buffers; MPI keeps the
 * rest (profiles, links, the schedule's digest, the final gather).  A rank that cannot start it
 * ends the job with its line (every rank's, when all fail alike). */
static gboolean start_nccl(Train *t)
{
  GError *e = NULL;
#ifdef HAVE_CUDA
  g_autofree char *gpu = g_strdup_printf("%d", tp_backend_cuda_stage_device(t->o.devices, t->rank));
#else
  const char *gpu = NULL; /* not reached: a build without CUDA has no NCCL transport */
#endif
  if (!(t->nccl = tp_nccl_new(t->N, t->peer_timeout, gpu, &e)) ||
      !tp_runtime_set_part(t->rt, t->rank, t->rank + 1, t->nccl, &e))
    tp_mpi_fail(t->mpi, e->message, tp_error_exit_status(e));
  t->nccl->N = t->N;
  return TRUE;
}

/* ---- the command ------------------------------------------------------------------------------------ */

/* What every rank must agree on before training: ok (this rank's outcome, e its error) on every
 * rank, else every rank ends with the first failing rank's status, printed by that rank alone (it
 * gets FALSE and err; the others exit). */
static gboolean agree(Train *t, gboolean ok, GError *e, GError **err)
{
  gint64 status = ok ? 0 : tp_error_exit_status(e);
  g_autofree gint64 *all = g_new(gint64, tp_mpi_size());
  GError *ge = NULL;
  if (!tp_mpi_gather(t->mpi, -1, &status, sizeof status, all, &ge))
    tp_mpi_fail(t->mpi, ge->message, 1);
  for (int r = 0; r < tp_mpi_size(); r++)
    if (all[r]) {
      signal(SIGTERM, SIG_IGN); /* mpirun's, once the first rank has exited: nothing to report */
      tp_mpi_finalize(t->mpi);
      t->mpi = NULL;
      if (r == t->rank) {
        g_propagate_error(err, e);
        return FALSE;
      }
      g_clear_error(&e);
      tp_train_clear(t);
      exit((int)all[r]); /* rank r says why */
    }
  return TRUE;
}

/* mpirun -np W timeprest train --transport mpi …: the set-up agreed (the same arguments, -np = W, a
 * setup that worked, then --resume's checkpoint read); a failure once training has begun ends the
 * job with one line per rank (tp_mpi_fail); rank 0 reports.  A run stopped at a checkpoint ends
 * every rank with the same status. */
gboolean tp_train_mpi(Train *t, const char *args, GError **err)
{
  tp_mpi_watchdog(t->peer_timeout, "starting MPI"); /* MPI_Init and the communicators: no timeout of their own */
  if (!tp_mpi_init(NULL, NULL, err))
    return FALSE;
  if (t->ck.dir)
    tp_mpi_catch_signals();
  t->rank = tp_mpi_rank();
  GError *e = NULL;
  if (!(t->mpi = tp_mpi_new(t->N, t->peer_timeout, &e)))
    tp_mpi_fail(NULL, e->message, 1);
  tp_mpi_watchdog(0, NULL);
  gboolean ok = tp_mpi_check_same(t->mpi, args, &e) && tp_train_setup(t, &e) && tp_mpi_check_size(t->W, &e) &&
                tp_runtime_set_part(t->rt, t->rank, t->rank + 1, t->mpi, &e);
  t->mpi->N = t->N; /* a schedule file's N */
  if (!agree(t, ok, e, err))
    return FALSE;
  if (t->o.resume) {
    ok = tp_train_resume(t, &e);
    if (!agree(t, ok, e, err))
      return FALSE;
  }
  if (t->ck.dir) { /* one generation for every rank's parts: past the files of every rank's directory */
    gint64 mine = t->generation;
    g_autofree gint64 *all = g_new(gint64, t->W);
    if (!tp_mpi_gather(t->mpi, -1, &mine, sizeof mine, all, &e))
      tp_mpi_fail(t->mpi, e->message, 1);
    for (int r = 0; r < t->W; r++)
      t->generation = MAX(t->generation, (int)all[r]);
  }
  if (!g_strcmp0(t->o.transport, "nccl") && !start_nccl(t))
    return FALSE; /* not reached */
  if (!tp_train_run_all(t, &e))
    tp_mpi_fail(t->mpi, e->message, 1);
  tp_transport_free(t->nccl); /* waits for its last sends */
  t->nccl = NULL;
  if (t->interrupted) {
    signal(SIGTERM, SIG_IGN);
    tp_mpi_finalize(t->mpi);
    t->mpi = NULL;
    tp_train_stopped(t);
  }
  ok = t->rank != 0 || tp_train_write_outputs(t, err);
  tp_mpi_finalize(t->mpi);
  t->mpi = NULL;
  return ok;
}
