"""Observe before enforce, and a blast radius no mistake can exceed (issue 24, items 1 and 2).

The Node Readiness Controller is not installable here: ``Nrc`` models what its rules do, from its documented
semantics (kubernetes-sigs/node-readiness-controller, docs/book concepts and getting-started: a rule taints a
selected node whose conditions are not all at their required status, removes the taint once they are, a
``bootstrap-only`` rule stops after the first success, and ``dryRun: true`` only reports, changing no taint).
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from fabricguard import names
from fabricguard import objects as o
from fabricguard.agent.condition import Readiness, Reason, build_condition, failing_checks
from fabricguard.agent.render import readiness_rules
from fabricguard.controller.actions import Emit, JsonPatch, MergePatch
from fabricguard.controller.blast import judge_breakers, stored
from fabricguard.controller.canaries import CanaryConfig
from fabricguard.controller.gate import OBSERVE_PREFIX, gate_workloads
from fabricguard.controller.metrics import Metrics
from fabricguard.controller.reconcile import reconcile
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile import load_profile
from fabricguard.profile.model import PlatformProfile

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "profiles").glob("*.yaml"))
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _node(name: str, selector: dict[str, str], status: str, at: datetime, message: str = "") -> dict[str, Any]:
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                            "metadata": {"name": name, "labels": dict(selector), "resourceVersion": "1"},
                            "spec": {}, "status": {"conditions": []}}
    reason = Reason.passed if status == "True" else Reason.failed
    node["status"]["conditions"] = [build_condition(Readiness(status, reason, message or "6 check(s) passed"),
                                                    None, at)]
    return node


def _report(node: dict[str, Any], status: str, message: str, at: datetime) -> None:
    """The agent's status write: only the FabricReady condition changes (lastTransitionTime on a change)."""
    prev = o.find_condition(node, names.FABRIC_READY)
    reason = Reason.passed if status == "True" else Reason.failed
    node["status"]["conditions"] = [build_condition(Readiness(status, reason, message), prev, at)]
    node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)


class Nrc:
    """The Node Readiness Controller's rules applied to the nodes (see the module docstring)."""

    def __init__(self, rules: list[dict[str, Any]]) -> None:
        self.rules = rules
        self.bootstrapped: set[tuple[str, str]] = set()

    def reconcile(self, nodes: list[dict[str, Any]]) -> None:
        for rule in self.rules:
            spec = rule["spec"]
            if spec.get("dryRun"):
                continue
            key = spec["taint"]["key"]
            for n in nodes:
                if not o.selector_matches(o.labels_of(n), spec["nodeSelector"]["matchLabels"]):
                    continue
                ok = all((o.find_condition(n, c["type"]) or {}).get("status") == c["requiredStatus"]
                         for c in spec["conditions"])
                taints = n["spec"].setdefault("taints", [])
                has = any(t.get("key") == key for t in taints)
                if spec["enforcementMode"] == "bootstrap-only" and (o.name_of(n), key) in self.bootstrapped:
                    if has and ok:
                        n["spec"]["taints"] = [t for t in taints if t.get("key") != key]
                    continue
                if ok:
                    n["spec"]["taints"] = [t for t in taints if t.get("key") != key]
                    if spec["enforcementMode"] == "bootstrap-only":
                        self.bootstrapped.add((o.name_of(n), key))
                elif not has:
                    taints.append({"key": key, "value": spec["taint"].get("value", ""), "effect": "NoSchedule"})
                    n["metadata"]["resourceVersion"] = str(int(n["metadata"]["resourceVersion"]) + 1)


def _tainted(nodes: list[dict[str, Any]]) -> set[str]:
    return {o.name_of(n) for n in nodes if set(o.taint_keys(n)) & set(names.TAINT_KEYS)}


