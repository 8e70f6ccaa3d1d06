"""Run the controller: one pass on demand (``--once``), or the level-based loop with leader election.

``--once`` lists the cluster and acts (or only reads, while another controller holds the Lease). The loop reads
a watch-fed cache (``controller.kube.Cache``) instead of relisting: a pass runs every ``resync`` seconds and
sooner when a watch reports a change, so a missed event costs at most one resync. Only the replica that holds the
Lease runs passes; the other waits, ready to take over when the lease expires.

Leadership is sized to the API server: a renewal is one request, the lease's duration grows with the slowest
recent request (``lease.lease_duration``), and a won round that leaves too little time to act is said in a metric
and a log line. A leader whose passes stall (none finishes within ``stall_s``) gives its Lease up and reports
unhealthy on ``/healthz``, so the other replica takes over and the kubelet restarts this one.
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

from fabricguard import descriptors, names
from fabricguard import objects as o
from fabricguard.controller.busbw import busbw_actions, own_profiler_actions
from fabricguard.controller.canaries import CanaryConfig
from fabricguard.controller.hang import HangWatch, RasQuerier, hang_actions, node_links, pod_to_ask
from fabricguard.controller.incremental import FULL_EVERY_S, Incremental
from fabricguard.controller.kube import (
    STALE_AFTER_S,
    WATCH_IDLE_S,
    Cache,
    apply_actions,
    controller_permissions,
    list_cluster,
)
from fabricguard.controller.lease import Elector, Step, decide, lease_duration, read_lease
from fabricguard.controller.lease import holder as holder_of
from fabricguard.controller.live import LiveJobs, Observation, _workload_of, live_actions
from fabricguard.controller.live_io import io_actions
from fabricguard.controller.lustre import VERDICT_BUDGET_S, VerdictReads, reconcile_reading_lustre
from fabricguard.controller.metrics import Metrics
from fabricguard.controller.reconcile import PassResult
from fabricguard.controller.suspects import PodPlace, job_pods, suspect_actions
from fabricguard.controller.suspects import RunningJob as JobRef
from fabricguard.doctor.reference import Reference, ReferenceError, from_configmap
from fabricguard.kube import Forbidden, Kube, KubeError
from fabricguard.nccl import ras as ras_client
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
    full_every_s: float = FULL_EVERY_S  # between full passes, passes re-judge only what changed (incremental.py)
    live_workers: int = 4  # jobs read at once (each a round trip per stat on Lustre; one descriptor each at most)
    verdict_budget_s: float = VERDICT_BUDGET_S  # a pass's time for finished jobs' logs (lustre.VerdictReads)
    reference: tuple[str, str] | None = None  # NAMESPACE, NAME of the reference environment's ConfigMap
    stall_s: float = 300.0  # a leader with no finished pass for this long gives the Lease up (and is unhealthy)
    watch_timeout_s: int = 300  # the server ends each watch after this; the cache re-watches from its version
    watch_idle_s: float = WATCH_IDLE_S  # a watch silent this long (no event, no bookmark) ends in a relist
    stale_s: float = STALE_AFTER_S  # no admission on a read the server has not spoken for within this long
    mode: str = "enforce"  # --mode: observe reports what the check would hold and holds nothing

    def canary_config(self) -> CanaryConfig:
        return CanaryConfig(self.namespace, self.image, self.lustre_root, self.history, self.mode)


@dataclass
class PassReport:
    result: PassResult
    errors: list[str]
    seconds: float
    acted: bool = True
    lease_holder: str | None = None  # another live controller, when --once only read
    live: list[Observation] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)  # the pass's Nodes (a hung job's NICs: hang.py)


async def follow_live(kube: Kube, live: LiveJobs, profile: PlatformProfile, workloads: list[dict[str, Any]],
                      now: datetime, *, act: bool, leading: Callable[[], bool] | None = None,
                      pods: list[dict[str, Any]] | None = None, ras: RasQuerier | None = None,
                      nodes: list[dict[str, Any]] | None = None) -> tuple[list[Observation], list[str]]:
    """Read what running jobs' logs gained; record every newly proven transport on its job (when ``act``)."""
    observations = await asyncio.to_thread(live.poll)
    errors: list[str] = []
    for ob in observations:
        try:
            errors += await _follow_one(kube, live, profile, ob, workloads, now, act=act, leading=leading, pods=pods,
                                        ras=ras if ras is not None else exec_querier(kube), nodes=nodes or [])
        except KubeError:
            raise
        except Exception as exc:  # one job's data (or a bug on it) never stops the others: logged once per job
            live.unusable_job(ob.job.key, f"cannot judge what its files say: {type(exc).__name__}: {exc}"[:500])
    return observations, errors


