"""Taint slots: the pool's blast-radius budget as a shared, atomic counting semaphore that an agent which keeps its
own taints (``--manage-taints``) takes from *before* it taints its Node.

Why: the controller's breakers (``controller/blast.py``) open only at its next pass. Agents that taint at once would
all taint themselves when many nodes start failing within one pass (a bad rollout, a typo in the profile): the
pool's budget exceeded for up to a pass. With slots, no agent taints without one, and there are only as many
slots as the budget allows, so that cannot happen by construction.

**The number.** ``Pool.blast_budget().allowed(nodes)``: the same function and profile fields the controller's
breakers use. ``nodes`` is the pool's node count as the controller last counted it, published in the pool's
FabricValidation ``status.blastBudget`` (:func:`published`; the agent already reads that object for the breakers,
so it needs no ``list nodes``: thousands of agents listing every node at once in a mass failure would be a load
the API server should never see). The controller rewrites it when the count changes and at least every
:data:`PUBLISH_REFRESH_S`. A figure that is absent, unreadable or older than :data:`PUBLISHED_MAX_AGE_S` (the
controller is down, or not installed) is not trusted: the agent falls back to the budget's floor,
``allowed(0) = blastRadius.minimum``, which the real budget is never below (fail closed on the budget). When the
controller's own ``allowed`` is smaller (its profile changed before the agent's), the smaller number holds.

**The slots.** Lease ``fabricguard-taint-<pool>-<i>`` (``coordination.k8s.io/v1``, the agent's namespace) for
``i < slots``. Taking one is atomic: a create (``AlreadyExists`` means taken) or, for a slot that can be reused, a
merge patch carrying the ``resourceVersion`` it read (409 when another agent wrote it first). The holder renews
it every run while its taint stands (``renewTime``, ``leaseDurationSeconds`` = ``--stale-intervals`` runs) and
releases it (``holderIdentity`` emptied, rv-guarded) once its Node carries no readiness taint of ours.

**When a slot that is not free may be taken** (:func:`reusable`, :meth:`TaintSlots.acquire`):

- *aged*: it was taken more than ``blastRadius.window`` ago (``acquireTime``). The controller's budget counts
  nodes *newly* failing within that window; a taint placed a window ago is no longer new to it either, so the
  slot goes back to the pool. (Without this, one node broken for a week would keep a 1-slot pool from ever
  tainting another.) Its taint stays;
- *stale and its taint gone*: the holder has not renewed for ``leaseDurationSeconds`` **by this agent's own
  clock** (client-go's rule: the time it *observed* the record last change, never the holder's written time),
  and the holder's Node is gone or carries no readiness taint of ours (``get nodes``, which the agent already
  has). A silent holder whose Node is still tainted keeps its slot until it ages: reclaiming it would leave two
  taints on one slot. ``agent --once`` has observed nothing before, so it never reclaims a stale slot.

A holder that took its slot more than half a lease duration before it gets to patch its taint (a stalled
process) does not taint in that run: a slot it may have lost meanwhile is never spent twice.

A person's ``fabricguard breaker reset`` of every check a node fails, after the node started failing, releases it
from the slots (:func:`reset_excused`): the controller no longer counts failures from before a reset against the
budget, and the slots count exactly what it counts; failures after the reset take slots again.

Every API failure on the way means no slot (no taint: fail closed) and a report error, never a crash; the caller
withholds the taint, logs one line naming the pool and the budget, and counts it
(``fabricguard_agent_taint_budget_withheld``).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fabricguard import breaker, names, times
from fabricguard.agent.condition import failing_checks
from fabricguard.agent.taints import MANAGED_KEYS
from fabricguard.kube import Conflict, Kube, KubeError
from fabricguard.objects import taint_keys
from fabricguard.profile import Pool

LEASES = "leases"
SLOT_PREFIX = "fabricguard-taint-"
COMPONENT = "taint-slot"
PUBLISH_REFRESH_S = 600  # the controller rewrites status.blastBudget at least this often
PUBLISHED_MAX_AGE_S = 3 * PUBLISH_REFRESH_S  # older than this (by the agent's clock): the controller is not counting
MAX_WRITES = 3  # slot writes one run may try (each 409 is another agent's win; the next run tries again)
MAX_PROBES = 3  # holders' Nodes one run may read to reclaim a stale slot


def slot_name(pool: str, index: int) -> str:
    return f"{SLOT_PREFIX}{pool}-{index}"


def selector(pool: str) -> str:
    return f"{names.LABEL_POOL}={pool},{names.LABEL_APP_COMPONENT}={COMPONENT}"


# ------------------------------------------------------------------------------------------ the number


def published(pool: Pool, nodes: int, now: datetime) -> dict[str, Any]:
    """What the controller writes in the pool's FabricValidation ``status.blastBudget``."""
    budget = pool.blast_budget()
    return {"nodes": nodes, "allowed": budget.allowed(nodes), "windowSeconds": budget.window_s,
            "observedAt": times.format_time(now)}


