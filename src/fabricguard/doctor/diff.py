"""Drift between two snapshots (say staging and production) on what matters for the fabric.

Compared by default: every DaemonSet in every namespace (device plugins live in their operator's
namespace, not only ``kube-system``), and the fabric kinds wherever they are: NetworkAttachmentDefinitions,
mutating and validating webhook configurations, Kueue objects (ResourceFlavor, ClusterQueue, LocalQueue,
Topology, AdmissionCheck); ConfigMaps in ``kube-system``, the profile's device-plugin namespaces and any
namespace asked for. ``--namespace`` narrows DaemonSets to the namespaces named (plus the profile's
device-plugin namespaces, which a profile always adds).

Server-managed fields (uid, resourceVersion, managedFields, creationTimestamp, generation, status,
generation annotations, injected caBundles) are not drift. Lists of named items (containers, env,
volumes, webhooks) are matched by name so that reordering is not drift. Each drifting object is one
``drift`` finding that lists every field that differs with both sides' values.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fabricguard import names
from fabricguard.doctor.model import Finding, ObjRef, Severity
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.imageref import parse_reference
from fabricguard.profile import PlatformProfile

RULE = "drift"
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
        names.ANN_LAST_APPLIED,
        names.ANN_RESTARTED_AT,
        "cert-manager.io/inject-ca-from",
    }
)
IGNORED_KEYS = frozenset({"caBundle"})
MISSING = "<absent>"


def normalize(obj: dict[str, Any]) -> dict[str, Any]:
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


@dataclass(frozen=True)
class Scope:
    """What to compare: DaemonSets in ``daemonset_namespaces`` (None: every namespace), ConfigMaps in
    ``configmap_namespaces``, and the fabric kinds everywhere."""

    daemonset_namespaces: frozenset[str] | None
    configmap_namespaces: frozenset[str]

    def covers(self, kind: str, namespace: str) -> bool:
        if kind in EVERYWHERE_KINDS:
            return True
        if kind == "DaemonSet":
            return self.daemonset_namespaces is None or namespace in self.daemonset_namespaces
        if kind == "ConfigMap":
            return namespace in self.configmap_namespaces
        return False


def drift_scope(profiles: Iterable[PlatformProfile | None], namespaces: Iterable[str] = ()) -> Scope:
    """Every DaemonSet unless ``namespaces`` narrows them; profiles add their device plugins' namespaces."""
    asked = set(namespaces)
    plugins: set[str] = set()
    for prof in profiles:
        if prof is None:
            continue
        for p in prof.spec.pools:
            if dp := p.fabric.fabric_daemonset:
                plugins.add(dp.namespace)
    return Scope(
        daemonset_namespaces=frozenset(asked | plugins) if asked else None,
        configmap_namespaces=frozenset({"kube-system", *asked, *plugins}),
    )


def select_objects(snapshot: Snapshot, scope: Scope) -> dict[tuple[str, str, str], dict[str, Any]]:
    out = {}
    for o in snapshot.objects:
        kind = o.get("kind", "")
        meta = o.get("metadata") or {}
        ns = meta.get("namespace") or ""
        if scope.covers(kind, ns):
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


def diff_snapshots(a: Snapshot, b: Snapshot, scope: Scope, label_a: str = "A", label_b: str = "B") -> list[Finding]:
    """One ``drift`` finding per object that differs (every differing field listed) or exists on one side."""
    left, right = select_objects(a, scope), select_objects(b, scope)
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
        fa, fb = flatten(normalize(left[key])), flatten(normalize(right[key]))
        evidence: dict[str, Any] = {}
        sentences: list[str] = []
        for path in sorted(set(fa) | set(fb)):
            va, vb = fa.get(path, MISSING), fb.get(path, MISSING)
            if va == vb:
                continue
            note = _image_note(va, vb) if path.endswith(".image") else ""
            sides: dict[str, Any] = {label_a: va, label_b: vb}
            if note:
                sides["difference"] = note
            evidence[path] = sides
            sentences.append(
                f"{path} differs: {label_a} has {va!r}, {label_b} has {vb!r}" + (f" ({note})" if note else "")
            )
        if not evidence:
            continue
        count = f"{len(evidence)} fields differ" if len(evidence) > 1 else "1 field differs"
        findings.append(
            Finding(
                RULE,
                Severity.warning,
                [ref],
                f"{where}: {count}: " + "; ".join(sentences) + ".",
                evidence,
                "Decide which is right and apply it to the other side; a fix made only in "
                f"{label_a} or only in {label_b} is how one environment keeps working while the other never does.",
            )
        )
    return findings
