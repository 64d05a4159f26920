/* tp_checkpoint_run.c — the run's side of checkpoints (tp_checkpoint.h): the options, the run's
 * identity that a checkpoint must share to be continued, the state moved between the runtime and
 * a checkpoint, the stored plan read back, and a checkpoint saved and loaded by a run's group. */
#include "config.h"
#include "tp_checkpoint.h"
#include "tp_digest.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_policy.h"
#include "tp_validate.h"

#include <string.h>
#include <unistd.h>

/* A hash of the model's description: its layers as parsed (comments and spacing do not count). */
static char *model_sha256(const TpModel *m)
{
  GString *d = g_string_new(NULL);
  g_string_append_printf(d, "%s %lld %lld %lld\n", m->name, m->in_c, m->in_h, m->in_w);
  for (int i = 0; i < tp_model_n_layers(m); i++) {
    const TpLayer *L = tp_model_layer(m, i);
    g_string_append_printf(d, "%s %d %d %d %d %d %d %lld %lld %lld %lld\n", tp_layer_names[L->kind], L->out, L->k,
                           L->stride, L->pad, L->mid, L->bias, L->cin, L->hin, L->win, L->params);
  }
  char *sha = tp_sha256_hex(d->str, d->len);
  g_string_free(d, TRUE);
  return sha;
}

/* The value of identity key `key`, or NULL. */
static char **id_value(const TpCheckpoint *c, const char *key)
{
  for (guint i = 0; i < c->id_keys->len; i++)
    if (strcmp(c->id_keys->pdata[i], key) == 0)
      return (char **)&c->id_vals->pdata[i];
  return NULL;
}

void tp_checkpoint_read_old_digest(TpCheckpoint *c, const TpCheckpoint *run, const TpSchedule *file)
{
  char **there = id_value(c, "schedule_sha256"), **here = id_value(run, "schedule_sha256");
  if (!there || !here || !file || strcmp(*there, *here) == 0)
    return;
  g_autofree char *old = tp_schedule_sha256_csv(file);
  if (strcmp(*there, old) == 0) {
    g_free(*there);
    *there = g_strdup(*here);
  }
}

void tp_checkpoint_identity(TpCheckpoint *c, const TpRunIdentity *id)
{
  char buf[64];
  g_autofree char *msha = model_sha256(id->model), *sig = id->sig ? tp_significance_to_string(id->sig) : NULL;
  tp_checkpoint_id(c, "model", id->model->name);
  tp_checkpoint_id(c, "model_sha256", msha);
  tp_checkpoint_id(c, "preset", id->preset ? id->preset->name : "(schedule file)");
  if (!id->preset) {
    g_autofree char *ssha = tp_schedule_sha256(id->file);
    tp_checkpoint_id(c, "schedule_sha256", ssha);
  } else {
    tp_checkpoint_id(c, "order", tp_order_name(id->preset->order));
    tp_checkpoint_id(c, "policy", tp_policy_name(id->preset->policy));
    tp_checkpoint_id(c, "order_from", id->slots ? "slots" : "costs");
  }
  tp_checkpoint_id(c, "significance", sig ? sig : "default");
  int iv[] = { id->W, id->N, id->batch, id->K, id->every, (int)id->seed };
  const char *ik[] = { "workers", "micro_batches", "batch", "mini_batches", "checkpoint_every", "seed" };
  for (size_t i = 0; i < G_N_ELEMENTS(iv); i++) {
    g_snprintf(buf, sizeof buf, "%d", iv[i]);
    tp_checkpoint_id(c, ik[i], buf);
  }
  tp_checkpoint_id(c, "runs_are", id->per_epoch ? "epochs" : "mini-batches");
  double dv[] = { id->lr, id->momentum, id->weight_decay };
  const char *dk[] = { "lr", "momentum", "weight_decay" };
  for (size_t i = 0; i < G_N_ELEMENTS(dv); i++)
    tp_checkpoint_id(c, dk[i], g_ascii_dtostr(buf, sizeof buf, dv[i]));
  if (id->warmup)
    g_snprintf(buf, sizeof buf, "warm-up over %ld then cosine over %ld mini-batches", id->warmup, id->lr_steps);
  else
    g_snprintf(buf, sizeof buf, "cosine over %ld mini-batches", id->lr_steps);
  tp_checkpoint_id(c, "lr_schedule", id->lr_steps > 0 ? buf : "constant");
  if (id->optimizer)
    tp_checkpoint_id(c, "optimizer", id->optimizer);
  if (id->replicas > 1) { /* absent: one pipeline, as checkpoints before data parallelism */
    g_snprintf(buf, sizeof buf, "%d", id->replicas);
    tp_checkpoint_id(c, "data_parallel", buf);
  }
  tp_checkpoint_id(c, "backend", id->backend ? id->backend : "cpu");
  tp_checkpoint_id(c, "data", id->data ? id->data : TP_DATA_DEFAULT_DIR);
}

gboolean tp_checkpoint_take(TpCheckpoint *c, const TpRuntime *rt, int lo, int hi, GError **err)
{
  int W = tp_runtime_stages(rt);
  size_t *np = g_new(size_t, W), *nb = g_new(size_t, W);
  for (int s = 0; s < W; s++)
    np[s] = tp_runtime_n_params(rt, s), nb[s] = tp_runtime_n_buffers(rt, s);
  tp_checkpoint_init(c, W, np, nb, tp_runtime_optimizer_states(rt));
  g_free(np), g_free(nb);
  c->lo = lo, c->hi = hi < 0 ? W : hi;
  gboolean ok = TRUE;
  for (int s = c->lo; ok && s < c->hi; s++)
    ok = tp_runtime_get_state(rt, s, c->weights[s], c->mom[s], err) &&
         (!c->nb[s] || tp_runtime_get_buffers(rt, s, c->buf[s], err));
  return ok;
}

