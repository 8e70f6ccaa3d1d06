"""Drift between two snapshots (say staging and production) on what matters for the fabric.

Compared: DaemonSets and ConfigMaps in the device plugins' namespaces, ``kube-system`` and any namespace
asked for; NetworkAttachmentDefinitions; mutating and validating webhook configurations; Kueue objects
(ResourceFlavor, ClusterQueue, LocalQueue, Topology, AdmissionCheck). Server-managed fields (uid,
resourceVersion, managedFields, creationTimestamp, generation, status, generation annotations, injected
caBundles) are not drift. Lists of named items (containers, env, volumes, webhooks) are matched by name so
that reordering is not drift. Each difference is one ``drift`` finding naming both values and sides.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fabricguard.doctor.model import Finding, ObjRef, Severity
from fabricguard.doctor.registry import parse_reference
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile import PlatformProfile

RULE = "drift"
NAMESPACED_KINDS = frozenset({"DaemonSet", "ConfigMap"})
EVERYWHERE_KINDS = frozenset(
    {
        "NetworkAttachmentDefinition",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "Topology",
        "AdmissionCheck",
    }
)
SERVER_META = frozenset(
    {
        "uid",
        "resourceVersion",
        "managedFields",
        "creationTimestamp",
        "generation",
        "selfLink",
        "deletionTimestamp",
    }
)
SERVER_ANNOTATIONS = frozenset(
    {
        "deprecated.daemonset.template.generation",
        "kubectl.kubernetes.io/last-applied-configuration",
        "kubectl.kubernetes.io/restartedAt",
        "cert-manager.io/inject-ca-from",
    }
)
IGNORED_KEYS = frozenset({"caBundle"})
MISSING = "<absent>"


def _normalize(obj: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_META}
    ann = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in SERVER_ANNOTATIONS}
    if ann:
        meta["annotations"] = ann
    else:
        meta.pop("annotations", None)
    if "ownerReferences" in meta:
        meta["ownerReferences"] = [{k: v for k, v in r.items() if k != "uid"} for r in meta["ownerReferences"]]
    out["metadata"] = meta
    return out


def flatten(value: Any, prefix: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"spec.template.spec.containers[name=x].image": "..."}``; named list items are keyed by name."""
    out = {} if out is None else out
    if isinstance(value, dict):
        if not value and prefix:
            out[prefix] = {}
        for k, v in value.items():
            if k in IGNORED_KEYS:
                continue
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list):
        named = value and all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in value)
        if not value:
            out[prefix] = []
        for i, item in enumerate(value):
            flatten(item, f"{prefix}[name={item['name']}]" if named else f"{prefix}[{i}]", out)
    else:
        out[prefix] = value
    return out


def _select(snapshot: Snapshot, namespaces: set[str]) -> dict[tuple[str, str, str], dict[str, Any]]:
    out = {}
    for o in snapshot.objects:
        kind = o.get("kind", "")
        meta = o.get("metadata") or {}
        ns = meta.get("namespace") or ""
        if (kind in NAMESPACED_KINDS and ns in namespaces) or kind in EVERYWHERE_KINDS:
            out[(kind, ns, meta.get("name", ""))] = o
    return out


def _image_note(a: Any, b: Any) -> str:
    if not isinstance(a, str) or not isinstance(b, str):
        return ""
    ra, rb = parse_reference(a), parse_reference(b)
    parts = []
    if (ra.registry, ra.repository) != (rb.registry, rb.repository):
        parts.append(f"repository {ra.registry}/{ra.repository} vs {rb.registry}/{rb.repository}")
    if ra.tag != rb.tag:
        parts.append(f"tag {ra.tag or MISSING} vs {rb.tag or MISSING}")
    if ra.digest != rb.digest:
        parts.append(f"digest {ra.digest or MISSING} vs {rb.digest or MISSING}")
    return "; ".join(parts)


def drift_namespaces(profiles: Iterable[PlatformProfile | None], extra: Iterable[str] = ()) -> set[str]:
    ns = {"kube-system", *extra}
    for prof in profiles:
        if prof is None:
            continue
        for p in prof.spec.pools:
            if p.fabric.devicePlugin:
                ns.add(p.fabric.devicePlugin.namespace)
    return ns


def diff_snapshots(
    a: Snapshot, b: Snapshot, namespaces: set[str], label_a: str = "A", label_b: str = "B"
) -> list[Finding]:
    """One ``drift`` finding per differing field (or per object present on one side only)."""
    left, right = _select(a, namespaces), _select(b, namespaces)
    findings: list[Finding] = []
    for key in sorted(set(left) | set(right)):
        kind, ns, name = key
        ref = ObjRef(kind, name, ns or None)
        where = f"{kind} {ns + '/' if ns else ''}{name}"
        if key not in right or key not in left:
            has, lacks = (label_a, label_b) if key in left else (label_b, label_a)
            findings.append(
                Finding(
                    RULE,
                    Severity.warning,
                    [ref],
                    f"{where} exists in {has} but not in {lacks}.",
                    {"present in": has, "absent from": lacks},
                    f"Apply it to {lacks} or delete it from {has}, so both run the same fabric setup.",
                )
            )
            continue
        fa, fb = flatten(_normalize(left[key])), flatten(_normalize(right[key]))
        for path in sorted(set(fa) | set(fb)):
            va, vb = fa.get(path, MISSING), fb.get(path, MISSING)
            if va == vb:
                continue
            note = _image_note(va, vb) if path.endswith(".image") else ""
            evidence: dict[str, Any] = {path: {label_a: va, label_b: vb}}
            if note:
                evidence["image difference"] = note
            findings.append(
                Finding(
                    RULE,
                    Severity.warning,
                    [ref],
                    f"{where}: {path} differs: {label_a} has {va!r}, {label_b} has {vb!r}"
                    + (f" ({note})" if note else "")
                    + ".",
                    evidence,
                    "Decide which is right and apply it to the other side; a fix made only in "
                    f"{label_a} or only "
                    f"in {label_b} is how one environment keeps working while the other never does.",
                )
            )
    return findings
