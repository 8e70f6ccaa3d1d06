"""Placement rules: does Kueue's view of the pools (flavors, topologies, network mappings) match the hardware?

Reservations move between datacenter blocks; the objects that describe where a pool is do not move with them.

- ``topology-labels-missing``: nodes of a pool without a label its Kueue Topology needs; TAS cannot place pods
  there, so a gang that needs those nodes waits while the quota says there is room.
- ``network-mapping-stale``: the pool's ``networkMapping`` names a block none of its nodes is in, or maps to a
  NetworkAttachmentDefinition / GKE Network that does not exist, or whose device resource no node advertises.
- ``flavor-matches-no-node``: a ResourceFlavor whose ``nodeLabels`` select no node; what Kueue admits to it never
  schedules.
- ``flavor-readiness-tainted``: a flavor whose nodes carry a ``readiness.k8s.io/`` taint that neither the flavor
  nor the pool tolerates; Kueue admits by quota, and the admitted pods then sit Pending.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import partial
from typing import Any

from fabricguard import names, objects
from fabricguard.doctor.model import Finding, ObjRef, Severity, quantity
from fabricguard.doctor.rules._common import MAX_EVIDENCE_ITEMS, fabric_pools, pool_nodes
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.objects import selector_matches
from fabricguard.profile import PlatformProfile
from fabricguard.profile.model import HOSTNAME_LABEL, Pool

TOPOLOGY_LABELS = "topology-labels-missing"
MAPPING_STALE = "network-mapping-stale"
FLAVOR_NO_NODE = "flavor-matches-no-node"
FLAVOR_TAINTED = "flavor-readiness-tainted"
READINESS_TAINT_PREFIX = names.READINESS_TAINT_PREFIX
NAD_RESOURCE = names.NAD_RESOURCE


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return objects.labels_of(obj)


def _name(obj: dict[str, Any]) -> str:
    return objects.name_of(obj)


def _names(nodes: list[dict[str, Any]]) -> list[str]:
    return [_name(n) for n in nodes[:MAX_EVIDENCE_ITEMS]]


def _lacks(level: str, node: dict[str, Any]) -> ObjRef | None:
    """The node's reference when it has no (or an empty) label ``level``."""
    return None if _labels(node).get(level) else ObjRef("Node", _name(node))


def _label_value(label: str, node: dict[str, Any]) -> tuple[str | None]:
    return (_labels(node).get(label),)


