"""Times as the Kubernetes API writes them, and durations as people write them: one parser and one formatter each.

- :func:`parse_time` reads an RFC 3339 timestamp (``2025-01-02T03:04:05Z``, with or without fractional seconds,
  ``Z`` or an offset) as an aware datetime; a time without a zone is read as UTC (the API server only writes
  UTC); anything unreadable is None.
- :func:`format_time` writes the API server's ``Time``: converted to UTC, whole seconds, ``Z``;
  :func:`format_micro` its ``MicroTime`` (Leases).
- :func:`from_epoch_us` turns microseconds since the epoch read from a tenant's file into a datetime, or None
  outside year 1970 to 9999 (2^63 is not a time: ``datetime`` would raise); :data:`MAX_EPOCH_US` is that bound.
- :func:`parse_duration` reads a Go-style duration extended with days: ``90s``, ``10m``, ``1h30m``, ``2d``,
  ``1d12h``; the one grammar of every duration in a profile and on the command line.

Pure: no clock is read here; callers pass ``now``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
DURATION_EXAMPLES = "90s, 10m, 1h30m or 2d"


class DurationError(ValueError):
    """A duration that does not follow the grammar; the message quotes it and shows the form."""


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime (no zone: UTC); None when absent or unreadable."""
    if not value or not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def format_time(dt: datetime) -> str:
    """The API server's time format: UTC, whole seconds, ``Z`` (a naive datetime is taken as UTC)."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro(dt: datetime) -> str:
    """A Kubernetes ``MicroTime``: UTC, microseconds, ``Z``."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


MAX_EPOCH_US = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z, the last instant datetime holds


def from_epoch_us(us: Any, tz: Any = UTC) -> datetime | None:
    """Microseconds since the epoch as an aware datetime; None for anything that is not one (a bool, a float,
    a negative number, past year 9999)."""
    if isinstance(us, bool) or not isinstance(us, int) or not 0 <= us <= MAX_EPOCH_US:
        return None
    return datetime.fromtimestamp(us // 1_000_000, tz=UTC).replace(microsecond=us % 1_000_000).astimezone(tz or UTC)


def parse_duration(text: str) -> timedelta:
    """``90s``, ``10m``, ``1h30m``, ``2d`` as a timedelta; :class:`DurationError` for anything else."""
    m = _DURATION.match(text.strip()) if isinstance(text, str) else None
    if not text or not isinstance(text, str) or not text.strip() or m is None:
        raise DurationError(f"{text!r} is not a duration; write it like {DURATION_EXAMPLES}")
    d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    return timedelta(days=d, hours=h, minutes=mi, seconds=s)


def duration_seconds(text: str) -> int:
    """:func:`parse_duration` in whole seconds."""
    return int(parse_duration(text).total_seconds())