async def _follow_one(kube: Kube, live: LiveJobs, profile: PlatformProfile, ob: Observation,
                      workloads: list[dict[str, Any]], now: datetime, *, act: bool,
                      leading: Callable[[], bool] | None, pods: list[dict[str, Any]] | None,
                      ras: RasQuerier, nodes: list[dict[str, Any]]) -> list[str]:
    """What one running job's logs and records call for, written (when ``act``); the errors of its writes."""
    errors: list[str] = []
    actions = live_actions(profile, ob, live.reported.get(ob.job.key), workloads, now)
    if actions and act:
        failed = await apply_actions(kube, actions, {}, leading)
        errors += failed
        if not failed:
            live.reported[ob.job.key] = ob.verdict.transport.value
    said, io_state = io_actions(ob.job, ob.io, ob.bound, live.reported_io.get(ob.job.key), now)
    if said and act:
        failed = await apply_actions(kube, said, {}, leading)
        errors += failed
        if not failed and io_state is not None:
            live.reported_io[ob.job.key] = io_state
    elif not said and io_state is not None:
        live.reported_io[ob.job.key] = io_state
    if ob.busbw is None:
        return errors
    reported = live.reported_busbw.get(ob.job.key)
    told = busbw_actions(ob.job, ob.busbw, reported, now)
    state = "below" if ob.busbw.below else "ok"
    if not told and not ob.busbw.figures:
        told = own_profiler_actions(ob.job, ob.verdict.report.profiler_plugins, reported, now)
        state = "own-profiler"
    if told and act:
        failed = await apply_actions(kube, told, {}, leading)
        errors += failed
        if not failed:
            live.reported_busbw[ob.job.key] = state
    if ob.busbw.ranks is not None:  # the late rank and the slow node, joined to pods (controller/suspects.py)
        places = job_pods(ob.job, pods or [])
        said, now_told = suspect_actions(ob.job, ob.busbw.ranks, places, live.reported_suspects.get(ob.job.key),
                                         now)
        if said and act:
            failed = await apply_actions(kube, said, {}, leading)
            errors += failed
            if not failed and now_told is not None:
                live.reported_suspects[ob.job.key] = now_told
        elif not said and now_told is not None:
            live.reported_suspects[ob.job.key] = now_told  # already on the job: nothing to write
    errors += await _watch_hang(kube, live, profile, ob, workloads, pods or [], now, act=act, leading=leading,
                                ras=ras, nodes=nodes)
    return errors


def exec_querier(kube: Kube) -> RasQuerier:
    """NCCL's RAS asked through ``pods/exec`` (controller/hang.py says why exec and not a sidecar)."""
    async def ask(job: JobRef, pod: PodPlace) -> bytes:
        return await kube.exec(job.namespace, pod.pod, ["python3", "-c", ras_client.CLIENT],
                               container=pod.container, timeout=45)
    return ask


