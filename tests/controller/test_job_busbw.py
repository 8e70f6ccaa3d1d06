"""A running job's collectives from NCCL's Inspector: followed like its logs, judged against the pool's floor.

The records are the plugin's real JSON line format (tests/inspector_records.py), appended dump by dump between
controller polls; the followers, metrics and actions are the controller's own; the alert is judged by promtool on
the series those metrics produced; the replay runs the controller's passes against kmock's emulator.
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from controller_support import (
    FVS,
    JOBSETS,
    NOW,
    PROFILE,
    ROCE_LOGS,
    canaries,
    jobset_created,
    jobset_finishes,
    live,
    pods_run,
    ranks_wrote,
    run_once,
)
from promtool_support import run_promtool_tests

from fabricguard.controller.alerts import rule_groups
from fabricguard.controller.busbw import ANN_BUSBW, ANN_BUSBW_STATE, busbw_actions
from fabricguard.controller.canary import log_dir
from fabricguard.controller.live import LiveJobs, running_jobs
from fabricguard.controller.metrics import Metrics
from fabricguard.controller.outcome import Outcome, judge_canary
from fabricguard.profile import loads_profile
from inspector_records import Job

NS, JOB, POOL = "ml-search", "llm-sft", "gh200-roce"  # baseline 45 GB/s, floor 36
INSPECTOR = "  inspector: {delivery: hostPath, hostPath: /opt/nccl-inspector, belowFloorFor: 5m}\n"
PROFILE_INS = PROFILE.replace("spec:\n", "spec:\n" + INSPECTOR, 1)
HEALTHY = {"AllReduce": 44.0, "AllGather": 43.0, "ReduceScatter": 43.0}
SLOW = {"AllReduce": 21.0, "AllGather": 43.0, "ReduceScatter": 42.0}  # one collective is slow


def _jobset(name: str = JOB) -> dict:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": POOL}},
            "spec": {"replicatedJobs": []}, "status": {"conditions": []}}


def _dump_dir(lustre: Path, name: str = JOB) -> Path:
    return lustre / NS / name / ".fabricguard" / "inspector"


def _job(busbw: dict[str, float]) -> Job:
    return Job(name=JOB, nodes=2, gpus=1, busbw=busbw)


def test_a_slow_collective_is_told_after_below_floor_for_and_once(tmp_path: Path) -> None:
    prof = loads_profile(PROFILE_INS)
    lj = LiveJobs(prof, tmp_path)
    lj.sync(running_jobs(prof, {"JobSet": [_jobset()]}))
    d = _dump_dir(tmp_path)
    told: list[str] = []
    reported = None
    for minute in range(14):
        _job(HEALTHY if minute < 4 else SLOW).write(d, 1, first=minute)
        (ob,) = lj.poll()
        assert ob.busbw is not None and ob.busbw.floor_gbps == 36.0
        actions = busbw_actions(ob.job, ob.busbw, reported, NOW + timedelta(minutes=minute))
        if actions:
            annotate, emit = actions
            reported = annotate.annotations[ANN_BUSBW_STATE]
            told.append(f"{minute}:{emit.body['reason']}:{annotate.annotations[ANN_BUSBW]}")
    # Below from minute 4; the 5-minute threshold is met at minute 8 (4..8), told once.
    (first,) = told
    assert first.startswith("8:FabricBusBwBelowFloor:AllReduce 21.")
    assert "below for 5 min" in first and "floor 36.0 GB/s" in first
    fig = ob.busbw.figures
    assert fig[("AllReduce", 1)].below_minutes == 10 and fig[("AllGather", 1)].below_minutes == 0
    # Every byte once; the intra-node TP communicator is not the fabric (gpus=1 writes none here).
    assert lj.cost.inspector_bytes_total == sum(p.stat().st_size for p in d.iterdir())
    assert lj.cost.inspector_files == 2
    # Back above the floor: told once, quietly.
    _job(HEALTHY).write(d, 1, first=14)
    (ob,) = lj.poll()
    annotate, emit = busbw_actions(ob.job, ob.busbw, reported, NOW)
    assert annotate.annotations[ANN_BUSBW_STATE] == "ok" and emit.body["type"] == "Normal"
    assert busbw_actions(ob.job, ob.busbw, "ok", NOW) == []


def test_jobs_without_the_plugin_are_not_followed_for_it(tmp_path: Path) -> None:
    prof = loads_profile(PROFILE)
    lj = LiveJobs(prof, tmp_path)
    lj.sync(running_jobs(prof, {"JobSet": [_jobset()]}))
    _job(SLOW).write(_dump_dir(tmp_path), 10)
    (ob,) = lj.poll()
    assert ob.busbw is None and lj.cost.inspector_bytes_total == 0


@pytest.mark.external
def test_the_metric_series_raise_the_below_floor_alert_after_its_for(tmp_path: Path) -> None:
    """Records appended minute by minute -> the controller's metrics -> promtool fires the alert on time."""
    prof = loads_profile(PROFILE_INS)
    metrics = Metrics()
    lj = LiveJobs(prof, tmp_path)
    lj.sync(running_jobs(prof, {"JobSet": [_jobset()]}))
    d = _dump_dir(tmp_path)
    values: dict[str, list[str]] = {}
    floor: list[str] = []
    for minute in range(16):
        _job(HEALTHY if minute < 3 else SLOW).write(d, 1, first=minute)
        metrics.observe_live(prof, lj.poll(), lj.cost)
        for c in ("AllReduce", "AllGather"):
            v = metrics.registry.get_sample_value("fabricguard_job_busbw_gbps",
                                                  {"namespace": NS, "job": JOB, "collective": c,
                                                   "ranks_per_node": "1"})
            values.setdefault(c, []).append(f"{v:g}")
        floor.append(f"{metrics.registry.get_sample_value('fabricguard_job_busbw_floor_gbps', {'namespace': NS, 'job': JOB, 'pool': POOL, 'ranks_per_node': '1'}):g}")
    # The exported value is the median of the latest 5 minutes: it crosses the floor when slow minutes dominate.
    ar = [float(v) for v in values["AllReduce"]]
    crossed = next(i for i, v in enumerate(ar) if v < 36.0)
    assert crossed == 5 and ar[2] > 40 and ar[-1] < 22
    series = [{"series": f'fabricguard_job_busbw_gbps{{namespace="{NS}",job="{JOB}",collective="{c}",ranks_per_node="1"}}',
               "values": " ".join(v)} for c, v in values.items()]
    series.append({"series": f'fabricguard_job_busbw_floor_gbps{{namespace="{NS}",job="{JOB}",pool="{POOL}",ranks_per_node="1"}}',
                   "values": " ".join(floor)})
    alert = {"severity": "warning", "namespace": NS, "job": JOB, "collective": "AllReduce", "pool": POOL,
             "ranks_per_node": "1"}
    r = run_promtool_tests(tmp_path, rule_groups(prof), [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [
            {"eval_time": f"{crossed + 4}m", "alertname": "FabricguardJobBusBwBelowFloor", "exp_alerts": []},
            {"eval_time": f"{crossed + 5}m", "alertname": "FabricguardJobBusBwBelowFloor",
             "exp_alerts": [{"exp_labels": alert}]},
        ]}])
    assert r.returncode == 0, r.stdout + r.stderr


