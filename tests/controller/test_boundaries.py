"""Exact boundaries and guards of the controller's pure logic, one test per surviving mutant of the mutation
pass on issue 16: the gate leaves finished workloads alone, a pool stays ready for exactly two intervals after
its last success, a canary starts exactly one interval after the last, and a Pending canary is unschedulable
exactly at pendingTimeout (each tested one second either side)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from controller_support import NOW, POOL, PROFILE, admission_check, ts, workload

from fabricguard.controller.canaries import CanaryConfig, Inventory, PoolState, _evaluate, pool_state, reconcile_pool
from fabricguard.controller.gate import gate_workloads
from fabricguard.controller.outcome import CanaryRun, Outcome
from fabricguard.profile import loads_profile

PROF = loads_profile(PROFILE, "profile.yaml")
THE_POOL = PROF.pool(POOL)
CANARY = PROF.canary(THE_POOL)
assert CANARY is not None and CANARY.interval_s == 600 and CANARY.pending_timeout_s == 180


def failing_state() -> dict[str, PoolState]:
    return {POOL: PoolState(POOL, True, False, "fallback", f"pool {POOL}: canary fallback")}


def _with_condition(wl: dict, ctype: str, status: str) -> dict:
    wl["status"]["conditions"] = [c for c in wl["status"]["conditions"] if c["type"] != ctype]
    wl["status"]["conditions"].append({"type": ctype, "status": status, "reason": ctype, "message": "",
                                       "lastTransitionTime": ts(NOW)})
    return wl


def test_the_gate_holds_a_reserved_workload_of_a_failing_pool() -> None:
    res = gate_workloads(PROF, [workload("train")], [admission_check()], failing_state(), NOW)
    assert res.pending == {POOL: 1} and res.actions  # the baseline the guards below are measured against


@pytest.mark.parametrize("ctype", ["Finished", "Admitted"])
def test_the_gate_leaves_finished_and_admitted_workloads_alone(ctype: str) -> None:
    """Turning a finished (or admitted) workload's check back to Pending would evict or re-queue it."""
    wl = _with_condition(workload("done"), ctype, "True")
    res = gate_workloads(PROF, [wl], [admission_check()], failing_state(), NOW)
    assert res.actions == [] and res.pending == {}
    wl = _with_condition(workload("not-done"), ctype, "False")
    assert gate_workloads(PROF, [wl], [admission_check()], failing_state(), NOW).pending == {POOL: 1}


def _passed(finished_ago: timedelta) -> tuple[list[CanaryRun], str]:
    finished = ts(NOW - finished_ago)
    run = CanaryRun("canary-1", Outcome.passed, ts(NOW - finished_ago - timedelta(minutes=2)), finished, "ib")
    return [run], finished


def test_a_pool_is_ready_for_exactly_two_intervals_after_its_last_success() -> None:
    runs, last = _passed(timedelta(seconds=1200))
    assert pool_state(THE_POOL, CANARY, runs, last, NOW).ready
    runs, last = _passed(timedelta(seconds=1201))
    late = pool_state(THE_POOL, CANARY, runs, last, NOW)
    assert not late.ready and "within two intervals (1200 s)" in late.message


def _status(started_ago: timedelta) -> dict:
    return {"metadata": {"name": POOL, "uid": "fv-1"},
            "status": {"runs": [{"name": "canary-0", "outcome": "passed", "started": ts(NOW - started_ago),
                                 "finished": ts(NOW - started_ago + timedelta(minutes=2)), "message": "ib"}],
                       "lastSuccess": ts(NOW - started_ago + timedelta(minutes=2))}}