def _apply(actions: list[Any], nodes: list[dict[str, Any]], rules: list[dict[str, Any]], fv: dict[str, Any],
           status: dict[str, Any] | None) -> list[Emit]:
    """What the API server does with the breaker's writes (a JSON patch whose test fails is refused)."""
    events: list[Emit] = []
    for a in actions:
        if isinstance(a, JsonPatch):
            n = next(n for n in nodes if o.name_of(n) == a.name)
            patched = jsonpatch.apply_patch(n, a.ops)  # raises on a failed test op: the write is refused
            n.clear()
            n.update(patched)
        elif isinstance(a, MergePatch) and a.plural == "nodereadinessrules":
            r = next(r for r in rules if o.name_of(r) == a.name)
            r["spec"].update(a.body["spec"])
        elif isinstance(a, Emit):
            events.append(a)
    if status:
        fv.setdefault("status", {}).update(status)
    return events


def _fv(pool: str) -> dict[str, Any]:
    return {"apiVersion": names.FV_API, "kind": names.FV_KIND,
            "metadata": {"name": pool, "uid": f"fv-{pool}", "generation": 1}, "spec": {"pool": pool}}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_one_wrong_resource_name_never_taints_more_than_the_budget(path: Path) -> None:
    """A typo'd resource rolls out to every agent; NRC (enforce) taints at most the budget, the breaker opens on
    the next node, every node of that check is untainted, the rules go dryRun, an Event names check and nodes."""
    prof = load_profile(path)
    pool = prof.spec.pools[0]
    n_nodes = 30
    nodes = [_node(f"{pool.name}-{i:02d}", pool.nodeSelector, "True", T0 - timedelta(days=2))
             for i in range(n_nodes)]
    rules = readiness_rules(prof, mode="enforce")
    nrc = Nrc(rules)
    nrc.reconcile(nodes)
    assert _tainted(nodes) == set()
    fv = _fv(pool.name)
    allowed = max(1, n_nodes // 10)
    most = 0
    events: list[Emit] = []
    message = ("1 check(s) failed: fabric.allocatable | fabric.allocatable: "
               "networking.gke.io.networks/rdma7 is absent from allocatable")
    for i, n in enumerate(nodes):  # the DaemonSet rolls the new profile out, one node every 20 s
        now = T0 + timedelta(seconds=20 * i)
        _report(n, "False", message, now)
        nrc.reconcile(nodes)
        most = max(most, len(_tainted(nodes)))
        res = judge_breakers(prof, nodes, {pool.name: fv}, [], rules, now, "enforce")
        events += _apply(res.actions, nodes, rules, fv, res.fv_status.get(pool.name))
        nrc.reconcile(nodes)
        most = max(most, len(_tainted(nodes)))
    assert most == allowed, f"{most} nodes tainted at most, budget {allowed}"  # the budget acts, and no more
    assert _tainted(nodes) == set()  # the breaker released what it had allowed
    assert all(r["spec"]["dryRun"] for r in rules if r["metadata"]["labels"][names.LABEL_POOL] == pool.name)
    (state,) = stored(fv).values()
    assert state.open and list(stored(fv)) == ["fabric.allocatable"]
    (opened,) = [e for e in events if e.body["reason"] == "FabricBreakerOpen"]
    assert "fabric.allocatable" in opened.body["message"] and f"{pool.name}-00" in opened.body["message"]
    assert opened.body["type"] == "Warning" and opened.body["involvedObject"]["kind"] == names.FV_KIND
    # Latched: the nodes recover (the profile is fixed) and it stays open until a person resets it.
    later = T0 + timedelta(hours=3)
    for n in nodes:
        _report(n, "True", "6 check(s) passed", later)
    res = judge_breakers(prof, nodes, {pool.name: fv}, [], rules, later, "enforce")
    _apply(res.actions, nodes, rules, fv, res.fv_status.get(pool.name))
    assert res.pools[pool.name].open_checks == ["fabric.allocatable"]


def test_within_the_budget_a_real_failure_is_tainted_and_the_rules_enforce_again_after_the_window() -> None:
    prof = load_profile(EXAMPLES[0])
    pool = prof.spec.pools[0]
    nodes = [_node(f"n{i:02d}", pool.nodeSelector, "True", T0 - timedelta(days=1)) for i in range(20)]
    rules = readiness_rules(prof, mode="enforce")
    nrc = Nrc(rules)
    fv = _fv(pool.name)
    for k, now in ((0, T0), (1, T0 + timedelta(minutes=5))):
        _report(nodes[k], "False", "1 check(s) failed: rdma.netdevs | rdma.netdevs: eth1 down", now)
        nrc.reconcile(nodes)
        res = judge_breakers(prof, nodes, {pool.name: fv}, [], rules, now, "enforce")
        _apply(res.actions, nodes, rules, fv, res.fv_status.get(pool.name))
    assert _tainted(nodes) == {"n00", "n01"}  # budget max(1, 10% of 20) = 2: both real failures act
    pb = res.pools[pool.name]
    assert pb.exhausted == ["rdma.netdevs"] and not pb.open_checks and pb.muted
    assert all(r["spec"]["dryRun"] for r in rules)  # spent: a third node would not be tainted
    # A third node fails while the budget is spent: not tainted (the rules are dryRun) ...
    _report(nodes[2], "False", "1 check(s) failed: rdma.netdevs | rdma.netdevs: eth1 down", T0 + timedelta(minutes=6))
    nrc.reconcile(nodes)
    assert _tainted(nodes) == {"n00", "n01"}
    # ... and it recovers, as does n00: one newly failing node is within the budget again, NRC untaints n00.
    for k in (0, 2):
        _report(nodes[k], "True", "6 check(s) passed", T0 + timedelta(minutes=10))
    res = judge_breakers(prof, nodes, {pool.name: fv}, [], rules, T0 + timedelta(minutes=10), "enforce")
    _apply(res.actions, nodes, rules, fv, res.fv_status.get(pool.name))
    nrc.reconcile(nodes)
    assert _tainted(nodes) == {"n01"} and not res.pools[pool.name].open_checks
    # The window passes with nothing new: the budget is free, the rules enforce again.
    res = judge_breakers(prof, nodes, {pool.name: fv}, [], rules, T0 + timedelta(hours=2), "enforce")
    _apply(res.actions, nodes, rules, fv, res.fv_status.get(pool.name))
    assert not res.pools[pool.name].muted and not any(r["spec"]["dryRun"] for r in rules)
    assert _tainted(nodes) == {"n01"}


def test_fewer_ready_nodes_than_the_largest_admitted_gang_opens_the_breaker() -> None:
    prof = load_profile(EXAMPLES[0])
    pool = prof.spec.pools[0]
    flavor = prof.canary_flavors(pool)[0]
    nodes = [_node(f"n{i:02d}", pool.nodeSelector, "True", T0 - timedelta(days=1)) for i in range(40)]
    gang = {"metadata": {"name": "big", "namespace": "ml"}, "status": {
        "conditions": [{"type": "Admitted", "status": "True"}],
        "admission": {"podSetAssignments": [{"name": "w", "count": 39, "flavors": {"nvidia.com/gpu": flavor}}]}}}
    _report(nodes[0], "False", "1 check(s) failed: gpu.count | gpu.count: 7 of 8", T0)
    _report(nodes[1], "False", "1 check(s) failed: gpu.count | gpu.count: 7 of 8", T0)
    res = judge_breakers(prof, nodes, {pool.name: _fv(pool.name)}, [gang], [], T0, "enforce")
    assert res.pools[pool.name].open_checks == ["gpu.count"]
    assert "fewer than the 39 kept" in res.pools[pool.name].states["gpu.count"].reason


def test_failing_checks_reads_what_the_agent_writes() -> None:
    assert failing_checks({"status": "False", "reason": "ChecksFailed",
                           "message": "2 check(s) failed: a.b, c | a.b: x; c: y"}) == ["a.b", "c"]
    assert failing_checks({"status": "False", "reason": "CheckError",
                           "message": "1 check(s) failed (some could not run): gpu.count | gpu.count: boom"}) == [
        "gpu.count"]
    assert failing_checks({"status": "Unknown", "reason": "HeartbeatStale", "message": "no report"}) == [
        "HeartbeatStale"]
    assert failing_checks({"status": "True", "reason": "AllChecksPassed"}) == []


def _workload(flavor: str) -> dict[str, Any]:
    return {"apiVersion": names.KUEUE_API, "kind": "Workload",
            "metadata": {"name": "train", "namespace": "ml", "uid": "wl-1"},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}],
                       "admission": {"podSetAssignments": [{"name": "w", "count": 2,
                                                            "flavors": {"nvidia.com/gpu": flavor}}]},
                       "admissionChecks": [{"name": names.CHECK_NAME, "state": "Pending"}]}}


