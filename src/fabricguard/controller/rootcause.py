"""The root cause where people look, and one meaning of "validated".

A pool is **validated** when all three hold, and only then: its latest canary passed within two intervals (or it
runs no canary), no critical doctor finding about its infrastructure names it (findings about one workload,
such as a job that requests no fabric, are that job's), and its nodes' agents do not report the fabric broken
(``FabricReady=False`` on at least half of the pool's nodes that report, or on so many that fewer than the
canary's node count still report ``True``). The exit code of ``controller --once``, the Kueue check
``fabric-validated`` and the gauge ``fabricguard_pool_fabric_validated`` all read this one standing
(``PoolState.ready``).

What the pass knows about why a pool is not validated is written where people look:

* the FabricValidation's conditions: ``Validated`` (status, a reason, the pool's message) and ``RootCause`` (the
  pool's critical doctor findings, each with its rule and message);
* an Event (``FabricRootCause``) on each object a critical finding names (the never-ready device plugin
  DaemonSet, a Node), once per change of the finding, not once per pass;
* the held Workload's check message: ``held: pool P canary unschedulable; root cause: <rule>: <message>; ...``.

Pure logic: the listed cluster, the standings and the findings in, actions out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fabricguard import names
from fabricguard import objects as o
from fabricguard.controller.actions import Action, MergeStatus, event
from fabricguard.controller.canaries import PoolState
from fabricguard.controller.outcome import Outcome
from fabricguard.doctor.model import Finding, Severity
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile.model import PlatformProfile, Pool

VALIDATED = names.FV_VALIDATED
ROOT_CAUSE = names.FV_ROOT_CAUSE
ROOT_CAUSE_EVENT = "FabricRootCause"
MAX_ROOT_CAUSE = 600  # the check message is cut at 1024 characters: the root cause comes before the details
_API = {"DaemonSet": names.APPS_API, "Deployment": names.APPS_API, "Node": "v1", "Pod": "v1", "ConfigMap": "v1",
        "Namespace": "v1", "Service": "v1"}


# A finding about one workload (a job that asks for no fabric) says nothing about the pool's fabric: it is
# the job's to fix and must not hold every other job.
WORKLOAD_KINDS = frozenset({"JobSet", "Job", "Pod", "TrainJob", "Workload", "PyTorchJob", "MPIJob", "RayJob"})


def critical_by_pool(findings: list[Finding]) -> dict[str, list[Finding]]:
    """The critical findings about each pool's infrastructure (not about one workload on it)."""
    out: dict[str, list[Finding]] = {}
    for f in findings:
        if f.objects and all(ref.kind in WORKLOAD_KINDS for ref in f.objects):
            continue
        if f.severity is Severity.critical:
            for p in f.pools:
                out.setdefault(p, []).append(f)
    return out


def _short(text: str, limit: int = 180) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cause_text(findings: list[Finding]) -> str:
    """The first three critical findings, each cut to its first words: rule and message."""
    text = "; ".join(f"{f.rule}: {_short(f.message)}" for f in findings[:3])
    if len(findings) > 3:
        text += f"; and {len(findings) - 3} more critical finding(s)"
    return text if len(text) <= MAX_ROOT_CAUSE else text[: MAX_ROOT_CAUSE - 1] + "…"


def broken_nodes(pool: Pool, nodes: list[dict[str, Any]], canary_nodes: int,
                 withheld: set[str] | frozenset[str] = frozenset()) -> str:
    """Why the pool's agents say its fabric is broken, or "" when they do not. ``withheld``: nodes whose every
    failing check is behind an open blast-radius breaker (controller/blast.py): not counted at all."""
    reporting, bad = 0, []
    for n in nodes:
        if not pool.matches(n) or o.name_of(n) in withheld:
            continue
        c = o.find_condition(n, names.FABRIC_READY)
        if c is None:
            continue
        reporting += 1
        if c.get("status") == "False":
            bad.append((o.name_of(n), str(c.get("reason") or ""), str(c.get("message") or "")))
    good = reporting - len(bad)
    if not bad or (2 * len(bad) < reporting and good >= canary_nodes):
        return ""
    first = "; ".join(f"{n}: {r} {m}".strip() for n, r, m in sorted(bad)[:2])
    return (f"{len(bad)} of the pool's {reporting} reporting node(s) have {names.FABRIC_READY}=False "
            f"({first[:300]})")


