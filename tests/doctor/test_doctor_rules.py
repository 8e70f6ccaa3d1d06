"""Every rule, positive and negative, on the incident's objects and small variations of them."""

from __future__ import annotations

import copy
from datetime import timedelta

from doctor_support import gen, snap

from fabricguard.doctor.engine import run_doctor
from fabricguard.doctor.model import Severity
from fabricguard.doctor.rules import RULES
from fabricguard.doctor.rules.daemonsets import daemonset_never_ready, daemonset_no_nodes
from fabricguard.doctor.rules.fabric import (
    fabric_not_advertised,
    fabric_request_missing,
    node_not_gated,
    topology_mapping_mismatch,
)
from fabricguard.doctor.rules.images import exec_format_error


def _ds(lists):
    return lists["daemonsets"]["items"][0]


# --- daemonset-never-ready -----------------------------------------------------------------------------


def test_never_ready_reports_daemonset_age_not_pod_age(prod_lists, now):
    [f] = daemonset_never_ready(snap(prod_lists), None, now)
    assert f.rule == "daemonset-never-ready" and f.severity is Severity.critical
    assert "never ready in 271 days" in f.message
    assert "autoscaled nodes" in f.message  # explains why pod age misleads
    assert f.evidence["youngest pod age (misleading)"] == "119 minutes"
    assert f.objects[0].to_dict() == {"kind": "DaemonSet", "namespace": "network-operator", "name": "rdma-shared-dp-ds"}


def test_never_ready_names_since_when_the_template_is_in_place(prod_lists, now):
    [f] = daemonset_never_ready(snap(prod_lists), None, now)
    assert "generation 2" in f.message and "2025-04-10T12:00:00Z (173 days)" in f.message
    assert "ControllerRevision" in f.evidence["current template since"]


def test_template_since_falls_back_to_pods_without_revisions(prod_lists, now):
    del prod_lists["controllerrevisions"]
    [f] = daemonset_never_ready(snap(prod_lists), None, now)
    assert "oldest pod with pod-template-generation=2" in f.evidence["current template since"]


def test_generation_one_says_nothing_about_template(prod_lists, now):
    _ds(prod_lists)["metadata"]["generation"] = 1
    [f] = daemonset_never_ready(snap(prod_lists), None, now)
    assert "template" not in f.message


def test_ready_daemonset_is_not_reported(stag_lists, now):
    assert daemonset_never_ready(snap(stag_lists), None, now) == []


def test_desired_zero_is_not_never_ready(prod_lists, now):
    _ds(prod_lists)["status"]["desiredNumberScheduled"] = 0
    assert daemonset_never_ready(snap(prod_lists), None, now) == []


def test_regressed_is_distinguished_from_never_ready(prod_lists, now):
    pod = next(p for p in prod_lists["pods"]["items"] if p["metadata"]["name"].startswith("rdma"))
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    # Ready went False long after the pod was scheduled: it must have been True in between.
    ready["lastTransitionTime"] = gen.ts(gen.NOW - timedelta(minutes=30))
    found = daemonset_never_ready(snap(prod_lists), None, now)
    assert [f.rule for f in found] == ["daemonset-regressed"]
    assert "regressed" in found[0].message


def test_regressed_from_a_container_that_ran_for_long(prod_lists, now):
    pod = next(p for p in prod_lists["pods"]["items"] if p["metadata"]["name"].startswith("rdma"))
    term = pod["status"]["containerStatuses"][0]["lastState"]["terminated"]
    term.update(startedAt=gen.ts(now - timedelta(days=3)), finishedAt=gen.ts(now - timedelta(hours=1)), reason="Error")
    assert [f.rule for f in daemonset_never_ready(snap(prod_lists), None, now)] == ["daemonset-regressed"]


# --- daemonset-no-nodes ----------------------------------------------------------------------------------


def test_no_nodes_when_plugin_missing(prod_lists, prod_profile, now):
    prod_lists["daemonsets"]["items"] = []
    [f] = daemonset_no_nodes(snap(prod_lists), prod_profile, now)
    assert f.rule == "daemonset-no-nodes" and "does not exist" in f.message and f.pools == ["gh200-roce"]


def test_no_nodes_when_selector_excludes_pool(prod_lists, prod_profile, now):
    ds = _ds(prod_lists)
    ds["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/arch": "amd64"}
    ds["status"]["desiredNumberScheduled"] = 0
    prod_lists["pods"]["items"] = [
        p for p in prod_lists["pods"]["items"] if not p["metadata"]["name"].startswith("rdma")
    ]
    [f] = daemonset_no_nodes(snap(prod_lists), prod_profile, now)
    assert "desires 0 pods" in f.message
    assert f.evidence["spec.template.spec.nodeSelector"] == {"kubernetes.io/arch": "amd64"}


def test_no_nodes_negative(prod_lists, prod_profile, now):
    assert daemonset_no_nodes(snap(prod_lists), prod_profile, now) == []


# --- image-arch-mismatch (exec format error) ------------------------------------------------------------


def test_exec_format_error_grouped_per_controller(prod_lists, now):
    [f] = exec_format_error(snap(prod_lists), None, now)
    assert f.rule == "image-arch-mismatch" and f.severity is Severity.critical
    assert f.evidence["nodes: kubernetes.io/arch"] == ["arm64"] and f.evidence["failing pods"] == 6
    assert f.evidence["image"].endswith("k8s-rdma-shared-dev-plugin:v1.5.2")


def test_exec_format_error_from_events_only(prod_lists, now):
    for p in prod_lists["pods"]["items"]:
        for cs in p["status"]["containerStatuses"]:
            cs["lastState"] = {}
    [f] = exec_format_error(snap(prod_lists), None, now)
    assert f.evidence["events"] and f.objects[0].kind == "DaemonSet"


