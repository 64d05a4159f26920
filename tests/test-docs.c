/* test-docs.c — keeps the documentation from drifting away from the program: runs every example
 * README.md and the pages of docs/ mark as runnable and compares what it prints with the text shown, checks
 * every command synopsis of docs/commands.md against the options the command's --help lists, and
 * checks that every relative link resolves to a file of the repository.
 *
 * Markers (docs/testing.md describes them for writers):
 *   <!-- example -->            the next fenced block (```sh) is run by /bin/sh in a scratch
 *   <!-- example needs=X -->    directory holding `timeprest` (the built program), `models` and
 *                               `examples`; the fenced block after it (```text) is what it prints,
 *                               standard error included. A line "…" alone stands for any number of
 *                               lines, "…" inside a line for any text. needs=X (a path, or a
 *                               program looked up in PATH) skips the example where X is missing.
 *   <!-- synopsis: CMD -->      the next fenced block names exactly the options `timeprest CMD
 *                               --help` lists (long and short), no more and no fewer.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  char *where;  /* file:line of the marker */
  char *needs;  /* NULL or what the example needs */
  char *script; /* the ```sh block */
  char *expect; /* the ```text block */
} Example;

typedef struct {
  char *where;
  char *command; /* "train", "plot timeline" */
  char *block;
} Synopsis;

static const char *srcdir;
static GPtrArray *doc_files; /* absolute paths of README.md and docs/'s pages */
static GPtrArray *examples;  /* Example* */
static GPtrArray *synopses;  /* Synopsis* */
static GPtrArray *problems;  /* char*: malformed markers, found while reading */

/* ---- reading the pages ------------------------------------------------------------------------ */

static gboolean is_fence(const char *line, const char **info)
{
  if (!g_str_has_prefix(line, "```"))
    return FALSE;
  if (info)
    *info = line + 3;
  return TRUE;
}

/* The fenced block opening at lines[*i] (after blank lines): its text, *i left after its end. */
static char *fenced_block(char **lines, int *i, const char *want_info, const char *where)
{
  while (lines[*i] && !*lines[*i])
    (*i)++;
  const char *info = NULL;
  if (!lines[*i] || !is_fence(lines[*i], &info) || strcmp(info, want_info) != 0) {
    g_ptr_array_add(problems, g_strdup_printf("%s: expected a ```%s block here", where, want_info));
    return NULL;
  }
  GString *b = g_string_new(NULL);
  for ((*i)++; lines[*i] && !is_fence(lines[*i], NULL); (*i)++)
    g_string_append_printf(b, "%s\n", lines[*i]);
  if (!lines[*i]) {
    g_ptr_array_add(problems, g_strdup_printf("%s: the ```%s block is not closed", where, want_info));
    return g_string_free(b, TRUE), NULL;
  }
  (*i)++;
  return g_string_free(b, FALSE);
}

