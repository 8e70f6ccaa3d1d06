"""``fabricguard nccl inspect``: what transport did this job really use?"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from fabricguard import fabrics
from fabricguard.console import console, fail, print_json, row, say
from fabricguard.exitcodes import EXIT_FAILED, EXIT_INPUT
from fabricguard.fabrics import Transport
from fabricguard.nccl.report import NcclReport, NcclTestsRow
from fabricguard.nccl.scan import LogInputError, inspect_paths
from fabricguard.options import JSON_ALIAS, Format, format_option, wants_json

app = typer.Typer(help="Read NCCL logs and nccl-tests output.", no_args_is_help=True)

# Every fabric's wire is green; the rest are verdicts about the job.
_STYLE = {t: "green" for t in fabrics.wire_transports()} | {
    Transport.socket: "bold red",
    Transport.mixed: "bold red",
    Transport.none: "cyan",
    Transport.unknown: "yellow",
}


def render_report(report: NcclReport) -> None:
    t = report.inter_node_transport
    console.print(
        f"inter-node transport: [{_STYLE[t]}]{t.value}[/]   network: {escape(report.network or '-')}   "
        f"GPUDirect RDMA: {_tri(report.gpudirect_rdma)}   failed: " + ("[bold red]yes[/]" if report.failed else "no")
    )
    console.print(
        f"NCCL {escape(', '.join(report.nccl_version) or '?')}   scope: {report.scope.value}   "
        f"nodes: {report.nodes or '?'}   "
        f"ranks: {report.ranks or '?'}   intra-node: {', '.join(report.intra_node) or '-'}   "
        f"files: {len(report.files)}   read: {report.bytes_read / 1e6:,.1f} MB"
    )
    for reason in report.reasons:
        say(f"  • {reason}")
    for e in report.unread:
        say(("not read", "yellow"), f" {e.file}" + (f":{e.line}" if e.line else "") + f": {e.why}")
    if report.unread_count > len(report.unread):
        say(f"  … and {report.unread_count - len(report.unread)} more not read")
    if report.connections:
        say("connections: " + ", ".join(f"{k}×{v}" for k, v in report.connections.items()))
    if report.evidence:
        et = Table(title="evidence", show_lines=False, expand=False)
        et.add_column("where", no_wrap=True)
        et.add_column("why")
        et.add_column("line", overflow="fold")
        for e in report.evidence:
            row(et, f"{Path(e.file).name}:{e.line}", e.why, e.text.strip()[:160])
        console.print(et)
    for tbl in report.nccl_tests:
        title = escape(f"{tbl.collective or 'nccl-tests'} ({Path(tbl.file).name}:{tbl.line})")
        tt = Table(title=title, expand=False)
        # Older nccl-tests print the largest numeric error per row, not a count of wrong elements.
        magnitude = all(r.oop_wrong is None for r in tbl.rows) and any(r.oop_max_error is not None for r in tbl.rows)
        for c in (
            "size",
            "count",
            "type",
            "redop",
            "time(us)",
            "algbw",
            "busbw",
            "max err" if magnitude else "#wrong",
            "ip busbw",
        ):
            tt.add_column(c, justify="right")
        for r in tbl.rows:
            row(tt, str(r.size), str(r.count), r.type, r.redop, _f(r.oop_time_us), _f(r.oop_algbw),
                _f(r.oop_busbw), _wrong(r), _f(r.ip_busbw))
        console.print(tt)
        oob = "" if tbl.out_of_bounds is None else f"   out of bounds {tbl.out_of_bounds}"
        console.print(
            f"peak busbw {_f(tbl.peak_busbw_gbps)} GB/s   avg bus bandwidth {_f(tbl.avg_busbw_gbps)} GB/s   "
            f"wrong {('N/A' if tbl.wrong is None else tbl.wrong)}{oob}"
        )


def _wrong(r: NcclTestsRow) -> str:
    """The row's wrong-element count, or for older nccl-tests its largest numeric error."""
    if r.oop_wrong is not None:
        return str(r.oop_wrong)
    if r.oop_max_error is not None:
        return f"{r.oop_max_error:g}"
    return "N/A"


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _tri(v: bool | None) -> str:
    return "unknown" if v is None else ("yes" if v else "[yellow]no[/]")


@app.command("inspect")
def inspect(
    paths: list[Path] = typer.Argument(..., help="Log files or directories of them (one file per rank or pod)."),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
) -> None:
    """Report the NCCL version, selected network, per-connection transports and the inter-node verdict.

    Exit code: 2 when the logs show the job failed, 3 when the input holds no NCCL output, 0 otherwise.
    """
    try:
        report = inspect_paths(paths)
    except LogInputError as exc:
        fail(str(exc), hint="pass NCCL_DEBUG=INFO log files or the directory NCCL_DEBUG_FILE wrote into")
    if not report.files:
        fail(f"no readable text files under {', '.join(map(str, paths))}")
    if not report.nccl_output:
        fail(
            f"no NCCL output found in {', '.join(report.files)}",
            hint="run the job with NCCL_DEBUG=INFO and pass its logs, or pass nccl-tests output",
            code=EXIT_INPUT,
        )
    if wants_json(fmt, as_json):
        print_json({"verdict": "failed" if report.failed else "pass", **report.to_dict()})
    else:
        render_report(report)
    if report.failed:
        raise typer.Exit(EXIT_FAILED)
