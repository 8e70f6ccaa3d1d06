"""The one bounded HTTP server for every component's ``/healthz``, ``/readyz`` and ``/metrics``.

The agent, the controller and the admission webhook's health port all serve their probes and metrics with
:class:`MetricsServer`: a small asyncio server on a daemon thread and event loop of its own (so the kubelet's
probe never queues behind the component's own work: a pass, TLS handshakes, a decision), never a thread per
connection and never aiohttp (the agent's memory target is under 64 MiB; aiohttp adds ~11 MiB for a few GET
endpoints, and its default keep-alive lets idle clients hold connections). A connection costs a socket and a
small buffer on one event loop, and every connection is bounded:

* the request head must arrive within ``header_timeout`` seconds (:data:`HEADER_TIMEOUT`) and fit in
  :data:`MAX_HEAD` bytes, else 408 or 431 and the connection is closed (a trickled head included);
* one request per connection (``Connection: close``): no keep-alive to sit on, and an answer's write must
  drain within the header deadline (a client that does not read is cut);
* at most ``max_connections`` (:data:`MAX_CONNECTIONS`) are open; a new one past that closes the oldest that
  has not sent a complete request yet (a prober's fresh connection always gets in, idle ones make room), or
  is answered 503 with ``Retry-After`` when every open one is being answered;
* one client address holds at most ``max_per_source`` (half the table by default): past it, a new connection
  from that address closes that address's own oldest idle one (or is answered 503), so one address never
  evicts the kubelet's or Prometheus's connection;
* ``/metrics`` may block (the agent reads sysfs and procfs): :class:`Render` renders on a daemon thread with a
  deadline (:data:`RENDER_TIMEOUT`); at most one such thread exists, and while it is stuck a scrape answers
  503 instead of starting another.

Every connection the server closes to protect itself is counted (``closed``, by why) and handed to
``on_close`` so a component can export it as a metric.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

HEADER_TIMEOUT = 5.0  # the kubelet's probe and Prometheus send their request at once
MAX_HEAD = 8 * 1024
MAX_CONNECTIONS = 64
RENDER_TIMEOUT = 10.0  # Prometheus's default scrape timeout
# Why a connection was closed by the server (the label values of each component's counter).
CLOSE_REASONS = ("evicted_idle", "evicted_per_source", "busy", "header_timeout", "head_too_large")

Answer = tuple[int, str, bytes]  # (status, content type, body)


class HasRegistry(Protocol):
    registry: CollectorRegistry


class Answering(Protocol):
    """What :class:`MetricsServer` serves: the agent's ``App``, the controller's and the webhook's ``HealthApp``."""

    async def answer(self, path: str, accept: str) -> Answer: ...


class Render:
    """Renders the registry on a daemon thread with a deadline; never more than one such thread at a time."""

    def __init__(self, metrics: HasRegistry) -> None:
        self.metrics = metrics
        self._busy: threading.Thread | None = None
        self._lock = threading.Lock()

    async def __call__(self, accept: str, timeout: float) -> Answer:
        encoder, content_type = choose_encoder(accept)
        with self._lock:
            if self._busy is not None and self._busy.is_alive():
                return 503, "text/plain", b"an earlier /metrics collection has not returned yet\n"
            loop = asyncio.get_running_loop()
            done: asyncio.Future[bytes] = loop.create_future()

            def settle(value: bytes | BaseException) -> None:
                if done.done():
                    return
                if isinstance(value, BaseException):
                    done.set_exception(value)
                else:
                    done.set_result(value)

            def work() -> None:
                try:
                    value: bytes | BaseException = encoder(self.metrics.registry)
                except Exception as exc:  # a collector that fails: a 500 naming it, never a dead server
                    value = exc
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(settle, value)

            self._busy = threading.Thread(target=work, name="metrics-render", daemon=True)
            self._busy.start()
        try:
            async with asyncio.timeout(timeout):
                body = await done
        except TimeoutError:
            return 503, "text/plain", f"collecting the metrics took over {timeout:g} s\n".encode()
        except Exception as exc:
            return 500, "text/plain", f"collecting the metrics failed: {type(exc).__name__}: {exc}\n".encode()
        return 200, content_type, body


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
            431: "Request Header Fields Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}


def _response(status: int, content_type: str, body: bytes, extra: str = "", head_only: bool = False) -> bytes:
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n")
    return head.encode() + (b"" if head_only else body)


BUSY = _response(503, "text/plain", b"too many connections; retry\n", "Retry-After: 1\r\n")


@dataclass(eq=False)
class _Conn:
    writer: asyncio.StreamWriter
    opened: float
    peer: str
    answering: bool = False


