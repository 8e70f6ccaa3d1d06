"""Kueue objects from the platform profile: ResourceFlavors, Topologies, ClusterQueues, LocalQueues, the fabric check.

Pure: a profile in, plain ``kueue.x-k8s.io/v1beta2`` objects out (v1beta1 is deprecated). The names here are the
ones the webhook and the controller use: the webhook labels workloads with the pool's queue name and asks for the
pool's topology levels; the controller answers the AdmissionCheck named ``names.CHECK_NAME``.

Choices a platform engineer should know (docs/placement.md says more):
- one ResourceFlavor per pool, named after the pool; pools that share a queue are flavors of one ClusterQueue in
  profile order, which is Kueue's order of preference (a pool transition reorders them);
- every resource a training pod requests must be covered by the ClusterQueue or excluded in Kueue's
  Configuration: under Kueue's default ``BlockUndeclared`` anything else leaves the workload inadmissible;
- the pool's tolerations become the flavor's ``tolerations`` (Kueue adds them to admitted pods); they are not
  ``nodeTaints``, which would make Kueue refuse every workload that does not already tolerate them.
"""

from __future__ import annotations

from typing import Any

from fabricguard import kinds, names, quantity
from fabricguard.objects import fabric_admission_check
from fabricguard.profile.model import PlatformProfile, Pool, Queue

MANAGED_BY = {names.LABEL_MANAGED_BY: names.MANAGED_BY_VALUE}

# The frameworks whose workloads the webhook injects; Kueue must manage the same ones.
FRAMEWORKS = tuple(kinds.kueue_frameworks())


class KueueRenderError(ValueError):
    """The profile lacks something Kueue needs; the message names the pool or queue and the field to set."""


def scale(text: str, factor: int) -> str:
    """``factor`` times a Kubernetes quantity, in the API server's canonical form ("2000Gi" x 4 = "8000Gi")."""
    try:
        q = quantity.parse(text)
    except quantity.QuantityError as exc:
        raise KueueRenderError(str(exc)) from None
    return quantity.Quantity(q.amount * factor, q.format).canonical()


def _meta(name: str, **labels: str) -> dict[str, Any]:
    return {"name": name, "labels": {**MANAGED_BY, **labels}}


