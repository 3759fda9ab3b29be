/* Kernel processes (exec_kernel.h; the protocol: docs/kernel-protocol.md).
 *
 * Every message, both ways, is one frame: "PFK1", the header's length (u32, little-endian), a
 * JSON header, then the .npy bytes of the tensors the header lists under "tensors" (name,
 * nbytes), back to back. The process says hello first; precfuzz then sends one case at a time
 * and waits for its result (or error) under a deadline; it closes the process's input at exit. */
#define _GNU_SOURCE
#include "core/exec_kernel.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/interrupt.h"
#include "core/outputs.h"
#include "core/tensorfile.h"
#include "core/kernel.h"

extern char **environ;

#define PF_EXEC_MAGIC "PFK1"
#define PF_EXEC_MAX_HEADER ((size_t)1 << 24)
#define PF_EXEC_MAX_PROCS 8
#define PF_EXEC_MAX_KERNELS 64
#define PF_EXEC_MAX_TENSORS 16
#define PF_EXEC_MAX_RANKS 8
#define PF_EXEC_MAX_FAULTS 16

typedef struct {
  char *cmd;
  pid_t pid; /* 0: not running; the next case starts it again (a rank group: rank 0, whose pid is the group's) */
  int nranks;                     /* 1: one process; N: a rank group (ranks:N:CMD) */
  pid_t rank[PF_EXEC_MAX_RANKS];  /* a rank group's processes, rank[0] == pid */
  char start_error[160];          /* why its last start failed in the child (pf_spawn_rank) */
  int to, from; /* our ends of its standard input and output (rank 0's) */
  unsigned long long id; /* of the last case sent */
  pthread_mutex_t mu;    /* one case at a time (sweep --jobs runs threads) */
} pf_proc;

static pf_proc pf_procs[PF_EXEC_MAX_PROCS];
static int pf_nprocs;

typedef struct {
  pf_kernel k; /* registered: the registry keeps this address */
  pf_proc *p;
  char variant[64];
  char summary[200];
  pf_status (*like_check)(const pf_case *c); /* the contract's own checks */
  /* what the hello's "params" narrows (the kernel's pf_param_range list, k.params) */
  pf_param_range ranges[PF_MAX_PARAMS + 1];
  int nranges;
  /* the fault switches the hello names (the case's "fault" says which is on) */
  char fault_names[PF_EXEC_MAX_FAULTS][64];
  const char *faults[PF_EXEC_MAX_FAULTS + 1];
} pf_exec_kernel;
static pf_exec_kernel pf_ek[PF_EXEC_MAX_KERNELS];
static int pf_nek;

pf_status pf_exec_timeout(double *seconds) {
  const char *e = getenv("PRECFUZZ_KERNEL_TIMEOUT");
  *seconds = 60;
  if (!e) return PF_OK;
  char *end;
  errno = 0;
  const double v = strtod(e, &end);
  if (!*e || isspace((unsigned char)*e) || *end || errno || !(v > 0 && v <= 86400))
    return pf_error(PF_ERR_ARG, "PRECFUZZ_KERNEL_TIMEOUT: '%s' is not a number of seconds in (0, 86400]", e);
  *seconds = v;
  return PF_OK;
}

static double pf_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double pf_timeout_s = 60; /* $PRECFUZZ_KERNEL_TIMEOUT, read once when a process is loaded */

static double pf_deadline(void) { return pf_mono() + pf_timeout_s; }

/* The first rank of p's group (not rank 0, whose end its pipes show) that has exited; 0: none.
 * It is not reaped: pf_proc_end does that. */
static int pf_peer_exited(const pf_proc *p) {
  for (int r = 1; r < p->nranks; r++) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (p->rank[r] && waitid(P_PID, (id_t)p->rank[r], &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == p->rank[r])
      return r;
  }
  return 0;
}

/* 1: fd is ready (or in error, which the read or write then reports); 0: the deadline passed;
 * -r: rank r of a rank group exited meanwhile (rank 0 would then wait in a collective for ever:
 * a group is looked at every 50 ms) */
static int pf_wait_fd(const pf_proc *p, int fd, short ev, double deadline) {
  for (;;) {
    const double left = deadline - pf_mono();
    if (left <= 0) return 0;
    const int r = pf_peer_exited(p);
    if (r) return -r;
    struct pollfd q = {fd, ev, 0};
    const double slice = p->nranks > 1 && left > 0.05 ? 0.05 : left;
    const int n = poll(&q, 1, slice > 3600 ? 3600000 : (int)ceil(slice * 1000));
    if (n > 0 || (n < 0 && errno != EINTR)) return 1;
  }
}

/* 1 when process `pid` has exited within about 1 s (it is not reaped: pf_proc_end does that) */
static int pf_pid_exits(pid_t pid) {
  for (int i = 0; i < 100; i++) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) return 1;
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  return 0;
}
static int pf_proc_exits(const pf_proc *p) {
  int all = 1;
  for (int r = 0; r < p->nranks; r++) all &= pf_pid_exits(p->rank[r]);
  return all;
}

/* Ends the process (every rank of a group): how rank `who` ended into how (NULL: not asked;
 * all are killed at once). */
static void pf_proc_end_rank(pf_proc *p, int who, char *how, size_t len) {
  if (!p->pid) return;
  const int exited = how && pf_pid_exits(p->rank[who]);
  kill(-p->pid, SIGKILL); /* its process group: every rank and what the shells started */
  pf_interrupt_group(p->pid, 0);
  int ws = 0, wr = 0;
  for (int r = 0; r < p->nranks; r++) {
    int w = 0;
    while (waitpid(p->rank[r], &w, 0) < 0 && errno == EINTR) {
    }
    if (r == who) ws = w, wr = 1;
    p->rank[r] = 0;
  }
  if (p->to >= 0) close(p->to);
  close(p->from);
  p->pid = 0;
  p->to = p->from = -1;
  if (!how) return;
  char rank[48] = "";
  if (p->nranks > 1) snprintf(rank, sizeof rank, "rank %d of %d ", who, p->nranks);
  if (!exited || !wr) snprintf(how, len, "%sstopped talking (killed)", rank);
  else if (WIFSIGNALED(ws)) snprintf(how, len, "%swas killed by signal %d (%s)", rank, WTERMSIG(ws), strsignal(WTERMSIG(ws)));
  else if (WEXITSTATUS(ws) > 128 && WEXITSTATUS(ws) < 128 + NSIG) /* the shell's word for a signal */
    snprintf(how, len, "%swas killed by signal %d (%s; the shell's exit status %d)", rank, WEXITSTATUS(ws) - 128,
             strsignal(WEXITSTATUS(ws) - 128), WEXITSTATUS(ws));
  else snprintf(how, len, "%sexited with status %d", rank, WEXITSTATUS(ws));
}
static void pf_proc_end(pf_proc *p, char *how, size_t len) { pf_proc_end_rank(p, 0, how, len); }

