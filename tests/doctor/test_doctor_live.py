"""Live collection through kr8s against kmock's Kubernetes emulator (a real HTTP API server on loopback)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from doctor_support import gen
from kmock import KubernetesEmulator, Server

from fabricguard.doctor.engine import run_doctor
from fabricguard.doctor.snapshot import collect_live, load_snapshot, snapshot_from_lists, write_snapshot
from fabricguard.profile import loads_profile
from kube_support import RESOURCE, kubeconfig


@pytest.fixture()
async def cluster(tmp_path: Path):
    lists = gen.incident("production")
    async with KubernetesEmulator() as k8s, Server(k8s) as server:
        # kr8s asks for "/version/" (trailing slash, which a real API server accepts); kmock serves only
        # "/version", so answer the slash form here.
        k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6", "platform": "linux/amd64"}
        for lst in lists.values():
            for obj in lst["items"]:
                meta = obj["metadata"]
                # The real API server leaves kind/apiVersion out of list items; so does our emulated one.
                stored = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
                k8s.objects[RESOURCE[obj["kind"]], meta.get("namespace"), meta["name"]] = stored
        # A Secret in the cluster: the doctor must never ask for it.
        k8s.objects["v1/secrets", "network-operator", "registry-creds"] = {"metadata": {"name": "registry-creds"}}
        yield k8s, kubeconfig(tmp_path, str(server.url).rstrip("/")), lists


async def test_collect_live_reads_every_kind_and_never_secrets(cluster, tmp_path: Path, now) -> None:
    k8s, kubeconfig, lists = cluster
    got = await collect_live(kubeconfig=kubeconfig)
    assert len(got["pods"]["items"]) == len(lists["pods"]["items"])
    assert got["nodes"]["items"][0]["kind"] == "Node"  # filled in like kubectl does
    assert got["daemonsets"]["items"][0]["apiVersion"] == "apps/v1"
    assert any("resourceflavors.kueue.x-k8s.io/v1beta2: not served" in n for n in got["_notes"]["notes"])
    requests = list(k8s)
    paths = [r.url.path for r in requests]
    assert {r.method.value.upper() for r in requests} == {"GET"}
    assert all(r.params.get("limit") == "500" for r in requests if r.resource is not None)
    assert not any("secrets" in p for p in paths)
    assert "/api/v1/pods" in paths and "/apis/apps/v1/daemonsets" in paths

    # The same findings as from the snapshot on disk.
    profile = loads_profile(gen.INCIDENT_PROFILE.format(name="gh200-prod", env="production"))
    live = run_doctor(snapshot_from_lists(got), profile, now)
    write_snapshot(got, tmp_path / "snap")
    saved = run_doctor(load_snapshot(tmp_path / "snap"), profile, now)
    assert [f.rule for f in live.findings] == [f.rule for f in saved.findings]
    assert "daemonset-never-ready" in {f.rule for f in live.findings}


async def test_snapshot_command_writes_kubectl_shape(cluster, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fabricguard.cli import app

    _, kubeconfig, lists = cluster
    out = tmp_path / "snap"
    # The command runs its own event loop; run it in a thread while this loop serves the emulator.
    r = await asyncio.to_thread(CliRunner().invoke, app, ["snapshot", str(out), "--kubeconfig", kubeconfig])
    assert r.exit_code == 0, r.output
    pods = json.loads((out / "pods.json").read_text())
    assert pods["kind"] == "List" and len(pods["items"]) == len(lists["pods"]["items"])
    assert not (out / "secrets.json").exists()
    r = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        ["doctor", "--kubeconfig", kubeconfig, "--now", "2025-09-30T12:00:00Z", "--format", "json"],
    )
    assert r.exit_code == 1 and "daemonset-never-ready" in r.stdout
