"""Who a set of NetworkPolicies lets connect to a pod's port, decided as the API's documented semantics say.

No network plugin runs here, so this models ``networking.k8s.io/v1`` NetworkPolicy from its API reference:
a pod selected by no policy of type Ingress accepts everything; otherwise a connection is allowed when any
selecting policy has a rule whose ``ports`` (absent: all) hold the port and whose ``from`` (absent or empty: every
source) has a peer matching the source. A peer with both ``namespaceSelector`` and ``podSelector`` matches pods
that satisfy both; ``podSelector`` alone means the policy's own namespace; ``{}`` selects everything; ``ipBlock``
matches addresses in its CIDR minus ``except``. Traffic from the node the pod runs on (the kubelet's probes) is
always allowed.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Source:
    """Who connects: a pod (namespace, its labels and the namespace's), an address outside the pod network, or the
    node the target pod runs on."""

    namespace: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    namespace_labels: dict[str, str] = field(default_factory=dict)
    ip: str | None = None
    own_node: bool = False

    def ns_labels(self) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": self.namespace or "", **self.namespace_labels}


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _peer(peer: dict[str, Any], src: Source, policy_ns: str) -> bool:
    if "ipBlock" in peer:
        if src.ip is None:
            return False
        addr = ipaddress.ip_address(src.ip)
        block = peer["ipBlock"]
        return addr in ipaddress.ip_network(block["cidr"]) and not any(
            addr in ipaddress.ip_network(x) for x in block.get("except") or [])
    if src.namespace is None:
        return False
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], src.ns_labels()):
            return False
    elif src.namespace != policy_ns:
        return False
    return selects(peer.get("podSelector") or {}, src.labels)


def allowed(policies: list[dict[str, Any]], pod_ns: str, pod_labels: dict[str, str], port: int,
            src: Source) -> bool:
    """Whether ``src`` may open a TCP connection to ``port`` of the pod."""
    selecting = [p for p in policies if p["kind"] == "NetworkPolicy" and p["metadata"]["namespace"] == pod_ns
                 and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
                 and selects(p["spec"]["podSelector"], pod_labels)]
    if not selecting or src.own_node:
        return True
    for pol in selecting:
        for rule in pol["spec"].get("ingress") or []:
            ports = rule.get("ports")
            if ports and not any(p.get("protocol", "TCP") == "TCP" and p.get("port") == port for p in ports):
                continue
            peers = rule.get("from")
            if not peers or any(_peer(x, src, pod_ns) for x in peers):
                return True
    return False
