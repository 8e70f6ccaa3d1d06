"""The agent against a live API server (kmock's emulator over real HTTP, with Node patch semantics):
its condition and nothing else, heartbeats, damping, allocatable, fallback taints, staleness, restarts,
/healthz and /metrics, and the own-node admission policy enforced on every write."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from agent_support import GKE, HEALTHY, NODE_NAME, ApiServer, agent_rbac, healthy_node, kubeconfig
from prometheus_client.parser import text_string_to_metric_families

from fabricguard.agent.kube import SWEEPER_GRANTS, KubeError, NodeClient, agent_grants, connect, sweep_stale
from fabricguard.agent.loop import Agent, AgentConfig
from fabricguard.agent.render import admission_policy
from fabricguard.profile import load_profile

T0 = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)
KUBELET_TYPES = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]


class Clock:
    def __init__(self, t: datetime = T0) -> None:
        self.t = t

    def __call__(self) -> datetime:
        return self.t

    def tick(self, seconds: float = 60) -> None:
        self.t += timedelta(seconds=seconds)


async def make_agent(tmp_path: Path, url: str, root: Path, *, token: str = "agent-own", passes: int = 1,
                     manage_taints: bool = False, clock: Clock | None = None, node: str = NODE_NAME) -> Agent:
    api = await connect(kubeconfig(tmp_path, url, token), table=agent_grants(manage_taints))
    cfg = AgentConfig(node=node, profile=load_profile(GKE), root=root, nvml_json=HEALTHY / "nvml.json",
                      passes=passes, manage_taints=manage_taints, interval=60)
    return Agent(cfg, NodeClient(api), clock=clock or Clock())


def condition(k8s: ApiServer, ctype: str = "FabricReady") -> dict | None:
    return next((c for c in k8s.node(NODE_NAME)["status"]["conditions"] if c["type"] == ctype), None)


def taint_keys(k8s: ApiServer) -> list[str]:
    return [t["key"] for t in k8s.node(NODE_NAME)["spec"].get("taints", [])]


def break_port(root: Path, dev: str = "mlx5_3") -> None:
    (root / f"sys/class/infiniband/{dev}/ports/1/state").write_text("1: DOWN\n")
    (root / f"sys/class/infiniband/{dev}/ports/1/phys_state").write_text("3: Disabled\n")


def fix_port(root: Path, dev: str = "mlx5_3") -> None:
    (root / f"sys/class/infiniband/{dev}/ports/1/state").write_text("4: ACTIVE\n")
    (root / f"sys/class/infiniband/{dev}/ports/1/phys_state").write_text("5: LinkUp\n")


async def test_report_patches_only_its_condition(apiserver, tmp_path: Path, healthy_root: Path) -> None:
    k8s, url = apiserver
    before = k8s.node(NODE_NAME)
    agent = await make_agent(tmp_path, url, healthy_root)
    res = await agent.run_once()
    assert res.errors == [] and res.reported.status == "True"
    after = k8s.node(NODE_NAME)
    # Its two conditions: FabricReady, and FabricLinks (the ports' counters, agent/links.py) in the same write.
    assert [c["type"] for c in after["status"]["conditions"]] == [*KUBELET_TYPES, "FabricReady", "FabricLinks"]
    assert after["status"]["conditions"][:4] == before["status"]["conditions"]
    assert {k: v for k, v in after["status"].items() if k != "conditions"} == {
        k: v for k, v in before["status"].items() if k != "conditions"}
    assert after["spec"] == before["spec"] and after["metadata"]["labels"] == before["metadata"]["labels"]
    sub, ctype, body = k8s.patches[-1]
    assert (sub, ctype) == ("status", "application/strategic-merge-patch+json")
    assert list(body) == ["status"] and [c["type"] for c in body["status"]["conditions"]] == ["FabricReady",
                                                                                               "FabricLinks"]
    c = condition(k8s)
    assert c is not None and (c["status"], c["reason"]) == ("True", "AllChecksPassed")
    assert c["lastHeartbeatTime"] == "2026-11-30T10:00:00Z"


async def test_a_due_heartbeat_moves_not_the_transition_and_a_change_is_written_at_once(
        apiserver, tmp_path, healthy_root) -> None:
    k8s, url = apiserver
    clock = Clock()
    agent = await make_agent(tmp_path, url, healthy_root, clock=clock)
    await agent.run_once()
    clock.tick(60)
    await agent.run_once()  # unchanged, heartbeat not due (300 s): nothing written
    c = condition(k8s)
    assert c is not None
    assert (c["lastHeartbeatTime"], c["lastTransitionTime"]) == ("2026-11-30T10:00:00Z", "2026-11-30T10:00:00Z")
    clock.tick(240)
    await agent.run_once()  # 5 minutes after the last write: the heartbeat is due
    c = condition(k8s)
    assert c is not None
    assert (c["lastHeartbeatTime"], c["lastTransitionTime"]) == ("2026-11-30T10:05:00Z", "2026-11-30T10:00:00Z")
    clock.tick(60)
    break_port(healthy_root)
    clock.tick(60)
    await agent.run_once()
    c = condition(k8s)
    assert c is not None and c["status"] == "False" and c["lastTransitionTime"] == "2026-11-30T10:07:00Z"
    assert "rdma.ports" in c["message"] and "mlx5_3/1: 1: DOWN / 3: Disabled" in c["message"]


async def test_flapping_check_is_damped(apiserver, tmp_path, healthy_root) -> None:
    k8s, url = apiserver
    agent = await make_agent(tmp_path, url, healthy_root, passes=3)
    statuses = []
    for flap in (False, False, True, False, False, False):
        (break_port if flap else fix_port)(healthy_root)
        await agent.run_once()
        c = condition(k8s)
        assert c is not None
        statuses.append((c["status"], c["reason"]))
    assert statuses == [
        ("False", "AwaitingStablePasses"),
        ("False", "AwaitingStablePasses"),
        ("False", "ChecksFailed"),  # one failure closes at once, and the count starts again
        ("False", "AwaitingStablePasses"),
        ("False", "AwaitingStablePasses"),
        ("True", "AllChecksPassed"),
    ]
    c = condition(k8s)
    assert c is not None


async def test_allocatable_vanishing_turns_false_within_one_run(apiserver, tmp_path, healthy_root) -> None:
    k8s, url = apiserver
    agent = await make_agent(tmp_path, url, healthy_root)
    assert (await agent.run_once()).reported.status == "True"
    node = k8s.node(NODE_NAME)
    del node["status"]["allocatable"]["networking.gke.io.networks/rdma-5"]
    node["status"]["capacity"]["networking.gke.io.networks/rdma-5"] = "0"
    k8s.put_node(node)
    await agent.run_once()
    c = condition(k8s)
    assert c is not None and c["status"] == "False" and c["reason"] == "ChecksFailed"
    assert c["message"].startswith("1 check(s) failed: fabric.allocatable")
    assert "networking.gke.io.networks/rdma-5 is absent" in c["message"]


async def test_fallback_taints_bootstrap_degrade_recover(apiserver, tmp_path, healthy_root) -> None:
    k8s, url = apiserver
    k8s.policies = admission_policy("fabricguard-system")
    k8s.rbac = agent_rbac(manage_taints=True)  # rendered with --manage-taints: the agent may patch its Node
    agent = await make_agent(tmp_path, url, healthy_root, manage_taints=True)
    break_port(healthy_root)
    await agent.run_once()  # a new node that fails: closed as unverified
    assert taint_keys(k8s) == ["nvidia.com/gpu", "readiness.k8s.io/fabric-unverified"]
    await agent.run_once()  # stays unverified (bootstrap) while it keeps failing
    assert taint_keys(k8s) == ["nvidia.com/gpu", "readiness.k8s.io/fabric-unverified"]
    fix_port(healthy_root)
    await agent.run_once()
    assert taint_keys(k8s) == ["nvidia.com/gpu"]
    break_port(healthy_root)
    await agent.run_once()  # passed once: now it is degraded, not unverified
    assert taint_keys(k8s) == ["nvidia.com/gpu", "readiness.k8s.io/fabric-degraded"]
    fix_port(healthy_root)
    await agent.run_once()
    assert taint_keys(k8s) == ["nvidia.com/gpu"]
    assert all(t["effect"] == "NoSchedule" for t in k8s.node(NODE_NAME)["spec"]["taints"])
    taint_patches = [p for p in k8s.patches if p[0] == ""]
    assert len(taint_patches) == 4 and all(p[2][0]["op"] == "test" for p in taint_patches)


async def test_taint_patch_retries_when_the_node_changed(apiserver, tmp_path, healthy_root) -> None:
    """Someone adds a taint between the agent's status write and its taint write: the resourceVersion test
    fails, the agent re-reads, and the other taint survives."""
    k8s, url = apiserver
    k8s.rbac = agent_rbac(manage_taints=True)  # rendered with --manage-taints: the agent may patch its Node
    agent = await make_agent(tmp_path, url, healthy_root, manage_taints=True)
    break_port(healthy_root)
    client = agent.client
    assert client is not None
    real_patch_status = client.patch_status

    async def patch_then_race(name: str, body: dict) -> dict:
        node = await real_patch_status(name, body)
        other = k8s.node(NODE_NAME)
        other["spec"]["taints"].append({"key": "example.com/maintenance", "effect": "NoSchedule"})
        k8s.put_node(other)
        return node

    client.patch_status = patch_then_race  # type: ignore[method-assign]
    res = await agent.run_once()
    assert res.errors == []
    assert taint_keys(k8s) == ["nvidia.com/gpu", "example.com/maintenance", "readiness.k8s.io/fabric-unverified"]
    json_patches = [p for p in k8s.patches if p[1] == "application/json-patch+json"]
    assert len(json_patches) == 2  # the first failed its test, the second was built on the fresh Node


async def test_restarted_agent_keeps_a_fresh_true_but_not_a_stale_one(apiserver, tmp_path, healthy_root) -> None:
    _, url = apiserver
    clock = Clock()
    first = await make_agent(tmp_path, url, healthy_root, clock=clock)
    await first.run_once()
    clock.tick(90)  # rolling update: a new pod, well within 3 intervals
    second = await make_agent(tmp_path, url, healthy_root, passes=3, clock=clock)
    assert (await second.run_once()).reported.status == "True"
    clock.tick(3600)  # the agent was gone for an hour: its old True proves nothing
    third = await make_agent(tmp_path, url, healthy_root, passes=3, clock=clock)
    res = await third.run_once()
    assert (res.reported.status, res.reported.reason) == ("False", "AwaitingStablePasses")


async def test_sweep_turns_stale_conditions_unknown(apiserver, tmp_path, healthy_root) -> None:
    k8s, url = apiserver
    agent = await make_agent(tmp_path, url, healthy_root)
    await agent.run_once()  # heartbeat 10:00:00
    second = healthy_node()
    second["metadata"]["name"] = "gke-a3u-pool-1-7f3c9a2e-0002"
    k8s.put_node(second)  # no FabricReady at all: nothing to sweep (a missing condition is Unknown already)
    admin = NodeClient(await connect(kubeconfig(tmp_path, url, "admin"), table=SWEEPER_GRANTS))
    assert (await sweep_stale(admin, T0 + timedelta(seconds=120), timedelta(seconds=180))).changed == []
    assert (await sweep_stale(admin, T0 + timedelta(seconds=181), timedelta(seconds=180))).changed == [NODE_NAME]
    c = condition(k8s)
    assert c is not None and (c["status"], c["reason"]) == ("Unknown", "HeartbeatStale")
    assert c["lastHeartbeatTime"] == "2026-11-30T10:00:00Z" and "since 2026-11-30T10:00:00Z" in c["message"]
    ready = condition(k8s, "Ready")
    assert ready is not None and ready["status"] == "True"
    assert (await sweep_stale(admin, T0 + timedelta(days=1), timedelta(seconds=180))).changed == []  # Unknown stays


async def test_sweep_account_may_only_mark_fabricready_unknown(apiserver, tmp_path, healthy_root) -> None:
    k8s, url = apiserver
    k8s.policies = admission_policy("fabricguard-system")
    agent = await make_agent(tmp_path, url, healthy_root)
    await agent.run_once()
    sweep = NodeClient(await connect(kubeconfig(tmp_path, url, "sweep"), table=SWEEPER_GRANTS))
    with pytest.raises(KubeError, match="may only set FabricReady to Unknown"):
        await sweep.patch_status(NODE_NAME, {"status": {"conditions": [{"type": "FabricReady", "status": "True"}]}})
    with pytest.raises(KubeError, match="only the FabricReady and FabricLinks conditions"):
        await sweep.patch_status(NODE_NAME, {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    assert (await sweep_stale(sweep, T0 + timedelta(hours=1), timedelta(seconds=180))).changed == [NODE_NAME]
    c = condition(k8s)
    assert c is not None and c["status"] == "Unknown"


async def test_sweep_loses_to_an_agent_that_reported_meanwhile(apiserver, tmp_path, healthy_root) -> None:
    from fabricguard.agent.staleness import stale_patches

    k8s, url = apiserver
    clock = Clock()
    agent = await make_agent(tmp_path, url, healthy_root, clock=clock)
    await agent.run_once()
    admin = NodeClient(await connect(kubeconfig(tmp_path, url, "admin"), table=SWEEPER_GRANTS))
    [(name, body)] = stale_patches(await admin.list_nodes(), T0 + timedelta(hours=1), timedelta(seconds=180))
    clock.tick(300)  # its heartbeat is due: the agent writes
    await agent.run_once()  # the agent reports between the sweeper's read and its write
    with pytest.raises(KubeError) as err:
        await admin.patch_status(name, body)
    assert err.value.status == 409
    c = condition(k8s)
    assert c is not None and c["status"] == "True"


async def test_another_nodes_agent_cannot_write_this_node(apiserver, tmp_path, healthy_root) -> None:
    k8s, url = apiserver
    k8s.policies = admission_policy("fabricguard-system")
    intruder = await make_agent(tmp_path, url, healthy_root, token="agent-other")
    res = await intruder.run_once()
    assert res.errors and "may write only the Node its pod runs on" in res.errors[0]
    assert "is forbidden" in res.errors[0]
    assert condition(k8s) is None
    own = await make_agent(tmp_path, url, healthy_root)
    assert (await own.run_once()).errors == []
    assert condition(k8s) is not None


async def test_agent_cannot_touch_other_conditions_or_taints(apiserver, tmp_path) -> None:
    k8s, url = apiserver
    k8s.policies = admission_policy("fabricguard-system")
    k8s.rbac = agent_rbac(manage_taints=True)  # RBAC lets it patch its Node: the admission policy refuses
    client = NodeClient(await connect(kubeconfig(tmp_path, url, "agent-own")))
    with pytest.raises(KubeError, match="only the FabricReady and FabricLinks conditions") as err:
        await client.patch_status(NODE_NAME, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert err.value.status == 403
    with pytest.raises(KubeError, match="only the FabricReady and FabricLinks conditions"):
        await client.patch_status(NODE_NAME, {"status": {"allocatable": {"nvidia.com/gpu": "16"}}})
    with pytest.raises(KubeError, match=r"readiness\.k8s\.io/fabric-"):
        await client.patch_json(NODE_NAME, [{"op": "add", "path": "/spec/taints", "value": []}])
    with pytest.raises(KubeError, match=r"readiness\.k8s\.io/fabric-"):
        await client.patch_json(NODE_NAME, [{"op": "add", "path": "/spec/unschedulable", "value": True}])
    with pytest.raises(KubeError, match=r"readiness\.k8s\.io/fabric-"):
        await client.patch_json(NODE_NAME, [{"op": "add", "path": "/metadata/labels/x", "value": "y"}])
    with pytest.raises(KubeError, match=r"readiness\.k8s\.io/fabric-"):  # NoExecute would evict running jobs
        await client.patch_json(NODE_NAME, [{"op": "add", "path": "/spec/taints/-", "value": {
            "key": "readiness.k8s.io/fabric-degraded", "effect": "NoExecute"}}])
    await client.patch_json(NODE_NAME, [{"op": "add", "path": "/spec/taints/-", "value": {
        "key": "readiness.k8s.io/fabric-degraded", "effect": "NoSchedule"}}])
    # An administrator is not the agent: the policy does not apply.
    admin = NodeClient(await connect(kubeconfig(tmp_path, url, "admin")))
    await admin.patch_json(NODE_NAME, [{"op": "add", "path": "/spec/unschedulable", "value": True}])
    assert k8s.node(NODE_NAME)["spec"]["unschedulable"] is True


async def test_healthz_and_metrics_over_http(apiserver, tmp_path, healthy_root) -> None:
    from fabricguard.agent.server import make_app, start

    _, url = apiserver
    agent = await make_agent(tmp_path, url, healthy_root)
    server = start(make_app(agent.metrics, lambda: agent.last_finished, 0.0, 600.0), "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.port}"
    try:
        await agent.run_once()
        break_port(healthy_root, "mlx5_6")
        await agent.run_once()
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{base}/metrics") as r:
                assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
                text = await r.text()
            async with s.get(f"{base}/healthz") as r:
                assert r.status == 200 and await r.text() == "ok\n"
            async with s.get(f"{base}/other") as r:
                assert r.status == 404
    finally:
        server.close()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    checks = {(s.labels["check"], s.labels["status"]): s.value for s in fams["fabricguard_node_check"].samples}
    assert checks[("rdma.ports", "failed")] == 1 and checks[("rdma.ports", "pass")] == 0
    assert checks[("fabric.allocatable", "pass")] == 1
    assert fams["fabricguard_node_fabric_ready"].samples[0].value == 0
    assert fams["fabricguard_agent_last_run_timestamp_seconds"].samples[0].value == agent.last_finished
    count = [s for s in fams["fabricguard_agent_run_duration_seconds"].samples if s.name.endswith("_count")]
    assert count[0].value == 2
    # A wedged agent (no run for longer than the limit) answers 503 so its liveness probe restarts it.
    server = start(make_app(agent.metrics, lambda: agent.last_finished, 0.0, 1.0), "127.0.0.1", 0)
    try:
        agent.last_finished = (agent.last_finished or 0) - 10
        async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{server.port}/healthz") as r:
            assert r.status == 503 and "the last run finished" in await r.text()
    finally:
        server.close()


def test_health_rule() -> None:
    from fabricguard.agent.server import health

    assert health(None, 100.0, 30.0, 120.0) == (True, "ok\n")  # starting: the first run has time
    assert health(None, 100.0, 30.0, 140.0)[0] is False
    assert health(130.0, 100.0, 30.0, 150.0)[0] is True
    assert "the last run finished 40 s ago" in health(110.0, 100.0, 30.0, 150.0)[1]


async def test_loop_reports_every_interval_until_stopped(apiserver, tmp_path, healthy_root) -> None:
    k8s, url = apiserver
    agent = await make_agent(tmp_path, url, healthy_root)
    agent.cfg.interval = 0.3
    agent.clock = lambda: datetime.now(UTC)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run_forever(stop))
    deadline = asyncio.get_running_loop().time() + 30  # three 0.3 s intervals; generous for a loaded CI machine
    while agent.runs < 3 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert agent.runs >= 3
    # Every run reads and checks; only the first writes: the condition never changed and 300 s never passed.
    assert len([p for p in k8s.patches if p[0] == "status"]) == 1
    assert agent.metrics.status_writes.labels("skipped")._value.get() == agent.runs - 1


async def test_an_unchanged_pass_writes_nothing_and_a_stable_node_writes_twelve_times_an_hour(
        apiserver, tmp_path, healthy_root) -> None:
    """At 10,000 nodes a write every run was 167 writes/s to the API server for nothing (issue 29): now a run
    whose condition equals the Node's writes nothing until the 300 s heartbeat is due; staleness allows for it."""
    k8s, url = apiserver
    clock = Clock()
    agent = await make_agent(tmp_path, url, healthy_root, clock=clock)
    writes = lambda: len([p for p in k8s.patches if p[0] == "status"])  # noqa: E731
    await agent.run_once()
    assert writes() == 1
    clock.tick(60)
    res = await agent.run_once()
    assert writes() == 1, "an unchanged pass wrote the Node"
    assert res.condition == condition(k8s)  # what it reports is what the Node holds
    for _ in range(58):
        clock.tick(60)
        await agent.run_once()
    assert writes() == 12  # 60 runs in an hour: t = 0, 5, 10, ... 55 min (bench/agent/README.md)
    c = condition(k8s)
    assert c is not None
    # the sweep's limit (heartbeat + 3 runs) is never reached by a live agent's gaps
    assert (clock.t - datetime.fromisoformat(c["lastHeartbeatTime"].replace("Z", "+00:00"))) < agent.cfg.max_age