static void read_page(const char *path)
{
  g_autofree char *text = NULL;
  GError *e = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, &e));
  g_assert_no_error(e);
  g_auto(GStrv) lines = g_strsplit_set(text, "\n", -1);
  g_autofree char *base = g_path_get_basename(path);
  g_autofree char *name = strcmp(base, "README.md") == 0 ? g_strdup(base) : g_build_filename("docs", base, NULL);
  g_autoptr(GRegex) ex = g_regex_new("^<!-- example(?: needs=(\\S+))? -->\\s*$", 0, 0, NULL);
  g_autoptr(GRegex) syn = g_regex_new("^<!-- synopsis: ([a-z][a-z ]*[a-z]) -->\\s*$", 0, 0, NULL);
  gboolean in_fence = FALSE;
  for (int i = 0; lines[i];) {
    if (is_fence(lines[i], NULL)) {
      in_fence = !in_fence;
      i++;
      continue;
    }
    g_autoptr(GMatchInfo) m = NULL, ms = NULL;
    char *where = g_strdup_printf("%s:%d", name, i + 1);
    if (!in_fence && g_regex_match(ex, lines[i], 0, &m)) {
      char *needs = g_match_info_fetch(m, 1);
      i++;
      char *script = fenced_block(lines, &i, "sh", where);
      char *expect = script ? fenced_block(lines, &i, "text", where) : NULL;
      if (script && expect) {
        Example *x = g_new(Example, 1);
        *x = (Example){ .where = where, .needs = needs && *needs ? needs : NULL, .script = script, .expect = expect };
        if (!x->needs)
          g_free(needs);
        g_ptr_array_add(examples, x);
        continue;
      }
      g_free(needs), g_free(script), g_free(expect), g_free(where);
      continue;
    }
    if (!in_fence && g_regex_match(syn, lines[i], 0, &ms)) {
      i++;
      const char *info = NULL;
      if (lines[i] && is_fence(lines[i], &info)) {
        /* any info string: a synopsis is shown as plain text */
        GString *b = g_string_new(NULL);
        for (i++; lines[i] && !is_fence(lines[i], NULL); i++)
          g_string_append_printf(b, "%s\n", lines[i]);
        if (lines[i])
          i++;
        Synopsis *s = g_new(Synopsis, 1);
        *s = (Synopsis){ .where = where, .command = g_match_info_fetch(ms, 1), .block = g_string_free(b, FALSE) };
        g_ptr_array_add(synopses, s);
        continue;
      }
      g_ptr_array_add(problems, g_strdup_printf("%s: a synopsis marker without a fenced block after it", where));
    }
    g_free(where);
    i++;
  }
}

static void find_pages(void)
{
  doc_files = g_ptr_array_new_with_free_func(g_free);
  examples = g_ptr_array_new();
  synopses = g_ptr_array_new();
  problems = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(doc_files, g_build_filename(srcdir, "README.md", NULL));
  g_autofree char *docs = g_build_filename(srcdir, "docs", NULL);
  g_autoptr(GDir) d = g_dir_open(docs, 0, NULL);
  g_assert_nonnull(d);
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  const char *n;
  while ((n = g_dir_read_name(d)))
    if (g_str_has_suffix(n, ".md"))
      g_ptr_array_add(names, g_strdup(n));
  g_ptr_array_sort(names, (GCompareFunc)g_strcmp0);
  for (guint i = 0; i < names->len; i++)
    g_ptr_array_add(doc_files, g_build_filename(docs, *(char **)&names->pdata[i], NULL));
  g_ptr_array_free(names, TRUE);
  for (guint i = 0; i < doc_files->len; i++)
    read_page(doc_files->pdata[i]);
}

/* ---- comparing output ---------------------------------------------------------------------------- */

/* One line of the expected text against one line of output: exact, or "…" as any text. */
static gboolean line_matches(const char *want, const char *got)
{
  if (!strstr(want, "…"))
    return strcmp(want, got) == 0;
  g_auto(GStrv) parts = g_strsplit(want, "…", -1);
  GString *re = g_string_new("^");
  for (int i = 0; parts[i]; i++) {
    g_autofree char *q = g_regex_escape_string(parts[i], -1);
    g_string_append_printf(re, "%s%s", i ? ".*" : "", q);
  }
  g_string_append(re, "$");
  gboolean ok = g_regex_match_simple(re->str, got, 0, 0);
  g_string_free(re, TRUE);
  return ok;
}

/* The expected lines from wi on against the output's lines from gi on; a line "…" alone matches any
 * number of lines (tried shortest first). */
static gboolean lines_match(char **want, int wi, char **got, int gi)
{
  if (!want[wi])
    return !got[gi];
  if (strcmp(want[wi], "…") == 0) {
    for (int k = gi;; k++) {
      if (lines_match(want, wi + 1, got, k))
        return TRUE;
      if (!got[k])
        return FALSE;
    }
  }
  return got[gi] && line_matches(want[wi], got[gi]) && lines_match(want, wi + 1, got, gi + 1);
}

/* Text split into lines without the empty string after a final newline. */
static char **text_lines(const char *text)
{
  g_autofree char *t = g_strdup(text);
  size_t n = strlen(t);
  if (n && t[n - 1] == '\n')
    t[n - 1] = '\0';
  return *t ? g_strsplit_set(t, "\n", -1) : g_new0(char *, 1);
}

