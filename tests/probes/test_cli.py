"""The CLI: probe host on the recorded H200 node, validate --local end to end, torch stays out of --help."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from fabricguard.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "profiles"
runner = CliRunner()


def test_help_does_not_import_torch():
    code = "import sys; from fabricguard.cli import app; sys.argv=['fabricguard','--help']\ntry:\n app()\nexcept SystemExit: pass\nprint('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False")


def test_probe_host_refuses_h200_for_gke_pool(h200_root):
    r = runner.invoke(
        app,
        [
            "probe",
            "host",
            "--profile",
            str(EXAMPLES / "gke-a3-ultra.yaml"),
            "--pool",
            "h200-rdma",
            "--root",
            str(h200_root),
            "--nvml-json",
            str(Path(__file__).parents[1] / "fixtures/h200-host/nvml.json"),
            "--json",
        ],
    )
    assert r.exit_code == 2, r.output
    pools = json.loads(r.output)["pools"]
    assert pools[0]["readiness"] == "not ready"
    assert {c["name"] for c in pools[0]["failed"]} >= {"rdma.devices", "modules", "gpu.count"}


@pytest.mark.slow
def test_validate_local_end_to_end(tmp_path):
    r = runner.invoke(
        app,
        [
            "validate",
            "--out",
            str(tmp_path),
            "-b",
            "64K",
            "-e",
            "1M",
            "-n",
            "2",
            "-w",
            "1",
            "--storage-size",
            "2M",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["mode"] == "local" and rep["verdict"] == "pass"
    schema = json.loads((Path(__file__).parents[2] / "docs" / "schemas" / "ValidationReport.schema.json").read_text())
    assert list(rep)[:3] == ["apiVersion", "kind", "verdict"]
    assert not list(jsonschema.Draft202012Validator(schema).iter_errors(rep))
    assert not list(jsonschema.Draft202012Validator(schema).iter_errors(json.loads(r.stdout)))
    assert "no RDMA here" in rep["notes"][0]
    assert rep["collective"]["transport"] == "socket" and rep["collective"]["backend"] == "gloo"
    assert rep["storage"]["metrics"]["checksum_ok"] is True
    html = (tmp_path / "report.html").read_text()
    assert "<svg" in html and "floor" in html and "http" not in html.replace("http://www.w3.org/2000/svg", "")


def test_validate_with_unknown_pool_is_an_input_error():
    r = runner.invoke(app, ["validate", "--profile", str(EXAMPLES / "gke-a3-ultra.yaml"), "--pool", "nope"])
    assert r.exit_code == 3


def test_local_ranks_below_one_is_one_line_and_exit_3() -> None:
    """``--local-ranks 0`` ran the default two ranks; a negative count was a ValueError traceback (exit 1)."""
    for cmd in (["probe", "collective"], ["validate", "--local"]):
        for n in ("0", "-2"):
            r = runner.invoke(app, [*cmd, "--local-ranks", n])
            assert r.exit_code == 3, (cmd, n, r.output)
            assert "--local-ranks" in r.output and "Traceback" not in r.output, (cmd, n, r.output)


def test_the_rank_servers_torch_import_warns_nothing_on_the_commands_stderr() -> None:
    """The forkserver shares the command's stderr: importing torch there (without NumPy, as here) must not print
    its UserWarning into `validate`'s report. ``-W error`` turns any warning that escapes into a failure."""
    import subprocess
    import sys

    from fabricguard.probes.collective import RANK_PRELOAD

    code = f"import importlib; [importlib.import_module(m) for m in {RANK_PRELOAD!r}]"
    r = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "Warning" not in r.stderr, r.stderr[-2000:]
