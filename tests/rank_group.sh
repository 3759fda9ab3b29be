#!/bin/bash
# Rank groups (--kernels ranks:N:CMD) end to end with tests/kernels/rank_kernel.py (numpy only):
# N processes with torch.distributed's environment on the loopback interface, rank 0 speaking
# the protocol; a rank that exits fails the case at once (not at the timeout) with its rank and
# status, a group that hangs fails at the timeout, the group is started again for the next
# case; the hello's fault switches reach the case; no process outlives precfuzz; bad specs
# exit 2 with one line.
# usage: tests/rank_group.sh PRECFUZZ PYTHON
P=$(realpath "$1")
PY=$2
. "$(dirname "$0")/check.sh"
need_python numpy "scripts/python-env.sh makes it"
export RANK_TEST_DIR=$(mktemp -d)
trap 'rm -rf "$RANK_TEST_DIR"' EXIT
K="$PY tests/kernels/rank_kernel.py"

# check WHAT COMMAND...: the command's output and status are in $out and $rc
check() {
  shift
  n=$((n + 1))
  out=$("$@" 2>&1)
  rc=$?
}
# every rank's pid recorded, none alive (a killed rank is reaped by init within 2 s) once
# precfuzz has exited
none_left() {
  n=$((n + 1))
  local f pid i
  for f in "$RANK_TEST_DIR"/rank*; do
    [ -f "$f" ] || continue
    pid=$(sed -n 's/^PID=//p' "$f")
    for i in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && fail "$1: rank $f (pid $pid) outlived precfuzz"
  done
  rm -f "$RANK_TEST_DIR"/rank* "$RANK_TEST_DIR"/case-*
}

# a group of 3: every rank has its RANK, the same WORLD_SIZE and port, and 127.0.0.1 on lo
check "ranks:3 run" "$P" --kernels "ranks:3:$K" run -k softmax -v np-rank-softmax -t fp16 --shape 4x32 --cases 20
[ $rc -eq 0 ] && echo "$out" | grep -q "^softmax/np-rank-softmax fp16/fp32: 20 cases (seeds 1..20): ok 20 *$" || fail "ranks:3: $rc $out"
n=$((n + 1))
port=$(sed -n 's/^MASTER_PORT=//p' "$RANK_TEST_DIR/rank0")
for r in 0 1 2; do
  f=$RANK_TEST_DIR/rank$r
  grep -qx "RANK=$r" "$f" && grep -qx "LOCAL_RANK=$r" "$f" && grep -qx "WORLD_SIZE=3" "$f" && grep -qx "MASTER_ADDR=127.0.0.1" "$f" &&
    grep -qx "GLOO_SOCKET_IFNAME=lo" "$f" && grep -qx "MASTER_PORT=$port" "$f" && [ "$port" -gt 0 ] || fail "rank $r's environment: $(cat "$f")"
done
n=$((n + 1))
# in a network of their own, the same for the three, whose only interface is lo: a rank told
# (or telling itself) another address has nothing to send it on
ns=$(sed -n 's/^NETNS=//p' "$RANK_TEST_DIR/rank0")
for r in 0 1 2; do
  f=$RANK_TEST_DIR/rank$r
  grep -Fqx "NETNS=$ns" "$f" && grep -qx "NETDEVS=lo" "$f" && [ "$ns" != "$(readlink /proc/self/ns/net)" ] ||
    fail "rank $r's network: $(cat "$f") (precfuzz's: $(readlink /proc/self/ns/net))"
done
none_left "ranks:3"

# an address the command line hides from precfuzz's check (a quoted 127.0.0.1 with a suffix, the
# rank's own os.environ): still no interface but lo to reach it by
check "a hidden MASTER_ADDR" "$P" --kernels "ranks:2:MASTER_ADDR='127.0.0.1'.example.com $K" run -k softmax \
  -v np-rank-softmax -t fp16 --shape 2x8 --cases 2
