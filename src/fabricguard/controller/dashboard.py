"""The Grafana dashboard: ``fabricguard render dashboard`` (schemaVersion 39 JSON, one Prometheus datasource).

Panels: canary outcomes per pool over time, all-reduce busbw against the floor, job verdicts by transport,
workloads held by the check, time since the last successful validation, and doctor findings.
"""

from __future__ import annotations

from typing import Any

from fabricguard.profile.model import PlatformProfile

DS = {"type": "prometheus", "uid": "${datasource}"}

PANELS: tuple[tuple[str, str, list[tuple[str, str]], str], ...] = (
    ("Canary outcome per pool", "state-timeline",
     [('max by (pool, outcome) (fabricguard_canary_last_outcome == 1)', "{{pool}} {{outcome}}")], "none"),
    ("All-reduce busbw vs floor (GB/s)", "timeseries",
     [('fabricguard_canary_busbw_gbps{collective="all_reduce"}', "{{pool}} busbw"),
      ("fabricguard_canary_busbw_floor_gbps", "{{pool}} floor")], "none"),
    ("Job verdicts by transport (per hour)", "timeseries",
     [("sum by (verdict, transport) (increase(fabricguard_job_verdicts_total[1h]))", "{{verdict}} {{transport}}")],
     "none"),
    ("Workloads held by fabric-validated", "timeseries",
     [("fabricguard_admission_check_pending_workloads", "{{pool}}")], "none"),
    ("Time since last successful validation", "stat",
     [("time() - fabricguard_canary_last_success_timestamp_seconds", "{{pool}}")], "s"),
    ("Doctor findings", "timeseries",
     [("sum by (rule, severity) (fabricguard_doctor_findings)", "{{severity}} {{rule}}")], "none"),
)


def dashboard(profile: PlatformProfile) -> dict[str, Any]:
    panels = []
    for i, (title, ptype, targets, unit) in enumerate(PANELS):
        panels.append({
            "id": i + 1,
            "type": ptype,
            "title": title,
            "datasource": DS,
            "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {},
            "targets": [{"refId": chr(ord("A") + j), "datasource": DS, "expr": expr, "legendFormat": legend}
                        for j, (expr, legend) in enumerate(targets)],
        })
    return {
        "uid": f"fabricguard-{profile.metadata.name}"[:40],
        "title": f"fabricguard: fabric validation ({profile.metadata.name})",
        "tags": ["fabricguard"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "1m",
        "time": {"from": "now-24h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
                                 "label": "Prometheus"}]},
        "annotations": {"list": []},
        "panels": panels,
    }