def _job_running(k8s, tmp_path: Path, lustre: Path) -> tuple[Path, Path]:
    """The Inspector profile on disk and the training JobSet stored; returns the profile's path and the (empty)
    folder the job's NCCL logs go to."""
    prof_path = tmp_path / "ins.yaml"
    prof_path.write_text(PROFILE_INS)
    k8s.objects[JOBSETS, NS, JOB] = {k: v for k, v in _jobset().items() if k not in ("kind", "apiVersion")}
    logs = lustre / log_dir(loads_profile(PROFILE_INS), NS, JOB)
    logs.mkdir(parents=True)
    return prof_path, logs


async def test_a_replay_against_the_emulator_annotates_and_tells_the_slow_job(cluster, tmp_path, lustre) -> None:
    """The controller's own passes (``controller --once``) over kmock while the job's ranks keep dumping."""
    k8s, kc = cluster
    prof_path, logs = _job_running(k8s, tmp_path, lustre)
    for f in ROCE_LOGS:
        shutil.copy(f, logs / f.name)
    d = _dump_dir(lustre)
    for minute in range(6):  # healthy for 2 minutes, then slow for 4: not yet belowFloorFor (5m)
        _job(HEALTHY if minute < 2 else SLOW).write(d, 1, first=minute)
    _rc, doc = await run_once(kc, prof_path, NOW + timedelta(minutes=5), lustre)
    (running,) = doc["running"]
    ar = next(b for b in running["busbw"] if b["collective"] == "AllReduce")
    assert ar["below_minutes"] == 4 and ar["ranks_per_node"] == 1 and ar["floor_gbps"] == 36.0
    assert running["busbw_floor_gbps"] == 36.0
    (js,) = [j for j in live(k8s, JOBSETS) if j["metadata"]["name"] == JOB]
    assert ANN_BUSBW_STATE not in js["metadata"].get("annotations", {})
    _job(SLOW).write(d, 1, first=6)  # the fifth slow minute
    _rc, doc = await run_once(kc, prof_path, NOW + timedelta(minutes=6), lustre)
    (js,) = [j for j in live(k8s, JOBSETS) if j["metadata"]["name"] == JOB]
    assert js["metadata"]["annotations"][ANN_BUSBW_STATE] == "below"
    anns = js["metadata"]["annotations"]
    assert anns[ANN_BUSBW].startswith("AllReduce 21.") and anns["fabricguard.io/transport"] == "roce"
    events = [e for e in live(k8s, "v1/events") if e["involvedObject"].get("name") == JOB]
    assert [e["reason"] for e in events if "BusBw" in e["reason"]] == ["FabricBusBwBelowFloor"]
    (ev,) = [e for e in events if e["reason"] == "FabricBusBwBelowFloor"]
    assert ev["type"] == "Warning" and "floor 36.0 GB/s" in ev["message"]
    # Another pass: the annotation says it was told, so nothing is told twice.
    _job(SLOW).write(d, 1, first=7)
    await run_once(kc, prof_path, NOW + timedelta(minutes=7), lustre)
    events = [e for e in live(k8s, "v1/events") if e["involvedObject"].get("name") == JOB]
    assert [e["reason"] for e in events if "BusBw" in e["reason"]] == ["FabricBusBwBelowFloor"]


