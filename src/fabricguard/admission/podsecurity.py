"""Compensating Pod Security: a ValidatingAdmissionPolicy for the namespaces opted in to the webhook.

Training namespaces must run Pod Security ``privileged`` for what the webhook injects (``IPC_LOCK``, the fabric's
read-only host directories on GKE), and ``privileged`` alone would let a tenant's pod take the node: ``hostPID``,
``hostPath: /``, ``SYS_ADMIN``. This policy gives back baseline plus exactly what the webhook injects:

- no ``hostPID``, ``hostIPC``, ``hostNetwork``, no privileged container, no ``hostPort``;
- capabilities added only from baseline's list plus ``IPC_LOCK``;
- ``hostPath`` volumes only for the directories the profile's pools inject (the fabric userspace, pod additions,
  the NCCL Inspector's plugin directory), and mounted read-only.

Bound to the opted-in namespaces (label ``fabricguard.io/enabled=true``) with ``validationActions: [Deny]`` in
enforce mode, ``[Warn, Audit]`` in observe mode. Pure: the profile in, objects out.
"""

from __future__ import annotations

from typing import Any

from fabricguard import names
from fabricguard.admission.runtime import extras
from fabricguard.profile.model import PlatformProfile

NAME = "fabricguard-pod-security"
ENABLED_LABEL = names.LABEL_ENABLED
# Pod Security "baseline": the capabilities a container may add (kubernetes.io/docs/concepts/security/
# pod-security-standards), plus IPC_LOCK, which the webhook adds for RDMA memory registration.
BASELINE_CAPABILITIES = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")
ALLOWED_CAPABILITIES = (*BASELINE_CAPABILITIES, "IPC_LOCK")


def allowed_host_paths(profile: PlatformProfile) -> list[str]:
    """Every host directory the webhook may inject into some pool's pods."""
    out: list[str] = []
    for pool in profile.spec.pools:
        for v in extras(profile, pool, fabric=True).volumes:
            path = (v.get("hostPath") or {}).get("path")
            if isinstance(path, str) and path not in out:
                out.append(path)
    ins = profile.spec.inspector
    if ins is not None and ins.delivery == "hostPath" and ins.hostPath and ins.hostPath not in out:
        out.append(ins.hostPath)
    return out


def _list(items: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{x}'" for x in items) + "]"


def policy_expressions(profile: PlatformProfile) -> dict[str, str]:
    """The CEL of the policy by name (variables first, then validations): what the tests evaluate."""
    paths = _list(allowed_host_paths(profile))
    return {
        "containers": ("(has(object.spec.containers) ? object.spec.containers : []) + "
                       "(has(object.spec.initContainers) ? object.spec.initContainers : []) + "
                       "(has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])"),
        "hostPathVolumes": ("has(object.spec.volumes) ? "
                            "object.spec.volumes.filter(v, has(v.hostPath)).map(v, v.name) : []"),
        "noHostNamespaces": ("!(has(object.spec.hostPID) && object.spec.hostPID) && "
                             "!(has(object.spec.hostIPC) && object.spec.hostIPC) && "
                             "!(has(object.spec.hostNetwork) && object.spec.hostNetwork)"),
        "notPrivileged": ("variables.containers.all(c, !has(c.securityContext) || "
                          "!has(c.securityContext.privileged) || !c.securityContext.privileged)"),
        "capabilities": ("variables.containers.all(c, !has(c.securityContext) || "
                         "!has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || "
                         f"c.securityContext.capabilities.add.all(a, a in {_list(ALLOWED_CAPABILITIES)}))"),
        "noHostPorts": ("variables.containers.all(c, !has(c.ports) || "
                        "c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))"),
        "hostPaths": (f"!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath) || "
                      f"v.hostPath.path in {paths})"),
        "hostPathsReadOnly": ("variables.containers.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, "
                              "!(m.name in variables.hostPathVolumes) || (has(m.readOnly) && m.readOnly)))"),
    }


VARIABLES = ("containers", "hostPathVolumes")
VALIDATIONS = (
    ("noHostNamespaces", "hostPID, hostIPC and hostNetwork are refused in fabricguard namespaces"),
    ("notPrivileged", "privileged containers are refused in fabricguard namespaces (training needs only IPC_LOCK)"),
    ("capabilities", "only Pod Security baseline's capabilities and IPC_LOCK may be added (not SYS_ADMIN, ...)"),
    ("noHostPorts", "hostPort is refused in fabricguard namespaces"),
    ("hostPaths", "hostPath volumes are refused except the fabric directories fabricguard injects"),
    ("hostPathsReadOnly", "the fabric's host directories may only be mounted readOnly"),
)


def policy(profile: PlatformProfile, mode: str = "enforce") -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding to the opted-in namespaces."""
    expr = policy_expressions(profile)
    labels = {names.LABEL_APP_PART_OF: "fabricguard", names.LABEL_APP_COMPONENT: "pod-security"}
    return [
        {"apiVersion": names.ADMISSIONREGISTRATION_API, "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": NAME, "labels": labels},
         "spec": {
             "failurePolicy": "Fail",
             "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                     "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
             "variables": [{"name": n, "expression": expr[n]} for n in VARIABLES],
             "validations": [{"expression": expr[n], "message": msg, "reason": "Forbidden"}
                             for n, msg in VALIDATIONS],
         }},
        {"apiVersion": names.ADMISSIONREGISTRATION_API, "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": NAME, "labels": labels},
         "spec": {"policyName": NAME,
                  "validationActions": ["Warn", "Audit"] if mode == "observe" else ["Deny"],
                  "matchResources": {"namespaceSelector": {"matchLabels": {ENABLED_LABEL: "true"}}}}},
    ]