def _pass(prof: PlatformProfile, nodes: list[dict[str, Any]], mode: str, extra: list[dict[str, Any]]) -> Any:
    snap = Snapshot(objects=[*nodes, *extra], source="test")
    return reconcile(snap, prof, T0, CanaryConfig("fabricguard-system", "img@sha256:" + "ab" * 32, None,
                                                  mode=mode))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_an_observed_install_holds_and_taints_nothing_and_says_what_it_would(path: Path) -> None:
    prof = load_profile(path)
    pool = prof.spec.pools[0]
    flavor = (prof.canary_flavors(pool) or [pool.name])[0]
    nodes = [_node(f"n{i}", pool.nodeSelector, "False", T0 - timedelta(minutes=5),
                   "1 check(s) failed: rdma.devices | rdma.devices: none") for i in range(4)]
    for n in nodes:
        n["spec"]["taints"] = [{"key": names.TAINT_DEGRADED, "effect": "NoSchedule"}]
    rules = copy.deepcopy(readiness_rules(prof, mode="observe"))
    assert all(r["spec"]["dryRun"] for r in rules)
    ac = {"apiVersion": names.KUEUE_API, "kind": "AdmissionCheck", "metadata": {"name": names.CHECK_NAME},
          "spec": {"controllerName": names.CHECK_CONTROLLER}}
    extra = [ac, _workload(flavor), *rules]
    enforced = _pass(prof, nodes, "enforce", extra)
    observed = _pass(prof, nodes, "observe", extra)
    # enforce: the workload is held (not Ready) and the rules are turned back to enforcing
    held = [a for a in enforced.actions if getattr(a, "plural", "") == "workloads"]
    if pool.name in enforced.unhealthy_pools and prof.canary_flavors(pool):
        assert held and held[0].status["admissionChecks"][0]["state"] != "Ready"
    # observe: Ready, with what enforce would have done, and the count; no taint stays, no rule enforces
    entries = [a.status["admissionChecks"][0] for a in observed.actions if getattr(a, "plural", "") == "workloads"]
    if prof.canary_flavors(pool):
        assert entries and entries[0]["state"] == "Ready"
        assert entries[0]["message"].startswith(OBSERVE_PREFIX) and "pool " + pool.name in entries[0]["message"]
        assert observed.would_hold[pool.name] == 1 and observed.pending.get(pool.name, 0) == 0
    assert not [a for a in observed.actions if isinstance(a, MergePatch) and a.plural == "nodereadinessrules"]
    untaint = {a.name for a in observed.actions if isinstance(a, JsonPatch)}
    assert untaint == {o.name_of(n) for n in nodes}
    m = Metrics()
    m.observe(prof, observed, 0.1, 0)
    text = m.exposition().decode()
    assert f'fabricguard_pool_enforcing{{pool="{pool.name}"}} 0.0' in text


