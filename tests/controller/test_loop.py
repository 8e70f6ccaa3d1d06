"""The long-running loop: a watch event brings the next pass forward, an incremental one; /metrics serves what
the pass saw."""

from __future__ import annotations

import asyncio
import time

from controller_support import CANARY_IMAGE, WORKLOADS, admin_kubeconfig, live, workload

from fabricguard.controller.metrics import Metrics
from fabricguard.controller.runner import RunConfig, run_forever
from fabricguard.profile import load_profile


async def test_a_new_workload_is_handled_on_its_watch_event_not_at_resync(cluster, profile_path, lustre) -> None:
    k8s, kc = cluster
    cfg = RunConfig(load_profile(profile_path), image=CANARY_IMAGE, kubeconfig=kc, lustre_root=lustre, identity="solo", resync_s=3600,
                    lease_s=3, min_gap_s=0.2)
    stop = asyncio.Event()
    metrics = Metrics()
    loop = asyncio.create_task(run_forever(cfg, metrics, stop))
    try:
        for _ in range(100):  # the first pass, right after taking the Lease
            await asyncio.sleep(0.1)
            if metrics.last_pass._value.get():
                break
        assert metrics.last_pass._value.get() > 0
        # Kueue reserves quota for a new Workload: the watch, not the hour-long resync, brings the next pass.
        t0 = time.monotonic()
        await _create_via_api(admin_kubeconfig(kc), workload("jobset-late-arrival"))  # streamed to the open watch as ADDED
        state = None
        for _ in range(100):
            await asyncio.sleep(0.1)
            (late,) = [w for w in live(k8s, WORKLOADS) if w["metadata"]["name"] == "jobset-late-arrival"]
            state = next(c for c in late["status"]["admissionChecks"] if c["name"] == "fabric-validated")
            if state.get("message"):
                break
        assert state is not None and "no canary has finished yet" in state["message"]
        assert time.monotonic() - t0 < 10
        # That pass was incremental (the first was full): it decided the new Workload, not every rule again.
        for _ in range(100):
            if metrics.passes.labels("incremental")._value.get() >= 1:
                break
            await asyncio.sleep(0.1)
        assert metrics.passes.labels("full")._value.get() >= 1
        assert metrics.passes.labels("incremental")._value.get() >= 1
        text = metrics.exposition().decode()
        assert 'fabricguard_reconcile_passes_total{kind="incremental"}' in text
        assert "fabricguard_reconcile_reevaluated_objects" in text
        assert 'fabricguard_admission_check_pending_workloads{pool="gh200-roce"}' in text
        assert "fabricguard_controller_leader 1.0" in text
    finally:
        stop.set()
        await loop


async def _create_via_api(kc: str, wl: dict) -> None:
    import kr8s.asyncio

    api = await kr8s.asyncio.api(kubeconfig=kc)
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", **wl}
    async with api.call_api("POST", version="kueue.x-k8s.io/v1beta2", url="namespaces/ml-training/workloads",
                            json=body):
        pass
