"""Every alerting rule under ``promtool test rules``: it fires on the failure it names and stays quiet otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_support import PROFILE
from promtool_support import run_promtool_tests

from fabricguard.controller.alerts import prometheus_rule, rule_groups
from fabricguard.profile import loads_profile

pytestmark = pytest.mark.external

PROFILE_OBJ = loads_profile(PROFILE)
DS = 'namespace="network-operator",daemonset="rdma-shared-dp-ds"'
# kubernetes-mixin's DaemonSet alerts (controller-ecosystem.md §5), to show what they miss.
MIXIN = {"name": "kubernetes-mixin", "rules": [
    {"alert": "KubeDaemonSetNotScheduled", "for": "10m", "expr":
     "kube_daemonset_status_desired_number_scheduled - kube_daemonset_status_current_number_scheduled > 0"},
    {"alert": "KubeDaemonSetRolloutStuck", "for": "15m", "expr":
     "((kube_daemonset_status_current_number_scheduled != kube_daemonset_status_desired_number_scheduled)"
     " or (kube_daemonset_status_number_misscheduled != 0)"
     " or (kube_daemonset_status_updated_number_scheduled != kube_daemonset_status_desired_number_scheduled)"
     " or (kube_daemonset_status_number_available != kube_daemonset_status_desired_number_scheduled))"
     " and (changes(kube_daemonset_status_updated_number_scheduled[5m]) == 0)"},
]}


def _ds(desired: int, ready: int | str) -> list[dict[str, str]]:
    """The DaemonSet's kube-state-metrics series (created at t=0); ``ready`` a number or a promtool values string."""
    ready_values = f"{ready}x40" if isinstance(ready, int) else ready
    available = f"{ready}x40" if isinstance(ready, int) else ready
    return [
        {"series": f"kube_daemonset_created{{{DS}}}", "values": "0x40"},
        {"series": f"kube_daemonset_status_desired_number_scheduled{{{DS}}}", "values": f"{desired}x40"},
        {"series": f"kube_daemonset_status_current_number_scheduled{{{DS}}}", "values": f"{desired}x40"},
        {"series": f"kube_daemonset_status_updated_number_scheduled{{{DS}}}", "values": f"{desired}x40"},
        {"series": f"kube_daemonset_status_number_available{{{DS}}}", "values": available},
        {"series": f"kube_daemonset_status_number_misscheduled{{{DS}}}", "values": "0x40"},
        {"series": f"kube_daemonset_status_number_ready{{{DS}}}", "values": ready_values},
    ]


def _alert(name: str, t: str, alerts: list[dict]) -> dict:
    return {"eval_time": t, "alertname": name, "exp_alerts": [{"exp_labels": a} for a in alerts]}


def _run(tmp_path: Path, tests: list[dict], *, mixin: bool = False) -> None:
    groups = rule_groups(PROFILE_OBJ)
    if mixin:
        groups["groups"].append(MIXIN)
    r = run_promtool_tests(tmp_path, groups, tests)
    assert r.returncode == 0, r.stdout + r.stderr


def test_daemonset_wanting_no_pods_fires_where_the_mixin_is_silent(tmp_path: Path) -> None:
    labels = {"severity": "critical", "namespace": "network-operator", "daemonset": "rdma-shared-dp-ds"}
    _run(tmp_path, [
        # desiredNumberScheduled == 0: ours fires; both mixin alerts compare equal numbers and stay silent.
        {"interval": "1m", "input_series": _ds(0, 0), "alert_rule_test": [
            _alert("FabricguardFabricDaemonSetNeverReady", "25m", [labels]),
            _alert("KubeDaemonSetNotScheduled", "20m", []),
            _alert("KubeDaemonSetRolloutStuck", "20m", []),
        ]},
        # The 271-day case: 6 wanted, none ever ready.
        {"interval": "1m", "input_series": _ds(6, 0), "alert_rule_test": [
            _alert("FabricguardFabricDaemonSetNeverReady", "25m", [labels]),
            # Not before 15 minutes of age (an image still pulling) and `for: 5m`.
            _alert("FabricguardFabricDaemonSetNeverReady", "18m", []),
        ]},
        {"interval": "1m", "input_series": _ds(6, 6), "alert_rule_test": [
            _alert("FabricguardFabricDaemonSetNeverReady", "20m", []),
        ]},
        # Ready for 10 minutes, then none: "none ready now", not "never ready".
        {"interval": "1m", "input_series": _ds(6, "6x10 0x30"), "alert_rule_test": [
            _alert("FabricguardFabricDaemonSetNeverReady", "30m", []),
            _alert("FabricguardFabricDaemonSetNoneReady", "15m", []),  # not before `for: 10m`
            _alert("FabricguardFabricDaemonSetNoneReady", "30m", [labels]),
        ]},
        # kube-state-metrics does not report it at all (deleted, or never installed).
        {"interval": "1m", "input_series": [{"series": 'up{job="kube-state-metrics"}', "values": "1x40"}],
         "alert_rule_test": [_alert("FabricguardFabricDaemonSetMissing", "20m", [labels]),
                             _alert("FabricguardFabricDaemonSetNeverReady", "20m", [])]},
    ], mixin=True)


