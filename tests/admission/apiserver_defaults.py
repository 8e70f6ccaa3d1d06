"""What the API server does to an object between the mutating webhook and storage, for the stored-form tests.

Applied to every pod spec of a workload (a Pod, a Job's template, each JobSet replicated job's template, a
TrainJob's trainer env): the defaults ``k8s.io/kubernetes/pkg/apis/core/v1/defaults.go`` sets (container
``terminationMessagePath``/``terminationMessagePolicy``/``imagePullPolicy``, port protocol, ``fieldRef``
``apiVersion: v1``, pod ``dnsPolicy``/``schedulerName``/``securityContext``/``terminationGracePeriodSeconds``/
``enableServiceLinks``), the DefaultTolerationSeconds plugin's tolerations on Pods, the Job defaults and labels
the Job registry adds, quantities in canonical form, and JSON ``omitempty`` (empty strings and false dropped, but not a security context's pointers).
``kueue_suspend`` adds what Kueue's webhook sets on a queued workload, which triggers reinvocation.
"""

from __future__ import annotations

import copy
from typing import Any

from fabricguard.quantity import canonical

UNREACHABLE = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _omit_empty(value: Any, pointers: bool = False) -> Any:
    """Go's ``omitempty``: empty strings, nulls and false dropped; a zero number and, in a security context
    (every field a pointer: ``runAsUser: 0``, ``runAsNonRoot: false``), false as well are kept, as the API server
    keeps them."""
    if isinstance(value, dict):
        return {k: _omit_empty(v, k == "securityContext") for k, v in value.items()
                if not (v is None or (isinstance(v, str) and v == "") or (v is False and not pointers))}
    if isinstance(value, list):
        return [_omit_empty(v) for v in value]
    return value


def _container(c: dict[str, Any]) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    image = c.get("image", "")
    latest = "@" not in image and (":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest"))
    c.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
    for p in c.get("ports") or []:
        p.setdefault("protocol", "TCP")
    _env(c)
    res = c.get("resources") or {}
    for part in ("limits", "requests"):
        if isinstance(res.get(part), dict):
            res[part] = {k: canonical(v) for k, v in res[part].items()}


def _env(holder: dict[str, Any]) -> None:
    for e in holder.get("env") or []:
        ref = (e.get("valueFrom") or {}).get("fieldRef")
        if isinstance(ref, dict):
            ref.setdefault("apiVersion", "v1")


def _pod_spec(spec: dict[str, Any], *, is_pod: bool) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("enableServiceLinks", True)
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            _container(c)
    for v in spec.get("volumes") or []:
        ed = v.get("emptyDir")
        if isinstance(ed, dict) and "sizeLimit" in ed:
            ed["sizeLimit"] = canonical(ed["sizeLimit"])
    if is_pod:
        tols = spec.setdefault("tolerations", [])
        for key in UNREACHABLE:
            if not any(t.get("key") == key for t in tols):
                tols.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})


def _job(job_spec: dict[str, Any], name: str | None) -> None:
    job_spec.setdefault("parallelism", 1)
    job_spec.setdefault("completions", job_spec["parallelism"])
    job_spec.setdefault("backoffLimit", 6)
    job_spec.setdefault("completionMode", "NonIndexed")
    job_spec.setdefault("suspend", False)
    job_spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    tpl = job_spec.setdefault("template", {})
    labels = tpl.setdefault("metadata", {}).setdefault("labels", {})
    uid = "0f4e1c2a-9a37-4c44-8f5e-5a1b2c3d4e5f"
    labels.update({"batch.kubernetes.io/controller-uid": uid, "controller-uid": uid})
    if name:
        labels.update({"batch.kubernetes.io/job-name": name, "job-name": name})
    job_spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    _pod_spec(tpl.setdefault("spec", {}), is_pod=False)


def stored_form(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as ``kubectl get -o json`` would show it after creation."""
    out = _omit_empty(copy.deepcopy(obj))
    meta = out.setdefault("metadata", {})
    meta.setdefault("name", (meta.get("generateName") or "generated-") + "x7k2q")
    meta.update({"uid": "5c9d1e7a-0000-4000-8000-000000000001", "resourceVersion": "48213",
                 "creationTimestamp": "2026-11-30T12:00:00Z", "generation": 1})
    kind = out["kind"]
    if kind == "Pod":
        _pod_spec(out["spec"], is_pod=True)
    elif kind == "Job":
        _job(out["spec"], meta["name"])
    elif kind == "JobSet":
        for rj in out["spec"]["replicatedJobs"]:
            rj.setdefault("replicas", 1)
            _job(rj["template"]["spec"], None)
    elif kind == "TrainJob":
        _env(out["spec"]["trainer"])
        res = out["spec"]["trainer"].get("resourcesPerNode") or {}
        for part in ("limits", "requests"):
            if isinstance(res.get(part), dict):
                res[part] = {k: canonical(v) for k, v in res[part].items()}
    return out


def kueue_suspend(obj: dict[str, Any]) -> dict[str, Any]:
    """What Kueue's mutating webhook does to a queued Job, JobSet or TrainJob (the reinvocation trigger)."""
    out = copy.deepcopy(obj)
    if out["kind"] in ("Job", "JobSet", "TrainJob"):
        out.setdefault("spec", {})["suspend"] = True
    return out
