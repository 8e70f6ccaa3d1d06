"""One way to do each thing: the verdict key in every JSON output, --format/--json, -o/--output,
-p/--profile, text that is never read as markup, and pure modules that do not pull in the terminal or HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import GKE, JOBS, REPO, SNAPSHOTS, run
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.console import row, text
from fabricguard.exitcodes import VERDICT_EXIT, exit_code

SYN = REPO / "tests" / "fixtures" / "nccl" / "synthetic"
PROD = SNAPSHOTS / "incident-271-days" / "production"
STAG = SNAPSHOTS / "incident-271-days" / "staging"
NVML = REPO / "tests" / "fixtures" / "h200-host" / "nvml.json"

JSON_COMMANDS = [
    ["verify-job", str(JOBS / "socket-fallback"), "-p", str(GKE)],
    ["nccl", "inspect", str(SYN / "socket-fallback-2x4")],
    ["profile", "check", str(GKE)],
    ["storage", "where", "/", "--mountinfo", "/proc/self/mountinfo", "--expect", "no-such-fs"],
    ["doctor", "--snapshot", str(PROD), "--now", "2025-09-30T12:00:00Z"],
    ["doctor", "diff", str(STAG), str(PROD)],
    ["probe", "host", "--nvml-json", str(NVML)],
]


@pytest.mark.parametrize("argv", JSON_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_every_json_output_carries_its_verdict_and_exits_by_it(argv: list[str]) -> None:
    r = run(*argv, "--format", "json")
    data = json.loads(r.stdout)
    assert data["verdict"] in VERDICT_EXIT
    assert r.exit_code == exit_code(data["verdict"])
    # The hidden --json alias is the same output.
    assert json.loads(run(*argv, "--json").stdout)["verdict"] == data["verdict"]


def test_profile_check_of_a_broken_profile_is_invalid(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: fabricguard.io/v1alpha1\nkind: PlatformProfile\nmetadata: {name: x}\n")
    r = run("profile", "check", str(bad), "--format", "json")
    assert r.exit_code == 3 and json.loads(r.stdout)["verdict"] == "invalid"


def test_output_and_profile_spell_the_same_everywhere() -> None:
    for argv in (["verify-job"], ["doctor"], ["doctor", "diff"], ["validate"], ["probe", "collective"],
                 ["probe", "storage"], ["probe", "host"], ["admission", "review"], ["render", "webhook"]):
        out = CliRunner().invoke(app, [*argv, "--help"], env={"COLUMNS": "200"}).stdout
        assert "--profile" in out and "-p" in out, argv
    for argv in (["doctor"], ["doctor", "diff"], ["validate"], ["probe", "collective"]):
        out = CliRunner().invoke(app, [*argv, "--help"], env={"COLUMNS": "200"}).stdout
        assert "--output" in out and "-o" in out, argv
    for argv in (["verify-job"], ["doctor"], ["nccl", "inspect"], ["profile", "check"], ["storage", "where"],
                 ["validate"], ["probe", "collective"], ["probe", "storage"], ["probe", "host"]):
        out = CliRunner().invoke(app, [*argv, "--help"], env={"COLUMNS": "200"}).stdout
        assert "--format" in out and "--json" not in out, argv  # --json works but is not advertised


def test_the_hidden_out_alias_still_works(tmp_path: Path) -> None:
    r = run("validate", "--out", str(tmp_path / "rep"), "--skip", "collective,storage,gpu", "--format", "json")
    assert r.exit_code in (0, 1, 2) and (tmp_path / "rep" / "report.json").is_file()


def test_quoted_log_lines_keep_their_brackets(monkeypatch: pytest.MonkeyPatch) -> None:
    # rich reads COLUMNS once, when the shared console is made: pin the width here, not in the environment.
    from fabricguard import console as fg_console

    monkeypatch.setattr(fg_console.console, "_width", 250)
    r = CliRunner().invoke(app, ["nccl", "inspect", str(SYN / "socket-fallback-2x4")], env={"COLUMNS": "250"})
    assert "[receive] via NET/Socket" in r.stdout  # rich would have dropped "[receive]" as a markup tag
    console = Console(width=120, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    t = Table()
    t.add_column("line")
    row(t, "Channel 00/0 : 3[3] -> 4[0] [receive] via NET/IB/0 [bold]x[/bold]")
    console.print(t)
    assert "[receive] via NET/IB/0 [bold]x[/bold]" in console.export_text()
    assert text("[host[:port]/]repo", ("[b]", "red")).plain == "[host[:port]/]repo[b]"


def test_error_messages_keep_brackets() -> None:
    r = run("render", "webhook", "-p", str(GKE), "--image", "not a [valid] ref")
    assert r.exit_code == 3 and "[valid]" in r.stderr


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("fabricguard.probes.result", ("typer", "rich", "click")),
        ("fabricguard.exitcodes", ("typer", "rich")),
        ("fabricguard.doctor.diff", ("fabricguard.doctor.registry", "urllib.request", "typer", "rich")),
        ("fabricguard.doctor.rules", ("fabricguard.doctor.registry", "urllib.request", "http.client")),
        ("fabricguard.doctor.engine", ("fabricguard.doctor.registry", "urllib.request", "typer")),
    ],
)
def test_pure_modules_stay_pure(module: str, forbidden: tuple[str, ...]) -> None:
    code = f"import sys, {module}; print([m for m in {list(forbidden)!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO / "src")}).stdout
    assert out.strip() == "[]", f"{module} imports {out.strip()}"
