"""Verdicts on finished managed jobs, and canaries skipped on a saturated pool (kmock, real HTTP, --now)."""

from __future__ import annotations

import shutil
from datetime import timedelta

from controller_support import (
    FVS,
    JOBSETS,
    NOW,
    ROCE_LOGS,
    SOCKET_LOGS,
    canaries,
    live,
    run_once,
)

ANN = "fabricguard.io/verdict"


def _managed_jobset(name: str, *, finished: bool) -> dict:
    conds = [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
              "lastTransitionTime": "2025-09-30T11:50:00Z"}] if finished else []
    return {"metadata": {"name": name, "namespace": "ml-training", "uid": f"uid-{name}",
                         "creationTimestamp": "2025-09-30T10:00:00Z",
                         "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": "gh200-roce",
                                    "kueue.x-k8s.io/queue-name": "gh200"}},
            "spec": {"replicatedJobs": []}, "status": {"conditions": conds}}


async def test_finished_jobs_get_a_verdict_once_and_missing_logs_are_said(cluster, profile_path, lustre) -> None:
    k8s, kc = cluster
    for name, finished in (("llama-sockets", True), ("llama-roce", True), ("llama-nologs", True),
                           ("llama-running", False)):
        k8s.objects[JOBSETS, "ml-training", name] = _managed_jobset(name, finished=finished)
    for name, logs in (("llama-sockets", SOCKET_LOGS), ("llama-roce", ROCE_LOGS), ("llama-running", ROCE_LOGS)):
        d = lustre / "ml-training" / name / ".fabricguard" / "nccl"  # where the webhook's NCCL_DEBUG_FILE writes
        d.mkdir(parents=True)
        for f in logs:
            shutil.copy(f, d / f.name)
    await run_once(kc, profile_path, NOW, lustre)
    got = {js["metadata"]["name"]: js for js in live(k8s, JOBSETS) if js["metadata"]["namespace"] == "ml-training"}
    assert got["llama-sockets"]["metadata"]["annotations"][ANN] == "degraded"
    assert "TCP sockets" in got["llama-sockets"]["metadata"]["annotations"]["fabricguard.io/verdict-detail"]
    assert got["llama-roce"]["metadata"]["annotations"][ANN] == "pass"
    assert got["llama-nologs"]["metadata"]["annotations"][ANN] == "missing-logs"
    assert "missing" in got["llama-nologs"]["metadata"]["annotations"]["fabricguard.io/verdict-detail"]
    assert ANN not in (got["llama-running"]["metadata"].get("annotations") or {})
    events = {e["involvedObject"]["name"]: e for e in live(k8s, "v1/events")
              if e["involvedObject"].get("kind") == "JobSet"}
    assert events["llama-sockets"]["reason"] == "JobVerdict" and events["llama-sockets"]["type"] == "Warning"
    assert events["llama-roce"]["type"] == "Normal"
    # The annotation is the record: a later pass (or a restarted controller) does not judge them again.
    before = len([r for r in list(k8s) if r.method.value.upper() == "PATCH" and "/jobsets/" in r.url.path])
    await run_once(kc, profile_path, NOW + timedelta(seconds=30), lustre)
    after = len([r for r in list(k8s) if r.method.value.upper() == "PATCH" and "/jobsets/" in r.url.path])
    assert after == before


async def test_saturated_pool_skips_and_then_goes_stale(cluster, profile_path, lustre) -> None:
    k8s, kc = cluster
    # Every GPU of the pool is taken by running pods: no canary can start.
    for key in list(k8s.objects):
        res, _ns, name = key
        if getattr(res, "plural", None) == "nodes" and "gh200" in name:
            k8s.objects[key].patch({"status": {"allocatable": {"nvidia.com/gpu": "0"}}})
    _rc, doc = await run_once(kc, profile_path, NOW, lustre)
    assert canaries(k8s) == []
    (fv,) = live(k8s, FVS)
    run = fv["status"]["runs"][0]
    assert run["outcome"] == "skipped" and "pool saturated" in run["message"]
    pool = doc["pools"]["gh200-roce"]
    assert pool["ready"] is False and pool["latest"] == "skipped" and pool["outcome"] is None
    assert "no canary has finished yet" in pool["message"] and "pool saturated" in pool["message"]
    # Within the interval nothing new is recorded; after it, another skip.
    await run_once(kc, profile_path, NOW + timedelta(minutes=5), lustre)
    assert len(live(k8s, FVS)[0]["status"]["runs"]) == 1
    await run_once(kc, profile_path, NOW + timedelta(minutes=10), lustre)
    assert [r["outcome"] for r in live(k8s, FVS)[0]["status"]["runs"]] == ["skipped", "skipped"]


async def test_a_jobset_that_never_gets_pods_is_reported_as_such(cluster, profile_path, lustre) -> None:
    from controller_support import jobset_created

    k8s, kc = cluster
    await run_once(kc, profile_path, NOW, lustre)
    (js,) = canaries(k8s)
    jobset_created(k8s, js, NOW)  # and nothing else happens: no JobSet controller made its pods
    _rc, doc = await run_once(kc, profile_path, NOW + timedelta(minutes=4), lustre)
    # Its own outcome: nothing reached the scheduler, so nothing blames the device plugin.
    assert doc["pools"]["gh200-roce"]["outcome"] == "not-created"
    assert "is the JobSet controller running" in doc["pools"]["gh200-roce"]["message"]


def test_a_judged_job_exports_its_median_step_next_to_the_pools_baseline(tmp_path) -> None:
    from pathlib import Path

    from controller_support import PROFILE

    from fabricguard.controller.actions import Counters
    from fabricguard.controller.jobs import judge_finished
    from fabricguard.controller.metrics import Metrics
    from fabricguard.controller.reconcile import PassResult
    from fabricguard.profile import loads_profile

    prof = loads_profile(PROFILE.replace("baseline: {allReduceBusBwGBps: 45}",
                                         "baseline: {allReduceBusBwGBps: 45, stepTimeSeconds: 6.07}"))
    job = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "socket-fallback"
    d = tmp_path / "ml-training" / "llama-steps" / ".fabricguard" / "nccl"
    shutil.copytree(job, d)
    counters = Counters()
    js = _managed_jobset("llama-steps", finished=True)
    from fabricguard.controller.lustre import LustreFacts, load_jobs

    facts = LustreFacts(tmp_path)
    load_jobs(facts, prof, {"JobSet": [js]})  # the edge reads the logs; judging them is pure
    judge_finished(prof, "JobSet", "jobset.x-k8s.io/v1alpha2", "jobsets", js, facts, NOW, counters)
    ((ns, name, pool, median),) = counters.job_steps
    assert (ns, name, pool) == ("ml-training", "llama-steps", "gh200-roce") and round(median, 2) == 12.36
    m = Metrics()
    m.observe(prof, PassResult(NOW, [], {}, [], {}, counters), 0.1, 0)
    labels = {"namespace": "ml-training", "job": "llama-steps", "pool": "gh200-roce"}
    assert round(m.registry.get_sample_value("fabricguard_job_step_median_seconds", labels), 2) == 12.36
    assert m.registry.get_sample_value("fabricguard_pool_step_baseline_seconds", {"pool": "gh200-roce"}) == 6.07
    # The job's own verdict, for the dashboard's job view (issue 30): degraded, over sockets.
    assert counters.job_verdict_of == [("ml-training", "llama-steps", "gh200-roce", "degraded", "socket")]
    assert m.registry.get_sample_value("fabricguard_job_verdict", labels | {"verdict": "degraded",
                                                                            "transport": "socket"}) == 1