[ $rc -eq 0 ] && grep -qx "MASTER_ADDR=127.0.0.1.example.com" "$RANK_TEST_DIR/rank1" &&
  grep -qx "NETDEVS=lo" "$RANK_TEST_DIR/rank1" || fail "a hidden MASTER_ADDR: $rc $out $(cat "$RANK_TEST_DIR/rank1")"
none_left "a hidden MASTER_ADDR"

# told another address by the environment it runs in (a cluster's MASTER_ADDR, a NIC): the
# ranks still get 127.0.0.1 on lo, and the run passes
check "ranks:2 under MASTER_ADDR=10.9.9.9" env MASTER_ADDR=10.9.9.9 GLOO_SOCKET_IFNAME=eth0 "$P" --kernels "ranks:2:$K" \
  run -k softmax -v np-rank-softmax -t fp16 --shape 2x8 --cases 2
[ $rc -eq 0 ] && grep -qx "MASTER_ADDR=127.0.0.1" "$RANK_TEST_DIR/rank1" && grep -qx "GLOO_SOCKET_IFNAME=lo" "$RANK_TEST_DIR/rank1" ||
  fail "an outside MASTER_ADDR reached the ranks: $rc $out $(cat "$RANK_TEST_DIR/rank1")"
none_left "ranks:2 under MASTER_ADDR=10.9.9.9"

# rank 1 exits while rank 0 waits: failed at once, with the rank and its status; started again
start=$(date +%s)
check "peer exit" env PRECFUZZ_KERNEL_TIMEOUT=30 "$P" --kernels "ranks:2:$K peer-exit" run -k softmax -v np-rank-softmax \
  -t fp16 --shape 2x4 --cases 2
[ $rc -eq 1 ] && echo "$out" | grep -q "seed 1: failed: the kernel process group: rank 1 of 2 exited with status 3 before answering the case" &&
  echo "$out" | grep -q "seed 2: failed: the kernel process group: rank 1 of 2 exited with status 3" &&
  [ $(($(date +%s) - start)) -lt 20 ] || fail "peer exit ($(($(date +%s) - start)) s): $rc $out"
echo "$out" | grep -q "reproduce with: .*--kernels 'ranks:2:" || fail "peer exit: no replay line naming the rank group: $out"
none_left "peer exit"

# every rank alive, none answers: the timeout, for the group
check hang env PRECFUZZ_KERNEL_TIMEOUT=1 "$P" --kernels "ranks:2:$K hang" run -k softmax -v np-rank-softmax -t fp16 \
  --shape 2x4 --cases 1
[ $rc -eq 1 ] && echo "$out" | grep -q "seed 1: failed: the kernel process group timed out (1 s, PRECFUZZ_KERNEL_TIMEOUT)" ||
  fail "hang: $rc $out"
none_left hang

