"""``fabricguard nccl inspect``: what transport did this job really use?"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from fabricguard import fabrics
from fabricguard.console import Block, blocks, console, fail, paragraph, print_json, row, say, verdict_line
from fabricguard.exitcodes import EXIT_FAILED, EXIT_INPUT, Verdict
from fabricguard.fabrics import Transport
from fabricguard.nccl.report import EXPECT_SETS, NcclReport, NcclTestsRow, NcclTestsTable, judge_expectation
from fabricguard.nccl.scan import LogInputError, inspect_paths
from fabricguard.options import JSON_ALIAS, Format, format_option, html_option, profile_option, wants_json
from fabricguard.profile import UnknownPoolError
from fabricguard.profile.commands import profile_or_exit
from fabricguard.userfiles import SourceError, output_file, write_text
from fabricguard.verdict.fixes import fix_for
from fabricguard.verdict.html import inspection_page
from fabricguard.verdict.job import Level, nccl_reasons, verdict_of

app = typer.Typer(help="Read NCCL logs and nccl-tests output.", no_args_is_help=True)

# Every fabric's wire is green; the rest are verdicts about the job.
_STYLE = {t: "green" for t in fabrics.wire_transports()} | {
    Transport.socket: "bold red",
    Transport.mixed: "bold red",
    Transport.none: "cyan",
    Transport.unknown: "yellow",
}


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


# Without an expectation the command reports and does not judge: its JSON "verdict" is this word (or
# "failed" when the run failed), never "pass", so a CI gate keyed on it cannot pass a socket fallback.
UNJUDGED = "unjudged"
EXPECT_HELP = ("Judge the logs against this inter-node transport: rdma (ib, roce or efa), " + ", ".join(
    k for k in EXPECT_SETS if k != "rdma") + ". Exit 0 pass, 1 degraded (another transport, or not proven), "
    "2 failed.")


@dataclass
class Judgement:
    """What the logs were judged against, the verdict and why (absent: reported, not judged)."""

    expected: str
    verdict: Verdict
    reasons: list[str]
    levels: list[dict[str, Any]]
    floor_gbps: float | None = None  # the pool's busbw floor (-p), drawn in the HTML's nccl-tests plot

    def to_dict(self) -> dict[str, Any]:
        return {"expected": self.expected, "verdict_reasons": self.reasons, "findings": self.levels}


def judge(report: NcclReport, expect: str | None, profile: str | None, pool: str | None) -> Judgement | None:
    """Judge against ``--expect`` or the pool of ``-p``; None when neither was given."""
    if expect is not None:
        verdict, reasons = judge_expectation(report, expect)
        return Judgement(expect, verdict, reasons, [])
    if profile is None:
        return None
    prof = profile_or_exit(profile)
    try:
        p = prof.pool(pool)
    except UnknownPoolError as exc:
        fail(str(exc), hint="pass --pool NAME")
    found = nccl_reasons(p, report)
    for r in found:
        if r.level is not Level.info and not r.fix:
            r.fix = fix_for(r.check, p, prof, r.message)
    verdict = verdict_of(found)
    shown = [r for r in found if r.level is not Level.info] or found
    return Judgement(f"pool {p.name} (fabric {p.fabric.type.value})", verdict, [r.message for r in shown],
                     [r.to_dict() for r in found], p.baseline.busbw_floor_gbps)


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


def render_report(report: NcclReport, word: str = UNJUDGED, judgement: Judgement | None = None) -> None:
    """The verdict first (``unjudged`` without --expect or -p), why, then the transport and where it was proven,
    evidence lines (whole) and nccl-tests tables."""
    t = report.inter_node_transport
    verdict_line(word, f"nccl inspect: inter-node transport {t.value}",
                 f"expected {judgement.expected}" if judgement else "", "NCCL failed" if report.failed else "")
    if judgement is not None:
        for reason in judgement.reasons:
            paragraph(reason, indent="    ", first="  • ")
        for finding in judgement.levels:
            if finding.get("fix"):
                paragraph(finding["fix"], indent="    ", first="  fix: ")
    elif not report.failed:
        paragraph("not judged: pass --expect rdma|socket|none|TRANSPORT or -p PROFILE to judge", indent="  ",
                  first="  ", style="dim")
    paragraph(
        f"network {report.network or '-'} · GPUDirect RDMA {_tri(report.gpudirect_rdma)} · NCCL "
        f"{', '.join(report.nccl_version) or '?'} · scope {report.scope.value} · nodes {report.nodes_text} · "
        f"ranks {report.ranks or '?'} · intra-node {', '.join(report.intra_node) or '-'} · files "
        f"{len(report.files)} · read {report.bytes_read / 1e6:,.1f} MB", indent="  ", first="  ")
    if report.connections:
        paragraph("connections " + ", ".join(f"{k}×{v}" for k, v in report.connections.items()), indent="  ",
                  first="  ")
    for reason in report.reasons:
        paragraph(reason, indent="    ", first="  • ")
    for e in report.warnings:
        paragraph(f"{Path(e.file).name}:{e.line}: {e.why.removeprefix('warning: ')}", indent="    ",
                  first="warning ", style="yellow")
    if report.warning_count > len(report.warnings):
        say(f"  … and {report.warning_count - len(report.warnings)} more warning line(s)")
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


@app.command("inspect")
def inspect(
    paths: list[Path] = typer.Argument(..., help="Log files or directories of them (one file per rank or pod)."),
    expect: str | None = typer.Option(None, "--expect", help=EXPECT_HELP),
    profile: str | None = profile_option(
        help="Judge the logs against a pool of this platform profile, as verify-job does ('local': the embedded "
        "one)."),
    pool: str | None = typer.Option(None, "--pool", help="Pool for -p (default: the profile's default pool)."),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
    html: Path | None = html_option("the report"),
) -> None:
    """Report the NCCL version, selected network, per-connection transports and the inter-node transport.

    Without --expect or -p it reports and does not judge: the JSON "verdict" is "unjudged" (or "failed"
    when the run failed), never "pass", and the exit code is 2 when the run failed, else 0. With --expect
    TRANSPORT or -p PROFILE [--pool P] it judges: exit 0 pass, 1 degraded (sockets, mixed, another
    transport, or not proven), 2 failed. Exit 3: the input holds no NCCL output.
    """
    if expect is not None and expect not in EXPECT_SETS:
        fail(f"--expect {expect!r} is not a transport", hint=f"use one of {', '.join(EXPECT_SETS)}")
    if expect is not None and (profile is not None or pool is not None):
        fail("give --expect or -p/--pool, not both", hint="--expect names a transport; -p judges against a pool")
    if pool is not None and profile is None:
        fail("--pool needs -p/--profile", hint="pass -p PROFILE --pool NAME")
    if html is not None:
        try:
            output_file(html)  # refused before the logs are read, not after
        except SourceError as exc:
            fail(f"--html {exc}", hint="pass a file name in a writable folder")
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
    judgement = judge(report, expect, profile, pool)
    unjudged = Verdict.failed.value if report.failed else UNJUDGED
    word = unjudged if judgement is None else judgement.verdict.value
    if html is not None:
        judged = (f" --expect {expect}" if expect else "") + (f" -p {profile}" if profile else "") + (
            f" --pool {pool}" if pool else "")
        command = "fabricguard nccl inspect " + " ".join(map(str, paths)) + judged
        page = inspection_page(report, word, judgement.expected if judgement else None,
                               judgement.levels if judgement else [], judgement.reasons if judgement else [],
                               floor=judgement.floor_gbps if judgement else None, command=command)
        try:
            write_text(html, page)
        except SourceError as exc:
            fail(f"--html {exc}", hint="pass a file name in a writable folder")
    if wants_json(fmt, as_json):
        extra = judgement.to_dict() if judgement else {"expected": None, "verdict_reasons": [], "findings": []}
        print_json({"verdict": word, **extra, **report.to_dict()}, "NcclInspection")
    else:
        render_report(report, word, judgement)
    if judgement is not None:
        raise typer.Exit(judgement.verdict.exit_code)
    if report.failed:
        raise typer.Exit(EXIT_FAILED)