def test_exec_format_error_negative(stag_lists, now):
    assert exec_format_error(snap(stag_lists), None, now) == []


# --- fabric rules ----------------------------------------------------------------------------------------


def test_fabric_not_advertised(prod_lists, prod_profile, now):
    [f] = fabric_not_advertised(snap(prod_lists), prod_profile, now)
    assert len(f.objects) == 6 and all(o.kind == "Node" for o in f.objects)
    assert f.evidence["Node prd-gh200-00: status.allocatable[rdma/rdma_shared_device_a]"] == "absent"


def test_fabric_not_advertised_negative(stag_lists, prod_profile, now):
    assert fabric_not_advertised(snap(stag_lists), prod_profile, now) == []


def test_fabric_request_missing(prod_lists, prod_profile, now):
    [f] = fabric_request_missing(snap(prod_lists), prod_profile, now)
    assert f.objects[0].to_dict() == {"kind": "JobSet", "namespace": "ml-training", "name": "qwen14b-sft"}
    assert "sockets" in f.message and f.evidence["nodes"] == 2


def test_fabric_request_missing_negatives(prod_lists, stag_lists, prod_profile, now):
    assert fabric_request_missing(snap(stag_lists), prod_profile, now) == []  # requests the fabric
    single = copy.deepcopy(prod_lists)
    workers = [p for p in single["pods"]["items"] if p["metadata"]["namespace"] == "ml-training"]
    workers[1]["spec"]["nodeName"] = workers[0]["spec"]["nodeName"]  # one node: no inter-node traffic
    assert fabric_request_missing(snap(single), prod_profile, now) == []
    finished = copy.deepcopy(prod_lists)
    for w in finished["pods"]["items"]:
        if w["metadata"]["namespace"] == "ml-training":
            w["status"]["phase"] = "Succeeded"
    assert fabric_request_missing(snap(finished), prod_profile, now) == []
    assert fabric_request_missing(snap(prod_lists), prod_profile, now) != []


def test_topology_mapping_mismatch(prod_lists, prod_profile, now):
    [f] = topology_mapping_mismatch(snap(prod_lists), prod_profile, now)
    assert f.severity is Severity.warning and f.evidence["metadata.labels[network.example.com/block]"] == "block-c"
    assert sorted(o.name for o in f.objects) == ["prd-gh200-04", "prd-gh200-05"]


def test_topology_missing_label(prod_lists, prod_profile, now):
    for n in prod_lists["nodes"]["items"]:
        n["metadata"]["labels"].pop("network.example.com/block", None)
    [f] = topology_mapping_mismatch(snap(prod_lists), prod_profile, now)
    assert len(f.objects) == 6 and "no label" in f.message


def test_topology_negative(stag_lists, prod_profile, now):
    assert topology_mapping_mismatch(snap(stag_lists), prod_profile, now) == []


def test_node_not_gated_without_agent(prod_lists, prod_profile, now):
    [f] = node_not_gated(snap(prod_lists), prod_profile, now)
    assert "no readiness agent is deployed" in f.message and len(f.objects) == 6


def test_node_not_gated_negatives(prod_lists, prod_profile, now):
    nodes = [n for n in prod_lists["nodes"]["items"] if "gh200" in n["metadata"]["name"]]
    nodes[0]["spec"]["unschedulable"] = True
    nodes[1]["spec"]["taints"] = [{"key": "readiness.k8s.io/fabric-unverified", "effect": "NoSchedule"}]
    for n in nodes[2:]:
        n["status"]["conditions"].append({"type": "FabricReady", "status": "True"})
    assert node_not_gated(snap(prod_lists), prod_profile, now) == []
    nodes[2]["status"]["conditions"][-1]["status"] = "False"
    [f] = node_not_gated(snap(prod_lists), prod_profile, now)
    assert [o.name for o in f.objects] == [nodes[2]["metadata"]["name"]] and "not True" in f.message


# --- the whole incident ----------------------------------------------------------------------------------


def test_incident_production_raises_every_expected_rule(prod_lists, prod_profile, now):
    report = run_doctor(snap(prod_lists), prod_profile, now)
    assert {f.rule for f in report.findings} == {
        "daemonset-never-ready",
        "image-arch-mismatch",
        "fabric-not-advertised",
        "fabric-request-missing",
        "topology-mapping-mismatch",
        "node-not-gated",
    }
    assert report.exit_code == 1
    assert report.grid["gh200-roce (6 nodes)"]["daemonset-never-ready"] == "fail"
    assert report.grid["gh200-roce (6 nodes)"]["daemonset-no-nodes"] == "pass"


def test_healthy_cluster_is_clean(now):
    from fabricguard.profile import load_profile

    report = run_doctor(snap(gen.healthy()), load_profile(gen.HERE.parent / "profiles" / "onprem-infiniband.yaml"), now)
    assert report.findings == [] and report.exit_code == 0


def test_rule_ids_are_stable():
    assert [r.id for r in RULES] == [
        "daemonset-never-ready",
        "daemonset-no-nodes",
        "agent-daemonset-short",
        "image-arch-mismatch",
        "fabric-not-advertised",
        "fabric-request-missing",
        "dra-deviceclass-missing",
        "dra-no-resourceslice",
        "dra-claim-unallocated",
        "dra-double-offer",
        "kueue-dra-unmapped",
        "topology-mapping-mismatch",
        "node-not-gated",
        "topology-labels-missing",
        "network-mapping-stale",
        "flavor-matches-no-node",
        "flavor-readiness-tainted",
        "daemonset-untolerated-readiness",
        "readiness-taint-blocks-scale-from-zero",
        "node-proof-behind",
        "lustre-client-unhealthy",
        "enforce-would-have-acted",
    ]
