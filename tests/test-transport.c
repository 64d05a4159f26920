/* test-transport.c — the local transport with real threads: ping-pong, a pipeline of W stage
 * threads exchanging tagged messages in the orders of generated schedules (every preset),
 * out-of-order tags, a receive that times out, and abort waking a blocked receiver; the outbox of
 * lent sends, with a transport that lends and with the local one, which copies. */
#include "tp_local.h"
#include "tp_outbox.h"
#include "tp_test.h"

#include <string.h>

static TpTag tag_f(int mb, int micro)
{
  TpTag t = { TP_OP_F, mb, micro };
  return t;
}

/* ---- ping-pong ----------------------------------------------------------------------------------- */

enum { ROUNDS = 2000 };

typedef struct {
  TpTransport *t;
  int me;
  GError *err;
} Player;

static gpointer play(gpointer data)
{
  Player *p = data;
  for (int r = 1; r <= ROUNDS; r++) {
    guint64 v = 0;
    TpTag tag = { p->me == 0 ? TP_OP_F : TP_OP_B, r, TP_WHOLE };
    TpTag want = { p->me == 0 ? TP_OP_B : TP_OP_F, r, TP_WHOLE };
    if (p->me == 0) {
      v = (guint64)r * 2;
      if (!p->t->send(p->t, tp_link_ends(0, 1), &tag, &v, sizeof v, &p->err) ||
          !p->t->recv(p->t, tp_link_ends(0, 1), &want, &v, sizeof v, &p->err))
        return NULL;
      if (v != (guint64)r * 2 + 1)
        g_set_error(&p->err, TP_ERROR, TP_ERROR_RUNTIME, "round %d: got %" G_GUINT64_FORMAT, r, v);
    } else {
      if (!p->t->recv(p->t, tp_link_ends(1, 0), &want, &v, sizeof v, &p->err))
        return NULL;
      v++;
      if (!p->t->send(p->t, tp_link_ends(1, 0), &tag, &v, sizeof v, &p->err))
        return NULL;
    }
    if (p->err)
      return NULL;
  }
  return NULL;
}

static void test_ping_pong(void)
{
  g_autoptr(TpTransport) t = tp_local_new(2, 1, 10);
  Player p[2] = { { t, 0, NULL }, { t, 1, NULL } };
  GThread *th[2] = { g_thread_new("p0", play, &p[0]), g_thread_new("p1", play, &p[1]) };
  for (int i = 0; i < 2; i++) {
    g_thread_join(th[i]);
    g_assert_no_error(p[i].err);
  }
  TpLinkStats s;
  t->stats(t, 0, 1, &s);
  g_assert_cmpuint(s.messages, ==, ROUNDS);
  g_assert_cmpuint(s.bytes, ==, ROUNDS * 8);
  t->stats(t, 1, 0, &s);
  g_assert_cmpuint(s.messages, ==, ROUNDS);
  t->stats(t, 0, 0, &s);
  g_assert_cmpuint(s.messages, ==, 0);
}

/* ---- a pipeline following a schedule ------------------------------------------------------------- */

typedef struct {
  TpTransport *t;
  const TpSchedule *s;
  int st;
  GError *err;
} Stage;

/* A message's length and contents depend on the link and the tag, so a mismatch shows. */
static size_t payload_len(const TpTag *tag) { return 8 + 4 * (size_t)((tag->mb * 3 + tag->micro + 1) % 5); }

static void payload(int from, const TpTag *tag, int32_t *buf)
{
  size_t n = payload_len(tag) / 4;
  for (size_t i = 0; i < n; i++)
    buf[i] = (int32_t)(from * 1000003 + tag->kind * 10007 + tag->mb * 101 + tag->micro * 7 + (int)i);
}

