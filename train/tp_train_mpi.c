/* tp_train_mpi.c — a run of one process (MPI rank) per stage (`mpirun -np W timeprest train
 * --transport mpi|nccl …`): MPI started, the set-up agreed by every rank, the group over the MPI
 * transport that the trainer's collectives use, the NCCL transport for the stages when asked, rank 0
 * reporting. */
#include "config.h"
#include "tp_train.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_group_mpi.h"
#include "tp_signal.h"
#include "tp_nccl.h"

#include <stdlib.h>
#include <string.h>

/* --transport nccl, once every rank is set up: the NCCL transport on the GPU of this rank's stage
 * (collective), carrying the stages' activations and gradients between GPU buffers; MPI keeps the
 * rest (profiles, links, the schedule's digest, the final gather).  A rank that cannot start it
 * ends the job with its line (every rank's, when all fail alike). */
static gboolean start_nccl(Train *t)
{
  GError *e = NULL;
  g_autofree char *gpu = g_strdup_printf("%d", tp_backend_device(t->stage_be[t->rank]));
  if (!(t->nccl = tp_nccl_new(t->N, t->cfg.peer_timeout, gpu, &e)) ||
      !tp_runtime_set_part(t->rt, t->rank, t->rank + 1, t->nccl, &e)) {
    if (t->cfg.name_param)
      t->cfg.name_param(&e);
    tp_mpi_fail(t->mpi, e->message, tp_error_exit_status(e));
  }
  return TRUE;
}

/* The micro-batches per mini-batch the run will have, which the transport is made with: a schedule
 * file's (when it cannot be read, the set-up says so on every rank), else the configuration's. */
static int micro_batches(const TpTrainConfig *c)
{
  if (!c->schedule_file)
    return c->N;
  g_autoptr(TpSchedule) s = tp_schedule_load(c->schedule_file, NULL);
  return s ? s->N : c->N;
}

/* ---- the command ------------------------------------------------------------------------------------ */

/* What every rank must agree on before training: ok (this rank's outcome, e its error) on every
 * rank, else every rank ends with the first failing rank's status, printed by that rank alone (it
 * gets FALSE and err, MPI finalized at its exit; the others FALSE and end, ended with that status,
 * saying nothing, once it has reached its exit). */
static gboolean agree(Train *t, gboolean ok, GError *e, TpTrainEnd *end, GError **err)
{
  gint64 status = ok ? 0 : tp_error_exit_status(e);
  g_autofree gint64 *all = g_new(gint64, tp_mpi_size());
  GError *ge = NULL;
  if (!tp_group_gather(t->group, -1, &status, sizeof status, all, &ge))
    tp_mpi_fail(t->mpi, ge->message, 1);
  for (int r = 0; r < tp_mpi_size(); r++)
    if (all[r]) {
      tp_signal_ignore_end(); /* mpirun's SIGTERM, once the first rank has exited: nothing to report */
      tp_mpi_end_said(t->mpi, r == t->rank); /* its line first: mpirun would cut it off */
      t->mpi = NULL;
      if (r == t->rank) {
        g_propagate_error(err, e);
        return FALSE;
      }
      g_clear_error(&e);
      *end = (TpTrainEnd){ .ended = TRUE, .status = (int)all[r] }; /* rank r says why */
      return FALSE;
    }
  return TRUE;
}

/* mpirun -np W timeprest train --transport mpi …: the set-up agreed (the same arguments, -np = W, a
 * setup that worked, then --resume's checkpoint read); a failure once training has begun ends the
 * job with one line per rank (tp_mpi_fail); rank 0 reports.  A run stopped at a checkpoint ends
 * every rank with the same status. */
gboolean tp_train_mpi(Train *t, const char *args, TpTrainReportFn report, gpointer data, TpTrainEnd *end,
                      GError **err)
{
  tp_mpi_watchdog(t->cfg.peer_timeout, "starting MPI"); /* MPI_Init and the communicators: no timeout of their own */
  if (!tp_mpi_init(NULL, NULL, err))
    return FALSE;
  if (t->cfg.ck.dir)
    tp_mpi_catch_signals();
  GError *e = NULL;
  if (!(t->mpi = tp_mpi_new(micro_batches(&t->cfg), t->cfg.peer_timeout, &e)))
    tp_mpi_fail(NULL, e->message, 1);
  tp_mpi_watchdog(0, NULL);
  t->group = tp_group_mpi_new(t->mpi);
  t->rank = tp_group_rank(t->group);
  gboolean ok = tp_mpi_check_same(t->mpi, args, &e) && tp_train_setup(t, &e) && tp_mpi_check_size(t->W, &e) &&
                tp_runtime_set_part(t->rt, t->rank, t->rank + 1, tp_mpi_transport(t->mpi), &e);
  if (!agree(t, ok, e, end, err))
    return end->ended;
  if (t->cfg.resume) {
    ok = tp_train_resume(t, &e);
    if (!agree(t, ok, e, end, err))
      return end->ended;
  }
  if (t->cfg.ck.dir) { /* one generation for every rank's parts: past the files of every rank's directory */
    gint64 mine = t->pos.generation;
    g_autofree gint64 *all = g_new(gint64, t->W);
    if (!tp_group_gather(t->group, -1, &mine, sizeof mine, all, &e))
      tp_mpi_fail(t->mpi, e->message, 1);
    for (int r = 0; r < t->W; r++)
      t->pos.generation = MAX(t->pos.generation, (int)all[r]);
  }
  if (t->cfg.transport == TP_TRAIN_NCCL && !start_nccl(t))
    return FALSE; /* not reached */
  if (!tp_train_run_all(t, &e))
    tp_mpi_fail(t->mpi, e->message, 1);
  tp_transport_free(t->nccl); /* waits for its last sends */
  t->nccl = NULL;
  if (t->pos.interrupted) { /* every rank ends with the signal's status; rank 0 says where to resume */
    tp_signal_ignore_end();
    tp_train_stopped(t, end);
    tp_mpi_end_said(t->mpi, end->says);
    t->mpi = NULL;
    return TRUE;
  }
  ok = t->rank != 0 || report(t, data, err);
  tp_mpi_finalize(t->mpi);
  t->mpi = NULL;
  return ok;
}