def test_never_ready_names_the_daemonset_and_its_age(tmp_path: Path) -> None:
    """The 271-day case as the page reads it: the DaemonSet named, its age in the text."""
    rule = next(r for r in rule_groups(PROFILE_OBJ)["groups"][0]["rules"]
                if r["alert"] == "FabricguardFabricDaemonSetNeverReady")
    ann = rule["annotations"]
    want = {
        "summary": ann["summary"].replace("{{ $labels.namespace }}/{{ $labels.daemonset }}",
                                          "network-operator/rdma-shared-dp-ds"),
        "description": ann["description"].replace("{{ $value | humanizeDuration }}", "271d 0h 20m 0s"),
        "runbook_url": ann["runbook_url"],
    }
    assert want["summary"] != ann["summary"] and want["description"] != ann["description"]
    series = [s for s in _ds(6, 0) if "created" not in s["series"]]
    series.append({"series": f"kube_daemonset_created{{{DS}}}", "values": f"{-271 * 86400}x40"})
    r = run_promtool_tests(tmp_path, {"groups": [{"name": "g", "rules": [rule]}]}, [{
        "interval": "1m", "input_series": series, "alert_rule_test": [{
            "eval_time": "20m", "alertname": rule["alert"], "exp_alerts": [{
                "exp_labels": {"severity": "critical", "namespace": "network-operator",
                               "daemonset": "rdma-shared-dp-ds"},
                "exp_annotations": want}]}]}], annotations=True)
    assert r.returncode == 0, r.stdout + r.stderr



def _outcome(outcome: str) -> list[dict[str, str]]:
    return [{"series": f'fabricguard_canary_last_outcome{{pool="gh200-roce",outcome="{o}"}}',
             "values": f"{1 if o == outcome else 0}x30"}
            for o in ("passed", "degraded", "fallback", "failed", "unschedulable", "not-created", "skipped")]


@pytest.mark.parametrize(("outcome", "alert"), [
    ("unschedulable", "FabricguardCanaryUnschedulable"),
    ("not-created", "FabricguardCanaryNotCreated"),
    ("fallback", "FabricguardCanarySocketFallback"),
    ("failed", "FabricguardCanaryFailed"),
])
def test_canary_outcome_alerts(tmp_path: Path, outcome: str, alert: str) -> None:
    pool = {"severity": "critical", "pool": "gh200-roce", "outcome": outcome}
    _run(tmp_path, [
        {"interval": "1m", "input_series": _outcome(outcome), "alert_rule_test": [_alert(alert, "5m", [pool])]},
        {"interval": "1m", "input_series": _outcome("passed"), "alert_rule_test": [_alert(alert, "5m", [])]},
    ])


def test_skipped_for_an_hour(tmp_path: Path) -> None:
    series = [{"series": 'fabricguard_canary_last_outcome{pool="gh200-roce",outcome="skipped"}', "values": "1x90"}]
    _run(tmp_path, [{"interval": "1m", "input_series": series, "alert_rule_test": [
        _alert("FabricguardCanarySkippedTooLong", "30m", []),
        _alert("FabricguardCanarySkippedTooLong", "61m",
               [{"severity": "warning", "pool": "gh200-roce", "outcome": "skipped"}]),
    ]}])


def test_busbw_below_floor(tmp_path: Path) -> None:
    def series(bw: float) -> list[dict[str, str]]:
        return [{"series": 'fabricguard_canary_busbw_gbps{pool="gh200-roce",collective="all_reduce"}',
                 "values": f"{bw}x20"},
                {"series": 'fabricguard_canary_busbw_floor_gbps{pool="gh200-roce"}', "values": "36x20"}]
    labels = {"severity": "warning", "pool": "gh200-roce"}  # on(pool) keeps only the pool label
    _run(tmp_path, [
        {"interval": "1m", "input_series": series(20.5),
         "alert_rule_test": [_alert("FabricguardCanaryBusBwBelowFloor", "10m", [labels])]},
        {"interval": "1m", "input_series": series(41.0),
         "alert_rule_test": [_alert("FabricguardCanaryBusBwBelowFloor", "10m", [])]},
    ])


