"""``daemonset-untolerated-readiness``: a DaemonSet a fabric node needs before it is ready would not run on it.

A new fabric node is tainted ``readiness.k8s.io/fabric-unverified`` until the agent reports; the agent passes
only once the device plugin (or DRA driver), the CSI node plugin and the CNI are running there. A DaemonSet among
them (``PlatformProfile.fabric_daemonsets()``), any DaemonSet of the GPU stack (one that tolerates
``nvidia.com/gpu``: the agent requires the GPUs it brings) or the agent's own DaemonSet whose template does not
tolerate the readiness taints never gets a pod on the node, and the taint stays forever. The webhook adds the
tolerations to the DaemonSets it can see (``admission/daemonsets.py``, ``failurePolicy: Ignore``); this rule
reports what it did not reach (the webhook not installed yet, a DaemonSet created before it, another name).
It speaks only where the gate is in use: a node carries a readiness taint or the agent's DaemonSet exists.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from fabricguard.doctor.model import Finding, ObjRef, Severity
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.names import TAINT_KEYS
from fabricguard.profile import PlatformProfile
from fabricguard.profile.cluster import tolerates

UNTOLERATED = "daemonset-untolerated-readiness"
AGENT_PREFIX = "fabricguard-agent-"
# A DaemonSet that tolerates the GPU taint means to run on GPU nodes (the GPU Operator's operands, NFD, the NVIDIA
# device plugin): the agent needs the GPUs in allocatable, so it must also run before the node is ready.
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def untolerated(template_tolerations: list[dict[str, object]], keys: tuple[str, ...] = TAINT_KEYS) -> list[str]:
    """The readiness taint keys a pod template does not tolerate."""
    return [k for k in keys
            if not tolerates(template_tolerations, {"key": k, "value": "any-pool", "effect": "NoSchedule"})]


def _tainted(keys: tuple[str, ...], n: dict[str, Any]) -> bool:
    """Whether the node carries one of the readiness taints ``keys``."""
    return any(t.get("key") in keys for t in (n.get("spec") or {}).get("taints") or ())


def daemonset_untolerated_readiness(snapshot: Snapshot, profile: PlatformProfile | None,
                                    now: datetime) -> list[Finding]:
    del now
    if profile is None:
        return []
    # Only where the readiness gate is in use (a node carries a readiness taint, or the agent runs): elsewhere no
    # node is ever tainted and the toleration is moot.
    keys = profile.taint_keys
    tainted = bool(snapshot.select(UNTOLERATED, snapshot.nodes, partial(_tainted, tuple(keys))))
    agents = any(((d.get("metadata") or {}).get("name") or "").startswith(AGENT_PREFIX) for d in snapshot.daemonsets)
    if not (tainted or agents):
        return []
    wanted = {(d.namespace, d.name): d.role for d in profile.fabric_daemonsets()}
    findings: list[Finding] = []
    for ds in snapshot.daemonsets:
        meta = ds.get("metadata") or {}
        ident = (meta.get("namespace", ""), meta.get("name", ""))
        spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        role: str | None = wanted.get(ident) or ("agent" if ident[1].startswith(AGENT_PREFIX) else None)
        if role is None and tolerates(spec.get("tolerations") or [], GPU_TAINT):
            role = "GPU stack: it means to run on GPU nodes, and the agent needs the GPUs it brings"
        if role is None:
            continue
        missing = untolerated(spec.get("tolerations") or [], profile.taint_keys)
        if not missing:
            continue
        findings.append(Finding(
            UNTOLERATED, Severity.critical, [ObjRef("DaemonSet", ident[1], ident[0])],
            f"DaemonSet {ident[0]}/{ident[1]} ({role}) does not tolerate {', '.join(missing)}: on a new fabric node "
            "it never runs, so the node never becomes ready and keeps the taint forever.",
            {"spec.template.spec.tolerations": spec.get("tolerations") or [], "missing": missing},
            "Install the fabricguard webhook's configuration (it adds the tolerations to the DaemonSets the profile "
            "names) and re-apply the DaemonSet, or add tolerations {key: <taint>, operator: Exists, effect: "
            "NoSchedule} for each missing key to its template (e.g. the chart's tolerations value).",
        ))
    return findings
