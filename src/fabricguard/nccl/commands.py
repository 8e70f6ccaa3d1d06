"""``fabricguard nccl inspect``: what transport did this job really use?"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricguard.console import Block, blocks, console, fail, paragraph, print_json, row, say, verdict_line
from fabricguard.exitcodes import EXIT_FAILED, EXIT_INPUT
from fabricguard.nccl.report import NcclReport, NcclTestsRow, NcclTestsTable
from fabricguard.nccl.scan import LogInputError, inspect_paths
from fabricguard.options import JSON_ALIAS, Format, format_option, wants_json
from fabricguard.profile.model import Transport

app = typer.Typer(help="Read NCCL logs and nccl-tests output.", no_args_is_help=True)

_STYLE = {
    Transport.ib: "green",
    Transport.roce: "green",
    Transport.efa: "green",
    Transport.tcpx: "green",
    Transport.socket: "bold red",
    Transport.mixed: "bold red",
    Transport.none: "cyan",
    Transport.unknown: "yellow",
}


def inspect_verdict(report: NcclReport) -> str:
    """The one verdict word of ``nccl inspect`` (JSON and text): what the logs prove, not how it is shown."""
    return "failed" if report.failed else "pass"


_FULL = ("size", "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong", "ip busbw")
_NARROW = ("size", "time(us)", "algbw", "busbw", "#wrong", "ip busbw")  # what fits 80 columns


def _tests_table(tbl: NcclTestsTable) -> None:
    """nccl-tests rows as nccl-tests prints them, never a number cut: every column as wide as its widest cell;
    on a narrow console, the columns a reader needs (size, time, bandwidths, errors) without count/type/redop."""
    magnitude = all(r.oop_wrong is None for r in tbl.rows) and any(r.oop_max_error is not None for r in tbl.rows)
    cells = {r.size: {"size": str(r.size), "count": str(r.count), "type": r.type, "redop": r.redop,
                      "time(us)": _f(r.oop_time_us), "algbw": _f(r.oop_algbw), "busbw": _f(r.oop_busbw),
                      "#wrong": _wrong(r), "ip busbw": _f(r.ip_busbw)} for r in tbl.rows}
    rows = list(cells.values())

    def width(cols: tuple[str, ...]) -> int:
        return 1 + sum(3 + max([len(c)] + [len(r[c]) for r in rows]) for c in cols)

    cols = _FULL if width(_FULL) <= console.width else _NARROW
    title = f"{tbl.collective or 'nccl-tests'} ({Path(tbl.file).name}:{tbl.line})"
    tt = Table(title=title, expand=False, title_justify="left", box=None)  # aligned columns, as nccl-tests prints
    for c in cols:
        tt.add_column("max err" if c == "#wrong" and magnitude else c, justify="right", no_wrap=True)
    for r in rows:
        row(tt, *[r[c] for c in cols])
    console.print(tt)
    oob = "" if tbl.out_of_bounds is None else f" · out of bounds {tbl.out_of_bounds}"
    paragraph(f"peak busbw {_f(tbl.peak_busbw_gbps)} GB/s · avg bus bandwidth {_f(tbl.avg_busbw_gbps)} GB/s · "
              f"wrong {('N/A' if tbl.wrong is None else tbl.wrong)}{oob}", indent="  ")


def render_report(report: NcclReport) -> None:
    """The verdict first, the transport and where it was proven, then evidence lines (whole) and nccl-tests."""
    t = report.inter_node_transport
    verdict_line(inspect_verdict(report), f"nccl inspect: inter-node transport {t.value}",
                 "NCCL failed" if report.failed else "")
    paragraph(
        f"network {report.network or '-'} · GPUDirect RDMA {_tri(report.gpudirect_rdma)} · NCCL "
        f"{', '.join(report.nccl_version) or '?'} · scope {report.scope.value} · nodes {report.nodes or '?'} · "
        f"ranks {report.ranks or '?'} · intra-node {', '.join(report.intra_node) or '-'} · files "
        f"{len(report.files)} · read {report.bytes_read / 1e6:,.1f} MB", indent="  ", first="  ")
    if report.connections:
        paragraph("connections " + ", ".join(f"{k}×{v}" for k, v in report.connections.items()), indent="  ",
                  first="  ")
    for reason in report.reasons:
        paragraph(reason, indent="    ", first="  • ")
    for e in report.unread:
        paragraph(f"{e.file}" + (f":{e.line}" if e.line else "") + f": {e.why}", indent="    ", first="  not read: ",
                  style="yellow")
    if report.unread_count > len(report.unread):
        say(f"  … and {report.unread_count - len(report.unread)} more not read")
    if report.evidence:
        console.print()
        blocks(Block(head=[("evidence", "bold"), " ", f"{Path(e.file).name}:{e.line}"],
                     fields=[("why", e.why), ("line", f"`{e.text.strip()}`")]) for e in report.evidence)
    for tbl in report.nccl_tests:
        console.print()
        _tests_table(tbl)


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
    return "unknown" if v is None else ("yes" if v else "no")


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
        print_json({"verdict": inspect_verdict(report), **report.to_dict()})
    else:
        render_report(report)
    if report.failed:
        raise typer.Exit(EXIT_FAILED)
