"""The doctor's HTML and Markdown reports: severities told apart, events summarised, labels clear of the bars,
and the page as Chromium renders it."""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from pathlib import Path

from doctor_support import EXAMPLES, gen, snap

from fabricguard.doctor.engine import Report, Timeline, run_doctor
from fabricguard.doctor.model import Finding, ObjRef, Severity
from fabricguard.doctor.report import evidence_rows, summarise_events, to_html, to_markdown
from fabricguard.doctor.snapshot import load_snapshot
from screenshot import dump_dom, is_ink, read_png, screenshot

DOCS_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
PROD = EXAMPLES / "incident-271-days" / "production"
EXEC_FORMAT = "Error: failed to create containerd task"


def _incident(prod_lists, prod_profile, now) -> Report:
    return run_doctor(snap(prod_lists), prod_profile, now)


def _cells(page: str) -> dict[str, tuple[str, str]]:
    """Grid cells by rule: (class, mark)."""
    return {
        rule: (cls, mark)
        for cls, rule, mark in re.findall(r"<td class='(\w+)' title='([\w-]+): [^']*'>([^<]*)</td>", page)
    }


def test_grid_marks_warnings_apart_from_criticals(prod_lists, prod_profile, now):
    page = to_html(_incident(prod_lists, prod_profile, now))
    cells = _cells(page)
    assert cells["daemonset-never-ready"] == ("critical", "✗")
    assert cells["topology-mapping-mismatch"] == ("warning", "!")
    assert cells["node-not-gated"] == ("warning", "!")
    assert cells["daemonset-no-nodes"] == ("pass", "✓")
    assert "class='legend'" in page and "<b class='warning'>!</b>warning" in page
    md = to_markdown(_incident(prod_lists, prod_profile, now))
    assert re.search(r"\| gh200-roce \(6 nodes\) \| FAIL \|.*\| WARN \| WARN \|", md)


def test_event_evidence_is_summarised_not_raw_json(prod_lists, prod_profile, now):
    report = _incident(prod_lists, prod_profile, now)
    [f] = [f for f in report.findings if f.rule == "image-arch-mismatch"]
    events = f.evidence["events"]
    assert len(events) == 6  # one exec-format event per crash-looping pod
    [s] = summarise_events(events)
    assert (s.reason, s.count, s.events, s.objects) == ("Failed", 6 * 31, 6, 6)
    assert s.first is not None and s.last is not None and s.first < s.last
    page = to_html(report)
    assert page.count(EXEC_FORMAT) == 1  # the message once, not once per event
    assert '"reason"' not in page and "&quot;reason&quot;" not in page
    assert "Failed</b> ×186 · 6 events on 6 objects" in page
    assert f"{s.when()}" in page and "→" in s.when()


def test_events_v1_fields_are_read():
    events = [
        {"reason": "Failed", "message": "m", "count": 3, "object": "a", "firstTimestamp": "2025-09-30T10:00:00Z",
         "lastTimestamp": "2025-09-30T11:00:00Z"},
        {"reason": "Failed", "message": "m", "count": None, "object": "b", "firstTimestamp": None,
         "lastTimestamp": "2025-09-30T11:30:00Z"},
        {"reason": "BackOff", "message": "n", "count": 1, "object": "a"},
    ]
    a, b = summarise_events(events)
    assert (a.reason, a.count, a.events, a.objects) == ("Failed", 4, 2, 2)
    assert a.when() == "2025-09-30T10:00:00Z → 2025-09-30T11:30:00Z"
    assert (b.reason, b.when()) == ("BackOff", "?")


def test_events_v1_snapshot_reaches_the_summary(prod_lists, prod_profile, now):
    """The images rule reads events.k8s.io/v1 fields (note, deprecated* timestamps, series)."""
    for ev in prod_lists["events"]["items"]:
        ev["apiVersion"] = "events.k8s.io/v1"
        ev["regarding"] = ev.pop("involvedObject")
        ev["note"] = ev.pop("message")
        ev["deprecatedFirstTimestamp"] = ev.pop("firstTimestamp")
        ev["series"] = {"count": ev.pop("count"), "lastObservedTime": ev.pop("lastTimestamp")}
    report = _incident(prod_lists, prod_profile, now)
    [f] = [f for f in report.findings if f.rule == "image-arch-mismatch"]
    [s] = summarise_events(f.evidence["events"])
    assert (s.count, s.objects) == (186, 6) and s.first is not None and s.first < s.last


def test_repeated_per_object_values_are_one_row(prod_lists, prod_profile, now):
    report = _incident(prod_lists, prod_profile, now)
    [f] = [f for f in report.findings if f.rule == "fabric-not-advertised"]
    rows = dict(evidence_rows(f.evidence))
    [label] = [k for k in rows if "status.allocatable" in k]
    assert label.startswith("Nodes prd-gh200-00, prd-gh200-01") and rows[label] == "absent"
    assert rows["nodes affected"] == "6 of 6"
    # Different values stay apart.
    assert len(evidence_rows({"pod a: x": "1", "pod b: x": "2"})) == 2


