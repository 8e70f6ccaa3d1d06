"""An open breaker releases taints at once but stops holding the pool only after a canary passed since it opened:
a mistake of ours costs at most one canary interval of held work, and a fabric that truly broke on every node at
once is never admitted onto (test_incident.py replays that case end to end)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fabricguard import breaker, times
from fabricguard.controller.blast import PoolBreakers
from fabricguard.controller.canaries import PoolState
from fabricguard.controller.reconcile import _canary_passed_after

OPENED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def pb(*, open_: bool = True) -> PoolBreakers:
    return PoolBreakers("a3", 20, 2, {"fabric.allocatable": breaker.BreakerState(open=open_, since=OPENED)})


def state(outcome: str, passed: datetime | None) -> PoolState:
    return PoolState(pool="a3", canary=True, ready=outcome == "passed", outcome=outcome, message="",
                     last_success=times.format_time(passed) if passed else None)


def test_a_canary_from_before_the_breaker_does_not_excuse_its_nodes() -> None:
    assert not _canary_passed_after(state("passed", OPENED - timedelta(seconds=1)), pb())


def test_a_canary_passing_after_it_opened_excuses_them() -> None:
    assert _canary_passed_after(state("passed", OPENED + timedelta(minutes=4)), pb())


def test_a_failed_newest_canary_or_no_state_never_excuses() -> None:
    assert not _canary_passed_after(state("fallback", OPENED + timedelta(minutes=4)), pb())
    assert not _canary_passed_after(None, pb())
    assert not _canary_passed_after(state("passed", None), pb())


def test_closed_breakers_excuse_nothing() -> None:
    assert not _canary_passed_after(state("passed", OPENED + timedelta(minutes=4)), pb(open_=False))
