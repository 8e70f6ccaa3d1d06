"""The doctor on DRA pools: healthy DRANET and KEP-5004 EFA pools are clean; each DRA failure gives its finding.

The snapshots come from examples/snapshots/generate_dra.py (ResourceSlices, DeviceClasses and ResourceClaims in the
shape the API server returns them); each test breaks one thing in a healthy one.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from fabricguard.doctor.engine import run_doctor
from fabricguard.doctor.model import Finding
from fabricguard.doctor.rules import run_rules
from fabricguard.doctor.snapshot import load_snapshot, snapshot_from_lists
from fabricguard.profile import load_profile, loads_profile

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "snapshots"


def _load() -> Any:
    name = "fg_example_snapshots_dra"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / "generate_dra.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


g = _load()
DRANET = load_profile(ROOT / "examples" / "profiles" / "gke-a4-dranet.yaml")
EFA = load_profile(ROOT / "examples" / "profiles" / "aws-p5-efa-dra.yaml")
BROKEN = loads_profile(g.A4X_PROFILE)


def findings(lists: dict[str, Any], profile: Any) -> list[Finding]:
    return run_rules(snapshot_from_lists(lists, source="test"), profile, g.NOW)


def rules(found: list[Finding]) -> list[str]:
    return sorted(f.rule for f in found)


@pytest.mark.parametrize("directory,profile", [("dra-dranet-healthy", DRANET), ("dra-efa-kep5004-healthy", EFA)])
def test_healthy_dra_pools_have_no_finding_on_disk(directory: str, profile: Any) -> None:
    snap = load_snapshot(EXAMPLES / directory)
    report = run_doctor(snap, profile, g.NOW)
    assert report.findings == []
    grid = next(iter(report.grid.values()))
    assert grid["dra-no-resourceslice"] == "pass"
    assert grid["fabric-not-advertised"] == "pass"


def test_the_examples_on_disk_are_what_the_generator_writes() -> None:
    snap = load_snapshot(EXAMPLES / "dra-dranet-broken")
    assert len(snap.kind("ResourceClaim")) == len(g.dranet_broken()["resourceclaims"]["items"])


def test_broken_dranet_driver_is_found_with_its_age_and_exec_format_error() -> None:
    found = findings(g.dranet_broken(), BROKEN)
    by = {f.rule: f for f in found}
    never = by["daemonset-never-ready"]
    assert "gke-managed-networking-dra-driver/networking-dra-driver never ready in 38 days" in never.message
    assert never.pools == ["gb300-dranet"]
    arch = by["image-arch-mismatch"]
    assert "exec format error" in arch.message and "arm64" in arch.message
    assert arch.pools == ["gb300-dranet"]
    assert "2 of 2 node(s)" in by["dra-no-resourceslice"].message
    assert "cannot allocate all claims" in by["dra-claim-unallocated"].message
    assert "kueue-dra-unmapped" in by


def test_nic_down_is_not_advertised_and_names_the_device() -> None:
    lists = g.dranet_healthy()
    lists["resourceclaims"]["items"] = []  # no job holds the NICs: the slice lists them with their state
    lists["pods"]["items"] = [p for p in lists["pods"]["items"] if "ranker" not in p["metadata"]["name"]]
    lists["resourceslices"]["items"][0]["spec"]["devices"] = g.gke_nics(0, held=set(), down={3})
    lists["resourceslices"]["items"][1]["spec"]["devices"] = g.gke_nics(1, held=set())
    found = findings(lists, DRANET)
    assert rules(found) == ["fabric-not-advertised"]
    assert "gpu3rdma0 (dra.net/state=down)" in str(found[0].evidence)
    assert found[0].objects[0].name == "gke-a4-dranet-1-00"


def test_held_nics_count_only_while_their_claim_is_allocated() -> None:
    lists = g.dranet_healthy()
    lists["resourceslices"]["items"][0]["spec"]["devices"] = g.gke_nics(0, held=set(), down=set(range(8)))
    assert findings(copy.deepcopy(lists), DRANET) == []  # a pod holds all eight: their state is the pod's business
    lists["resourceclaims"]["items"] = []
    lists["pods"]["items"] = [p for p in lists["pods"]["items"] if "ranker" not in p["metadata"]["name"]]
    assert rules(findings(lists, DRANET)) == ["fabric-not-advertised"]


def test_node_without_a_slice_from_its_driver() -> None:
    lists = g.dranet_healthy()
    lists["resourceslices"]["items"][1]["spec"]["driver"] = "gpu.nvidia.com"
    found = findings(lists, DRANET)
    assert rules(found) == ["dra-no-resourceslice"]
    assert found[0].objects[0].name == "gke-a4-dranet-1-01"


def test_job_without_the_claim_is_a_missing_request() -> None:
    lists = g.dranet_healthy()
    for p in lists["pods"]["items"]:
        if "ranker" in p["metadata"]["name"]:
            p["spec"].pop("resourceClaims")
            p["status"].pop("resourceClaimStatuses")
    found = findings(lists, DRANET)
    assert "fabric-request-missing" in rules(found)
    msg = next(f for f in found if f.rule == "fabric-request-missing").message
    assert "hold no ResourceClaim of DeviceClass mrdma.google.com" in msg


def test_kep5004_job_counts_by_its_request_or_its_extended_resource_claim() -> None:
    lists = g.efa_healthy()
    for p in lists["pods"]["items"]:
        if "llama" in p["metadata"]["name"]:
            c = p["spec"]["containers"][0]["resources"]
            c["limits"].pop("vpc.amazonaws.com/efa")
            c["requests"].pop("vpc.amazonaws.com/efa")
    assert findings(copy.deepcopy(lists), EFA) == []  # status.extendedResourceClaimStatus says it holds the EFAs
    for p in lists["pods"]["items"]:
        p["status"].pop("extendedResourceClaimStatus", None)
    assert "fabric-request-missing" in rules(findings(lists, EFA))


def test_missing_deviceclass_and_one_that_does_not_back_the_resource() -> None:
    lists = g.efa_healthy()
    lists["deviceclasses"]["items"][0]["spec"].pop("extendedResourceName")
    found = findings(copy.deepcopy(lists), EFA)
    assert rules(found) == ["dra-deviceclass-missing"]
    assert "does not back vpc.amazonaws.com/efa" in found[0].message
    lists["deviceclasses"]["items"] = []
    found = findings(lists, EFA)
    assert rules(found) == ["dra-deviceclass-missing"]
    assert "DeviceClass efa.networking.k8s.aws of DRA pool p5-efa-dra does not exist" in found[0].message


def test_same_resource_from_device_plugin_and_dra_on_one_node() -> None:
    lists = g.efa_healthy()
    lists["nodes"]["items"][0]["status"]["allocatable"]["vpc.amazonaws.com/efa"] = "32"
    found = findings(lists, EFA)
    assert rules(found) == ["dra-double-offer"]
    assert found[0].pools == ["p5-efa-dra"]


def test_double_offer_needs_no_profile() -> None:
    """The DeviceClass's extendedResourceName and the driver its CEL selector names are enough."""
    lists = g.efa_healthy()
    lists["nodes"]["items"][0]["status"]["allocatable"]["vpc.amazonaws.com/efa"] = "32"
    from fabricguard.doctor.rules import dra as dra_rules

    found = dra_rules.double_offer(snapshot_from_lists(lists, source="t"), None, g.NOW)
    assert [f.rule for f in found] == ["dra-double-offer"]


