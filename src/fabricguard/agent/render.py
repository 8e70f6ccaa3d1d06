"""Manifests of the readiness gate: ``render readiness`` (NodeReadinessRules) and ``render agent``.

``readiness_rules``: per pool, two rules of the Node Readiness Controller (``readiness.node.x-k8s.io/v1alpha1``)
on the ``FabricReady`` condition: a ``bootstrap-only`` rule with taint ``readiness.k8s.io/fabric-unverified``
(a new node stays closed until its first ``True``; a missing condition counts as Unknown) and a ``continuous``
rule with ``readiness.k8s.io/fabric-degraded``. Both ``NoSchedule``: never evict running jobs.

``agent_manifests``: the agent's ServiceAccount, ClusterRole and binding (read Nodes, patch ``nodes/status``;
patch ``nodes`` only with ``--manage-taints``, and then also a Role in its own namespace for its pool's taint
slots, ``agent/taint_slots.py``), the profile ConfigMap, one DaemonSet per pool, a NetworkPolicy
(``:9400`` from the scrapers of ``--monitoring`` only, ``fabricguard.netpolicy``), the staleness
sweep (a CronJob with its own account, see ``sweeper``), and a
ValidatingAdmissionPolicy with its binding that lets the agent's service account change only the Node its own
pod runs on (the node name the kubelet-bound token carries in ``request.userInfo.extra``), only its own
condition in ``status``, and only the ``readiness.k8s.io/fabric-*`` taints in ``spec``; neither the agent nor
the sweep may change the Node's metadata, through ``nodes`` or ``nodes/status`` (the API server keeps metadata
changes sent with a status write).

Least privilege, stated: no check needs host PID or host network, every capability is dropped, and only the
LNet health check's sidecar (``lnet``, on pools that mount Lustre: ``lnetctl`` needs CAP_SYS_ADMIN on
``/dev/lnet``; the agent reads what it writes, ``--lnet none`` leaves it out) and the
GPU health checks (NVML: ``gpu.count``, ``gpu.ecc``, ``gpu.memory``) may need ``privileged``, the latter only where
the driver is on the host without the NVIDIA container toolkit (GKE): there ``/dev/nvidia*`` is visible only to
GPU requests (training keeps every GPU) or privileged containers (``nvml_privileged``; the DaemonSet says why
in an annotation). Elsewhere NVML goes through the device nodes the toolkit injects for
``NVIDIA_VISIBLE_DEVICES=all`` (capability ``utility``). The host is read through read-only hostPath mounts
(``/sys``, ``/proc``, library directories), and Lustre through the pool's PVC mounted read-only where
workloads mount it (the agent's ``lustre.mount`` check reads its own mount table, so it sees what a pod sees).
"""

from __future__ import annotations

import hashlib
from typing import Any

from fabricguard import fabrics, names, yamlout
from fabricguard.agent.kube import SWEEPER_GRANTS, agent_grants
from fabricguard.agent.loop import HEARTBEAT_S
from fabricguard.agent.taint_slots import SLOT_PREFIX
from fabricguard.names import FABRIC_LINKS, TAINT_DEGRADED, TAINT_KEYS, TAINT_UNVERIFIED
from fabricguard.names import FABRIC_READY as CONDITION_TYPE
from fabricguard.netpolicy import metrics_policy
from fabricguard.profile import PlatformProfile, Pool
from fabricguard.rbac import rbac_rules

NRR_API = names.NRR_API
NAME = names.AGENT_NAME
POOL_LABEL = names.LABEL_POOL
METRICS_PORT = 9400
PROFILE_KEY = "profile.yaml"
PROFILE_CHECKSUM = names.ANN_PROFILE_CHECKSUM
HOST_ROOT = "/host"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
TAINT_PREFIX = names.FABRIC_TAINT_PREFIX
# Node status and spec fields besides conditions and taints that the agent must leave as they are: every field
# of Kubernetes 1.30, the oldest release the policy supports. A field newer than the API server would make the
# policy fail to compile there (and, failurePolicy Fail, refuse every agent write), so newer ones are left out.
STATUS_FIELDS = ("capacity", "allocatable", "addresses", "daemonEndpoints", "nodeInfo", "images",
                 "volumesInUse", "volumesAttached", "config", "runtimeHandlers", "phase")
