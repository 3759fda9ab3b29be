#!/usr/bin/env python3
"""A rank group for tests/rank_group.sh (precfuzz --kernels ranks:N:CMD), numpy only: rank 0
serves softmax in float64 rounded once (variant np-rank-softmax, like safe) and records every
rank's environment; the other ranks sleep until precfuzz is gone. By the first argument:

  ok            as above; each rank writes RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
                MASTER_PORT, GLOO_SOCKET_IFNAME and its pid to $RANK_TEST_DIR/rank<R>
  peer-exit     rank 1 exits with status 3 as soon as rank 0 has a case; rank 0 then waits for
                ever (as it would in a collective with a dead peer)
  hang          rank 0 never answers (every rank alive): precfuzz's timeout
  faults        rank 0's hello names the fault switches f-one and f-two; the case's fault is
                written into $RANK_TEST_DIR/fault
  tp            rank 0's hello also names a tp_diff variant (np-rank-tp, like megatron) whose
                params do not name resume_at (it has no save and load of its own); it never
                computes
"""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import numpy as np  # noqa: E402

import precfuzz_kernel as pk  # noqa: E402

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
rank = int(os.environ["RANK"])
where = os.environ["RANK_TEST_DIR"]
with open(os.path.join(where, f"rank{rank}"), "w") as f:
    for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME"):
        f.write(f"{v}={os.environ.get(v, '')}\n")
    f.write(f"PID={os.getpid()}\n")
    # the network it runs in: its namespace, and the interfaces there
    f.write(f"NETNS={os.readlink('/proc/self/ns/net')}\n")
    f.write(f"NETDEVS={','.join(sorted(name for _, name in socket.if_nameindex()))}\n")


def precfuzz_alive():
    try:
        os.kill(int(os.environ["PRECFUZZ_PID"]), 0)
        return True
    except ProcessLookupError:
        return False


if rank != 0:
    go = os.path.join(where, "case-" + os.environ["MASTER_PORT"])  # this group's first case
    while precfuzz_alive():
        if mode == "peer-exit" and os.path.exists(go):
            sys.exit(3)
        time.sleep(0.05)
    sys.exit(0)


@pk.kernel("softmax", variant="np-rank-softmax", like="safe", params={"mask": ["none"]},
           faults=["f-one", "f-two"] if mode == "faults" else None)
def softmax(case, x):
    open(os.path.join(where, "case-" + os.environ["MASTER_PORT"]), "w").close()
    if mode in ("peer-exit", "hang"):
        while True:
            time.sleep(1)
    if mode == "faults":
        with open(os.path.join(where, "fault"), "a") as f:
            f.write(case.fault + "\n")
    t = x.astype(np.float64) * case.params["alpha"]
    e = np.exp(t - t.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(case.np_dtype)


if mode == "tp":
    @pk.kernel("tp_diff", variant="np-rank-tp", like="megatron", dtypes=["bf16"], params={"tied": [0, 0]})
    def tp(case, init, grads, gscale):
        raise RuntimeError("np-rank-tp does not compute")


if __name__ == "__main__":
    sys.exit(pk.serve())
