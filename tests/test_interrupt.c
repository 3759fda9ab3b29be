/* interrupt.c: a signal ends an unpolled process by that signal, removing the temporary file a
 * write registered; a polled one only records the first signal (the file stays) and is ended by
 * the second; a write that finished unregisters its file. Each case in a child process. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/interrupt.h"
#include "core/tensorfile.h"

static char dir[] = "/tmp/pf_interrupt_XXXXXX";

static void touch(const char *p) {
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs("x", f);
  fclose(f);
}
static int exists(const char *p) { return access(p, F_OK) == 0; }

/* runs body in a child; its wait status */
static int in_child(void (*body)(const char *), const char *p) {
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    body(p);
    _exit(0);
  }
  int ws;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  return ws;
}

static void unpolled(const char *p) {
  pf_interrupt_install();
  pf_interrupt_tmp(p);
  raise(SIGINT);
  _exit(3); /* not reached: the signal ends it */
}
static void polled(const char *p) {
  pf_interrupt_install();
  pf_interrupt_polled(1);
  pf_interrupt_tmp(p);
  raise(SIGTERM);
  if (pf_interrupted() != SIGTERM || !exists(p)) _exit(4);
  raise(SIGINT); /* the second ends it */
  _exit(5);
}
static void after_write(const char *p) {
  pf_interrupt_install();
  char out[256];
  snprintf(out, sizeof out, "%s.done", p);
  if (pf_write_file_atomic(out, "abc", 3) != PF_OK) _exit(6);
  touch(p); /* a file of the same name as nothing registered */
  raise(SIGINT);
  _exit(7);
}

static void test_interrupt(void **state) {
  (void)state;
  assert_non_null(mkdtemp(dir));
  char p[256];
  snprintf(p, sizeof p, "%s/results.json.tmp.abc123", dir);

  touch(p);
  int ws = in_child(unpolled, p);
  assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGINT);
  assert_false(exists(p));

  touch(p);
  ws = in_child(polled, p);
  assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGINT);
  assert_false(exists(p));

  ws = in_child(after_write, p);
  assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGINT);
  assert_true(exists(p)); /* the finished write unregistered its temporary file */
  char done[300];
  snprintf(done, sizeof done, "%s.done", p);
  assert_true(exists(done));
  unlink(p);
  unlink(done);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_interrupt)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
