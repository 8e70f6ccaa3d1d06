"""verify-job tells storage from fabric: the real 2-node RoCE job replayed with slow checkpoint writes is
storage-bound with its figures; the same job with slow collectives (NCCL Inspector records below the floor)
gets the fabric row, its healthy checkpoints only an info line."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.profile import PlatformProfile, load_profile
from fabricguard.verdict import Level, Verdict, judge_job
from fabricguard.verdict.steps import StepInputError, read_jsonl, read_jsonl_records

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "examples" / "jobs" / "rdma-healthy"
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
POOL = "h200-rdma"
RANKS = 16  # 2 nodes x 8 GPUs, as the replayed job ran
SHARD = 4_000_000_000  # bytes each rank writes per checkpoint (a 64 GB checkpoint over 16 ranks)

sys.path.insert(0, str(ROOT / "tests"))
from inspector_records import Job  # noqa: E402


def profile() -> PlatformProfile:
    """The GKE A3 Ultra profile with the storage figures its probe measured: 20 GB/s write, 30 GB/s read."""
    prof = load_profile(GKE)
    b = prof.pool(POOL).baseline
    b.storageWriteMBps, b.storageReadMBps = 20_000.0, 30_000.0
    return prof


def replay(tmp_path: Path, *, ckpt_seconds: float, busbw: dict[str, float] | None = None) -> Path:
    job = tmp_path / "job"
    shutil.copytree(JOB, job)
    with (job / "io.jsonl").open("w") as f:
        for step in (10, 20, 30, 40):
            for rank in range(RANKS):
                # The slowest rank sets each checkpoint's time; the others finish a little earlier.
                f.write(json.dumps({"phase": "checkpoint-write", "step": step, "rank": rank, "bytes": SHARD,
                                    "seconds": round(ckpt_seconds * (1 - 0.002 * rank), 3)}) + "\n")
    if busbw is not None:
        Job(name="llm-sft", nodes=2, gpus=8, busbw=busbw).write(job / ".fabricguard" / "inspector", 3)
    return job


def reason(v, check: str):  # type: ignore[no-untyped-def]
    return next(r for r in v.reasons if r.check == check)


def test_slow_checkpoint_writes_make_the_job_storage_bound(tmp_path: Path) -> None:
    # 64 GB per checkpoint in 60 s is 1,067 MB/s against a 16,000 MB/s floor, 4 x 60 s of a 4 min job.
    v = judge_job(replay(tmp_path, ckpt_seconds=60.0), profile(), POOL)
    assert v.verdict is Verdict.degraded and v.bound == "storage"
    r = reason(v, "storage-io")
    assert r.level is Level.degraded and r.message.startswith("storage-bound: 48% of the job's time")
    assert "checkpoint-write 240.0 s in 4 at 1,067 MB/s, floor 16,000 MB/s" in r.message
    assert v.nccl.inter_node_transport.value == "roce"  # the fabric was fine
    assert not any(x.level is Level.degraded for x in v.reasons if x.check != "storage-io")
    io = v.to_dict()["io"]
    assert io["storage_bound"] and io["phases"][0]["mbps"] == pytest.approx(1066.7, abs=0.1)


def test_the_same_job_with_slow_collectives_gets_the_fabric_row(tmp_path: Path) -> None:
    # Checkpoints at 21 GB/s (3 s each); AllReduce at 121 GB/s against the pool's 284.
    slow = {"AllReduce": 121.0, "AllGather": 330.0, "ReduceScatter": 330.0}
    v = judge_job(replay(tmp_path, ckpt_seconds=3.0, busbw=slow), profile(), POOL)
    assert v.verdict is Verdict.degraded and v.bound == "fabric"
    assert any(r.check == "busbw" and r.level is Level.degraded and "AllReduce" in r.message for r in v.reasons)
    io = reason(v, "storage-io")
    assert io.level is Level.info and "21,333 MB/s" in io.message and "storage-bound" not in io.message


def test_io_heavy_at_the_floor_is_not_storage_bound(tmp_path: Path) -> None:
    v = judge_job(replay(tmp_path, ckpt_seconds=3.5), profile(), POOL)
    long_ckpt = replay(tmp_path / "b", ckpt_seconds=3.5)
    # Many checkpoints at full speed: a large share, but the file system kept its floor.
    with (long_ckpt / "io.jsonl").open("a") as f:
        for step in range(41, 141):
            for rank in range(RANKS):
                f.write(json.dumps({"phase": "checkpoint-write", "step": step, "rank": rank, "bytes": SHARD,
                                    "seconds": 3.5}) + "\n")
    heavy = judge_job(long_ckpt, profile(), POOL)
    assert v.verdict is Verdict.pass_ and v.bound == "none"
    assert heavy.verdict is Verdict.pass_ and reason(heavy, "storage-io").message.startswith("I/O-heavy")


def test_without_a_storage_baseline_the_figures_are_still_told(tmp_path: Path) -> None:
    v = judge_job(replay(tmp_path, ckpt_seconds=60.0), load_profile(GKE), POOL)
    r = reason(v, "storage-io")
    assert r.level is Level.info and "no storage baseline" in r.message and v.bound == "none"


def test_verify_job_cli_shows_the_bound_and_the_row(tmp_path: Path) -> None:
    job = replay(tmp_path, ckpt_seconds=60.0)
    prof = tmp_path / "profile.yaml"
    text = GKE.read_text().replace("      stepTimeSeconds: 6.07\n",
                                   "      stepTimeSeconds: 6.07\n      storageWriteMBps: 20000\n")
    assert text != GKE.read_text()
    prof.write_text(text)
    r = CliRunner().invoke(app, ["verify-job", str(job), "-p", str(prof), "--pool", POOL, "--format", "json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    assert doc["bound"] == "storage" and 0.45 < doc["io"]["share"] < 0.52


def test_io_records_are_not_step_times(tmp_path: Path) -> None:
    f = tmp_path / "steps.jsonl"
    f.write_text('{"step": 1, "seconds": 6.1}\n{"phase": "checkpoint-write", "step": 1, "seconds": 40, '
                 '"bytes": 100}\n{"loss": 1.2}\n')
    steps, io = read_jsonl_records(f)
    assert steps == [(1, 6.1)] and read_jsonl(f) == [(1, 6.1)]
    assert [(r.phase, r.seconds, r.bytes) for r in io] == [("checkpoint-write", 40.0, 100)]


@pytest.mark.parametrize("record, says", [
    ('{"phase": "lunch", "seconds": 1}', "is not one of checkpoint-write"),
    ('{"phase": "checkpoint-write"}', "needs its seconds"),
    ('{"phase": "checkpoint-write", "seconds": "nan"}', "finite"),
    ('{"phase": "data-read", "seconds": 1, "bytes": 1e300}', "not a plausible size"),
    ('{"phase": "data-read", "seconds": 1, "bytes": -5}', "finite, non-negative"),
])
def test_bad_io_records_name_the_line(tmp_path: Path, record: str, says: str) -> None:
    f = tmp_path / "io.jsonl"
    f.write_text(record + "\n")
    with pytest.raises(StepInputError, match=says) as err:
        read_jsonl_records(f)
    assert f"{f}:1" in str(err.value)
