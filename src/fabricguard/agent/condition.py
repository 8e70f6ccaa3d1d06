"""The ``FabricReady`` node condition: how check results become one condition, and the patch that writes it.

The condition is written with a strategic-merge patch on ``nodes/status``: ``status.conditions`` merges by
``type``, so the patch carries only this condition and the kubelet's own conditions are left alone.

Fail closed: a failed check, or one that could not run, makes the condition ``False``; a check that is
``degraded`` (say, GPUDirect RDMA not proven) keeps it ``True`` and is named in the message, because tainting a
node for what may be a configuration we cannot verify would take healthy capacity away.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from fabricguard import names, readiness_message
from fabricguard.objects import set_condition
from fabricguard.probes.result import Check, Status
from fabricguard.times import format_time

# The message is for people and `kubectl describe`; the names of failing checks always fit, details are cut.
MAX_MESSAGE = 1024


class Reason(StrEnum):
    """``reason`` of the condition (CamelCase, as Kubernetes conditions spell it)."""

    passed = "AllChecksPassed"
    warnings = "PassedWithWarnings"
    failed = "ChecksFailed"
    check_error = "CheckError"
    stabilizing = "AwaitingStablePasses"
    stale = "HeartbeatStale"
    unknown_pool = "NoPoolForNode"


@dataclass
class Readiness:
    """What the agent concluded from one run: the condition's status, reason and message, and the checks."""

    status: str  # "True" | "False" | "Unknown"
    reason: Reason
    message: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return self.status == "True"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": names.FABRIC_READY,
            "status": self.status,
            "reason": str(self.reason),
            "message": self.message,
            "checks": [c.to_dict() for c in self.checks],
        }


def _listing(lead: str, bad: list[Check]) -> str:
    return readiness_message.compose(lead, [(c.name, c.detail) for c in bad], MAX_MESSAGE)


def failing_checks(condition: dict[str, Any] | None) -> list[str]:
    """What a stored ``FabricReady`` condition says is failing, the reader of what :func:`judge` writes: the
    failing checks' names for ``ChecksFailed``/``CheckError``, else the reason itself (``HeartbeatStale``,
    ``AwaitingStablePasses``, ...) so every not-True condition is attributed to one thing; [] when True."""
    if not isinstance(condition, dict) or condition.get("status") == "True":
        return []
    reason = str(condition.get("reason") or "") or "NoReason"
    if reason in (Reason.failed, Reason.check_error):
        msg = readiness_message.parse(str(condition.get("message") or ""))
        if msg.failed and msg.checks:
            return msg.checks
    return [reason]


def judge(checks: list[Check]) -> Readiness:
    """One run's checks -> the condition to report (before damping). No check that ran is not a pass."""
    if not checks:
        return Readiness("False", Reason.check_error, "no check ran: nothing proves this node's fabric", checks)
    failed = [c for c in checks if c.status is Status.failed]
    if failed:
        errored = any(c.data.get("error") for c in failed)
        reason = Reason.check_error if errored else Reason.failed
        lead = f"{len(failed)} check(s) failed" + (" (some could not run)" if errored else "")
        return Readiness("False", reason, _listing(lead, failed), checks)
    degraded = [c for c in checks if c.status is Status.degraded]
    ran = sum(1 for c in checks if c.status is not Status.skipped)
    if ran == 0:
        return Readiness("False", Reason.check_error, "every check was skipped: nothing proves this node's fabric",
                       checks)
    if degraded:
        return Readiness("True", Reason.warnings, _listing(f"{ran} check(s) passed; warnings", degraded), checks)
    return Readiness("True", Reason.passed, f"{ran} check(s) passed", checks)


def build_condition(verdict: Readiness, previous: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
    """The condition as stored on the Node: ``lastHeartbeatTime`` is every report, ``lastTransitionTime``
    only moves when the status changes."""
    # NodeCondition has no observedGeneration (a Node's status is not computed from its spec).
    return set_condition([dict(previous)] if previous else [], names.FABRIC_READY, verdict.status,
                         str(verdict.reason), verdict.message, now, lastHeartbeatTime=format_time(now))


def status_patch(condition: dict[str, Any], resource_version: str | None = None) -> dict[str, Any]:
    """Strategic-merge patch body for ``nodes/<name>/status`` that touches only this condition.

    With ``resource_version`` the API server applies it only if the Node has not changed since it was read.
    """
    body: dict[str, Any] = {"status": {"conditions": [condition]}}
    if resource_version:
        body["metadata"] = {"resourceVersion": resource_version}
    return body
