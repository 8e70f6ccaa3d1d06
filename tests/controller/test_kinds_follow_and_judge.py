"""Every workload kind of fabricguard.kinds, followed while it runs and judged when it finishes, by the same
controller code: the object as its operator keeps it (status, suspend), the logs where its pods write them
(one directory per LeaderWorkerSet group, a RayJob's under its RayCluster's name), the kind's own stop."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from controller_support import NOW, PROFILE, ROCE_LOGS, SOCKET_LOGS

from fabricguard import kinds, names
from fabricguard.controller.actions import Counters
from fabricguard.controller.canary import log_dir
from fabricguard.controller.jobs import judge_finished
from fabricguard.controller.live import ANN_TRANSPORT, LiveJobs, live_actions, running_jobs
from fabricguard.controller.lustre import LustreFacts, load_jobs
from fabricguard.profile import loads_profile

NS, NAME, POOL = "ml-training", "llama", "gh200-roce"
# Per kind: how its operator says it is finished (status as stored), and how it is suspended.
FINISHED: dict[str, dict[str, Any]] = {
    "JobSet": {"conditions": [{"type": "Completed", "status": "True"}]},
    "Job": {"conditions": [{"type": "Complete", "status": "True"}]},
    "TrainJob": {"conditions": [{"type": "Complete", "status": "True"}]},
    "RayJob": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "rayClusterName": "llama-raycluster-k2x9z"},
    "MPIJob": {"conditions": [{"type": "Created", "status": "True"}, {"type": "Succeeded", "status": "True"}]},
    "PyTorchJob": {"conditions": [{"type": "Created", "status": "True"}, {"type": "Succeeded", "status": "True"}]},
}
RUNNING: dict[str, dict[str, Any]] = {
    "RayJob": {"jobDeploymentStatus": "Running", "rayClusterName": "llama-raycluster-k2x9z"},
    "LeaderWorkerSet": {"conditions": [{"type": "Available", "status": "True"}], "readyReplicas": 2},
    "RayCluster": {"state": "ready"},
    "MPIJob": {"conditions": [{"type": "Running", "status": "True"}]},
    "PyTorchJob": {"conditions": [{"type": "Running", "status": "True"}]},
}
SUSPEND: dict[str, dict[str, Any]] = {
    "LeaderWorkerSet": {"replicas": 0},
    "MPIJob": {"runPolicy": {"suspend": True}},
    "PyTorchJob": {"runPolicy": {"suspend": True}},
}
MANAGED = [k.kind for k in kinds.MANAGED]


def obj(kind: str, *, status: dict[str, Any] | None = None, queue: bool = True, **spec: Any) -> dict[str, Any]:
    k = kinds.BY_KIND[kind]
    labels = {names.LABEL_MANAGED: "true", names.LABEL_POOL: POOL}
    if queue:
        labels[names.KUEUE_QUEUE_NAME] = "gh200"
    body = {"replicas": 2} if kind == "LeaderWorkerSet" else {}
    return {"apiVersion": k.api_version, "kind": kind,
            "metadata": {"name": NAME, "namespace": NS, "uid": f"uid-{kind}", "labels": labels},
            "spec": {**body, **spec}, "status": RUNNING.get(kind, {}) if status is None else status}


def logs_of(kind: str, o: dict[str, Any]) -> list[str]:
    """Where this kind's pods write: what FG_JOB resolves to in them."""
    k = kinds.BY_KIND[kind]
    if k.group_label:
        return [f"{NAME}/{i}" for i in range(o["spec"]["replicas"])]
    return [k.log_name(o) or "?"]


def put_logs(lustre: Path, prof, job: str, logs: list[Path]) -> None:
    d = lustre / log_dir(prof, NS, job)
    d.mkdir(parents=True, exist_ok=True)
    for f in logs:
        shutil.copy(f, d / f.name)


