"""``kubectl fabricguard why`` and ``pools`` on the 271-day incident, held for real: the controller's passes
(``controller --once`` against kmock's emulator, as in test_incident.py) hold the training Workload, then the
plugin, as a user bound to nothing but the ``fabricguard-viewer`` roles that ``render install`` ships (the
emulator enforcing them on every request, as the API server's RBAC does) and with only its own read-only
permission table, answers in one screen of 80 columns: the verdict first, the cause, the fix, where the rest is."""

from __future__ import annotations

import asyncio
import json
import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from controller_support import (
    CANARY_IMAGE,
    JOBSETS,
    NOW,
    PROFILE,
    WORKLOADS,
    admin_kubeconfig,
    canaries,
    jobset_created,
    run_once,
    ts,
)
from controller_support import schedule_fails as fails
from typer.testing import CliRunner

from fabricguard.console import console
from fabricguard.kubectl.commands import app

ROOT = Path(__file__).resolve().parents[2]
SCHED = "0/9 nodes are available: 6 Insufficient rdma/rdma_shared_device_a."


async def _held(k8s: Any, kc: str, profile_path: Path, lustre: Path) -> str:
    """Three controller passes: the canary goes unschedulable and the Workload is held (Retry)."""
    await run_once(kc, profile_path, NOW, lustre)
    (js,) = canaries(k8s)
    fails(k8s, jobset_created(k8s, js, NOW), SCHED, NOW + timedelta(seconds=5))
    await run_once(kc, profile_path, NOW + timedelta(minutes=4), lustre)
    # The training JobSet the Workload was made for, and Kueue's owner reference on the Workload.
    k8s.objects[JOBSETS, "ml-training", "llama-ft"] = {
        "metadata": {"name": "llama-ft", "namespace": "ml-training", "uid": "js-uid",
                     "labels": {"fabricguard.io/pool": "gh200-roce", "fabricguard.io/managed": "true"},
                     "creationTimestamp": ts(NOW - timedelta(minutes=6))},
        "spec": {"replicatedJobs": []}}
    k8s.objects[WORKLOADS, "ml-training", "jobset-llama-ft-3b1c2"].patch({"metadata": {"ownerReferences": [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "llama-ft", "uid": "js-uid",
         "controller": True}]}})
    return admin_kubeconfig(kc)


def _viewer(k8s: Any, kc: str) -> str:
    """A kubeconfig of ``ml-engineer``, bound (ClusterRoleBinding, RoleBinding) to exactly the fabricguard-viewer
    ClusterRole and Role of a real ``render install`` (its controller component), and the controller's profile
    ConfigMap where that install puts it, so the plugin's per-fabric fixes come from the cluster."""
    from fabricguard.controller.viewer import PROFILE_CONFIGMAP, VIEWER
    from fabricguard.placement import install
    from fabricguard.profile import load_profile

    example = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
    comps = install.components(load_profile(example), example.read_text(), install.Options(
        image=CANARY_IMAGE, agent_image=CANARY_IMAGE, canary_image=CANARY_IMAGE))
    (ctrl,) = [c for c in comps if c.name == install.CONTROLLER]
    roles = [o for o in ctrl.objects if o["metadata"]["name"] == VIEWER]
    assert sorted(r["kind"] for r in roles) == ["ClusterRole", "Role"]
    k8s.rbac.bind(VIEWER_USER, roles)
    k8s.tokens["viewer"] = {"username": VIEWER_USER}
    k8s.objects["v1/configmaps", "fabricguard-system", PROFILE_CONFIGMAP] = {
        "metadata": {"name": PROFILE_CONFIGMAP, "namespace": "fabricguard-system"}, "data": {"profile.yaml": PROFILE}}
    path = Path(kc).with_name(Path(kc).name + "-viewer")
    path.write_text(Path(kc).read_text().replace('"token": "controller"', '"token": "viewer"'))
    return str(path)


VIEWER_USER = "ml-engineer"


async def _refused_outside_the_table(kc: str) -> None:
    """What the viewer may not do, asked over HTTP as that user: each a 403 from the emulator's RBAC, while a read
    in the table is answered. Writes, other kinds, other verbs on the same kinds, other namespaces' ConfigMaps."""
    import httpx

    cfg = json.loads(Path(kc).read_text())
    url, token = cfg["clusters"][0]["cluster"]["server"], cfg["users"][0]["user"]["token"]
    fv = "/apis/fabricguard.io/v1alpha1/fabricvalidations"
    js = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml-training/jobsets"
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        assert (await http.get(f"{fv}/gh200-roce")).status_code == 200
        assert (await http.get("/api/v1/namespaces/fabricguard-system/configmaps/fabricguard-controller-profile")
                ).status_code == 200
        refused = [
            ("PATCH", f"{fv}/gh200-roce/status", {"status": {}}),  # a write to what it reads
            ("DELETE", f"{fv}/gh200-roce", None),
            ("GET", f"{fv}?watch=true", None),  # a verb the table does not have
            ("GET", js, None),  # list of JobSets: the plugin only gets one by name
            ("DELETE", f"{js}/llama-ft", None),
            ("GET", "/api/v1/namespaces/ml-training/pods", None),  # a kind it never reads
            ("GET", "/api/v1/namespaces/ml-training/secrets", None),
            ("GET", "/api/v1/namespaces/kube-system/configmaps/kube-proxy", None),  # outside the controller's namespace
            ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/ml-training/workloads/jobset-llama-ft-3b1c2", {}),
        ]
        for method, path, body in refused:
            r = await http.request(method, path, json=body,
                                   headers={"Content-Type": "application/merge-patch+json"} if body is not None else {})
            assert r.status_code == 403, (method, path, r.status_code, r.text[:200])
            assert VIEWER_USER in r.json()["message"]


