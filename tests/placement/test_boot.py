"""A fabric node boots tainted ``readiness.k8s.io/fabric-unverified``: every DaemonSet it needs before it can become
ready (the device plugin or DRA driver, the CSI node plugin, Multus, the agent) would still get a pod on it.

In kmock's emulator (real HTTP): the node is stored tainted; the third-party DaemonSets are created as their charts
ship them (the EFA device plugin's chart tolerates only ``CriticalAddonsOnly``) through the webhook's decision on
their CREATE; the agent's DaemonSets come from ``render install``. The DaemonSets are then read back through the
API and each one's template is judged as the DaemonSet controller judges a node: nodeSelector and tolerations
against the node's labels and NoSchedule/NoExecute taints.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from kmock import KubernetesEmulator, Server

from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission
from fabricguard.doctor.engine import run_doctor
from fabricguard.doctor.snapshot import snapshot_from_lists
from fabricguard.kube import Kube
from fabricguard.names import TAINT_KEYS, TAINT_UNVERIFIED
from fabricguard.placement import install
from fabricguard.profile import load_profile
from fabricguard.profile.cluster import tolerates
from fabricguard.profile.model import PlatformProfile, Pool
from kube_support import ROOT, kubeconfig

PROFILES = sorted((ROOT / "examples" / "profiles").glob("*.yaml"))
DIGEST = "@sha256:" + "ab" * 32
OPTS = install.Options(image=f"r.example.com/fg:0.1.0{DIGEST}", agent_image=f"r.example.com/fga:0.1.0{DIGEST}",
                       canary_image=f"r.example.com/fgc:0.1.0{DIGEST}")
NOW = datetime(2026, 12, 1, tzinfo=UTC)
CRITICAL_ADDONS = {"key": "CriticalAddonsOnly", "operator": "Exists"}


def node(pool: Pool) -> dict[str, Any]:
    name = f"{pool.name}-node-0"
    taints = [{"key": TAINT_UNVERIFIED, "value": pool.name, "effect": "NoSchedule"}]
    taints += [{"key": t.key, "value": t.value or "present", "effect": t.effect or "NoSchedule"}
               for t in pool.tolerations if t.key]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {**pool.nodeSelector, "kubernetes.io/hostname": name,
                                                  "kubernetes.io/os": "linux"}},
            "spec": {"taints": taints}}


def upstream(namespace: str, name: str, pool_tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    """A DaemonSet as its chart ships it: its own toleration and the pool's, none of the readiness taints."""
    labels = {"app.kubernetes.io/name": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"tolerations": [CRITICAL_ADDONS, *pool_tolerations],
                         "nodeSelector": {"kubernetes.io/os": "linux"},
                         "containers": [{"name": "plugin", "image": "registry.example.com/plugin:1"}]}}}}


def review(obj: dict[str, Any], operation: str = "CREATE") -> str:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u1", "kind": {"group": "apps", "version": "v1", "kind": "DaemonSet"},
        "resource": {"group": "apps", "version": "v1", "resource": "daemonsets"},
        "namespace": obj["metadata"]["namespace"], "name": obj["metadata"]["name"], "operation": operation,
        "userInfo": {"username": "system:serviceaccount:kube-system:addon-manager"}, "object": obj}})


def through_webhook(profile: PlatformProfile, obj: dict[str, Any]) -> dict[str, Any]:
    decision = Admission(profile).handle("mutate", review(obj))
    assert decision.status == 200 and decision.body["response"]["allowed"]
    patch = rv.decode_patch(decision.body)
    return jsonpatch.apply_patch(obj, patch) if patch else obj


