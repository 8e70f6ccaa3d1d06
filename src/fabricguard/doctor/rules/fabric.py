"""Fabric rules: is the fabric advertised, requested, mapped to the right network, and gated on readiness.

- ``fabric-not-advertised``: a fabric-pool node whose ``status.allocatable`` lacks a fabric resource.
- ``fabric-request-missing``: running pods of a multi-node GPU workload on a fabric pool that request no
  fabric resource; NCCL falls back to sockets and the job runs, slowly, without any error.
- ``topology-mapping-mismatch``: a node whose ``topologyLabel`` value is absent from ``networkMapping``.
- ``node-not-gated``: a schedulable fabric-pool node without ``FabricReady=True`` and without a readiness taint
  (``readiness.k8s.io/fabric-unverified`` or ``-degraded``, the keys of ``fabricguard.names``).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from functools import partial
from typing import Any

from fabricguard import objects
from fabricguard.doctor.model import Finding, ObjRef, Severity, quantity
from fabricguard.doctor.rules._common import (
    MAX_EVIDENCE_ITEMS,
    container_requests,
    fabric_pools,
    node_pool,
    pool_nodes,
    workload_key,
)
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.names import FABRIC_READY as READY_CONDITION
from fabricguard.names import TAINT_UNVERIFIED
from fabricguard.objects import find_condition, taint_keys
from fabricguard.profile import PlatformProfile, Pool, dra
from fabricguard.workload_identity import KIND_OF_LABEL

NOT_ADVERTISED = "fabric-not-advertised"
REQUEST_MISSING = "fabric-request-missing"
TOPOLOGY = "topology-mapping-mismatch"
NOT_GATED = "node-not-gated"
UNVERIFIED_TAINT = TAINT_UNVERIFIED


def _node_refs(nodes: list[dict[str, Any]]) -> list[ObjRef]:
    return [ObjRef("Node", n["metadata"]["name"]) for n in nodes]


def _missing(resources: dict[str, Any], node: dict[str, Any]) -> tuple[dict[str, Any], ObjRef] | None:
    """(the fabric resources one node lacks in ``status.allocatable``, what it shows for each: None when absent;
    the node's reference), or None when it lacks none."""
    alloc = (node.get("status") or {}).get("allocatable") or {}
    missing = {r: alloc.get(r) for r in resources if quantity(alloc.get(r)) < 1}
    return (missing, ObjRef("Node", node["metadata"]["name"])) if missing else None


def fabric_not_advertised(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    findings = []
    members = pool_nodes(snapshot, profile)
    for pool in fabric_pools(profile):
        if pool.fabric.dra is not None:
            findings += _dra_not_advertised(pool, members.get(pool.name, []), snapshot.dra_index)
            continue
        if not pool.fabric.resources:
            continue
        nodes = members.get(pool.name, [])
        unadvertised = snapshot.select((NOT_ADVERTISED, pool.name), nodes, partial(_missing, pool.fabric.resources))
        bad = [ref for _, (_, ref) in unadvertised]
        evidence: dict[str, Any] = {}
        for n, (missing, _) in unadvertised:
            if len(evidence) >= MAX_EVIDENCE_ITEMS:
                break
            for r, v in missing.items():
                evidence[f"Node {n['metadata']['name']}: status.allocatable[{r}]"] = v if v is not None else "absent"
        if not bad:
            continue
        evidence["nodes affected"] = f"{len(bad)} of {len(nodes)}"
        dp = pool.fabric.devicePlugin
        plugin = f"{dp.namespace}/{dp.daemonSet}" if dp else "the fabric device plugin"
        findings.append(
            Finding(
                NOT_ADVERTISED,
                Severity.critical,
                bad,
                f"{len(bad)} node(s) of fabric pool {pool.name} do not advertise "
                f"{', '.join(sorted(pool.fabric.resources))} in status.allocatable: pods that request "
                "the fabric "
                "stay Pending there, and pods that do not request it run over sockets.",
                evidence,
                f"Make {plugin} run and become ready on these nodes (see daemonset-* findings); the "
                "resources "
                "appear in allocatable once the plugin registers with the kubelet.",
                pools=[pool.name],
            )
        )
    return findings


def _dra_not_advertised(pool: Pool, nodes: list[dict[str, Any]], index: dra.SliceIndex) -> list[Finding]:
    """Nodes whose driver publishes ResourceSlices with too few usable fabric devices (no slice at all is
    ``dra-no-resourceslice``)."""
    d = pool.fabric.dra
    assert d is not None
    bad: list[dict[str, Any]] = []
    evidence: dict[str, Any] = {}
    for n in nodes:
        name = n["metadata"]["name"]
        offer = dra.node_offer(pool, name, index)
        if offer.slices == 0 or offer.ok:
            continue
        bad.append(n)
        if len(evidence) < MAX_EVIDENCE_ITEMS:
            evidence[f"Node {name}: ResourceSlices of {d.driver}"] = offer.describe(d, name)
    if not bad:
        return []
    evidence["nodes affected"] = f"{len(bad)} of {len(nodes)}"
    evidence["profile: fabric.dra.deviceAttributes"] = dict(d.expected_attributes)
    ds = d.driverDaemonSet
    driver = f"{ds.namespace}/{ds.daemonSet}" if ds else f"the {d.driver} DRA driver"
    return [Finding(
        NOT_ADVERTISED,
        Severity.critical,
        _node_refs(bad),
        f"{len(bad)} node(s) of fabric pool {pool.name} publish fewer usable fabric devices than pods need in "
        f"their {d.driver} ResourceSlices: claims for DeviceClass {d.deviceClassName} cannot be allocated there "
        "(pods stay Pending), and pods without the claim run over sockets.",
        evidence,
        f"Check the NICs on these nodes (link state, RDMA devices) and the logs of {driver}; the driver republishes "
        "its ResourceSlice when the devices come back.",
        pools=[pool.name],
    )]


def _lacking(pool: Pool) -> str:
    d = pool.fabric.dra
    if not pool.fabric.resources:
        return f"hold no ResourceClaim of DeviceClass {d.deviceClassName if d else '?'}"
    text = f"request none of {', '.join(sorted(pool.fabric.resources))}"
    return text + (f" (DRA-backed by DeviceClass {d.deviceClassName}, and hold no such claim)" if d else "")


def _request_view(gpus: frozenset[str], fabric: tuple[tuple[str, tuple[str, ...]], ...], pod: dict[str, Any]
                  ) -> tuple[Any, tuple[str, str, str], dict[str, float], frozenset[str]] | None:
    """What fabric-request-missing reads of a pod: for a Running pod that requests one of ``gpus`` (the fabric
    pools' GPU resources), (its node, its workload, how many of each of ``gpus`` it requests, the pools of
    ``fabric`` ((name, fabric resources) each) whose fabric resources it requests), else None."""
    if (pod.get("status") or {}).get("phase") != "Running":
        return None
    req = container_requests(pod)
    counts = {r: quantity(req.get(r)) for r in gpus}
    if not any(c >= 1 for c in counts.values()):
        return None
    has = frozenset(name for name, resources in fabric if any(quantity(req.get(r)) >= 1 for r in resources))
    return (pod.get("spec") or {}).get("nodeName"), workload_key(pod), counts, has


def _request_finding(key: tuple[str, str, str], pool: Pool, running: int, nodes: int,
                     pods: list[dict[str, Any]]) -> Finding:
    """fabric-request-missing's finding on one workload: ``pods`` are its ``running`` pods, then those of them
    without the fabric."""
    label, ns, name = key
    kind = KIND_OF_LABEL.get(label, label)
    without = pods[running:]
    objs = [ObjRef(kind, name, ns)] + [ObjRef("Pod", p["metadata"]["name"], ns) for p in without]
    first = without[0]
    evidence = {
        "workload": f"{label}={name}" if "/" in label else f"{label} {name}",
        "running pods": running,
        "nodes": nodes,
        "pods without fabric resources": len(without),
        f"Pod {first['metadata']['name']}: spec.containers[*].resources": {
            k: v for k, v in container_requests(first).items()
        },
        "pool fabric.resources": dict(pool.fabric.resources),
    }
    if pool.fabric.dra is not None:
        evidence["pool fabric.dra.deviceClassName"] = pool.fabric.dra.deviceClassName
        evidence[f"Pod {first['metadata']['name']}: spec.resourceClaims"] = (
            (first.get("spec") or {}).get("resourceClaims") or "absent")
    return Finding(
        REQUEST_MISSING,
        Severity.critical,
        objs,
        f"{kind} {ns}/{name} runs {running} GPU pods across {nodes} nodes of fabric pool {pool.name}, but "
        f"{len(without)} of them {_lacking(pool)}: "
        "NCCL has no RDMA device in those pods and falls back to TCP sockets without any error.",
        evidence,
        "Submit multi-node jobs through the fabricguard admission webhook (it injects the fabric resources, "
        f"networks and NCCL_NET={pool.fabric.effective_nccl_net or ''} so a missing fabric fails loudly), or "
        "add the resources to the pod template.",
        pools=[pool.name],
    )


def fabric_request_missing(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    where = node_pool(snapshot, profile)
    if not where:
        return []
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    pools = [p for p in fabric_pools(profile) if p.fabric.resources or p.fabric.dra]
    fabric = {p.name for p in pools}  # once, not per pod
    view = partial(_request_view, frozenset(p.gpuResource for p in pools),
                   tuple((p.name, tuple(sorted(p.fabric.resources))) for p in pools))
    for pod, (node, key, counts, has) in snapshot.select(REQUEST_MISSING, snapshot.pods, view):
        pool = where.get(node or "")
        if pool is None or pool.name not in fabric:
            continue
        if counts[pool.gpuResource] < 1:
            continue
        g = groups.setdefault(key, {"pods": [], "nodes": set(), "pool": pool, "without": []})
        g["pods"].append(pod)
        g["nodes"].add(node)
        if pool.name not in has and not dra.holds_fabric_claim(pod, pool, snapshot.claims_by_name):
            g["without"].append(pod)
    findings = []
    for key, g in sorted(groups.items(), key=lambda kv: kv[0]):
        if len(g["nodes"]) < 2 or not g["without"]:
            continue
        # The finding of a workload whose running pods, and those of them without the fabric, are the very
        # objects of a previous pass is that pass's (a Pod event elsewhere builds none of the others again).
        pods, without = g["pods"], g["without"]
        findings.append(snapshot.fold((REQUEST_MISSING, key), pods + without,
                                      partial(_request_finding, key, g["pool"], len(pods), len(g["nodes"]))))
    return findings


def _off_mapping(label: str, mapping: dict[str, Any], node: dict[str, Any]) -> tuple[str | None, ObjRef] | None:
    """(the node's ``label`` value (None: no such label), its reference) when ``mapping`` does not list the
    value, else None."""
    value = objects.labels_of(node).get(label)
    return (value, ObjRef("Node", node["metadata"]["name"])) if value not in mapping else None


def topology_mapping_mismatch(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    findings = []
    members = pool_nodes(snapshot, profile)
    for pool in fabric_pools(profile):
        label, mapping = pool.fabric.topologyLabel, pool.fabric.networkMapping
        if not label or not mapping:
            continue
        by_value: dict[str | None, list[tuple[dict[str, Any], ObjRef]]] = defaultdict(list)
        for n, (value, ref) in snapshot.select((TOPOLOGY, pool.name), members.get(pool.name, []),
                                               partial(_off_mapping, label, mapping)):
            by_value[value].append((n, ref))
        for value, off in sorted(by_value.items(), key=lambda kv: str(kv[0])):
            nodes = [n for n, _ in off]
            what = f"label {label}={value}, which networkMapping does not list" if value else f"no label {label}"
            findings.append(
                Finding(
                    TOPOLOGY,
                    Severity.warning,
                    [ref for _, ref in off],
                    f"{len(nodes)} node(s) of pool {pool.name} have {what}: pods placed there get the "
                    "wrong RDMA "
                    "network or none (reservations move between blocks; the mapping must follow).",
                    {
                        f"metadata.labels[{label}]": value if value is not None else "absent",
                        "profile: fabric.networkMapping": dict(mapping),
                        "nodes": [n["metadata"]["name"] for n in nodes[:MAX_EVIDENCE_ITEMS]],
                    },
                    (
                        f"Add '{value}: <network>' to fabric.networkMapping of pool {pool.name}"
                        if value
                        else f"Label the nodes with {label} (the provider's topology label) or fix it"
                    )
                    + ", or move the workloads to a node pool created for this reservation.",
                    pools=[pool.name],
                )
            )
    return findings


def _fabric_ready(n: dict[str, Any]) -> dict[str, Any] | None:
    return find_condition(n, READY_CONDITION)


def _ungated(keys: frozenset[str], n: dict[str, Any]) -> tuple[dict[str, Any] | None, ObjRef] | None:
    """(its FabricReady condition, its reference) for a schedulable node with none of the readiness taints
    ``keys`` and no FabricReady=True, else None: what node-not-gated reads of one node."""
    if (n.get("spec") or {}).get("unschedulable") or frozenset(taint_keys(n)) & keys:
        return None
    cond = find_condition(n, READY_CONDITION)
    return None if cond and cond.get("status") == "True" else (cond, ObjRef("Node", n["metadata"]["name"]))


def node_not_gated(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    findings = []
    members = pool_nodes(snapshot, profile)
    agent_seen = bool(snapshot.select("fabric-ready-reported", snapshot.nodes, _fabric_ready))
    for pool in fabric_pools(profile):
        bad = snapshot.select((NOT_GATED, pool.name), members.get(pool.name, []),
                              partial(_ungated, frozenset(pool.taint_keys)))
        if not bad:
            continue
        evidence: dict[str, Any] = {"readiness agent seen on any node": agent_seen}
        for n, (cond, _) in bad[:MAX_EVIDENCE_ITEMS]:
            evidence[f"Node {n['metadata']['name']}: status.conditions[{READY_CONDITION}]"] = (
                f"{cond.get('status')} ({cond.get('reason', '')})" if cond else "absent"
            )
        why = (
            "no node in the cluster has a FabricReady condition: no readiness agent is deployed"
            if not agent_seen
            else "their FabricReady condition is not True"
        )
        findings.append(
            Finding(
                NOT_GATED,
                Severity.warning,
                [ref for _, (_, ref) in bad],
                f"{len(bad)} schedulable node(s) of fabric pool {pool.name} are not gated on fabric "
                "readiness "
                f"({why}); jobs can land on a node whose fabric was never verified.",
                evidence,
                "Deploy the fabricguard readiness agent and its NodeReadinessRules (fabricguard render agent, "
                f"render readiness): nodes then carry {UNVERIFIED_TAINT}:NoSchedule until the fabric check passes.",
                pools=[pool.name],
            )
        )
    return findings
