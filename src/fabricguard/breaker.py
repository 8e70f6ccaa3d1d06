"""A blast-radius budget and the breaker it trips: how much fabricguard may close before it assumes its own fault.

A fail-closed gate with no limit on how much it can close turns one mistake of ours (a typo in a resource name, a
broken agent image, a driver path we did not foresee) into a whole pool tainted and every queue held. The field
bounds this the same way everywhere: NVSentinel stops quarantining past a share of nodes within minutes, EKS node
repair has ``maxUnhealthyNodeThreshold``, NRC has ``dryRun``. Here:

- a :class:`Budget` says how many members of a population (the nodes of a pool) may *newly* fail one thing (one
  check) within a sliding window: ``max(minimum, floor(fraction * population))``, and, optionally, how many
  members must stay good (never fewer ready nodes than the largest admitted gang);
- :func:`judge` compares what happened (each member's time of failing) against the budget: a :class:`Judgement`
  that names the members it counted, so an alert and an Event can name them;
- a :class:`BreakerState` latches: once over budget it stays open, whatever happens next, until a person resets
  it (:func:`reset`). While open, the caller stops acting on that thing (no taint, no hold) and says so.

Pure: no clock, no API. The state round-trips through a plain dict (:meth:`BreakerState.to_dict` /
:meth:`BreakerState.from_dict`) so callers can keep it where they like (a status, a ConfigMap, an annotation).
The same module serves the controller's checks and any other actor (node quarantine) that needs a budget.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from fabricguard import times

DEFAULT_FRACTION = 0.10
DEFAULT_MINIMUM = 1
DEFAULT_WINDOW_S = 3600
MAX_NAMED = 20  # members named in a reason; the rest are counted (Events and conditions must stay readable)


class BudgetError(ValueError):
    """A budget that cannot bound anything (a fraction outside 0..1, a negative minimum, an empty window)."""


@dataclass(frozen=True)
class Budget:
    """At most ``allowed(population)`` members may newly fail within ``window_s`` seconds.

    ``fraction`` of the population (rounded down), never less than ``minimum``: with ``minimum=1`` a single bad
    node is always acted on, however small the pool. ``keep`` (optional): the fewest members that must stay good;
    acting on one more would leave fewer than that (a pool that can no longer place its largest gang).
    """

    fraction: float = DEFAULT_FRACTION
    minimum: int = DEFAULT_MINIMUM
    window_s: int = DEFAULT_WINDOW_S
    keep: int = 0

    def __post_init__(self) -> None:
        if not (0.0 <= self.fraction <= 1.0) or math.isnan(self.fraction):
            raise BudgetError(f"fraction {self.fraction!r} must be between 0 and 1 (0.1 is 10%)")
        if self.minimum < 0:
            raise BudgetError(f"minimum {self.minimum!r} must be 0 or more")
        if self.window_s <= 0:
            raise BudgetError(f"window {self.window_s!r}s must be longer than 0 seconds")
        if self.keep < 0:
            raise BudgetError(f"keep {self.keep!r} must be 0 or more")

    def allowed(self, population: int) -> int:
        """How many members may newly fail within one window."""
        return max(self.minimum, math.floor(self.fraction * max(population, 0) + 1e-9))

    def describe(self, population: int) -> str:
        pct = f"{self.fraction * 100:g}%"
        out = (f"at most {self.allowed(population)} of {population} (max({self.minimum}, {pct})) "
               f"within {_span(self.window_s)}")
        if self.keep:
            out += f", never fewer than {self.keep} good"
        return out


def _span(seconds: int) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True)
class Judgement:
    """What :func:`judge` found: ``over`` is True when acting on every counted member would exceed the budget."""

    over: bool
    counted: tuple[str, ...]  # members newly failing within the window, oldest first
    allowed: int
    population: int
    good: int | None = None
    reason: str = ""

    @property
    def spent(self) -> int:
        return len(self.counted)


def judge(budget: Budget, population: int, failing_since: Mapping[str, datetime | None], now: datetime, *,
          good: int | None = None, after: datetime | None = None) -> Judgement:
    """Count the members that newly failed within the window and compare with the budget.

    ``failing_since``: member -> when it started failing (None: unknown time, counted as now: a failure we cannot
    date is not excused). A member failing since before the window is not *new*: it was already acted on (or
    already counted by an earlier window). ``good``: members good now (checked against ``budget.keep``).
    ``after``: count only failures after this time (a breaker's last reset: what a person looked at and
    released is not counted again).
    """
    start = now - timedelta(seconds=budget.window_s)
    if after is not None and after > start:
        start = after
    recent = sorted(((t or now), m) for m, t in failing_since.items() if (t or now) > start)
    counted = tuple(m for _, m in recent)
    allowed = budget.allowed(population)
    reasons: list[str] = []
    if len(counted) > allowed:
        reasons.append(f"{len(counted)} of {population} newly failing within {_span(budget.window_s)}, "
                       f"budget {allowed}")
    if budget.keep and good is not None and good < budget.keep and counted:  # a new failure left too few
        reasons.append(f"only {good} good, fewer than the {budget.keep} kept")
    return Judgement(bool(reasons), counted, allowed, population, good, "; ".join(reasons))


def name_members(members: Iterable[str], limit: int = MAX_NAMED) -> str:
    """``a, b, c`` or ``a, b, … and 12 more``: a list that fits an Event."""
    ms = list(members)
    if len(ms) <= limit:
        return ", ".join(ms)
    return ", ".join(ms[:limit]) + f", … and {len(ms) - limit} more"


@dataclass(frozen=True)
class BreakerState:
    """One breaker (say, pool ``a3`` x check ``rdma.resources``): closed, or open since a time, for a reason."""

    open: bool = False
    since: datetime | None = None
    reason: str = ""
    members: tuple[str, ...] = field(default_factory=tuple)
    resets: int = 0  # how many times a person reset it (visible, never silent)
    reset_at: datetime | None = None  # the last reset: failures before it are not counted again

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"open": self.open, "resets": self.resets}
        if self.since is not None:
            out["since"] = times.format_time(self.since)
        if self.reset_at is not None:
            out["resetAt"] = times.format_time(self.reset_at)
        if self.reason:
            out["reason"] = self.reason
        if self.members:
            out["members"] = list(self.members)
        return out

    @classmethod
    def from_dict(cls, data: Any) -> BreakerState:
        """Read back what :meth:`to_dict` wrote; anything unreadable is a closed breaker with its count kept."""
        if not isinstance(data, Mapping):
            return cls()
        members = data.get("members")
        resets = data.get("resets")
        return cls(
            open=data.get("open") is True,
            since=times.parse_time(data.get("since")),
            reason=str(data.get("reason") or "")[:1024],
            members=tuple(str(m) for m in members if isinstance(m, str))[:1000] if isinstance(members, list) else (),
            resets=resets if isinstance(resets, int) and not isinstance(resets, bool) and resets >= 0 else 0,
            reset_at=times.parse_time(data.get("resetAt")),
        )


def step(state: BreakerState, judgement: Judgement, now: datetime) -> BreakerState:
    """The breaker after one judgement: it opens when over budget and then stays open (latched) until reset."""
    if state.open:
        return state
    if judgement.over:
        return replace(state, open=True, since=now, reason=judgement.reason, members=judgement.counted)
    return state


def reset(state: BreakerState, now: datetime) -> BreakerState:
    """A person's reset: closed, the count of resets moved on, and only failures after ``now`` count again (the
    next trip needs a fresh budget's worth; what was open is now acted on, as the person decided)."""
    return replace(state, open=False, since=None, reason="", members=(), resets=state.resets + 1, reset_at=now)


def states_of(fv: Mapping[str, Any] | None) -> dict[str, BreakerState]:
    """The breakers a FabricValidation keeps in ``status.breakers`` (a list of states, each with its ``check``):
    the one reader, for the controller that writes them and the agents that honour them."""
    out: dict[str, BreakerState] = {}
    status = (fv or {}).get("status")
    entries = status.get("breakers") if isinstance(status, Mapping) else None
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, Mapping) and isinstance(entry.get("check"), str):
            out[entry["check"]] = BreakerState.from_dict(entry)
    return out


def withheld(state: BreakerState, members: Iterable[str]) -> list[str]:
    """The members an open breaker keeps the caller from acting on (all of them); none while closed."""
    return sorted(members) if state.open else []
