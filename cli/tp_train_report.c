/* tp_train_report.c — what `timeprest train` writes from the trainer's results: the report (text or
 * JSON), the training log and the trace files, staged so that all or none are written. */
#include "config.h"
#include "tp_train_report.h"
#include "tp_format.h"
#include "tp_cli.h"
#include "tp_output.h"
#include "tp_policy.h"
#include "tp_checkpoint.h"
#include "tp_trainlog.h"

#include <glib/gstdio.h>
#include <string.h>

/* EVENTS.csv → EVENTS.WHAT.csv (any other name: NAME.WHAT.csv). */
static char *beside(const char *trace, const char *what)
{
  size_t n = strlen(trace);
  if (n > 4 && strcmp(trace + n - 4, ".csv") == 0)
    n -= 4;
  return g_strdup_printf("%.*s.%s.csv", (int)n, trace, what);
}

gboolean tp_train_check_outputs(const char *csv, const char *trace, const char *output, const char *checkpoint,
                                const char *resume, const char *model, const char *schedule, const char *data,
                                GError **err)
{
  GStatBuf st; /* the plan and the prediction go beside the events: a place for three files */
  if (trace && *trace && (tp_output_is_stdout(trace) || (g_stat(trace, &st) == 0 && !S_ISREG(st.st_mode)))) {
    g_autofree char *q = tp_quote(trace);
    g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "--trace: %s: the events go to NAME.csv with NAME.schedule.csv and "
                "NAME.predicted.csv beside it: the name of a regular file, not standard output, a device or a FIFO", q);
    return FALSE;
  }
  g_autofree char *plan = trace ? beside(trace, "schedule") : NULL;
  g_autofree char *pred = trace ? beside(trace, "predicted") : NULL;
  const char *flags[] = { "--csv", "--trace", "--trace", "--trace", "-o" };
  const char *paths[] = { csv, trace, plan, pred, output };
  const TpCliInput in[] = { { "-m", model, tp_model_path }, { "--schedule", schedule, NULL }, { "--data", data, NULL } };
  if (!tp_cli_check_outputs_made(G_N_ELEMENTS(paths), flags, paths, checkpoint && *checkpoint ? checkpoint : NULL,
                                 TRUE, (int)G_N_ELEMENTS(in), in, err))
    return FALSE;
  const char *ck_flags[] = { "--checkpoint", "--resume" }, *ck_dirs[] = { checkpoint, resume };
  for (size_t c = 0; c < G_N_ELEMENTS(ck_dirs); c++)
    for (size_t i = 0; ck_dirs[c] && *ck_dirs[c] && i < G_N_ELEMENTS(paths); i++)
      if (paths[i] && strcmp(paths[i], "-") != 0 && tp_checkpoint_owns(ck_dirs[c], paths[i])) {
        g_autofree char *q = tp_quote(paths[i]);
        g_set_error(err, TP_ERROR, TP_ERROR_INPUT, "%s and %s: %s is the checkpoint's directory or one of its files",
                    flags[i], ck_flags[c], q);
        return FALSE;
      }
  return TRUE;
}

/* ---- reports ------------------------------------------------------------------------------------- */

/* Stage st's all-reduce as the prediction has it: the simulation's mean link time per all-reduce. */
static double predicted_allreduce(const Train *t, int st)
{
  const TpAllreduceStats *ar = t->pred.sim->ar;
  return ar && ar->count[st] ? ar->busy[st] / (double)ar->count[st] : 0;
}

/* Replicas: each stage's reduction as timed before training, and the prediction's all-reduce. */
static void allreduce_json(const Train *t, GString *out)
{
  g_string_append(out, "\"allreduce\": [");
  for (int st = 0; st < t->W; st++)
    g_string_append_printf(out, "%s{\"stage\": %d, \"bytes\": %zu, \"measured\": %.9g, \"predicted\": %.9g}",
                           st ? ", " : "", st + 1, tp_runtime_n_params(t->rt, st) * sizeof(float), t->res.allreduce[st],
                           predicted_allreduce(t, st));
  g_string_append(out, "], ");
}

