"""The validate report: one JSON document, a self-contained HTML page (inline SVG plot of busbw against message
size with the pool's floor line, no scripts, no CDN), and the rich terminal summary.
"""

from __future__ import annotations

import html
import math
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


def svg_plot(rows: list[dict[str, Any]], floor: float | None, *, width: int = 720, height: int = 360) -> str:
    """busbw (GB/s, linear) against message size (bytes, log2), one polyline per collective, dashed floor."""
    if not rows:
        return '<svg xmlns="http://www.w3.org/2000/svg" width="320" height="40"><text x="8" y="24">no measurements</text></svg>'  # noqa: E501 (SVG/HTML markup)
    ml, mr, mt, mb = 64, 150, 20, 48
    pw, ph = width - ml - mr, height - mt - mb
    xs = [math.log2(r["size"]) for r in rows]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    ymax = max([r["busbw_gbps"] for r in rows] + [floor or 0.0]) * 1.15 or 1.0

    def px(size: float) -> float:
        return ml + (math.log2(size) - x0) / (x1 - x0) * pw

    def py(v: float) -> float:
        return mt + ph - v / ymax * ph

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',  # noqa: E501 (SVG/HTML markup)
        f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#999"/>',
    ]
    for i in range(5):
        v = ymax * i / 4
        parts.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#e3e3e3"/>')
        parts.append(f'<text x="{ml - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:.3g}</text>')
    for s in sorted({r["size"] for r in rows}):
        parts.append(
            f'<text x="{px(s):.1f}" y="{mt + ph + 16}" text-anchor="middle">{html.escape(human_size(s))}</text>'
        )
    parts.append(f'<text x="{ml + pw / 2}" y="{height - 8}" text-anchor="middle">message size</text>')
    parts.append(
        f'<text x="14" y="{mt + ph / 2}" transform="rotate(-90 14 {mt + ph / 2})" text-anchor="middle">busbw (GB/s)</text>'  # noqa: E501 (SVG/HTML markup)
    )
    legend_y = mt + 10
    for coll in dict.fromkeys(r["collective"] for r in rows):
        pts = sorted((r["size"], r["busbw_gbps"]) for r in rows if r["collective"] == coll)
        color = COLORS.get(coll, "#333")
        path = " ".join(f"{px(s):.1f},{py(v):.1f}" for s, v in pts)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        for s, v in pts:
            parts.append(
                f'<circle cx="{px(s):.1f}" cy="{py(v):.1f}" r="3" fill="{color}"><title>{coll} {human_size(s)}: {v:.3f} GB/s</title></circle>'  # noqa: E501 (SVG/HTML markup)
            )
        parts.append(
            f'<line x1="{ml + pw + 10}" x2="{ml + pw + 30}" y1="{legend_y}" y2="{legend_y}" stroke="{color}" stroke-width="2"/>'  # noqa: E501 (SVG/HTML markup)
        )
        parts.append(f'<text x="{ml + pw + 34}" y="{legend_y + 4}">{coll}</text>')
        legend_y += 18
    if floor is not None:
        parts.append(
            f'<line x1="{ml}" x2="{ml + pw}" y1="{py(floor):.1f}" y2="{py(floor):.1f}" stroke="#d62728" stroke-dasharray="6 4" stroke-width="1.5"/>'  # noqa: E501 (SVG/HTML markup)
        )
        parts.append(
            f'<line x1="{ml + pw + 10}" x2="{ml + pw + 30}" y1="{legend_y}" y2="{legend_y}" stroke="#d62728" stroke-dasharray="6 4"/>'  # noqa: E501 (SVG/HTML markup)
        )
        parts.append(f'<text x="{ml + pw + 34}" y="{legend_y + 4}">floor {floor:.3g} GB/s</text>')
    parts.append("</svg>")
    return "\n".join(parts)


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
.failed{color:#c00;font-weight:bold}.skipped{color:#888}pre{background:#f6f6f6;padding:8px;overflow-x:auto}"""


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
        for ph in ("write", "read"):
            lat = st_m[ph].get("latency_ms", {})
            h.append(f"<tr><td>{ph}</td><td>{st_m[ph]['MBps']:.0f} MB/s</td><td>{_lat(lat)}</td></tr>")
        for ph in ("create", "stat", "unlink"):
            if ph in st_m:
                h.append(
                    f"<tr><td>{ph}</td><td>{st_m[ph]['ops_per_s']:.0f} /s</td><td>{_lat(st_m[ph]['latency_ms'])}</td></tr>"  # noqa: E501 (SVG/HTML markup)
                )
        h.append("</table>")
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
