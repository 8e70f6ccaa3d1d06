"""The kinds fabricguard.kinds added (LeaderWorkerSet, RayJob, RayCluster, MPIJob, PyTorchJob), admitted by the
webhook like the first four: the pool's fabric in every GPU container, the job's Lustre directory (one per
LeaderWorkerSet group), every pod template still a valid Pod; and their stored forms (core and CRD defaults,
Kueue's suspend) reviewed again get an empty patch."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import pytest
from admission_support import PROFILES, check
from apiserver_defaults import _pod_spec

from fabricguard import kinds
from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission
from fabricguard.admission.render import RULES
from fabricguard.profile import load_profile
from fabricguard.profile.model import PlatformProfile
from kind_objects import NEW_KINDS, crd_defaults, kueue_suspend, review, workload

EXAMPLES = {p.stem: p for p in PROFILES}
ON = ("onprem-infiniband", "aws-p5-efa", "gke-a3-ultra", "hpe-slingshot")


def answer(adm: Admission, rev: dict[str, Any], endpoint: str = "review") -> dict[str, Any]:
    d = adm.handle(endpoint, json.dumps(rev))  # type: ignore[arg-type]
    assert d.status == 200
    return d.body["response"]


def templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [r.template for r in kinds.BY_KIND[obj["kind"]].templates(obj)]


def stored(obj: dict[str, Any]) -> dict[str, Any]:
    out = crd_defaults(obj)
    out["metadata"].update({"uid": "5c9d1e7a-0000-4000-8000-000000000002", "resourceVersion": "913",
                            "creationTimestamp": "2026-11-30T12:00:00Z", "generation": 1})
    for t in templates(out):
        _pod_spec(t.setdefault("spec", {}), is_pod=False)
    return out


def gpu_envs(obj: dict[str, Any], pool_gpu: str = "nvidia.com/gpu") -> list[dict[str, Any]]:
    out = []
    for t in templates(obj):
        for c in t["spec"]["containers"]:
            if pool_gpu in ((c.get("resources") or {}).get("limits") or {}):
                out.append({e["name"]: e for e in c.get("env") or ()})
    return out


def test_the_webhook_intercepts_every_kind_of_the_registry() -> None:
    served = {(r["apiGroups"][0], r["apiVersions"][0], r["resources"][0]) for r in RULES}
    assert served == {(k.group, k.version, k.plural) for k in kinds.KINDS}
    assert RULES[-1]["resources"] == ["pods"]


@pytest.mark.parametrize("stem", ON)
@pytest.mark.parametrize("kind", NEW_KINDS)
def test_each_new_kind_is_injected_and_its_stored_form_settles(kind: str, stem: str) -> None:
    profile: PlatformProfile = load_profile(EXAMPLES[stem])
    pool = profile.pool(None)
    adm = Admission(profile)
    rev = review(workload(kind))
    first = answer(adm, rev, "mutate")
    assert first["allowed"], first.get("status")
    obj = jsonpatch.apply_patch(rev["request"]["object"], rv.decode_patch({"response": first}))
    envs = gpu_envs(obj)
    assert envs, "no GPU container was found in the kind's templates"
    for env in envs:
        assert env["NCCL_NET"]["value"] == pool.fabric.effective_nccl_net
        if profile.spec.storage.lustre is not None and pool.lustre:
            if kind == "LeaderWorkerSet":  # each replica group is a job: <name>/<group index>
                assert env["FG_JOB"]["value"] == "$(FG_WORKLOAD)/$(FG_GROUP)"
                assert env["FG_GROUP"]["valueFrom"]["fieldRef"]["fieldPath"] == \
                    "metadata.labels['leaderworkerset.sigs.k8s.io/group-index']"
            else:
                label = kinds.BY_KIND[kind].job_label
                assert env["FG_JOB"]["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.labels['{label}']"
    labels = obj["metadata"]["labels"]
    assert labels["fabricguard.io/pool"] == pool.name and labels["fabricguard.io/managed"] == "true"
    for t in templates(obj):  # every template is still a pod the API server accepts
        check({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml-team",
                                                               **(t.get("metadata") or {})}, "spec": t["spec"]})
    kept = stored(obj)
    for again in (kept, kueue_suspend(kept)):
        for endpoint in ("mutate", "validate", "review"):
            resp = answer(adm, {**rev, "request": {**rev["request"], "object": again}}, endpoint)
            assert resp["allowed"], (endpoint, resp.get("status"))
            assert rv.decode_patch({"response": resp}) == [], (endpoint, kind)


def test_a_single_node_lws_group_of_one_pod_is_left_alone() -> None:
    profile = load_profile(EXAMPLES["onprem-infiniband"])
    obj = workload("LeaderWorkerSet")
    obj["spec"] = {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": {"containers": [
        {"name": "w", "image": obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"],
         "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}
    resp = answer(Admission(profile), review(obj), "mutate")
    assert resp["allowed"] and rv.decode_patch({"response": resp}) == []


@pytest.mark.parametrize(("kind", "path", "words"), [
    ("LeaderWorkerSet", ("spec", "leaderWorkerTemplate", "size"), "spec.leaderWorkerTemplate.size"),
    ("MPIJob", ("spec", "mpiReplicaSpecs", "Worker", "replicas"), "spec.mpiReplicaSpecs.Worker.replicas"),
    ("RayJob", ("spec", "rayClusterSpec", "workerGroupSpecs"), "spec.rayClusterSpec.workerGroupSpecs"),
])
def test_a_malformed_object_is_refused_naming_the_field(kind: str, path: tuple[str, ...], words: str) -> None:
    profile = load_profile(EXAMPLES["onprem-infiniband"])
    obj = workload(kind)
    cur = obj
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = "many"
    resp = answer(Admission(profile), review(obj), "mutate")
    assert not resp["allowed"] and words in resp["status"]["message"]
