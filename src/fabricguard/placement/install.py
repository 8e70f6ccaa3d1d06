"""The whole platform as one kustomize directory: ``fabricguard render install -p P --image ... -o DIR``.

Each component is a subdirectory with its own ``kustomization.yaml``, numbered in apply order, so that a person
can apply, wait, and remove one at a time; the top-level ``kustomization.yaml`` lists them (``sortOptions: fifo``
keeps that order in ``kubectl kustomize DIR``). Every object has one owner: the Namespace, the canaries'
PriorityClass and the AdmissionCheck each appear in exactly one component (kustomize refuses a duplicate, so the
build proves it).

The order is chosen so that no step leaves something fail-closed without its server:

- the webhook *configurations* (``failurePolicy: Fail``) are their own component, applied after the webhook's
  Deployment is rolled out and after the Kueue queues exist (so no workload is labelled for a queue that is not
  there), and removed first;
- the ClusterQueues carry the ``fabric-validated`` check; they are applied after the controller that answers it,
  and the controller is removed only after ``60-kueue-without-fabric-check`` has taken the check off them;
- the NodeReadinessRules (which taint nodes until the agent reports) come after the agent and go before it.

:data:`COMPONENT_STEPS` holds each component's documented removal; the generated ``README.md`` prints them as
``kubectl`` commands and the tests run the same steps against the emulator.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricguard import __version__, dnsnames, names, quantity, yamlout
from fabricguard.admission import claimmount as admission_claimmount
from fabricguard.admission import daemonsets as admission_daemonsets
from fabricguard.admission import podsecurity as admission_podsecurity
from fabricguard.admission import render as admission_render
from fabricguard.agent import render as agent_render
from fabricguard.controller import alerts, dashboard, exporters, viewer
from fabricguard.controller import manifests as controller_manifests
from fabricguard.netpolicy import MONITORING
from fabricguard.placement import kueue
from fabricguard.profile.model import MODES, PlatformProfile
from fabricguard.storage import jobdir, layout
from fabricguard.storage.layout import lustre_namespaces as lustre_namespaces  # re-exported

KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"
PART_OF = {names.LABEL_APP_PART_OF: "fabricguard"}
CRITICAL_CLASSES = ("system-node-critical", "system-cluster-critical")
CRITICAL_QUOTA = "fabricguard-critical-pods"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
WITHOUT_CHECK = "without-fabric-check"
TEAM_STORAGE = "team-namespaces"

NAMESPACE = "00-namespace"
STORAGE = "10-storage"
ADMISSION = "20-admission"
AGENT = "30-agent"
READINESS = "40-readiness"
CONTROLLER = "50-controller"
KUEUE = "60-kueue"
WEBHOOKS = "70-admission-webhooks"
MONITOR = "80-monitoring"


class InstallError(ValueError):
    """The profile or options cannot make a working install; the message names the field or option."""


@dataclass(frozen=True)
class Step:
    """One documented command: ``apply`` or ``delete`` a directory (relative to the install directory)."""

    verb: str  # "apply" | "delete"
    path: str

    def command(self, root: str = "DIR") -> str:
        if self.verb == "apply":
            return f"kubectl apply -k {root}/{self.path}"
        return f"kubectl delete -k {root}/{self.path} --ignore-not-found"


@dataclass
class Component:
    name: str
    title: str
    objects: list[dict[str, Any]]
    after_apply: list[str] = field(default_factory=list)  # kubectl wait/rollout commands
    remove: list[Step] = field(default_factory=list)
    overlays: dict[str, dict[str, Any]] = field(default_factory=dict)  # subdirectory -> kustomization
    overlay_objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    siblings: dict[str, dict[str, Any]] = field(default_factory=dict)  # directory beside it -> kustomization
    notes: list[str] = field(default_factory=list)  # README lines after its apply commands


@dataclass(frozen=True)
class Options:
    image: str
    agent_image: str
    canary_image: str
    namespace: str = "fabricguard-system"
    monitoring: str = "prometheus-operator"
    release: str | None = None
    apiserver_cidrs: tuple[str, ...] = ()
    manage_taints: bool = False
    nvml_access: str = "auto"
    dcgm_platform: str = "gpu-operator"  # exporters.DCGM_PLATFORMS: where DCGM exporter runs
    webhook_port: int = admission_render.PORT
    mode: str = "observe"  # a new install observes: nothing denied, held or tainted (a pool's mode field wins)
    # fabricguard's own pods (placement.own_pods): where they run, what they may pull, what they get.
    runtime_class: str | None = None  # the node agents' RuntimeClass (the NVIDIA runtime where it is not default)
    dry_run_rules: bool = False  # every NodeReadinessRule dryRun, whatever the pools' modes
    image_pull_secrets: tuple[str, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()  # the controller's, the webhook's and the sweep's pods
    tolerations: tuple[tuple[str, str | None, str | None], ...] = ()  # (key, value, effect) for those pods
    resources: tuple[tuple[str, str, str, str], ...] = ()  # (component, requests|limits, resource, quantity)
    cluster_size: tuple[int, int, int] | None = None  # (nodes, pods, running jobs): the controller's memory


# The workloads of ``render install`` by component name (``--resources COMPONENT:...``); the agent DaemonSets
# follow their pools' nodeSelector and tolerations, never ``--node-selector``/``--toleration``.
OWN_COMPONENTS = {"controller": controller_manifests.NAME, "webhook": admission_render.NAME,
                  "agent": agent_render.NAME, "sweep": agent_render.SWEEPER}
POD_KINDS = ("Deployment", "DaemonSet", "CronJob", "Job")
NAMESPACE_DIRS_JOB = "fabricguard-lustre-dirs"


EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
RESOURCE_PARTS = ("requests", "limits")


def parse_node_selector(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (``--node-selector``), or InstallError naming what is wrong."""
    key, sep, value = text.partition("=")
    if not sep or not _label_key(key) or not dnsnames.is_label_value(value):
        raise InstallError(f"--node-selector {text!r}: not KEY=VALUE with a label key and value "
                           "(e.g. --node-selector cloud.google.com/gke-nodepool=system)")
    return key, value