async def test_stop_cancels_a_run_stuck_on_the_api_server(apiserver, tmp_path, healthy_root) -> None:
    k8s, url = apiserver
    agent = await make_agent(tmp_path, url, healthy_root)
    hung = asyncio.Event()

    async def never_answers(name: str) -> dict:
        hung.set()
        await asyncio.sleep(3600)
        return {}

    agent.client.get = never_answers  # type: ignore[union-attr,method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run_forever(stop))
    await asyncio.wait_for(hung.wait(), 5)
    stop.set()
    await asyncio.wait_for(task, 2)  # SIGTERM does not wait for the request's timeout
    assert agent.runs == 0 and k8s.patches == []


async def test_cli_once_writes_the_condition(apiserver, tmp_path, healthy_root) -> None:
    from typer.testing import CliRunner

    from fabricguard.cli import app

    k8s, url = apiserver
    cfg = kubeconfig(tmp_path, url, "agent-own")
    r = await asyncio.to_thread(CliRunner().invoke, app, [
        "agent", "--once", "--json", "--node", NODE_NAME, "--profile", str(GKE), "--root", str(healthy_root),
        "--nvml-json", str(HEALTHY / "nvml.json"), "--kubeconfig", cfg])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["status"] == "True"
    c = condition(k8s)
    assert c is not None and c["status"] == "True"
    # --dry-run reads the same Node but writes nothing.
    n = len(k8s.patches)
    break_port(healthy_root)
    r = await asyncio.to_thread(CliRunner().invoke, app, [
        "agent", "--once", "--dry-run", "--json", "--node", NODE_NAME, "--profile", str(GKE), "--root",
        str(healthy_root), "--nvml-json", str(HEALTHY / "nvml.json"), "--kubeconfig", cfg])
    assert r.exit_code == 2 and json.loads(r.stdout)["status"] == "False"
    assert len(k8s.patches) == n
    sweeper = kubeconfig(tmp_path, url, "sweep")  # the sweep's own ServiceAccount: the agent's may not list Nodes
    r = await asyncio.to_thread(CliRunner().invoke, app, ["agent-sweep", "--kubeconfig", sweeper, "--max-age", "1",
                                                          "--json"])
    assert r.exit_code == 0, r.output


