"""Failure means the run failed; mangled pastes still get an answer (issue 27, items 3 and 4).

Sources of the logs: tests/fixtures/nccl/public/README.md. Where no public thread holds a shape, the test
builds it from real lines and says how.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.console import EXIT_FAILED, EXIT_PASS
from fabricguard.nccl import inspect_paths
from fabricguard.nccl.report import Scope
from fabricguard.profile import Transport
from nccl_logs import PUBLIC
from nccl_logs import lines_of as _lines
from nccl_logs import write_lines as _write


def _assert_quotes_its_line(r_evidence: list, path: Path) -> None:  # type: ignore[type-arg]
    for e in r_evidence:
        assert _lines(Path(e.file))[e.line - 1] == e.text, e


# --- benign warnings are warnings, quoting the line ------------------------------------------------------


def test_collnet_unavailable_is_a_warning_not_a_failure() -> None:
    # NVIDIA/nccl-tests#133: "CollNet is not supported or fails to initialize", then IB connections.
    r = inspect_paths([PUBLIC / "nccl-tests-133"])
    assert not r.failed and not r.failures
    assert len(r.warnings) == 1 and "CollNet" in r.warnings[0].why and "point-to-point" in r.warnings[0].why
    assert "CollNet is not supported" in r.warnings[0].text
    _assert_quotes_its_line(r.warnings, PUBLIC)


def test_collnet_fallback_then_a_passing_run(tmp_path: Path) -> None:
    # NCCL's own wording since 2.12 (src/transport.cc): "Cannot initialize CollNet, using point-to-point network
    # instead", printed by local rank 0, then nccl-tests' passing footer; the WARN line is given the prefix
    # shape of NVIDIA/nccl-tests#311's gpu34 and the footer is NVIDIA/nccl-tests#287's.
    warn = "gpu34:34088:34116 [0] transport.cc:464 NCCL WARN Cannot initialize CollNet, using point-to-point network " \
           "instead"
    table = _lines(PUBLIC / "nccl-tests-287" / "alltoall_perf.log")
    log = _write(tmp_path / "collnet.log", [*table[:6], warn, *table[6:]])
    r = inspect_paths([log])
    assert not r.failed
    assert [w.line for w in r.warnings] == [7] and "point-to-point" in r.warnings[0].why
    assert r.nccl_tests[0].out_of_bounds == 0


def test_ras_port_taken_is_a_warning(tmp_path: Path) -> None:
    # Not found in a public thread: the lines NCCL 2.24+ prints when a second process on a host cannot bind
    # the RAS client port (src/ras/client_support.cc: SYSCHECKGOTO's WARN, then the INFO that RAS goes on
    # without it), with NVIDIA/nccl#1412's prefix shape.
    log = _write(tmp_path / "ras.log", [
        "swat1-04:2017631:2017631 [1] ras/client_support.cc:179 NCCL WARN Call to bind failed: Address already "
        "in use",
        "swat1-04:2017631:2017631 [1] NCCL INFO RAS failed to establish a client listening socket at "
        "localhost:28028",
        "swat1-04:2017631:2017675 [1] NCCL INFO comm 0x8ec0ac0 rank 1 nRanks 16 nNodes 2 localRanks 8 localRank 1 "
        "MNNVL 0",
    ])
    r = inspect_paths([log])
    assert not r.failed
    assert "RAS" in r.warnings[0].why and r.warnings[0].line == 1
    # Without the source file's name the next line still says it is RAS's port.
    lines = _lines(log)
    lines[0] = lines[0].replace("ras/client_support.cc:179 ", "")
    assert not inspect_paths([_write(tmp_path / "ras2.log", lines)]).failed


def test_a_bind_failure_that_is_not_ras_still_fails() -> None:
    # NVIDIA/nccl#293: the bootstrap cannot bind, then the training step's all_reduce raises.
    r = inspect_paths([PUBLIC / "nccl-293"])
    assert r.failed and "Call to bind failed" in r.failures[0].why
    assert not r.warnings


def test_teardown_after_the_run_completed_is_a_warning(tmp_path: Path) -> None:
    # NVIDIA/nccl-tests#287's passing footer, then the teardown WARN of NVIDIA/nccl-tests#166 (a peer closing
    # its socket): built from the two real logs.
    table = _lines(PUBLIC / "nccl-tests-287" / "alltoall_perf.log")
    teardown = "gpu004:2200689:2200706 [3] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by " \
               "remote peer gpu004.ds-a4-r02.abc.com<55693>"
    r = inspect_paths([_write(tmp_path / "done.log", [*table, teardown])])
    assert not r.failed
    assert "after the run completed" in r.warnings[0].why and "Out of bounds values : 0 OK" in r.warnings[0].why
    # The same WARN before the footer is a failure: the run had not completed.
    r = inspect_paths([_write(tmp_path / "before.log", [*table[:10], teardown, *table[10:]])])
    assert r.failed and "Connection closed" in r.failures[0].why
    # A second test in the same file opens a new run: its WARN fails again.
    r = inspect_paths([_write(tmp_path / "two.log", [*table, *table[2:10], teardown])])
    assert r.failed


def test_warnings_in_json_and_text() -> None:
    res = CliRunner().invoke(app, ["nccl", "inspect", str(PUBLIC / "nccl-tests-133"), "--format", "json"])
    assert res.exit_code == EXIT_PASS
    d = json.loads(res.stdout)
    assert d["failed"] is False and d["warning_count"] == 1
    assert d["warnings"][0]["text"].endswith("ignoring NCCL_ALGO=COLLNET")
    text = CliRunner().invoke(app, ["nccl", "inspect", str(PUBLIC / "nccl-tests-133")], env={"COLUMNS": "200"})
    assert "warning mpirun-connections.log:1: CollNet" in text.output


# --- mangled pastes get an answer ---------------------------------------------------------------------


def _demarkdown(path: Path) -> list[str]:
    """What GitHub's markdown renderer leaves of nccl-tests output pasted outside a code block: a line that
    starts with '#' becomes a heading, and copying it back loses the '#'."""
    return [x[1:] if x.startswith("#") else x for x in _lines(path)]


@pytest.mark.parametrize("case", ["nccl-tests-287/alltoall_perf.log", "nccl-131/all_reduce_perf.log",
                                  "nccl-tests-107/mpirun.log"])
def test_mangled_nccl_tests_output_is_unknown_with_a_reason(tmp_path: Path, case: str) -> None:
    log = _write(tmp_path / "pasted.log", _demarkdown(PUBLIC / case))
    res = CliRunner().invoke(app, ["nccl", "inspect", str(log), "--format", "json"])
    assert res.exit_code in (EXIT_PASS, EXIT_FAILED), res.output  # never 3: the shape is recognisable
    d = json.loads(res.stdout)
    assert d["nccl_output"] is True
    assert d["inter_node_transport"] in ("unknown", "socket") and d["scope"] != "single-node"
    assert any("'#' markers" in x for x in d["reasons"])
    r = inspect_paths([log])
    _assert_quotes_its_line([*r.evidence, *r.failures], tmp_path)


def test_mangled_table_is_still_read(tmp_path: Path) -> None:
    r = inspect_paths([_write(tmp_path / "p.log", _demarkdown(PUBLIC / "nccl-tests-287" / "alltoall_perf.log"))])
    assert r.nccl_tests and r.nccl_tests[0].rows[0].size == 33554432 and r.nccl_tests[0].out_of_bounds == 0
    assert r.scope is Scope.part and r.inter_node_transport is Transport.unknown


def test_text_that_only_looks_like_a_table_is_still_unusable(tmp_path: Path) -> None:
    log = _write(tmp_path / "notes.txt", ["size of the cluster: 4 nodes", "Rank the results by busbw"])
    res = CliRunner().invoke(app, ["nccl", "inspect", str(log)])
    assert res.exit_code == 3 and "no NCCL output found" in res.output
