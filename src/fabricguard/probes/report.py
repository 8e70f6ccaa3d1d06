"""The validate report: one JSON document, a self-contained HTML page (inline SVG plot of busbw against message
size with the pool's floor line, no scripts, no CDN), and the rich terminal summary.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from typing import Any

from rich.table import Table

from fabricguard.console import row, text
from fabricguard.probes.result import STATUS_STYLE, Status

COLORS = {"all_reduce": "#1f77b4", "all_gather": "#2ca02c", "reduce_scatter": "#9467bd"}


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:g} {unit}"
        n /= 1024
    return f"{n:g}"


# Axis bounds snap to these mantissas (tight: the curves should fill the plot); ticks use fewer, so their
# labels never crowd: decades over 3 decades, 1-2-5 over one, 1-2-3-5 within one.
_BOUNDS = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)
_TICKS_WIDE, _TICKS_MID, _TICKS_NARROW = (1.0,), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0)
# A floor within this factor of the measured range is drawn on the axis; further away it would squeeze every
# curve into a sliver, so it is drawn off-scale at the edge with its value written out.
FLOOR_ON_SCALE_FACTOR = 10.0


def _snap(v: float, *, up: bool) -> float:
    """The bound next to ``v`` on the _BOUNDS grid: the smallest >= v (``up``) or the largest <= v."""
    k = math.floor(math.log10(v))
    cands = [m * 10.0**e for e in (k - 1, k, k + 1) for m in _BOUNDS]
    return min(c for c in cands if c >= v * (1 - 1e-9)) if up else max(c for c in cands if c <= v * (1 + 1e-9))


def log_axis(lo: float, hi: float) -> tuple[float, float, list[float]]:
    """Bounds and ticks of a log10 axis holding [lo, hi] (both > 0), with 5% room at each end."""
    a, b = _snap(lo / 1.05, up=False), _snap(hi * 1.05, up=True)
    if a == b:
        a, b = _snap(a * 0.99, up=False), _snap(b * 1.01, up=True)
    span = math.log10(b / a)
    mults = _TICKS_WIDE if span > 3 else _TICKS_MID if span > 1 else _TICKS_NARROW
    decades = range(math.floor(math.log10(a)), math.ceil(math.log10(b)) + 1)
    ticks = [m * 10.0**e for e in decades for m in mults if a * (1 - 1e-9) <= m * 10.0**e <= b * (1 + 1e-9)]
    return a, b, ticks


def _fmt(v: float) -> str:
    return f"{v:g}" if v >= 1e-3 else f"{v:.0e}"


def svg_plot(rows: list[dict[str, Any]], floor: float | None, *, width: int = 760, height: int = 380) -> str:
    """busbw (GB/s, log10) against message size (bytes, log2), one polyline per collective, dashed floor.

    The y axis is fitted to the measurements. A floor within FLOOR_ON_SCALE_FACTOR of them widens the axis
    to include it; a floor further away is drawn off-scale (a dashed line at the top or bottom edge, with
    its value and how far it is from the peak), so the measured curves always span the plot.
    """
    if not rows:
        return '<svg xmlns="http://www.w3.org/2000/svg" width="320" height="40"><text x="8" y="24">no measurements</text></svg>'  # noqa: E501 (SVG/HTML markup)
    positive = [r["busbw_gbps"] for r in rows if r["busbw_gbps"] > 0]
    if not positive:
        return (
            '<svg xmlns="http://www.w3.org/2000/svg" width="640" height="40"><text x="8" y="24">busbw is 0 at '
            "every size: a single rank moves nothing over the bus</text></svg>"
        )
    xs = [math.log2(r["size"]) for r in rows]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    lo, hi = min(positive), max(positive)
    floor_pos = None  # "above" / "below" the axis when drawn off-scale
    if floor is not None and floor > 0:
        if floor > hi * FLOOR_ON_SCALE_FACTOR:
            floor_pos = "above"
        elif floor < lo / FLOOR_ON_SCALE_FACTOR:
            floor_pos = "below"
        else:
            lo, hi = min(lo, floor), max(hi, floor)
    ml, mr, mt, mb = 64, 190, 34, 72 if floor_pos == "below" else 48
    pw, ph = width - ml - mr, height - mt - mb
    ya, yb, yticks = log_axis(lo, hi)
    la, lb = math.log10(ya), math.log10(yb)

    def px(size: float) -> float:
        return ml + (math.log2(size) - x0) / (x1 - x0) * pw

    def py(v: float) -> float:
        v = min(max(v, ya), yb)  # a zero (one rank) sits on the bottom edge
        return mt + ph - (math.log10(v) - la) / (lb - la) * ph

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',  # noqa: E501 (SVG/HTML markup)
        f'<rect class="plot-area" x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#999"/>',
    ]
    for v in yticks:
        parts.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#e3e3e3"/>')
        parts.append(f'<text x="{ml - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    for s in sorted({r["size"] for r in rows}):
        parts.append(
            f'<text x="{px(s):.1f}" y="{mt + ph + 16}" text-anchor="middle">{html.escape(human_size(s))}</text>'
        )
    parts.append(f'<text x="{ml + pw / 2}" y="{height - 8}" text-anchor="middle">message size</text>')
    parts.append(
        f'<text x="14" y="{mt + ph / 2}" transform="rotate(-90 14 {mt + ph / 2})" text-anchor="middle">busbw (GB/s, log scale)</text>'  # noqa: E501 (SVG/HTML markup)
    )
    legend_y = mt + 10
    for coll in dict.fromkeys(r["collective"] for r in rows):
        pts = sorted((r["size"], r["busbw_gbps"]) for r in rows if r["collective"] == coll)
        color = COLORS.get(coll, "#333")
        c = html.escape(coll)
        path = " ".join(f"{px(s):.1f},{py(v):.1f}" for s, v in pts)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        for s, v in pts:
            parts.append(
                f'<circle class="point" cx="{px(s):.1f}" cy="{py(v):.1f}" r="3" fill="{color}"><title>{c} {human_size(s)}: {v:.3f} GB/s</title></circle>'  # noqa: E501 (SVG/HTML markup)
            )
        parts.append(
            f'<line x1="{ml + pw + 10}" x2="{ml + pw + 30}" y1="{legend_y}" y2="{legend_y}" stroke="{color}" stroke-width="2"/>'  # noqa: E501 (SVG/HTML markup)
        )
        parts.append(f'<text x="{ml + pw + 34}" y="{legend_y + 4}">{c}</text>')
        legend_y += 18
    if floor is not None:
        parts += _floor_marks(floor, floor_pos, max(positive), py, (ml, pw, mt, ph), legend_y)
    parts.append("</svg>")
    return "\n".join(parts)


def _floor_marks(
    floor: float,
    pos: str | None,
    peak: float,
    py: Callable[[float], float],
    box: tuple[int, int, int, int],
    legend_y: int,
) -> list[str]:
    """The floor line and its legend entry; ``box`` is the plot area (left, width, top, height)."""
    ml, pw, mt, ph = box
    red = 'stroke="#d62728" stroke-dasharray="6 4"'
    lx = ml + pw + 10
    legend = f'<line x1="{lx}" x2="{lx + 20}" y1="{legend_y}" y2="{legend_y}" {red}/>'
    if pos is None:
        y = py(floor)
        return [
            f'<line class="floor" x1="{ml}" x2="{ml + pw}" y1="{y:.1f}" y2="{y:.1f}" {red} stroke-width="1.5"/>',
            legend,
            f'<text x="{lx + 24}" y="{legend_y + 4}">floor {_fmt(floor)} GB/s</text>',
        ]
    # Off-scale: a dashed line just outside the plot's edge, with an arrow and the value written out.
    y = mt - 14 if pos == "above" else mt + ph + 36
    ratio = floor / peak if pos == "above" else peak / floor
    arrow = "▲" if pos == "above" else "▼"
    words = f"{ratio:.0f}x the peak" if pos == "above" else f"peak is {ratio:.0f}x the floor"
    label = f"{arrow} floor {_fmt(floor)} GB/s, off scale {pos} ({words})"
    return [
        f'<line class="floor off-scale" x1="{ml}" x2="{ml + pw}" y1="{y}" y2="{y}" {red} stroke-width="1.5"/>',
        f'<text class="floor-label" x="{ml + pw}" y="{y - 4}" text-anchor="end" fill="#d62728">{html.escape(label)}</text>',  # noqa: E501 (SVG/HTML markup)
        legend,
        f'<text x="{lx + 24}" y="{legend_y + 4}">floor (off scale {pos})</text>',
    ]


def all_checks(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for probe in ("host", "collective", "storage", "gpu"):
        sec = report.get(probe) or {}
        checks = sec.get("checks") or (sec.get("judgement") or {}).get("checks") or []
        out += [(probe, c) for c in checks]
    return out


_CSS = """body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;color:#222}
table{border-collapse:collapse;width:100%;margin:1em 0}td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;
font-size:13px}th{background:#f3f3f3}.pass{color:#197a19;font-weight:bold}.degraded{color:#a66b00;font-weight:bold}
.failed{color:#c00;font-weight:bold}.skipped{color:#888}.nm{color:#a66b00;font-size:12px}pre{background:#f6f6f6;padding:8px;overflow-x:auto}"""


def render_html(report: dict[str, Any]) -> str:
    e = html.escape
    st = report["verdict"]
    coll = report.get("collective") or {}
    rows = coll.get("rows") or []
    h = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>fabricguard validate: {e(report['pool'])} {e(st)}</title><style>{_CSS}</style></head><body>",
        f"<h1>fabricguard validate: <span class='{e(st)}'>{e(st.upper())}</span></h1>",
        f"<p>profile <b>{e(report['profile'])}</b>, pool <b>{e(report['pool'])}</b> ({e(report['mode'])} mode), "
        f"{e(report['started'])}, {report['seconds']:.1f} s on {e(report.get('hostname', '?'))}</p>",
    ]
    for note in report.get("notes", []):
        h.append(f"<p><i>{e(note)}</i></p>")
    h.append("<h2>Checks</h2><table><tr><th>probe</th><th>check</th><th>status</th><th>why</th></tr>")
    for probe, c in all_checks(report):
        h.append(
            f"<tr><td>{e(probe)}</td><td>{e(c['name'])}</td><td class='{e(c['status'])}'>{e(c['status'])}</td>"
            f"<td>{e(c['detail'])}</td></tr>"
        )
    h.append("</table>")
    h.append(f"<h2>Collective bus bandwidth ({e(str(coll.get('backend')))}, {coll.get('world_size')} ranks)</h2>")
    h.append(svg_plot(rows, (report.get("expect") or {}).get("floor_gbps")))
    if rows:
        h.append(
            "<table><tr><th>collective</th><th>size (B)</th><th>count</th><th>type</th><th>time (us)</th>"
            "<th>algbw (GB/s)</th><th>busbw (GB/s)</th><th>#wrong</th></tr>"
        )
        for r in rows:
            h.append(
                f"<tr><td>{e(r['collective'])}</td><td>{r['size']}</td><td>{r['count']}</td><td>{e(r['type'])}</td>"
                f"<td>{r['time_us']:.1f}</td><td>{r['algbw_gbps']:.3f}</td><td>{r['busbw_gbps']:.3f}</td>"
                f"<td>{r['wrong']}</td></tr>"
            )
        h.append("</table>")
    st_m = (report.get("storage") or {}).get("metrics") or {}
    if st_m.get("write"):
        h.append("<h2>Storage</h2><table><tr><th>phase</th><th>rate</th><th>latency p50 / p90 / p99 (ms)</th></tr>")
        why: dict[str, None] = {}  # the reasons a rate is not meaningful, once each, under the table
        for ph in ("write", "read"):
            m = st_m[ph]
            rate = f"{m['MBps']:.0f} MB/s"
            if m.get("meaningful") is False:
                why[m.get("not_meaningful", "")] = None
                rate += f" <span class='nm' title='{e(m.get('not_meaningful', ''))}'>not meaningful *</span>"
            h.append(f"<tr><td>{ph}</td><td>{rate}</td><td>{_lat(m.get('latency_ms', {}))}</td></tr>")
        for ph in ("create", "stat", "unlink"):
            if ph in st_m:
                h.append(
                    f"<tr><td>{ph}</td><td>{st_m[ph]['ops_per_s']:.0f} /s</td><td>{_lat(st_m[ph]['latency_ms'])}</td></tr>"  # noqa: E501 (SVG/HTML markup)
                )
        h.append("</table>")
        h += [f"<p class='nm'>* {e(w)}</p>" for w in why]
    h.append("<p>Machine-readable: report.json beside this file.</p></body></html>")
    return "\n".join(h)


def _lat(lat: dict[str, float]) -> str:
    return " / ".join(f"{lat[k]:.3f}" for k in ("p50", "p90", "p99") if k in lat) or "-"


def summary_table(report: dict[str, Any]) -> Table:
    t = Table(title=text(f"fabricguard validate: pool {report['pool']} ({report['mode']})"), show_lines=False)
    t.add_column("probe")
    t.add_column("check")
    t.add_column("status")
    t.add_column("why", overflow="fold")
    for probe, c in all_checks(report):
        s = Status(c["status"])
        row(t, probe, c["name"], (str(s), STATUS_STYLE[s]), c["detail"])  # details quote log lines
    return t
