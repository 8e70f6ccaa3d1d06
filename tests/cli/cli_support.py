"""Running the real command line: in-process through typer's runner, or as a separate process with a
time limit (to prove a FIFO or a device file never makes a command hang)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from fabricguard.cli import app

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
GKE = EXAMPLES / "profiles" / "gke-a3-ultra.yaml"
JOBS = EXAMPLES / "jobs"
SNAPSHOTS = EXAMPLES / "snapshots"


def run(*args: str):
    """The CLI in this process; ``catch_exceptions=False`` so a traceback fails the test."""
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def run_process(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """``python -m fabricguard ARGS`` in a child process; raises TimeoutExpired if it hangs."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "fabricguard", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )


def one_error_line(stderr: str) -> str:
    """The ``error:`` line of a refusal (``✗`` for each problem ``profile check`` lists); asserts there is
    exactly one and no traceback."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith(("error:", "✗ "))]
    assert len(errors) == 1, stderr
    return errors[0]


def refused(result, *names: str) -> str:
    """Exit 3 with one error line that names every one of ``names``; returns that line."""
    assert result.exit_code == 3, result.output
    line = one_error_line(result.stderr)
    for n in names:
        assert n in line, line
    return line
