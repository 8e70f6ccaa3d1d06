"""Common result types of every probe: a check with a status and a reason, and how statuses combine.

A probe never reports "ok" because it could not look: a check whose data is missing is ``failed`` with the
reason it could not be read, and a check that does not apply is ``skipped`` with the reason why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from fabricguard.exitcodes import exit_code as verdict_exit_code


class Status(StrEnum):
    passed = "pass"
    degraded = "degraded"
    failed = "failed"
    skipped = "skipped"


_RANK = {Status.skipped: 0, Status.passed: 1, Status.degraded: 2, Status.failed: 3}


def worst(statuses: list[Status] | tuple[Status, ...]) -> Status:
    """The most severe status; skipped checks do not make anything pass or fail. Empty -> skipped."""
    if not statuses:
        return Status.skipped
    return max(statuses, key=lambda s: _RANK[s])


def overall(statuses: list[Status]) -> Status:
    """Verdict of a whole probe: the worst check, and ``pass`` when every check was skipped or passed."""
    w = worst(statuses)
    return Status.passed if w is Status.skipped else w


def exit_code(status: Status) -> int:
    """The exit code of a probe's verdict, from the one mapping in ``fabricguard.exitcodes``."""
    return verdict_exit_code(status.value)


@dataclass
class Check:
    """One judged fact: ``name`` (a stable id), ``status``, ``detail`` (why, in words) and its data."""

    name: str
    status: Status
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = str(self.status)
        return d


STATUS_STYLE = {
    Status.passed: "bold green",
    Status.degraded: "bold yellow",
    Status.failed: "bold red",
    Status.skipped: "dim",
}