def parse_toleration(text: str) -> tuple[str, str | None, str | None]:
    """``KEY[=VALUE][:EFFECT]`` (``--toleration``, as kubectl taint writes a taint)."""
    body, _, effect = text.partition(":")
    key, sep, value = body.partition("=")
    if not _label_key(key) or (sep and not dnsnames.is_label_value(value)) or (effect and effect not in EFFECTS):
        raise InstallError(f"--toleration {text!r}: not KEY[=VALUE][:EFFECT] with EFFECT one of {', '.join(EFFECTS)} "
                           "(e.g. --toleration components.gke.io/gke-managed-components=true:NoSchedule)")
    return key, value if sep else None, effect or None


def parse_resources(text: str) -> tuple[str, str, str, str]:
    """``COMPONENT:requests|limits.RESOURCE=QUANTITY`` (``--resources``)."""
    comp, _, rest = text.partition(":")
    path, _, qty = rest.partition("=")
    part, _, res = path.partition(".")
    example = "e.g. --resources controller:limits.memory=4Gi"
    if comp not in OWN_COMPONENTS:
        raise InstallError(f"--resources {text!r}: component {comp!r} is not one of {', '.join(OWN_COMPONENTS)} "
                           f"({example})")
    if part not in RESOURCE_PARTS or not res:
        raise InstallError(f"--resources {text!r}: after the component, requests.RESOURCE or limits.RESOURCE "
                           f"({example})")
    try:
        if quantity.parse(qty).amount <= 0:
            raise quantity.QuantityError(qty)
    except quantity.QuantityError:
        raise InstallError(f"--resources {text!r}: {qty!r} is not a positive Kubernetes quantity ({example})") from None
    return comp, part, res, qty


def parse_cluster_size(text: str) -> tuple[int, int, int]:
    """``NODES:PODS:JOBS`` (``--cluster-size``): the cluster the controller's memory is sized for."""
    parts = text.split(":")
    if len(parts) != 3 or not all(p.isdigit() and len(p) <= 9 for p in parts) or not int(parts[0]):
        raise InstallError(f"--cluster-size {text!r}: not NODES:PODS:JOBS, whole numbers with at least one node "
                           "(e.g. --cluster-size 20000:200000:50000 for 20,000 nodes, 200,000 pods, 50,000 running "
                           "jobs)")
    nodes, pods, jobs = (int(p) for p in parts)
    return nodes, pods, jobs