def test_the_canary_result_carries_the_inspectors_figures(tmp_path: Path) -> None:
    prof = loads_profile(PROFILE_INS)
    js = {"metadata": {"name": "fgc-gh200-roce-1"}}
    job = ranks_wrote(tmp_path, js, ROCE_LOGS, busbw=44.0)
    Job(name="fgc-gh200-roce-1", nodes=2, gpus=1, busbw=HEALTHY).write(job / ".fabricguard" / "inspector", 2)
    j = judge_canary(prof, prof.pool(POOL), job, job / ".fabricguard" / "nccl", job / ".fabricguard" / "canary")
    assert j.outcome is Outcome.passed, j.message
    assert set(j.inspector) == {"AllReduce", "AllGather", "ReduceScatter"} and 43 < j.inspector["AllReduce"] < 45
    assert "; Inspector " in j.message and "AllReduce 44." in j.message
    # A canary whose own collectives are slow is degraded by the same rule as the jobs.
    slow = ranks_wrote(tmp_path / "b", js, ROCE_LOGS, busbw=44.0)
    Job(name="fgc-gh200-roce-1", nodes=2, gpus=1, busbw=SLOW).write(slow / ".fabricguard" / "inspector", 2)
    j = judge_canary(prof, prof.pool(POOL), slow, slow / ".fabricguard" / "nccl", slow / ".fabricguard" / "canary")
    assert j.outcome is Outcome.degraded and "AllReduce busbw 2" in j.message
    assert json.dumps(j.inspector)


