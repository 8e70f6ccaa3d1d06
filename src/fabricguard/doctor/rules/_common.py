"""Lookups the rules share: which pool a node belongs to, container statuses, workload identity."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fabricguard import names
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.objects import labels_of
from fabricguard.profile import PlatformProfile, Pool
from fabricguard.workload_identity import job_of

MAX_EVIDENCE_ITEMS = 20


def pool_nodes(snapshot: Snapshot, profile: PlatformProfile | None) -> dict[str, list[dict[str, Any]]]:
    """Nodes of each pool (:meth:`PlatformProfile.pool_of`: the profile's pools are disjoint)."""
    if profile is None:
        return {}
    return snapshot.pool_members(profile)


def node_pool(snapshot: Snapshot, profile: PlatformProfile | None) -> dict[str, Pool]:
    """Pool of each node, by node name."""
    if profile is None:
        return {}
    pools = {p.name: p for p in profile.spec.pools}
    return {n["metadata"]["name"]: pools[pname] for pname, ns in pool_nodes(snapshot, profile).items() for n in ns}


def fabric_pools(profile: PlatformProfile | None) -> list[Pool]:
    return [p for p in profile.spec.pools if p.fabric.has_fabric] if profile else []


def all_container_statuses(pod: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``status.containerStatuses[i]``-style field path, status) for init and app containers."""
    st = pod.get("status") or {}
    for field in ("initContainerStatuses", "containerStatuses"):
        for i, cs in enumerate(st.get(field) or ()):
            yield f"status.{field}[{i}]", cs


def node_arch(node: dict[str, Any] | None) -> str | None:
    if not node:
        return None
    labels = labels_of(node)
    return labels.get(names.LABEL_ARCH) or labels.get(names.LABEL_ARCH_BETA)


def owner_key(pod: dict[str, Any]) -> tuple[str, str, str]:
    """The pod's controller as ``(kind, namespace, name)``, or the pod itself."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller", True):
            return ref.get("kind", ""), meta.get("namespace", ""), ref.get("name", "")
    return "Pod", meta.get("namespace", ""), meta.get("name", "")


def workload_key(pod: dict[str, Any]) -> tuple[str, str, str]:
    """The multi-pod workload a pod belongs to: a JobSet, pod group or training job, else its controller."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    found = job_of(labels)
    if found:
        return found[0], meta.get("namespace", ""), found[1]
    return owner_key(pod)


def container_requests(pod: dict[str, Any]) -> dict[str, Any]:
    """Requests and limits of every container (limits count as requests for extended resources)."""
    out: dict[str, Any] = {}
    spec = pod.get("spec") or {}
    for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        res = c.get("resources") or {}
        for part in ("limits", "requests"):
            for k, v in (res.get(part) or {}).items():
                out.setdefault(k, v)
    return out
