"""The admission webhook's servers (aiohttp): HTTPS /mutate and /validate, plain-HTTP /healthz, /readyz, /metrics.

Every decision comes from :class:`fabricguard.admission.decide.Admission`; this module only moves bytes, and
makes sure that one client cannot take the webhook down for everyone (with ``failurePolicy: Fail`` that would
block every create in the opted-in namespaces):

* a body declared larger than ``max_body`` is answered 413 from its ``Content-Length`` at once, without reading
  it; any body must arrive within ``body_timeout`` seconds (408 otherwise);
* the bytes of all bodies in flight together are bounded (:class:`ByteBudget`): a body that does not fit is
  answered 503 with ``Retry-After`` from its header, before a byte of it is read, and part of the budget is
  kept for bodies of at most :data:`INLINE_BODY` bytes, so normal reviews pass while large ones are shed;
* at most ``max_handshakes`` connections are in the TLS handshake (past it a new one from the busiest address
  is closed at once, and one from another address takes the busiest one's oldest slot); a TLS
  handshake and a first request head must complete within ``header_timeout`` seconds, and so must every later
  request head once its first byte arrives (an idle keep-alive connection stays open); at most
  ``max_connections`` connections are open: a new one closes the oldest silent one, else the one idle the
  longest between requests (a keep-alive at rest), and is refused only while every connection is in the middle
  of a request; one client address holds at most ``max_per_source`` (half the table by default), a new one
  past it closing that address's own idle connection; each connection's TLS
  and HTTP buffers are small (``bench/admission/README.md``: 300 concurrent 2.9 MB reviews peak at 142 MiB);
* a ``Content-Encoding`` other than identity is refused (415) before anything is read: the API server never
  compresses, and a small gzip body can inflate to gigabytes;
* bodies over :data:`INLINE_BODY` bytes are decided on a worker thread, so ``/healthz`` and small reviews keep
  being answered while a large one is decided;
* a decision that fails unexpectedly is a denied review (never a dropped connection) and one log line.

Health and metrics are also served on a separate plain-HTTP port by the one bounded server every component
uses for its probes (``fabricguard.health_http``: its own thread and event loop, so kubelet probes never queue
behind TLS handshakes or decisions; a header deadline, one request per connection, at most 64 connections and
half of them per address, idle ones closed first for new ones). ``/readyz`` there reflects the webhook port: not
ready without a certificate, from SIGTERM on, and while the webhook's event loop has not run for
``stall_after`` seconds (a loop that stopped turning answers no review, whatever the other thread says).
The certificate and key are re-read when their files change (cert-manager rotates them in place): a new pair is
loaded into a fresh TLS context and used for new handshakes only when both files load and match. On SIGTERM the
server turns not-ready, keeps answering for ``shutdown_delay`` seconds (closing keep-alive connections after
each answer so clients move to other replicas), then stops listening and lets in-flight requests finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission, Decision, Endpoint
from fabricguard.health_http import CLOSE_REASONS, RENDER_TIMEOUT, Answer, MetricsServer, Render

log = logging.getLogger("fabricguard.admission")

DEFAULT_MAX_BODY = 3 * 1024 * 1024  # etcd stores objects up to 1.5 MiB; a review carries object and oldObject.
DEFAULT_BODY_TIMEOUT = 10.0  # the API server gives a webhook at most 30 s, and ours is configured with 5 s
INLINE_BODY = 64 * 1024  # bodies up to this size are decided on the event loop (well under a millisecond)
# Bytes of request bodies in flight at once, over every connection (bench/admission: 300 concurrent 2.9 MB
# reviews took the server to 563 MiB when each waited its turn with its bytes buffered). A body reserves its
# declared length (chunked: --max-body) before a byte of it is read; bodies over INLINE_BODY may use all but
# SMALL_RESERVE of it, so normal reviews always find room. What does not fit is refused at once: 503 with
# Retry-After, before memory grows.
DEFAULT_BYTES_IN_FLIGHT = 16 * 1024 * 1024
SMALL_RESERVE = 4 * 1024 * 1024
# A connection must complete its TLS handshake and send a complete request head within this many seconds.
DEFAULT_HEADER_TIMEOUT = 5.0
# Connections in the TLS handshake at once: each holds a TLS object and its buffers for up to the header
# deadline. Past it a new connection is closed at once (the API server keeps its connections alive, so it
# rarely needs a new handshake; bench/admission/README.md, handshake flood).
DEFAULT_MAX_HANDSHAKES = 64
# Connections open at once (after the handshake): each uploading one holds up to ~1 MiB of TLS and HTTP
# buffers before any handler runs. Past it, a new connection closes the oldest one that has not sent a
# complete request yet (a trickled head); when there is none, the new one is closed.
DEFAULT_MAX_CONNECTIONS = 128
RETRY_AFTER = "1"
# The webhook's event loop notes the time every HEARTBEAT seconds; /readyz turns 503 once it has not for
# LOOP_STALL seconds (the API server gives each review 5 s: a loop stuck that long answers none).
HEARTBEAT = 1.0
LOOP_STALL = 10.0
TLS_READ_BUFFER = 32 * 1024
OUTCOMES = ("allowed", "patched", "denied", "observed", "skipped", "bad_request", "error", "too_large", "timeout",
            "unsupported_encoding", "busy")


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.requests = Counter("fabricguard_admission_requests", "Admission requests by endpoint and outcome",
                                ["endpoint", "outcome"], registry=r)
        self.latency = Histogram("fabricguard_admission_duration_seconds", "Time to decide one request",
                                 ["endpoint"], registry=r,
                                 buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0))
        self.reloads = Counter("fabricguard_admission_cert_reloads", "Certificate reloads by result",
                               ["result"], registry=r)
        self.cert_loaded = Gauge("fabricguard_admission_cert_loaded_timestamp_seconds",
                                 "When the serving certificate was last loaded", registry=r)
        self.draining = Gauge("fabricguard_admission_draining", "1 after SIGTERM, while finishing requests",
                              registry=r)
        self.bytes_in_flight = Gauge("fabricguard_admission_bytes_in_flight",
                                     "Request-body bytes reserved by requests being read or decided", registry=r)
        self.connections = Gauge("fabricguard_admission_connections", "Open connections to the webhook port",
                                 registry=r)
        self.dropped = Counter("fabricguard_admission_connections_closed",
                               "Connections the server closed to protect itself, by why",
                               ["why"], registry=r)
        self.health_dropped = Counter("fabricguard_admission_health_connections_closed",
                                      "Connections the health port closed to protect itself, by why",
                                      ["why"], registry=r)
        for why in CLOSE_REASONS:
            self.health_dropped.labels(why)


# ---------------------------------------------------------------------------------------------- certificates


class CertReloader:
    """Serves the newest certificate and key that load together, swapping TLS contexts between handshakes.

    :attr:`context` is the listening socket's context; its SNI callback (called on every handshake, with or
    without SNI) hands each connection the live context. A new pair goes into a fresh context, which becomes
    live only when both files load, the key matches the certificate, and neither file changed meanwhile.
    """

    def __init__(self, cert: Path, key: Path, metrics: Metrics | None = None) -> None:
        self.cert = Path(cert)
        self.key = Path(key)
        self.metrics = metrics
        self.generation = 0
        self._failed: tuple[float, float, int, int] | None = None
        self._live, self._stamp = self._build()  # a bad pair at start-up is the caller's error to report
        self.generation = 1
        self.context = _server_context()
        self.context.load_cert_chain(str(self.cert), str(self.key))
        self.context.sni_callback = self._select
        if self.metrics:
            self.metrics.cert_loaded.set(time.time())

    @property
    def live(self) -> ssl.SSLContext:
        return self._live

    def _select(self, sock: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _ctx: ssl.SSLContext) -> None:
        sock.context = self._live

    def _current(self) -> tuple[float, float, int, int]:
        c, k = os.stat(self.cert), os.stat(self.key)
        return (c.st_mtime, k.st_mtime, c.st_ino, k.st_ino)

    def _build(self) -> tuple[ssl.SSLContext, tuple[float, float, int, int]]:
        before = self._current()
        ctx = _server_context()
        # load_cert_chain checks that the key belongs to the certificate (a mismatch is an SSLError).
        ctx.load_cert_chain(str(self.cert), str(self.key))
        if self._current() != before:
            raise OSError("the files changed while they were read; trying again at the next check")
        return ctx, before

    def maybe_reload(self) -> bool:
        """Load the files when they changed; keep serving the previous pair when the new one is not usable."""
        try:
            stamp = self._current()
            if stamp == self._stamp:
                return False
            ctx, stamp = self._build()
        except (OSError, ssl.SSLError) as exc:
            if self.metrics:
                self.metrics.reloads.labels("error").inc()
            with contextlib.suppress(OSError):
                stamp = self._current()
            if stamp != self._failed:  # one line per new state of the files, not one per check
                self._failed = stamp
                log.warning("certificate reload from %s and %s failed, still serving generation %d: %s",
                            self.cert, self.key, self.generation, _one_line(exc))
            return False
        self._live, self._stamp, self._failed = ctx, stamp, None
        self.generation += 1
        log.info("certificate reloaded from %s (generation %d)", self.cert, self.generation)
        if self.metrics:
            self.metrics.reloads.labels("ok").inc()
            self.metrics.cert_loaded.set(time.time())
        return True

    async def watch(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.maybe_reload()


def _server_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


# ---------------------------------------------------------------------------------------------- load limits


class ByteBudget:
    """Request-body bytes in flight over every connection; reservations never wait (a full budget sheds)."""

    def __init__(self, total: int, small_reserve: int, metrics: Metrics | None = None) -> None:
        self.total = total
        self.small_reserve = min(small_reserve, total)
        self.used = 0
        self.metrics = metrics

    def take(self, n: int, *, small: bool) -> bool:
        """Reserve ``n`` bytes; False (nothing reserved) when they do not fit. A large body may not use the
        part kept for small ones."""
        limit = self.total if small else self.total - self.small_reserve
        if self.used + n > limit:
            return False
        self.used += n
        if self.metrics:
            self.metrics.bytes_in_flight.set(self.used)
        return True

    def give(self, n: int) -> None:
        self.used = max(self.used - n, 0)
        if self.metrics:
            self.metrics.bytes_in_flight.set(self.used)


class _Guarded(asyncio.Protocol):
    """Our protocol between a connection's TLS transport and aiohttp's handler for it (:class:`RequestHandler`).

    It forwards every call to aiohttp's handler and keeps, from public API only, what it needs: whether a
    request head has begun (bytes arrived while no request was being handled, or after the current request's
    body ended) and whether one completed (:func:`_track` marks it when aiohttp hands the request to the app).
    A head that has begun must complete within ``header_timeout`` seconds, on the first request and on every
    later one of a keep-alive connection; an idle connection between requests stays open (the API server
    reuses them) until aiohttp's keep-alive timeout. The first deadline runs from the accept, so it also covers
    the TLS handshake and a connection that never sends a byte.

    It fails safe: should aiohttp stop handing :func:`_track` a transport whose ``get_protocol()`` is this
    wrapper, no head would count as complete, so every connection would be closed at its first deadline and
    evicted first (tests/admission/test_admission_load.py pins what is relied on), never kept.
    """

    __slots__ = ("_fg_armed", "_fg_inner", "_fg_request", "_fg_table", "_fg_timer", "idle_since", "peer",
                 "requests")

    def __init__(self, table: _Connections, inner: RequestHandler) -> None:
        self._fg_table = table
        self._fg_inner = inner
        self._fg_timer: asyncio.TimerHandle | None = None
        self._fg_request: web.BaseRequest | None = None  # the request aiohttp is handling, if any
        self._fg_armed = False  # a head has begun and not completed yet
        self.requests = 0  # complete request heads seen
        self.peer = "?"  # the client's address (the per-source cap counts by it)
        self.idle_since = time.monotonic()  # since when no request is in progress (evicted oldest idle first)

    @property
    def idle(self) -> bool:
        """At rest: nothing is being handled, and either no complete request ever came (a silent connection,
        on its first deadline) or no next head has begun (a keep-alive between requests)."""
        return self._fg_request is None and (not self._fg_armed or not self.requests)

    @property
    def handler(self) -> RequestHandler:
        return self._fg_inner

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # The TLS layer buffers up to 256 KiB of ciphertext per connection by default before it stops reading
        # the socket; a review arrives in well under a second from the API server either way.
        with contextlib.suppress(AttributeError, ValueError):
            transport.set_read_buffer_limits(high=TLS_READ_BUFFER)  # type: ignore[attr-defined]
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        self._fg_inner.connection_made(transport)
        self._fg_table.add(self)

    def arm(self, delay: float) -> None:
        """Close the connection in ``delay`` seconds unless a complete request head arrives first."""
        self._fg_armed = True
        if self._fg_timer is None:
            self._fg_timer = asyncio.get_running_loop().call_later(max(delay, 0.0), self._fg_deadline)

    def _disarm(self) -> None:
        self._fg_armed = False
        if self._fg_timer is not None:
            self._fg_timer.cancel()
            self._fg_timer = None

    def _fg_deadline(self) -> None:
        self._fg_timer = None
        if self._fg_request is None and self._fg_armed:
            self._fg_table.closed("header_timeout")
            self.force_close()
        # else: a request is being handled; a head queued behind it gets its deadline when that one is done

    def data_received(self, data: bytes) -> None:
        request = self._fg_request
        if request is None:
            if not self._fg_armed:
                self.arm(self._fg_table.header_timeout)
        elif request.content.is_eof():  # the body is all in: these bytes are the next request's head
            self._fg_armed = True
        self._fg_inner.data_received(data)

    def head_complete(self, request: web.BaseRequest) -> None:
        """aiohttp is handing ``request`` to the app: its head is complete."""
        self._disarm()
        self.requests += 1
        self._fg_request = request

    def request_done(self) -> None:
        self._fg_request = None
        self.idle_since = time.monotonic()
        if self._fg_armed:  # the next head began while this request was handled
            self._fg_armed = False
            self.arm(self._fg_table.header_timeout)

    def eof_received(self) -> None:
        self._fg_inner.eof_received()

    def pause_writing(self) -> None:
        self._fg_inner.pause_writing()

    def resume_writing(self) -> None:
        self._fg_inner.resume_writing()

    def force_close(self) -> None:
        self._fg_inner.force_close()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        self._fg_request = None
        self._fg_table.discard(self)
        self._fg_inner.connection_lost(exc)


@web.middleware
async def _track(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                 ) -> web.StreamResponse:
    """Tell the connection's :class:`_Guarded` (when it has one) that a request head is complete, and when its
    handling ended. The TLS transport's ``get_protocol()`` is our wrapper: aiohttp sees only the transport."""
    transport = request.transport
    proto = transport.get_protocol() if transport is not None else None
    if not isinstance(proto, _Guarded):
        return await handler(request)
    proto.head_complete(request)
    try:
        return await handler(request)
    finally:
        proto.request_done()