def apply_standing(profile: PlatformProfile, snapshot: Snapshot, states: dict[str, PoolState],
                   findings: list[Finding], withheld: set[str] | frozenset[str] = frozenset()) -> None:
    """Fold the critical findings and the nodes' FabricReady into each pool's one standing."""
    crit = critical_by_pool(findings)
    for pool in profile.spec.pools:
        s = states.get(pool.name)
        if s is None:
            continue
        canary = profile.canary(pool)
        nodes_say = broken_nodes(pool, snapshot.nodes, canary.nodes if canary else 1, withheld)
        causes = crit.get(pool.name, [])
        s.root_cause = cause_text(causes) if causes else ""
        judged_bad = s.outcome is not None and s.outcome != str(Outcome.passed)
        s.broken = bool(causes or nodes_say or judged_bad)
        if nodes_say:
            s.message = f"pool {pool.name}: {nodes_say}; " + s.message
        if causes and s.ready:
            s.message = f"pool {pool.name}: {len(causes)} critical doctor finding(s); " + s.message
        if causes or nodes_say:
            s.ready = False


def headline(s: PoolState) -> str:
    """``pool P canary unschedulable`` / ``pool P not validated``: the first words of a held Workload's check."""
    if s.outcome and s.outcome != str(Outcome.passed):
        return f"pool {s.pool} canary {s.outcome}"
    return f"pool {s.pool} not validated"


def held_message(s: PoolState) -> str:
    rc = f"; root cause: {s.root_cause}" if s.root_cause else ""
    return f"held: {headline(s)}{rc}; {s.message}"


def _reason(s: PoolState) -> str:
    if s.ready:
        return "CanaryPassed" if s.canary else "NoCanary"
    if s.root_cause:
        return "CriticalFindings"
    if "FabricReady=False" in s.message:
        return "NodesNotFabricReady"
    if s.outcome:
        return "Canary" + "".join(w.capitalize() for w in s.outcome.split("-"))
    return "NotYetValidated"


def _condition(current: list[dict[str, Any]], ctype: str, status: str, reason: str, message: str,
               now: datetime, generation: int | None) -> dict[str, Any]:
    """The condition as ``objects.set_condition`` sets it (the time moves only on a status change)."""
    return o.set_condition([dict(c) for c in current if c.get("type") == ctype], ctype, status, reason,
                           message[:32768], now, observed_generation=generation)


def _object(snapshot: Snapshot, kind: str, name: str, namespace: str | None) -> dict[str, Any]:
    for obj in snapshot.kind(kind):
        if o.name_of(obj) == name and (o.namespace_of(obj) or None) == (namespace or None):
            return obj
    return {"metadata": {"name": name, **({"namespace": namespace} if namespace else {})}}


def fv_actions(profile: PlatformProfile, snapshot: Snapshot, states: dict[str, PoolState], findings: list[Finding],
               now: datetime) -> list[Action]:
    """The FabricValidation conditions, and an Event on each object at fault when its finding is new."""
    fvs = {o.name_of(fv): fv for fv in snapshot.kind(names.FV_KIND)}
    crit = critical_by_pool(findings)
    out: list[Action] = []
    for pool in profile.spec.pools:
        s, fv = states.get(pool.name), fvs.get(pool.name)
        if s is None or fv is None:  # a FabricValidation created by this pass gets its conditions next pass
            continue
        current = o.conditions_of(fv)
        causes = crit.get(pool.name, [])
        want = [
            _condition(current, VALIDATED, "True" if s.ready else "False", _reason(s),
                       s.message if s.ready else held_message(s), now, o.generation_of(fv)),
            _condition(current, ROOT_CAUSE, "True" if causes else "False",
                       "CriticalFindings" if causes else "NoneFound",
                       cause_text(causes) if causes else "no critical doctor finding names this pool", now,
                       o.generation_of(fv)),
        ]
        have = {c.get("type"): c for c in current}
        if all(have.get(c["type"]) == c for c in want) and len(current) == len(want):
            continue
        out.append(MergeStatus(names.FV_API, names.FV_PLURAL, None, pool.name, {"conditions": want}))
        before = str((have.get(ROOT_CAUSE) or {}).get("message") or "")
        if str(want[1]["message"]) == before:
            continue  # the same findings as last pass: their Events were sent then, not once per pass
        for f in causes[:3]:
            if f"{f.rule}: {_short(f.message)}" in before:
                continue  # already reported
            for ref in f.objects[:3]:
                obj = _object(snapshot, ref.kind, ref.name, ref.namespace)
                api = str(obj.get("apiVersion") or _API.get(ref.kind, "v1"))
                msg = f"fabricguard: pool {pool.name} is held: {f.rule}: {f.message}"
                if f.fix:
                    msg += f" Fix: {f.fix}"
                out.append(event(obj, api, ref.kind, ROOT_CAUSE_EVENT, msg, now, warning=True))
    return out