_KEY_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def _label_key(key: str) -> bool:
    """A label (or taint) key: an optional DNS subdomain prefix and ``/``, then a name of at most 63 characters."""
    prefix, slash, name = key.rpartition("/")
    return bool(_KEY_NAME.fullmatch(name)) and (not slash or dnsnames.is_subdomain(prefix))


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    pod = ((spec.get("template") or {}).get("spec"))
    return pod if isinstance(pod, dict) else None


def _component_of(obj: dict[str, Any]) -> str | None:
    name = str((obj.get("metadata") or {}).get("name", ""))
    if obj.get("kind") == "Job" and name.startswith(NAMESPACE_DIRS_JOB + "-"):
        return "storage"  # placed like the controller, which mounts the same root claim
    for comp, base in OWN_COMPONENTS.items():
        if name == base or (comp == "agent" and name.startswith(base + "-") and obj.get("kind") == "DaemonSet"
                            and not name.startswith(agent_render.SWEEPER)):
            return comp
    return None


def own_pods(objs: list[dict[str, Any]], opts: Options) -> list[dict[str, Any]]:
    """Apply the install's knobs for fabricguard's own pods to rendered objects (in place; returned for chaining).

    Every pod template and ServiceAccount of ours gets ``imagePullSecrets`` (a private registry); the controller's,
    the webhook's and the sweep's pods get ``--node-selector``/``--toleration`` (system nodes, not GPU nodes);
    ``--cluster-size`` sizes the controller's memory (``controller.manifests.memory_for``); ``--resources``
    replaces one component's requests or limits (after it); the agent DaemonSets get ``runtimeClassName``.
    """
    secrets = [{"name": s} for s in opts.image_pull_secrets]
    for obj in objs:
        kind = obj.get("kind")
        if kind == "ServiceAccount" and secrets:
            obj["imagePullSecrets"] = list(secrets)
        if kind not in POD_KINDS:
            continue
        pod, comp = _pod_spec(obj), _component_of(obj)
        if pod is None or comp is None:
            continue
        if secrets:
            pod["imagePullSecrets"] = list(secrets)
        if comp != "agent":
            if opts.node_selector:
                pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **dict(opts.node_selector)}
            for key, value, effect in opts.tolerations:
                tol: dict[str, Any] = {"key": key, "operator": "Equal" if value is not None else "Exists"}
                if value is not None:
                    tol["value"] = value
                if effect is not None:
                    tol["effect"] = effect
                pod.setdefault("tolerations", []).append(tol)
        elif opts.runtime_class:
            pod["runtimeClassName"] = opts.runtime_class
        if comp == "controller" and opts.cluster_size is not None:
            # Sized for the cluster (docs/install.md "Memory"); an explicit --resources below still wins.
            for part, qty in controller_manifests.memory_for(*opts.cluster_size).items():
                for container in pod.get("containers") or []:
                    container.setdefault("resources", {}).setdefault(part, {})["memory"] = qty
        for c, part, res, qty in opts.resources:
            if c == comp:
                for container in pod.get("containers") or []:
                    container.setdefault("resources", {}).setdefault(part, {})[res] = qty
    return objs


def namespace_objects(namespace: str) -> list[dict[str, Any]]:
    """The Namespace (Pod Security labels for what runs there) and the quota GKE needs for critical pods.

    ``privileged``: the agent reads the host through hostPath mounts (not allowed by *baseline*) and, where the
    driver has no container toolkit (GKE), opens ``/dev/nvidia*`` privileged. The ResourceQuota scoped to the
    ``system-*-critical`` PriorityClasses is what GKE requires before it admits such pods outside kube-system
    (ecosystem-2026.md); elsewhere it only counts them.
    """
    psa = {f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("enforce", "audit", "warn")}
    psa["pod-security.kubernetes.io/enforce-version"] = "latest"
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": namespace, "labels": {**PART_OF, **psa},
                      "annotations": {"fabricguard.io/pod-security": (
                          "privileged: the node agent mounts host paths read-only and, on GKE, opens the GPU "
                          "devices for NVML; nothing else here needs it")}}},
        {"apiVersion": "v1", "kind": "ResourceQuota",
         "metadata": {"name": CRITICAL_QUOTA, "namespace": namespace, "labels": dict(PART_OF)},
         "spec": {"hard": {"pods": "100k"},
                  "scopeSelector": {"matchExpressions": [
                      {"scopeName": "PriorityClass", "operator": "In", "values": list(CRITICAL_CLASSES)}]}}},
    ]


