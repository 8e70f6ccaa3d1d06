"""The package root's vocabulary: one time format, one duration grammar, one way to set a condition, one
definition of a node's pool, and no copies of them left in the parts."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard import names, objects, times
from fabricguard.cli import app
from fabricguard.placement.transition import STEPS, TransitionState, new_state
from fabricguard.profile import ProfileError, loads_profile

SRC = Path(__file__).resolve().parents[2] / "src" / "fabricguard"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


# ------------------------------------------------------------------------------------------------- times


@pytest.mark.parametrize(("text", "want"), [
    ("2026-11-30T12:00:00Z", T0),
    ("2026-11-30T12:00:00.123456Z", T0 + timedelta(microseconds=123456)),
    ("2026-11-30T13:00:00+01:00", T0),
    ("2026-11-30T12:00:00", T0),  # no zone: the API server only writes UTC
])
def test_api_times_parse_to_aware_utc_instants(text: str, want: datetime) -> None:
    got = times.parse_time(text)
    assert got == want and got is not None and got.tzinfo is not None


@pytest.mark.parametrize("bad", [None, "", "yesterday", 12, "2026-13-01T00:00:00Z", ["2026-11-30T12:00:00Z"]])
def test_unreadable_times_are_none(bad: object) -> None:
    assert times.parse_time(bad) is None


def test_times_are_written_in_utc_whole_seconds_with_z() -> None:
    plus_five = datetime(2026, 11, 30, 17, 0, 30, 999999, tzinfo=timezone(timedelta(hours=5)))
    assert times.format_time(plus_five) == "2026-11-30T12:00:30Z"
    assert times.format_time(datetime(2026, 11, 30, 12, 0)) == "2026-11-30T12:00:00Z"
    assert times.format_micro(plus_five) == "2026-11-30T12:00:30.999999Z"


def test_a_transition_state_records_utc_not_the_local_clock_labelled_z() -> None:
    """placement/transition.py wrote ``now`` with a "Z" without converting it: 17:00+05:00 became 17:00Z."""
    from fabricguard.placement.transition import TransitionSpec

    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

    spec = TransitionSpec.__new__(TransitionSpec)
    object.__setattr__(spec, "old", Named("a"))
    object.__setattr__(spec, "new", Named("b"))
    object.__setattr__(spec, "queue", Named("q"))
    object.__setattr__(spec, "digest", "x")
    state: TransitionState = new_state(spec, datetime(2026, 11, 30, 17, 0, tzinfo=timezone(timedelta(hours=5))))
    assert state.started == "2026-11-30T12:00:00Z" and [s.name for s in state.steps] == list(STEPS)


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("10m", 600), ("1h30m", 5400), ("24h", 86400), ("2d", 172800), ("1d12h", 129600),
    ("1h0m5s", 3605),
])
def test_one_duration_grammar(text: str, seconds: int) -> None:
    assert times.duration_seconds(text) == seconds
    assert times.parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("bad", ["", "10", "m", "1.5h", "-5m", "30m1h", "2w", "1 h"])
def test_durations_outside_the_grammar_are_refused_with_the_form(bad: str) -> None:
    with pytest.raises(times.DurationError, match=r"write it like 90s, 10m, 1h30m or 2d"):
        times.parse_duration(bad)


def test_profile_and_command_line_durations_accept_days_and_compounds(tmp_path: Path) -> None:
    prof = loads_profile(PROFILE.replace("interval: 30m", "interval: 1d"), "p.yaml")
    canary = prof.spec.pools[0].canary
    assert canary is not None and canary.interval_s == 86400
    res = CliRunner().invoke(app, ["pool", "transition", "apply", "--from", "x.yaml", "--to", "y.yaml",
                                   "--drain-deadline", "1d12h"])
    assert "--drain-deadline" not in res.output  # the option parsed; the missing files are the complaint
    res = CliRunner().invoke(app, ["pool", "transition", "apply", "--from", "x.yaml", "--to", "y.yaml",
                                   "--drain-deadline", "soon"])
    assert res.exit_code == 3


# -------------------------------------------------------------------------------------------- conditions


def test_set_condition_moves_the_transition_time_only_on_a_status_change() -> None:
    conds: list[dict[str, object]] = [{"type": "Other", "status": "True"}]
    first = objects.set_condition(conds, "Ready", "False", "Starting", "m1", T0, observed_generation=1)
    assert first["lastTransitionTime"] == "2026-11-30T12:00:00Z" and first["observedGeneration"] == 1
    later = T0 + timedelta(minutes=5)
    same = objects.set_condition(conds, "Ready", "False", "StillStarting", "m2", later, observed_generation=2)
    assert same["lastTransitionTime"] == "2026-11-30T12:00:00Z"
    assert (same["reason"], same["message"], same["observedGeneration"]) == ("StillStarting", "m2", 2)
    flipped = objects.set_condition(conds, "Ready", "True", "Done", "m3", later, observed_generation=2)
    assert flipped["lastTransitionTime"] == "2026-11-30T12:05:00Z"
    assert [c["type"] for c in conds] == ["Other", "Ready"] and conds[1] is flipped
    assert objects.find_condition({"status": {"conditions": conds}}, "Ready") is flipped
    assert objects.condition_true({"status": {"conditions": conds}}, "Ready")


@pytest.mark.parametrize("obj", [None, {}, {"status": None}, {"status": {"conditions": "x"}},
                                 {"status": {"conditions": ["x", {"type": 1}]}}, {"status": []}])
def test_conditions_of_hostile_objects_read_as_absent(obj: object) -> None:
    assert objects.find_condition(obj, "Ready") is None  # type: ignore[arg-type]
    assert objects.condition_true(obj, "Ready") is False  # type: ignore[arg-type]


def test_fabric_ready_condition_keeps_its_transition_time_across_heartbeats() -> None:
    from fabricguard.agent.condition import build_condition, judge
    from fabricguard.probes.result import Check, Status

    v = judge([Check("fabric.allocatable", Status.passed, "ok")])
    first = build_condition(v, None, T0)
    second = build_condition(v, first, T0 + timedelta(minutes=1))
    assert second["lastHeartbeatTime"] == "2026-11-30T12:01:00Z"
    assert second["lastTransitionTime"] == "2026-11-30T12:00:00Z"
    assert second["type"] == names.FABRIC_READY and "observedGeneration" not in second  # NodeCondition has none


# -------------------------------------------------------------------------------------------------- GPUs


def test_a_pods_gpus_are_its_peak_as_the_scheduler_counts() -> None:
    gpu = names.GPU_RESOURCE
    spec = {
        "initContainers": [{"name": "setup", "resources": {"limits": {gpu: "8"}}},
                           {"name": "side", "restartPolicy": "Always", "resources": {"requests": {gpu: 1}}}],
        "containers": [{"name": "main", "resources": {"limits": {gpu: "4"}, "requests": {gpu: "2"}}},
                       {"name": "bad", "resources": {"limits": {gpu: "lots"}}}],
    }
    assert objects.pod_gpus(spec, gpu) == 8  # the init container alone; 4 + 1 run together
    assert [c["name"] for c in objects.gpu_containers(spec, gpu)] == ["setup", "side", "main"]


# ------------------------------------------------------------------------------------------ node ∈ pool

PROFILE = """\
apiVersion: fabricguard.io/v1alpha1
kind: PlatformProfile
metadata: {name: two}
spec:
  storage: {lustre: {claimName: lustre, mountPath: /lustre, logDir: "/lustre/nccl/{namespace}/{job}"}}
  pools:
  - name: a
    nodeSelector: {pool: a}
    gpusPerNode: 8
    fabric: {type: infiniband, resources: {rdma/ib: 8}}
    canary: {interval: 30m}
  - name: b
    nodeSelector: {pool: b, zone: z1}
    gpusPerNode: 8
    fabric: {type: infiniband, resources: {rdma/ib: 8}}