def test_the_canary_gets_the_inspector_exactly_as_the_jobs_do() -> None:
    from fabricguard.admission.mutate import mutate_workload
    from fabricguard.admission.workloads import locate
    from fabricguard.controller.canary import render_canary, spec_for

    prof = loads_profile(PROFILE_INS)
    pool = prof.pool(POOL)
    js = render_canary(prof, pool, spec_for(prof, pool, "fabricguard-system", NOW), image="img@sha256:" + "a" * 64,
                       owner=None)
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["NCCL_INSPECTOR_ENABLE"] == "1" and env["NCCL_PROFILER_PLUGIN"].endswith("libnccl-profiler-inspector.so")
    assert env["NCCL_INSPECTOR_DUMP_DIR"] == "/mnt/lustre/.fabricguard/inspector"
    assert any(v["name"] == "fabricguard-inspector" for v in pod["volumes"])
    again = mutate_workload(locate(js, "JobSet", "fabricguard-system"), prof, pool)
    assert again.allowed and again.patch == []


def test_the_real_plugins_records_drive_the_live_metric(tmp_path: Path) -> None:
    """The 2.30.7 plugin's own bytes (tests/fixtures/inspector/README.md), arriving in pieces as stdio flushes them."""
    gke = (Path(__file__).resolve().parents[2] / "examples" / "profiles" / "gke-a3-ultra.yaml").read_text()
    # The plugin's run had 2 ranks per node: on 2-GPU nodes that is the canary's shape, held to the pool's floor.
    gke = gke.replace("gpusPerNode: 8", "gpusPerNode: 2", 1)
    prof = loads_profile(gke.replace("spec:\n", "spec:\n" + INSPECTOR, 1))
    job = {**_jobset(), "metadata": {**_jobset()["metadata"], "labels": {
        "fabricguard.io/managed": "true", "fabricguard.io/pool": "h200-rdma"}}}
    lj = LiveJobs(prof, tmp_path)
    lj.sync(running_jobs(prof, {"JobSet": [job]}))
    d = _dump_dir(tmp_path)
    d.mkdir(parents=True)
    metrics = Metrics()
    src = Path(__file__).resolve().parents[1] / "fixtures" / "inspector" / "v2.30.7-plugin-slow"
    blobs = {f.name: f.read_bytes() for f in sorted(src.iterdir())}
    for i in range(0, max(map(len, blobs.values())), 4096):
        for name, b in blobs.items():
            with (d / name).open("ab") as out:
                out.write(b[i : i + 4096])
        metrics.observe_live(prof, lj.poll(), lj.cost)
    labels = {"namespace": NS, "job": JOB}
    v = metrics.registry.get_sample_value("fabricguard_job_busbw_gbps", {**labels, "collective": "AllReduce",
                                                                          "ranks_per_node": "2"})
    floor = metrics.registry.get_sample_value("fabricguard_job_busbw_floor_gbps",
                                              {**labels, "pool": "h200-rdma", "ranks_per_node": "2"})
    assert v is not None and 119 < v < 121 and floor == 284.0
    assert lj.cost.inspector_bytes_total == sum(map(len, blobs.values()))


