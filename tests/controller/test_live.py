"""A verdict while the job runs: real log lines appended over time, the controller's pass on kmock, the alert.

The writer is a separate process appending the socket-fallback job's real-format lines at a pace; the followers
and metrics are the controller's own; the alert is judged by promtool on the series those metrics produced.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from controller_support import JOBSETS, NOW, PROFILE, ROCE_LOGS, SOCKET_LOGS, WORKLOADS, live, run_once
from promtool_support import run_promtool_tests

from fabricguard.controller.alerts import rule_groups
from fabricguard.controller.canary import log_dir
from fabricguard.controller.live import ANN_TRANSPORT, LiveJobs, Observation, live_actions, running_jobs
from fabricguard.controller.metrics import Metrics
from fabricguard.nccl.follow import LogFollower
from fabricguard.profile import loads_profile

ROOT = Path(__file__).resolve().parents[2]
WRITER = ROOT / "tests" / "nccl" / "log_writer.py"
NS, JOB, POOL = "ml-training", "llama-live", "gh200-roce"


def _jobset(name: str = JOB, *, queue: bool = True, finished: bool = False, suspended: bool = False,
            canary: bool = False) -> dict:
    labels = {"fabricguard.io/managed": "true", "fabricguard.io/pool": POOL}
    if queue:
        labels["kueue.x-k8s.io/queue-name"] = "gh200"
    if canary:
        labels["fabricguard.io/canary-pool"] = POOL
    conds = [{"type": "Completed", "status": "True"}] if finished else []
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "labels": labels},
            "spec": {"suspend": suspended, "replicatedJobs": []}, "status": {"conditions": conds}}


def _logs(lustre: Path, profile, name: str = JOB) -> Path:
    d = lustre / log_dir(profile, NS, name)
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_only_running_managed_jobs_on_fabric_pools_are_followed() -> None:
    prof = loads_profile(PROFILE)
    jobs = running_jobs(prof, {"JobSet": [
        _jobset("a"), _jobset("done", finished=True), _jobset("held", suspended=True), _jobset("c", canary=True),
        {**_jobset("x"), "metadata": {**_jobset("x")["metadata"], "labels": {"fabricguard.io/pool": POOL}}},
    ]})
    assert [j.name for j in jobs] == ["a"]


def _observe(prof, lustre: Path, logs: list[Path]):
    d = _logs(lustre, prof)
    for f in logs:
        shutil.copy(f, d / f.name)
    lj = LiveJobs(prof, lustre)
    lj.sync(running_jobs(prof, {"JobSet": [_jobset()]}))
    (ob,) = lj.poll()
    lj.close()
    return ob


def test_sockets_on_a_fabric_pool_are_annotated_and_told(tmp_path: Path) -> None:
    prof = loads_profile(PROFILE)
    ob = _observe(prof, tmp_path, SOCKET_LOGS)
    assert ob.verdict.final
    actions = live_actions(prof, ob, None, [], NOW)
    annotate, emit = actions
    assert annotate.annotations[ANN_TRANSPORT] == "socket"
    assert "TCP sockets on fabric pool gh200-roce" in annotate.annotations["fabricguard.io/transport-detail"]
    assert emit.body["reason"] == "FabricFallback" and emit.body["type"] == "Warning"
    assert ".log:" in emit.body["message"]  # the evidence line, file and line number
    # Told once: the same transport is not written again, by this controller or after a restart.
    assert live_actions(prof, ob, "socket", [], NOW) == []
    annotated = Observation(ob.job.__class__(**{**ob.job.__dict__, "obj": {
        **ob.job.obj, "metadata": {**ob.job.obj["metadata"], "annotations": {ANN_TRANSPORT: "socket"}}}}),
        ob.verdict)
    assert live_actions(prof, annotated, None, [], NOW) == []


def test_rdma_is_recorded_quietly(tmp_path: Path) -> None:
    prof = loads_profile(PROFILE)
    ob = _observe(prof, tmp_path, ROCE_LOGS)
    annotate, emit = live_actions(prof, ob, None, [], NOW)
    assert annotate.annotations[ANN_TRANSPORT] == "roce" and emit.body["type"] == "Normal"
    assert not ob.verdict.final  # a later communicator could still fall back


def test_on_fallback_stop_deactivates_the_workload_or_suspends_the_job(tmp_path: Path) -> None:
    prof = loads_profile(PROFILE.replace("    canary:", "    onFallback: stop\n    canary:"))
    ob = _observe(prof, tmp_path, SOCKET_LOGS)
    wl = {"metadata": {"name": "jobset-llama-live-1", "namespace": NS,
                       "ownerReferences": [{"kind": "JobSet", "name": JOB, "uid": f"uid-{JOB}"}]}}
    *_, stop, told = live_actions(prof, ob, None, [wl], NOW)
    assert (stop.plural, stop.name, stop.body) == ("workloads", "jobset-llama-live-1", {"spec": {"active": False}})
    assert told.body["reason"] == "FabricFallbackStopped"
    no_queue = Observation(ob.job.__class__(**{**ob.job.__dict__, "obj": _jobset(queue=False)}), ob.verdict)
    *_, stop, _ = live_actions(prof, no_queue, None, [], NOW)
    assert (stop.plural, stop.name, stop.body) == ("jobsets", JOB, {"spec": {"suspend": True}})


@pytest.mark.external
def test_appended_socket_lines_raise_the_job_on_sockets_alert(tmp_path: Path) -> None:
    """Rank logs appended over time by another process -> the controller's metric series -> promtool alert."""
    prof = loads_profile(PROFILE)
    lustre = tmp_path / "lustre"
    d = _logs(lustre, prof)
    writer = subprocess.Popen([sys.executable, str(WRITER), str(SOCKET_LOGS[0].parent), str(d), "400"],
                              stdout=subprocess.PIPE, text=True)
    metrics = Metrics()
    lj = LiveJobs(prof, lustre)
    lj.sync(running_jobs(prof, {"JobSet": [_jobset()]}))
    labels = {"namespace": NS, "job": JOB, "pool": POOL}
    samples: list[float] = []
    try:
        # One sample per evaluation minute of the promtool test; the writer keeps appending between them.
        for _ in range(40):
            metrics.observe_live(prof, lj.poll(), lj.cost)
            samples.append(metrics.registry.get_sample_value("fabricguard_job_on_sockets", labels) or 0.0)
            if samples[-1] == 1 and len(samples) >= 3 and writer.poll() is not None:
                break
            time.sleep(0.05)
    finally:
        writer.wait(timeout=60)
        lj.close()
    first = samples.index(1.0)
    assert first >= 1 and samples[0] == 0.0  # the job was followed before its logs proved anything
    assert metrics.registry.get_sample_value("fabricguard_live_log_bytes_read_total") == sum(
        p.stat().st_size for p in d.iterdir())
    series = "fabricguard_job_on_sockets{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
    values = " ".join(f"{v:g}" for v in samples) + f" {samples[-1]:g}x10"
    alert = {"severity": "critical", **labels}
    r = run_promtool_tests(tmp_path, rule_groups(prof), [{
        "interval": "1m", "input_series": [{"series": series, "values": values}],
        "alert_rule_test": [
            {"eval_time": f"{first - 1}m" if first else "0m", "alertname": "FabricguardJobOnSockets",
             "exp_alerts": []},
            {"eval_time": f"{first}m", "alertname": "FabricguardJobOnSockets",
             "exp_alerts": [{"exp_labels": alert}]},
        ]}])
    assert r.returncode == 0, r.stdout + r.stderr


