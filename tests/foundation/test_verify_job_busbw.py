"""verify-job reads NCCL Inspector records when the job left them: one busbw row per collective, against the floor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.profile import loads_profile
from fabricguard.verdict import Level, Verdict, judge_job

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "examples" / "jobs"
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"  # h200-rdma: baseline 355 GB/s, floor 284


def gke_2gpu():  # type: ignore[no-untyped-def]
    """The GKE profile with 2-GPU nodes: the fixtures' jobs are 2 nodes x 2 GPUs, so their communicators have the
    canary's shape (every GPU of each node) and are held to the pool's floor; on the 8-GPU pool a 2-per-node
    communicator is held to floor x 2/8 (``verdict.busbw.shape_floor``, tested in test_shape_judging)."""
    return loads_profile(GKE.read_text().replace("gpusPerNode: 8", "gpusPerNode: 2", 1))
INSPECTOR = ROOT / "tests" / "fixtures" / "inspector"


def job_dir(tmp: Path, records: str | None, *, profiler_line: str | None = None) -> Path:
    """A job's Lustre directory as the webhook lays it out: <job>/.fabricguard/{nccl,inspector} + what it wrote."""
    job = tmp / "ml-search" / "llm-sft"
    logs = job / ".fabricguard" / "nccl"
    shutil.copytree(JOBS / "rdma-healthy" / "logs", logs)
    for f in ("mountinfo-worker-0", "mountinfo-worker-1", "steps.jsonl"):
        shutil.copy(JOBS / "rdma-healthy" / f, logs / f)
    if profiler_line is not None:
        log = logs / "gpu-node-000.log"
        lines = log.read_text().splitlines(True)
        prefix = lines[3].split(" NCCL INFO ")[0]
        lines.insert(4, f"{prefix} NCCL INFO {profiler_line}\n")
        log.write_text("".join(lines))
    if records is not None:
        shutil.copytree(INSPECTOR / records, job / ".fabricguard" / "inspector")
    return logs


def busbw(v) -> dict[str, tuple[Level, str]]:
    out = {}
    for r in v.reasons:
        if r.check == "busbw":
            out[r.message.split(" ")[0]] = (r.level, r.message)
    return out


def test_a_healthy_job_gets_a_busbw_row_per_collective(tmp_path: Path) -> None:
    logs = job_dir(tmp_path, "v2.30.7-healthy")
    v = judge_job(logs, gke_2gpu(), "h200-rdma")
    assert v.verdict is Verdict.pass_, [r.message for r in v.reasons]
    rows = busbw(v)
    assert set(rows) == {"AllReduce", "AllGather", "ReduceScatter"}
    level, msg = rows["AllReduce"]
    assert level is Level.info and ">= the pool's floor 284.0 GB/s" in msg and "2 nodes, 4 ranks" in msg
    assert {r["collective"] for r in v.to_dict()["busbw"]} == set(rows)
    # The Inspector's files sit beside the NCCL logs: they are records, not logs of the transport.
    assert all("pid" not in Path(f).name for f in v.nccl.files)


def test_a_slow_job_is_degraded_by_its_own_collectives(tmp_path: Path) -> None:
    logs = job_dir(tmp_path, "v2.30.7-slow")
    v = judge_job(logs, gke_2gpu(), "h200-rdma")
    assert v.verdict is Verdict.degraded
    # Which transport, how fast, how long: one verdict.
    assert v.nccl.inter_node_transport.value == "roce"
    level, msg = busbw(v)["AllReduce"]
    assert level is Level.degraded and "AllReduce busbw 119.9 GB/s" in msg and "is below the pool's floor 284.0" in msg
    assert {r.check for r in v.reasons if r.level is Level.degraded} == {"busbw"}


def test_the_job_directory_itself_works_too_and_2_28_records_read_the_same(tmp_path: Path) -> None:
    logs = job_dir(tmp_path, "v2.28.9-healthy")
    v = judge_job(logs.parents[1], gke_2gpu(), "h200-rdma")  # <claim>/ml-search/llm-sft
    assert v.verdict is Verdict.pass_, [r.message for r in v.reasons]
    assert set(busbw(v)) == {"AllReduce", "AllGather", "ReduceScatter"}


