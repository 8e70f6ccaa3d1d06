"""A running job's I/O, seen while it runs (controller/live_io.py): its I/O phase records read as the ranks append
them, the job's ``bound`` live, and the pass on kmock writing it on the job once.

The records are the format docs/storage.md gives jobs (one JSON object per line per rank, beside the step times);
the NCCL logs are the real-format RoCE and socket-fallback fixtures.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

from controller_support import JOBSETS, NOW, PROFILE, ROCE_LOGS, SOCKET_LOGS, live, run_once

from fabricguard.controller.canary import log_dir
from fabricguard.controller.live import LiveJobs, running_jobs
from fabricguard.controller.live_io import ANN_BOUND, ANN_IO_STATE, JobIo, live_bound
from fabricguard.controller.metrics import Metrics
from fabricguard.profile import loads_profile

NS, JOB, POOL = "ml-search", "llm-sft", "gh200-roce"
# Floors: write 16,000 x 0.8 = 12,800 MB/s; read 20,000 x 0.8 = 16,000.
STORAGE_PROFILE = PROFILE.replace("baseline: {allReduceBusBwGBps: 45}",
                                  "baseline: {allReduceBusBwGBps: 45, storageWriteMBps: 16000, storageReadMBps: 20000}")
PROF = loads_profile(STORAGE_PROFILE)


def _jobset() -> dict:
    return {"metadata": {"name": JOB, "namespace": NS, "uid": f"uid-{JOB}",
                         "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": POOL}},
            "spec": {"replicatedJobs": []}, "status": {}}


def _steps(d: Path, rank: int, first: int, last: int, *, ckpt_s: float, every: int = 50,
           ckpt_bytes: int = 8 * 10**9) -> str:
    """Rank ``rank``'s records for steps first..last: 6 s steps, a checkpoint write every ``every`` steps."""
    lines = []
    for s in range(first, last + 1):
        lines.append(json.dumps({"step": s, "rank": rank, "seconds": 6.0, "loss": 2.1}))
        if s % every == 0:
            lines.append(json.dumps({"phase": "checkpoint-write", "step": s, "rank": rank, "bytes": ckpt_bytes,
                                     "seconds": ckpt_s}))
    return "\n".join(lines) + "\n"


def _append(f: Path, text: str) -> None:
    with f.open("a") as fh:
        fh.write(text)


def _followed_roce_job(root: Path) -> tuple[LiveJobs, Any, Path]:
    """A running job followed on ``root``: RoCE NCCL logs and rank 0's first 100 steps (a 120 s checkpoint)."""
    lj = LiveJobs(PROF, root)
    (job,) = running_jobs(PROF, {"JobSet": [_jobset()]})
    lj.sync([job])
    d = root / log_dir(PROF, NS, JOB)
    d.mkdir(parents=True)
    for f in ROCE_LOGS:
        shutil.copy(f, d / f.name)
    _append(d / "steps.rank0.jsonl", _steps(d, 0, 1, 100, ckpt_s=120.0))
    return lj, job, d


def test_records_are_read_as_appended_never_twice(tmp_path: Path) -> None:
    jio = JobIo(tmp_path)
    r0, r1 = tmp_path / "steps.rank0.jsonl", tmp_path / "steps.rank1.jsonl"
    _append(r0, _steps(tmp_path, 0, 1, 100, ckpt_s=120.0))
    _append(r1, _steps(tmp_path, 1, 1, 100, ckpt_s=118.0))
    jio.poll()
    s = jio.tally.summary(PROF.pool(POOL))
    assert s is not None and s.storage_bound
    (w,) = s.phases
    # Two checkpoints, each 2 ranks x 8 GB in the slowest rank's 120 s: 133 MB/s, far under the 12,800 floor.
    assert w.instances == 2 and w.seconds == 240.0 and w.bytes == 32 * 10**9 and round(w.mbps or 0) == 133
    assert s.step_seconds == 600.0 and round(s.share or 0, 3) == round(240 / 840, 3)
    # Half a line, then the rest: read once, whole.
    text = _steps(tmp_path, 0, 101, 150, ckpt_s=120.0)
    cut = len(text) - 40
    _append(r0, text[:cut])
    jio.poll()
    _append(r0, text[cut:])
    _append(r1, _steps(tmp_path, 1, 101, 150, ckpt_s=110.0))
    jio.poll()
    jio.poll()
    s = jio.tally.summary(PROF.pool(POOL))
    assert s is not None and s.phases[0].instances == 3 and s.phases[0].seconds == 360.0
    assert s.step_seconds == 900.0 and jio.bad_lines == 0


