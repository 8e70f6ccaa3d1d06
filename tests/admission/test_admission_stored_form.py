"""The stored form round trip: review, apply the patch, let the API server default and store it, review again.

The API server fills in defaults after the mutating webhook (``fieldRef.apiVersion: v1`` on the injected env,
container ``terminationMessagePath``, canonical quantities) and, with ``reinvocationPolicy: IfNeeded``, calls the
webhook again when a later webhook (Kueue's ``suspend``) changed the object; ``kubectl get -o yaml`` output is
applied back the same way. Each of those must get an empty patch and be allowed. Hypothesis builds random
workloads of every kind under every example profile for the same property.

Every Admission here injects the job directory's init container (``--job-dir-image``, issue 24): its stored form
(defaults on the init container) and the fuzzed users and groups must settle too.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
from admission_support import KINDS, PROFILES, load_review, pod_specs, with_object
from apiserver_defaults import kueue_suspend, stored_form
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission
from fabricguard.profile import PlatformProfile, load_profile

JOB_DIR_IMAGE = "ghcr.io/acme/fabricguard-agent:0.2.0"
ADMISSIONS = {p.stem: Admission(load_profile(p), job_dir_image=JOB_DIR_IMAGE) for p in PROFILES}


def answer(adm: Admission, review: dict[str, Any], endpoint: str = "review") -> dict[str, Any]:
    d = adm.handle(endpoint, json.dumps(review))  # type: ignore[arg-type]
    assert d.status == 200
    return d.body["response"]


def round_trip(adm: Admission, review: dict[str, Any]) -> dict[str, Any] | None:
    """The stored object after one review, or None when the first review denied it."""
    first = answer(adm, review)
    if not first["allowed"]:
        return None
    patch = rv.decode_patch({"response": first})
    assert {op["op"] for op in patch} <= {"add"}, patch
    return stored_form(jsonpatch.apply_patch(review["request"]["object"], patch))


def assert_settled(adm: Admission, review: dict[str, Any], obj: dict[str, Any]) -> None:
    for again in (obj, kueue_suspend(obj)):
        for endpoint in ("mutate", "validate", "review"):
            resp = answer(adm, with_object(review, again), endpoint)
            assert resp["allowed"], (endpoint, resp.get("status"))
            assert rv.decode_patch({"response": resp}) == [], (endpoint, rv.decode_patch({"response": resp}))


@pytest.mark.parametrize("kind", KINDS)
def test_stored_form_of_every_kind_is_allowed_unchanged(profile: PlatformProfile, kind: str) -> None:
    adm = Admission(profile, job_dir_image=JOB_DIR_IMAGE)
    review = load_review(kind)
    obj = round_trip(adm, review)
    assert obj is not None
    assert_settled(adm, review, obj)
    # `kubectl get -o json` of the stored object, created again under another name, is the same object.
    reapplied = copy.deepcopy(obj)
    for k in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        reapplied["metadata"].pop(k)
    assert_settled(adm, review, reapplied)


def test_injected_downward_env_with_its_default_api_version_is_not_a_conflict(
        profiles: dict[str, PlatformProfile]) -> None:
    adm = Admission(profiles["gke-a3-ultra"])
    review = load_review("jobset")
    c = review["request"]["object"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]
    c["env"].append({"name": "FG_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                         "fieldPath": "metadata.namespace"}}})
    resp = answer(adm, review)
    assert resp["allowed"]
    added = [op["value"] for op in rv.decode_patch({"response": resp}) if "/env/" in op["path"]]
    assert added and not any(e["name"] == "FG_NAMESPACE" for e in added)


# ---------------------------------------------------------------------------------------------- fuzzing

GPU = "nvidia.com/gpu"


@st.composite
def workloads(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    profile = draw(st.sampled_from(sorted(ADMISSIONS)))
    adm = ADMISSIONS[profile]
    pool = adm.profile.pool()
    review = load_review(draw(st.sampled_from(KINDS)))
    obj = review["request"]["object"]
    if obj["kind"] == "TrainJob":
        trainer = obj["spec"]["trainer"]
        trainer["numNodes"] = draw(st.integers(1, 8))
        trainer["resourcesPerNode"] = {"limits": {GPU: draw(st.sampled_from(["8", "4", 8, "8.0"]))}}
        if draw(st.booleans()):
            trainer["env"].append({"name": "NCCL_DEBUG", "value": "INFO"})
    for spec in pod_specs(obj):
        for c in spec["containers"]:
            if GPU in (c.get("resources") or {}).get("limits", {}):
                c["resources"]["limits"][GPU] = draw(st.sampled_from(["8", "4", 8, "8.0", "2"]))
                env = c.setdefault("env", [])
                for _ in range(draw(st.integers(0, 3))):
                    name, value = draw(st.sampled_from([
                        ("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG", "WARN"), ("FOO", "1"), ("FOO", ""),
                        ("NCCL_NET", pool.fabric.effective_nccl_net or "Socket"),
                        ("NCCL_NET", (pool.fabric.effective_nccl_net or "socket").lower()),
                    ]))
                    env.append({"name": name, "value": value})
        if draw(st.booleans()):
            init = {"name": "prefetch", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}
            if draw(st.booleans()):
                init["resources"] = {"limits": {GPU: "1"}}
            if draw(st.booleans()):
                init["restartPolicy"] = "Always"
            spec.setdefault("initContainers", []).append(init)
        if draw(st.booleans()):  # who the workload runs as decides who gets the job's directory
            spec["securityContext"] = draw(st.fixed_dictionaries({}, optional={
                "runAsUser": st.sampled_from([0, 1000]), "runAsGroup": st.sampled_from([1000, 2000]),
                "fsGroup": st.sampled_from([1000, 3000]), "runAsNonRoot": st.booleans()}))
        if draw(st.booleans()):
            spec["containers"][0].setdefault("securityContext", {})["runAsUser"] = draw(st.sampled_from([1000, 1001]))
        if draw(st.booleans()) and pool.tolerations:
            spec["tolerations"] = [dict(t.to_k8s(), operator="Equal") if "value" in t.to_k8s() else t.to_k8s()
                                   for t in pool.tolerations]
        if draw(st.booleans()):
            spec.setdefault("volumes", []).append({"name": "dshm", "emptyDir": {"medium": "Memory"}})
            for c in spec["containers"]:
                c.setdefault("volumeMounts", []).append({"name": "dshm", "mountPath": "/dev/shm",
                                                         "readOnly": False})
    if obj["kind"] in ("Job", "JobSet") and draw(st.booleans()):
        meta = obj["metadata"]
        meta["generateName"] = meta.pop("name") + "-"
    if obj["kind"] == "Job":
        n = draw(st.integers(1, 4))
        obj["spec"]["parallelism"] = obj["spec"]["completions"] = n
    return profile, review


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=workloads())
def test_fuzzed_workloads_settle_after_one_review(case: tuple[str, dict[str, Any]]) -> None:
    profile, review = case
    adm = ADMISSIONS[profile]
    obj = round_trip(adm, review)
    event("denied at the first review" if obj is None else "allowed at the first review")
    if obj is None:
        return
    assert_settled(adm, review, obj)