static void allreduce_text(const Train *t, GString *out)
{
  g_string_append_printf(out, "all-reduce   %s, timed before training (median of %d) / as predicted:",
                         t->dp.rt ? "the replicas' in-process reduction" : "the reduction over the job's MPI links",
                         tp_train_allreduce_reps(t));
  for (int st = 0; st < t->W; st++)
    g_string_append_printf(out, "%s stage %d %.4g / %.4g ms", st ? "," : "", st + 1, 1e3 * t->res.allreduce[st],
                           1e3 * predicted_allreduce(t, st));
  g_string_append_c(out, '\n');
}

/* The links between processes as measured before training (one process per stage). */
static void links_json(const Train *t, GString *out)
{
  g_string_append(out, "\"links\": [");
  for (int l = 0; l < t->W - 1; l++)
    g_string_append_printf(out, "%s{\"from\": %d, \"to\": %d, \"latency\": %.9g, \"bandwidth\": %.9g, "
                           "\"eager_limit\": %.9g}", l ? ", " : "", l + 1, l + 2, t->res.links[l].latency_s,
                           t->res.links[l].bandwidth_Bps, t->res.links[l].eager_limit);
  g_string_append(out, "], ");
}

static void links_text(const Train *t, GString *out)
{
  int ranks = t->W * MAX(t->dp.D, 1);
  g_string_append_printf(out, "transport    %s: %d rank%s, rank r runs stage %s; %s", tp_group_transport(t->group), ranks,
                         ranks == 1 ? "" : "s", t->dp.D > 1 ? "r mod W + 1 of replica r / W + 1" : "r+1",
                         t->W == 1 ? "no links" : "links (ping-pong before training):");
  for (int l = 0; l < t->W - 1; l++) {
    g_string_append_printf(out, "%s %d-%d %.1f us, %.2f GB/s", l ? "," : "", l + 1, l + 2,
                           t->res.links[l].latency_s * 1e6, t->res.links[l].bandwidth_Bps / 1e9);
    if (t->res.links[l].eager_limit > 0) /* larger messages: MPI rendezvous sends */
      g_string_append_printf(out, ", eager limit %.0f B", t->res.links[l].eager_limit);
  }
  g_string_append_c(out, '\n');
}

static void json_array(GString *out, const char *name, const GArray *a)
{
  g_string_append_printf(out, ", \"%s\": [", name);
  for (guint i = 0; i < a->len; i++)
    g_string_append_printf(out, "%s%.9g", i ? ", " : "", g_array_index(a, double, i));
  g_string_append_c(out, ']');
}

static double last_of(const GArray *a) { return a->len ? g_array_index(a, double, a->len - 1) : 0; }

/* The first logged row's training loss (a tenth of the first epoch, or the whole of a short one), as
 * the log holds it; 0 without one. */
static double first_logged_loss(const Train *t)
{
  g_autoptr(TpTrainLog) log = tp_trainlog_parse(t->res.log->str, "log", NULL); /* its header first */
  int col = log ? tp_trainlog_column(log, "loss") : -1;
  return log && log->n_rows && col >= 0 ? log->values[col] : 0;
}

/* Tokens a sample holds: a token model's context, else 0. */
static int tokens_per_sample(const Train *t) { return t->model->vocab ? t->model->context : 0; }

/* --backend cuda (stages of this process): per GPU, the weight stores' peaks of its stages (each
 * stage's own peak, summed: at most what they held at once) beside the most memory cudaMemGetInfo
 * reported in use there after any operation (all of the device's allocations: the CUDA context,
 * cuBLAS and scratch buffers, other processes).  json: the "gpu_memory" member; else text lines. */
static void report_gpu_memory(const Train *t, gboolean json, GString *out)
{
  if (!t->dev.stage_be || tp_group_per_stage(t->group))
    return;
  if (json)
    g_string_append(out, "\"gpu_memory\": [");
  int shown = 0;
  for (int s = 0; s < t->W; s++) {
    int d = tp_backend_device(t->dev.stage_be[s]), first = 1;
    for (int r = 0; r < s; r++)
      first &= tp_backend_device(t->dev.stage_be[r]) != d;
    if (!first)
      continue;
    double store = 0;
    g_autoptr(GString) stages = g_string_new(NULL);
    for (int r = s; r < t->W; r++)
      if (tp_backend_device(t->dev.stage_be[r]) == d) {
        store += t->res.cmp.measured.peak_bytes[r];
        g_string_append_printf(stages, "%s%d", stages->len ? ", " : "", r + 1);
      }
    guint64 used = 0, total = 0;
    t->dev.stage_be[s]->iface->memory(t->dev.stage_be[s], &used, &total);
    if (json)
      g_string_append_printf(out, "%s{\"device\": %d, \"stages\": [%s], \"weight_store_peak\": %.9g, "
                             "\"used_peak\": %" G_GUINT64_FORMAT ", \"total\": %" G_GUINT64_FORMAT "}",
                             shown ? ", " : "", d, stages->str, store, used, total);
    else
      g_string_append_printf(out, "gpu memory   GPU %d (stage%s %s): weight stores %.3f GB at their peaks, "
                             "cudaMemGetInfo %.3f GB in use at most, of %.1f GB\n", d, strchr(stages->str, ',') ? "s" : "",
                             stages->str, store / 1e9, (double)used / 1e9, (double)total / 1e9);
    shown++;
  }
  if (json)
    g_string_append(out, "], ");
}