def test_a_quiet_folder_is_not_listed_again_and_a_new_rank_file_is_read(tmp_path: Path, monkeypatch) -> None:
    """The folder is listed when its mtime moves (or was too recent to trust), not on every poll."""
    jio = JobIo(tmp_path)
    _append(tmp_path / "steps.rank0.jsonl", _steps(tmp_path, 0, 1, 50, ckpt_s=120.0))
    old = os.stat(tmp_path).st_mtime - 60
    os.utime(tmp_path, (old, old))  # changed a minute ago: a listing now is to be trusted
    listings = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p: (listings.append(p), real(p))[1])
    jio.poll()
    for _ in range(5):
        jio.poll()
    assert len(listings) == 1
    _append(tmp_path / "steps.rank1.jsonl", _steps(tmp_path, 1, 1, 50, ckpt_s=118.0))  # the mtime moves
    jio.poll()
    assert len(listings) == 2
    s = jio.tally.summary(PROF.pool(POOL))
    assert s is not None and s.phases[0].instances == 1 and s.step_seconds == 300.0


def test_hostile_files_are_refused_and_named_the_rest_still_read(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"phase": "checkpoint-write", "step": 1, "seconds": 10, "bytes": 1000}\n'
                                      "not json\n" + '{"phase": "nope", "seconds": 1}\n'
                                      + '{"phase": "checkpoint-write", "step": 2, "seconds": 10, "bytes": 1000}\n'
                                      + "x" * (2 * 1024 * 1024) + "\n" + '{"step": 1, "seconds": 5}\n')
    os.mkfifo(tmp_path / "fifo.jsonl")
    (tmp_path / "link.jsonl").symlink_to("/etc/hostname")
    jio = JobIo(tmp_path)
    jio.poll()
    assert jio.records == 2 and jio.bad_lines == 3, (jio.records, jio.bad_lines, jio.problem)
    assert jio.problem  # the first one, named with its file
    s = jio.tally.summary(PROF.pool(POOL))
    assert s is not None and s.phases[0].instances == 2 and s.step_seconds == 5.0


def test_live_jobs_see_the_bound_while_the_job_runs(tmp_path: Path) -> None:
    lj, _job, _dir = _followed_roce_job(tmp_path)
    (ob,) = lj.poll()
    assert ob.verdict.transport.value == "roce" and ob.bound == "storage" and ob.io is not None
    m = Metrics()
    m.observe_live(PROF, [ob], lj.cost)
    text = m.registry.get_sample_value("fabricguard_job_bound", {"namespace": NS, "job": JOB, "pool": POOL,
                                                                  "bound": "storage"})
    assert text == 1.0
    assert m.registry.get_sample_value("fabricguard_job_io_mbps", {"namespace": NS, "job": JOB,
                                                                    "phase": "checkpoint-write"}) == 66.7