/* The process failed (ended, hung; or a rank of its group ended: -rank): it is ended; the
 * next case starts it again. */
static pf_status pf_proc_fail(pf_proc *p, int timed_out, const char *when) {
  char how[160];
  if (timed_out > 0) {
    pf_proc_end(p, NULL, 0);
    return pf_error(PF_ERR_KERNEL, "the kernel process%s timed out (%g s, PRECFUZZ_KERNEL_TIMEOUT) %s",
                    p->nranks > 1 ? " group" : "", pf_timeout_s, when);
  }
  pf_proc_end_rank(p, -timed_out, how, sizeof how);
  if (p->nranks > 1) return pf_error(PF_ERR_KERNEL, "the kernel process group: %s %s", how, when);
  return pf_error(PF_ERR_KERNEL, "the kernel process %s %s", how, when);
}

/* The process broke the protocol: what it sends next cannot be trusted, so it is ended. */
static pf_status pf_proc_broke(pf_proc *p, const char *when, const char *what) {
  pf_proc_end(p, NULL, 0);
  return pf_error(PF_ERR_KERNEL, "the kernel process broke the protocol %s: %s", when, what);
}

static pf_status pf_proc_write(pf_proc *p, const void *buf, size_t len, double deadline) {
  const char *b = buf;
  while (len) {
    const int ready = pf_wait_fd(p, p->to, POLLOUT, deadline);
    if (ready <= 0) return pf_proc_fail(p, ready ? ready : 1, ready ? "before reading the whole case" : "reading the case");
    const ssize_t w = write(p->to, b, len);
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (w <= 0) return pf_proc_fail(p, 0, "before reading the whole case");
    b += w, len -= (size_t)w;
  }
  return PF_OK;
}

static pf_status pf_proc_read(pf_proc *p, void *buf, size_t len, double deadline, const char *when) {
  char *b = buf;
  while (len) {
    const int ready = pf_wait_fd(p, p->from, POLLIN, deadline);
    if (ready <= 0) return pf_proc_fail(p, ready ? ready : 1, when);
    const ssize_t r = read(p->from, b, len);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (r <= 0) return pf_proc_fail(p, 0, when);
    b += r, len -= (size_t)r;
  }
  return PF_OK;
}

typedef struct {
  cJSON *head;
  pf_tensorfile t[PF_EXEC_MAX_TENSORS];
  size_t nt;
} pf_frame;

static void pf_frame_free(pf_frame *f) {
  cJSON_Delete(f->head);
  for (size_t i = 0; i < f->nt; i++) pf_tensorfile_free(&f->t[i]);
  memset(f, 0, sizeof *f);
}

/* One frame; its tensors may hold max_bytes in all. A malformed tensor leaves the stream in
 * step (it was read whole): the process is kept. */
static pf_status pf_frame_read(pf_proc *p, double deadline, size_t max_bytes, pf_frame *f, const char *when) {
  memset(f, 0, sizeof *f);
  unsigned char h8[8];
  pf_status st = pf_proc_read(p, h8, 8, deadline, when);
  if (st) return st;
  if (memcmp(h8, PF_EXEC_MAGIC, 4)) {
    char got[40] = "";
    for (int i = 0; i < 8; i++) snprintf(got + strlen(got), sizeof got - strlen(got), "%02x", h8[i]);
    const int text = isprint(h8[0]) && isprint(h8[1]) && isprint(h8[2]);
    char what[160];
    snprintf(what, sizeof what, "a frame starts with \"PFK1\", got bytes %s%s", got,
             text ? " (text: does the kernel print to its standard output?)" : "");
    return pf_proc_broke(p, when, what);
  }
  const size_t hl = (size_t)h8[4] | (size_t)h8[5] << 8 | (size_t)h8[6] << 16 | (size_t)h8[7] << 24;
  if (!hl || hl > PF_EXEC_MAX_HEADER) return pf_proc_broke(p, when, "a header of 0 bytes or over 16 MiB");
  char *h = malloc(hl + 1);
  if (!h) return pf_error(PF_ERR_NOMEM, "out of memory");
  if ((st = pf_proc_read(p, h, hl, deadline, when))) {
    free(h);
    return st;
  }
  h[hl] = 0;
  /* read as strictly as a case file: no NUL, no data after the value, no key twice, no NUL
   * inside a string ("ok\u0000evil" would register as "ok") */
  if (strlen(h) != hl) {
    free(h);
    return pf_proc_broke(p, when, "the header holds a NUL byte");
  }
  cJSON *head = NULL;
  if (pf_json_parse_strict(h, "the header", &head)) {
    free(h);
    char why[300];
    snprintf(why, sizeof why, "%s", pf_error_message());
    return pf_proc_broke(p, when, why);
  }
  free(h);
  f->head = head;
  if (!cJSON_IsObject(f->head)) {
    pf_frame_free(f);
    return pf_proc_broke(p, when, "the header is not a JSON object");
  }
  const cJSON *ts = cJSON_GetObjectItemCaseSensitive(f->head, "tensors");
  if (ts && (!cJSON_IsArray(ts) || cJSON_GetArraySize(ts) > PF_EXEC_MAX_TENSORS)) {
    pf_frame_free(f);
    return pf_proc_broke(p, when, "\"tensors\" is not a list of at most 16");
  }
  /* every size first: the bytes that follow are then known before any is read */
  size_t sizes[PF_EXEC_MAX_TENSORS], total = 0, n = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, ts) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name"), *nb = cJSON_GetObjectItemCaseSensitive(e, "nbytes");
    const double v = cJSON_IsNumber(nb) ? nb->valuedouble : -1;
    if (!cJSON_IsString(nm) || !*nm->valuestring || strlen(nm->valuestring) >= PF_TF_NAME_LEN || !(v >= 0) ||
        v != floor(v) || v > (double)(max_bytes - total)) {
      char what[200];
      snprintf(what, sizeof what, "tensor %zu needs a name (1 to %d characters) and nbytes (at most %zu here)", n,
               PF_TF_NAME_LEN - 1, max_bytes - total);
      pf_frame_free(f);
      return pf_proc_broke(p, when, what);
    }
    total += (sizes[n++] = (size_t)v);
  }
  pf_status bad = PF_OK; /* a tensor that does not parse: reported once all bytes are read */
  char badmsg[300] = "";
  n = 0;
  cJSON_ArrayForEach(e, ts) {
    const char *name = cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring;
    unsigned char *b = malloc(sizes[n] ? sizes[n] : 1);
    if (!b) {
      pf_frame_free(f);
      return pf_error(PF_ERR_NOMEM, "out of memory");
    }
    if ((st = pf_proc_read(p, b, sizes[n], deadline, when))) {
      free(b);
      pf_frame_free(f);
      return st;
    }
    char what[160];
    snprintf(what, sizeof what, "tensor '%s'", name);
    if (!bad && (bad = pf_tensorfile_parse(b, sizes[n], NULL, what, &f->t[f->nt])) == PF_OK)
      snprintf(f->t[f->nt++].name, PF_TF_NAME_LEN, "%s", name);
    else if (bad && !badmsg[0])
      snprintf(badmsg, sizeof badmsg, "%s", pf_error_message());
    free(b);
    n++;
  }
  if (bad) {
    pf_frame_free(f);
    return pf_error(PF_ERR_KERNEL, "the kernel process sent a malformed tensor: %s", badmsg);
  }
  return PF_OK;
}

