"""Issue 17 §3: the webhook holds under load. Real TLS clients (trustme CA) against the real server on
loopback, every loop bounded: bytes in flight over all connections are bounded and what does not fit is
refused at once (503 with Retry-After) while a normal review still passes; a request head (and the TLS
handshake before it) must arrive within the header deadline; open connections are capped, and a silent one
makes room for a new one."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator

import pytest
from admission_support import PROFILES, TlsFiles, load_review

from fabricguard.admission.decide import Admission
from fabricguard.admission.server import INLINE_BODY, SMALL_RESERVE, Running, start
from fabricguard.profile import load_profile

GKE = next(p for p in PROFILES if p.stem == "gke-a3-ultra")
MAX_BODY = 1024 * 1024


def ctx(tls: TlsFiles) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(tls.ca_path))


@pytest.fixture
async def server(tls: TlsFiles) -> AsyncIterator[Running]:
    # Room for exactly one large body (the rest of the budget is kept for small reviews).
    srv = await start(Admission(load_profile(GKE)), tls.cert, tls.key, port=0, health_port=0, max_body=MAX_BODY,
                      bytes_in_flight=MAX_BODY + SMALL_RESERVE, body_timeout=5.0, header_timeout=0.5,
                      max_connections=8, max_per_source=8)  # every client here is 127.0.0.1
    yield srv
    await srv.cleanup()


def head(length: int) -> bytes:
    return (f"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


async def answer(reader: asyncio.StreamReader, wait: float = 5.0) -> tuple[int, bytes]:
    async with asyncio.timeout(wait):
        data = await reader.read(65536)
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    return status, data


async def normal_review(port: int, tls: TlsFiles) -> tuple[int, float]:
    body = json.dumps(load_review("job")).encode()
    r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx(tls))
    t = time.monotonic()
    w.write(head(len(body)) + body)
    status, _ = await answer(r)
    w.close()
    return status, time.monotonic() - t


def large_body() -> bytes:
    review = load_review("pod-owned")
    review["request"]["object"]["metadata"]["annotations"] = {"pad": "x" * (MAX_BODY - 20_000)}
    return json.dumps(review).encode()


async def test_bytes_in_flight_are_bounded_and_the_rest_is_refused_at_once(server: Running, tls: TlsFiles) -> None:
    body = large_body()
    assert INLINE_BODY < len(body) <= MAX_BODY
    # A holds the large-body budget: its head and half its body are in, the rest is still coming.
    ra, wa = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx(tls))
    wa.write(head(len(body)) + body[: len(body) // 2])
    await wa.drain()
    await asyncio.sleep(0.2)
    # B declares another large body: refused from its header, before any of it is read, with Retry-After.
    rb, wb = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx(tls))
    t = time.monotonic()
    wb.write(head(len(body)))
    status, data = await answer(rb)
    assert status == 503 and time.monotonic() - t < 1.0
    assert b"Retry-After: 1" in data and b"review bytes in flight" in data
    wb.close()
    # A normal review still passes, fast: small bodies have their own share of the budget.
    status, took = await normal_review(server.port, tls)
    assert status == 200 and took < 1.0
    # A finishes and is decided; then the budget is free again.
    wa.write(body[len(body) // 2:])
    status, _ = await answer(ra)
    assert status == 200
    wa.close()
    rc, wc = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx(tls))
    wc.write(head(len(body)) + body)
    assert (await answer(rc))[0] == 200
    wc.close()
    assert server.metrics.registry.get_sample_value(
        "fabricguard_admission_requests_total", {"endpoint": "mutate", "outcome": "busy"}) == 1



async def _trickle_head(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> float | None:
    """Send a request head a byte at a time; seconds until the server closed the connection (None: it never
    did), then close our end."""
    t = time.monotonic()
    closed_after = None
    for ch in b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 60:
        try:
            w.write(bytes([ch]))
            await w.drain()
            if await asyncio.wait_for(r.read(1), 0.05) == b"":
                closed_after = time.monotonic() - t
                break
        except TimeoutError:
            continue
        except (ConnectionError, ssl.SSLError):
            closed_after = time.monotonic() - t
            break
    w.close()
    return closed_after


async def test_a_trickled_head_is_closed_at_the_header_deadline(server: Running, tls: TlsFiles) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx(tls))
    closed_after = await _trickle_head(r, w)
    assert closed_after is not None and closed_after < 1.5  # header_timeout 0.5 s
    assert (await normal_review(server.port, tls))[0] == 200


async def test_a_tls_handshake_that_never_completes_is_closed(server: Running) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", server.port)  # plain TCP: no ClientHello, or half of one
    w.write(b"\x16\x03\x01\x02\x00")  # a handshake record header announcing 512 bytes that never come
    t = time.monotonic()
    async with asyncio.timeout(5):
        data = await r.read()
    assert data == b"" and time.monotonic() - t < 2.0
    w.close()


async def test_silent_connections_make_room_and_busy_ones_are_not_closed(server: Running, tls: TlsFiles) -> None:
    silent = [await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx(tls)) for _ in range(8)]
    await asyncio.sleep(0.1)
    # The cap is 8: a ninth connection with a review closes the oldest silent one, and is answered.
    assert (await normal_review(server.port, tls))[0] == 200
    for _, w in silent:
        w.close()
    await asyncio.sleep(0.1)
    # Eight connections each in the middle of a request (head sent, body coming): none is closed for a new one.
    body = json.dumps(load_review("job")).encode()
    busy = []
    for _ in range(8):
        r, w = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx(tls))
        w.write(head(len(body)) + body[:10])
        await w.drain()
        busy.append((r, w))
    await asyncio.sleep(0.2)
    r9, w9 = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx(tls))
    async with asyncio.timeout(5):
        assert await r9.read() == b""  # the new one is closed: every slot is a request in progress
    w9.close()
    for r, w in busy:
        w.write(body[10:])
        assert (await answer(r))[0] == 200
        w.close()
    assert server.metrics.registry.get_sample_value(
        "fabricguard_admission_connections_closed_total", {"why": "too_many_connections"}) == 1


# ---------------------------------------------------------------------------------------------- issue 17 §3 gaps


@pytest.fixture
async def few_handshakes(tls: TlsFiles) -> AsyncIterator[Running]:
    srv = await start(Admission(load_profile(GKE)), tls.cert, tls.key, port=0, health_port=0, max_body=MAX_BODY,
                      header_timeout=1.0, max_connections=8, max_handshakes=4)
    yield srv
    await srv.cleanup()


def sample(srv: Running, name: str, **labels: str) -> float:
    return srv.metrics.registry.get_sample_value(name, labels) or 0.0


async def test_a_handshake_flood_is_bounded_and_another_address_still_gets_in(few_handshakes: Running,
                                                                            tls: TlsFiles) -> None:
    import urllib.request

    srv = few_handshakes
    assert srv.health_port is not None
    # A keep-alive connection made before the flood.
    body = json.dumps(load_review("job")).encode()
    rk, wk = await asyncio.open_connection("127.0.0.1", srv.port, ssl=ctx(tls))
    wk.write(head(len(body)) + body)
    assert (await answer(rk))[0] == 200
    # Four stalled handshakes (half a ClientHello) fill the handshake slots.
    stalled = []
    for _ in range(4):
        r, w = await asyncio.open_connection("127.0.0.1", srv.port)
        w.write(b"\x16\x03\x01\x02\x00")
        stalled.append((r, w))
    await asyncio.sleep(0.1)
    assert srv.table is not None and len(srv.table.handshaking) == 4
    # Past the bound a new connection is closed at once, not held for the deadline.
    for _ in range(3):
        r, w = await asyncio.open_connection("127.0.0.1", srv.port)
        t = time.monotonic()
        async with asyncio.timeout(5):
            assert await r.read() == b""
        assert time.monotonic() - t < 0.5
        w.close()
    assert len(srv.table.handshaking) == 4
    assert sample(srv, "fabricguard_admission_connections_closed_total", why="too_many_handshakes") == 3
    # A client from another address (the API server's, not the flood's) takes the flood's oldest slot, and
    # its handshake and review complete.
    body2 = json.dumps(load_review("job")).encode()
    r2, w2 = await asyncio.open_connection("127.0.0.1", srv.port, ssl=ctx(tls), local_addr=("127.0.0.2", 0))
    w2.write(head(len(body2)) + body2)
    assert (await answer(r2))[0] == 200
    w2.close()
    async with asyncio.timeout(5):
        assert await stalled[0][0].read() == b""
    assert sample(srv, "fabricguard_admission_connections_closed_total", why="evicted_handshake") == 1
    stalled[0][1].close()
    stalled = stalled[1:]
    # The established connection and the health port are not affected.
    wk.write(head(len(body)) + body)
    assert (await answer(rk))[0] == 200
    wk.close()
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.health_port}/healthz", timeout=2) as resp:
        assert resp.status == 200
    # The stalled ones are closed at the deadline, which frees their slots for real clients.
    for r, _ in stalled:
        async with asyncio.timeout(5):
            assert await r.read() == b""
    for _, w in stalled:
        w.close()
    await asyncio.sleep(0.05)
    assert not srv.table.handshaking and not srv.table.per_peer
    assert sample(srv, "fabricguard_admission_connections_closed_total", why="handshake_failed") == 3
    assert (await normal_review(srv.port, tls))[0] == 200


async def test_later_heads_on_a_keep_alive_connection_have_the_deadline_and_idle_ones_stay(
        server: Running, tls: TlsFiles) -> None:
    body = json.dumps(load_review("job")).encode()
    r, w = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx(tls))
    for _ in range(2):
        w.write(head(len(body)) + body)
        assert (await answer(r))[0] == 200
        await asyncio.sleep(1.0)  # idle for twice the header deadline (0.5 s): the connection stays open
    # What is relied on in aiohttp: the middleware finds our wrapper through the TLS transport, and the
    # wrapper's handler is the one aiohttp hands the request (request.protocol).
    assert server.table is not None and [c.requests for c in server.table.open] == [2]
    # A third request whose head trickles is cut at the deadline, like a first one.
    closed_after = await _trickle_head(r, w)
    assert closed_after is not None and 0.4 < closed_after < 1.5
    assert sample(server, "fabricguard_admission_connections_closed_total", why="header_timeout") == 1


async def test_the_aiohttp_api_the_guard_is_built_on() -> None:
    """Pins what the guard takes from aiohttp: ``Server()`` makes a configured ``RequestHandler``."""
    from aiohttp import web
    from aiohttp.web_protocol import RequestHandler

    async def nothing(_: web.BaseRequest) -> web.StreamResponse:
        return web.Response()

    server = web.Server(nothing, keepalive_timeout=7.0)
    handler = server()
    assert isinstance(handler, RequestHandler)
    assert callable(handler.force_close) and callable(handler.data_received)
    assert callable(handler.pause_writing) and callable(handler.resume_writing)
