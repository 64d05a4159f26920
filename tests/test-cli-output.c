/* test-cli-output.c — how the program writes its files: devices and FIFOs in place, links followed,
 * modes kept, all of a command's outputs or none, temporaries removed on signals; outputs that
 * cannot be written refused before any work (as root, and as nobody for what that user may not
 * write). */
#define _XOPEN_SOURCE 700 /* mknod, S_IFCHR */
#include "tp_test.h"

#include <glib/gstdio.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/types.h>
#include <unistd.h>


static int compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir, sorted, joined by commas. */
static char *dir_listing(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  g_assert_nonnull(d);
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  const char *name;
  while ((name = g_dir_read_name(d)))
    g_ptr_array_add(names, g_strdup(name));
  g_dir_close(d);
  g_ptr_array_sort(names, compare_names);
  g_ptr_array_add(names, NULL);
  char *joined = g_strjoinv(",", (char **)names->pdata);
  g_ptr_array_free(names, TRUE);
  return joined;
}

static void remove_dir(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name(d))) {
    g_autofree char *f = g_build_filename(dir, name, NULL);
    g_unlink(f);
  }
  if (d)
    g_dir_close(d);
  g_assert_cmpint(g_rmdir(dir), ==, 0);
}

static char *read_text(const char *path)
{
  char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  return text;
}

