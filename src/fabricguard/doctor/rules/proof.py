"""Proof rule: ``node-proof-behind``, a node of a pool with a ``proof`` goal that is not proven within ``every``,
or that the controller named (``FabricProven=False``).

The controller proves each node with a pair test (docs/controller.md, "Node proof") and leaves its marks on the
Node: the ``fabricguard.io/last-proven`` annotation and the ``FabricProven`` condition (read through
``fabricguard.proofmark``, the one parser of them). The rule reads those marks from the snapshot, so a doctor run
on a saved snapshot sees the same coverage the controller saw; :func:`coverage` builds the doctor's node x proof
grid from the same reading. Cordoned nodes are not counted (the controller does not test them either).
"""

from __future__ import annotations

from datetime import datetime

from fabricguard import proofmark
from fabricguard.doctor.model import CoverageCell, Finding, ObjRef, Severity, human_age
from fabricguard.doctor.rules._common import MAX_EVIDENCE_ITEMS, pool_nodes
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile import PlatformProfile

BEHIND = "node-proof-behind"
GOOD = ("proven",)
# FabricProven=False reasons the controller writes, and what each asks of a person.
NAMED = {
    "Convicted": ("convicted by pair bisection (quarantined, or withheld by the budget)",
                  "repair the named node or rail (its FabricProven message names the failed pairs), then let the "
                  "re-test release it; `fabricguard pool coverage -p PROFILE` shows the pool's table"),
    "ProofTimedOut": ("new and not proven within lifecycleTimeout (its readiness taint stays)",
                      "free an idle known-good partner (proof.maxConcurrent, the GPU-hour budget) or check why "
                      "its pair tests do not start: `fabricguard pool coverage -p PROFILE`"),
    "ChangedSinceProof": ("changed (driver, firmware or kernel) since its last proof, waiting for its re-proof",
                          "nothing if it is re-proven within the hour; otherwise check the pool's budget and idle "
                          "partners (`fabricguard pool coverage -p PROFILE`)"),
}


def coverage(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> dict[str, list[CoverageCell]]:
    """Per proof pool, one cell per node (cordoned ones left out), named and stale nodes first."""
    if profile is None:
        return {}
    members = pool_nodes(snapshot, profile)
    out: dict[str, list[CoverageCell]] = {}
    for p in profile.spec.pools:
        if p.proof is None:
            continue
        cells = []
        for node in members.get(p.name, []):
            if (node.get("spec") or {}).get("unschedulable"):
                continue
            mark = proofmark.node_mark(node)
            last = mark.last
            detail = mark.message if mark.proven == "False" else (
                f"pair {last.pair} with {last.partner}" + (f" ({last.link} block)" if last.link else "")
                if last else "")
            cells.append(CoverageCell(mark.node, mark.result(p.proof.every_s, now),
                                      (now - last.when).total_seconds() if last else None,
                                      last.busbw_gbps if last else None, last.partner if last else "", detail))
        cells.sort(key=lambda c: (c.result in GOOD, c.result == "stale", -(c.age_s or 0), c.node))
        out[p.name] = cells
    return out


def node_proof_behind(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    findings: list[Finding] = []
    for pool, cells in coverage(snapshot, profile, now).items():
        p = profile.pool(pool) if profile is not None else None
        if p is None or p.proof is None or not cells:
            continue
        for reason, (what, fix) in NAMED.items():
            named = [c for c in cells if c.result == reason]
            if named:
                findings.append(Finding(
                    BEHIND, Severity.warning, [ObjRef("Node", c.node) for c in named],
                    f"{len(named)} node(s) of pool {pool} {what}: {named[0].node}: {named[0].detail}",
                    {"FabricProven": {c.node: f"False {reason}: {c.detail}" for c in named[:MAX_EVIDENCE_ITEMS]}},
                    fix, pools=[pool]))
        behind = [c for c in cells if c.result in ("stale", "never")]
        if not behind:
            continue
        marked = any(c.result != "never" for c in cells)
        every = p.proof.every
        msg = (f"{len(behind)} of {len(cells)} node(s) of pool {pool} not proven by a pair test within {every} "
               f"(proof.every): " + ", ".join(f"{c.node} ({'never' if c.age_s is None else human_age(c.age_s)})"
                                             for c in behind[:5]) + (", ..." if len(behind) > 5 else ""))
        if not marked:
            msg += "; no node of the pool carries a proof mark at all: is the controller running with this profile?"
        findings.append(Finding(
            BEHIND, Severity.warning, [ObjRef("Node", c.node) for c in behind],
            msg, {"fabricguard.io/last-proven": {c.node: c.age + (" ago" if c.age_s is not None else "")
                                                 for c in behind[:MAX_EVIDENCE_ITEMS]}},
            "see why pair tests do not reach these nodes: `fabricguard pool coverage -p PROFILE` (busy nodes, "
            "the GPU-hour budget, maxConcurrent, the scavenger queue); the FabricguardProofCoverageBehind alert "
            "fires on the same gap", pools=[pool]))
    return findings
