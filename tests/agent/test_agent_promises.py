"""Issue 17 §4: the agent keeps its promises. Each test is one finding, against the real command (a process)
or the emulated API server over HTTP: reads under ``--root`` that never end, ``/metrics`` under a connection
flood, the staleness sweep over nodes it cannot patch or whose clocks run ahead, and metadata sent through
``nodes/status``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from agent_support import NODE_NAME, healthy_node, kubeconfig

from fabricguard.agent.kube import KubeError, NodeClient, connect
from fabricguard.agent.render import admission_policy

T0 = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)
OTHER = "gke-a3u-pool-1-7f3c9a2e-0002"


def fabric_ready(status: str, heartbeat: datetime) -> dict:
    ts = heartbeat.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": "FabricReady", "status": status, "reason": "AllChecksPassed", "message": "ok",
            "lastHeartbeatTime": ts, "lastTransitionTime": ts}


# ---------------------------------------------------------------------------------- metadata through status


async def test_status_writes_keep_metadata_in_the_test_api_server(apiserver, tmp_path: Path) -> None:
    """The emulator stores metadata sent to nodes/status, as the API server's Node status strategy does."""
    k8s, url = apiserver
    admin = NodeClient(await connect(kubeconfig(tmp_path, url, "admin")))
    await admin.patch_status(NODE_NAME, {"metadata": {"labels": {"team": "x"}}, "spec": {"unschedulable": True},
                                         "status": {"conditions": [fabric_ready("True", T0)]}})
    node = k8s.node(NODE_NAME)
    assert node["metadata"]["labels"]["team"] == "x"  # kept: status writes store metadata
    assert "unschedulable" not in node["spec"]  # reset: status writes never change spec


async def test_agent_cannot_relabel_its_own_node_through_status(apiserver, tmp_path: Path) -> None:
    k8s, url = apiserver
    k8s.policies = admission_policy("fabricguard-system")
    before = k8s.node(NODE_NAME)["metadata"]
    agent = NodeClient(await connect(kubeconfig(tmp_path, url, "agent-own")))
    for meta in ({"labels": {"cloud.google.com/gke-nodepool": "other-pool"}},
                 {"labels": {"cloud.google.com/gke-nodepool": None}},
                 {"annotations": {"x": "y"}}, {"finalizers": ["x/y"]}):
        with pytest.raises(KubeError, match="may not change a Node's labels") as err:
            await agent.patch_status(NODE_NAME, {"metadata": meta,
                                                 "status": {"conditions": [fabric_ready("True", T0)]}})
        assert err.value.status == 403
    after = k8s.node(NODE_NAME)["metadata"]
    assert after["labels"] == before["labels"] and after.get("annotations") == before.get("annotations")
    # Its own condition alone is still written.
    await agent.patch_status(NODE_NAME, {"status": {"conditions": [fabric_ready("True", T0)]}})


async def test_sweep_account_cannot_relabel_any_node_while_setting_unknown(apiserver, tmp_path: Path) -> None:
    k8s, url = apiserver
    k8s.policies = admission_policy("fabricguard-system")
    other = healthy_node()
    other["metadata"]["name"] = OTHER
    k8s.put_node(other)
    sweep = NodeClient(await connect(kubeconfig(tmp_path, url, "sweep")))
    for name in (NODE_NAME, OTHER):
        with pytest.raises(KubeError, match="may not change a Node's labels"):
            await sweep.patch_status(name, {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}},
                                            "status": {"conditions": [fabric_ready("Unknown", T0)]}})
        assert "node-role.kubernetes.io/control-plane" not in k8s.node(name)["metadata"]["labels"]
        # The sweep's own write (Unknown, with the resourceVersion precondition) is admitted.
        rv = k8s.node(name)["metadata"]["resourceVersion"]
        await sweep.patch_status(name, {"metadata": {"resourceVersion": rv},
                                        "status": {"conditions": [fabric_ready("Unknown", T0)]}})


# ---------------------------------------------------------------------------------------- staleness sweep


def put_nodes(k8s, heartbeats: dict[str, datetime]) -> None:
    for name, hb in heartbeats.items():
        node = healthy_node()
        node["metadata"]["name"] = name
        node["status"]["conditions"].append(fabric_ready("True", hb))
        k8s.put_node(node)


def sweep_cli(cfg: str, *extra: str) -> tuple[int, dict, str]:
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "fabricguard", "agent-sweep", "--kubeconfig", cfg, "--max-age",
                        "180", *extra], capture_output=True, text=True, timeout=60)
    return r.returncode, (json.loads(r.stdout) if "json" in extra else {}), r.stderr


async def test_sweep_goes_on_past_nodes_it_cannot_patch_and_names_them(apiserver, tmp_path: Path) -> None:
    """The real command over HTTP: a 404 and a 403 on the first nodes do not leave later nodes True."""
    import asyncio

    from agent_support import Denied
    from kmock._internal.k8s import KubernetesError, KubernetesNotFoundError

    k8s, url = apiserver
    old = datetime.now(UTC) - timedelta(hours=1)
    names = [f"gke-a3u-pool-1-7f3c9a2e-01{i:02d}" for i in range(4)]
    put_nodes(k8s, dict.fromkeys(names, old))
    k8s.faults = {names[0]: KubernetesNotFoundError(message=f'nodes "{names[0]}" not found'),
                  names[1]: Denied(message=f'nodes "{names[1]}" is forbidden'),
                  names[2]: KubernetesError(status=500, reason="InternalError", message="etcdserver: timeout")}
    code, out, err = await asyncio.to_thread(sweep_cli, kubeconfig(tmp_path, url, "admin"), "--format", "json")
    assert code == 2, err
    assert out["verdict"] == "failed" and out["stale"] == [names[3]]
    failed = {f["node"]: f["error"] for f in out["not_patched"]}
    assert set(failed) == set(names[:3])
    assert "not found" in failed[names[0]] and "forbidden" in failed[names[1]] and "etcdserver" in failed[names[2]]
    c = next(c for c in k8s.node(names[3])["status"]["conditions"] if c["type"] == "FabricReady")
    assert c["status"] == "Unknown"
    # The table says the same on stderr, one line per node left as it was.
    code, _, err = await asyncio.to_thread(sweep_cli, kubeconfig(tmp_path, url, "admin"))
    assert code == 2 and all(f"Node {n} left as it is" in err for n in names[:3])
    k8s.faults = {}
    code, out, _ = await asyncio.to_thread(sweep_cli, kubeconfig(tmp_path, url, "admin"), "--format", "json")
    assert code == 0 and sorted(out["stale"]) == sorted(names[:3]) and out["not_patched"] == []


async def test_a_heartbeat_far_in_the_future_is_stale(apiserver, tmp_path: Path) -> None:
    from fabricguard.agent.kube import sweep_stale

    k8s, url = apiserver
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    skewed, year_ahead = "gke-a3u-pool-1-7f3c9a2e-0201", "gke-a3u-pool-1-7f3c9a2e-0202"
    put_nodes(k8s, {skewed: now + timedelta(seconds=90), year_ahead: now + timedelta(days=365)})
    admin = NodeClient(await connect(kubeconfig(tmp_path, url, "admin")))
    res = await sweep_stale(admin, now, timedelta(seconds=180))
    assert res.changed == [year_ahead] and res.failed == {}  # 90 s ahead is clock skew, a year is not
    c = next(c for c in k8s.node(year_ahead)["status"]["conditions"] if c["type"] == "FabricReady")
    assert c["status"] == "Unknown" and "31536000 s ahead of this clock" in c["message"]