static gpointer run_stage(gpointer data)
{
  Stage *g = data;
  const TpSchedule *s = g->s;
  const TpOp *ops = tp_stage_ops(s, g->st);
  int32_t buf[64], want[64];
  for (int k = 0; k < tp_stage_len(s, g->st) && !g->err; k++) {
    const TpOp *op = &ops[k];
    if (op->kind == TP_OP_U || op->kind == TP_OP_W) /* W, like U, moves nothing; I sends what B sends */
      continue;
    TpTag tag = tp_tag_of(op);
    int from = op->kind == TP_OP_F ? g->st - 1 : g->st + 1; /* the stage this op receives from */
    int to = op->kind == TP_OP_F ? g->st + 1 : g->st - 1;   /* the stage it sends to */
    if (from >= 0 && from < s->W) {
      size_t len = payload_len(&tag);
      if (!g->t->recv(g->t, tp_link_ends(g->st, from), &tag, buf, len, &g->err))
        break;
      payload(from, &tag, want);
      if (memcmp(buf, want, len) != 0) {
        g_set_error(&g->err, TP_ERROR, TP_ERROR_RUNTIME, "stage %d op %d: wrong payload", g->st + 1, k);
        break;
      }
    }
    if (to >= 0 && to < s->W) {
      payload(g->st, &tag, buf);
      if (!g->t->send(g->t, tp_link_ends(g->st, to), &tag, buf, payload_len(&tag), &g->err))
        break;
    }
  }
  if (g->err)
    g->t->abort(g->t, g->err->message);
  return NULL;
}

static void check_pipeline(const char *preset, int W, int N, int K)
{
  const TpPreset *p = tp_preset_find(preset);
  if (!tp_pair_check(p->order, p->policy, W, N, NULL))
    return;
  g_autoptr(TpSchedule) s = tpt_preset(preset, W, N, K);
  g_autoptr(TpTransport) t = tp_local_new(W, N, 20);
  Stage *g = g_new0(Stage, W);
  GThread **th = g_new(GThread *, W);
  for (int st = 0; st < W; st++) {
    g[st] = (Stage){ t, s, st, NULL };
    th[st] = g_thread_new("stage", run_stage, &g[st]);
  }
  for (int st = 0; st < W; st++)
    g_thread_join(th[st]);
  for (int st = 0; st < W; st++)
    if (g[st].err)
      g_error("%s W=%d N=%d K=%d: %s", preset, W, N, K, g[st].err->message);
  /* the counters: one message per forward of a stage but the last, per backward but the first */
  for (int st = 0; st < W; st++) {
    guint64 nf = 0, nb = 0, bf = 0, bb = 0;
    for (int k = 0; k < tp_stage_len(s, st); k++) {
      const TpOp *op = &tp_stage_ops(s, st)[k];
      TpTag tag = tp_tag_of(op);
      if (op->kind == TP_OP_F)
        nf++, bf += payload_len(&tag);
      if (tp_op_sends_up(op->kind))
        nb++, bb += payload_len(&tag);
    }
    TpLinkStats ls;
    if (st + 1 < W) {
      t->stats(t, st, st + 1, &ls);
      g_assert_cmpuint(ls.messages, ==, nf);
      g_assert_cmpuint(ls.bytes, ==, bf);
    }
    if (st > 0) {
      t->stats(t, st, st - 1, &ls);
      g_assert_cmpuint(ls.messages, ==, nb);
      g_assert_cmpuint(ls.bytes, ==, bb);
    }
  }
  g_free(g);
  g_free(th);
}

static void test_pipelines(void)
{
  static const int wnk[][3] = { { 1, 1, 2 }, { 2, 2, 6 }, { 3, 3, 8 }, { 4, 2, 10 }, { 4, 4, 10 }, { 6, 3, 12 } };
  for (int p = 0; p < tp_n_presets; p++)
    for (guint i = 0; i < G_N_ELEMENTS(wnk); i++)
      if (!tp_order_chunked(tp_presets[p].order)) /* no chunks in exec */
        check_pipeline(tp_presets[p].name, wnk[i][0], wnk[i][1], wnk[i][2]);
}

/* ---- tags, timeouts, abort ------------------------------------------------------------------------- */

