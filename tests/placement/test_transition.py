"""``pool transition`` against kmock's Kubernetes emulator (real HTTP): gates, the four steps, crashes, deadline, abort."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kmock import KubernetesEmulator, Server
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.kube import Kube
from fabricguard.placement import kueue
from fabricguard.placement.transition import STEPS, spec_from
from fabricguard.placement.workflow import TransitionConflict, Workflow, transition_permissions, transition_roles
from fabricguard.profile.loader import load_profile
from json_schema_check import assert_matches
from kube_support import Emulator, Rbac, kubeconfig

ROOT = Path(__file__).resolve().parents[2]
FROM = ROOT / "examples" / "transitions" / "gke-block-a.yaml"
TO = ROOT / "examples" / "transitions" / "gke-block-b.yaml"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
NS = "fabricguard-system"
PLURAL = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
          "LocalQueue": "localqueues", "AdmissionCheck": "admissionchecks"}
CQ = ("kueue.x-k8s.io/v1beta2/clusterqueues", None, "h200")


def _spec():
    return spec_from(load_profile(FROM), load_profile(TO), FROM.read_text(), TO.read_text())


def _node(name: str, nodepool: str, block: str, ready: bool | None) -> dict[str, Any]:
    conds = [{"type": "Ready", "status": "True"}]
    if ready is not None:
        conds.append({"type": "FabricReady", "status": "True" if ready else "False", "reason": "Checked"})
    return {"metadata": {"name": name, "labels": {"cloud.google.com/gke-nodepool": nodepool,
                                                   "cloud.google.com/gce-topology-block": block}},
            "spec": {}, "status": {"conditions": conds}}


def _pod(name: str, node: str, phase: str, *, jobset: str | None = "qwen", daemon: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml-search", "labels": {}}
    if jobset:
        meta["labels"]["jobset.sigs.k8s.io/jobset-name"] = jobset
    if daemon:
        meta["namespace"] = "kube-system"
        meta["ownerReferences"] = [{"kind": "DaemonSet", "name": "nccl-rdma-installer", "controller": True}]
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def seed(k8s: KubernetesEmulator, *, gang: str = "Succeeded", agent: bool = True, canary: str | None = "passed") -> None:
    k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.1"}
    for o in kueue.objects(load_profile(FROM)):
        ns = o["metadata"].get("namespace")
        k8s.objects[f"kueue.x-k8s.io/v1beta2/{PLURAL[o['kind']]}", ns, o["metadata"]["name"]] = {
            **o, "metadata": {**o["metadata"], "resourceVersion": "1"}}
    nodes = [_node("gke-a-0", "a3u-pool-1", "block-a", True if agent else None),
             _node("gke-a-1", "a3u-pool-1", "block-a", True if agent else None),
             _node("gke-b-0", "a3u-pool-2", "block-b", True if agent else None),
             _node("gke-b-1", "a3u-pool-2", "block-b", True if agent else None)]
    for n in nodes:
        k8s.objects["v1/nodes", None, n["metadata"]["name"]] = n
    for p in (_pod("qwen-0", "gke-a-0", gang), _pod("qwen-1", "gke-a-1", gang),
              _pod("installer-a0", "gke-a-0", "Running", jobset=None, daemon=True)):
        k8s.objects["v1/pods", p["metadata"]["namespace"], p["metadata"]["name"]] = p
    if canary is not None:
        k8s.objects["fabricguard.io/v1alpha1/fabricvalidations", None, "h200-block-b"] = {
            "apiVersion": "fabricguard.io/v1alpha1", "kind": "FabricValidation",
            "metadata": {"name": "h200-block-b"}, "status": {"lastOutcome": canary}}


class Crash(Exception):
    pass


def crash_at(point: str):
    def hook(p: str) -> None:
        if p == point:
            raise Crash(p)
    return hook


async def _apply(url_cfg: str, now: datetime = NOW, **kw: Any):
    kube = await Kube.connect(url_cfg, permissions=transition_permissions(NS))
    checkpoint = kw.pop("checkpoint", None)
    try:
        wf = Workflow(kube, _spec(), NS, **({"checkpoint": checkpoint} if checkpoint else {}))
        return await wf.apply(now, deadline=now + timedelta(hours=24), **kw)
    finally:
        await kube.close()


def _cq(k8s: KubernetesEmulator) -> dict[str, Any]:
    return k8s.objects[CQ].raw


def _state(k8s: KubernetesEmulator) -> dict[str, Any]:
    return json.loads(k8s.objects["v1/configmaps", NS, _spec().name].raw["data"]["state.json"])


def _flavors(cq: dict[str, Any]) -> list[tuple[str, str]]:
    group = cq["spec"]["resourceGroups"][0]
    return [(f["name"], next(r["nominalQuota"] for r in f["resources"] if r["name"] == "nvidia.com/gpu"))
            for f in group["flavors"]]


@pytest.fixture()
async def cluster(tmp_path: Path):
    # The rendered transition roles (render transition-rbac) bound to the operator whose token the kubeconfig holds.
    rbac = Rbac().bind("platform-operator", transition_roles(NS))
    async with Emulator(rbac=rbac, tokens={"t": {"username": "platform-operator"}}) as k8s, Server(k8s) as server:
        yield k8s, kubeconfig(tmp_path, str(server.url).rstrip("/"))


async def test_whole_transition_waits_for_the_gang_then_retires(cluster) -> None:
    k8s, cfg = cluster
    seed(k8s, gang="Running")
    out = await _apply(cfg)
    assert [s for s, _ in out.verdicts] == list(STEPS[:3])
    assert out.state.phase == "Waiting" and out.exit_code == 1
    assert "ml-search/qwen (2 pods)" in out.state.message  # the DaemonSet pod is not work to wait for
    # Admissions moved: the new flavor first with its quota, the old one last at zero; running work untouched.
    assert _flavors(_cq(k8s)) == [("h200-block-b", "16"), ("h200-block-a", "0")]
    assert _cq(k8s)["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"] == ["h200-block-b"]
    assert k8s.objects["kueue.x-k8s.io/v1beta2/resourceflavors", None, "h200-block-b"].raw["spec"]["nodeLabels"] == {
        "cloud.google.com/gke-nodepool": "a3u-pool-2"}
    assert all(k8s.objects["v1/nodes", None, n].raw["spec"]["unschedulable"] for n in ("gke-a-0", "gke-a-1"))
    assert not k8s.objects["v1/nodes", None, "gke-b-0"].raw["spec"].get("unschedulable")
    assert _state(k8s)["cordoned"] == ["gke-a-0", "gke-a-1"]

    # The gang finishes on its own; the next run drains and retires.
    for name in ("qwen-0", "qwen-1"):
        k8s.objects["v1/pods", "ml-search", name].raw["status"]["phase"] = "Succeeded"
    out = await _apply(cfg, NOW + timedelta(hours=2))
    assert out.state.phase == "Completed" and out.exit_code == 0
    assert _flavors(_cq(k8s)) == [("h200-block-b", "16")]
    assert ("kueue.x-k8s.io/v1beta2/resourceflavors", None, "h200-block-a") not in k8s.objects or \
        k8s.objects["kueue.x-k8s.io/v1beta2/resourceflavors", None, "h200-block-a"].deleted
    assert all(s["done"] for s in _state(k8s)["steps"])
    # Never evicted anything.
    assert not [r for r in k8s if r.method.value.upper() == "DELETE" and "pods" in r.url.path]


POINTS = [f"{s}:{w}" for s in STEPS for w in ("applied", "recorded")]


@pytest.mark.parametrize("point", POINTS)
async def test_a_crash_anywhere_resumes_to_the_same_end(cluster, point: str) -> None:
    k8s, cfg = cluster
    seed(k8s)
    with pytest.raises(Crash):
        await _apply(cfg, checkpoint=crash_at(point))
    out = await _apply(cfg, NOW + timedelta(minutes=5))
    assert out.state.phase == "Completed", out.state.message
    assert _flavors(_cq(k8s)) == [("h200-block-b", "16")]
    posts = [r for r in k8s if r.method.value.upper() == "POST" and "resourceflavors" in r.url.path]
    assert len(posts) == 1  # the new flavor is created once, however often the step ran
    assert _state(k8s)["cordoned"] == ["gke-a-0", "gke-a-1"]


async def test_gang_still_running_at_the_deadline_is_reported_and_left_alone(cluster) -> None:
    k8s, cfg = cluster
    seed(k8s, gang="Running")
    assert (await _apply(cfg)).state.phase == "Waiting"
    out = await _apply(cfg, NOW + timedelta(hours=25))
    assert out.state.phase == "Blocked" and out.exit_code == 2
    assert "deadline 2026-12-01T12:00:00Z passed" in out.state.message and "ml-search/qwen" in out.state.message
    assert _state(k8s)["steps"][2]["done"] is None
    assert k8s.objects["v1/pods", "ml-search", "qwen-0"].raw["status"]["phase"] == "Running"
    assert not [r for r in k8s if r.method.value.upper() == "DELETE"]


async def test_gates_that_cannot_be_checked_block_until_accepted(cluster) -> None:
    k8s, cfg = cluster
    seed(k8s, agent=False, canary=None)
    out = await _apply(cfg)
    assert out.state.phase == "Blocked"
    assert "node agent is not deployed" in out.state.message and "controller is not installed" in out.state.message
    assert "--accept-unverified agent,canary" in out.state.message
    assert _flavors(_cq(k8s)) == [("h200-block-a", "16")]  # nothing moved
    out = await _apply(cfg, accept=("agent", "canary"))
    assert out.state.phase == "Completed"
    assert _state(k8s)["acceptedUnverified"] == ["agent", "canary"]
    assert "agent unverified, accepted by the operator" in _state(k8s)["steps"][0]["detail"]


async def test_a_failed_canary_or_unready_node_waits(cluster) -> None:
    k8s, cfg = cluster
    seed(k8s, canary="fallback")
    k8s.objects["v1/nodes", None, "gke-b-1"].raw["status"]["conditions"][1]["status"] = "False"
    out = await _apply(cfg)
    assert out.state.phase == "Waiting"
    assert "gke-b-1" in out.state.message and "last canary is fallback" in out.state.message


async def test_abort_puts_the_queue_back_and_uncordons_only_our_nodes(cluster) -> None:
    k8s, cfg = cluster
    seed(k8s, gang="Running")
    before = json.loads(json.dumps(_cq(k8s)["spec"]))
    k8s.objects["v1/nodes", None, "gke-a-1"].raw["spec"]["unschedulable"] = True  # cordoned by someone else
    await _apply(cfg)
    kube = await Kube.connect(cfg, permissions=transition_permissions(NS))
    try:
        out, undone = await Workflow(kube, _spec(), NS).abort(NOW)
    finally:
        await kube.close()
    assert out.state.phase == "Aborted"
    assert _cq(k8s)["spec"]["resourceGroups"] == before["resourceGroups"]
    assert k8s.objects["v1/nodes", None, "gke-a-0"].raw["spec"]["unschedulable"] is False
    assert k8s.objects["v1/nodes", None, "gke-a-1"].raw["spec"]["unschedulable"] is True
    assert "Node gke-a-0 uncordoned" in undone and not any("gke-a-1" in u for u in undone)


async def test_abort_after_retire_is_refused_and_other_profiles_cannot_resume(cluster, tmp_path: Path) -> None:
    k8s, cfg = cluster
    seed(k8s)
    assert (await _apply(cfg)).state.phase == "Completed"
    kube = await Kube.connect(cfg, permissions=transition_permissions(NS))
    try:
        with pytest.raises(TransitionConflict, match="retired already"):
            await Workflow(kube, _spec(), NS).abort(NOW)
        other = TO.read_text().replace("nodes: 2", "nodes: 3")
        spec = spec_from(load_profile(FROM), load_profile(TO), FROM.read_text(), other)
        with pytest.raises(TransitionConflict, match="started from other profiles"):
            await Workflow(kube, spec, NS).load()
    finally:
        await kube.close()


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["pool", "transition", *args])


async def test_cli_plan_apply_status(cluster) -> None:
    k8s, cfg = cluster
    seed(k8s, gang="Running")
    common = ["--from", str(FROM), "--to", str(TO), "--kubeconfig", cfg]
    r = await asyncio.to_thread(_cli, "plan", *common)
    assert r.exit_code == 0, r.output
    assert "+++ ResourceFlavor/h200-block-b (after)" in r.stdout
    assert "Node/gke-a-0: spec.unschedulable: false -> true" in r.stdout
    assert "delete ResourceFlavor/h200-block-a" in r.stdout
    # The new flavor takes the quota first; the old one stays last at zero for what already runs there.
    assert "-    - name: h200-block-a\n+    - name: h200-block-b" in r.stdout
    assert "+    - name: h200-block-a\n+      resources:\n+      - name: nvidia.com/gpu\n+        nominalQuota: '0'" in r.stdout
    assert not [x for x in k8s if x.method.value.upper() in ("POST", "PATCH", "PUT", "DELETE")]  # plan writes nothing

    r = await asyncio.to_thread(_cli, "status", *common)
    assert r.exit_code == 3 and "no transition" in r.stderr

    r = await asyncio.to_thread(_cli, "apply", *common, "--now", "2026-11-30T12:00:00Z", "--step")
    assert r.exit_code == 1, r.output  # one step done, more to do
    r = await asyncio.to_thread(_cli, "status", *common, "--format", "json")
    data = json.loads(r.stdout)
    assert_matches("PoolTransition", data, r.exit_code)
    assert r.exit_code == 1 and data["verdict"] == "degraded" and data["steps"][0]["done"] == "2026-11-30T12:00:00Z" and data["steps"][1]["done"] is None

    r = await asyncio.to_thread(_cli, "apply", *common, "--now", "2026-11-30T12:01:00Z")
    # The verdict word first, as every command's text (the phase says why it is not done).
    assert r.exit_code == 1 and r.stdout.startswith("DEGRADED  transition h200-block-a -> h200-block-b (queue h200) "
                                                    "· Waiting") and "ml-search/qwen" in r.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--from", str(TO), "--to", str(TO)], "cannot tell the old pool"),
    (["--from", str(FROM), "--to", str(TO), "--old-pool", "nope"], "--old-pool 'nope'"),
    (["--from", str(FROM), "--to", str(TO), "--drain-deadline", "soon"], "--drain-deadline"),
    (["--from", str(FROM), "--to", str(TO), "--accept-unverified", "dns"], "not gates"),
    (["--from", str(FROM), "--to", str(TO), "--now", "noon"], "--now"),
])
def test_cli_bad_input_is_one_line_exit_3(args: list[str], message: str) -> None:
    r = _cli("apply", *args, "--kubeconfig", "/nonexistent")
    assert r.exit_code == 3, r.output
    assert message in r.stderr and "Traceback" not in r.output


def test_unreachable_cluster_is_one_line() -> None:
    r = _cli("status", "--from", str(FROM), "--to", str(TO), "--kubeconfig", "/nonexistent/kubeconfig")
    assert r.exit_code == 3 and r.stderr.startswith("error:") and "Traceback" not in r.output
