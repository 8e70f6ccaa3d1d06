"""``fabricguard agent --once --dry-run --json``: the healthy node is admitted, the recorded H200 is refused
naming every failing check, and bad input is one line and exit 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_support import GKE, H200_RECORD, HEALTHY, NODE_NAME, PROFILES, SHARED_H200_RECORD, h200_tree
from typer.testing import CliRunner

from fabricguard.cli import app

RUN = CliRunner()


def agent(*args: str) -> tuple[int, dict, str]:
    r = RUN.invoke(app, ["agent", "--once", "--dry-run", *args])
    try:
        out = json.loads(r.stdout) if "json" in args else {}
    except ValueError:
        out = {}
    return r.exit_code, out, r.stderr if r.stderr_bytes is not None else r.output


def healthy_args(root: Path, *extra: str) -> list[str]:
    return ["--format", "json", "--node", NODE_NAME, "--profile", str(GKE), "--root", str(root),
            "--nvml-json", str(HEALTHY / "nvml.json"), "--node-json", str(HEALTHY / "node.json"), *extra]


def checks(out: dict) -> dict[str, dict]:
    return {c["name"]: c for c in out["checks"]}


def test_healthy_node_is_true_with_every_check(healthy_root: Path) -> None:
    code, out, _ = agent(*healthy_args(healthy_root))
    assert code == 0, out
    assert (out["type"], out["status"], out["reason"]) == ("FabricReady", "True", "AllChecksPassed")
    assert out["verdict"] == "pass"
    assert out["pool"] == "h200-rdma"  # found by the node's labels
    c = checks(out)
    assert set(c) == {"rdma.devices", "rdma.ports", "rdma.netdevs", "modules", "modules.gpudirect",
                      "libs.ibverbs", "libs.net_plugin", "gpu.count", "gpu.ecc", "gpu.memory", "lustre.mount",
                      "lustre.health", "lustre.imports", "lustre.evictions", "lustre.lnet", "lustre.jobid",
                      "fabric.allocatable", "gpu.perf"}
    assert c["gpu.count"]["data"]["found"] == 8
    assert c["gpu.perf"]["status"] == "skipped"
    assert out["lastHeartbeatTime"].endswith("Z")


@pytest.mark.parametrize("record", [H200_RECORD, SHARED_H200_RECORD], ids=["repo", "shared"])
def test_recorded_h200_is_refused_naming_every_failing_check(record: Path, tmp_path: Path) -> None:
    """The real H200 VM: GPU health passes, everything about the fabric fails."""
    if not record.is_dir():
        pytest.skip(f"{record} is not on this machine (the repository's copy is tested)")
    h200_root = h200_tree(tmp_path, record)
    node = json.loads((HEALTHY / "node.json").read_text())
    code, out, _ = agent("--format", "json", "--node", NODE_NAME, "--profile", str(GKE), "--root", str(h200_root),
                         "--nvml-json", str(record / "nvml.json"), "--node-json", str(HEALTHY / "node.json"))
    assert code == 2
    assert out["status"] == "False" and out["reason"] == "ChecksFailed"
    c = checks(out)
    failing = {n for n, x in c.items() if x["status"] == "failed"}
    assert failing == {"rdma.devices", "modules", "libs.ibverbs", "libs.net_plugin", "gpu.count", "lustre.mount",
                       "lustre.health", "lustre.imports"}
    for name in failing:
        assert name in out["message"]
    assert "ib_core" in c["modules"]["detail"] and "lustre (Lustre client)" in c["modules"]["detail"]
    assert "1 GPU(s)" in c["gpu.count"]["detail"]
    assert c["gpu.ecc"]["status"] == "pass" and c["gpu.memory"]["status"] == "pass"
    assert node["metadata"]["name"] == out["node"]


@pytest.mark.parametrize("profile", ["onprem-infiniband.yaml", "aws-p5-efa.yaml"])
def test_recorded_h200_is_refused_for_every_fabric_pool(h200_root: Path, profile: str) -> None:
    from fabricguard.profile import load_profile

    prof = load_profile(PROFILES / profile)
    for pool in prof.spec.pools:
        code, out, _ = agent("--format", "json", "--node", "h200", "--profile", str(PROFILES / profile), "--pool", pool.name,
                             "--root", str(h200_root), "--nvml-json", str(H200_RECORD / "nvml.json"))
        assert code == 2 and out["status"] == "False"
        if pool.fabric.has_fabric:
            assert "rdma.devices" in out["message"] and "modules" in out["message"]
        else:  # no fabric to prove, but 1 GPU where the pool wants more
            assert "gpu.count" in out["message"] and "rdma.devices" not in out["message"]


def test_without_the_node_object_allocatable_fails_closed(healthy_root: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, _ = agent("--format", "json", "--node", NODE_NAME, "--profile", str(GKE), "--pool", "h200-rdma",
                         "--root", str(healthy_root), "--nvml-json", str(HEALTHY / "nvml.json"))
    assert code == 2
    assert out["reason"] == "CheckError"
    assert checks(out)["fabric.allocatable"]["status"] == "failed"
    assert "cannot read the Node object" in checks(out)["fabric.allocatable"]["detail"]


def test_missing_allocatable_resource_fails_while_hardware_is_fine(healthy_root: Path, tmp_path: Path) -> None:
    node = json.loads((HEALTHY / "node.json").read_text())
    del node["status"]["allocatable"]["networking.gke.io.networks/rdma-3"]
    p = tmp_path / "node.json"
    p.write_text(json.dumps(node))
    args = healthy_args(healthy_root)
    args[args.index("--node-json") + 1] = str(p)
    code, out, _ = agent(*args)
    assert code == 2
    c = checks(out)
    assert [n for n, x in c.items() if x["status"] == "failed"] == ["fabric.allocatable"]
    assert "networking.gke.io.networks/rdma-3 is absent" in c["fabric.allocatable"]["detail"]


def test_garbage_nvml_data_is_a_check_error_not_a_traceback(healthy_root: Path, tmp_path: Path) -> None:
    bad = tmp_path / "nvml.json"
    bad.write_text('["not", "an", "nvml", "record"]')
    args = healthy_args(healthy_root)
    args[args.index("--nvml-json") + 1] = str(bad)
    code, out, _ = agent(*args)
    assert code == 2 and out["status"] == "False" and out["verdict"] == "failed"
    assert checks(out)["gpu.count"]["status"] == "failed" and "gpu.count" in out["message"]


def test_degraded_check_keeps_true_with_warning_and_exit_1(healthy_root: Path) -> None:
    mods = healthy_root / "proc/modules"
    mods.write_text("".join(ln + "\n" for ln in mods.read_text().splitlines() if not ln.startswith("nvidia_peermem")))
    code, out, _ = agent(*healthy_args(healthy_root))
    assert code == 1 and out["verdict"] == "degraded"
    assert (out["status"], out["reason"]) == ("True", "PassedWithWarnings")
    assert "modules.gpudirect" in out["message"]


def test_human_output_names_the_verdict(healthy_root: Path) -> None:
    args = healthy_args(healthy_root)[2:]  # without --format json: the table
    r = RUN.invoke(app, ["agent", "--once", "--dry-run", *args])
    assert r.exit_code == 0
    text = " ".join(r.stdout.split())
    # The verdict first (issue 30's one layout), then each check as a block: name, then why.
    assert r.stdout.startswith("PASS  agent node "), r.stdout[:80]
    assert "FabricReady=True (AllChecksPassed)" in text and "PASS fabric.allocatable why: advertised:" in text


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--profile", str(GKE)], "--node is required"),
        (["--node", "n", "--profile", str(GKE), "--root", "/does/not/exist"], "--root /does/not/exist"),
        (["--node", "n", "--profile", str(GKE), "--pool", "nope"], "unknown pool 'nope'"),
        (["--node", "n", "--profile", str(GKE), "--nvml-json", "/nope.json"], "--nvml-json /nope.json"),
        (["--node", "other", "--profile", str(GKE), "--node-json", str(HEALTHY / "node.json")], "not --node 'other'"),
        (["--node", "n", "--profile", str(HEALTHY / "nvml.json")], "nvml.json"),
    ],
)
def test_bad_input_is_one_line_and_exit_3(args: list[str], needle: str) -> None:
    r = RUN.invoke(app, ["agent", "--once", "--dry-run", *args])
    assert r.exit_code == 3, r.output
    assert needle in r.output and "Traceback" not in r.output


def test_node_json_refused_without_dry_run() -> None:
    r = RUN.invoke(app, ["agent", "--once", "--node", NODE_NAME, "--profile", str(GKE),
                         "--node-json", str(HEALTHY / "node.json")])
    assert r.exit_code == 3 and "only for --dry-run" in r.output


def test_gpu_perf_asked_for_but_impossible_fails_closed(healthy_root: Path) -> None:
    """--gpu-ceilings requires the GPU performance check; without CUDA (this machine) it cannot run: False."""
    import importlib.util

    ceilings = Path(__file__).resolve().parents[1] / "fixtures" / "h200-gpu-ceilings.json"
    code, out, _ = agent(*healthy_args(healthy_root, "--gpu-ceilings", str(ceilings)))
    c = checks(out)["gpu.perf"]
    if c["status"] in ("pass", "degraded"):
        pytest.skip("a CUDA GPU is present: the check ran")
    assert code == 2 and out["reason"] == "CheckError" and c["status"] == "failed"
    why = "torch is not installed" if importlib.util.find_spec("torch") is None else "no CUDA device"
    assert why in c["detail"]


@pytest.mark.parametrize("cmd", [["agent", "--once", "--node", "n", "--profile", str(GKE)], ["agent-sweep"]])
def test_missing_kubeconfig_is_one_line_and_exit_3(cmd: list[str], tmp_path: Path) -> None:
    r = RUN.invoke(app, [*cmd, "--kubeconfig", str(tmp_path / "nope")])
    assert r.exit_code == 3 and f"--kubeconfig {tmp_path / 'nope'}: no such file" in r.output
    assert "Traceback" not in r.output


def test_usage_errors_exit_3_from_the_agent_entry_point() -> None:
    """``python -m fabricguard.agent`` (the DaemonSet's command) treats a usage error as unusable input."""
    import subprocess
    import sys

    from agent_support import REPO

    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "fabricguard.agent", "--bogus"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 3 and "--bogus" in r.stderr
    r = subprocess.run([sys.executable, "-m", "fabricguard.agent", "--once", "--dry-run", "--format", "json",
                        *healthy_args(HEALTHY / "root")[2:]], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"] == "pass"
