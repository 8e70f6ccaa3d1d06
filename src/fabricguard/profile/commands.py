"""``fabricguard profile ...``: check a platform profile and show what it resolves to."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from fabricguard.console import EXIT_INPUT, console, err_console, fail, print_json
from fabricguard.profile.loader import EMBEDDED_PROFILES, ProfileError, embedded_profile, load_profile
from fabricguard.profile.model import PlatformProfile

app = typer.Typer(help="Check and explain platform profiles.", no_args_is_help=True)


def profile_or_exit(path: Path | str) -> PlatformProfile:
    """Load a profile for a command, or stop with every problem (field, line) and what to run next.

    ``local`` names the profile embedded in the package (this machine, no RDMA); a file of that name in
    the working directory is ``./local``. No command falls back to it silently.
    """
    if str(path) in EMBEDDED_PROFILES:
        return embedded_profile(str(path))
    try:
        return load_profile(path)
    except ProfileError as exc:
        fail(str(exc), hint="fix the fields named above; `fabricguard profile check FILE` lists every problem")
    except OSError as exc:
        fail(f"cannot read profile {path}: {exc.strerror or exc}")


@app.command("check")
def check(
    files: list[Path] = typer.Argument(..., help="Profile YAML files."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable result."),
) -> None:
    """Validate profiles; every error names the field path and the line."""
    results = []
    bad = 0
    for f in files:
        try:
            prof = load_profile(f)
        except ProfileError as exc:
            bad += 1
            results.append(
                {
                    "file": str(f),
                    "valid": False,
                    "problems": [{"path": p.path, "line": p.line, "message": p.message} for p in exc.problems],
                }
            )
            if not as_json:
                for p in exc.problems:
                    err_console.print(f"[red]✗[/] {escape(p.render(str(f)))}")
            continue
        adv = prof.advisories()
        results.append({"file": str(f), "valid": True, "name": prof.metadata.name, "advisories": adv})
        if not as_json:
            table = Table(title=f"{f}: profile {prof.metadata.name} ({prof.metadata.environment})", expand=False)
            for col in ("pool", "gpus/node", "arch", "fabric", "NCCL_NET", "resources", "floor GB/s", "queue"):
                table.add_column(col)
            for p in prof.spec.pools:
                floor = p.baseline.busbw_floor_gbps
                table.add_row(
                    p.name + (" (default)" if p.name == prof.spec.defaultPool else ""),
                    str(p.gpusPerNode),
                    p.architecture.value,
                    p.fabric.type.value,
                    p.fabric.effective_nccl_net or "-",
                    ", ".join(f"{k}={v}" for k, v in p.fabric.resources.items()) or "-",
                    f"{floor:.1f}" if floor is not None else "-",
                    p.queue.name if p.queue else "-",
                )
            console.print(table)
            for a in adv:
                console.print(f"[yellow]![/] {a}")
            console.print(f"[green]✓[/] {f} is a valid profile")
    if as_json:
        print_json({"results": results})
    if bad:
        raise typer.Exit(EXIT_INPUT)
