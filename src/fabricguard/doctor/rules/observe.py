"""``enforce-would-have-acted``: what enforce would have held or tainted in the last day, on pools that observe.

Read from what the cluster keeps, not from Events (an Event lives one hour by default):

- **held**: a Workload whose ``fabric-validated`` entry the controller set ``Ready`` with the observe message
  (``fabricguard observe mode: enforce would hold: ...``, ``controller/gate.py``) within the window: Kueue keeps the
  Workload, with that entry and its ``lastTransitionTime``, for as long as the job exists. Its pool is the one whose
  flavors (``PlatformProfile.canary_flavors``) the Workload was admitted to, else the pool the message names;
- **tainted**: a node of an observing pool whose ``FabricReady`` is not ``True`` now (enforce would have it tainted
  since its ``lastTransitionTime``), or turned ``True`` within the window (enforce would have held it tainted until
  then). A node that failed and recovered twice within the day shows once: the condition keeps only its latest
  transition; this is said in the evidence, never guessed.

Observing pools: the profile's ``mode`` field, else ``observe`` (what a new install renders); a pool whose
Workloads carry the observe message observes whatever the profile says. Pure: :func:`would_have` serves the
doctor (this rule, severity info) and ``preflight`` (its "Observe" rows).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fabricguard import names, objects, times
from fabricguard.doctor.model import Finding, ObjRef, Severity
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile import PlatformProfile

RULE = "enforce-would-have-acted"
WINDOW = timedelta(days=1)
OBSERVE_HOLD = names.OBSERVE_HOLD_PREFIX
MAX_LISTED = 20


@dataclass
class WouldHave:
    """One pool's day under observe: the Workloads enforce would have held and the nodes it would have tainted."""

    pool: str
    held: list[tuple[str, str]] = field(default_factory=list)  # ("namespace/workload", when)
    tainted: list[tuple[str, str, str]] = field(default_factory=list)  # (node, status now, since)

    @property
    def empty(self) -> bool:
        return not self.held and not self.tainted

    def describe(self) -> str:
        now_bad = sum(1 for _, st, _ in self.tainted if st != "True")
        return (f"enforce would have held {len(self.held)} workload(s) and tainted {len(self.tainted)} node(s) of "
                f"pool {self.pool} in the last 24 h ({now_bad} node(s) still not FabricReady)")


def _when(value: Any) -> datetime | None:
    return times.parse_time(value)


def _pool_of_workload(wl: dict[str, Any], profile: PlatformProfile, message: str) -> str | None:
    flavor_pool = {f: p.name for p in profile.spec.pools for f in profile.canary_flavors(p)}
    admission = (wl.get("status") or {}).get("admission") or {}
    for ps in admission.get("podSetAssignments") or ():
        for flavor in ((ps or {}).get("flavors") or {}).values():
            if flavor in flavor_pool:
                return flavor_pool[flavor]
    return next((p.name for p in profile.spec.pools if f"pool {p.name}" in message), None)


Tainted = tuple[str, str, str]  # (node, FabricReady status now, since)


def _ready_mark(n: dict[str, Any]) -> tuple[Tainted, datetime | None] | None:
    """((name, FabricReady status, since as written), since) of a node whose agent reported, else None."""
    cond = objects.find_condition(n, names.FABRIC_READY)
    if cond is None:
        return None  # no agent reported here: node-not-gated says so; there is no verdict enforce would act on
    changed = _when(cond.get("lastTransitionTime"))
    return (objects.name_of(n), str(cond.get("status") or "?"), times.format_time(changed) if changed else "?"), changed


@dataclass(frozen=True)
class _Marks:
    """One pool's reporting nodes, split without the clock: those not FabricReady now (tainted whatever the time)
    and those True with a transition time, by that time (tainted while it is inside the window)."""

    down: list[tuple[int, Tainted]]  # (position, entry)
    times: list[datetime]  # sorted
    at: list[tuple[int, Tainted]]  # aligned with times


def _split(marks: list[tuple[dict[str, Any], tuple[Tainted, datetime | None]]]) -> _Marks:
    down = [(i, entry) for i, (_, (entry, _)) in enumerate(marks) if entry[1] != "True"]
    true = sorted((changed, i, entry) for i, (_, (entry, changed)) in enumerate(marks)
                  if entry[1] == "True" and changed is not None)
    return _Marks(down, [t for t, _, _ in true], [(i, e) for _, i, e in true])


