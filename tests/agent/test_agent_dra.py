"""The agent on DRA pools: the fabric is in the node's ResourceSlices, never in allocatable.

A healthy DRANET node and a healthy KEP-5004 EFA node are FabricReady=True (they were False on every healthy DRA
node before: allocatable has no fabric resource there); a NIC down, a missing slice or slices that cannot be read
turn it False. The device-plugin profiles keep their allocatable check (tests/agent/test_agent_once.py).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_support import HEALTHY, NODE_NAME, PROFILES, agent_rbac, kubeconfig
from typer.testing import CliRunner

from fabricguard.agent.checks import allocatable_check
from fabricguard.agent.kube import NodeClient, agent_grants, connect
from fabricguard.agent.loop import Agent, AgentConfig
from fabricguard.cli import app
from fabricguard.probes.result import Status
from fabricguard.profile import load_profile

RUN = CliRunner()
DRANET_PROFILE = PROFILES / "gke-a4-dranet.yaml"
EFA = load_profile(PROFILES / "aws-p5-efa-dra.yaml")
DRANET = load_profile(DRANET_PROFILE)


def _gen() -> Any:
    name = "fg_example_snapshots_dra"
    if name in sys.modules:
        return sys.modules[name]
    path = PROFILES.parent / "snapshots" / "generate_dra.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


g = _gen()


def dranet_node() -> dict[str, Any]:
    """The healthy A3 Ultra node recorded for the agent tests, as a DRANET node: no fabric in allocatable."""
    node = json.loads((HEALTHY / "node.json").read_text())
    node["metadata"]["labels"]["cloud.google.com/gke-nodepool"] = "a4-dranet-1"
    for part in ("allocatable", "capacity"):
        node["status"][part] = {k: v for k, v in node["status"][part].items() if "networking.gke.io" not in k}
    return node


def slices(node: str, **kw: Any) -> list[dict[str, Any]]:
    return [g.resource_slice(node, "dra.net", g.gke_nics(0, held=set(), **kw), g.NOW)]


def run_cli(tmp_path: Path, root: Path, node: dict[str, Any], sl: list[dict[str, Any]] | None) -> tuple[int, dict]:
    (tmp_path / "node.json").write_text(json.dumps(node))
    args = ["agent", "--once", "--dry-run", "--format", "json", "--node", NODE_NAME, "--profile", str(DRANET_PROFILE),
            "--root", str(root), "--nvml-json", str(HEALTHY / "nvml.json"), "--node-json", str(tmp_path / "node.json")]
    if sl is not None:
        (tmp_path / "slices.json").write_text(json.dumps(g.klist(sl)))
        args += ["--slices-json", str(tmp_path / "slices.json")]
    r = RUN.invoke(app, args)
    return r.exit_code, json.loads(r.stdout)


def test_healthy_dranet_node_is_fabric_ready(tmp_path: Path, healthy_root: Path) -> None:
    code, out = run_cli(tmp_path, healthy_root, dranet_node(), slices(NODE_NAME))
    c = {x["name"]: x for x in out["checks"]}["fabric.allocatable"]
    assert (code, out["status"], out["reason"]) == (0, "True", "AllChecksPassed"), c
    assert c["detail"].startswith("offered through DRA: 1 ResourceSlice(s) from dra.net list 9 device(s), 8 with "
                                  "dra.net/rdma=True, 8 usable (pods need 8)")


def test_a_nic_down_or_no_slice_is_false_and_says_why(tmp_path: Path, healthy_root: Path) -> None:
    code, out = run_cli(tmp_path, healthy_root, dranet_node(), slices(NODE_NAME, down={5}))
    assert (code, out["status"]) == (2, "False")
    assert "gpu5rdma0 (dra.net/state=down)" in out["message"]
    code, out = run_cli(tmp_path, healthy_root, dranet_node(), slices("another-node"))
    assert code == 2 and "no ResourceSlice from driver dra.net for node " + NODE_NAME in out["message"]
    code, out = run_cli(tmp_path, healthy_root, dranet_node(), None)
    assert code == 2 and "cannot read this node's ResourceSlices" in out["message"]


def test_kep5004_efa_node_passes_without_the_resource_in_allocatable() -> None:
    lists = g.efa_healthy()
    node = lists["nodes"]["items"][0]
    name = node["metadata"]["name"]
    assert "vpc.amazonaws.com/efa" not in node["status"]["allocatable"]
    pool = EFA.pool()
    check = allocatable_check(pool, node, None, lists["resourceslices"]["items"])
    assert check.status is Status.passed, check.detail
    assert "32 usable (pods need 32)" in check.detail
    fewer = copy.deepcopy(lists["resourceslices"]["items"])
    for s in fewer:
        s["spec"]["devices"] = [d for d in s["spec"]["devices"] if d["name"] != "rdmap20s27"]
    check = allocatable_check(pool, node, None, fewer)
    assert check.status is Status.failed and "31 usable (pods need 32)" in check.detail
    assert allocatable_check(pool, node, None, [s for s in fewer if s["spec"]["nodeName"] != name]).status \
        is Status.failed


def test_device_plugin_pool_still_reads_allocatable() -> None:
    prof = load_profile(PROFILES / "gke-a3-ultra.yaml")
    node = json.loads((HEALTHY / "node.json").read_text())
    assert allocatable_check(prof.pool(), node, None, None).status is Status.passed
    del node["status"]["allocatable"]["networking.gke.io.networks/rdma-2"]
    assert "rdma-2 is absent" in allocatable_check(prof.pool(), node, None, []).detail


@pytest.mark.parametrize("profile", [DRANET_PROFILE, PROFILES / "aws-p5-efa-dra.yaml"])
def test_agent_rbac_lists_resource_slices_on_dra_profiles(profile: Path) -> None:
    from fabricguard.agent.render import agent_manifests

    objs = agent_manifests(load_profile(profile), profile.read_text(), "ghcr.io/acme/fabricguard:1")
    role = next(o for o in objs if o["kind"] == "ClusterRole")
    assert {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["list"]} in role["rules"]


async def test_live_agent_lists_its_slices_from_the_api_server(apiserver, tmp_path: Path, healthy_root: Path) -> None:
    k8s, url = apiserver
    k8s.rbac = agent_rbac(profile=DRANET_PROFILE)  # rendered for a DRA pool: the agent may list ResourceSlices
    k8s.put_node(dranet_node())
    for s in slices(NODE_NAME) + slices("gke-a3u-pool-1-7f3c9a2e-0002", down=set(range(8))):
        stored = {k: v for k, v in s.items() if k not in ("kind", "apiVersion")}
        k8s.objects["resource.k8s.io/v1/resourceslices", None, s["metadata"]["name"]] = stored
    api = await connect(kubeconfig(tmp_path, url, "agent-own"), table=agent_grants(dra=True))
    cfg = AgentConfig(node=NODE_NAME, profile=DRANET, root=healthy_root, nvml_json=HEALTHY / "nvml.json", passes=1)
    res = await Agent(cfg, NodeClient(api)).run_once()
    assert res.reported.status == "True", res.reported.message
    cond = next(c for c in k8s.node(NODE_NAME)["status"]["conditions"] if c["type"] == "FabricReady")
    assert cond["status"] == "True"


def test_a_nic_held_by_a_pod_is_not_a_missing_netdev(tmp_path: Path, healthy_root: Path) -> None:
    """DRANET moves an allocated NIC's netdev into the pod: the host no longer sees it, the slice says who has it."""
    import shutil

    net = next((healthy_root / "sys/class/infiniband").iterdir()) / "device" / "net"
    for nd in list(net.iterdir()) if net.is_dir() else []:
        if nd.is_dir() and not nd.is_symlink():
            shutil.rmtree(nd)
        else:
            nd.unlink()
    code, out = run_cli(tmp_path, healthy_root, dranet_node(), slices(NODE_NAME))
    assert (code, out["status"]) == (0, "True"), out["message"]


