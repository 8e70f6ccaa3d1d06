"""Lustre rule and view: each node's Lustre client as its agent last judged it (docs/storage.md §1).

The agent puts the client's checks (``lustre.health``, ``lustre.imports``, ``lustre.evictions``, ``lustre.lnet``,
``lustre.jobid``) into the node's ``FabricReady`` condition, quoting the line each failed check read; this module
reads them back from the snapshot (``readiness_message``, the one reader of that message), so a doctor run on a
saved snapshot sees what the agents saw:

- :func:`lustre_view`: per pool that mounts Lustre, one cell per node: ``healthy``, ``failing`` (a ``lustre.*``
  check failed: which, with its line), ``warning`` (one degraded), ``other`` (FabricReady False for a non-Lustre
  reason: the client was not judged apart), ``not-reporting`` (no FabricReady);
- ``lustre-client-unhealthy``: the failing nodes, one finding per pool. When one check fails on so many of a
  pool's reporting nodes that it cannot be each node's (``OUTAGE_SHARE`` of them, and at least ``OUTAGE_MIN``),
  the finding says the file system is down, once, instead of blaming the nodes: the controller's breaker for
  that check opens for the same reason (controller/blast.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fabricguard import names
from fabricguard import objects as o
from fabricguard.doctor.model import Finding, ObjRef, Severity
from fabricguard.doctor.rules._common import MAX_EVIDENCE_ITEMS, pool_nodes
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile import PlatformProfile
from fabricguard.readiness_message import parse

RULE = "lustre-client-unhealthy"
PREFIX = "lustre."
OUTAGE_SHARE = 0.5
OUTAGE_MIN = 3
STATES = ("failing", "warning", "other", "not-reporting", "healthy")


@dataclass(frozen=True)
class LustreCell:
    """One node's Lustre client in the doctor's per-node view."""

    node: str
    state: str  # one of STATES
    checks: dict[str, str] = field(default_factory=dict)  # failing (or degraded) lustre.* check -> its line
    since: str | None = None  # FabricReady's lastTransitionTime

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "state": self.state, "checks": self.checks or None, "since": self.since}


def _cell(node: dict[str, Any]) -> LustreCell:
    name = o.name_of(node)
    conds = [c for c in o.conditions_of(node) if c.get("type") == names.FABRIC_READY]
    if not conds:
        return LustreCell(name, "not-reporting")
    c = conds[0]
    since = c.get("lastTransitionTime")
    msg = parse(str(c.get("message") or ""))
    mine = {n: msg.details.get(n, "") for n in msg.checks if n.startswith(PREFIX)}
    if c.get("status") == "True":
        return LustreCell(name, "warning" if mine and msg.warnings else "healthy", mine, since)
    if mine and msg.failed:
        return LustreCell(name, "failing", mine, since)
    return LustreCell(name, "other", {}, since)


def lustre_view(snapshot: Snapshot, profile: PlatformProfile | None) -> dict[str, list[LustreCell]]:
    """Per pool that mounts the profile's Lustre, one cell per node, failing nodes first."""
    if profile is None or profile.spec.storage.lustre is None:
        return {}
    members = pool_nodes(snapshot, profile)
    order = {s: i for i, s in enumerate(STATES)}
    return {p.name: sorted((snapshot.derived("lustre-cell", n, _cell) for n in members.get(p.name, [])),
                           key=lambda c: (order[c.state], c.node))
            for p in profile.spec.pools if p.lustre}


def _failing(node: dict[str, Any]) -> LustreCell | None:
    cell = _cell(node)
    return cell if cell.state == "failing" else None


def _reporting(node: dict[str, Any]) -> bool:
    return _cell(node).state != "not-reporting"


def lustre_client_unhealthy(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    findings: list[Finding] = []
    if profile is None or profile.spec.storage.lustre is None:
        return findings
    members = pool_nodes(snapshot, profile)
    for p in profile.spec.pools:
        if not p.lustre:
            continue
        pool, nodes = p.name, members.get(p.name, [])
        # lustre_view's order (failing first, by node name), from the failing nodes alone.
        failing = sorted((c for _, c in snapshot.select((RULE, "failing", pool), nodes, _failing)),
                         key=lambda c: c.node)
        if not failing:
            continue
        reporting = len(snapshot.select((RULE, "reporting", pool), nodes, _reporting))
        by_check: dict[str, list[LustreCell]] = {}
        for c in failing:
            for check in c.checks:
                by_check.setdefault(check, []).append(c)
        check, most = max(by_check.items(), key=lambda kv: (len(kv[1]), kv[0]))
        evidence = {names.FABRIC_READY: {c.node: "; ".join(f"{k}: {v}" for k, v in c.checks.items())[:300]
                                    for c in failing[:MAX_EVIDENCE_ITEMS]}}
        first = most[0]
        line = first.checks[check] or "(no detail in the message)"
        if len(most) >= OUTAGE_MIN and len(most) >= OUTAGE_SHARE * reporting:
            findings.append(Finding(
                RULE, Severity.warning, [ObjRef("Node", c.node) for c in most],
                f"the Lustre file system looks down for pool {pool}, not its nodes: {check} fails on {len(most)} of "
                f"its {reporting} reporting node(s) ({first.node}: {line})",
                evidence,
                "treat it as the file system's incident (its servers, the network to them, the provider's status), "
                "not as node repairs; the blast-radius breaker of this check stops the taints "
                "(`fabricguard breaker status`), and the storage canary holds the pool's storage until it passes",
                pools=[pool]))
            continue
        findings.append(Finding(
            RULE, Severity.warning, [ObjRef("Node", c.node) for c in failing],
            f"{len(failing)} of pool {pool}'s {reporting} reporting node(s) have an unhealthy Lustre client: "
            f"{first.node}: {check}: {line}",
            evidence,
            "on the node: `lctl get_param health_check osc.*.import mdc.*.import`, `lnetctl peer show -v 3`; an "
            "evicted or disconnected client usually needs its mounts remounted (drain the node first); the node's "
            "readiness taint keeps new jobs off it meanwhile",
            pools=[pool]))
    return findings
