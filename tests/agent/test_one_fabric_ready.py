"""One FabricReady entry per Node (issue 25 item 7). The agent's admission policy refuses a write that would
leave two: the CEL is evaluated with cel-python, as in the other policy tests. The controller's reader
refuses a Node that has two anyway (an older policy, or a write from elsewhere): such a Node counts as broken
and never reads as True."""

from __future__ import annotations

import copy

from agent_support import GKE, evaluate_policy, healthy_node

from fabricguard import names
from fabricguard.agent.render import admission_policy
from fabricguard.controller.rootcause import broken_nodes
from fabricguard.profile import load_profile

SWEEPER = {"username": "system:serviceaccount:fabricguard-system:fabricguard-agent-sweep"}


def _with(node: dict, *statuses: str) -> dict:
    n = copy.deepcopy(node)
    conds = [c for c in n["status"].get("conditions", []) if c["type"] != names.FABRIC_READY]
    n["status"]["conditions"] = conds + [{"type": names.FABRIC_READY, "status": s, "reason": "x", "message": "x"}
                                         for s in statuses]
    return n


def _policy() -> dict:
    return next(o for o in admission_policy("fabricguard-system") if o["kind"] == "ValidatingAdmissionPolicy")


def test_the_policy_refuses_a_second_fabric_ready_entry() -> None:
    old = _with(healthy_node(), "True")
    assert evaluate_policy(_policy(), SWEEPER, "status", old, _with(healthy_node(), "Unknown")) is None
    msg = evaluate_policy(_policy(), SWEEPER, "status", old, _with(healthy_node(), "True", "Unknown"))
    assert msg is not None and "at most one" in msg


def test_a_node_with_two_entries_reads_broken_not_true() -> None:
    node = _with(healthy_node(), "True", "Unknown")
    pool = next(p for p in load_profile(GKE).spec.pools if p.matches(node))
    why = broken_nodes(pool, [node], 1)
    assert "DuplicateFabricReady" in why and "True, Unknown" in why