SPEC_FIELDS = ("podCIDR", "podCIDRs", "providerID", "unschedulable", "configSource", "externalID")
META_FIELDS = ("labels", "annotations", "ownerReferences", "finalizers")
# Host directories the checks read (all read-only); extra ones per fabric for plugins outside /usr.
HOST_DIRS = ("/sys", "/proc", "/usr", "/lib", "/etc/ld.so.conf.d")
FABRIC_DIRS = {t: spec.host_dirs for t, spec in fabrics.SPECS.items() if spec.host_dirs}


def _labels(pool: str | None = None) -> dict[str, str]:
    out = {names.LABEL_APP_NAME: NAME, names.LABEL_APP_PART_OF: "fabricguard",
           names.LABEL_APP_COMPONENT: "node-agent"}
    if pool:
        out[POOL_LABEL] = pool
    return out


def rule_name(pool: str, taint_key: str) -> str:
    return f"fabricguard-{pool}-{taint_key.split('/', 1)[1]}"


def _conditions(pool: Pool, mode: str) -> list[dict[str, str]]:
    """The agent's FabricReady; for a new node of a pool with lifecycle proof also the controller's FabricProven
    (a pair test with a known-good node): local facts alone do not lift the bootstrap taint."""
    out = [{"type": CONDITION_TYPE, "requiredStatus": "True"}]
    if mode == "bootstrap-only" and pool.proof is not None and pool.proof.lifecycle:
        out.append({"type": names.FABRIC_PROVEN, "requiredStatus": "True"})
    return out


def readiness_rules(profile: PlatformProfile, *, dry_run: bool = False, mode: str = "enforce") -> list[dict[str, Any]]:
    """``dryRun`` on every rule with ``dry_run``, else on the rules of pools in observe mode (the pool's ``mode``
    field, else ``mode``, the install's): NRC then reports what it would taint and taints nothing."""
    out = []
    for pool in profile.spec.pools:
        if pool.startup_taint:
            continue  # NRC refuses a key outside readiness.k8s.io/ (NRC #279): that pool's agent keeps its taints
        observe = dry_run or profile.mode_of(pool, mode) == "observe"
        for enforcement, key in (("bootstrap-only", TAINT_UNVERIFIED), ("continuous", TAINT_DEGRADED)):
            out.append({
                "apiVersion": NRR_API,
                "kind": "NodeReadinessRule",
                "metadata": {"name": rule_name(pool.name, key), "labels": {**_labels(pool.name),
                                                                           names.LABEL_APP_COMPONENT: "readiness"}},
                "spec": {
                    "conditions": _conditions(pool, enforcement),
                    "taint": {"key": key, "value": pool.name, "effect": "NoSchedule"},
                    "enforcementMode": enforcement,
                    "nodeSelector": {"matchLabels": dict(pool.nodeSelector)},
                    "dryRun": observe,
                },
            })
    return out


def agent_tolerations(pool: Pool) -> list[dict[str, Any]]:
    """The pool's own tolerations plus the readiness taints: an agent that cannot land on a tainted node
    could never report the True that removes the taint (and its DaemonSet would just want fewer pods)."""
    tol = [t.to_k8s() for t in pool.tolerations]
    keys = dict.fromkeys([*TAINT_KEYS, pool.bootstrap_taint])
    return tol + [{"key": k, "operator": "Exists", "effect": "NoSchedule"} for k in keys]


def _host_dirs(pool: Pool) -> list[str]:
    return list(HOST_DIRS) + list(pool.fabric.spec.host_dirs)


def _volume_name(path: str) -> str:
    return "host" + path.replace("/", "-").replace(".", "-").lower()


# Platforms that install the NVIDIA driver on the host without the NVIDIA container toolkit: a pod sees the GPU
# device nodes only when it requests GPUs (which the agent must not: training keeps them) or runs privileged.
DRIVER_WITHOUT_TOOLKIT = {t: spec.driver_without_toolkit for t, spec in fabrics.SPECS.items()
                          if spec.driver_without_toolkit}
NVML_ACCESS = ("auto", "runtime", "privileged")