def _long_name_report() -> Report:
    now = gen.NOW
    names = [
        ("gpu-operator-resources", "nvidia-device-plugin-daemonset-mofed-validation-h200-roce-pool-a"),
        ("network-operator", "rdma-shared-dp-ds"),
        ("kube-system", "x"),
    ]
    timelines = [
        Timeline(ns, name, now - timedelta(days=200 - 50 * i), None, [now - timedelta(days=2)], 6, 0, "never-ready")
        for i, (ns, name) in enumerate(names)
    ]
    return Report(findings=[], now=now, source="long-names", timelines=timelines)


def test_long_names_stay_clear_of_the_timeline_bars(tmp_path):
    page = tmp_path / "doctor.html"
    probe = (
        "<script>const out=[];const tracks=[...document.querySelectorAll('rect.track')];"
        "document.querySelectorAll('text.label').forEach((t,i)=>{const r=t.getBoundingClientRect();"
        "out.push([t.querySelector('title').textContent,t.lastChild.textContent,r.right,"
        "tracks[i].getBoundingClientRect().left])});"
        "document.body.insertAdjacentHTML('beforeend','<pre id=m>'+JSON.stringify(out)+'</pre>')</script>"
    )
    page.write_text(to_html(_long_name_report()).replace("</body>", probe + "</body>"))
    m = re.search(r'<pre id="m">(.*?)</pre>', dump_dom(page), re.S)
    assert m
    labels = json.loads(m.group(1))
    assert next(full for full, *_ in labels).endswith("h200-roce-pool-a")  # full name kept as the tooltip
    for full, _shown, text_right, bar_left in labels:
        assert text_right <= bar_left - 4, f"{full!r} reaches x={text_right:.0f}, its bar starts at {bar_left:.0f}"
    long_full, long_shown = labels[0][:2]
    assert "…" in long_shown and long_shown.startswith("gpu-operator-res") and long_full.endswith(long_shown[-8:])
    assert [shown for _, shown, *_ in labels[1:]] == ["network-operator/rdma-shared-dp-ds", "kube-system/x"]


def test_doctor_report_renders_in_chromium(tmp_path, prod_profile, now):
    """The incident's production snapshot as saved under examples/, as a person opens the report."""
    report = run_doctor(load_snapshot(PROD), prod_profile, now)
    report.source = str(PROD.relative_to(EXAMPLES.parents[1]))
    page = tmp_path / "doctor.html"
    page.write_text(to_html(report))
    img = read_png(screenshot(page, tmp_path / "doctor.png", 1280, 1600))
    assert (img.width, img.height) == (1280, 1600)
    assert img.count(is_ink, step=4) > 5000
    # Both severities show in the grid, each in its own colour: critical (#f8d7da) and warning (#fff3cd).
    assert img.count(lambda p: p == (248, 215, 218), step=2) > 200
    assert img.count(lambda p: p == (255, 243, 205), step=2) > 200
    if os.environ.get("FABRICGUARD_UPDATE_SCREENSHOTS"):
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        screenshot(page, DOCS_SHOTS / "doctor-report.png", 1280, 2000)


def test_markdown_evidence_is_text_not_markup():
    f = Finding("drift", Severity.warning, [ObjRef("DaemonSet", "dp", "ns")], "m",
                {"image": "repo:v1 (digest <absent>)", "a|b": "x*y|z"}, "fix")
    md = to_markdown(Report(findings=[f], now=gen.NOW, source="s"))
    assert "| `image` | repo:v1 (digest \\<absent\\>) |" in md
    assert "| `a\\|b` | x\\*y\\|z |" in md


def test_drift_report_renders_in_chromium(tmp_path):
    """The diff's page (same renderer, a drift finding with both sides) as Chromium shows it."""
    sides = {"staging": "registry.example/dp:v1.5.2@sha256:" + "f3" * 32, "production": "registry.example/dp:v1.5.2"}
    f = Finding("drift", Severity.warning, [ObjRef("DaemonSet", "rdma-shared-dp-ds", "network-operator")],
                "image differs", {"spec.template.spec.containers[name=dp].image": sides}, "align them")
    page = tmp_path / "diff.html"
    page.write_text(to_html(Report(findings=[f], now=gen.NOW, source="staging vs production", title="doctor diff")))
    html_text = page.read_text()
    assert "<b>staging</b>: registry.example/dp:v1.5.2@sha256:" in html_text and "<br><b>production</b>" in html_text
    img = read_png(screenshot(page, tmp_path / "diff.png", 1000, 700))
    assert (img.width, img.height) == (1000, 700) and img.count(is_ink, step=4) > 1000
    assert img.count(lambda p: p == (233, 164, 0), step=1) > 50  # the warning finding's amber left border
