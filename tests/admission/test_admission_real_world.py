"""Workloads as people really write them: duplicate env, values from ConfigMaps, GPU init containers and native
sidecars, launchers that say how many nodes they span, requests without an object, and objects too large to
review."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import pytest
from admission_support import decide, load_review, with_object, workers

from fabricguard.admission import review as rv
from fabricguard.admission.decide import MAX_MESSAGE
from fabricguard.admission.workloads import MAX_CONTAINERS, MAX_TEMPLATES
from fabricguard.profile import PlatformProfile


def trainer(review: dict[str, Any]) -> dict[str, Any]:
    return workers(review)["containers"][0]


@pytest.fixture
def gke(profiles: dict[str, PlatformProfile]) -> PlatformProfile:
    return profiles["gke-a3-ultra"]


# ---------------------------------------------------------------------------------------------- duplicate env


@pytest.mark.parametrize(("entries", "expect"), [
    ([("NCCL_NET", "gIB"), ("NCCL_NET", "Socket")], "NCCL_NET=Socket"),
    ([("NCCL_IB_DISABLE", "0"), ("NCCL_IB_DISABLE", "1")], "NCCL_IB_DISABLE=1"),
])
def test_the_last_duplicate_env_entry_is_judged(gke: PlatformProfile, entries: list[tuple[str, str]],
                                                expect: str) -> None:
    review = load_review("jobset")
    trainer(review)["env"] += [{"name": n, "value": v} for n, v in entries]
    for endpoint in ("mutate", "validate", "review"):
        resp = decide(gke, review, endpoint)
        assert not resp["allowed"], endpoint
        assert expect in resp["status"]["message"]


def test_a_duplicate_whose_last_entry_is_right_is_allowed(gke: PlatformProfile) -> None:
    review = load_review("jobset")
    trainer(review)["env"] += [{"name": "NCCL_NET", "value": "Socket"}, {"name": "NCCL_NET", "value": "gIB"}]
    resp = decide(gke, review)
    assert resp["allowed"]
    assert not any('"NCCL_NET"' in json.dumps(op) for op in rv.decode_patch({"response": resp}))


# ---------------------------------------------------------------------------------------------- unreadable values


@pytest.mark.parametrize("value_from", [
    {"configMapKeyRef": {"name": "nccl", "key": "net"}},
    {"secretKeyRef": {"name": "nccl", "key": "net"}},
])
def test_overridden_key_from_a_configmap_or_secret_is_refused(gke: PlatformProfile,
                                                              value_from: dict[str, Any]) -> None:
    review = load_review("jobset")
    review["request"]["object"]["metadata"]["annotations"] = {"fabricguard.io/allow-override": "NCCL_NET"}
    trainer(review)["env"].append({"name": "NCCL_NET", "valueFrom": value_from})
    for endpoint in ("mutate", "validate", "review"):
        resp = decide(gke, review, endpoint)
        assert not resp["allowed"], endpoint
        msg = resp["status"]["message"]
        assert "NCCL_NET" in msg and "cannot be read at admission" in msg and "'nccl'" in msg
    review["request"]["object"]["metadata"]["annotations"]["fabricguard.io/fabric"] = "none"
    assert decide(gke, review)["allowed"]


def test_silent_key_from_a_secret_is_refused_without_any_override(gke: PlatformProfile) -> None:
    review = load_review("jobset")
    trainer(review)["env"].append({"name": "NCCL_IB_DISABLE",
                                   "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}})
    resp = decide(gke, review)
    assert not resp["allowed"] and "NCCL_IB_DISABLE" in resp["status"]["message"]


def test_env_from_cannot_displace_injected_keys(gke: PlatformProfile) -> None:
    # Explicit env wins over envFrom in the kubelet, so the injected NCCL_NET holds whatever the ConfigMap says.
    review = load_review("jobset")
    trainer(review)["envFrom"] = [{"configMapRef": {"name": "team-env"}}]
    resp = decide(gke, review)
    assert resp["allowed"]
    obj = jsonpatch.apply_patch(review["request"]["object"], rv.decode_patch({"response": resp}))
    names = [e["name"] for e in trainer({"request": {"object": obj}})["env"]]
    assert "NCCL_NET" in names


# ---------------------------------------------------------------------------------------------- every GPU container


def test_gpu_init_container_and_native_sidecar_are_injected_and_checked(gke: PlatformProfile) -> None:
    review = load_review("jobset")
    spec = workers(review)
    spec["initContainers"] = [
        {"name": "warmup", "image": "busybox:1.36", "resources": {"limits": {"nvidia.com/gpu": "8"}}},
        {"name": "side", "image": "busybox:1.36", "restartPolicy": "Always",
         "resources": {"limits": {"nvidia.com/gpu": "1"}}},
        {"name": "no-gpu", "image": "busybox:1.36"},
    ]
    resp = decide(gke, review)
    assert resp["allowed"], resp.get("status")
    obj = jsonpatch.apply_patch(review["request"]["object"], rv.decode_patch({"response": resp}))
    inits = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["initContainers"]
    for c in inits[:2]:
        assert {e["name"]: e.get("value") for e in c["env"]}["NCCL_NET"] == "gIB"
        assert "networking.gke.io.networks/rdma-0" in c["resources"]["limits"]
    assert "env" not in inits[2] and "resources" not in inits[2]
    for name, where in (("warmup", "init container 'warmup'"), ("side", "sidecar 'side'")):
        bad = load_review("jobset")
        workers(bad)["initContainers"] = [dict(c) for c in spec["initContainers"]]
        target = next(c for c in workers(bad)["initContainers"] if c["name"] == name)
        target["env"] = [{"name": "NCCL_IB_DISABLE", "value": "1"}]
        resp = decide(gke, bad)
        assert not resp["allowed"]
        assert f"NCCL_IB_DISABLE=1 in {where}" in resp["status"]["message"]


def test_gpus_asked_only_by_an_init_container_make_a_gpu_pod(profiles: dict[str, PlatformProfile]) -> None:
    review = load_review("job")
    spec = review["request"]["object"]["spec"]["template"]["spec"]
    for c in spec["containers"]:
        c.get("resources", {}).get("limits", {}).pop("nvidia.com/gpu", None)
        c.get("resources", {}).get("requests", {}).pop("nvidia.com/gpu", None)
    spec["initContainers"] = [{"name": "gpu-init", "image": "busybox:1.36",
                               "resources": {"limits": {"nvidia.com/gpu": "8"}},
                               "env": [{"name": "NCCL_IB_DISABLE", "value": "1"}]}]
    resp = decide(profiles["aws-p5-efa"], review)
    assert not resp["allowed"] and "init container 'gpu-init'" in resp["status"]["message"]


# ---------------------------------------------------------------------------------------------- multi-node launchers


def _one_pod_job(command: list[str], env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    review = load_review("job-single-node")
    job = review["request"]["object"]
    job["spec"].update({"completionMode": "Indexed", "completions": 1, "parallelism": 1})
    c = job["spec"]["template"]["spec"]["containers"][0]
    c["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    c["command"] = command
    if env:
        c["env"] = env
    return review


@pytest.mark.parametrize(("command", "env"), [
    (["torchrun", "--nnodes=2", "--nproc-per-node=8", "train.py"], None),
    (["torchrun", "--nnodes", "2:4", "train.py"], None),
    (["python", "-m", "torch.distributed.run", "--nnodes=$(NNODES)", "train.py"], [{"name": "NNODES", "value": "2"}]),
    (["/usr/local/bin/torchrun", "--nnodes=2", "train.py"], None),
    (["bash", "-c", "pip list && torchrun --nnodes=${NNODES} --nproc_per_node=8 train.py"],
     [{"name": "NNODES", "value": "3"}]),
    (["python", "train.py"], [{"name": "PET_NNODES", "value": "2"}]),
    (["torchrun", "--nproc-per-node=8", "train.py"], [{"name": "WORLD_SIZE", "value": "16"}]),
])
def test_launcher_that_spans_nodes_makes_a_multi_node_workload(
        profiles: dict[str, PlatformProfile], command: list[str], env: list[dict[str, str]] | None) -> None:
    resp = decide(profiles["gke-a3-ultra"], _one_pod_job(command, env))
    assert resp["allowed"]
    assert rv.decode_patch({"response": resp}), "a multi-node launcher must get the fabric"


@pytest.mark.parametrize(("command", "env"), [
    (["torchrun", "--nnodes=1", "--nproc-per-node=8", "train.py"], None),
    (["torchrun", "--standalone", "--nproc-per-node=8", "train.py"], None),
    (["python", "train.py", "--nnodes=4"], None),  # not a launcher's flag
    (["torchrun", "--nproc-per-node=8", "train.py"], [{"name": "WORLD_SIZE", "value": "8"}]),
    (["torchrun", "--nnodes=$(UNSET)", "train.py"], None),
])
def test_single_node_launchers_are_left_alone(profiles: dict[str, PlatformProfile], command: list[str],
                                              env: list[dict[str, str]] | None) -> None:
    resp = decide(profiles["gke-a3-ultra"], _one_pod_job(command, env))
    assert resp == {"uid": resp["uid"], "allowed": True}


# ---------------------------------------------------------------------------------------------- fail closed


@pytest.mark.parametrize("kind", ["jobset", "job", "pod-owned", "trainjob"])
def test_create_without_the_object_is_denied(profile: PlatformProfile, kind: str) -> None:
    review = load_review(kind)
    del review["request"]["object"]
    for endpoint in ("mutate", "validate"):
        resp = decide(profile, review, endpoint)
        assert not resp["allowed"] and resp["status"]["code"] == 400
        assert "without request.object" in resp["status"]["message"]
    review["request"]["object"] = None
    assert not decide(profile, review)["allowed"]


def test_object_of_another_kind_than_declared_is_denied(profile: PlatformProfile) -> None:
    job = load_review("job")
    pod = load_review("pod-owned")["request"]["object"]
    resp = decide(profile, with_object(job, pod), "validate")
    assert not resp["allowed"] and "not the batch/v1 Job the request declares" in resp["status"]["message"]
    job["request"]["object"]["apiVersion"] = "batch/v2"  # same group, another version: still a Job
    assert decide(profile, job, "mutate")["allowed"]


# ---------------------------------------------------------------------------------------------- bounded work


def test_too_many_containers_is_refused_with_the_limit(gke: PlatformProfile) -> None:
    review = load_review("pod-bare-group")
    pod = review["request"]["object"]
    gpu = pod["spec"]["containers"][0]
    pod["spec"]["containers"] = [dict(gpu, name=f"c{i}", resources={"limits": {"nvidia.com/gpu": "1"}})
                                 for i in range(MAX_CONTAINERS + 1)]
    resp = decide(gke, review)
    assert not resp["allowed"]
    assert f"more than the {MAX_CONTAINERS}" in resp["status"]["message"]


def test_too_many_templates_is_refused_and_messages_are_bounded(gke: PlatformProfile) -> None:
    review = load_review("jobset")
    rjobs = review["request"]["object"]["spec"]["replicatedJobs"]
    rjobs[:] = [dict(rjobs[1], name=f"w{i}") for i in range(MAX_TEMPLATES + 1)]
    resp = decide(gke, review)
    assert not resp["allowed"] and f"more than the {MAX_TEMPLATES}" in resp["status"]["message"]
    # Under the limit, one conflict per template: the message stays bounded and says how many were left out.
    rjobs[:] = rjobs[:MAX_TEMPLATES]
    for rj in rjobs:
        rj["template"]["spec"]["template"]["spec"]["containers"][0]["env"].append(
            {"name": "NCCL_NET", "value": "IB" + "x" * 100})
    resp = decide(gke, review)
    msg = resp["status"]["message"]
    assert not resp["allowed"] and len(msg) <= MAX_MESSAGE and "more reasons" in msg
