"""verify-job reads the new `failed`: a net plugin that failed to start then a socket fallback is degraded."""

from __future__ import annotations

from pathlib import Path

from fabricguard.profile import load_profile
from fabricguard.verdict import Level, Verdict, judge_job

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC = ROOT / "tests" / "fixtures" / "nccl" / "synthetic"
PUBLIC = ROOT / "tests" / "fixtures" / "nccl" / "public"
AWS = ROOT / "examples" / "profiles" / "aws-p5-efa.yaml"


def _with_ofi_init_failure(tmp_path: Path) -> Path:
    """The 2-node socket-fallback job, each rank first printing aws-ofi-nccl's init failure (aws/aws-ofi-nccl#889)."""
    job = tmp_path / "job"
    job.mkdir()
    for f in sorted((SYNTHETIC / "socket-fallback-2x4").iterdir()):
        out = []
        for line in f.read_text().splitlines():
            if "NET/Plugin" in line:
                prefix = line.split(" NCCL INFO ", 1)[0]
                out.append(
                    f"{prefix} nccl_net_ofi_create_plugin:335 NCCL WARN NET/OFI aws-ofi-nccl initialization failed"
                )
                out.append(f"{prefix} nccl_net_ofi_init:155 NCCL WARN NET/OFI Initializing plugin failed")
            out.append(line)
        (job / f.name).write_text("\n".join(out) + "\n")
    return job


def test_plugin_init_warn_then_socket_fallback_is_degraded_not_failed(tmp_path: Path) -> None:
    v = judge_job(_with_ofi_init_failure(tmp_path), load_profile(AWS), "p5-efa")
    # 16 WARN pairs, plus NCCL 2.27+'s own INFO "Failed to initialize NET plugin IB" once.
    assert v.nccl.failed is False and len(v.nccl.fallbacks) == 17
    assert v.verdict is Verdict.degraded, [r.message for r in v.reasons]
    assert not [r for r in v.reasons if r.level is Level.failed]
    transport = next(r for r in v.reasons if r.check == "transport")
    assert transport.level is Level.degraded
    assert "TCP sockets" in transport.message and "fell back" in transport.message
    assert any("aws-ofi-nccl initialization failed" in e["text"] for e in transport.evidence)
    assert v.verdict.exit_code == 1


def test_real_fallback_on_one_node_is_degraded_on_a_fabric_pool(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "cloudwatch.log").write_text((PUBLIC / "aws-ofi-nccl-889" / "cloudwatch.log").read_text())
    v = judge_job(job, load_profile(AWS), "p5-efa")
    assert v.verdict is Verdict.degraded, [r.message for r in v.reasons]
    assert not v.nccl.failed


def test_a_real_failure_still_fails(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "rank2.log").write_text((PUBLIC / "nccl-tests-373" / "rank2.log").read_text())
    v = judge_job(job, load_profile(AWS), "p5-efa")
    assert v.verdict is Verdict.failed
    nccl = next(r for r in v.reasons if r.check == "nccl")
    assert "socketFinalizeAccept: wrong type 3 != 4" in nccl.message
