"""CLI commands of `fabricguard.placement`.

``fabricguard render kueue`` prints Kueue's side of the profile; ``fabricguard placement simulate`` shows where
gangs land on a pool spread across blocks and what that costs in bus bandwidth.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
import yaml
from rich.table import Table

from fabricguard.admission.commands import render_app
from fabricguard.console import console, fail, print_json
from fabricguard.profile.commands import profile_or_exit

placement_app = typer.Typer(help="Placement: Kueue topology what-ifs for the profile's pools.", no_args_is_help=True)


@render_app.command("kueue")
def render_kueue_cmd(
    profile: Path = typer.Option(..., "--profile", "-p", help="Platform profile YAML."),
    configuration: bool = typer.Option(
        False, "--configuration",
        help="Print only the fragment of Kueue's Configuration (waitForPodsReady, frameworks, exclusions).",
    ),
) -> None:
    """Print the profile's Kueue v1beta2 objects: Topologies, ResourceFlavors, the fabric AdmissionCheck, queues."""
    from fabricguard.placement.kueue import KueueRenderError, objects
    from fabricguard.placement.kueue import configuration as kueue_configuration

    prof = profile_or_exit(profile)
    try:
        if configuration:
            head = "# Merge into Kueue's Configuration (the kueue-manager-config ConfigMap), then restart Kueue.\n"
            docs = [kueue_configuration(prof)]
        else:
            head = (f"# Kueue objects of profile {prof.metadata.name}. Apply after Kueue v0.19+; "
                    "see also: fabricguard render kueue --configuration\n")
            docs = objects(prof)
    except KueueRenderError as exc:
        fail(f"{profile}: {exc}")
    if not docs:
        fail(f"{profile}: no pool names a queue, so there is nothing to render for Kueue",
             hint="give the fabric pools a queue: {name: ...}")
    sys.stdout.write(head + yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, width=120))


def _blocks(option: str, text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, count = part.partition("=")
        if not sep or not name or not count.isdigit():
            fail(f"{option} {text!r}: {part!r} is not BLOCK=NODES", hint=f"e.g. {option} block-a=12,block-b=4")
        out[name] = int(count)
    if not out:
        fail(f"{option} is empty", hint=f"e.g. {option} block-a=12,block-b=4")
    return out


@placement_app.command("simulate")
def simulate_cmd(
    profile: Path = typer.Option(..., "--profile", "-p", help="Platform profile YAML."),
    pool: str | None = typer.Option(None, "--pool", help="Pool to simulate (default: the profile's default pool)."),
    free: str = typer.Option(..., "--free", help="Free nodes per block, e.g. block-a=12,block-b=4."),
    size: str | None = typer.Option(None, "--size", help="Nodes per block when not all are free (default: --free)."),
    gangs: str = typer.Option("2,4,16", "--gangs", help="Gang sizes in nodes (one pod per node)."),
    output_format: str = typer.Option("table", "--format", help="table or json."),
) -> None:
    """Where 2-, 4- and 16-node gangs land with required vs preferred topology, when they wait, their busbw."""
    from fabricguard.placement.simulate import table

    if output_format not in ("table", "json"):
        fail(f"--format {output_format!r} is not one of table, json")
    prof = profile_or_exit(profile)
    try:
        p = prof.pool(pool)
    except (KeyError, ValueError) as exc:
        fail(f"--pool: {exc}")
    try:
        sizes = [int(g) for g in gangs.split(",") if g.strip()]
    except ValueError:
        fail(f"--gangs {gangs!r} is not a list of node counts", hint="e.g. --gangs 2,4,16")
    if not sizes or min(sizes) < 1:
        fail(f"--gangs {gangs!r} needs node counts of at least 1", hint="e.g. --gangs 2,4,16")
    free_blocks = _blocks("--free", free)
    size_blocks = _blocks("--size", size) if size else None
    if size_blocks is not None and any(free_blocks.get(b, 0) > size_blocks.get(b, 0) for b in free_blocks):
        fail("--free has more nodes in a block than --size", hint="--size is the block's total, --free what is idle")
    base = p.baseline.allReduceBusBwGBps
    factor = p.baseline.crossBlockFactor
    outcomes = table(sizes, ["required", "preferred"], free_blocks, size=size_blocks, baseline_gbps=base,
                     cross_block_factor=factor)
    if output_format == "json":
        print_json({"pool": p.name, "free": free_blocks, "size": size_blocks or free_blocks, "baselineGBps": base,
                    "crossBlockFactor": factor,
                    "outcomes": [{"gang": o.gang, "mode": o.mode, "placed": o.placed, "waits": o.waits,
                                  "busbwGBps": o.busbw_gbps} for o in outcomes]})
        return
    t = Table(title=f"pool {p.name}: free {free_blocks}" + (f" of {size_blocks}" if size_blocks else ""))
    for col in ("gang (nodes)", "topology", "lands on", "busbw GB/s"):
        t.add_column(col, justify="right" if col != "lands on" else "left")
    for o in outcomes:
        bw = "-" if o.busbw_gbps is None and o.waits != "no" else (
            f"{o.busbw_gbps:g}" if o.busbw_gbps is not None else "unknown (set baseline.crossBlockFactor)")
        t.add_row(str(o.gang), o.mode, o.describe(), bw)
    console.print(t)


def register(app: typer.Typer) -> None:
    """Add ``placement``; ``render kueue`` attaches to the shared ``render`` group on import."""
    app.add_typer(placement_app, name="placement")
