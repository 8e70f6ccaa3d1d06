"""One job's files cannot stop a pass (issue 17 §2), on kmock over real HTTP with ``controller --once``.

A finished job's directory and a running job's NCCL log directory are written by the tenant's pods. Before: one
deeply nested line in a finished job's ``steps.jsonl`` raised RecursionError and every pass failed (no canary,
no gate); a running job's log with NUL first bytes was skipped; a directory with more than 4,096 files stopped
discovery silently; deleted files kept their descriptors open; the liveness probe stayed green.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from controller_support import CANARY_IMAGE, JOBSETS, NOW, PROFILE, ROCE_LOGS, SOCKET_LOGS, canaries, live, run_once

from fabricguard.controller.canary import log_dir
from fabricguard.controller.live import ANN_TRANSPORT
from fabricguard.controller.metrics import FAILED_PASSES_UNHEALTHY, Metrics, serve
from fabricguard.nccl.follow import LogFollower
from fabricguard.profile import loads_profile

NS, POOL = "ml-training", "gh200-roce"
ANN = "fabricguard.io/verdict"
STEPS = sorted((Path(__file__).resolve().parents[2] / "examples" / "jobs" / "rdma-healthy").glob("steps.jsonl"))


def _jobset(name: str, *, finished: bool) -> dict:
    conds = [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
              "lastTransitionTime": "2025-09-30T11:50:00Z"}] if finished else []
    return {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "creationTimestamp": "2025-09-30T10:00:00Z",
                         "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": POOL}},
            "spec": {"replicatedJobs": []}, "status": {"conditions": conds}}


def _logs_of(lustre: Path, name: str, logs: list[Path]) -> Path:
    prof = loads_profile(PROFILE)
    d = lustre / log_dir(prof, NS, name)
    d.mkdir(parents=True)
    for f in logs:
        shutil.copy(f, d / f.name)
    return d


async def test_a_deeply_nested_steps_line_gives_that_job_its_own_verdict_and_the_pass_goes_on(
        cluster, profile_path, lustre) -> None:
    k8s, kc = cluster
    for name, logs in (("llama-nested", ROCE_LOGS), ("llama-sockets", SOCKET_LOGS)):
        k8s.objects[JOBSETS, NS, name] = _jobset(name, finished=True)
        d = _logs_of(lustre, name, logs)
        if name == "llama-nested":
            (d / "steps.jsonl").write_text(STEPS[0].read_text() + "[" * 100_000 + "]" * 100_000 + "\n")
    rc, doc = await run_once(kc, profile_path, NOW, lustre)
    assert doc["errors"] == [] and rc == 1, doc
    got = {js["metadata"]["name"]: js["metadata"].get("annotations") or {} for js in live(k8s, JOBSETS)
           if js["metadata"]["namespace"] == NS}
    assert got["llama-nested"][ANN] == "input-unusable"
    detail = got["llama-nested"]["fabricguard.io/verdict-detail"]
    assert "steps.jsonl:41" in detail and "nested too deeply" in detail, detail
    assert got["llama-sockets"][ANN] == "degraded"  # judged in the same pass, on its own
    assert len(canaries(k8s)) == 1  # the pass went on to the canary
    assert doc["pools"][POOL]["heldWorkloads"] == 1  # ... and to the gate


@pytest.mark.slow
async def test_running_jobs_nul_led_log_and_too_many_files_are_followed_or_said(cluster, profile_path,
                                                                               lustre) -> None:
    k8s, kc = cluster
    for name in ("llama-nul", "llama-crowded"):
        k8s.objects[JOBSETS, NS, name] = _jobset(name, finished=False)
    nul = _logs_of(lustre, "llama-nul", ROCE_LOGS)
    (nul / "gpu-node-002.log").write_bytes(b"\0" * 4096 + SOCKET_LOGS[0].read_bytes())
    crowded = _logs_of(lustre, "llama-crowded", [])
    for i in range(8200):
        (crowded / f"rank{i:05d}.log").write_text("x\n")
    _rc, doc = await run_once(kc, profile_path, NOW, lustre)
    assert doc["errors"] == [], doc
    ann = {js["metadata"]["name"]: js["metadata"].get("annotations") or {} for js in live(k8s, JOBSETS)
           if js["metadata"]["namespace"] == NS}
    assert ann["llama-nul"][ANN_TRANSPORT] == "socket"  # the NUL-led rank's NET/Socket lines were read
    assert ann["llama-crowded"][ANN_TRANSPORT] == "unknown"
    assert "more than 8,192 files" in ann["llama-crowded"]["fabricguard.io/transport-detail"]
    events = [e for e in live(k8s, "v1/events") if e["reason"] == "FabricLogsUnread"]
    assert [e["involvedObject"]["name"] for e in events] == ["llama-crowded"]


@pytest.mark.slow
def test_the_follower_reads_the_socket_line_in_file_5000(tmp_path: Path) -> None:
    """Before, discovery stopped at 4,096 files: the socket line in file 5,000 was never read (transport unknown)."""
    d = tmp_path / "logs"
    d.mkdir()
    for i in range(5000):
        (d / f"rank{i:05d}.log").write_text("step\n")
    (d / "rank04999.log").write_bytes(SOCKET_LOGS[0].read_bytes())
    f = LogFollower(d)
    f.poll()
    v = f.verdict()
    f.close()
    assert v.transport.value == "socket" and v.report.unread == []


def test_deleted_files_are_closed_and_their_lines_kept(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    shutil.copy(SOCKET_LOGS[0], d / "rank0.log")
    for i in range(300):
        (d / f"worker{i}.log").write_text("line\n")
    f = LogFollower(d)
    f.poll()

    def fds() -> int:
        return sum(1 for p in Path("/proc/self/fd").iterdir()
                   if os.path.realpath(p).startswith(str(d)))

    # No descriptor is held between polls (before: one per file, and 3,000 deleted files kept 3,006 open).
    assert fds() == 0
    for i in range(300):
        (d / f"worker{i}.log").unlink()
    (d / "rank0.log").unlink()
    f.poll()
    assert fds() == 0
    assert f.poll().files == 0  # the deleted files' state is freed: only their names stay, in the report
    v = f.verdict()
    assert v.transport.value == "socket" and str(d / "rank0.log") in v.report.files  # what was read stays
    f.close()


def test_the_follower_reads_a_line_of_a_link_out_of_the_directory_never(tmp_path: Path) -> None:
    other = tmp_path / "tenant-b"
    other.mkdir()
    (other / "rank0.log").write_bytes(SOCKET_LOGS[0].read_bytes())
    d = tmp_path / "tenant-a"
    d.mkdir()
    shutil.copy(ROCE_LOGS[0], d / "rank0.log")
    (d / "rank1.log").symlink_to(other / "rank0.log")
    f = LogFollower(d)
    f.poll()
    v = f.verdict()
    f.close()
    assert v.transport.value != "socket"
    assert [(Path(e.file).name, e.why) for e in v.report.unread] == [
        ("rank1.log", "is a link that leads outside the job's directory: not followed")]
    assert not any("tenant-b" in e.file for e in v.report.evidence)


async def test_the_liveness_probe_reports_passes_that_keep_failing(cluster, profile_path, lustre) -> None:
    """The API answers every JobSet list with 500: each pass fails; after three in a row /healthz says 503."""
    from fabricguard.controller.runner import RunConfig, run_forever
    from fabricguard.profile import load_profile

    k8s, kc = cluster
    k8s["get", "/apis/jobset.x-k8s.io/v1alpha2/jobsets"] << 500
    metrics = Metrics()
    httpd = serve(metrics, 0, "127.0.0.1")
    url = f"http://127.0.0.1:{httpd.server_port}"
    cfg = RunConfig(load_profile(profile_path), image=CANARY_IMAGE, kubeconfig=kc, lustre_root=lustre,
                    identity="solo", resync_s=0.2, min_gap_s=0.1, lease_s=30)
    stop = asyncio.Event()
    loop = asyncio.create_task(run_forever(cfg, metrics, stop))
    try:
        assert urllib.request.urlopen(url + "/healthz").status == 200
        for _ in range(150):
            await asyncio.sleep(0.1)
            if metrics.failed_passes._value.get() >= FAILED_PASSES_UNHEALTHY:
                break
        try:
            urllib.request.urlopen(url + "/healthz")
            raise AssertionError("the liveness probe stayed green while every pass failed")
        except urllib.error.HTTPError as e:
            assert e.code == 503
            assert "reconcile passes failed" in e.read().decode()
        text = urllib.request.urlopen(url + "/metrics").read().decode()
        assert "fabricguard_reconcile_consecutive_failures" in text
    finally:
        stop.set()
        await loop
        httpd.shutdown()


def _linked_into_other_tenant(tmp_path: Path, where: str) -> tuple[Path, Path]:
    """team-b's job folder with its NCCL logs, and ``ml-training/llama-link`` whose ``where`` part (``job``: the
    job's folder, ``logs``: a folder inside it) is a relative link into team-b's."""
    from fabricguard.controller.canary import job_dir

    prof = loads_profile(PROFILE)
    lustre = tmp_path / "lustre"
    _logs_of(lustre, "llama-roce", ROCE_LOGS)  # the namespace's folder exists, with a job of its own
    theirs = lustre / log_dir(prof, "team-b", "secret")
    theirs.mkdir(parents=True)
    shutil.copy(SOCKET_LOGS[0], theirs / "rank0.log")
    mine = lustre / job_dir(prof, NS, "llama-link")
    if where == "job":
        link, target = mine, lustre / job_dir(prof, "team-b", "secret")
    else:
        link, target = lustre / log_dir(prof, NS, "llama-link"), theirs
        link.parent.mkdir(parents=True)
    link.symlink_to(os.path.relpath(target, link.parent))
    return lustre, theirs


@pytest.mark.parametrize("where", ["job", "logs"])
def test_a_job_folder_linked_into_another_tenants_is_never_read(tmp_path: Path, where: str) -> None:
    """Before: ``ml-training/llama-link -> ../team-b/secret`` was followed by all three readers (the finished
    job's verdict, the live follower, the Inspector follower), and team-b's NCCL line was quoted in this job's
    annotation."""
    from fabricguard.controller.facts import RunningJob
    from fabricguard.controller.live import LiveJobs
    from fabricguard.controller.lustre import read_job
    from fabricguard.verdict.job import JobInputError

    prof = loads_profile(PROFILE)
    lustre, theirs = _linked_into_other_tenant(tmp_path, where)
    files = read_job(prof, prof.pool(POOL), NS, "llama-link", lustre)
    assert isinstance(files.error, JobInputError) and "is a link" in str(files.error), files
    assert files.verdict is None
    followers = LiveJobs(prof, lustre)
    job = RunningJob("JobSet", "jobset.x-k8s.io/v1alpha2", "jobsets", NS, "llama-link", POOL,
                     _jobset("llama-link", finished=False))
    followers.sync([job])
    [ob] = followers.poll()
    followers.close()
    assert ob.verdict.transport.value == "unknown"
    assert "is a link" in ob.verdict.report.unread[0].why
    assert not any(str(theirs) in e.file or "team-b" in e.file for e in ob.verdict.report.evidence)
    # The tenant's own, unlinked job is still read.
    assert read_job(prof, prof.pool(POOL), NS, "llama-roce", lustre).verdict is not None
