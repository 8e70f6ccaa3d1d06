"""The safety rules a mutation run found untested (issue 29 §7), each pinned at its boundary:
a mixed transport is a fallback (told, and stopped with ``onFallback: stop``); exactly half of a pool's reporting
nodes ``FabricReady=False`` holds it; a Workload on a broken pool and a merely pending one is sent back (Retry,
its quota released), not kept waiting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller_support import NOW, PROFILE

from fabricguard import names
from fabricguard.controller.canaries import PoolState
from fabricguard.controller.facts import RunningJob
from fabricguard.controller.gate import decide
from fabricguard.controller.live import Observation, live_actions
from fabricguard.controller.rootcause import broken_nodes
from fabricguard.fabrics import Transport
from fabricguard.nccl.follow import LiveVerdict
from fabricguard.nccl.report import NcclReport
from fabricguard.profile import loads_profile

POOL = "gh200-roce"


def _job() -> RunningJob:
    obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
           "metadata": {"name": "j", "namespace": "ml", "uid": "u",
                        "labels": {names.LABEL_MANAGED: "true", names.LABEL_POOL: POOL}}, "spec": {}}
    return RunningJob("JobSet", "jobset.x-k8s.io/v1alpha2", "jobsets", "ml", "j", POOL, obj)


def test_a_mixed_transport_is_a_fallback_and_is_stopped(tmp_path: Path) -> None:
    prof = loads_profile(PROFILE.replace("    canary:", "    onFallback: stop\n    canary:"))
    ob = Observation(_job(), LiveVerdict(Transport.mixed, True, NcclReport()))
    annotate, told, stop, stopped = live_actions(prof, ob, None, [], NOW)
    assert annotate.annotations[names.ANN_TRANSPORT] == "mixed"
    assert told.body["reason"] == "FabricFallback" and told.body["type"] == "Warning"
    assert stop.body == {"spec": {"suspend": True}} and stopped.body["reason"] == "FabricFallbackStopped"
    quiet = live_actions(loads_profile(PROFILE), Observation(_job(), LiveVerdict(Transport.roce, True,
                                                                                 NcclReport())), None, [], NOW)
    assert [a.body["reason"] for a in quiet if hasattr(a, "body") and "reason" in a.body] == ["FabricTransport"]


def _node(name: str, status: str | None) -> dict[str, Any]:
    conds = [{"type": names.FABRIC_READY, "status": status, "reason": "ChecksFailed" if status == "False" else "Ok",
              "message": "x"}] if status else []
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-GH200-480GB"}},
            "status": {"conditions": conds}}


def test_exactly_half_of_the_pool_not_ready_holds_it() -> None:
    pool = loads_profile(PROFILE).pool(POOL)
    half = [_node("a", "False"), _node("b", "False"), _node("c", "True"), _node("d", "True")]
    assert pool.matches(half[0])
    assert "2 of the pool's 4 reporting node(s)" in broken_nodes(pool, half, canary_nodes=2)
    under = [*half[:1], _node("b", "True"), *half[2:]]
    assert broken_nodes(pool, under, canary_nodes=2) == ""  # one of four, three good: enough for a canary
    assert broken_nodes(pool, under, canary_nodes=4) != ""  # ... unless the canary needs every node


def test_a_workload_on_a_broken_and_a_pending_pool_is_sent_back() -> None:
    def state(pool: str, *, broken: bool) -> PoolState:
        return PoolState(pool, True, False, "fallback" if broken else None, "m", broken=broken, interval_s=600)

    wl = {"status": {"admission": {"podSetAssignments": [{"flavors": {"nvidia.com/gpu": "fa"}},
                                                         {"flavors": {"nvidia.com/gpu": "fb"}}]}}}
    states = {"a": state("a", broken=True), "b": state("b", broken=False)}
    got, _msg, pools = decide(wl, {"fa": "a", "fb": "b"}, states)
    assert got == "Retry" and pools == ["a", "b"]
    got, _msg, _ = decide(wl, {"fa": "a", "fb": "b"}, {"a": state("a", broken=False), "b": states["b"]})
    assert got == "Pending"  # only not yet proven: keep the quota
