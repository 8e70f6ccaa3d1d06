"""Manifests that install the controller: ``fabricguard render controller --profile P --image REF``.

Rendered: the FabricValidation CRD (cluster-scoped, status subresource, printer columns), the Kueue
AdmissionCheck ``fabric-validated``, the canaries' PriorityClass, a ServiceAccount with RBAC granting exactly
the verbs the controller uses, a ConfigMap with the profile, a Deployment of 2 replicas (Lease leader
election; non-root, read-only root filesystem, the Lustre claim mounted read-only to read NCCL logs), a
PodDisruptionBudget, a metrics Service, a NetworkPolicy (``:8080`` from the scrapers of ``--monitoring`` only) and
a ServiceMonitor. The ClusterQueue fragment that attaches the check
to the fabric pools' flavors is printed as a comment: a ClusterQueue is the platform team's object to edit.
"""

from __future__ import annotations

import hashlib
from typing import Any

from fabricguard import names, yamlout
from fabricguard import objects as o
from fabricguard.netpolicy import metrics_policy
from fabricguard.profile.model import PlatformProfile

NAME = names.CONTROLLER_COMPONENT
PROFILE_KEY = "profile.yaml"
METRICS_PORT = 8080
LUSTRE_ROOT = "/lustre"
PROFILE_CHECKSUM = names.ANN_PROFILE_CHECKSUM
CANARY_PRIORITY_CLASS = "fabricguard-canary"
# Below training's default 0 (no globalDefault class): a canary never outranks, and with preemptionPolicy Never
# never preempts, a training job; it waits for free capacity like the smallest job would.
CANARY_PRIORITY = -10


def image_problem(image: str) -> str | None:
    """Why ``image`` cannot run the controller or its canaries: unparseable, or ``:latest`` (which changes under a
    running install, so two replicas, or a canary and its controller, may run different code)."""
    from fabricguard.imageref import parse_reference, reference_problem

    problem = reference_problem(image)
    if problem:
        return problem
    ref = parse_reference(image)
    if ref.tag == "latest" and not ref.digest:
        return (f"{image!r} is :latest, which moves under a running install; name a release tag and, best, the "
                "digest of its multi-architecture index")
    return None


def profile_image_problems(profile: PlatformProfile) -> list[str]:
    """``image_problem`` of every pool's ``canary.image``, naming the field."""
    out = []
    for i, p in enumerate(profile.spec.pools):
        ref = p.canary.image if p.canary else None
        problem = image_problem(ref) if ref else None
        if problem:
            out.append(f"spec.pools[{i}].canary.image ({p.name}): {problem}")
    return out


def _labels() -> dict[str, str]:
    return dict(names.CONTROLLER_LABELS)


