"""The HTML page every report shares: self-contained (inline CSS and SVG, no script, no CDN), the verdict first
in its one colour, tables of escaped text, and the plots: busbw against message size with the pool's floor
(``svg_plot``), busbw per collective against each one's floor (``bar_chart``) and a series over steps
(``series_plot``).

``validate`` (probes/report.py), ``verify-job --html`` (verdict/html.py) and ``nccl inspect --html``
(nccl/html.py) build their pages from these parts, so a verdict looks the same in every report and a plot
is drawn by one function.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

COLORS = {"all_reduce": "#1f77b4", "all_gather": "#2ca02c", "reduce_scatter": "#9467bd"}
FLOOR_RED = "#d62728"
# One colour per verdict word (console.VERDICT_STYLE's, as CSS): text on white, and the banner's background.
VERDICT_COLOUR = {
    "pass": ("#197a19", "#e8f5e8"),
    "degraded": ("#8a5a00", "#fff4dc"),
    "failed": ("#b00020", "#fde7ea"),
    "unjudged": ("#00707a", "#e3f6f8"),
    "skipped": ("#00707a", "#e3f6f8"),
    "invalid": ("#8e1f8e", "#f7e6f7"),
}
LEVEL_CLASS = {"failed": "failed", "degraded": "degraded", "warning": "warning", "info": "info"}

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
    return f"{v:g}" if v >= 1e-3 or v == 0 else f"{v:.0e}"


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


def _verdict_css() -> str:
    out = []
    for word, (fg, bg) in VERDICT_COLOUR.items():
        out.append(f".v-{word}{{color:{fg}}}.banner.v-{word}{{background:{bg};border-left:8px solid {fg}}}")
    return "".join(out)


CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1080px;margin:2em auto;padding:0 1em;color:#222}"
    "h1{margin:.2em 0}h1 .word{font-weight:800;letter-spacing:.04em}.sub{color:#555;margin:.2em 0 1em}"
    ".banner{padding:.6em 1em;margin:0 0 1em}"
    "table{border-collapse:collapse;width:100%;margin:.6em 0 1.2em}td,th{border:1px solid #ddd;padding:4px 8px;"
    "text-align:left;font-size:13px;vertical-align:top}th{background:#f3f3f3}td.num{text-align:right;"
    "font-variant-numeric:tabular-nums}code{background:#f3f3f3;padding:1px 4px;font-size:12px;"
    "overflow-wrap:anywhere}pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px;white-space:pre-wrap;"
    "overflow-wrap:anywhere}.fix{border-left:4px solid #1f77b4;background:#f2f7fc;padding:4px 8px;margin:4px 0}"
    ".reason{margin:.4em 0 1em;padding-left:10px;border-left:4px solid #ccc}.reason h3{font-size:15px;margin:.2em 0}"
    ".r-failed{border-left-color:#b00020}.r-degraded{border-left-color:#e0a000}.r-warning{border-left-color:#f0d060}"
    ".lvl{display:inline-block;min-width:6.5em;font-weight:bold;text-transform:uppercase;font-size:12px}"
    ".failed{color:#b00020}.degraded{color:#8a5a00}.warning{color:#8a5a00}.info{color:#666}"
    "tr.below td{background:#fde7ea}.muted{color:#777;font-size:12px}"
    + _verdict_css()
)

_CODE = re.compile(r"`([^`\n]+)`")


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def prose(value: str) -> str:
    """Escaped text whose commands (between backticks, as fixes write them) are ``<code>``, whole."""
    parts = _CODE.split(value)
    return "".join(f"<code>{esc(p)}</code>" if i % 2 else esc(p) for i, p in enumerate(parts))


def page(title: str, verdict: str, heading: str, sub: str, body: Iterable[str]) -> str:
    """A whole report: ``<title>`` and the banner say the verdict word first, then what was judged."""
    word = verdict if verdict in VERDICT_COLOUR else "unjudged"
    return "".join([
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{esc(verdict.upper())}: {esc(title)}</title><style>{CSS}</style></head><body>",
        f"<div class='banner v-{word}'><h1><span class='word v-{word}' id='verdict'>{esc(verdict.upper())}</span>"
        f" {esc(heading)}</h1><p class='sub'>{esc(sub)}</p></div>",
        *body,
        "</body></html>\n",
    ])


@dataclass(frozen=True)
class Cell:
    """A table cell: text (escaped) or ready markup, with a class (``num`` right-aligns)."""

    value: Any
    cls: str = ""
    markup: bool = False

    def html(self) -> str:
        inner = str(self.value) if self.markup else esc(self.value)
        return f"<td class='{self.cls}'>{inner}</td>" if self.cls else f"<td>{inner}</td>"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], below: Callable[[int], bool] | None = None
          ) -> str:
    """A table of escaped cells (a plain value or a ``Cell``); ``below(i)``: row i is below its floor (red)."""
    out = ["<table><tr>", *(f"<th>{esc(h)}</th>" for h in headers), "</tr>"]
    for i, r in enumerate(rows):
        cls = "below" if below is not None and below(i) else ""
        out.append(f"<tr class='{cls}'>" if cls else "<tr>")
        out += [(c if isinstance(c, Cell) else Cell(c)).html() for c in r]
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


@dataclass(frozen=True)
class Bar:
    """One bar of ``bar_chart``: a measured value against its own floor (None: not judged)."""

    label: str
    value: float
    floor: float | None


def bar_chart(bars: Sequence[Bar], unit: str = "GB/s", *, width: int = 760) -> str:
    """Horizontal bars on one linear axis from 0, each with its floor as a dashed red tick across it; a bar
    below its floor is red, one at or above it blue, one without a floor grey."""
    if not bars:
        return ""
    row_h, ml, mr, mt = 30, 250, 120, 24
    height = mt + row_h * len(bars) + 34
    top = _nice(max(max(b.value for b in bars), max((b.floor or 0.0) for b in bars)) * 1.05)
    pw = width - ml - mr

    def px(v: float) -> float:
        return ml + v / top * pw

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bars" width="{width}" height="{height}" '
             'font-family="sans-serif" font-size="11">',
             f'<rect class="plot-area" x="{ml}" y="{mt - 6}" width="{pw}" height="{row_h * len(bars) + 6}" '
             'fill="#fafafa" stroke="#999"/>']
    for i, b in enumerate(bars):
        y = mt + i * row_h
        colour = "#999" if b.floor is None else (FLOOR_RED if b.value < b.floor else "#1f77b4")
        parts.append(f'<text x="{ml - 6}" y="{y + 13}" text-anchor="end">{esc(_clip(b.label, 40))}</text>')
        parts.append(f'<rect class="bar" x="{ml}" y="{y}" width="{max(px(b.value) - ml, 1):.1f}" height="18" '
                     f'fill="{colour}"><title>{esc(b.label)}: {b.value:.1f} {esc(unit)}</title></rect>')
        parts.append(f'<text x="{px(b.value) + 4:.1f}" y="{y + 13}">{b.value:.1f}</text>')
        if b.floor is not None:
            parts.append(f'<line class="floor" x1="{px(b.floor):.1f}" x2="{px(b.floor):.1f}" y1="{y - 4}" '
                         f'y2="{y + 22}" stroke="{FLOOR_RED}" stroke-width="2" stroke-dasharray="4 3"/>')
    axis_y = mt + row_h * len(bars) + 14
    parts.append(f'<text x="{ml}" y="{axis_y}">0</text>')
    parts.append(f'<text x="{ml + pw}" y="{axis_y}" text-anchor="end">{_fmt(top)} {esc(unit)}</text>')
    lx = ml + pw + 10
    parts.append(f'<line x1="{lx}" x2="{lx}" y1="{mt}" y2="{mt + 16}" stroke="{FLOOR_RED}" stroke-width="2" '
                 'stroke-dasharray="4 3"/>')
    parts.append(f'<text x="{lx + 6}" y="{mt + 12}">floor</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def series_plot(points: Sequence[tuple[float, float]], *, baseline: float | None = None, limit: float | None = None,
                x_label: str = "step", y_label: str = "seconds", width: int = 760, height: int = 260) -> str:
    """A linear line plot from 0 (step times: one point per step), with the baseline (grey, dashed) and the
    allowed limit (red, dashed) as horizontal lines when given."""
    if not points:
        return ""
    ml, mr, mt, mb = 64, 150, 20, 40
    pw, ph = width - ml - mr, height - mt - mb
    xs = [p[0] for p in points]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    top = _nice(max([p[1] for p in points] + [v for v in (baseline, limit) if v is not None]) * 1.05)

    def px(x: float) -> float:
        return ml + (x - x0) / (x1 - x0) * pw

    def py(v: float) -> float:
        return mt + ph - v / top * ph

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="series" width="{width}" height="{height}" '
             'font-family="sans-serif" font-size="11">',
             f'<rect class="plot-area" x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#999"/>']
    for v in (0.0, top / 2, top):
        parts.append(f'<text x="{ml - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    parts.append(f'<text x="{ml}" y="{mt + ph + 16}" text-anchor="middle">{_fmt(x0)}</text>')
    parts.append(f'<text x="{ml + pw}" y="{mt + ph + 16}" text-anchor="middle">{_fmt(x1)}</text>')
    parts.append(f'<text x="{ml + pw / 2}" y="{height - 6}" text-anchor="middle">{esc(x_label)}</text>')
    parts.append(f'<text x="14" y="{mt + ph / 2}" transform="rotate(-90 14 {mt + ph / 2})" '
                 f'text-anchor="middle">{esc(y_label)}</text>')
    path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
    parts.append(f'<polyline class="series-line" fill="none" stroke="#1f77b4" stroke-width="2" points="{path}"/>')
    legend_y = mt + 10
    for value, colour, name in ((baseline, "#777", "baseline"), (limit, FLOOR_RED, "allowed")):
        if value is None:
            continue
        parts.append(f'<line class="{name}" x1="{ml}" x2="{ml + pw}" y1="{py(value):.1f}" y2="{py(value):.1f}" '
                     f'stroke="{colour}" stroke-dasharray="6 4" stroke-width="1.5"/>')
        parts.append(f'<line x1="{ml + pw + 10}" x2="{ml + pw + 30}" y1="{legend_y}" y2="{legend_y}" '
                     f'stroke="{colour}" stroke-dasharray="6 4"/>')
        parts.append(f'<text x="{ml + pw + 34}" y="{legend_y + 4}">{name} {_fmt(round(value, 3))} s</text>')
        legend_y += 18
    parts.append("</svg>")
    return "\n".join(parts)


def _nice(v: float) -> float:
    """The axis end at or above ``v`` on the 1-1.5-2-3-4-5-6-8 grid (0 and below: 1)."""
    return _snap(v, up=True) if v > 0 else 1.0


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"