static gboolean output_matches(const char *want, const char *got)
{
  g_auto(GStrv) w = text_lines(want);
  g_auto(GStrv) g = text_lines(got);
  return lines_match(w, 0, g, 0);
}

/* The comparison itself, on known texts: exact lines, "…" in a line, "…" for lines. */
static void test_matcher(void)
{
  g_assert_true(output_matches("a\nb\n", "a\nb\n"));
  g_assert_false(output_matches("a\nb\n", "a\nc\n"));
  g_assert_false(output_matches("a\n", "a\nb\n"));
  g_assert_false(output_matches("a\nb\n", "a\n"));
  g_assert_true(output_matches("time 0.… s\n", "time 0.11 s\n"));
  g_assert_false(output_matches("time 0.… s\n", "time 1.11 s\n"));
  g_assert_true(output_matches("a (x) [y] *z*\n", "a (x) [y] *z*\n"));
  g_assert_true(output_matches("a\n…\nz\n", "a\nz\n"));
  g_assert_true(output_matches("a\n…\nz\n", "a\nb\nc\nz\n"));
  g_assert_false(output_matches("a\n…\nz\n", "a\nb\nc\n"));
  g_assert_true(output_matches("…\n", "anything\nat all\n"));
}

/* ---- running examples ---------------------------------------------------------------------------- */

static const char *program(void)
{
  const char *bin = g_getenv("TP_BIN");
  return bin ? bin : "./timeprest";
}

static gboolean have(const char *what)
{
  if (strchr(what, '/'))
    return g_file_test(what, G_FILE_TEST_EXISTS);
  g_autofree char *p = g_find_program_in_path(what);
  return p != NULL;
}

static void run_example(gconstpointer data)
{
  const Example *x = data;
  if (x->needs && !have(x->needs)) {
    g_autofree char *why = g_strdup_printf("%s: needs %s, not here", x->where, x->needs);
    g_test_skip(why);
    return;
  }
  GError *e = NULL;
  g_autofree char *dir = g_dir_make_tmp("tp-docs-XXXXXX", &e);
  g_assert_no_error(e);
  g_autofree char *bin = g_canonicalize_filename(program(), NULL);
  g_autofree char *link = g_build_filename(dir, "timeprest", NULL);
  g_assert_cmpint(symlink(bin, link), ==, 0);
  const char *shared[] = { "models", "examples" };
  for (guint i = 0; i < G_N_ELEMENTS(shared); i++) {
    g_autofree char *from = g_build_filename(srcdir, shared[i], NULL);
    g_autofree char *abs = g_canonicalize_filename(from, NULL);
    g_autofree char *to = g_build_filename(dir, shared[i], NULL);
    g_assert_cmpint(symlink(abs, to), ==, 0);
  }
  g_autofree char *script = g_strdup_printf("exec 2>&1\n%s", x->script);
  const char *argv[] = { "/bin/sh", "-c", script, NULL };
  g_autofree char *out = NULL;
  int wait = 0;
  g_assert_true(g_spawn_sync(dir, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &wait, &e));
  g_assert_no_error(e);
  /* the scratch directory and what the example wrote there */
  const char *argv_rm[] = { "rm", "-rf", dir, NULL };
  g_assert_true(g_spawn_sync(NULL, (char **)argv_rm, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL, &e));
  g_assert_no_error(e);
  if (!output_matches(x->expect, out)) {
    /* the first line that differs, up to the first "…" line */
    g_auto(GStrv) w = text_lines(x->expect);
    g_auto(GStrv) g = text_lines(out);
    int i = 0;
    while (w[i] && g[i] && strcmp(w[i], "…") != 0 && line_matches(w[i], g[i]))
      i++;
    g_test_message("%s: the example's output differs from the text shown (first at its line %d: '%s' printed as "
                   "'%s').\n--- shown:\n%s--- printed:\n%s---",
                   x->where, i + 1, w[i] ? w[i] : "(end)", g[i] ? g[i] : "(end)", x->expect, out);
    g_test_fail();
  }
}