def crd() -> dict[str, Any]:
    from fabricguard.controller.validation import status_schema

    schema = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "required": ["pool"], "properties": {
                "pool": {"type": "string"}, "interval": {"type": "string"}}},
            "status": status_schema(),  # generated from the typed status the controller writes
        },
    }
    return {
        "apiVersion": names.CRD_API,
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{names.FV_PLURAL}.{names.GROUP}", "labels": _labels()},
        "spec": {
            "group": names.GROUP,
            "scope": "Cluster",
            "names": {"plural": names.FV_PLURAL, "singular": "fabricvalidation", "kind": names.FV_KIND,
                      "listKind": f"{names.FV_KIND}List", "shortNames": ["fv"], "categories": ["fabricguard"]},
            "versions": [{
                "name": names.VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Pool", "type": "string", "jsonPath": ".spec.pool"},
                    {"name": "Validated", "type": "string",
                     "jsonPath": ".status.conditions[?(@.type==\"Validated\")].status"},
                    {"name": "Last outcome", "type": "string", "jsonPath": ".status.lastOutcome"},
                    {"name": "Last success", "type": "date", "jsonPath": ".status.lastSuccess"},
                    {"name": "Running", "type": "string", "jsonPath": ".status.active.jobSet", "priority": 1},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    }


def admission_check() -> dict[str, Any]:
    return o.fabric_admission_check()


def clusterqueue_fragment(profile: PlatformProfile) -> dict[str, Any]:
    """``spec.admissionChecksStrategy`` for the ClusterQueues of the fabric pools: the check on their flavors."""
    flavors = [f for p in profile.spec.pools if profile.canary(p) is not None for f in profile.canary_flavors(p)]
    return {"admissionChecksStrategy": {"admissionChecks": [{"name": names.CHECK_NAME, "onFlavors": flavors}]}}


def rbac_rules() -> list[dict[str, Any]]:
    """The ClusterRole's rules: the cluster-scoped rows of the controller's permission table."""
    from fabricguard.controller.kube import CONTROLLER_GRANTS
    from fabricguard.rbac import rbac_rules as rules_of

    return rules_of(CONTROLLER_GRANTS, "cluster")


def watched_rules() -> list[dict[str, Any]]:
    """The Role's rules in each namespace whose ConfigMaps the controller reads (``kube.controller_watched``)."""
    from fabricguard.controller.kube import CONTROLLER_GRANTS
    from fabricguard.rbac import rbac_rules as rules_of

    return rules_of(CONTROLLER_GRANTS, "watched")


def namespace_rules() -> list[dict[str, Any]]:
    """The Role's rules in the controller's own namespace (its canaries and its Lease), from the same table."""
    from fabricguard.controller.kube import CONTROLLER_GRANTS
    from fabricguard.rbac import rbac_rules as rules_of

    return rules_of(CONTROLLER_GRANTS, "namespace")


def watched_roles(profile: PlatformProfile, namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """A Role and RoleBinding ``fabricguard-controller-configmaps`` in each namespace whose ConfigMaps the
    controller reads (drift's: kube-system and the device plugins'; its own): no ClusterRole grants ConfigMaps."""
    from fabricguard.controller.kube import controller_watched

    name = f"{NAME}-configmaps"
    out: list[dict[str, Any]] = []
    for ns in sorted(controller_watched(profile, namespace)):
        meta = {"name": name, "namespace": ns, "labels": labels}
        out += [{"apiVersion": names.RBAC_API, "kind": "Role", "metadata": meta, "rules": watched_rules()},
                {"apiVersion": names.RBAC_API, "kind": "RoleBinding", "metadata": meta,
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                 "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]}]
    return out


SCAVENGER_PRIORITY = -1000  # Crusoe's scavenger value: below the canaries and every workload


def scavenger_priority(profile: PlatformProfile, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The pair tests' PriorityClass and Kueue WorkloadPriorityClass (one per name the pools' proof blocks use):
    below everything, ``preemptionPolicy: Never``, so a pair test waits for idle nodes and never takes work's
    place; when work wants its nodes it is the one preempted (and that is not counted as a failure)."""
    out: list[dict[str, Any]] = []
    for pc in sorted({p.proof.priorityClassName for p in profile.spec.pools if p.proof is not None}):
        out.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": pc, "labels": labels}, "value": SCAVENGER_PRIORITY,
                    "globalDefault": False, "preemptionPolicy": "Never",
                    "description": "fabricguard pair tests: idle nodes only, never preempting anything"})
        out.append({"apiVersion": names.KUEUE_API, "kind": "WorkloadPriorityClass",
                    "metadata": {"name": pc, "labels": labels}, "value": SCAVENGER_PRIORITY,
                    "description": "fabricguard pair tests: the lowest Kueue priority (preempted first)"})
    return out


# The controller's memory by what it holds (bench/controller/bench_memory.py, objects as the API server stores them,
# trimmed by controller/trim.py; bench/README.md): a node and a pod that is not Succeeded in the watch cache, a
# running managed job's followers, and what incremental passes keep of each object between passes (its answers,
# bench_incremental.py --memory: 1.1-1.2 KB an object; a job is two objects, its JobSet and its Workload); the base
# is the process, the profile and one pass's working set.
MEMORY_BASE_MIB = 400
REQUEST_BASE_MIB = 256
KIB_PER_NODE = 26
KIB_PER_POD = 17
KIB_PER_JOB = 32
KEPT_BYTES_PER_OBJECT = 1200
DEFAULT_MEMORY = {"requests": "256Mi", "limits": "1Gi"}


def memory_for(nodes: int, pods: int, jobs: int) -> dict[str, str]:
    """The controller's memory request and limit for a cluster of this size (docs/install.md, "Memory").

    The limit holds the cache, what incremental passes keep, the followers and a pass; the request holds the cache
    (filled at start and after every relist) and what the passes keep. Neither goes below the rendered default
    (256Mi, 1Gi); both are rounded up to 64 MiB."""
    kept_kib = -(-KEPT_BYTES_PER_OBJECT * (nodes + pods + 2 * jobs) // 1024)
    cache_kib = KIB_PER_NODE * nodes + KIB_PER_POD * pods + kept_kib

    def mib(base: int, kib: int, floor: int) -> str:
        want = base + -(-kib // 1024)
        return f"{max(floor, -(-want // 64) * 64)}Mi"

    return {"requests": mib(REQUEST_BASE_MIB, cache_kib, 256),
            "limits": mib(MEMORY_BASE_MIB, cache_kib + KIB_PER_JOB * jobs, 1024)}


def manifests(profile: PlatformProfile, profile_text: str, image: str,
              namespace: str = "fabricguard-system", canary_image: str | None = None,
              mode: str = "enforce", monitoring: str = "prometheus-operator") -> list[dict[str, Any]]:
    labels = _labels()
    meta = {"name": NAME, "namespace": namespace, "labels": labels}
    selector = {names.LABEL_APP_NAME: NAME}
    lustre = profile.spec.storage.lustre
    args = ["controller", "--profile", f"/etc/fabricguard/{PROFILE_KEY}", "--namespace", namespace,
            "--metrics-port", str(METRICS_PORT), "--identity", "$(POD_NAME)", "--mode", mode]
    if canary_image:
        args += ["--canary-image", canary_image]
    # The ConfigMap's directory, not a subPath file: a subPath mount never sees an update. A profile change also
    # rolls the pods (the checksum annotation below), since the controller reads its profile once at start.
    mounts: list[dict[str, Any]] = [
        {"name": "profile", "mountPath": "/etc/fabricguard", "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "profile", "configMap": {"name": f"{NAME}-profile"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
    ]
    if lustre is not None:
        args += ["--lustre-root", LUSTRE_ROOT]
        mounts.append({"name": "lustre", "mountPath": LUSTRE_ROOT, "readOnly": True})
        volumes.append({"name": "lustre", "persistentVolumeClaim": {"claimName": lustre.claimName,
                                                                      "readOnly": True}})
    probe = {"httpGet": {"path": "/metrics", "port": "metrics"}}
    container: dict[str, Any] = {
        "name": "controller",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "readinessProbe": {**probe, "periodSeconds": 10},
        # /healthz turns 503 once passes keep failing: a controller that lists but never completes is restarted.
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 20,
                          "failureThreshold": 3, "timeoutSeconds": 5},
        "resources": {"requests": {"cpu": "200m", "memory": DEFAULT_MEMORY["requests"]},
                      "limits": {"cpu": "2", "memory": DEFAULT_MEMORY["limits"]}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts,
    }
    deployment = {
        "apiVersion": names.APPS_API, "kind": "Deployment", "metadata": meta,
        "spec": {
            "replicas": 2,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": dict(labels), "annotations": {
                    PROFILE_CHECKSUM: hashlib.sha256(profile_text.encode()).hexdigest()}},
                "spec": {
                    "serviceAccountName": NAME,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                        "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                    "nodeSelector": {names.LABEL_OS: "linux"},
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100, "podAffinityTerm": {"topologyKey": names.LABEL_HOSTNAME,
                                                           "labelSelector": {"matchLabels": selector}}}]}},
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }
    role_meta = {"name": NAME, "labels": labels}
    # No Namespace here: it has one owner, the install's namespace component (fabricguard render namespace).
    return [
        crd(),
        admission_check(),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": CANARY_PRIORITY_CLASS, "labels": labels}, "value": CANARY_PRIORITY,
         "globalDefault": False, "preemptionPolicy": "Never",
         "description": "fabricguard canaries: below training jobs (default 0), never preempting them"},
        *scavenger_priority(profile, labels),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": names.RBAC_API, "kind": "ClusterRole", "metadata": role_meta,
         "rules": rbac_rules()},
        {"apiVersion": names.RBAC_API, "kind": "ClusterRoleBinding", "metadata": role_meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]},
        {"apiVersion": names.RBAC_API, "kind": "Role", "metadata": meta,
         "rules": namespace_rules()},
        {"apiVersion": names.RBAC_API, "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]},
        *watched_roles(profile, namespace, labels),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**meta, "name": f"{NAME}-profile"},
         "data": {PROFILE_KEY: profile_text}},
        deployment,
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta,
         "spec": {"minAvailable": 1, "selector": {"matchLabels": selector}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"selector": selector, "ports": [{"name": "metrics", "port": METRICS_PORT,
                                                   "targetPort": "metrics", "protocol": "TCP"}]}},
        # :8080 from the scrapers only (the kubelet's probes come from the node, always allowed).
        metrics_policy(meta, selector, [METRICS_PORT], monitoring),
    ]


def service_monitor(namespace: str = "fabricguard-system", release: str | None = None) -> dict[str, Any]:
    """The controller's ServiceMonitor. ``honorLabels``: the controller exports series labelled with the *jobs'*
    ``job``/``namespace``/``pod``; without it Prometheus renames them ``exported_*`` and every per-job alert and
    the dashboard's job view collapse onto the controller. ``release``: kube-prometheus-stack selects monitors by
    its ``release: <name>`` label."""
    labels = _labels()
    if release:
        labels["release"] = release
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
            "spec": {"selector": {"matchLabels": {names.LABEL_APP_NAME: NAME}},
                     "namespaceSelector": {"matchNames": [namespace]},
                     "endpoints": [{"port": "metrics", "interval": "30s", "honorLabels": True}]}}


def pod_monitoring(namespace: str = "fabricguard-system") -> dict[str, Any]:
    """The GKE Managed Prometheus form of :func:`service_monitor` (``monitoring.googleapis.com/v1``)."""
    return {"apiVersion": "monitoring.googleapis.com/v1", "kind": "PodMonitoring",
            "metadata": {"name": NAME, "namespace": namespace, "labels": _labels()},
            "spec": {"selector": {"matchLabels": {names.LABEL_APP_NAME: NAME}},
                     "endpoints": [{"port": "metrics", "interval": "30s"}]}}


def to_yaml(objs: list[dict[str, Any]], profile: PlatformProfile | None = None) -> str:
    head = "# fabricguard controller: canaries, the Kueue check fabric-validated, job verdicts, metrics.\n"
    if profile is not None:
        frag = yamlout.dump({"spec": clusterqueue_fragment(profile)}, sort_keys=False).rstrip("\n")
        head += ("# Attach the check to the fabric pools' flavors in each ClusterQueue (kueue.x-k8s.io/v1beta2):\n"
                 + "".join(f"#   {line}\n" for line in frag.splitlines()))
    return head + yamlout.dump_all(objs, sort_keys=False, default_flow_style=False, width=120)