def lustre_claim(profile: PlatformProfile, namespace: str, *, root: bool = False) -> list[dict[str, Any]]:
    """A static PersistentVolume of the profile's file system and the claim bound to it in ``namespace``.

    Static, never dynamic: a dynamically provisioned claim of the same name is another file system (on a managed
    service a new, billed one), where no rank's logs are. ``storageClassName: ""`` keeps the default class from
    provisioning one; ``claimRef`` binds the pair; ``Retain`` keeps the file system when the claim is deleted.

    A training namespace's volume is rooted at that namespace's directory where the driver can
    (``storage/layout.namespace_dir``: tenant isolation by the mount itself); ``root``: the file system's root
    (the install's own namespace, whose controller reads every namespace's job directories).
    """
    lustre = profile.spec.storage.lustre
    assert lustre is not None and lustre.volume is not None
    vol = lustre.volume
    directory = None if root else layout.namespace_dir(profile, namespace)
    pv_name = f"fabricguard-{lustre.claimName}-{namespace}"[:253]
    labels = {**PART_OF, "fabricguard.io/lustre-claim": lustre.claimName}
    annotations = {"fabricguard.io/claim-root": directory if directory is not None else "/"}
    pv: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "labels": labels, "annotations": annotations},
        "spec": {"capacity": {"storage": vol.capacity}, "accessModes": [vol.access_mode],
                 "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "", "volumeMode": "Filesystem",
                 "claimRef": {"namespace": namespace, "name": lustre.claimName},
                 "csi": vol.csi_source(directory)},
    }
    if vol.mountOptions:
        pv["spec"]["mountOptions"] = list(vol.mountOptions)
    pvc = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": lustre.claimName, "namespace": namespace, "labels": dict(PART_OF)},
        "spec": {"accessModes": [vol.access_mode], "storageClassName": "", "volumeName": pv_name,
                 "volumeMode": "Filesystem", "resources": {"requests": {"storage": vol.capacity}}},
    }
    return [pv, pvc]


def namespace_dirs_job(profile: PlatformProfile, namespace: str, image: str) -> dict[str, Any] | None:
    """The Job that makes each training namespace's directory before its volume, rooted there, is mounted (a
    Lustre subdirectory mount of a missing directory fails): ``fabricguard storage namespace-dirs`` on the root
    claim in the install's namespace, as root with only CHOWN/FOWNER. Its name carries a digest of the directories
    (a Job's template cannot change: a new namespace is a new Job). None where no namespace's volume is rooted so."""
    lustre = profile.spec.storage.lustre
    assert lustre is not None
    dirs = [d for n in layout.lustre_namespaces(profile) if n != namespace
            for d in [layout.namespace_dir(profile, n)] if d is not None]
    if not dirs:
        return None
    digest = hashlib.sha256("\n".join(dirs).encode()).hexdigest()[:10]
    mount = "/lustre"
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"{NAMESPACE_DIRS_JOB}-{digest}", "namespace": namespace, "labels": dict(PART_OF)},
        "spec": {"backoffLimit": 4, "activeDeadlineSeconds": 600, "template": {
            "metadata": {"labels": dict(PART_OF)},
            "spec": {"restartPolicy": "OnFailure", "containers": [{
                "name": "namespace-dirs", "image": image, "imagePullPolicy": "IfNotPresent",
                "command": ["fabricguard"],
                "args": ["storage", "namespace-dirs", "--root", mount, *dirs],
                "resources": {k: dict(v) for k, v in jobdir.RESOURCES.items()},
                "securityContext": jobdir.security_context(),
                "volumeMounts": [{"name": "lustre", "mountPath": mount}]}],
                "volumes": [{"name": "lustre", "persistentVolumeClaim": {"claimName": lustre.claimName}}]}}},
    }


