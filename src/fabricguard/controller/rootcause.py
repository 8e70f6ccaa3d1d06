"""The root cause where people look, and one meaning of "validated".

A pool is **validated** when all four hold, and only then: its latest canary passed within two intervals (or it
runs no canary), its storage canary proved its Lustre within two intervals (``controller/storage_proof.py``), no
critical doctor finding about its infrastructure names it (findings about one workload,
such as a job that requests no fabric, are that job's), and its nodes' agents do not report the fabric broken
(``FabricReady=False`` on at least half of the pool's nodes that report, or on so many that fewer than the
canary's node count still report ``True``). The exit code of ``controller --once``, the Kueue check
``fabric-validated`` and the gauge ``fabricguard_pool_fabric_validated`` all read this one standing
(``PoolState.ready``).

What the pass knows about why a pool is not validated is written where people look:

* the FabricValidation's conditions: ``Validated`` (status, a reason, the pool's message), ``RootCause`` (the
  pool's critical doctor findings, each with its rule and message) and, for a pool with a canary,
  ``StorageReady`` (the storage proof's outcome and figures);
* an Event (``FabricRootCause``) on each object a critical finding names (the never-ready device plugin
  DaemonSet, a Node), once per change of the finding, not once per pass;
* the held Workload's check message: ``held: pool P canary unschedulable; root cause: <rule>: <message>; ...``.

Pure logic: the listed cluster, the standings and the findings in, actions out.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import partial
from typing import Any

from fabricguard import kinds, names
from fabricguard import objects as o
from fabricguard.controller.actions import Action, MergeStatus, event
from fabricguard.controller.canaries import PoolState
from fabricguard.controller.outcome import Outcome
from fabricguard.doctor.engine import rank_by_cause
from fabricguard.doctor.model import Finding, Severity
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile.model import PlatformProfile, Pool

VALIDATED = names.FV_VALIDATED
ROOT_CAUSE = names.FV_ROOT_CAUSE
STORAGE_READY = names.FV_STORAGE_READY
ROOT_CAUSE_EVENT = "FabricRootCause"
MAX_ROOT_CAUSE = 600  # the check message is cut at 1024 characters: the root cause comes before the details
_API = {"DaemonSet": names.APPS_API, "Deployment": names.APPS_API, "Node": "v1", "Pod": "v1", "ConfigMap": "v1",
        "Namespace": "v1", "Service": "v1"}


# A finding about one workload (a job that asks for no fabric) says nothing about the pool's fabric: it is
# the job's to fix and must not hold every other job.
# The kinds are fabricguard.kinds' (a kind missing here held the whole pool for one tenant's LeaderWorkerSet).
WORKLOAD_KINDS = kinds.WORKLOAD_KINDS


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
    """At most ``limit`` characters, cut at a word boundary (never inside a word)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0]
    return cut + "…"


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")


def first_sentence(text: str) -> str:
    """The message's first sentence, whole (a finding's message leads with what is wrong)."""
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0]


def causes_of(findings: list[Finding]) -> list[str]:
    """One reason per rule, cause first (the doctor's ranking), each ``rule: first sentence`` whole; a rule
    that names several objects is told once, with how many."""
    by_rule: dict[str, list[Finding]] = {}
    for f in rank_by_cause(list(findings)):
        by_rule.setdefault(f.rule, []).append(f)
    out = []
    for rule, fs in by_rule.items():
        many = f" (×{len(fs)})" if len(fs) > 1 else ""
        out.append(f"{rule}{many}: {first_sentence(fs[0].message)}")
    return out


def cause_text(findings: list[Finding]) -> str:
    """The critical findings, one per rule, cause first, each reason whole, within MAX_ROOT_CAUSE."""
    causes = causes_of(findings)
    kept: list[str] = []
    for c in causes:
        if len("; ".join([*kept, c])) > MAX_ROOT_CAUSE - 40:
            break
        kept.append(c)
    if not kept and causes:
        kept = [_short(causes[0], MAX_ROOT_CAUSE - 40)]
    text = "; ".join(kept)
    if len(causes) > len(kept):
        text += f"; and {len(causes) - len(kept)} more critical finding(s)"
    return text


FIX_MARK = "\nfix: "  # the RootCause condition's message: the causes, then this, then the deepest cause's fix


