"""Run the controller: one pass on demand (``--once``), or the level-based loop with leader election.

The loop lists the whole cluster on every pass, every ``resync`` seconds and sooner when a watch reports a
change, so a missed event costs at most one resync. Only the replica that holds the Lease runs passes; the
other renews nothing and waits, ready to take over when the lease expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabricguard import names
from fabricguard import objects as o
from fabricguard.controller.busbw import busbw_actions, own_profiler_actions
from fabricguard.controller.canaries import CanaryConfig
from fabricguard.controller.kube import CLAIM_RESOURCES, WATCHED, apply_actions, list_cluster, watch_changes
from fabricguard.controller.lease import Step, decide, read_lease, try_lead
from fabricguard.controller.lease import holder as holder_of
from fabricguard.controller.live import LiveJobs, Observation, live_actions
from fabricguard.controller.lustre import reconcile_reading_lustre
from fabricguard.controller.metrics import Metrics
from fabricguard.controller.reconcile import PassResult
from fabricguard.doctor.reference import Reference, ReferenceError, from_configmap
from fabricguard.kube import Kube
from fabricguard.profile.model import PlatformProfile

log = logging.getLogger("fabricguard.controller")


@dataclass
class RunConfig:
    profile: PlatformProfile
    namespace: str = "fabricguard-system"
    image: str = ""  # the canary image (fabricguard with the probe extra); a pool's canary.image wins
    lustre_root: Path | None = None
    kubeconfig: str | None = None
    context: str | None = None
    identity: str = ""
    resync_s: float = 30.0
    min_gap_s: float = 5.0  # a burst of watch events costs one pass, not one per event
    lease_s: int = 15
    history: int = 10
    live_interval_s: float = 10.0  # how often running jobs' logs are read between passes
    reference: tuple[str, str] | None = None  # NAMESPACE, NAME of the reference environment's ConfigMap

    def canary_config(self) -> CanaryConfig:
        return CanaryConfig(self.namespace, self.image, self.lustre_root, self.history)


@dataclass
class PassReport:
    result: PassResult
    errors: list[str]
    seconds: float
    acted: bool = True
    lease_holder: str | None = None  # another live controller, when --once only read
    live: list[Observation] = field(default_factory=list)


async def follow_live(api, live: LiveJobs, profile: PlatformProfile, workloads: list[dict[str, Any]],  # type: ignore[no-untyped-def]
                      now: datetime, *, act: bool, leading: Callable[[], bool] | None = None,
                      ) -> tuple[list[Observation], list[str]]:
    """Read what running jobs' logs gained; record every newly proven transport on its job (when ``act``)."""
    observations = await asyncio.to_thread(live.poll)
    errors: list[str] = []
    for ob in observations:
        actions = live_actions(profile, ob, live.reported.get(ob.job.key), workloads, now)
        if actions and act:
            failed = await apply_actions(api, actions, {}, leading)
            errors += failed
            if not failed:
                live.reported[ob.job.key] = ob.verdict.transport.value
        if ob.busbw is None:
            continue
        reported = live.reported_busbw.get(ob.job.key)
        told = busbw_actions(ob.job, ob.busbw, reported, now)
        state = "below" if ob.busbw.below else "ok"
        if not told and not ob.busbw.figures:
            told = own_profiler_actions(ob.job, ob.verdict.report.profiler_plugins, reported, now)
            state = "own-profiler"
        if told and act:
            failed = await apply_actions(api, told, {}, leading)
            errors += failed
            if not failed:
                live.reported_busbw[ob.job.key] = state
    return observations, errors


def default_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


async def api_for(cfg: RunConfig):  # type: ignore[no-untyped-def]
    import kr8s.asyncio

    return await kr8s.asyncio.api(kubeconfig=cfg.kubeconfig, context=cfg.context)


async def read_reference(api, target: tuple[str, str] | None) -> tuple[Reference | None, list[str]]:  # type: ignore[no-untyped-def]
    """The reference environment's published snapshot; a missing or broken one is an error line, not a crash."""
    if target is None:
        return None, []
    cm = await Kube(api).get("v1", "configmaps", target[1], target[0])
    if cm is None:
        return None, [f"reference ConfigMap {target[0]}/{target[1]} does not exist: publish it with "
                      "fabricguard snapshot --publish in the reference environment; drift is not checked"]
    try:
        return from_configmap(cm), []
    except ReferenceError as exc:
        return None, [f"{exc}; drift is not checked"]


