"""The controller's /metrics and /healthz (issue 25 item 5): the agent's bounded asyncio server, not a thread per
connection. With 1,005 idle connections open on the port (a pod that floods :8080), /healthz still answers."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

from fabricguard.controller.metrics import Metrics, serve


def test_1005_idle_connections_leave_healthz_answering() -> None:
    metrics = Metrics()
    srv = serve(metrics, 0, "127.0.0.1")
    idle: list[socket.socket] = []
    try:
        for _ in range(1005):
            s = socket.socket()
            s.setblocking(True)
            s.settimeout(5)
            s.connect(("127.0.0.1", srv.server_port))
            idle.append(s)
        threads_before = threading.active_count()
        t0 = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.server_port}/healthz", timeout=5) as r:
            assert r.status == 200 and r.read() == b"ok\n"
        took = time.monotonic() - t0
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.server_port}/metrics", timeout=5) as r:
            assert b"fabricguard_reconcile_consecutive_failures" in r.read()
        assert threading.active_count() <= threads_before + 1  # no thread per connection
        assert srv.evicted >= 1005 - 64
        print(f"1,005 idle connections: /healthz answered in {took * 1000:.0f} ms; {srv.evicted} idle closed")
    finally:
        for s in idle:
            s.close()
        srv.shutdown()
