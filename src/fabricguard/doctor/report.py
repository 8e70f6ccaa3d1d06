"""Render a doctor report: a rich table grouped by severity, JSON, Markdown, or a self-contained HTML page.

The HTML page needs nothing from the network (inline CSS and SVG): a readiness timeline per DaemonSet
(created -> now, coloured by state, with the template change and every pod start marked, which shows at a
glance why young pods mislead), a pool x check grid and, for pools with a proof goal, a node x proof grid (each
node's last pair test: its age and result), followed by the findings.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from rich.console import Console

from fabricguard.console import Block, Column, Part, console, paragraph, table_or_blocks, verdict_line
from fabricguard.doctor.engine import Report, Timeline
from fabricguard.doctor.model import CoverageCell, Finding, Severity, human_age
from fabricguard.doctor.rules import RULES
from fabricguard.doctor.rules.lustre import LustreCell
from fabricguard.times import format_time, parse_time

C = TypeVar("C")
STYLE = {Severity.critical: "bold red", Severity.warning: "yellow", Severity.info: "dim"}


def _objects(f: Finding, limit: int = 4) -> str:
    names = [str(o) for o in f.objects[:limit]]
    if len(f.objects) > limit:
        names.append(f"(+{len(f.objects) - limit} more)")
    return "\n".join(names)


@dataclass
class EventSummary:
    """Events with one reason and message, merged: how often, on how many objects, first and last seen."""

    reason: str
    message: str
    count: int
    events: int
    objects: int
    first: datetime | None
    last: datetime | None

    def when(self) -> str:
        first, last = (format_time(t) if t else "?" for t in (self.first, self.last))
        return first if first == last else f"{first} → {last}"

    def text(self) -> str:
        on = f" on {self.objects} objects" if self.objects > 1 else ""
        return f"{self.reason} ×{self.count} ({self.events} events{on}), {self.when()}: {self.message}"


def is_event_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, dict) and "reason" in v and "message" in v for v in value)
    )


def summarise_events(events: list[dict[str, Any]]) -> list[EventSummary]:
    """Group events by (reason, message): counts summed, objects counted, first and last seen across them."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for ev in events:
        groups.setdefault((str(ev.get("reason") or "?"), str(ev.get("message") or "")), []).append(ev)
    out = []
    for (reason, message), evs in groups.items():
        firsts = [t for ev in evs if (t := parse_time(ev.get("firstTimestamp") or ev.get("lastTimestamp")))]
        lasts = [t for ev in evs if (t := parse_time(ev.get("lastTimestamp") or ev.get("firstTimestamp")))]
        counts = [c if isinstance(c := ev.get("count"), int) and c > 0 else 1 for ev in evs]
        objects = {ev.get("object") for ev in evs if ev.get("object")}
        out.append(
            EventSummary(
                reason,
                message,
                sum(counts),
                len(evs),
                len(objects) or 1,
                min(firsts) if firsts else None,
                max(lasts) if lasts else None,
            )
        )
    out.sort(key=lambda s: -s.count)
    return out


_PER_OBJECT = re.compile(r"^(pod|node|Node|Pod) (\S+): (.+)$")


def evidence_rows(evidence: dict[str, Any]) -> list[tuple[str, Any]]:
    """Evidence as (label, value) rows, with a value repeated for several objects given once.

    ``pod a: status...message`` and ``pod b: status...message`` with the same value become one row
    ``pods a, b: status...message``; other keys with the same long value (text over 40 characters, lists,
    objects) share one row too. Rows keep the order of their first key.
    """
    groups: dict[tuple[str, ...], list[str]] = {}
    for k, v in evidence.items():
        value = json.dumps(v, sort_keys=True, default=str)
        m = _PER_OBJECT.match(k)
        long = not isinstance(v, str | int | float | bool) or (isinstance(v, str) and len(v) > 40)
        if m:
            gkey: tuple[str, ...] = ("per-object", m.group(1), m.group(3), value)
        elif long:
            gkey = ("long", value)
        else:
            gkey = ("one", k)
        groups.setdefault(gkey, []).append(k)
    rows: list[tuple[str, Any]] = []
    for gkey, keys in groups.items():
        value = evidence[keys[0]]
        if len(keys) == 1:
            rows.append((keys[0], value))
        elif gkey[0] == "per-object":
            names = ", ".join(m.group(2) for k in keys if (m := _PER_OBJECT.match(k)))
            rows.append((f"{gkey[1]}s {names}: {gkey[2]}", value))
        else:
            rows.append(("; ".join(keys), value))
    return rows


