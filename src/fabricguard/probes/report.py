"""The validate report: one JSON document, a self-contained HTML page (inline SVG plot of busbw against message
size with the pool's floor line, no scripts, no CDN), and the rich terminal summary.
"""

from __future__ import annotations

import html
from typing import Any

from fabricguard.console import Block, blocks, paragraph, verdict_line
from fabricguard.htmlreport import svg_plot
from fabricguard.probes.result import STATUS_STYLE, Status


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


_ORDER = {Status.failed: 0, Status.degraded: 1, Status.passed: 2, Status.skipped: 3}


def print_checks(checks: list[tuple[str, str, str, str]]) -> None:
    """Checks as ``(probe, status, name, detail)``, failures first: one block each (``FAILED  probe check``,
    then its detail wrapped at word boundaries, a quoted command whole), at any width; passes and skips are
    one block each too, so a pipe reads the same as a terminal."""
    ordered = sorted(checks, key=lambda c: _ORDER.get(Status(c[1]), 9))
    blocks(Block(head=[(c[1].upper(), STATUS_STYLE[Status(c[1])]), "  ", f"{c[0]} {c[2]}".strip()],
                 fields=[("why", c[3])] if c[3] else []) for c in ordered)


def print_summary(report: dict[str, Any], where: str) -> None:
    """``validate``'s text: the verdict first (line 1), every check (failures first), the busbw rows as
    nccl-tests prints them (78 columns), where the report files are."""
    st = Status(report["verdict"])
    verdict_line(str(st), f"validate pool {report['pool']} ({report['mode']})", f"{report['seconds']:.1f} s")
    print_checks([(probe, c["status"], c["name"], c.get("detail") or "") for probe, c in all_checks(report)])
    paragraph(f"report: {where}", first="", indent="  ")
