"""What the agent's taint-slot rights reach (review of session 26).

The agent's Role grants ``create``/``patch`` on ``leases`` in its namespace, the install's, where the controller's
leader-election Lease lives too; RBAC cannot name a Lease that does not exist yet (``create``) nor the slots a pool
may grow to. So a policy holds every agent's Lease write to a taint slot held in its own Node's name: one node's
agent token cannot take the controller's leadership (which stops every pass) nor take or release another node's
slot. Evaluated with cel-python on the request the API server would send (``agent_support.cel``).
"""

from __future__ import annotations

from typing import Any

import celpy
from agent_support import cel

from fabricguard import names
from fabricguard.agent import taint_slots as ts
from fabricguard.agent.render import NODE_NAME_EXTRA, admission_policy

NS = "fabricguard-system"
AGENT = {"username": f"system:serviceaccount:{NS}:{names.AGENT_NAME}",
         "extra": {NODE_NAME_EXTRA: ["gpu-node-7"]}}


def _lease(name: str, holder: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"leaseDurationSeconds": 180}
    if holder is not None:
        spec["holderIdentity"] = holder
    return {"apiVersion": names.LEASE_API, "kind": "Lease", "metadata": {"name": name, "namespace": NS},
            "spec": spec}


def _refused(user: dict[str, Any], op: str, old: dict[str, Any] | None, new: dict[str, Any]) -> str | None:
    """The denial of the first policy the install renders that matches this Lease write, else None."""
    for pol in admission_policy(NS):
        spec = pol.get("spec") or {}
        if pol["kind"] != "ValidatingAdmissionPolicy" or not any(
                "leases" in r["resources"] and op in r["operations"] and "coordination.k8s.io" in r["apiGroups"]
                for r in spec["matchConstraints"]["resourceRules"]):
            continue
        request = {"userInfo": user, "operation": op, "namespace": NS, "name": new["metadata"]["name"]}
        act: dict[str, Any] = {"request": celpy.json_to_cel(request), "object": celpy.json_to_cel(new),
                               "oldObject": celpy.json_to_cel(old)}
        if not all(cel(mc["expression"], act) for mc in spec.get("matchConditions", [])):
            continue
        for val in spec["validations"]:
            if not bool(cel(val["expression"], act)):
                return str(cel(val["messageExpression"], act)) if "messageExpression" in val else val["message"]
    return None


def test_an_agent_token_writes_only_taint_slots_in_its_own_nodes_name() -> None:
    slot, other = ts.slot_name("h200-rdma", 0), "gpu-node-9"
    # What the agent does: take a new slot, renew it, release it, reclaim another's stale one.
    assert _refused(AGENT, "CREATE", None, _lease(slot, "gpu-node-7")) is None
    assert _refused(AGENT, "UPDATE", _lease(slot, "gpu-node-7"), _lease(slot, "gpu-node-7")) is None
    assert _refused(AGENT, "UPDATE", _lease(slot, "gpu-node-7"), _lease(slot, "")) is None
    assert _refused(AGENT, "UPDATE", _lease(slot, other), _lease(slot, "gpu-node-7")) is None
    # What one node's token must not do.
    leader = _lease(names.CONTROLLER_LEASE, "fabricguard-controller-abc")
    took = _refused(AGENT, "UPDATE", leader, _lease(names.CONTROLLER_LEASE, "gpu-node-7"))
    assert took is not None and names.CONTROLLER_LEASE in took
    assert _refused(AGENT, "CREATE", None, _lease("kube-scheduler", "gpu-node-7")) is not None
    assert _refused(AGENT, "CREATE", None, _lease(slot, other)) is not None  # a slot in another node's name
    assert _refused(AGENT, "UPDATE", _lease(slot, other), _lease(slot, "")) is not None  # releasing another's
    no_node = {"username": AGENT["username"]}  # a token without the node claim: no slot at all
    assert _refused(no_node, "CREATE", None, _lease(slot, "gpu-node-7")) is not None
    # Anyone else (the controller's own election) is not this policy's business.
    ctl = {"username": f"system:serviceaccount:{NS}:fabricguard-controller"}
    assert _refused(ctl, "UPDATE", leader, _lease(names.CONTROLLER_LEASE, "fabricguard-controller-def")) is None