async def test_the_pass_annotates_a_running_job_and_stops_it_when_told(cluster, tmp_path, lustre) -> None:
    k8s, kc = cluster
    prof_path = tmp_path / "stop.yaml"
    prof_path.write_text(PROFILE.replace("    canary:", "    onFallback: stop\n    canary:"))
    prof = loads_profile(prof_path.read_text())
    k8s.objects[JOBSETS, NS, JOB] = {k: v for k, v in _jobset().items() if k not in ("kind", "apiVersion")}
    k8s.objects[WORKLOADS, NS, "jobset-llama-live-1"] = {
        "metadata": {"name": "jobset-llama-live-1", "namespace": NS, "uid": "wl-live",
                     "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": JOB,
                                          "uid": f"uid-{JOB}", "controller": True}]},
        "spec": {"queueName": "gh200", "active": True, "podSets": []}, "status": {}}
    d = _logs(lustre, prof)
    _rc, doc = await run_once(kc, prof_path, NOW, lustre)
    assert [r["transport"] for r in doc["running"]] == ["unknown"]  # followed before any log line
    for f in SOCKET_LOGS:
        shutil.copy(f, d / f.name)
    _rc, doc = await run_once(kc, prof_path, NOW + timedelta(minutes=1), lustre)
    assert doc["running"] == [{"kind": "JobSet", "namespace": NS, "name": JOB, "pool": POOL, "transport": "socket",
                               "final": True, "bound": "fabric", "io": None}]  # no I/O logged: sockets bound it
    (js,) = [j for j in live(k8s, JOBSETS) if j["metadata"]["name"] == JOB]
    assert js["metadata"]["annotations"][ANN_TRANSPORT] == "socket"
    (wl,) = [w for w in live(k8s, WORKLOADS) if w["metadata"]["name"] == "jobset-llama-live-1"]
    assert wl["spec"]["active"] is False  # Kueue suspends the JobSet; nothing is deleted
    reasons = sorted(e["reason"] for e in live(k8s, "v1/events") if e["involvedObject"].get("name") == JOB)
    assert reasons == ["FabricFallback", "FabricFallbackStopped"]
    assert not [r for r in list(k8s) if r.method.value.upper() == "DELETE" and JOB in r.url.path]