static pf_status pf_frame_write(pf_proc *p, const cJSON *head, unsigned char *const *blobs, const size_t *lens, size_t n,
                                double deadline) {
  char *h = cJSON_PrintUnformatted(head);
  if (!h) return pf_error(PF_ERR_NOMEM, "out of memory");
  const size_t hl = strlen(h);
  unsigned char h8[8] = {'P', 'F', 'K', '1', (unsigned char)hl, (unsigned char)(hl >> 8), (unsigned char)(hl >> 16),
                         (unsigned char)(hl >> 24)};
  pf_status st = pf_proc_write(p, h8, 8, deadline);
  if (!st) st = pf_proc_write(p, h, hl, deadline);
  free(h);
  for (size_t i = 0; i < n && !st; i++) st = pf_proc_write(p, blobs[i], lens[i], deadline);
  return st;
}

/* A TCP port on 127.0.0.1 that nothing listens on now, for a rank group's MASTER_PORT (0: none).
 * The group runs in a network of its own (pf_rank_netns), where no other group listens: any port
 * free here serves. */
static int pf_free_port(void) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  int port = 0;
  if (!bind(fd, (struct sockaddr *)&a, sizeof a) && !getsockname(fd, (struct sockaddr *)&a, &n)) port = ntohs(a.sin_port);
  close(fd);
  return port;
}

/* The environment of rank r of n: precfuzz's, less torch.distributed's variables, plus those
 * of this group (the loopback interface only: no byte leaves the machine) and precfuzz's pid. */
#define PF_RANK_VARS 8
static char **pf_rank_environ(int r, int n, int port, char vars[PF_RANK_VARS][64]) {
  static const char *const names[PF_RANK_VARS] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                                  "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME", "PRECFUZZ_PID"};
  size_t count = 0;
  while (environ[count]) count++;
  char **env = malloc((count + PF_RANK_VARS + 1) * sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < count; i++) {
    int ours = 0;
    for (int v = 0; v < PF_RANK_VARS; v++) {
      const size_t l = strlen(names[v]);
      ours |= strncmp(environ[i], names[v], l) == 0 && environ[i][l] == '=';
    }
    if (!ours) env[k++] = environ[i];
  }
  snprintf(vars[0], 64, "RANK=%d", r);
  snprintf(vars[1], 64, "WORLD_SIZE=%d", n);
  snprintf(vars[2], 64, "LOCAL_RANK=%d", r);
  snprintf(vars[3], 64, "LOCAL_WORLD_SIZE=%d", n);
  snprintf(vars[4], 64, "MASTER_ADDR=127.0.0.1");
  snprintf(vars[5], 64, "MASTER_PORT=%d", port);
  snprintf(vars[6], 64, "GLOO_SOCKET_IFNAME=lo");
  snprintf(vars[7], 64, "PRECFUZZ_PID=%ld", (long)getpid()); /* a rank whose precfuzz is gone ends itself */
  for (int v = 0; v < PF_RANK_VARS; v++) env[k++] = vars[v];
  env[k] = NULL;
  return env;
}

/* Starts one rank (or the one process): rank 0 talks over the pipes in[0], out[1] and leads
 * a new process group; the others join it, read nothing and write to precfuzz's stderr. */
/* The rank group's network: rank 0 makes a network namespace of its own holding only the loopback
 * interface (brought up), and every other rank joins it, so that whatever address a rank is told
 * or tells itself (a MASTER_ADDR in its code, an init_method, a script that exports one), no byte
 * can leave the machine: there is no other interface to send it on. As root (or with
 * CAP_SYS_ADMIN) a network namespace alone; else a user namespace too, when the kernel allows
 * unprivileged ones. In the forked child, before exec: system calls only. Returns 0, or the errno
 * with *what the step that failed. */
