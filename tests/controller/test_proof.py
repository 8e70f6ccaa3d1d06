"""Pair planning, bisection and quarantine (controller/proof.py) on a simulated fleet, pass by pass.

The fleet simulator plays the world between two passes: every pair the decision started finishes by the next
pass, passing unless one of its nodes is bad (then degraded: a fraction of the floor, as a rail down does) or a
platform fault fails every pair. The decisions are the controller's own, unmodified.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from fabricguard.controller import proof as pf
from fabricguard.profile.model import Proof, Quarantine

T0 = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)


def fleet(n: int = 32, blocks: int = 4) -> dict[str, pf.NodeFacts]:
    return {f"gpu-{i:02d}": pf.NodeFacts(f"gpu-{i:02d}", block=f"b{i * blocks // n}", joined=T0 - timedelta(days=30))
            for i in range(n)}


def run(facts: dict[str, pf.NodeFacts], passes: int, *, bad: set[str] = frozenset(), fault_after: int | None = None,
        step: timedelta = timedelta(minutes=20), proof: Proof | None = None, start: datetime = T0,
        state: pf.ProofState | None = None, gang: int = 0, hooks: dict[int, object] | None = None
        ) -> tuple[pf.ProofState, list[pf.Decision], dict[str, pf.NodeFacts]]:
    proof = proof or Proof(maxConcurrent=16)
    state = state or pf.ProofState()
    decisions: list[pf.Decision] = []
    running: list[pf.ActivePair] = []
    for k in range(passes):
        now = start + k * step
        if hooks and k in hooks:
            facts = hooks[k](facts)  # type: ignore[operator]
        results = []
        for a in running:
            fail = bool(set(a.nodes) & bad) or (fault_after is not None and k >= fault_after)
            results.append(pf.PairResult(a.name, a.nodes, "degraded" if fail else "passed", now - timedelta(minutes=5),
                                         a.purpose, busbw=60.0 if fail else 180.0, message="busbw below floor"
                                         if fail else "", gpu_hours=a.gpuHours / 2))
        d = pf.decide(state, facts, results, proof, gpus_per_node=8, largest_gang=gang, now=now,
                      name_of=lambda i, k=k: f"fgp-p-{k}-{i}")
        for n in d.taint:
            facts[n] = replace(facts[n], quarantined=True)
        for n in d.untaint:
            facts[n] = replace(facts[n], quarantined=False)
        state = d.state
        running = [a for a in state.active if a.name in {p.name for p in d.start}]
        decisions.append(d)
    return state, decisions, facts


def test_every_node_proven_and_the_bad_one_convicted_by_bisection_alone() -> None:
    facts = fleet()
    state, decisions, facts = run(facts, 12, bad={"gpu-13"})
    rows = state.nodes
    assert rows["gpu-13"].state == "quarantined"
    assert facts["gpu-13"].quarantined
    assert [n for n, f in facts.items() if f.quarantined] == ["gpu-13"]  # no good node convicted
    assert all(r.state == "proven" for n, r in rows.items() if n != "gpu-13"), {
        n: r.state for n, r in rows.items() if r.state != "proven"}
    # Conviction needed two failed pairs, the second with a known-good partner.
    assert len(rows["gpu-13"].failures) >= 2
    taints = [n for d in decisions for n in d.taint]
    assert taints == ["gpu-13"]
    # Both links covered: intra-block and cross-block pairs proved nodes.
    assert {r.link for r in rows.values() if r.link} == {"intra", "cross"}
    assert all(not d.broken for d in decisions)
    # Within the GPU-hour budget of the day (0.5% of 32 x 8 x 24 GPU-h).
    assert state.spentGpuHours + sum(a.gpuHours for a in state.active) <= 0.005 * 32 * 8 * 24 + 1e-6


def test_one_failed_pair_of_two_unproven_nodes_convicts_neither() -> None:
    facts = fleet(4, 2)
    state = pf.ProofState(active=[pf.ActivePair("fgp-x", ("gpu-00", "gpu-02"), "coverage", "", 1.0)])
    d = pf.decide(state, facts, [pf.PairResult("fgp-x", ("gpu-00", "gpu-02"), "failed", T0, busbw=None)],
                  Proof(), gpus_per_node=8, largest_gang=0, now=T0, name_of=lambda i: f"p{i}")
    assert d.state.nodes["gpu-00"].state == d.state.nodes["gpu-02"].state == "suspect"
    assert not d.taint


def test_the_breaker_stops_quarantine_when_every_pair_fails_and_the_pool_is_broken() -> None:
    facts = fleet()
    state, _decisions, facts = run(facts, 8, bad={"gpu-13"})
    assert [n for n, f in facts.items() if f.quarantined] == ["gpu-13"]
    later = T0 + timedelta(days=1, hours=2)  # every node due again: a platform fault fails every pair from now on
    state2, decisions2, facts2 = run(facts, 8, fault_after=1, state=state, start=later,
                                     proof=Proof(maxConcurrent=16, every="1d"))
    assert state2.breaker.open
    assert [n for n, f in facts2.items() if f.quarantined] == ["gpu-13"]  # nothing more quarantined
    assert any(e[1] == "FabricQuarantineBreakerOpen" for d in decisions2 for e in d.events)
    assert decisions2[-1].broken  # the pool itself is broken: the Kueue check holds it
    assert decisions2[-1].withheld or all(r.state != "convicted" for r in state2.nodes.values())


def test_quarantine_never_leaves_fewer_healthy_nodes_than_the_largest_gang() -> None:
    facts = fleet(8, 2)
    state, decisions, facts = run(facts, 10, bad={"gpu-03"}, gang=8)
    assert not any(f.quarantined for f in facts.values())
    assert state.nodes["gpu-03"].state == "convicted"
    assert "largest admitted gang" in state.nodes["gpu-03"].message
    assert decisions[-1].broken  # 7 healthy < the gang of 8: the pool is broken, so the check holds


def test_quarantined_node_is_released_after_a_passing_retest() -> None:
    facts = fleet(8, 2)
    state, _d, facts = run(facts, 8, bad={"gpu-03"}, proof=Proof(maxConcurrent=16, budget="40h"))
    assert facts["gpu-03"].quarantined
    # Repaired: the re-test after retestAfter passes with a known-good node and our taint goes.
    state2, d2, facts2 = run(facts, 6, state=state, start=T0 + timedelta(hours=3),
                             proof=Proof(maxConcurrent=16, budget="40h"))
    assert not facts2["gpu-03"].quarantined
    assert state2.nodes["gpu-03"].state == "proven"
    assert any(e[1] == "FabricReleased" for d in d2 for e in d.events)


def test_new_node_is_proven_with_a_known_good_partner_and_timeout_is_loud() -> None:
    facts = fleet(8, 2)
    state, _d, facts = run(facts, 4)
    joined = T0 + timedelta(hours=1)
    facts["gpu-new"] = pf.NodeFacts("gpu-new", block="b0", bootstrapping=True, fabric_ready=True, joined=joined)
    state2, d2, _f = run(facts, 3, state=state, start=joined + timedelta(minutes=1))
    first = d2[0].start
    assert first[0].purpose == "lifecycle" and first[0].nodes[0] == "gpu-new" and first[0].tolerate_bootstrap
    assert pf.known_good(state.nodes[first[0].nodes[1]], Proof(), joined)
    assert state2.nodes["gpu-new"].lastProven is not None
    # A new node that never gets an idle partner: past lifecycleTimeout it is timed-out, with a Warning Event.
    lonely = {"gpu-a": pf.NodeFacts("gpu-a", bootstrapping=True, fabric_ready=True, joined=T0)}
    d = pf.decide(pf.ProofState(), lonely, [], Proof(lifecycleTimeout="1h"), gpus_per_node=8, largest_gang=0,
                  now=T0 + timedelta(hours=2), name_of=str)
    assert d.state.nodes["gpu-a"].state == "timed-out"
    assert any(e[1] == "FabricProofTimedOut" and e[3] for e in d.events)


def test_held_elsewhere_nodes_are_neither_tested_nor_blamed() -> None:
    nvs = {"metadata": {"name": "n"}, "spec": {"taints": [
        {"key": "nvsentinel.dgxc.nvidia.com/nvcre-cert-failed", "value": "true", "effect": "NoSchedule"}]}}
    assert "nvsentinel" in (pf.held_elsewhere(nvs, ()) or "")
    eks = {"metadata": {"name": "n"}, "status": {"conditions": [
        {"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaXID79Error"}]}}
    assert "AcceleratedHardwareReady" in (pf.held_elsewhere(eks, ()) or "")
    gke = {"metadata": {"name": "n", "labels": {"cloud.google.com/scheduled-maintenance-time": "1767225600"}}}
    assert pf.held_elsewhere(gke, ()) is not None
    ours = {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "fabricguard.io/quarantined", "effect": "NoSchedule"}]}}
    assert pf.held_elsewhere(ours, ("fabricguard.io/quarantined",)) is None
    facts = fleet(4, 2)
    facts["gpu-01"] = replace(facts["gpu-01"], held="cordoned")
    d = pf.decide(pf.ProofState(), facts, [], Proof(), gpus_per_node=8, largest_gang=0, now=T0, name_of=str)
    assert all("gpu-01" not in p.nodes for p in d.start)
    assert d.state.nodes["gpu-01"].state == "held"


def test_budget_bounds_the_pairs_started_and_says_so() -> None:
    facts = fleet(32, 4)
    p = Proof(budget="3h", pairDuration="10m", maxConcurrent=16)  # 8 GPUs x 2 x 10 min = 2.67 GPU-h a pair
    d = pf.decide(pf.ProofState(), facts, [], p, gpus_per_node=8, largest_gang=0, now=T0, name_of=str)
    assert len(d.start) == 1
    assert any("budget spent" in n for n in d.notes)
    assert d.budget_gpu_hours == 3.0


def test_busy_nodes_are_not_tested() -> None:
    facts = {n: replace(f, idle=(i % 2 == 0)) for i, (n, f) in enumerate(fleet(8, 2).items())}
    d = pf.decide(pf.ProofState(), facts, [], Proof(), gpus_per_node=8, largest_gang=0, now=T0, name_of=str)
    assert d.start and all(facts[n].idle for p in d.start for n in p.nodes)


def test_state_round_trips_through_the_status() -> None:
    facts = fleet(8, 2)
    state, _d, _f = run(facts, 6, bad={"gpu-03"})
    doc = state.to_dict(12.0)
    back = pf.ProofState.from_dict(doc)
    assert back.to_dict(12.0) == doc


@pytest.mark.parametrize("budget", ["0%", "-1h", "abc", "101%"])
def test_bad_budget_is_refused(budget: str) -> None:
    with pytest.raises(ValueError, match="budget"):
        Proof(budget=budget)


def test_quarantine_cap_is_the_smaller_of_count_and_percent() -> None:
    assert pf.largest_fit(32, None, 10) == 3
    assert pf.largest_fit(32, 1, 10) == 1
    assert pf.largest_fit(4, None, 10) == 1
    assert Quarantine().breakerPercent == 20


def test_metrics_export_each_nodes_proof_and_the_pools_budget_and_breaker() -> None:
    from controller_support import PROFILE

    from fabricguard.controller.canaries import PoolState
    from fabricguard.controller.metrics import Metrics
    from fabricguard.controller.pairs import ProofOutcome
    from fabricguard.controller.reconcile import PassResult
    from fabricguard.profile import loads_profile

    prof = loads_profile(PROFILE.replace("    canary:", "    proof: {every: 24h}\n    canary:"))
    _state, ds, _facts = run(fleet(8, 2), 6, bad={"gpu-03"})
    st = PoolState("gh200-roce", True, True, "passed", "", proof=ProofOutcome(ds[-1], 7, 7, 86400, 1, 0))
    m = Metrics()
    m.observe(prof, PassResult(T0, [], {"gh200-roce": st}, [], {}), 1.0, 0)
    text = m.exposition().decode()
    assert 'fabricguard_node_proof_last_proven_timestamp_seconds{node="gpu-00",pool="gh200-roce"}' in text
    assert 'fabricguard_pool_quarantined_nodes{pool="gh200-roce"} 1.0' in text
    assert 'fabricguard_pool_quarantine_breaker_open{pool="gh200-roce"} 0.0' in text
    assert 'fabricguard_pool_proof_nodes_overdue{pool="gh200-roce"} 0.0' in text


def test_profile_check_says_when_the_budget_cannot_meet_the_goal() -> None:
    from controller_support import PROFILE

    from fabricguard.profile import loads_profile

    def advice(proof: str) -> list[str]:
        text = PROFILE.replace("    gpusPerNode: 1\n", "    gpusPerNode: 8\n").replace(
            "    canary:", f"    nodes: 1000\n    proof: {proof}\n    canary:")
        return [a for a in loads_profile(text).advisories() if "proof" in a]

    assert any("1333 GPU-h per proof.every (24h)" in a and "960" in a for a in advice("{every: 24h}"))
    assert not any("GPU-h" in a for a in advice("{every: 24h, pairDuration: 5m, queue: scavenger}"))
    assert not advice("{every: 24h, pairDuration: 5m, queue: scavenger}")


def test_pool_coverage_refuses_a_pool_without_proof_in_one_line(tmp_path) -> None:
    from controller_support import PROFILE
    from typer.testing import CliRunner

    from fabricguard.cli import app

    prof = tmp_path / "p.yaml"
    prof.write_text(PROFILE)
    r = CliRunner().invoke(app, ["pool", "coverage", "-p", str(prof)])
    assert r.exit_code == 3 and "has no proof block" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["pool", "coverage", "-p", str(prof), "--pool", "nope"])
    assert r.exit_code == 3 and "--pool" in r.output


def test_observe_mode_names_the_bad_node_but_taints_nothing() -> None:
    facts = fleet(8, 2)
    state = pf.ProofState()
    for k in range(6):
        now = T0 + k * timedelta(minutes=20)
        results = [pf.PairResult(a.name, a.nodes, "degraded" if "gpu-03" in a.nodes else "passed", now, a.purpose,
                                 busbw=10.0) for a in state.active]
        d = pf.decide(state, facts, results, Proof(budget="40h"), gpus_per_node=8, largest_gang=0, now=now,
                      name_of=lambda i, k=k: f"p-{k}-{i}", observe=True)
        assert not d.taint
        state = d.state
    assert state.nodes["gpu-03"].state == "convicted" and "observe mode" in state.nodes["gpu-03"].message


def test_a_changed_driver_or_kernel_takes_a_node_out_of_proven_until_re_proven() -> None:
    facts = {n: replace(f, labels={"nvidia.com/cuda.driver-version.full": "580.65.06", pf.KERNEL_KEY: "6.8.0-60"})
             for n, f in fleet(8, 2).items()}
    p = Proof(maxConcurrent=16, budget="100h")
    state, _d, facts = run(facts, 4, proof=p)
    assert all(r.state == "proven" for r in state.nodes.values())
    later = T0 + timedelta(hours=3)
    facts["gpu-02"] = replace(facts["gpu-02"], labels={**facts["gpu-02"].labels,
                                                       "nvidia.com/cuda.driver-version.full": "590.10.01"})
    facts["gpu-05"] = replace(facts["gpu-05"], held="cordoned (spec.unschedulable, not by fabricguard)",
                              labels={**facts["gpu-05"].labels, pf.KERNEL_KEY: "6.8.0-71"})
    d = pf.decide(state, facts, [], p, gpus_per_node=8, largest_gang=0, now=later,
                  name_of=lambda i: f"fgp-c-{i}")
    row = d.state.nodes["gpu-02"]
    assert row.state == "changed" and "580.65.06 -> 590.10.01" in row.message
    assert not pf.known_good(row, Proof(), later)
    assert [e[0] for e in d.events if e[1] == "FabricProofInvalidated"] == ["gpu-02", "gpu-05"]
    assert d.state.nodes["gpu-05"].state == "held"  # the hold is said first; the change waits behind it
    proven, counted = pf.coverage(d.state, facts, Proof(), later)
    assert (proven, counted) == (6, 7)  # gpu-02 counts and is not proven; gpu-05 is held
    first = d.start[0]
    assert first.nodes[0] == "gpu-02" and first.purpose == "lifecycle"
    assert all(p.nodes[1] != "gpu-02" for p in d.start)  # never anyone's known-good partner
    # The hold ends: still changed (no event again), until its re-proof passes with the new driver recorded.
    facts["gpu-05"] = replace(facts["gpu-05"], held=None)
    t1 = later + timedelta(minutes=10)
    done = [pf.PairResult(a.name, a.nodes, "passed", t1 - timedelta(minutes=2), a.purpose, 180.0) for a in d.start]
    d1 = pf.decide(d.state, facts, done, p, gpus_per_node=8, largest_gang=0, now=t1, name_of=lambda i: f"fgp-d-{i}")
    assert d1.state.nodes["gpu-02"].state == "proven"
    assert d1.state.nodes["gpu-05"].state == "changed"
    assert any(p_.nodes[0] == "gpu-05" and p_.purpose == "lifecycle" for p_ in d1.start)
    t2 = t1 + timedelta(minutes=10)
    done = [pf.PairResult(a.name, a.nodes, "passed", t2 - timedelta(minutes=2), a.purpose, 180.0) for a in d1.start]
    d2 = pf.decide(d1.state, facts, done, p, gpus_per_node=8, largest_gang=0, now=t2, name_of=lambda i: f"fgp-e-{i}")
    assert not [e for dd in (d1, d2) for e in dd.events if e[1] == "FabricProofInvalidated"]
    assert d2.state.nodes["gpu-02"].labels["nvidia.com/cuda.driver-version.full"] == "590.10.01"
    assert d2.state.nodes["gpu-05"].state == "proven" and d2.state.nodes["gpu-02"].state == "proven"


def test_a_changed_node_carries_fabric_proven_false_and_its_kernel_counts() -> None:
    from fabricguard.controller import pairs

    node = {"metadata": {"name": "n1", "labels": {"nvidia.com/cuda.driver-version.full": "590.10.01"}},
            "status": {"nodeInfo": {"kernelVersion": "6.8.0-71-generic"}, "conditions": [
                {"type": "FabricProven", "status": "True", "reason": "PairTestPassed"}]}}
    assert pairs.proof_basis(node, ["nvidia.com/cuda.driver-version.full", "absent.example.com/x"]) == {
        "nvidia.com/cuda.driver-version.full": "590.10.01", pf.KERNEL_KEY: "6.8.0-71-generic"}
    row = pf.NodeProof("n1", state="changed", lastProven="2026-12-01T00:00:00Z",
                       message="changed since proven at 2026-12-01T00:00:00Z: nodeInfo.kernelVersion: a -> b")
    cond = pairs._condition(node, row, T0)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "ChangedSinceProof")
    assert "kernelVersion: a -> b" in cond["message"]
    fv = {"status": {"proof": {"nodes": [row.to_dict(), {"node": "n2", "state": "proven"}]}}}
    assert pairs.avoided_nodes(fv) == ["n1"]


def test_bisection_names_the_bad_rail_by_the_nic_both_failed_pairs_agree_on() -> None:
    from fabricguard.probes.bw import SlowRail

    facts = fleet(8, 2)
    p = Proof(maxConcurrent=16, budget="100h")
    state, _d, facts = run(facts, 4, proof=p)
    bad = "gpu-06"
    good = [n for n, r in state.nodes.items() if r.state == "proven" and n != bad]
    state.nodes[bad] = replace(state.nodes[bad], state="unproven", lastProven=None)
    now = T0 + timedelta(hours=2)

    def res(i: int, partner: str, rails: list[SlowRail]) -> pf.PairResult:
        return pf.PairResult(f"fgp-r-{i}", (bad, partner), "degraded", now + timedelta(minutes=i), "bisect", 30.0,
                             "slow rail", rails=rails)

    first = res(0, good[0], [SlowRail(3, 11.0, 44.0, {bad: "mlx5_3", good[0]: "mlx5_3"}),
                             SlowRail(1, 30.0, 44.0, {bad: "mlx5_1", good[0]: "mlx5_1"})])
    second = res(1, good[1], [SlowRail(3, 10.5, 44.0, {bad: "mlx5_3", good[1]: "mlx5_3"})])
    d = pf.decide(state, facts, [first, second], p, gpus_per_node=8, largest_gang=0, now=now + timedelta(minutes=5),
                  name_of=str)
    row = d.state.nodes[bad]
    assert row.state == "quarantined" and row.rails == ["rail 3 mlx5_3"]
    assert "bad rail: rail 3 mlx5_3" in row.message
    assert any(e[0] == bad and e[1] == "FabricQuarantined" and "rail 3 mlx5_3" in e[2] for e in d.events)
    assert {g: d.state.nodes[g].rails for g in good if d.state.nodes[g].rails} == {}  # partners not blamed
    assert pf.NodeProof.from_dict(row.to_dict()) == row


def test_pool_coverage_counts_a_changed_node_as_not_proven_and_shows_a_named_rail() -> None:
    from fabricguard.controller.coverage import coverage
    from fabricguard.profile import loads_profile
    from kube_support import gen

    profile = loads_profile(gen.INCIDENT_PROFILE.format(name="p", env="production").replace(
        "spec:\n", "spec:\n  storage:\n    lustre: {claimName: training-lustre, mountPath: /mnt/lustre}\n", 1)
        + "    canary: {interval: 10m}\n    proof: {every: 24h}\n")
    pool = profile.pool()
    now = T0 + timedelta(hours=1)
    nodes = [{"metadata": {"name": n, "labels": {"nvidia.com/gpu.product": "NVIDIA-GH200-480GB"}}}
             for n in ("a", "b", "c")]
    rows = [pf.NodeProof("a", "proven", lastProven=times_fmt(T0)),
            pf.NodeProof("b", "changed", lastProven=times_fmt(T0), message="changed since proven: kernel"),
            pf.NodeProof("c", "quarantined", lastProven=times_fmt(T0 - timedelta(days=2)),
                         rails=["rail 1 mlx5_1"], message="failed pair tests with a, b; bad rail: rail 1 mlx5_1")]
    fv = {"status": {"proof": pf.ProofState(nodes={r.node: r for r in rows}).to_dict(10.0)}}
    cov = coverage(pool, fv, nodes, now)
    assert cov.verdict == "degraded"
    assert "1 of 2 node(s) proven within 24h; 1 named (quarantined); 1 overdue" in cov.summary
    assert next(r for r in cov.rows if r["node"] == "c")["rails"] == ["rail 1 mlx5_1"]


def times_fmt(t: datetime) -> str:
    from fabricguard import times

    return times.format_time(t)