def nvml_privileged(pool: Pool, nvml_access: str) -> bool:
    """Whether the GPU health checks (NVML) need a privileged container on this pool.

    ``runtime``: the NVIDIA container toolkit injects the device nodes for ``NVIDIA_VISIBLE_DEVICES=all`` (GPU
    Operator clusters): no privilege. ``privileged``: the only way to open ``/dev/nvidia*`` without requesting
    a GPU where the driver is on the host and no toolkit runs (GKE). ``auto`` picks by the pool's platform.
    """
    if nvml_access not in NVML_ACCESS:
        raise ValueError(f"nvml access {nvml_access!r}: use one of {', '.join(NVML_ACCESS)}")
    if nvml_access == "auto":
        return pool.fabric.spec.driver_without_toolkit is not None
    return nvml_access == "privileged"


LNET_DIR = "/run/fabricguard/lnet"
LNET_MODES = ("sidecar", "none")
LNET_INTERVAL_S = 30
# The sidecar's loop: each LNet view through the host's own lnetctl (chroot into the host's root: its binary, its
# libraries, its /dev/lnet), bounded by `timeout`, written whole (a rename) for the agent; on failure the error
# replaces the snapshot, so the agent never reads an old view as a fresh one.
LNET_SCRIPT = f"""\
set -u
d={LNET_DIR}
while :; do
  for w in net peer; do
    if timeout 10 chroot /host lnetctl "$w" show -v 3 > "$d/.$w.tmp" 2> "$d/.$w.stderr"; then
      mv -f "$d/.$w.tmp" "$d/$w.yaml"; rm -f "$d/$w.err"
    else
      rc=$?
      {{ echo "chroot /host lnetctl $w show -v 3 exited $rc:"; head -c 2000 "$d/.$w.stderr"; }} > "$d/$w.err"
      rm -f "$d/$w.yaml" "$d/.$w.tmp"
    fi
  done
  sleep {LNET_INTERVAL_S}
done
"""