static int pf_rank_netns(int r, pid_t rank0, const char *maps[3], const char **what) {
  if (r == 0) {
    if (unshare(CLONE_NEWNET)) {
      if (errno != EPERM) return *what = "unshare(CLONE_NEWNET)", errno;
      if (unshare(CLONE_NEWUSER | CLONE_NEWNET)) return *what = "unshare(CLONE_NEWUSER | CLONE_NEWNET)", errno;
      static const char *const files[3] = {"/proc/self/setgroups", "/proc/self/uid_map", "/proc/self/gid_map"};
      for (int k = 0; k < 3; k++) {
        const int fd = open(files[k], O_WRONLY | O_CLOEXEC);
        const ssize_t w = fd < 0 ? -1 : write(fd, maps[k], strlen(maps[k]));
        const int e = errno;
        if (fd >= 0) close(fd);
        if (w < 0) return *what = files[k], e;
      }
    }
    const int sd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int bad = sd < 0 || ioctl(sd, SIOCGIFFLAGS, &ifr);
    if (!bad) {
      ifr.ifr_flags |= IFF_UP;
      bad = ioctl(sd, SIOCSIFFLAGS, &ifr) != 0;
    }
    const int e = errno;
    if (sd >= 0) close(sd);
    return bad ? (*what = "bringing up lo", e) : 0;
  }
  char path[64];
  static const char *const ns[2] = {"user", "net"};
  static const int kind[2] = {CLONE_NEWUSER, CLONE_NEWNET};
  for (int k = 0; k < 2; k++) {
    snprintf(path, sizeof path, "/proc/%ld/ns/%s", (long)rank0, ns[k]);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return *what = errno == ENOENT ? "rank 0 exited before the others joined its network" : "opening rank 0's namespace", errno;
    struct stat mine, its;
    snprintf(path, sizeof path, "/proc/self/ns/%s", ns[k]);
    /* rank 0's user namespace is ours when it made a network namespace alone */
    const int same = !stat(path, &mine) && !fstat(fd, &its) && mine.st_ino == its.st_ino && mine.st_dev == its.st_dev;
    const int rc = same ? 0 : setns(fd, kind[k]);
    const int e = errno;
    close(fd);
    if (rc) return *what = k ? "setns(rank 0's network)" : "setns(rank 0's user namespace)", e;
  }
  return 0;
}

/* Rank r of the group (or the one process of an exec kernel): sh -c CMD in its process group
 * (rank 0's for the others: a timeout kills all it started), SIGPIPE as by default (precfuzz
 * itself ignores it to see a closed pipe as an error), rank 0's stdin and stdout the protocol's
 * pipes, the other ranks' stdout on stderr. A rank of a group of several runs in the group's
 * network (pf_rank_netns): the child reports on a pipe that it is in it before it execs. */
static int pf_spawn_rank(pf_proc *p, int r, int port, int in0, int out1, pid_t *pid) {
  char vars[PF_RANK_VARS][64];
  char **env = p->nranks > 1 ? pf_rank_environ(r, p->nranks, port, vars) : environ;
  if (!env) return ENOMEM;
  char maps[3][64];
  snprintf(maps[0], 64, "deny");
  snprintf(maps[1], 64, "0 %ld 1", (long)geteuid());
  snprintf(maps[2], 64, "0 %ld 1", (long)getegid());
  const char *mapv[3] = {maps[0], maps[1], maps[2]};
  int sync[2];
  if (pipe2(sync, O_CLOEXEC)) {
    const int e = errno;
    if (env != environ) free(env);
    return e;
  }
  char *argv[] = {"sh", "-c", p->cmd, NULL};
  fflush(NULL);
  const pid_t child = fork();
  if (child == 0) {
    const char *what = "";
    int e = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &sa, NULL);
    if (setpgid(0, r == 0 ? 0 : p->rank[0])) e = errno, what = "setpgid";
    if (!e && p->nranks > 1) e = pf_rank_netns(r, p->rank[0], mapv, &what);
    if (!e && r == 0 && (dup2(in0, 0) < 0 || dup2(out1, 1) < 0)) e = errno, what = "dup2";
    if (!e && r > 0) {
      const int nul = open("/dev/null", O_RDONLY);
      if (nul < 0 || dup2(nul, 0) < 0 || dup2(2, 1) < 0) e = errno, what = "redirecting stdin";
      if (nul > 0) close(nul);
    }
    if (!e) {
      execve("/bin/sh", argv, env);
      e = errno, what = "execve(/bin/sh)";
    }
    char msg[160];
    const int m = snprintf(msg, sizeof msg, "%s: %s", what, strerror(e));
    if (write(sync[1], msg, (size_t)(m > 0 ? m : 0)) < 0) _exit(127);
    _exit(127);
  }
  const int fe = errno;
  close(sync[1]);
  if (env != environ) free(env);
  if (child < 0) {
    close(sync[0]);
    return fe;
  }
  /* the child's word: nothing (EOF at its exec), or what failed */
  char msg[160];
  ssize_t m;
  while ((m = read(sync[0], msg, sizeof msg - 1)) < 0 && errno == EINTR) {
  }
  close(sync[0]);
  if (m > 0) {
    msg[m] = 0;
    waitpid(child, NULL, 0);
    snprintf(p->start_error, sizeof p->start_error, "%s", msg);
    return EPERM;
  }
  *pid = child;
  return 0;
}

static pf_status pf_proc_start(pf_proc *p) {
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) {
    const int e = errno;
    for (int i = 0; i < 2; i++)
      if (in[i] >= 0) close(in[i]);
    return pf_error(PF_ERR_ARG, "cannot make pipes: %s", strerror(e));
  }
  const int port = p->nranks > 1 ? pf_free_port() : 0;
  int rc = p->nranks > 1 && !port ? EADDRNOTAVAIL : 0;
  p->start_error[0] = 0;
  int started = 0;
  for (int r = 0; r < p->nranks && !rc; r++)
    if (!(rc = pf_spawn_rank(p, r, port, in[0], out[1], &p->rank[r]))) started++;
  close(in[0]);
  close(out[1]);
  p->pid = started ? p->rank[0] : 0;
  if (rc) {
    if (started) kill(-p->rank[0], SIGKILL);
    int status0 = 0;
    for (int r = 0; r < started; r++) waitpid(p->rank[r], r ? NULL : &status0, 0);
    close(in[1]);
    close(out[0]);
    p->pid = 0;
    if (p->nranks > 1 && !port) return pf_error(PF_ERR_ARG, "cannot find a free port on 127.0.0.1 for the rank group");
    if (p->start_error[0] && p->nranks > 1 && (strstr(p->start_error, "unshare") || strstr(p->start_error, "setns") ||
                                               strstr(p->start_error, "/proc/self")))
      return pf_error(PF_ERR_ARG, "cannot give the rank group a network of its own with only the loopback interface (%s): "
                                  "ranks run so only as root, with CAP_SYS_ADMIN, or where unprivileged user "
                                  "namespaces are allowed", p->start_error);
    if (strstr(p->start_error, "rank 0 exited") && WIFEXITED(status0)) /* as the hello would have said */
      return pf_error(PF_ERR_ARG, "the kernel process group: rank 0 of %d exited with status %d before its hello",
                      p->nranks, WEXITSTATUS(status0));
    if (p->start_error[0] && p->nranks > 1) return pf_error(PF_ERR_ARG, "cannot start the rank group: %s", p->start_error);
    if (p->start_error[0]) return pf_error(PF_ERR_ARG, "cannot start /bin/sh: %s", p->start_error);
    return pf_error(PF_ERR_ARG, "cannot start /bin/sh: %s", strerror(rc));
  }
  p->to = in[1], p->from = out[0];
  pf_interrupt_group(p->pid, 1); /* a Ctrl-C ends it at once */
  if (pf_interrupted()) kill(-p->pid, SIGKILL); /* the signal came while it started */
  fcntl(p->to, F_SETFL, fcntl(p->to, F_GETFL) | O_NONBLOCK);
  fcntl(p->from, F_SETFL, fcntl(p->from, F_GETFL) | O_NONBLOCK);
  return PF_OK;
}

