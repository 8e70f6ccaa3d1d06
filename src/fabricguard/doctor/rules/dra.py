"""DRA rules: pools whose fabric Dynamic Resource Allocation offers, against the ``resource.k8s.io/v1`` objects.

- ``dra-deviceclass-missing``: the pool's DeviceClass is not in the cluster (or, KEP-5004, does not back the pool's
  extended resource through ``spec.extendedResourceName``); no claim of it can ever be allocated.
- ``dra-no-resourceslice``: a node of the pool has no ResourceSlice from the pool's driver: the driver is not running
  there, or it found no devices.
- ``dra-claim-unallocated``: a ResourceClaim of a fabric DeviceClass still unallocated after
  :data:`UNALLOCATED_SECONDS`, with the scheduler's message from its pod.
- ``dra-double-offer``: one node offers an extended resource both from a device plugin (``status.allocatable``) and
  through a DeviceClass's ``extendedResourceName`` (KEP-5004 forbids it; EKS Auto Mode refuses it).
- ``kueue-dra-unmapped``: a ClusterQueue serves a DRA claim pool, but Kueue's Configuration has no
  ``resources.deviceClassMappings`` entry for its DeviceClass (or the queue does not cover that entry): Kueue leaves
  every workload with such a claim inadmissible.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import partial
from typing import Any

from fabricguard import fabrics, names
from fabricguard.doctor.model import Finding, ObjRef, Severity, human_age, quantity
from fabricguard.doctor.rules._common import MAX_EVIDENCE_ITEMS, fabric_pools, pool_nodes
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.objects import find_condition, selector_matches
from fabricguard.profile import PlatformProfile, Pool, dra
from fabricguard.times import parse_time
from fabricguard.yamlsource import SourceError, loads_documents

CLASS_MISSING = "dra-deviceclass-missing"
NO_SLICE = "dra-no-resourceslice"
UNALLOCATED = "dra-claim-unallocated"
DOUBLE_OFFER = "dra-double-offer"
KUEUE_UNMAPPED = "kueue-dra-unmapped"

UNALLOCATED_SECONDS = 600
KUEUE_CONFIG_PREFIX = "config.kueue.x-k8s.io/"
_CEL_DRIVER = re.compile(r"""device\.driver\s*==\s*["']([^"']+)["']""")


def _m(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _dra_pools(profile: PlatformProfile | None) -> list[Pool]:
    return [p for p in fabric_pools(profile) if p.fabric.dra is not None]


def _classes(snapshot: Snapshot) -> dict[str, dict[str, Any]]:
    return {str(_m(c.get("metadata")).get("name", "")): c for c in snapshot.kind(dra.DEVICE_CLASS)}


def deviceclass_missing(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    classes = _classes(snapshot)
    out: list[Finding] = []
    for pool in _dra_pools(profile):
        d = pool.fabric.dra
        assert d is not None
        cls = classes.get(d.deviceClassName)
        evidence: dict[str, Any] = {"profile: fabric.dra.deviceClassName": d.deviceClassName,
                                    "DeviceClasses in the snapshot": sorted(classes)[:MAX_EVIDENCE_ITEMS] or "none"}
        if cls is None:
            out.append(Finding(
                CLASS_MISSING, Severity.critical, [ObjRef("DeviceClass", d.deviceClassName)],
                f"DeviceClass {d.deviceClassName} of DRA pool {pool.name} does not exist: no claim for the fabric "
                "can be allocated, so every job on the pool stays Pending.",
                evidence,
                f"Install the {d.driver} DRA driver's DeviceClass (GKE creates mrdma.google.com from "
                "1.34.1-gke.1829001; the aws-dranet chart creates efa.networking.k8s.aws), or correct "
                "fabric.dra.deviceClassName.",
                pools=[pool.name]))
            continue
        have = _m(cls.get("spec")).get("extendedResourceName")
        if d.extended and have != d.extendedResourceName:
            evidence["spec.extendedResourceName"] = have or "absent"
            out.append(Finding(
                CLASS_MISSING, Severity.critical, [ObjRef("DeviceClass", d.deviceClassName)],
                f"DeviceClass {d.deviceClassName} does not back {d.extendedResourceName} (its "
                f"spec.extendedResourceName is {have or 'absent'}): pods of pool {pool.name} that request "
                f"{d.extendedResourceName} cannot be scheduled, since the nodes do not list it in allocatable.",
                evidence,
                f"Set spec.extendedResourceName: {d.extendedResourceName} on DeviceClass {d.deviceClassName} "
                "(KEP-5004, GA in Kubernetes 1.37).",
                pools=[pool.name]))
    return out


def no_resourceslice(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    members = pool_nodes(snapshot, profile)
    slices = snapshot.kind(dra.RESOURCE_SLICE)
    out: list[Finding] = []
    for pool in _dra_pools(profile):
        d = pool.fabric.dra
        assert d is not None
        nodes = members.get(pool.name, [])
        bad = [n for n in nodes if not snapshot.dra_index.slices(n["metadata"]["name"], d.driver)]
        if not bad:
            continue
        drivers = sorted({str(_m(s.get("spec")).get("driver")) for s in slices})
        ds = d.driverDaemonSet
        out.append(Finding(
            NO_SLICE, Severity.critical, [ObjRef("Node", n["metadata"]["name"]) for n in bad],
            f"{len(bad)} of {len(nodes)} node(s) of DRA pool {pool.name} have no ResourceSlice from driver "
            f"{d.driver}: nothing offers their fabric devices, so claims for {d.deviceClassName} cannot land there.",
            {"nodes": [n["metadata"]["name"] for n in bad[:MAX_EVIDENCE_ITEMS]],
             "ResourceSlices in the snapshot": len(slices),
             "drivers publishing ResourceSlices": drivers or "none",
             "profile: fabric.dra.driver": d.driver},
            (f"Make DaemonSet {ds.namespace}/{ds.daemonSet} run and become ready on these nodes (see daemonset-* "
             "findings); it publishes one ResourceSlice per node." if ds else
             f"Run the {d.driver} DRA driver on these nodes; name its DaemonSet in fabric.dra.driverDaemonSet."),
            pools=[pool.name]))
    return out


def _failed_scheduling(snapshot: Snapshot) -> dict[tuple[str, str], str]:
    """The last FailedScheduling event message of each pod, by (namespace, name)."""
    out: dict[tuple[str, str], str] = {}
    for ev in snapshot.events:
        inv = _m(ev.get("involvedObject") or ev.get("regarding"))
        if inv.get("kind") == "Pod" and ev.get("reason") == "FailedScheduling":
            out[(str(inv.get("namespace", "")), str(inv.get("name", "")))] = str(ev.get("message") or ev.get("note")
                                                                                 or "")
    return out


def _scheduler_message(events: dict[tuple[str, str], str], pod: dict[str, Any] | None) -> str | None:
    if pod is None:
        return None
    cond = find_condition(pod, names.POD_SCHEDULED)
    if cond and cond.get("status") == "False" and cond.get("message"):
        return str(cond["message"])
    meta = _m(pod.get("metadata"))
    return events.get((str(meta.get("namespace", "")), str(meta.get("name", ""))))


def _pods_by_name(pods: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(str(_m(p.get("metadata")).get("namespace", "")), str(_m(p.get("metadata")).get("name", ""))): p
            for p in pods}


def claim_unallocated(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    pools = {p.fabric.dra.deviceClassName: p for p in _dra_pools(profile) if p.fabric.dra}
    if not pools:
        return []
    pods: dict[tuple[str, str], dict[str, Any]] | None = None  # by (namespace, name): only when a claim asks
    by_pool: dict[str, list[tuple[dict[str, Any], dict[str, Any] | None, float]]] = {}
    for claim in snapshot.kind(dra.RESOURCE_CLAIM):
        if _m(_m(claim.get("status")).get("allocation")):
            continue
        classes = dra.claim_classes(claim) & set(pools)
        if not classes:
            continue
        meta = _m(claim.get("metadata"))
        created = parse_time(meta.get("creationTimestamp"))
        age = (now - created).total_seconds() if created else None
        if age is None or age < UNALLOCATED_SECONDS:
            continue
        owner = next((r for r in meta.get("ownerReferences") or () if isinstance(r, dict) and r.get("kind") == "Pod"),
                     None)
        if owner and pods is None:
            pods = snapshot.fold((UNALLOCATED, "pods"), snapshot.pods, _pods_by_name)
        pod = pods.get((str(meta.get("namespace", "")), str(owner.get("name")))) if owner and pods else None
        by_pool.setdefault(pools[sorted(classes)[0]].name, []).append((claim, pod, age))
    _pending_extended(snapshot, profile, now, by_pool)
    events = _failed_scheduling(snapshot) if by_pool else {}
    out: list[Finding] = []
    for pool_name, items in sorted(by_pool.items()):
        items.sort(key=lambda t: -t[2])
        evidence: dict[str, Any] = {}
        for claim, pod, age in items[:MAX_EVIDENCE_ITEMS]:
            meta = _m(claim.get("metadata"))
            key = f"{claim.get('kind', 'ResourceClaim')} {meta.get('namespace')}/{meta.get('name')}"
            msg = _scheduler_message(events, pod)
            evidence[key] = (f"unallocated for {human_age(age)}"
                             + (f"; pod {pod['metadata']['name']}: {msg}" if pod is not None and msg else ""))
        first_msg = next((m for _, p, _ in items if (m := _scheduler_message(events, p))), None)
        oldest = human_age(items[0][2])
        objs = [ObjRef.of(c) for c, _, _ in items[:MAX_EVIDENCE_ITEMS]]
        out.append(Finding(
            UNALLOCATED, Severity.critical, objs,
            f"{len(items)} {_what(items)} for the fabric of DRA pool {pool_name} have not been allocated (the "
            f"oldest for {oldest}): their pods cannot start."
            + (f" The scheduler says: {first_msg}" if first_msg else ""),
            evidence,
            "Read the scheduler's reason above: too few free devices (other claims hold them), a DeviceClass or "
            "selector no device matches, or nodes without the driver's ResourceSlice (see dra-no-resourceslice).",
            pools=[pool_name]))
    return out


def _what(items: list[tuple[dict[str, Any], dict[str, Any] | None, float]]) -> str:
    if all(c.get("kind") == "Pod" for c, _, _ in items):
        return "KEP-5004 pod(s) (the scheduler makes their claim when it places them)"
    if any(c.get("kind") == "Pod" for c, _, _ in items):
        return "ResourceClaim(s) and KEP-5004 pod(s)"
    return "ResourceClaim(s)"


def _pending_extended(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime,
                      by_pool: dict[str, list[tuple[dict[str, Any], dict[str, Any] | None, float]]]) -> None:
    """KEP-5004: the scheduler makes the claim only when it places the pod, so a pod that cannot get the devices
    stays Pending with no claim at all; such a pod (requesting the pool's extended resource) stands for it."""
    wanted = {p.fabric.dra.extendedResourceName: p for p in _dra_pools(profile)
              if p.fabric.dra and p.fabric.dra.extendedResourceName}
    if not wanted:
        return
    unplaced = partial(_unplaced, tuple(sorted(wanted)))
    for pod, (resource, since) in snapshot.select((UNALLOCATED, "unplaced"), snapshot.pods, unplaced):
        pool = wanted[resource]
        if since is None or (now - since).total_seconds() < UNALLOCATED_SECONDS:
            continue
        by_pool.setdefault(pool.name, []).append((pod, pod, (now - since).total_seconds()))


def _unplaced(wanted: tuple[str, ...], pod: dict[str, Any]) -> tuple[str, datetime | None] | None:
    """(the first of ``wanted`` (sorted) it requests, since when it waits) of a Pending pod the scheduler could not
    place, else None: what the KEP-5004 check reads of one pod (the clock is compared by the caller)."""
    spec, status = _m(pod.get("spec")), _m(pod.get("status"))
    if status.get("phase") != "Pending" or spec.get("nodeName"):
        return None
    cond = find_condition(pod, names.POD_SCHEDULED)
    if not cond or cond.get("status") != "False":
        return None
    asked = {k for c in spec.get("containers") or () for part in ("requests", "limits")
             for k in _m(_m(_m(c).get("resources")).get(part))}
    resource = next((r for r in sorted(asked) if r in wanted), None)
    if resource is None:
        return None
    return resource, (parse_time(cond.get("lastTransitionTime"))
                      or parse_time(_m(pod.get("metadata")).get("creationTimestamp")))


def _class_drivers(cls: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for sel in _m(cls.get("spec")).get("selectors") or ():
        expr = _m(_m(sel).get("cel")).get("expression")
        if isinstance(expr, str):
            out |= set(_CEL_DRIVER.findall(expr))
    return out


def _offers(res: str, n: dict[str, Any]) -> Any:
    """What the node lists for ``res`` in allocatable, when it is at least 1 (else None)."""
    have = _m(_m(n.get("status")).get("allocatable")).get(res)
    return have if quantity(have) >= 1 else None


def double_offer(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    """A node that lists an extended resource in allocatable while a DRA driver backs the same name for it."""
    del now
    backing: dict[str, tuple[str, set[str]]] = {}  # resource name -> (DeviceClass, drivers)
    for name, cls in _classes(snapshot).items():
        res = _m(cls.get("spec")).get("extendedResourceName")
        if isinstance(res, str) and res:
            backing[res] = (name, _class_drivers(cls))
    for pool in _dra_pools(profile):
        d = pool.fabric.dra
        if d and d.extendedResourceName:
            cls_name, drivers = backing.get(d.extendedResourceName, (d.deviceClassName, set()))
            backing[d.extendedResourceName] = (cls_name, drivers | {d.driver})
    out = _claim_pool_double_offer(snapshot, profile)
    if not backing:
        return out
    pool_of = {n["metadata"]["name"]: p.name for p in fabric_pools(profile)
               for n in pool_nodes(snapshot, profile).get(p.name, [])}
    for res, (cls_name, drivers) in sorted(backing.items()):
        bad: list[tuple[str, Any, str]] = []
        for n, have in snapshot.select((DOUBLE_OFFER, res), snapshot.nodes, partial(_offers, res)):
            name = n["metadata"]["name"]
            from_dra = next((drv for drv in sorted(drivers) if snapshot.dra_index.slices(name, drv)), None)
            if from_dra:
                bad.append((name, have, from_dra))
        if not bad:
            continue
        out.append(Finding(
            DOUBLE_OFFER, Severity.critical, [ObjRef("Node", b[0]) for b in bad] + [ObjRef("DeviceClass", cls_name)],
            f"{len(bad)} node(s) offer {res} twice: a device plugin lists it in status.allocatable while DeviceClass "
            f"{cls_name} backs the same name through DRA (driver {bad[0][2]}). A node may not offer one resource "
            "both ways (KEP-5004; EKS Auto Mode refuses it): the scheduler and the two drivers count the same NICs "
            "twice.",
            {**{f"Node {b[0]}: status.allocatable[{res}]": b[1] for b in bad[:MAX_EVIDENCE_ITEMS]},
             f"Node {bad[0][0]}: ResourceSlice driver": bad[0][2],
             f"DeviceClass {cls_name}: spec.extendedResourceName": res},
            f"Remove the device plugin from these nodes (or the DRA driver): keep one way of offering {res}.",
            pools=sorted({pool_of[b[0]] for b in bad if b[0] in pool_of})))
    return out


# Extended resources that fabric device plugins advertise: every fabric module's device_plugin_prefixes.
DEVICE_PLUGIN_FABRIC_PREFIXES = fabrics.device_plugin_prefixes()


def _plugin_offer(n: dict[str, Any]) -> dict[str, Any]:
    """The fabric device plugins' resources the node lists in allocatable (at least 1 each)."""
    alloc = _m(_m(n.get("status")).get("allocatable"))
    return {k: v for k, v in alloc.items() if k.startswith(DEVICE_PLUGIN_FABRIC_PREFIXES) and quantity(v) >= 1}


def _claim_pool_double_offer(snapshot: Snapshot, profile: PlatformProfile | None) -> list[Finding]:
    """A node of a DRA claim pool whose NICs a device plugin also advertises in allocatable."""
    out: list[Finding] = []
    members = pool_nodes(snapshot, profile)
    for pool in _dra_pools(profile):
        d = pool.fabric.dra
        if d is None or d.extended:
            continue
        bad: list[tuple[str, dict[str, Any], int]] = []
        for n, plugin in snapshot.select((DOUBLE_OFFER, "plugin", pool.name), members.get(pool.name, []),
                                         _plugin_offer):
            name = n["metadata"]["name"]
            offer = dra.node_offer(pool, name, snapshot.dra_index)
            if offer.matching:
                bad.append((name, plugin, offer.matching))
        if not bad:
            continue
        out.append(Finding(
            DOUBLE_OFFER, Severity.critical, [ObjRef("Node", b[0]) for b in bad],
            f"{len(bad)} node(s) of DRA pool {pool.name} offer their NICs twice: a device plugin advertises "
            f"{', '.join(sorted(bad[0][1]))} in status.allocatable while driver {d.driver} lists {bad[0][2]} "
            f"device(s) of DeviceClass {d.deviceClassName}; a pod of each kind can be given the same NIC.",
            {**{f"Node {b[0]}: status.allocatable": b[1] for b in bad[:MAX_EVIDENCE_ITEMS]},
             f"Node {bad[0][0]}: {d.driver} fabric devices": bad[0][2]},
            "Run one of them on the pool: remove the device plugin (and its networks) from these nodes, or the DRA "
            "driver (EKS Auto Mode refuses both for the same device).",
            pools=[pool.name]))
    return out


def kueue_configurations(snapshot: Snapshot) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(ConfigMap, Configuration) for every Kueue Configuration found in a ConfigMap's data."""
    out = []
    for cm in snapshot.kind("ConfigMap"):
        for key, text in _m(cm.get("data")).items():
            if not isinstance(text, str) or KUEUE_CONFIG_PREFIX not in text:
                continue
            try:
                docs = loads_documents(text, f"ConfigMap {_m(cm.get('metadata')).get('name')} {key}")
            except SourceError:
                continue
            out += [(cm, d) for d in docs if isinstance(d, dict) and d.get("kind") == "Configuration"
                    and str(d.get("apiVersion", "")).startswith(KUEUE_CONFIG_PREFIX)]
    return out


def _queue_flavors(cq: dict[str, Any]) -> tuple[set[str], set[str]]:
    flavors: set[str] = set()
    covered: set[str] = set()
    for rg in _m(cq.get("spec")).get("resourceGroups") or ():
        covered |= {str(r) for r in _m(rg).get("coveredResources") or ()}
        flavors |= {str(_m(f).get("name")) for f in _m(rg).get("flavors") or ()}
    return flavors, covered


def kueue_unmapped(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    pools = [p for p in _dra_pools(profile) if p.claim_template_name]
    cqs = snapshot.kind("ClusterQueue")
    if not pools or not cqs:
        return []
    rfs = {str(_m(f.get("metadata")).get("name")): f for f in snapshot.kind("ResourceFlavor")}
    configs = kueue_configurations(snapshot)
    mappings: dict[str, str] = {}  # DeviceClass -> logical resource name
    for _, cfg in configs:
        for m in _m(cfg.get("resources")).get("deviceClassMappings") or ():
            for cls in _m(m).get("deviceClassNames") or ():
                mappings.setdefault(str(cls), str(_m(m).get("name")))
    out: list[Finding] = []
    for pool in pools:
        d = pool.fabric.dra
        assert d is not None
        for cq in cqs:
            flavors, covered = _queue_flavors(cq)
            serves = [f for f in flavors if f == pool.name or (
                f in rfs and _m(_m(rfs[f].get("spec")).get("nodeLabels"))
                and selector_matches(dict(pool.nodeSelector), _m(_m(rfs[f].get("spec")).get("nodeLabels"))))]
            if not serves:
                continue
            logical = mappings.get(d.deviceClassName)
            if logical is not None and logical in covered:
                continue
            cq_name = str(_m(cq.get("metadata")).get("name"))
            evidence: dict[str, Any] = {
                "ClusterQueue flavors serving the pool": sorted(serves),
                "Kueue Configurations found": [f"ConfigMap {_m(cm.get('metadata')).get('namespace')}/"
                                               f"{_m(cm.get('metadata')).get('name')}" for cm, _ in configs] or "none",
                "resources.deviceClassMappings": {k: v for k, v in sorted(mappings.items())} or "absent",
                f"ClusterQueue {cq_name}: coveredResources": sorted(covered),
            }
            why = (f"Kueue's Configuration maps DeviceClass {d.deviceClassName} to {logical}, which the queue does not "
                   "cover" if logical else
                   f"no resources.deviceClassMappings entry of Kueue's Configuration lists DeviceClass "
                   f"{d.deviceClassName}")
            out.append(Finding(
                KUEUE_UNMAPPED, Severity.critical, [ObjRef("ClusterQueue", cq_name)],
                f"ClusterQueue {cq_name} serves DRA pool {pool.name}, but {why}: Kueue leaves every workload that "
                "claims the fabric inadmissible.",
                evidence,
                "Run `fabricguard render kueue` and merge its Configuration (deviceClassMappings) and ClusterQueue "
                "(the mapping's name as a covered resource) into Kueue; Kueue accounts DRA only with ExactCount "
                "claims (KueueDRAIntegration).",
                pools=[pool.name]))
    return out
