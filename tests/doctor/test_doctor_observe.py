"""``enforce-would-have-acted``: the day of an observing pool, read from Workloads and Nodes as the API server keeps
them (an Event would be gone after an hour)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from fabricguard import names, times
from fabricguard.doctor.model import Severity
from fabricguard.doctor.rules.observe import RULE, enforce_would_have_acted, would_have
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile import load_profile, loads_profile
from kube_support import ROOT

GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
NODE = ROOT / "tests" / "agent" / "fixtures" / "healthy-a3-ultra" / "node.json"
NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


def ago(hours: float) -> str:
    return times.format_time(NOW - timedelta(hours=hours))


def node(name: str, status: str | None, changed_h: float) -> dict[str, Any]:
    n = json.loads(NODE.read_text())
    n["metadata"]["name"] = name
    if status is not None:
        n["status"]["conditions"].append({"type": names.FABRIC_READY, "status": status, "reason": "r", "message": "m",
                                          "lastTransitionTime": ago(changed_h), "lastHeartbeatTime": ago(0)})
    return {"apiVersion": "v1", "kind": "Node", **n}


def workload(name: str, hours: float, message: str, flavor: str = "h200-rdma") -> dict[str, Any]:
    return {"apiVersion": names.KUEUE_API, "kind": "Workload", "metadata": {"name": name, "namespace": "ml-search"},
            "status": {"admission": {"clusterQueue": "h200", "podSetAssignments": [
                {"name": "workers", "flavors": {"nvidia.com/gpu": flavor}}]},
                "admissionChecks": [{"name": "fabric-validated", "state": "Ready", "message": message,
                                     "lastTransitionTime": ago(hours)}]}}


HOLD = names.OBSERVE_HOLD_PREFIX + "held: pool h200-rdma canary failed at 10:02"


def test_the_day_of_an_observing_pool() -> None:
    objs = [node("bad-now", "False", 3), node("recovered", "True", 2), node("fine", "True", 72),
            node("no-agent", None, 0), workload("held-5h", 5, HOLD), workload("held-2d", 49, HOLD),
            workload("validated", 1, "fabricguard: validated by canary at 10:02")]
    (f,) = enforce_would_have_acted(Snapshot(objects=objs), load_profile(GKE), NOW)
    assert f.rule == RULE and f.severity is Severity.info and f.pools == ["h200-rdma"]
    assert f.message.startswith("enforce would have held 1 workload(s) and tainted 2 node(s) of pool h200-rdma in "
                                "the last 24 h (1 node(s) still not FabricReady)")
    assert {o.name for o in f.objects} == {"bad-now", "recovered", "held-5h"}


def test_a_pool_that_enforces_is_not_reported_and_a_quiet_day_says_nothing() -> None:
    enforcing = loads_profile(GKE.read_text().replace(
        "    nodeSelector: {cloud.google.com/gke-nodepool: a3u-pool-1}",
        "    nodeSelector: {cloud.google.com/gke-nodepool: a3u-pool-1}\n    mode: enforce"))
    assert would_have(enforcing, [node("bad-now", "False", 3)], [], NOW) == {}
    # ... unless its Workloads say it observed (the pool moved to enforce within the day): those are listed
    got = would_have(enforcing, [node("bad-now", "False", 3)], [workload("held-5h", 5, HOLD)], NOW)
    assert [r for r, _ in got["h200-rdma"].held] == ["ml-search/held-5h"]
    assert enforce_would_have_acted(Snapshot(objects=[node("fine", "True", 72)]), load_profile(GKE), NOW) == []