def test_a_pool_field_moves_one_pool_to_enforce() -> None:
    text = (ROOT / "examples/profiles/gke-a3-ultra.yaml").read_text()
    prof = load_profile(EXAMPLES[0])
    pool = prof.spec.pools[0]
    enforced = prof.model_copy(deep=True)
    enforced.spec.pools[0].mode = "enforce"
    assert readiness_rules(prof, mode="observe")[0]["spec"]["dryRun"] is True
    assert readiness_rules(enforced, mode="observe")[0]["spec"]["dryRun"] is False
    assert enforced.mode_of(enforced.spec.pools[0], "observe") == "enforce"
    assert prof.mode_of(pool, "observe") == "observe" and "mode:" not in text.split("pools:")[0]
    flavor = (prof.canary_flavors(pool) or [pool.name])[0]
    states = {pool.name: _pool_state(pool.name)}
    wl = _workload(flavor)
    ac = [{"metadata": {"name": names.CHECK_NAME}, "spec": {"controllerName": names.CHECK_CONTROLLER}}]
    obs = gate_workloads(prof, [wl], ac, states, T0, mode="observe")
    enf = gate_workloads(enforced, [wl], ac, states, T0, mode="observe")
    if prof.canary_flavors(pool):
        assert obs.would_hold == {pool.name: 1} and obs.pending == {}
        assert enf.pending == {pool.name: 1} and enf.would_hold == {}