def test_cluster_queue_without_the_mapping() -> None:
    lists = g.dranet_healthy()
    cm = lists["configmaps"]["items"][0]
    cm["data"]["controller_manager_config.yaml"] = cm["data"]["controller_manager_config.yaml"].split("resources:")[0]
    found = findings(copy.deepcopy(lists), DRANET)
    assert rules(found) == ["kueue-dra-unmapped"]
    lists["clusterqueues"]["items"][0]["spec"]["resourceGroups"][0]["coveredResources"] = ["nvidia.com/gpu"]
    lists["configmaps"] = g.dranet_healthy()["configmaps"]
    found = findings(lists, DRANET)
    assert rules(found) == ["kueue-dra-unmapped"]
    assert "which the queue does not cover" in found[0].message


def test_claims_younger_than_ten_minutes_are_not_yet_stuck() -> None:
    lists = g.dranet_broken()
    for c in lists["resourceclaims"]["items"]:
        c["metadata"]["creationTimestamp"] = g.ts(g.NOW)
    assert "dra-claim-unallocated" not in rules(findings(lists, BROKEN))


LIVE_KINDS = {"Node": "v1/nodes", "Pod": "v1/pods", "DaemonSet": "apps/v1/daemonsets", "ConfigMap": "v1/configmaps",
              "DeviceClass": "resource.k8s.io/v1/deviceclasses",
              "ResourceSlice": "resource.k8s.io/v1/resourceslices",
              "ResourceClaim": "resource.k8s.io/v1/resourceclaims",
              "ResourceClaimTemplate": "resource.k8s.io/v1/resourceclaimtemplates",
              "ResourceFlavor": "kueue.x-k8s.io/v1beta2/resourceflavors",
              "ClusterQueue": "kueue.x-k8s.io/v1beta2/clusterqueues"}


