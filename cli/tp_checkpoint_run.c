/* tp_checkpoint_run.c — the run's side of checkpoints (tp_checkpoint.h): the options, the run's
 * identity that a checkpoint must share to be continued, the state moved between the runtime and
 * a checkpoint, the stored plan read back, and the signals that stop a run at a checkpoint. */
#include "config.h"
#include "tp_checkpoint.h"
#include "tp_cli.h"
#include "tp_error.h"
#include "tp_format.h"
#include "tp_policy.h"
#include "tp_validate.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

gboolean tp_checkpoint_options(const char *checkpoint, const char *resume, const char *every, const char *stop_after,
                               gboolean schedule_file, TpCheckpointOpts *out, GError **err)
{
  memset(out, 0, sizeof *out);
  if ((every && !tp_cli_int("--checkpoint-every", every, 1, TP_MAX_MINI, &out->every, err)) ||
      (stop_after && !tp_cli_int("--stop-after", stop_after, 1, G_MAXINT, &out->stop_after, err)))
    return FALSE;
  out->dir = checkpoint ? checkpoint : resume;
  if ((every || stop_after) && !out->dir) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s: needs --checkpoint DIR (or --resume DIR)",
                every ? "--checkpoint-every" : "--stop-after");
    return FALSE;
  }
  if (every && schedule_file) {
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--checkpoint-every: a --schedule file runs whole; checkpoints at its end");
    return FALSE;
  }
  return TRUE;
}

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
  char *sha = g_compute_checksum_for_string(G_CHECKSUM_SHA256, d->str, (gssize)d->len);
  g_string_free(d, TRUE);
  return sha;
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
  g_snprintf(buf, sizeof buf, "cosine over %ld mini-batches", id->lr_steps);
  tp_checkpoint_id(c, "lr_schedule", id->lr_steps > 0 ? buf : "constant");
  tp_checkpoint_id(c, "backend", id->backend ? id->backend : "cpu");
  tp_checkpoint_id(c, "data", id->data ? id->data : TP_DATA_DEFAULT_DIR);
}

gboolean tp_checkpoint_take(TpCheckpoint *c, const TpRuntime *rt, int lo, int hi, GError **err)
{
  int W = tp_runtime_stages(rt);
  size_t *np = g_new(size_t, W);
  for (int s = 0; s < W; s++)
    np[s] = tp_runtime_n_params(rt, s);
  tp_checkpoint_init(c, W, np);
  g_free(np);
  c->lo = lo, c->hi = hi < 0 ? W : hi;
  gboolean ok = TRUE;
  for (int s = c->lo; ok && s < c->hi; s++)
    ok = tp_runtime_get_state(rt, s, c->weights[s], c->mom[s], err);
  return ok;
}

gboolean tp_checkpoint_restore(const TpCheckpoint *c, TpRuntime *rt, const char *dir, GError **err)
{
  for (int s = 0; s < tp_runtime_stages(rt); s++)
    if (c->W != tp_runtime_stages(rt) || c->np[s] != tp_runtime_n_params(rt, s)) {
      g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--resume: %s/%s: stage %d's parameters differ from this run's", dir,
                  TP_CHECKPOINT_INI, s + 1);
      return FALSE;
    }
  gboolean ok = TRUE;
  for (int s = c->lo; ok && s < c->hi; s++)
    ok = tp_runtime_set_state(rt, s, c->weights[s], c->mom[s], err);
  return ok;
}

TpSchedule *tp_checkpoint_plan(const char *text, const char *dir, GError **err)
{
  g_autofree char *name = g_build_filename(dir, TP_CHECKPOINT_INI, NULL);
  TpSchedule *s = tp_schedule_parse(text, strlen(text), name, err);
  if (s && !tp_validate(s, err))
    g_clear_pointer(&s, tp_schedule_free);
  return s;
}

static volatile sig_atomic_t caught_signal;

static void on_signal(int sig)
{
  if (caught_signal) {
    static const char msg[] = "timeprest: second signal: aborted at once (the last checkpoint stays)\n";
    ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)n;
    _exit(128 + sig);
  }
  caught_signal = sig;
}

void tp_checkpoint_catch_signals(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL); /* a closed terminal: as SIGTERM */
}

int tp_checkpoint_signal(void) { return caught_signal; }