def would_schedule(ds: dict[str, Any], n: dict[str, Any]) -> bool:
    spec = ds["spec"]["template"]["spec"]
    labels = n["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    hard = [t for t in n["spec"].get("taints") or () if t["effect"] in ("NoSchedule", "NoExecute")]
    return all(tolerates(spec.get("tolerations") or [], t) for t in hard)


def fabric_pools(profile: PlatformProfile) -> list[Pool]:
    return [p for p in profile.spec.pools if p.fabric.has_fabric]


@pytest.fixture()
async def emulator(tmp_path: Path):
    async with KubernetesEmulator() as k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.5"}
        kube = await Kube.connect(kubeconfig(tmp_path, str(server.url).rstrip("/")))
        try:
            yield k8s, kube
        finally:
            await kube.close()


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
async def test_a_tainted_fabric_node_boot_schedules_every_daemonset_it_needs(path: Path, emulator) -> None:
    k8s, kube = emulator
    profile = load_profile(path)
    comps = install.components(profile, path.read_text(), OPTS)
    agents = [x for c in comps for x in c.objects if x["kind"] == "DaemonSet"]
    needed = profile.fabric_daemonsets()
    assert needed, "each example profile names the DaemonSets its fabric nodes need"
    for pool in fabric_pools(profile):
        n = node(pool)
        k8s.objects["v1/nodes", None, n["metadata"]["name"]] = n
    for d in needed:
        pool_tols = [t.to_k8s() for p in fabric_pools(profile) for t in p.tolerations]
        raw = upstream(d.namespace, d.name, pool_tols)
        assert not any(would_schedule(raw, node(p)) for p in fabric_pools(profile))  # the deadlock, as shipped
        ds = through_webhook(profile, raw)
        assert through_webhook(profile, ds) == ds  # an UPDATE of the patched object changes nothing
        k8s.objects["apps/v1/daemonsets", d.namespace, d.name] = ds
    for ds in agents:
        k8s.objects["apps/v1/daemonsets", ds["metadata"]["namespace"], ds["metadata"]["name"]] = ds
    stored = await kube.list("apps/v1", "daemonsets")
    nodes = await kube.list("v1", "nodes")
    by_name = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in stored}
    for n in nodes:
        pool = next(p for p in fabric_pools(profile) if n["metadata"]["name"] == f"{p.name}-node-0")
        for d in needed:
            assert would_schedule(by_name[d.namespace, d.name], n), (d.name, pool.name)
        agent = by_name["fabricguard-system", f"fabricguard-agent-{pool.name}"]
        assert would_schedule(agent, n), pool.name


def test_the_doctor_reports_a_fabric_daemonset_that_would_not_schedule_on_a_tainted_node() -> None:
    profile = load_profile(ROOT / "examples" / "profiles" / "aws-p5-efa.yaml")
    pool = profile.pool("p5-efa")
    dp = pool.fabric.fabric_daemonset
    assert dp is not None
    shipped = upstream(dp.namespace, dp.daemonSet, [t.to_k8s() for t in pool.tolerations])
    lists: dict[str, Any] = {"nodes": {"apiVersion": "v1", "kind": "List", "items": [node(pool)]},
                             "daemonsets": {"apiVersion": "v1", "kind": "List", "items": [shipped]}}
    report = run_doctor(snapshot_from_lists(lists), profile, NOW)
    found = [f for f in report.findings if f.rule == "daemonset-untolerated-readiness"]
    assert [f.objects[0].name for f in found] == [dp.daemonSet]
    fixed = through_webhook(profile, shipped)
    lists["daemonsets"]["items"] = [fixed]
    report = run_doctor(snapshot_from_lists(lists), profile, NOW)
    assert not [f for f in report.findings if f.rule == "daemonset-untolerated-readiness"]


def test_every_daemonset_gets_the_readiness_tolerations_unless_it_opts_out() -> None:
    """The readiness taints are for workloads, not node agents: kube-proxy, a CNI, any DaemonSet (issue 24 item 3).
    One labelled fabricguard.io/readiness-tolerations: "false" is excluded by the configuration's objectSelector
    and, should it reach the webhook anyway, left as it is."""
    profile = load_profile(ROOT / "examples" / "profiles" / "aws-p5-efa.yaml")
    other = upstream("kube-system", "kube-proxy", [])
    patched = through_webhook(profile, other)
    assert {t["key"] for t in patched["spec"]["template"]["spec"]["tolerations"]} >= set(TAINT_KEYS)
    kept = upstream("kube-system", "special", [])
    kept["metadata"]["labels"] = {"fabricguard.io/readiness-tolerations": "false"}
    assert through_webhook(profile, kept) == kept
    from fabricguard.admission.daemonsets import webhook

    hook = webhook(profile, "fabricguard-system", "fabricguard-admission")
    assert hook is not None and hook["failurePolicy"] == "Ignore" and "namespaceSelector" not in hook
    assert hook["objectSelector"] == {"matchExpressions": [
        {"key": "fabricguard.io/readiness-tolerations", "operator": "NotIn", "values": ["false"]}]}