def root_cause_message(findings: list[Finding]) -> str:
    """The RootCause condition's message: the causes (``cause_text``), then on its own line the fix of the deepest
    cause (the doctor's, with the selector and what the pods said), so ``kubectl describe fabricvalidation`` and
    ``kubectl fabricguard why`` say what to change, not only what is wrong."""
    fix = next((f.fix for f in rank_by_cause(list(findings)) if f.fix), "")
    return cause_text(findings) + (FIX_MARK + fix if fix else "")


def read_root_cause(message: str) -> tuple[str, str]:
    """(causes, fix) of a RootCause message written by ``root_cause_message`` (fix "" when none was written)."""
    causes, _, fix = message.partition(FIX_MARK)
    return causes.strip(), fix.strip()


def hold_message(states: list[PoolState], limit: int = 1024) -> str:
    """A held Workload's check message within ``limit`` characters (what ``kubectl describe workload`` shows):
    the pool and its canary's outcome, the deepest root cause, what the canary saw, the other causes, each
    reason whole or left out, never cut inside; it always ends with where the rest is:
    ``kubectl describe fabricvalidation <pool>``."""
    pools = [s.pool for s in states]
    parts: list[tuple[str, bool]] = []  # (text, starts a pool)
    for s in states:
        # The deepest cause, then what the canary itself saw (a refusal quoted from the API server is often
        # decisive), then the other causes.
        parts.append((f"held: {headline(s)}", True))
        parts += [(f"cause: {c}", False) for c in s.causes[:1]]
        parts += [(m.strip(), False) for m in s.message.split("; ") if m.strip()]
        parts += [(f"cause: {c}", False) for c in s.causes[1:]]

    def pointer(left: int) -> str:
        what = f"{left} more reason(s) and the runs" if left else "the runs and every finding"
        return f" — {what}: " + "; ".join(f"kubectl describe fabricvalidation {p}" for p in pools)

    def sep(n: int, head: bool) -> str:
        return (" | " if n else " ") if head else "; "

    # Every pool's head is kept; the other parts in order, each whole, while they fit beside the pointer.
    keep = [head for _, head in parts]
    used = len("fabricguard:") + sum(len(sep(n, True)) + len(p) for n, (p, h) in enumerate(parts) if h)
    for n, (part, head) in enumerate(parts):
        if head:
            continue
        if used + len(sep(n, False)) + len(part) + len(pointer(len(parts))) <= limit:
            keep[n] = True
            used += len(sep(n, False)) + len(part)
    left = keep.count(False)
    text = "fabricguard:"
    for n, (part, head) in enumerate(parts):
        if keep[n]:
            room = limit - len(pointer(left)) - len(text) - len(sep(n, head))
            text += sep(n, head) + (part if len(part) <= room else _short(part, max(room, 20)))
    return text + pointer(left)


def agent_report(pool: Pool, n: dict[str, Any]) -> tuple[str, tuple[str, str, str] | None] | None:
    """What one node's agent says for ``pool``: None when the node is not the pool's or reports nothing, else
    (its name, (name, reason, message) when it says the fabric is broken, else None)."""
    if not pool.matches(n):
        return None
    entries = [c for c in o.conditions_of(n) if c.get("type") == names.FABRIC_READY]
    if not entries:
        return None
    if len(entries) > 1:  # the agent's policy allows one; a reader that took the first could read True
        said = ", ".join(str(c.get("status")) for c in entries)
        return o.name_of(n), (o.name_of(n), "DuplicateFabricReady", f"{len(entries)} {names.FABRIC_READY} entries "
                                                                    f"({said})")
    if entries[0].get("status") == "False":
        c = entries[0]
        return o.name_of(n), (o.name_of(n), str(c.get("reason") or ""), str(c.get("message") or ""))
    return o.name_of(n), None


def broken_nodes(pool: Pool, nodes: list[dict[str, Any]], canary_nodes: int,
                 withheld: set[str] | frozenset[str] = frozenset(), snapshot: Snapshot | None = None) -> str:
    """Why the pool's agents say its fabric is broken, or "" when they do not. ``withheld``: nodes whose every
    failing check is behind an open blast-radius breaker (controller/blast.py): not counted at all. With
    ``snapshot`` (whose ``nodes`` these are), each node's report is kept while it is the same object."""
    view = partial(agent_report, pool)
    reports = (snapshot.select(("agents say", pool.name), nodes, view) if snapshot is not None
               else [(n, r) for n in nodes if (r := view(n))])
    reporting, bad = 0, []
    for _, (name, said) in reports:
        if name in withheld:
            continue
        reporting += 1
        if said is not None:
            bad.append(said)
    good = reporting - len(bad)
    if not bad or (2 * len(bad) < reporting and good >= canary_nodes):
        return ""
    first = "; ".join(f"{n}: {r} {m}".strip() for n, r, m in sorted(bad)[:2])
    return (f"{len(bad)} of the pool's {reporting} reporting node(s) have {names.FABRIC_READY}=False "
            f"({first[:300]})")


