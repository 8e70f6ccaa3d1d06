"""The dashboard's colours mean something: each canary outcome its own colour (green only for passed), a pool
that never passed shown as its own dark state, staleness thresholds from the pools' canary interval, busbw in
GB/s against the floor. The outcome query is run by promtool on recorded series: it yields the code whose
mapping names the outcome, and -1 ("never passed") for a pool with no success at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_support import PROFILE
from promtool_support import run_promtool_tests

from fabricguard.controller.dashboard import NEVER_PASSED, OUTCOME_CODES, dashboard
from fabricguard.profile import loads_profile

BOARD = dashboard(loads_profile(PROFILE))


def _panel(title: str) -> dict:
    return next(p for p in BOARD["panels"] if p["title"] == title)


def _colours(panel: dict) -> dict[str, str]:
    (m,) = panel["fieldConfig"]["defaults"]["mappings"]
    return {o["text"]: o["color"] for o in m["options"].values()}


def test_outcome_staleness_and_never_passed_are_distinct_colours() -> None:
    outcome = _colours(_panel("Canary outcome per pool"))
    assert set(outcome) == {*OUTCOME_CODES, "never passed"}
    assert len(set(outcome.values())) == len(outcome), "two states share a colour"
    assert [o for o, c in outcome.items() if c == "green"] == ["passed"]
    stale = _panel("Time since last successful validation")["fieldConfig"]["defaults"]
    steps = [s["color"] for s in stale["thresholds"]["steps"]]
    assert steps == ["green", "yellow", "red"] and stale["unit"] == "s"
    # Thresholds from the profile: the canary interval is 10 minutes; red at two (the alert).
    assert [s["value"] for s in stale["thresholds"]["steps"]] == [None, 660, 1200]
    never = _colours(_panel("Time since last successful validation"))["never passed"]
    assert never == outcome["never passed"] and never not in steps
    validated = _colours(_panel("Pools validated now"))
    assert validated == {"validated": "green", "not validated": "red"}
    busbw = _panel("All-reduce busbw vs floor (GB/s)")["fieldConfig"]["defaults"]
    assert busbw["unit"] == "GBs" and busbw["thresholds"]["steps"][1]["color"] == "green"
    assert {"pool"} <= {v["name"] for v in BOARD["templating"]["list"]}


@pytest.mark.external
def test_the_outcome_query_yields_the_mapped_code(tmp_path: Path) -> None:
    expr = _panel("Canary outcome per pool")["targets"][0]["expr"].replace("$pool", ".*").replace("$cluster", ".*")
    series = [{"series": f'fabricguard_canary_last_outcome{{pool="a",outcome="{o}"}}',
               "values": f"{1 if o == 'unschedulable' else 0}x5"} for o in OUTCOME_CODES]
    series += [{"series": 'fabricguard_canary_interval_seconds{pool="a"}', "values": "600x5"},
               {"series": 'fabricguard_canary_last_success_timestamp_seconds{pool="a"}', "values": "0x5"},
               {"series": 'fabricguard_canary_interval_seconds{pool="never"}', "values": "600x5"}]
    r = run_promtool_tests(tmp_path, {"groups": []}, [{"interval": "1m", "input_series": series, "promql_expr_test": [
        {"expr": expr, "eval_time": "2m", "exp_samples": [
            {"labels": '{pool="a"}', "value": OUTCOME_CODES["unschedulable"]},
            {"labels": '{pool="never"}', "value": NEVER_PASSED}]}]}])
    assert r.returncode == 0, r.stdout + r.stderr
