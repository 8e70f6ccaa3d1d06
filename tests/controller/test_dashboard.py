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
    assert len(model.panels) == len(doc["panels"]) == 6
    ids = [p.id_val for p in model.panels]
    assert len(set(ids)) == len(ids)
    for p in model.panels:
        assert p.type_val in ("timeseries", "stat", "state-timeline")
        assert p.grid_pos is not None and p.grid_pos.w == 12 and p.grid_pos.h == 8
        assert p.targets
    # No two panels overlap on the 24-column grid.
    cells = set()
    for p in doc["panels"]:
        g = p["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells
                cells.add((x, y))
    titles = " ".join(p["title"] for p in doc["panels"])
    for what in ("outcome", "busbw", "verdicts", "held", "last successful"):
        assert what in titles


@pytest.mark.external
def test_every_query_is_promql_over_exported_metrics(tmp_path: Path) -> None:
    exe = promtool()
    exprs = [t["expr"] for p in dashboard(PROFILE_OBJ)["panels"] for t in p["targets"]]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:q{i}", "expr": e}
                                                        for i, e in enumerate(exprs)]}]}
    f = tmp_path / "queries.yaml"
    f.write_text(yaml.safe_dump(rules))
    import subprocess

    r = subprocess.run([exe, "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    exported = {m.name for m in Metrics().registry.collect()}
    exported |= {f"{n}_total" for n in exported}
    used = {m for e in exprs for m in re.findall(r"\b(fabricguard_[a-z_]+)", e)}
    assert used <= exported, used - exported


def test_render_dashboard_cli() -> None:
    import json

    prof = Path(__file__).resolve().parents[2] / "examples" / "profiles" / "gke-a3-ultra.yaml"
    r = CliRunner().invoke(app, ["render", "dashboard", "--profile", str(prof)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["uid"] == "fabricguard-prod-gcp"
    r = CliRunner().invoke(app, ["render", "alerts", "--profile", str(prof), "--plain"])
    assert r.exit_code == 0 and yaml.safe_load(r.stdout)["groups"][0]["name"] == "fabricguard"