def _node(name: str) -> dict:
    return {"metadata": {"name": name, "labels": dict(THE_POOL.nodeSelector)},
            "status": {"allocatable": {THE_POOL.gpuResource: str(THE_POOL.gpusPerNode)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize(("ago", "starts"), [(600, True), (599, False)])
def test_a_canary_starts_exactly_one_interval_after_the_last(ago: int, starts: bool, tmp_path) -> None:
    inv = Inventory.build([_node("n1"), _node("n2")], [], [], {THE_POOL.gpuResource})
    cfg = CanaryConfig(namespace="fabricguard-system", image="img@sha256:" + "ab" * 32, lustre_root=tmp_path)
    from fabricguard.controller.actions import Counters

    actions, _ = reconcile_pool(PROF, THE_POOL, _status(timedelta(seconds=ago)), [], inv, NOW, cfg, Counters())
    created = [a for a in actions if type(a).__name__ == "Create" and getattr(a, "plural", "") == "jobsets"]
    assert bool(created) is starts


def _pending_jobset(age_s: int) -> dict:
    return {"metadata": {"name": "canary-x", "namespace": "fabricguard-system",
                         "creationTimestamp": ts(NOW - timedelta(seconds=age_s))}, "status": {}}


@pytest.mark.parametrize(("age", "unschedulable"), [(180, True), (179, False)])
def test_a_pending_canary_is_unschedulable_exactly_at_pending_timeout(age: int, unschedulable: bool) -> None:
    pods = [{"metadata": {"name": f"canary-x-{i}"}, "spec": {}, "status": {"phase": "Pending"}} for i in range(2)]
    inv = Inventory.build([], pods, [], {THE_POOL.gpuResource})
    run = _evaluate(PROF, THE_POOL, CANARY, _pending_jobset(age), pods, inv, NOW, None)
    assert (run is not None and run.outcome is Outcome.unschedulable) is unschedulable
    if run is not None:
        assert f"Pending for {age} s (timeout 3m)" in run.message


def _finished_canary(name: str) -> dict:
    return {"metadata": {"name": name, "namespace": "fabricguard-system", "labels": {"fabricguard.io/canary-pool": POOL},
                         "creationTimestamp": ts(NOW - timedelta(minutes=5))},
            "status": {"conditions": [{"type": "Completed", "status": "True", "lastTransitionTime": ts(NOW)}]}}


def test_the_pass_judges_canaries_from_the_values_read_at_the_edge(tmp_path) -> None:
    """reconcile_pool reads no file: the run's judgement comes in ``lustre`` (controller.lustre reads it)."""
    from fabricguard.controller.actions import Counters, MergeStatus
    from fabricguard.controller.lustre import CanaryFiles, LustreFacts
    from fabricguard.controller.outcome import Judged

    missing = tmp_path / "not-mounted"  # nothing there: a pass that read Lustre itself would fail the run
    cfg = CanaryConfig(namespace="fabricguard-system", image="img@sha256:" + "ab" * 32, lustre_root=missing)
    js = _finished_canary("fgc-run-1")
    inv = Inventory.build([], [], [], {THE_POOL.gpuResource})
    facts = LustreFacts(missing, canaries={("fabricguard-system", "fgc-run-1"): CanaryFiles(
        "/lustre/run-1", Judged(Outcome.passed, "ib at 400 GB/s", [], "ib", {"all_reduce": 400.0}))})
    actions, state = reconcile_pool(PROF, THE_POOL, _status(timedelta(seconds=60)), [js], inv, NOW, cfg,
                                    Counters(), facts)
    (status,) = [a for a in actions if isinstance(a, MergeStatus)]
    runs = {r["name"]: r for r in status.status["runs"]}
    assert runs["fgc-run-1"]["outcome"] == "passed" and runs["fgc-run-1"]["message"] == "ib at 400 GB/s"
    assert state.ready
    # Not read this pass (absent from the facts): nothing is recorded and the JobSet is kept for the next pass.
    actions, _ = reconcile_pool(PROF, THE_POOL, _status(timedelta(seconds=60)), [js], inv, NOW, cfg, Counters(),
                                LustreFacts(missing))
    recorded = [r["name"] for a in actions if isinstance(a, MergeStatus) for r in a.status["runs"]]
    assert "fgc-run-1" not in recorded and not [a for a in actions if type(a).__name__ == "Delete"]


def test_the_validated_condition_carries_its_generation_and_moves_only_on_a_change() -> None:
    from fabricguard.controller.actions import MergeStatus
    from fabricguard.controller.rootcause import fv_actions
    from fabricguard.controller.validation import FabricValidationStatus
    from fabricguard.doctor.snapshot import Snapshot

    fv = {"kind": "FabricValidation", **_status(timedelta(seconds=300))}
    fv["metadata"]["generation"] = 4
    ready = PoolState(POOL, True, True, "passed", f"pool {POOL}: canary passed")

    def conditions(state: PoolState, at) -> dict[str, dict] | None:  # type: ignore[no-untyped-def]
        writes = [a for a in fv_actions(PROF, Snapshot([fv]), {POOL: state}, [], at) if isinstance(a, MergeStatus)]
        if not writes:
            return None
        FabricValidationStatus.model_validate(writes[0].status)
        return {c["type"]: c for c in writes[0].status["conditions"]}

    first = conditions(ready, NOW)
    assert first is not None and first["Validated"]["status"] == "True"
    assert first["Validated"]["observedGeneration"] == 4 and first["RootCause"]["observedGeneration"] == 4
    assert first["Validated"]["lastTransitionTime"] == ts(NOW)
    fv["status"]["conditions"] = list(first.values())
    assert conditions(ready, NOW + timedelta(minutes=1)) is None  # unchanged standing: nothing to write
    held = PoolState(POOL, True, False, "fallback", f"pool {POOL}: canary fallback")
    later = conditions(held, NOW + timedelta(minutes=20))
    assert later is not None and later["Validated"]["status"] == "False"
    assert later["Validated"]["lastTransitionTime"] == ts(NOW + timedelta(minutes=20))
    assert later["RootCause"]["lastTransitionTime"] == ts(NOW)  # RootCause stayed False: its time stays


def test_the_crd_schema_is_the_typed_status() -> None:
    from fabricguard.controller.manifests import crd
    from fabricguard.controller.validation import status_schema

    (version,) = crd()["spec"]["versions"]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status == status_schema()
    cond = status["properties"]["conditions"]
    assert cond["x-kubernetes-list-map-keys"] == ["type"] and "observedGeneration" in cond["items"]["properties"]
    assert status["properties"]["runs"]["items"]["properties"]["outcome"]["enum"] == [str(x) for x in Outcome]
