"""The validate report: the busbw plot stays readable whatever the floor, and the page renders in Chromium.

The measurements are a real ``fabricguard validate --local`` run on the 2-core dev VM (2 gloo ranks); the
far-away floor is the GKE A3 Ultra pool's (0.8 x 355 GB/s), what a user sees validating that pool from a
machine without its fabric. The recorded report carries its verdict under both "status" and "verdict" (the
key validate writes since the JSON conventions were unified), so it reads the same before and after that change.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest

from fabricguard.htmlreport import log_axis, svg_plot
from fabricguard.probes.bw import expectation_for
from fabricguard.probes.report import render_html
from fabricguard.profile.loader import load_profile
from screenshot import dump_dom, is_ink, read_png, screenshot

FIX = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]
DOCS_SHOTS = REPO / "docs" / "screenshots"
LOCAL = json.loads((FIX / "validate-local-report.json").read_text())
ROWS = LOCAL["collective"]["rows"]
GKE_FLOOR = expectation_for(load_profile(REPO / "examples" / "profiles" / "gke-a3-ultra.yaml").pool(None)).floor_gbps


def _plot_geometry(svg: str) -> tuple[float, float, list[float]]:
    """(top, height) of the plot area and the y of every measured point, as the SVG places them."""
    area = re.search(r'<rect class="plot-area" x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"', svg)
    assert area, "no plot area in the SVG"
    ys = [float(y) for y in re.findall(r'<circle class="point" cx="[\d.]+" cy="([\d.]+)"', svg)]
    return float(area.group(1)), float(area.group(2)), ys


def test_log_axis_bounds_and_ticks():
    lo, hi, ticks = log_axis(0.1615, 0.9235)  # the fixture's busbw range: tight bounds, 1-2-3-5 ticks
    assert (round(lo, 6), hi) == (0.15, 1.0) and [round(t, 6) for t in ticks] == [0.2, 0.3, 0.5, 1.0]
    lo, hi, ticks = log_axis(0.05, 20.0)  # 2-3 decades: 1-2-5 ticks
    assert (round(lo, 6), hi) == (0.04, 30.0) and [round(t, 6) for t in ticks] == [0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20]
    lo, hi, ticks = log_axis(0.01, 400.0)  # over 3 decades: decade ticks only
    assert (round(lo, 6), hi) == (0.008, 500.0) and [round(t, 6) for t in ticks] == [0.01, 0.1, 1.0, 10.0, 100.0]
    lo, hi, _ = log_axis(3.0, 3.0)  # one value still gets an axis around it
    assert lo < 3.0 < hi


def test_measured_curves_span_the_plot_when_the_floor_is_far_above():
    assert GKE_FLOOR is not None and 100 * max(r["busbw_gbps"] for r in ROWS) < GKE_FLOOR
    svg = svg_plot(ROWS, GKE_FLOOR)
    top, height, ys = _plot_geometry(svg)
    assert len(ys) == len(ROWS)
    assert all(top <= y <= top + height for y in ys)
    # The old linear axis up to the floor put every point within 0.5% of the plot's height of the x-axis.
    assert max(ys) - min(ys) > 0.6 * height
    line = re.search(r'<line class="floor off-scale" x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)"', svg)
    assert line and float(line.group(1)) < top, "the off-scale floor is drawn above the plot area"
    peak = max(r["busbw_gbps"] for r in ROWS)
    assert f"floor {GKE_FLOOR:g} GB/s, off scale above ({GKE_FLOOR / peak:.0f}x the peak)" in svg


def test_floor_far_below_is_drawn_below_the_axis():
    svg = svg_plot(ROWS, 1e-4)
    top, height, ys = _plot_geometry(svg)
    assert max(ys) - min(ys) > 0.6 * height
    line = re.search(r'<line class="floor off-scale" x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)"', svg)
    assert line and float(line.group(1)) > top + height and "off scale below" in svg


def test_floor_near_the_measurements_is_on_the_axis_at_its_value():
    floor = LOCAL["expect"]["floor_gbps"]  # 0.08 GB/s, under every point
    svg = svg_plot(ROWS, floor)
    top, height, ys = _plot_geometry(svg)
    m = re.search(r'<line class="floor" x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)"', svg)
    assert m and "off-scale" not in svg
    fy = float(m.group(1))
    assert top < fy < top + height and fy > max(ys)  # lower on screen than every measured point
    assert max(ys) - min(ys) > 0.5 * height


def test_single_rank_zero_busbw_says_so():
    rows = [dict(r, busbw_gbps=0.0) for r in ROWS[:2]]
    assert "a single rank moves nothing over the bus" in svg_plot(rows, 1.0)


@pytest.mark.parametrize("floor", [LOCAL["expect"]["floor_gbps"], None, GKE_FLOOR])
def test_report_renders_in_chromium(tmp_path, floor):
    report = copy.deepcopy(LOCAL)
    report["expect"]["floor_gbps"] = floor
    page = tmp_path / "report.html"
    page.write_text(render_html(report))
    png = screenshot(page, tmp_path / "report.png", 1000, 1400)
    img = read_png(png)
    assert (img.width, img.height) == (1000, 1400)
    assert img.count(is_ink, step=3) > 3000, "the page rendered (almost) blank"
    # The curves, drawn in their own colours, fill over half the plot's 298 px of height as Chromium drew it.
    curves = {(31, 119, 180), (44, 160, 44), (148, 103, 189)}
    ys = [y for y in range(0, img.height, 2) for x in range(0, img.width // 2, 2) if img.pixel(x, y) in curves]
    assert ys and max(ys) - min(ys) > 0.5 * 298
    if os.environ.get("FABRICGUARD_UPDATE_SCREENSHOTS") and floor == LOCAL["expect"]["floor_gbps"]:
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        screenshot(page, DOCS_SHOTS / "validate-report.png", 1000, 1900)


def test_plot_labels_do_not_leave_the_svg(tmp_path):
    """Laid out by Chromium, every text of the plot (the off-scale label included) lies inside the SVG."""
    page = tmp_path / "report.html"
    probe = (
        "<script>const s=document.querySelector('svg'),b=s.getBoundingClientRect(),out=[];"
        "for(const t of s.querySelectorAll('text')){const r=t.getBoundingClientRect();"
        "out.push([t.textContent,r.left-b.left,r.top-b.top,r.right-b.left,r.bottom-b.top])}"
        "document.body.insertAdjacentHTML('beforeend','<pre id=m>'+JSON.stringify([b.width,b.height,out])"
        ".replace(/</g,'&lt;')+'</pre>')</script>"
    )
    report = copy.deepcopy(LOCAL)
    report["expect"]["floor_gbps"] = GKE_FLOOR
    page.write_text(render_html(report).replace("</body>", probe + "</body>"))
    dom = dump_dom(page)
    m = re.search(r"<pre id=\"m\">(.*?)</pre>", dom, re.S)
    assert m, dom[-2000:]
    w, h, texts = json.loads(m.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    assert any("off scale above" in t[0] for t in texts)
    for text, left, top, right, bottom in texts:
        assert left >= -1 and top >= -1 and right <= w + 1 and bottom <= h + 1, (text, left, top, right, bottom)


def test_a_rate_that_is_not_meaningful_says_so_once():
    # The fixture's read phase (2 x 32 MiB) took under 0.1 s: flagged by the probe, marked in the report.
    read = LOCAL["storage"]["metrics"]["read"]
    assert read["meaningful"] is False
    page = render_html(LOCAL)
    assert page.count("not meaningful *") == 1 and page.count("<p class='nm'>* ") == 1
    assert "MiB or more per rank" in page
