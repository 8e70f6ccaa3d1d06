"""The cache keeps only what is read: trimmed objects are judged exactly as the API server's full objects are.

Every example snapshot (healthy, the 271-day incident, DRA) is judged by the doctor twice, as stored and
trimmed; the findings must be the same. A pod and a node as the API server stores them (managed fields and all,
bench/controller/realistic.py) shrink to what the rules read.
"""

from __future__ import annotations

import copy
import json
import sys
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fabricguard.controller.trim import trim
from fabricguard.doctor.engine import run_doctor
from fabricguard.doctor.snapshot import Snapshot, load_snapshot
from fabricguard.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "controller"))
import realistic  # noqa: E402

SNAPSHOTS = sorted(p.parent for p in (ROOT / "examples" / "snapshots").rglob("profile.yaml"))
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def _findings(snap: Snapshot, profile) -> list[dict]:  # type: ignore[no-untyped-def]
    return [f.to_dict() for f in run_doctor(snap, profile, NOW, with_visuals=False).findings]


@pytest.mark.parametrize("where", SNAPSHOTS, ids=lambda p: str(p.relative_to(ROOT / "examples" / "snapshots")))
def test_the_doctor_judges_trimmed_objects_as_it_judges_stored_ones(where: Path) -> None:
    profile = load_profile(where / "profile.yaml")
    stored = load_snapshot(where)
    # The example objects with what the API server adds on top (managed fields, kubectl's copy), then trimmed.
    grown = []
    for obj in copy.deepcopy(stored.objects):
        meta = obj.setdefault("metadata", {})
        meta["managedFields"] = realistic.managed_fields([("kubelet", "Update", "status", obj.get("status") or {})])
        grown.append(obj)
    trimmed = Snapshot(objects=[trim(o, o.get("kind", "")) for o in copy.deepcopy(grown)], notes=list(stored.notes),
                       source=stored.source)
    want = _findings(stored, profile)
    assert _findings(Snapshot(objects=grown, notes=list(stored.notes), source=stored.source), profile) == want
    assert _findings(trimmed, profile) == want
    assert not any("managedFields" in (o.get("metadata") or {}) for o in trimmed.objects)


def _kib(objs: list[dict]) -> float:
    tracemalloc.start()
    kept = [json.loads(json.dumps(o)) for o in objs]
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return size / len(objs) / 1024


def test_a_stored_pod_and_node_shrink_to_what_the_rules_read() -> None:
    pod, node = realistic.pod(7, "gke-h200-h200-rdma-00007"), realistic.node(7)
    slim_pod, slim_node = trim(copy.deepcopy(pod), "Pod"), trim(copy.deepcopy(node), "Node")
    assert _kib([slim_pod]) * 4 < _kib([pod]) and _kib([slim_node]) * 2 < _kib([node])
    # What the passes read stays.
    assert slim_pod["metadata"]["labels"] == pod["metadata"]["labels"]
    assert slim_pod["metadata"]["annotations"] == pod["metadata"]["annotations"]
    assert slim_pod["metadata"]["ownerReferences"] == pod["metadata"]["ownerReferences"]
    assert slim_pod["spec"]["nodeName"] == pod["spec"]["nodeName"]
    assert [(c["name"], c["image"], c["resources"]) for c in slim_pod["spec"]["containers"]] == [
        (c["name"], c["image"], c["resources"]) for c in pod["spec"]["containers"]]
    assert slim_pod["status"]["phase"] == "Running"
    assert slim_pod["status"]["containerStatuses"][0]["imageID"] == pod["status"]["containerStatuses"][0]["imageID"]
    assert slim_node["metadata"]["labels"] == node["metadata"]["labels"]
    assert slim_node["status"]["conditions"] == node["status"]["conditions"]
    assert slim_node["status"]["allocatable"] == node["status"]["allocatable"]
    assert slim_node["spec"]["taints"] == node["spec"]["taints"]
    assert "images" not in slim_node["status"]


def test_what_the_live_join_reads_survives_the_trim() -> None:
    """controller/suspects.job_pods joins a rank's host and RAS's IPs to the pod: those fields are kept."""
    from fabricguard.controller.trim import trim

    pod = {"metadata": {"name": "p", "managedFields": [{}]},
           "spec": {"hostname": "llm-workers-0-1", "subdomain": "llm", "nodeName": "n1", "hostNetwork": False,
                    "containers": [{"name": "c", "env": [{"name": "X"}]}]},
           "status": {"podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}], "hostIP": "10.1.0.1", "qosClass": "X"}}
    t = trim(pod, "Pod")
    assert t["spec"]["hostname"] == "llm-workers-0-1" and t["status"]["podIPs"] == [{"ip": "10.0.0.5"}]
    assert t["status"]["podIP"] == "10.0.0.5" and t["status"]["hostIP"] == "10.1.0.1"
    assert "managedFields" not in t["metadata"] and "env" not in t["spec"]["containers"][0]
