"""Fallback taints (``agent --manage-taints``): the same taints the Node Readiness Controller would manage.

Where the controller is not installed the agent keeps them on its own Node:
- ``readiness.k8s.io/fabric-unverified:NoSchedule`` until the node's first ``True`` (bootstrap). A node is in
  bootstrap while it carries that taint or has never had a ``FabricReady`` condition at all;
- ``readiness.k8s.io/fabric-degraded:NoSchedule`` whenever a node that passed once stops being ``True``.
Never ``NoExecute``: running jobs are not evicted, new ones just do not land.

A pool with ``readinessTaintPrefix: startup-taint.cluster-autoscaler.kubernetes.io/`` registers its nodes with
``startup-taint.cluster-autoscaler.kubernetes.io/fabric-unverified`` instead (a managed autoscaler can then scale
it from zero); NRC cannot remove that key, so the agent does, exactly as it would the readiness one.

While one of the controller's blast-radius breakers is open for the node's pool (``status.breakers`` of the pool's
FabricValidation, ``controller/blast.py``), a node whose every failing check is behind an open breaker is not
tainted (:func:`breaker_withheld`): the controller lifts such a node's taints, and an agent that put them back every
run would undo the breaker. The agent says so in its log and ``fabricguard_agent_taints_withheld``.

``spec.taints`` has no merge key (a patch replaces the whole list), so the change is a JSON patch that first
tests the Node's ``resourceVersion``: a taint another controller adds meanwhile makes the patch fail (and the
agent re-reads) instead of being silently dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fabricguard import names
from fabricguard.agent.condition import failing_checks
from fabricguard.names import BOOTSTRAP_TAINT_KEYS, TAINT_DEGRADED, TAINT_KEYS, TAINT_UNVERIFIED
from fabricguard.objects import find_condition, taint_keys

EFFECT = "NoSchedule"


MANAGED_KEYS = (*TAINT_KEYS, *BOOTSTRAP_TAINT_KEYS)


def in_bootstrap(node: dict[str, Any]) -> bool:
    return bool(taint_keys(node) & set(BOOTSTRAP_TAINT_KEYS)) or find_condition(node, names.FABRIC_READY) is None


def wanted_taints(node: dict[str, Any], status: str, needs_proof: bool = False,
                  bootstrap: str = TAINT_UNVERIFIED) -> set[str]:
    """The readiness taints the node should carry when its condition (about to be written) is ``status``.

    ``needs_proof``: the pool proves new nodes with a pair test (profile ``proof.lifecycle``): a node in
    bootstrap keeps the unverified taint until the controller's ``FabricProven`` is True as well, as the
    NodeReadinessRule would. ``bootstrap``: the pool's bootstrap key (``Pool.bootstrap_taint``)."""
    if status == "True":
        proven = find_condition(node, names.FABRIC_PROVEN)
        if needs_proof and taint_keys(node) & set(BOOTSTRAP_TAINT_KEYS) and (proven or {}).get("status") != "True":
            return {bootstrap}
        return set()
    return {bootstrap} if in_bootstrap(node) else {TAINT_DEGRADED}


def breaker_withheld(condition: dict[str, Any] | None, open_checks: Iterable[str]) -> list[str]:
    """The checks whose open breakers keep this node untainted: all of those its condition says are failing, when
    every one of them is behind an open breaker (as the controller decides which nodes it lifts); else []."""
    failing = set(failing_checks(condition))
    return sorted(failing) if failing and failing <= set(open_checks) else []


def taint_patch(node: dict[str, Any], wanted: set[str]) -> list[dict[str, Any]] | None:
    """JSON patch that makes the node's readiness taints exactly ``wanted``; None when they already are.

    Taints with other keys are kept as they are, in their order (a bootstrap key of either prefix counts as
    the agent's: a pool moved to the other prefix loses the old one).
    """
    spec = node.get("spec") or {}
    current = [t for t in (spec.get("taints") or ()) if isinstance(t, dict)]
    have = {t.get("key") for t in current}
    new = [t for t in current if t.get("key") not in MANAGED_KEYS or t.get("key") in wanted]
    new += [{"key": k, "effect": EFFECT} for k in sorted(wanted) if k not in have]
    if new == current:
        return None
    ops: list[dict[str, Any]] = []
    rv = (node.get("metadata") or {}).get("resourceVersion")
    if rv:
        ops.append({"op": "test", "path": "/metadata/resourceVersion", "value": rv})
    ops.append({"op": "add", "path": "/spec/taints", "value": new})
    return ops