gboolean tp_checkpoint_restore(const TpCheckpoint *c, TpRuntime *rt, const char *dir, GError **err)
{
  for (int s = 0; s < tp_runtime_stages(rt); s++)
    if (c->W != tp_runtime_stages(rt) || c->np[s] != tp_runtime_n_params(rt, s) ||
        c->states != tp_runtime_optimizer_states(rt) || c->nb[s] != tp_runtime_n_buffers(rt, s)) {
      g_set_error(err, TP_ERROR, TP_ERROR_PARAM_RESUME, "%s/%s: stage %d's %s differ from this run's", dir,
                  TP_CHECKPOINT_INI, s + 1,
                  c->states != tp_runtime_optimizer_states(rt) ? "optimizer states"
                  : c->np[s] != tp_runtime_n_params(rt, s)     ? "parameters"
                                                                : "buffers (batchnorm's running statistics)");
      return FALSE;
    }
  gboolean ok = TRUE;
  for (int s = c->lo; ok && s < c->hi; s++) {
    ok = tp_runtime_set_state(rt, s, c->weights[s], c->mom[s], err);
    if (ok && c->nb[s] && !(ok = tp_runtime_set_buffers(rt, s, c->buf[s], err)))
      g_prefix_error(err, "%s/%s: stage %d's buffers: ", dir, TP_CHECKPOINT_INI, s + 1);
  }
  return ok;
}

TpSchedule *tp_checkpoint_plan(const char *text, const char *dir, const char *key, GError **err)
{
  g_autofree char *ini = g_build_filename(dir, TP_CHECKPOINT_INI, NULL);
  g_autofree char *name = g_strdup_printf("%s [plan] %s", ini, key); /* its lines are the schedule's */
  TpSchedule *s = tp_schedule_parse(text, strlen(text), name, err);
  if (s && !tp_validate(s, err))
    g_clear_pointer(&s, tp_schedule_free);
  return s;
}

gboolean tp_checkpoint_save(TpGroup *g, const char *dir, const TpCheckpoint *c, int (*stop)(void), int *sig,
                            GError **err)
{
  *sig = 0;
  if (tp_group_size(g) == 1) {
    gboolean ok = tp_checkpoint_write(dir, c, err);
    *sig = stop();
    return ok;
  }
  typedef struct {
    gint32 sig;
    char sha[65];
  } Part;
  /* ranks W.. hold other replicas of the same stages (the same weights): the first replica writes */
  const int n = tp_group_size(g), W = c->W, rank = tp_group_rank(g), st = rank % W;
  Part mine;
  memset(&mine, 0, sizeof mine);
  if (rank < W && !tp_checkpoint_write_part(dir, c, st, mine.sha, err)) {
    g_prefix_error(err, "stage %d (rank %d): ", st + 1, rank); /* the line of the rank that failed */
    return FALSE;
  }
  mine.sig = stop();
  g_autofree Part *all = g_new0(Part, n);
  if (!tp_group_gather(g, -1, &mine, sizeof mine, all, err))
    return FALSE;
  for (int r = 0; r < n && !*sig; r++)
    *sig = all[r].sig;
  gint64 committed = 0;
  if (rank == 0) {
    g_autofree const char **shas = g_new(const char *, W);
    for (int r = 0; r < W; r++)
      shas[r] = all[r].sha;
    if (!tp_checkpoint_commit_parts(dir, c, shas, err)) {
      g_prefix_error(err, "stage 1 (rank 0): ");
      return FALSE;
    }
    committed = 1;
  }
  if (!tp_group_broadcast(g, 0, &committed, sizeof committed, "committing the checkpoint", err))
    return FALSE;
  if (rank < W)
    tp_checkpoint_remove_stale(dir, c->generation, st);
  if (rank == 0)
    tp_checkpoint_remove_stale(dir, c->generation, -1);
  return TRUE;
}

gboolean tp_checkpoint_load(TpGroup *g, const char *dir, int W, TpCheckpoint *c, GError **err)
{
  const char *doing = "reading the checkpoint";
  const int rank = tp_group_rank(g);
  gint64 len = -1;
  g_autofree char *meta = NULL;
  GError *e = NULL;
  memset(c, 0, sizeof *c);
  if (rank == 0) {
    gsize n = 0;
    if ((meta = tp_checkpoint_read_meta(dir, &n, &e)))
      len = (gint64)n;
  }
  if (!tp_group_broadcast(g, 0, &len, sizeof len, doing, err)) {
    g_clear_error(&e);
    return FALSE;
  }
  if (len < 0) { /* rank 0 says why */
    if (e)
      g_propagate_error(err, e);
    else
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "rank 0 cannot read the checkpoint in %s", dir);
    return FALSE;
  }
  if (rank != 0)
    meta = g_malloc((gsize)len + 1);
  int lo, hi;
  tp_group_stages(g, W, &lo, &hi);
  if (tp_group_size(g) == 1)
    hi = -1; /* every stage the checkpoint holds */
  return tp_group_broadcast(g, 0, meta, (size_t)len, doing, err) &&
         tp_checkpoint_parse(dir, meta, (gsize)len, lo, hi, c, err);
}