/* -o on a character device writes into it and leaves the node (a private null device, not /dev/null). */
static void test_output_device(void)
{
  g_autofree char *dir = g_dir_make_tmp("tp-out-XXXXXX", NULL);
  g_autofree char *dev = g_build_filename(dir, "null", NULL);
  if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) != 0) {
    g_test_skip("cannot make a device node (not root)");
    remove_dir(dir);
    return;
  }
  TptRun r = tpt_run((const char *const[]){ "simulate", "-w", "3", "-n", "2", "--csv", dev, "-o", dev, NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpstr(r.out, ==, "");
  struct stat st;
  g_assert_cmpint(lstat(dev, &st), ==, 0);
  g_assert_true(S_ISCHR(st.st_mode));
  g_assert_cmpint(major(st.st_rdev), ==, 1);
  g_autofree char *names = dir_listing(dir);
  g_assert_cmpstr(names, ==, "null");
  tpt_run_clear(&r);
  remove_dir(dir);
  /* the controlling terminal where there is none (a new session): refused before the work */
  g_autofree char *setsid = g_find_program_in_path("setsid");
  if (setsid && g_file_test("/dev/tty", G_FILE_TEST_EXISTS)) {
    r = tpt_run_shell("setsid -w \"$TP\" simulate -w 2 -o /dev/tty");
    g_test_message("setsid simulate -o /dev/tty: %d %s", r.status, r.err);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_nonnull(strstr(r.err, "-o: cannot write '/dev/tty': "));
    g_assert_cmpint(tpt_lines(r.err), ==, 1);
    tpt_run_clear(&r);
  }
}

/* -o through a symbolic link replaces the file it names and keeps the link; a dangling link creates
 * its file; an existing file keeps its mode; a new file gets 0666 less the umask. */
static void test_output_links_and_modes(void)
{
  g_autofree char *dir = g_dir_make_tmp("tp-out-XXXXXX", NULL);
  g_autofree char *file = g_build_filename(dir, "sched.txt", NULL);
  g_autofree char *link = g_build_filename(dir, "link", NULL);
  g_autofree char *dangling = g_build_filename(dir, "dangling", NULL);
  g_autofree char *made = g_build_filename(dir, "made.txt", NULL);
  g_autofree char *fresh = g_build_filename(dir, "fresh.txt", NULL);
  g_assert_true(g_file_set_contents(file, "old\n", -1, NULL));
  g_assert_cmpint(g_chmod(file, 0640), ==, 0);
  g_assert_cmpint(symlink("sched.txt", link), ==, 0);
  g_assert_cmpint(symlink("made.txt", dangling), ==, 0);
  TptRun want = tpt_run((const char *const[]){ "schedule", "-w", "3", "-n", "2", NULL });
  g_assert_cmpint(want.status, ==, 0);
  const char *targets[] = { link, dangling, fresh };
  for (guint i = 0; i < G_N_ELEMENTS(targets); i++) {
    TptRun r = tpt_run((const char *const[]){ "schedule", "-w", "3", "-n", "2", "-o", targets[i], NULL });
    g_assert_cmpint(r.status, ==, 0);
    tpt_run_clear(&r);
  }
  struct stat st;
  g_assert_cmpint(lstat(link, &st), ==, 0);
  g_assert_true(S_ISLNK(st.st_mode));
  g_assert_cmpint(lstat(dangling, &st), ==, 0);
  g_assert_true(S_ISLNK(st.st_mode));
  g_assert_cmpint(stat(file, &st), ==, 0);
  g_assert_cmpint(st.st_mode & 07777, ==, 0640);
  mode_t mask = umask(0);
  umask(mask);
  g_assert_cmpint(stat(fresh, &st), ==, 0);
  g_assert_cmpint(st.st_mode & 07777, ==, 0666 & ~mask);
  const char *written[] = { file, made, fresh };
  for (guint i = 0; i < G_N_ELEMENTS(written); i++) {
    g_autofree char *text = read_text(written[i]);
    g_assert_cmpstr(text, ==, want.out);
  }
  g_autofree char *names = dir_listing(dir);
  g_assert_cmpstr(names, ==, "dangling,fresh.txt,link,made.txt,sched.txt");
  tpt_run_clear(&want);
  remove_dir(dir);
}

/* A write that fails is a runtime failure (exit 1, one line naming the user's file), and the
 * command's other outputs are not written either: existing ones keep their bytes, no temporaries.
 * One that cannot succeed is refused before the work. */
static void test_output_all_or_nothing(void)
{
  g_autofree char *dir = g_dir_make_tmp("tp-out-XXXXXX", NULL);
  g_autofree char *csv = g_build_filename(dir, "events.csv", NULL);
  g_autofree char *trace = g_build_filename(dir, "trace.json", NULL);
  g_assert_true(g_file_set_contents(csv, "keep\n", -1, NULL));
  /* a place that passes the checks before the work and fails at the write: a full device */
  const char *reports[] = { "/dev/full" };
  for (guint i = 0; i < G_N_ELEMENTS(reports); i++) {
    if (!g_file_test(reports[i], G_FILE_TEST_EXISTS))
      continue;
    TptRun r = tpt_run((const char *const[]){ "simulate", "-w", "3", "-n", "2", "--csv", csv, "--trace", trace, "-o",
                                              reports[i], "--format", "json", NULL });
    g_autofree char *want = g_strdup_printf("cannot write %s: ", reports[i]);
    if (r.status != 1 || tpt_lines(r.err) != 1 || !strstr(r.err, want))
      g_error("-o %s: status %d, stderr '%s' (wanted status 1 and '%s')", reports[i], r.status, r.err, want);
    g_assert_cmpstr(r.out, ==, "");
    g_autofree char *names = dir_listing(dir);
    g_assert_cmpstr(names, ==, "events.csv");
    g_autofree char *kept = read_text(csv);
    g_assert_cmpstr(kept, ==, "keep\n");
    tpt_run_clear(&r);
  }
  /* an output the checks can tell will fail is refused before any work: exit 2, one line naming
   * the flag, the file and why — no such directory, a file where the directory should be, a
   * directory, a dangling link into a missing directory, a loop of links, a socket, a directory
   * that takes no new file (/proc, whatever access() says), a name too long for its temporary */
  g_autofree char *missing = g_build_filename(dir, "no-such-dir", "report.json", NULL);
  g_autofree char *under_file = g_build_filename(csv, "report.json", NULL);
  g_autofree char *dangling = g_build_filename(dir, "dangling", NULL), *loop = g_build_filename(dir, "loop", NULL);
  g_autofree char *sock = g_build_filename(dir, "sock", NULL);
  g_assert_cmpint(symlink(missing, dangling), ==, 0);
  g_assert_cmpint(symlink("loop", loop), ==, 0);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  g_assert_cmpuint(strlen(sock), <, sizeof addr.sun_path);
  strcpy(addr.sun_path, sock);
  g_assert_cmpint(bind(fd, (struct sockaddr *)&addr, sizeof addr), ==, 0);
  g_autofree char *missing_png = g_build_filename(dir, "no-such-dir", "v.png", NULL);
  g_autofree char *long_name = g_strnfill(250, 'a'), *too_long = g_build_filename(dir, long_name, NULL);
  const char *refused[] = { missing_png, missing, under_file, dir, dangling, loop, sock,
                            "/proc/tp-never-written.json", too_long };
  const char *why[] = { "No such file or directory", "No such file or directory", "Not a directory",
                        "it is a directory", "no-such-dir': No such file or directory",
                        "Too many levels of symbolic links", "not a file, character device or FIFO",
                        "no new file can be made in '/proc'", "File name too long" };
  for (guint i = 0; i < G_N_ELEMENTS(refused); i++) {
    const char *const *args = i == 0 ? (const char *const[]){ "plot", "vmap", "-w", "2-3", "-n", "2-3", "-o", missing_png, NULL }
                                     : (const char *const[]){ "simulate", "-w", "3", "-n", "2", "--csv", csv, "--trace",
                                                              trace, "-o", refused[i], "--format", "json", NULL };
    TptRun r = tpt_run(args);
    g_autofree char *q = g_strdup_printf("-o: cannot write '%.30s", refused[i]); /* long names are cut */
    if (r.status != 2 || tpt_lines(r.err) != 1 || !strstr(r.err, q) || !strstr(r.err, why[i]))
      g_error("-o %s: status %d, stderr '%s' (wanted status 2, '%s' and '%s')", refused[i], r.status, r.err, q, why[i]);
    g_assert_cmpstr(r.out, ==, "");
    g_autofree char *names = dir_listing(dir);
    g_assert_cmpstr(names, ==, "dangling,events.csv,loop,sock");
    tpt_run_clear(&r);
  }
  /* a command every rank of a launcher runs for itself checks on every rank (only train and
   * profile --transport mpi leave the outputs to rank 0) */
  g_setenv("PMI_RANK", "1", TRUE);
  TptRun ranked = tpt_run((const char *const[]){ "simulate", "-w", "3", "-n", "2", "-o", missing, NULL });
  g_unsetenv("PMI_RANK");
  g_test_message("PMI_RANK=1 simulate -o %s: %s", missing, ranked.err);
  g_assert_cmpint(ranked.status, ==, 2);
  tpt_run_clear(&ranked);
  close(fd);
  g_unlink(sock), g_unlink(loop), g_unlink(dangling);
  /* a failing standard output takes the files with it too */
  if (g_file_test("/dev/full", G_FILE_TEST_EXISTS)) {
    const char *bin = g_getenv("TP_BIN") ? g_getenv("TP_BIN") : "./timeprest";
    g_autofree char *cmd = g_strdup_printf("sh -c \"'%s' simulate -w 3 -n 2 --trace '%s' > /dev/full\"", bin, trace);
    int wait = 0;
    g_autofree char *out = NULL, *errs = NULL;
    g_assert_true(g_spawn_command_line_sync(cmd, &out, &errs, &wait, NULL));
    g_assert_true(WIFEXITED(wait) && WEXITSTATUS(wait) == 1);
    g_assert_nonnull(strstr(errs, "cannot write to standard output"));
    g_autofree char *names = dir_listing(dir);
    g_assert_cmpstr(names, ==, "events.csv");
  }
  remove_dir(dir);
}

/* As another user (root runs the tests: setpriv to nobody), a FIFO and a directory that user may
 * not write, and root's file in a sticky directory, are refused before any work. */
static void test_output_not_writable(void)
{
  g_autofree char *setpriv = g_find_program_in_path("setpriv");
  if (geteuid() != 0 || !setpriv) {
    g_test_skip("needs root and setpriv to run the program as another user");
    return;
  }
  g_autofree char *dir = g_dir_make_tmp("tp-out-XXXXXX", NULL);
  g_assert_cmpint(chmod(dir, 0755), ==, 0);
  g_autofree char *fifo = g_build_filename(dir, "fifo", NULL), *report = g_build_filename(dir, "r.json", NULL);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  const char *bin = g_getenv("TP_BIN") ? g_getenv("TP_BIN") : "./timeprest";
  g_autofree char *abs = g_canonicalize_filename(bin, NULL);
  /* another user's file in a sticky directory (as in /tmp): writable, but not replaceable by a rename */
  g_autofree char *sticky = g_build_filename(dir, "sticky", NULL), *theirs = g_build_filename(sticky, "r.json", NULL);
  g_assert_cmpint(g_mkdir(sticky, 0777), ==, 0);
  g_assert_cmpint(chmod(sticky, 01777), ==, 0);
  g_assert_true(g_file_set_contents(theirs, "root's\n", -1, NULL));
  g_assert_cmpint(chmod(theirs, 0666), ==, 0);
  const char *outs[] = { fifo, report, theirs };
  const char *why[] = { "Permission denied", "Permission denied", "sticky directory" };
  for (guint i = 0; i < G_N_ELEMENTS(outs); i++) {
    const char *argv[] = { setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", abs, "simulate", "-w", "2",
                           "-o", outs[i], NULL };
    g_autofree char *out = NULL, *errs = NULL;
    int wait = 0;
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errs, &wait, NULL));
    int status = WIFEXITED(wait) ? WEXITSTATUS(wait) : 128;
    g_test_message("as nobody, -o %s: status %d, %s", outs[i], status, errs);
    if (status == 126 || status == 127 || strstr(errs, "setpriv:")) {
      g_test_skip("the program cannot be run as nobody here");
      break;
    }
    g_assert_cmpint(status, ==, 2);
    g_assert_nonnull(strstr(errs, why[i]));
    g_assert_cmpint(tpt_lines(errs), ==, 1);
  }
  g_assert_false(g_file_test(report, G_FILE_TEST_EXISTS));
  g_autofree char *kept = read_text(theirs), *names = dir_listing(sticky);
  g_assert_cmpstr(kept, ==, "root's\n");
  g_assert_cmpstr(names, ==, "r.json");
  /* what decides is the kernel's rule, not the user: nobody holding CAP_FOWNER replaces root's file;
   * root without it replaces nobody's in its own directory (keeping nobody as the owner) and is
   * refused daemon's in nobody's */
  g_autofree char *nobodys = g_build_filename(sticky, "n.json", NULL);
  g_autofree char *other = g_build_filename(dir, "other", NULL), *daemons = g_build_filename(other, "d.json", NULL);
  g_assert_cmpint(g_mkdir(other, 0777), ==, 0);
  g_assert_cmpint(chmod(other, 01777), ==, 0);
  g_assert_cmpint(chown(other, 65534, 65534), ==, 0);
  g_assert_true(g_file_set_contents(nobodys, "nobody's\n", -1, NULL));
  g_assert_cmpint(chown(nobodys, 65534, 65534), ==, 0);
  g_assert_true(g_file_set_contents(daemons, "daemon's\n", -1, NULL));
  g_assert_cmpint(chown(daemons, 1, 1), ==, 0);
  const char *with_cap[] = { setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=+fowner",
                             "--ambient-caps=+fowner", abs, "simulate", "-w", "2", "-o", theirs, NULL };
  const char *own_dir[] = { setpriv, "--bounding-set=-fowner", abs, "simulate", "-w", "2", "-o", nobodys, NULL };
  const char *refused[] = { setpriv, "--bounding-set=-fowner", abs, "simulate", "-w", "2", "-o", daemons, NULL };
  const char *const *cap_runs[] = { with_cap, own_dir, refused };
  const char *targets[] = { theirs, nobodys, daemons };
  for (guint i = 0; i < G_N_ELEMENTS(cap_runs); i++) {
    g_autofree char *out = NULL, *errs = NULL;
    int wait = 0;
    g_assert_true(g_spawn_sync(NULL, (char **)cap_runs[i], NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errs, &wait, NULL));
    int status = WIFEXITED(wait) ? WEXITSTATUS(wait) : 128;
    g_test_message("CAP_FOWNER case %u, -o %s: status %d, %s", i, targets[i], status, errs);
    if (status == 126 || status == 127 || strstr(errs, "setpriv:"))
      continue; /* capabilities cannot be set here */
    g_autofree char *after = read_text(targets[i]);
    if (i < 2) {
      g_assert_cmpint(status, ==, 0);
      g_assert_true(g_str_has_prefix(after, "schedule"));
    } else {
      g_assert_cmpint(status, ==, 2);
      g_assert_nonnull(strstr(errs, "sticky directory"));
      g_assert_cmpstr(after, ==, "daemon's\n");
    }
  }
  /* the effective user decides, as for the write: root's FIFO refused to nobody as effective user only */
  const char *euid[] = { setpriv, "--euid=65534", "--egid=65534", "--clear-groups", abs, "simulate", "-w", "2", "-o",
                         fifo, NULL };
  g_autofree char *eout = NULL, *eerrs = NULL;
  int ewait = 0;
  g_assert_true(g_spawn_sync(NULL, (char **)euid, NULL, G_SPAWN_DEFAULT, NULL, NULL, &eout, &eerrs, &ewait, NULL));
  g_test_message("effective user nobody, -o %s: %s", fifo, eerrs);
  if (!strstr(eerrs, "setpriv:")) {
#ifdef __SANITIZE_ADDRESS__
    /* with the real and effective ids apart the process runs in secure mode, where LeakSanitizer
     * cannot run at its exit and ends it with status 1 after the refusal */
    g_assert_true(WIFEXITED(ewait) && WEXITSTATUS(ewait) != 0);
#else
    g_assert_true(WIFEXITED(ewait) && WEXITSTATUS(ewait) == 2);
#endif
    g_assert_nonnull(strstr(eerrs, "-o: cannot write"));
    g_assert_nonnull(strstr(eerrs, "Permission denied"));
  }
  GStatBuf st;
  g_assert_cmpint(g_stat(nobodys, &st), ==, 0);
  g_assert_cmpint(st.st_uid, ==, 65534);
  g_unlink(daemons);
  g_rmdir(other);
  g_unlink(nobodys);
  g_unlink(theirs);
  g_rmdir(sticky);
  g_unlink(fifo);
  g_rmdir(dir);
}

