"""The kernel process precfuzz starts for precfuzz.check: it carries precfuzz's frames to the
calling Python process over a Unix socket and that process's answers back, byte for byte, so
that the callable runs where it was defined (its closures, its CUDA context, its imports).

    python _relay.py SOCKET

Standard library only, run by path: it needs nothing of the package on the kernel side.
"""

import os
import socket
import sys
import threading


def _pump(src_fd, dst_fd, on_end):
    try:
        while True:
            b = os.read(src_fd, 1 << 16)
            if not b:
                break
            while b:
                n = os.write(dst_fd, b)
                b = b[n:]
    except OSError:
        pass
    on_end()


def main(argv):
    if len(argv) != 2:
        print("usage: _relay.py SOCKET", file=sys.stderr)
        return 2
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(argv[1])
    except OSError as e:
        print(f"precfuzz relay: cannot connect to {argv[1]}: {e.strerror}", file=sys.stderr)
        return 1
    done = threading.Event()
    # precfuzz -> the caller; when precfuzz closes our input, the caller's end sees EOF
    def to_caller_end():
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    threading.Thread(target=_pump, args=(0, s.fileno(), to_caller_end), daemon=True).start()
    # the caller -> precfuzz; the caller closing its end ends the process
    _pump(s.fileno(), 1, done.set)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
