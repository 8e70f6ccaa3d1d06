"""``readiness-taint-blocks-scale-from-zero``: a pool an autoscaler may scale from zero registers its nodes with a
taint the autoscaler counts against every pending pod.

A managed cluster autoscaler (GKE, AKS) sizes a node group at zero nodes from a template node built from the
group's configuration, registration taints included, and ignores only taints prefixed
``startup-taint.cluster-autoscaler.kubernetes.io/`` (self-managed CA also takes ``--startup-taint-prefix``, merged
Feb 2026, kubernetes/autoscaler #9296). Training pods do not tolerate ``readiness.k8s.io/fabric-unverified`` (that
is the point of it), so at zero nodes the autoscaler answers "NotTriggerScaleUp: 1 node(s) had untolerated
taint(s)" for ever: the Cilium deadlock (cilium/cilium #19241), and NRC cannot take the startup prefix (NRC #279).

What the doctor reads: the cluster autoscaler's status ConfigMap (``kube-system/cluster-autoscaler-status``, key
``status``: the YAML of CA >= 1.30, ``nodeGroups[].name`` and ``health.{minSize, nodeCounts.registered.total}``, or
the older text form ``Name: ... minSize=0``). A node group belongs to a pool when one of the pool's
``nodeSelector`` values (a GKE node pool, an AKS agent pool) is a ``-``-separated part of its name (GKE MIG
``gke-<cluster>-<pool>-<hash>-grp``, AKS ``aks-<pool>-<id>-vmss``). A group whose ``minSize`` is 0, of a pool whose
bootstrap taint is ``readiness.k8s.io/``: critical when it is at zero nodes now, else a warning. The fix is the
profile field ``pools[].readinessTaintPrefix: startup-taint.cluster-autoscaler.kubernetes.io/`` (the agent then
removes the taint: NRC cannot) or a minimum of one node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fabricguard import names
from fabricguard.doctor.model import Finding, ObjRef, Severity
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile import PlatformProfile, Pool

RULE = "readiness-taint-blocks-scale-from-zero"
STATUS_CONFIGMAP = ("kube-system", "cluster-autoscaler-status")
MAX_STATUS = 4 * 1024 * 1024  # a status of thousands of node groups stays far below this; beyond it is not CA's
_TEXT_GROUP = re.compile(r"^\s*Name:\s*(\S+)\s*$")
_TEXT_SIZES = re.compile(r"minSize=(\d+),\s*maxSize=(\d+)")
_TEXT_READY = re.compile(r"\bregistered=(\d+)")


@dataclass(frozen=True)
class NodeGroup:
    """One node group of the cluster autoscaler's status."""

    name: str
    min_size: int
    max_size: int | None
    registered: int | None


def parse_status(text: str) -> list[NodeGroup]:
    """The node groups of a ``cluster-autoscaler-status`` ``status`` value, in either form CA writes; [] when it
    holds none (or cannot be read: the rule then says nothing rather than guess)."""
    if len(text) > MAX_STATUS:
        return []
    if re.search(r"^\s*autoscalerStatus:", text, re.M):
        return _yaml_groups(text)
    return _text_groups(text)


def _m(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _yaml_groups(text: str) -> list[NodeGroup]:
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    listed = doc.get("nodeGroups") if isinstance(doc, dict) else None
    out = []
    for g in listed if isinstance(listed, list) else []:
        if not isinstance(g, dict) or not isinstance(g.get("name"), str):
            continue
        health = _m(g.get("health"))
        lo, hi = health.get("minSize"), health.get("maxSize")
        if not isinstance(lo, int):
            continue
        total = _m(_m(health.get("nodeCounts")).get("registered")).get("total")
        out.append(NodeGroup(g["name"], lo, hi if isinstance(hi, int) else None,
                             total if isinstance(total, int) else None))
    return out


def _text_groups(text: str) -> list[NodeGroup]:
    out: list[NodeGroup] = []
    name: str | None = None
    for line in text.splitlines()[:200_000]:
        m = _TEXT_GROUP.match(line)
        if m:
            name = m.group(1)
            continue
        sizes = _TEXT_SIZES.search(line)
        if name is not None and sizes and "Health:" in line:
            reg = _TEXT_READY.search(line)
            out.append(NodeGroup(name, int(sizes.group(1)), int(sizes.group(2)),
                                 int(reg.group(1)) if reg else None))
            name = None
    return out


def _status_text(snapshot: Snapshot) -> str | None:
    for cm in snapshot.kind("ConfigMap"):
        meta = cm.get("metadata") or {}
        if (meta.get("namespace"), meta.get("name")) == STATUS_CONFIGMAP:
            value = (cm.get("data") or {}).get("status")
            return value if isinstance(value, str) else None
    return None


def groups_of(pool: Pool, groups: list[NodeGroup]) -> list[NodeGroup]:
    """The node groups whose name holds one of the pool's nodeSelector values as whole ``-``/``/`` parts."""
    values = [v for v in pool.nodeSelector.values() if v]
    out = []
    for g in groups:
        tail = g.name.rsplit("/", 1)[-1]  # a GCE MIG URL ends with the group's own name
        if any(re.search(rf"(^|-){re.escape(v)}(-|$)", tail) for v in values):
            out.append(g)
    return out


def scale_from_zero_blocked(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    del now
    if profile is None:
        return []
    text = _status_text(snapshot)
    if text is None:
        return []
    groups = parse_status(text)
    findings: list[Finding] = []
    for i, pool in enumerate(profile.spec.pools):
        if pool.startup_taint:
            continue
        zero = [g for g in groups_of(pool, groups) if g.min_size == 0]
        if not zero:
            continue
        at_zero = [g for g in zero if g.registered == 0]
        severity = Severity.critical if at_zero else Severity.warning
        shown = at_zero or zero
        listed = ", ".join(f"{g.name} (minSize 0, {g.registered if g.registered is not None else '?'} registered)"
                           for g in shown[:5])
        findings.append(Finding(
            RULE, severity, [ObjRef("ConfigMap", STATUS_CONFIGMAP[1], STATUS_CONFIGMAP[0])],
            f"pool {pool.name}'s node group(s) {listed} may scale from zero, and its nodes register with "
            f"{names.TAINT_UNVERIFIED}: the autoscaler builds the zero-node template with that taint, no training "
            "pod tolerates it, so pending pods never trigger a scale-up"
            + (" (the pool is at zero nodes now)." if at_zero else " (once the pool reaches zero nodes)."),
            {f"{STATUS_CONFIGMAP[0]}/{STATUS_CONFIGMAP[1]} nodeGroups": [
                {"name": g.name, "minSize": g.min_size, "maxSize": g.max_size, "registered": g.registered}
                for g in shown[:20]],
             f"spec.pools[{i}].readinessTaintPrefix": pool.readinessTaintPrefix},
            f"Set spec.pools[{i}].readinessTaintPrefix: {names.STARTUP_TAINT_PREFIX} in the profile and register the "
            f"pool's nodes with {names.TAINT_STARTUP_UNVERIFIED}=<pool>:NoSchedule instead (the autoscaler ignores "
            "that prefix; the agent, rendered with --manage-taints for that pool, removes it once FabricReady=True), "
            "or keep the node group's minimum at 1 or more.",
            pools=[pool.name],
        ))
    return findings
