"""Render a doctor report: a rich table grouped by severity, JSON, Markdown, or a self-contained HTML page.

The HTML page needs nothing from the network (inline CSS and SVG): a readiness timeline per DaemonSet
(created -> now, coloured by state, with the template change and every pod start marked, which shows at a
glance why young pods mislead) and a pool x check grid, followed by the findings.
"""

from __future__ import annotations

import html
import json
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fabricguard.doctor.engine import Report, Timeline
from fabricguard.doctor.model import Finding, Severity, human_age, iso

STYLE = {Severity.critical: "bold red", Severity.warning: "yellow", Severity.info: "dim"}


def _objects(f: Finding, limit: int = 4) -> str:
    names = [str(o) for o in f.objects[:limit]]
    if len(f.objects) > limit:
        names.append(f"(+{len(f.objects) - limit} more)")
    return "\n".join(names)


def render_table(report: Report, console: Console) -> None:
    c = report.counts
    console.print(
        f"[bold]{report.title}[/] {report.source} · profile {report.profile_name or '-'} · now {iso(report.now)}"
    )
    for note in report.notes:
        console.print(f"[dim]note: {escape(note)}[/]")
    if not report.findings:
        console.print("[green]No findings.[/]")
        return
    for sev in Severity:
        group = [f for f in report.findings if f.severity is sev]
        if not group:
            continue
        table = Table(title=f"{sev.upper()} ({len(group)})", title_style=STYLE[sev], show_lines=True, expand=True)
        table.add_column("rule", style=STYLE[sev], no_wrap=True)
        table.add_column("objects", overflow="fold", max_width=40)
        table.add_column("finding", overflow="fold", ratio=3)
        table.add_column("fix", overflow="fold", ratio=2)
        for f in group:
            table.add_row(f.rule, escape(_objects(f)), escape(f.message), escape(f.fix))
        console.print(table)
    console.print(f"{c['critical']} critical, {c['warning']} warning")