class MetricsServer:
    """``app`` on a daemon thread with its own event loop; ``close()`` stops it. ``OSError`` from the
    constructor when the port cannot be bound. ``on_close(why)`` is called (on the server's thread) for each
    connection closed to protect the server, ``why`` one of :data:`CLOSE_REASONS`."""

    def __init__(self, app: Answering, host: str, port: int, *, max_connections: int = MAX_CONNECTIONS,
                 header_timeout: float = HEADER_TIMEOUT, max_per_source: int | None = None,
                 name: str = "agent-http", on_close: Callable[[str], None] | None = None) -> None:
        self.app = app
        self.max_connections = max(1, max_connections)
        self.max_per_source = max(1, max_per_source if max_per_source is not None else self.max_connections // 2)
        self.header_timeout = header_timeout
        self.on_close = on_close
        self._conns: dict[asyncio.StreamWriter, _Conn] = {}
        self._by_peer: dict[str, int] = {}
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self.closed: dict[str, int] = dict.fromkeys(CLOSE_REASONS, 0)
        self.port = port
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(host, port), name=name, daemon=True)
        self.thread.start()
        if not self._ready.wait(10):
            raise OSError(f"the port {port} did not start listening within 10 s")
        if self._error is not None:
            raise self._error  # OSError: the port is taken, the address is not ours

    @property
    def refused(self) -> int:
        """Connections answered 503 at once (every slot they could take busy answering)."""
        return self.closed["busy"]

    @property
    def evicted(self) -> int:
        """Idle connections closed to make room for a new one."""
        return self.closed["evicted_idle"] + self.closed["evicted_per_source"]

    def _count(self, why: str) -> None:
        self.closed[why] += 1
        if self.on_close is not None:
            with contextlib.suppress(Exception):  # a metric must never take the server down
                self.on_close(why)

    def _run(self, host: str, port: int) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._serve, host, port, limit=MAX_HEAD, backlog=256))
            self.port = int(self._server.sockets[0].getsockname()[1])
        except BaseException as exc:  # handed to the constructor, which raises it in the caller
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()

    def _make_room(self, peer: str | None, why: str) -> bool:
        """Close the oldest connection (of ``peer``, when given) still waiting for its request head; False when
        none is."""
        idle = [c for c in self._conns.values() if not c.answering and (peer is None or c.peer == peer)]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.opened)
        self._forget(oldest)
        oldest.writer.transport.abort()
        self._count(why)
        return True

    def _forget(self, conn: _Conn) -> None:
        if self._conns.pop(conn.writer, None) is not None:
            left = self._by_peer.pop(conn.peer, 1) - 1
            if left > 0:
                self._by_peer[conn.peer] = left

    def _admit(self, peer: str) -> bool:
        if self._by_peer.get(peer, 0) >= self.max_per_source:
            return self._make_room(peer, "evicted_per_source")
        return len(self._conns) < self.max_connections or self._make_room(None, "evicted_idle")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        addr = writer.get_extra_info("peername")
        peer = str(addr[0]) if isinstance(addr, tuple) and addr else "?"
        if not self._admit(peer):
            self._count("busy")
            writer.write(BUSY)
            writer.transport.close()  # after the buffered answer is written
            return
        conn = self._conns[writer] = _Conn(writer, time.monotonic(), peer)
        self._by_peer[peer] = self._by_peer.get(peer, 0) + 1
        try:
            try:
                async with asyncio.timeout(self.header_timeout):
                    head = await reader.readuntil(b"\r\n\r\n")
            except TimeoutError:
                self._count("header_timeout")
                writer.write(_response(408, "text/plain", b"request head not received in time\n"))
                return
            except asyncio.LimitOverrunError:
                self._count("head_too_large")
                writer.write(_response(431, "text/plain", b"request head too large\n"))
                return
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            conn.answering = True
            method, target, accept = _parse(head)
            if method not in ("GET", "HEAD"):
                writer.write(_response(405 if method else 400, "text/plain", b"GET /healthz or /metrics\n"))
                return
            status, ctype, body = await self.app.answer(urlsplit(target).path, accept)
            writer.write(_response(status, ctype, body, head_only=method == "HEAD"))
            with contextlib.suppress(ConnectionError, TimeoutError):
                async with asyncio.timeout(self.header_timeout):
                    await writer.drain()
        finally:
            self._forget(conn)
            writer.transport.close()

    @property
    def server_port(self) -> int:
        return self.port

    def shutdown(self) -> None:
        self.close()

    def close(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for c in list(self._conns.values()):
                c.writer.transport.abort()

        if self.thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self.thread.join(5)


def _parse(head: bytes) -> tuple[str, str, str]:
    """(method, target, Accept header) of a request head; ("", "", "") when the request line is not HTTP."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return "", "", ""
    accept = ""
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "accept":
            accept = value.strip()
    return parts[0], parts[1], accept
