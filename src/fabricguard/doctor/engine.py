"""Run the doctor: rules over a snapshot, plus the data the HTML report draws (timelines, pool grid)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fabricguard.doctor.model import SEVERITY_ORDER, CoverageCell, Finding, ObjRef, Severity
from fabricguard.doctor.rules import RULES, RuleFn, run_rules
from fabricguard.doctor.rules import proof as proof_rules
from fabricguard.doctor.rules._common import fabric_pools, pool_nodes
from fabricguard.doctor.rules.daemonsets import NEVER_READY, NO_NODES, REGRESSED, template_since
from fabricguard.doctor.rules.fabric import NOT_ADVERTISED
from fabricguard.doctor.rules.images import RULE as ARCH_MISMATCH
from fabricguard.doctor.rules.lustre import LustreCell, lustre_view
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.exitcodes import exit_code
from fabricguard.profile import PlatformProfile
from fabricguard.times import format_time, parse_time

MAX_TIMELINES = 40


@dataclass
class Timeline:
    """One DaemonSet's life for the readiness timeline: created, template changes, pods, state now."""

    namespace: str
    name: str
    created: datetime | None
    template_since: datetime | None
    pod_times: list[datetime]
    desired: int
    ready: int
    state: str  # never-ready | regressed | ready | partial | idle


@dataclass
class Report:
    findings: list[Finding]
    now: datetime
    source: str
    profile_name: str | None = None
    notes: list[str] = field(default_factory=list)
    timelines: list[Timeline] = field(default_factory=list)
    # pool -> rule id -> "fail" | "pass" | "n/a"
    grid: dict[str, dict[str, str]] = field(default_factory=dict)
    title: str = "fabricguard doctor"
    # Lowest severity that makes the verdict "degraded" (``--fail-on``).
    fail_on: Severity = Severity.critical
    # What was checked (rule ids, and what they read), so a run without findings says what it proved.
    checked: list[str] = field(default_factory=list)
    objects_read: dict[str, int] = field(default_factory=dict)
    # pool with a proof goal -> one cell per node: its last pair test's age and result (the coverage grid)
    coverage: dict[str, list[CoverageCell]] = field(default_factory=dict)
    # pool that mounts Lustre -> one cell per node: its Lustre client as its agent last judged it
    lustre: dict[str, list[LustreCell]] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        out = {str(s): 0 for s in Severity}
        for f in self.findings:
            out[str(f.severity)] += 1
        return out

    @property
    def verdict(self) -> str:
        """``degraded`` when a finding is at or above ``fail_on``, else ``pass``."""
        limit = SEVERITY_ORDER[self.fail_on]
        return "degraded" if any(SEVERITY_ORDER[f.severity] <= limit for f in self.findings) else "pass"

    @property
    def exit_code(self) -> int:
        return exit_code(self.verdict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": "fabricguard.io/v1",
            "kind": "DoctorDiff" if self.title.endswith("diff") else "DoctorReport",
            "verdict": self.verdict,
            "fail_on": str(self.fail_on),
            "now": format_time(self.now),
            "source": self.source,
            "profile": self.profile_name,
            "summary": self.counts,
            "notes": self.notes,
            "findings": [f.to_dict() for f in self.findings],
            **({"coverage": {pool: [c.to_dict() for c in cells] for pool, cells in self.coverage.items()}}
               if self.coverage else {}),
            **({"lustre": {pool: [c.to_dict() for c in cells] for pool, cells in self.lustre.items()}}
               if self.lustre else {}),
        }


def _timelines(snapshot: Snapshot, findings: list[Finding], profile: PlatformProfile | None) -> list[Timeline]:
    bad: dict[tuple[str, str], str] = {}
    for f in findings:
        for o in f.objects:
            if o.kind == "DaemonSet" and bad.get((o.namespace or "", o.name)) not in (NEVER_READY, REGRESSED):
                bad[(o.namespace or "", o.name)] = f.rule
    plugins = {
        (dp.namespace, dp.daemonSet)
        for p in fabric_pools(profile)
        if (dp := p.fabric.fabric_daemonset)
    }
    out: list[Timeline] = []
    for ds in snapshot.daemonsets:
        meta = ds.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if key not in bad and key not in plugins and len(out) >= MAX_TIMELINES // 2:
            continue
        st = ds.get("status") or {}
        desired, ready = int(st.get("desiredNumberScheduled") or 0), int(st.get("numberReady") or 0)
        rule = bad.get(key)
        state = (
            "never-ready"
            if rule == NEVER_READY
            else "regressed"
            if rule == REGRESSED
            else "idle"
            if desired == 0
            else "ready"
            if ready >= desired
            else "partial"
        )
        pods = snapshot.daemonset_pods.get(key, [])
        since = template_since(snapshot, ds)[0] if int(meta.get("generation") or 1) > 1 else None
        out.append(
            Timeline(
                namespace=key[0],
                name=key[1],
                created=parse_time(meta.get("creationTimestamp")),
                template_since=since,
                pod_times=sorted(t for p in pods if (t := parse_time(p["metadata"].get("creationTimestamp")))),
                desired=desired,
                ready=ready,
                state=state,
            )
        )
    order = {"never-ready": 0, "regressed": 1, "partial": 2, "idle": 3, "ready": 4}
    out.sort(key=lambda t: (order[t.state], t.namespace, t.name))
    return out[:MAX_TIMELINES]