def _schema_valid(kind: str, doc: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads((ROOT / "docs" / "schemas" / f"{kind}.schema.json").read_text())
    assert list(doc)[:3] == ["apiVersion", "kind", "verdict"]
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    assert not errors, [e.message[:200] for e in errors[:3]]


def _plugin(*args: str) -> Any:
    saved = console._width
    console.width = 80  # a pipe: rich's 80 columns
    try:
        return CliRunner().invoke(app, list(args), catch_exceptions=False)
    finally:
        console._width = saved


@pytest.mark.slow
async def test_why_a_held_job_prints_the_cause_and_the_fix_in_one_screen(cluster, profile_path, lustre) -> None:
    k8s, kc = cluster
    await _held(k8s, kc, profile_path, lustre)
    viewer = _viewer(k8s, kc)  # the plugin's user: nothing but the rendered viewer roles
    denied = len(k8s.denied)
    at = ts(NOW + timedelta(minutes=5))
    r = await asyncio.to_thread(_plugin, "why", "llama-ft", "-n", "ml-training", "--kubeconfig", viewer, "--now", at)
    out = r.stdout
    lines = out.splitlines()
    assert r.exit_code == 1, out
    assert lines[0].startswith("DEGRADED  JobSet ml-training/llama-ft"), lines[0]
    assert "held: pool gh200-roce canary unschedulable" in " ".join(" ".join(lines[:3]).split())
    # One screen; a line over 80 columns is only a command, whole (never split mid-token).
    assert len(lines) <= 40, out
    assert all(x.startswith("      skopeo copy --all ") for x in lines if len(x) > 80), out
    text = " ".join(out.split())
    # The cause first (the deepest one: the plugin's image is built for another architecture), then its fix.
    cause = text.index("cause: image-arch-mismatch")
    fix = text.index("fix: ")
    assert cause < fix, text
    assert "skopeo copy --all" in text  # the doctor's fix of that cause, from the RootCause condition
    assert "last pass: never passed" in text and "NOT validated" in text
    assert "\n      kubectl describe fabricvalidation gh200-roce\n" in out  # whole, on its own line
    # The profile came from the controller's ConfigMap (the default --fabricguard-namespace, the install's).
    assert "configmap fabricguard-system/fabricguard-controller-profile" in text
    # The same answer as JSON, by kind/name.
    r = await asyncio.to_thread(_plugin, "why", "jobset/llama-ft", "-n", "ml-training", "--kubeconfig", viewer,
                                "--now", at, "--format", "json")
    doc = json.loads(r.stdout)
    assert (doc["kind"], doc["verdict"], doc["state"]) == ("WhyAnswer", "degraded", "held")
    _schema_valid("WhyAnswer", doc)
    assert doc["cause"].startswith("image-arch-mismatch") and "skopeo copy --all" in doc["fix"]
    # pools: the held pool first, "never passed" said, exit 1.
    r = await asyncio.to_thread(_plugin, "pools", "--kubeconfig", viewer, "--now", at, "--format", "json")
    _schema_valid("PoolStates", json.loads(r.stdout))
    r = await asyncio.to_thread(_plugin, "pools", "--kubeconfig", viewer, "--now", at)
    assert r.exit_code == 1 and r.stdout.startswith("DEGRADED  pools · 0 of 1 validated"), r.stdout
    assert "DEGRADED  gh200-roce" in r.stdout and "never passed" in r.stdout and "unschedulable" in r.stdout
    # A job that is not there is input that cannot be used: one line, exit 3.
    r = await asyncio.to_thread(_plugin, "why", "nope", "-n", "ml-training", "--kubeconfig", viewer, "--now", at)
    assert r.exit_code == 3 and "no workload named nope in namespace ml-training" in r.stderr
    r = await asyncio.to_thread(_plugin, "why", "deployment/x", "--kubeconfig", viewer)
    assert r.exit_code == 3 and "'deployment' is not a workload kind" in r.stderr
    # Every request the plugin made was one the rendered role grants; what it does not grant is refused.
    assert k8s.denied[denied:] == []
    await _refused_outside_the_table(viewer)


@pytest.mark.slow
async def test_controller_text_says_its_verdict_first(cluster, profile_path, lustre) -> None:
    """``controller --once`` without --format json, piped: the verdict word on line 1, the held pool's block."""
    from controller_support import CANARY_IMAGE

    from fabricguard.cli import app as cli

    k8s, kc = cluster
    await _held(k8s, kc, profile_path, lustre)
    args = ["controller", "--profile", str(profile_path), "--once", "--now", ts(NOW + timedelta(minutes=5)),
            "--kubeconfig", kc, "--lustre-root", str(lustre), "--canary-image", CANARY_IMAGE]

    def once() -> Any:
        saved = console._width
        console.width = 80
        try:
            return CliRunner().invoke(cli, args, catch_exceptions=False)
        finally:
            console._width = saved

    r = await asyncio.to_thread(once)
    lines = r.stdout.splitlines()
    assert r.exit_code == 1 and lines[0].startswith("DEGRADED  controller pass · 0 of 1 pool(s) validated"), r.stdout
    assert "HELD  pool gh200-roce" in r.stdout and "root cause: image-arch-mismatch" in " ".join(r.stdout.split())


def test_the_plugin_is_installed_with_the_package() -> None:
    """kubectl finds plugins by name on the PATH: the package installs ``kubectl-fabricguard``."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-fabricguard"] == "fabricguard.kubectl.commands:main"
    r = CliRunner().invoke(app, ["--help"])
    assert r.exit_code == 0 and "why" in r.stdout and "pools" in r.stdout
