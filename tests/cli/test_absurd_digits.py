"""A number of absurd length in a log line (issue 25 item 7): one line naming the file and line, exit 3, in
``nccl inspect``. In ``verify-job`` that line is named (file and line) as not read, the rest of the file is read,
and the job is degraded, never passed. Never a
traceback: Python refuses to turn more than 4,300 digits into an int, and NCCL prints at most 20."""

from __future__ import annotations

from pathlib import Path

from cli_support import EXAMPLES, refused, run

LINE = "gpu-node-0:211:211 [0] NCCL INFO comm 0x55d1 rank 0 nRanks {n} nNodes 2 localRanks 1 localRank 0\n"


def _log(tmp_path: Path, digits: int) -> Path:
    d = tmp_path / "job"
    d.mkdir()
    f = d / "nccl.rank0.log"
    f.write_text("gpu-node-0:211:211 [0] NCCL INFO NCCL version 2.28.9+cuda12.9\n" + LINE.format(n="1" * digits))
    return f


def test_nccl_inspect_refuses_a_5000_digit_number_in_one_line(tmp_path: Path) -> None:
    f = _log(tmp_path, 5000)
    line = refused(run("nccl", "inspect", str(f)), str(f), "5,000 digits")
    assert ":2:" in line  # the line to open


def test_verify_job_names_the_file_and_line_and_never_passes(tmp_path: Path) -> None:
    f = _log(tmp_path, 5000)
    r = run("verify-job", "-p", str(EXAMPLES / "profiles" / "gke-a3-ultra.yaml"), str(f.parent))
    assert "Traceback" not in r.output and r.exit_code == 1, r.output  # degraded: the job is judged, not refused
    assert "5,000 digits" in r.output and "nccl.rank0.log:2" in r.output


def test_verify_job_reads_the_rest_of_the_file_past_the_absurd_line(tmp_path: Path) -> None:
    import json

    f = _log(tmp_path, 5000)
    with f.open("a") as fh:  # what follows the hostile line is still the rank's log, read with its own line numbers
        fh.write("gpu-node-0:211:211 [0] NCCL INFO comm 0x55d2 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0\n")
    r = run("verify-job", "-p", str(EXAMPLES / "profiles" / "gke-a3-ultra.yaml"), str(f.parent), "--format", "json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["nccl"]["ranks"] == 4
    [logs] = [x for x in doc["reasons"] if x["check"] == "logs"]
    assert logs["level"] == "degraded" and logs["evidence"][0]["line"] == 2


def test_a_20_digit_number_is_still_read(tmp_path: Path) -> None:
    f = _log(tmp_path, 20)
    r = run("nccl", "inspect", str(f))
    assert r.exit_code != 3 and "digits" not in r.output, r.output
