"""No silent pass: a check that cannot be made is refused by name (exit 3), never dropped from the verdict."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_support import GKE, JOBS, one_error_line, refused, run


@pytest.fixture
def job(tmp_path: Path) -> Path:
    d = tmp_path / "job"
    shutil.copytree(JOBS / "rdma-healthy", d)
    return d


def test_verify_job_requires_a_profile() -> None:
    # The socket-fallback job passed silently against the embedded local profile (no fabric) before.
    refused(run("verify-job", str(JOBS / "socket-fallback")), "--profile")
    assert run("verify-job", str(JOBS / "socket-fallback"), "-p", str(GKE)).exit_code == 1


def test_the_local_profile_is_used_only_when_named() -> None:
    r = run("verify-job", str(JOBS / "rdma-healthy"), "--profile", "local", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["pool"] == "local"


def test_a_file_named_like_the_embedded_profile_is_reached_by_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(GKE, tmp_path / "local")
    r = run("verify-job", str(JOBS / "rdma-healthy"), "--profile", "./local", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["pool"] == "h200-rdma"


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("steps.jsonl", os.urandom(4096), "not UTF-8"),
        ("steps.csv", os.urandom(4096), "not UTF-8"),
        ("steps.jsonl", b"{not json}\n", "steps.jsonl:1: not JSON"),
        ("steps.csv", b"a,b\n1,2\n", "no step-time column"),
        ("steps.jsonl", b'{"loss": 1.5}\n{"loss": 1.2}\n', "no step times in this file"),
        ("steps.jsonl", b'{"step": 1, "seconds": "NaN"}\n', "not a finite"),
        ("steps.csv", b"step,seconds\nx,6.0\n", "step 'x' is not a number"),
    ],
)
def test_step_timings_that_cannot_be_read_are_refused(job: Path, name: str, content: bytes, says: str) -> None:
    for f in job.glob("steps.*"):
        f.unlink()
    (job / name).write_bytes(content)
    refused(run("verify-job", str(job), "-p", str(GKE)), name, says)


def test_a_directory_named_like_step_timings_is_refused(job: Path) -> None:
    (job / "steps.jsonl").unlink()
    (job / "steps.jsonl").mkdir()
    refused(run("verify-job", str(job), "-p", str(GKE)), "steps.jsonl", "directory", "step-timing")


@pytest.mark.parametrize(
    ("content", "says"),
    [(os.urandom(2048), "not UTF-8"), (b"this is not mountinfo\n", "line 1")],
)
def test_mountinfo_that_cannot_be_read_is_refused(job: Path, content: bytes, says: str) -> None:
    (job / "mountinfo-worker-1").write_bytes(content)
    refused(run("verify-job", str(job), "-p", str(GKE)), "mountinfo-worker-1", says)


def test_a_fifo_named_like_mountinfo_is_refused_not_opened(job: Path) -> None:
    os.mkfifo(job / "mountinfo-worker-2")
    refused(run("verify-job", str(job), "-p", str(GKE)), "mountinfo-worker-2", "FIFO")


def test_validate_with_every_probe_skipped_validates_nothing() -> None:
    line = refused(run("validate", "--skip", "host,collective,storage,gpu"), "--skip")
    assert "nothing would be validated" in line


def test_validate_where_every_check_that_ran_was_skipped(tmp_path: Path) -> None:
    import importlib.util

    from fabricguard.probes.gpu import DRIVER_NODES

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    if any(node.exists() for node in DRIVER_NODES):  # only then can CUDA be there (importing torch costs seconds)
        import torch

        if torch.cuda.is_available():
            pytest.skip("the GPU check runs here; it is skipped only without CUDA")
    r = run("validate", "--skip", "host,collective,storage", "-o", str(tmp_path), "--format", "json")
    assert r.exit_code == 3 and "nothing was validated" in one_error_line(r.stderr)
    assert json.loads(r.stdout)["verdict"] == "skipped"
