"""fabricguard.kinds is the one list of workload kinds: every other list reads it, and each kind's readers
answer as its API defines (pods per template, finished, suspended, stop)."""

from __future__ import annotations

import pytest

from fabricguard import kinds, names
from fabricguard.admission import workloads as wl
from fabricguard.controller.kube import CONTROLLER_GRANTS, CONTROLLER_RESOURCES
from fabricguard.controller.rootcause import WORKLOAD_KINDS
from fabricguard.placement.kueue import FRAMEWORKS
from fabricguard.placement.preflight import APIS
from fabricguard.workload_identity import KIND_OF_LABEL
from kind_objects import NEW_KINDS, workload


def test_every_list_of_kinds_reads_the_registry() -> None:
    assert list(FRAMEWORKS) == [k.kueue_framework for k in kinds.KINDS if k.kueue_framework]
    assert set(WORKLOAD_KINDS) >= {k.kind for k in kinds.KINDS}
    served = {(api, plural) for _a, api, plural, _w, _s in APIS}
    assert (names.JOBSET_API, "jobsets") in served  # the canaries' kind; the others are optional to a cluster
    for k in kinds.KINDS:
        assert (k.group, k.kind) in wl.KINDS
        assert k.job_label in KIND_OF_LABEL, f"the doctor cannot group {k.kind}'s pods"
    listed = {(v, p) for v, p, _k in CONTROLLER_RESOURCES}
    granted = {(g.group, g.resource, g.verb) for g in CONTROLLER_GRANTS if not g.subresource}
    for k in kinds.MANAGED:
        assert (k.api_version, k.plural) in listed
        for verb in ("list", "watch", "patch"):
            assert (k.group, k.plural, verb) in granted, (k.kind, verb)
        assert k.stop_patch() is not None, f"onFallback: stop cannot stop a {k.kind}"


@pytest.mark.parametrize(("kind", "pods"), [
    ("LeaderWorkerSet", {"the leader template": 2, "the worker template": 6}),
    ("RayJob", {"the Ray head": 1, "Ray worker group gpu": 4}),
    ("RayCluster", {"the Ray head": 1, "Ray worker group gpu": 4}),
    ("MPIJob", {"the Launcher replicas": 1, "the Worker replicas": 4}),
    ("PyTorchJob", {"the Master replicas": 1, "the Worker replicas": 3}),
])
def test_pods_per_template_as_each_api_defines_them(kind: str, pods: dict[str, int]) -> None:
    obj = workload(kind)
    assert {r.where: r.pods for r in kinds.BY_KIND[kind].templates(obj)} == pods
    w = wl.locate(obj, kind)
    assert wl.is_multi_node(w, "nvidia.com/gpu", 8)


def test_lws_without_leader_template_runs_size_pods_per_group_and_defaults_to_one() -> None:
    obj = workload("LeaderWorkerSet")
    del obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    [ref] = kinds.lws_templates(obj)
    assert ref.pods == 8
    del obj["spec"]["replicas"], obj["spec"]["leaderWorkerTemplate"]["size"]
    assert kinds.lws_templates(obj)[0].pods == 1


def test_ray_multi_host_groups_and_a_job_on_an_existing_cluster() -> None:
    obj = workload("RayCluster")
    obj["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 2
    assert kinds.raycluster_templates(obj)[1].pods == 8
    job = {"spec": {"clusterSelector": {"ray.io/cluster": "shared"}, "entrypoint": "python x.py"}}
    assert kinds.rayjob_templates(job) == []


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_finished_suspended_and_stop_per_kind(kind: str) -> None:
    k = kinds.BY_KIND[kind]
    obj = workload(kind)
    assert not k.finished(obj) and not k.suspended(obj)
    patch = k.stop_patch()
    assert patch is not None
    stopped = {**obj, "spec": {**obj["spec"], **patch["spec"]}}
    assert k.suspended(stopped), f"{kind}'s own stop does not read back as stopped"


def test_too_many_templates_is_refused_with_the_limit() -> None:
    obj = workload("PyTorchJob")
    tpl = obj["spec"]["pytorchReplicaSpecs"]["Worker"]
    obj["spec"]["pytorchReplicaSpecs"] = {f"R{i}": tpl for i in range(kinds.MAX_TEMPLATES + 1)}
    with pytest.raises(wl.WorkloadTooLarge, match="65 replica specs"):
        wl.locate(obj, "PyTorchJob")


def test_names_are_vocabulary() -> None:
    assert kinds.BY_KIND["LeaderWorkerSet"].group_label == names.LWS_GROUP_INDEX