def plain(value: Any) -> str:
    """An evidence value as a person reads it: text as text, lists joined, events summarised."""
    if is_event_list(value):
        return "; ".join(s.text() for s in summarise_events(value))
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict) and all(isinstance(v, str | int | float | bool) for v in value.values()):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    if isinstance(value, int | float | bool) or value is None:
        return json.dumps(value)
    return json.dumps(value, default=str)


def _fix_shown(f: Finding) -> str:
    return f"the fix of {f.cause} (above) fixes this too." if f.cause else f.fix


def render_table(report: Report, out: Console | None = None) -> None:
    """The report for people: the verdict first, then findings cause first (a table on a wide terminal, one
    block per finding otherwise); a run without findings says what it checked."""
    del out  # the one console of fabricguard.console: its width and terminal decide the layout
    c = report.counts
    counts = ", ".join(f"{c[str(s)]} {s}" for s in Severity if c[str(s)]) or "no findings"
    verdict_line(report.verdict, f"{report.title}: {counts}")
    paragraph(f"source {report.source} · profile {report.profile_name or '-'} · now {format_time(report.now)}",
              indent="  ")
    for note in report.notes:
        paragraph(note, first="note: ", indent="  ", style="dim")
    for pool, cells in report.coverage.items():
        _pool_paragraphs(coverage_summary(pool, cells), [
            f"{c.node}: {c.result}, {_last(c)}{_busbw(c, ', ')}" for c in cells if c.result != "proven"])
    for pool, lcells in report.lustre.items():
        _pool_paragraphs(lustre_summary(pool, lcells), [
            f"{c.node}: {c.state}: " + _checks_said(c) for c in lcells if c.state in ("failing", "warning")])
    if not report.findings:
        read = ", ".join(f"{n} {k}" for k, n in report.objects_read.items())
        paragraph(f"checked {len(report.checked)} rules ({', '.join(report.checked)})"
                  + (f" on {read}" if read else "") + ": nothing to fix.", style="green")
        return
    console.print()
    cols = [Column("severity", no_wrap=True), Column("rule", no_wrap=True), Column("objects"),
            Column("finding"), Column("fix")]
    rows: list[list[Part]] = [[(str(f.severity).upper(), STYLE[f.severity]), f.rule, _objects(f), f.message,
                               _fix_shown(f)] for f in report.findings]
    items = [Block(head=[(str(f.severity).upper(), STYLE[f.severity]), "  ", f.rule, " · ",
                         str(f.objects[0]) if f.objects else "-"],
                   fields=[("objects", _objects(f).replace("\n", ", ") if len(f.objects) > 1 else ""),
                           ("caused by", f.cause), ("finding", f.message), ("fix", _fix_shown(f))])
             for f in report.findings]
    table_or_blocks(cols, rows, items)


COVERAGE_TEXT_ROWS = 10  # nodes listed per pool in text (named and stale first); the HTML page shows every node
COVERAGE_HTML_CELLS = 2000


def _pool_paragraphs(summary: str, lines: list[str]) -> None:
    """A pool's node grid in text: its summary, then the first nodes worth a look."""
    paragraph(summary, indent="  ")
    for line in lines[:COVERAGE_TEXT_ROWS]:
        paragraph(line, indent="    ")