async def test_live_collection_reads_the_dra_kinds(tmp_path: Path) -> None:
    from kmock import KubernetesEmulator, Server

    from fabricguard.doctor.snapshot import collect_live
    from kube_support import kubeconfig

    lists = g.dranet_healthy()
    async with KubernetesEmulator() as k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "35", "gitVersion": "v1.35.0", "platform": "linux/amd64"}
        for lst in lists.values():
            for obj in lst["items"]:
                meta = obj["metadata"]
                stored = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
                k8s.objects[LIVE_KINDS[obj["kind"]], meta.get("namespace"), meta["name"]] = stored
        got = await collect_live(kubeconfig=kubeconfig(tmp_path, str(server.url).rstrip("/")))
    for plural in ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"):
        assert len(got[plural]["items"]) == len(lists[plural]["items"]), plural
        assert got[plural]["items"][0]["apiVersion"] == "resource.k8s.io/v1"
    assert findings(got, DRANET) == []
    # Without the resource.k8s.io lists (a cluster before 1.34), the DRA pool is reported, not passed.
    for plural in ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"):
        got.pop(plural)
    assert {"dra-deviceclass-missing", "dra-no-resourceslice"} <= set(rules(findings(got, DRANET)))


def test_kep5004_pod_that_never_gets_its_devices_is_reported_with_the_scheduler_message() -> None:
    lists = g.efa_healthy()
    pod = next(p for p in lists["pods"]["items"] if "llama" in p["metadata"]["name"])
    pending = copy.deepcopy(pod)
    pending["metadata"]["name"] += "-pending"
    del pending["spec"]["nodeName"]
    msg = "0/2 nodes are available: 2 Insufficient vpc.amazonaws.com/efa."
    pending["status"] = {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg,
        "lastTransitionTime": g.ts(g.NOW - g.timedelta(minutes=30))}]}
    lists["pods"]["items"].append(pending)
    found = findings(lists, EFA)
    assert rules(found) == ["dra-claim-unallocated"]
    assert "KEP-5004 pod(s)" in found[0].message and msg in found[0].message


def test_dranet_node_whose_nics_a_device_plugin_also_advertises() -> None:
    lists = g.dranet_healthy()
    lists["nodes"]["items"][1]["status"]["allocatable"] |= {"networking.gke.io.networks/rdma-0": "1",
                                                            "networking.gke.io.networks/rdma-0.IP": "1"}
    found = findings(lists, DRANET)
    assert rules(found) == ["dra-double-offer"]
    assert found[0].objects[0].name == "gke-a4-dranet-1-01"
    assert "offer their NICs twice" in found[0].message


@pytest.mark.parametrize("directory", ["dra-dranet-healthy", "dra-efa-kep5004-healthy", "dra-dranet-broken"])
def test_example_objects_are_what_the_api_server_accepts(directory: str) -> None:
    """Every built-in object of the DRA examples (resource.k8s.io/v1 included) passes the 1.37 schemas, strict."""
    import kubernetes_validate

    from crd_schema import crd_errors

    snap = load_snapshot(EXAMPLES / directory)
    for obj in snap.objects:
        if obj["apiVersion"].startswith("kueue.x-k8s.io/"):
            assert crd_errors(obj) == [], obj["kind"]
            continue
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)
    assert {"DeviceClass", "ResourceClaim"} <= set(snap.by_kind)