async def test_node_of_no_pool_is_refused_with_the_reason(apiserver, tmp_path, healthy_root) -> None:
    k8s, url = apiserver
    node = k8s.node(NODE_NAME)
    node["metadata"]["labels"]["cloud.google.com/gke-nodepool"] = "cpu-pool"
    k8s.put_node(node)
    res = await (await make_agent(tmp_path, url, healthy_root)).run_once()
    assert (res.reported.status, res.reported.reason) == ("False", "NoPoolForNode")
    c = condition(k8s)
    assert c is not None and "match no pool's nodeSelector in profile prod-gcp" in c["message"]


async def test_unreachable_api_server_is_a_report_error_not_a_crash(tmp_path, healthy_root) -> None:
    from kmock import Server

    k8s = ApiServer()
    async with k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.5"}
        agent = await make_agent(tmp_path, str(server.url).rstrip("/"), healthy_root)
    res = await agent.run_once()  # the server is gone now
    assert res.reported.status == "False"
    assert "cannot read the Node object" in res.reported.message
    assert len(res.errors) == 1 and f"PATCH /api/v1/nodes/{NODE_NAME}/status" in res.errors[0]
    assert "cannot connect" in res.errors[0] and "http://127.0.0.1:" in res.errors[0]  # names the server
    assert agent.metrics.report_errors._value.get() == 1