def test_a_job_with_its_own_profiler_is_told_so_and_keeps_its_verdict(tmp_path: Path) -> None:
    logs = job_dir(tmp_path, None, profiler_line="PROFILER/Plugin: Loaded my-tracer (v4)")
    v = judge_job(logs, gke_2gpu(), "h200-rdma")
    assert v.verdict is Verdict.pass_
    level, msg = busbw(v)["NCCL"]
    assert level is Level.info and "the job's own profiler plugin my-tracer, not the Inspector" in msg


def test_jobs_without_the_plugin_keep_todays_verdict(tmp_path: Path) -> None:
    logs = job_dir(tmp_path, None)
    before = judge_job(JOBS / "rdma-healthy", gke_2gpu(), "h200-rdma")
    v = judge_job(logs, gke_2gpu(), "h200-rdma")
    assert [r.message for r in v.reasons] == [r.message for r in before.reasons]
    # A pool whose jobs get the plugin but left no records: said, without changing the verdict.
    text = GKE.read_text().replace("spec:\n", "spec:\n  inspector: {delivery: hostPath, hostPath: /opt/insp}\n", 1)
    v = judge_job(logs, loads_profile(text), "h200-rdma")
    assert v.verdict is Verdict.pass_ and busbw(v)["no"][0] is Level.warning


def test_only_single_node_records_say_the_fabric_was_not_measured(tmp_path: Path) -> None:
    logs = job_dir(tmp_path, "v2.30.7-hostile")
    for f in (logs.parent / "inspector").iterdir():
        if "0-0" in f.name:
            f.unlink()
    v = judge_job(logs, gke_2gpu(), "h200-rdma")
    assert v.verdict is Verdict.pass_
    (level, msg), = busbw(v).values()
    assert level is Level.warning and "none of a communicator spanning nodes" in msg


def test_the_cli_shows_the_rows_and_exits_degraded(tmp_path: Path) -> None:
    logs = job_dir(tmp_path, "v2.30.7-slow")
    prof = tmp_path / "gke-2gpu.yaml"
    prof.write_text(GKE.read_text().replace("gpusPerNode: 8", "gpusPerNode: 2", 1))
    r = CliRunner().invoke(app, ["verify-job", str(logs), "-p", str(prof), "--format", "json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    ar = next(b for b in doc["busbw"] if b["collective"] == "AllReduce")
    assert ar["below"] and ar["floor_gbps"] == 284.0 and ar["nnodes"] == 2
    r = CliRunner().invoke(app, ["verify-job", str(logs), "-p", str(prof)])
    assert r.exit_code == 1 and "busbw" in r.stdout


def test_the_real_plugins_records_drive_the_verdict(tmp_path: Path) -> None:
    """Written by the 2.28.9 and 2.30.7 Inspectors' own code (tests/fixtures/inspector/README.md), not synthesized."""
    v = judge_job(job_dir(tmp_path / "a", "v2.28.9-plugin-healthy"), gke_2gpu(), "h200-rdma")
    assert v.verdict is Verdict.pass_ and busbw(v)["AllReduce"][0] is Level.info
    v = judge_job(job_dir(tmp_path / "b", "v2.28.9-plugin-slow"), gke_2gpu(), "h200-rdma")
    assert v.verdict is Verdict.degraded and "AllReduce busbw 120.0 GB/s" in busbw(v)["AllReduce"][1]
    v = judge_job(job_dir(tmp_path / "c", "v2.30.7-plugin-slow"), gke_2gpu(), "h200-rdma")
    assert v.verdict is Verdict.degraded and "AllReduce busbw 120.0 GB/s" in busbw(v)["AllReduce"][1]


def test_records_linked_in_from_another_job_are_not_read(tmp_path: Path) -> None:
    logs = job_dir(tmp_path, None)
    other = tmp_path / "other-team" / "job" / ".fabricguard" / "inspector"
    shutil.copytree(INSPECTOR / "v2.30.7-slow", other)
    (logs.parent / "inspector").symlink_to(other, target_is_directory=True)
    v = judge_job(logs, gke_2gpu(), "h200-rdma")
    assert v.verdict is Verdict.pass_ and v.busbw == []
    assert all(r.level is not Level.degraded for r in v.reasons)
