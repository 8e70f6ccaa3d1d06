"""A job's directory is written by the tenant's pods: ``verify-job`` and ``nccl inspect`` (the real command, in a
child process) judge what is in it, bounded, without following a link out of it, and never drop a rank's file
silently (issue 17 §2).

Each test starts from the field report's healthy RDMA job (``examples/jobs/rdma-healthy``: a pass) and adds
one thing a tenant could leave there.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_support import run_process

ROOT = Path(__file__).resolve().parents[2]
HEALTHY = ROOT / "examples" / "jobs" / "rdma-healthy"
SOCKET_LOG = sorted((ROOT / "examples" / "jobs" / "socket-fallback" / "logs").iterdir())[0]
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"


@pytest.fixture()
def job(tmp_path: Path) -> Path:
    d = tmp_path / "tenant-a" / "job"
    shutil.copytree(HEALTHY, d)
    return d


def verify(job: Path, *extra: str) -> tuple[int, dict, str]:
    r = run_process("verify-job", job, "--profile", GKE, "--format", "json", *extra, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}), r.stderr


def reasons(doc: dict, level: str) -> list[str]:
    return [r["message"] for r in doc["reasons"] if r["level"] == level]


def test_the_healthy_job_passes(job: Path) -> None:
    rc, doc, _ = verify(job)
    assert rc == 0 and doc["verdict"] == "pass" and doc["transport"] == "roce", doc["reasons"]


def test_deeply_nested_json_in_steps_is_input_unusable_not_a_traceback(job: Path) -> None:
    with (job / "steps.jsonl").open("a") as f:
        f.write("[" * 200_000 + "]" * 200_000 + "\n")  # RecursionError in json.loads before
    rc, _doc, err = verify(job)
    assert rc == 3, err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert "steps.jsonl:41" in line and "nested too deeply" in line, err


def test_a_rank_log_that_starts_with_nul_bytes_is_read(job: Path) -> None:
    """The rank that fell back to sockets wrote its log after 4 KiB of NULs: before, it was skipped as binary."""
    (job / "logs" / "gpu-node-002.log").write_bytes(b"\0" * 8192 + SOCKET_LOG.read_bytes())
    rc, doc, _ = verify(job)
    assert rc == 1 and doc["verdict"] == "degraded" and doc["transport"] == "socket", doc["reasons"]
    assert str(job / "logs" / "gpu-node-002.log") in doc["nccl"]["files"]


def test_a_link_into_another_tenants_directory_is_not_followed(job: Path, tmp_path: Path) -> None:
    other = tmp_path / "tenant-b" / "job" / "logs"
    other.mkdir(parents=True)
    secret = other / "rank0.log"
    secret.write_text(SOCKET_LOG.read_text().replace("NCCL INFO", "NCCL INFO tenant-b-private"))
    (job / "logs" / "gpu-node-009.log").symlink_to(secret)
    (job / "logs" / "nested").mkdir()
    (job / "logs" / "nested" / "up").symlink_to(other, target_is_directory=True)
    rc, doc, _ = verify(job)
    text = json.dumps(doc)
    assert "tenant-b-private" not in text  # nothing of the other tenant's lines is quoted
    assert rc == 1 and doc["verdict"] == "degraded", doc["reasons"]
    (msg,) = [m for m in reasons(doc, "degraded")]
    assert "gpu-node-009.log" in msg and "outside the job's directory" in msg, msg
    r = run_process("nccl", "inspect", job / "logs", "--format", "json")
    assert "tenant-b-private" not in r.stdout and r.returncode == 0, r.stdout[-2000:] + r.stderr
    unread = json.loads(r.stdout)["unread"]
    assert {Path(u["file"]).name for u in unread} == {"gpu-node-009.log", "up"}, unread


def test_an_unreadable_rank_log_makes_the_job_degraded_naming_it(job: Path) -> None:
    os.mkfifo(job / "logs" / "gpu-node-003.log")  # opening it would block; it is not a file
    (job / "logs" / "gpu-node-004.log").symlink_to(job / "logs" / "gone.log")  # broken
    rc, doc, _ = verify(job)
    assert rc == 1 and doc["verdict"] == "degraded", doc["reasons"]
    (msg,) = reasons(doc, "degraded")
    assert "gpu-node-003.log" in msg and "FIFO" in msg and "1 more" in msg, msg
    files = {Path(u["file"]).name for u in doc["nccl"]["unread"]}
    assert files == {"gpu-node-003.log", "gpu-node-004.log"}


def test_a_socket_line_in_file_5000_is_read(job: Path) -> None:
    """verify-job reads every file up to its bound of 8,192 (the live follower stopped at 4,096 before; its test is
    in tests/controller/test_tenant_files.py)."""
    logs = job / "logs"
    for i in range(5000):
        (logs / f"worker-{i:05d}.log").write_text("training step\n")
    (logs / "worker-04999.log").write_bytes(SOCKET_LOG.read_bytes())
    rc, doc, _ = verify(job)
    assert doc["transport"] == "socket" and rc == 1, doc["reasons"]


@pytest.mark.slow
def test_a_job_over_the_file_bound_gets_a_verdict_saying_so(job: Path) -> None:
    logs = job / "logs"
    for i in range(8200):
        (logs / f"worker-{i:05d}.log").write_text("x\n")
    rc, doc, _ = verify(job)
    assert rc == 1 and doc["verdict"] == "degraded"
    assert any("more than 8,192 files" in m for m in reasons(doc, "degraded")), doc["reasons"]


def test_a_line_without_a_newline_is_dropped_not_buffered(job: Path) -> None:
    """64 MiB without a newline (the bench measures 1 GiB): read once, the line named, the verdict stands."""
    with (job / "logs" / "gpu-node-000.log").open("ab") as f:
        for _ in range(64):
            f.write(b"y" * (1 << 20))
    rc, doc, _ = verify(job)
    assert rc == 0 and doc["verdict"] == "pass", doc["reasons"]
    (warn,) = [m for m in reasons(doc, "warning") if "longer than" in m]
    assert "gpu-node-000.log" in warn and "1 line(s)" in warn


def test_a_step_file_that_links_out_is_refused_not_read(job: Path, tmp_path: Path) -> None:
    other = tmp_path / "tenant-b" / "steps.jsonl"
    other.parent.mkdir(parents=True)
    other.write_text('{"step": 1, "seconds": 6.0}\n')
    (job / "steps.jsonl").unlink()
    (job / "steps.jsonl").symlink_to(other)
    rc, _doc, err = verify(job)
    assert rc == 3 and "steps.jsonl" in err and "outside the job's directory" in err, err


def test_the_bytes_read_per_job_are_bounded_and_what_is_left_is_named(job: Path) -> None:
    """The bound is 32 GiB per job (``verdict.job.MAX_JOB_LOG_BYTES``); here the scanner's own bound, lowered."""
    from fabricguard.nccl.scan import inspect_paths

    logs = sorted((job / "logs").iterdir())
    first = logs[0].stat().st_size
    r = inspect_paths(logs, roots=dict.fromkeys(logs, job), max_bytes=first)
    assert [(Path(e.file).name, e.line) for e in r.unread] == [(logs[1].name, 0)], r.unread
    assert "over the" in r.unread[0].why and r.bytes_read == first