static int pf_variant_name_ok(const char *s) { /* what a case's variant and fault hold: PF_NAME_LEN - 1 */
  if (!s || !*s || strlen(s) >= PF_NAME_LEN || *s == '-') return 0;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && !strchr("._+-", *s)) return 0;
  return 1;
}

/* dtype names in a hello's list -> a mask within what `like` takes */
static pf_status pf_hello_dtypes(const cJSON *list, unsigned allowed, int accum, unsigned *mask, const char *who) {
  if (!list) {
    *mask = allowed;
    return PF_OK;
  }
  *mask = 0;
  if (!cJSON_IsArray(list) || !cJSON_GetArraySize(list))
    return pf_error(PF_ERR_ARG, "%s: \"%s\" is not a list of names", who, accum ? "accums" : "dtypes");
  const cJSON *e;
  cJSON_ArrayForEach(e, list) {
    pf_dtype t;
    unsigned bit;
    if (!cJSON_IsString(e)) return pf_error(PF_ERR_ARG, "%s: \"%s\" holds a non-string", who, accum ? "accums" : "dtypes");
    if (accum && strcmp(e->valuestring, "storage") == 0) bit = PF_ACCUM_STORAGE;
    else if (!pf_dtype_parse(e->valuestring, &t)) bit = PF_DT(t);
    else return pf_error(PF_ERR_ARG, "%s: '%s' is not fp32, fp16, bf16%s", who, e->valuestring, accum ? " or storage" : "");
    if (!(allowed & bit))
      return pf_error(PF_ERR_ARG, "%s: %s '%s' is not one the variant it is like takes", who, accum ? "accumulation" : "dtype",
                      e->valuestring);
    *mask |= bit;
  }
  return PF_OK;
}

static pf_status pf_exec_run(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe);

static pf_exec_kernel *pf_exec_kernel_of(const pf_case *c) {
  const pf_kernel *k = pf_case_kernel(c);
  for (int i = 0; i < pf_nek; i++)
    if (&pf_ek[i].k == k) return &pf_ek[i];
  return NULL;
}

int pf_exec_is_process(const struct pf_kernel *k) {
  for (int j = 0; j < pf_nek; j++)
    if (&pf_ek[j].k == k) return 1;
  return 0;
}

/* The contract's checks (the parameters the hello narrowed: pf_kernel_check_params). */
static pf_status pf_exec_check(const pf_case *c) {
  const pf_exec_kernel *ek = pf_exec_kernel_of(c);
  return ek && ek->like_check ? ek->like_check(c) : PF_OK;
}

/* The hello's "params": {"name": ["choice", ...]} or {"name": [min, max]}. */
static pf_status pf_hello_params(pf_exec_kernel *ek, const cJSON *params, const char *who) {
  if (!params) return PF_OK;
  if (!cJSON_IsObject(params)) return pf_error(PF_ERR_ARG, "%s: \"params\" is not an object", who);
  const pf_op *op = ek->k.op;
  const cJSON *e;
  cJSON_ArrayForEach(e, params) {
    const int i = pf_op_param_index(op, e->string);
    if (i < 0) return pf_error(PF_ERR_ARG, "%s: %s has no parameter '%.60s'", who, op->name, e->string);
    const pf_param_desc *d = &op->params[i];
    if (!cJSON_IsArray(e) || !cJSON_GetArraySize(e))
      return pf_error(PF_ERR_ARG, "%s: params.%s is not a non-empty list", who, d->name);
    for (int m = 0; m < ek->nranges; m++)
      if (ek->ranges[m].name == d->name) return pf_error(PF_ERR_ARG, "%s: params.%s given twice", who, d->name);
    pf_param_range *r = &ek->ranges[ek->nranges++];
    memset(r, 0, sizeof *r);
    r->name = d->name;
    if (d->type == PF_PARAM_CHOICE) {
      const cJSON *x;
      cJSON_ArrayForEach(x, e) {
        int found = -1;
        for (int j = 0; d->choices[j] && cJSON_IsString(x); j++)
          if (strcmp(d->choices[j], x->valuestring) == 0) found = j;
        if (found < 0) return pf_error(PF_ERR_ARG, "%s: params.%s holds something not one of its choices", who, d->name);
        r->choices |= 1u << found;
      }
      /* its default: the operation's if it takes it, else the first it takes */
      r->def = r->choices >> (int)d->def & 1 ? d->def : __builtin_ctz(r->choices);
      continue;
    }
    const cJSON *a = cJSON_GetArrayItem(e, 0), *b = cJSON_GetArrayItem(e, 1);
    if (cJSON_GetArraySize(e) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !(a->valuedouble <= b->valuedouble) ||
        !(a->valuedouble >= d->min && b->valuedouble <= d->max))
      return pf_error(PF_ERR_ARG, "%s: params.%s is not [min, max] within [%g, %g]", who, d->name, d->min, d->max);
    r->lo = a->valuedouble, r->hi = b->valuedouble;
    /* its default: the operation's if it takes it, else the nearest end */
    r->def = d->def < r->lo ? r->lo : d->def > r->hi ? r->hi : d->def;
    if (d->type == PF_PARAM_INT && r->def != floor(r->def)) r->def = ceil(r->def);
    if ((d->type == PF_PARAM_INT && r->def > r->hi) || (d->held && !pf_dtype_holds((pf_dtype)(d->held - 1), r->def)))
      return pf_error(PF_ERR_ARG, "%s: params.%s = [%g, %g] holds no value the parameter may take", who, d->name, r->lo, r->hi);
  }
  ek->ranges[ek->nranges].name = NULL;
  ek->k.params = ek->nranges ? ek->ranges : NULL;
  return PF_OK;
}

