"""``fabricguard preflight -p P``: will this cluster run the install without holding all training?

Read-only, through the one Kubernetes client (``fabricguard.kube``). Each check is one row: pass, warn (works, but
something is weaker than it should be) or fail (the install would block training or never become ready):

- the Kubernetes version (>= 1.30: webhook ``matchConditions`` and ValidatingAdmissionPolicy v1 are GA there);
- the APIs the components need, served at the versions they use: Kueue v1beta2, JobSet v1alpha2 (canaries),
  Trainer v1alpha1, cert-manager v1 (the webhook's certificates), the Node Readiness Controller v1alpha1, and
  Prometheus Operator (``monitoring.coreos.com/v1``) or GKE Managed Prometheus (``monitoring.googleapis.com/v1``);
- each DaemonSet fabric nodes need (``fabric_daemonsets()``) present and tolerating the readiness taints;
- every resource name a pool's pods request (its GPUs, its fabric's extended resources) advertised in the
  ``status.allocatable`` of the pool's nodes (or backed by a DeviceClass's ``extendedResourceName``): one typo in
  the profile would otherwise fail every node's agent at once, and the breaker would be all that stops it;
- the Lustre claim in every namespace that mounts it: present, static (not a class that would provision a new file
  system) and bound to the profile's file system;
- every namespace opted in to the webhook has the LocalQueue the webhook labels its workloads with;
- on each pool that observes: what enforce would have held (Workloads) or tainted (nodes) in the last day;
- the Pod Security level of the training namespaces against what the webhook injects (``IPC_LOCK`` is not in
  *baseline*; GKE's host mounts need *privileged*) and of fabricguard's own namespace (the agent's hostPath);
- on GKE, the ResourceQuota scoped to the ``system-*-critical`` PriorityClasses in fabricguard's namespace.

Preflight runs as the person installing (their kubeconfig), not as a service account of its own. Its calls are
still declared: :data:`PREFLIGHT_GRANTS` is the table of every read it makes, the client refuses a call outside it
(``fabricguard.kube.Undeclared``), and ``render install`` writes the same table as the optional ClusterRole
``fabricguard-preflight`` (:func:`preflight_role`) for a person who may not read the whole cluster
(docs/install.md, "Who may run preflight").
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from fabricguard import names, objects
from fabricguard.admission import render as admission_render
from fabricguard.admission import runtime
from fabricguard.exitcodes import EXIT_DEGRADED, EXIT_FAILED, EXIT_PASS
from fabricguard.kube import Kube, KubeError
from fabricguard.placement import install
from fabricguard.profile.cluster import tolerates
from fabricguard.profile.model import PlatformProfile, UnknownPoolError
from fabricguard.rbac import Grant, Permissions, grants, rbac_rules

MIN_MINOR = 30
PSA_ENFORCE = "pod-security.kubernetes.io/enforce"
# (area, apiVersion, plural, needed by, severity when absent)
APIS: tuple[tuple[str, str, str, str, str], ...] = (
    ("Kueue", names.KUEUE_API, "clusterqueues", "queues, the fabric-validated check", "fail"),
    ("JobSet", names.JOBSET_API, "jobsets", "the canaries (JobSets)", "fail"),
    ("Kubeflow Trainer", names.TRAINJOB_API, "trainjobs", "TrainJob workloads (optional)", "warn"),
    ("cert-manager", "cert-manager.io/v1", "certificates", "the webhook's serving certificate", "fail"),
    ("Node Readiness Controller", names.NRR_API, "nodereadinessrules",
     "the readiness taints (else render the agent with --manage-taints)", "warn"),
)
MONITORING_APIS = (("monitoring.coreos.com/v1", "servicemonitors", "Prometheus Operator"),
                   ("monitoring.googleapis.com/v1", "podmonitorings", "GKE Managed Prometheus"))
PREFLIGHT_ROLE = "fabricguard-preflight"

# What preflight's code calls, and nothing else (all reads; GET /version needs no grant). Every row is cluster
# scope: the namespaces it reads are the profile's, the opted-in ones and the fabric DaemonSets', not one of ours.
PREFLIGHT_GRANTS: frozenset[Grant] = frozenset([
    # kube.served: a list of one item of each API the components need, and of the monitoring APIs.
    *(g for _a, api, plural, _w, _s in APIS for g in grants(api, plural, ["list"])),
    *(g for api, plural, _n in MONITORING_APIS for g in grants(api, plural, ["list"])),
    # the fabric DaemonSets, by name in their own namespaces.
    *grants(names.APPS_API, "daemonsets", ["get"]),
    # the Lustre claims and the volumes they are bound to.
    *grants("v1", "persistentvolumeclaims", ["get"]),
    *grants("v1", "persistentvolumes", ["get"]),
    # Pod Security labels (get by name) and the namespaces opted in to the webhook (list by label).
    *grants("v1", "namespaces", ["get", "list"]),
    # the LocalQueue the webhook labels each opted-in namespace's workloads with.
    *grants(names.KUEUE_API, "localqueues", ["get"]),
    # GKE: the critical-pod ResourceQuota in fabricguard's namespace.
    *grants("v1", "resourcequotas", ["list"]),
    # Kueue's live Configuration (its manager ConfigMap), read for the fields that would refuse our workloads.
    *grants("v1", "configmaps", ["get"]),
    # DRA pools: the API served and each DeviceClass the profile names.
    *grants(names.DRA_API, "deviceclasses", ["get", "list"]),
    # each pool's nodes: do they advertise the resource names the profile makes pods request?
    *grants("v1", "nodes", ["list"]),
    # observe mode: the Workloads enforce would have held in the last day (their fabric-validated entries).
    *grants(names.KUEUE_API, "workloads", ["list"]),
])
KUEUE_CONFIGMAPS = (("kueue-system", "kueue-manager-config"),)
# resource.k8s.io/v1 (the claim form) is served from 1.34; KEP-5004's extended-resource form is alpha there.
DRA_MIN_MINOR = 34


def preflight_permissions(namespace: str = "") -> Permissions:
    return Permissions(PREFLIGHT_GRANTS, namespace, "preflight")


def preflight_role() -> dict[str, Any]:
    """The optional ClusterRole that lets a person run preflight (bind it to them), from :data:`PREFLIGHT_GRANTS`."""
    return {"apiVersion": names.RBAC_API, "kind": "ClusterRole",
            "metadata": {"name": PREFLIGHT_ROLE, "labels": {names.LABEL_APP_PART_OF: "fabricguard",
                                                           names.LABEL_APP_COMPONENT: "preflight"}},
            "rules": rbac_rules(PREFLIGHT_GRANTS, "cluster")}


@dataclass
class Row:
    area: str
    target: str
    status: str  # pass | warn | fail
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def exit_code(rows: list[Row]) -> int:
    if any(r.status == "fail" for r in rows):
        return EXIT_FAILED
    if any(r.status == "warn" for r in rows):
        return EXIT_DEGRADED
    return EXIT_PASS


def _minor(version: dict[str, Any]) -> int | None:
    m = re.match(r"(\d+)", str(version.get("minor", "")))
    if m:
        return int(m.group(1))
    m = re.match(r"v?1\.(\d+)", str(version.get("gitVersion", "")))
    return int(m.group(1)) if m else None


def pod_security_row(namespace: str, labels: dict[str, str], needs: str, why: str) -> Row:
    """``needs``: the lowest level that admits what runs there (privileged or baseline)."""
    level = labels.get(PSA_ENFORCE)
    order = {"privileged": 0, "baseline": 1, "restricted": 2}
    if level is None:
        return Row("Pod Security", namespace, "warn", f"no {PSA_ENFORCE} label: the cluster's default level "
                   f"applies; it must be {needs} ({why})",
                   f"`kubectl label namespace {namespace} {PSA_ENFORCE}={needs}`")
    if order.get(level, 2) > order[needs]:
        return Row("Pod Security", namespace, "fail", f"enforces {level}, which refuses {why}: every mutated pod "
                   "is refused, visible only in the Job's events",
                   f"`kubectl label --overwrite namespace {namespace} {PSA_ENFORCE}={needs}`")
    return Row("Pod Security", namespace, "pass", f"enforces {level}")


def injected_needs(profile: PlatformProfile) -> tuple[str, str]:
    """The Pod Security level training pods need after injection, and why."""
    fabric = [p for p in profile.spec.pools if p.fabric.has_fabric]
    if any(not runtime.fabric_userspace(p).empty for p in fabric):
        return "privileged", "the host mounts of the fabric's userspace (hostPath) and IPC_LOCK"
    if fabric:
        return "privileged", "the capability IPC_LOCK (not in baseline)"
    return "baseline", "nothing beyond baseline"


def team_namespaces(profile: PlatformProfile) -> list[str]:
    out: list[str] = []
    for p in profile.spec.pools:
        if p.queue is not None:
            out.extend(n for n in p.queue.namespaces if n not in out)
    return out


def queues_for(profile: PlatformProfile, namespace: str) -> list[str]:
    """The queue names the webhook labels workloads in ``namespace`` with: the default pool's (what a workload
    that names no pool gets) and those of the queues that list the namespace."""
    out: list[str] = []
    try:
        default = profile.pool()
    except UnknownPoolError:
        default = None
    if default is not None and default.queue is not None:
        out.append(default.queue.name)
    for p in profile.spec.pools:
        q = p.queue
        if q is not None and (not q.namespaces or namespace in q.namespaces) and q.name not in out:
            out.append(q.name)
    return out


async def _namespace(kube: Kube, name: str) -> dict[str, Any] | None:
    return await kube.get("v1", "namespaces", name)


async def check(kube: Kube, profile: PlatformProfile, namespace: str = "fabricguard-system") -> list[Row]:
    rows: list[Row] = []
    version = await kube.version()
    minor = _minor(version if isinstance(version, dict) else {})
    git = version.get("gitVersion", "?") if isinstance(version, dict) else "?"
    if minor is None:
        rows.append(Row("Kubernetes", "version", "warn", f"cannot read the minor version from {git}",
                        "check the server's version by hand: `kubectl version`"))
    elif minor < MIN_MINOR:
        rows.append(Row("Kubernetes", "version", "fail", f"{git}: matchConditions and ValidatingAdmissionPolicy v1 "
                        f"need 1.{MIN_MINOR}", f"upgrade the control plane to 1.{MIN_MINOR} or later"))
    else:
        rows.append(Row("Kubernetes", "version", "pass", git))

    for area, api, plural, why, severity in APIS:
        if area == "JobSet" and not any(profile.canary(p) for p in profile.spec.pools):
            severity = "warn"
        ok = await kube.served(api, plural)
        rows.append(Row("API", f"{area} {api}", "pass" if ok else severity,
                        f"served ({why})" if ok else f"{plural} not served: needed by {why}",
                        "" if ok else f"install {area} (docs/install.md, prerequisites)"))
    served = [name for api, plural, name in MONITORING_APIS if await kube.served(api, plural)]
    rows.append(Row("API", "monitoring", "pass" if served else "warn",
                    f"{', '.join(served)} served" if served else "neither Prometheus Operator nor GKE Managed "
                    "Prometheus is served: no alerts", "" if served else "render install --monitoring none, or "
                    "install one of them"))

    for d in profile.fabric_daemonsets():
        ds = await kube.get(names.APPS_API, "daemonsets", d.name, d.namespace)
        target = f"{d.namespace}/{d.name} ({d.role})"
        if ds is None:
            rows.append(Row("DaemonSet", target, "fail", "not found: fabric nodes never advertise what they need",
                            "install it, or correct the name in the profile; list what runs: `kubectl get ds -A`"))
            continue
        st = ds.get("status") or {}
        desired, ready = st.get("desiredNumberScheduled"), st.get("numberReady")
        if isinstance(desired, int) and desired > 0 and not ready:
            rows.append(Row("DaemonSet", target, "fail", f"no pod ready of {desired} scheduled: fabric nodes never "
                            "advertise what they need (a plugin crash-looping since it was created looks just so)",
                            f"kubectl -n {d.namespace} describe ds {d.name}; kubectl -n {d.namespace} logs "
                            f"ds/{d.name} --previous"))
            continue
        tols = ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get("tolerations") or []
        missing = [k for k in profile.taint_keys
                   if not tolerates(tols, {"key": k, "value": "pool", "effect": "NoSchedule"})]
        if missing:
            rows.append(Row("DaemonSet", target, "fail", f"does not tolerate {', '.join(missing)}: it would never "
                            "run on a new fabric node, which then never becomes ready",
                            "apply 70-admission-webhooks, then re-apply the DaemonSet (or add the tolerations)"))
        else:
            rows.append(Row("DaemonSet", target, "pass", "present, tolerates the readiness taints"))

    # Before the install (fabricguard's namespace absent) an object the install creates is not missing: its row
    # says which component creates it, and warns instead of failing.
    own = await _namespace(kube, namespace)
    rows += await _storage(kube, profile, namespace, installed=own is not None)
    nodes = await kube.list("v1", "nodes")  # once: the resource names and what enforce would have tainted
    rows += await _allocatable(kube, profile, nodes)
    rows += await _observed(kube, profile, nodes)
    rows += await _dra(kube, profile, minor)
    rows += await _kueue_configuration(kube, profile, namespace)

    needs, why = injected_needs(profile)
    if own is None:
        rows.append(Row("Namespace", namespace, "warn", "does not exist yet (00-namespace creates it)",
                        "`fabricguard render namespace | kubectl apply -f -`"))
    else:
        rows.append(pod_security_row(namespace, objects.labels_of(own), "privileged",
                                     "the agent's read-only hostPath mounts"))
    for ns in team_namespaces(profile):
        obj = await _namespace(kube, ns)
        if obj is None:
            rows.append(Row("Namespace", ns, "fail", "a queue of the profile names it but it does not exist",
                            f"`kubectl create namespace {ns}`"))
            continue
        rows.append(pod_security_row(ns, objects.labels_of(obj), needs, why))

    opted = [o for o in await kube.list("v1", "namespaces", label_selector=f"{admission_render.ENABLED_LABEL}=true")
             # re-checked here; and the webhook never touches kube-system or its own namespace
             if objects.labels_of(o).get(admission_render.ENABLED_LABEL) == "true"
             and (o.get("metadata") or {}).get("name") not in ("kube-system", namespace)]
    teams = team_namespaces(profile)
    for obj in opted:
        ns = objects.name_of(obj)
        if ns not in teams:  # opted in, so injected, but no queue names it: its level matters just the same
            rows.append(pod_security_row(ns, objects.labels_of(obj), needs, why))
        for q in queues_for(profile, ns):
            lq = await kube.get(names.KUEUE_API, "localqueues", q, ns)
            if lq is None and own is None and ns in _queue_namespaces(profile, q):
                rows.append(Row("LocalQueue", f"{ns}/{q}", "warn", "not there yet: created by the install "
                                "(60-kueue)", "apply the install, then run preflight again"))
            elif lq is None:
                rows.append(Row("LocalQueue", f"{ns}/{q}", "fail", "the webhook labels workloads here with this "
                                "queue, which does not exist: they are never admitted",
                                f"add {ns} to the queue's namespaces in the profile and apply 60-kueue"))
            else:
                target_cq = (lq.get("spec") or {}).get("clusterQueue")
                rows.append(Row("LocalQueue", f"{ns}/{q}", "pass", f"points at {target_cq}"))

    if any(p.fabric.spec.platform == "gke" for p in profile.spec.pools):
        quotas = await kube.list("v1", "resourcequotas", namespace)
        covered = {v for q in quotas for e in ((q.get("spec") or {}).get("scopeSelector") or {}).get(
            "matchExpressions", []) if e.get("scopeName") == "PriorityClass" for v in e.get("values", [])}
        lacking = [c for c in install.CRITICAL_CLASSES if c not in covered]
        rows.append(Row("GKE", f"{namespace} critical-priority quota", "fail" if lacking else "pass",
                        f"no ResourceQuota scoped to {', '.join(lacking)}: GKE refuses the agent's and the webhook's "
                        "pods outside kube-system" if lacking else "ResourceQuota scoped to both classes",
                        "apply 00-namespace" if lacking else ""))
    return rows


def wanted_resources(profile: PlatformProfile, index: int) -> dict[str, tuple[str, float]]:
    """Resource name -> (the profile field that names it, what one node must offer) for pool ``index``: what its
    pods request and the agent's ``fabric.allocatable`` check reads from ``status.allocatable``."""
    p = profile.spec.pools[index]
    d = p.fabric.dra
    out: dict[str, tuple[str, float]] = {}
    if d is None or not d.alignWithGpus:
        out[p.gpuResource] = (f"spec.pools[{index}].gpuResource", float(p.gpusPerNode))
    if d is None:
        for r, n in p.fabric.resources.items():
            out[r] = (f"spec.pools[{index}].fabric.resources[{r!r}]", float(n))
    return out