async def test_a_canary_replayed_on_the_emulator_records_the_inspectors_figure(cluster, tmp_path, lustre) -> None:
    """The pool's FabricValidation keeps the canary's Inspector busbw beside the probe's: one instrument."""
    k8s, kc = cluster
    prof_path = tmp_path / "ins.yaml"
    prof_path.write_text(PROFILE_INS)
    await run_once(kc, prof_path, NOW, lustre)
    (js,) = canaries(k8s)
    env = {e["name"]: e.get("value") for e in
           js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NCCL_INSPECTOR_ENABLE"] == "1"
    js = jobset_created(k8s, js, NOW)
    pods_run(k8s, js, ["prd-gh200-02", "prd-gh200-03"])
    job = ranks_wrote(lustre, js, ROCE_LOGS, busbw=44.0)
    Job(name=js["metadata"]["name"], nodes=2, gpus=1, busbw=HEALTHY).write(job / ".fabricguard" / "inspector", 2)
    jobset_finishes(k8s, js, NOW + timedelta(minutes=3))
    _rc, doc = await run_once(kc, prof_path, NOW + timedelta(minutes=3, seconds=30), lustre)
    assert doc["pools"][POOL]["outcome"] == "passed", doc["pools"][POOL]
    assert "; Inspector " in doc["pools"][POOL]["message"]
    (fv,) = live(k8s, FVS)
    run = fv["status"]["runs"][0]
    assert set(run["inspectorBusbwGBps"]) == {"AllReduce", "AllGather", "ReduceScatter"}
    assert 43 < run["inspectorBusbwGBps"]["AllReduce"] < 45 and run["busbwGBps"]["all_reduce"] == 44.0


def test_a_dump_dir_linked_to_another_tenants_job_is_not_read(tmp_path: Path) -> None:
    prof = loads_profile(PROFILE_INS)
    other = tmp_path / "other-team" / "secret-job" / ".fabricguard" / "inspector"
    _job(SLOW).write(other, 3)
    mine = _dump_dir(tmp_path)
    mine.parent.mkdir(parents=True)
    mine.symlink_to(other, target_is_directory=True)  # the tenant's own pods can write any link there
    lj = LiveJobs(prof, tmp_path)
    lj.sync(running_jobs(prof, {"JobSet": [_jobset()]}))
    (ob,) = lj.poll()
    # Refused at the link itself (userfiles.no_link_below, issue 25): nothing of the other team's is read, and
    # the job's reason names the link instead of its busbw being judged on nothing.
    assert ob.busbw is None and lj.cost.inspector_bytes_total == 0
    (why,) = lj.unusable.values()
    assert "is a link" in why and str(mine) in why


def test_a_job_that_stops_leaves_no_busbw_series(tmp_path: Path) -> None:
    prof = loads_profile(PROFILE_INS)
    metrics = Metrics()
    lj = LiveJobs(prof, tmp_path)
    lj.sync(running_jobs(prof, {"JobSet": [_jobset()]}))
    _job(SLOW).write(_dump_dir(tmp_path), 2)
    metrics.observe_live(prof, lj.poll(), lj.cost)
    text = metrics.exposition().decode()
    assert ('fabricguard_job_busbw_gbps{collective="AllReduce",job="llm-sft",namespace="ml-search",'
            'ranks_per_node="1"}') in text
    lj.sync([])  # the job finished
    metrics.observe_live(prof, lj.poll(), lj.cost)
    text = metrics.exposition().decode()
    assert "fabricguard_job_busbw_gbps{" not in text and "fabricguard_job_busbw_floor_gbps{" not in text


async def test_a_running_job_with_its_own_profiler_is_told_not_measured(cluster, tmp_path, lustre) -> None:
    k8s, kc = cluster
    prof_path, logs = _job_running(k8s, tmp_path, lustre)
    for f in ROCE_LOGS:
        lines = f.read_text().splitlines(True)
        prefix = lines[3].split(" NCCL INFO ")[0]
        lines.insert(4, f"{prefix} NCCL INFO PROFILER/Plugin: Loaded my-tracer (v4)\n")
        (logs / f.name).write_text("".join(lines))
    await run_once(kc, prof_path, NOW, lustre)
    await run_once(kc, prof_path, NOW + timedelta(minutes=1), lustre)
    (js,) = [j for j in live(k8s, JOBSETS) if j["metadata"]["name"] == JOB]
    assert js["metadata"]["annotations"][ANN_BUSBW_STATE] == "own-profiler"
    assert "its own NCCL profiler plugin my-tracer" in js["metadata"]["annotations"][ANN_BUSBW]
    events = [e["reason"] for e in live(k8s, "v1/events") if e["involvedObject"].get("name") == JOB]
    assert events.count("FabricBusBwNotMeasured") == 1
