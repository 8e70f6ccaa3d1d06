"""No deadlock at node boot: the readiness taints tolerated by every DaemonSet a fabric node needs.

A new fabric node carries ``readiness.k8s.io/fabric-unverified`` until the agent reports ``FabricReady=True``;
the agent can only pass once the device plugin advertises the fabric, the CSI node plugin mounts Lustre and the
CNI (Multus) attaches the networks. A DaemonSet among those that does not tolerate the taint never runs on the
node, so the taint stays forever (the EFA device plugin's chart tolerates only ``CriticalAddonsOnly``).

The DaemonSet's *template* is what must tolerate the taint (the DaemonSet controller decides from the template
whether a node should run a pod at all), so the webhook mutates the DaemonSets the profile names
(``fabric_daemonsets()``: the pools' device plugins and ``spec.fabricDaemonSets``) on CREATE and UPDATE: an
upgrade of the add-on that drops the toleration gets it back. The configuration is narrow (their namespaces,
their names in ``matchConditions``) and ``failurePolicy: Ignore``: a system DaemonSet is never blocked by this
webhook's own fault; the doctor (``daemonset-untolerated-readiness``) and ``preflight`` report what it missed.
"""

from __future__ import annotations

from typing import Any

from fabricguard import names
from fabricguard.admission import review as rv
from fabricguard.names import TAINT_KEYS
from fabricguard.profile.cluster import readiness_tolerations, tolerates
from fabricguard.profile.model import PlatformProfile

HOOK_NAME = "daemonsets.admission.fabricguard.io"


def is_fabric_daemonset(profile: PlatformProfile, namespace: str | None, name: str | None) -> bool:
    return any(d.namespace == namespace and d.name == name for d in profile.fabric_daemonsets())


def missing_tolerations(template_spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The readiness tolerations a pod template lacks (none when it tolerates every taint already)."""
    have = template_spec.get("tolerations") or []
    return [t for t in readiness_tolerations()
            if not tolerates(have, {"key": t["key"], "value": "any-pool", "effect": "NoSchedule"})]


def patch(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSONPatch adding the missing readiness tolerations to a DaemonSet's template (empty: nothing to add)."""
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec")
    if not isinstance(spec, dict):
        return []
    missing = missing_tolerations(spec)
    if not missing:
        return []
    if not isinstance(spec.get("tolerations"), list):
        return [{"op": "add", "path": "/spec/template/spec/tolerations", "value": missing}]
    return [{"op": "add", "path": "/spec/template/spec/tolerations/-", "value": t} for t in missing]


def decide(profile: PlatformProfile, req: rv.AdmissionRequest) -> tuple[dict[str, Any], bool]:
    """The review response for a DaemonSet CREATE/UPDATE, and whether it patches."""
    obj = req.object or {}
    meta = obj.get("metadata") or {}
    name = meta.get("name") or req.name
    if req.operation not in ("CREATE", "UPDATE") or not is_fabric_daemonset(profile, req.namespace, name):
        return rv.allow(req.uid), False
    ops = patch(obj)
    if not ops:
        return rv.allow(req.uid), False
    return rv.allow(req.uid, ops, [f"fabricguard: added tolerations of {', '.join(TAINT_KEYS)} so this DaemonSet "
                                   "runs on fabric nodes before they are ready"]), True


def webhook(profile: PlatformProfile, namespace: str, service: str) -> dict[str, Any] | None:
    """The MutatingWebhookConfiguration entry for the profile's fabric DaemonSets (None: the profile names none)."""
    targets = profile.fabric_daemonsets()
    if not targets:
        return None
    namespaces = sorted({d.namespace for d in targets})
    listed = ", ".join(f"'{d.namespace}/{d.name}'" for d in targets)
    return {
        "name": HOOK_NAME,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": namespace, "name": service, "path": "/mutate", "port": 443}},
        "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["daemonsets"],
                   "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}],
        "failurePolicy": "Ignore",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": 5,
        "namespaceSelector": {"matchExpressions": [
            {"key": names.LABEL_NAMESPACE_NAME, "operator": "In", "values": namespaces}]},
        "matchConditions": [{"name": "fabric-daemonset",
                             "expression": f"(request.namespace + '/' + object.metadata.name) in [{listed}]"}],
    }
