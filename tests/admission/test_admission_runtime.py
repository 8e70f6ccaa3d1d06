"""What a pod needs on its fabric beyond resources (the gIB host userspace on GKE) and the cluster's pod additions:
injected into users' workloads of every kind, carried by the canary, valid as the API server validates pods."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from admission_support import KINDS, check_workload, decide, load_review, pod_specs

from fabricguard.admission import review as rv
from fabricguard.admission import runtime
from fabricguard.controller.canary import render_canary, spec_for
from fabricguard.profile import load_profile, loads_profile
from fabricguard.profile.model import PlatformProfile

ROOT = Path(__file__).resolve().parents[2]
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
EFA = ROOT / "examples" / "profiles" / "aws-p5-efa.yaml"
NOW = datetime(2026, 12, 1, tzinfo=UTC)
ADDITIONS = {
    "volumes": [{"name": "site-ca", "configMap": {"name": "site-ca-bundle"}}],
    "volumeMounts": [{"name": "site-ca", "mountPath": "/etc/ssl/site", "readOnly": True}],
    "env": {"HTTPS_PROXY": "http://proxy.internal:3128"},
    "imagePullSecrets": ["registry-creds"],
    "tolerations": [{"key": "site.example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}],
}


def with_additions(path: Path) -> PlatformProfile:
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["podAdditions"] = ADDITIONS
    return loads_profile(yaml.safe_dump(doc))


def patched(profile: PlatformProfile, kind: str) -> dict[str, Any]:
    review = load_review(kind)
    resp = decide(profile, review, "mutate")
    assert resp["allowed"], resp.get("status")
    return jsonpatch.apply_patch(review["request"]["object"], rv.decode_patch({"response": resp}))


def gpu_container(spec: dict[str, Any]) -> dict[str, Any] | None:
    for c in spec["containers"]:
        if "nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {}):
            return c
    return None


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "trainjob"])
def test_gke_workloads_get_the_gib_userspace_and_the_pod_additions(kind: str) -> None:
    profile = with_additions(GKE)
    obj = patched(profile, kind)
    checked = 0
    for spec in pod_specs(obj):
        c = gpu_container(spec)
        if c is None:
            continue
        env = {e["name"]: e.get("value") for e in c["env"]}
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        vols = {v["name"]: v for v in spec["volumes"]}
        assert mounts["/usr/local/gib"] == "fabricguard-gib" and mounts["/usr/local/nvidia"] == "fabricguard-nvidia"
        assert vols["fabricguard-gib"]["hostPath"]["path"] == "/home/kubernetes/bin/gib"
        assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64:/usr/local/gib/lib64"
        assert env["NCCL_NET"] == "gIB" and env["NCCL_CROSS_NIC"] == "0"
        assert env["HTTPS_PROXY"] == ADDITIONS["env"]["HTTPS_PROXY"] and mounts["/etc/ssl/site"] == "site-ca"
        assert {"name": "registry-creds"} in spec["imagePullSecrets"]
        assert ADDITIONS["tolerations"][0] in spec["tolerations"]
        checked += 1
    assert checked
    assert check_workload(obj) >= 1  # still a valid pod for the API server
    # Idempotent: the patched object reviewed again gets nothing more.
    again = decide(profile, {**load_review(kind), "request": {**load_review(kind)["request"], "object": obj}},
                   "mutate")
    assert again["allowed"] and not rv.decode_patch({"response": again})


def test_a_trainjob_gets_them_through_trainer_env_and_its_runtime_patch() -> None:
    obj = patched(with_additions(GKE), "trainjob")
    env = {e["name"]: e.get("value") for e in obj["spec"]["trainer"]["env"]}
    assert env["LD_LIBRARY_PATH"].startswith("/usr/local/nvidia/lib64") and "HTTPS_PROXY" in env
    [entry] = [p for p in obj["spec"]["runtimePatches"] if p["manager"] == "fabricguard.io/admission"]
    pod = entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    names = {v["name"] for v in pod["spec"]["volumes"]}
    assert {"fabricguard-gib", "fabricguard-nvidia", "site-ca"} <= names
    assert {"name": "registry-creds"} in pod["spec"]["imagePullSecrets"]


def test_efa_injects_no_host_libraries_the_image_carries_them() -> None:
    profile = load_profile(EFA)
    assert runtime.fabric_userspace(profile.pool("p5-efa")).empty
    obj = patched(profile, "jobset")
    for spec in pod_specs(obj):
        assert not any("hostPath" in v for v in spec.get("volumes") or ())
    assert "aws-ofi-nccl" in runtime.IMAGE_NEEDS[profile.pool("p5-efa").fabric.type]


def test_a_user_ld_library_path_is_a_conflict_named_in_the_refusal() -> None:
    review = load_review("jobset")
    obj = review["request"]["object"]
    for rj in obj["spec"]["replicatedJobs"]:
        for c in rj["template"]["spec"]["template"]["spec"]["containers"]:
            c.setdefault("env", []).append({"name": "LD_LIBRARY_PATH", "value": "/opt/mine"})
    resp = decide(load_profile(GKE), review, "mutate")
    assert not resp["allowed"] and "LD_LIBRARY_PATH" in resp["status"]["message"]


@pytest.mark.parametrize("path", [GKE, EFA], ids=["gke", "efa"])
def test_the_canary_carries_its_fabrics_needs_and_the_pod_additions(path: Path) -> None:
    profile = with_additions(path)
    pool = profile.pool()
    js = render_canary(profile, pool, spec_for(profile, pool, "fabricguard-system", NOW),
                       image="r.example.com/c:1@sha256:" + "a" * 64, owner=None)
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    extras = runtime.extras(profile, pool, fabric=True)
    for k, v in extras.env:
        assert env[k] == v
    assert {m["mountPath"] for m in extras.mounts} <= {m["mountPath"] for m in c["volumeMounts"]}
    assert {"name": "registry-creds"} in pod["imagePullSecrets"]
    if path == GKE:
        assert env["LD_LIBRARY_PATH"] and "/usr/local/gib" in {m["mountPath"] for m in c["volumeMounts"]}


def test_pod_additions_are_checked_when_the_profile_loads() -> None:
    doc = yaml.safe_load(GKE.read_text())
    doc["spec"]["podAdditions"] = {"volumeMounts": [{"name": "nope", "mountPath": "/x"}]}
    with pytest.raises(Exception, match="name no volume"):
        loads_profile(yaml.safe_dump(doc))
    doc["spec"]["podAdditions"] = {"env": {"NCCL_NET": "Socket"}}
    with pytest.raises(Exception, match=r"fabric\.env"):
        loads_profile(yaml.safe_dump(doc))


def test_a_namespace_without_the_pools_local_queue_is_warned_on_create() -> None:
    review = load_review("jobset")  # namespace ml-team; the GKE queue serves ml-search and ml-ranking
    resp = decide(load_profile(GKE), review, "mutate")
    assert resp["allowed"]
    [warning] = [w for w in resp.get("warnings") or [] if "LocalQueue" in w]
    assert "ml-team has no LocalQueue h200" in warning and "60-kueue" in warning
    review["request"]["namespace"] = review["request"]["object"]["metadata"]["namespace"] = "ml-search"
    resp = decide(load_profile(GKE), review, "mutate")
    assert not [w for w in resp.get("warnings") or [] if "LocalQueue" in w]
