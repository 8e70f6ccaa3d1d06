"""The doctor's node x proof grid and ``node-proof-behind``, from the marks the controller's proof leaves on Nodes
(the ``fabricguard.io/last-proven`` annotation, the ``FabricProven`` condition), written by the controller's own
writer so the doctor reads exactly what the controller writes."""

from __future__ import annotations

import json
from datetime import timedelta

from doctor_support import gen, snap

from fabricguard import proofmark
from fabricguard.doctor.engine import run_doctor
from fabricguard.doctor.report import render_table, to_html, to_json, to_markdown
from fabricguard.profile import loads_profile
from screenshot import is_ink, read_png, screenshot

NOW = gen.NOW
PROFILE = loads_profile(gen.INCIDENT_PROFILE.format(name="gh200-prod", env="production").replace(
    "spec:\n", "spec:\n  storage:\n    lustre: {claimName: training-lustre, mountPath: /mnt/lustre}\n", 1)
    + "    canary: {interval: 10m, pendingTimeout: 3m, runTimeout: 15m}\n"
    + "    proof: {every: 24h}\n")


def _node(name: str, *, proven_ago: timedelta | None = None, cond: tuple[str, str, str] | None = None,
          cordoned: bool = False) -> dict:
    n = gen.node(name, arch="arm64", labels={"nvidia.com/gpu.product": "NVIDIA-GH200-480GB"},
                 created=NOW - timedelta(days=90), allocatable={"rdma/rdma_shared_device_a": "1"}, fabric_ready=True)
    if proven_ago is not None:
        n["metadata"].setdefault("annotations", {})["fabricguard.io/last-proven"] = proofmark.format_last_proven(
            gen.ts(NOW - proven_ago), "fgp-gh200-roce-1764547200-0", "gpu-00", 44.2, "cross")
    if cond is not None:
        n["status"]["conditions"].append({"type": "FabricProven", "status": cond[0], "reason": cond[1],
                                          "message": cond[2], "lastTransitionTime": gen.ts(NOW - timedelta(hours=1)),
                                          "lastHeartbeatTime": gen.ts(NOW)})
    if cordoned:
        n["spec"]["unschedulable"] = True
    return n


def _snapshot():
    nodes = [_node(f"gpu-{i:02d}", proven_ago=timedelta(hours=2 + i), cond=("True", "PairTestPassed", "ok"))
             for i in range(6)]
    nodes += [
        _node("gpu-stale", proven_ago=timedelta(hours=30), cond=("True", "PairTestPassed", "ok")),
        _node("gpu-new"),
        _node("gpu-bad", proven_ago=timedelta(days=3), cond=(
            "False", "Convicted", "convicted by pair bisection: failed pair tests with gpu-01, gpu-03; bad rail: "
            "rail 1 mlx5_1")),
        _node("gpu-driver", proven_ago=timedelta(hours=5), cond=(
            "False", "ChangedSinceProof", "changed since proven: nvidia.com/cuda.driver-version.full: 580 -> 590")),
        _node("gpu-cordoned", cordoned=True),
    ]
    return snap({"nodes": {"apiVersion": "v1", "kind": "NodeList", "items": nodes}})


def test_the_grid_shows_each_node_by_proof_age_and_result_and_the_rule_names_the_gaps() -> None:
    report = run_doctor(_snapshot(), PROFILE, NOW)
    cells = report.coverage["gh200-roce"]
    by = {c.node: c for c in cells}
    assert "gpu-cordoned" not in by  # the controller does not test a cordoned node; neither is it counted
    assert [c.result for c in cells[:4]] == ["Convicted", "ChangedSinceProof", "never", "stale"]  # gaps first
    assert by["gpu-00"].result == "proven" and by["gpu-00"].busbw_gbps == 44.2 and by["gpu-00"].partner == "gpu-00"
    assert by["gpu-stale"].age == "1 day" and "rail 1 mlx5_1" in by["gpu-bad"].detail
    findings = [f for f in report.findings if f.rule == "node-proof-behind"]
    messages = " | ".join(f.message for f in findings)
    assert "1 node(s) of pool gh200-roce convicted by pair bisection" in messages
    assert "2 of 10 node(s) of pool gh200-roce not proven by a pair test within 24h" in messages
    assert {o.name for f in findings for o in f.objects} == {"gpu-bad", "gpu-driver", "gpu-new", "gpu-stale"}
    row = next(iter(report.grid.values()))
    assert row["node-proof-behind"] == "fail"
    doc = json.loads(to_json(report))
    assert doc["coverage"]["gh200-roce"][0]["result"] == "Convicted"
    assert "| gpu-new | never | never proven | - |" in to_markdown(report)


def test_a_pool_without_proof_has_no_grid_and_no_finding() -> None:
    profile = loads_profile(gen.INCIDENT_PROFILE.format(name="p", env="production"))
    report = run_doctor(_snapshot(), profile, NOW)
    assert report.coverage == {} and not [f for f in report.findings if f.rule == "node-proof-behind"]
    assert next(iter(report.grid.values()))["node-proof-behind"] == "n/a"


def test_no_proof_mark_anywhere_asks_whether_the_controller_runs() -> None:
    report = run_doctor(snap({"nodes": {"apiVersion": "v1", "kind": "NodeList", "items": [_node(f"gpu-{i}") for i in range(3)]}}),
                        PROFILE, NOW)
    f = next(f for f in report.findings if f.rule == "node-proof-behind")
    assert "3 of 3" in f.message and "is the controller running with this profile?" in f.message


def test_text_lists_the_gaps_at_80_columns(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    render_table(run_doctor(_snapshot(), PROFILE, NOW))
    out = capsys.readouterr().out
    assert "proof coverage, pool gh200-roce: 6 of 10 node(s) proven within the goal" in " ".join(out.split())
    assert "gpu-bad: Convicted, proven 3 days ago, 44.2 GB/s" in out


def test_the_coverage_grid_renders_in_chromium(tmp_path) -> None:
    page = tmp_path / "doctor.html"
    html_text = to_html(run_doctor(_snapshot(), PROFILE, NOW))
    assert "Node proof coverage" in html_text and "title='gpu-bad: Convicted" in html_text
    page.write_text(html_text)
    img = read_png(screenshot(page, tmp_path / "doctor.png", 1200, 900))
    assert img.count(is_ink, step=4) > 2000
    assert img.count(lambda p: p == (220, 245, 227), step=2) > 200  # proven cells, green
    assert img.count(lambda p: p == (248, 215, 218), step=2) > 100  # the named node, red
