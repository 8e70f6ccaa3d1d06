"""``render kueue``: every object valid against Kueue v0.19.2's CRDs, quotas that match the hardware, refusals."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from crd_schema import crd_errors
from fabricguard import names
from fabricguard.cli import app
from fabricguard.placement import kueue
from fabricguard.profile.loader import load_profile, loads_profile

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted((ROOT / "examples" / "profiles").glob("*.yaml"))
runner = CliRunner()


def _render(*args: str) -> tuple[int, list[dict]]:
    res = runner.invoke(app, ["render", "kueue", *args])
    docs = [d for d in yaml.safe_load_all(res.stdout)] if res.exit_code == 0 else []
    return res.exit_code, docs


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_every_object_passes_kueue_schema(path: Path) -> None:
    code, docs = _render("-p", str(path))
    assert code == 0
    kinds = {d["kind"] for d in docs}
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue", "AdmissionCheck"} <= kinds
    for d in docs:
        assert d["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        assert crd_errors(d) == [], d["kind"]


def test_schema_check_can_fail() -> None:
    # The validator must catch what the API server would refuse: a misspelt field and a wrong type.
    cq = kueue.objects(load_profile(ROOT / "examples/profiles/gke-a3-ultra.yaml"))[-3]
    assert cq["kind"] == "ClusterQueue"
    bad = copy.deepcopy(cq)
    bad["spec"]["admissionChecks"] = ["fabricguard-fabric-validated"]  # removed in v1beta2
    bad["spec"]["queueingStrategy"] = "Fastest"
    errors = crd_errors(bad)
    assert any("admissionChecks" in e for e in errors)
    assert any("queueingStrategy" in e for e in errors)


def test_gke_quota_is_nodes_times_per_node_share() -> None:
    prof = load_profile(ROOT / "examples/profiles/gke-a3-ultra.yaml")
    (queue, pools), = kueue.queues(prof)
    cq = kueue.cluster_queue(queue, pools, prof)
    group, = cq["spec"]["resourceGroups"]
    flavor, = group["flavors"]
    quota = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    assert quota["nvidia.com/gpu"] == "128"  # 16 nodes x 8 GPUs
    assert quota["memory"] == "44800Gi"
    assert quota["networking.gke.io.networks/rdma-7"] == "16"  # every injected fabric resource is covered
    assert set(group["coveredResources"]) == set(quota)
    assert cq["spec"]["admissionChecksStrategy"]["admissionChecks"] == [
        {"name": names.CHECK_NAME, "onFlavors": ["h200-rdma"]}]
    rf = next(o for o in kueue.objects(prof) if o["kind"] == "ResourceFlavor")
    assert rf["spec"]["nodeLabels"] == {"cloud.google.com/gke-nodepool": "a3u-pool-1"}
    assert rf["spec"]["topologyName"] == "h200-rdma"
    assert "nodeTaints" not in rf["spec"]  # tolerations are added to admitted pods; taints would block admission


def test_excluded_fabric_resources_leave_quota_and_enter_configuration() -> None:
    prof = load_profile(ROOT / "examples/profiles/aws-p5-efa.yaml")
    (queue, pools), = kueue.queues(prof)
    cq = kueue.cluster_queue(queue, pools, prof)
    assert "vpc.amazonaws.com/efa" not in cq["spec"]["resourceGroups"][0]["coveredResources"]
    cfg = kueue.configuration(prof)
    assert cfg["resources"] == {"quotaCheckStrategy": "BlockUndeclared", "excludeResourcePrefixes": ["vpc.amazonaws.com/efa"]}
    assert cfg["waitForPodsReady"]["blockAdmission"] is True
    code, docs = _render("-p", str(ROOT / "examples/profiles/aws-p5-efa.yaml"), "--configuration")
    assert code == 0 and docs == [cfg]


def test_topology_levels_coarsest_first_and_queue_level_among_them() -> None:
    for path in PROFILES:
        prof = load_profile(path)
        for pool in prof.spec.pools:
            topo = pool.queue.topology if pool.queue else None
            if topo is not None:
                # The webhook asks Kueue for this level on the pool's flavor: it must be in the flavor's Topology.
                assert topo.level in pool.topology_levels, (path.name, pool.name)
            levels = pool.topology_levels
            if levels:
                assert "kubernetes.io/hostname" not in levels[:-1]


SHARED = """
apiVersion: fabricguard.io/v1alpha1
kind: PlatformProfile
metadata: {name: shared}
spec:
  storage: {lustre: {claimName: train}}
  pools:
  - name: block-b
    nodeSelector: {pool: b}
    gpusPerNode: 8
    nodes: 4
    fabric: {type: infiniband, resources: {rdma/ib: 8}}
    queue: {name: train, namespaces: [team-a]}
  - name: block-a
    nodeSelector: {pool: a}
    gpusPerNode: 8
    nodes: 2
    fabric: {type: roce, resources: {rdma/rdma_shared_device_a: 1}}
    queue: {name: train, namespaces: [team-a]}
  - name: cpu-only
    nodeSelector: {pool: c}
    gpusPerNode: 1
    nodes: 3
    fabric: {type: none}
    queue: {name: train, namespaces: [team-a]}