/* ---- synopses against --help ------------------------------------------------------------------ */

/* Every option the text names: "--long" and "-s", as a set of "--long" / "-s" strings. */
static GHashTable *options_in(const char *text, gboolean help)
{
  GHashTable *set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  /* in --help, an option's line starts with it; in a synopsis, options stand anywhere */
  const char *pat = help ? "^\\s+(?:-([A-Za-z0-9]), )?--([a-z0-9][a-z0-9-]*)"
                         : "(?<![\\w-])(?:-([A-Za-z0-9])|--([a-z0-9][a-z0-9-]*))(?![\\w])";
  g_autoptr(GRegex) re = g_regex_new(pat, G_REGEX_MULTILINE, 0, NULL);
  g_autoptr(GMatchInfo) m = NULL;
  g_regex_match(re, text, 0, &m);
  for (; g_match_info_matches(m); g_match_info_next(m, NULL)) {
    g_autofree char *s = g_match_info_fetch(m, 1);
    g_autofree char *l = g_match_info_fetch(m, 2);
    if (help && l && g_str_has_prefix(l, "help"))
      continue; /* --help and -h go without saying */
    if (s && *s)
      g_hash_table_add(set, g_strdup_printf("-%s", s));
    if (l && *l)
      g_hash_table_add(set, g_strdup_printf("--%s", l));
  }
  return set;
}

static char *help_of(const char *command)
{
  g_autofree char *cmdline = g_strdup_printf("%s --help", command);
  g_auto(GStrv) words = g_strsplit(cmdline, " ", -1);
  GPtrArray *argv = g_ptr_array_new();
  g_ptr_array_add(argv, (char *)program());
  for (int i = 0; words[i]; i++)
    if (*words[i])
      g_ptr_array_add(argv, words[i]);
  g_ptr_array_add(argv, NULL);
  char *out = NULL;
  int wait = 0;
  GError *e = NULL;
  g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &wait, &e));
  g_assert_no_error(e);
  g_ptr_array_free(argv, TRUE);
  g_assert_true(WIFEXITED(wait) && WEXITSTATUS(wait) == 0);
  return out;
}

static void check_synopsis(gconstpointer data)
{
  const Synopsis *s = data;
  g_autofree char *help = help_of(s->command);
  g_autoptr(GHashTable) listed = options_in(help, TRUE);
  g_autoptr(GHashTable) shown = options_in(s->block, FALSE);
  g_assert_cmpuint(g_hash_table_size(listed), >, 0);
  GString *bad = g_string_new(NULL);
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, listed);
  while (g_hash_table_iter_next(&it, &k, NULL))
    if (!g_hash_table_contains(shown, k))
      g_string_append_printf(bad, " %s (in --help, not in the synopsis)", (char *)k);
  g_hash_table_iter_init(&it, shown);
  while (g_hash_table_iter_next(&it, &k, NULL))
    if (!g_hash_table_contains(listed, k))
      g_string_append_printf(bad, " %s (in the synopsis, not in --help)", (char *)k);
  if (bad->len) {
    g_test_message("%s: timeprest %s:%s", s->where, s->command, bad->str);
    g_test_fail();
  }
  g_string_free(bad, TRUE);
}

/* The names a --help lists under its heading ("Commands:", "Kinds:"), up to the next blank line. */
static GPtrArray *names_under(const char *help, const char *heading)
{
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  g_auto(GStrv) lines = g_strsplit_set(help, "\n", -1);
  int i = 0;
  while (lines[i] && strcmp(lines[i], heading) != 0)
    i++;
  for (i = lines[i] ? i + 1 : i; lines[i] && *lines[i]; i++) {
    g_auto(GStrv) w = g_strsplit_set(g_strstrip(lines[i]), " ", 2);
    g_ptr_array_add(names, g_strdup(w[0]));
  }
  return names;
}

