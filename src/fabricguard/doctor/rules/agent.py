"""Agent rule: ``agent-daemonset-short``, a readiness agent DaemonSet that wants fewer pods than its pool has nodes.

An untolerated taint (the readiness taints the agent exists to clear, a GPU taint, a maintenance taint) or a
nodeSelector that misses some nodes silently shrinks ``status.desiredNumberScheduled``: the DaemonSet then
looks healthy (every *desired* pod ready) while nodes have no agent. Such a node never reports
``FabricReady``, so it stays tainted for ever (capacity lost) or, without the Node Readiness Controller, open
without proof. Desired 0 is the extreme case, and the one the usual ``desired != ready`` alerts never fire on.

The agent's DaemonSets are found by the labels ``fabricguard render agent`` writes
(``app.kubernetes.io/name: fabricguard-agent`` and ``fabricguard.io/pool``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fabricguard import names, objects
from fabricguard.doctor.model import Finding, ObjRef, Severity
from fabricguard.doctor.rules._common import MAX_EVIDENCE_ITEMS, pool_nodes
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.objects import selector_matches
from fabricguard.profile import PlatformProfile

SHORT = "agent-daemonset-short"
AGENT_NAME = "fabricguard-agent"
POOL_LABEL = names.LABEL_POOL


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """Kubernetes' rule: key matches (an empty key with Exists matches every key), value matches for Equal,
    and the effect matches (an empty effect matches every effect)."""
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key"):
            if op == "Exists":
                return True
            continue
        if t.get("key") != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _why_not(node: dict[str, Any], pod_spec: dict[str, Any]) -> str:
    labels = objects.labels_of(node)
    selector = pod_spec.get("nodeSelector") or {}
    if not selector_matches(labels, selector):
        missing = {k: v for k, v in selector.items() if labels.get(k) != v}
        return f"nodeSelector {missing} does not match"
    tolerations = pod_spec.get("tolerations") or []
    blocking = [
        f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}"
        for t in (node.get("spec") or {}).get("taints") or ()
        if t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, t)
    ]
    if blocking:
        return "untolerated taint(s) " + ", ".join(blocking)
    return "no agent pod (affinity, or the DaemonSet has not caught up)"


def agent_daemonset_short(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    if profile is None:
        return []
    members = pool_nodes(snapshot, profile)
    agents: dict[str, list[dict[str, Any]]] = {}
    for ds in snapshot.daemonsets:
        labels = objects.labels_of(ds)
        if labels.get(names.LABEL_APP_NAME) == AGENT_NAME and labels.get(POOL_LABEL):
            agents.setdefault(labels[POOL_LABEL], []).append(ds)
    findings = []
    for pool in profile.spec.pools:
        nodes = members.get(pool.name, [])
        for ds in agents.get(pool.name, []):
            meta = ds.get("metadata") or {}
            ns, name = meta.get("namespace", ""), meta.get("name", "")
            desired = int((ds.get("status") or {}).get("desiredNumberScheduled") or 0)  # absent means 0
            if desired >= len(nodes):
                continue
            pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
            running = {
                (p.get("spec") or {}).get("nodeName") for p in snapshot.daemonset_pods.get((ns, name), ())
            }
            without = [n for n in nodes if n["metadata"]["name"] not in running]
            evidence: dict[str, Any] = {
                "status.desiredNumberScheduled": desired,
                f"nodes of pool {pool.name}": len(nodes),
            }
            for n in without[:MAX_EVIDENCE_ITEMS]:
                evidence[f"Node {n['metadata']['name']}"] = _why_not(n, pod_spec)
            findings.append(
                Finding(
                    SHORT,
                    Severity.critical,
                    [ObjRef("DaemonSet", name, ns)],
                    f"Readiness agent DaemonSet {ns}/{name} wants {desired} pod(s) but pool {pool.name} has "
                    f"{len(nodes)} node(s): {len(nodes) - desired} node(s) have no agent, so nothing reports their "
                    "FabricReady condition and they stay closed (readiness taints) or open without proof. "
                    "'desired' shrinks silently when the agent does not tolerate a node's taints; no "
                    "desired-vs-ready alert fires on it.",
                    evidence,
                    "Make the agent tolerate the pool's taints and the readiness.k8s.io/fabric-* taints (fabricguard "
                    "render agent writes them) and match the pool's nodeSelector; alert on "
                    "kube_daemonset_status_desired_number_scheduled below the pool's node count.",
                    pools=[pool.name],
                )
            )
    return findings
