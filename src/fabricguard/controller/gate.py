"""The Kueue admission check ``fabricguard.io/fabric-validated``: hold workloads off a pool that is not validated.

Kueue adds the check's entry (state ``Pending``) to a Workload's ``status.admissionChecks`` once quota is
reserved on a flavor the ClusterQueue attaches the check to. For each such Workload not yet admitted, the
check's state follows the pool of its flavor: ``Ready`` when the pool is validated (controller/rootcause.py:
a fresh canary pass, no critical infrastructure finding, nodes not FabricReady=False), ``Pending`` while it is
only not yet proven, ``Retry`` (with ``requeueAfterSeconds``) when it is known broken, each with a message that
starts ``held: pool P canary <outcome>; root cause: ...`` and an Event, because ``kubectl get workloads``
never shows the message. An admitted Workload is left alone: turning its check back would evict a running job
for a later canary's result.

Only this check's entry is written (server-side apply; ``admissionChecks`` is a list keyed by name), and
the AdmissionCheck object's ``Active`` condition is kept True, without which its ClusterQueues go inactive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fabricguard import names, times
from fabricguard import objects as o
from fabricguard.controller.actions import Action, ApplyStatus, Emit, event
from fabricguard.controller.canaries import PoolState
from fabricguard.controller.rootcause import hold_message
from fabricguard.profile.model import PlatformProfile

MAX_MESSAGE = 1024  # Kueue allows 32768 characters; Events and `kubectl describe` read better short


OBSERVE_PREFIX = names.OBSERVE_HOLD_PREFIX
WOULD_HOLD_EVENT = "FabricWouldHold"


@dataclass
class GateResult:
    actions: list[Action] = field(default_factory=list)
    pending: dict[str, int] = field(default_factory=dict)  # pool -> workloads held by the check
    would_hold: dict[str, int] = field(default_factory=dict)  # observe: pool -> workloads enforce would hold
    held: list[tuple[str, str, str]] = field(default_factory=list)  # (namespace, workload, pool) held now


def our_checks(admission_checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [ac for ac in admission_checks if (ac.get("spec") or {}).get("controllerName") == names.CHECK_CONTROLLER]


def keep_active(admission_checks: list[dict[str, Any]], now: datetime) -> list[Action]:
    out: list[Action] = []
    for ac in our_checks(admission_checks):
        if o.condition_true(ac, names.AC_ACTIVE):
            continue
        out.append(ApplyStatus(names.KUEUE_API, "AdmissionCheck", "admissionchecks", None, o.name_of(ac), {
            "conditions": [{
                "type": "Active",
                "status": "True",
                "reason": "Active",
                "message": "fabricguard-controller is running and validates fabric pools with canaries",
                "lastTransitionTime": times.format_time(now),
                "observedGeneration": int(o.meta(ac).get("generation") or 1),
            }],
        }))
    return out


def _flavors(wl: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ():
        for f in (psa.get("flavors") or {}).values():
            out.add(str(f))
    return out


RETRY_AFTER_MIN_S, RETRY_AFTER_MAX_S = 60, 900


def retry_after(states: list[PoolState]) -> int:
    """Seconds Kueue waits before it requeues a Workload sent back with Retry: the pools' canary interval,
    bounded (a new canary cannot answer sooner; a quarter of an hour is the longest a queue should wait)."""
    interval = max((s.interval_s for s in states), default=0) or RETRY_AFTER_MAX_S
    return max(RETRY_AFTER_MIN_S, min(RETRY_AFTER_MAX_S, interval))


def decide(wl: dict[str, Any], flavor_pool: dict[str, str], states: dict[str, PoolState]) -> tuple[str, str, list[str]]:
    """(state, message, pools) for one Workload's entry of this check.

    ``Pending`` keeps the Workload's quota reserved: right while the pool is only not yet proven (no canary has
    finished, the last pass is stale), since it will be Ready within one canary. ``Retry`` releases the quota
    and requeues after ``requeueAfterSeconds``: right when the pool is known broken (a canary failed, fell
    back, was unschedulable or never created, a critical doctor finding, its nodes FabricReady=False), where
    keeping the quota would also starve work that could run elsewhere (docs/controller.md)."""
    flavors = _flavors(wl)
    pools = sorted({flavor_pool[f] for f in flavors if f in flavor_pool})
    unknown = sorted(f for f in flavors if f not in flavor_pool)
    if not flavors:
        return "Pending", "fabricguard: the workload has no flavor assignment yet", []
    if unknown and not pools:
        return ("Pending",
                f"fabricguard: flavor(s) {', '.join(unknown)} belong to no pool of the profile; add them to a "
                "pool's canary.flavors, or remove this check from those flavors (onFlavors)", [])
    bad = [states[p] for p in pools if p in states and not states[p].ready]
    if bad:
        state = "Retry" if any(s.broken for s in bad) else "Pending"
        return state, hold_message(bad, MAX_MESSAGE), [s.pool for s in bad]
    return "Ready", "fabricguard: " + " | ".join(states[p].message for p in pools if p in states), pools


@dataclass
class GateMemo:
    """What the gate decided last pass, for an incremental pass (controller/incremental.py): the context the
    decisions read besides each Workload (``context``: the pools' standing, the stale flag, the mode, the checks)
    and, per Workload, the object judged and its quiet decision. A decision that wrote something is never kept:
    its write carries the time, and one the API server refused is retried by the next pass."""

    context: str = ""
    quiet: dict[int, tuple[dict[str, Any], _Decision | None, tuple[str, str]]] = field(default_factory=dict)
    decided: int = 0  # Workloads decided this pass
    kept: int = 0  # Workloads whose previous decision was kept


@dataclass
class _Decision:
    state: str
    pools: list[str]
    observed: bool
    actions: list[Action] = field(default_factory=list)


def gate_workloads(
    profile: PlatformProfile,
    workloads: list[dict[str, Any]],
    admission_checks: list[dict[str, Any]],
    states: dict[str, PoolState],
    now: datetime,
    stale: str = "",
    mode: str = "enforce",
    memo: GateMemo | None = None,
) -> GateResult:
    """Each waiting Workload's entry of the check. ``stale`` (why the pass's view of the cluster is too old,
    ``Cache.stale``) turns every would-be Ready into Pending with that reason: a pool may have broken in what
    the controller has not heard, so it admits nothing until its watches catch up (fail closed).

    Observe mode (the install's ``mode``, or the pool's own field): the entry is ``Ready`` with a message that
    says exactly what enforce would have done (``... enforce would hold: held: pool P ...``), an Event
    ``FabricWouldHold``, and the count in ``would_hold``: nothing is held.

    ``memo`` (an incremental pass): a Workload that is the same object as last pass, under the same context,
    whose decision wrote nothing, keeps that decision without being decided again; ``memo`` is updated."""
    res = GateResult()
    observing = {p.name for p in profile.spec.pools if profile.mode_of(p, mode) == "observe"}
    check_names = {o.name_of(ac) for ac in our_checks(admission_checks)} or {names.CHECK_NAME}
    flavor_pool = {f: p.name for p in profile.spec.pools for f in profile.canary_flavors(p)}
    if memo is not None:
        # Everything a decision reads besides the Workload and the clock; repr, so that a field this line does
        # not know (a new one in PoolState) still counts: an unequal repr only decides everything again.
        context = repr((sorted(observing), sorted(check_names), sorted(flavor_pool.items()), stale,
                        sorted(states.items())))
        if context != memo.context:
            memo.context, memo.quiet = context, {}
        memo.decided = memo.kept = 0
        quiet: dict[int, tuple[dict[str, Any], _Decision | None, tuple[str, str]]] = {}
    for wl in workloads:
        # By the object's identity: the memo holds the Workload, so its id stays its own while kept.
        kept = memo.quiet.get(id(wl)) if memo is not None else None
        d: _Decision | None
        if memo is not None and kept is not None and kept[0] is wl:
            d, key = kept[1], kept[2]
            memo.kept += 1
        else:
            d = _decide_one(wl, check_names, flavor_pool, states, observing, stale, now)
            key = (o.namespace_of(wl) or "", o.name_of(wl))
            if memo is not None:
                memo.decided += 1
        if memo is not None and (d is None or not d.actions):
            quiet[id(wl)] = (wl, d, key)
        if d is None:
            continue
        if d.observed:
            for p in d.pools:
                res.would_hold[p] = res.would_hold.get(p, 0) + 1
        if d.state != "Ready":
            for p in d.pools:
                res.pending[p] = res.pending.get(p, 0) + 1
                res.held.append((key[0], key[1], p))
        res.actions += d.actions
    if memo is not None:
        memo.quiet = quiet
    return res


def _decide_one(wl: dict[str, Any], check_names: set[str], flavor_pool: dict[str, str], states: dict[str, PoolState],
                observing: set[str], stale: str, now: datetime) -> _Decision | None:
    """One Workload's decision and the writes it needs; None for a Workload the check does not gate (no entry of
    ours, no quota yet, or already admitted or finished)."""
    st = wl.get("status") or {}
    entry = next((e for e in st.get("admissionChecks") or ()
                  if isinstance(e, dict) and e.get("name") in check_names), None)
    if entry is None or not o.condition_true(wl, names.WL_QUOTA_RESERVED):
        return None
    if o.condition_true(wl, names.WL_ADMITTED) or o.condition_true(wl, names.WL_FINISHED):
        return None
    state, message, pools = decide(wl, flavor_pool, states)
    if state == "Ready" and stale:
        state, message = "Pending", f"fabricguard: held: {stale}; Ready once the controller hears the API server"
    observed = state != "Ready" and bool(pools) and all(p in observing for p in pools)
    if observed:
        state, message = "Ready", OBSERVE_PREFIX + message.removeprefix("fabricguard: ")
    message = message[:MAX_MESSAGE]
    d = _Decision(state, pools, observed)
    if entry.get("state") == state and entry.get("message") == message:
        return d
    changed = entry.get("state") != state
    want: dict[str, Any] = {
        "name": entry["name"],
        "state": state,
        "message": message,
        "lastTransitionTime": (times.format_time(now) if changed
                               else entry.get("lastTransitionTime") or times.format_time(now)),
    }
    if state == "Retry":
        want["requeueAfterSeconds"] = retry_after([states[p] for p in pools if p in states])
    admits = tuple(pools) if state == "Ready" and not observed else ()  # re-checked just before the write
    d.actions.append(ApplyStatus(names.KUEUE_API, "Workload", "workloads", o.namespace_of(wl), o.name_of(wl), {
        "admissionChecks": [want],
    }, admits))
    reason = WOULD_HOLD_EVENT if observed else "FabricValidated" if state == "Ready" else "FabricNotValidated"
    note = event(wl, names.KUEUE_API, "Workload", reason, message, now, warning=observed or state != "Ready")
    d.actions.append(Emit(note.body, admits) if admits else note)
    return d
