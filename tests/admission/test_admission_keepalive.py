"""Issue 25 item 3: the webhook serves the API server first. Idle keep-alive connections go first when the
table is full (the one idle longest first). A fresh connection is never refused while one at rest can be
closed. One client address holds at most ``max_per_source`` connections.

Real TLS clients (trustme CA) against the real server on loopback. The hostile client binds 127.0.0.2 and the
API server's fresh reviews come from 127.0.0.1, so the two are different addresses, as they are in a cluster.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time

from admission_support import PROFILES, TlsFiles, load_review

from fabricguard.admission.decide import Admission
from fabricguard.admission.server import DEFAULT_MAX_CONNECTIONS, start
from fabricguard.profile import load_profile

GKE = next(p for p in PROFILES if p.stem == "gke-a3-ultra")
BODY = json.dumps(load_review("job")).encode()
HEAD = (f"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n").encode()


def _ctx(tls: TlsFiles) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(tls.ca_path))


async def _review(r: asyncio.StreamReader, w: asyncio.StreamWriter, wait: float = 10.0) -> int:
    w.write(HEAD + BODY)
    await w.drain()
    async with asyncio.timeout(wait):
        data = await r.readuntil(b"\r\n\r\n")
        length = next(int(h.split(b":")[1]) for h in data.split(b"\r\n") if h.lower().startswith(b"content-length"))
        await r.readexactly(length)
    return int(data.split(b" ", 2)[1])


async def _keep_alive(port: int, tls: TlsFiles, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A client that sends one small review and keeps the connection open (aiohttp's keep-alive is 30 s)."""
    r, w = await asyncio.open_connection("127.0.0.1", port, ssl=_ctx(tls), local_addr=(source, 0))
    assert await _review(r, w) == 200
    return r, w


async def _fresh(port: int, tls: TlsFiles) -> tuple[int, float]:
    t = time.monotonic()
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port, ssl=_ctx(tls), local_addr=("127.0.0.1", 0))
        status = await _review(r, w)
        w.close()
    except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError):
        status = 0
    return status, time.monotonic() - t


def _closed(srv, why: str) -> float:
    return srv.metrics.registry.get_sample_value("fabricguard_admission_connections_closed_total",
                                                 {"why": why}) or 0.0


async def test_fresh_reviews_are_answered_while_128_idle_keep_alives_sit_on_the_port(tls: TlsFiles) -> None:
    srv = await start(Admission(load_profile(GKE)), tls.cert, tls.key, port=0, header_timeout=5.0)
    idle = []
    try:
        for _ in range(DEFAULT_MAX_CONNECTIONS):  # 128 idle keep-alives from one address
            idle.append(await _keep_alive(srv.port, tls, "127.0.0.2"))
        assert srv.table is not None
        held = srv.table.by_peer.get("127.0.0.2", 0)
        assert held <= DEFAULT_MAX_CONNECTIONS // 2  # the per-source cap: one address holds half the table
        # 119 fresh reviews, 8 at a time, from the API server's address: every one answered.
        results: list[tuple[int, float]] = []
        for i in range(0, 119, 8):
            results += await asyncio.gather(*(_fresh(srv.port, tls) for _ in range(min(8, 119 - i))))
        answered = sum(1 for s, _ in results if s == 200)
        worst = max(t for _, t in results)
        print(f"128 idle keep-alives from one address (held {held}), 119 fresh reviews: {answered} answered, "
              f"slowest {worst:.2f} s")
        assert answered == 119, results
        assert _closed(srv, "too_many_connections") == 0
        assert _closed(srv, "evicted_per_source") >= DEFAULT_MAX_CONNECTIONS // 2
    finally:
        for _, w in idle:
            w.close()
        await srv.cleanup()


async def test_a_full_table_closes_the_connection_idle_longest_never_a_busy_one(tls: TlsFiles) -> None:
    srv = await start(Admission(load_profile(GKE)), tls.cert, tls.key, port=0, header_timeout=5.0,
                      max_connections=4, max_per_source=4)
    try:
        # Four keep-alives from four addresses, used in turn: 127.0.0.11 is the one idle longest.
        conns = {}
        for n in (11, 12, 13, 14):
            conns[n] = await _keep_alive(srv.port, tls, f"127.0.0.{n}")
            await asyncio.sleep(0.05)
        assert await _review(*conns[11]) == 200  # 11 used again: now 12 is the one idle longest
        await asyncio.sleep(0.05)
        # 13 is in the middle of a request (head sent, body coming): busy, never closed for a new one.
        r13, w13 = conns[13]
        w13.write(HEAD + BODY[:10])
        await w13.drain()
        await asyncio.sleep(0.1)
        status, _ = await _fresh(srv.port, tls)
        assert status == 200
        r12, _w12 = conns[12]
        async with asyncio.timeout(5):
            assert await r12.read() == b""  # the idle-longest one was closed for the fresh one
        w13.write(BODY[10:])
        await w13.drain()
        async with asyncio.timeout(5):
            assert (await r13.readuntil(b"\r\n")).startswith(b"HTTP/1.1 200")
        assert await _review(*conns[11]) == 200 and await _review(*conns[14]) == 200
        assert _closed(srv, "evicted_idle") >= 1 and _closed(srv, "too_many_connections") == 0
    finally:
        for _, w in conns.values():
            w.close()
        await srv.cleanup()


async def test_one_address_past_its_cap_only_displaces_its_own_idle_connections(tls: TlsFiles) -> None:
    srv = await start(Admission(load_profile(GKE)), tls.cert, tls.key, port=0, header_timeout=5.0,
                      max_connections=8, max_per_source=2)
    try:
        api = await _keep_alive(srv.port, tls, "127.0.0.1")
        flood = [await _keep_alive(srv.port, tls, "127.0.0.2") for _ in range(6)]
        assert srv.table is not None and srv.table.by_peer == {"127.0.0.1": 1, "127.0.0.2": 2}
        assert await _review(*api) == 200  # the API server's own keep-alive was never touched
        for _, w in flood:
            w.close()
    finally:
        api[1].close()
        await srv.cleanup()