# the hello's fault switches: listed, taken by --fault and sent in the case; others refused
check "faults list" "$P" --kernels "ranks:2:$K faults" list
echo "$out" | grep -q "^softmax *np-rank-softmax .*f-one,f-two" || fail "faults in list: $out"
check "fault run" "$P" --kernels "ranks:2:$K faults" run -k softmax -v np-rank-softmax -t fp32 --fault f-two --shape 2x4 --cases 2
[ $rc -eq 0 ] && [ "$(sort -u "$RANK_TEST_DIR/fault")" = "f-two" ] || fail "fault run: $rc $out; $(cat "$RANK_TEST_DIR/fault")"
expect2 "f-three" "$P" --kernels "ranks:2:$K faults" run -k softmax -v np-rank-softmax --fault f-three --cases 1
none_left faults
# loopback only: precfuzz_ranks refuses, before any socket, an address or interface other than
# the 127.0.0.1 on lo precfuzz sets (another loopback address, ::1 and a name too)
n=$((n + 1))
got=$(PYTHONPATH=python "$PY" -c '
import sys
import precfuzz_ranks as pr
for addr, ifname in (("127.0.0.1", "lo"), ("127.3.4.5", "lo"), ("::1", "lo"), ("10.9.9.9", "lo"),
                     ("localhost", "lo"), ("", "lo"), ("127.0.0.1", "eth0"), ("127.0.0.1", None)):
    env = {"MASTER_ADDR": addr} if ifname is None else {"MASTER_ADDR": addr, "GLOO_SOCKET_IFNAME": ifname}
    print("ok" if pr.loopback_only(env) is None else "no", file=sys.stderr)' 2>&1 | tr '\n' ' ')
[ "$got" = "ok no no no no no no no " ] || fail "loopback_only: $got"
# and precfuzz refuses a command line that sets them otherwise, before any rank starts (no rank
# wrote its file); 127.0.0.1 and lo, set again, are what it sets itself
rm -f "$RANK_TEST_DIR"/rank*
for spec in "MASTER_ADDR=10.9.9.9 $K" "MASTER_ADDR=127.0.0.2 $K" "env MASTER_ADDR='::1' $K" \
            "export GLOO_SOCKET_IFNAME=eth0; $K" "MASTER_ADDR=\"localhost\" $K"; do
  v=$(echo "$spec" | sed -n 's/.*\(MASTER_ADDR\|GLOO_SOCKET_IFNAME\)=.*/\1/p')
  expect2 "the command sets $v=" "$P" --kernels "ranks:2:$spec" list
done
n=$((n + 1))
ls "$RANK_TEST_DIR"/rank* >/dev/null 2>&1 && fail "a refused command started ranks: $(ls "$RANK_TEST_DIR")"
check "MASTER_ADDR=127.0.0.1 set again" "$P" --kernels "ranks:2:MASTER_ADDR=127.0.0.1 GLOO_SOCKET_IFNAME=lo $K" list
[ $rc -eq 0 ] || fail "127.0.0.1 and lo set again: $rc $out"
none_left "127.0.0.1 set again"

# a tp_diff kernel process whose hello does not name resume_at is refused the round trip
expect2 "resume_at: tp_diff/np-rank-tp does not take it (its hello's params do not name resume_at: it has no save and load of its own wired to the round trip)" \
  "$P" --kernels "ranks:2:$K tp" diff-tp -v np-rank-tp --param resume_at=1 --cases 1
none_left tp

# bad specs: exit 2 and one line
expect2 "a rank group is ranks:N:CMD with N from 2 to 8" "$P" --kernels "ranks:1:$K" list
expect2 "a rank group is ranks:N:CMD with N from 2 to 8" "$P" --kernels "ranks:9:$K" list
expect2 "a rank group is ranks:N:CMD with N from 2 to 8" "$P" --kernels "ranks:two:$K" list
expect2 "a rank group is ranks:N:CMD with N from 2 to 8" "$P" --kernels "ranks:2" list
expect2 "ranks:2: needs a command" "$P" --kernels "ranks:2:" list
# (the shells' own complaints come first: the ranks' standard error is precfuzz's; either rank
# may be the first seen gone)
check "no such command" "$P" --kernels "ranks:2:/nonexistent/kernel" list
[ $rc -eq 2 ] && echo "$out" | tail -1 |
  grep -q "precfuzz: --kernels: ranks:2:/nonexistent/kernel: the kernel process group: rank [01] of 2 exited with status 127 before its hello$" ||
  fail "no such command: $out"
# PRECFUZZ_KERNELS: a ranks: entry takes the rest, ':' included
n=$((n + 1))
out=$(PRECFUZZ_KERNELS="ranks:2:PATH=/usr/bin:/bin; $K" "$P" list 2>&1) && echo "$out" | grep -q "np-rank-softmax" ||
  fail "PRECFUZZ_KERNELS with a ranks: entry: $out"
none_left "PRECFUZZ_KERNELS"

echo "rank_group: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
