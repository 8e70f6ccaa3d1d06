"""No deadlock at node boot: every DaemonSet pod tolerates the readiness taints.

A new fabric node carries ``readiness.k8s.io/fabric-unverified`` until the agent reports ``FabricReady=True``;
the agent can only pass once the GPU stack (driver, container toolkit, device plugin: it requires the GPUs in
allocatable), the fabric's device plugin or DRA driver, the CSI node plugin and the CNI run there. A DaemonSet
among those that does not tolerate the taint never runs on the node, so the taint stays forever: the NVIDIA
device plugin chart tolerates only ``CriticalAddonsOnly`` and ``nvidia.com/gpu``, the GPU Operator's operands
and NFD only ``nvidia.com/gpu``, the EFA device plugin's chart only ``CriticalAddonsOnly``, and no profile names
them all. The readiness taints are for workloads, not node agents: like the DaemonSet controller's own
``node.kubernetes.io/not-ready`` tolerations, every DaemonSet gets them, not only the ones the profile lists.

The DaemonSet's *template* is what must tolerate the taint (the DaemonSet controller decides from the template
whether a node should run a pod at all), so the webhook mutates every DaemonSet on CREATE and UPDATE: an upgrade
of an add-on that drops the toleration gets it back. ``failurePolicy: Ignore``: a system DaemonSet is never
blocked by this webhook's own fault; the doctor (``daemonset-untolerated-readiness``) and ``preflight`` report
what it missed. A DaemonSet labelled ``fabricguard.io/readiness-tolerations: "false"`` is left as it is (an
objectSelector: such requests never reach the webhook).
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


def missing_tolerations(template_spec: dict[str, Any], keys: tuple[str, ...] = TAINT_KEYS) -> list[dict[str, Any]]:
    """The readiness tolerations a pod template lacks (none when it tolerates every taint already)."""
    have = template_spec.get("tolerations") or []
    return [t for t in readiness_tolerations(keys)
            if not tolerates(have, {"key": t["key"], "value": "any-pool", "effect": "NoSchedule"})]


def patch(obj: dict[str, Any], keys: tuple[str, ...] = TAINT_KEYS) -> list[dict[str, Any]]:
    """The JSONPatch adding the missing readiness tolerations to a DaemonSet's template (empty: nothing to add)."""
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec")
    if not isinstance(spec, dict):
        return []
    missing = missing_tolerations(spec, keys)
    if not missing:
        return []
    if not isinstance(spec.get("tolerations"), list):
        return [{"op": "add", "path": "/spec/template/spec/tolerations", "value": missing}]
    return [{"op": "add", "path": "/spec/template/spec/tolerations/-", "value": t} for t in missing]


def _opted_out(meta: dict[str, Any]) -> bool:
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    return str((labels or {}).get(names.LABEL_READINESS_TOLERATIONS, "")).lower() == "false"


def decide(profile: PlatformProfile, req: rv.AdmissionRequest) -> tuple[dict[str, Any], bool]:
    """The review response for a DaemonSet CREATE/UPDATE, and whether it patches."""
    obj = req.object or {}
    meta = obj.get("metadata") or {}
    name = meta.get("name") or req.name
    del name  # every DaemonSet, not only the profile's (is_fabric_daemonset says which those are)
    if req.operation not in ("CREATE", "UPDATE") or _opted_out(meta):
        return rv.allow(req.uid), False
    ops = patch(obj, profile.taint_keys)
    if not ops:
        return rv.allow(req.uid), False
    keys = ", ".join(profile.taint_keys)
    return rv.allow(req.uid, ops, [f"fabricguard: added tolerations of {keys} so this DaemonSet "
                                   "runs on fabric nodes before they are ready"]), True


def webhook(profile: PlatformProfile, namespace: str, service: str) -> dict[str, Any] | None:
    """The MutatingWebhookConfiguration entry for every DaemonSet (all namespaces; opted-out ones excluded by an
    objectSelector). ``profile`` is kept for callers: the entry no longer depends on what it names."""
    del profile
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
        "objectSelector": {"matchExpressions": [
            {"key": names.LABEL_READINESS_TOLERATIONS, "operator": "NotIn", "values": ["false"]}]},
    }