def test_no_recent_validation(tmp_path: Path) -> None:
    labels = {"severity": "warning", "pool": "gh200-roce"}
    interval = {"series": 'fabricguard_canary_interval_seconds{pool="gh200-roce"}', "values": "600x60"}
    _run(tmp_path, [
        # Last success at t=0, interval 10 min: stale after 20 min, alert after 10 more.
        {"interval": "1m", "input_series": [
            interval, {"series": 'fabricguard_canary_last_success_timestamp_seconds{pool="gh200-roce"}',
                       "values": "0x60"}],
         "alert_rule_test": [_alert("FabricguardNoRecentValidation", "25m", []),
                             _alert("FabricguardNoRecentValidation", "32m", [labels])]},
        # Never succeeded at all.
        {"interval": "1m", "input_series": [interval],
         "alert_rule_test": [_alert("FabricguardNoRecentValidation", "11m", [labels])]},
        # Succeeding every interval.
        {"interval": "10m", "input_series": [
            interval, {"series": 'fabricguard_canary_last_success_timestamp_seconds{pool="gh200-roce"}',
                       "values": "0+600x6"}],
         "alert_rule_test": [_alert("FabricguardNoRecentValidation", "50m", [])]},
    ])


def test_held_workloads_degraded_jobs_doctor_and_stalled_controller(tmp_path: Path) -> None:
    _run(tmp_path, [
        {"interval": "1m", "input_series": [
            {"series": 'fabricguard_admission_check_held_workload{namespace="research",workload="jobset-llm-1",'
                       'pool="gh200-roce"}', "values": "1x30"},
            {"series": 'fabricguard_job_verdicts_total{pool="gh200-roce",verdict="degraded",transport="socket"}',
             "values": "0 0 0 1 1 1 1 1 1 1"},
            {"series": 'fabricguard_job_verdicts_total{pool="gh200-roce",verdict="pass",transport="roce"}',
             "values": "0 1 2 3 4 5 6 7 8 9"},
            {"series": 'fabricguard_doctor_finding{rule="daemonset-never-ready",severity="critical",'
                       'kind="DaemonSet",namespace="network-operator",name="rdma-shared-dp-ds"}', "values": "1x30"},
            {"series": "fabricguard_reconcile_last_timestamp_seconds", "values": "0x30"},
        ], "alert_rule_test": [
            _alert("FabricguardWorkloadsHeld", "20m", [{"severity": "warning", "pool": "gh200-roce",
                                                        "namespace": "research", "workload": "jobset-llm-1"}]),
            _alert("FabricguardJobsFinishingDegraded", "5m",
                   [{"severity": "warning", "pool": "gh200-roce", "verdict": "degraded", "transport": "socket"}]),
            _alert("FabricguardDoctorCritical", "20m",
                   [{"severity": "critical", "rule": "daemonset-never-ready", "kind": "DaemonSet",
                     "namespace": "network-operator", "name": "rdma-shared-dp-ds"}]),
            _alert("FabricguardControllerNotReconciling", "12m", [{"severity": "warning"}]),
            _alert("FabricguardControllerNotReconciling", "4m", []),
        ]},
    ])


def test_jobs_not_followed_descriptors_short_and_verdicts_backlog(tmp_path: Path) -> None:
    # A burst of finished jobs that drains within minutes is not a backlog; one that stays 30 minutes is.
    _run(tmp_path, [
        {"interval": "1m", "input_series": [
            {"series": "fabricguard_job_verdicts_waiting", "values": "0 900 700 500 300 100 0x10 5x45"},
            {"series": "fabricguard_live_jobs_unfollowed", "values": "0 0 3x20"},
            {"series": "fabricguard_descriptor_shortages_total", "values": "0x5 4x30"},
            {"series": "fabricguard_controller_open_fds", "values": "100x30"},
            {"series": "fabricguard_controller_fd_limit", "values": "1048576x30"},
        ], "alert_rule_test": [
            _alert("FabricguardJobsNotFollowed", "4m", []),
            _alert("FabricguardJobsNotFollowed", "9m", [{"severity": "warning"}]),
            _alert("FabricguardDescriptorsShort", "3m", []),
            _alert("FabricguardDescriptorsShort", "7m", [{"severity": "warning"}]),
            _alert("FabricguardDescriptorsShort", "25m", []),
            _alert("FabricguardJobVerdictsBacklog", "10m", []),
            _alert("FabricguardJobVerdictsBacklog", "40m", []),
            _alert("FabricguardJobVerdictsBacklog", "50m", [{"severity": "warning"}]),
        ]},
    ])


def test_prometheus_rule_wraps_the_same_groups() -> None:
    pr = prometheus_rule(PROFILE_OBJ, "fg-system")
    assert pr["apiVersion"] == "monitoring.coreos.com/v1" and pr["kind"] == "PrometheusRule"
    assert pr["spec"] == rule_groups(PROFILE_OBJ)
    names = [r["alert"] for r in pr["spec"]["groups"][0]["rules"]]
    assert len(names) == len(set(names)) == 31  # + the down, breaker, webhook, taint-budget alerts (issue 24), verdicts backlog
    assert "FabricguardJobOnSockets" in names