static void test_out_of_order(void)
{
  g_autoptr(TpTransport) t = tp_local_new(3, 4, 5);
  GError *e = NULL;
  int order[4] = { 2, 0, 3, 1 };
  for (int i = 0; i < 4; i++) {
    TpTag tag = tag_f(1, order[i]);
    int v = 100 + order[i];
    g_assert_true(t->send(t, tp_link_ends(1, 2), &tag, &v, sizeof v, &e));
  }
  for (int j = 0; j < 4; j++) {
    TpTag tag = tag_f(1, j);
    int v = -1;
    g_assert_true(t->recv(t, tp_link_ends(2, 1), &tag, &v, sizeof v, &e));
    g_assert_no_error(e);
    g_assert_cmpint(v, ==, 100 + j);
  }
  /* a message of another kind on the same pair of stages is another link direction */
  TpTag b = { TP_OP_B, 1, TP_WHOLE };
  int v = 7;
  g_assert_true(t->send(t, tp_link_ends(2, 1), &b, &v, sizeof v, &e));
  g_assert_true(t->recv(t, tp_link_ends(1, 2), &b, &v, sizeof v, &e));
  /* no link between stages that are not neighbours; a length that is not the expected one */
  g_assert_false(t->send(t, tp_link_ends(0, 2), &b, &v, sizeof v, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_RUNTIME);
  g_assert_cmpstr(e->message, ==, "no link from stage 1 to stage 3 (of 3)");
  g_clear_error(&e);
  TpTag f = tag_f(2, 1);
  g_assert_true(t->send(t, tp_link_ends(0, 1), &f, &v, sizeof v, &e));
  char big[8];
  g_assert_false(t->recv(t, tp_link_ends(1, 0), &f, big, sizeof big, &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_RUNTIME);
  g_assert_cmpstr(e->message, ==, "stage 2: message F(2,B) from stage 1 has 4 bytes, expected 8");
  g_clear_error(&e);
}

static void test_timeout(void)
{
  g_autoptr(TpTransport) t = tp_local_new(2, 4, 0.2);
  GError *e = NULL;
  TpTag other = tag_f(3, 0), want = tag_f(3, 1);
  int v = 1;
  g_assert_true(t->send(t, tp_link_ends(0, 1), &other, &v, sizeof v, &e)); /* not the one asked for */
  gint64 t0 = g_get_monotonic_time();
  g_assert_false(t->recv(t, tp_link_ends(1, 0), &want, &v, sizeof v, &e));
  double dt = (g_get_monotonic_time() - t0) / 1e6;
  g_assert_error(e, TP_ERROR, TP_ERROR_RUNTIME);
  g_assert_cmpstr(e->message, ==, "stage 2: no message F(3,B) from stage 1 within 0.2 s (the peer is dead or stuck)");
  g_assert_cmpfloat(dt, >=, 0.19);
  g_assert_cmpfloat(dt, <, 5);
  g_clear_error(&e);
  /* the message that came first is still there */
  g_assert_true(t->recv(t, tp_link_ends(1, 0), &other, &v, sizeof v, &e));
  g_assert_no_error(e);
  g_assert_cmpint(v, ==, 1);
}

typedef struct {
  TpTransport *t;
  GError *err;
  gint64 woke;
} Waiter;

static gpointer wait_forever(gpointer data)
{
  Waiter *w = data;
  TpTag tag = { TP_OP_B, 4, TP_WHOLE };
  int v;
  w->t->recv(w->t, tp_link_ends(0, 1), &tag, &v, sizeof v, &w->err);
  w->woke = g_get_monotonic_time();
  return NULL;
}

static void test_abort(void)
{
  g_autoptr(TpTransport) t = tp_local_new(3, 2, 60);
  Waiter w = { t, NULL, 0 };
  GThread *th = g_thread_new("waiter", wait_forever, &w);
  g_usleep(50000);
  gint64 t0 = g_get_monotonic_time();
  t->abort(t, "stage 3: loss is NaN at mini-batch 4");
  g_thread_join(th);
  g_assert_cmpfloat((w.woke - t0) / 1e6, <, 2);
  g_assert_error(w.err, TP_ERROR, TP_ERROR_RUNTIME);
  g_assert_cmpstr(w.err->message, ==,
                  "stage 1: run aborted while waiting for B(4) from stage 2: stage 3: loss is NaN at mini-batch 4");
  g_clear_error(&w.err);
  /* later receives and sends fail at once too, the first reason kept */
  t->abort(t, "second");
  TpTag tag = tag_f(1, 0);
  int v = 0;
  GError *e = NULL;
  g_assert_false(t->recv(t, tp_link_ends(2, 1), &tag, &v, sizeof v, &e));
  g_assert_nonnull(strstr(e->message, "loss is NaN"));
  g_clear_error(&e);
  g_assert_false(t->send(t, tp_link_ends(1, 2), &tag, &v, sizeof v, &e));
  g_assert_cmpstr(e->message, ==, "stage 2: run aborted before F(1,A) was sent to stage 3: stage 3: loss is NaN at mini-batch 4");
  g_clear_error(&e);
}

/* A stage that fails aborts the run: the others, blocked on its messages, end with an error. */
static void test_failing_stage(void)
{
  g_autoptr(TpSchedule) s = tpt_preset("timeprest", 4, 2, 6);
  g_autoptr(TpTransport) t = tp_local_new(4, 2, 60);
  Stage g[4];
  GThread *th[4];
  for (int st = 0; st < 4; st++) {
    g[st] = (Stage){ t, s, st, NULL };
    if (st != 2)
      th[st] = g_thread_new("stage", run_stage, &g[st]);
  }
  g_usleep(20000);
  t->abort(t, "stage 3 failed");
  for (int st = 0; st < 4; st++)
    if (st != 2)
      g_thread_join(th[st]);
  for (int st = 0; st < 4; st++)
    if (st != 2) {
      g_assert_error(g[st].err, TP_ERROR, TP_ERROR_RUNTIME);
      g_assert_nonnull(strstr(g[st].err->message, "stage 3 failed"));
      g_clear_error(&g[st].err);
    }
}

/* ---- lent sends: the outbox (tp_outbox.h) ----------------------------------------------------------- */

/* A transport that lends: it keeps each lent buffer (and its done) until the test gives it back; a
 * send to stage 9 fails, as a transport's send may. */
typedef struct {
  TpTransport base;
  const void *data[4];
  void (*done[4])(void *);
  void *done_data[4];
  int n;
} Lender;

static gboolean lender_send(TpTransport *t, TpLinkEnds link, const TpTag *tag, const void *data, size_t len,
                            void (*done)(void *), void *done_data, GError **err)
{
  (void)tag, (void)len;
  Lender *l = (Lender *)t;
  if (link.peer == 9) {
    done(done_data); /* a failed send gives the buffer back at once */
    g_set_error(err, TP_ERROR, TP_ERROR_RUNTIME, "no stage 9");
    return FALSE;
  }
  g_assert_cmpint(l->n, <, 4);
  l->data[l->n] = data, l->done[l->n] = done, l->done_data[l->n] = done_data;
  l->n++;
  return TRUE;
}

/* The transport gives back lent buffer i. */
static void lender_return(Lender *l, int i) { l->done[i](l->done_data[i]); }

static void test_outbox(void)
{
  TpTag tag = tag_f(1, 0);
  GError *e = NULL;
  /* a transport that lends: a buffer in flight is not taken again; given back, it is reused */
  Lender l = { .base = { .name = "lender", .W = 2, .N = 1, .send_borrowed = lender_send } };
  TpOutbox *o = tp_outbox_new(4);
  float *a = tp_outbox_take(o, &e);
  a[0] = 1;
  g_assert_true(tp_outbox_send(o, a, &l.base, 0, 1, &tag, 4 * sizeof(float), &e));
  float *b = tp_outbox_take(o, &e);
  g_assert_true(b != a);
  g_assert_true(l.data[0] == a); /* lent, not copied */
  g_assert_true(tp_outbox_send(o, b, &l.base, 0, 1, &tag, 4 * sizeof(float), &e));
  lender_return(&l, 0);
  g_assert_true(tp_outbox_take(o, &e) == a);
  /* a send that fails gives its buffer back (no leak, not lent twice) */
  g_assert_false(tp_outbox_send(o, a, &l.base, 0, 9, &tag, 4 * sizeof(float), &e));
  g_assert_error(e, TP_ERROR, TP_ERROR_RUNTIME);
  g_clear_error(&e);
  g_assert_true(tp_outbox_take(o, &e) == a);
  tp_outbox_give(o, a); /* taken, not sent */
  /* the owner lets go with b still lent: the outbox lives until b is back (ASan: no leak, no use
   * after free) */
  tp_outbox_release(o);
  lender_return(&l, 1);
  /* a transport without send_borrowed (the local one) copies at once and gives the buffer back
   * before the send returns */
  g_autoptr(TpTransport) t = tp_local_new(2, 1, 5);
  o = tp_outbox_new(4);
  float *c = tp_outbox_take(o, &e);
  for (int i = 0; i < 4; i++)
    c[i] = (float)(i + 10);
  g_assert_true(tp_outbox_send(o, c, t, 0, 1, &tag, 4 * sizeof(float), &e));
  g_assert_true(tp_outbox_take(o, &e) == c);
  c[0] = -1; /* the message is the copy */
  float got[4];
  g_assert_true(t->recv(t, tp_link_ends(1, 0), &tag, got, sizeof got, &e));
  g_assert_no_error(e);
  g_assert_cmpfloat(got[0], ==, 10);
  g_assert_cmpfloat(got[3], ==, 13);
  tp_outbox_give(o, c);
  tp_outbox_release(o);
}

/* The bytes the local transport holds for a stage: each message from its send until a receive
 * takes it, those taken ahead of their turn (held) included, from both neighbours; and the bytes an
 * outbox has lent to a transport that lends, until each is given back. */
static void test_queued(void)
{
  g_autoptr(TpTransport) t = tp_local_new(3, 2, 5);
  GError *e = NULL;
  float a[4] = { 1, 2, 3, 4 }, got[4];
  TpTag f0 = tag_f(1, 0), f1 = tag_f(1, 1), b0 = { TP_OP_B, 1, 0 };
  g_assert_cmpint(t->queued(t, 1), ==, 0);
  g_assert_true(t->send(t, tp_link_ends(0, 1), &f0, a, 16, &e));
  g_assert_true(t->send(t, tp_link_ends(0, 1), &f1, a, 8, &e));
  g_assert_true(t->send(t, tp_link_ends(2, 1), &b0, a, 4, &e));
  g_assert_cmpint(t->queued(t, 1), ==, 28);
  g_assert_cmpint(t->queued(t, 0), ==, 0);
  g_assert_cmpint(t->queued(t, 2), ==, 0);
  g_assert_true(t->recv(t, tp_link_ends(1, 0), &f1, got, 8, &e)); /* f0 popped ahead of its turn: held */
  g_assert_cmpint(t->queued(t, 1), ==, 20);
  g_assert_true(t->recv(t, tp_link_ends(1, 0), &f0, got, 16, &e));
  g_assert_true(t->recv(t, tp_link_ends(1, 2), &b0, got, 4, &e));
  g_assert_no_error(e);
  g_assert_cmpint(t->queued(t, 1), ==, 0);
  Lender l = { .base = { .name = "lender", .W = 2, .N = 1, .send_borrowed = lender_send } };
  TpOutbox *o = tp_outbox_new(4);
  float *x = tp_outbox_take(o, &e), *y = tp_outbox_take(o, &e);
  g_assert_true(tp_outbox_send(o, x, &l.base, 0, 1, &f0, 16, &e));
  g_assert_true(tp_outbox_send(o, y, &l.base, 0, 1, &f1, 12, &e));
  g_assert_cmpint(tp_outbox_lent(o), ==, 28);
  lender_return(&l, 0);
  g_assert_cmpint(tp_outbox_lent(o), ==, 12);
  lender_return(&l, 1);
  g_assert_cmpint(tp_outbox_lent(o), ==, 0);
  tp_outbox_release(o);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/transport/ping-pong", test_ping_pong);
  g_test_add_func("/transport/pipelines", test_pipelines);
  g_test_add_func("/transport/out-of-order", test_out_of_order);
  g_test_add_func("/transport/timeout", test_timeout);
  g_test_add_func("/transport/abort", test_abort);
  g_test_add_func("/transport/failing-stage", test_failing_stage);
  g_test_add_func("/transport/outbox", test_outbox);
  g_test_add_func("/transport/queued", test_queued);
  return g_test_run();
}
