"""The agent's pure rules: judging checks, damping, staleness, fallback taints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fabricguard.agent.condition import MAX_MESSAGE, Reason, build_condition, judge, status_patch
from fabricguard.agent.damping import Damper
from fabricguard.agent.staleness import is_stale, stale_condition, stale_patches
from fabricguard.agent.taints import taint_patch, wanted_taints
from fabricguard.probes.result import Check, Status

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
P = Check("a", Status.passed, "ok")


def test_no_check_is_not_a_pass() -> None:
    v = judge([])
    assert (v.status, v.reason) == ("False", Reason.check_error)


def test_skipped_only_is_not_a_pass() -> None:
    v = judge([Check("x", Status.skipped, "n/a")])
    assert (v.status, v.reason) == ("False", Reason.check_error)
    v = judge([Check("x", Status.skipped, "n/a"), P])
    assert v.status == "True" and v.message == "1 check(s) passed"


def test_message_names_every_failing_check_even_when_details_are_long() -> None:
    bad = [Check(f"check.{i:02d}", Status.failed, "x" * 400) for i in range(30)]
    v = judge([P, *bad])
    assert len(v.message) <= MAX_MESSAGE + 1
    assert all(f"check.{i:02d}" in v.message.split(" | ")[0] for i in range(30))
    assert v.message.endswith("…")


def test_error_wins_over_failure_for_the_reason() -> None:
    v = judge([Check("a", Status.failed, "broken"), Check("b", Status.failed, "boom", {"error": True})])
    assert v.reason == Reason.check_error and "(some could not run)" in v.message


def test_damper_needs_consecutive_passes_and_closes_at_once() -> None:
    d = Damper(2)
    ok, bad = judge([P]), judge([Check("a", Status.failed, "down")])
    assert [d.apply(x).status for x in (ok, ok, bad, ok, ok, ok)] == ["False", "True", "False", "False", "True",
                                                                        "True"]
    with pytest.raises(ValueError):
        Damper(0)


def test_transition_time_moves_only_with_the_status() -> None:
    ok = judge([P])
    first = build_condition(ok, None, NOW)
    again = build_condition(ok, first, NOW + timedelta(minutes=1))
    assert again["lastTransitionTime"] == "2026-11-30T12:00:00Z" and again["lastHeartbeatTime"] == "2026-11-30T12:01:00Z"
    flipped = build_condition(judge([Check("a", Status.failed, "x")]), again, NOW + timedelta(minutes=2))
    assert flipped["lastTransitionTime"] == "2026-11-30T12:02:00Z"
    assert status_patch(flipped, "42") == {"status": {"conditions": [flipped]}, "metadata": {"resourceVersion": "42"}}


@pytest.mark.parametrize(
    ("cond", "stale"),
    [
        ({"status": "True", "lastHeartbeatTime": "2026-11-30T11:57:01Z"}, False),
        ({"status": "True", "lastHeartbeatTime": "2026-11-30T11:56:59Z"}, True),
        ({"status": "False", "lastHeartbeatTime": "2026-11-30T10:00:00Z"}, True),
        ({"status": "True"}, True),
        ({"status": "True", "lastHeartbeatTime": "yesterday"}, True),
        ({"status": "True", "lastHeartbeatTime": "2026-11-30T12:02:59Z"}, False),  # clock skew: not stale
        ({"status": "True", "lastHeartbeatTime": "2026-11-30T12:05:00Z"}, True),  # further ahead than max_age
        ({"status": "True", "lastHeartbeatTime": "2027-11-30T12:00:00Z"}, True),  # a clock a year ahead
        ({"status": "Unknown", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}, False),
    ],
)
def test_staleness(cond: dict, stale: bool) -> None:
    assert is_stale({"type": "FabricReady", **cond}, NOW, timedelta(seconds=180)) is stale


def test_stale_condition_keeps_the_evidence() -> None:
    c = stale_condition({"type": "FabricReady", "status": "True", "reason": "AllChecksPassed",
                         "lastHeartbeatTime": "2026-11-30T11:00:00Z"}, NOW, timedelta(seconds=180))
    assert (c["status"], c["reason"], c["lastHeartbeatTime"]) == ("Unknown", "HeartbeatStale", "2026-11-30T11:00:00Z")
    assert "it last said True (AllChecksPassed)" in c["message"]
    node = {"metadata": {"name": "n", "resourceVersion": "7"},
            "status": {"conditions": [{"type": "FabricReady", "status": "True", "lastHeartbeatTime": "2026-11-30T11:00:00Z"}]}}
    [(name, body)] = stale_patches([node], NOW, timedelta(seconds=180))
    assert name == "n" and body["metadata"] == {"resourceVersion": "7"}


def node(taints: list[dict] | None, with_condition: bool) -> dict:
    n: dict = {"metadata": {"name": "n", "resourceVersion": "9"}, "spec": {}, "status": {"conditions": []}}
    if taints is not None:
        n["spec"]["taints"] = taints
    if with_condition:
        n["status"]["conditions"].append({"type": "FabricReady", "status": "False"})
    return n


def test_wanted_taints() -> None:
    assert wanted_taints(node(None, False), "False") == {"readiness.k8s.io/fabric-unverified"}
    assert wanted_taints(node(None, True), "False") == {"readiness.k8s.io/fabric-degraded"}
    assert wanted_taints(node([{"key": "readiness.k8s.io/fabric-unverified", "effect": "NoSchedule"}], True),
                         "Unknown") == {"readiness.k8s.io/fabric-unverified"}
    assert wanted_taints(node(None, False), "True") == set()


def test_taint_patch_keeps_other_taints_and_is_idempotent() -> None:
    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    n = node([gpu], True)
    ops = taint_patch(n, {"readiness.k8s.io/fabric-degraded"})
    assert ops == [{"op": "test", "path": "/metadata/resourceVersion", "value": "9"},
                   {"op": "add", "path": "/spec/taints",
                    "value": [gpu, {"key": "readiness.k8s.io/fabric-degraded", "effect": "NoSchedule"}]}]
    n["spec"]["taints"] = ops[1]["value"]
    assert taint_patch(n, {"readiness.k8s.io/fabric-degraded"}) is None
    assert taint_patch(n, set())[1]["value"] == [gpu]  # type: ignore[index]
    assert taint_patch(node(None, False), set()) is None
