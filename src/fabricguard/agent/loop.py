"""The agent's schedule: every interval (and at start) check the node, damp, write the condition (and taints).

A run never raises: whatever goes wrong becomes a ``False`` condition that names it (fail closed), or, when
the API server cannot be reached, a counted report error; the heartbeat then ages and the staleness sweep turns
the condition ``Unknown``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fabricguard import breaker, names
from fabricguard.agent import taint_slots
from fabricguard.agent.checks import node_check_groups
from fabricguard.agent.condition import (
    Readiness,
    Reason,
    build_condition,
    judge,
    status_patch,
)
from fabricguard.agent.damping import Damper
from fabricguard.agent.deadline import CheckRun
from fabricguard.agent.kube import KubeError, NodeClient
from fabricguard.agent.links import LinkWatch, build_links_condition, links_changed
from fabricguard.agent.metrics import AgentMetrics
from fabricguard.agent.staleness import heartbeat_age, is_stale
from fabricguard.agent.taint_slots import TaintSlots
from fabricguard.agent.taints import MANAGED_KEYS, breaker_withheld, taint_patch, wanted_taints
from fabricguard.kube import Conflict, Forbidden, Invalid, unreachable
from fabricguard.objects import find_condition, taint_keys
from fabricguard.probes.host import CheckGroup, load_gpus
from fabricguard.probes.lustre_client import Lnetctl
from fabricguard.probes.result import Check, Status
from fabricguard.profile import PlatformProfile, Pool, UnknownPoolError
from fabricguard.quantity import amount_or_zero

log = logging.getLogger("fabricguard.agent")
HEARTBEAT_S = 300.0
_SAME = ("status", "reason", "message")


def needs_write(previous: dict[str, Any] | None, condition: dict[str, Any], now: datetime, heartbeat_s: float,
                interval_s: float) -> bool:
    """Whether this run writes the condition: it changed (status, reason or message), or the stored heartbeat is
    due (the next run would find it older than ``heartbeat_s``), absent, unreadable or from the future."""
    if previous is None or any(previous.get(k) != condition.get(k) for k in _SAME):
        return True
    age = heartbeat_age(previous, now)
    return age is None or age < 0 or age + interval_s > heartbeat_s


@dataclass
class AgentConfig:
    node: str
    profile: PlatformProfile
    pool: str | None = None
    root: Path = Path("/")
    nvml_json: Path | None = None
    gpu_ceilings: Path | None = None
    lnetctl: str | None = "auto"
    interval: float = 60.0
    passes: int = 3
    stale_intervals: int = 3
    manage_taints: bool = False
    check_timeout: float = 30.0
    # Seconds between writes of a condition that has not changed (its heartbeat). A run whose condition is what
    # the Node holds writes nothing until then: 12 writes per node per hour instead of 60 (bench/agent/README.md).
    heartbeat: float = HEARTBEAT_S
    mode: str = "enforce"  # observe: with --manage-taints, the taints it would set are logged, never written
    namespace: str = "fabricguard-system"  # where the pool's taint slots (Leases) live: the agent's own namespace

    @property
    def max_age(self) -> timedelta:
        """How old a heartbeat may be before the condition is stale: the heartbeat period plus
        ``stale_intervals`` runs (a write is at most one heartbeat apart while the agent lives)."""
        return timedelta(seconds=max(self.heartbeat, self.interval) + self.interval * self.stale_intervals)

    @property
    def run_max_age(self) -> timedelta:
        """How long without a finished run before ``/healthz`` fails (runs, not writes, are every interval)."""
        return timedelta(seconds=self.interval * self.stale_intervals)


@dataclass
class RunResult:
    reported: Readiness
    raw: Readiness
    pool: str | None
    seconds: float
    condition: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)  # failing checks an open breaker keeps from tainting
    # The pool's taint budget as this run consulted it (agent/taint_slots.py); None when it did not need a slot.
    taint_budget: dict[str, Any] | None = None

    def to_dict(self, node: str) -> dict[str, Any]:
        out = self.reported.to_dict()
        if self.condition:
            out |= {k: self.condition[k] for k in ("lastHeartbeatTime", "lastTransitionTime")}
        checks = out.pop("checks")
        extra: dict[str, Any] = {"breakerWithheld": self.withheld} if self.withheld else {}
        if self.taint_budget is not None:
            extra["taintBudget"] = self.taint_budget
        return {**out, "node": node, "pool": self.pool, "seconds": round(self.seconds, 3), **extra,
                "checks": checks, "errors": self.errors}


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Agent:
    def __init__(
        self,
        cfg: AgentConfig,
        client: NodeClient | None,
        metrics: AgentMetrics | None = None,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.cfg = cfg
        self.client = client
        self.metrics = metrics or AgentMetrics(cfg.node)
        self.metrics.watch_fabric(cfg.root)
        self.clock = clock
        self.unreachable: KubeError | None = None  # the latest Node read found no API server answering
        self.damper = Damper(cfg.passes)
        self.runs = 0
        self.last_finished: float | None = None
        self._stuck: CheckRun | None = None  # an abandoned run whose thread has not returned yet
        self.link_watch = LinkWatch()  # the ports' counters at the previous run (FabricLinks: what rose since)
        self._links_reading: asyncio.Future[tuple[str, str, str]] | None = None
        # ResourceSlices given instead of listed (a dry run with --slices-json); None: list them on DRA pools.
        self.saved_slices: list[dict[str, Any]] | None = None
        # The pool's open breakers as last read (--manage-taints): kept when a read fails, so that one API hiccup
        # does not put back the taints the controller lifted.
        self.open_breakers: list[str] = []
        # The pool's taint slots (--manage-taints): none is spent without an atomic write (agent/taint_slots.py).
        self._slots: TaintSlots | None = None

    @property
    def slots(self) -> TaintSlots | None:
        """The pool's taint slots as this agent holds them (``--manage-taints`` with a connection)."""
        if self._slots is None and self.client is not None and self.cfg.manage_taints:
            self._slots = TaintSlots(self.client.kube, self.cfg.namespace, self.cfg.node,
                                     max(1, int(self.cfg.interval * self.cfg.stale_intervals)))
        return self._slots

    def _pool(self, node: dict[str, Any] | None) -> Pool | None:
        if self.cfg.pool:
            return self.cfg.profile.pool(self.cfg.pool)
        if node is not None:
            return self.cfg.profile.pool_of(node)
        try:
            return self.cfg.profile.pool(None)
        except UnknownPoolError:
            return None

    async def _slices(self, pool: Pool, node: dict[str, Any] | None = None,
                      ) -> tuple[list[dict[str, Any]] | None, str | None]:
        """This node's ResourceSlices when the pool's fabric is offered through DRA, or when the Node's
        allocatable lacks the pool's GPUs (a DRA driver may offer them); else nothing to read."""
        alloc = ((node or {}).get("status") or {}).get("allocatable") or {}
        gpus_short = node is not None and amount_or_zero(alloc.get(pool.gpuResource)) < pool.gpusPerNode
        if pool.fabric.dra is None and not gpus_short:
            return None, None
        if self.saved_slices is not None:
            return self.saved_slices, None
        if self.client is None:
            return None, "no cluster connection (dry run without --slices-json)"
        try:
            listed = await asyncio.wait_for(self.client.resource_slices(self.cfg.node), timeout=self.cfg.check_timeout)
            return listed, None
        except TimeoutError:
            return None, f"listing ResourceSlices took over {self.cfg.check_timeout:g} s"
        except KubeError as e:
            return None, str(e)

    def _plan(self, pool: Pool, node: dict[str, Any] | None, node_error: str | None,
              slices: list[dict[str, Any]] | None = None, slices_error: str | None = None) -> list[CheckGroup]:
        """The check groups of one run (loading live NVML here: it may hang too, so it runs on the worker)."""
        try:
            gpu_data = load_gpus(self.cfg.nvml_json)
        except Exception as e:  # a recorded file that is not NVML data: the GPUs are unproven, gpu.count fails
            gpu_data = (None, f"cannot use {self.cfg.nvml_json}: {e}")
        return node_check_groups(
            self.cfg.profile,
            pool,
            root=self.cfg.root,
            gpu_data=gpu_data,
            node=node,
            node_error=node_error,
            gpu_ceilings=self.cfg.gpu_ceilings,
            slices=slices,
            slices_error=slices_error,
            lnetctl=Lnetctl.from_option(self.cfg.lnetctl),
        )

    async def evaluate(self, node: dict[str, Any] | None, node_error: str | None) -> tuple[Readiness, str | None]:
        """Run every check once (on a worker that can be abandoned, with a deadline) and judge; never raises.

        A check group still running at ``check_timeout`` fails naming itself and its thread is left behind
        (``agent.deadline``); while it stays stuck, later runs start no new thread and say so.
        """
        pool = self._pool(node)
        if pool is None:
            labels = ((node or {}).get("metadata") or {}).get("labels") or {}
            msg = (
                f"the labels of Node {self.cfg.node} match no pool's nodeSelector in profile "
                f"{self.cfg.profile.metadata.name} ({', '.join(self.cfg.profile.pool_names)}); pass --pool "
                f"or fix the labels ({len(labels)} labels read)"
                if node is not None
                else f"cannot tell the pool: {node_error}; pass --pool"
            )
            return Readiness("False", Reason.unknown_pool, msg, []), None
        if self._stuck is not None:
            if not self._stuck.finished.is_set():
                return judge(self._stuck.still_hung()), pool.name
            self._stuck = None
        slices, slices_error = await self._slices(pool, node)
        run = CheckRun(lambda: self._plan(pool, node, node_error, slices, slices_error), first="gpu.count")
        if not await run.wait(self.cfg.check_timeout):
            self._stuck = run
            self.metrics.abandoned.inc()
            log.error("checks abandoned: %s did not finish within %g s", run.current, self.cfg.check_timeout)
            return judge(run.abandoned(self.cfg.check_timeout)), pool.name
        if run.error is not None:  # fail closed on anything the guarded groups did not catch
            e = run.error
            c = Check("agent.run", Status.failed, f"check could not run: {type(e).__name__}: {e}", {"error": True})
            return judge([*run.checks, c]), pool.name
        return judge(run.checks), pool.name

    async def run_once(self, *, dry_run: bool = False, damp: bool = True, give_up_unreachable: bool = False,
                       ) -> RunResult:
        """One run: read the Node, check, report. ``give_up_unreachable`` (``agent --once``): a Node read that got
        no answer raises it, instead of waiting out the status write's timeout too."""
        t0 = time.monotonic()
        node: dict[str, Any] | None = None
        node_error: str | None = None
        errors: list[str] = []
        if self.client is not None:
            try:
                node = await self.client.get(self.cfg.node)
            except KubeError as e:
                node_error = str(e)
                self.unreachable = e if unreachable(e) else None
                if give_up_unreachable and self.unreachable is not None:
                    raise
        else:
            node_error = "no cluster connection (dry run without --node-json)"
        return await self.report(node, node_error, errors, t0, dry_run=dry_run, damp=damp)

    async def report(
        self,
        node: dict[str, Any] | None,
        node_error: str | None,
        errors: list[str],
        t0: float,
        *,
        dry_run: bool,
        damp: bool,
    ) -> RunResult:
        now = self.clock()
        previous = find_condition(node, names.FABRIC_READY)
        fresh_true = previous is not None and previous.get("status") == "True"
        if self.runs == 0 and fresh_true and previous and not is_stale(previous, now, self.cfg.max_age):
            self.damper.seed_stable()
        raw, pool = await self.evaluate(node, node_error)
        reported = self.damper.apply(raw) if damp else raw
        condition = build_condition(reported, previous, now)
        withheld: list[str] = []
        budget_view: dict[str, Any] | None = None
        if not dry_run and self.client is not None:
            # Bootstrap or not is decided on the Node as it was before this report (a first report creates
            # the condition, which would otherwise end the bootstrap at once).
            pool_model = self._pool(node) if pool and node is not None else None
            needs_proof = bool(pool_model and pool_model.proof and pool_model.proof.lifecycle)
            wanted = (wanted_taints(node, reported.status, needs_proof,
                                    pool_model.bootstrap_taint if pool_model else names.TAINT_UNVERIFIED)
                      if node is not None else None)
            ready_due = not (node is not None and previous is not None and not needs_write(
                previous, condition, now, self.cfg.heartbeat, self.cfg.interval))
            links = await self._links(node, now) if node is not None else None
            # FabricLinks rides on FabricReady's writes; alone only when its status or reason changed.
            links_due = links is not None and (ready_due or links_changed(find_condition(node, names.FABRIC_LINKS),
                                                                          links))
            if not ready_due:
                condition = dict(previous or {})  # what the Node holds: nothing changed, the heartbeat is not due
            if not ready_due and not links_due:
                self.metrics.status_writes.labels("skipped").inc()
            else:
                body = status_patch(condition) if ready_due else {"status": {"conditions": []}}
                if links_due and links is not None:
                    body["status"]["conditions"].append(links)
                try:
                    node = await self.client.patch_status(self.cfg.node, body)
                    self.metrics.status_writes.labels("written").inc()
                except (Forbidden, Invalid) as e:
                    if not (ready_due and links_due):
                        errors.append(str(e))
                    else:
                        # An own-node policy older than this agent (its image bumped alone) refuses FabricLinks:
                        # the heartbeat must not die with it, or the sweep would mark a healthy node Unknown.
                        node = await self._ready_alone(condition, node, e, errors)
                except KubeError as e:
                    errors.append(str(e))
            observing = pool is not None and self.cfg.profile.mode_of(
                self.cfg.profile.pool(pool), self.cfg.mode) == "observe"
            if self.cfg.manage_taints and node is not None and wanted is not None and observing:
                if wanted:
                    log.info("observe mode: enforce would taint this node %s", ", ".join(sorted(wanted)))
            elif self.cfg.manage_taints and node is not None and wanted is not None:
                fv, fv_error = await self._read_fv(pool, errors) if wanted and pool else (None, None)
                withheld = breaker_withheld(condition, self.open_breakers) if wanted and pool else []
                self.metrics.withhold(withheld)
                if withheld:
                    log.warning("not tainting Node %s: pool %s's breaker is open for %s (the controller lifted its "
                                "taints; `fabricguard breaker status` says why, `fabricguard breaker reset --pool %s` "
                                "closes it once the cause is fixed)", self.cfg.node, pool, ", ".join(withheld), pool)
                    wanted = set()
                wanted, budget_view = await self._slot_for(pool, node, condition, wanted, fv, fv_error, now, errors)
                err, node = await self._taints(node, wanted)
                if err:
                    errors.append(err)
                await self._settle_slot(pool, node, budget_view, now, errors)
        if errors:
            self.metrics.report_errors.inc(len(errors))
            for msg in errors:
                log.error("report failed: %s", msg)
        seconds = time.monotonic() - t0
        self.runs += 1
        self.last_finished = time.time()
        self.metrics.observe(reported, seconds, self.last_finished)
        self.metrics.identify(self.cfg.node, pool or "")
        return RunResult(reported, raw, pool, seconds, condition, errors, withheld, budget_view)

    async def _ready_alone(self, condition: dict[str, Any], node: dict[str, Any] | None, refused: KubeError,
                           errors: list[str]) -> dict[str, Any] | None:
        """FabricReady written without FabricLinks, after the write of both was refused; the error says so."""
        assert self.client is not None
        try:
            node = await self.client.patch_status(self.cfg.node, status_patch(condition))
        except KubeError as e:
            errors.append(str(e))
            return node
        self.metrics.status_writes.labels("written").inc()
        errors.append(f"FabricLinks refused, FabricReady written alone (apply this release's own-node admission "
                      f"policy with its agent): {refused}")
        return node

    async def _read_fv(self, pool: str, errors: list[str]) -> tuple[dict[str, Any] | None, str | None]:
        """The pool's FabricValidation: its open breakers (kept from the last good read when this one fails) and
        its published node count (the taint budget; a failed read means the budget's floor)."""
        assert self.client is not None
        try:
            fv = await self.client.fabric_validation(pool)
        except KubeError as e:
            kept = ", ".join(self.open_breakers) or "none"
            errors.append(f"breakers of pool {pool}: {e} (the last read's open breakers are kept: {kept})")
            return None, str(e)
        self.open_breakers = sorted(c for c, s in breaker.states_of(fv).items() if s.open)
        return fv, None

    async def _slot_for(self, pool: str | None, node: dict[str, Any], condition: dict[str, Any],
                        wanted: set[str], fv: dict[str, Any] | None, fv_error: str | None, now: datetime,
                        errors: list[str]) -> tuple[set[str], dict[str, Any] | None]:
        """``wanted`` as far as the pool's taint budget allows: a readiness taint the Node does not carry yet is
        added only by the holder of a taint slot (agent/taint_slots.py); without one it is withheld."""
        standing = taint_keys(node) & set(MANAGED_KEYS)
        slots = self.slots
        if not wanted - standing or pool is None or slots is None or self.client is None:
            self.metrics.budget_withhold(pool or "", False)
            return wanted, None
        excused = taint_slots.reset_excused(condition, fv)
        if excused:  # a person reset the breakers of every check it fails after it started failing: as decided
            log.info("tainting Node %s without a taint slot: its failing checks %s were reset by a person after it "
                     "started failing", self.cfg.node, ", ".join(excused))
            self.metrics.budget_withhold(pool, False)
            return wanted, None
        pool_model = self.cfg.profile.pool(pool)
        budget = taint_slots.budget_of(pool_model, fv, now, read_error=fv_error)
        try:
            got = await slots.acquire(pool_model, budget, now, self.client.node_or_none)
        except Exception as exc:  # a bug or an answer we did not foresee: no slot (fail closed), never a crash
            log.exception("taint slots of pool %s", pool)
            got = taint_slots.SlotOutcome(budget, error=f"taint slots of pool {pool}: {type(exc).__name__}: {exc}")
        if got.error:
            errors.append(got.error)
        spend = got.slot is not None and slots.fresh()
        self.metrics.budget_withhold(pool, not spend)
        if got.slot is not None and got.reclaimed:
            log.info("taint slot %s of pool %s reclaimed: %s", got.slot, pool, got.reclaimed)
        if not spend:
            why = (f"the slot API failed: {got.error}" if got.error else
                   "the slot was written too long ago to spend (a stalled run), next run" if got.slot else
                   f"all {budget.slots} held by other nodes" if got.taken >= budget.slots else
                   f"{got.taken} of {budget.slots} held, the rest lost to other nodes this run")
            log.warning("not tainting Node %s: no taint slot of pool %s free (budget %s; %s); it stays schedulable "
                        "while the controller judges the pool's breaker", self.cfg.node, pool, budget.describe(), why)
            wanted = wanted & standing
        return wanted, got.to_dict(withheld=not spend)

    async def _settle_slot(self, pool: str | None, node: dict[str, Any] | None, budget_view: dict[str, Any] | None,
                           now: datetime, errors: list[str]) -> None:
        """After the taint patch: a Node left without a readiness taint gives its slot back; one whose taint stands
        renews it (adopting, after a restart, the slot it already held)."""
        slots = self.slots
        if slots is None or node is None or pool is None:
            return
        if not taint_keys(node) & set(MANAGED_KEYS):
            err = await slots.release(now)  # one held before a restart goes stale and is reclaimed: untainted
        elif budget_view is not None:
            return  # acquire wrote the slot this run
        else:
            err = await slots.adopt(pool) or await slots.renew(now)
        if err:
            errors.append(err)

    async def _links(self, node: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
        """The FabricLinks condition now (agent/links.py), read off the loop with the checks' deadline: a sysfs
        read that hangs (a wedged driver) makes it Unknown, and no second read starts until the first returns."""
        previous = find_condition(node, names.FABRIC_LINKS)
        if self._links_reading is not None and not self._links_reading.done():
            verdict = ("Unknown", "CountersStuck", "the previous read of the RDMA counters has not returned "
                       "(a wedged driver?)")
        else:
            self._links_reading = asyncio.ensure_future(
                asyncio.to_thread(self.link_watch.judge, self.cfg.root, time.monotonic()))
            try:
                verdict = await asyncio.wait_for(asyncio.shield(self._links_reading), self.cfg.check_timeout)
            except TimeoutError:
                verdict = ("Unknown", "CountersStuck",
                           f"reading the RDMA counters took more than {self.cfg.check_timeout:g} s")
            except Exception as exc:  # never a crash of the loop for a counter
                verdict = ("Unknown", "CountersUnreadable", f"{type(exc).__name__}: {exc}"[:300])
        return build_links_condition(*verdict, previous, now)

    async def _taints(self, node: dict[str, Any], wanted: set[str]) -> tuple[str | None, dict[str, Any] | None]:
        """Make the Node's readiness taints ``wanted``: (error, the Node as last known; None: not known)."""
        assert self.client is not None
        for _ in range(3):
            ops = taint_patch(node, wanted)
            if ops is None:
                return None, node
            try:
                return None, await self.client.patch_json(self.cfg.node, ops)
            except (Conflict, Invalid):
                pass  # the Node changed since it was read (the resourceVersion test failed): read it again
            except KubeError as exc:
                return str(exc), None
            try:
                node = await self.client.get(self.cfg.node)
            except KubeError as e:
                return str(e), None
        return f"taints of Node {self.cfg.node}: the Node kept changing; retrying next run", None

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Run every interval until ``stop`` is set; a run in flight (a hung API call) is cancelled at once, so
        SIGTERM never waits for a request timeout."""
        while not stop.is_set():
            started = time.monotonic()
            run = asyncio.ensure_future(self.run_once())
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({run, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not run.done():
                run.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await run
                return
            try:
                res = run.result()
                log.info("FabricReady=%s %s: %s", res.reported.status, res.reported.reason, res.reported.message)
            except Exception:  # a bug must not stop the heartbeat silently: log it, /healthz goes 503 later
                log.exception("agent run crashed")
            delay = max(self.cfg.interval - (time.monotonic() - started), 0.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)