async def test_the_pass_tells_a_storage_bound_job_once_and_a_fabric_bound_one_apart(cluster, tmp_path,
                                                                                    lustre) -> None:
    k8s, kc = cluster
    prof_path = tmp_path / "p.yaml"
    prof_path.write_text(STORAGE_PROFILE)
    k8s.objects[JOBSETS, NS, JOB] = _jobset()
    d = lustre / log_dir(PROF, NS, JOB)
    d.mkdir(parents=True)
    for f in ROCE_LOGS:
        shutil.copy(f, d / f.name)
    for r in (0, 1):
        _append(d / f"steps.rank{r}.jsonl", _steps(d, r, 1, 100, ckpt_s=120.0))
    _rc, doc = await run_once(kc, prof_path, NOW, lustre)
    (row,) = doc["running"]
    assert row["transport"] == "roce" and row["bound"] == "storage", row
    assert row["io"]["storage_bound"] and row["io"]["phases"][0]["below_floor"]
    (js,) = [j for j in live(k8s, JOBSETS) if j["metadata"]["name"] == JOB]
    ann = js["metadata"]["annotations"]
    assert ann[ANN_BOUND] == "storage" and ann[ANN_IO_STATE] == "storage-bound"
    events = [e for e in live(k8s, "v1/events") if e["involvedObject"].get("name") == JOB]
    told = [e for e in events if e["reason"] == "FabricStorageBound"]
    assert len(told) == 1 and "storage-bound" in told[0]["message"] and "floor 12,800" in told[0]["message"]
    # A new controller process reads the annotation back: nothing is told twice.
    await run_once(kc, prof_path, NOW + timedelta(minutes=1), lustre)
    assert len([e for e in live(k8s, "v1/events") if e["reason"] == "FabricStorageBound"]) == 1

    # The same job with fast checkpoints and socket logs: the fabric's, not the storage's.
    other = "llm-sft-2"
    k8s.objects[JOBSETS, NS, other] = {**_jobset(), "metadata": {**_jobset()["metadata"], "name": other,
                                                                 "uid": "uid-2"}}
    d2 = lustre / log_dir(PROF, NS, other)
    d2.mkdir(parents=True)
    for f in SOCKET_LOGS:
        shutil.copy(f, d2 / f.name)
    _append(d2 / "steps.rank0.jsonl", _steps(d2, 0, 1, 100, ckpt_s=0.5))
    _rc, doc = await run_once(kc, prof_path, NOW + timedelta(minutes=2), lustre)
    row2 = next(r for r in doc["running"] if r["name"] == other)
    assert row2["transport"] == "socket" and row2["bound"] == "fabric" and not row2["io"]["storage_bound"], row2


def test_a_quiet_poll_stats_the_folder_once_and_keeps_what_it_drew_until_something_moves(tmp_path: Path,
                                                                                       monkeypatch) -> None:
    """At 50,000 jobs the quiet poll is the cost: one ``stat`` of the job's folder serves the link check, the log
    follower and the I/O follower, and the observation is kept (nothing new is made); whatever is kept equals what
    drawing it again gives, and an appended line or record is seen by the next poll."""
    lj, job, d = _followed_roce_job(tmp_path)
    old = os.stat(d).st_mtime - 60
    os.utime(d, (old, old))  # listed a minute after its last change: the listing is trusted
    jio = lj._io[job.key]

    def same_as_drawn_again(ob) -> None:  # type: ignore[no-untyped-def]
        assert ob.io == jio.tally.summary(PROF.pool(POOL))
        assert ob.bound == live_bound(PROF, ob.verdict.transport, False, ob.io, POOL)

    (first,) = lj.poll()
    same_as_drawn_again(first)
    stats: list[str] = []
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: (stats.append(os.fspath(p)), real_stat(p, *a, **k))[1])
    for _ in range(3):
        stats.clear()
        (ob,) = lj.poll()
        assert stats.count(str(d)) == 1, stats
        assert ob is first and ob.bound == "storage"
    same_as_drawn_again(ob)
    _append(d / "steps.rank0.jsonl", _steps(d, 0, 101, 200, ckpt_s=120.0))  # two more checkpoints
    (ob,) = lj.poll()
    assert ob is not first and ob.io is not None and ob.io.phases[0].instances == 4
    same_as_drawn_again(ob)
    grown = ob
    with (d / ROCE_LOGS[0].name).open("ab") as fh:
        fh.write(SOCKET_LOGS[0].read_bytes())
    (ob,) = lj.poll()
    assert ob is not grown and ob.verdict.transport.value in ("socket", "mixed")
    assert ob.bound == "fabric+storage" and ob.io is grown.io  # no record read: the same summary
    same_as_drawn_again(ob)
