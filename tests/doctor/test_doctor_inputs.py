"""Inputs and data (issue 17 §6): deeply nested JSON is one line and exit 3 for every command that reads it;
``snapshot DIR`` never mixes two clusters in one directory; an oversized reference names an option that exists.

The commands run as child processes (``python -m fabricguard``); the live ones read kmock's emulator over HTTP.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest
from doctor_support import gen
from kmock import KubernetesEmulator, Server

from kube_support import RESOURCE, kubeconfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_support import one_error_line, run_process

ROOT = Path(__file__).resolve().parents[2]
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
HEALTHY = ROOT / "examples" / "snapshots" / "healthy"
DEEP = "[" * 100_000 + "]" * 100_000


def _refused(r, *names: str) -> str:
    assert r.returncode == 3, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    line = one_error_line(r.stderr)
    for n in names:
        assert n in line, line
    return line


@pytest.fixture()
def deep_snapshot(tmp_path: Path) -> Path:
    d = tmp_path / "snap"
    shutil.copytree(HEALTHY, d)
    (d / "nodes.json").write_text(DEEP)
    return d


def test_deep_json_in_a_snapshot_is_one_line_exit_3(deep_snapshot: Path) -> None:
    _refused(run_process("doctor", "--snapshot", deep_snapshot, "--profile", GKE), "nodes.json", "nested too deeply")
    _refused(run_process("doctor", "diff", HEALTHY, deep_snapshot), "nodes.json", "nested too deeply")


def test_deep_json_for_the_agent_and_verify_job_is_one_line_exit_3(tmp_path: Path) -> None:
    node = tmp_path / "node.json"
    node.write_text(DEEP)
    _refused(run_process("agent", "--once", "--dry-run", "--node", "n1", "--node-json", node, "--profile", GKE),
             "--node-json", "node.json")
    job = tmp_path / "job"
    shutil.copytree(ROOT / "examples" / "jobs" / "rdma-healthy", job)
    (job / "steps.jsonl").write_text(DEEP + "\n")
    _refused(run_process("verify-job", job, "--profile", GKE), "steps.jsonl:1", "nested too deeply")


@pytest.fixture()
async def cluster(tmp_path: Path):
    async with KubernetesEmulator() as k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6", "platform": "linux/amd64"}
        for lst in gen.incident("production").values():
            for obj in lst["items"]:
                meta = obj["metadata"]
                k8s.objects[RESOURCE[obj["kind"]], meta.get("namespace"), meta["name"]] = {
                    k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
        k8s.resources["v1/configmaps"].verbs = {"list", "watch", "get", "create", "patch", "delete"}
        yield k8s, kubeconfig(tmp_path, str(server.url).rstrip("/"))


async def _cli(*args: object):  # type: ignore[no-untyped-def]
    return await asyncio.to_thread(run_process, *args, timeout=120)


async def test_snapshot_into_a_directory_holding_another_snapshot_is_refused(cluster, tmp_path: Path) -> None:
    _, kc = cluster
    out = tmp_path / "snap"
    shutil.copytree(HEALTHY, out)  # another cluster's snapshot
    (out / "deviceclasses.json").write_text('{"apiVersion": "v1", "kind": "List", "items": []}\n')
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    r = await _cli("snapshot", out, "--kubeconfig", kc)
    _refused(r, str(out), "not empty")
    assert "--replace" in r.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing was touched

    r = await _cli("snapshot", out, "--kubeconfig", kc, "--replace")
    assert r.returncode == 0, r.stderr
    written = {p.name for p in out.iterdir()}
    # What this cluster's snapshot does not rewrite is gone: no file of the other cluster is left to mix in.
    assert "deviceclasses.json" not in written and "removed deviceclasses.json" in r.stdout
    nodes = json.loads((out / "nodes.json").read_text())
    want = {o["metadata"]["name"] for o in gen.incident("production")["nodes"]["items"]}
    assert {n["metadata"]["name"] for n in nodes["items"]} == want
    assert not [p for p in written if p.startswith(".")]  # no partial file left behind
    r = await _cli("doctor", "--snapshot", out, "--profile", GKE, "--format", "json")
    assert r.returncode in (0, 1, 2) and "Traceback" not in r.stderr


async def test_an_oversized_reference_names_an_option_that_exists(cluster, tmp_path: Path) -> None:
    k8s, kc = cluster
    import os

    # A DaemonSet in another namespace with 2 MiB of incompressible env: every namespace's DaemonSets are in the
    # reference's scope by default.
    k8s.objects["apps/v1/daemonsets", "monitoring", "node-exporter"] = {
        "metadata": {"name": "node-exporter", "namespace": "monitoring"},
        "spec": {"template": {"spec": {"containers": [{"name": "x", "image": "quay.io/x/y:1", "env": [
            {"name": f"E{i}", "value": os.urandom(1 << 19).hex()} for i in range(2)]}]}}}}
    r = await _cli("snapshot", tmp_path / "big", "--kubeconfig", kc, "--publish", "fabricguard-system/ref")
    line = _refused(r, "--publish", "KiB gzipped")
    option = next(w for w in line.split() if w.startswith("--publish-namespace"))
    assert option in (await _cli("snapshot", "--help")).stdout  # before: "--namespace", which snapshot lacks
    # ... and the option does narrow it: DaemonSets and ConfigMaps of the named namespace only.
    r = await _cli("snapshot", tmp_path / "small", "--kubeconfig", kc, "--publish", "fabricguard-system/ref",
                   "--publish-namespace", "network-operator")
    assert r.returncode == 0, r.stderr
    assert "published the small reference" in r.stdout


def test_deep_json_for_recorded_nvml_data_is_one_line_exit_3(tmp_path: Path) -> None:
    nvml = tmp_path / "nvml.json"
    nvml.write_text(DEEP)
    _refused(run_process("probe", "host", "--nvml-json", nvml, "--profile", GKE), "nvml.json", "nested too deeply")