async def _watch_hang(kube: Kube, live: LiveJobs, profile: PlatformProfile, ob: Observation,
                      workloads: list[dict[str, Any]], pods: list[dict[str, Any]], now: datetime, *, act: bool,
                      leading: Callable[[], bool] | None, ras: RasQuerier,
                      nodes: list[dict[str, Any]]) -> list[str]:
    """A job whose collectives stopped for hangAfter: ask RAS twice; a confirmed hang is written once."""
    if ob.busbw is None:
        return []
    pool = profile.pool(ob.job.pool)
    ins = profile.inspector_for(pool)
    if ins is None:
        return []
    hw = live.hangs.setdefault(ob.job.key, HangWatch())
    hw.observe(ob.busbw.progress, now)
    if hw.verdict is None or not hw.verdict.hung:
        live.hung.pop(ob.job.key, None)  # progress again: the hang is over
    ob.hang = live.hung.get(ob.job.key)
    if not hw.due(now, ins.hang_after_s):
        return []
    places = job_pods(ob.job, pods)
    pod = pod_to_ask(places)
    if pod is None:
        return []
    try:
        raw = await ras(ob.job, pod)
    except (KubeError, OSError) as exc:
        hw.asked_at = now
        said = not hw.error
        hw.error = f"{ob.job.namespace}/{ob.job.name}: cannot ask NCCL RAS in pod {pod.pod}: {exc}"[:500]
        return [hw.error] if said else []  # said once per stall, not every poll
    verdict = hw.answered(raw, now, ins.hang_after_s)
    if verdict is None or not verdict.hung:
        return []
    w = _workload_of(ob.job, workloads)
    # Only now, for the nodes waited for: the NICs their agents last wrote (a scan of the Nodes, once per hang).
    waited = {places[x.host].node for x in verdict.waited_for if x.host in places}
    links = node_links([n for n in nodes if o.name_of(n) in waited])
    actions, summary = hang_actions(ob.job, verdict, places, ob.verdict.transport.value, pool.onHang, w, now,
                                    links)
    live.hung[ob.job.key] = ob.hang = summary
    if not act:
        return []
    failed = await apply_actions(kube, actions, {}, leading)
    if not failed:
        hw.told = True
    return failed


def gate_freshness(cache: Cache, cfg: RunConfig) -> Callable[[tuple[str, ...]], str]:
    """Asked just before each Ready write, with the pools it admits on: why it would no longer be right on what
    the cache holds now ("" when it still is). The cache must still be fresh, and the pools' nodes must not
    have turned FabricReady=False since the pass read them (the agents' signal, seconds old; a canary's
    outcome comes from the pass's own writes and is decided again next pass)."""
    from fabricguard.controller.rootcause import broken_nodes

    seen: dict[tuple[tuple[str, ...], int], str] = {}  # the nodes' verdict per pools, until a node event or list

    def fresh(pools: tuple[str, ...]) -> str:
        stale = cache.stale(cfg.stale_s)
        if stale:
            return stale
        heard = sum(i.events + i.lists for i in cache.informers if i.read.plural == "nodes")
        if (pools, heard) in seen:
            return seen[(pools, heard)]
        seen[(pools, heard)] = why = _nodes_broken(pools)
        return why

    def _nodes_broken(pools: tuple[str, ...]) -> str:
        nodes = cache.current("nodes")
        for name in pools:
            pool = cfg.profile.pool(name)
            canary = cfg.profile.canary(pool)
            broken = broken_nodes(pool, nodes, canary.nodes if canary else 1)
            if broken:
                return f"pool {name}: {broken}, heard while the pass was writing"
        return ""

    return fresh


def default_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


async def connect(cfg: RunConfig) -> Kube:
    """The controller's connection: every call checked against its permission table."""
    extra = (cfg.reference[0],) if cfg.reference else ()
    return await Kube.connect(cfg.kubeconfig, cfg.context,
                              permissions=controller_permissions(cfg.namespace, cfg.profile, *extra))


async def read_reference(kube: Kube, target: tuple[str, str] | None) -> tuple[Reference | None, list[str]]:
    """The reference environment's published snapshot; a missing or broken one is an error line, not a crash."""
    if target is None:
        return None, []
    try:
        cm = await kube.get("v1", "configmaps", target[1], target[0])
    except Forbidden as exc:  # drift is not what holds a pool: say it every pass, judge the rest
        return None, [f"reference ConfigMap {target[0]}/{target[1]}: {exc}; drift is not checked"]
    if cm is None:
        return None, [f"reference ConfigMap {target[0]}/{target[1]} does not exist: publish it with "
                      "fabricguard snapshot --publish in the reference environment; drift is not checked"]
    try:
        return from_configmap(cm), []
    except ReferenceError as exc:
        return None, [f"{exc}; drift is not checked"]