def nvidia_gpus(count: int = 8, tainted: frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """GPUs as the NVIDIA DRA driver (gpu.nvidia.com) lists them: unqualified attributes of its own domain, ``type``
    gpu; GPU health published as a device taint (dra-driver-nvidia-gpu #663)."""
    out = []
    for i in range(count):
        dev: dict[str, Any] = {"name": f"gpu-{i}", "attributes": {
            "type": {"string": "gpu"}, "index": {"int": i}, "minor": {"int": i},
            "uuid": {"string": f"GPU-8c1f5a0e-0000-4000-8000-00000000000{i}"},
            "productName": {"string": "NVIDIA H200"}, "brand": {"string": "Nvidia"},
            "architecture": {"string": "Hopper"}, "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "580.95.5"}, "cudaDriverVersion": {"version": "13.0.0"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i:02x}"}},
            "capacity": {"memory": {"value": "143771Mi"}}}
        if i in tainted:
            dev["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}]
        out.append(dev)
    out.append({"name": "gpu-0-mig-1g", "attributes": {"type": {"string": "mig"}}})  # not a whole GPU
    return out


def gpu_operator_dra_node() -> dict[str, Any]:
    """The healthy A3 Ultra node where GPU Operator's GPUCluster runs the DRA driver: no nvidia.com/gpu in
    allocatable (KEP-5004 backs it from ResourceSlices), the fabric still from its device plugin."""
    node = json.loads((HEALTHY / "node.json").read_text())
    for part in ("allocatable", "capacity"):
        node["status"][part].pop("nvidia.com/gpu", None)
    return node


def test_gpus_offered_through_the_nvidia_dra_driver_pass_the_allocatable_check() -> None:
    prof = load_profile(PROFILES / "gke-a3-ultra.yaml")
    node = gpu_operator_dra_node()
    gpus = [g.resource_slice(NODE_NAME, "gpu.nvidia.com", nvidia_gpus(), g.NOW)]
    check = allocatable_check(prof.pool(), node, None, gpus)
    assert check.status is Status.passed, check.detail
    assert "nvidia.com/gpu offered through DRA: 1 ResourceSlice(s) from gpu.nvidia.com list 8 GPU(s), 8 usable" \
        in check.detail and "networking.gke.io.networks/rdma-0=1" in check.detail
    # a GPU the driver taints for its health is not usable: 7 of 8 fail, naming it
    bad = allocatable_check(prof.pool(), node, None,
                            [g.resource_slice(NODE_NAME, "gpu.nvidia.com", nvidia_gpus(tainted=frozenset({3})), g.NOW)])
    assert bad.status is Status.failed and "gpu-3 (gpu.nvidia.com/xid)" in bad.detail
    assert "nvidia.com/gpu is absent" in bad.detail
    # another node's GPUs, or no slices readable: fails, saying both ways were looked at
    other = allocatable_check(prof.pool(), node, None, [g.resource_slice("elsewhere", "gpu.nvidia.com",
                                                                         nvidia_gpus(), g.NOW)])
    assert other.status is Status.failed and "no ResourceSlice from gpu.nvidia.com" in other.detail
    unread = allocatable_check(prof.pool(), node, None, None, "403 Forbidden")
    assert unread.status is Status.failed and "cannot read this node's ResourceSlices (403 Forbidden)" \
        in unread.detail


async def test_live_agent_reads_dra_gpus_on_a_device_plugin_fabric_pool(apiserver, tmp_path: Path,
                                                                       healthy_root: Path) -> None:
    """Rendered RBAC lets every agent list its node's ResourceSlices; the agent lists them only when its GPUs are
    missing from allocatable, and reports True on a healthy GPU Operator DRA node."""
    k8s, url = apiserver
    prof_path = PROFILES / "gke-a3-ultra.yaml"
    k8s.rbac = agent_rbac(profile=prof_path)
    k8s.put_node(gpu_operator_dra_node())
    s = g.resource_slice(NODE_NAME, "gpu.nvidia.com", nvidia_gpus(), g.NOW)
    k8s.objects["resource.k8s.io/v1/resourceslices", None, s["metadata"]["name"]] = {
        k: v for k, v in s.items() if k not in ("kind", "apiVersion")}
    api = await connect(kubeconfig(tmp_path, url, "agent-own"), table=agent_grants())
    cfg = AgentConfig(node=NODE_NAME, profile=load_profile(prof_path), root=healthy_root,
                      nvml_json=HEALTHY / "nvml.json", passes=1)
    res = await Agent(cfg, NodeClient(api)).run_once()
    assert res.reported.status == "True", res.reported.message