def topology_labels_missing(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    findings = []
    members = pool_nodes(snapshot, profile)
    for pool in profile.spec.pools if profile else []:
        # The kubelet sets the hostname label itself; only the provider's topology labels can be absent.
        levels = [lv for lv in pool.topology_levels if lv != HOSTNAME_LABEL]
        nodes = members.get(pool.name, [])
        for level in levels:
            lacking = snapshot.select((TOPOLOGY_LABELS, pool.name, level), nodes, partial(_lacks, level))
            if not lacking:
                continue
            bad = [n for n, _ in lacking]
            findings.append(Finding(
                TOPOLOGY_LABELS,
                Severity.warning,
                [ref for _, ref in lacking],
                f"{len(bad)} of {len(nodes)} node(s) of pool {pool.name} have no label {level}, a level of the "
                "pool's Kueue Topology: topology-aware scheduling cannot place pods on them, so gangs wait while "
                "the quota shows free capacity.",
                {f"metadata.labels[{level}]": "absent", "nodes": _names(bad),
                 "profile: topology levels": pool.topology_levels},
                f"Label the nodes with {level} (the provider sets it on nodes of a compact placement or reservation) "
                "or drop the level from spec.pools[].topologyLevels.",
                pools=[pool.name],
            ))
    return findings


def _network_ref(name: str) -> tuple[str | None, str]:
    ns, _, n = name.rpartition("/")
    return (ns or None), n


def _nad_resource(nad: dict[str, Any]) -> str | None:
    value = objects.annotations_of(nad).get(NAD_RESOURCE)
    return str(value) if value else None


def _advertised(nodes: list[dict[str, Any]], resource: str) -> list[dict[str, Any]]:
    return [n for n in nodes if quantity(((n.get("status") or {}).get("allocatable") or {}).get(resource)) >= 1]


def _mapping_blocks(snapshot: Snapshot, pool: Pool, nodes: list[dict[str, Any]]) -> list[Finding]:
    label, mapping = pool.fabric.topologyLabel, pool.fabric.networkMapping
    if not label or not mapping or not nodes:
        return []
    present = {v for _, (v,) in snapshot.select((MAPPING_STALE, pool.name), nodes, partial(_label_value, label))}
    stale = sorted(b for b in mapping if b not in present)
    if not stale:
        return []
    return [Finding(
        MAPPING_STALE,
        Severity.warning,
        [],
        f"pool {pool.name}'s networkMapping names {label} value(s) {', '.join(stale)} that none of its "
        f"{len(nodes)} node(s) carries: the reservation has moved, and the mapping still describes where it was.",
        {"profile: fabric.networkMapping": dict(mapping),
         f"nodes' {label} values": sorted(str(v) for v in present)},
        "Bring the pool's networkMapping to where its nodes are now (fabricguard pool transition for a move "
        "between blocks), then remove the stale entries.",
        pools=[pool.name],
    )]


def _multus_networks(snapshot: Snapshot, pool: Pool, nodes: list[dict[str, Any]]) -> list[Finding]:
    nads = snapshot.kind("NetworkAttachmentDefinition")
    if not nads:
        # Nothing collected of this kind (not served, or not in the snapshot): no verdict rather than a false one.
        return []
    by_ref = {((n.get("metadata") or {}).get("namespace"), _name(n)): n for n in nads}
    findings = []
    seen: set[tuple[str | None, str]] = set()
    # fabric.networks says "namespace/name"; networkMapping values may leave the namespace out.
    for ref in [*pool.fabric.networks, *pool.fabric.networkMapping.values()]:
        ns, name = _network_ref(ref)
        nad = by_ref.get((ns, name)) if ns else next((n for k, n in by_ref.items() if k[1] == name), None)
        key = ((nad.get("metadata") or {}).get("namespace"), name) if nad else (ns, name)
        if key in seen:
            continue
        seen.add(key)
        if nad is None:
            findings.append(Finding(
                MAPPING_STALE,
                Severity.critical,
                [ObjRef("NetworkAttachmentDefinition", name, ns)],
                f"pool {pool.name} attaches network {ref}, but no NetworkAttachmentDefinition of that name exists: "
                "pods that ask for it fail to start (multus cannot find the network).",
                {"profile: fabric.networks / networkMapping": ref,
                 "NetworkAttachmentDefinitions": sorted(f"{k[0]}/{k[1]}" for k in by_ref)},
                "Create the NetworkAttachmentDefinition (the NVIDIA Network Operator renders it from its "
                "MacvlanNetwork/HostDeviceNetwork) or correct the name in the profile.",
                pools=[pool.name],
            ))
            continue
        resource = _nad_resource(nad)
        # A resource the pool requests but nodes lack is fabric-not-advertised's finding; here the mapping is wrong:
        # the network draws its device from a resource the pool's pods never ask for.
        if resource and pool.fabric.resources and resource not in pool.fabric.resources:
            advertised = len(_advertised(nodes, resource))
            findings.append(Finding(
                MAPPING_STALE,
                Severity.critical,
                [ObjRef.of(nad)],
                f"network {ref} of pool {pool.name} takes its device from resource {resource}, but the pool's pods "
                f"request {', '.join(sorted(pool.fabric.resources))}: the network is attached without a device of "
                f"its own ({advertised} of the pool's {len(nodes)} node(s) advertise {resource}).",
                {f"metadata.annotations[{NAD_RESOURCE}]": resource, "config": _nad_config(nad),
                 "profile: fabric.resources": dict(pool.fabric.resources)},
                "Make the network's resourceName and the pool's fabric.resources name the same device plugin "
                "resource.",
                pools=[pool.name],
            ))
    return findings


def _nad_config(nad: dict[str, Any]) -> Any:
    raw = (nad.get("spec") or {}).get("config")
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw


def _gke_networks(snapshot: Snapshot, pool: Pool) -> list[Finding]:
    networks = snapshot.kind("Network")
    if not networks:
        return []
    names = {_name(n) for n in networks}
    missing = [n for n in pool.fabric.networks if n not in names]
    if not missing:
        return []
    return [Finding(
        MAPPING_STALE,
        Severity.critical,
        [ObjRef("Network", n) for n in missing],
        f"pool {pool.name} attaches GKE network(s) {', '.join(missing)} that do not exist in the cluster: pods "
        "asking for them stay Pending.",
        {"profile: fabric.networks": list(pool.fabric.networks), "Networks": sorted(names)},
        "Create the Network and GKENetworkParamSet objects for the reservation's RDMA VPC and subnet.",
        pools=[pool.name],
    )]


def network_mapping_stale(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    members = pool_nodes(snapshot, profile)
    findings: list[Finding] = []
    for pool in fabric_pools(profile):
        nodes = members.get(pool.name, [])
        findings.extend(_mapping_blocks(snapshot, pool, nodes))
        style = pool.fabric.network_annotation_style
        if style == "multus":
            findings.extend(_multus_networks(snapshot, pool, nodes))
        elif style == "gke":
            findings.extend(_gke_networks(snapshot, pool))
    return findings


def _flavor_nodes(snapshot: Snapshot, flavor: dict[str, Any]) -> list[dict[str, Any]]:
    selector = (flavor.get("spec") or {}).get("nodeLabels") or {}
    if not isinstance(selector, dict) or not all(isinstance(v, str | int | float | bool | None)
                                                 for v in selector.values()):
        return [n for n in snapshot.nodes if selector_matches(_labels(n), selector)]
    # Each node's answer kept while it is the same object, for this selector (compared by value).
    matches = partial(_selected, tuple(sorted(selector.items(), key=lambda kv: str(kv[0]))))
    return [n for n, _ in snapshot.select((FLAVOR_NO_NODE, _name(flavor)), snapshot.nodes, matches)]


def _selected(selector: tuple[tuple[str, Any], ...], node: dict[str, Any]) -> bool:
    return selector_matches(_labels(node), dict(selector))


def flavor_matches_no_node(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del profile, now
    findings = []
    if not snapshot.nodes:
        return []
    for flavor in snapshot.kind("ResourceFlavor"):
        selector = (flavor.get("spec") or {}).get("nodeLabels") or {}
        if not selector or _flavor_nodes(snapshot, flavor):
            continue
        findings.append(Finding(
            FLAVOR_NO_NODE,
            Severity.critical,
            [ObjRef.of(flavor)],
            f"ResourceFlavor {_name(flavor)} selects nodes by {selector}, and no node matches: workloads Kueue "
            "admits to this flavor never schedule.",
            {"spec.nodeLabels": selector, "nodes in snapshot": len(snapshot.nodes)},
            "Render the flavors from the current profile (fabricguard render kueue), or label the pool's nodes.",
        ))
    return findings


def _tolerated(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _blocking_taints(node: dict[str, Any], tolerations: list[dict[str, Any]]) -> list[str]:
    out = []
    for taint in (node.get("spec") or {}).get("taints") or ():
        key = str(taint.get("key", ""))
        gating = key.startswith(READINESS_TAINT_PREFIX) and taint.get("effect") in ("NoSchedule", "NoExecute")
        if gating and not _tolerated(taint, tolerations):
            out.append(f"{key}:{taint.get('effect')}")
    return out


def _blocked(tolerations: list[dict[str, Any]], node: dict[str, Any]) -> tuple[str, list[str]] | None:
    """(the node's name, the readiness taints ``tolerations`` do not tolerate) when there are any."""
    b = _blocking_taints(node, tolerations)
    return (_name(node), b) if b else None


def flavor_readiness_tainted(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    pool_tolerations = {p.name: [t.to_k8s() for t in p.tolerations] for p in profile.spec.pools} if profile else {}
    findings = []
    for flavor in snapshot.kind("ResourceFlavor"):
        nodes = _flavor_nodes(snapshot, flavor)
        if not nodes:
            continue
        tolerations = [*((flavor.get("spec") or {}).get("tolerations") or ()), *pool_tolerations.get(_name(flavor), ())]
        blocked = {name: b for _, (name, b) in snapshot.select((FLAVOR_TAINTED, _name(flavor)), nodes,
                                                               partial(_blocked, tolerations))}
        if not blocked:
            continue
        every = len(blocked) == len(nodes)
        taints = sorted({t for b in blocked.values() for t in b})
        findings.append(Finding(
            FLAVOR_TAINTED,
            Severity.critical if every else Severity.warning,
            [ObjRef.of(flavor), *(ObjRef("Node", n) for n in list(blocked)[:MAX_EVIDENCE_ITEMS])],
            f"{len(blocked)} of {len(nodes)} node(s) of ResourceFlavor {_name(flavor)} carry readiness taint(s) "
            f"{', '.join(taints)} that no workload on the flavor tolerates"
            + (": Kueue admits by quota and every admitted pod then waits Pending."
               if every else ": the flavor's quota counts nodes that cannot take work now."),
            {"taints": taints, "nodes": list(blocked)[:MAX_EVIDENCE_ITEMS]},
            "Let the nodes prove their fabric (fabricguard agent sets FabricReady and the taint goes), or hold the "
            "flavor's workloads with the fabric AdmissionCheck instead of letting them pend on tainted nodes.",
            pools=[_name(flavor)] if _name(flavor) in pool_tolerations else [],
        ))
    return findings