def topology(pool: Pool) -> dict[str, Any] | None:
    """The pool's Topology (levels coarsest first), or None when the pool declares no topology."""
    levels = pool.topology_levels
    if not levels:
        return None
    return {
        "apiVersion": names.KUEUE_API,
        "kind": "Topology",
        "metadata": _meta(pool.name, **{names.LABEL_POOL: pool.name}),
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def resource_flavor(pool: Pool) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": dict(pool.nodeSelector)}
    if pool.tolerations:
        spec["tolerations"] = [t.to_k8s() for t in pool.tolerations]
    if pool.topology_levels:
        spec["topologyName"] = pool.name
    return {
        "apiVersion": names.KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": _meta(pool.name, **{names.LABEL_POOL: pool.name}),
        "spec": spec,
    }


def _fabric_resources(pool: Pool) -> dict[str, int]:
    return dict(pool.fabric.resources)


def device_class_resource(pool: Pool) -> str | None:
    """The logical resource Kueue accounts a DRA claim pool's DeviceClass as (``deviceClassMappings[].name``):
    the DeviceClass name itself; None for pools whose pods claim nothing (device plugin, KEP-5004)."""
    d = pool.fabric.dra
    if d is None or pool.claim_template_name is None:
        return None
    if d.allocationMode != "ExactCount":
        raise KueueRenderError(
            f"pool {pool.name!r}: fabric.dra.allocationMode All cannot be accounted by Kueue (its DRA integration "
            "counts ExactCount requests only, and leaves other claims inadmissible); set allocationMode: ExactCount "
            "and count to the devices one pod takes"
        )
    return d.deviceClassName


def _per_node(pool: Pool, queue: Queue) -> dict[str, str]:
    """What one node of the pool contributes to its flavor's quota, by resource name."""
    d = pool.fabric.dra
    out: dict[str, str] = {}
    if d is None or not d.alignWithGpus:
        out[pool.gpuResource] = str(pool.gpusPerNode)
    out.update({k: str(v) for k, v in pool.nodeAllocatable.items()})
    if queue.fabricResources == "quota":
        # One training pod per node takes the node's whole fabric share, as the webhook injects it.
        out.update({k: str(v) for k, v in _fabric_resources(pool).items()})
    logical = device_class_resource(pool)
    if logical is not None and d is not None:
        # A claim cannot be excluded from quota: Kueue counts a mapped DeviceClass's devices, always.
        out[logical] = str(d.count)
        if d.alignWithGpus:
            out[d.alignWithGpus] = str(pool.gpusPerNode)
    return out


def checked_flavors(profile: PlatformProfile, pools: list[Pool]) -> list[str]:
    """The flavors whose workloads wait for the fabric check: those of pools with a canary to answer it.

    A fabric pool without a canary (no Lustre for its logs, or ``canary.enabled: false``) gets no check: nothing
    would ever mark its workloads Ready, and they would wait forever.
    """
    return [p.name for p in pools if profile.canary(p) is not None and p.name in profile.canary_flavors(p)]


def cluster_queue(queue: Queue, pools: list[Pool], profile: PlatformProfile) -> dict[str, Any]:
    """One ClusterQueue over the pools that name ``queue``, flavors in profile order."""
    missing = [p.name for p in pools if p.nodes is None]
    if missing:
        raise KueueRenderError(
            f"queue {queue.name!r}: pool(s) {missing} set no nodes; set spec.pools[].nodes to the reservation's "
            "node count so that the ClusterQueue's quota matches the hardware"
        )
    per_node = {p.name: _per_node(p, queue) for p in pools}
    covered: list[str] = []
    for p in pools:
        covered.extend(r for r in per_node[p.name] if r not in covered)
    flavors = []
    for p in pools:
        assert p.nodes is not None
        have = per_node[p.name]
        flavors.append({
            "name": p.name,
            "resources": [{"name": r, "nominalQuota": scale(have[r], p.nodes) if r in have else "0"} for r in covered],
        })
    spec: dict[str, Any] = {
        "namespaceSelector": (
            {"matchExpressions": [{"key": names.LABEL_NAMESPACE_NAME, "operator": "In",
                                   "values": list(queue.namespaces)}]}
            if queue.namespaces else {}
        ),
        # A gang must not be overtaken forever by smaller jobs behind it: admit in order, try the next on a miss.
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
    }
    fabric_flavors = checked_flavors(profile, pools)
    if fabric_flavors:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": names.CHECK_NAME, "onFlavors": fabric_flavors}]}
    if queue.cohort:
        spec["cohortName"] = queue.cohort
    return {"apiVersion": names.KUEUE_API, "kind": "ClusterQueue", "metadata": _meta(queue.name), "spec": spec}


def local_queues(queue: Queue) -> list[dict[str, Any]]:
    """A LocalQueue named like the ClusterQueue in every team namespace: the name the webhook labels jobs with."""
    return [
        {
            "apiVersion": names.KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {**_meta(queue.name), "namespace": ns},
            "spec": {"clusterQueue": queue.name},
        }
        for ns in queue.namespaces
    ]


def admission_check() -> dict[str, Any]:
    """The fabric AdmissionCheck (the controller's own manifest: it keeps ``Active`` True and answers Workloads)."""
    return fabric_admission_check()


def queues(profile: PlatformProfile) -> list[tuple[Queue, list[Pool]]]:
    """Each queue the profile names, with its pools in profile order."""
    out: dict[str, tuple[Queue, list[Pool]]] = {}
    for p in profile.spec.pools:
        if p.queue is not None:
            out.setdefault(p.queue.name, (p.queue, []))[1].append(p)
    return list(out.values())


def excluded_prefixes(profile: PlatformProfile) -> list[str]:
    """Fabric resource names that queues chose to exclude from quota (exact names: a prefix of themselves)."""
    names: list[str] = []
    for queue, pools in queues(profile):
        if queue.fabricResources != "exclude":
            continue
        for p in pools:
            names.extend(r for r in _fabric_resources(p) if r not in names)
    return names


def configuration(profile: PlatformProfile, *, pods_ready_timeout: str = "10m") -> dict[str, Any]:
    """The fragment of Kueue's Configuration that the profile needs: all-or-nothing admission, frameworks, exclusions.

    ``waitForPodsReady`` evicts and requeues a gang whose pods are not all ready in time, instead of holding some
    GPUs idle for a half-started job; ``blockAdmission`` keeps a second gang from being admitted while the first
    is still starting, so two gangs cannot deadlock each other on the same nodes.
    """
    cfg: dict[str, Any] = {
        "apiVersion": names.KUEUE_CONFIG_API,
        "kind": "Configuration",
        "waitForPodsReady": {
            "timeout": pods_ready_timeout,
            "recoveryTimeout": pods_ready_timeout,
            "blockAdmission": True,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
        },
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }
    excluded = excluded_prefixes(profile)
    if excluded:
        cfg["resources"] = {"quotaCheckStrategy": "BlockUndeclared", "excludeResourcePrefixes": excluded}
    mappings = device_class_mappings(profile)
    if mappings:
        # Accounted only while Kueue's KueueDRAIntegration feature gate (beta, on by default) is on; it is not set
        # here because Configuration.featureGates cannot be combined with a --feature-gates flag.
        cfg.setdefault("resources", {})["deviceClassMappings"] = mappings
    return cfg


def _selects(selector: Any, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector against labels (matchLabels, and In/NotIn/Exists/DoesNotExist expressions)."""
    if not isinstance(selector, dict):
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or ():
        if not isinstance(e, dict):
            continue
        key, op, values = str(e.get("key") or ""), e.get("operator"), list(e.get("values") or ())
        has = key in labels
        if ((op == "In" and labels.get(key) not in values) or (op == "NotIn" and has and labels[key] in values)
                or (op == "Exists" and not has) or (op == "DoesNotExist" and has)):
            return False
    return True


def configuration_problems(profile: PlatformProfile, cfg: dict[str, Any], canary_namespace: str,
                           namespace_labels: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(field, why) for each setting of a live Kueue Configuration that makes the profile's workloads or canaries
    inadmissible; [] when none does. The same fields :func:`configuration` renders."""
    out: list[tuple[str, str]] = []
    resources = cfg.get("resources") if isinstance(cfg.get("resources"), dict) else {}
    prefixes = [str(p) for p in (resources or {}).get("excludeResourcePrefixes") or ()]
    for r in excluded_prefixes(profile):
        if not any(r.startswith(p) for p in prefixes):
            out.append(("resources.excludeResourcePrefixes",
                        f"does not exclude {r}: a queue with fabricResources: exclude has no quota for it, so "
                        "every workload asking for it is inadmissible"))
    mapped = {str(c) for m in (resources or {}).get("deviceClassMappings") or () if isinstance(m, dict)
              for c in m.get("deviceClassNames") or ()}
    for m in device_class_mappings(profile):
        for cls in m["deviceClassNames"]:
            if cls not in mapped:
                out.append(("resources.deviceClassMappings",
                            f"has no entry for DeviceClass {cls}: Kueue does not account the DRA claims of that "
                            "pool, so its quota never admits them"))
    if cfg.get("manageJobsWithoutQueueName") is True:
        labels = {names.LABEL_NAMESPACE_NAME: canary_namespace, **(namespace_labels or {})}
        selector = cfg.get("managedJobsNamespaceSelector")
        unqueued = [p.name for p in profile.spec.pools if (c := profile.canary(p)) is not None and not c.queue]
        if unqueued and (selector is None or _selects(selector, labels)):
            out.append(("manageJobsWithoutQueueName",
                        f"is true and managedJobsNamespaceSelector selects {canary_namespace}: the canaries of "
                        f"pool(s) {', '.join(unqueued)} carry no queue label, so Kueue suspends them forever and "
                        "the pools are never validated; exclude the namespace in managedJobsNamespaceSelector or "
                        "set each canary.queue"))
    return out


def device_class_mappings(profile: PlatformProfile) -> list[dict[str, Any]]:
    """``resources.deviceClassMappings``: each DRA claim pool's DeviceClass under its logical resource name."""
    out: dict[str, list[str]] = {}
    for _, pools in queues(profile):
        for p in pools:
            logical = device_class_resource(p)
            if logical is None or p.fabric.dra is None:
                continue
            # One logical resource per DeviceClass, named after it (the aligned GPUs' class has its own).
            for cls in (p.fabric.dra.deviceClassName, p.fabric.dra.alignWithGpus):
                if cls:
                    out.setdefault(cls, [cls])
    return [{"name": k, "deviceClassNames": v} for k, v in out.items()]


def warnings(profile: PlatformProfile) -> list[str]:
    """What Kueue will not do for this profile although the objects render (printed as comments)."""
    out = []
    for _, pools in queues(profile):
        for p in pools:
            if device_class_resource(p) is not None and (p.topology_levels or (p.queue and p.queue.topology)):
                out.append(f"pool {p.name}: Kueue's topology-aware scheduling does not work together with DRA claims "
                           "yet (kueue#10548): its workloads' topology annotations may leave them unadmitted; drop "
                           "queue.topology/topologyLevels for this pool until Kueue supports both")
    return out


def objects(profile: PlatformProfile) -> list[dict[str, Any]]:
    """Every Kueue object of the profile, in the order ``kubectl apply`` needs them."""
    pools_with_queue = [p for q, ps in queues(profile) for p in ps]
    out: list[dict[str, Any]] = []
    for p in pools_with_queue:
        topo = topology(p)
        if topo is not None:
            out.append(topo)
    out.extend(resource_flavor(p) for p in pools_with_queue)
    if checked_flavors(profile, pools_with_queue):
        out.append(admission_check())
    for queue, pools in queues(profile):
        out.append(cluster_queue(queue, pools, profile))
        out.extend(local_queues(queue))
    return out
