"""``fabricguard storage where``: which filesystem backs a path, from a saved mountinfo file."""

from __future__ import annotations

from pathlib import Path

import typer

from fabricguard.console import exit_code, fail, print_json, say
from fabricguard.options import JSON_ALIAS, Format, format_option, wants_json
from fabricguard.storage.mountinfo import MountinfoError, check_path, parse_mountinfo
from fabricguard.userfiles import SourceError, read_text

app = typer.Typer(help="Storage path checks.", no_args_is_help=True)


@app.command("where")
def where(
    path: str = typer.Argument(..., help="Path inside the pod, e.g. /mnt/lustre."),
    mountinfo: Path = typer.Option(Path("/proc/self/mountinfo"), "--mountinfo", help="A saved mountinfo file."),
    expect: str = typer.Option("lustre", "--expect", help="Filesystem type the path should be on."),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
) -> None:
    """Exit 0 when PATH is on the expected filesystem, 1 (degraded) when it is not, 3 for a bad file."""
    try:
        entries = parse_mountinfo(read_text(mountinfo))
    except SourceError as exc:
        fail(f"--mountinfo {exc}", hint="save /proc/self/mountinfo from inside the pod")
    except MountinfoError as exc:
        fail(f"--mountinfo {mountinfo}: {exc}", hint="save /proc/self/mountinfo from inside the pod as it is")
    finding = check_path(entries, path, expect)
    verdict = "pass" if finding.ok else "degraded"
    if wants_json(fmt, as_json):
        print_json({"verdict": verdict, **finding.to_dict()}, "StorageWhere")
    else:
        say(("✓ ", "green") if finding.ok else ("✗ ", "bold red"), finding.message)
    raise typer.Exit(exit_code(verdict))
