"""A pool a managed autoscaler scales from zero: its bootstrap taint is the autoscaler's startup taint.

GKE's and AKS's autoscalers ignore only ``startup-taint.cluster-autoscaler.kubernetes.io/`` taints when they build a
zero-node template; NRC accepts only ``readiness.k8s.io/`` (NRC #279). With ``readinessTaintPrefix`` set to the
autoscaler's prefix, the render gives that pool no NodeReadinessRule, its agent ``--manage-taints`` (and the grant to
patch Nodes), every DaemonSet and the agent the toleration, and the agent lifts the startup taint on ``True``.
"""

from __future__ import annotations

import json

from agent_support import PROFILES

from fabricguard import names
from fabricguard.agent.render import agent_manifests, readiness_rules
from fabricguard.agent.taints import taint_patch, wanted_taints
from fabricguard.profile import loads_profile

GKE = PROFILES / "gke-a3-ultra.yaml"
TEXT = GKE.read_text().replace(
    "    nodeSelector: {cloud.google.com/gke-nodepool: a3u-pool-1}",
    "    nodeSelector: {cloud.google.com/gke-nodepool: a3u-pool-1}\n"
    "    readinessTaintPrefix: startup-taint.cluster-autoscaler.kubernetes.io/")
STARTUP = names.TAINT_STARTUP_UNVERIFIED


def test_the_render_leaves_the_startup_pool_to_its_agent() -> None:
    assert GKE.read_text() != TEXT
    profile = loads_profile(TEXT)
    pool = profile.spec.pools[0]
    assert pool.startup_taint and pool.taint_keys == (STARTUP, names.TAINT_DEGRADED)
    assert [r for r in readiness_rules(profile) if r["spec"]["nodeSelector"]["matchLabels"] == pool.nodeSelector] \
        == []
    objs = agent_manifests(profile, TEXT, "ghcr.io/acme/fabricguard:1")
    ds = next(o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"].endswith(pool.name))
    pod = ds["spec"]["template"]["spec"]
    assert "--manage-taints" in pod["containers"][0]["args"]
    assert {"key": STARTUP, "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    role = next(o for o in objs if o["kind"] == "ClusterRole")
    assert any("nodes" in r["resources"] and "patch" in r["verbs"] for r in role["rules"] if r["apiGroups"] == [""])
    assert STARTUP in profile.taint_keys


def test_the_agent_lifts_the_startup_taint_when_true_and_keeps_it_while_false() -> None:
    node = {"metadata": {"name": "n1", "resourceVersion": "7"},
            "spec": {"taints": [{"key": STARTUP, "value": "h200-rdma", "effect": "NoSchedule"},
                                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"conditions": []}}
    assert wanted_taints(node, "False", bootstrap=STARTUP) == {STARTUP}
    assert taint_patch(node, {STARTUP}) is None  # nothing to change
    ops = taint_patch(node, wanted_taints(node, "True", bootstrap=STARTUP))
    assert ops is not None and ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    assert ops[1]["value"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


def test_the_webhook_gives_every_daemonset_the_startup_toleration() -> None:
    from fabricguard.admission.decide import Admission
    from fabricguard.admission.review import decode_patch

    profile = loads_profile(TEXT)
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "nvidia-device-plugin-daemonset",
                                                                        "namespace": "kube-system"},
          "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
              "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
              "containers": [{"name": "c", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.18.0"}]}}}}
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "apps", "version": "v1", "kind": "DaemonSet"},
        "resource": {"group": "apps", "version": "v1", "resource": "daemonsets"}, "namespace": "kube-system",
        "operation": "CREATE", "object": ds}})
    patch = decode_patch(Admission(profile).handle("mutate", body).body)
    added = [op["value"] for op in patch if op["op"] == "add"]
    assert {"key": STARTUP, "operator": "Exists", "effect": "NoSchedule"} in added, patch


async def test_the_agent_lifts_the_startup_taint_through_the_rendered_policy(apiserver, tmp_path, healthy_root) -> None:
    """Live, with the rendered ClusterRole and ValidatingAdmissionPolicy enforced: a node registered with the
    autoscaler's startup taint keeps it while failing and loses it on True; the policy lets the agent touch that
    key and no other."""
    from agent_support import HEALTHY, NODE_NAME, Rbac, healthy_node, kubeconfig
    from test_agent_live import break_port, fix_port

    from fabricguard.agent.kube import NodeClient, agent_grants, connect
    from fabricguard.agent.loop import Agent, AgentConfig
    from fabricguard.agent.render import admission_policy

    k8s, url = apiserver
    profile = loads_profile(TEXT)
    k8s.policies = admission_policy("fabricguard-system")
    k8s.rbac = Rbac.from_manifests(agent_manifests(profile, TEXT, "ghcr.io/acme/fabricguard:1"))
    node = healthy_node()
    node["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                              {"key": STARTUP, "value": "h200-rdma", "effect": "NoSchedule"}]
    node["status"]["conditions"] = [c for c in node["status"].get("conditions", []) if c["type"] != "FabricReady"]
    k8s.put_node(node)
    api = await connect(kubeconfig(tmp_path, url, "agent-own"), table=agent_grants(True))
    cfg = AgentConfig(node=NODE_NAME, profile=profile, root=healthy_root, nvml_json=HEALTHY / "nvml.json",
                      passes=1, manage_taints=True, mode="enforce")
    agent = Agent(cfg, NodeClient(api))
    keys = lambda: [t["key"] for t in k8s.node(NODE_NAME)["spec"]["taints"]]  # noqa: E731
    break_port(healthy_root)
    res = await agent.run_once()
    assert res.reported.status == "False" and res.errors == [] and keys() == ["nvidia.com/gpu", STARTUP]
    fix_port(healthy_root)
    res = await agent.run_once()
    assert res.reported.status == "True" and res.errors == [], res.errors
    assert keys() == ["nvidia.com/gpu"]