def publish_due(stored: Any, fresh: Mapping[str, Any], now: datetime) -> bool:
    """Whether the controller writes ``fresh``: the stored figure differs, or is older than the refresh period."""
    if not isinstance(stored, Mapping) or any(stored.get(k) != fresh[k] for k in ("nodes", "allowed",
                                                                                    "windowSeconds")):
        return True
    at = times.parse_time(stored.get("observedAt"))
    return at is None or not (timedelta(0) <= now - at < timedelta(seconds=PUBLISH_REFRESH_S))


@dataclass(frozen=True)
class SlotBudget:
    """How many taint slots the pool has, and where the number comes from (said in logs and ``agent --once``)."""

    pool: str
    slots: int
    nodes: int | None  # the pool's nodes as the controller published them; None: not known (the floor is used)
    source: str

    def describe(self) -> str:
        return f"{self.slots} taint slot(s): {self.source}"


def budget_of(pool: Pool, fv: Mapping[str, Any] | None, now: datetime, *, read_error: str | None = None,
              ) -> SlotBudget:
    """The pool's slots from its FabricValidation as read (``read_error``: the read failed)."""
    budget = pool.blast_budget()
    floor = budget.allowed(0)
    rule = f"max({budget.minimum}, {budget.fraction * 100:g}% of the nodes)"

    def fallback(why: str) -> SlotBudget:
        return SlotBudget(pool.name, floor, None, f"{why}: the budget's floor, {rule} of 0 nodes = {floor}")

    if read_error is not None:
        return fallback("the pool's FabricValidation could not be read")
    status = (fv or {}).get("status")
    bb = status.get("blastBudget") if isinstance(status, Mapping) else None
    nodes = bb.get("nodes") if isinstance(bb, Mapping) else None
    at = times.parse_time(bb.get("observedAt")) if isinstance(bb, Mapping) else None
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 0 or at is None:
        return fallback("no node count from the controller" if fv is not None else "no FabricValidation")
    age = (now - at).total_seconds()
    if abs(age) > PUBLISHED_MAX_AGE_S:
        return fallback(f"the controller's node count is {int(age)} s old (trusted up to {PUBLISHED_MAX_AGE_S} s)")
    allowed = budget.allowed(nodes)
    theirs = bb.get("allowed") if isinstance(bb, Mapping) else None
    if isinstance(theirs, int) and not isinstance(theirs, bool) and 0 <= theirs < allowed:
        # The controller's profile allows fewer (a profile change that reached it first): the smaller number holds.
        return SlotBudget(pool.name, theirs, nodes, f"{theirs} as the controller counts {nodes} nodes (this agent's "
                          f"profile would allow {allowed})")
    return SlotBudget(pool.name, allowed, nodes, f"{rule} of {nodes} nodes = {allowed}")


def reset_excused(condition: Mapping[str, Any] | None, fv: Mapping[str, Any] | None) -> list[str]:
    """The failing checks a person's ``fabricguard breaker reset`` released this node's failure from (all of them, or
    []): the node has failed since before the reset of every check it fails. The controller counts only failures
    after a reset (``breaker.judge``'s ``after``); the slots count what it counts, so such a node taints without
    one, as the person decided."""
    failing = failing_checks(dict(condition)) if condition else []
    since = times.parse_time((condition or {}).get("lastTransitionTime"))
    states = breaker.states_of(fv)
    if not failing or since is None:
        return []
    ok = all((s := states.get(c)) is not None and s.reset_at is not None and since <= s.reset_at for c in failing)
    return sorted(failing) if ok else []


# ------------------------------------------------------------------------------------------- the slots


def holder(lease: Mapping[str, Any] | None) -> str:
    spec = (lease or {}).get("spec") or {}
    h = spec.get("holderIdentity") if isinstance(spec, Mapping) else None
    return h if isinstance(h, str) else ""


