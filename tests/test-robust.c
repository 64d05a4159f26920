/* test-robust.c — what a hostile user tries, through the program on small synthetic data: checkpoints
 * edited and resealed with a consistent digest (every key checked for meaning), a checkpoint
 * directory owned by one run at a time, checkpoint files that are not regular files, data that
 * changed under a checkpoint, SIGHUP, colliding output paths, FIFOs without a writer, numbers,
 * standard output that cannot be written. */
#include "tp_test.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define DATA "synthetic:256:64"
#define SEAL "\n[integrity]\nsha256="

/* train with the common small options, then extra (NULL-terminated). */
static TptRun train(const char *const *extra)
{
  GPtrArray *a = g_ptr_array_new();
  const char *base[] = { "train", "-s", "gpipe", "-w", "2", "-n", "2", "--batch", "32", "--data", DATA,
                         "--order-from", "slots", "--quiet", "--format", "json" };
  for (size_t i = 0; i < G_N_ELEMENTS(base); i++)
    g_ptr_array_add(a, (char *)base[i]);
  for (int i = 0; extra[i]; i++)
    g_ptr_array_add(a, (char *)extra[i]);
  g_ptr_array_add(a, NULL);
  TptRun r = tpt_run((const char *const *)a->pdata);
  g_ptr_array_free(a, TRUE);
  return r;
}

/* A refusal: exit 2, one line on stderr holding want, nothing on stdout. */
static void assert_refused(const TptRun *r, const char *want)
{
  if (r->status != 2 || tpt_lines(r->err) != 1 || !strstr(r->err, want))
    g_test_message("status %d, stderr: %s", r->status, r->err);
  g_assert_cmpint(r->status, ==, 2);
  g_assert_cmpint(tpt_lines(r->err), ==, 1);
  g_assert_nonnull(strstr(r->err, want));
  g_assert_cmpstr(r->out, ==, "");
}

/* A checkpoint of -k 10 --checkpoint-every 3 stopped after 4 mini-batches (index 6) in root/ck. */
static char *make_checkpoint(const char *root)
{
  char *dir = g_build_filename(root, "ck", NULL);
  TptRun s = train((const char *[]){ "-k", "10", "--checkpoint-every", "3", "--checkpoint", dir, "--stop-after", "4",
                                     NULL });
  g_assert_cmpint(s.status, ==, 0);
  tpt_run_clear(&s);
  return dir;
}

/* checkpoint.ini with the line "key=..." (the first of that key) replaced by "key=value", resealed. */
static void edit_ini(const char *dir, const char *key, const char *value)
{
  g_autofree char *path = g_build_filename(dir, "checkpoint.ini", NULL);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  char *seal = g_strrstr(text, SEAL);
  g_assert_nonnull(seal);
  *seal = '\0';
  g_autofree char *needle = g_strdup_printf("\n%s=", key);
  char *at = strstr(text, needle);
  g_assert_nonnull(at);
  at += strlen(needle);
  char *eol = strchr(at, '\n');
  g_autoptr(GString) body = g_string_new_len(text, at - text);
  g_string_append(body, value);
  g_string_append(body, eol ? eol : "");
  g_autofree char *sha = g_compute_checksum_for_string(G_CHECKSUM_SHA256, body->str, (gssize)body->len);
  g_string_append_printf(body, "%s%s\n", SEAL, sha);
  g_assert_true(g_file_set_contents(path, body->str, (gssize)body->len, NULL));
}

/* 1. Every key of a resealed checkpoint is checked for meaning: exit 2, one line naming the key. */
static void test_edited_checkpoint(void)
{
  struct {
    const char *key, *value;
  } cases[] = {
    { "index", "5" },     /* not a segment boundary */
    { "index", "-1" },    { "index", "1000" },    { "epoch", "-1" },      { "done", "7" },
    { "data_index", "1281" }, { "data_epoch", "1" }, { "generation", "-5" }, { "stages", "3" },
    { "seed", "77" },     { "loss_sum", "1;2" }, { "correct", "1;2;3;4;5;6;7" }, { "test_accuracy", "0.5" },
    { "elapsed", "-1" },  { "mismatched_reads", "-3" }, { "epoch_wall", "nan" }, { "params_1", "12" },
    { "state_bytes", "12" },
  };
  g_autofree char *root = tpt_tmp_dir("tp-robust");
  g_autofree char *dir = make_checkpoint(root);
  g_autofree char *ini = g_build_filename(dir, "checkpoint.ini", NULL);
  g_autofree char *good = NULL;
  g_assert_true(g_file_get_contents(ini, &good, NULL, NULL));
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_assert_true(g_file_set_contents(ini, good, -1, NULL));
    edit_ini(dir, cases[i].key, cases[i].value);
    TptRun r = train((const char *[]){ "-k", "10", "--checkpoint-every", "3", "--resume", dir, NULL });
    g_autofree char *want = g_strdup_printf("%s", cases[i].key);
    g_test_message("%s=%s", cases[i].key, cases[i].value);
    assert_refused(&r, want);
    g_assert_nonnull(strstr(r.err, "checkpoint.ini"));
    tpt_run_clear(&r);
  }
  /* the untouched checkpoint still resumes */
  g_assert_true(g_file_set_contents(ini, good, -1, NULL));
  TptRun r = train((const char *[]){ "-k", "10", "--checkpoint-every", "3", "--resume", dir, NULL });
  g_assert_cmpint(r.status, ==, 0);
  tpt_run_clear(&r);
  tpt_rm_tree(root);
}

/* The program under a shell's `ulimit -v KB`: its status and stderr (skips under a sanitizer, whose
 * shadow memory needs an unlimited address space). */
static TptRun run_limited(const char *kb, const char *cmd)
{
  const char *bin = g_getenv("TP_BIN") ? g_getenv("TP_BIN") : "./timeprest";
  g_autofree char *line = g_strdup_printf("ulimit -v %s && exec %s %s", kb, bin, cmd);
  const char *argv[] = { "/bin/sh", "-c", line, NULL };
  TptRun r = { 0 };
  int wait = 0;
  GError *e = NULL;
  g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &r.out, &r.err, &wait, &e));
  g_assert_no_error(e);
  r.status = WIFEXITED(wait) ? WEXITSTATUS(wait) : 128;
  return r;
}

/* 2. Out of memory by the process's own limit (ulimit -v): refused or failed in one line, never an
 * abort in GLib's allocator. */
static void test_memory_limit(void)
{
  struct {
    const char *cmd, *want;
  } cases[] = {
    { "simulate -w 10 -n 10 -k 900000", "address-space limit" },
    { "train -w 2 -k 2 -m vgg16-imagenet --batch 32 --data synthetic:100 --quiet", "address-space limit" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    TptRun r = run_limited("2000000", cases[i].cmd);
    if (strstr(r.err, "Sanitizer")) {
      g_test_skip("a sanitizer build needs an unlimited address space");
      tpt_run_clear(&r);
      return;
    }
    g_test_message("%s: status %d, stderr: %s", cases[i].cmd, r.status, r.err);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    g_assert_nonnull(strstr(r.err, cases[i].want));
    tpt_run_clear(&r);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/robust/edited-checkpoint", test_edited_checkpoint);
  g_test_add_func("/robust/memory-limit", test_memory_limit);
  return g_test_run();
}
