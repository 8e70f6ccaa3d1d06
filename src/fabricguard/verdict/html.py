"""The HTML a person attaches to a ticket: ``verify-job --html`` and ``nccl inspect --html``.

One self-contained page (``fabricguard.htmlreport``: inline CSS and SVG, no script, nothing fetched) that says,
in reading order: the verdict word first, what to change (every non-info reason with its fix, failures first),
the job's figures, the transport and the log lines that prove it, its bus bandwidth per collective (NCCL
Inspector) and per message size (nccl-tests tables) against the pool's floor, its step times against the
baseline, and the storage path. The same reasons and fixes as the terminal and JSON: the page is a view of the
verdict, never a second judgement.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabricguard.htmlreport import Bar, Cell, bar_chart, esc, page, prose, series_plot, svg_plot, table
from fabricguard.nccl.report import NcclReport, NcclTestsTable
from fabricguard.verdict.job import JobVerdict

_LEVELS = ("failed", "degraded", "warning", "info")


def _where(ev: Sequence[dict[str, Any]]) -> str:
    first = ev[0] if ev else None
    if not first or not first.get("file"):
        return ""
    return Path(str(first["file"])).name + (f":{first['line']}" if first.get("line") else "")


def reasons_section(findings: Sequence[dict[str, Any]]) -> list[str]:
    """"What to change": every finding above info (failures first) with its fix under it, then "What was
    checked": the info findings, one line each. ``findings`` as the JSON has them (``level``, ``check``,
    ``message``, ``fix``, ``evidence``)."""
    if not findings:
        return []
    ordered = sorted(findings, key=lambda f: _LEVELS.index(f["level"]) if f["level"] in _LEVELS else 0)
    act = [f for f in ordered if f["level"] != "info"]
    out = ["<section id='reasons'>"]
    if act:
        out.append("<h2>What to change</h2>")
    for f in act:
        lvl = str(f["level"])
        where = _where(f.get("evidence") or [])
        out.append(f"<div class='reason r-{esc(lvl)}'><h3><span class='lvl {esc(lvl)}'>{esc(lvl)}</span>"
                   f"{esc(f['check'])}{f' <span class=muted>{esc(where)}</span>' if where else ''}</h3>"
                   f"<p>{esc(f['message'])}</p>")
        if f.get("fix"):
            out.append(f"<p class='fix'><b>Fix:</b> {prose(str(f['fix']))}</p>")
        out.append("</div>")
    info = [f for f in ordered if f["level"] == "info"]
    if info:
        out.append("<h2>What was checked</h2>")
        out.append(table(("check", "result", "evidence"),
                         ([f["check"], f["message"], _where(f.get("evidence") or [])] for f in info)))
    out.append("</section>")
    return out


def evidence_section(n: NcclReport) -> list[str]:
    """The transport, what it rests on and the log lines that prove it (whole: a line is never cut)."""
    out = ["<section id='transport'><h2>Transport and its evidence</h2>"]
    facts = [("inter-node transport", n.inter_node_transport.value), ("network", n.network or "-"),
             ("GPUDirect RDMA", "unknown" if n.gpudirect_rdma is None else ("yes" if n.gpudirect_rdma else "no")),
             ("NCCL", ", ".join(n.nccl_version) or "?"), ("scope", n.scope.value), ("nodes", n.nodes_text),
             ("ranks", n.ranks or "?"), ("intra-node", ", ".join(n.intra_node) or "-"),
             ("connections", ", ".join(f"{k} ×{v}" for k, v in n.connections.items()) or "-"),
             ("NCCL failed", "yes" if n.failed else "no")]
    out.append(table(("fact", "value"), facts))
    if n.reasons:
        out.append("<ul>" + "".join(f"<li>{esc(r)}</li>" for r in n.reasons) + "</ul>")
    lines = list(dict.fromkeys([*n.failures, *n.fallbacks, *n.evidence]))  # what went wrong first
    if lines:
        out.append(table(("where", "why", "log line"),
                         ([f"{Path(e.file).name}:{e.line}", e.why, Cell(f"<code>{esc(e.text.strip())}</code>",
                                                                          markup=True)] for e in lines)))
    for e in n.unread:
        out.append(f"<p class='degraded'>not read: {esc(e.file)}{f':{e.line}' if e.line else ''}: {esc(e.why)}</p>")
    out.append("</section>")
    return out


def _plot_name(t: NcclTestsTable) -> str:
    return (t.collective or "nccl-tests").removesuffix("_perf")


def tests_section(n: NcclReport, floor: float | None) -> list[str]:
    """nccl-tests tables: busbw per message size against the floor (log axes), then the rows themselves."""
    if not n.nccl_tests:
        return []
    rows = [{"collective": _plot_name(t), "size": r.size, "busbw_gbps": r.oop_busbw}
            for t in n.nccl_tests for r in t.rows if r.oop_busbw is not None and r.size > 0]
    out = ["<section id='nccl-tests'><h2>Bus bandwidth per message size (nccl-tests)</h2>",
           "<p class='sub'>Out-of-place busbw of every row"
           + (f"; the dashed red line is the pool's floor {floor:g} GB/s" if floor is not None else "") + ".</p>",
           svg_plot(rows, floor)]
    for t in n.nccl_tests:
        peak = t.peak_busbw_gbps
        largest = max((r.size for r in t.rows), default=0)
        low = {i for i, r in enumerate(t.rows)  # the large-message rows (the floor is a large-message figure)
               if floor is not None and r.size == largest and (r.oop_busbw or 0.0) < floor}
        out.append(f"<h3>{esc(t.collective or 'nccl-tests')} <span class='muted'>{esc(Path(t.file).name)}:{t.line}"
                   f" · peak {'-' if peak is None else f'{peak:.2f}'} GB/s · wrong "
                   f"{'N/A' if t.wrong is None else t.wrong}</span></h3>")
        out.append(table(
            ("size (B)", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"),
            ([Cell(r.size, "num"), Cell(r.count, "num"), r.type, Cell(_f(r.oop_time_us, 1), "num"),
              Cell(_f(r.oop_algbw), "num"), Cell(_f(r.oop_busbw), "num"),
              Cell("N/A" if r.oop_wrong is None else r.oop_wrong, "num")] for r in t.rows),
            below=low.__contains__))
    out.append("</section>")
    return out


def _f(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _busbw_section(rows: Sequence[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    bars = [Bar(f"{r['collective']}, {_shape(r)}", float(r["busbw_gbps"]), r["floor_gbps"] if r["judged"] else None)
            for r in rows]
    out = ["<section id='busbw'><h2>Bus bandwidth per collective (NCCL Inspector)</h2>",
           "<p class='sub'>Median busbw of the communicators spanning nodes; each bar's dashed red tick is the floor "
           "for its shape (a communicator with k of a node's GPUs gets k/G of the pool's floor).</p>",
           bar_chart(bars),
           table(("collective", "shape", "busbw (GB/s)", "min / max", "floor (GB/s)", "records", "nodes"),
                 ([r["collective"], _shape(r), Cell(f"{r['busbw_gbps']:.1f}", "num"),
                   Cell(f"{r['min_gbps']:.1f} / {r['max_gbps']:.1f}", "num"),
                   Cell("not judged" if not r["judged"] or r["floor_gbps"] is None else f"{r['floor_gbps']:.1f}",
                        "num"), Cell(r["records"], "num"), Cell(r["nnodes"], "num")] for r in rows),
                 below=lambda i: bool(rows[i]["below"])),
           "</section>"]
    return out


def _shape(r: dict[str, Any]) -> str:
    k = r.get("ranks_per_node")
    return "uneven ranks per node" if k == 0 else "shape unknown" if k is None else f"{k} GPU(s) per node"


def _steps_section(v: JobVerdict, baseline: float | None, tolerance: float) -> list[str]:
    s = v.steps
    if not s.steps:
        return []
    med = s.median_seconds
    limit = baseline * tolerance if baseline is not None else None
    sub = f"{s.count} steps · median {med:.2f} s · total {s.total_seconds:.1f} s" if med is not None else ""
    if baseline is not None and med is not None:
        sub += f" · {med / baseline:.2f}x the baseline {baseline:g} s (allowed up to {tolerance:g}x)"
    return ["<section id='steps'><h2>Step times</h2>", f"<p class='sub'>{esc(sub)}</p>",
            series_plot([(float(i), t) for i, t in s.steps], baseline=baseline, limit=limit), "</section>"]


def _storage_section(v: JobVerdict) -> list[str]:
    if not v.storage:
        return []
    return ["<section id='storage'><h2>Storage path</h2>",
            table(("file", "path", "filesystem", "on Lustre", "message"),
                  ([Path(str(d.get("file", ""))).name, d.get("path", ""), (d.get("mount") or {}).get("fstype") or "-",
                    "yes" if d.get("ok") else "no", d.get("message", "")] for d in v.storage)),
            "</section>"]


def job_page(v: JobVerdict, *, floor: float | None, baseline: float | None, tolerance: float,
             command: str) -> str:
    """``verify-job --html``: ``floor`` (the pool's busbw floor), ``baseline``/``tolerance`` (its step time)
    draw the lines the verdict was judged against; ``command`` is how to get the same verdict as JSON."""
    n = v.nccl
    med = v.steps.median_seconds
    sub = (f"{v.job_dir} · pool {v.pool} (fabric {v.fabric}) · transport {n.inter_node_transport.value} · network "
           f"{n.network or '-'} · nodes {n.nodes_text} · ranks {n.ranks or '?'} · steps {v.steps.count} · median "
           f"{'-' if med is None else f'{med:.2f} s'} · bound {v.bound}")
    body = reasons_section([r.to_dict() for r in v.reasons])
    body += evidence_section(n)
    body += _busbw_section(v.busbw)
    body += tests_section(n, floor)
    body += _steps_section(v, baseline, tolerance)
    body += _storage_section(v)
    body.append(f"<p class='muted'>Machine-readable: <code>{esc(command)} --format json</code></p>")
    return page(f"verify-job {Path(v.job_dir).name}", v.verdict.value, f"verify-job {Path(v.job_dir).name}", sub,
                body)


def inspection_page(n: NcclReport, word: str, expected: str | None, findings: Sequence[dict[str, Any]],
                    verdict_reasons: Sequence[str], *, floor: float | None, command: str) -> str:
    """``nccl inspect --html``: judged (``expected`` names the transport or pool) or only reported."""
    sub = (f"inter-node transport {n.inter_node_transport.value} · "
           + (f"expected {expected}" if expected else "not judged: pass --expect TRANSPORT or -p PROFILE")
           + f" · files {len(n.files)}")
    body: list[str] = []
    if findings:
        body += reasons_section(findings)
    elif verdict_reasons:
        body += ["<section id='reasons'><h2>Why</h2><ul>",
                 *(f"<li>{esc(r)}</li>" for r in verdict_reasons), "</ul></section>"]
    body += evidence_section(n)
    body += tests_section(n, floor)
    body.append(f"<p class='muted'>Machine-readable: <code>{esc(command)} --format json</code></p>")
    return page("nccl inspect", word, "nccl inspect", sub, body)
