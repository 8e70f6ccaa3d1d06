"""``fabricguard pool coverage``: a pool's node proof as a table (node, last proven, busbw, state), and the verdict.

Pure: the pool's FabricValidation and Nodes in, rows and a verdict out. The command (placement/commands.py)
reads them with a read-only permission table (plus the FabricValidation's status with ``--reset-breaker``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fabricguard import breaker, names, times
from fabricguard import objects as o
from fabricguard.controller import proof as pf
from fabricguard.profile.model import Pool
from fabricguard.rbac import Grant, Permissions, grants

COVERAGE_GRANTS: frozenset[Grant] = frozenset([
    *grants(names.FV_API, names.FV_PLURAL, ["get"]),
    *grants("v1", "nodes", ["list"]),
])
RESET_GRANTS: frozenset[Grant] = COVERAGE_GRANTS | frozenset(
    grants(names.FV_API, names.FV_PLURAL, ["patch"], subresource="status"))

NEEDS_ATTENTION = ("suspect", "convicted", "quarantined", "timed-out")


def coverage_permissions(reset: bool) -> Permissions:
    return Permissions(RESET_GRANTS if reset else COVERAGE_GRANTS, "", "pool coverage")


@dataclass
class Coverage:
    pool: str
    verdict: str  # pass | degraded | failed
    summary: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    spent: float = 0.0
    budget: float = 0.0
    breaker: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return {"pass": 0, "degraded": 1, "failed": 2}[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "verdict": self.verdict, "summary": self.summary, "nodes": self.rows,
                "spentGpuHours": self.spent, "budgetGpuHours": self.budget, "breaker": self.breaker}


def _age(since: str | None, now: datetime) -> str:
    t = times.parse_time(since) if since else None
    if t is None:
        return "never"
    s = max(0, int((now - t).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit} ago"
    return f"{s}s ago"


def coverage(pool: Pool, fv: dict[str, Any] | None, nodes: list[dict[str, Any]], now: datetime) -> Coverage:
    """The table and verdict: pass when every counted node is proven within ``every`` and none is named."""
    proof = pool.proof
    assert proof is not None
    state = pf.ProofState.from_dict(((fv or {}).get("status") or {}).get("proof"))
    mine = sorted((n for n in nodes if pool.matches(n)), key=o.name_of)
    rows: list[dict[str, Any]] = []
    overdue = named = 0
    for n in mine:
        name = o.name_of(n)
        r = state.nodes.get(name) or pf.NodeProof(name)
        held = pf.held_elsewhere(n, (names.TAINT_QUARANTINED, *names.TAINT_KEYS, names.TAINT_STARTUP_UNVERIFIED))
        st = "held" if held and r.state not in NEEDS_ATTENTION else r.state
        t = times.parse_time(r.lastProven) if r.lastProven else None
        # A node changed since its proof (driver, firmware, kernel) is not proven, as proof.coverage counts it.
        fresh = t is not None and (now - t).total_seconds() <= proof.every_s and st != "changed"
        if st in NEEDS_ATTENTION:
            named += 1
        elif st not in ("held", "not-ready") and not fresh:
            overdue += 1
        rows.append({"node": name, "state": st, "lastProven": r.lastProven, "age": _age(r.lastProven, now),
                     "busbwGBps": r.busbwGBps, "partner": r.partner, "link": r.link, "pair": r.pair,
                     "rails": r.rails or None, "note": held or r.message})
    if fv is None or not (state.nodes or state.active):
        return Coverage(pool.name, "degraded", f"pool {pool.name}: no node proof recorded yet (is the controller "
                        "running with this profile?)", rows)
    brk = state.breaker
    # As FabricguardProofCoverageBehind counts: held, not-ready and named nodes are not due a proof.
    counted = len(rows) - named - sum(1 for r in rows if r["state"] in ("held", "not-ready"))
    parts = [f"{counted - overdue} of {counted} node(s) proven within {proof.every}"]
    if named:
        states = sorted({r["state"] for r in rows if r["state"] in NEEDS_ATTENTION})
        parts.append(f"{named} named ({', '.join(states)})")
    if overdue:
        parts.append(f"{overdue} overdue")
    budget = (fv.get("status") or {}).get("proof", {}).get("budgetGpuHours") or 0.0
    spent = state.spentGpuHours + sum(a.gpuHours for a in state.active)
    parts.append(f"{spent:.1f} of {float(budget):.1f} GPU-h spent today")
    if brk.open:
        verdict = "failed"
        parts.insert(0, f"quarantine breaker OPEN since {times.format_time(brk.since) if brk.since else '?'}: "
                        f"{brk.reason}")
    else:
        verdict = "degraded" if (named or overdue) else "pass"
    return Coverage(pool.name, verdict, f"pool {pool.name}: " + "; ".join(parts), rows, round(spent, 3),
                    float(budget), brk.to_dict())


def reset_patch(fv: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The status merge patch that resets the pool's quarantine breaker (a person's decision, counted)."""
    state = pf.ProofState.from_dict((fv.get("status") or {}).get("proof"))
    closed = breaker.reset(state.breaker, now).to_dict()
    return {"status": {"proof": {"breaker": {"check": pf.BREAKER_CHECK, **closed}}}}