async def run_pass(cfg: RunConfig, now: datetime | None = None, *, act: bool = True,
                   leading: Callable[[], bool] | None = None, live: LiveJobs | None = None,
                   kube: Kube | None = None, cache: Cache | None = None, ras: RasQuerier | None = None,
                   incremental: Incremental | None = None, reads: VerdictReads | None = None) -> PassReport:
    """Read (the ``cache`` when given, else a fresh list), reconcile and (``act``) carry out the actions;
    ``leading`` is asked before each action. ``ReadFailed`` when a kind the pass needs cannot be read.

    With a Lustre root, the running managed jobs' logs are read too (``live`` keeps the followers between
    passes; without it a pass reads them from the start, as ``--once`` does). ``incremental`` (the loop's, with
    the ``cache``) keeps what the previous pass judged: this pass judges again only what changed touches.
    ``reads`` (the loop's) bounds the time spent on finished jobs' logs and remembers what it read when; without
    it the pass has the same budget and reads the jobs in listing order."""
    own = kube is None
    k = kube or await connect(cfg)
    try:
        t0 = time.perf_counter()
        at = now or datetime.now(UTC)
        snapshot = cache.snapshot() if cache is not None else await list_cluster(k, cfg.profile, cfg.namespace)
        stale = cache.stale(cfg.stale_s) if cache is not None else ""
        if stale:
            log.warning("%s: the pass admits nothing", stale)
        reference, errors = await read_reference(k, cfg.reference)
        if incremental is not None and cache is not None:
            lists = sum(i.lists for i in cache.informers)
            if incremental.lists_seen is not None and lists != incremental.lists_seen:
                incremental.force_full("a read was listed again")  # a relist: watch events were missed
            incremental.lists_seen = lists
        result = await asyncio.to_thread(reconcile_reading_lustre, snapshot, cfg.profile, at,
                                         cfg.canary_config(), reference, stale, incremental,
                                         reads if reads is not None else VerdictReads(cfg.verdict_budget_s))
        if result.counters.job_verdicts_waiting:  # the bound is said, not only counted
            log.info("%d finished job(s) wait for their verdict: this pass spent its --verdict-budget of %g s "
                     "reading logs; the next passes read them first", result.counters.job_verdicts_waiting,
                     cfg.verdict_budget_s)
        known = {(names.FV_PLURAL, o.name_of(fv)): fv for fv in snapshot.kind(names.FV_KIND)}
        fresh = gate_freshness(cache, cfg) if cache is not None else None
        errors += await apply_actions(k, result.actions, known, leading, fresh) if act else []
        observations: list[Observation] = []
        if cfg.lustre_root is not None:
            # Without kept followers (--once) every running job is read in full, whatever it takes.
            followers = live if live is not None else LiveJobs(cfg.profile, cfg.lustre_root)
            followers.sync(result.running)
            observations, live_errors = await follow_live(k, followers, cfg.profile, result.workloads, at,
                                                          pods=result.pods, ras=ras, nodes=snapshot.nodes,
                                                          act=act, leading=leading)
            errors += live_errors
            if live is None:
                followers.close()
        return PassReport(result, errors, time.perf_counter() - t0, acted=act, live=observations,
                          nodes=snapshot.nodes)
    finally:
        if own:
            await k.close()


async def run_once(cfg: RunConfig, now: datetime | None = None, *, force: bool = False) -> PassReport:
    """One pass for ``--once``. While a running controller holds the Lease, the pass only reads and reports
    (unless ``force``): two actors would start two canaries per pool. The Lease is judged by the wall clock
    even when ``now`` replays another time."""
    kube = await connect(cfg)
    try:
        holder = None
        if not force:
            lease = await read_lease(kube, cfg.namespace)
            if decide(lease, cfg.identity or default_identity(), datetime.now(UTC)) is Step.follow:
                holder = holder_of(lease)
        rep = await run_pass(cfg, now, act=holder is None, kube=kube)
        rep.lease_holder = holder
        return rep
    finally:
        await kube.close()


class Leadership:
    """This replica's standing, renewed by its own task so that a long pass never lets the Lease lapse."""

    def __init__(self) -> None:
        self.leading = False
        self.valid_until = 0.0  # monotonic time until which a won round keeps us the holder
        self.since = 0.0  # monotonic time this replica became leader
        self.too_short = False  # the latest won round left too little time to act

    def active(self) -> bool:
        return self.leading and time.monotonic() < self.valid_until


