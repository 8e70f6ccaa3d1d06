"""Issue 25 §5: the webhook's health port is the one bounded server (``fabricguard.health_http``), not an aiohttp
app of its own. Before: a plain aiohttp site with no connection cap, its default 75 s keep-alive and no deadline
on a request head, so idle or trickling clients on :8081 held connections for as long as they liked. Now idle
and slow clients on the health port (one address, or several) cannot starve the kubelet's probe nor the
webhook port, every connection closed for it is counted, and ``/readyz`` still speaks for the webhook port:
it turns 503 while the webhook's event loop does not turn."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator

import pytest
from admission_support import PROFILES, TlsFiles
from test_admission_load import normal_review

from fabricguard.admission.decide import Admission
from fabricguard.admission.server import Running, start
from fabricguard.health_http import MAX_CONNECTIONS
from fabricguard.profile import load_profile

GKE = next(p for p in PROFILES if p.stem == "gke-a3-ultra")


@pytest.fixture
async def webhook(tls: TlsFiles) -> AsyncIterator[Running]:
    srv = await start(Admission(load_profile(GKE)), tls.cert, tls.key, port=0, health_port=0)
    yield srv
    await srv.cleanup()


async def probe(port: int, path: str, source: str) -> tuple[int, bytes, float]:
    """One kubelet-style probe (a fresh connection, one GET) from ``source``: (status, body, seconds)."""
    t = time.monotonic()
    r, w = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    w.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: kube-probe/1.33\r\n\r\n".encode())
    async with asyncio.timeout(5):
        data = await r.read()
    w.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body, time.monotonic() - t


def closed(srv: Running, why: str) -> float:
    return srv.metrics.registry.get_sample_value("fabricguard_admission_health_connections_closed_total",
                                                 {"why": why}) or 0.0


async def test_idle_and_trickling_clients_on_the_health_port_starve_neither_probes_nor_reviews(
        webhook: Running, tls: TlsFiles) -> None:
    srv = webhook
    port = srv.health_port
    assert port is not None and srv.health is not None
    held: list[asyncio.StreamWriter] = []
    # 120 idle connections from one address, then 3 x 33 from three more (the whole table and more), and 20
    # that trickle a request head a byte at a time.
    for source, n in (("127.0.0.1", 120), ("127.0.0.3", 33), ("127.0.0.4", 33), ("127.0.0.5", 33)):
        for _ in range(n):
            _, w = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
            held.append(w)
    trickle = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 64
    slow: list[asyncio.StreamWriter] = []
    for _ in range(20):
        _, w = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.6", 0))
        slow.append(w)
    try:
        for i in range(10):
            for w in slow:
                w.write(trickle[i:i + 1])
            await asyncio.sleep(0.01)
        # The kubelet (its node's address) and the webhook port, while all of that sits on the health port.
        took: list[float] = []
        for path in ("/readyz", "/healthz"):
            status, body, t = await probe(port, path, "127.0.0.2")
            assert (status, body) == (200, b"ok")
            took.append(t)
        # A probe from the flooding address itself gets in too: that address's own oldest idle one makes room.
        status, _, t = await probe(port, "/readyz", "127.0.0.1")
        assert status == 200
        took.append(t)
        review, review_s = await normal_review(srv.port, tls)
        assert review == 200
        print(f"health port with {len(held) + len(slow)} idle or trickling clients: probes answered in "
              f"{max(took) * 1000:.0f} ms at most, a review in {review_s * 1000:.0f} ms")
        assert max(took) < 2.0
        # One address never holds more than half the table; every connection closed for room is counted.
        assert closed(srv, "evicted_per_source") >= 120 - MAX_CONNECTIONS // 2
        assert closed(srv, "evicted_idle") >= 1
        assert closed(srv, "busy") == 0
        assert srv.health.evicted == closed(srv, "evicted_per_source") + closed(srv, "evicted_idle")
    finally:
        for w in held + slow:
            w.close()


async def test_a_trickled_head_on_the_health_port_is_cut_at_its_deadline(webhook: Running) -> None:
    srv = webhook
    assert srv.health is not None and srv.health_port is not None
    srv.health.header_timeout = 0.3
    r, w = await asyncio.open_connection("127.0.0.1", srv.health_port)
    t = time.monotonic()
    answer = b""
    reset = False  # a byte written after the server's close draws a RST, which may discard its unread 408
    for ch in b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
        w.write(bytes([ch]))
        try:
            answer = await asyncio.wait_for(r.read(), 0.05)
            break
        except TimeoutError:
            continue
        except ConnectionResetError:
            reset = True
            break
    w.close()
    assert (answer.startswith(b"HTTP/1.1 408") or reset) and time.monotonic() - t < 2.0, answer
    assert closed(srv, "header_timeout") == 1  # the server cut it for its header deadline, whichever way it ended


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


async def test_readiness_speaks_for_the_webhook_loop(webhook: Running) -> None:
    """The health port answers from its own thread; a webhook loop that stopped turning (a decision stuck on it)
    answers no review, so ``/readyz`` says so while ``/healthz`` (liveness) stays 200."""
    srv = webhook
    port = srv.health_port
    assert port is not None
    assert await asyncio.to_thread(_get, port, "/readyz") == (200, "ok")
    srv.state.stall_after = 0.3
    got: list[tuple[int, str]] = []

    def probes() -> None:
        time.sleep(0.6)
        got.extend((_get(port, "/readyz"), _get(port, "/healthz")))

    t = threading.Thread(target=probes)
    t.start()
    time.sleep(1.2)  # the webhook's event loop (this test's) does nothing meanwhile
    t.join(5)
    (ready, ready_why), live = got
    assert ready == 503 and "event loop has not run for" in ready_why, got
    assert live == (200, "ok")
    deadline = time.monotonic() + 10
    while (await asyncio.to_thread(_get, port, "/readyz"))[0] != 200:  # the loop turns again: ready again
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
