"""``fabricguard profile ...``: check a platform profile and show what it resolves to."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricguard.console import EXIT_INPUT, console, fail, print_json, row, say, text
from fabricguard.options import JSON_ALIAS, Format, format_option, wants_json
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
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
) -> None:
    """Validate profiles; every error names the field path and the line. Exit 0 valid, 3 invalid."""
    as_json = wants_json(fmt, as_json)
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
                    say(("✗", "red"), " ", p.render(str(f)), err=True)
            continue
        adv = prof.advisories()
        results.append({"file": str(f), "valid": True, "name": prof.metadata.name, "advisories": adv,
                        "fabricModes": {p.name: p.fabric_mode for p in prof.spec.pools}})
        if not as_json:
            table = Table(title=text(f"{f}: profile {prof.metadata.name} ({prof.metadata.environment})"), expand=False)
            for col in ("pool", "gpus/node", "arch", "fabric", "NCCL_NET", "resources", "floor GB/s", "queue"):
                table.add_column(col)
            for pool in prof.spec.pools:
                floor = pool.baseline.busbw_floor_gbps
                row(
                    table,
                    pool.name + (" (default)" if pool.name == prof.spec.defaultPool else ""),
                    str(pool.gpusPerNode),
                    pool.architecture.value,
                    pool.fabric.type.value,
                    pool.fabric.effective_nccl_net or "-",
                    ", ".join(f"{k}={v}" for k, v in pool.fabric.resources.items())
                    or (f"claim {pool.fabric.dra.deviceClassName}" if pool.fabric.dra else "-"),
                    f"{floor:.1f}" if floor is not None else "-",
                    pool.queue.name if pool.queue else "-",
                )
            console.print(table)
            for pool in prof.spec.pools:
                say(f"  {pool.name}: {pool.fabric_mode}")
            for a in adv:
                say(("!", "yellow"), " ", a)
            say(("✓", "green"), f" {f} is a valid profile")
    if as_json:
        print_json({"verdict": "invalid" if bad else "pass", "results": results}, "ProfileCheck")
    if bad:
        raise typer.Exit(EXIT_INPUT)