def nodes_say(profile: PlatformProfile, nodes: list[dict[str, Any]],
              withheld: set[str] | frozenset[str] = frozenset(), snapshot: Snapshot | None = None) -> dict[str, str]:
    """What each pool's agents say (``broken_nodes``), by pool name."""
    out: dict[str, str] = {}
    for pool in profile.spec.pools:
        canary = profile.canary(pool)
        out[pool.name] = broken_nodes(pool, nodes, canary.nodes if canary else 1, withheld, snapshot)
    return out


def apply_standing(profile: PlatformProfile, snapshot: Snapshot, states: dict[str, PoolState],
                   findings: list[Finding], withheld: set[str] | frozenset[str] = frozenset(),
                   said: dict[str, str] | None = None) -> None:
    """Fold the critical findings and the nodes' FabricReady into each pool's one standing. ``said``:
    ``nodes_say(profile, snapshot.nodes, withheld)`` when the caller kept it from a pass with the same nodes."""
    crit = critical_by_pool(findings)
    said = said if said is not None else nodes_say(profile, snapshot.nodes, withheld)
    for pool in profile.spec.pools:
        s = states.get(pool.name)
        if s is None:
            continue
        agents = said[pool.name]
        causes = crit.get(pool.name, [])
        s.root_cause = cause_text(causes) if causes else ""
        s.causes = causes_of(causes)
        judged_bad = s.outcome is not None and s.outcome != str(Outcome.passed)
        s.broken = bool(causes or agents or judged_bad or storage_bad(s))
        if agents:
            s.message = f"pool {pool.name}: {agents}; " + s.message
        if causes and s.ready:
            s.message = f"pool {pool.name}: {len(causes)} critical doctor finding(s); " + s.message
        if causes or agents:
            s.ready = False


def storage_bad(s: PoolState) -> bool:
    """The pool's storage proof says its storage is degraded or failed (not merely not proven yet)."""
    return s.storage is not None and s.storage.proof is not None and s.storage.proof.outcome != "passed"


def headline(s: PoolState) -> str:
    """``pool P canary unschedulable`` / ``pool P storage degraded`` / ``pool P not validated``: the first words
    of a held Workload's check."""
    if s.outcome and s.outcome != str(Outcome.passed):
        return f"pool {s.pool} canary {s.outcome}"
    if s.storage is not None and not s.storage.ready:
        proof = s.storage.proof
        return f"pool {s.pool} storage " + (proof.outcome if proof is not None and proof.outcome != "passed"
                                             else "not proven")
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
    if s.outcome == str(Outcome.passed) and s.storage is not None and not s.storage.ready:
        return "StorageNotReady"
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
                       root_cause_message(causes) if causes else "no critical doctor finding names this pool", now,
                       o.generation_of(fv)),
        ]
        if s.storage is not None:
            st = s.storage
            reason = ("StorageProven" if st.ready else "StorageNotProven" if st.proof is None or
                      st.proof.outcome == "passed" else "Storage" + st.proof.outcome.capitalize())
            want.append(_condition(current, STORAGE_READY, "True" if st.ready else "False", reason, st.message, now,
                                   o.generation_of(fv)))
        have = {c.get("type"): c for c in current}
        if all(have.get(c["type"]) == c for c in want) and len(current) == len(want):
            continue
        out.append(MergeStatus(names.FV_API, names.FV_PLURAL, None, pool.name, {"conditions": want}))
        before = str((have.get(ROOT_CAUSE) or {}).get("message") or "")
        if str(want[1]["message"]) == before:
            continue  # the same findings as last pass: their Events were sent then, not once per pass
        for f in causes[:3]:
            if first_sentence(f.message) in before:
                continue  # already reported
            for ref in f.objects[:3]:
                obj = _object(snapshot, ref.kind, ref.name, ref.namespace)
                api = str(obj.get("apiVersion") or _API.get(ref.kind, "v1"))
                msg = f"fabricguard: pool {pool.name} is held: {f.rule}: {f.message}"
                if f.fix:
                    msg += f" Fix: {f.fix}"
                out.append(event(obj, api, ref.kind, ROOT_CAUSE_EVENT, msg, now, warning=True))
    return out