async def run_pass(cfg: RunConfig, now: datetime | None = None, *, act: bool = True,
                   leading: Callable[[], bool] | None = None, live: LiveJobs | None = None) -> PassReport:
    """List, reconcile and (``act``) carry out the actions; ``leading`` is asked before each action.

    With a Lustre root, the running managed jobs' logs are read too (``live`` keeps the followers between
    passes; without it a pass reads them from the start, as ``--once`` does)."""
    api = await api_for(cfg)
    t0 = time.perf_counter()
    at = now or datetime.now(UTC)
    claims = any(p.claim_template_name for p in cfg.profile.spec.pools)
    snapshot = await list_cluster(cfg.kubeconfig, cfg.context, CLAIM_RESOURCES if claims else ())
    reference, errors = await read_reference(api, cfg.reference)
    result = await asyncio.to_thread(reconcile_reading_lustre, snapshot, cfg.profile, at, cfg.canary_config(),
                                     reference)
    known = {(names.FV_PLURAL, o.name_of(fv)): fv for fv in snapshot.kind(names.FV_KIND)}
    errors += await apply_actions(api, result.actions, known, leading) if act else []
    observations: list[Observation] = []
    if cfg.lustre_root is not None:
        followers = live if live is not None else LiveJobs(cfg.profile, cfg.lustre_root)
        followers.sync(result.running)
        observations, live_errors = await follow_live(api, followers, cfg.profile, result.workloads, at, act=act,
                                                      leading=leading)
        errors += live_errors
        if live is None:
            followers.close()
    return PassReport(result, errors, time.perf_counter() - t0, acted=act, live=observations)


async def run_once(cfg: RunConfig, now: datetime | None = None, *, force: bool = False) -> PassReport:
    """One pass for ``--once``. While a running controller holds the Lease, the pass only reads and reports
    (unless ``force``): two actors would start two canaries per pool. The Lease is judged by the wall clock
    even when ``now`` replays another time."""
    holder = None
    if not force:
        lease = await read_lease(await api_for(cfg), cfg.namespace)
        if decide(lease, cfg.identity or default_identity(), datetime.now(UTC)) is Step.follow:
            holder = holder_of(lease)
    rep = await run_pass(cfg, now, act=holder is None)
    rep.lease_holder = holder
    return rep


class Leadership:
    """This replica's standing, renewed by its own task so that a long pass never lets the Lease lapse."""

    def __init__(self) -> None:
        self.leading = False
        self.valid_until = 0.0  # monotonic time until which a won round keeps us the holder

    def active(self) -> bool:
        return self.leading and time.monotonic() < self.valid_until


async def keep_lease(api, cfg: RunConfig, identity: str, who: Leadership, metrics: Metrics,  # type: ignore[no-untyped-def]
                     stop: asyncio.Event) -> None:
    """Renew (or try to take) the Lease every third of its duration until ``stop``."""
    period = max(0.5, cfg.lease_s / 3)
    while not stop.is_set():
        started = time.monotonic()
        try:
            won = await try_lead(api, cfg.namespace, identity, datetime.now(UTC), duration_s=cfg.lease_s)
        except Exception as exc:  # an unreachable API server: lead nothing until it answers again
            log.warning("lease: %s", exc)
            won = False
        who.leading = won
        # Count the lease from before the request: the holder stops acting before anyone else may start.
        who.valid_until = started + cfg.lease_s * 2 / 3 if won else 0.0
        metrics.leader.set(1 if won else 0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=period)


async def run_forever(cfg: RunConfig, metrics: Metrics, stop: asyncio.Event) -> None:
    """The controller's main loop, until ``stop`` is set."""
    api = await api_for(cfg)
    identity = cfg.identity or default_identity()
    who = Leadership()
    wake = asyncio.Event()
    tasks = [asyncio.create_task(watch_changes(api, v, plural, wake, stop, selector=sel))
             for v, plural, sel in WATCHED]
    tasks.append(asyncio.create_task(keep_lease(api, cfg, identity, who, metrics, stop)))
    live = LiveJobs(cfg.profile, cfg.lustre_root) if cfg.lustre_root is not None else None
    workloads: list[dict[str, Any]] = []
    last_pass = last_live = 0.0
    try:
        while not stop.is_set():
            since = time.monotonic() - last_pass
            due = (wake.is_set() and since >= cfg.min_gap_s) or since >= cfg.resync_s
            if who.active() and due:
                wake.clear()
                try:
                    rep = await run_pass(cfg, leading=who.active, live=live)
                except Exception as exc:
                    log.warning("pass failed: %s", exc)
                    metrics.errors.inc()
                    metrics.pass_failed(f"{type(exc).__name__}: {exc}")  # the liveness probe reports it
                else:
                    last_pass = last_live = time.monotonic()
                    workloads = rep.result.workloads
                    metrics.observe(cfg.profile, rep.result, rep.seconds, len(rep.errors))
                    if live is not None:
                        metrics.observe_live(cfg.profile, rep.live, live.cost)
                    for e in rep.errors:
                        log.warning("%s", e)
            elif live is not None and who.active() and time.monotonic() - last_live >= cfg.live_interval_s:
                # Between passes: the running jobs' logs only, so a fallback is seen within seconds of its line.
                last_live = time.monotonic()
                try:
                    obs, errors = await follow_live(api, live, cfg.profile, workloads, datetime.now(UTC), act=True,
                                                    leading=who.active)
                except Exception as exc:
                    log.warning("following running jobs failed: %s", exc)
                else:
                    metrics.observe_live(cfg.profile, obs, live.cost)
                    for e in errors:
                        log.warning("%s", e)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.5)
    finally:
        if live is not None:
            live.close()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
