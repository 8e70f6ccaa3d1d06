"""``/healthz`` and ``/metrics`` of the agent, served by the one bounded server (``fabricguard.health_http``).

``/healthz`` answers 503 once no run has finished for ``stale_after`` seconds: a hung check (a stat that never
returns, a wedged NVML) gets the pod restarted by its liveness probe instead of silently stopping the heartbeat.
``/metrics`` reads sysfs and procfs (``agent.fabric_metrics``), which can block: it is rendered on a thread with
a deadline (``health_http.Render``). Not aiohttp, and not a thread per connection: ``ThreadingWSGIServer`` once
gave every idle connection its own thread, and ~2,300 of them doubled the agent's memory
(``bench/agent/README.md``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fabricguard.agent.metrics import AgentMetrics
from fabricguard.health_http import RENDER_TIMEOUT, Answer, MetricsServer, Render

__all__ = ["RENDER_TIMEOUT", "App", "MetricsServer", "Render", "health", "make_app", "start"]


def health(last_run: float | None, started: float, stale_after: float, now: float) -> tuple[bool, str]:
    """(healthy, text): unhealthy once neither a run nor the start is within ``stale_after`` seconds."""
    since = now - (last_run if last_run is not None else started)
    if since > stale_after:
        what = "no run has finished" if last_run is None else "the last run finished"
        return False, f"{what} {since:.0f} s ago (limit {stale_after:.0f} s)\n"
    return True, "ok\n"


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


def start(app: App, host: str, port: int) -> MetricsServer:
    return MetricsServer(app, host, port)
