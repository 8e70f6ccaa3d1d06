"""Staleness: a ``FabricReady`` condition whose heartbeat is too old says nothing, so it becomes ``Unknown``.

The Node Readiness Controller compares only a condition's type and status, never its age: a crashed agent's
last ``True`` would keep the node open for ever. Whoever sweeps (the validation controller, or ``fabricguard
agent sweep``) applies this rule; the rule itself is pure so both read the same thing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fabricguard import names
from fabricguard.agent.condition import Reason, status_patch
from fabricguard.objects import find_condition
from fabricguard.times import format_time, parse_time


def heartbeat_age(condition: dict[str, Any], now: datetime) -> float | None:
    """Seconds since the condition's ``lastHeartbeatTime``; None when it has none (or an unreadable one)."""
    t = parse_time(condition.get("lastHeartbeatTime"))
    return (now - t).total_seconds() if t else None


def is_stale(condition: dict[str, Any], now: datetime, max_age: timedelta) -> bool:
    """True for a ``True``/``False`` condition whose heartbeat is missing, older than ``max_age``, or more than
    ``max_age`` in the future.

    ``Unknown`` is already what staleness would make it. A heartbeat from the future comes from a node clock
    that runs ahead: within ``max_age`` it is clock skew and counts as fresh; further ahead it proves nothing
    (a clock a year ahead would otherwise keep a dead agent's ``True`` for a year), so it is stale too.
    """
    if condition.get("status") == "Unknown":
        return False
    age = heartbeat_age(condition, now)
    return age is None or abs(age) > max_age.total_seconds()


def stale_condition(condition: dict[str, Any], now: datetime, max_age: timedelta) -> dict[str, Any]:
    """The ``Unknown`` condition that replaces a stale one; the agent's last heartbeat is kept as evidence."""
    last = condition.get("lastHeartbeatTime") or "never"
    age = heartbeat_age(condition, now)
    since = f"since {last}" if age is None or age >= 0 else f"dated {last}, {int(-age)} s ahead of this clock"
    return {
        "type": names.FABRIC_READY,
        "status": "Unknown",
        "reason": str(Reason.stale),
        "message": (
            f"no report from the fabricguard agent {since} (more than {int(max_age.total_seconds())} s); "
            f"it last said {condition.get('status')} ({condition.get('reason', '')}). The fabric is unproven "
            "until the agent reports again."
        ),
        "lastHeartbeatTime": condition.get("lastHeartbeatTime") or format_time(now),
        "lastTransitionTime": format_time(now),
    }


def stale_patches(
    nodes: list[dict[str, Any]], now: datetime, max_age: timedelta
) -> list[tuple[str, dict[str, Any]]]:
    """(node name, strategic-merge status patch) for every node whose ``FabricReady`` is stale.

    Each patch carries the Node's ``resourceVersion``: an agent that reports between the read and the write
    wins, and its fresh condition is not overwritten with ``Unknown``.
    """
    out = []
    for n in nodes:
        cond = find_condition(n, names.FABRIC_READY)
        if cond is None or not is_stale(cond, now, max_age):
            continue
        meta = n.get("metadata") or {}
        body = status_patch(stale_condition(cond, now, max_age), meta.get("resourceVersion"))
        out.append((meta.get("name", ""), body))
    return out
