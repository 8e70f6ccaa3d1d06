"""``fabricguard profile ...``: check a platform profile and show what it resolves to."""

from __future__ import annotations

from pathlib import Path

import typer

from fabricguard.console import (
    EXIT_INPUT,
    Block,
    Column,
    Part,
    console,
    fail,
    paragraph,
    print_json,
    say,
    table_or_blocks,
    verdict_line,
)
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
        if not any(p.path for p in exc.problems) and not Path(path).is_file():
            # No field to fix: the file itself is missing (or not a regular file).
            fail(str(exc), hint="pass the path of a profile file (examples/profiles/ holds one per platform), "
                 "or --profile local for this machine")
        fail(str(exc), hint="fix the fields named above; `fabricguard profile check FILE` lists every problem")
    except OSError as exc:
        fail(f"cannot read profile {path}: {exc.strerror or exc}")


_POOL_COLUMNS = [Column("pool", no_wrap=True), Column("gpus/node", no_wrap=True), Column("arch", no_wrap=True),
                 Column("fabric", no_wrap=True), Column("NCCL_NET", no_wrap=True), Column("resources"),
                 Column("floor GB/s", no_wrap=True), Column("queue", no_wrap=True)]


def _render_check(loaded: list[tuple[Path, PlatformProfile]], bad: int, total: int) -> None:
    """Line 1 the verdict; per valid profile its pools (a table where it fits, else one block per pool), how
    each pool's fabric is proven, and the advisories."""
    word = "invalid" if bad else "pass"
    valid = f"{total - bad} valid profile{'' if total - bad == 1 else 's'}"
    verdict_line(word, "profile check", f"{valid} of {total}" if bad else valid)
    for f, prof in loaded:
        console.print()
        paragraph(f"{f}: profile {prof.metadata.name} ({prof.metadata.environment})", first="", indent="  ")
        rows: list[list[Part]] = []
        items: list[Block] = []
        for pool in prof.spec.pools:
            floor = pool.baseline.busbw_floor_gbps
            cells = [pool.name + (" (default)" if pool.name == prof.spec.defaultPool else ""),
                     str(pool.gpusPerNode), pool.architecture.value, pool.fabric.type.value,
                     pool.fabric.effective_nccl_net or "-",
                     ", ".join(f"{k}={v}" for k, v in pool.fabric.resources.items())
                     or (f"claim {pool.fabric.dra.deviceClassName}" if pool.fabric.dra else "-"),
                     f"{floor:.1f}" if floor is not None else "-", pool.queue.name if pool.queue else "-"]
            rows.append(list(cells))
            items.append(Block(head=[(cells[0], "bold")],
                               fields=[(c.name, v) for c, v in zip(_POOL_COLUMNS[1:], cells[1:], strict=True)]))
        table_or_blocks(_POOL_COLUMNS, rows, items)
        console.print()
        for pool in prof.spec.pools:  # how each pool's fabric is proven
            paragraph(f"{pool.name}: {pool.fabric_mode}", first="  ", indent="    ")
        for a in prof.advisories():
            paragraph(a, first="  ! ", indent="    ", style="yellow")


@app.command("check")
def check(
    files: list[Path] = typer.Argument(..., help="Profile YAML files."),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
) -> None:
    """Validate profiles; every error names the field path and the line. Exit 0 valid, 3 invalid."""
    as_json = wants_json(fmt, as_json)
    results = []
    loaded: list[tuple[Path, PlatformProfile]] = []
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
        loaded.append((f, prof))
        results.append({"file": str(f), "valid": True, "name": prof.metadata.name, "advisories": prof.advisories(),
                        "fabricModes": {p.name: p.fabric_mode for p in prof.spec.pools}})
    if not as_json:
        _render_check(loaded, bad, len(files))
    if as_json:
        print_json({"verdict": "invalid" if bad else "pass", "results": results}, "ProfileCheck")
    if bad:
        raise typer.Exit(EXIT_INPUT)
