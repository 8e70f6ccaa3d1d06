"""Run the controller: one pass on demand (``--once``), or the level-based loop with leader election.

The loop lists the whole cluster on every pass, every ``resync`` seconds and sooner when a watch reports a
change, so a missed event costs at most one resync. Only the replica that holds the Lease runs passes; the
other renews nothing and waits, ready to take over when the lease expires.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import tracemalloc
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fabricguard.controller import objects as o
from fabricguard.controller.canaries import CanaryConfig
from fabricguard.controller.kube import WATCHED, apply_actions, list_cluster, watch_changes
from fabricguard.controller.lease import try_lead
from fabricguard.controller.metrics import Metrics
from fabricguard.controller.reconcile import PassResult, reconcile
from fabricguard.profile.model import PlatformProfile

log = logging.getLogger("fabricguard.controller")


@dataclass
class RunConfig:
    profile: PlatformProfile
    namespace: str = "fabricguard-system"
    image: str = "ghcr.io/fabricguard/fabricguard:latest"
    lustre_root: Path | None = None
    kubeconfig: str | None = None
    context: str | None = None
    identity: str = ""
    resync_s: float = 30.0
    lease_s: int = 15
    history: int = 10

    def canary_config(self) -> CanaryConfig:
        return CanaryConfig(self.namespace, self.image, self.lustre_root, self.history)


@dataclass
class PassReport:
    result: PassResult
    errors: list[str]
    seconds: float
    peak_bytes: int = 0


def default_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


async def api_for(cfg: RunConfig):  # type: ignore[no-untyped-def]
    import kr8s.asyncio

    return await kr8s.asyncio.api(kubeconfig=cfg.kubeconfig, context=cfg.context)


async def run_pass(cfg: RunConfig, now: datetime | None = None, *, measure_memory: bool = False) -> PassReport:
    """List, reconcile and act once."""
    api = await api_for(cfg)
    t0 = time.perf_counter()
    if measure_memory:
        tracemalloc.start()
    snapshot = await list_cluster(cfg.kubeconfig, cfg.context)
    result = await asyncio.to_thread(reconcile, snapshot, cfg.profile, now or datetime.now(UTC), cfg.canary_config())
    known = {(o.FV_PLURAL, o.name_of(fv)): fv for fv in snapshot.kind(o.FV_KIND)}
    errors = await apply_actions(api, result.actions, known)
    peak = 0
    if measure_memory:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return PassReport(result, errors, time.perf_counter() - t0, peak)


async def run_forever(cfg: RunConfig, metrics: Metrics, stop: asyncio.Event) -> None:
    """The controller's main loop, until ``stop`` is set."""
    api = await api_for(cfg)
    identity = cfg.identity or default_identity()
    wake = asyncio.Event()
    watchers = [asyncio.create_task(watch_changes(api, v, plural, wake, stop)) for v, plural in WATCHED]
    last_pass = 0.0
    tick = max(1.0, cfg.lease_s / 3)
    try:
        while not stop.is_set():
            try:
                leading = await try_lead(api, cfg.namespace, identity, datetime.now(UTC), duration_s=cfg.lease_s)
            except Exception as exc:  # an unreachable API server: lead nothing until it answers again
                log.warning("lease: %s", exc)
                leading = False
            metrics.leader.set(1 if leading else 0)
            due = wake.is_set() or time.monotonic() - last_pass >= cfg.resync_s
            if leading and due:
                wake.clear()
                try:
                    rep = await run_pass(cfg)
                except Exception as exc:
                    log.warning("pass failed: %s", exc)
                    metrics.errors.inc()
                else:
                    last_pass = time.monotonic()
                    metrics.observe(cfg.profile, rep.result, rep.seconds, len(rep.errors))
                    for e in rep.errors:
                        log.warning("%s", e)
            try:
                await asyncio.wait_for(stop.wait(), timeout=tick)
            except TimeoutError:
                pass
    finally:
        for w in watchers:
            w.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