def allocatable_rows(profile: PlatformProfile, nodes: list[dict[str, Any]],
                     dra_backed: dict[str, str] | None = None) -> list[Row]:
    """Every resource name each pool requests against its nodes' ``status.allocatable`` (pure).

    ``dra_backed``: extended resource name -> the DeviceClass whose ``extendedResourceName`` it is (KEP-5004: the
    scheduler satisfies it from ResourceSlices and it is never in allocatable). A name no node of the pool offers
    is a failed row naming the profile field (and the closest names the nodes do offer); some nodes lacking it is
    a warning when within the pool's blast radius, else a failure (the breaker would open on the first rollout).
    A pool with no node yet (scale from zero) cannot be checked: a warning that says so.
    """
    import difflib

    from fabricguard.breaker import Budget
    from fabricguard.quantity import amount_or_zero

    dra_backed = dra_backed or {}
    rows: list[Row] = []
    for i, p in enumerate(profile.spec.pools):
        mine = [n for n in nodes if p.matches(n)]
        wanted = wanted_resources(profile, i)
        if not wanted:
            continue
        if not mine:
            rows.append(Row("Allocatable", f"pool {p.name}", "warn", f"no node matches spec.pools[{i}].nodeSelector "
                            f"yet: {', '.join(wanted)} cannot be checked against a node (a pool at zero nodes, "
                            "or a selector that matches nothing)",
                            f"run preflight again once the pool has a node: `kubectl get nodes -l "
                            f"{','.join(f'{k}={v}' for k, v in p.nodeSelector.items())}`"))
            continue
        budget = Budget(p.blastRadius.fraction, p.blastRadius.minimum, p.blastRadius.window_s)
        allowed = budget.allowed(len(mine))
        for res, (field, want) in wanted.items():
            target = f"pool {p.name} {res}"
            lacking = [objects.name_of(n) for n in mine
                       if amount_or_zero(((n.get("status") or {}).get("allocatable") or {}).get(res)) < want]
            if res in dra_backed and len(lacking) == len(mine):
                rows.append(Row("Allocatable", target, "pass", f"offered through DRA: DeviceClass "
                                f"{dra_backed[res]} has extendedResourceName {res} (never in allocatable)"))
                continue
            if not lacking:
                rows.append(Row("Allocatable", target, "pass", f"advertised by all {len(mine)} node(s) "
                                f"(pods request {want:g})"))
                continue
            if len(lacking) == len(mine):
                offered = sorted({k for n in mine for k in ((n.get("status") or {}).get("allocatable") or {})})
                close = difflib.get_close_matches(res, offered, n=2, cutoff=0.75)
                hint = f"; the nodes offer {' or '.join(close)}" if close else ""
                rows.append(Row("Allocatable", target, "fail", f"{field}: no node of the pool ({len(mine)}) "
                                f"advertises {want:g} {res}{hint}: every agent of the pool would report "
                                "FabricReady=False at once", f"correct {field} in the profile, or install the device "
                                f"plugin that advertises it; see what nodes offer: `kubectl get node "
                                f"{objects.name_of(mine[0])} -o jsonpath='{{.status.allocatable}}'`"))
                continue
            named = ", ".join(lacking[:8]) + (f" and {len(lacking) - 8} more" if len(lacking) > 8 else "")
            over = len(lacking) > allowed
            rows.append(Row("Allocatable", target, "fail" if over else "warn",
                            f"{len(lacking)} of {len(mine)} node(s) do not advertise {want:g} {res} ({named})"
                            + (f": more than the pool's blast radius ({budget.describe(len(mine))}), so the "
                               "breaker would open as soon as their agents report" if over else
                               ": their agents will report FabricReady=False"),
                            f"kubectl describe node {lacking[0]} (is the device plugin running there?)"))
    return rows