def _monitoring(profile: PlatformProfile, opts: Options) -> list[dict[str, Any]]:
    ns = opts.namespace
    if opts.monitoring == "none":
        return []
    dash_cm = dashboard.configmap(profile, ns, gmp=opts.monitoring == "gmp")
    if opts.monitoring == "gmp":
        return [controller_manifests.pod_monitoring(ns), admission_render.pod_monitoring(ns),
                *exporters.gmp_monitors(ns), exporters.gmp_rules(alerts.rule_groups(profile), ns), dash_cm]
    rule = alerts.prometheus_rule(profile, ns)
    if opts.dcgm_platform not in exporters.DCGM_PLATFORMS:
        raise InstallError(f"--dcgm-platform {opts.dcgm_platform!r}: use one of {', '.join(exporters.DCGM_PLATFORMS)}")
    preset = exporters.DCGM_PLATFORMS[opts.dcgm_platform]
    dcgm = ([m for m in exporters.monitors(preset, ns) if m["metadata"]["name"] == "fabricguard-dcgm-exporter"]
            if preset is not None else [])
    objs = [controller_manifests.service_monitor(ns, opts.release), admission_render.pod_monitor(ns),
            *exporters.agent_monitors(ns), *dcgm, rule, dash_cm]
    if opts.release:
        for o in objs:
            if o["kind"] in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
                o["metadata"].setdefault("labels", {})["release"] = opts.release
    return objs