def lnet_sidecar(image: str) -> dict[str, Any]:
    """The container that reads LNet's NI and peer health for ``lustre.lnet``: privileged (``lnetctl``'s ioctl
    needs CAP_SYS_ADMIN on ``/dev/lnet``), the host's root read-only, nothing but an in-memory folder to write."""
    return {
        "name": "lnet",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", LNET_SCRIPT],
        "resources": {"requests": {"cpu": "5m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": {"privileged": True, "runAsUser": 0, "runAsNonRoot": False,
                            "readOnlyRootFilesystem": True},
        "volumeMounts": [{"name": "lnet", "mountPath": LNET_DIR},
                         {"name": "host-root", "mountPath": "/host", "readOnly": True}],
    }


def daemonset(profile: PlatformProfile, pool: Pool, image: str, namespace: str, *, interval: int, passes: int,
              manage_taints: bool, runtime_class: str | None, nvml_access: str = "auto",
              mode: str = "enforce", lnet: str = "sidecar") -> dict[str, Any]:
    """One pool's agent DaemonSet. ``lnet``: ``sidecar`` (where the pool mounts Lustre and checks its client)
    adds the privileged ``lnet`` container whose snapshots ``lustre.lnet`` reads; ``none`` leaves LNet unread."""
    if lnet not in LNET_MODES:
        raise ValueError(f"lnet {lnet!r}: use one of {', '.join(LNET_MODES)}")
    args = ["--profile", f"/etc/fabricguard/{PROFILE_KEY}", "--pool", pool.name, "--root", HOST_ROOT,
            "--interval", str(interval), "--passes", str(passes), "--listen", f"0.0.0.0:{METRICS_PORT}",
            "--mode", mode]
    if manage_taints:
        args.append("--manage-taints")
    mounts: list[dict[str, Any]] = [{"name": "profile", "mountPath": "/etc/fabricguard", "readOnly": True}]
    volumes: list[dict[str, Any]] = [{"name": "profile", "configMap": {"name": NAME}}]
    for d in _host_dirs(pool):
        v = _volume_name(d)
        mounts.append({"name": v, "mountPath": HOST_ROOT + d, "readOnly": True})
        volumes.append({"name": v, "hostPath": {"path": d, "type": "Directory"}})
    droot = pool.fabric.spec.driver_container_root
    if droot:
        # The DOCA/MOFED driver container rbind-mounts its root here, possibly after the agent started: the mount
        # must propagate into the agent (HostToContainer), and the directory may not exist yet on a node without
        # that container (DirectoryOrCreate: the driver container creates the same directory itself).
        v = _volume_name(droot)
        mounts.append({"name": v, "mountPath": HOST_ROOT + droot, "readOnly": True,
                       "mountPropagation": "HostToContainer"})
        volumes.append({"name": v, "hostPath": {"path": droot, "type": "DirectoryOrCreate"}})
    privileged = nvml_privileged(pool, nvml_access)
    env: list[dict[str, Any]] = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        # Where the pool's taint slots live (--manage-taints): the agent's own namespace.
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        # NVML through the runtime's device injection, not a GPU request: training keeps every GPU.
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
    ]
    driver = pool.fabric.spec.driver_without_toolkit
    if privileged and driver:
        # libnvidia-ml.so.1 of the host's driver, read through the read-only host mount of its directory.
        env.append({"name": "LD_LIBRARY_PATH", "value": f"{HOST_ROOT}{driver}/lib64"})
    lustre = profile.spec.storage.lustre
    sidecar: dict[str, Any] | None = None
    if lustre is not None and pool.lustre:
        mounts.append({"name": "lustre", "mountPath": lustre.mountPath, "readOnly": True})
        volumes.append({"name": "lustre", "persistentVolumeClaim": {"claimName": lustre.claimName, "readOnly": True}})
        if lnet == "sidecar" and lustre.clientHealth.enabled:
            sidecar = lnet_sidecar(image)
            args += ["--lnetctl", f"dir:{LNET_DIR}"]
            mounts.append({"name": "lnet", "mountPath": LNET_DIR, "readOnly": True})
            volumes += [{"name": "lnet", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
                        {"name": "host-root", "hostPath": {"path": "/", "type": "Directory"}}]
    container = {
        "name": "agent",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        # The agent alone (not the whole CLI): less memory on every node.
        "command": ["python", "-m", "fabricguard.agent"],
        "args": args,
        "env": env,
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 30,
                          "timeoutSeconds": 5, "failureThreshold": 3},
        "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"memory": "192Mi"}},
        "securityContext": {"privileged": privileged, "allowPrivilegeEscalation": privileged,
                            "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts,
    }
    pod_spec: dict[str, Any] = {
        "serviceAccountName": NAME,
        "automountServiceAccountToken": True,
        "priorityClassName": "system-node-critical",
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "nodeSelector": {**pool.nodeSelector, names.LABEL_OS: "linux"},
        "tolerations": agent_tolerations(pool),
        "containers": [container] + ([sidecar] if sidecar else []),
        "volumes": volumes,
    }
    if runtime_class:
        pod_spec["runtimeClassName"] = runtime_class
    annotations = {}
    why = []
    if privileged:
        why.append("agent: gpu.count, gpu.ecc, gpu.memory: NVML opens /dev/nvidia*, which this platform exposes only "
                   "to GPU requests or privileged containers")
    if sidecar:
        why.append("lnet sidecar: lustre.lnet: lnetctl needs CAP_SYS_ADMIN on /dev/lnet; it only runs "
                   "`lnetctl net|peer show` and writes the YAML for the unprivileged agent")
    if why:
        annotations[names.ANN_PRIVILEGED_FOR] = "; ".join(why) + "; no other check needs privilege"
    return {
        "apiVersion": names.APPS_API,
        "kind": "DaemonSet",
        "metadata": {"name": f"{NAME}-{pool.name}", "namespace": namespace, "labels": _labels(pool.name),
                     **({"annotations": annotations} if annotations else {})},
        "spec": {
            "selector": {"matchLabels": {names.LABEL_APP_NAME: NAME, POOL_LABEL: pool.name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
            "template": {
                "metadata": {"labels": _labels(pool.name),
                             "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT)}},
                "spec": pod_spec,
            },
        },
    }


def _unchanged(obj: str, old: str, field: str) -> str:
    return f"(has({obj}.{field}) == has({old}.{field}) && (!has({obj}.{field}) || {obj}.{field} == {old}.{field}))"


def policy_expressions(namespace: str = "fabricguard-system") -> dict[str, str]:
    """The CEL of the admission policy, by name (the test evaluates exactly these)."""
    sweep_user = f"system:serviceaccount:{namespace}:{SWEEPER}"
    status_rest = " && ".join(_unchanged("object.status", "oldObject.status", f) for f in STATUS_FIELDS)
    spec_rest = " && ".join(_unchanged("object.spec", "oldObject.spec", f) for f in SPEC_FIELDS)
    meta_rest = " && ".join(_unchanged("object.metadata", "oldObject.metadata", f) for f in META_FIELDS)
    # The agent's taints: readiness.k8s.io/fabric-*, and the autoscaler's startup key of a scale-from-zero pool.
    not_ours = f"!(t.key.startsWith('{TAINT_PREFIX}') || t.key == '{names.TAINT_STARTUP_UNVERIFIED}')"

    def ours(c: str) -> str:  # the conditions the agent may not change: all but its two (the sweep: but one)
        return f"{c}.type != '{CONDITION_TYPE}' && (variables.isSweep || {c}.type != '{FABRIC_LINKS}')"

    return {
        "isSweep": f"request.userInfo.username == '{sweep_user}'",
        "ownNode": (
            f"has(request.userInfo.extra) && '{NODE_NAME_EXTRA}' in request.userInfo.extra && "
            f"request.userInfo.extra['{NODE_NAME_EXTRA}'].exists(n, n == object.metadata.name)"
        ),
        "sweepOnlyUnknown": (
            "!variables.isSweep || (has(object.status.conditions) && "
            f"object.status.conditions.exists(c, c.type == '{CONDITION_TYPE}' && c.status == 'Unknown'))"
        ),
        "otherConditions": (
            f"has(object.status.conditions) ? object.status.conditions.filter(c, {ours('c')}) : []"
        ),
        "oldOtherConditions": (
            "has(oldObject.status.conditions) ? "
            f"oldObject.status.conditions.filter(c, {ours('c')}) : []"
        ),
        "otherTaints": f"has(object.spec.taints) ? object.spec.taints.filter(t, {not_ours}) : []",
        "oldOtherTaints": f"has(oldObject.spec.taints) ? oldObject.spec.taints.filter(t, {not_ours}) : []",
        "statusOnlyFabricReady": (
            "request.subResource != 'status' || "
            f"(variables.otherConditions == variables.oldOtherConditions && {status_rest})"
        ),
        # The API server stores metadata sent to nodes/status (its status strategy resets only spec): a status
        # write could relabel a Node. So metadata is held still on every write, status or not.
        "metadataUnchanged": meta_rest,
        "specOnlyFabricTaints": (
            "request.subResource == 'status' || (variables.otherTaints == variables.oldOtherTaints && "
            f"(!has(object.spec.taints) || object.spec.taints.all(t, {not_ours} || "
            f"t.effect == 'NoSchedule')) && {spec_rest} && {meta_rest})"
        ),
    }


VARIABLES = ("isSweep", "ownNode", "otherConditions", "oldOtherConditions", "otherTaints", "oldOtherTaints")


def admission_policy(namespace: str) -> list[dict[str, Any]]:
    expr = policy_expressions(namespace)
    policy_name = f"{NAME}-own-node"
    policy = {
        "apiVersion": names.ADMISSIONREGISTRATION_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy_name, "labels": _labels()},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                "resources": ["nodes", "nodes/status"]}]},
            "matchConditions": [{
                "name": "is-fabricguard-agent-or-sweep",
                "expression": f"request.userInfo.username in ['system:serviceaccount:{namespace}:{NAME}', "
                              f"'system:serviceaccount:{namespace}:{SWEEPER}']",
            }],
            "variables": [{"name": n, "expression": expr[n]} for n in VARIABLES],
            "validations": [
                {"expression": "variables.isSweep || variables.ownNode", "reason": "Forbidden",
                 "messageExpression": "'the fabricguard agent may write only the Node its pod runs on, not ' + "
                                      "object.metadata.name"},
                {"expression": expr["statusOnlyFabricReady"], "reason": "Forbidden",
                 "message": f"the fabricguard agent may change only the {CONDITION_TYPE} and {FABRIC_LINKS} "
                            "conditions of a Node's status"},
                {"expression": expr["specOnlyFabricTaints"], "reason": "Forbidden",
                 "message": f"the fabricguard agent may change only the {TAINT_PREFIX}* (and "
                            f"{names.TAINT_STARTUP_UNVERIFIED}) NoSchedule taints of a Node"},
                {"expression": expr["metadataUnchanged"], "reason": "Forbidden",
                 "message": "the fabricguard agent and its staleness sweep may not change a Node's labels, "
                            "annotations, owner references or finalizers (not through nodes/status either)"},
                {"expression": expr["sweepOnlyUnknown"], "reason": "Forbidden",
                 "message": f"the staleness sweep may only set {CONDITION_TYPE} to Unknown"},
                # A second entry of the same type (a merge that appended instead of replacing) would let a
                # reader that takes the first see True beside an Unknown or False: one entry, always.
                {"expression": "!has(object.status) || !has(object.status.conditions) || "
                               f"object.status.conditions.filter(c, c.type == '{CONDITION_TYPE}').size() <= 1 && "
                               f"object.status.conditions.filter(c, c.type == '{FABRIC_LINKS}').size() <= 1",
                 "reason": "Invalid",
                 "message": f"a Node holds at most one {CONDITION_TYPE} and one {FABRIC_LINKS} condition"},
            ],
        },
    }
    binding = _deny_binding(policy_name)
    return [policy, binding, *slot_policy(namespace)]