@dataclass
class Health:
    """The stall watchdog's state: when a pass started, when one last finished; ``stalled`` says why once the
    replica gave its Lease up (``Metrics.mark_stalled`` then fails ``/healthz``)."""

    stall_s: float = 300.0
    pass_started: float | None = None  # monotonic start of the pass running now
    last_ok: float = field(default_factory=time.monotonic)  # end of the latest pass that ran (or the start)
    stalled: str = ""  # why, once stalled

    def check(self, who: Leadership, now: float | None = None) -> str:
        """Why the passes count as stalled now ("" when they do not): a pass running for longer than
        ``stall_s``, or a leader without a finished pass for that long."""
        t = time.monotonic() if now is None else now
        if self.pass_started is not None and t - self.pass_started > self.stall_s:
            return f"a pass has been running for {t - self.pass_started:.0f} s (limit {self.stall_s:.0f} s)"
        if who.leading and t - max(self.last_ok, who.since) > self.stall_s:
            return (f"no pass has finished for {t - max(self.last_ok, who.since):.0f} s while leading "
                    f"(limit {self.stall_s:.0f} s)")
        return ""


async def keep_lease(kube: Kube, cfg: RunConfig, identity: str, who: Leadership, metrics: Metrics,
                     stop: asyncio.Event, health: Health | None = None) -> None:
    """Renew (or try to take) the Lease every third of its duration until ``stop``; give it up when the passes
    stall. The duration grows with the slowest recent request, so a slow API server leaves time to act."""
    elector = Elector(kube, cfg.namespace, identity)
    while not stop.is_set():
        started = time.monotonic()
        stalled = health.check(who) if health is not None else ""
        if stalled and health is not None:
            if not health.stalled:
                log.error("passes stalled: %s; giving up the Lease and reporting unhealthy", stalled)
            health.stalled = stalled
            metrics.mark_stalled(stalled)
            if who.leading or elector.held is not None:
                who.leading, who.valid_until = False, 0.0
                metrics.leader.set(0)
                with contextlib.suppress(KubeError):
                    await elector.release(datetime.now(UTC))
            await _wait(stop, max(0.5, cfg.lease_s / 3))
            continue
        written: list[int] = []

        def sized(written: list[int] = written) -> int:  # asked just before the write: a slow read counts
            written.append(lease_duration(cfg.lease_s, kube.latency.worst))
            return written[-1]

        try:
            won = await elector.round(datetime.now(UTC), sized)
        except Exception as exc:  # an unreachable or refusing API server (or a bug): lead nothing this round,
            log.warning("lease: %s: %s", type(exc).__name__, exc)  # but never let the election task die
            won = False
        duration = written[-1] if written else lease_duration(cfg.lease_s, kube.latency.worst)
        if won and not who.leading:
            who.since = time.monotonic()
        who.leading = won
        # Count the lease from before the request: the holder stops acting before anyone else may start.
        who.valid_until = started + duration * 2 / 3 if won else 0.0
        window = max(0.0, who.valid_until - time.monotonic()) if won else 0.0
        latency = kube.latency.worst
        who.too_short = won and window < max(1.0, 2 * latency)
        if who.too_short:
            metrics.lease_too_short.inc()
            log.warning("leadership too short to act: the election round took %.1f s of a %d s lease (slowest "
                        "request %.1f s), %.1f s left to act; raise --lease or speed up the API server",
                        time.monotonic() - started, duration, latency, window)
        metrics.leader.set(1 if won else 0)
        metrics.lease_duration.set(duration)
        metrics.lease_window.set(window)
        metrics.api_latency.set(latency)
        # The next round is due a third of the duration after this one started (not after it ended).
        await _wait(stop, max(0.5, started + duration / 3 - time.monotonic()))


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


