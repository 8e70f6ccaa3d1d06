"""``/healthz`` and ``/metrics`` of the agent: a small asyncio HTTP server on a thread and event loop of its own.

Not aiohttp (the agent's memory target is under 64 MiB and aiohttp adds ~11 MiB for two GET endpoints), and
no longer a thread per connection: ``ThreadingWSGIServer`` gave every connection its own thread for as long
as the client kept it open, so ~2,300 idle connections made 2,300 threads and doubled the agent's memory
(``bench/agent/README.md``). Here a connection costs a socket and a small buffer on one event loop, and
every connection is bounded:

* the request head must arrive within :data:`HEADER_TIMEOUT` seconds and fit in :data:`MAX_HEAD` bytes;
* at most :data:`MAX_CONNECTIONS` are open at once; a new one past that closes the oldest that has not sent a
  complete request yet (a prober's fresh connection always gets in, idle ones make room), or answers 503 with
  ``Retry-After`` when every open connection is busy being answered;
* one request per connection (``Connection: close``), as the WSGI server did;
* ``/metrics`` reads sysfs and procfs (``agent.fabric_metrics``), which can block: it is rendered on a daemon
  thread with a deadline (:data:`RENDER_TIMEOUT`); at most one such thread exists, and while it is stuck a
  scrape answers 503 instead of starting another.

``/healthz`` answers 503 once no run has finished for ``stale_after`` seconds: a hung check (a stat that never
returns, a wedged NVML) gets the pod restarted by its liveness probe instead of silently stopping the heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from fabricguard.agent.metrics import AgentMetrics

HEADER_TIMEOUT = 5.0  # the kubelet's probe and Prometheus send their request at once
MAX_HEAD = 8 * 1024
MAX_CONNECTIONS = 64
RENDER_TIMEOUT = 10.0  # Prometheus's default scrape timeout

Answer = tuple[int, str, bytes]  # (status, content type, body)


def health(last_run: float | None, started: float, stale_after: float, now: float) -> tuple[bool, str]:
    """(healthy, text): unhealthy once neither a run nor the start is within ``stale_after`` seconds."""
    since = now - (last_run if last_run is not None else started)
    if since > stale_after:
        what = "no run has finished" if last_run is None else "the last run finished"
        return False, f"{what} {since:.0f} s ago (limit {stale_after:.0f} s)\n"
    return True, "ok\n"


class HasRegistry(Protocol):
    registry: CollectorRegistry


class Answering(Protocol):
    """What :class:`MetricsServer` serves: the agent's :class:`App`, the controller's and the webhook's."""

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

            self._busy = threading.Thread(target=work, name="agent-metrics-render", daemon=True)
            self._busy.start()
        try:
            async with asyncio.timeout(timeout):
                body = await done
        except TimeoutError:
            return 503, "text/plain", f"collecting the metrics took over {timeout:g} s\n".encode()
        except Exception as exc:
            return 500, "text/plain", f"collecting the metrics failed: {type(exc).__name__}: {exc}\n".encode()
        return 200, content_type, body


@dataclass
class App:
    """What the two paths answer; ``answer`` is called on the server's loop for every request."""

    metrics: AgentMetrics
    last_run: Callable[[], float | None]
    started: float
    stale_after: float
    render_timeout: float = RENDER_TIMEOUT
    _render: Render | None = field(default=None, repr=False)

    async def answer(self, path: str, accept: str) -> Answer:
        if path == "/healthz":
            ok, text = health(self.last_run(), self.started, self.stale_after, time.time())
            return (200 if ok else 503), "text/plain", text.encode()
        if path == "/metrics":
            if self._render is None:
                self._render = Render(self.metrics)
            return await self._render(accept, self.render_timeout)
        return 404, "text/plain", b"/healthz or /metrics\n"


def make_app(metrics: AgentMetrics, last_run: Callable[[], float | None], started: float,
             stale_after: float) -> App:
    return App(metrics, last_run, started, stale_after)


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
    answering: bool = False


class MetricsServer:
    """The app on a daemon thread with its own event loop; ``close()`` stops it."""

    def __init__(self, app: Answering, host: str, port: int, *, max_connections: int = MAX_CONNECTIONS,
                 header_timeout: float = HEADER_TIMEOUT, name: str = "agent-http") -> None:
        self.app = app
        self.max_connections = max_connections
        self.header_timeout = header_timeout
        self._conns: dict[asyncio.StreamWriter, _Conn] = {}
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self.refused = 0  # connections answered 503 at once (every slot busy answering)
        self.evicted = 0  # idle connections closed to make room
        self.port = port
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(host, port), name=name, daemon=True)
        self.thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error  # OSError: the port is taken, the address is not ours

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

    def _make_room(self) -> bool:
        """Close the oldest connection still waiting for its request head; False when none is idle."""
        idle = [c for c in self._conns.values() if not c.answering]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.opened)
        self._conns.pop(oldest.writer, None)
        oldest.writer.transport.abort()
        self.evicted += 1
        return True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._conns) >= self.max_connections and not self._make_room():
            self.refused += 1
            writer.write(BUSY)
            writer.transport.close()  # after the buffered answer is written
            return
        conn = self._conns[writer] = _Conn(writer, time.monotonic())
        try:
            try:
                async with asyncio.timeout(self.header_timeout):
                    head = await reader.readuntil(b"\r\n\r\n")
            except TimeoutError:
                writer.write(_response(408, "text/plain", b"request head not received in time\n"))
                return
            except asyncio.LimitOverrunError:
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
            self._conns.pop(writer, None)
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


def start(app: App, host: str, port: int) -> MetricsServer:
    return MetricsServer(app, host, port)