static void default_signals(gpointer data)
{
  (void)data;
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
}

/* A signal while outputs are staged removes the temporaries and ends the program by that signal.
 * The report goes to a FIFO nobody reads, so the program waits there with both files staged. */
static void test_output_signal(void)
{
  const int sigs[] = { SIGTERM, SIGINT };
  for (guint i = 0; i < G_N_ELEMENTS(sigs); i++) {
    g_autofree char *dir = g_dir_make_tmp("tp-out-XXXXXX", NULL);
    g_autofree char *fifo = g_build_filename(dir, "report", NULL);
    g_autofree char *csv = g_build_filename(dir, "events.csv", NULL);
    g_autofree char *trace = g_build_filename(dir, "trace.json", NULL);
    g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
    const char *bin = g_getenv("TP_BIN") ? g_getenv("TP_BIN") : "./timeprest";
    const char *argv[] = { bin, "simulate", "-w", "4", "-n", "4", "-k", "200", "--csv", csv, "--trace", trace,
                           "-o", fifo, NULL };
    GPid pid;
    GError *e = NULL;
    g_assert_true(g_spawn_async(NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL |
                                G_SPAWN_STDERR_TO_DEV_NULL, default_signals, NULL, &pid, &e));
    g_assert_no_error(e);
    int entries = 0;
    for (int tries = 0; tries < 3000 && entries < 3; tries++) { /* both temporaries beside the FIFO: 30 s at most */
      g_usleep(10000);
      g_autofree char *names = dir_listing(dir);
      entries = 1;
      for (const char *c = names; *c; c++)
        entries += *c == ',';
    }
    g_autofree char *staged = dir_listing(dir);
    g_assert_true(g_str_has_prefix(staged, "events.csv.") && strstr(staged, ",trace.json."));
    kill(pid, entries == 3 ? sigs[i] : SIGKILL);
    int wait = 0;
    g_assert_cmpint(waitpid(pid, &wait, 0), ==, pid);
    g_spawn_close_pid(pid);
    g_assert_cmpint(entries, ==, 3);
    g_assert_true(WIFSIGNALED(wait));
    g_assert_cmpint(WTERMSIG(wait), ==, sigs[i]);
    g_autofree char *names = dir_listing(dir);
    g_assert_cmpstr(names, ==, "report");
    remove_dir(dir);
  }
}


