"""A preloaded Python that starts ``fabricguard`` and ``torchrun`` for the network-namespace tests (root only).

Every rank in those tests was a fresh Python that imported torch: 3-4 CPU-seconds each (most of it torch
registering its operators), twelve Python processes per canary test. Here one server imports torch (and
pydantic) once per test worker. ``bin`` holds a ``fabricguard`` and a ``torchrun`` that the tests run instead of
the console scripts -- directly, or through PATH from the canary's own shell script: each is a small client
that hands the server its argv, environment, working directory and stdin/stdout/stderr. The server forks a
child that enters the client's network and mount namespaces (what ``ip netns exec`` set up, the namespace's
``/etc/hosts`` included), takes the client's environment, directory and descriptors, and runs the entry point
the console script runs (``fabricguard.cli:main``, ``torch.distributed.run:main``) with the client's argv; its
exit status comes back to the client, which exits with it. SIGTERM, SIGINT and SIGHUP sent to the client are
passed on to the child. fabricguard's own modules are never preloaded: the child imports them after it has
the client's environment (the consoles read COLUMNS and the terminal at import), as a fresh process would.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

PRELOAD = ("torch", "torch.distributed", "torch.distributed.run", "pydantic", "yaml")
ENTRY = {"fabricguard": ("fabricguard.cli", "main"), "torchrun": ("torch.distributed.run", "main")}
NAMESPACES = (("net", 0x40000000), ("mnt", 0x00020000))  # CLONE_NEWNET, CLONE_NEWNS

CLIENT = """\
#!{python} -SE
import json, os, signal, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect({sock!r})
req = json.dumps({{"prog": {prog!r}, "argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd()}}).encode()
socket.send_fds(s, [req], [0, 1, 2])
child = 0
def forward(sig, _frame):
    if child:
        os.kill(child, sig)
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, forward)
while True:
    msg = s.recv(64)
    if not msg:
        sys.stderr.write("zygote: the child ended without an exit status\\n")
        os._exit(1)
    tag, value = msg[:1], struct.unpack("i", msg[1:5])[0]
    if tag == b"P":
        child = value
    else:
        os._exit(value)
"""


def _setns(path: str, flag: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, flag) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _child(conn: socket.socket, req: dict[str, Any], fds: list[int], peer: int) -> None:
    """In the forked child: become the client's process, run its program, report the status, exit."""
    code = 1
    try:
        for kind, flag in NAMESPACES:  # the client's namespaces, where they differ from the server's
            mine, theirs = os.stat(f"/proc/self/ns/{kind}"), os.stat(f"/proc/{peer}/ns/{kind}")
            if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
                _setns(f"/proc/{peer}/ns/{kind}", flag)
        os.chdir(req["cwd"])  # after the mount namespace: entering one resets the directory
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds) - {0, 1, 2}:
            os.close(fd)
        os.environ.clear()
        os.environ.update(req["env"])
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = list(req["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))  # a script's own directory comes first
        module, fn = ENTRY[req["prog"]]
        try:
            rc = getattr(importlib.import_module(module), fn)()
            code = rc if isinstance(rc, int) else 0
        except SystemExit as e:
            code = _exit_code(e)
        except BaseException:
            traceback.print_exc()
            code = 1
        threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter does at exit
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with suppress(Exception):
                stream.flush()
        with suppress(OSError):
            conn.send(b"X" + struct.pack("i", code))
        os._exit(code & 0xFF)


def serve(path: str) -> None:
    """The server: preload, then fork one child per client until stdin closes (the test worker went away)."""
    sys.path[0] = ""  # not tests/: the child puts its program's directory there
    for name in PRELOAD:
        importlib.import_module(name)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(path)
    srv.listen(64)
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([srv, sys.stdin], [], [], 0.5)
        while True:  # reap finished children (their CPU then counts for the test worker that reaps the server)
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            return
        if srv not in ready:
            continue
        conn, _ = srv.accept()
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        peer = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
        pid = os.fork()
        if pid == 0:
            srv.close()
            _child(conn, json.loads(msg), fds, peer)
        conn.send(b"P" + struct.pack("i", pid))
        conn.close()
        for fd in fds:
            os.close(fd)


class Zygote:
    """A running server and the directory of its client programs (``bin / "fabricguard"``, ``"torchrun"``)."""

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.bin = workdir / "bin"
        self.bin.mkdir(exist_ok=True)
        sock = str(workdir / "zygote.sock")
        self.proc = subprocess.Popen([sys.executable, __file__, sock], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.close()
            raise RuntimeError(f"the zygote server did not start (said {line!r})")
        for prog in ENTRY:
            client = self.bin / prog
            client.write_text(CLIENT.format(python=sys.executable, sock=sock, prog=prog))
            client.chmod(0o755)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextmanager
def zygote(workdir: Path) -> Iterator[Zygote]:
    z = Zygote(workdir)
    try:
        yield z
    finally:
        z.close()


if __name__ == "__main__":
    serve(sys.argv[1])