/* Whether the run's schedule has fused forwards: this run fused them, or the plan it resumed (or
 * a file) has whole-mini-batch forwards before whole backwards. */
static gboolean fused_forwards(const Train *t)
{
  return t->fuse.on || tp_schedule_fused_forwards(t->s) > 0;
}

static void report_json(const Train *t, const char *sha, GString *out)
{
  const TpTrainConfig *c = &t->cfg;
  const char *name = c->sched.preset ? c->sched.preset->name : tp_preset_name(t->s->order, t->s->policy);
  g_string_append_printf(out, "{\"preset\": \"%s\", \"order\": \"%s\", \"policy\": \"%s\", \"model\": \"%s\", ",
                         name ? name : "", tp_order_name(t->s->order), tp_policy_name(t->s->policy), t->model->name);
  if (t->V > 1) /* interleaved stages: W / V workers of V chunks (the stages below are the chunks) */
    g_string_append_printf(out, "\"chunks\": %d, ", t->V);
  g_string_append_printf(out, "\"workers\": %d, \"micro_batches\": %d, \"batch\": %d, \"mini_batches\": %d, "
                         "\"epochs\": %d, \"backend\": \"%s\", \"transport\": \"%s\", \"cores\": %d, \"threads\": %d, ",
                         t->W / t->V, t->N, c->batch, t->K, t->runs, tp_backend_name(tp_runtime_backend(t->rt, 0)), tp_group_transport(t->group),
                         t->dev.cores, MAX(c->threads, 1));
  g_string_append_printf(out, "\"seed\": %u, \"optimizer\": \"%s\", \"lr\": %.9g, \"lr_schedule\": \"%s\", ", c->seed,
                         c->opt.adamw ? "adamw" : "sgd", c->opt.lr,
                         tp_train_warmup(t) ? "warmup-cosine" : c->opt.lr_cosine ? "cosine" : "constant");
  if (tp_train_warmup(t))
    g_string_append_printf(out, "\"warmup\": %ld, ", tp_train_warmup(t));
  if (c->opt.adamw)
    g_string_append_printf(out, "\"beta1\": %.9g, \"beta2\": %.9g, \"eps\": %.9g, ", c->opt.beta1, c->opt.beta2, c->opt.eps);
  else
    g_string_append_printf(out, "\"momentum\": %.9g, ", c->opt.momentum);
  g_string_append_printf(out, "\"weight_decay\": %.9g, ", c->opt.wd);
  if (t->dp.D > 1)
    g_string_append_printf(out, "\"data_parallel\": %d, \"replicas_identical\": %s, ", t->dp.D,
                           t->dp.identical ? "true" : "false");
  if (t->res.allreduce)
    allreduce_json(t, out);
  if (t->res.links)
    links_json(t, out);
  g_string_append(out, "\"stages\": [");
  for (int s = 0; s < t->W; s++)
    g_string_append_printf(out, "%s{\"stage\": %d, \"first_layer\": %d, \"last_layer\": %d, \"params\": %zu}",
                           s ? ", " : "", s + 1, t->bounds[s] + 1, t->bounds[s + 1], tp_runtime_n_params(t->rt, s));
  double sps = t->res.tally.train_time > 0 ? t->res.tally.samples / t->res.tally.train_time : 0;
  g_string_append_printf(out, "], \"samples_per_second\": %.9g, ", sps);
  if (tokens_per_sample(t))
    g_string_append_printf(out, "\"tokens_per_second\": %.9g, ", sps * tokens_per_sample(t));
  g_string_append_printf(out, "\"train_time\": %.9g, \"first_train_loss\": %.9g, \"final_train_loss\": %.9g, "
                         "\"final_test_accuracy\": %.9g, \"final_test_loss\": %.9g",
                         t->res.tally.train_time, first_logged_loss(t), last_of(t->res.tally.train_loss), last_of(t->res.tally.test_acc),
                         last_of(t->res.tally.test_loss));
  json_array(out, "test_accuracy", t->res.tally.test_acc);
  json_array(out, "epoch_time", t->res.tally.epoch_time);
  json_array(out, "train_loss", t->res.tally.train_loss);
  g_autofree char *ssha = tp_schedule_sha256(t->s);
  g_string_append_printf(out, ", \"weights_sha256\": \"%s\", \"versions_match\": %s, \"mismatched_reads\": %ld, "
                         "\"order_fixed_on\": \"%s\", \"schedule_sha256\": \"%s\", \"recompute\": %s, "
                         "\"fused_forwards\": %s, \"time_unit\": \"s\", \"byte_unit\": \"B\", \"profile\": [",
                         sha, t->res.tally.versions_match ? "true" : "false", t->res.tally.mismatched, tp_report_fixed_on(t->s), ssha,
                         t->s->recompute ? "true" : "false", fused_forwards(t) ? "true" : "false");
  for (int s = 0; s < t->W; s++) {
    g_string_append_printf(out, "%s{\"stage\": %d, \"forward\": %.9g, \"backward\": %.9g, \"update\": %.9g",
                           s ? ", " : "", s + 1, t->pred.prof[s].fwd, t->pred.prof[s].bwd, t->pred.prof[s].upd);
    if (t->pred.prof[s].inp > 0) /* a split backward: its I and W as profiled (backward: their sum) */
      g_string_append_printf(out, ", \"input_grad\": %.9g, \"weight_grad\": %.9g", t->pred.prof[s].inp, t->pred.prof[s].wgt);
    g_string_append(out, "}");
  }
  g_string_append_printf(out, "], \"v_steady\": %d, \"chains\": %d, \"multiple_sequences\": %s, ", t->pred.m->ver.v_steady,
                         t->pred.m->ver.chains, t->pred.m->ver.multiple_sequences ? "true" : "false");
  report_gpu_memory(t, TRUE, out);
  tp_comparison_json(&t->res.cmp, out);
  g_string_append(out, "}\n");
}

