"""Never silent when down (issue 24 item 4): with the controller, one pool's agents or the webhook scaled to zero,
promtool sees the alert fire; with them up, it stays quiet. Also the webhook's errors and an open breaker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from promtool_support import run_promtool_tests

from fabricguard.controller.alerts import rule_groups
from fabricguard.profile import load_profile

pytestmark = pytest.mark.external

ROOT = Path(__file__).resolve().parents[2]
PROFILE = load_profile(ROOT / "examples" / "profiles" / "aws-p5-efa.yaml")  # two pools: p5-efa, g6-single
UP = "1x40"
GONE_AT_10 = "1x10 _x30"  # reporting for 10 minutes, then scaled to zero: no sample at all


def _agent(pool: str, node: str, values: str) -> dict[str, str]:
    return {"series": f'fabricguard_agent_info{{instance="{node}:9400",node="{node}",pool="{pool}"}}',
            "values": values}


def _controller(values: str) -> dict[str, str]:
    return {"series": 'fabricguard_reconcile_last_timestamp_seconds{job="fabricguard-controller"}', "values": values}


def _webhook(values: str) -> dict[str, str]:
    return {"series": 'fabricguard_admission_draining{job="fabricguard-admission"}', "values": values}


def _run(tmp: Path, series: list[dict[str, str]], checks: list[dict[str, Any]]) -> None:
    done = run_promtool_tests(tmp, rule_groups(PROFILE), [{"interval": "1m", "input_series": series,
                                                           "alert_rule_test": checks}])
    assert done.returncode == 0, done.stdout + done.stderr


def _all_up() -> list[dict[str, str]]:
    return [_controller(UP), _webhook(UP), _agent("p5-efa", "n1", UP), _agent("g6-single", "g1", UP)]


def test_nothing_fires_while_every_component_reports(tmp_path: Path) -> None:
    _run(tmp_path, _all_up(), [{"eval_time": "25m", "alertname": a, "exp_alerts": []}
                               for a in ("FabricguardControllerDown", "FabricguardWebhookDown",
                                         "FabricguardAgentsDown")])


def test_the_controller_at_zero_replicas_fires(tmp_path: Path) -> None:
    series = [s for s in _all_up() if "reconcile" not in s["series"]] + [_controller(GONE_AT_10)]
    _run(tmp_path, series, [
        {"eval_time": "15m", "alertname": "FabricguardControllerDown", "exp_alerts": []},  # gone 5 min: pending
        {"eval_time": "30m", "alertname": "FabricguardControllerDown",
         "exp_alerts": [{"exp_labels": {"severity": "critical"}}]},
    ])


def test_one_pools_agents_at_zero_fire_for_that_pool_only(tmp_path: Path) -> None:
    series = [s for s in _all_up() if 'pool="g6-single"' not in s["series"]] + [_agent("g6-single", "g1", GONE_AT_10)]
    _run(tmp_path, series, [{"eval_time": "30m", "alertname": "FabricguardAgentsDown",
                             "exp_alerts": [{"exp_labels": {"severity": "critical", "pool": "g6-single"}}]}])


def test_the_webhook_at_zero_replicas_fires(tmp_path: Path) -> None:
    series = [s for s in _all_up() if "admission" not in s["series"]] + [_webhook(GONE_AT_10)]
    _run(tmp_path, series, [{"eval_time": "30m", "alertname": "FabricguardWebhookDown",
                             "exp_alerts": [{"exp_labels": {"severity": "critical"}}]}])


def test_webhook_errors_and_an_open_breaker_fire(tmp_path: Path) -> None:
    req = "fabricguard_admission_requests_total"
    series = [*_all_up(),
              {"series": f'{req}{{endpoint="mutate",outcome="patched"}}', "values": "0+60x30"},
              {"series": f'{req}{{endpoint="mutate",outcome="timeout"}}', "values": "0+10x30"},
              {"series": 'fabricguard_breaker_open{pool="p5-efa",check="fabric.allocatable"}', "values": "0x5 1x25"}]
    _run(tmp_path, series, [
        {"eval_time": "25m", "alertname": "FabricguardWebhookErrors", "exp_alerts": [{"exp_labels": {
            "severity": "warning"}}]},
        {"eval_time": "10m", "alertname": "FabricguardBreakerOpen", "exp_alerts": [{"exp_labels": {
            "severity": "critical", "pool": "p5-efa", "check": "fabric.allocatable"}}]},
    ])


def test_failing_nodes_left_untainted_by_the_taint_budget_fire_per_pool(tmp_path: Path) -> None:
    """Agents that found every taint slot of their pool held (agent/taint_slots.py): a warning after 10 minutes,
    counting the pool's withheld nodes; a node that got its slot (0) does not count, nor does another pool."""
    held = "fabricguard_agent_taint_budget_withheld"
    series = [*_all_up(),
              {"series": f'{held}{{instance="n1:9400",pool="p5-efa"}}', "values": "0x5 1x25"},
              {"series": f'{held}{{instance="n2:9400",pool="p5-efa"}}', "values": "0x8 1x22"},
              {"series": f'{held}{{instance="n3:9400",pool="p5-efa"}}', "values": "0x30"},
              {"series": f'{held}{{instance="g1:9400",pool="g6-single"}}', "values": "0x30"}]
    _run(tmp_path, series, [
        {"eval_time": "12m", "alertname": "FabricguardTaintBudgetSpent", "exp_alerts": []},  # pending
        {"eval_time": "20m", "alertname": "FabricguardTaintBudgetSpent", "exp_alerts": [{
            "exp_labels": {"severity": "warning", "pool": "p5-efa"}}]},
    ])