def components(profile: PlatformProfile, profile_text: str, opts: Options) -> list[Component]:
    """Every component of the install, in apply order."""
    if opts.mode not in MODES:
        raise InstallError(f"--mode {opts.mode!r}: use observe (report, act on nothing) or enforce")
    if opts.monitoring not in MONITORING:
        raise InstallError(f"--monitoring {opts.monitoring!r}: use one of {', '.join(MONITORING)}")
    lustre = profile.spec.storage.lustre
    if lustre is None:
        raise InstallError("spec.storage.lustre is not set: the agents, the controller and the canaries read the NCCL "
                           "logs the ranks write there; add it (claimName, mountPath, volume)")
    if lustre.volume is None:
        raise InstallError(
            f"spec.storage.lustre.volume is not set: the claim {lustre.claimName!r} in {opts.namespace} must be a "
            "static volume of the same file system the training namespaces mount (a dynamic claim would be a "
            "new, empty file system); set provider (gke-managed-lustre, fsx or csi), volumeHandle and "
            "volumeAttributes (docs/install.md)")
    ns = opts.namespace
    if ns in lustre_namespaces(profile) and layout.namespace_dir(profile, ns) is not None:
        raise InstallError(f"--namespace {ns} is also a training namespace of a Lustre pool (spec.pools[].queue."
                           "namespaces): the install's claim there is the file system's root, which the controller "
                           "reads; install fabricguard in a namespace of its own")
    out: list[Component] = []
    out.append(Component(NAMESPACE, "Namespace (Pod Security: privileged, for the agent) and GKE's critical-pod quota",
                         namespace_objects(ns), remove=[]))
    team = [o for n in lustre_namespaces(profile) for o in lustre_claim(profile, n) if n != ns]
    dirs_job = namespace_dirs_job(profile, ns, opts.agent_image)
    storage = Component(STORAGE, f"Lustre claim {lustre.claimName!r} in {ns}: a static PV of the training file system",
                        lustre_claim(profile, ns, root=True) + ([dirs_job] if dirs_job else []), after_apply=[
                            f"kubectl -n {ns} wait pvc/{lustre.claimName} --for=jsonpath='{{.status.phase}}'=Bound "
                            "--timeout=2m"] + ([
                            f"kubectl -n {ns} wait job/{dirs_job['metadata']['name']} --for=condition=Complete "
                            "--timeout=10m"] if dirs_job else []))
    if team:
        storage.overlays[TEAM_STORAGE] = {"resources": ["manifests.yaml"]}
        storage.overlay_objects[TEAM_STORAGE] = team
    if dirs_job:
        storage.notes += [
            "Each training namespace's volume is rooted at its own directory. From an install before 0.2.0 (volumes",
            "at the file system's root) a team claim cannot change in place: for each namespace NS, when no pod",
            f"mounts it, `kubectl -n NS delete pvc {lustre.claimName} && kubectl delete pv "
            f"fabricguard-{lustre.claimName}-NS`,",
            f"then apply {STORAGE}/{TEAM_STORAGE} (the data stays; `fabricguard preflight` names each one)."]
    out.append(storage)

    ds_hook = admission_daemonsets.webhook(profile, ns, admission_render.NAME)
    webhook = admission_render.manifests(profile_text, opts.image, ns, list(opts.apiserver_cidrs),
                                         [ds_hook] if ds_hook else None,
                                         claim_templates=any(p.claim_template_name for p in profile.spec.pools),
                                         mode=opts.mode, port=opts.webhook_port, monitoring=opts.monitoring,
                                         job_dir_image=opts.agent_image)
    out.append(Component(ADMISSION, "Admission webhook server (Deployment, Service, cert-manager CA chain), "
                         "compensating Pod Security policy for opted-in namespaces, the Lustre claim's "
                         "job-directory-only policy",
                         [o for o in webhook if o["kind"] not in WEBHOOK_KINDS]
                         + admission_podsecurity.policy(profile, opts.mode)
                         + admission_claimmount.policy(profile, ns, job_dir_image=opts.agent_image),
                         after_apply=[f"kubectl -n {ns} rollout status deploy/{admission_render.NAME} --timeout=5m"],
                         remove=[Step("delete", WEBHOOKS), Step("delete", ADMISSION)]))
    rules = agent_render.readiness_rules(profile, mode=opts.mode, dry_run=opts.dry_run_rules)
    # With --manage-taints the agent keeps the taints itself: no rules, no NRC; likewise when every pool's bootstrap
    # taint is the autoscaler's startup taint (NRC cannot manage that key: readiness_rules renders none).
    nrc = not opts.manage_taints and bool(rules)
    out.append(Component(AGENT, "Node agent DaemonSets (FabricReady), its RBAC, own-node and taint-slot policies, "
                         "staleness sweep",
                         agent_render.agent_manifests(profile, profile_text, opts.agent_image, ns,
                                                      manage_taints=opts.manage_taints,
                                                      nvml_access=opts.nvml_access, mode=opts.mode,
                                                      monitoring=opts.monitoring),
                         remove=([Step("delete", READINESS)] if nrc else []) + [Step("delete", AGENT)]))
    if nrc:
        out.append(Component(READINESS, "NodeReadinessRules: fabric-unverified (bootstrap) and fabric-degraded "
                             "taints", rules, remove=[Step("delete", READINESS)]))
    ctrl = controller_manifests.manifests(profile, profile_text, opts.image, ns, opts.canary_image, opts.mode,
                                          monitoring=opts.monitoring)
    kueue_objs = [o for o in kueue.objects(profile) if o["kind"] != "AdmissionCheck"]
    checked = [o for o in kueue_objs if o["kind"] == "ClusterQueue" and "admissionChecksStrategy" in o["spec"]]
    controller_remove = ([Step("apply", f"{KUEUE}-{WITHOUT_CHECK}")] if checked else []) + [Step("delete", CONTROLLER)]
    out.append(Component(CONTROLLER, "Controller: canaries, the Kueue check fabric-validated, verdicts, metrics; "
                         f"the read-only {viewer.VIEWER} role of kubectl fabricguard",
                         ctrl + viewer.viewer_roles(ns), after_apply=[
                             f"kubectl -n {ns} rollout status deploy/{controller_manifests.NAME} --timeout=5m"],
                         remove=controller_remove, notes=[
                             f"Who may run `kubectl fabricguard why|pools`: bind ClusterRole and Role {viewer.VIEWER} "
                             "(exactly the plugin's reads; not aggregated to `view`: docs/install.md):",
                             "```", *viewer.bind_commands(ns), "```"]))
    if kueue_objs:
        comp = Component(KUEUE, "Kueue: Topologies, ResourceFlavors, ClusterQueues (with the check), LocalQueues",
                         kueue_objs, remove=[Step("delete", WEBHOOKS), Step("delete", KUEUE)])
        if checked:
            # A sibling directory (kustomize refuses a base that contains its overlay).
            comp.siblings[f"{KUEUE}-{WITHOUT_CHECK}"] = {
                "resources": [f"../{KUEUE}"],
                "patches": [{"target": {"kind": "ClusterQueue", "name": cq["metadata"]["name"]},
                             "patch": json.dumps([{"op": "remove", "path": "/spec/admissionChecksStrategy"}])}
                            for cq in checked],
            }
        out.append(comp)
    webhooks = [o for o in webhook if o["kind"] in WEBHOOK_KINDS]
    out.append(Component(WEBHOOKS, "Webhook configurations (failurePolicy Fail): applied last, removed first",
                         webhooks, remove=[Step("delete", WEBHOOKS)]))
    mon = _monitoring(profile, opts)
    if mon:
        out.append(Component(MONITOR, f"Monitoring ({opts.monitoring}): monitors, alert rules, Grafana dashboard",
                             mon, remove=[Step("delete", MONITOR)]))
    if opts.image_pull_secrets:
        # The canaries and pair tests run as the namespace's default ServiceAccount: its pull secrets reach them.
        out[0].objects.append({"apiVersion": "v1", "kind": "ServiceAccount",
                               "metadata": {"name": "default", "namespace": ns, "labels": dict(PART_OF)}})
    for c in out:
        if c.name in (NAMESPACE, STORAGE):
            c.remove = []  # only with the whole install
        own_pods(c.objects, opts)
        for o in c.objects:
            stamp_version(o, component_label(c.name))
        for sub, objs in c.overlay_objects.items():
            for o in objs:
                stamp_version(o, component_label(c.name, sub))
    return out