/* The hello's "faults": names of the kernel's own fault switches (precfuzz --fault NAME puts
 * NAME in the case; the kernel turns it on). */
static pf_status pf_hello_faults(pf_exec_kernel *ek, const cJSON *faults, const char *who) {
  int n = 0;
  if (faults) {
    if (!cJSON_IsArray(faults) || cJSON_GetArraySize(faults) > PF_EXEC_MAX_FAULTS)
      return pf_error(PF_ERR_ARG, "%s: \"faults\" is not a list of at most %d names", who, PF_EXEC_MAX_FAULTS);
    const cJSON *e;
    cJSON_ArrayForEach(e, faults) {
      if (!cJSON_IsString(e) || !pf_variant_name_ok(e->valuestring))
        return pf_error(PF_ERR_ARG, "%s: fault %d is not 1 to 47 letters, digits or ._+- (not starting with -)", who, n);
      for (int j = 0; j < n; j++)
        if (!strcmp(ek->fault_names[j], e->valuestring)) return pf_error(PF_ERR_ARG, "%s: fault '%s' named twice", who, e->valuestring);
      snprintf(ek->fault_names[n], sizeof ek->fault_names[n], "%s", e->valuestring);
      ek->faults[n] = ek->fault_names[n];
      n++;
    }
  }
  ek->faults[n] = NULL;
  ek->k.faults = ek->faults;
  return PF_OK;
}

/* Registers the kernels of a hello (the process's first start): all of them, or none. */
static pf_status pf_hello_register(pf_proc *p, const cJSON *kernels) {
  if (!cJSON_IsArray(kernels) || !cJSON_GetArraySize(kernels))
    return pf_error(PF_ERR_ARG, "the hello's \"kernels\" is not a list of at least one kernel");
  if (pf_nek + cJSON_GetArraySize(kernels) > PF_EXEC_MAX_KERNELS)
    return pf_error(PF_ERR_ARG, "more than %d kernels from processes", PF_EXEC_MAX_KERNELS);
  const cJSON *e;
  int i = 0;
  cJSON_ArrayForEach(e, kernels) {
    char who[120];
    snprintf(who, sizeof who, "kernel %d of the hello", i++);
    /* a misspelt key ("dtype" for "dtypes") would otherwise widen the kernel silently */
    const cJSON *key;
    cJSON_ArrayForEach(key, e) {
      static const char *const known[] = {"op", "variant", "like", "summary", "dtypes", "accums", "params", "faults"};
      int ok = 0;
      for (size_t j = 0; j < sizeof known / sizeof *known; j++) ok |= key->string && strcmp(key->string, known[j]) == 0;
      if (!ok)
        return pf_error(PF_ERR_ARG, "%s: unknown key '%.40s' (op, variant, like, summary, dtypes, accums, params, faults)", who,
                        key->string ? key->string : "");
    }
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(e, "op"), *var = cJSON_GetObjectItemCaseSensitive(e, "variant"),
                *like = cJSON_GetObjectItemCaseSensitive(e, "like"), *sum = cJSON_GetObjectItemCaseSensitive(e, "summary");
    if (!cJSON_IsString(op) || !cJSON_IsString(var) || !cJSON_IsString(like))
      return pf_error(PF_ERR_ARG, "%s needs \"op\", \"variant\" and \"like\" (strings)", who);
    if (!pf_variant_name_ok(var->valuestring))
      return pf_error(PF_ERR_ARG, "%s: variant '%.80s' is not 1 to 47 letters, digits or ._+- (not starting with -)", who,
                      var->valuestring);
    if (sum && (!cJSON_IsString(sum) || strlen(sum->valuestring) >= sizeof pf_ek[0].summary))
      return pf_error(PF_ERR_ARG, "%s: \"summary\" is not a string of at most %zu characters", who, sizeof pf_ek[0].summary - 1);
    if (!pf_op_find(op->valuestring)) return pf_error(PF_ERR_ARG, "%s: no operation '%.80s' (precfuzz list)", who, op->valuestring);
    int dup = pf_kernel_find(op->valuestring, var->valuestring) != NULL;
    for (int j = pf_nek; j < pf_nek + i - 1; j++)
      dup |= strcmp(pf_ek[j].variant, var->valuestring) == 0 && pf_ek[j].k.op == pf_op_find(op->valuestring);
    if (dup) return pf_error(PF_ERR_ARG, "%s: %s/%s is already registered", who, op->valuestring, var->valuestring);
    pf_exec_kernel *ek = &pf_ek[pf_nek + i - 1];
    memset(ek, 0, sizeof *ek);
    if (pf_kernel_like(&ek->k, op->valuestring, like->valuestring))
      return pf_error(PF_ERR_ARG, "%s: %s", who, pf_error_message());
    unsigned dt, ac;
    snprintf(who, sizeof who, "kernel %s/%s", op->valuestring, var->valuestring);
    pf_status st = pf_hello_dtypes(cJSON_GetObjectItemCaseSensitive(e, "dtypes"), ek->k.dtypes, 0, &dt, who);
    if (!st) st = pf_hello_dtypes(cJSON_GetObjectItemCaseSensitive(e, "accums"), ek->k.accums, 1, &ac, who);
    if (!st) st = pf_hello_params(ek, cJSON_GetObjectItemCaseSensitive(e, "params"), who);
    if (!st) st = pf_hello_faults(ek, cJSON_GetObjectItemCaseSensitive(e, "faults"), who);
    if (st) return st;
    ek->k.dtypes = dt, ek->k.accums = ac;
    ek->like_check = ek->k.check;
    ek->k.check = pf_exec_check;
    snprintf(ek->variant, sizeof ek->variant, "%s", var->valuestring);
    snprintf(ek->summary, sizeof ek->summary, "%s", sum ? sum->valuestring : p->cmd);
    ek->k.variant = ek->variant;
    ek->k.summary = ek->summary;
    ek->k.run_cpu = pf_exec_run;
    ek->p = p;
  }
  for (int j = 0; j < i; j++) {
    pf_status st = pf_kernel_register(&pf_ek[pf_nek].k);
    if (st) return st; /* the registry is full: those registered stay valid */
    pf_nek++;
  }
  return PF_OK;
}

