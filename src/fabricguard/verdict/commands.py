"""``fabricguard verify-job``: pass, degraded or failed, with every reason, for one finished job."""

from __future__ import annotations

from pathlib import Path

import typer

from fabricguard.console import Block, Column, Part, console, fail, paragraph, print_json, table_or_blocks, verdict_line
from fabricguard.options import JSON_ALIAS, Format, format_option, html_option, profile_option, wants_json
from fabricguard.profile import UnknownPoolError
from fabricguard.profile.commands import profile_or_exit
from fabricguard.userfiles import SourceError, output_file, write_text
from fabricguard.verdict.claims import load_job_objects
from fabricguard.verdict.html import job_page
from fabricguard.verdict.job import JobInputError, JobVerdict, Level, Reason, judge_job

_LEVEL_STYLE = {Level.info: "dim", Level.warning: "yellow", Level.degraded: "bold yellow", Level.failed: "bold red"}


def _where(r: Reason) -> str:
    ev = r.evidence[0] if r.evidence else None
    if not ev or not ev.get("file"):
        return ""
    return Path(ev["file"]).name + (f":{ev['line']}" if ev.get("line") else "")


def render_verdict(v: JobVerdict) -> None:
    """The verdict first, the job's figures, then every reason (failures first) with its fix."""
    n = v.nccl
    verdict_line(v.verdict.value, f"verify-job {v.job_dir}", f"pool {v.pool} (fabric {v.fabric})")
    med = v.steps.median_seconds
    paragraph(
        f"transport {n.inter_node_transport.value} · network {n.network or '-'} · GPUDirect RDMA "
        f"{'-' if n.gpudirect_rdma is None else n.gpudirect_rdma} · scope {n.scope.value} · nodes {n.nodes_text} · "
        f"ranks {n.ranks or '?'} · steps {v.steps.count} · median {('-' if med is None else f'{med:.2f} s')} · "
        f"total {v.steps.total_seconds:.1f} s · bound {v.bound}", indent="  ", first="  ")
    console.print()
    cols = [Column("level", no_wrap=True), Column("check", no_wrap=True), Column("reason"), Column("fix"),
            Column("evidence", no_wrap=True)]
    rows: list[list[Part]] = [[(r.level.value, _LEVEL_STYLE[r.level]), r.check, r.message, r.fix, _where(r)]
                              for r in v.reasons]
    items = [Block(head=[(r.level.value.upper(), _LEVEL_STYLE[r.level]), "  ", r.check],
                   fields=[("reason", r.message), ("evidence", _where(r)), ("fix", r.fix)]) for r in v.reasons]
    table_or_blocks(cols, rows, items)


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
    objects: list[Path] = typer.Option(
        [], "--objects", help="The job's pods and ResourceClaims as kubectl saved them (repeatable): kubectl get "
        "pods -n NS -l fabricguard.io/job=JOB -o json, and kubectl get resourceclaims -n NS -o json. On a DRA "
        "pool a fabric claim never allocated or a device reported unhealthy degrades the job, as the controller's "
        "verdict does."),
    jobstats: list[Path] = typer.Option(
        [], "--jobstats", help="The servers' job_stats as lctl printed them (repeatable): lctl get_param "
        "obdfilter.*.job_stats mdt.*.job_stats > FILE on the OSS/MDS, while the job runs. Needs --jobid."),
    jobid: str | None = typer.Option(None, "--jobid", help="The job's Lustre job id: <namespace>.<job>, as the "
                                     "webhook sets FG_LUSTRE_JOBID."),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
    html: Path | None = html_option("the verdict"),
) -> None:
    """Judge a finished job. Exit 0 pass, 1 degraded, 2 failed, 3 input unusable."""
    prof = profile_or_exit(profile)
    if jobstats and not jobid:
        fail("--jobstats needs --jobid <namespace>.<job> (the job id the webhook tags the job's requests with)")
    server = None
    if jobstats:
        from fabricguard.userfiles import read_text
        from fabricguard.verdict import jobstats as js

        server = js.Parsed()
        for f in jobstats:
            try:
                got = js.parse(read_text(f, max_bytes=js.MAX_BLOCK * 4), str(f))
            except SourceError as exc:
                fail(f"--jobstats {exc}")
            server.stats += got.stats
            server.skipped += got.skipped
    job_objects = None
    if objects:
        try:
            job_objects = load_job_objects(objects)
        except SourceError as exc:
            fail(f"--objects {exc}")
    if html is not None:
        try:
            output_file(html)  # refused before the job is read, not after
        except SourceError as exc:
            fail(f"--html {exc}", hint="pass a file name in a writable folder")
    try:
        v = judge_job(job_dir, prof, pool, step_regex, job_objects)
    except UnknownPoolError as exc:
        fail(str(exc), hint="pass --pool NAME")
    except JobInputError as exc:
        fail(str(exc))
    if server is not None and jobid:
        row, v.server_io = js.reason(server, jobid, [str(f) for f in jobstats])
        v.reasons.append(row)
    if html is not None:
        p = prof.pool(v.pool)
        command = f"fabricguard verify-job {job_dir} -p {profile} --pool {v.pool}"
        try:
            write_text(html, job_page(v, floor=p.baseline.busbw_floor_gbps, baseline=p.baseline.stepTimeSeconds,
                                      tolerance=p.baseline.stepTolerance, command=command))
        except SourceError as exc:
            fail(f"--html {exc}", hint="pass a file name in a writable folder")
    if wants_json(fmt, as_json):
        print_json(v.to_dict(), "JobVerdict")
    else:
        render_verdict(v)
    raise typer.Exit(v.verdict.exit_code)


def register(app: typer.Typer) -> None:
    """Add ``verify-job`` to the root app."""
    app.command("verify-job")(verify_job)