async def run_forever(cfg: RunConfig, metrics: Metrics, stop: asyncio.Event, health: Health | None = None) -> None:
    """The controller's main loop, until ``stop`` is set."""
    kube = await connect(cfg)
    identity = cfg.identity or default_identity()
    who = Leadership()
    health = health or Health(cfg.stall_s)
    wake = asyncio.Event()
    lease_task = asyncio.create_task(keep_lease(kube, cfg, identity, who, metrics, stop, health))
    # The cache starts once this replica first leads: a follower neither lists nor watches (one replica's
    # watches on the API server, not two), and the first election round is not queued behind the first lists.
    cache = Cache(kube, cfg.profile, cfg.namespace)
    # Forgotten with the cache: a new leadership starts with a full pass. --full-every 0: every pass is full.
    incremental = Incremental(cfg.full_every_s) if cfg.full_every_s > 0 else None
    live = (LiveJobs(cfg.profile, cfg.lustre_root, interval_s=cfg.live_interval_s, workers=cfg.live_workers)
            if cfg.lustre_root is not None else None)
    reads = VerdictReads(cfg.verdict_budget_s)
    limit = descriptors.raise_soft_limit()  # containers start at a soft 1,024; the hard limit is what we may use
    metrics.observe_descriptor_limit(limit)
    log.info("file descriptors: soft limit %d%s, hard %d", limit.soft,
             f" (raised from {limit.raised_from})" if limit.raised_from is not None else "", limit.hard)
    workloads: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    nodes: list[dict[str, Any]] = []
    last_pass = last_live = 0.0
    try:
        while not stop.is_set():
            if who.active() and not cache.tasks:
                cache.start(wake, stop, watch_timeout_s=cfg.watch_timeout_s, idle_s=cfg.watch_idle_s)
                metrics.watch_cache(cache.ages, cfg.stale_s)
            elif not who.active() and cache.tasks:
                # Leadership lost (or its window passed): stop watching, and forget what was seen. A later
                # leadership lists afresh instead of acting on what the cache held when another replica led.
                await cache.close()
                cache = Cache(kube, cfg.profile, cfg.namespace)
                incremental = Incremental(cfg.full_every_s) if cfg.full_every_s > 0 else None
            since = time.monotonic() - last_pass
            due = (wake.is_set() and since >= cfg.min_gap_s) or since >= cfg.resync_s
            if who.active() and due and (cache.synced or cache.failed):
                wake.clear()
                health.pass_started = time.monotonic()
                try:
                    rep = await run_pass(cfg, leading=who.active, live=live, kube=kube, cache=cache,
                                         incremental=incremental, reads=reads)
                except Exception as exc:  # a kind that cannot be read, no answer, or a bug on one job's input
                    log.error("pass failed: %s", exc)
                    metrics.pass_failed(f"{type(exc).__name__}: {exc}")  # the liveness probe reports it
                    last_pass = time.monotonic()
                else:
                    last_pass = last_live = health.last_ok = time.monotonic()
                    workloads = rep.result.workloads
                    pods = rep.result.pods
                    nodes = rep.nodes
                    metrics.observe(cfg.profile, rep.result, rep.seconds, len(rep.errors))
                    stats = rep.result.stats
                    if stats is not None and stats.kind == "full":
                        log.info("full pass (%s): %.1f s", stats.why, rep.seconds)
                    if live is not None:
                        metrics.observe_live(cfg.profile, rep.live, live.cost)
                    for e in rep.errors:
                        log.warning("%s", e)
                finally:
                    health.pass_started = None
            elif live is not None and who.active() and time.monotonic() - last_live >= cfg.live_interval_s:
                # Between passes: the running jobs' logs only, so a fallback is seen within seconds of its line.
                last_live = time.monotonic()
                try:
                    obs, errors = await follow_live(kube, live, cfg.profile, workloads, datetime.now(UTC), act=True,
                                                    leading=who.active, pods=pods, nodes=nodes)
                except Exception as exc:  # the API server, or a bug: the loop goes on, the next poll retries
                    log.warning("following running jobs failed: %s: %s", type(exc).__name__, exc)
                else:
                    metrics.observe_live(cfg.profile, obs, live.cost)
                    for e in errors:
                        log.warning("%s", e)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.5)
    finally:
        if live is not None:
            live.close()
        lease_task.cancel()
        await asyncio.gather(lease_task, return_exceptions=True)
        await cache.close()
        if who.leading:
            with contextlib.suppress(KubeError, TimeoutError):
                await asyncio.wait_for(Elector(kube, cfg.namespace, identity).release(datetime.now(UTC)), 5)
        await kube.close()
