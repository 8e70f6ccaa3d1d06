"""Findings and the small helpers every doctor rule shares (time parsing, object references, quantities).

A finding is what a person acts on: the rule that raised it, how bad it is, the Kubernetes objects it is
about, a sentence that explains it, the field paths and values that prove it, and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fabricguard.quantity import amount_or_zero


class Severity(StrEnum):
    critical = "critical"
    warning = "warning"
    info = "info"


SEVERITY_ORDER = {Severity.critical: 0, Severity.warning: 1, Severity.info: 2}


@dataclass(frozen=True)
class ObjRef:
    """A Kubernetes object a finding is about; ``namespace`` is None for cluster-scoped objects."""

    kind: str
    name: str
    namespace: str | None = None

    def to_dict(self) -> dict[str, str]:
        out = {"kind": self.kind}
        if self.namespace:
            out["namespace"] = self.namespace
        out["name"] = self.name
        return out

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"

    @classmethod
    def of(cls, obj: dict[str, Any]) -> ObjRef:
        meta = obj.get("metadata") or {}
        return cls(kind=str(obj.get("kind", "")), name=str(meta.get("name", "")), namespace=meta.get("namespace"))


@dataclass
class Finding:
    rule: str
    severity: Severity
    objects: list[ObjRef]
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str = ""
    # Pools the finding concerns (for the pool x check grid); not part of the JSON contract.
    pools: list[str] = field(default_factory=list)
    # The finding this one follows from ("image-arch-mismatch on DaemonSet ns/name"), set by the engine's
    # ranking: its fix fixes this one too, so the story is told once, cause first.
    cause: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": str(self.severity),
            "objects": [o.to_dict() for o in self.objects],
            "message": self.message,
            "evidence": self.evidence,
            "fix": self.fix,
            "cause": self.cause or None,
        }


def human_age(seconds: float) -> str:
    """``271 days``, ``5 hours``, ``3 minutes``: the unit a person would say."""
    s = max(0, int(seconds))
    if s >= 2 * 86400:
        return f"{s // 86400} days"
    if s >= 86400:
        return "1 day"
    if s >= 7200:
        return f"{s // 3600} hours"
    if s >= 120:
        return f"{s // 60} minutes"
    return f"{s} seconds"


def quantity(value: Any) -> float:
    """A Kubernetes quantity (``8``, ``1k``, ``500m``, ``16Gi``) as a number, read by fabricguard.quantity.

    Objects in a snapshot were accepted by the API server, so absent or unreadable amounts count as 0.
    """
    return float(amount_or_zero(value))



@dataclass(frozen=True)
class CoverageCell:
    """One node of a proof pool in the doctor's coverage grid (node x proof age and result)."""

    node: str
    result: str  # proven | stale | never | the FabricProven=False reason (Convicted, ChangedSinceProof, ...)
    age_s: float | None  # since its last passing pair test, None when never proven
    busbw_gbps: float | None
    partner: str
    detail: str  # the FabricProven message, or the pair that proved it

    @property
    def age(self) -> str:
        return "never" if self.age_s is None else human_age(self.age_s)

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "result": self.result,
                "ageSeconds": None if self.age_s is None else int(self.age_s),
                "busbwGBps": self.busbw_gbps, "partner": self.partner or None, "detail": self.detail or None}
