"""``render dashboard``: Grafana's own model (grafana-foundation-sdk) reads it; every query is valid PromQL
(promtool) over metric names the controller really exports."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from controller_support import PROFILE
from grafana_foundation_sdk.models import dashboard as gf
from promtool_support import promtool
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.controller.dashboard import dashboard
from fabricguard.controller.metrics import Metrics
from fabricguard.profile import loads_profile

PROFILE_OBJ = loads_profile(PROFILE)


def test_grafana_model_reads_every_panel() -> None:
    doc = dashboard(PROFILE_OBJ)
    model = gf.Dashboard.from_json(doc)
    assert model.title == doc["title"] and model.uid == doc["uid"]
    # 20 panels (+ "Pools validated now", issue 30) + the Lustre panels of a profile with Lustre (issue 32), under
    # 3 rows: Pools, Nodes, Jobs (issue 30, session 24).
    assert len(model.panels) == len(doc["panels"]) == 28
    assert [p["title"] for p in doc["panels"] if p["type"] == "row"] == ["Pools", "Nodes", "Jobs"]
    ids = [p.id_val for p in model.panels]
    assert len(set(ids)) == len(ids)
    for p in model.panels:
        if p.type_val == "row":
            continue
        assert p.type_val in ("timeseries", "stat", "state-timeline", "table")
        assert p.grid_pos is not None and p.grid_pos.w == 12 and p.grid_pos.h == 8
        assert p.targets
    # Every panel says what it shows; every query follows the cluster variable, every pool series the pool one.
    for p in doc["panels"]:
        if p["type"] != "row":
            assert p.get("description"), p["title"]
            for t in p["targets"]:
                assert 'cluster=~"$cluster"' in t["expr"], (p["title"], t["expr"])
    assert all('pool=~"$pool"' in t["expr"] for p in doc["panels"] if p["type"] != "row"
               and not p["title"].startswith("Job $namespace/$job") and "fabricguard_doctor" not in str(p["targets"])
               and "fabricguard_drift" not in str(p["targets"]) for t in p["targets"][:1])
    # The job view's verdict is the job's own, not every job's.
    (verdict,) = [p for p in doc["panels"] if p["title"].endswith(": its verdict")]
    assert 'fabricguard_job_verdict{cluster=~"$cluster",namespace="$namespace",job="$job"}' in verdict["targets"][0]["expr"]
    # No two panels overlap on the 24-column grid.
    cells = set()
    for p in doc["panels"]:
        g = p["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells
                cells.add((x, y))
    titles = " ".join(p["title"] for p in doc["panels"])
    for what in ("outcome", "busbw", "verdicts", "held", "last successful", "ports down", "link errors",
                 "Lustre client latency per pool", "GPU utilization of its pods", "RDMA traffic of its nodes",
                 "TCP traffic", "transport its NCCL logs prove", "collective busbw across nodes (NCCL Inspector)",
                 "Lustre client health per node", "Storage canary vs floor", "share of its time in I/O"):
        assert what in titles
    variables = {v["name"] for v in doc["templating"]["list"]}
    assert {"cluster", "pool", "namespace", "job"} <= variables
    # A pool with a proof goal adds its coverage and GPU-hour panels.
    proof = dashboard(loads_profile(PROFILE.replace("    canary:", "    proof: {every: 24h}\n    canary:")))
    assert len(proof["panels"]) == 30
    assert {"Node proof coverage per pool (nodes)", "Node proof GPU-hours today vs budget"} <= {
        p["title"] for p in proof["panels"]}


@pytest.mark.external
def test_every_query_is_promql_over_exported_metrics(tmp_path: Path) -> None:
    exe = promtool()
    exprs = [t["expr"] for p in dashboard(PROFILE_OBJ)["panels"] for t in p.get("targets", ())]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:q{i}", "expr": e}
                                                        for i, e in enumerate(exprs)]}]}
    f = tmp_path / "queries.yaml"
    f.write_text(yaml.safe_dump(rules))
    import subprocess

    r = subprocess.run([exe, "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert {"DCGM_FI_DEV_GPU_UTIL", "kube_pod_info", "fabricguard_job_transport"} <= used_metrics(exprs)
    assert used_metrics(exprs) <= documented_metrics(), used_metrics(exprs) - documented_metrics()
    fabricguard = {m for m in used_metrics(exprs) if m.startswith("fabricguard_")}
    assert fabricguard <= exported_metrics(tmp_path), fabricguard - exported_metrics(tmp_path)


METRIC = re.compile(r"\b(fabricguard_[a-z_]+|DCGM_[A-Z_]+|node_[a-z_]+|kube_[a-z_]+)\b")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def used_metrics(exprs: list[str]) -> set[str]:
    # Label names (node, namespace) never match: the pattern needs a prefix and the word boundary.
    return {m for e in exprs for m in METRIC.findall(e)}


def documented_metrics() -> set[str]:
    """The first column of docs/metrics.md's tables."""
    return set(re.findall(r"^\| `([A-Za-z_]+)` \|", DOCS.read_text(), re.M))