def _deny_binding(policy_name: str) -> dict[str, Any]:
    return {
        "apiVersion": names.ADMISSIONREGISTRATION_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy_name, "labels": _labels()},
        "spec": {"policyName": policy_name, "validationActions": ["Deny"]},
    }


def slot_policy_expressions() -> dict[str, str]:
    """The CEL of the taint-slot policy, by name (the test evaluates exactly these)."""

    def own(holder: str) -> str:
        return (f"(has(request.userInfo.extra) && '{NODE_NAME_EXTRA}' in request.userInfo.extra && "
                f"request.userInfo.extra['{NODE_NAME_EXTRA}'].exists(n, n == {holder}))")

    held = "(has(object.spec) && has(object.spec.holderIdentity) ? object.spec.holderIdentity : '')"
    was = ("(oldObject == null || !has(oldObject.spec) || !has(oldObject.spec.holderIdentity) ? '' : "
           "oldObject.spec.holderIdentity)")
    return {
        "slotOnly": f"object.metadata.name.startsWith('{SLOT_PREFIX}')",
        # Taken, renewed or reclaimed in its own name; given back ('') only from itself or from nobody.
        "ownHolder": f"{held} == '' ? ({was} == '' || {own(was)}) : {own(held)}",
    }


def slot_policy(namespace: str) -> list[dict[str, Any]]:
    """The agents' Lease writes held to their pool's taint slots (``agent/taint_slots.py``), each in the writer's own
    Node's name. The agent's Role must grant ``create`` and ``patch`` on ``leases`` in the install's namespace, where
    the controller's leader-election Lease lives too, and RBAC cannot name Leases not made yet: without this one
    node's agent token could take the controller's leadership (no pass would run) or another node's slot."""
    expr = slot_policy_expressions()
    policy_name = f"{NAME}-taint-slots"
    spec = {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{
            "apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
            "resources": ["leases"]}]},
        "matchConditions": [{
            "name": "is-fabricguard-agent",
            "expression": f"request.userInfo.username == 'system:serviceaccount:{namespace}:{NAME}'",
        }],
        "validations": [
            {"expression": expr["slotOnly"], "reason": "Forbidden",
             "messageExpression": f"'the fabricguard agent may write only taint slots (Leases {SLOT_PREFIX}*), "
                                  "not ' + object.metadata.name"},
            {"expression": expr["ownHolder"], "reason": "Forbidden",
             "message": "the fabricguard agent may take a taint slot only in its own Node's name, and give back "
                        "only its own"},
        ],
    }
    return [{"apiVersion": names.ADMISSIONREGISTRATION_API, "kind": "ValidatingAdmissionPolicy",
             "metadata": {"name": policy_name, "labels": _labels()}, "spec": spec}, _deny_binding(policy_name)]