/* The hello: on the first start the kernels it names are registered (reg). */
static pf_status pf_proc_hello(pf_proc *p, int reg) {
  pf_frame f;
  pf_status st = pf_frame_read(p, pf_deadline(), 0, &f, "before its hello");
  if (st) return st;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(f.head, "type"),
              *proto = cJSON_GetObjectItemCaseSensitive(f.head, "protocol");
  if (!cJSON_IsString(type) || strcmp(type->valuestring, "hello"))
    st = pf_proc_broke(p, "in its hello", "the first frame's \"type\" is not \"hello\"");
  else if (!cJSON_IsNumber(proto) || proto->valuedouble != PF_EXEC_PROTOCOL) {
    pf_proc_end(p, NULL, 0);
    st = pf_error(PF_ERR_KERNEL, "the kernel process speaks protocol %g, precfuzz %d",
                  cJSON_IsNumber(proto) ? proto->valuedouble : -1.0, PF_EXEC_PROTOCOL);
  } else if (reg)
    st = pf_hello_register(p, cJSON_GetObjectItemCaseSensitive(f.head, "kernels"));
  pf_frame_free(&f);
  return st;
}

/* At exit: each process gets the end of its input and a second to exit on its own; then its
 * process group is killed, so that a kernel that hangs (or ignores the end of its input) does
 * not outlive precfuzz holding its pipes, its memory or a GPU. */
static void pf_exec_end_all(void) {
  for (int i = 0; i < pf_nprocs; i++) {
    pf_proc *p = &pf_procs[i];
    if (!p->pid) continue;
    close(p->to);
    p->to = -1;
    pf_proc_exits(p);
    pf_proc_end(p, NULL, 0);
  }
}

pf_status pf_exec_load(const char *cmd) { return pf_exec_load_ranks(cmd, 1); }

/* A rank group talks over 127.0.0.1 on the loopback interface, which precfuzz sets: a command
 * that sets MASTER_ADDR or GLOO_SOCKET_IFNAME to anything else (ranks:2:"MASTER_ADDR=10.0.0.5
 * cmd", an `export`, an `env`) is refused before any rank starts. 0, or the one line. */
static int pf_rank_cmd_elsewhere(const char *cmd, char *why, size_t len) {
  static const char *const vars[2] = {"MASTER_ADDR", "GLOO_SOCKET_IFNAME"}, *const want[2] = {"127.0.0.1", "lo"};
  for (int v = 0; v < 2; v++) {
    const size_t nl = strlen(vars[v]);
    for (const char *p = strstr(cmd, vars[v]); p; p = strstr(p + 1, vars[v])) {
      if ((p > cmd && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) || p[nl] != '=') continue;
      const char *a = p + nl + 1;
      const char q = *a == '\'' || *a == '"' ? *a++ : 0; /* a quoted value */
      size_t n = 0;
      while (a[n] && (q ? a[n] != q : !isspace((unsigned char)a[n]) && !strchr(";&|)", a[n]))) n++;
      if (n != strlen(want[v]) || strncmp(a, want[v], n) != 0) {
        snprintf(why, len, "the command sets %s=%.*s: a rank group talks over %s only (precfuzz sets %s=%s)",
                 vars[v], (int)(n > 64 ? 64 : n), a, v ? "the loopback interface" : "127.0.0.1", vars[v], want[v]);
        return 1;
      }
    }
  }
  return 0;
}

pf_status pf_exec_load_ranks(const char *cmd, int nranks) {
  if (nranks < 1 || nranks > PF_EXEC_MAX_RANKS)
    return pf_error(PF_ERR_ARG, "ranks: %d ranks, not 1 to %d", nranks, PF_EXEC_MAX_RANKS);
  pf_status st = pf_exec_timeout(&pf_timeout_s);
  if (st) return st;
  if (!cmd || !*cmd)
    return nranks > 1 ? pf_error(PF_ERR_ARG, "ranks:%d: needs a command (ranks:2:\"python3 my_ranks.py\")", nranks)
                      : pf_error(PF_ERR_ARG, "exec: needs a command (exec:\"python3 my_kernel.py\")");
  char elsewhere[200];
  if (nranks > 1 && pf_rank_cmd_elsewhere(cmd, elsewhere, sizeof elsewhere))
    return pf_error(PF_ERR_ARG, "ranks:%d:%s: %s", nranks, cmd, elsewhere);
  if (pf_nprocs == PF_EXEC_MAX_PROCS) return pf_error(PF_ERR_ARG, "exec:%s: more than %d kernel processes", cmd, PF_EXEC_MAX_PROCS);
  signal(SIGPIPE, SIG_IGN); /* a process that went away is an error of a write, not our end */
  if (!pf_nprocs) atexit(pf_exec_end_all);
  pf_proc *p = &pf_procs[pf_nprocs];
  memset(p, 0, sizeof *p);
  p->to = p->from = -1;
  p->nranks = nranks;
  if (!(p->cmd = strdup(cmd))) return pf_error(PF_ERR_NOMEM, "out of memory");
  pthread_mutex_init(&p->mu, NULL);
  const int before = pf_nek;
  if (!(st = pf_proc_start(p))) st = pf_proc_hello(p, 1);
  if (st) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pf_error_message());
    pf_proc_end(p, NULL, 0);
    if (pf_nek > before) pf_nprocs++; /* its kernels were registered: the slot stays theirs */
    if (nranks > 1) return pf_error(PF_ERR_ARG, "ranks:%d:%s: %s", nranks, cmd, msg);
    return pf_error(PF_ERR_ARG, "exec:%s: %s", cmd, msg);
  }
  pf_nprocs++;
  return PF_OK;
}

/* The case as the process sees it: everything but the inputs' generators (the inputs come as
 * tensors) and the expected verdict; what to answer with. */
