"""Small readers and writers of Kubernetes objects as the API server returns them (plain dicts), used by every part.

- metadata: :func:`meta`, :func:`name_of`, :func:`namespace_of`, :func:`labels_of`, :func:`annotations_of`,
  :func:`created`, :func:`owner_ref`;
- conditions: :func:`find_condition`, :func:`condition_true` and :func:`set_condition`, which follows
  apimachinery's ``SetStatusCondition``: ``lastTransitionTime`` moves only when the status changes, and the
  condition carries the ``observedGeneration`` it was computed for;
- label selectors: :func:`selector_matches` (a ``matchLabels``-style map);
- a pod's GPUs: :func:`container_gpus`, :func:`pod_gpus` (as the scheduler counts them) and
  :func:`gpu_containers`;
- a node's taint keys.

Pure and tolerant: objects written by a hostile tenant (a list where a map belongs) read as empty, never raise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fabricguard import names, quantity
from fabricguard.times import format_time, parse_time

# ----------------------------------------------------------------------------------------------- metadata


def meta(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    m = obj.get("metadata") if isinstance(obj, Mapping) else None
    return m if isinstance(m, dict) else {}


def name_of(obj: Mapping[str, Any] | None) -> str:
    return str(meta(obj).get("name", "") or "")


def namespace_of(obj: Mapping[str, Any] | None) -> str | None:
    ns = meta(obj).get("namespace")
    return str(ns) if ns else None


def labels_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    v = meta(obj).get("labels")
    return v if isinstance(v, dict) else {}


def annotations_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    v = meta(obj).get("annotations")
    return v if isinstance(v, dict) else {}


def generation_of(obj: Mapping[str, Any] | None) -> int | None:
    g = meta(obj).get("generation")
    return g if isinstance(g, int) and not isinstance(g, bool) else None


def created(obj: Mapping[str, Any] | None) -> datetime | None:
    return parse_time(meta(obj).get("creationTimestamp"))


def owner_ref(obj: Mapping[str, Any], api_version: str, kind: str, *, controller: bool = True) -> dict[str, Any]:
    """An ownerReference to ``obj`` (which must carry its uid, as the API server returns it)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name_of(obj),
        "uid": str(meta(obj).get("uid", "")),
        "controller": controller,
        "blockOwnerDeletion": False,
    }


def fabric_admission_check() -> dict[str, Any]:
    """The Kueue AdmissionCheck the controller answers, as both ``render controller`` and ``render kueue``
    print it."""
    return {"apiVersion": names.KUEUE_API, "kind": "AdmissionCheck",
            "metadata": {"name": names.CHECK_NAME, "labels": dict(names.CONTROLLER_LABELS)},
            "spec": {"controllerName": names.CHECK_CONTROLLER}}


def selector_matches(labels: Mapping[str, Any] | None, selector: Mapping[str, str]) -> bool:
    """Every key of a ``matchLabels``-style selector has its value in ``labels`` (an empty selector matches)."""
    got = labels if isinstance(labels, Mapping) else {}
    return all(got.get(k) == v for k, v in selector.items())


# --------------------------------------------------------------------------------------------- conditions


def conditions_of(obj: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    st = obj.get("status") if isinstance(obj, Mapping) else None
    return conditions_in(st)


def conditions_in(holder: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The ``conditions`` list of a status, or of an entry that carries its own (a ResourceClaim's device)."""
    cs = holder.get("conditions") if isinstance(holder, Mapping) else None
    return [c for c in cs if isinstance(c, dict)] if isinstance(cs, list) else []


def find_condition(obj: Mapping[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    """The condition of type ``ctype`` in ``status.conditions``, or None."""
    return next((c for c in conditions_of(obj) if c.get("type") == ctype), None)


def condition_true(obj: Mapping[str, Any] | None, ctype: str) -> bool:
    c = find_condition(obj, ctype)
    return c is not None and c.get("status") == "True"


def set_condition(
    conditions: list[dict[str, Any]],
    ctype: str,
    status: str,
    reason: str,
    message: str,
    now: datetime,
    *,
    observed_generation: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Set the condition ``ctype`` in ``conditions`` (in place) and return it, like ``SetStatusCondition``:
    ``lastTransitionTime`` is ``now`` for a new condition or a changed status and is kept otherwise; reason,
    message, ``observedGeneration`` (when given) and ``extra`` fields (say ``lastHeartbeatTime``) are replaced."""
    previous = next((c for c in conditions if isinstance(c, dict) and c.get("type") == ctype), None)
    kept = previous.get("lastTransitionTime") if previous is not None and previous.get("status") == status else None
    cond: dict[str, Any] = {"type": ctype, "status": status, "reason": reason, "message": message}
    if observed_generation is not None:
        cond["observedGeneration"] = observed_generation
    cond.update(extra)
    cond["lastTransitionTime"] = kept if isinstance(kept, str) and kept else format_time(now)
    if previous is None:
        conditions.append(cond)
    else:
        conditions[conditions.index(previous)] = cond
    return cond


# -------------------------------------------------------------------------------------------------- nodes


def taint_keys(node: Mapping[str, Any] | None) -> set[str]:
    spec = node.get("spec") if isinstance(node, Mapping) else None
    taints = spec.get("taints") if isinstance(spec, Mapping) else None
    return {str(t.get("key", "")) for t in taints or () if isinstance(t, dict)} if isinstance(taints, list) else set()


# ------------------------------------------------------------------------------------------- pods and GPUs


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


def count(value: Any) -> int:
    """A whole count from a resource amount (``8``, ``"8"``, ``"8.0"``, ``"1k"``), rounded up; absent or
    unreadable is 0."""
    if value is None:
        return 0
    if type(value) is int:
        return max(value, 0)
    if isinstance(value, str) and value.isdecimal() and value.isascii():
        return int(value)  # the common "8": the same answer as the parser, without building a Fraction
    return max(math.ceil(quantity.amount_or_zero(value)), 0)


def is_sidecar(container: Mapping[str, Any]) -> bool:
    """A native sidecar: an init container that keeps running beside the app containers."""
    return container.get("restartPolicy") == "Always"


def containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every container of a pod spec: init containers (and native sidecars) first, then app containers."""
    return _dicts(spec.get("initContainers")) + _dicts(spec.get("containers"))


def container_gpus(container: Mapping[str, Any], gpu_resource: str) -> int:
    """GPUs one container asks for (the larger of request and limit); unreadable amounts count as none."""
    res = container.get("resources")
    if not isinstance(res, dict):
        return 0
    lim, req = res.get("limits"), res.get("requests")
    return max(count(lim.get(gpu_resource)) if isinstance(lim, dict) else 0,
               count(req.get(gpu_resource)) if isinstance(req, dict) else 0)


def pod_gpus(spec: Mapping[str, Any], gpu_resource: str) -> int:
    """GPUs a pod holds at its peak, as the scheduler counts: app containers and sidecars run together, the
    other init containers one at a time."""
    running = sum(container_gpus(c, gpu_resource) for c in _dicts(spec.get("containers")))
    running += sum(container_gpus(c, gpu_resource) for c in _dicts(spec.get("initContainers")) if is_sidecar(c))
    one_at_a_time = [container_gpus(c, gpu_resource) for c in _dicts(spec.get("initContainers"))
                     if not is_sidecar(c)]
    return max([running, *one_at_a_time])


def gpu_containers(spec: Mapping[str, Any], gpu_resource: str) -> list[dict[str, Any]]:
    return [c for c in containers(spec) if container_gpus(c, gpu_resource) > 0]