def _last(c: CoverageCell) -> str:
    return "never proven" if c.age_s is None else f"proven {human_age(c.age_s)} ago"


def _busbw(c: CoverageCell, before: str, absent: str = "") -> str:
    return absent if c.busbw_gbps is None else f"{before}{c.busbw_gbps:.1f} GB/s"


def _checks_said(c: LustreCell) -> str:
    """A Lustre cell's failing checks with the line each read, cut at 300 characters."""
    return "; ".join(f"{k}: {v}" for k, v in c.checks.items())[:300]


def _tally(states: list[str], good: str) -> tuple[int, list[tuple[str, int]]]:
    """How many cells are ``good``, and the other states with their counts, most first (then by name)."""
    counts = Counter(states)
    return counts.pop(good, 0), sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def coverage_summary(pool: str, cells: list[CoverageCell]) -> str:
    """``proof coverage, pool P: 30 of 32 node(s) proven within the goal; 1 Convicted, 1 stale``."""
    proven, others = _tally([c.result for c in cells], "proven")
    rest = ", ".join(f"{n} {r}" for r, n in others)
    return f"proof coverage, pool {pool}: {proven} of {len(cells)} node(s) proven within the goal" + (
        f"; {rest}" if rest else "")


def lustre_summary(pool: str, cells: list[LustreCell]) -> str:
    """``Lustre clients, pool P: 18 of 20 node(s) healthy; 2 failing (lustre.imports x2)``."""
    checks = Counter(k for c in cells if c.state == "failing" for k in c.checks)
    healthy, others = _tally([c.state for c in cells], "healthy")
    rest = ", ".join(f"{n} {s}" + (" (" + ", ".join(f"{k} x{m}" for k, m in sorted(checks.items())) + ")"
                                   if s == "failing" else "")
                     for s, n in others)
    return f"Lustre clients, pool {pool}: {healthy} of {len(cells)} node(s) healthy" + (f"; {rest}" if rest else "")


def to_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, default=str) + "\n"


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


_MD_SPECIAL = re.compile(r"([\\`*_<>\[\]])")


def _md_text(text: str) -> str:
    """Text in a Markdown table cell as written: "<absent>" or a "*" must not turn into markup."""
    return _md(_MD_SPECIAL.sub(r"\\\1", text))  # then _md escapes "|" for the table


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table: cells as given (escaped by the caller)."""
    return ["| " + " | ".join(head) + " |", "|---" * len(head) + "|", *("| " + " | ".join(r) + " |" for r in rows)]


def to_markdown(report: Report) -> str:
    c = report.counts
    lines = [
        f"# {report.title}",
        "",
        f"Source `{report.source}`, profile `{report.profile_name or '-'}`, now `{format_time(report.now)}`: "
        f"**{c['critical']} critical, {c['warning']} warning**.",
        "",
    ]
    lines += [f"> note: {n}" for n in report.notes]
    if report.grid:
        rules = list(next(iter(report.grid.values())))
        mark = {"critical": "FAIL", "warning": "WARN", "info": "info", "pass": "ok", "n/a": "-"}
        lines += ["", *_md_table(["pool", *rules], [[_md(pool), *(mark[grid_cell(row[r], r)] for r in rules)]
                                                    for pool, row in report.grid.items()])]
    for pool, cells in report.coverage.items():
        lines += ["", f"**{_md(coverage_summary(pool, cells))}**", ""]
        lines += _md_table(["node", "result", "last proven", "busbw"],
                           [[_md(c.node), _md(c.result), _md(_last(c)), _busbw(c, "", "-")]
                            for c in cells if c.result != "proven"][:COVERAGE_HTML_CELLS])
    for pool, lcells in report.lustre.items():
        lines += ["", f"**{_md(lustre_summary(pool, lcells))}**"]
        bad = [c for c in lcells if c.state != "healthy"][:COVERAGE_HTML_CELLS]
        if bad:
            lines += ["", *_md_table(["node", "Lustre client", "checks (the line each read)"],
                                     [[_md(c.node), _md(c.state), _md(_checks_said(c)) or "-"] for c in bad])]
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
            ]
            lines += _md_table(["field", "value"],
                               [[f"`{_md(k)}`", _md_text(plain(v))] for k, v in evidence_rows(f.evidence)])
            lines += ["", f"**Fix:** {_md(f.fix)}"]
    if not report.findings:
        lines += ["", "No findings."]
    return "\n".join(lines) + "\n"


_RULE_SEVERITY = {r.id: r.severity for r in RULES}
_RULE_SUMMARY = {r.id: r.summary for r in RULES}


def grid_cell(value: str, rule: str) -> str:
    """A grid cell as shown: a failed check takes its rule's severity (critical, warning, info)."""
    return str(_RULE_SEVERITY.get(rule, Severity.critical)) if value == "fail" else value