class _Connections:
    """The webhook port's connections: at most ``limit`` open after the handshake, and at most ``handshakes``
    in the TLS handshake (see :meth:`admit`)."""

    def __init__(self, limit: int, header_timeout: float, metrics: Metrics,
                 handshakes: int = DEFAULT_MAX_HANDSHAKES, per_source: int | None = None) -> None:
        self.limit = limit
        self.per_source = max(1, per_source if per_source is not None else limit // 2)
        self.by_peer: dict[str, int] = {}  # open connections per client address
        self.header_timeout = header_timeout
        self.metrics = metrics
        self.max_handshakes = max(handshakes, 1)
        self.handshaking: dict[_Accept, str] = {}  # in the TLS handshake, with the peer's address; oldest first
        self.per_peer: dict[str, int] = {}
        self.open: dict[_Guarded, None] = {}  # insertion order: the oldest first

    def admit(self, new: _Accept, peer: str) -> bool:
        """Whether a new connection from ``peer`` may start its TLS handshake.

        Under the bound, yes. At the bound, a peer that would then hold as many handshakes as the busiest one
        is refused (closed at once, before any TLS state exists: a flood from one address costs an accept);
        any other peer's connection closes the oldest handshake of the busiest peer, so a flood from some
        addresses does not lock out the API server's new connections from another.
        """
        if len(self.handshaking) >= self.max_handshakes:
            busiest = max(self.per_peer, key=self.per_peer.__getitem__)
            if self.per_peer.get(peer, 0) + 1 >= self.per_peer[busiest]:
                self.closed("too_many_handshakes")
                return False
            victim = next(a for a, p in self.handshaking.items() if p == busiest)
            self.closed("evicted_handshake")
            self.handshake_done(victim)
            victim.abort()
        self.handshaking[new] = peer
        self.per_peer[peer] = self.per_peer.get(peer, 0) + 1
        return True

    def handshake_done(self, conn: _Accept) -> bool:
        """Forget ``conn``'s handshake; False when it was already forgotten (pushed out by another)."""
        peer = self.handshaking.pop(conn, None)
        if peer is None:
            return False
        left = self.per_peer.pop(peer) - 1
        if left:
            self.per_peer[peer] = left
        return True

    def add(self, conn: _Guarded) -> None:
        """Admit a connection whose handshake completed, making room when needed.

        A client address that holds ``per_source`` connections gets a new one only by closing one of its own
        at rest (silent, or idle between requests; its oldest idle first): one address cannot hold the table.
        A full table closes, for a new connection, the oldest that never sent a request, else the one idle the
        longest: a keep-alive at rest costs its client a reconnect (Go's HTTP client, the API server's, retries
        a request on a connection the server closed while idle), while a refused new connection would cost a
        review. Only when every connection is in the middle of a request is the new one refused."""
        mine = [c for c in self.open if c.peer == conn.peer] if self.by_peer.get(conn.peer, 0) >= self.per_source \
            else None
        if mine is not None and not self._evict(mine, "evicted_per_source"):
            self.closed("too_many_connections" if len(self.open) >= self.limit else "too_many_from_source")
            conn.force_close()
            return
        if len(self.open) >= self.limit and not self._evict(list(self.open), "evicted_idle"):
            self.closed("too_many_connections")
            conn.force_close()
            return
        self.open[conn] = None
        self.by_peer[conn.peer] = self.by_peer.get(conn.peer, 0) + 1
        self.metrics.connections.set(len(self.open))

    def _evict(self, among: list[_Guarded], why: str) -> bool:
        """Close the one of ``among`` that never sent a request (oldest first), else the one idle the longest;
        False when each is in the middle of a request."""
        silent = next((c for c in among if not c.requests and c.idle), None)
        victim = silent or min((c for c in among if c.idle), key=lambda c: c.idle_since, default=None)
        if victim is None:
            return False
        self.discard(victim)
        self.closed("evicted_silent" if silent is not None else why)
        victim.force_close()
        return True

    def discard(self, conn: _Guarded) -> None:
        if self.open.pop(conn, 0) is None:
            left = self.by_peer.pop(conn.peer, 1) - 1
            if left > 0:
                self.by_peer[conn.peer] = left
            self.metrics.connections.set(len(self.open))

    def closed(self, why: str) -> None:
        self.metrics.dropped.labels(why).inc()


class _Accept(asyncio.Protocol):
    """A new TCP connection of the webhook port, until its TLS handshake completes (``loop.start_tls``).

    Past ``max_handshakes`` connections in the handshake, :meth:`_Connections.admit` decides: a new one from
    the busiest address is aborted at once (no TLS object, no task), one from elsewhere takes that address's
    oldest slot.
    A handshake that does not complete within ``header_timeout`` is closed. Once it completes, the connection
    is handed to a :class:`_Guarded` around a fresh aiohttp handler, with what is left of the header deadline.
    """

    def __init__(self, site: _GuardedSite) -> None:
        self.site = site
        # What the TLS layer decrypts right after the handshake, before _upgrade resumes (a TLS 1.3 client
        # sends its request with its Finished message): handed to the connection's handler, in order.
        self.early: list[bytes] = []
        self.eof = False
        self.transport: asyncio.Transport | None = None

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()  # its start_tls fails and its task ends

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        table = self.site.table
        assert isinstance(transport, asyncio.Transport)
        peer = transport.get_extra_info("peername")
        if not table.admit(self, str(peer[0]) if isinstance(peer, tuple) and peer else "?"):
            transport.abort()
            return
        self.transport = transport
        transport.pause_reading()  # the ClientHello is for the TLS layer start_tls puts in place
        task = asyncio.get_running_loop().create_task(self._upgrade(transport))
        self.site.handshakes.add(task)
        task.add_done_callback(self.site.handshakes.discard)

    async def _upgrade(self, transport: asyncio.Transport) -> None:
        site, table = self.site, self.site.table
        opened = time.monotonic()
        loop = asyncio.get_running_loop()
        try:
            tls = await loop.start_tls(transport, self, site.tls, server_side=True,
                                       ssl_handshake_timeout=table.header_timeout)
        except asyncio.CancelledError:
            transport.abort()
            raise
        except Exception:  # a timeout, a reset, a bad ClientHello: start_tls has closed the transport
            if table.handshake_done(self):  # not pushed out by another peer's connection
                table.closed("handshake_failed")
            transport.abort()
            return
        finally:
            table.handshake_done(self)
        if tls is None or tls.is_closing():
            return
        guarded = _Guarded(table, site.runner_server())
        tls.set_protocol(guarded)
        guarded.connection_made(tls)
        if tls.is_closing():
            return
        guarded.arm(table.header_timeout - (time.monotonic() - opened))
        for data in self.early:
            guarded.data_received(data)
        self.early.clear()
        if self.eof:
            guarded.eof_received()

    def data_received(self, data: bytes) -> None:
        self.early.append(data)

    def eof_received(self) -> bool | None:
        self.eof = True
        return None  # the TLS layer closes after an EOF either way

    def connection_lost(self, exc: BaseException | None) -> None:
        pass


class _GuardedSite(web.TCPSite):
    """``web.TCPSite`` whose TLS handshakes are bounded (:class:`_Accept`) and whose connections are
    :class:`_Guarded`. Only public API of aiohttp: ``Server()`` makes the handler a connection gets."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, *, table: _Connections,
                 ssl_context: ssl.SSLContext, backlog: int) -> None:
        super().__init__(runner, host, port, backlog=backlog)  # TLS is ours (start_tls), not the listener's
        self.table = table
        self.tls = ssl_context
        self.fg_runner = runner
        self.fg_host, self.fg_port, self.fg_backlog = host, port, backlog
        self.handshakes: set[asyncio.Task[None]] = set()

    def runner_server(self) -> RequestHandler:
        server = self.fg_runner.server
        assert server is not None
        return server()

    async def start(self) -> None:
        await web.BaseSite.start(self)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Accept(self), self.fg_host, self.fg_port,
                                                backlog=self.fg_backlog)

    async def stop(self) -> None:
        for task in list(self.handshakes):
            task.cancel()
        await super().stop()


# ---------------------------------------------------------------------------------------------- the app


@dataclass
class Lifecycle:
    """Readiness and shutdown state shared by both ports. ``beat``: when the webhook's event loop last ran its
    heartbeat (``time.monotonic``; None before it started)."""

    reloader: CertReloader | None = None
    draining: bool = False
    beat: float | None = None
    stall_after: float = LOOP_STALL

    @property
    def ready(self) -> bool:
        return self.readiness(time.monotonic())[0]

    def readiness(self, now: float) -> tuple[bool, str]:
        """(ready, why): the webhook port can answer reviews."""
        if self.draining:
            return False, "shutting down"
        if self.reloader is not None and self.reloader.generation == 0:
            return False, "no certificate loaded"
        if self.beat is not None and now - self.beat > self.stall_after:
            return False, (f"the webhook's event loop has not run for {now - self.beat:.1f} s (limit "
                           f"{self.stall_after:g} s): reviews are not being answered")
        return True, "ok"

    async def heartbeat(self, interval: float = HEARTBEAT) -> None:
        """Note the time on the webhook's loop every ``interval`` seconds, until cancelled."""
        while True:
            self.beat = time.monotonic()
            await asyncio.sleep(interval)


_JSON = "application/json"


def _reply(status: int, body: dict[str, Any], *, close: bool = False,
           retry_after: str | None = None) -> web.Response:
    resp = web.Response(status=status, body=json.dumps(body, separators=(",", ":")).encode(), content_type=_JSON)
    if retry_after is not None:
        resp.headers["Retry-After"] = retry_after
    if close:
        resp.force_close()
    return resp


def _uid_of(body: bytes) -> str | None:
    try:
        uid = json.loads(body)["request"]["uid"]
    except Exception:
        return None
    return uid if isinstance(uid, str) and uid else None


def _health_routes(app: web.Application, state: Lifecycle, metrics: Metrics) -> None:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        ok, why = state.readiness(time.monotonic())
        return web.Response(status=200 if ok else 503, text=why)

    async def metrics_view(_: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(metrics.registry))
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_view)


