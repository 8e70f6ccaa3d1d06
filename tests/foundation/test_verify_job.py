"""verify-job: the field report's two jobs, failures, step timings in every format, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.profile import Transport, load_profile
from fabricguard.verdict import JobInputError, Level, Verdict, judge_job
from fabricguard.verdict.steps import StepInputError, compile_step_regex, read_csv, read_jsonl

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "examples" / "jobs"
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
ONPREM = ROOT / "examples" / "profiles" / "onprem-infiniband.yaml"
FIX = ROOT / "tests" / "fixtures" / "nccl"


def checks(v, level: Level) -> set[str]:
    return {r.check for r in v.reasons if r.level is level}


def test_healthy_rdma_job_passes() -> None:
    v = judge_job(JOBS / "rdma-healthy", load_profile(GKE), "h200-rdma")
    assert v.verdict is Verdict.pass_, [r.message for r in v.reasons]
    assert v.nccl.inter_node_transport.value == "roce"
    assert v.steps.count == 40
    assert v.steps.median_seconds == pytest.approx(6.07, abs=0.01)
    assert all(s["ok"] for s in v.storage)


def test_socket_fallback_job_is_degraded_for_every_reason() -> None:
    v = judge_job(JOBS / "socket-fallback", load_profile(GKE), None)
    assert v.verdict is Verdict.degraded
    assert checks(v, Level.degraded) == {"transport", "storage", "step-time"}
    step = next(r for r in v.reasons if r.check == "step-time")
    assert "2.04x" in step.message
    tr = next(r for r in v.reasons if r.check == "transport")
    assert tr.evidence and "NET/Socket" in tr.evidence[0]["text"]


def test_forced_net_failure_is_failed(tmp_path: Path) -> None:
    shutil.copy(FIX / "h200-2.28.9" / "net-ib-forced-1rank.log", tmp_path / "rank0.log")
    v = judge_job(tmp_path, load_profile(ONPREM), "h100-ib")
    assert v.verdict is Verdict.failed
    assert v.verdict.exit_code == 2
    assert "refused to fall back" in next(r.message for r in v.reasons if r.check == "nccl")


def test_single_node_socket_on_fabric_pool_is_degraded(tmp_path: Path) -> None:
    # The real H200 default run: one rank, NCCL picked Socket without a word. On a fabric pool that
    # means the fabric was not there, even though this run had no inter-node traffic.
    shutil.copy(FIX / "h200-2.28.9" / "default-1rank.log", tmp_path / "rank0.log")
    v = judge_job(tmp_path, load_profile(ONPREM), "h100-ib")
    assert v.verdict is Verdict.degraded
    assert "Socket network" in next(r.message for r in v.reasons if r.check == "transport")


def test_unproven_transport_is_not_a_pass(tmp_path: Path) -> None:
    # One worker's log of the 2-node job with no connection lines: the other node's selection is unseen.
    first = sorted((FIX / "synthetic" / "thin-ib-2x2").iterdir())[0]
    shutil.copy(first, tmp_path / first.name)
    v = judge_job(tmp_path, load_profile(ONPREM), "h100-ib")
    assert v.nccl.scope.value == "multi-node" and v.nccl.inter_node_transport is Transport.unknown
    assert v.verdict is Verdict.degraded
    assert "could not be proven" in next(r.message for r in v.reasons if r.check == "transport")


def test_selection_on_every_node_is_the_transport_inferred(tmp_path: Path) -> None:
    for f in (FIX / "synthetic" / "thin-ib-2x2").iterdir():
        shutil.copy(f, tmp_path / f.name)
    v = judge_job(tmp_path, load_profile(ONPREM), "h100-ib")
    assert v.nccl.transport_basis == "selection"
    assert v.verdict is Verdict.pass_
    # Reasons come failures first (issue 30): the info line is found by what it says, not by its place.
    tr = next(r for r in v.reasons if r.check == "transport" and r.level.value == "info")
    assert "inferred from the selection" in tr.message


def test_ib_job_on_ib_pool_passes_and_efa_pool_rejects_it(tmp_path: Path) -> None:
    for f in (FIX / "synthetic" / "ib-2x4-2.21.5").iterdir():
        shutil.copy(f, tmp_path / f.name)
    prof = load_profile(ONPREM)
    # no Lustre mountinfo: a warning, not a degradation
    v = judge_job(tmp_path, prof, "h100-ib")
    assert v.verdict is Verdict.pass_
    assert "storage" in checks(v, Level.warning)
    aws = load_profile(ROOT / "examples" / "profiles" / "aws-p5-efa.yaml")
    v2 = judge_job(tmp_path, aws, "p5-efa")
    assert v2.verdict is Verdict.degraded
    assert "expects efa" in next(r.message for r in v2.reasons if r.check == "transport")


def test_bandwidth_floor(tmp_path: Path) -> None:
    shutil.copy(FIX / "synthetic" / "nccl-tests" / "all_reduce_perf-ib-2x8.log", tmp_path / "perf.log")
    prof = load_profile(ONPREM)
    ok = judge_job(tmp_path, prof, "h100-ib")
    assert "bandwidth" not in checks(ok, Level.degraded)
    assert "bandwidth" in checks(ok, Level.info)
    prof.pool("h100-ib").baseline.allReduceBusBwGBps = 480.0  # floor 384 > 354.65 peak
    low = judge_job(tmp_path, prof, "h100-ib")
    assert low.verdict is Verdict.degraded
    assert "below the floor 384.0" in next(r.message for r in low.reasons if r.check == "bandwidth")
    shutil.copy(FIX / "synthetic" / "nccl-tests" / "all_reduce-wrong.log", tmp_path / "perf.log")
    assert judge_job(tmp_path, prof, "h100-ib").verdict is Verdict.failed


def test_step_times_from_csv_regex_and_many_ranks(tmp_path: Path) -> None:
    for f in (FIX / "synthetic" / "ib-2x4-2.21.5").iterdir():
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "steps.csv").write_text("step,step_time\n0,30\n1,6.1\n2,6.0\n3,6.2\n")
    (tmp_path / "train-rank1.log").write_text("step 1 loss 2.1 took 6.5s\nstep 2 loss 2.0 took 6.0s\n")
    prof = load_profile(ONPREM)
    prof.pool("h100-ib").baseline.stepTimeSeconds = 6.0
    v = judge_job(tmp_path, prof, "h100-ib", step_regex=r"step (?P<step>\d+) .* took (?P<seconds>[\d.]+)s")
    # rank 1 was slower at step 1: the slowest rank sets the step
    assert dict(v.steps.steps) == {0: 30.0, 1: 6.5, 2: 6.0, 3: 6.2}
    assert v.steps.median_seconds == pytest.approx(6.35)
    assert v.verdict is Verdict.pass_


def test_step_input_errors(tmp_path: Path) -> None:
    bad = tmp_path / "s.jsonl"
    bad.write_text('{"step": 1, "seconds": 2}\nnot json\n')
    with pytest.raises(StepInputError, match=r"s\.jsonl:2: not JSON"):
        read_jsonl(bad)
    csvf = tmp_path / "s.csv"
    csvf.write_text("a,b\n1,2\n")
    with pytest.raises(StepInputError, match="no step-time column"):
        read_csv(csvf)
    with pytest.raises(StepInputError, match="not a valid regular expression"):
        compile_step_regex("(")
    with pytest.raises(StepInputError, match="named group"):
        compile_step_regex(r"(\d+) (\d+)")


def test_missing_and_empty_job_dirs(tmp_path: Path) -> None:
    prof = load_profile(GKE)
    with pytest.raises(JobInputError, match="no such file or directory"):
        judge_job(tmp_path / "nope", prof, None)
    with pytest.raises(JobInputError, match="no log files"):
        judge_job(tmp_path, prof, None)


def test_cli_exit_codes_and_json() -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["verify-job", str(JOBS / "rdma-healthy"), "--profile", str(GKE), "--json"])
    assert ok.exit_code == 0, ok.output
    d = json.loads(ok.output)
    assert d["verdict"] == "pass" and d["transport"] == "roce" and d["steps"]["count"] == 40
    bad = runner.invoke(app, ["verify-job", str(JOBS / "socket-fallback"), "--profile", str(GKE)])
    assert bad.exit_code == 1
    assert "DEGRADED" in bad.output
    unknown_pool = runner.invoke(app, ["verify-job", str(JOBS / "socket-fallback"), "--profile", str(GKE), "--pool", "x"])
    assert unknown_pool.exit_code == 3
    assert "known pools: h200-rdma" in unknown_pool.output
    missing = runner.invoke(app, ["verify-job", "/nonexistent/job", "--profile", str(GKE)])
    assert missing.exit_code == 3 and "no such file or directory" in missing.output