# Grid cells: mark, CSS class, words for the tooltip. Colour is never the only cue: each has its own mark.
Mark = tuple[str, str, str]
_MARK: dict[str, Mark] = {
    "critical": ("✗", "critical", "critical finding"),
    "warning": ("!", "warning", "warning"),
    "info": ("i", "info", "information"),
    "pass": ("✓", "pass", "checked, no finding"),
    "n/a": ("–", "na", "does not apply to this pool"),
}

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1200px;color:#1d2433;
background:#fafbfc;padding:0 1rem}h1{margin-bottom:.2rem}.sub{color:#5b6475;margin-top:0}
.badges span{display:inline-block;border-radius:1rem;padding:.2rem .8rem;margin-right:.5rem;font-weight:600}
.b-critical{background:#fde2e1;color:#a4161a}.b-warning{background:#fff3cd;color:#7a5b00}.b-info{background:#e0ecff;
color:#1d4ed8}.b-ok{background:#dcf5e3;color:#19692c}section{background:#fff;border:1px solid #e3e6ea;
border-radius:10px;padding:1rem 1.25rem;margin:1.25rem 0;overflow-x:auto}table.grid{border-collapse:collapse}
table.grid th,table.grid td{border:1px solid #e3e6ea;padding:.35rem .6rem;text-align:center}table.grid th{
font-weight:600;font-size:12px}table.grid td{font-weight:700;font-size:15px}td.critical{background:#f8d7da;
color:#a4161a}td.warning{background:#fff3cd;color:#7a5b00}td.info{background:#e0ecff;color:#1d4ed8}td.pass{
background:#dcf5e3;color:#19692c;font-weight:400}td.na{color:#a0a7b4;font-weight:400}.legend{font-size:12px;
color:#5b6475}.legend b{display:inline-block;min-width:1.3em;text-align:center;border-radius:3px;margin:0 .2rem 0 .8rem}
.legend b.critical{background:#f8d7da;color:#a4161a}.legend b.warning{background:#fff3cd;color:#7a5b00}
.legend b.info{background:#e0ecff;color:#1d4ed8}.legend b.pass{background:#dcf5e3;color:#19692c}
.finding{border-left:5px solid #ccc;padding:.5rem 1rem;margin:.8rem 0;background:#fff}
.cov{display:flex;flex-wrap:wrap;gap:4px}.cov .cell{width:8.2rem;padding:.2rem .4rem;border-radius:4px;font-size:11px;
border:1px solid #e3e6ea;overflow:hidden}.cov .cell b{display:block;font-weight:600;white-space:nowrap}
.cov .critical{background:#f8d7da;color:#a4161a}.cov .warning{background:#fff3cd;color:#7a5b00}.cov .pass{
background:#dcf5e3;color:#19692c}.cov .na{background:#f1f3f5;color:#5b6475}.legend b.na{background:#f1f3f5}
.finding.critical{border-color:#d62828}.finding.warning{border-color:#e9a400}.finding.info{border-color:#3b82f6}
.finding h3{margin:.2rem 0;font-size:15px}.sev{font-size:11px;font-weight:700;text-transform:uppercase;
border-radius:3px;padding:0 .35rem;margin-right:.4rem;vertical-align:middle}.sev.critical{background:#f8d7da;
color:#a4161a}.sev.warning{background:#fff3cd;color:#7a5b00}.sev.info{background:#e0ecff;color:#1d4ed8}
code{background:#f1f3f5;padding:0 .25rem;border-radius:3px}table.ev{font-size:12px;border-collapse:collapse;
margin:.4rem 0;width:100%}table.ev td{border-bottom:1px solid #eef0f2;padding:.15rem .5rem;vertical-align:top;
overflow-wrap:anywhere}table.ev td:first-child{width:32%}.event+.event{margin-top:.4rem}
.event .when{color:#5b6475}.event .msg{font-family:ui-monospace,monospace;font-size:11px;color:#3d4452}
.fix{color:#19692c}.notes{color:#5b6475;
font-size:12px}svg text{font:11px system-ui,sans-serif}
"""
_COLOR = {"never-ready": "#d62828", "regressed": "#f77f00", "partial": "#e9c46a", "ready": "#2a9d8f", "idle": "#adb5bd"}
# Label column of the timeline: as wide as the longest name needs, within these bounds; a longer name is
# shortened in the middle (namespace start and name end stay) and clipped, with the full name as its tooltip.
LABEL_MIN_PX, LABEL_MAX_PX, CHAR_PX = 140, 340, 6.6


def _short(name: str, max_chars: int) -> str:
    if len(name) <= max_chars:
        return name
    head = (max_chars - 1) // 2
    return name[:head] + "…" + name[len(name) - (max_chars - 1 - head) :]


def _timeline_svg(timelines: list[Timeline], now: datetime) -> str:
    starts = [t.created for t in timelines if t.created]
    if not starts:
        return "<p>No DaemonSet creation times in the snapshot.</p>"
    t0 = min(starts)
    span = max((now - t0).total_seconds(), 1.0)
    names = [f"{t.namespace}/{t.name}" for t in timelines]
    max_chars = min(int(LABEL_MAX_PX / CHAR_PX), max(len(n) for n in names))
    label_w = max(LABEL_MIN_PX, math.ceil(max_chars * CHAR_PX))
    gap, width, row = 12, 600, 34
    left = label_w + gap
    height = row * len(timelines) + 40

    def x(dt: datetime) -> float:
        return left + width * max(0.0, min(1.0, (dt - t0).total_seconds() / span))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 190}" height="{height}" role="img">',
        f'<text x="{left}" y="14">{format_time(t0)[:10]}</text>',
        f'<text x="{left + width}" y="14" text-anchor="end">now {format_time(now)[:10]}</text>',
        # A nested svg clips what it holds: no label can reach into the bars, whatever the font.
        f'<svg class="labels" x="0" y="0" width="{label_w}" height="{height}">',
    ]
    for i, name in enumerate(names):
        parts.append(
            f'<text class="label" x="0" y="{26 + i * row + 14}"><title>{html.escape(name)}</title>'
            f"{html.escape(_short(name, max_chars))}</text>"
        )
    parts.append("</svg>")
    for i, t in enumerate(timelines):
        y = 26 + i * row
        parts.append(f'<rect class="track" x="{left}" y="{y + 4}" width="{width}" height="14" fill="#f1f3f5"/>')
        if t.created:
            title = html.escape(
                f"{names[i]}: {t.state}, created {format_time(t.created)} "
                f"({human_age((now - t.created).total_seconds())} ago), {t.ready}/{t.desired} ready"
            )
            parts.append(
                f'<rect x="{x(t.created):.1f}" y="{y + 4}" width="{max(2.0, x(now) - x(t.created)):.1f}" height="14" '
                f'fill="{_COLOR[t.state]}" rx="3"><title>{title}</title></rect>'
            )
        if t.template_since:
            tx = x(t.template_since)
            parts.append(
                f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{y}" y2="{y + 22}" stroke="#1d2433" stroke-width="2">'
                f"<title>current template since {format_time(t.template_since)}</title></line>"
            )
        for pt in t.pod_times[-200:]:
            parts.append(f'<circle cx="{x(pt):.1f}" cy="{y + 11}" r="2" fill="#1d2433" opacity=".55"/>')
        label = t.state if not t.created else f"{t.state} · {human_age((now - t.created).total_seconds())}"
        parts.append(f'<text x="{left + width + 8}" y="{y + 15}">{html.escape(label)} ({t.ready}/{t.desired})</text>')
    parts.append("</svg>")
    return "".join(parts)


def _evidence_html(value: Any) -> str:
    e = html.escape
    if is_event_list(value):
        return "".join(
            f"<div class='event'><b>{e(s.reason)}</b> ×{s.count} · {s.events} event{'s' if s.events > 1 else ''}"
            f"{f' on {s.objects} objects' if s.objects > 1 else ''} · <span class='when'>{e(s.when())}</span>"
            f"<div class='msg'>{e(s.message)}</div></div>"
            for s in summarise_events(value)
        )
    if isinstance(value, dict) and value and all(isinstance(v, str | int | float | bool) for v in value.values()):
        # Side by side (staging / production, field / value): one line each, the key in bold.
        return "<br>".join(f"<b>{e(str(k))}</b>: {e(str(v))}" for k, v in value.items())
    return e(plain(value))


def _grid_html(report: Report) -> list[str]:
    e = html.escape
    rules = list(next(iter(report.grid.values())))
    out = ["<section><h2>Pools × checks</h2><table class='grid'><tr><th>pool</th>"]
    out += [f"<th title='{e(_RULE_SUMMARY.get(r, r))}'>{e(r)}</th>" for r in rules]
    out.append("</tr>")
    for pool, row in report.grid.items():
        out.append(f"<tr><th>{e(pool)}</th>")
        for r in rules:
            mark, cls, words = _MARK[grid_cell(row[r], r)]
            out.append(f"<td class='{cls}' title='{e(r)}: {words}'>{mark}</td>")
        out.append("</tr>")
    out.append("</table>")
    return out + _legend(_MARK)


def _legend(marks: dict[str, Mark]) -> list[str]:
    """The legend that closes a grid's section: each mark with its words."""
    return ["<p class='legend'>", *(f"<b class='{cls}'>{mark}</b>{words}" for mark, cls, words in marks.values()),
            "</p></section>"]


def _node_cells_html(heading: str, sub: str, pools: Mapping[str, Sequence[C]], summary: Callable[[str, Any], str],
                     cell: Callable[[C], tuple[str, str, str, str]], marks: dict[str, Mark]) -> list[str]:
    """A node grid (one cell per node, grouped by pool) in its section; ``cell`` gives a node's (kind in
    ``marks``, node, what the cell says, tooltip)."""
    e = html.escape
    out = [f"<section><h2>{heading}</h2><p class='sub'>{sub}</p>"]
    for pool, cells in pools.items():
        out.append(f"<h3>{e(summary(pool, cells))}</h3><div class='cov'>")
        for c in cells[:COVERAGE_HTML_CELLS]:
            kind, node, said, tip = cell(c)
            mark, cls, _ = marks[kind]
            out.append(f"<div class='cell {cls}' title='{e(tip)}'><b>{e(_short(node, 18))}</b>"
                       f"<span>{mark} {e(said)}</span></div>")
        if len(cells) > COVERAGE_HTML_CELLS:
            out.append(f"<p class='legend'>and {len(cells) - COVERAGE_HTML_CELLS} more node(s)</p>")
        out.append("</div>")
    return out + _legend(marks)


# Coverage cells: mark, CSS class, words; a FabricProven=False reason (Convicted, ...) is "named".
_COVER: dict[str, Mark] = {
    "proven": ("✓", "pass", "proven within the goal"),
    "stale": ("!", "warning", "last proven longer ago than the goal"),
    "never": ("·", "na", "never proven"),
    "named": ("✗", "critical", "named by the controller (FabricProven=False)"),
}


def _cover_kind(result: str) -> str:
    if result == "ChangedSinceProof":  # out of "proven" until its re-proof, not found bad: amber, not red
        return "stale"
    return result if result in ("proven", "stale", "never") else "named"


def _short_age(c: CoverageCell) -> str:
    if c.age_s is None:
        return "never"
    s = int(c.age_s)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def _coverage_cell(c: CoverageCell) -> tuple[str, str, str, str]:
    kind = _cover_kind(c.result)
    tip = f"{c.node}: {c.result} ({_COVER[kind][2]}), {_last(c)}{_busbw(c, ', ')}" + (
        f"; {c.detail}" if c.detail else "")
    said = c.result if c.result not in ("proven", "stale", "never") else _short_age(c)
    return kind, c.node, said, tip


def _coverage_html(report: Report) -> list[str]:
    return _node_cells_html(
        "Node proof coverage", "Each node of a pool with a proof goal: the age of its last passing pair test and "
        "what the controller says of it (FabricProven); named and stale nodes first.",
        report.coverage, coverage_summary, _coverage_cell, _COVER)


# Lustre client cells: mark, CSS class, words (the coverage grid's classes).
_LUSTRE: dict[str, Mark] = {
    "failing": ("✗", "critical", "a lustre.* check failed (its line in the tooltip)"),
    "warning": ("!", "warning", "a lustre.* check degraded"),
    "other": ("·", "na", "FabricReady False for another reason"),
    "not-reporting": ("·", "na", "no FabricReady"),
    "healthy": ("✓", "pass", "healthy"),
}


def _lustre_cell(c: LustreCell) -> tuple[str, str, str, str]:
    tip = f"{c.node}: {c.state} ({_LUSTRE[c.state][2]})" + "".join(f"; {k}: {v}" for k, v in c.checks.items())
    said = ", ".join(k.removeprefix("lustre.") for k in c.checks) or c.state
    return c.state, c.node, _short(said, 18), tip[:1000]


def _lustre_html(report: Report) -> list[str]:
    return _node_cells_html(
        "Lustre clients", "Each node of a pool that mounts Lustre, as its agent last judged its client "
        "(FabricReady's lustre.* checks); failing nodes first.",
        report.lustre, lustre_summary, _lustre_cell, _LUSTRE)


def to_html(report: Report) -> str:
    c = report.counts
    e = html.escape
    badges = [f"<span class='b-{s}'>{c[s]} {s}</span>" for s in ("critical", "warning", "info") if c[s] or s != "info"]
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{e(report.title)}: {e(report.source)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(report.title)}</h1><p class='sub'>{e(report.source)} · profile {e(report.profile_name or '-')}"
        f" · now {format_time(report.now)}</p><div class='badges'>",
        "".join(badges) if report.findings else "<span class='b-ok'>no findings</span>",
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
        out += _grid_html(report)
    if report.coverage:
        out += _coverage_html(report)
    if report.lustre:
        out += _lustre_html(report)
    out.append("<section><h2>Findings</h2>")
    for f in report.findings:
        out.append(
            f"<div class='finding {f.severity}'><h3><span class='sev {f.severity}'>{f.severity}</span>"
            f"<code>{e(f.rule)}</code> {e(_objects(f, 6).replace(chr(10), ', '))}</h3>"
        )
        out.append(f"<p>{e(f.message)}</p><table class='ev'>")
        out += [
            f"<tr><td><code>{e(k)}</code></td><td>{_evidence_html(v)}</td></tr>" for k, v in evidence_rows(f.evidence)
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