"""


def test_pools_whose_selectors_can_match_one_node_are_refused() -> None:
    with pytest.raises(ProfileError, match=r"pools 'a' and 'b' can both match one node"):
        loads_profile(PROFILE.replace("{pool: b, zone: z1}", "{zone: z1}"), "p.yaml")
    prof = loads_profile(PROFILE, "p.yaml")  # same key, different values: disjoint
    node = {"metadata": {"name": "n", "labels": {"pool": "b", "zone": "z1", "extra": "x"}}}
    pool = prof.pool_of(node)
    assert pool is not None and pool.name == "b" and pool.matches(node)
    assert prof.pool_of({"metadata": {"labels": {"pool": "b"}}}) is None
    assert prof.pool_of({"metadata": {"labels": []}}) is None


def test_profile_check_refuses_overlapping_pools(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(PROFILE.replace("{pool: b, zone: z1}", "{zone: z1}"))
    res = CliRunner().invoke(app, ["profile", "check", str(p)])
    assert res.exit_code == 3 and "can both match one node" in res.output


# --------------------------------------------------------------------------------------------- no copies


def _sources() -> list[tuple[Path, str]]:
    return [(f, f.read_text()) for f in sorted(SRC.rglob("*.py")) if f.name not in ("names.py",)]


@pytest.mark.parametrize("key", [names.LABEL_POOL, names.KUEUE_API, names.FABRIC_READY, names.TAINT_UNVERIFIED,
                                 names.TAINT_DEGRADED, names.CHECK_CONTROLLER, names.LABEL_CANARY_POOL,
                                 names.KUEUE_QUEUE_NAME, names.JOBSET_API])
def test_each_name_is_spelled_only_in_names_py(key: str) -> None:
    spelled = [f.relative_to(SRC).as_posix() for f, text in _sources() if f'"{key}"' in text]
    assert spelled == [], f"{key!r} is spelled outside fabricguard/names.py in {spelled}"


def test_no_second_time_parser_or_condition_finder() -> None:
    copies = []
    for f, text in _sources():
        if f.name == "times.py":
            continue
        if re.search(r"fromisoformat|strftime\(\"%Y-%m-%dT", text):
            copies.append(f"{f.relative_to(SRC)}: parses or formats API times itself")
        if f.name != "objects.py" and re.search(r"get\(\"conditions\"\)", text):
            copies.append(f"{f.relative_to(SRC)}: reads status.conditions itself")
    assert copies == []
