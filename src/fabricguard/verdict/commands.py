"""``fabricguard verify-job``: pass, degraded or failed, with every reason, for one finished job."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricguard.console import console, fail, print_json, row, say
from fabricguard.options import JSON_ALIAS, Format, format_option, profile_option, wants_json
from fabricguard.profile import UnknownPoolError
from fabricguard.profile.commands import profile_or_exit
from fabricguard.verdict.job import JobInputError, JobVerdict, Level, judge_job

_LEVEL_STYLE = {Level.info: "dim", Level.warning: "yellow", Level.degraded: "bold yellow", Level.failed: "bold red"}
_VERDICT_STYLE = {"pass": "bold green", "degraded": "bold yellow", "failed": "bold red"}


def render_verdict(v: JobVerdict) -> None:
    n = v.nccl
    say((v.verdict.value.upper(), _VERDICT_STYLE[v.verdict.value]), f"  {v.job_dir}  pool {v.pool} (fabric {v.fabric})")
    med = v.steps.median_seconds
    say(
        f"transport {n.inter_node_transport.value}  network {n.network or '-'}  GPUDirect RDMA "
        f"{'-' if n.gpudirect_rdma is None else n.gpudirect_rdma}  scope {n.scope.value}  nodes {n.nodes_text}  "
        f"ranks {n.ranks or '?'}  "
        f"steps {v.steps.count}  median {('-' if med is None else f'{med:.2f} s')}  "
        f"total {v.steps.total_seconds:.1f} s  bound {v.bound}"
    )
    t = Table(expand=False, show_lines=False)
    t.add_column("level")
    t.add_column("check")
    t.add_column("reason", overflow="fold")
    t.add_column("evidence", overflow="fold")
    for r in v.reasons:
        ev = r.evidence[0] if r.evidence else None
        where = ""
        if ev and ev.get("file"):
            where = Path(ev["file"]).name + (f":{ev['line']}" if ev.get("line") else "")
        row(t, (r.level.value, _LEVEL_STYLE[r.level]), r.check, r.message, where)
    console.print(t)


def verify_job(
    job_dir: Path = typer.Argument(..., help="Directory of what the job left: NCCL logs, mountinfo, step timings."),
    profile: str = profile_option(
        required=True, help="Platform profile YAML the job ran under ('local': the embedded local profile)."
    ),
    pool: str | None = typer.Option(None, "--pool", help="Pool the job ran on (default: the profile's default)."),
    step_regex: str | None = typer.Option(
        None,
        "--step-regex",
        help=r"Regex for step times in plain logs, e.g. 'step (?P<step>\d+) .* (?P<seconds>[\d.]+)s'",
    ),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
) -> None:
    """Judge a finished job. Exit 0 pass, 1 degraded, 2 failed, 3 input unusable."""
    prof = profile_or_exit(profile)
    try:
        v = judge_job(job_dir, prof, pool, step_regex)
    except UnknownPoolError as exc:
        fail(str(exc), hint="pass --pool NAME")
    except JobInputError as exc:
        fail(str(exc))
    if wants_json(fmt, as_json):
        print_json(v.to_dict())
    else:
        render_verdict(v)
    raise typer.Exit(v.verdict.exit_code)


def register(app: typer.Typer) -> None:
    """Add ``verify-job`` to the root app."""
    app.command("verify-job")(verify_job)
