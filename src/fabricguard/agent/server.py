"""``/healthz`` and ``/metrics`` of the agent: prometheus-client's WSGI app on a stdlib threading server.

Not aiohttp: the agent's memory target is under 64 MiB, and aiohttp would add ~11 MiB for two GET
endpoints. This is how prometheus-client's own ``start_http_server`` serves, plus one path.

``/healthz`` answers 503 once no run has finished for ``stale_after`` seconds: a hung check (a stat that never
returns, a wedged NVML) gets the pod restarted by its liveness probe instead of silently stopping the heartbeat.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from fabricguard.agent.metrics import AgentMetrics


def health(last_run: float | None, started: float, stale_after: float, now: float) -> tuple[bool, str]:
    """(healthy, text): unhealthy once neither a run nor the start is within ``stale_after`` seconds."""
    since = now - (last_run if last_run is not None else started)
    if since > stale_after:
        what = "no run has finished" if last_run is None else "the last run finished"
        return False, f"{what} {since:.0f} s ago (limit {stale_after:.0f} s)\n"
    return True, "ok\n"


def make_app(
    metrics: AgentMetrics, last_run: Callable[[], float | None], started: float, stale_after: float
) -> Callable[..., Iterable[bytes]]:
    prom = make_wsgi_app(metrics.registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/healthz":
            ok, text = health(last_run(), started, stale_after, time.time())
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return [text.encode()]
        if environ.get("PATH_INFO") == "/metrics":
            body: Iterable[bytes] = prom(environ, start_response)
            return body
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"/healthz or /metrics\n"]

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Probes every few seconds would flood the log."""


class MetricsServer:
    """The WSGI app on a daemon thread; ``close()`` stops it."""

    def __init__(self, app: Callable[..., Iterable[bytes]], host: str, port: int) -> None:
        self.httpd = make_server(host, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="agent-http", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def start(app: Callable[..., Iterable[bytes]], host: str, port: int) -> MetricsServer:
    return MetricsServer(app, host, port)
