"""The blast-radius budget and its latched breaker (fabricguard/breaker.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fabricguard import breaker
from fabricguard.breaker import BreakerState, Budget, BudgetError, judge, reset, step

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("population", "allowed"), [(0, 1), (1, 1), (9, 1), (10, 1), (19, 1), (20, 2), (64, 6),
                                                     (100, 10), (1000, 100)])
def test_the_default_budget_is_max_one_ten_percent(population: int, allowed: int) -> None:
    assert Budget().allowed(population) == allowed


@pytest.mark.parametrize("kwargs", [{"fraction": 1.5}, {"fraction": -0.1}, {"fraction": float("nan")},
                                    {"minimum": -1}, {"window_s": 0}, {"keep": -2}])
def test_a_budget_that_bounds_nothing_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(BudgetError):
        Budget(**kwargs)  # type: ignore[arg-type]


def test_failures_within_the_window_are_counted_older_ones_are_not() -> None:
    b = Budget(window_s=600)
    failing = {"n1": T0 - timedelta(seconds=700), "n2": T0 - timedelta(seconds=30), "n3": None}
    j = judge(b, 20, failing, T0)
    assert j.counted == ("n2", "n3") and j.allowed == 2 and not j.over
    j = judge(b, 10, failing, T0)
    assert j.over and "2 of 10 newly failing within 10m, budget 1" in j.reason


def test_keep_trips_when_too_few_stay_good() -> None:
    j = judge(Budget(keep=8), 10, {"n1": T0}, T0, good=7)
    assert j.over and "fewer than the 8 kept" in j.reason
    assert not judge(Budget(keep=8), 10, {"n1": T0}, T0, good=8).over


def test_the_breaker_latches_until_a_person_resets_it() -> None:
    b = Budget(window_s=300)
    st = BreakerState()
    many = {f"n{i}": T0 for i in range(5)}
    st = step(st, judge(b, 10, many, T0), T0)
    assert st.open and st.since == T0 and st.members == tuple(sorted(many))
    later = T0 + timedelta(hours=3)
    st = step(st, judge(b, 10, {}, later), later)  # nothing failing any more: still open
    assert st.open and breaker.withheld(st, ["n2", "n1"]) == ["n1", "n2"]
    st = reset(st, later)
    assert not st.open and st.resets == 1 and st.reset_at == later and breaker.withheld(st, ["n1"]) == []
    # what failed before the reset is not counted again; new failures are
    again = judge(b, 10, {**many, "m1": later + timedelta(seconds=5)}, later + timedelta(seconds=10), after=st.reset_at)
    assert again.counted == ("m1",) and not again.over


def test_state_round_trips_and_garbage_reads_as_closed() -> None:
    st = BreakerState(True, T0, "x", ("a", "b"), 2, T0 - timedelta(days=1))
    assert BreakerState.from_dict(st.to_dict()) == st
    for junk in (None, "open", [], {"open": "yes", "resets": True, "members": "a"}, {"resets": -3}):
        got = BreakerState.from_dict(junk)
        assert not got.open and got.resets == 0 and got.members == ()


def test_names_are_capped_for_events() -> None:
    assert breaker.name_members(["a", "b"]) == "a, b"
    assert breaker.name_members([f"n{i}" for i in range(25)], 3) == "n0, n1, n2, … and 22 more"
    assert Budget(fraction=0.1, window_s=3600, keep=4).describe(50) == (
        "at most 5 of 50 (max(1, 10%)) within 1h, never fewer than 4 good")