static gboolean has_synopsis(const char *command)
{
  for (guint i = 0; i < synopses->len; i++)
    if (strcmp(((Synopsis *)synopses->pdata[i])->command, command) == 0)
      return TRUE;
  return FALSE;
}

/* Every command `timeprest --help` lists, and every kind `timeprest plot --help` lists, has a
 * synopsis in docs/commands.md. */
static void test_every_command(void)
{
  g_autofree char *help = help_of("");
  g_autoptr(GPtrArray) commands = names_under(help, "Commands:");
  g_assert_cmpuint(commands->len, >=, 6);
  for (guint i = 0; i < commands->len; i++) {
    const char *c = commands->pdata[i];
    g_autofree char *sub_help = help_of(c);
    g_autoptr(GPtrArray) kinds = names_under(sub_help, "Kinds:");
    for (guint k = 0; k < kinds->len; k++) {
      g_autofree char *ck = g_strdup_printf("%s %s", c, (char *)kinds->pdata[k]);
      if (!has_synopsis(ck)) {
        g_test_message("timeprest %s has no synopsis in docs/commands.md", ck);
        g_test_fail();
      }
    }
    if (!kinds->len && !has_synopsis(c)) {
      g_test_message("timeprest %s has no synopsis in docs/commands.md", c);
      g_test_fail();
    }
  }
}

/* ---- links -------------------------------------------------------------------------------------- */

/* GitHub's anchor of a heading: lower case, letters, digits, '-' and '_' kept, spaces as '-'. */
static char *anchor_of(const char *heading)
{
  GString *a = g_string_new(NULL);
  for (const char *p = heading; *p; p = g_utf8_next_char(p)) {
    gunichar c = g_utf8_get_char(p);
    if (c == ' ')
      g_string_append_c(a, '-');
    else if (c == '-' || c == '_' || g_unichar_isalnum(c))
      g_string_append_unichar(a, g_unichar_tolower(c));
  }
  return g_string_free(a, FALSE);
}

static gboolean has_anchor(const char *path, const char *anchor)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return FALSE;
  g_auto(GStrv) lines = g_strsplit_set(text, "\n", -1);
  gboolean in_fence = FALSE;
  for (int i = 0; lines[i]; i++) {
    if (is_fence(lines[i], NULL))
      in_fence = !in_fence;
    if (in_fence || lines[i][0] != '#')
      continue;
    const char *h = lines[i] + strspn(lines[i], "#");
    g_autofree char *title = g_strstrip(g_strdup(h));
    g_autofree char *a = anchor_of(title);
    if (strcmp(a, anchor) == 0)
      return TRUE;
  }
  return FALSE;
}

/* What is wrong with link target in page (NULL when it resolves inside the repository). */
static char *link_problem(const char *page, const char *target, const char *root)
{
  if (g_regex_match_simple("^(https?|mailto):", target, 0, 0))
    return NULL;
  if (g_regex_match_simple("^[a-zA-Z][a-zA-Z0-9+.-]*:", target, 0, 0) || target[0] == '/')
    return g_strdup("not a relative link");
  g_auto(GStrv) pf = g_strsplit(target, "#", 2);
  g_autofree char *dir = g_path_get_dirname(page);
  g_autofree char *path = *pf[0] ? g_canonicalize_filename(pf[0], dir) : g_strdup(page);
  g_autofree char *prefix = g_strconcat(root, "/", NULL);
  if (!g_str_has_prefix(path, prefix))
    return g_strdup("leaves the repository");
  if (!g_file_test(path, G_FILE_TEST_EXISTS))
    return g_strdup("no such file");
  if (pf[1] && g_str_has_suffix(path, ".md") && !has_anchor(path, pf[1]))
    return g_strdup("no such heading");
  return NULL;
}