"""


def test_pools_sharing_a_queue_are_flavors_in_profile_order() -> None:
    prof = loads_profile(SHARED)
    (queue, pools), = kueue.queues(prof)
    cq = kueue.cluster_queue(queue, pools, prof)
    group, = cq["spec"]["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["block-b", "block-a", "cpu-only"]
    quota = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    # A flavor lists every covered resource; what its nodes lack has quota 0.
    assert quota["block-b"] == {"nvidia.com/gpu": "32", "rdma/ib": "32", "rdma/rdma_shared_device_a": "0"}
    assert quota["block-a"] == {"nvidia.com/gpu": "16", "rdma/ib": "0", "rdma/rdma_shared_device_a": "2"}
    assert cq["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"] == ["block-b", "block-a"]
    assert crd_errors(cq) == []


def test_only_flavors_with_a_canary_wait_for_the_check() -> None:
    # Nothing would ever answer the check for a pool without a canary: its workloads would wait forever.
    prof = loads_profile(SHARED.replace("    nodes: 2\n", "    nodes: 2\n    canary: {enabled: false}\n"))
    (queue, pools), = kueue.queues(prof)
    cq = kueue.cluster_queue(queue, pools, prof)
    assert cq["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"] == ["block-b"]
    nolustre = loads_profile(SHARED.replace("  storage: {lustre: {claimName: train}}\n", ""))
    (queue, pools), = kueue.queues(nolustre)
    assert "admissionChecksStrategy" not in kueue.cluster_queue(queue, pools, nolustre)["spec"]
    assert "AdmissionCheck" not in {o["kind"] for o in kueue.objects(nolustre)}
    # The check's name is the one the controller renders and answers.
    from fabricguard.controller.manifests import admission_check

    assert kueue.admission_check() == admission_check()


def test_render_refuses_pool_without_node_count(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(SHARED.replace("    nodes: 2\n", ""))
    res = runner.invoke(app, ["render", "kueue", "-p", str(p)])
    assert res.exit_code == 3
    assert "block-a" in res.stderr and "nodes" in res.stderr
    assert "Traceback" not in res.output


@pytest.mark.parametrize(("edit", "message"), [
    (("queue: {name: train, namespaces: [team-a]}\n  - name: block-a", "queue: {name: train, namespaces: [team-b]}\n  - name: block-a"), "share queue"),
    (("    nodes: 4\n", "    nodes: 4\n    topologyLevels: [kubernetes.io/hostname, rack]\n"), "last"),
    (("    nodes: 4\n    fabric: {type: infiniband", "    nodes: 4\n    topologyLevels: [rack]\n    fabric: {type: infiniband"), None),
    (("queue: {name: train, namespaces: [team-a]}\n  - name: block-a", "queue: {name: train, namespaces: [team-a], topology: {level: block}}\n  - name: block-a"), None),
])
def test_profile_refuses_what_kueue_would(edit: tuple[str, str], message: str | None) -> None:
    text = SHARED.replace(*edit)
    assert text != SHARED
    if message is None:
        loads_profile(text)  # valid on its own
        return
    with pytest.raises(Exception, match=message):
        loads_profile(text)


def test_queue_level_outside_declared_levels_is_refused() -> None:
    text = SHARED.replace(
        "    nodes: 4\n    fabric: {type: infiniband",
        "    nodes: 4\n    topologyLevels: [rack, kubernetes.io/hostname]\n    fabric: {type: infiniband",
    ).replace("queue: {name: train, namespaces: [team-a]}\n  - name: block-a",
              "queue: {name: train, namespaces: [team-a], topology: {level: block}}\n  - name: block-a")
    with pytest.raises(Exception, match="not one of topologyLevels"):
        loads_profile(text)


def test_no_queue_no_objects(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(SHARED.replace("    queue: {name: train, namespaces: [team-a]}\n", ""))
    res = runner.invoke(app, ["render", "kueue", "-p", str(p)])
    assert res.exit_code == 3 and "no pool names a queue" in res.stderr


def test_scale_gives_the_api_servers_canonical_form() -> None:
    assert kueue.scale("2000Gi", 4) == "8000Gi"
    assert kueue.scale("0.5", 3) == "1500m"  # as the API server would store 1.5
    assert kueue.scale("250m", 2) == "500m"
    with pytest.raises(kueue.KueueRenderError):
        kueue.scale("lots", 2)


# --- DRA pools -------------------------------------------------------------------------------------------

DRA_PROFILE = ROOT / "examples" / "profiles" / "gke-a4-dranet.yaml"


def test_dra_pool_gets_device_class_mapping_and_covered_resource() -> None:
    prof = load_profile(DRA_PROFILE)
    cfg = kueue.configuration(prof)
    assert cfg["resources"]["deviceClassMappings"] == [{"name": "mrdma.google.com",
                                                        "deviceClassNames": ["mrdma.google.com"]}]
    cq = next(o for o in kueue.objects(prof) if o["kind"] == "ClusterQueue")
    group = cq["spec"]["resourceGroups"][0]
    assert "mrdma.google.com" in group["coveredResources"]
    quota = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    assert quota["mrdma.google.com"] == "32"  # 8 NICs per pod, one pod per node, 4 nodes
    assert crd_errors(cq) == []
    assert kueue.warnings(prof) == []


def test_kep5004_pool_needs_no_mapping() -> None:
    prof = load_profile(ROOT / "examples" / "profiles" / "aws-p5-efa-dra.yaml")
    assert "deviceClassMappings" not in kueue.configuration(prof).get("resources", {})
    cq = next(o for o in kueue.objects(prof) if o["kind"] == "ClusterQueue")
    assert "vpc.amazonaws.com/efa" in cq["spec"]["resourceGroups"][0]["coveredResources"]


def test_allocation_mode_all_is_refused(tmp_path: Path) -> None:
    text = DRA_PROFILE.read_text().replace("        count: 8\n", "        allocationMode: All\n")
    path = tmp_path / "all.yaml"
    path.write_text(text)
    res = runner.invoke(app, ["render", "kueue", "-p", str(path)])
    assert res.exit_code == 3
    assert "allocationMode All cannot be accounted by Kueue" in res.stderr


def test_topology_aware_scheduling_with_dra_is_warned() -> None:
    text = DRA_PROFILE.read_text().replace(
        "      namespaces: [ml-search]\n",
        "      namespaces: [ml-search]\n      topology: {level: cloud.google.com/gce-topology-block}\n")
    prof = loads_profile(text)
    assert any("topology-aware scheduling does not work together with DRA" in w for w in kueue.warnings(prof))