def build_app(admission: Admission, *, max_body: int = DEFAULT_MAX_BODY, metrics: Metrics | None = None,
              reloader: CertReloader | None = None, reload_interval: float = 5.0,
              body_timeout: float = DEFAULT_BODY_TIMEOUT, state: Lifecycle | None = None,
              bytes_in_flight: int = DEFAULT_BYTES_IN_FLIGHT) -> web.Application:
    metrics = metrics or Metrics()
    state = state or Lifecycle(reloader)
    app = web.Application(client_max_size=max_body, middlewares=[_track])
    workers = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fabricguard-decide")
    # Never below one largest body plus the small reserve: a single review the limits allow is always read.
    budget = ByteBudget(max(bytes_in_flight, max_body + SMALL_RESERVE), SMALL_RESERVE, metrics)

    def endpoint(name: Endpoint) -> Callable[[web.Request], Awaitable[web.Response]]:
        counter = {o: metrics.requests.labels(name, o) for o in OUTCOMES}
        hist = metrics.latency.labels(name)

        def refuse(outcome: str, status: int, error: str, retry_after: str | None = None) -> web.Response:
            counter[outcome].inc()
            return _reply(status, {"error": error}, close=True, retry_after=retry_after)

        async def read(request: web.Request) -> bytes | web.Response:
            try:
                async with asyncio.timeout(body_timeout):  # no extra task per request, unlike wait_for
                    return await request.read()
            except web.HTTPRequestEntityTooLarge:
                return refuse("too_large", 413, f"request body over {max_body} bytes; fabricguard reads at most "
                                                f"{max_body} (flag --max-body)")
            except TimeoutError:
                return refuse("timeout", 408, f"request body not received within {body_timeout:g} s")

        async def handle(request: web.Request) -> web.Response:
            start = time.perf_counter()
            encoding = request.headers.get("Content-Encoding", "").strip().lower()
            if encoding not in ("", "identity"):
                return refuse("unsupported_encoding", 415, f"Content-Encoding {encoding!r} is not accepted; send "
                                                           "the AdmissionReview as plain JSON")
            length = request.content_length
            if length is not None and length > max_body:
                return refuse("too_large", 413, f"Content-Length {length} is over {max_body} bytes; fabricguard "
                                                f"reads at most {max_body} (flag --max-body)")
            small = length is not None and length <= INLINE_BODY
            reserved = length if length is not None else max_body  # chunked: as much as it may be
            if not budget.take(reserved, small=small):
                resp = refuse("busy", 503, f"too many review bytes in flight ({budget.used} of {budget.total}); "
                                           "retry", retry_after=RETRY_AFTER)
                # Answer and close at once: aiohttp would otherwise read (and decrypt) the unwanted body for the
                # lingering second, which under a flood is most of the event loop's time.
                await resp.prepare(request)
                await resp.write_eof()
                request.protocol.force_close()
                return resp
            try:
                body = await read(request)
                if isinstance(body, web.Response):
                    return body
                if len(body) <= INLINE_BODY:  # declared small, or chunked but small after all
                    decision = _decide(admission, name, body)
                else:
                    loop = asyncio.get_running_loop()
                    decision = await loop.run_in_executor(workers, _decide, admission, name, body)
            finally:
                budget.give(reserved)
            counter[decision.outcome].inc()
            hist.observe(time.perf_counter() - start)
            return _reply(decision.status, decision.body, close=state.draining)

        return handle

    app.router.add_post("/mutate", endpoint("mutate"))
    app.router.add_post("/validate", endpoint("validate"))
    _health_routes(app, state, metrics)

    async def _lifetime(app_: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(reloader.watch(reload_interval)) if reloader is not None else None
        yield
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        workers.shutdown(wait=False, cancel_futures=True)

    app.cleanup_ctx.append(_lifetime)
    return app


def _decide(admission: Admission, name: Endpoint, body: bytes) -> Decision:
    """The decision for one body; an unexpected error becomes a denied review and one log line."""
    try:
        return admission.handle(name, body)
    except Exception as exc:  # a bug must not drop the API server's connection
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else "?"
        log.error("decision failed on /%s: %s: %s (at %s)", name, type(exc).__name__, _one_line(exc), where)
        uid = _uid_of(body)
        if uid is None:
            return Decision(500, {"error": f"internal error: {type(exc).__name__}"}, "error")
        return Decision(200, rv.deny(uid, f"fabricguard internal error ({type(exc).__name__}); see the "
                                          "webhook's log", 500, "InternalError"), "error")


class HealthApp:
    """What the health port answers (``health_http.Answering``): ``/healthz`` (the process is alive),
    ``/readyz`` (:meth:`Lifecycle.readiness`: the webhook port can answer reviews) and ``/metrics`` (rendered
    on a thread with a deadline). Called on the health port's own loop."""

    def __init__(self, state: Lifecycle, metrics: Metrics, render_timeout: float = RENDER_TIMEOUT) -> None:
        self.state = state
        self._render = Render(metrics)
        self._timeout = render_timeout

    async def answer(self, path: str, accept: str) -> Answer:
        if path == "/healthz":
            return 200, "text/plain", b"ok"
        if path == "/readyz":
            ok, why = self.state.readiness(time.monotonic())
            return (200 if ok else 503), "text/plain", why.encode()
        if path == "/metrics":
            return await self._render(accept, self._timeout)
        return 404, "text/plain", b"/healthz, /readyz or /metrics\n"


def health_server(state: Lifecycle, metrics: Metrics, host: str, port: int) -> MetricsServer:
    """The plain-HTTP health port on the one bounded server; ``OSError`` when it cannot listen."""
    return MetricsServer(HealthApp(state, metrics), host, port, name="fabricguard-health",
                         on_close=lambda why: metrics.health_dropped.labels(why).inc())


# ---------------------------------------------------------------------------------------------- running


@dataclass
class Running:
    """A started webhook: its runners, bound ports, certificate reloader and lifecycle state."""

    runner: web.AppRunner
    port: int
    reloader: CertReloader
    state: Lifecycle
    metrics: Metrics
    health: MetricsServer | None = None
    table: _Connections | None = None  # the webhook port's connections
    beat: asyncio.Task[None] | None = None  # the webhook loop's heartbeat (Lifecycle.heartbeat)

    @property
    def health_port(self) -> int | None:
        return self.health.port if self.health is not None else None

    async def drain(self, delay: float) -> None:
        """Turn not-ready, keep answering for ``delay`` seconds, then stop and finish in-flight requests."""
        self.state.draining = True
        self.metrics.draining.set(1)
        log.info("draining: not ready, still answering for %g s", delay)
        await asyncio.sleep(delay)
        await self.cleanup()

    async def cleanup(self) -> None:
        if self.beat is not None:
            self.beat.cancel()
        await self.runner.cleanup()
        if self.health is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.health.close)