SWEEPER = "fabricguard-agent-sweep"
STALE_INTERVALS = 3


def sweeper(image: str, namespace: str, interval: int) -> list[dict[str, Any]]:
    """A CronJob (every minute) that turns FabricReady conditions older than 3 intervals Unknown, with its own
    service account: list Nodes, patch ``nodes/status``. The Node Readiness Controller ignores heartbeat age;
    this is what makes a dead agent's last True stop counting. (A CronJob needs no leader election.)"""
    labels = {**_labels(), names.LABEL_APP_COMPONENT: "staleness-sweep"}
    meta = {"name": SWEEPER, "namespace": namespace, "labels": labels}
    pod = {
        "serviceAccountName": SWEEPER,
        "restartPolicy": "Never",
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "sweep",
            "image": image,
            # the agent's own max_age with its default heartbeat: an unchanged condition is rewritten only then
            "args": ["agent-sweep", "--max-age", str(int(HEARTBEAT_S) + interval * STALE_INTERVALS)],
            "resources": {"requests": {"cpu": "10m", "memory": "96Mi"}, "limits": {"memory": "192Mi"}},
            "securityContext": {"privileged": False, "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}},
        }],
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": names.RBAC_API, "kind": "ClusterRole",
         "metadata": {"name": SWEEPER, "labels": labels},
         "rules": rbac_rules(SWEEPER_GRANTS, "cluster")},
        {"apiVersion": names.RBAC_API, "kind": "ClusterRoleBinding",
         "metadata": {"name": SWEEPER, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SWEEPER},
         "subjects": [{"kind": "ServiceAccount", "name": SWEEPER, "namespace": namespace}]},
        {"apiVersion": names.BATCH_API, "kind": "CronJob", "metadata": meta,
         "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 50,
                  "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 3,
                  "jobTemplate": {"spec": {"backoffLimit": 0, "activeDeadlineSeconds": 50,
                                           "template": {"metadata": {"labels": labels}, "spec": pod}}}}},
    ]


