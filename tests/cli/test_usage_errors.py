"""Usage errors are unusable input: exit 3 with one ``error:`` line for every command, never click's 2."""

from __future__ import annotations

import pytest
from cli_support import GKE, JOBS, one_error_line, run, run_process

USAGE_ERRORS = [
    # (argv, what the error line must name)
    (["verify-job", str(JOBS / "rdma-healthy")], "--profile"),  # missing required option
    (["verify-job"], "job_dir"),  # missing argument
    (["verify-job", str(JOBS / "rdma-healthy"), "-p", str(GKE), "--format", "xml"], "--format"),  # bad choice
    (["doctor", "--format", "pdf"], "--format"),
    (["doctor", "--fail-on", "sometimes"], "--fail-on"),
    (["doctor", "diff", "a"], "b"),
    (["admission", "serve", "-p", str(GKE), "--cert", "c", "--key", "k", "--port", "70000"], "--port"),
    (["admission", "review"], "file"),
    (["render", "webhook", "-p", str(GKE)], "--image"),
    (["nccl", "inspect", "--bogus", "x"], "--bogus"),
    (["profile", "check"], "files"),
    (["storage", "where"], "path"),
    (["probe", "collective", "--iters", "many"], "--iters"),
    (["validate", "--stepfactor", "fast"], "--stepfactor"),
    (["no-such-command"], "no-such-command"),
]


@pytest.mark.parametrize(("argv", "names"), USAGE_ERRORS, ids=[" ".join(a[:2]) for a, _ in USAGE_ERRORS])
def test_usage_error_exits_3_with_one_line(argv: list[str], names: str) -> None:
    r = run(*argv)
    assert r.exit_code == 3, r.output
    line = one_error_line(r.stderr)
    assert names.lower() in line.lower(), line
    assert "--help" in r.stderr  # the hint says where the options are listed


def test_group_without_command_prints_help_and_exits_3() -> None:
    r = run("nccl")
    assert r.exit_code == 3 and "inspect" in r.output


def test_usage_error_exit_code_in_a_real_process() -> None:
    # The installed entry point goes through typer's own main loop, not the test runner.
    p = run_process("admission", "serve", "-p", str(GKE), "--cert", "c", "--key", "k", "--port", "-1")
    assert p.returncode == 3, p.stderr
    assert "--port" in one_error_line(p.stderr)


def test_help_and_version_still_exit_0() -> None:
    assert run("--help").exit_code == 0
    assert run("verify-job", "--help").exit_code == 0
    assert run("--version").exit_code == 0