/* The fused forwards' line, where the schedule had forwards to fuse. */
static void fused_text(const Train *t, GString *out)
{
  const TpTrainFuse *f = &t->fuse;
  if (!f->mini_batches) { /* a resumed plan, or a file: as it has them */
    if (t->s->N == 1) /* one micro-batch a mini-batch: nothing to fuse (a fresh run decides nothing) */
      return;
    int n = tp_schedule_fused_forwards(t->s);
    if (n)
      g_string_append_printf(out, "forwards     fused in %d of the plan's %d mini-batches (as the plan %s has them)\n", n,
                             t->s->K, t->cfg.sched.file ? "read" : "resumed");
    else if (t->s->order == TP_ORDER_NF1B)
      g_string_append_printf(out, "forwards     one per micro-batch (as the plan %s has them)\n",
                             t->cfg.sched.file ? "read" : "resumed");
    return;
  }
  /* auto decides before the pipelined profile: on the stages' stand-alone profile */
  g_autofree char *sim = f->t_fused > 0 ? g_strdup_printf("; on the stand-alone profile %.4g ms per mini-batch "
                                                          "fused, %.4g not", 1e3 * f->t_fused, 1e3 * f->t_plain)
                                        : g_strdup("");
  if (f->on)
    g_string_append_printf(out, "forwards     fused in %d of the plan's %d mini-batches: where a mini-batch's %d forwards run back "
                           "to back on every stage reading one version, they ran as one of %d samples%s\n",
                           f->mini_batches, t->s->K, t->N, t->cfg.batch, sim);
  else if (t->cfg.sched.fuse != TP_FUSE_OFF && t->cfg.sched.slots)
    g_string_append_printf(out, "forwards     one per micro-batch (auto fuses on profiled costs only; on these unit "
                           "slots --fuse-forwards on would fuse %d of the plan's %d mini-batches)\n", f->mini_batches,
                           t->s->K);
  else
    g_string_append_printf(out, "forwards     one per micro-batch (%s%s)\n",
                           t->cfg.sched.fuse == TP_FUSE_OFF ? "--fuse-forwards off" : "fusing them is not faster", sim);
}

