"""The NCCL Inspector in every managed job: each delivery, valid and idempotent; a job's own profiler is kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from admission_support import check_workload, load_review, pod_specs, with_object

from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission
from fabricguard.profile import PlatformProfile, loads_profile

PROFILE = Path(__file__).resolve().parents[2] / "examples" / "profiles" / "onprem-infiniband.yaml"
IMAGE = "ghcr.io/acme/nccl-inspector@sha256:" + "ab" * 32
DELIVERY = {
    "image": f"{{delivery: image, image: '{IMAGE}'}}",
    "initContainer": f"{{delivery: initContainer, image: '{IMAGE}'}}",
    "hostPath": "{delivery: hostPath, hostPath: /opt/nccl-inspector/2.30.7}",
}


def profile(delivery: str) -> PlatformProfile:
    text = PROFILE.read_text().replace("spec:\n", f"spec:\n  inspector: {DELIVERY[delivery]}\n", 1)
    return loads_profile(text)


def answer(prof: PlatformProfile, review: dict[str, Any]) -> dict[str, Any]:
    d = Admission(prof).handle("review", json.dumps(review))  # type: ignore[arg-type]
    assert d.status == 200
    return d.body["response"]


def patched(prof: PlatformProfile, review: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    resp = answer(prof, review)
    assert resp["allowed"], resp.get("status")
    # The fixtures' namespace (ml-team) has no LocalQueue in these profiles: that warning is not the Inspector's.
    return jsonpatch.apply_patch(review["request"]["object"], rv.decode_patch({"response": resp})), \
        [w for w in resp.get("warnings") or [] if "has no LocalQueue" not in w]


def gpu(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in spec["containers"] if "nvidia.com/gpu" in c.get("resources", {}).get("limits", {})]


def env(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


@pytest.mark.parametrize("delivery", sorted(DELIVERY))
@pytest.mark.parametrize("kind", ["jobset", "job", "pod-owned"])
def test_every_gpu_container_gets_the_plugin_and_a_dump_dir_beside_its_logs(delivery: str, kind: str) -> None:
    prof = profile(delivery)
    review = load_review(kind)
    obj, warnings = patched(prof, review)
    assert check_workload(obj) >= 1  # the pods as the API server's schema (1.37) would take them
    assert not warnings
    specs = [s for s in pod_specs(obj) if gpu(s)]
    assert specs
    for spec in specs:
        (vol,) = [v for v in spec["volumes"] if v["name"] == "fabricguard-inspector"]
        for c in gpu(spec):
            e = env(c)
            assert e["NCCL_INSPECTOR_ENABLE"] == "1"
            assert e["NCCL_PROFILER_PLUGIN"] == "/opt/fabricguard/inspector/libnccl-profiler-inspector.so"
            # On the job's Lustre directory (the mount's subPathExpr), beside NCCL_DEBUG_FILE's directory.
            assert e["NCCL_INSPECTOR_DUMP_DIR"] == "/lustre/.fabricguard/inspector"
            assert e["NCCL_DEBUG_FILE"] == "/lustre/.fabricguard/nccl/%h.%p"
            assert e["NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS"] == "60000000"  # never -1: that writes nothing
            assert e["NCCL_INSPECTOR_DUMP_COLL_RING_SIZE"] == "8" and e["NCCL_INSPECTOR_ENABLE_P2P"] == "0"
            assert e["NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES"] == str(1 << 20)
            assert {"name": "fabricguard-inspector", "mountPath": "/opt/fabricguard/inspector",
                    "readOnly": True} in c["volumeMounts"]
        if delivery == "image":
            assert vol["image"] == {"reference": IMAGE, "pullPolicy": "IfNotPresent"}
        elif delivery == "hostPath":
            assert vol["hostPath"] == {"path": "/opt/nccl-inspector/2.30.7", "type": "Directory"}
        else:
            assert "emptyDir" in vol
            (init,) = [i for i in spec["initContainers"] if i["name"] == "fabricguard-inspector"]
            assert init["image"] == IMAGE
            assert init["command"] == ["cp", "/libnccl-profiler-inspector.so",
                                       "/fabricguard-inspector/libnccl-profiler-inspector.so"]
            assert init["resources"]["requests"] == init["resources"]["limits"]  # a Guaranteed pod stays so
    again = answer(prof, with_object(review, obj))
    assert again["allowed"] and rv.decode_patch({"response": again}) == []


@pytest.mark.parametrize("delivery", ["image", "hostPath"])
def test_a_trainjob_gets_it_through_its_trainer_env_and_runtime_patch(delivery: str) -> None:
    prof = profile(delivery)
    review = load_review("trainjob")
    obj, warnings = patched(prof, review)
    assert check_workload(obj) == 1 and not warnings
    assert env(obj["spec"]["trainer"])["NCCL_INSPECTOR_ENABLE"] == "1"
    (patch,) = obj["spec"]["runtimePatches"]
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert "fabricguard-inspector" in [v["name"] for v in pod["spec"]["volumes"]]
    again = answer(prof, with_object(review, obj))
    assert rv.decode_patch({"response": again}) == []


def test_a_trainjob_with_init_container_delivery_runs_without_it_and_is_told() -> None:
    obj, warnings = patched(profile("initContainer"), load_review("trainjob"))
    assert "NCCL_INSPECTOR_ENABLE" not in env(obj["spec"]["trainer"])
    assert any("initContainer delivery cannot go into runtimePatches" in w for w in warnings)


def _with_env(review: dict[str, Any], extra: list[dict[str, Any]]) -> dict[str, Any]:
    review = json.loads(json.dumps(review))
    for s in pod_specs(review["request"]["object"]):
        for c in gpu(s):
            c.setdefault("env", []).extend(extra)
    return review


def test_a_job_that_loads_its_own_profiler_keeps_it_and_is_told() -> None:
    prof = profile("image")
    review = _with_env(load_review("jobset"), [{"name": "NCCL_PROFILER_PLUGIN", "value": "/opt/my/libprof.so"}])
    obj, warnings = patched(prof, review)
    for spec in pod_specs(obj):
        for c in gpu(spec):
            e = env(c)
            assert e["NCCL_PROFILER_PLUGIN"] == "/opt/my/libprof.so"
            assert "NCCL_INSPECTOR_ENABLE" not in e
        assert "fabricguard-inspector" not in [v["name"] for v in spec.get("volumes", [])]
    assert any("sets its own NCCL_PROFILER_PLUGIN='/opt/my/libprof.so': kept" in w for w in warnings)


def test_a_users_inspector_setting_is_kept_with_a_warning_never_a_refusal() -> None:
    review = _with_env(load_review("job"), [{"name": "NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS",
                                              "value": "5000000"}])
    obj, warnings = patched(profile("image"), review)
    (c,) = gpu(pod_specs(obj)[0])
    assert env(c)["NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS"] == "5000000"
    assert any("kept the user's NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS" in w for w in warnings)


def test_pools_without_it_and_profiles_without_it_patch_as_before() -> None:
    base = loads_profile(PROFILE.read_text())
    review = load_review("jobset")
    plain, _ = patched(base, review)
    text = PROFILE.read_text().replace("spec:\n", f"spec:\n  inspector: {{delivery: image, image: '{IMAGE}', "
                                       "pools: [gh200-roce]}\n", 1)
    other_pool, _ = patched(loads_profile(text), review)
    assert plain == other_pool


@pytest.mark.parametrize("bad, says", [
    ("{delivery: image}", "needs image"),
    ("{delivery: hostPath, hostPath: relative/dir}", "absolute directory"),
    ("{delivery: image, image: 'x y'}", "white space"),
    (f"{{delivery: image, image: '{IMAGE}', pools: [nope]}}", "unknown pools"),
    (f"{{delivery: image, image: '{IMAGE}', dumpDir: ../up}}", "dumpDir"),
    (f"{{delivery: image, image: '{IMAGE}', dumpInterval: 0s}}", "dumpInterval"),
])
def test_a_wrong_inspector_block_is_refused_with_the_reason(bad: str, says: str) -> None:
    with pytest.raises(Exception) as e:
        loads_profile(PROFILE.read_text().replace("spec:\n", f"spec:\n  inspector: {bad}\n", 1))
    assert says in str(e.value)


def test_profile_check_names_the_inspectors_risky_choices() -> None:
    adv = profile("image").advisories()
    assert any("OCI image volume (Kubernetes 1.36 GA" in a for a in adv)
    text = PROFILE.read_text().replace("spec:\n", "spec:\n  inspector: {delivery: hostPath, hostPath: /opt/i, "
                                       "dumpInterval: 1s}\n", 1)
    adv = loads_profile(text).advisories()
    assert any("dumpInterval 1s writes often" in a for a in adv)
    assert not any("OCI image volume" in a for a in adv)