def _spec(lease: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = lease.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def aged(lease: Mapping[str, Any], now: datetime, window_s: int) -> bool:
    """Taken more than a window ago: its taint is no longer *new* to the controller's budget, so the slot is too."""
    taken = times.parse_time(_spec(lease).get("acquireTime"))
    return taken is None or now - taken > timedelta(seconds=window_s)


def record(lease: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a change of a slot is seen by (client-go's observedRecord): holder, renewal, version."""
    spec = _spec(lease)
    return (spec.get("holderIdentity"), spec.get("renewTime"), (lease.get("metadata") or {}).get("resourceVersion"))


def duration_of(lease: Mapping[str, Any]) -> int:
    d = _spec(lease).get("leaseDurationSeconds")
    return d if isinstance(d, int) and not isinstance(d, bool) and d > 0 else 15


def reusable(lease: Mapping[str, Any] | None, now: datetime, window_s: int) -> bool:
    """A slot anyone may take without asking about its holder: missing, released (no holder), or aged."""
    return lease is None or not holder(lease) or aged(lease, now, window_s)


def taint_gone(node: Mapping[str, Any] | None) -> bool:
    """The holder's Node is gone, or carries none of the readiness taints an agent keeps."""
    return node is None or not (taint_keys(node) & set(MANAGED_KEYS))


@dataclass
class SlotOutcome:
    """One attempt at a slot: ``slot`` the Lease held after it (None: none, withhold the taint)."""

    budget: SlotBudget
    slot: str | None = None
    taken: int = 0  # slots held by other nodes, as listed
    error: str | None = None
    reclaimed: str = ""  # why the slot now held was taken from another holder, if it was

    def to_dict(self, *, withheld: bool) -> dict[str, Any]:
        return {"pool": self.budget.pool, "slots": self.budget.slots, "nodes": self.budget.nodes,
                "source": self.budget.source, "held": self.slot, "taken": self.taken, "withheld": withheld}


@dataclass
class TaintSlots:
    """One agent's side of its pool's taint slots. ``held``: the Lease as its last write left it."""

    kube: Kube
    namespace: str
    node: str
    duration_s: int
    mono: Callable[[], float] = time.monotonic
    held: dict[str, Any] | None = None
    held_at: float = 0.0  # monotonic time of the last successful write of ``held``
    observed: dict[str, tuple[tuple[Any, ...], float]] = field(default_factory=dict)  # name -> (record, since)
    listed: bool = False  # listed once since start (a restarted agent adopts the slot it held)

    @property
    def slot(self) -> str | None:
        return str(self.held["metadata"]["name"]) if self.held else None

    def fresh(self) -> bool:
        """Whether the slot was written recently enough to spend: within half a lease duration."""
        return self.held is not None and self.mono() - self.held_at < self.duration_s / 2

    def _observe(self, lease: Mapping[str, Any], mono_now: float) -> float:
        """When (monotonic) this agent saw the slot's record last change."""
        name = str((lease.get("metadata") or {}).get("name"))
        rec = record(lease)
        seen = self.observed.get(name)
        if seen is None or seen[0] != rec:
            self.observed[name] = (rec, mono_now)
            return mono_now
        return seen[1]

    def _body(self, pool: str, name: str, now: datetime, transitions: int) -> dict[str, Any]:
        return {"apiVersion": names.LEASE_API, "kind": "Lease",
                "metadata": {"name": name, "namespace": self.namespace,
                             "labels": {names.LABEL_APP_PART_OF: "fabricguard", names.LABEL_POOL: pool,
                                        names.LABEL_APP_COMPONENT: COMPONENT}},
                "spec": {"holderIdentity": self.node, "acquireTime": times.format_micro(now),
                         "renewTime": times.format_micro(now), "leaseDurationSeconds": self.duration_s,
                         "leaseTransitions": transitions}}

    async def _patch(self, name: str, rv: Any, spec: dict[str, Any]) -> dict[str, Any]:
        # The resourceVersion it read goes with the patch: the API server applies it only if nobody wrote since.
        return await self.kube.patch(names.LEASE_API, LEASES, name, {"metadata": {"resourceVersion": rv},
                                                                     "spec": spec},
                                     namespace=self.namespace, patch_type="merge")

    def _keep(self, lease: dict[str, Any]) -> None:
        self.held, self.held_at = lease, self.mono()

    async def renew(self, now: datetime) -> str | None:
        """Renew the held slot; an error (or a slot another agent took: it aged or was reclaimed) forgets it."""
        if self.held is None:
            return None
        name = str(self.held["metadata"]["name"])
        try:
            self._keep(await self._patch(name, self.held["metadata"].get("resourceVersion"),
                                         {"renewTime": times.format_micro(now),
                                          "leaseDurationSeconds": self.duration_s}))
            return None
        except Conflict:
            self.held = None  # written by someone else since: read again before trusting it
            return None
        except KubeError as e:
            return f"taint slot {name}: renewal failed: {e}"

    async def release(self, now: datetime) -> str | None:
        """Give the held slot back (its taint is gone); rv-guarded, so a slot taken over meanwhile is left alone."""
        if self.held is None:
            return None
        name = str(self.held["metadata"]["name"])
        try:
            await self._patch(name, self.held["metadata"].get("resourceVersion"),
                              {"holderIdentity": "", "renewTime": times.format_micro(now)})
        except Conflict:
            pass  # someone else holds it now
        except KubeError as e:
            return f"taint slot {name}: release failed (it goes stale and is reclaimed): {e}"
        self.held = None
        return None

    async def _list(self, pool: str) -> list[dict[str, Any]]:
        leases = await self.kube.list(names.LEASE_API, LEASES, self.namespace, label_selector=selector(pool))
        self.listed = True
        return leases

    async def adopt(self, pool: str) -> str | None:
        """After a restart: the slot this node already holds, if any (listed once)."""
        if self.held is not None or self.listed:
            return None
        try:
            leases = await self._list(pool)
        except KubeError as e:
            return f"taint slots of pool {pool}: {e}"
        mine = sorted((lease for lease in leases if holder(lease) == self.node), key=lambda x: record(x)[1] or "")
        if mine:
            self._keep(mine[-1])
        return None

    async def acquire(self, pool: Pool, budget: SlotBudget, now: datetime,
                      node_of: Callable[[str], Awaitable[dict[str, Any] | None]]) -> SlotOutcome:
        """Hold a slot of ``budget`` after this call, or say why not. ``node_of(name)``: an awaitable Node read
        (None when gone) for reclaiming a stale slot."""
        out = SlotOutcome(budget)
        if self.held is not None:
            if self.held["metadata"]["name"] in {slot_name(pool.name, i) for i in range(budget.slots)}:
                out.error = await self.renew(now)
                if self.held is not None:
                    out.slot = self.slot
                    return out
            else:  # the budget shrank below it (or it is another pool's): give it back, take one that counts
                out.error = await self.release(now)
                self.held = None
        try:
            leases = {str(lease["metadata"]["name"]): lease for lease in await self._list(pool.name)
                      if isinstance(lease.get("metadata"), dict)}
        except KubeError as e:
            out.error = f"taint slots of pool {pool.name}: {e}"
            return out
        mono_now = self.mono()
        names_ = [slot_name(pool.name, i) for i in range(budget.slots)]
        mine = [n for n in names_ if n in leases and holder(leases[n]) == self.node]
        if mine:  # held since before a restart (or a write whose answer was lost)
            self._keep(leases[mine[0]])
            out.error = await self.renew(now)
            out.slot = self.slot
            return out
        # Start where this node's name hashes to, so that racing agents mostly try different slots.
        start = zlib.crc32(self.node.encode()) % budget.slots if budget.slots else 0
        order = names_[start:] + names_[:start]
        window = pool.blast_budget().window_s
        stale: list[tuple[str, dict[str, Any]]] = []
        writes = 0
        for name in order:
            lease = leases.get(name)
            since = self._observe(lease, mono_now) if lease is not None else mono_now
            if not reusable(lease, now, window):
                assert lease is not None
                if mono_now - since > duration_of(lease):
                    stale.append((name, lease))
                continue
            if writes >= MAX_WRITES:
                break
            writes += 1
            if await self._take(pool.name, name, lease, now, out):
                out.reclaimed = ("aged: taken more than the window ago" if lease is not None and holder(lease)
                                 else "")
                return out
            if out.error is not None:
                return out
        for name, lease in sorted(stale, key=lambda s: str(record(s[1])[1] or ""))[:MAX_PROBES]:
            if writes >= MAX_WRITES:
                break
            try:
                gone = taint_gone(await node_of(holder(lease)))
            except KubeError as e:
                out.error = f"taint slot {name}: reading its holder's Node {holder(lease)}: {e}"
                return out
            if not gone:
                continue  # a silent holder whose taint stands keeps its slot until it ages
            writes += 1
            if await self._take(pool.name, name, lease, now, out):
                out.reclaimed = (f"its holder {holder(lease)} did not renew for {duration_of(lease)} s and its Node "
                                 "is gone or untainted")
                return out
            if out.error is not None:
                return out
        out.taken = sum(1 for n in names_ if n in leases and not reusable(leases[n], now, window))
        return out

    async def _take(self, pool: str, name: str, lease: dict[str, Any] | None, now: datetime, out: SlotOutcome,
                    ) -> bool:
        """One atomic write for slot ``name``: True when this agent holds it after; a 409 is another agent's win."""
        try:
            if lease is None:
                got = await self.kube.create(names.LEASE_API, LEASES, self._body(pool, name, now, 0))
            else:
                spec = dict(_spec(lease))
                body = self._body(pool, name, now, int(spec.get("leaseTransitions") or 0) + 1)
                got = await self._patch(name, (lease.get("metadata") or {}).get("resourceVersion"), body["spec"])
        except Conflict:
            return False
        except KubeError as e:
            out.error = f"taint slot {name}: {e}"
            return False
        if holder(got) != self.node:  # an answer without the holder we wrote: not ours to spend
            return False
        self._keep(got)
        out.slot = name
        return True
