"""Issue 17 §4: the agent keeps its promises. Each test is one finding, against the real command (a process)
or the emulated API server over HTTP: reads under ``--root`` that never end, ``/metrics`` under a connection
flood, the staleness sweep over nodes it cannot patch or whose clocks run ahead, and metadata sent through
``nodes/status``."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_support import GKE, HEALTHY, NODE_NAME, REPO, healthy_node, kubeconfig

from fabricguard.agent.kube import SWEEPER_GRANTS, KubeError, NodeClient, connect
from fabricguard.agent.render import admission_policy
from json_schema_check import assert_matches

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
    sweep = NodeClient(await connect(kubeconfig(tmp_path, url, "sweep"), table=SWEEPER_GRANTS))
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
    assert_matches("StaleSweep", out, code)
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
    assert_matches("StaleSweep", out, code)


async def test_a_heartbeat_far_in_the_future_is_stale(apiserver, tmp_path: Path) -> None:
    from fabricguard.agent.kube import sweep_stale

    k8s, url = apiserver
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    skewed, year_ahead = "gke-a3u-pool-1-7f3c9a2e-0201", "gke-a3u-pool-1-7f3c9a2e-0202"
    put_nodes(k8s, {skewed: now + timedelta(seconds=90), year_ahead: now + timedelta(days=365)})
    admin = NodeClient(await connect(kubeconfig(tmp_path, url, "admin"), table=SWEEPER_GRANTS))
    res = await sweep_stale(admin, now, timedelta(seconds=180))
    assert res.changed == [year_ahead] and res.failed == {}  # 90 s ahead is clock skew, a year is not
    c = next(c for c in k8s.node(year_ahead)["status"]["conditions"] if c["type"] == "FabricReady")
    assert c["status"] == "Unknown" and "31536000 s ahead of this clock" in c["message"]


# ------------------------------------------------------------------------------------ reads below --root

AGENT_ARGS = ["--once", "--dry-run", "--format", "json", "--node", NODE_NAME, "--profile", str(GKE),
              "--nvml-json", str(HEALTHY / "nvml.json"), "--node-json", str(HEALTHY / "node.json")]
# The same agent with one check group made to block for ever, as a read on a hung mount does (a regular
# file, so no stat can refuse it): the deadline is the only thing that can end the run.
HUNG = (
    "import sys, threading, fabricguard.probes.host as h\n"
    "h.module_checks = lambda *a, **k: threading.Event().wait()\n"
    "from fabricguard.agent.__main__ import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def run_agent(root: Path, *extra: str, hung: bool = False, obey_permissions: bool = False,
              timeout: float = 30) -> tuple[int, dict, str, float]:
    """``python -m fabricguard.agent`` as the DaemonSet runs it; (exit code, JSON, stderr, seconds).

    ``obey_permissions``: as root, without the capabilities that bypass file permissions (the DaemonSet's
    agent runs as uid 65532 with every capability dropped, so a mode-000 directory stops it)."""
    cmd = [sys.executable, "-c", HUNG] if hung else [sys.executable, "-m", "fabricguard.agent"]
    if obey_permissions and os.geteuid() == 0:
        cmd = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", *cmd]
    t = time.monotonic()
    r = subprocess.run([*cmd, *AGENT_ARGS, "--root", str(root), *extra], capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    try:
        out = json.loads(r.stdout)
    except ValueError:
        out = {}
    return r.returncode, out, r.stderr, time.monotonic() - t


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def by_name(out: dict) -> dict[str, dict]:
    return {c["name"]: c for c in out.get("checks", [])}


PORT = "sys/class/infiniband/mlx5_0/ports/1"


def _fifo(p: Path) -> None:
    p.unlink()
    os.mkfifo(p)


def _dev_zero(p: Path) -> None:
    p.unlink()
    p.symlink_to("/dev/zero")


def _sparse(p: Path) -> None:
    with p.open("wb") as fh:
        fh.truncate(1024**3)


@pytest.mark.parametrize("where", [f"{PORT}/state", "proc/modules", "proc/self/mountinfo"])
@pytest.mark.parametrize("make", [_fifo, _dev_zero, _sparse], ids=["fifo", "dev-zero", "sparse-1GiB"])
def test_a_file_that_never_ends_fails_its_check_and_the_agent_exits(healthy_root: Path, where: str,
                                                                     make: Any) -> None:
    """Before: the port files were read when the metrics registered, unguarded, and the run never ended."""
    make(healthy_root / where)
    code, out, err, took = run_agent(healthy_root, "--check-timeout", "3")
    assert code == 2, err
    assert took < 15 and "Traceback" not in err
    failed = {n for n, c in by_name(out).items() if c["status"] == "failed"}
    name = {f"{PORT}/state": "rdma.ports", "proc/modules": "modules", "proc/self/mountinfo": "lustre.mount"}[where]
    assert name in failed and name in out["message"]
    assert str(healthy_root / where) in json.dumps(out) or "unreadable" in by_name(out)[name]["detail"]


def test_a_hung_check_fails_by_name_at_the_deadline_and_once_exits(healthy_root: Path) -> None:
    """A read that blocks for ever (here: the modules group): --once exits at --check-timeout, naming it."""
    code, out, err, took = run_agent(healthy_root, "--check-timeout", "2", hung=True)
    assert code == 2, err
    assert took < 10, "the hung worker was joined"
    c = by_name(out)
    assert c["modules"]["status"] == "failed" and "did not finish within --check-timeout 2 s" in c["modules"]["detail"]
    assert c["rdma.devices"]["status"] == "pass"  # the groups that finished keep their results
    assert c["libs"]["status"] == "failed" and "not run: modules" in c["libs"]["detail"]
    assert out["status"] == "False" and "modules" in out["message"]


def test_an_unreadable_ports_directory_is_a_failed_check_not_a_traceback(healthy_root: Path) -> None:
    ports = healthy_root / "sys/class/infiniband/mlx5_0/ports"
    os.chmod(ports, 0)
    try:
        code, out, err, _ = run_agent(healthy_root, obey_permissions=True)
    finally:
        os.chmod(ports, 0o755)
    assert code == 2 and "Traceback" not in err, err
    c = by_name(out)["rdma.ports"]
    assert c["status"] == "failed" and "mlx5_0/ports: cannot list: Permission denied" in c["detail"]


async def test_sigterm_stops_the_loop_while_a_check_is_hung(apiserver, tmp_path: Path, healthy_root: Path) -> None:
    """Before: the loop returned on SIGTERM, and then asyncio joined the hung worker thread for ever."""
    import asyncio
    import signal

    k8s, url = apiserver
    cmd = [sys.executable, "-c", HUNG, "--node", NODE_NAME, "--profile", str(GKE), "--root", str(healthy_root),
           "--nvml-json", str(HEALTHY / "nvml.json"), "--kubeconfig", kubeconfig(tmp_path, url, "agent-own"),
           "--interval", "1", "--check-timeout", "1", "--listen", f"127.0.0.1:{_free_port()}"]
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE,
                                                env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    try:
        for _ in range(200):  # two reports: the abandoned run, then one that finds it still stuck
            if len([p for p in k8s.patches if p[0] == "status"]) >= 2:
                break
            await asyncio.sleep(0.05)
        cond = next((c for c in k8s.node(NODE_NAME)["status"]["conditions"] if c["type"] == "FabricReady"), None)
        if cond is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            pytest.fail((await proc.stderr.read()).decode()[-3000:] if proc.stderr else "no report")
        assert cond["status"] == "False" and "modules" in cond["message"]
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 5)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 0
    err = (await proc.stderr.read()).decode() if proc.stderr else ""
    assert "checks abandoned: modules" in err and "Traceback" not in err
    # One worker was left behind, not one per run: the later runs found it still stuck and started none.
    assert err.count("checks abandoned") == 1


def test_a_fifo_as_node_json_is_one_line_not_a_hang(healthy_root: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "node.json"
    os.mkfifo(fifo)
    args = [a if a != str(HEALTHY / "node.json") else str(fifo) for a in AGENT_ARGS]
    r = subprocess.run([sys.executable, "-m", "fabricguard.agent", *args, "--root", str(healthy_root)],
                       capture_output=True, text=True, timeout=30, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert r.returncode == 3 and "--node-json" in r.stderr and "FIFO" in r.stderr and "Traceback" not in r.stderr


# -------------------------------------------------------------------------------------- /metrics flood


def _threads(pid: int) -> int:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("Threads:"))
    return int(line.split()[1])


async def _get(port: int, path: str) -> int:
    import asyncio

    async with asyncio.timeout(5):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        line = await r.readline()
        await r.read()
        w.close()
    return int(line.split()[1])


async def test_idle_connections_to_metrics_do_not_make_threads(apiserver, tmp_path: Path, healthy_root: Path) -> None:
    """Before: one thread per open connection (2,300 idle ones: 2,304 threads, 121 MiB). Now the agent keeps
    its few threads, closes idle connections past the cap, and still answers /healthz and /metrics."""
    import asyncio

    k8s, url = apiserver
    port = _free_port()
    cmd = [sys.executable, "-m", "fabricguard.agent", "--node", NODE_NAME, "--profile", str(GKE), "--root",
           str(healthy_root), "--nvml-json", str(HEALTHY / "nvml.json"), "--kubeconfig",
           kubeconfig(tmp_path, url, "agent-own"), "--interval", "5", "--listen", f"127.0.0.1:{port}"]
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.DEVNULL,
                                                env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    conns = []
    try:
        for _ in range(100):
            await asyncio.sleep(0.1)
            if any(p[0] == "status" for p in k8s.patches):
                break
        baseline = _threads(proc.pid)
        for _ in range(400):
            conns.append(await asyncio.open_connection("127.0.0.1", port))
        await asyncio.sleep(0.5)
        assert _threads(proc.pid) <= baseline + 1  # the one /metrics render thread, at most
        assert await _get(port, "/healthz") == 200 and await _get(port, "/metrics") == 200
        closed = 0
        for r, _ in conns:  # past the cap, the oldest idle connections were closed to make room
            with contextlib.suppress(TimeoutError):
                if await asyncio.wait_for(r.read(), 0.01) == b"":
                    closed += 1
        assert closed >= 400 - 64
    finally:
        for _, w in conns:
            w.close()
        proc.terminate()
        await proc.wait()


async def test_a_trickled_request_head_is_cut_at_the_header_deadline() -> None:
    import asyncio

    from fabricguard.agent.metrics import AgentMetrics
    from fabricguard.agent.server import MetricsServer, make_app

    app = make_app(AgentMetrics("n"), lambda: time.time(), time.time(), 60.0)
    server = MetricsServer(app, "127.0.0.1", 0, header_timeout=0.5)
    try:
        r, w = await asyncio.open_connection("127.0.0.1", server.port)
        t = time.monotonic()
        answer = b""
        for ch in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
            w.write(bytes([ch]))
            with contextlib.suppress(TimeoutError):
                answer = await asyncio.wait_for(r.read(), 0.05)
                break
        took = time.monotonic() - t
        assert answer.startswith(b"HTTP/1.1 408") and took < 2.0
        w.close()
        assert await _get(server.port, "/healthz") == 200
    finally:
        server.close()