def observed_rows(profile: PlatformProfile, nodes: list[dict[str, Any]], workloads: list[dict[str, Any]],
                  now: datetime) -> list[Row]:
    """What enforce would have held or tainted in the last day on each observing pool (doctor/rules/observe.py):
    a warning to read before moving the pool to enforce, or a pass that says it would have done nothing."""
    from fabricguard.doctor.rules.observe import MAX_LISTED, would_have

    found = would_have(profile, nodes, workloads, now)
    rows = []
    for p in profile.spec.pools:
        if p.name not in found and profile.mode_of(p, "observe") != "observe":
            continue
        w = found.get(p.name)
        if w is None:
            rows.append(Row("Observe", f"pool {p.name}", "pass", "enforce would have held and tainted nothing in "
                            "the last 24 h"))
            continue
        named = [n for n, _, _ in w.tainted[:MAX_LISTED // 2]] + [ref for ref, _ in w.held[:MAX_LISTED // 2]]
        rows.append(Row("Observe", f"pool {p.name}", "warn", f"{w.describe()}: {', '.join(named)}",
                        "before mode: enforce on this pool, read why: `fabricguard doctor` (rule "
                        "enforce-would-have-acted) lists each node and Workload"))
    return rows


async def _observed(kube: Kube, profile: PlatformProfile, nodes: list[dict[str, Any]]) -> list[Row]:
    workloads = (await kube.list(names.KUEUE_API, "workloads")
                 if await kube.served(names.KUEUE_API, "workloads") else [])
    return observed_rows(profile, nodes, workloads, datetime.now(UTC))


async def _allocatable(kube: Kube, profile: PlatformProfile, nodes: list[dict[str, Any]]) -> list[Row]:
    """The pools' resource names against the nodes, DeviceClasses read for KEP-5004."""
    backed: dict[str, str] = {}
    if await kube.served(names.DRA_API, "deviceclasses"):
        for dc in await kube.list(names.DRA_API, "deviceclasses"):
            ext = (dc.get("spec") or {}).get("extendedResourceName")
            if isinstance(ext, str) and ext:
                backed[ext] = objects.name_of(dc)
    return allocatable_rows(profile, nodes, backed)


async def _dra(kube: Kube, profile: PlatformProfile, minor: int | None) -> list[Row]:
    """Each DRA pool's prerequisites: the Kubernetes version of its form, resource.k8s.io/v1 served, its
    DeviceClass present (every field named, so a typo is caught here, not by a pool of tainted nodes)."""
    pools = [(i, p) for i, p in enumerate(profile.spec.pools) if p.fabric.dra is not None]
    if not pools:
        return []
    rows: list[Row] = []
    if minor is not None and minor < DRA_MIN_MINOR:
        listed = ", ".join(p.name for _, p in pools)
        rows.append(Row("DRA", "Kubernetes version", "fail", f"1.{minor}: the DRA pools "
                        f"({listed}) need resource.k8s.io/v1, served from 1.{DRA_MIN_MINOR}"
                        " (the extended-resource form also needs the DRAExtendedResource feature gate)",
                        f"upgrade the control plane to 1.{DRA_MIN_MINOR} or later"))
    if not await kube.served(names.DRA_API, "deviceclasses"):
        rows.append(Row("DRA", names.DRA_API, "fail", "deviceclasses not served: no DRA pool can get its devices",
                        "enable the DynamicResourceAllocation API (resource.k8s.io/v1) on the API server"))
        return rows
    for i, p in pools:
        d = p.fabric.dra
        assert d is not None
        field = f"spec.pools[{i}].fabric.dra.deviceClassName"
        if await kube.get(names.DRA_API, "deviceclasses", d.deviceClassName) is None:
            rows.append(Row("DRA", f"DeviceClass {d.deviceClassName}", "fail",
                            f"{field}: not found (pool {p.name}); its nodes would all fail the fabric check",
                            "install the DRA driver that creates it, or correct the name: `kubectl get deviceclasses`"))
        else:
            rows.append(Row("DRA", f"DeviceClass {d.deviceClassName}", "pass", f"present (pool {p.name})"))
    return rows


async def _kueue_configuration(kube: Kube, profile: PlatformProfile, namespace: str) -> list[Row]:
    """Kueue's live Configuration against what the profile's workloads and canaries need, naming the field."""
    from fabricguard.doctor.rules.dra import kueue_configurations
    from fabricguard.doctor.snapshot import Snapshot
    from fabricguard.placement.kueue import configuration_problems

    if not any(p.queue is not None or profile.canary(p) is not None for p in profile.spec.pools):
        return []
    for ns, name in KUEUE_CONFIGMAPS:
        cm = await kube.get("v1", "configmaps", name, ns)
        if cm is None:
            continue
        configs = kueue_configurations(Snapshot(objects=[{**cm, "kind": "ConfigMap"}]))
        if not configs:
            return [Row("Kueue config", f"{ns}/{name}", "warn", "holds no readable Kueue Configuration",
                        "merge the Configuration `fabricguard render kueue` prints, then restart Kueue")]
        own = await _namespace(kube, namespace)
        problems = configuration_problems(profile, configs[0][1], namespace,
                                          objects.labels_of(own) if own is not None else None)
        if not problems:
            return [Row("Kueue config", f"{ns}/{name}", "pass", "admits the profile's workloads and canaries")]
        return [Row("Kueue config", f"{ns}/{name} {field}", "fail", why,
                    "merge the Configuration `fabricguard render kueue` prints (kueue-configuration.yaml in the "
                    "install directory), then restart Kueue") for field, why in problems]
    return [Row("Kueue config", "kueue-system/kueue-manager-config", "warn", "not found: cannot tell whether "
                "Kueue admits the profile's workloads", "merge `fabricguard render kueue`'s Configuration into "
                "Kueue's manager ConfigMap")]


def _queue_namespaces(profile: PlatformProfile, queue: str) -> set[str]:
    """The namespaces the install gives a LocalQueue named ``queue`` (its queues' ``namespaces``)."""
    return {n for p in profile.spec.pools if p.queue is not None and p.queue.name == queue for n in p.queue.namespaces}


def csi_dir(csi: dict[str, Any]) -> str:
    """What a rooted volume's source names, for a message: its attributes' values."""
    return ", ".join(f"{k}={v}" for k, v in sorted((csi.get("volumeAttributes") or {}).items()))


async def _storage(kube: Kube, profile: PlatformProfile, namespace: str, installed: bool = True) -> list[Row]:
    lustre = profile.spec.storage.lustre
    if lustre is None:
        return [Row("Lustre", "spec.storage.lustre", "fail", "the profile has no Lustre: canaries cannot be judged",
                    "add spec.storage.lustre")]
    rows = []
    handle = lustre.volume.volumeHandle if lustre.volume else None
    for ns in [namespace, *[n for n in install.lustre_namespaces(profile) if n != namespace]]:
        target = f"{ns}/{lustre.claimName}"
        pvc = await kube.get("v1", "persistentvolumeclaims", lustre.claimName, ns)
        if pvc is None and not installed:
            part = "10-storage" if ns == namespace else "10-storage/team-namespaces"
            rows.append(Row("Lustre", target, "warn", f"not there yet: created by the install ({part}, a static "
                            "claim of the profile's file system)", "apply the install, then run preflight again"))
            continue
        if pvc is None:
            rows.append(Row("Lustre", target, "fail", "claim not found: pods that mount it stay Pending",
                            "apply 10-storage (fabricguard-system) or 10-storage/team-namespaces"))
            continue
        spec, status = pvc.get("spec") or {}, pvc.get("status") or {}
        pv_name = spec.get("volumeName")
        if not pv_name:
            cls = spec.get("storageClassName")
            rows.append(Row("Lustre", target, "fail", f"not bound to a volume (class {cls!r}): a dynamically "
                            "provisioned claim is another, empty file system", "delete it and apply the static "
                            "claim of 10-storage"))
            continue
        pv = await kube.get("v1", "persistentvolumes", pv_name)
        csi = ((pv or {}).get("spec") or {}).get("csi") or {}
        got = csi.get("volumeHandle")
        want = install.lustre_claim(profile, ns, root=ns == namespace)[0]["spec"]["csi"] if lustre.volume else None
        if pv is None:
            rows.append(Row("Lustre", target, "fail", f"names volume {pv_name}, which does not exist",
                            "apply the static PersistentVolume of 10-storage, then re-create the claim"))
        elif want is not None and got == handle and want["volumeHandle"] != handle:
            # An install before tenant isolation: the team's volume is the file system's root (docs/storage.md).
            rows.append(Row("Lustre", target, "fail", f"bound to {pv_name}, the file system's root: a pod here can "
                            "reach every namespace's job directories; the profile roots it at "
                            f"{csi_dir(want)!r}", f"when no pod of {ns} mounts it: `kubectl -n {ns} delete pvc "
                            f"{lustre.claimName} && kubectl delete pv {pv_name}`, then apply "
                            "10-storage/team-namespaces (the data stays: Retain)"))
        elif want is not None and (got != want["volumeHandle"] or csi_dir(want) not in ("", csi_dir(csi))):
            rows.append(Row("Lustre", target, "fail", f"bound to {got!r} ({csi_dir(csi)}), not the volume the "
                            f"profile gives {ns} ({want['volumeHandle']!r}): the logs would be written where "
                            "verdicts never look", f"re-create the claim bound to the profile's volume (10-storage); "
                            f"see it: `kubectl -n {ns} get pvc {lustre.claimName} -o wide`"))
        elif status.get("phase") != "Bound":
            rows.append(Row("Lustre", target, "warn", f"phase {status.get('phase')}: bindable to {pv_name}",
                            f"wait for it to bind, or read why not: `kubectl -n {ns} describe pvc {lustre.claimName}`"))
        else:
            rows.append(Row("Lustre", target, "pass", f"bound to {pv_name} ({got})"))
    return rows


async def run(profile: PlatformProfile, kubeconfig: str | None, context: str | None,
              namespace: str) -> list[Row]:
    kube = await Kube.connect(kubeconfig, context, permissions=preflight_permissions(namespace))
    try:
        return await check(kube, profile, namespace)
    finally:
        await kube.close()


__all__ = ["PREFLIGHT_GRANTS", "PREFLIGHT_ROLE", "KubeError", "Row", "check", "exit_code", "preflight_permissions",
           "preflight_role", "run"]
