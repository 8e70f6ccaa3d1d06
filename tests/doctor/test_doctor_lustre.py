"""The doctor's per-node Lustre view and ``lustre-client-unhealthy``, from the ``FabricReady`` conditions the
agent's own writer (``agent.condition.judge`` + ``build_condition``) makes of the Lustre client's checks, as
``tests/probes/test_lustre_client.py`` produces them on node trees."""

from __future__ import annotations

import json
from datetime import timedelta

from doctor_support import gen, snap

from fabricguard.agent.condition import build_condition, failing_checks, judge
from fabricguard.doctor.engine import run_doctor
from fabricguard.doctor.report import render_table, to_html, to_json, to_markdown
from fabricguard.probes.result import Check, Status
from fabricguard.profile import loads_profile

NOW = gen.NOW
PROFILE = loads_profile(gen.INCIDENT_PROFILE.format(name="gh200-prod", env="production").replace(
    "spec:\n", "spec:\n  storage:\n    lustre: {claimName: training-lustre, mountPath: /mnt/lustre}\n", 1))
OK = [Check("rdma.devices", Status.passed, "2 HCAs"), Check("lustre.health", Status.passed, "healthy"),
      Check("lustre.imports", Status.passed, "9 imports connected")]
DISCONN = Check("lustre.imports", Status.failed, "1 of 9 imports of file system lfsfs not connected: lfsfs-OST0001: "
                "state: DISCONN (/host/sys/kernel/debug/lustre/osc/lfsfs-OST0001-osc-ffff8d2c3a4b5000/import)")
EVICTED = Check("lustre.evictions", Status.failed, "1 eviction(s) in the last 60 min: lfsfs-OST0001 evicted at "
                "2025-09-30T11:40:00Z (state_history: [ 1759232400, EVICTED ]). An evicted client loses its locks")
PEER = Check("lustre.lnet", Status.failed, "LNet unhealthy (health below 1000 means LNet recorded failures and routes "
             "around them): peer 10.1.0.5@tcp: health value 900")
JOBID = Check("lustre.jobid", Status.degraded, "jobid_var is 'disable', not FG_LUSTRE_JOBID")


def _node(name: str, checks: list[Check]) -> dict:
    n = gen.node(name, arch="arm64", labels={"nvidia.com/gpu.product": "NVIDIA-GH200-480GB"},
                 created=NOW - timedelta(days=90), allocatable={"rdma/rdma_shared_device_a": "1"}, fabric_ready=True)
    cond = build_condition(judge(checks), None, NOW - timedelta(minutes=5))
    n["status"]["conditions"] = [c for c in n["status"]["conditions"] if c["type"] != "FabricReady"] + [cond]
    return n


def _report(nodes: list[dict]):
    return run_doctor(snap({"nodes": {"apiVersion": "v1", "kind": "NodeList", "items": nodes}}), PROFILE, NOW)


def test_each_nodes_client_is_shown_with_the_line_its_check_read(capsys, monkeypatch) -> None:
    nodes = [_node(f"gpu-{i:02d}", OK) for i in range(6)]
    nodes += [_node("gpu-evicted", [*OK[:2], EVICTED, DISCONN]), _node("gpu-peer", [*OK, PEER]),
              _node("gpu-jobid", [*OK, JOBID]), _node("gpu-rdma", [Check("rdma.devices", Status.failed, "none"),
                                                                   *OK[1:]])]
    report = _report(nodes)
    cells = {c.node: c for c in report.lustre["gh200-roce"]}
    assert [c.state for c in report.lustre["gh200-roce"][:2]] == ["failing", "failing"]  # the sick ones first
    assert cells["gpu-evicted"].checks["lustre.evictions"].startswith("1 eviction(s) in the last 60 min")
    assert "state: DISCONN" in cells["gpu-evicted"].checks["lustre.imports"]
    assert cells["gpu-peer"].checks == {"lustre.lnet": PEER.detail}
    assert cells["gpu-jobid"].state == "warning" and cells["gpu-rdma"].state == "other"
    assert cells["gpu-00"].state == "healthy"
    (f,) = [f for f in report.findings if f.rule == "lustre-client-unhealthy"]
    assert {o.name for o in f.objects} == {"gpu-evicted", "gpu-peer"}
    assert "2 of pool gh200-roce's 10 reporting node(s) have an unhealthy Lustre client" in f.message
    monkeypatch.setenv("COLUMNS", "80")
    render_table(report)
    text = capsys.readouterr().out
    assert "Lustre clients, pool gh200-roce: 6 of 10 node(s) healthy; 2 failing" in " ".join(text.split())
    assert "health value 900" in to_markdown(report)
    page = to_html(report)
    assert "<h2>Lustre clients</h2>" in page and "gpu-evicted: failing" in page and "health value 900" in page
    doc = json.loads(to_json(report))
    assert any(c["node"] == "gpu-peer" and c["state"] == "failing" for c in doc["lustre"]["gh200-roce"])
    # The agent's own reader and the doctor's read the same message the same way.
    assert failing_checks(next(c for c in nodes[6]["status"]["conditions"] if c["type"] == "FabricReady")) == [
        "lustre.evictions", "lustre.imports"]


def test_a_file_system_outage_is_said_once_as_the_file_systems() -> None:
    nodes = [_node(f"gpu-{i:02d}", [*OK[:2], DISCONN]) for i in range(8)] + [_node("gpu-ok", OK)]
    (f,) = [f for f in _report(nodes).findings if f.rule == "lustre-client-unhealthy"]
    assert f.message.startswith("the Lustre file system looks down for pool gh200-roce, not its nodes: "
                                "lustre.imports fails on 8 of its 9 reporting node(s)"), f.message
    assert "file system's incident" in f.fix
