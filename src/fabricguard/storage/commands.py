"""``fabricguard storage where``: which filesystem backs a path, from a saved mountinfo file."""

from __future__ import annotations

from pathlib import Path

import typer

from fabricguard.console import console, fail, print_json
from fabricguard.storage.mountinfo import MountinfoError, check_path, parse_mountinfo

app = typer.Typer(help="Storage path checks.", no_args_is_help=True)


@app.command("where")
def where(
    path: str = typer.Argument(..., help="Path inside the pod, e.g. /mnt/lustre."),
    mountinfo: Path = typer.Option(Path("/proc/self/mountinfo"), "--mountinfo", help="A saved mountinfo file."),
    expect: str = typer.Option("lustre", "--expect", help="Filesystem type the path should be on."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Exit 0 when PATH is on the expected filesystem, 1 when it is not."""
    try:
        entries = parse_mountinfo(mountinfo.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        fail(f"{mountinfo}: no such file", hint="save /proc/self/mountinfo from inside the pod")
    except MountinfoError as exc:
        fail(f"{mountinfo}: {exc}")
    finding = check_path(entries, path, expect)
    if as_json:
        print_json(finding.to_dict())
    else:
        console.print(("[green]✓[/] " if finding.ok else "[bold red]✗[/] ") + finding.message)
    raise typer.Exit(0 if finding.ok else 1)