# The GPU stack as published. Tolerations copied from the charts' values files:
# - NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin/values.yaml (`tolerations`: CriticalAddonsOnly
#   Exists; nvidia.com/gpu Exists NoSchedule) and its NFD worker (`nfd.worker.tolerations`: master "" NoSchedule;
#   nvidia.com/gpu Equal "present" NoSchedule);
# - NVIDIA/gpu-operator deployments/gpu-operator/values.yaml (`daemonsets.tolerations`, applied to every operand:
#   driver, toolkit, device plugin, DCGM exporter, GFD, validator: nvidia.com/gpu Exists NoSchedule) and its NFD
#   worker (`node-feature-discovery.worker.tolerations`: master and control-plane "" NoSchedule; nvidia.com/gpu
#   Exists NoSchedule).
DEVICE_PLUGIN_CHART = [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                       {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
DEVICE_PLUGIN_CHART_NFD = [{"key": "node-role.kubernetes.io/master", "operator": "Equal", "value": "",
                            "effect": "NoSchedule"},
                           {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]
GPU_OPERATOR_OPERANDS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
GPU_OPERATOR_NFD = [{"key": "node-role.kubernetes.io/master", "operator": "Equal", "value": "", "effect": "NoSchedule"},
                    {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "",
                     "effect": "NoSchedule"},
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
GPU_STACK = [
    ("nvidia-device-plugin", "nvidia-device-plugin", DEVICE_PLUGIN_CHART),
    ("nvidia-device-plugin", "nvidia-device-plugin-node-feature-discovery-worker", DEVICE_PLUGIN_CHART_NFD),
    *(("gpu-operator", name, GPU_OPERATOR_OPERANDS) for name in (
        "nvidia-driver-daemonset", "nvidia-container-toolkit-daemonset", "nvidia-device-plugin-daemonset",
        "nvidia-dcgm-exporter", "gpu-feature-discovery", "nvidia-operator-validator")),
    ("gpu-operator", "gpu-operator-node-feature-discovery-worker", GPU_OPERATOR_NFD),
]


def published(namespace: str, name: str, tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"tolerations": [dict(t) for t in tolerations], "priorityClassName": "system-node-critical",
                         "containers": [{"name": "main", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}]}}}}


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
async def test_a_tainted_gpu_node_boots_with_the_gpu_stacks_published_daemonsets(path: Path, emulator) -> None:
    """A new GPU node: the readiness taint and nvidia.com/gpu=present. As published, no DaemonSet of the GPU stack
    would run there (the agent then never sees the GPUs: a deadlock); through the webhook each one does."""
    k8s, kube = emulator
    profile = load_profile(path)
    for pool in profile.spec.pools:
        n = node(pool)
        n["spec"]["taints"].append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
        k8s.objects["v1/nodes", None, n["metadata"]["name"]] = n
    # The platform's own pool taints (AKS's sku=gpu) are the operator's to tolerate when installing the GPU stack
    # there (AKS documents that toleration for the device plugin); the readiness taint is fabricguard's.
    platform = [t.to_k8s() for p in profile.spec.pools for t in p.tolerations if t.key]
    for ns, name, tols in GPU_STACK:
        raw = published(ns, name, [*tols, *(t for t in platform if t not in tols)])
        assert not any(would_schedule(raw, node(p)) for p in profile.spec.pools), name  # the deadlock
        k8s.objects["apps/v1/daemonsets", ns, name] = through_webhook(profile, raw)
    stored = await kube.list("apps/v1", "daemonsets")
    assert len(stored) == len(GPU_STACK)
    for n in await kube.list("v1", "nodes"):
        for ds in stored:
            assert would_schedule(ds, n), (ds["metadata"]["name"], n["metadata"]["name"])


def test_the_doctor_reports_the_gpu_stack_as_published_on_a_tainted_node() -> None:
    profile = load_profile(ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml")
    pool = profile.spec.pools[0]
    shipped = [published(ns, name, tols) for ns, name, tols in GPU_STACK]
    lists: dict[str, Any] = {"nodes": {"apiVersion": "v1", "kind": "List", "items": [node(pool)]},
                             "daemonsets": {"apiVersion": "v1", "kind": "List", "items": shipped}}
    report = run_doctor(snapshot_from_lists(lists), profile, NOW)
    found = sorted(f.objects[0].name for f in report.findings if f.rule == "daemonset-untolerated-readiness")
    assert found == sorted(name for _ns, name, _t in GPU_STACK)
    lists["daemonsets"]["items"] = [through_webhook(profile, d) for d in shipped]
    report = run_doctor(snapshot_from_lists(lists), profile, NOW)
    assert not [f for f in report.findings if f.rule == "daemonset-untolerated-readiness"]
