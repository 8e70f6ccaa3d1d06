"""Taint slots (issue 24's leftover): a ``--manage-taints`` agent takes one of its pool's taint slots before it
taints, so agents that start failing within one controller pass never taint past the pool's budget.

Live: kmock's emulator over real HTTP with the rendered agent ClusterRole *and* Role enforced (the slots are
Leases in the agent's namespace); a create of an existing Lease is 409, a merge patch carrying a stale
``resourceVersion`` is 409 (``agent_support.ApiServer``), as the API server answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import io
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_support import GKE, IMAGE_REF, NODE_NAME, Rbac, healthy_node, kubeconfig
from test_agent_live import Clock, break_port, fix_port, make_agent
from typer.testing import CliRunner

from fabricguard import names, times
from fabricguard.agent import taint_slots as ts
from fabricguard.agent.commands import _print_human
from fabricguard.agent.kube import agent_grants, connect
from fabricguard.agent.render import agent_manifests
from fabricguard.cli import app
from fabricguard.controller.blast import judge_breakers
from fabricguard.profile import load_profile
from json_schema_check import assert_matches

NS = "fabricguard-system"
LEASES = f"{names.LEASE_API}/leases"
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
PROFILE = load_profile(GKE)
POOL = PROFILE.spec.pools[0]


class Mono:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _fv(nodes: int | None, at: datetime = T0) -> dict[str, Any]:
    status = {} if nodes is None else {"blastBudget": ts.published(POOL, nodes, at)}
    return {"apiVersion": names.FV_API, "kind": names.FV_KIND, "metadata": {"name": POOL.name}, "status": status}


def _node(name: str, tainted: bool) -> dict[str, Any]:
    taints = [{"key": names.TAINT_DEGRADED, "effect": "NoSchedule"}] if tainted else []
    return {"metadata": {"name": name, "labels": dict(POOL.nodeSelector)}, "spec": {"taints": taints}}


def _holders(k8s: Any) -> dict[str, str]:
    """Slot -> holder, as stored (released slots have none)."""
    out = {}
    for (res, ns, name), obj in k8s.objects.items():
        if str(res) == LEASES or getattr(res, "plural", "") == "leases":
            h = (obj.raw.get("spec") or {}).get("holderIdentity")
            if ns == NS and h:
                out[name] = h
    return out


# ----------------------------------------------------------------------------------------------- the number


def test_the_agents_budget_is_the_controllers_number_for_the_same_pool() -> None:
    """The controller publishes the pool's node count; the agent sizes its slots with the same function, so the
    two numbers cannot disagree (profile ``blastRadius``: max(1, 10%))."""
    nodes = [_node(f"n{i}", False) for i in range(37)]
    res = judge_breakers(PROFILE, nodes, {POOL.name: _fv(None)}, [], [], T0)
    published = res.fv_status[POOL.name]["blastBudget"]
    assert published["nodes"] == 37 and published["allowed"] == res.pools[POOL.name].allowed == 3
    fv = {**_fv(None), "status": {"blastBudget": published}}
    got = ts.budget_of(POOL, fv, T0 + timedelta(minutes=5))
    assert (got.slots, got.nodes) == (res.pools[POOL.name].allowed, 37), got
    # A controller whose profile allows fewer (a profile change that reached it first): the smaller number holds.
    stricter = {"status": {"blastBudget": {**published, "allowed": 1}}}
    assert ts.budget_of(POOL, stricter, T0).slots == 1
    # Written again only when the count changes or the figure is due a refresh (not every pass).
    again = judge_breakers(PROFILE, nodes, {POOL.name: fv}, [], [], T0 + timedelta(minutes=5))
    assert "blastBudget" not in again.fv_status.get(POOL.name, {})
    later = judge_breakers(PROFILE, nodes, {POOL.name: fv}, [], [], T0 + timedelta(seconds=ts.PUBLISH_REFRESH_S))
    assert later.fv_status[POOL.name]["blastBudget"]["observedAt"] == times.format_time(
        T0 + timedelta(seconds=ts.PUBLISH_REFRESH_S))
    grown = judge_breakers(PROFILE, [*nodes, _node("n37", False)], {POOL.name: fv}, [], [], T0 + timedelta(minutes=5))
    assert grown.fv_status[POOL.name]["blastBudget"]["nodes"] == 38


@pytest.mark.parametrize(("fv", "now", "why"), [
    (None, T0, "no FabricValidation"),
    (_fv(None), T0, "no node count"),
    (_fv(500), T0 + timedelta(seconds=ts.PUBLISHED_MAX_AGE_S + 1), "s old"),
    (_fv(500), T0 - timedelta(seconds=ts.PUBLISHED_MAX_AGE_S + 1), "s old"),  # a count from the future
    ({"status": {"blastBudget": {"nodes": True, "observedAt": "2026-12-01T09:00:00Z"}}}, T0, "no node count"),
    ({"status": {"blastBudget": {"nodes": -4, "observedAt": "2026-12-01T09:00:00Z"}}}, T0, "no node count"),
    ({"status": "garbage"}, T0, "no node count"),
])
def test_a_count_the_agent_cannot_trust_means_the_budgets_floor(fv: Any, now: datetime, why: str) -> None:
    """Fail closed on the budget: max(minimum, 10% of 0) = minimum, which the real budget is never below."""
    got = ts.budget_of(POOL, fv, now)
    assert got.slots == POOL.blastRadius.minimum == 1 and got.nodes is None and why in got.source, got
    assert ts.budget_of(POOL, _fv(500), T0, read_error="403").slots == 1


def test_which_slots_may_be_taken_without_asking_their_holder() -> None:
    window = POOL.blast_budget().window_s
    held = {"metadata": {"name": "s", "resourceVersion": "1"},
            "spec": {"holderIdentity": "n1", "acquireTime": times.format_micro(T0), "leaseDurationSeconds": 180}}
    assert ts.reusable(None, T0, window)  # never created
    assert ts.reusable({**held, "spec": {**held["spec"], "holderIdentity": ""}}, T0, window)  # released
    assert not ts.reusable(held, T0 + timedelta(seconds=window), window)
    assert ts.reusable(held, T0 + timedelta(seconds=window + 1), window)  # aged: no longer new to the controller
    assert ts.taint_gone(None) and ts.taint_gone(_node("x", False)) and not ts.taint_gone(_node("x", True))


# ------------------------------------------------------------------------------------------------ live


@pytest.fixture()
async def leases(apiserver, tmp_path: Path):
    """(emulator, Kube) with the rendered --manage-taints roles (ClusterRole and the namespace's Role) enforced."""
    k8s, url = apiserver
    k8s.rbac = Rbac.from_manifests(agent_manifests(PROFILE, GKE.read_text(), IMAGE_REF, manage_taints=True))
    kube = await connect(kubeconfig(tmp_path, url, "agent-own"), table=agent_grants(True), namespace=NS)
    yield k8s, kube


def _slots(kube: Any, node: str, mono: Mono | None = None) -> ts.TaintSlots:
    return ts.TaintSlots(kube, NS, node, 180, mono or Mono())


async def _no_node(name: str) -> None:
    return None


async def test_many_agents_racing_never_take_more_slots_than_the_budget(leases) -> None:
    k8s, kube = leases
    budget = ts.budget_of(POOL, _fv(30), T0)  # 10% of 30
    assert budget.slots == 3
    agents = [_slots(kube, f"node-{i:02d}") for i in range(12)]
    for _round in range(2):  # a second round (the next run) changes nothing: every slot is held and renewed
        got = await asyncio.gather(*(a.acquire(POOL, budget, T0, _no_node) for a in agents))
        winners = sorted(a.node for a, g in zip(agents, got, strict=True) if g.slot)
        assert len(winners) == 3 and all(g.error is None for g in got), got
        assert sorted(_holders(k8s).values()) == winners
        assert {g.slot for g in got if g.slot} == {ts.slot_name(POOL.name, i) for i in range(3)}
        if _round:  # the first round's losers listed before the winners wrote; now every slot is seen held
            assert all(g.taken == 3 for g in got if not g.slot), got
    # One holder's taint is lifted: it gives its slot back, and of the others exactly one more gets it.
    holder = next(a for a in agents if a.held)
    assert await holder.release(T0) is None and holder.held is None
    got = await asyncio.gather(*(a.acquire(POOL, budget, T0, _no_node) for a in agents if a is not holder))
    assert sum(1 for g in got if g.slot) == 3 and len(_holders(k8s)) == 3 and holder.node not in _holders(k8s).values()


async def test_a_stale_slot_is_reclaimed_only_once_its_holders_taint_is_gone(leases) -> None:
    """Stale: not renewed for leaseDurationSeconds by the reclaimer's own clock (the holder's written times are not
    read). Then the holder's Node is read: gone or untainted, the slot is taken; still tainted, it is kept."""
    k8s, kube = leases
    budget = ts.budget_of(POOL, _fv(5), T0)  # one slot
    holder, mono = _slots(kube, "node-a"), Mono()
    other = _slots(kube, "node-b", mono)
    assert (await holder.acquire(POOL, budget, T0, _no_node)).slot
    nodes = {"node-a": _node("node-a", True)}

    async def node_of(name: str) -> dict[str, Any] | None:
        return nodes.get(name)

    first = await other.acquire(POOL, budget, T0, node_of)
    assert first.slot is None and first.taken == 1  # observed now: not stale yet
    mono.t += 179
    assert (await other.acquire(POOL, budget, T0, node_of)).slot is None  # within the duration
    mono.t += 2  # 181 s unchanged: stale, but node-a is still tainted: kept
    assert (await other.acquire(POOL, budget, T0, node_of)).slot is None
    assert _holders(k8s) == {ts.slot_name(POOL.name, 0): "node-a"}
    # A renewal is a change: the clock starts again when the other agent sees it (its next run).
    assert await holder.renew(T0 + timedelta(minutes=3)) is None
    nodes["node-a"] = _node("node-a", False)
    mono.t += 60
    assert (await other.acquire(POOL, budget, T0, node_of)).slot is None  # the renewal seen now
    mono.t += 170
    assert (await other.acquire(POOL, budget, T0, node_of)).slot is None  # untainted, but not stale yet
    mono.t += 11
    got = await other.acquire(POOL, budget, T0, node_of)
    assert got.slot == ts.slot_name(POOL.name, 0) and "did not renew" in got.reclaimed, got
    assert _holders(k8s) == {ts.slot_name(POOL.name, 0): "node-b"}
    # The old holder learns it on its next renewal (409): it no longer counts the slot as its own.
    assert await holder.renew(T0 + timedelta(minutes=9)) is None and holder.held is None
    # `agent --once` (a fresh agent that has observed nothing) never reclaims a stale slot, whatever it reads.
    once = _slots(kube, "node-c")
    mono.t += 10_000
    assert (await once.acquire(POOL, budget, T0 + timedelta(minutes=10), _no_node)).slot is None


async def test_a_slot_taken_a_window_ago_goes_back_to_the_pool(leases) -> None:
    k8s, kube = leases
    budget = ts.budget_of(POOL, _fv(5), T0)
    holder, other = _slots(kube, "node-a"), _slots(kube, "node-b")
    assert (await holder.acquire(POOL, budget, T0, _no_node)).slot
    late = T0 + timedelta(seconds=POOL.blast_budget().window_s + 1)
    got = await other.acquire(POOL, budget, late, _no_node)
    assert got.slot and got.reclaimed.startswith("aged"), got
    spec = k8s.objects[LEASES, NS, got.slot].raw["spec"]
    assert spec["holderIdentity"] == "node-b" and spec["leaseTransitions"] == 1


async def test_a_restarted_agent_adopts_the_slot_it_held(leases) -> None:
    _k8s, kube = leases
    budget = ts.budget_of(POOL, _fv(5), T0)
    assert (await _slots(kube, "node-a").acquire(POOL, budget, T0, _no_node)).slot
    again = _slots(kube, "node-a")
    assert await again.adopt(POOL.name) is None and again.slot == ts.slot_name(POOL.name, 0)
    assert await again.renew(T0 + timedelta(minutes=1)) is None and again.held is not None


async def test_a_role_without_the_lease_grants_gets_no_slot_and_says_so(leases) -> None:
    k8s, kube = leases
    objs = agent_manifests(PROFILE, GKE.read_text(), IMAGE_REF, manage_taints=True)
    k8s.rbac = Rbac.from_manifests([o for o in objs if o["kind"] not in ("Role", "RoleBinding")])
    got = await _slots(kube, "node-a").acquire(POOL, ts.budget_of(POOL, _fv(5), T0), T0, _no_node)
    assert got.slot is None and got.error and "403" in got.error and "leases" in got.error, got
    assert k8s.denied


async def test_a_failed_write_is_no_slot(leases) -> None:
    """A create the API server refuses with 500 (etcd trouble): no slot, an error, nothing held."""
    k8s, kube = leases
    k8s["post", "/apis/coordination.k8s.io/v1/namespaces/fabricguard-system/leases"] << 500
    slots = _slots(kube, "node-a")
    got = await slots.acquire(POOL, ts.budget_of(POOL, _fv(5), T0), T0, _no_node)
    assert got.slot is None and got.error and slots.held is None, got


def test_the_rendered_role_is_exactly_the_slot_calls() -> None:
    objs = agent_manifests(PROFILE, GKE.read_text(), IMAGE_REF, manage_taints=True)
    role = next(o for o in objs if o["kind"] == "Role")
    assert role["metadata"]["namespace"] == NS
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "verbs": ["create", "list", "patch"]}]
    plain = agent_manifests(copy.deepcopy(PROFILE), GKE.read_text(), IMAGE_REF, manage_taints=False)
    assert not [o for o in plain if o["kind"] in ("Role", "RoleBinding")]
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    env = {e["name"]: e for e in ds["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert NODE_NAME  # the shared fixture's node is the one the live agent tests taint


# ------------------------------------------------------------------------------------------- whole agents

OTHER = "gke-a3u-pool-1-7f3c9a2e-0002"  # the apiserver fixture's "agent-other" token is bound to this node
FVS = f"{names.FV_API}/{names.FV_PLURAL}"


def _readiness(k8s: Any, node: str) -> list[str]:
    return [t["key"] for t in k8s.node(node)["spec"].get("taints", []) if t["key"].startswith("readiness.k8s.io/")]


async def test_two_nodes_failing_in_one_pass_with_one_slot_taint_one(apiserver, tmp_path: Path, healthy_root: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """The issue's case: nodes start failing together, before any controller pass. With the budget at one slot
    (a 5-node pool), exactly one taints itself; the other withholds (log line naming pool and budget, metric,
    ``agent --once``'s ``taintBudget``). When the first recovers it gives its slot back and the other taints."""
    k8s, url = apiserver
    k8s.rbac = Rbac.from_manifests(agent_manifests(PROFILE, GKE.read_text(), IMAGE_REF, manage_taints=True))
    other = healthy_node()
    other["metadata"]["name"] = OTHER
    k8s.put_node(other)
    k8s.resources[FVS].verbs = {"get", "list", "watch", "patch"}
    root_b = tmp_path / "other-root"
    shutil.copytree(healthy_root, root_b)
    # Wall-clock time: `agent --once` below reads the same slots with its own clock.
    a = await make_agent(tmp_path, url, healthy_root, manage_taints=True, clock=Clock(datetime.now(UTC)))
    b = await make_agent(tmp_path, url, root_b, manage_taints=True, token="agent-other", node=OTHER,
                         clock=Clock(datetime.now(UTC)))
    k8s.objects[FVS, None, POOL.name] = _fv(5, a.clock())  # the controller counted 5 nodes: max(1, 0.5) = 1 slot
    break_port(healthy_root)
    break_port(root_b)
    ra, rb = await asyncio.gather(a.run_once(), b.run_once())
    assert ra.reported.status == rb.reported.status == "False" and ra.errors == rb.errors == [], (ra.errors, rb.errors)
    tainted = [n for n in (NODE_NAME, OTHER) if _readiness(k8s, n)]
    assert len(tainted) == 1, tainted
    holder, waiter = (a, b) if tainted == [NODE_NAME] else (b, a)
    hres, wres = (ra, rb) if holder is a else (rb, ra)
    assert hres.taint_budget and hres.taint_budget["held"] and not hres.taint_budget["withheld"]
    # taken: 1 when the waiter listed after the holder's create, 0 when it lost the create itself
    assert wres.taint_budget == {"pool": POOL.name, "slots": 1, "nodes": 5, "source": wres.taint_budget["source"],
                                 "held": None, "taken": wres.taint_budget["taken"], "withheld": True}
    assert wres.taint_budget["taken"] in (0, 1) and "of 5 nodes = 1" in wres.taint_budget["source"]
    said = [r.getMessage() for r in caplog.records if "no taint slot" in r.getMessage()]
    assert len(said) == 1 and f"pool {POOL.name}" in said[0] and "1 taint slot(s)" in said[0], said
    scrape = waiter.metrics.registry.get_sample_value
    assert scrape("fabricguard_agent_taint_budget_withheld", {"pool": POOL.name}) == 1
    assert holder.metrics.registry.get_sample_value("fabricguard_agent_taint_budget_withheld",
                                                    {"pool": POOL.name}) == 0
    # `agent --once` (JSON and human) says the same for the waiting node, and its JSON matches the schema.
    cfg = kubeconfig(tmp_path, url, "agent-own" if waiter is a else "agent-other")
    root = healthy_root if waiter is a else root_b
    args = ["agent", "--once", "--manage-taints", "--node", waiter.cfg.node, "--profile", str(GKE), "--root",
            str(root), "--nvml-json", str(Path(__file__).parent / "fixtures" / "healthy-a3-ultra" / "nvml.json"),
            "--kubeconfig", cfg]
    r = await asyncio.to_thread(CliRunner().invoke, app, [*args, "--json"])
    doc = json.loads(r.stdout)
    assert doc["taintBudget"]["withheld"] is True and doc["taintBudget"]["slots"] == 1, r.output
    assert_matches("AgentReport", doc, r.exit_code)
    human = io.StringIO()
    with contextlib.redirect_stdout(human):
        _print_human(doc)
    assert "taint withheld: no taint slot of pool h200-rdma free (1 of 1 held by other nodes" in " ".join(
        human.getvalue().split()), human.getvalue()
    # The holder's node recovers: its taint goes, its slot is given back; the waiter's next run takes it.
    fix_port(healthy_root if holder is a else root_b)
    res = await holder.run_once()
    assert res.reported.status == "True" and not _readiness(k8s, holder.cfg.node) and _holders(k8s) == {}
    res = await waiter.run_once()
    assert res.errors == [] and _readiness(k8s, waiter.cfg.node) and res.taint_budget["held"]
    assert scrape("fabricguard_agent_taint_budget_withheld", {"pool": POOL.name}) == 0
    # While its taint stands, each run renews the slot (and reads no budget: nothing to add).
    before = k8s.objects[LEASES, NS, res.taint_budget["held"]].raw["spec"]["renewTime"]
    waiter.clock.tick(60)
    res = await waiter.run_once()
    assert res.taint_budget is None and res.errors == []
    assert k8s.objects[LEASES, NS, ts.slot_name(POOL.name, 0)].raw["spec"]["renewTime"] != before


async def test_a_lease_refusal_never_taints_and_never_crashes(apiserver, tmp_path: Path, healthy_root: Path) -> None:
    """An agent whose role predates the slots (403 on the Leases): a report error naming the refusal, no taint."""
    k8s, url = apiserver
    objs = agent_manifests(PROFILE, GKE.read_text(), IMAGE_REF, manage_taints=True)
    k8s.rbac = Rbac.from_manifests([o for o in objs if o["kind"] not in ("Role", "RoleBinding")])
    k8s.resources[FVS].verbs = {"get", "list", "watch", "patch"}
    agent = await make_agent(tmp_path, url, healthy_root, manage_taints=True)
    break_port(healthy_root)
    res = await agent.run_once()
    assert res.reported.status == "False" and not _readiness(k8s, NODE_NAME)
    assert len(res.errors) == 1 and "403" in res.errors[0] and "taint slots" in res.errors[0], res.errors
    assert res.taint_budget and res.taint_budget["withheld"] and res.taint_budget["slots"] == 1
    # Whatever else goes wrong inside the slots (a bug, an answer nobody foresaw): no slot, no taint, no crash.
    k8s.rbac = Rbac.from_manifests(objs)

    async def broken(*_args: Any) -> None:
        raise RuntimeError("unforeseen")

    assert agent.slots is not None
    agent.slots.acquire = broken  # type: ignore[method-assign]
    res = await agent.run_once()
    assert not _readiness(k8s, NODE_NAME) and res.taint_budget and res.taint_budget["withheld"]
    assert any("RuntimeError: unforeseen" in e for e in res.errors), res.errors


def test_a_persons_reset_releases_the_nodes_failing_before_it_from_the_slots() -> None:
    """The controller counts only failures after a reset; the slots count what it counts."""
    from fabricguard import breaker

    cond = {"type": "FabricReady", "status": "False", "reason": "ChecksFailed", "lastTransitionTime": "2026-12-01T08:00:00Z",
            "message": "2 check(s) failed: rdma.ports, rdma.resources | rdma.ports: down; rdma.resources: x"}
    reset = breaker.reset(breaker.BreakerState(open=True, since=T0), T0)  # reset at 09:00
    fv = {"status": {"breakers": [{"check": c, **reset.to_dict()} for c in ("rdma.ports", "rdma.resources")]}}
    assert ts.reset_excused(cond, fv) == ["rdma.ports", "rdma.resources"]
    assert ts.reset_excused({**cond, "lastTransitionTime": "2026-12-01T09:30:00Z"}, fv) == []  # failed after it
    one = {"status": {"breakers": fv["status"]["breakers"][:1]}}
    assert ts.reset_excused(cond, one) == []  # rdma.resources was never reset: it takes a slot
    assert ts.reset_excused(cond, None) == [] and ts.reset_excused(None, fv) == []


async def test_the_budget_holds_through_failures_recoveries_crashes_and_reclaims(leases) -> None:
    """A seeded random history over real HTTP: each round some agents start failing, recover, or die (their taint
    stays, nothing renews), the clocks move, and every failing agent without a taint races for a slot and taints only
    with one. After every round, the taints placed within the window never outnumber the slots; a slot is freed
    only by a release, by ageing, or by a stale holder whose taint is gone."""
    import random

    k8s, kube = leases
    rng = random.Random(24)
    budget = ts.budget_of(POOL, _fv(20), T0)  # 2 slots
    window = POOL.blast_budget().window_s
    mono = Mono()
    names_ = [f"node-{i}" for i in range(8)]
    agents = {n: _slots(kube, n, mono) for n in names_}
    nodes = {n: _node(n, False) for n in names_}
    tainted_at: dict[str, datetime] = {}  # node -> when its agent tainted it (the controller's "newly failing")
    failing: set[str] = set()
    dead: set[str] = set()

    async def node_of(name: str) -> dict[str, Any] | None:
        return nodes.get(name)

    now = T0
    placed, reclaims = 0, set()
    for _round in range(40):
        if _round >= 12 and reclaims == {"aged", "its"}:
            break
        now += timedelta(seconds=rng.choice((60, 60, 200, 1200)))
        mono.t += (now - T0).total_seconds() - (mono.t - 1000.0)
        for n in names_:
            if n in dead:
                continue
            r = rng.random()
            if r < 0.35:
                failing.add(n)
            elif r < 0.55 and n in failing:  # recovers: untaints, gives the slot back
                failing.discard(n)
                nodes[n] = _node(n, False)
                tainted_at.pop(n, None)
                assert await agents[n].release(now) is None
            elif r < 0.62 and n in tainted_at:  # dies with its taint standing; or its Node is deleted
                dead.add(n)
                if rng.random() < 0.5:
                    nodes.pop(n)
                    tainted_at.pop(n)
        live = [n for n in names_ if n not in dead]
        for n in live:
            if n in tainted_at:
                assert await agents[n].renew(now) is None
        want = [n for n in live if n in failing and n not in tainted_at]
        got = await asyncio.gather(*(agents[n].acquire(POOL, budget, now, node_of) for n in want))
        for n, g in zip(want, got, strict=True):
            assert g.error is None, g
            if g.slot:
                nodes[n] = _node(n, True)
                tainted_at[n] = now
                placed += 1
                reclaims.update({g.reclaimed.split(":")[0].split(" ")[0]} if g.reclaimed else set())
        new = [n for n, t in tainted_at.items() if now - t <= timedelta(seconds=window)]
        assert len(new) <= budget.slots, (_round, new)
        held = _holders(k8s)
        assert len(held) <= budget.slots and len(set(held.values())) == len(held), held
    # The history reused slots every way, always within the budget.
    assert placed > budget.slots and reclaims == {"aged", "its"}, (placed, reclaims)


async def test_a_profile_typo_flipping_every_node_in_one_pass_taints_at_most_the_budget(leases) -> None:
    """Issue 24's done-when for pools whose agents keep their taints, for each example profile: a typo rolls out
    and every node of the pool fails the same check before the controller's next pass. The agents race for the
    slots (sized from the count the controller published), so at most the budget taints; the next pass counts every
    failing node, opens the breaker and lifts those taints; the holders then give their slots back."""
    import jsonpatch

    from fabricguard import objects as o
    from fabricguard.agent.condition import Readiness, Reason, build_condition
    from fabricguard.agent.taints import taint_patch, wanted_taints
    from fabricguard.controller.actions import JsonPatch

    k8s, kube = leases
    for path in sorted(GKE.parent.glob("*.yaml")):
        prof = load_profile(path)
        pool = prof.spec.pools[0]
        healthy = build_condition(Readiness("True", Reason.passed, "6 check(s) passed"), None, T0 - timedelta(days=1))
        nodes = [{"metadata": {"name": f"{pool.name}-{i:02d}", "labels": dict(pool.nodeSelector)},
                  "spec": {"taints": []}, "status": {"conditions": [healthy]}} for i in range(10)]
        fv = {"metadata": {"name": pool.name}, "status": {}}
        fv["status"].update(judge_breakers(prof, nodes, {pool.name: fv}, [], [], T0).fv_status[pool.name])
        allowed = fv["status"]["blastBudget"]["allowed"]
        assert allowed == max(pool.blastRadius.minimum, int(pool.blastRadius.fraction * 10)), path.name
        # Within one pass every agent reports False and wants the degraded taint.
        flip = T0 + timedelta(seconds=30)
        failed = Readiness("False", Reason.failed, "1 check(s) failed: fabric.allocatable | fabric.allocatable: "
                           "networking.gke.io.networks/rdma7 is absent from allocatable")
        agents = {o.name_of(n): _slots(kube, o.name_of(n)) for n in nodes}
        budget = ts.budget_of(pool, fv, flip)
        got = await asyncio.gather(*(agents[o.name_of(n)].acquire(pool, budget, flip, _no_node) for n in nodes))
        for n, g in zip(nodes, got, strict=True):
            wanted = wanted_taints(n, "False")
            n["status"]["conditions"] = [build_condition(failed, healthy, flip)]
            if g.slot:
                n.update(jsonpatch.apply_patch(n, taint_patch(n, wanted) or []))
        tainted = [o.name_of(n) for n in nodes if n["spec"]["taints"]]
        assert len(tainted) == allowed, (path.name, tainted)
        # The controller's next pass: over budget, the breaker opens and lifts every withheld node's taints.
        res = judge_breakers(prof, nodes, {pool.name: fv}, [], [], flip + timedelta(seconds=30))
        assert res.pools[pool.name].open_checks == ["fabric.allocatable"], path.name
        for a in res.actions:
            if isinstance(a, JsonPatch):
                n = next(n for n in nodes if o.name_of(n) == a.name)
                n.update(jsonpatch.apply_patch(n, a.ops))
        assert not [n for n in nodes if n["spec"]["taints"]]
        for name in tainted:  # each holder's next run finds its taint gone and gives the slot back
            assert await agents[name].release(flip + timedelta(minutes=1)) is None
        assert not [h for s, h in _holders(k8s).items() if s.startswith(ts.slot_name(pool.name, 0)[:-1])]