def to_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, default=str) + "\n"


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(report: Report) -> str:
    c = report.counts
    lines = [
        f"# {report.title}",
        "",
        f"Source `{report.source}`, profile `{report.profile_name or '-'}`, now `{iso(report.now)}`: "
        f"**{c['critical']} critical, {c['warning']} warning**.",
        "",
    ]
    lines += [f"> note: {n}" for n in report.notes]
    if report.grid:
        rules = list(next(iter(report.grid.values())))
        lines += ["", "| pool | " + " | ".join(rules) + " |", "|---" * (len(rules) + 1) + "|"]
        mark = {"fail": "FAIL", "pass": "ok", "n/a": "-"}
        for pool, row in report.grid.items():
            lines.append(f"| {_md(pool)} | " + " | ".join(mark[row[r]] for r in rules) + " |")
    for sev in Severity:
        group = [f for f in report.findings if f.severity is sev]
        if not group:
            continue
        lines += ["", f"## {sev} ({len(group)})", ""]
        for f in group:
            lines += [
                f"### `{f.rule}`: {_md(', '.join(str(o) for o in f.objects[:4]))}"
                + (f" (+{len(f.objects) - 4} more)" if len(f.objects) > 4 else ""),
                "",
                _md(f.message),
                "",
                "| field | value |",
                "|---|---|",
            ]
            lines += [f"| `{_md(k)}` | `{_md(json.dumps(v, default=str))}` |" for k, v in f.evidence.items()]
            lines += ["", f"**Fix:** {_md(f.fix)}"]
    if not report.findings:
        lines += ["", "No findings."]
    return "\n".join(lines) + "\n"


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1200px;color:#1d2433;
background:#fafbfc;padding:0 1rem}h1{margin-bottom:.2rem}.sub{color:#5b6475;margin-top:0}
.badges span{display:inline-block;border-radius:1rem;padding:.2rem .8rem;margin-right:.5rem;font-weight:600}
.b-critical{background:#fde2e1;color:#a4161a}.b-warning{background:#fff3cd;color:#7a5b00}.b-ok{background:#dcf5e3;
color:#19692c}section{background:#fff;border:1px solid #e3e6ea;border-radius:10px;padding:1rem 1.25rem;
margin:1.25rem 0}table.grid{border-collapse:collapse}table.grid th,table.grid td{border:1px solid #e3e6ea;
padding:.35rem .6rem;text-align:center}table.grid th{font-weight:600;font-size:12px}td.fail{background:#f8d7da;
color:#a4161a;font-weight:700}td.pass{background:#dcf5e3;color:#19692c}td.na{color:#a0a7b4}
.finding{border-left:5px solid #ccc;padding:.5rem 1rem;margin:.8rem 0;background:#fff}
.finding.critical{border-color:#d62828}.finding.warning{border-color:#e9a400}.finding h3{margin:.2rem 0;
font-size:15px}code{background:#f1f3f5;padding:0 .25rem;border-radius:3px}table.ev{font-size:12px;
border-collapse:collapse;margin:.4rem 0}table.ev td{border-bottom:1px solid #eef0f2;padding:.15rem .5rem;
vertical-align:top}.fix{color:#19692c}.notes{color:#5b6475;font-size:12px}svg text{font:11px system-ui,sans-serif}
"""
_COLOR = {"never-ready": "#d62828", "regressed": "#f77f00", "partial": "#e9c46a", "ready": "#2a9d8f", "idle": "#adb5bd"}


def _timeline_svg(timelines: list[Timeline], now: datetime) -> str:
    starts = [t.created for t in timelines if t.created]
    if not starts:
        return "<p>No DaemonSet creation times in the snapshot.</p>"
    t0 = min(starts)
    span = max((now - t0).total_seconds(), 1.0)
    left, width, row = 260, 640, 34
    height = row * len(timelines) + 40

    def x(dt: datetime) -> float:
        return left + width * max(0.0, min(1.0, (dt - t0).total_seconds() / span))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 170}" height="{height}" role="img">']
    parts.append(f'<text x="{left}" y="14">{iso(t0)[:10]}</text>')
    parts.append(f'<text x="{left + width}" y="14" text-anchor="end">now {iso(now)[:10]}</text>')
    for i, t in enumerate(timelines):
        y = 26 + i * row
        name = html.escape(f"{t.namespace}/{t.name}")
        parts.append(f'<text x="0" y="{y + 14}">{name}</text>')
        parts.append(f'<rect x="{left}" y="{y + 4}" width="{width}" height="14" fill="#f1f3f5"/>')
        if t.created:
            title = html.escape(
                f"{t.state}: created {iso(t.created)} ({human_age((now - t.created).total_seconds())} ago), "
                f"{t.ready}/{t.desired} ready"
            )
            parts.append(
                f'<rect x="{x(t.created):.1f}" y="{y + 4}" width="{max(2.0, x(now) - x(t.created)):.1f}" height="14" '
                f'fill="{_COLOR[t.state]}" rx="3"><title>{title}</title></rect>'
            )
        if t.template_since:
            tx = x(t.template_since)
            parts.append(
                f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{y}" y2="{y + 22}" stroke="#1d2433" stroke-width="2">'
                f"<title>current template since {iso(t.template_since)}</title></line>"
            )
        for pt in t.pod_times[-200:]:
            parts.append(f'<circle cx="{x(pt):.1f}" cy="{y + 11}" r="2" fill="#1d2433" opacity=".55"/>')
        label = t.state if not t.created else f"{t.state} · {human_age((now - t.created).total_seconds())}"
        parts.append(f'<text x="{left + width + 8}" y="{y + 15}">{html.escape(label)} ({t.ready}/{t.desired})</text>')
    parts.append("</svg>")
    return "".join(parts)


def to_html(report: Report) -> str:
    c = report.counts
    e = html.escape
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{e(report.title)}: {e(report.source)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(report.title)}</h1><p class='sub'>{e(report.source)} · profile {e(report.profile_name or '-')}"
        f" · now {iso(report.now)}</p><div class='badges'>",
        f"<span class='b-critical'>{c['critical']} critical</span><span class='b-warning'>{c['warning']} warning</span>"
        if report.findings
        else "<span class='b-ok'>no findings</span>",
        "</div>",
    ]
    if report.timelines:
        out.append(
            "<section><h2>DaemonSet readiness timeline</h2><p class='sub'>Each bar runs from the DaemonSet's "
            "creation to now, coloured by its state; dots are pod creations (young pods on autoscaled nodes are "
            "why a months-old failure looks recent); a vertical line marks the current template.</p>"
        )
        out.append(_timeline_svg(report.timelines, report.now))
        out.append("</section>")
    if report.grid:
        rules = list(next(iter(report.grid.values())))
        out.append("<section><h2>Pools × checks</h2><table class='grid'><tr><th>pool</th>")
        out += [f"<th>{e(r)}</th>" for r in rules]
        out.append("</tr>")
        for pool, row in report.grid.items():
            out.append(f"<tr><th>{e(pool)}</th>")
            for r in rules:
                v = row[r]
                out.append(
                    "<td "
                    f"class='{'na' if v == 'n/a' else v}'>{'✗' if v == 'fail' else '✓' if v == 'pass' else '–'}</td>"
                )
            out.append("</tr>")
        out.append("</table></section>")
    out.append("<section><h2>Findings</h2>")
    for f in report.findings:
        out.append(f"<div class='finding {f.severity}'><h3><code>{e(f.rule)}</code> {e(_objects(f, 6))}</h3>")
        out.append(f"<p>{e(f.message)}</p><table class='ev'>")
        out += [
            f"<tr><td><code>{e(k)}</code></td><td>{e(json.dumps(v, default=str))}</td></tr>"
            for k, v in f.evidence.items()
        ]
        out.append(f"</table><p class='fix'><b>Fix:</b> {e(f.fix)}</p></div>")
    if not report.findings:
        out.append("<p>No findings.</p>")
    out.append("</section>")
    if report.notes:
        out.append("<section class='notes'>" + "<br>".join(e(n) for n in report.notes) + "</section>")
    out.append("</body></html>\n")
    return "".join(out)


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        return to_json(report)
    if fmt == "markdown":
        return to_markdown(report)
    if fmt == "html":
        return to_html(report)
    raise ValueError(f"unknown format {fmt!r}")
