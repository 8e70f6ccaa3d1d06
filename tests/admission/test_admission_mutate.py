"""Mutation: every kind under every example profile, applied with jsonpatch, validated and idempotent."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
from admission_support import KINDS, check_workload, load_review, with_object

from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission
from fabricguard.admission.mutate import diff, pointer
from fabricguard.profile import PlatformProfile


def run(profile: PlatformProfile, review: dict[str, Any], endpoint: str = "review") -> dict[str, Any]:
    d = Admission(profile).handle(endpoint, json.dumps(review))  # type: ignore[arg-type]
    assert d.status == 200
    assert d.body["response"]["uid"] == review["request"]["uid"]
    return d.body


def patched(profile: PlatformProfile, review: dict[str, Any]) -> dict[str, Any]:
    body = run(profile, review)
    assert body["response"]["allowed"], body["response"].get("status")
    patch = rv.decode_patch(body)
    assert patch, "a multi-node GPU workload must be patched"
    return jsonpatch.apply_patch(review["request"]["object"], patch)


def gpu_containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    if obj["kind"] == "JobSet":
        specs = [rj["template"]["spec"]["template"]["spec"] for rj in obj["spec"]["replicatedJobs"]]
    elif obj["kind"] == "Job":
        specs = [obj["spec"]["template"]["spec"]]
    else:
        specs = [obj["spec"]]
    for s in specs:
        out += [c for c in s["containers"] if "nvidia.com/gpu" in c.get("resources", {}).get("limits", {})]
    return out


def env(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


@pytest.mark.parametrize("kind", KINDS)
def test_patch_applies_validates_and_is_idempotent(profile: PlatformProfile, kind: str) -> None:
    review = load_review(kind)
    obj = patched(profile, review)
    assert check_workload(obj) >= 1
    # Reinvocation (reinvocationPolicy: IfNeeded) over the patched object adds nothing.
    again = run(profile, with_object(review, obj))
    assert again["response"]["allowed"]
    assert rv.decode_patch(again) == []
    # Nothing the user wrote was removed or replaced.
    ops = rv.decode_patch(run(profile, review))
    assert {op["op"] for op in ops} == {"add"}


@pytest.mark.parametrize("kind", ["jobset", "job", "pod-owned", "pod-bare-group"])
def test_gpu_containers_get_fabric(profile: PlatformProfile, kind: str) -> None:
    pool = profile.pool()
    lustre = profile.spec.storage.lustre
    obj = patched(profile, load_review(kind))
    cs = gpu_containers(obj)
    assert cs
    for c in cs:
        for name, qty in pool.fabric.resources.items():
            assert c["resources"]["requests"][name] == str(qty)
            assert c["resources"]["limits"][name] == str(qty)
        e = env(c)
        assert e["NCCL_NET"] == pool.fabric.effective_nccl_net
        assert e["NCCL_DEBUG"] == "INFO"
        assert e["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
        assert e["NCCL_DEBUG_FILE"] == f"{lustre.mountPath}/{lustre.logDir}/%h.%p"
        names = [x["name"] for x in c["env"]]
        # $(FG_JOB) can only be expanded in values defined after it.
        assert names.index("FG_JOB") < names.index("NCCL_DEBUG_FILE")
        if pool.fabric.hcas:
            assert e["NCCL_IB_HCA"] == "=" + ",".join(pool.fabric.hcas)
        else:
            assert "NCCL_IB_HCA" not in e
        if pool.fabric.socketIfname:
            assert e["NCCL_SOCKET_IFNAME"] == pool.fabric.socketIfname
        assert "IPC_LOCK" in c["securityContext"]["capabilities"]["add"]
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        assert mounts["/dev/shm"]["name"] == "fabricguard-shm"
        assert mounts[lustre.mountPath]["subPathExpr"] == "$(FG_NAMESPACE)/$(FG_JOB)"
    # The metrics sidecar of the Job asks for no GPU and gets nothing.
    if kind == "job":
        sidecar = obj["spec"]["template"]["spec"]["containers"][1]
        assert "env" not in sidecar and "volumeMounts" not in sidecar


def test_gke_annotations_and_placement(profiles: dict[str, PlatformProfile]) -> None:
    obj = patched(profiles["gke-a3-ultra"], load_review("jobset"))
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "h200"
    workers = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    anns = workers["metadata"]["annotations"]
    assert anns["networking.gke.io/default-interface"] == "eth0"
    ifaces = json.loads(anns["networking.gke.io/interfaces"])
    assert ifaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert ifaces[1:] == [{"interfaceName": f"eth{i + 2}", "network": f"rdma-{i}"} for i in range(8)]
    assert anns["kueue.x-k8s.io/podset-preferred-topology"] == "cloud.google.com/gce-topology-block"
    # Kueue reads the queue from the JobSet and TAS from the pod templates, never the other way round.
    assert "kueue.x-k8s.io/queue-name" not in workers["metadata"].get("labels", {})
    assert not any(k.startswith("kueue.x-k8s.io/podset") for k in obj["metadata"].get("annotations", {}))
    assert workers["spec"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "a3u-pool-1"}
    assert workers["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert workers["metadata"]["labels"] == {"app": "llama", "fabricguard.io/managed": "true",
                                             "fabricguard.io/pool": "h200-rdma"}
    env_ = env(workers["spec"]["containers"][0])
    assert env_["FG_JOB"] == {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/jobset-name']"}}
    # The CPU-only coordinator is left as it was.
    coord = obj["spec"]["replicatedJobs"][0]
    assert coord == load_review("jobset")["request"]["object"]["spec"]["replicatedJobs"][0]


def test_multus_required_topology_and_gid_index(profiles: dict[str, PlatformProfile]) -> None:
    prof = profiles["onprem-infiniband"]
    obj = patched(prof, load_review("job"))
    tpl = obj["spec"]["template"]
    assert tpl["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "network-operator/ib-sriov-net"
    assert tpl["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == "network.example.com/leaf"
    assert env(tpl["spec"]["containers"][0])["FG_JOB"]["fieldRef"]["fieldPath"] == \
        "metadata.labels['batch.kubernetes.io/job-name']"
    # The RoCE pool (1 GPU per node) sets the GID index and has no TAS annotation (its queue has no topology).
    review = load_review("job")
    o = review["request"]["object"]
    o["metadata"]["labels"] = {"fabricguard.io/pool": "gh200-roce"}
    o["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    obj = patched(prof, review)
    tpl = obj["spec"]["template"]
    c = tpl["spec"]["containers"][0]
    assert env(c)["NCCL_IB_GID_INDEX"] == "3"
    assert env(c)["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1"
    assert c["resources"]["limits"]["rdma/rdma_shared_device_a"] == "1"
    assert not any(k.startswith("kueue.x-k8s.io/podset") for k in tpl["metadata"]["annotations"])
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gh200"


def test_trainjob_resources_per_node_and_runtime_patch(profiles: dict[str, PlatformProfile]) -> None:
    obj = patched(profiles["aws-p5-efa"], load_review("trainjob"))
    trainer = obj["spec"]["trainer"]
    assert trainer["resourcesPerNode"]["limits"]["vpc.amazonaws.com/efa"] == "32"
    assert trainer["resourcesPerNode"]["requests"]["vpc.amazonaws.com/efa"] == "32"
    assert env(trainer)["NCCL_NET"] == "Libfabric"
    [patch] = obj["spec"]["runtimePatches"]
    assert patch["manager"] == "fabricguard.io/admission"
    [rj] = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert rj["name"] == "node"
    pod = rj["template"]["spec"]["template"]
    [node] = pod["spec"]["containers"]
    # runtimePatches cannot carry resources or the node container's env: those are on spec.trainer.
    assert set(node) == {"name", "securityContext", "volumeMounts"}
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"] == \
        "topology.k8s.aws/network-node-layer-3"
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "p5"
    # The Trainer webhook stamps `time` on the entry; that is not a reason to patch again.
    obj2 = copy.deepcopy(obj)
    obj2["spec"]["runtimePatches"][0]["time"] = "2026-08-01T10:00:00Z"
    again = run(profiles["aws-p5-efa"], with_object(load_review("trainjob"), obj2))
    assert rv.decode_patch(again) == []


def test_trainjob_without_gpus_or_single_node_is_left_alone(profiles: dict[str, PlatformProfile]) -> None:
    review = load_review("trainjob")
    review["request"]["object"]["spec"]["trainer"]["numNodes"] = 1
    body = run(profiles["aws-p5-efa"], review)
    assert body["response"]["allowed"] and "patch" not in body["response"]


def test_owned_pod_is_filled_in_without_kueue_keys(profiles: dict[str, PlatformProfile]) -> None:
    obj = patched(profiles["gke-a3-ultra"], load_review("pod-owned"))
    labels = obj["metadata"]["labels"]
    assert labels["fabricguard.io/job"] == "old-run"  # the JobSet's name, not the child Job's or the pod's
    assert "kueue.x-k8s.io/queue-name" not in labels
    assert "kueue.x-k8s.io/pod-group-name" not in labels
    assert not any(k.startswith("kueue.x-k8s.io/podset") for k in obj["metadata"]["annotations"])
    assert obj["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]


def test_owned_pod_keeps_conflicting_user_values_with_a_warning(profiles: dict[str, PlatformProfile]) -> None:
    review = load_review("pod-owned")
    review["request"]["object"]["spec"]["nodeSelector"] = {"cloud.google.com/gke-nodepool": "a3u-pool-2"}
    body = run(profiles["gke-a3-ultra"], review, "mutate")
    assert body["response"]["allowed"]
    assert any("a3u-pool-2" in w for w in body["response"]["warnings"])
    obj = jsonpatch.apply_patch(review["request"]["object"], rv.decode_patch(body))
    assert obj["spec"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "a3u-pool-2"}


def test_bare_pod_group_gets_kueue_pod_group(profiles: dict[str, PlatformProfile]) -> None:
    obj = patched(profiles["aws-p5-efa"], load_review("pod-bare-group"))
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] == "sweep-a"
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "p5"
    assert obj["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "2"
    assert obj["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"]
    c = obj["spec"]["containers"][0]
    assert env(c)["FG_JOB"]["fieldRef"]["fieldPath"] == "metadata.labels['fabricguard.io/job']"


def test_single_node_workload_is_left_alone(profile: PlatformProfile) -> None:
    body = run(profile, load_review("job-single-node"))
    assert body["response"] == {"uid": load_review("job-single-node")["request"]["uid"], "allowed": True}


def test_two_small_pods_count_as_multi_node(profiles: dict[str, PlatformProfile]) -> None:
    review = load_review("job")
    for c in review["request"]["object"]["spec"]["template"]["spec"]["containers"][:1]:
        c["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    assert rv.decode_patch(run(profiles["aws-p5-efa"], review))


def test_conflict_names_the_key_and_allow_override_keeps_user_value(profiles: dict[str, PlatformProfile]) -> None:
    prof = profiles["onprem-infiniband"]
    review = load_review("jobset")
    c = review["request"]["object"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]
    c["env"].append({"name": "NCCL_IB_HCA", "value": "mlx5_0"})
    c["resources"]["limits"]["rdma/ib"] = "4"
    body = run(prof, review)
    resp = body["response"]
    assert not resp["allowed"]
    msg = resp["status"]["message"]
    assert "NCCL_IB_HCA" in msg and "rdma/ib" in msg and "fabricguard.io/allow-override" in msg
    review["request"]["object"]["metadata"]["annotations"] = {"fabricguard.io/allow-override": "NCCL_IB_HCA, rdma/ib"}
    obj = patched(prof, review)
    c2 = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert env(c2)["NCCL_IB_HCA"] == "mlx5_0"
    assert c2["resources"]["limits"]["rdma/ib"] == "4"
    assert c2["resources"]["requests"]["rdma/ib"] == "8"
    # The opt-out list travels to the pod template, so pod-level checks honour it too.
    tpl = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    assert tpl["metadata"]["annotations"]["fabricguard.io/allow-override"] == "NCCL_IB_HCA, rdma/ib"


def test_user_shm_in_memory_is_accepted_but_disk_shm_conflicts(profiles: dict[str, PlatformProfile]) -> None:
    prof = profiles["aws-p5-efa"]
    review = load_review("job")
    spec = review["request"]["object"]["spec"]["template"]["spec"]
    spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    obj = patched(prof, review)
    s = obj["spec"]["template"]["spec"]
    assert [v["name"] for v in s["volumes"]] == ["dshm", "fabricguard-lustre"]
    spec["volumes"] = [{"name": "dshm", "emptyDir": {}}]
    resp = run(prof, review)["response"]
    assert not resp["allowed"] and "/dev/shm" in resp["status"]["message"]


def test_generate_name_jobset_uses_controller_label(profiles: dict[str, PlatformProfile]) -> None:
    review = load_review("jobset")
    meta = review["request"]["object"]["metadata"]
    del meta["name"]
    meta["generateName"] = "llama-"
    obj = patched(profiles["gke-a3-ultra"], review)
    tpl = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    assert "fabricguard.io/job" not in tpl["metadata"]["labels"]
    assert env(tpl["spec"]["containers"][0])["FG_JOB"]["fieldRef"]["fieldPath"] == \
        "metadata.labels['jobset.sigs.k8s.io/jobset-name']"


def test_pointer_escaping_and_diff_adds_whole_parents() -> None:
    assert pointer(("metadata", "annotations", "networking.gke.io/interfaces")) == \
        "/metadata/annotations/networking.gke.io~1interfaces"
    assert pointer(("a~b",)) == "/a~0b"
    old: dict[str, Any] = {"metadata": {"name": "x"}}
    new = {"metadata": {"name": "x", "labels": {"a/b": "1"}}, "spec": {"x": [1]}}
    ops = diff(old, new)
    assert ops == [{"op": "add", "path": "/metadata/labels", "value": {"a/b": "1"}},
                   {"op": "add", "path": "/spec", "value": {"x": [1]}}]
    assert jsonpatch.apply_patch(old, ops) == new


def test_shm_size_limit_comes_from_the_pool(profiles: dict[str, PlatformProfile]) -> None:
    obj = patched(profiles["gke-a3-ultra"], load_review("jobset"))
    vols = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["volumes"]
    shm = next(v for v in vols if v.get("emptyDir", {}).get("medium") == "Memory")
    assert shm["emptyDir"]["sizeLimit"] == "250Gi"
    # A pool without shmSize gets an unbounded memory-backed /dev/shm.
    onprem = patched(profiles["onprem-infiniband"], load_review("jobset"))
    ovols = onprem["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["volumes"]
    oshm = next(v for v in ovols if v.get("emptyDir", {}).get("medium") == "Memory")
    assert "sizeLimit" not in oshm["emptyDir"]
