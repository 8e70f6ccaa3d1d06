"""Quarantine just the bad NIC on a DRA pool: a DeviceTaintRule (``resource.k8s.io/v1``, GA in Kubernetes 1.37)
where the cluster serves it and the bad rail's NIC is found in the node's ResourceSlice; the node taint elsewhere.

The rule is validated against Kubernetes 1.37's own schema (kubernetes-validate), the ResourceSlice is DRANET's
shape (driver ``dra.net``, pool = node, a device per interface with ``dra.net/pciAddress``), and the pass is the
controller's pure proof step, fed a pool whose FabricValidation already convicted the node."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import kubernetes_validate
import pytest

from fabricguard import names
from fabricguard.admission.claims import RETEST_SUFFIX, retest_claim_template
from fabricguard.controller.actions import Create, Delete, Emit, JsonPatch
from fabricguard.controller.canaries import CanaryConfig, Inventory
from fabricguard.controller.canary import CanarySpec, render_pair
from fabricguard.controller.claims import claim_template_actions
from fabricguard.controller.facts import LustreFacts, not_served_note, served
from fabricguard.controller.pairs import reconcile_proof
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile import loads_profile

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PROFILE = loads_profile((ROOT / "examples" / "profiles" / "gke-a4-dranet.yaml").read_text().replace(
    "      allReduceBusBwGBps: 380\n      floorFraction: 0.8\n",
    "      allReduceBusBwGBps: 380\n      floorFraction: 0.8\n    canary: {interval: 10m, image: registry.example/fg:1}\n"
    "    proof: {every: 24h}\n", 1))
POOL = PROFILE.pool("b200-dranet")
CFG = CanaryConfig(namespace="fabricguard-system", image="registry.example/fg:1", lustre_root=None)
BAD, PCI = "gke-a4-3", "0000:8c:00.0"


def _node(name: str, taints: list[dict[str, str]] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "resourceVersion": "7", "labels": {
        "cloud.google.com/gke-nodepool": "a4-dranet-1", "kubernetes.io/hostname": name}},
        "spec": {"taints": taints or []}, "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                                      "allocatable": {"nvidia.com/gpu": "8"}}}


def _slice(node: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-dra.net-x"},
            "spec": {"driver": "dra.net", "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                       "resourceSliceCount": 1},
                     "devices": [{"name": f"eth{k}", "attributes": {
                         "dra.net/ifName": {"string": f"eth{k}"}, "dra.net/rdma": {"bool": True},
                         "dra.net/pciAddress": {"string": f"0000:{0x89 + k:02x}:00.0"}}} for k in range(1, 9)]}}


def _fv(state: str) -> dict:
    return {"metadata": {"name": POOL.name, "uid": "u1"}, "status": {"proof": {"nodes": [
        {"node": BAD, "state": state, "lastProven": "2026-11-30T00:00:00Z", "since": "2026-12-01T10:00:00Z",
         "failures": ["gke-a4-0", "gke-a4-1"], "rails": ["rail 3 mlx5_3"], "nics": {"mlx5_3": PCI},
         "message": "failed pair tests with gke-a4-0, gke-a4-1; bad rail: rail 3 mlx5_3"},
        *({"node": f"gke-a4-{i}", "state": "proven", "lastProven": "2026-12-01T11:00:00Z"} for i in range(3))]}}}


def _pass(nodes: list[dict], fv: dict, rules: list[dict] | None, slices: list[dict] | None = None):
    inv = Inventory.build(nodes, [], [], {POOL.gpuResource})
    acts, _status, _out = reconcile_proof(PROFILE, POOL, fv, [], inv, [], NOW, CFG, LustreFacts(),
                                          slices=slices if slices is not None else [_slice(n["metadata"]["name"])
                                                                                    for n in nodes],
                                          device_rules=rules)
    return acts


def test_a_convicted_node_of_a_dra_pool_gets_a_device_taint_rule_on_just_its_bad_nic() -> None:
    acts = _pass([_node(f"gke-a4-{i}") for i in range(4)], _fv("convicted"), rules=[])
    rules = [a.body for a in acts if isinstance(a, Create) and a.plural == "devicetaintrules"]
    assert len(rules) == 1 and not [a for a in acts if isinstance(a, JsonPatch)]  # no node taint
    rule = rules[0]
    assert rule["spec"] == {"deviceSelector": {"driver": "dra.net", "pool": BAD, "device": "eth3"},
                            "taint": {"key": "fabricguard.io/fabric-quarantined", "value": POOL.name,
                                      "effect": "NoSchedule"}}
    assert rule["metadata"]["name"] == "fabricguard-gke-a4-3-mlx5-3"
    kubernetes_validate.validate(rule, "1.37", strict=True)  # the real object shape, as 1.37 serves it
    assert any(isinstance(a, Emit) and a.body["reason"] == "FabricDeviceQuarantined" for a in acts)


def test_where_rules_are_not_served_or_the_nic_is_not_found_the_node_is_tainted() -> None:
    nodes = [_node(f"gke-a4-{i}") for i in range(4)]
    for acts in (_pass(nodes, _fv("convicted"), rules=None),  # DeviceTaintRule not served (before 1.37)
                 _pass(nodes, _fv("convicted"), rules=[], slices=[])):  # no ResourceSlice names the NIC
        assert not [a for a in acts if isinstance(a, Create) and a.plural == "devicetaintrules"]
        patch = next(a for a in acts if isinstance(a, JsonPatch) and a.name == BAD)
        assert patch.ops[-1]["value"][-1]["key"] == "fabricguard.io/fabric-quarantined"


def test_a_device_quarantined_node_counts_as_quarantined_and_its_release_deletes_the_rule() -> None:
    nodes = [_node(f"gke-a4-{i}") for i in range(4)]
    rule = _pass(nodes, _fv("convicted"), rules=[])
    body = next(a.body for a in rule if isinstance(a, Create) and a.plural == "devicetaintrules")
    # Quarantined by its rule: nothing more is created, and after a passing re-test the rule goes, no node patch.
    fv = _fv("quarantined")
    fv["status"]["proof"]["nodes"][0]["lastProven"] = "2026-12-01T11:30:00Z"
    acts = _pass(nodes, fv, rules=[body])
    assert [(type(a), a.name) for a in acts if isinstance(a, Delete | JsonPatch)] == [(Delete, body["metadata"]["name"])]
    assert not [a for a in acts if isinstance(a, Create) and a.plural == "devicetaintrules"]


def test_the_retest_claims_through_a_template_that_tolerates_the_device_taint() -> None:
    t = retest_claim_template(POOL, CFG.namespace, names.TAINT_QUARANTINED)
    assert t is not None and t["metadata"]["name"] == POOL.claim_template_name + RETEST_SUFFIX
    assert all(r["exactly"]["tolerations"] == [{"key": names.TAINT_QUARANTINED, "operator": "Exists",
                                                 "effect": "NoSchedule"}] for r in t["spec"]["spec"]["devices"]["requests"])
    kubernetes_validate.validate(t, "1.37", strict=True)
    made = [a.body["metadata"]["name"] for a in claim_template_actions(PROFILE, Snapshot(), CFG.namespace)
            if isinstance(a, Create)]
    assert POOL.claim_template_name + RETEST_SUFFIX in made
    spec = CanarySpec(POOL.name, "fgp-b200-dranet-1-0", CFG.namespace, "fabricguard-system/fgp-b200-dranet-1-0")
    js = render_pair(PROFILE, POOL, spec, (BAD, "gke-a4-0"), image=CFG.image, owner=None, purpose="retest",
                     tolerate=[names.TAINT_QUARANTINED])
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert [rc["resourceClaimTemplateName"] for rc in pod["resourceClaims"]] == [
        POOL.claim_template_name + RETEST_SUFFIX]


@pytest.mark.parametrize("notes", [[], ["x"]])
def test_served_reads_the_edges_own_note(notes: list[str]) -> None:
    assert served(notes, "devicetaintrules", names.DRA_API)
    assert not served([*notes, not_served_note("devicetaintrules", names.DRA_API)], "devicetaintrules", names.DRA_API)