/* What ran: the preset, the stages' layers, replicas and their all-reduce, the links. */
static void setup_text(const Train *t, GString *out)
{
  const TpTrainConfig *c = &t->cfg;
  const char *name = c->sched.preset ? c->sched.preset->name : c->sched.file;
  g_autofree char *chunks = t->V > 1 ? g_strdup_printf(" (%d workers x %d chunks, taking turns)", t->W / t->V, t->V)
                                      : g_strdup("");
  g_string_append_printf(out, "train        %s (%s + %s): W=%d stages%s, N=%d micro-batches, batch %d, model %s\n", name,
                         tp_order_name(t->s->order), tp_policy_name(t->s->policy), t->W, chunks, t->N, c->batch,
                         t->model->name);
  g_string_append(out, "stages       layers");
  for (int s = 0; s < t->W; s++)
    g_string_append_printf(out, " %d-%d", t->bounds[s] + 1, t->bounds[s + 1]);
  g_string_append(out, t->cfg.sched.split ? " (split as --split gave it)\n" : " (split balancing FLOPs)\n");
  if (t->dp.D > 1)
    g_string_append_printf(out, "replicas     %d (data parallel, %d samples each, gradients averaged before every update); "
                           "bit-identical after every segment: %s\n", t->dp.D, tp_train_replica_batch(t),
                           t->dp.identical ? "yes" : "NO");
  if (t->res.allreduce)
    allreduce_text(t, out);
  if (t->res.links)
    links_text(t, out);
}

/* Which order and plan ran (two runs' plans told apart by the digest), and what the steady state
 * holds: v (a range when it differs there), chains and the multiple-sequence problem, as the JSON;
 * recomputation and fused forwards. */
static void order_text(const Train *t, GString *out)
{
  g_autofree char *ssha = tp_schedule_sha256(t->s);
  char vs[48];
  if (t->pred.m->ver.v_steady_min != t->pred.m->ver.v_steady)
    g_snprintf(vs, sizeof vs, "v from %d to %d", t->pred.m->ver.v_steady_min, t->pred.m->ver.v_steady);
  else
    g_snprintf(vs, sizeof vs, "v = %d", t->pred.m->ver.v_steady);
  g_string_append_printf(out, "order        %s, fixed on %s; plan sha256 %s\n", tp_order_name(t->s->order),
                         t->s->fixed_on == TP_FIXED_ON_COSTS ? "the profiled costs" : "unit slots", ssha);
  g_string_append_printf(out, "steady state %s, %d chain%s; multiple-sequence problem: %s\n", vs, t->pred.m->ver.chains,
                         t->pred.m->ver.chains == 1 ? "" : "s", t->pred.m->ver.multiple_sequences ? "yes" : "no");
  g_string_append_printf(out, "recompute    %s\n", t->s->recompute ? "true: each backward ran its stage's forward "
                         "again from the stored stage input, with the weights the backward read" : "false");
  fused_text(t, out);
}

/* The data and the optimizer. */
static void optimizer_text(const Train *t, GString *out)
{
  const TpTrainConfig *c = &t->cfg;
  g_autofree char *data_name = g_strdup(t->train->name);
  for (char *q = data_name; *q; q++) /* a name's control bytes (a newline) stay on the line */
    if ((unsigned char)*q < 0x20 || *q == 0x7f)
      *q = '?';
  g_string_append_printf(out, "data         %s: %d mini-batches x %d run%s (%s)\n", data_name, t->K, t->runs,
                         t->runs == 1 ? "" : "s", t->per_epoch ? "epochs" : "mini-batches as asked");
  g_string_append_printf(out, "optimizer    %s, lr %g", c->opt.adamw ? "AdamW" : "SGD", c->opt.lr);
  if (tp_train_warmup(t))
    g_string_append_printf(out, " warmed up linearly over %ld mini-batches, then", tp_train_warmup(t));
  if (c->opt.lr_cosine)
    g_string_append_printf(out, " decayed by a cosine to 0 over the run's %ld mini-batches", tp_train_lr_steps(t));
  if (c->opt.adamw)
    g_string_append_printf(out, ", betas %g and %g, eps %g, decoupled weight decay %g, seed %u\n", c->opt.beta1, c->opt.beta2,
                           c->opt.eps, c->opt.wd, c->seed);
  else
    g_string_append_printf(out, ", momentum %g, weight decay %g, seed %u\n", c->opt.momentum, c->opt.wd, c->seed);
}