static void test_links(void)
{
  g_autofree char *root = g_canonicalize_filename(srcdir, NULL);
  g_autoptr(GRegex) inline_link = g_regex_new("!?\\[[^\\]]*\\]\\(([^)\\s]+)(?:\\s+\"[^\"]*\")?\\)", 0, 0, NULL);
  g_autoptr(GRegex) ref_link = g_regex_new("^\\s*\\[[^\\]]+\\]:\\s*(\\S+)", 0, 0, NULL);
  g_autoptr(GRegex) code = g_regex_new("`[^`]*`", 0, 0, NULL);
  int links = 0;
  for (guint f = 0; f < doc_files->len; f++) {
    const char *page = doc_files->pdata[f];
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(page, &text, NULL, NULL));
    g_auto(GStrv) lines = g_strsplit_set(text, "\n", -1);
    gboolean in_fence = FALSE;
    for (int i = 0; lines[i]; i++) {
      if (is_fence(lines[i], NULL))
        in_fence = !in_fence;
      if (in_fence)
        continue;
      g_autofree char *plain = g_regex_replace_literal(code, lines[i], -1, 0, "", 0, NULL);
      GRegex *res[] = { inline_link, ref_link };
      for (guint r = 0; r < G_N_ELEMENTS(res); r++) {
        g_autoptr(GMatchInfo) m = NULL;
        g_regex_match(res[r], plain, 0, &m);
        for (; g_match_info_matches(m); g_match_info_next(m, NULL)) {
          g_autofree char *target = g_match_info_fetch(m, 1);
          g_autofree char *why = link_problem(page, target, root);
          links++;
          if (why) {
            g_test_message("%s:%d: link %s: %s", page + strlen(root) + 1, i + 1, target, why);
            g_test_fail();
          }
        }
      }
    }
  }
  g_assert_cmpint(links, >, 10);
}

/* What the link check refuses, on made-up targets. */
static void test_link_rules(void)
{
  g_autofree char *root = g_canonicalize_filename(srcdir, NULL);
  g_autofree char *readme = g_build_filename(root, "README.md", NULL);
  g_autofree char *docs = g_build_filename(root, "docs", "commands.md", NULL);
  const char *good[] = { "docs/commands.md", "https://example.org/x", "bench/RESULTS.md", "#timeprest" };
  for (guint i = 0; i < G_N_ELEMENTS(good); i++) {
    g_autofree char *why = link_problem(readme, good[i], root);
    g_assert_null(why);
  }
  const char *bad[] = { "../shared/SPEC.md", "docs/no-such-page.md", "/etc/passwd", "file:///etc/passwd",
                        "docs/../../x", "#no-such-heading" };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *why = link_problem(readme, bad[i], root);
    g_assert_nonnull(why);
  }
  g_autofree char *up = link_problem(docs, "../README.md", root);
  g_assert_null(up);
  g_autofree char *out = link_problem(docs, "../../README.md", root);
  g_assert_nonnull(out);
}

static void test_markers(void)
{
  for (guint i = 0; i < problems->len; i++)
    g_test_message("%s", (char *)problems->pdata[i]);
  g_assert_cmpuint(problems->len, ==, 0);
  /* the README's tour and the command reference hold examples and synopses */
  g_assert_cmpuint(examples->len, >=, 6);
  g_assert_cmpuint(synopses->len, >=, 6);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  srcdir = g_getenv("TP_SRCDIR");
  if (!srcdir)
    srcdir = ".";
  find_pages();
  g_test_add_func("/docs/matcher", test_matcher);
  g_test_add_func("/docs/markers", test_markers);
  g_test_add_func("/docs/link-rules", test_link_rules);
  g_test_add_func("/docs/links", test_links);
  g_test_add_func("/docs/every-command", test_every_command);
  for (guint i = 0; i < synopses->len; i++) {
    const Synopsis *s = synopses->pdata[i];
    g_autofree char *path = g_strdup_printf("/docs/synopsis/%s", s->command);
    g_strdelimit(path + 6, " ", '-');
    g_test_add_data_func(path, s, check_synopsis);
  }
  for (guint i = 0; i < examples->len; i++) {
    const Example *x = examples->pdata[i];
    g_autofree char *path = g_strdup_printf("/docs/example/%s", x->where);
    g_strdelimit(path + 14, "/:", '-');
    g_test_add_data_func(path, x, run_example);
  }
  return g_test_run();
}
