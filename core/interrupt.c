/* interrupt.h: the handler does only async-signal-safe things (unlink, signal, raise). */
#include "interrupt.h"

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t pf_got, pf_polled, pf_tmp_live;
static char pf_tmp_path[4096];
#define PF_MAX_GROUPS 256
static volatile sig_atomic_t pf_groups[PF_MAX_GROUPS]; /* 0: a free slot */

static void pf_kill_groups(void) {
  for (int i = 0; i < PF_MAX_GROUPS; i++)
    if (pf_groups[i] > 0) kill(-(pid_t)pf_groups[i], SIGKILL);
}

static void pf_on_signal(int sig) {
  pf_kill_groups(); /* the kernel processes end at once: the case at hand is not waited for */
  if (pf_polled && !pf_got) {
    pf_got = sig; /* the command stops after the case at hand */
    return;
  }
  if (pf_tmp_live) unlink(pf_tmp_path);
  signal(sig, SIG_DFL);
  raise(sig); /* ends the process as the signal would have: the shell sees 128 + sig */
}

void pf_interrupt_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = pf_on_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 2; i++) {
    const int sig = i ? SIGTERM : SIGINT;
    struct sigaction old;
    /* a signal the parent chose to ignore (a background job of a script) stays ignored */
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaction(sig, &sa, NULL);
  }
}

void pf_interrupt_polled(int on) { pf_polled = on; }

void pf_interrupt_group(int pgid, int on) {
  if (pgid <= 0) return;
  for (int i = 0; i < PF_MAX_GROUPS; i++)
    if (on ? pf_groups[i] == 0 : pf_groups[i] == pgid) {
      pf_groups[i] = on ? pgid : 0;
      return;
    }
}
int pf_interrupted(void) { return pf_got; }

void pf_interrupt_tmp(const char *path) {
  if (!path || strlen(path) >= sizeof pf_tmp_path) { /* a path too long is not removed: left to the write */
    pf_tmp_live = 0;
    return;
  }
  pf_tmp_live = 0;
  atomic_signal_fence(memory_order_seq_cst);
  memcpy(pf_tmp_path, path, strlen(path) + 1);
  atomic_signal_fence(memory_order_seq_cst);
  pf_tmp_live = 1;
}