async def test_cronjob_mode_writes_the_per_job_series_to_its_textfile(cluster, tmp_path, lustre) -> None:
    """``controller --once --metrics-textfile``: the running job's socket series is in the file (issue 24)."""
    k8s, kc = cluster
    prof_path = tmp_path / "p.yaml"
    prof_path.write_text(PROFILE)
    prof = loads_profile(PROFILE)
    k8s.objects[JOBSETS, NS, JOB] = {k: v for k, v in _jobset().items() if k not in ("kind", "apiVersion")}
    d = _logs(lustre, prof)
    for f in SOCKET_LOGS:
        shutil.copy(f, d / f.name)
    prom = tmp_path / "fabricguard.prom"
    _rc, doc = await run_once(kc, prof_path, NOW, lustre, "--metrics-textfile", str(prom))
    assert [r["transport"] for r in doc["running"]] == ["socket"]
    text = prom.read_text()
    line = next(x for x in text.splitlines() if x.startswith("fabricguard_job_on_sockets{"))
    assert f'job="{JOB}"' in line and f'namespace="{NS}"' in line and line.endswith(" 1.0")


def test_follower_directory_is_the_webhooks(tmp_path: Path) -> None:
    # The controller follows exactly where the webhook's NCCL_DEBUG_FILE writes, under the Lustre root.
    prof = loads_profile(PROFILE)
    lj = LiveJobs(prof, tmp_path)
    (job,) = running_jobs(prof, {"JobSet": [_jobset()]})
    lj.sync([job])
    follower = lj.follower(job.key)
    assert isinstance(follower, LogFollower)
    assert follower.directory == tmp_path / "ml-training" / JOB / ".fabricguard" / "nccl"


def test_every_running_job_is_followed_past_the_old_cap_of_1000(tmp_path: Path) -> None:
    """Before, ``jobs[:1000]``: job 1,001 had no live verdict and nothing said so."""
    prof = loads_profile(PROFILE)
    jobs = [_jobset(f"job-{i:04d}") for i in range(1200)]
    shutil.copy(SOCKET_LOGS[0], _logs(tmp_path, prof, "job-1199") / "rank0.log")
    lj = LiveJobs(prof, tmp_path)
    lj.sync(running_jobs(prof, {"JobSet": jobs}))
    obs = {ob.job.name: ob for ob in lj.poll()}
    assert len(obs) == 1200 and obs["job-1199"].verdict.transport.value == "socket"
    assert (lj.cost.jobs, lj.cost.followed, lj.cost.unfollowed) == (1200, 1200, 0)
    metrics = Metrics()
    metrics.observe_live(prof, list(obs.values()), lj.cost)
    assert metrics.registry.get_sample_value("fabricguard_live_jobs_followed") == 1200
    assert metrics.registry.get_sample_value("fabricguard_live_jobs_unfollowed") == 0


def test_a_poll_over_its_budget_reads_the_least_recently_read_first_and_counts_the_late(tmp_path: Path) -> None:
    prof = loads_profile(PROFILE)
    lj = LiveJobs(prof, tmp_path, interval_s=0.05, budget_s=0.0)  # one job per poll; late after 0.1 s
    lj.sync(running_jobs(prof, {"JobSet": [_jobset(n) for n in ("a", "b", "c")]}))
    assert [ob.job.name for ob in lj.poll()] == ["a"] and lj.cost.polled == 1
    time.sleep(0.15)
    assert sorted(ob.job.name for ob in lj.poll()) == ["a", "b"]
    assert lj.cost.unfollowed == 2  # a (read 0.15 s ago) and c (never): the metric and its alert say so
    lj.poll()  # c, never read, goes before a
    assert {ob.job.name for ob in lj.poll()} == {"a", "b", "c"}
    time.sleep(0.15)
    lj.budget_s = 10.0  # time enough for all three
    lj.poll()
    assert lj.cost.polled == 3