def _grid(snapshot: Snapshot, findings: list[Finding], profile: PlatformProfile | None) -> dict[str, dict[str, str]]:
    if profile is None:
        return {}
    members = pool_nodes(snapshot, profile)
    failed = {(pool, f.rule) for f in findings for pool in f.pools}
    grid: dict[str, dict[str, str]] = {}
    for p in profile.spec.pools:
        row: dict[str, str] = {}
        for rule in RULES:
            applicable = p.fabric.has_fabric and bool(members.get(p.name))
            if rule.id in ("daemonset-never-ready", "daemonset-no-nodes"):
                applicable = applicable and p.fabric.fabric_daemonset is not None
            if rule.id in ("fabric-not-advertised", "fabric-request-missing"):
                applicable = applicable and (bool(p.fabric.resources) or p.fabric.dra is not None)
            if rule.id == "topology-mapping-mismatch":
                applicable = applicable and bool(p.fabric.networkMapping)
            if rule.id.startswith("dra-") or rule.id == "kueue-dra-unmapped":
                applicable = applicable and p.fabric.dra is not None
            if rule.id == proof_rules.BEHIND:
                applicable = applicable and p.proof is not None
            hit = (p.name, rule.id) in failed or (rule.id == NEVER_READY and (p.name, REGRESSED) in failed)
            row[rule.id] = "fail" if hit else ("pass" if applicable else "n/a")
        grid[f"{p.name} ({len(members.get(p.name, []))} nodes)"] = row
    return grid


# Rules that explain others, deepest cause first: an image for the wrong CPU makes a DaemonSet never ready,
# which leaves the fabric unadvertised on the pool's nodes.
CAUSE_RANK = {ARCH_MISMATCH: 0, NO_NODES: 1, NEVER_READY: 2, REGRESSED: 2, NOT_ADVERTISED: 3}


def rank_by_cause(findings: list[Finding]) -> list[Finding]:
    """Findings by severity, each root cause followed by the findings it explains (``cause`` set on them).

    A finding follows from a deeper one that names the same object, or (the fabric not advertised) from a
    deeper one on the same pool's device plugin."""
    deeper = sorted((f for f in findings if f.rule in CAUSE_RANK), key=lambda f: CAUSE_RANK[f.rule])
    parent: dict[int, Finding] = {}
    # Nodes carry many stories: only the other objects two findings share make one the other's cause (a finding
    # about thousands of nodes is not hashed node by node, pair after pair).
    told: dict[int, set[ObjRef]] = {}

    def others(f: Finding) -> set[ObjRef]:
        if id(f) not in told:
            told[id(f)] = {o for o in f.objects if o.kind != "Node"}
        return told[id(f)]

    for f in findings:
        rank = CAUSE_RANK.get(f.rule, len(CAUSE_RANK) + 1)
        for c in deeper:
            if c is f or CAUSE_RANK[c.rule] >= rank:
                continue
            shared = others(c) & others(f)
            if shared or (f.rule == NOT_ADVERTISED and set(c.pools) & set(f.pools)):
                parent[id(f)] = c
                break

    def root(f: Finding) -> Finding:
        seen = 0
        while id(f) in parent and seen < len(findings):
            f, seen = parent[id(f)], seen + 1
        return f

    for f in findings:
        if id(f) in parent:
            c = parent[id(f)]
            f.cause = f"{c.rule} on {c.objects[0]}" if c.objects else c.rule
    roots = [f for f in findings if id(f) not in parent]
    roots.sort(key=lambda f: (SEVERITY_ORDER[f.severity], CAUSE_RANK.get(f.rule, len(CAUSE_RANK) + 1)))
    out: list[Finding] = []
    for r in roots:
        out.append(r)
        effects = [f for f in findings if id(f) in parent and root(f) is r]
        effects.sort(key=lambda f: (CAUSE_RANK.get(f.rule, len(CAUSE_RANK) + 1), SEVERITY_ORDER[f.severity]))
        out += effects
    return out


def run_doctor(
    snapshot: Snapshot,
    profile: PlatformProfile | None,
    now: datetime,
    extra_rules: tuple[RuleFn, ...] = (),
    *,
    with_visuals: bool = True,
) -> Report:
    findings = rank_by_cause(run_rules(snapshot, profile, now, extra_rules))
    report = Report(
        findings=findings,
        now=now,
        source=snapshot.source,
        profile_name=profile.metadata.name if profile else None,
        notes=list(snapshot.notes),
    )
    report.checked = [r.id for r in RULES if profile is not None or not r.needs_profile]
    report.objects_read = {"nodes": len(snapshot.nodes), "pods": len(snapshot.pods),
                           "DaemonSets": len(snapshot.daemonsets)}
    if profile is None:
        report.notes.append("no profile: only daemonset-never-ready and image-arch-mismatch were checked")
    if with_visuals:
        report.timelines = _timelines(snapshot, findings, profile)
        report.grid = _grid(snapshot, findings, profile)
        report.coverage = proof_rules.coverage(snapshot, profile, now)
    report.lustre = lustre_view(snapshot, profile)
    return report
