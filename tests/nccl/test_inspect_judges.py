"""``nccl inspect`` reports; it judges only against an expectation (issue 27, item 2).

Without ``--expect`` or ``-p`` no JSON key reads as pass for a socket fallback or an unproven transport: the
``verdict`` is ``unjudged`` (``failed`` when the run failed). With one, the usual exit codes: 0 pass, 1
degraded, 2 failed. Logs: tests/fixtures/nccl/public/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.console import EXIT_DEGRADED, EXIT_FAILED, EXIT_INPUT, EXIT_PASS

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ROOT / "tests" / "fixtures" / "nccl" / "public"
ONPREM = ROOT / "examples" / "profiles" / "onprem-infiniband.yaml"

# Every real-log case whose transport is not a proven fabric one: none of its JSON keys may read as pass.
NOT_PROVEN = ["aws-ofi-nccl-889", "aws-ofi-nccl-715", "nccl-367", "fastsocket-4", "nccl-1519", "nccl-226",
              "nccl-229", "nccl-tests-176", "nccl-1814", "nccl-1412", "ompi-13317", "nccl-983"]


def _run(*args: str) -> tuple[int, Any, str]:
    res = CliRunner().invoke(app, ["nccl", "inspect", *args])
    data = json.loads(res.stdout) if "--format" in args and res.stdout.startswith("{") else None
    return res.exit_code, data, res.output


def _pass_words(data: Any) -> list[str]:
    """Every key whose value says pass, anywhere in the document."""
    out: list[str] = []
    if isinstance(data, dict):
        for k, v in data.items():
            if isinstance(v, str) and v.lower() in ("pass", "passed", "ok") and k != "why":
                out.append(k)
            out += _pass_words(v)
    elif isinstance(data, list):
        for v in data:
            out += _pass_words(v)
    return out


@pytest.mark.parametrize("case", NOT_PROVEN)
def test_socket_and_unknown_never_read_as_pass_without_an_expectation(case: str) -> None:
    code, data, _ = _run(str(PUBLIC / case), "--format", "json")
    assert code == EXIT_PASS  # read and reported; not a judgement
    assert data["verdict"] == "unjudged" and data["expected"] is None
    assert data["inter_node_transport"] in ("socket", "unknown")
    assert _pass_words(data) == []


@pytest.mark.parametrize(
    ("case", "expect", "code", "verdict"),
    [
        ("aws-ofi-nccl-889", "rdma", EXIT_DEGRADED, "degraded"),  # socket fallback
        ("aws-ofi-nccl-889", "socket", EXIT_PASS, "pass"),
        ("nccl-1814", "rdma", EXIT_DEGRADED, "degraded"),  # unknown: not proven
        ("nccl-tests-373", "roce", EXIT_FAILED, "failed"),  # the run failed, whatever the transport
        ("nccl-tests-133", "rdma", EXIT_PASS, "pass"),  # RoCE connections on two hosts
        ("nccl-tests-133", "ib", EXIT_DEGRADED, "degraded"),
        ("nccl-tests-213", "none", EXIT_PASS, "pass"),  # proven single node
        ("nccl-tests-213", "rdma", EXIT_DEGRADED, "degraded"),
        ("ompi-13317", "none", EXIT_DEGRADED, "degraded"),  # two hosts: never proven single-node
    ],
)
def test_expect_judges_with_the_usual_exit_codes(case: str, expect: str, code: int, verdict: str) -> None:
    got, data, _ = _run(str(PUBLIC / case), "--expect", expect, "--format", "json")
    assert got == code, data
    assert data["verdict"] == verdict and data["expected"] == expect
    assert data["verdict_reasons"]
    text_code, _, text = _run(str(PUBLIC / case), "--expect", expect)
    assert text_code == code and text.startswith(verdict.upper())


def test_pool_judges_as_verify_job_does() -> None:
    code, data, _ = _run(str(PUBLIC / "aws-ofi-nccl-889"), "-p", str(ONPREM), "--format", "json")
    assert code == EXIT_DEGRADED and data["verdict"] == "degraded"
    assert data["expected"].startswith("pool ")
    assert any(f["level"] == "degraded" and f["check"] == "transport" for f in data["findings"])
    assert any("TCP sockets" in r for r in data["verdict_reasons"])


def test_failed_run_without_expectation_still_says_failed() -> None:
    code, data, _ = _run(str(PUBLIC / "nccl-1405"), "--format", "json")
    assert code == EXIT_FAILED and data["verdict"] == "failed"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--expect", "fast"], "--expect"),
        (["--expect", "rdma", "-p", "local"], "not both"),
        (["--pool", "gpu"], "--pool needs"),
        (["-p", "local", "--pool", "nope"], "nope"),
    ],
)
def test_bad_expectations_are_one_line_and_exit_3(args: list[str], words: str) -> None:
    code, _, out = _run(str(PUBLIC / "aws-ofi-nccl-889"), *args)
    assert code == EXIT_INPUT, out
    assert words in out and "Traceback" not in out


def test_help_says_it_does_not_judge_without_an_expectation() -> None:
    res = CliRunner().invoke(app, ["nccl", "inspect", "--help"], env={"COLUMNS": "200"})
    assert "unjudged" in res.output and "--expect" in res.output
    readme = (ROOT / "README.md").read_text()
    assert "unjudged" in readme and "--expect" in readme
