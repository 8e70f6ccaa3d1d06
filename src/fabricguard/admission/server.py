"""The admission webhook's HTTPS server (aiohttp): /mutate, /validate, /healthz, /readyz and /metrics.

Every decision comes from :class:`fabricguard.admission.decide.Admission`; this module only moves bytes. A
body that is not an AdmissionReview v1 gets an HTTP 400 (or, when a uid can be read, a denied review saying
why), a body over ``max_body`` bytes gets a 413, and an unexpected error inside a decision is answered with a
denied review instead of a dropped connection. The certificate and key are re-read when their files change
(cert-manager rotates them in place), without a restart: new TLS handshakes use the new pair.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission, Endpoint

log = logging.getLogger("fabricguard.admission")

DEFAULT_MAX_BODY = 3 * 1024 * 1024  # etcd stores objects up to 1.5 MiB; a review carries object and oldObject.


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


class CertReloader:
    """Keeps an SSLContext's certificate in step with the files on disk."""

    def __init__(self, cert: Path, key: Path, metrics: Metrics | None = None) -> None:
        self.cert = Path(cert)
        self.key = Path(key)
        self.metrics = metrics
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp: tuple[float, float, int, int] | None = None
        self.generation = 0
        self.load()

    def _current(self) -> tuple[float, float, int, int]:
        c, k = os.stat(self.cert), os.stat(self.key)
        return (c.st_mtime, k.st_mtime, c.st_ino, k.st_ino)

    def load(self) -> None:
        stamp = self._current()
        self.context.load_cert_chain(str(self.cert), str(self.key))
        self._stamp = stamp
        self.generation += 1
        if self.metrics:
            self.metrics.cert_loaded.set(time.time())

    def maybe_reload(self) -> bool:
        """Reload when either file changed; keep the old pair (and report) if the new one cannot be read."""
        try:
            if self._current() == self._stamp:
                return False
            self.load()
        except (OSError, ssl.SSLError) as exc:
            log.warning("certificate reload failed, keeping the previous one: %s", exc)
            if self.metrics:
                self.metrics.reloads.labels("error").inc()
            return False
        log.info("certificate reloaded from %s", self.cert)
        if self.metrics:
            self.metrics.reloads.labels("ok").inc()
        return True

    async def watch(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.maybe_reload()


_JSON = "application/json"


def _reply(status: int, body: dict) -> web.Response:
    return web.Response(status=status, body=json.dumps(body, separators=(",", ":")).encode(), content_type=_JSON)


def build_app(admission: Admission, *, max_body: int = DEFAULT_MAX_BODY, metrics: Metrics | None = None,
              reloader: CertReloader | None = None, reload_interval: float = 5.0) -> web.Application:
    metrics = metrics or Metrics()
    app = web.Application(client_max_size=max_body)

    def endpoint(name: Endpoint) -> Callable[[web.Request], Awaitable[web.Response]]:
        counter = {o: metrics.requests.labels(name, o) for o in
                   ("allowed", "patched", "denied", "skipped", "bad_request", "error", "too_large")}
        hist = metrics.latency.labels(name)

        async def handle(request: web.Request) -> web.Response:
            start = time.perf_counter()
            try:
                body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                counter["too_large"].inc()
                return _reply(413, {"error": f"request body over {max_body} bytes; fabricguard reads at most "
                                             f"{max_body} (flag --max-body)"})
            try:
                decision = admission.handle(name, body)
            except Exception as exc:  # a bug must not drop the API server's connection
                log.exception("decision failed")
                counter["error"].inc()
                try:
                    uid = json.loads(body)["request"]["uid"]
                except Exception:
                    return _reply(500, {"error": f"internal error: {type(exc).__name__}"})
                return _reply(200, rv.deny(str(uid), f"fabricguard internal error ({type(exc).__name__}); "
                                                     "see the webhook's log", 500, "InternalError"))
            counter[decision.outcome].inc()
            hist.observe(time.perf_counter() - start)
            return _reply(decision.status, decision.body)

        return handle

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if reloader is not None and reloader.generation == 0:
            return web.Response(status=503, text="no certificate loaded")
        return web.Response(text="ok")

    async def metrics_view(_: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(metrics.registry))
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    app.router.add_post("/mutate", endpoint("mutate"))
    app.router.add_post("/validate", endpoint("validate"))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_view)

    if reloader is not None:
        async def _watch(app_: web.Application) -> AsyncIterator[None]:
            task = asyncio.create_task(reloader.watch(reload_interval))
            yield
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        app.cleanup_ctx.append(_watch)
    return app


async def start(admission: Admission, cert: Path, key: Path, *, host: str = "127.0.0.1", port: int = 8443,
                max_body: int = DEFAULT_MAX_BODY, reload_interval: float = 5.0,
                metrics: Metrics | None = None) -> tuple[web.AppRunner, int, CertReloader]:
    """Start serving; return the runner (call ``cleanup()`` to stop), the bound port and the reloader."""
    metrics = metrics or Metrics()
    reloader = CertReloader(cert, key, metrics)
    app = build_app(admission, max_body=max_body, metrics=metrics, reloader=reloader,
                    reload_interval=reload_interval)
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=30)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=reloader.context, backlog=1024)
    await site.start()
    bound = port
    server = getattr(site, "_server", None)
    if server is not None and server.sockets:
        bound = server.sockets[0].getsockname()[1]
    return runner, bound, reloader


def serve(admission: Admission, cert: Path, key: Path, *, host: str, port: int, max_body: int,
          reload_interval: float) -> None:
    """Run until interrupted (the container's entry point)."""

    async def main() -> None:
        runner, bound, _ = await start(admission, cert, key, host=host, port=port, max_body=max_body,
                                       reload_interval=reload_interval)
        log.info("fabricguard admission listening on https://%s:%d", host, bound)
        # Everything built at start-up (profile, plans, app) is long-lived: keep it out of GC passes.
        gc.collect()
        gc.freeze()
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        try:
            import uvloop  # optional: a faster event loop, used when installed (it is in the image)
        except ImportError:
            asyncio.run(main())
        else:
            uvloop.run(main())
