"""The result documents the probes write (``probe collective`` / ``probe storage`` with ``--format json``, one per
rank or node into a canary's result directory) as typed records, for whoever reads them back (the controller's
canary judgement).

A record is read from what a canary's pod wrote, a file a tenant-run image could have written: anything that is
not the probe's shape raises :class:`RecordError` naming the field, and the reader counts that file as unusable
instead of guessing. The writers are ``collective.CollectiveResult.to_dict`` and ``storage.StorageReport.to_dict``;
``tests/probes/test_records.py`` round-trips both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from fabricguard.probes.bw import Row
from fabricguard.probes.result import Check, Status

MAX_RAILS = 64  # rails read from one result (a node has 8 or 16); the rest of a hostile list is not read


class RecordError(ValueError):
    """A result document that is not the probe's shape; the message names the field."""


def _field(d: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any) -> Any:
    v = d.get(key, default)
    if v is None:
        return default
    if not isinstance(v, kind) or (isinstance(v, bool) and kind is not bool):
        raise RecordError(f"{key}: {type(v).__name__}, not {getattr(kind, '__name__', kind)}")
    return v


def _row(d: Any, i: int) -> Row:
    if not isinstance(d, Mapping):
        raise RecordError(f"rows[{i}]: not an object")
    try:
        return Row(**{f.name: d[f.name] for f in fields(Row)})
    except KeyError as e:
        raise RecordError(f"rows[{i}]: no {e.args[0]}") from None


def _check(d: Any, i: int) -> Check:
    if not isinstance(d, Mapping):
        raise RecordError(f"checks[{i}]: not an object")
    try:
        status = Status(str(d.get("status")))
    except ValueError:
        raise RecordError(f"checks[{i}].status: {d.get('status')!r} is not a status") from None
    data = d.get("data")
    return Check(str(d.get("name") or ""), status, str(d.get("detail") or ""), dict(data) if isinstance(data, Mapping)
                 else {})


@dataclass(frozen=True)
class CollectiveRecord:
    """One rank's ``probe collective`` result."""

    backend: str
    world_size: int
    rows: list[Row] = field(default_factory=list)
    failed: bool = False
    error: str | None = None
    transport: str = "unknown"
    transport_why: str = ""
    rails: list[dict[str, Any]] = field(default_factory=list)  # --rails: each rail alone (bw.slow_rails reads it)

    @classmethod
    def from_dict(cls, d: Any) -> CollectiveRecord:
        if not isinstance(d, Mapping):
            raise RecordError("not an object")
        rows = _field(d, "rows", list, [])
        error = d.get("error")
        return cls(str(_field(d, "backend", str, "")), int(_field(d, "world_size", int, 0)),
                   [_row(r, i) for i, r in enumerate(rows)], bool(_field(d, "failed", bool, False)),
                   str(error) if error else None, str(_field(d, "transport", str, "unknown")),
                   str(_field(d, "transport_why", str, "")),
                   [dict(r) for r in _field(d, "rails", list, [])[:MAX_RAILS] if isinstance(r, Mapping)])


@dataclass(frozen=True)
class PhaseRate:
    """One sequential phase of ``probe storage`` (``metrics.write`` / ``metrics.read``): its aggregate rate and
    whether it lasted long enough to mean anything (``storage.mark_meaningful``)."""

    mbps: float
    seconds: float
    meaningful: bool

    @classmethod
    def from_dict(cls, d: Any, key: str) -> PhaseRate | None:
        if d is None:
            return None
        if not isinstance(d, Mapping):
            raise RecordError(f"metrics.{key}: not an object")
        rate, secs = d.get("MBps"), d.get("seconds", 0.0)
        for name, v in (("MBps", rate), ("seconds", secs)):
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 1e12:
                raise RecordError(f"metrics.{key}.{name}: {v!r} is not a rate")
        assert isinstance(rate, int | float) and isinstance(secs, int | float)
        return cls(float(rate), float(secs), d.get("meaningful") is not False)


@dataclass(frozen=True)
class StorageRecord:
    """One node's ``probe storage`` result: its checks and, when the workload ran, its write and read rates."""

    status: Status | None
    checks: list[Check] = field(default_factory=list)
    write: PhaseRate | None = None
    read: PhaseRate | None = None

    @classmethod
    def from_dict(cls, d: Any) -> StorageRecord:
        if not isinstance(d, Mapping):
            raise RecordError("not an object")
        raw = d.get("status")
        try:
            status = Status(str(raw).lower()) if raw else None
        except ValueError:
            raise RecordError(f"status: {raw!r} is not a status") from None
        metrics = _field(d, "metrics", Mapping, {})
        return cls(status, [_check(c, i) for i, c in enumerate(_field(d, "checks", list, []))],
                   PhaseRate.from_dict(metrics.get("write"), "write"), PhaseRate.from_dict(metrics.get("read"), "read"))