def _bound_port(site: web.TCPSite, default: int) -> int:
    server = getattr(site, "_server", None)
    if server is not None and server.sockets:
        return int(server.sockets[0].getsockname()[1])
    return default


async def start(admission: Admission, cert: Path, key: Path, *, host: str = "127.0.0.1", port: int = 8443,
                max_body: int = DEFAULT_MAX_BODY, reload_interval: float = 5.0,
                body_timeout: float = DEFAULT_BODY_TIMEOUT, health_port: int | None = None,
                shutdown_timeout: float = 15.0, metrics: Metrics | None = None,
                header_timeout: float = DEFAULT_HEADER_TIMEOUT, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                bytes_in_flight: int = DEFAULT_BYTES_IN_FLIGHT,
                max_handshakes: int = DEFAULT_MAX_HANDSHAKES, max_per_source: int | None = None) -> Running:
    """Start serving (and, with ``health_port``, the plain-HTTP health port); ``cleanup()`` stops.
    ``max_per_source``: connections one client address may hold (default half of ``max_connections``)."""
    metrics = metrics or Metrics()
    reloader = CertReloader(cert, key, metrics)
    state = Lifecycle(reloader)
    app = build_app(admission, max_body=max_body, metrics=metrics, reloader=reloader,
                    reload_interval=reload_interval, body_timeout=body_timeout, state=state,
                    bytes_in_flight=bytes_in_flight)
    # lingering_time: after refusing a body, discard what the client still sends for 1 s (so it can read the
    # answer), not aiohttp's default 10 s, which lets stalled clients hold connections. auto_decompress off:
    # aiohttp would otherwise inflate a compressed body as it arrives, before the handler can refuse it.
    # read_bufsize: each connection buffers at most twice this much of a body the handler has not read yet.
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=30, shutdown_timeout=shutdown_timeout,
                           lingering_time=1.0, auto_decompress=False, read_bufsize=16 * 1024)
    await runner.setup()
    table = _Connections(max_connections, header_timeout, metrics, max_handshakes, max_per_source)
    site = _GuardedSite(runner, host, port, table=table, ssl_context=reloader.context, backlog=1024)
    await site.start()
    running = Running(runner, _bound_port(site, port), reloader, state, metrics, table=table)
    running.beat = asyncio.create_task(state.heartbeat())
    if health_port is not None:
        try:
            running.health = await asyncio.get_running_loop().run_in_executor(
                None, health_server, state, metrics, host, health_port)
        except BaseException:
            await running.cleanup()
            raise
    return running