def _held_marks(wl: dict[str, Any]) -> tuple[tuple[datetime | None, str], ...]:
    """(when, message) of each of the Workload's check entries the observe mode wrote."""
    out = []
    for entry in (wl.get("status") or {}).get("admissionChecks") or ():
        msg = str((entry or {}).get("message") or "")
        if msg.startswith(OBSERVE_HOLD):
            out.append((_when((entry or {}).get("lastTransitionTime")), msg))
    return tuple(out)


def would_have(profile: PlatformProfile, nodes: list[dict[str, Any]], workloads: list[dict[str, Any]],
               now: datetime, default_mode: str = "observe",
               members: dict[str, list[dict[str, Any]]] | None = None,
               snapshot: Snapshot | None = None) -> dict[str, WouldHave]:
    """Per observing pool, what enforce would have held and tainted within :data:`WINDOW` before ``now``.

    The clock is read only where something is compared with the window: with no observe message and no
    observing pool, the answer does not depend on the time (an incremental pass keeps it: controller/incremental.py).
    A pool's nodes that are True are found by their transition times, sorted, with a binary search (the two
    times beside the window's start are the comparisons that bound it). ``members``: Snapshot.pool_members (each
    node's pool, computed once); ``snapshot`` (whose nodes and Workloads these are): what each node and Workload
    says is kept while it is the same object (``Snapshot.select``)."""
    start: list[datetime] = []

    def since() -> datetime:
        if not start:
            start.append(now - WINDOW)
        return start[0]

    out: dict[str, WouldHave] = {}
    held = (snapshot.select((RULE, "held"), workloads, _held_marks) if snapshot is not None
            else [(wl, m) for wl in workloads if (m := _held_marks(wl))])
    for wl, said in held:
        for when, msg in said:
            if when is None or when < since():
                continue
            pool = _pool_of_workload(wl, profile, msg)
            if pool is not None:
                out.setdefault(pool, WouldHave(pool)).held.append(
                    (f"{objects.namespace_of(wl)}/{objects.name_of(wl)}", times.format_time(when)))
    observing = {p.name for p in profile.spec.pools if profile.mode_of(p, default_mode) == "observe"} | set(out)
    watched = {p.name for p in profile.spec.pools if p.name in observing and p.fabric.has_fabric}
    if watched and members is None:
        members = {}
        for n in nodes:
            if (q := profile.pool_of(n)) is not None:
                members.setdefault(q.name, []).append(n)
    for p in profile.spec.pools:
        if p.name not in watched or members is None:
            continue
        pool_nodes = members.get(p.name, [])
        if snapshot is not None:
            marks = snapshot.fold((RULE, "marks", p.name), snapshot.select((RULE, "ready", p.name), pool_nodes,
                                                                      _ready_mark), _split)
        else:
            marks = _split([(n, mark) for n in pool_nodes if (mark := _ready_mark(n))])
        recent = marks.at[bisect_left(marks.times, since()):] if marks.times else []
        tainted = sorted(marks.down + recent)
        if tainted:
            out.setdefault(p.name, WouldHave(p.name)).tainted.extend(e for _, e in tainted)
    return {p: w for p, w in sorted(out.items()) if not w.empty}


def enforce_would_have_acted(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    if profile is None:
        return []
    findings = []
    for pool, w in would_have(profile, snapshot.nodes, snapshot.kind("Workload"), now,
                              members=snapshot.pool_members(profile), snapshot=snapshot).items():
        refs = [ObjRef("Node", n) for n, _, _ in w.tainted[:MAX_LISTED]]
        refs += [ObjRef("Workload", ref.split("/", 1)[1], ref.split("/", 1)[0]) for ref, _ in w.held[:MAX_LISTED]]
        findings.append(Finding(
            RULE, Severity.info, refs, w.describe() + ".",
            {"held (workload, observed at)": w.held[:MAX_LISTED],
             "tainted (node, FabricReady now, since)": w.tainted[:MAX_LISTED],
             "note": "a node's condition keeps only its latest transition: one that failed and recovered twice "
                     "in the day is listed once"},
            f"Before `mode: enforce` on pool {pool}: read each node's FabricReady message (`kubectl get node NODE "
            "-o jsonpath='{.status.conditions[?(@.type==\"FabricReady\")].message}'`) and each Workload's "
            "fabric-validated message; fix what is ours (profile, agent) first.",
            pools=[pool],
        ))
    return findings