/* Each epoch's (or run's) losses and accuracy, the throughput, the versions read, the weights. */
static void outcome_text(const Train *t, const char *sha, GString *out)
{
  for (guint e = 0; e < t->res.tally.test_acc->len; e++)
    g_string_append_printf(out, "%-5s %-6u train loss %.4f, test accuracy %.4f, test loss %.4f, %.2f s\n",
                           t->per_epoch ? "epoch" : "run", e + 1,
                           g_array_index(t->res.tally.train_loss, double, e), g_array_index(t->res.tally.test_acc, double, e),
                           g_array_index(t->res.tally.test_loss, double, e), g_array_index(t->res.tally.epoch_time, double, e));
  double sps = t->res.tally.train_time > 0 ? t->res.tally.samples / t->res.tally.train_time : 0;
  if (tokens_per_sample(t))
    g_string_append_printf(out, "throughput   %.1f sequences/s, %.0f tokens/s (%.2f s of training)\n", sps,
                           sps * tokens_per_sample(t), t->res.tally.train_time);
  else
    g_string_append_printf(out, "throughput   %.1f samples/s (%.2f s of training)\n", sps, t->res.tally.train_time);
  g_string_append_printf(out, "versions     %s\n", t->res.tally.versions_match ? "every read was of the version the schedule names"
                                                                      : "SOME READS DIFFER from the schedule");
  g_string_append_printf(out, "weights      sha256 %s\n", sha);
}

static void report_text(const Train *t, const char *sha, GString *out)
{
  setup_text(t, out);
  order_text(t, out);
  optimizer_text(t, out);
  outcome_text(t, sha, out);
  report_gpu_memory(t, FALSE, out);
  g_string_append(out, "prediction   the simulator on the profiled costs vs this run (mean over runs; counts: max)\n");
  if (t->V > 1 && t->W / t->V > t->dev.cores)
    g_string_append_printf(out, "             %d workers on %d cores: the prediction runs worker r's chunks on core r mod "
                           "%d\n", t->W / t->V, t->dev.cores, t->dev.cores);
  else if (t->V == 1 && t->W > t->dev.cores)
    g_string_append_printf(out, "             %d stages on %d cores: the prediction runs stage s on core s mod %d\n", t->W,
                           t->dev.cores, t->dev.cores);
  tp_comparison_text(&t->res.cmp, out);
}

/* The training log, the trace files and the report: all of them or none (common/tp_output.h). */
gboolean tp_train_write_outputs(const Train *t, gpointer data, GError **err)
{
  const TpTrainOutputs *o = data;
  g_autofree char *sha = tp_train_weights_sha256(t);
  g_autoptr(TpOutputs) out = tp_outputs_new();
  g_autoptr(GString) text = g_string_new(NULL);
  gboolean ok = !o->csv || tp_outputs_add_text(out, o->csv, t->res.log, err);
  if (ok && o->trace) {
    g_string_append_printf(text, "# timeprest-events order_fixed_on=%s measured=1\n", tp_report_fixed_on(t->s));
    tp_events_write_csv(t->res.events, text);
    ok = tp_outputs_add_text(out, o->trace, text, err);
    g_string_truncate(text, 0); /* a regular file's bytes are copied, the buffer stays ours */
    /* the plan is part of the run's record: the schedule it ran, beside the events, and the
     * simulator's timeline of it (one schedule) to overlay */
    g_autofree char *plan_path = beside(o->trace, "schedule"), *pred_path = beside(o->trace, "predicted");
    if (ok) {
      tp_format_csv(t->s, text);
      ok = tp_outputs_add_text(out, plan_path, text, err);
      g_string_truncate(text, 0); /* a regular file's bytes are copied, the buffer stays ours */
    }
    if (ok) {
      tp_report_events_csv(t->pred.sim, text);
      ok = tp_outputs_add_text(out, pred_path, text, err);
      g_string_truncate(text, 0);
    }
  }
  if (ok) {
    (o->json ? report_json : report_text)(t, sha, text);
    ok = tp_outputs_add_text(out, o->output, text, err);
  }
  return ok && tp_outputs_commit(out, err);
}
