"""What one reconcile pass wants done to the cluster, as plain data; the I/O edge (``kube.py``) carries it out.

Status that others share is never written with a merge patch: a merge patch replaces whole lists, and
``status.conditions`` of an AdmissionCheck or ``status.admissionChecks`` of a Workload hold entries that other
controllers own.
:class:`ApplyStatus` is a server-side apply of only the fields given, under the controller's field manager,
so the API server merges our one list entry (lists keyed by ``name`` or ``type``) with everyone else's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fabricguard import names, times
from fabricguard import objects as o


@dataclass(frozen=True)
class Create:
    api_version: str
    plural: str
    namespace: str | None
    body: dict[str, Any]
    # (plural, name) of an object created or listed in this pass whose uid the owner reference needs.
    owner: tuple[str, str] | None = None

    @property
    def name(self) -> str:
        return o.name_of(self.body)


@dataclass(frozen=True)
class Delete:
    api_version: str
    plural: str
    namespace: str | None
    name: str


@dataclass(frozen=True)
class ApplyStatus:
    """Server-side apply of ``status`` (only the fields given) on the ``/status`` subresource."""

    api_version: str
    kind: str
    plural: str
    namespace: str | None
    name: str
    status: dict[str, Any]
    # The pools whose standing this write admits on (a Workload's check turned Ready): re-checked against the
    # cache just before it is written (``kube.apply_actions``'s ``fresh``), so a decision is fresh when written.
    admits: tuple[str, ...] = ()

    def body(self) -> dict[str, Any]:
        md: dict[str, Any] = {"name": self.name}
        if self.namespace:
            md["namespace"] = self.namespace
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": md, "status": self.status}


@dataclass(frozen=True)
class MergeStatus:
    """A merge patch of the ``/status`` of an object whose whole status this controller owns (FabricValidation).

    Keys set to None are removed; lists are replaced whole, which is right only because nobody else writes them.
    """

    api_version: str
    plural: str
    namespace: str | None
    name: str
    status: dict[str, Any]


@dataclass(frozen=True)
class Annotate:
    """A merge patch of ``metadata.annotations`` (a map: a merge patch adds keys and keeps the others)."""

    api_version: str
    plural: str
    namespace: str | None
    name: str
    annotations: dict[str, str]


@dataclass(frozen=True)
class MergePatch:
    """A merge patch of fields this controller may set on an object it does not own (``spec.suspend`` of a job,
    ``spec.active`` of a Workload): scalars only, never a list someone else shares."""

    api_version: str
    plural: str
    namespace: str | None
    name: str
    body: dict[str, Any]


@dataclass(frozen=True)
class JsonPatch:
    """A JSON patch whose first op tests the object's ``resourceVersion`` (a list with no merge key, such as a
    Node's ``spec.taints``, is replaced whole: a change made meanwhile fails the patch instead of being lost)."""

    api_version: str
    plural: str
    namespace: str | None
    name: str
    ops: list[dict[str, Any]]


@dataclass(frozen=True)
class Emit:
    """A core/v1 Event about an object; Kueue's ``kubectl get workloads`` does not show check messages."""

    body: dict[str, Any]
    admits: tuple[str, ...] = ()  # as ApplyStatus.admits: the Event that says a Workload was admitted


Action = Create | Delete | ApplyStatus | MergeStatus | Annotate | MergePatch | JsonPatch | Emit


@dataclass
class Counters:
    """What this pass recorded, for the metrics (counted once, when the controller writes the record)."""

    canary_runs: list[tuple[str, str]] = field(default_factory=list)  # (pool, outcome)
    job_verdicts: list[tuple[str, str, str]] = field(default_factory=list)  # (pool, verdict, transport)
    # (namespace, job, pool, median step seconds) of judged jobs that wrote step timings
    job_steps: list[tuple[str, str, str, float]] = field(default_factory=list)
    # (namespace, job, pool, verdict, transport) of each job judged this pass: the dashboard's job view reads it
    job_verdict_of: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    job_verdicts_waiting: int = 0  # finished jobs left for a later pass: the read budget was spent (lustre.py)


def event(
    obj: dict[str, Any],
    api_version: str,
    kind: str,
    reason: str,
    message: str,
    now: datetime,
    *,
    warning: bool,
) -> Emit:
    """An Event on ``obj``; its name is stable for the same object, reason, message and time (no duplicates).
    Every Event reads the same way: the reason says what, the message starts with it (no ``fabricguard:`` prefix:
    the Event's source already names the controller, and a check message's prefix is for `describe workload`)."""
    message = message.removeprefix("fabricguard: ")
    name = o.name_of(obj)
    ns = o.namespace_of(obj) or "default"
    digest = hashlib.sha256(f"{ns}/{name}/{reason}/{message}/{times.format_time(now)}".encode()).hexdigest()[:12]
    involved: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "name": name}
    if o.namespace_of(obj):
        involved["namespace"] = ns
    uid = o.meta(obj).get("uid")
    if uid:
        involved["uid"] = uid
    return Emit(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{digest}", "namespace": ns},
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": names.CONTROLLER_COMPONENT},
            "firstTimestamp": times.format_time(now),
            "lastTimestamp": times.format_time(now),
            "count": 1,
        }
    )
