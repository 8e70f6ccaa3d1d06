"""A gate decision is fresh when written (issue 25, item 6 of "What to build").

A pass decides on its snapshot. Just before each Ready write, the pools that write admits on are checked again
against the cache as it is now: a fresh view, and no node of the pool turned FabricReady=False meanwhile. A
write that fails the check waits for the next pass. Workload check writes go out in parallel within
``WRITE_CONCURRENCY``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from controller_support import (
    CANARY_IMAGE,
    NOW,
    NS,
    WORKLOADS,
    WriteRecorder,
    admin_kubeconfig,
    agents_report,
    canary_passed,
    fabric_ready,
    live,
    plugin_fixed,
    until,
    workload,
)

from fabricguard import names
from fabricguard import objects as o
from fabricguard.controller.actions import ApplyStatus
from fabricguard.controller.kube import WRITE_CONCURRENCY, Cache, apply_actions
from fabricguard.controller.lustre import reconcile_reading_lustre
from fabricguard.controller.runner import RunConfig, connect, gate_freshness
from fabricguard.profile import load_profile


async def _validated(k8s: Any, kc: str, profile_path: Any, lustre: Any, extra: int) -> Any:
    plugin_fixed(k8s)
    agents_report(k8s, "True", "Ok", "ok")
    for i in range(extra):
        k8s.objects[WORKLOADS, "ml-training", f"queued-{i:03d}"] = workload(f"queued-{i:03d}")
    return await canary_passed(k8s, kc, profile_path, lustre)


async def _break_nodes_via_api(kc: str) -> None:
    """The agents report the fabric broken: status patches through the API, streamed to the nodes' watch."""
    import kr8s.asyncio

    api = await kr8s.asyncio.api(kubeconfig=admin_kubeconfig(kc))
    async with api.call_api("GET", version="v1", url="nodes") as resp:
        nodes = [n for n in resp.json()["items"] if n["metadata"]["name"].startswith("prd-gh200-")]
    for n in nodes:
        body = {"status": {"conditions": fabric_ready(n, "False", "RdmaLinkDown", "mlx5_0 port 1 DOWN")["status"]["conditions"]}}
        async with api.call_api("PATCH", version="v1", url=f"nodes/{n['metadata']['name']}/status",
                                headers={"Content-Type": "application/merge-patch+json"}, content=json.dumps(body)):
            pass


def _ready(k8s: Any) -> list[str]:
    out = []
    for wl in live(k8s, WORKLOADS):
        ours = next((c for c in wl["status"]["admissionChecks"] if c["name"] == "fabric-validated"), {})
        if ours.get("state") == "Ready":
            out.append(wl["metadata"]["name"])
    return out


async def test_a_ready_decision_is_not_written_once_the_pools_nodes_broke_during_the_pass(
        cluster, profile_path, lustre) -> None:
    k8s, kc = cluster
    at = await _validated(k8s, kc, profile_path, lustre, extra=20)
    cfg = RunConfig(load_profile(profile_path), image=CANARY_IMAGE, kubeconfig=kc, identity="solo",
                    lustre_root=lustre)
    kube = await connect(cfg)
    cache = Cache(kube, cfg.profile, NS)
    stop = asyncio.Event()
    cache.start(asyncio.Event(), stop)
    try:
        await until(lambda: cache.synced)
        snap = cache.snapshot()
        result = reconcile_reading_lustre(snap, cfg.profile, at, cfg.canary_config())
        admitting = [a for a in result.actions if isinstance(a, ApplyStatus) and a.admits]
        assert len(admitting) == 21  # the snapshot admits every queued Workload: written blind, all 21 go Ready
        # While the pass is about to write, the agents report the fabric broken; the watch brings it in.
        await _break_nodes_via_api(kc)
        await until(lambda: any(o.find_condition(n, "FabricReady")["status"] == "False"
                                 for n in cache.current("nodes") if o.name_of(n).startswith("prd-gh200-")))
        known = {(names.FV_PLURAL, o.name_of(fv)): fv for fv in snap.kind(names.FV_KIND)}
        errors = await apply_actions(kube, result.actions, known, fresh=gate_freshness(cache, cfg))
        assert _ready(k8s) == [], _ready(k8s)
        held = [e for e in errors if "not admitted" in e]
        assert len(held) == 21 and "FabricReady=False" in held[0], errors[:3]
        events = [e for e in live(k8s, "v1/events") if e.get("reason") == "FabricValidated"]
        assert events == []  # no Event says a Workload was admitted either
    finally:
        stop.set()
        await cache.close()
        await kube.close()


async def test_workload_writes_go_out_in_parallel_within_the_bound() -> None:
    from controller_support import PROFILE, admission_check

    from fabricguard.controller.canaries import PoolState
    from fabricguard.controller.gate import gate_workloads
    from fabricguard.profile import loads_profile

    prof = loads_profile(PROFILE)
    wls = [workload(f"queued-{i:03d}") for i in range(200)]
    states = {"gh200-roce": PoolState("gh200-roce", True, True, "passed", "pool gh200-roce: canary passed")}
    res = gate_workloads(prof, wls, [admission_check()], states, NOW)
    assert len(res.actions) == 400
    rec = WriteRecorder()
    t0 = time.monotonic()
    errors = await apply_actions(rec, res.actions, {}, fresh=lambda pools: "")  # type: ignore[arg-type]
    took = time.monotonic() - t0
    assert not errors
    assert rec.most == WRITE_CONCURRENCY, rec.most
    for i in range(200):  # each Workload's Event after its own status write
        assert rec.order.index(f"status queued-{i:03d}") < rec.order.index(f"event queued-{i:03d}")
    print(f"400 writes, {WRITE_CONCURRENCY} in flight: {took:.2f} s (one at a time: {400 * 0.01:.1f} s or more)")
    # And a fresh check that says no holds every admitting write and its Event.
    rec2 = WriteRecorder()
    errors = await apply_actions(rec2, res.actions, {}, fresh=lambda pools: "pool broke")  # type: ignore[arg-type]
    assert rec2.order == [] and len(errors) == 200