def agent_manifests(profile: PlatformProfile, profile_text: str, image: str, namespace: str = "fabricguard-system",
                    *, interval: int = 60, passes: int = 3, manage_taints: bool = False,
                    runtime_class: str | None = None, sweep: bool = True,
                    nvml_access: str = "auto", mode: str = "enforce",
                    monitoring: str = "prometheus-operator", lnet: str = "sidecar") -> list[dict[str, Any]]:
    meta = {"name": NAME, "namespace": namespace, "labels": _labels()}
    # The agent's permission table, nothing else. Each agent lists its node's ResourceSlices: a DRA pool's fabric
    # is offered there, not in allocatable, and so are GPUs a DRA driver offers (GPU Operator's GPUCluster mode).
    # A pool whose bootstrap taint is the autoscaler's startup taint has no NRC rule: its agent keeps the taints.
    taints = manage_taints or any(p.startup_taint for p in profile.spec.pools)
    rules = rbac_rules(agent_grants(taints, True), "cluster")
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": names.RBAC_API, "kind": "ClusterRole",
         "metadata": {"name": NAME, "labels": _labels()}, "rules": rules},
        {"apiVersion": names.RBAC_API, "kind": "ClusterRoleBinding",
         "metadata": {"name": NAME, "labels": _labels()},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {PROFILE_KEY: profile_text}},
    ]
    own = rbac_rules(agent_grants(taints, True), "namespace")
    if own:  # the pool's taint slots (Leases, agent/taint_slots.py): only in the agent's own namespace
        objs += [
            {"apiVersion": names.RBAC_API, "kind": "Role", "metadata": meta, "rules": own},
            {"apiVersion": names.RBAC_API, "kind": "RoleBinding", "metadata": meta,
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
             "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]},
        ]
    daemonsets = [daemonset(profile, p, image, namespace, interval=interval, passes=passes,
                            manage_taints=manage_taints or p.startup_taint, runtime_class=runtime_class,
                            nvml_access=nvml_access,
                            mode=mode, lnet=lnet)
                  for p in profile.spec.pools]
    # The agent reads its profile once at start: a changed profile rolls every DaemonSet (content hash).
    checksum = hashlib.sha256(profile_text.encode()).hexdigest()
    for ds in daemonsets:
        ds["spec"]["template"]["metadata"]["annotations"][PROFILE_CHECKSUM] = checksum
    objs += daemonsets
    # :9400 from the scrapers only: the agent runs on every GPU node, beside every tenant's pods.
    objs.append(metrics_policy(meta, {names.LABEL_APP_NAME: NAME}, [METRICS_PORT], monitoring))
    objs += admission_policy(namespace)
    if sweep:
        objs += sweeper(image, namespace, interval)
    return objs


def to_yaml(objs: list[dict[str, Any]], head: str = "") -> str:
    return head + yamlout.dump_all(objs, sort_keys=False, default_flow_style=False, width=120)