def _pool_state(pool: str) -> Any:
    from fabricguard.controller.canaries import PoolState

    return PoolState(pool=pool, canary=True, ready=False, outcome="fallback", message="canary fell back",
                     broken=True, interval_s=600)


async def test_breaker_status_and_a_persons_reset_through_the_api(cluster) -> None:
    """``fabricguard breaker status`` (exit 1 while one is open) and ``reset`` against the emulator, with only
    the breaker's own permission table (the client refuses anything else)."""
    import asyncio
    import json as _json

    from controller_support import FVS, admin_kubeconfig, live
    from typer.testing import CliRunner

    from fabricguard.breaker import BreakerState
    from fabricguard.cli import app
    from json_schema_check import assert_matches

    k8s, kc = cluster
    admin = admin_kubeconfig(kc)
    opened = BreakerState(True, T0, "12 of 30 newly failing within 1h, budget 3", ("n1", "n2"))
    k8s.objects[FVS, None, "gh200-roce"] = {
        "metadata": {"name": "gh200-roce", "uid": "fv-1", "generation": 1}, "spec": {"pool": "gh200-roce"},
        "status": {"breakers": [{"check": "fabric.allocatable", **opened.to_dict()}],
                   "blastBudget": {"nodes": 30, "allowed": 3, "windowSeconds": 3600,
                                   "observedAt": "2026-12-01T12:00:00Z"}}}

    def cli(*args: str) -> Any:
        return CliRunner().invoke(app, [*args, "--kubeconfig", admin])

    r = await asyncio.to_thread(cli, "breaker", "status", "--format", "json")
    assert r.exit_code == 1, r.output
    doc = _json.loads(r.output)
    assert doc["verdict"] == "degraded" and doc["breakers"][0]["members"] == ["n1", "n2"]
    assert doc["budgets"] == [{"pool": "gh200-roce", "nodes": 30, "allowed": 3, "windowSeconds": 3600,
                               "observedAt": "2026-12-01T12:00:00Z"}]  # the agents' taint slots
    assert_matches("BreakerStatus", doc, r.exit_code)
    r = await asyncio.to_thread(cli, "breaker", "reset", "--pool", "gh200-roce", "--check", "gpu.count")
    assert r.exit_code == 3 and "no open breaker for check 'gpu.count'; open: fabric.allocatable" in r.output
    r = await asyncio.to_thread(cli, "breaker", "reset", "--pool", "gh200-roce", "--check", "fabric.allocatable",
                                "--now", "2026-12-01T13:00:00Z")
    assert r.exit_code == 0, r.output
    (fv,) = [f for f in live(k8s, FVS) if f["metadata"]["name"] == "gh200-roce"]
    (entry,) = fv["status"]["breakers"]
    assert entry["open"] is False and entry["resets"] == 1 and entry["resetAt"] == "2026-12-01T13:00:00Z"
    r = await asyncio.to_thread(cli, "breaker", "status")
    assert r.exit_code == 0 and r.output.startswith("PASS  breaker status · no breaker is open")
    assert "pool gh200-roce: 3 node(s) may newly fail a check within 3600 s of 30" in " ".join(r.output.split())
    r = await asyncio.to_thread(cli, "breaker", "reset", "--pool", "nope")
    assert r.exit_code == 3 and "has no FabricValidation" in r.output