def component_label(component: str, overlay: str | None = None) -> str:
    """The ``fabricguard.io/install-component`` value of a component's objects (an overlay's are its own: pruning
    the base must never remove what only the overlay applies)."""
    return f"{component}.{overlay}" if overlay else component


def prune_command(c: Component, root: str = "DIR") -> str:
    """``kubectl apply --prune`` for one component: it deletes the objects labelled with this component that the new
    render no longer has, of the kinds the component renders (``--prune-allowlist``: kubectl prunes only those)."""
    kinds = sorted({_allowlist_entry(o) for o in c.objects})
    allow = " ".join(f"--prune-allowlist={k}" for k in kinds)
    return (f"kubectl apply -k {root}/{c.name} --prune -l {names.LABEL_INSTALL_COMPONENT}={component_label(c.name)} "
            f"{allow}")


def _allowlist_entry(obj: dict[str, Any]) -> str:
    api = str(obj.get("apiVersion", ""))
    group, _, version = api.rpartition("/")
    return f"{group or 'core'}/{version}/{obj.get('kind', '')}"


def stamp_version(obj: dict[str, Any], component: str | None = None) -> dict[str, Any]:
    """The release that rendered an object (and the install component it belongs to), on the object's own labels
    (never a selector's: a Deployment's or a DaemonSet's selector is immutable, and a new release must roll its
    pods, not orphan them)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        labels = meta.setdefault("labels", {})
        labels[names.LABEL_APP_VERSION] = __version__
        if component:
            labels[names.LABEL_INSTALL_COMPONENT] = component
    return obj


def uninstall(comps: list[Component]) -> list[Step]:
    """The whole platform, removed without a Fail webhook or a ClusterQueue check left behind: reverse apply order
    with the webhook configurations first and the queues (and with them the check) before the controller."""
    names = [c.name for c in comps]
    first = [n for n in (MONITOR, WEBHOOKS, KUEUE) if n in names]
    rest = [n for n in reversed(names) if n not in first]
    return [Step("delete", n) for n in first + rest]


def _dump(objs: list[dict[str, Any]]) -> str:
    return yamlout.dump_all(objs, sort_keys=False, default_flow_style=False, width=120)


def _kustomization(**fields: Any) -> str:
    return yamlout.dump({"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", **fields}, sort_keys=False)


OPTIONAL_PREFLIGHT = "optional/preflight-rbac"
KUEUE_CONFIGURATION = "kueue-configuration.yaml"
KUEUE_CONFIGURATION_HEAD = (
    "# The fields of Kueue's Configuration this profile needs (not a Kubernetes object: merge it into Kueue's\n"
    "# manager ConfigMap, kueue-system/kueue-manager-config, key controller_manager_config.yaml, then restart\n"
    "# Kueue). `fabricguard preflight` reads the live one and fails, naming the field, where it would make the\n"
    "# profile's workloads or canaries inadmissible.\n")


def readme(profile: PlatformProfile, comps: list[Component], optional: dict[str, list[dict[str, Any]]] | None = None,
           ) -> str:
    lines = [f"# fabricguard install of profile {profile.metadata.name}", "",
             "Generated by `fabricguard render install`; docs/install.md explains each step. Apply in this order,",
             "waiting where shown (`kubectl apply -k DIR` applies everything in this order, without the waits):", ""]
    for c in comps:
        lines.append(f"## {c.name}: {c.title}")
        lines.append("```")
        lines.append(Step("apply", c.name).command())
        lines.extend(c.after_apply)
        lines.append("```")
        lines.extend(c.notes)
        lines.append("Upgrade (a newer render of this directory; also deletes what it no longer has):")
        lines.append("```")
        lines.append(prune_command(c))
        lines.append("```")
        if c.remove:
            lines.append("Remove it alone:")
            lines.append("```")
            lines.extend(s.command() for s in c.remove)
            lines.append("```")
            others = [KUEUE if s.path.startswith(KUEUE) else s.path for s in c.remove if s.path != c.name]
            if others:
                lines.append(f"Put it back: apply {c.name} (and wait), then {', '.join(others)} again"
                             + (f" (`kubectl apply -k DIR/{KUEUE}` restores the check)" if c.name == CONTROLLER
                                else "") + ".")
        else:
            lines.append("Removed only with the whole install (everything else runs in it or mounts it).")
        if TEAM_STORAGE in c.overlays:
            lines.append(f"Team namespaces without their own claim yet: `kubectl apply -k DIR/{c.name}/{TEAM_STORAGE}`"
                         " (skip it where the claim exists: it must name the same file system).")
        lines.append("")
    if optional and OPTIONAL_PREFLIGHT in optional:
        lines.append(f"## {OPTIONAL_PREFLIGHT} (not part of the install): who may run `fabricguard preflight`")
        lines.append("A ClusterRole of exactly the reads preflight makes (docs/install.md); bind it to a person")
        lines.append("who may not read the whole cluster:")
        lines.append("```")
        lines.append(Step("apply", OPTIONAL_PREFLIGHT).command())
        lines.append("kubectl create clusterrolebinding fabricguard-preflight-<you> --clusterrole=fabricguard-preflight"
                     " --user=<you>")
        lines.append("```")
        lines.append("")
    lines.append(f"## Kueue's Configuration: `{KUEUE_CONFIGURATION}`")
    lines.append("Not applied by kustomize: merge it into Kueue's manager ConfigMap and restart Kueue; `fabricguard "
                 "preflight` names any field of the live one that would refuse the profile's workloads or canaries.")
    lines.append("")
    lines.append("## Uninstall")
    lines.append("```")
    lines.extend(s.command() for s in uninstall(comps))
    lines.append("```")
    return "\n".join(lines) + "\n"


def write(profile: PlatformProfile, comps: list[Component], out: Path,
          optional: dict[str, list[dict[str, Any]]] | None = None) -> list[Path]:
    """Write the kustomize tree under ``out``; returns the files written. ``optional``: directories (relative to
    ``out``) of objects that are not part of the install (the top-level kustomization leaves them out)."""
    written: list[Path] = []

    def put(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)

    for c in comps:
        d = out / c.name
        put(d / "manifests.yaml", _dump(c.objects))
        put(d / "kustomization.yaml", _kustomization(resources=["manifests.yaml"], sortOptions={"order": "fifo"}))
        for sub, kust in c.overlays.items():
            if sub in c.overlay_objects:
                put(d / sub / "manifests.yaml", _dump(c.overlay_objects[sub]))
            put(d / sub / "kustomization.yaml", _kustomization(**kust))
        for sib, kust in c.siblings.items():
            put(out / sib / "kustomization.yaml", _kustomization(**kust))
    put(out / "kustomization.yaml", _kustomization(resources=[c.name for c in comps], sortOptions={"order": "fifo"}))
    for sub, objs in (optional or {}).items():
        put(out / sub / "manifests.yaml", _dump(objs))
        put(out / sub / "kustomization.yaml", _kustomization(resources=["manifests.yaml"]))
    put(out / KUEUE_CONFIGURATION, KUEUE_CONFIGURATION_HEAD + yamlout.dump(kueue.configuration(profile),
                                                                           sort_keys=False))
    put(out / "README.md", readme(profile, comps, optional))
    return written