def serve(admission: Admission, cert: Path, key: Path, *, host: str, port: int, max_body: int,
          reload_interval: float, body_timeout: float = DEFAULT_BODY_TIMEOUT, health_port: int | None = None,
          shutdown_delay: float = 5.0, shutdown_timeout: float = 15.0,
          background: Callable[[asyncio.Event], Awaitable[None]] | None = None) -> None:
    """Run until SIGTERM or SIGINT, then drain (the container's entry point). ``background`` runs beside the
    server until the stop (the ResourceClaimTemplate cache of DRA pools, admission/templates.py)."""

    async def main() -> None:
        running = await start(admission, cert, key, host=host, port=port, max_body=max_body,
                              reload_interval=reload_interval, body_timeout=body_timeout,
                              health_port=health_port, shutdown_timeout=shutdown_timeout)
        log.info("fabricguard admission listening on https://%s:%d%s", host, running.port,
                 f", health on http://{host}:{running.health_port}" if running.health_port is not None else "")
        # Everything built at start-up (profile, plans, app) is long-lived: keep it out of GC passes.
        gc.collect()
        gc.freeze()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        task: asyncio.Future[None] | None = (asyncio.ensure_future(background(stop)) if background is not None
                                             else None)
        await stop.wait()
        if task is not None:
            task.cancel()
        await running.drain(shutdown_delay)
        log.info("stopped")

    # The standard event loop, not uvloop: its TLS layer reads ciphertext in chunks of SSLProtocol.max_size
    # (256 KiB by default, per connection), which can be made smaller; uvloop's cannot. Under 300 concurrent
    # 2.9 MB reviews that is 141 MiB at the peak instead of 237 MiB (bench/admission/README.md).
    import asyncio.sslproto

    asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER
    asyncio.run(main())