@pytest.mark.parametrize("kind", MANAGED)
def test_a_running_object_of_each_kind_is_followed_where_its_pods_write(kind: str, tmp_path: Path) -> None:
    prof = loads_profile(PROFILE.replace("    canary:", "    onFallback: stop\n    canary:"))
    o = obj(kind, queue=False)
    for job in logs_of(kind, o):
        put_logs(tmp_path, prof, job, SOCKET_LOGS)
    jobs = running_jobs(prof, {kind: [o]})
    assert sorted(j.job for j in jobs) == sorted(logs_of(kind, o))
    lj = LiveJobs(prof, tmp_path)
    lj.sync(jobs)
    obs = lj.poll()
    lj.close()
    assert len(obs) == len(jobs)
    for ob in obs:
        assert ob.verdict.transport.value == "socket", ob.verdict
        annotate, told, *stop = live_actions(prof, ob, None, [], NOW)
        # the object itself is annotated, whichever group's logs showed it
        assert (annotate.plural, annotate.name) == (kinds.BY_KIND[kind].plural, NAME)
        assert annotate.annotations[ANN_TRANSPORT] == "socket" and told.body["reason"] == "FabricFallback"
        patch, event = stop
        assert (patch.plural, patch.name, patch.body) == (kinds.BY_KIND[kind].plural, NAME,
                                                          kinds.BY_KIND[kind].stop_patch())
        assert event.body["reason"] == "FabricFallbackStopped"


@pytest.mark.parametrize("kind", MANAGED)
def test_suspended_finished_and_unstarted_objects_are_not_followed(kind: str) -> None:
    prof = loads_profile(PROFILE)
    k = kinds.BY_KIND[kind]
    held = obj(kind, **(SUSPEND.get(kind) or {"suspend": True}))
    assert k.suspended(held) and running_jobs(prof, {kind: [held]}) == []
    if kind in FINISHED:
        assert running_jobs(prof, {kind: [obj(kind, status=FINISHED[kind])]}) == []
    else:
        assert not k.finished(obj(kind)), f"{kind} runs until deleted"
    if kind == "RayJob":  # no RayCluster yet: nothing to follow, no directory guessed
        assert running_jobs(prof, {kind: [obj(kind, status={"jobDeploymentStatus": "Initializing"})]}) == []


@pytest.mark.parametrize("kind", MANAGED)
def test_each_finished_kind_gets_a_verdict_from_its_logs(kind: str, tmp_path: Path) -> None:
    prof = loads_profile(PROFILE)
    done = obj(kind, status=FINISHED.get(kind, RUNNING.get(kind, {})))
    for job in logs_of(kind, done):
        put_logs(tmp_path, prof, job, SOCKET_LOGS)
    facts = LustreFacts(tmp_path)
    load_jobs(facts, prof, {kind: [done]})
    k = kinds.BY_KIND[kind]
    acts = judge_finished(prof, kind, k.api_version, k.plural, done, facts, NOW, Counters())
    if kind not in FINISHED:  # a LeaderWorkerSet or RayCluster never finishes: live verdicts only
        assert facts.jobs == {} and acts == []
        return
    annotate = acts[0]
    assert (annotate.plural, annotate.name) == (k.plural, NAME)
    assert annotate.annotations[names.ANN_VERDICT] == "degraded", annotate.annotations


def test_a_healthy_lws_group_and_a_fallen_back_one_are_told_apart(tmp_path: Path) -> None:
    prof = loads_profile(PROFILE)
    o = obj("LeaderWorkerSet")
    put_logs(tmp_path, prof, f"{NAME}/0", ROCE_LOGS)
    put_logs(tmp_path, prof, f"{NAME}/1", SOCKET_LOGS)
    lj = LiveJobs(prof, tmp_path)
    lj.sync(running_jobs(prof, {"LeaderWorkerSet": [o]}))
    seen = {ob.job.job: ob.verdict.transport.value for ob in lj.poll()}
    lj.close()
    assert seen == {f"{NAME}/0": "roce", f"{NAME}/1": "socket"}