def exported_metrics(tmp_path: Path) -> set[str]:
    """What the controller and a node agent (on a node with RDMA ports and a Lustre client) really export."""
    import shutil

    from fabricguard.agent.metrics import AgentMetrics

    root = tmp_path / "node"
    shutil.copytree(Path(__file__).resolve().parents[1] / "agent" / "fixtures" / "healthy-a3-ultra" / "root", root)
    port = root / "sys/class/infiniband/mlx5_2/ports/1/counters"
    port.mkdir()
    (port / "link_downed").write_text("0\n")
    (port / "symbol_error").write_text("0\n")
    osc = root / "proc/fs/lustre/osc/fs-OST0000-osc-ffff8d2c3a4b5000"
    osc.mkdir(parents=True)
    (osc / "stats").write_text("req_waittime 10 samples [usec] 1 9 50 300\n")
    llite = root / "proc/fs/lustre/llite/fs-ffff8d2c3a4b5000"
    llite.mkdir(parents=True)
    (llite / "stats").write_text("read_bytes 1 samples [bytes] 1 1 1\nwrite_bytes 1 samples [bytes] 1 1 1\n")
    agent = AgentMetrics("n")
    agent.watch_fabric(root)
    names: set[str] = set()
    for reg in (Metrics().registry, agent.registry):
        for m in reg.collect():
            names.add(m.name)
            names.add(f"{m.name}_total")
    return names


def test_every_alert_reads_documented_metrics() -> None:
    from fabricguard.controller.alerts import rule_groups

    prof = loads_profile(PROFILE.replace("baseline: {allReduceBusBwGBps: 45}",
                                         "baseline: {allReduceBusBwGBps: 45, lustreRpcLatencyMs: 2}"))
    exprs = [r["expr"] for r in rule_groups(prof)["groups"][0]["rules"]]
    assert used_metrics(exprs) <= documented_metrics(), used_metrics(exprs) - documented_metrics()
    # And the docs' alert table names every rule.
    text = DOCS.read_text()
    for r in rule_groups(prof)["groups"][0]["rules"]:
        name = r["alert"]
        assert name in text or name.rsplit("Canary", 1)[-1] in text, name


def test_render_dashboard_cli() -> None:
    import json

    prof = Path(__file__).resolve().parents[2] / "examples" / "profiles" / "gke-a3-ultra.yaml"
    r = CliRunner().invoke(app, ["render", "dashboard", "--profile", str(prof)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["uid"] == "fabricguard-prod-gcp"
    r = CliRunner().invoke(app, ["render", "alerts", "--profile", str(prof), "--plain"])
    assert r.exit_code == 0 and yaml.safe_load(r.stdout)["groups"][0]["name"] == "fabricguard"


def test_render_exporters_labels_every_series_with_its_node() -> None:
    r = CliRunner().invoke(app, ["render", "exporters", "--dcgm-namespace", "nvidia"])
    assert r.exit_code == 0, r.output
    docs = list(yaml.safe_load_all(r.stdout))
    assert [d["kind"] for d in docs] == ["ServiceMonitor", "ServiceMonitor", "PodMonitor"]
    for d in docs:
        eps = d["spec"].get("endpoints") or d["spec"]["podMetricsEndpoints"]
        assert eps[0]["relabelings"][0]["targetLabel"] == "node"
    assert docs[0]["spec"]["namespaceSelector"]["matchNames"] == ["nvidia"]
    assert docs[0]["spec"]["endpoints"][0]["honorLabels"] is True  # DCGM's pod labels name the workload
