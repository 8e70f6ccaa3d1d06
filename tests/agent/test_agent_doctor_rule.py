"""Doctor rule ``agent-daemonset-short`` on the DaemonSet ``render agent`` writes, as the API server reports it."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from agent_support import GKE, IMAGE_REF, healthy_node
from typer.testing import CliRunner

from fabricguard.agent.render import agent_manifests
from fabricguard.doctor.engine import run_doctor
from fabricguard.doctor.rules.agent import agent_daemonset_short, tolerates
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile import load_profile

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def nodes(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        node = healthy_node()
        node["metadata"]["name"] = f"gke-a3u-pool-1-7f3c9a2e-{i:04d}"
        out.append(node)
    return out


def agent_ds(desired: int | None, *, tolerate: bool = True) -> dict[str, Any]:
    prof = load_profile(GKE)
    [ds] = [o for o in agent_manifests(prof, GKE.read_text(), IMAGE_REF) if o["kind"] == "DaemonSet"]
    ds = copy.deepcopy(ds)
    if not tolerate:  # an older manifest that tolerated the GPU taint only
        ds["spec"]["template"]["spec"]["tolerations"] = [t.to_k8s() for t in prof.spec.pools[0].tolerations]
    ds["metadata"] |= {"uid": "4b1e", "creationTimestamp": "2026-11-01T00:00:00Z", "generation": 1}
    # The API server leaves zero counters out of status.
    ds["status"] = {"currentNumberScheduled": desired, "desiredNumberScheduled": desired,
                    "numberReady": desired, "numberAvailable": desired} if desired else {"observedGeneration": 1}
    return ds


def pod_on(node: str, ds: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"fabricguard-agent-{node[-4:]}", "namespace": ds["metadata"]["namespace"],
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "controller": True,
                                              "name": ds["metadata"]["name"], "uid": "4b1e"}]},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}}


def snapshot(objs: list[dict[str, Any]]) -> Snapshot:
    return Snapshot(objects=json.loads(json.dumps(objs)))


def test_untolerated_taint_shrinks_desired_and_is_named() -> None:
    ns = nodes(3)
    ns[2]["spec"]["taints"].append({"key": "example.com/maintenance", "value": "fw-upgrade", "effect": "NoSchedule"})
    ds = agent_ds(2)
    objs = [*ns, ds, pod_on(ns[0]["metadata"]["name"], ds), pod_on(ns[1]["metadata"]["name"], ds)]
    [f] = agent_daemonset_short(snapshot(objs), load_profile(GKE), NOW)
    assert f.rule == "agent-daemonset-short" and str(f.severity) == "critical"
    assert "wants 2 pod(s) but pool h200-rdma has 3 node(s)" in f.message
    assert f.evidence[f"Node {ns[2]['metadata']['name']}"] == (
        "untolerated taint(s) example.com/maintenance=fw-upgrade:NoSchedule")


def test_desired_zero_when_the_readiness_taint_is_not_tolerated() -> None:
    ns = nodes(2)
    for n in ns:
        n["spec"]["taints"].append({"key": "readiness.k8s.io/fabric-unverified", "value": "h200-rdma",
                                    "effect": "NoSchedule"})
    objs = [*ns, agent_ds(None, tolerate=False)]
    [f] = agent_daemonset_short(snapshot(objs), load_profile(GKE), NOW)
    assert "wants 0 pod(s)" in f.message
    assert all("readiness.k8s.io/fabric-unverified=h200-rdma:NoSchedule" in v
               for k, v in f.evidence.items() if k.startswith("Node "))


def test_full_daemonset_and_rendered_tolerations_are_clean() -> None:
    ns = nodes(3)
    for n in ns:
        n["spec"]["taints"].append({"key": "readiness.k8s.io/fabric-degraded", "effect": "NoSchedule"})
    ds = agent_ds(3)
    objs = [*ns, ds, *(pod_on(n["metadata"]["name"], ds) for n in ns)]
    assert agent_daemonset_short(snapshot(objs), load_profile(GKE), NOW) == []
    # Registered: the whole doctor reports it (and exits 1 on it).
    report = run_doctor(snapshot([*ns, agent_ds(None)]), load_profile(GKE), NOW)
    assert "agent-daemonset-short" in {f.rule for f in report.findings}


def test_no_agent_daemonset_is_left_to_node_not_gated() -> None:
    assert agent_daemonset_short(snapshot(nodes(2)), load_profile(GKE), NOW) == []


def test_toleration_matching_follows_kubernetes() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert tolerates([{"operator": "Exists"}], taint)
    assert tolerates([{"key": "k", "operator": "Exists"}], taint)
    assert tolerates([{"key": "k", "value": "v"}], taint)
    assert not tolerates([{"key": "k", "value": "w"}], taint)
    assert not tolerates([{"key": "k", "operator": "Exists", "effect": "NoExecute"}], taint)
    assert not tolerates([{"key": "other", "operator": "Exists"}], taint)
    assert not tolerates([], taint)


def test_doctor_cli_json_names_the_rule(tmp_path) -> None:
    from fabricguard.cli import app

    ns = nodes(2)
    (tmp_path / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": ns}))
    (tmp_path / "ds.json").write_text(json.dumps(agent_ds(None)))
    r = CliRunner().invoke(app, ["doctor", "--snapshot", str(tmp_path), "--profile", str(GKE), "--format", "json",
                                 "--now", "2026-11-30T12:00:00Z"])
    assert r.exit_code == 1, r.output
    assert "agent-daemonset-short" in {f["rule"] for f in json.loads(r.stdout)["findings"]}
