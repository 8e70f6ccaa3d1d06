"""``Snapshot.select`` and ``Snapshot.fold`` keep per-object answers across snapshots (controller/incremental.py
carries them from pass to pass) and still give exactly what computing everything again gives.

Random edits the way the controller's cache makes them (an object replaced by a new one, added, deleted, a list
reordered, an equal object newly decoded) run through a chain of snapshots that each inherit the previous ones'
answers; every call is compared with the plain comprehension over the same objects."""

from __future__ import annotations

import copy
import random
from functools import partial
from typing import Any

from fabricguard.doctor.snapshot import Snapshot


def _bad(limit: int, obj: dict[str, Any]) -> tuple[str, int] | None:
    """A pure per-object answer: (name, value) when the value is over ``limit``."""
    return (obj["metadata"]["name"], obj["v"]) if obj["v"] > limit else None


def _total(objs: list[dict[str, Any]]) -> tuple[int, tuple[str, ...]]:
    return sum(o["v"] for o in objs), tuple(o["metadata"]["name"] for o in objs)


def _edit(rng: random.Random, objs: list[dict[str, Any]], serial: list[int]) -> list[dict[str, Any]]:
    objs = list(objs)
    what = rng.choice(["replace", "replace", "add", "delete", "swap", "resend", "nothing"])
    if what == "replace" and objs:
        i = rng.randrange(len(objs))
        objs[i] = copy.deepcopy(objs[i]) | {"v": rng.randrange(10)}
    elif what == "add":
        serial[0] += 1
        objs.insert(rng.randrange(len(objs) + 1), {"metadata": {"name": f"n{serial[0]}"}, "v": rng.randrange(10)})
    elif what == "delete" and objs:
        del objs[rng.randrange(len(objs))]
    elif what == "swap" and len(objs) > 1:
        i, j = rng.sample(range(len(objs)), 2)
        objs[i], objs[j] = objs[j], objs[i]
    elif what == "resend" and objs:
        i = rng.randrange(len(objs))
        objs[i] = copy.deepcopy(objs[i])
    return objs


def test_kept_answers_equal_computing_everything_again() -> None:
    for seed in range(5):
        rng = random.Random(seed)
        serial = [0]
        objs = [{"metadata": {"name": f"o{i}"}, "v": rng.randrange(10)} for i in range(40)]
        memo: dict[Any, Any] = {}
        for step in range(150):
            objs = _edit(rng, objs, serial)
            snap = Snapshot(objects=objs, source="test")
            snap.known_memo = dict(memo)
            limit = rng.choice([5, 5, 5, 7])  # another argument: nothing kept for 5 is given for 7
            got = snap.select("bad", objs, partial(_bad, limit))
            assert got == [(o, v) for o in objs if (v := _bad(limit, o))], (seed, step)
            assert all(a is b for (a, _), b in zip(got, [o for o in objs if _bad(limit, o)], strict=True))
            assert snap.select("bad", objs, partial(_bad, limit)) is got  # asked again in one pass: the same list
            assert snap.fold("total", objs, _total) == _total(objs), (seed, step)
            memo.update(snap.memo_seen())


def test_one_replaced_object_is_one_answer_computed() -> None:
    objs = [{"metadata": {"name": f"o{i}"}, "v": i % 10} for i in range(1000)]
    memo: dict[Any, Any] = {}
    for step in range(20):
        if step:
            objs = list(objs)
            objs[step * 37] = copy.deepcopy(objs[step * 37]) | {"v": 9}
        snap = Snapshot(objects=objs)
        snap.known_memo = dict(memo)
        snap.select("bad", objs, partial(_bad, 5))
        assert snap.computed == (1000 if step == 0 else 1), (step, snap.computed)
        memo.update(snap.memo_seen())


def test_a_function_made_anew_or_with_other_arguments_gets_nothing_kept() -> None:
    objs = [{"metadata": {"name": "a"}, "v": 9}, {"metadata": {"name": "b"}, "v": 1}]
    first = Snapshot(objects=objs)
    assert [v for _, v in first.select("bad", objs, partial(_bad, 5))] == [("a", 9)]
    second = Snapshot(objects=objs)
    second.known_memo = dict(first.memo_seen())
    assert second.select("bad", objs, partial(_bad, 5)) is first.select("bad", objs, partial(_bad, 5))
    assert second.computed == 0
    assert [v for _, v in second.select("bad", objs, partial(_bad, 0))] == [("a", 9), ("b", 1)]
    assert second.select("bad", objs, lambda o: _bad(5, o)) == [(objs[0], ("a", 9))] and second.computed == 4
