"""``/healthz`` and ``/metrics`` of the agent (aiohttp).

``/healthz`` answers 503 once no run has finished for ``stale_after`` seconds: a hung check (an NFS stat that
never returns, a wedged NVML) gets the pod restarted by its liveness probe instead of silently stopping the
heartbeat.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from fabricguard.agent.metrics import AgentMetrics


def make_app(
    metrics: AgentMetrics, last_run: Callable[[], float | None], started: float, stale_after: float
) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        now = time.time()
        last = last_run()
        since = now - (last if last is not None else started)
        if since > stale_after:
            what = "no run has finished" if last is None else "the last run finished"
            return web.Response(status=503, text=f"{what} {since:.0f} s ago (limit {stale_after:.0f} s)\n")
        return web.Response(text="ok\n")

    async def metrics_handler(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_handler)
    return app


async def start(app: web.Application, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
