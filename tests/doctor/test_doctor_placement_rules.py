"""Placement rules: topology labels, stale network mappings, flavors that select nothing or only tainted nodes."""

from __future__ import annotations

import copy

from doctor_support import gen, snap

from fabricguard.doctor.model import Severity
from fabricguard.doctor.rules.placement import (
    flavor_matches_no_node,
    flavor_readiness_tainted,
    network_mapping_stale,
    topology_labels_missing,
)
from fabricguard.profile import loads_profile


def _nodes(lists):
    return lists["nodes"]["items"]


def _profile(extra: str = "", mapping: str = "{block-a: roce-net-a, block-b: roce-net-b}"):
    text = gen.INCIDENT_PROFILE.format(name="p", env="production").replace(
        "{block-a: roce-net-a, block-b: roce-net-b}", mapping)
    return loads_profile(text.replace("    baseline: {allReduceBusBwGBps: 45}\n", f"    baseline: {{allReduceBusBwGBps: 45}}\n{extra}"))


def _flavor(name: str, labels: dict, tolerations: list | None = None) -> dict:
    spec: dict = {"nodeLabels": labels}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


# --- topology-labels-missing ------------------------------------------------------------------------------


def test_nodes_without_a_topology_level_are_named(prod_lists, now):
    prof = _profile("    topologyLevels: [network.example.com/block, network.example.com/rack, kubernetes.io/hostname]\n")
    pool = [n for n in _nodes(prod_lists) if n["metadata"]["labels"].get("nvidia.com/gpu.product") == "NVIDIA-GH200-480GB"]
    for n in pool[:2]:
        n["metadata"]["labels"]["network.example.com/rack"] = "r1"
    [f] = topology_labels_missing(snap(prod_lists), prof, now)
    assert f.severity is Severity.warning and "network.example.com/rack" in f.message
    assert f"{len(pool) - 2} of {len(pool)} node(s)" in f.message
    assert {o.name for o in f.objects} == {n["metadata"]["name"] for n in pool[2:]}


def test_hostname_level_and_labelled_nodes_are_fine(prod_lists, now):
    # The incident's nodes all carry the block label; the hostname level is the kubelet's own.
    assert topology_labels_missing(snap(prod_lists), _profile(), now) == []


# --- network-mapping-stale --------------------------------------------------------------------------------


def test_mapping_that_names_only_blocks_the_nodes_left_is_stale(prod_lists, now):
    for n in _nodes(prod_lists):
        n["metadata"]["labels"]["network.example.com/block"] = "block-c"
    fs = network_mapping_stale(snap(prod_lists), _profile(), now)
    [f] = [f for f in fs if "block-a" in f.message]
    assert f.severity is Severity.warning and "block-a, block-b" in f.message
    assert f.evidence["nodes' network.example.com/block values"] == ["block-c"]


def test_mapping_to_a_network_that_does_not_exist_is_critical(prod_lists, now):
    prof = _profile(mapping="{block-a: roce-net-a, block-b: roce-net-b, block-c: roce-net-c}")
    [f] = network_mapping_stale(snap(prod_lists), prof, now)
    assert f.severity is Severity.critical and "roce-net-c" in f.message
    assert f.objects[0].kind == "NetworkAttachmentDefinition"


def test_network_drawing_devices_from_another_resource_is_critical(prod_lists, now):
    nad = prod_lists["network-attachment-definitions"]["items"][1]
    nad["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"] = "rdma/rdma_shared_device_b"
    [f] = network_mapping_stale(snap(prod_lists), _profile(), now)
    assert "roce-net-b" in f.message and "rdma/rdma_shared_device_b" in f.message


def test_current_mapping_and_existing_networks_are_fine(prod_lists, now):
    # The same NAD named with and without its namespace is one network, judged once.
    assert network_mapping_stale(snap(prod_lists), _profile(), now) == []


def test_no_networks_collected_gives_no_verdict(prod_lists, now):
    del prod_lists["network-attachment-definitions"]
    prof = _profile(mapping="{block-a: roce-net-a, block-b: roce-net-zzz}")
    assert network_mapping_stale(snap(prod_lists), prof, now) == []


def test_missing_gke_network(now):
    lists = gen.incident("production")
    prof = loads_profile(
        gen.INCIDENT_PROFILE.format(name="g", env="production")
        .replace("type: roce", "type: gke-rdma")
        .replace("networks: [network-operator/roce-net-a]", "networks: [rdma-0, rdma-1]")
        .replace("      networkMapping: {block-a: roce-net-a, block-b: roce-net-b}\n", "")
    )
    lists["networks"] = {"kind": "List", "apiVersion": "v1", "items": [
        {"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "rdma-0"}, "spec": {}}]}
    [f] = network_mapping_stale(snap(lists), prof, now)
    assert "rdma-1" in f.message and "rdma-0" not in f.message.split("network(s)")[1].split("that")[0]


# --- flavor-matches-no-node -------------------------------------------------------------------------------


def test_flavor_selecting_no_node_is_critical(prod_lists, now):
    prod_lists["resourceflavors"] = {"kind": "List", "apiVersion": "v1", "items": [
        _flavor("gh200-roce", {"nvidia.com/gpu.product": "NVIDIA-GH200-480GB"}),
        _flavor("old-block", {"cloud.google.com/gke-nodepool": "gone"}),
    ]}
    [f] = flavor_matches_no_node(snap(prod_lists), None, now)
    assert f.severity is Severity.critical and "old-block" in f.message
    assert f.objects[0].kind == "ResourceFlavor"


# --- flavor-readiness-tainted -----------------------------------------------------------------------------


def _taint_all(lists, key="readiness.k8s.io/fabric-unverified", count=None):
    for n in _nodes(lists)[:count]:
        n.setdefault("spec", {}).setdefault("taints", []).append({"key": key, "effect": "NoSchedule"})


def test_every_node_tainted_is_critical(prod_lists, now):
    _taint_all(prod_lists)
    prod_lists["resourceflavors"] = {"kind": "List", "apiVersion": "v1", "items": [
        _flavor("gh200-roce", {"nvidia.com/gpu.product": "NVIDIA-GH200-480GB"},
                [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])]}
    [f] = flavor_readiness_tainted(snap(prod_lists), _profile(), now)
    assert f.severity is Severity.critical and "readiness.k8s.io/fabric-unverified:NoSchedule" in f.message
    assert f.pools == ["gh200-roce"]


def test_some_nodes_tainted_is_a_warning_and_tolerated_taints_are_not_reported(prod_lists, now):
    lists = copy.deepcopy(prod_lists)
    _taint_all(lists, count=2)
    lists["resourceflavors"] = {"kind": "List", "apiVersion": "v1", "items": [
        _flavor("gh200-roce", {"nvidia.com/gpu.product": "NVIDIA-GH200-480GB"})]}
    [f] = flavor_readiness_tainted(snap(lists), None, now)
    assert f.severity is Severity.warning and f.message.startswith("2 of")
    lists["resourceflavors"]["items"][0]["spec"]["tolerations"] = [
        {"key": "readiness.k8s.io/fabric-unverified", "operator": "Exists"}]
    assert flavor_readiness_tainted(snap(lists), None, now) == []
    # Taints outside readiness.k8s.io/ belong to someone else and are not this rule's business.
    _taint_all(prod_lists, key="example.com/maintenance")
    prod_lists["resourceflavors"] = lists["resourceflavors"]
    assert flavor_readiness_tainted(snap(prod_lists), None, now) == []