/* Standard output takes one output, by any of its names (-, /dev/stdout, /proc/self/fd/1), and so does a
 * FIFO: a second one (the report, where no -o names a file) is refused before the work, naming both
 * flags; with the report sent elsewhere the events alone are printed. */
static void test_output_one_standard_output(void)
{
  g_autofree char *dir = g_dir_make_tmp("tp-out-XXXXXX", NULL), *fifo = g_build_filename(dir, "fifo", NULL);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  const char *const *twice[] = {
    (const char *const[]){ "simulate", "-w", "3", "-n", "2", "--csv", "-", NULL },
    (const char *const[]){ "simulate", "-w", "3", "-n", "2", "--csv", "-", "--trace", "-", "-o", "/dev/null", NULL },
    (const char *const[]){ "train", "-w", "2", "-k", "2", "--data", "synthetic", "--csv", "-", NULL },
    /* other names of standard output (a pipe here), and a FIFO named twice */
    (const char *const[]){ "simulate", "-w", "3", "-n", "2", "--csv", "/dev/stdout", "-o", "-", NULL },
    (const char *const[]){ "simulate", "-w", "3", "-n", "2", "--csv", "/proc/self/fd/1", NULL },
    (const char *const[]){ "simulate", "-w", "3", "-n", "2", "--csv", fifo, "--trace", fifo, "-o", "/dev/null", NULL },
  };
  const char *flags[] = { "--csv and the report (no -o): both go to standard output",
                          "--csv and --trace: both go to standard output",
                          "--csv and the report (no -o): both go to standard output",
                          "--csv '/dev/stdout' and -o: both go to standard output",
                          "--csv '/proc/self/fd/1' and the report (no -o): both go to standard output",
                          "--csv and --trace: both name" };
  for (guint i = 0; i < G_N_ELEMENTS(twice); i++) {
    TptRun r = tpt_run(twice[i]);
    if (r.status != 2 || tpt_lines(r.err) != 1 || !strstr(r.err, flags[i]))
      g_error("case %u: status %d, stderr '%s' (wanted status 2 and '%s')", i, r.status, r.err, flags[i]);
    g_assert_cmpstr(r.out, ==, "");
    tpt_run_clear(&r);
  }
  TptRun r = tpt_run((const char *const[]){ "simulate", "-w", "3", "-n", "2", "--csv", "-", "-o", "/dev/null", NULL });
  g_assert_cmpint(r.status, ==, 0);
  g_assert_true(g_str_has_prefix(r.out, "# timeprest-events"));
  g_assert_null(strstr(r.out, "bubble")); /* no report after the events */
  tpt_run_clear(&r);
  g_unlink(fifo);
  g_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cli/output/device", test_output_device);
  g_test_add_func("/cli/output/links-and-modes", test_output_links_and_modes);
  g_test_add_func("/cli/output/all-or-nothing", test_output_all_or_nothing);
  g_test_add_func("/cli/output/signal", test_output_signal);
  g_test_add_func("/cli/output/not-writable", test_output_not_writable);
  g_test_add_func("/cli/output/one-standard-output", test_output_one_standard_output);
  return g_test_run();
}
