"""verify-job, after the fact: the late rank and the slow node from the records a job left (replayed round by
round, as the controller saw them), and the rank saved NCCL RAS reports pointed at."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.profile import load_profile
from fabricguard.verdict import Level, judge_job
from inspector_jobs import megatron

ROOT = Path(__file__).resolve().parents[2]
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
RAS = ROOT / "tests" / "fixtures" / "ras"


def _job(tmp: Path, layout) -> Path:  # type: ignore[no-untyped-def]
    job = tmp / "ml-search" / layout.name
    logs = job / ".fabricguard" / "nccl"
    shutil.copytree(ROOT / "examples" / "jobs" / "rdma-healthy" / "logs", logs)
    layout.write(job / ".fabricguard" / "inspector", range(4))
    return logs


@pytest.mark.slow
def test_the_slow_node_and_the_late_rank_are_named(tmp_path: Path) -> None:
    slow = megatron(nodes=16, gpus=8, slow={(5, 3): 1 / 3})
    v = judge_job(_job(tmp_path / "a", slow), load_profile(GKE), "h200-rdma")
    (r,) = [r for r in v.reasons if r.check == "ranks"]
    assert r.level is Level.warning and f"node {slow.host(5)}" in r.message and "pair test decides" in r.message
    doc = v.to_dict()["per_rank"]
    assert [n["hostname"] for n in doc["slow_nodes"]] == [slow.host(5)] and doc["late_ranks"] == []
    late = megatron(nodes=16, gpus=8, late=(9, 2, 40_000))
    v = judge_job(_job(tmp_path / "b", late), load_profile(GKE), "h200-rdma")
    (r,) = [r for r in v.reasons if r.check == "ranks"]
    assert f"({late.host(9)}, pid {late.pid(9, 2)}) was late" in r.message and "not blamed" in r.message


@pytest.mark.slow
def test_saved_ras_reports_name_the_rank_a_hung_job_waited_for(tmp_path: Path) -> None:
    logs = _job(tmp_path, megatron(nodes=16, gpus=1))
    shutil.copy(RAS / "v2.30.7-hung-rank9-q1.json", logs.parent / "ras-1.json")
    v = judge_job(logs.parents[1], load_profile(GKE), "h200-rdma")
    (r,) = [r for r in v.reasons if r.check == "ras"]
    assert r.level is Level.warning and "pointed at rank 9 (host 10.8.0.19" in r.message
    assert v.to_dict()["ras"]["hung"] is None
    shutil.copy(RAS / "v2.30.7-hung-rank9-q2.json", logs.parent / "ras-2.json")
    r2 = CliRunner().invoke(app, ["verify-job", str(logs.parents[1]), "-p", str(GKE), "--pool", "h200-rdma",
                                  "--format", "json"])
    doc = json.loads(r2.stdout)
    assert doc["ras"]["hung"] is True and doc["ras"]["waited_for"][0]["rank"] == 9
    assert any(x["check"] == "ras" and x["level"] == "degraded" and "hung" in x["message"] for x in doc["reasons"])