static cJSON *pf_case_header(const pf_case *c, unsigned long long id) {
  cJSON *h = cJSON_CreateObject();
  cJSON_AddStringToObject(h, "type", "case");
  cJSON_AddNumberToObject(h, "id", (double)id);
  cJSON *cj = pf_case_to_cjson(c);
  cJSON_DeleteItemFromObjectCaseSensitive(cj, "inputs");
  cJSON_DeleteItemFromObjectCaseSensitive(cj, "expect");
  cJSON_AddItemToObject(h, "case", cj);
  cJSON *outs = cJSON_AddArrayToObject(h, "outputs");
  pf_stage st[PF_MAX_STAGES];
  const int ns = pf_case_stages(c, st);
  for (int s = 0; s < ns; s++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", st[s].name);
    const pf_dtype t = pf_stage_dtype(c, &st[s]);
    cJSON_AddStringToObject(o, "dtype", t == PF_NDTYPES ? "mixed" : pf_dtype_name(t));
    size_t shape[PF_MAX_DIMS];
    const int nd = pf_stage_shape(c, &st[s], shape);
    cJSON *sh = cJSON_AddArrayToObject(o, "shape");
    for (int d = 0; d < nd; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)shape[d]));
    cJSON_AddItemToArray(outs, o);
  }
  return h;
}

static pf_status pf_exec_case(pf_proc *p, const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  pf_status st;
  if (!p->pid && ((st = pf_proc_start(p)) || (st = pf_proc_hello(p, 0)))) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pf_error_message());
    pf_proc_end(p, NULL, 0);
    return pf_error(PF_ERR_KERNEL, "could not start the kernel process again: %s", msg);
  }
  const pf_op *op = pf_case_op(c);
  unsigned char *blobs[PF_MAX_INPUTS] = {0};
  size_t lens[PF_MAX_INPUTS] = {0};
  cJSON *h = pf_case_header(c, ++p->id);
  cJSON *ts = cJSON_AddArrayToObject(h, "tensors");
  st = PF_OK;
  for (int t = 0; t < op->ninputs && !st; t++) {
    size_t shape[PF_MAX_DIMS];
    const pf_tensor_view v = {op->input_names[t], in[t].dtype, pf_input_shape(c, t, in[t].n, shape), shape, in[t].data};
    if ((st = pf_npy_encode(&v, &blobs[t], &lens[t]))) break;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", op->input_names[t]);
    cJSON_AddNumberToObject(o, "nbytes", (double)lens[t]);
    cJSON_AddItemToArray(ts, o);
  }
  const double deadline = pf_deadline();
  if (!st) st = pf_frame_write(p, h, blobs, lens, (size_t)op->ninputs, deadline);
  cJSON_Delete(h);
  for (int t = 0; t < op->ninputs; t++) free(blobs[t]);
  if (st) return st;
  /* the answer may hold each stage once, 4 bytes a value and a header each at most */
  pf_stage stg[PF_MAX_STAGES];
  const int ns = pf_case_stages(c, stg);
  size_t max_bytes = 0;
  for (int s = 0; s < ns; s++) max_bytes += 4 * stg[s].count + 4096;
  pf_frame f;
  if ((st = pf_frame_read(p, deadline, max_bytes, &f, "before answering the case"))) return st;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(f.head, "type"), *id = cJSON_GetObjectItemCaseSensitive(f.head, "id");
  const int is_error = cJSON_IsString(type) && strcmp(type->valuestring, "error") == 0;
  if (!cJSON_IsString(type) || (!is_error && strcmp(type->valuestring, "result")) || !cJSON_IsNumber(id) ||
      id->valuedouble != (double)p->id) {
    pf_frame_free(&f);
    return pf_proc_broke(p, "answering the case", "the answer is not {\"type\": \"result\" or \"error\", \"id\": the case's id}");
  }
  if (is_error) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(f.head, "message");
    char msg[400];
    snprintf(msg, sizeof msg, "%s", cJSON_IsString(m) ? m->valuestring : "(no message)");
    for (char *q = msg; *q; q++)
      if (*q == '\n' || *q == '\r') *q = ' ';
    pf_frame_free(&f);
    return pf_error(PF_ERR_KERNEL, "the kernel raised an error on the case: %s", msg);
  }
  /* every tensor named as a stage; pf_outputs_from_tensors takes one tensor of any name as
   * the stage "output" */
  for (size_t i = 0; i < f.nt && !st; i++) {
    int known = 0;
    for (int s = 0; s < ns; s++) known |= strcmp(f.t[i].name, stg[s].name) == 0;
    if (!known) st = pf_error(PF_ERR_ARG, "outputs: tensor '%s' is no output of %s", f.t[i].name, c->kernel);
  }
  if (!st) st = pf_outputs_from_tensors(c, f.t, f.nt, out, op->output_count(c), NULL, 1);
  *fe = 0;
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(f.head, "events"), *e;
  if (ev && !cJSON_IsArray(ev)) st = pf_error(PF_ERR_ARG, "\"events\" is not a list");
  cJSON_ArrayForEach(e, ev) {
    if (st) break;
    if (cJSON_IsString(e) && !strcmp(e->valuestring, "overflow")) *fe |= PF_FE_OVERFLOW;
    else if (cJSON_IsString(e) && !strcmp(e->valuestring, "underflow")) *fe |= PF_FE_UNDERFLOW;
    else if (cJSON_IsString(e) && !strcmp(e->valuestring, "invalid")) *fe |= PF_FE_INVALID;
    else st = pf_error(PF_ERR_ARG, "\"events\" holds something not overflow, underflow or invalid");
  }
  pf_frame_free(&f);
  if (st) return pf_error(PF_ERR_KERNEL, "the kernel's answer does not fit the case: %s", pf_error_message());
  return PF_OK;
}

static pf_status pf_exec_run(const pf_case *c, const pf_tensor *in, double *out, unsigned *fe) {
  const pf_exec_kernel *ek = pf_exec_kernel_of(c);
  pf_proc *p = ek ? ek->p : NULL;
  if (!p) return pf_error(PF_ERR_ARG, "%s/%s is not a kernel process's", c->kernel, c->variant);
  pthread_mutex_lock(&p->mu);
  const pf_status st = pf_exec_case(p, c, in, out, fe);
  pthread_mutex_unlock(&p->mu);
  return st;
}
