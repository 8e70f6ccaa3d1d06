"""The watch-fed cache against an API server that compacted its history: a watch from a version the server no
longer holds gets 410 Gone (reason ``Expired``), the cache lists again, and what changed in the gap (a new
Workload, a deleted one) reaches the pass."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from controller_support import (
    CANARY_IMAGE,
    FVS,
    NOW,
    NS,
    ROCE_LOGS,
    WORKLOADS,
    admin_kubeconfig,
    canaries,
    jobset_created,
    jobset_finishes,
    live,
    pods_run,
    ranks_wrote,
    until,
    workload,
)

from fabricguard.controller.kube import Cache
from fabricguard.controller.metrics import Metrics
from fabricguard.controller.runner import RunConfig, connect, run_forever, run_pass
from fabricguard.profile import load_profile


async def _api(kc: str, method: str, url: str, body: dict[str, Any] | None = None) -> None:
    import kr8s.asyncio

    api = await kr8s.asyncio.api(kubeconfig=kc)
    async with api.call_api(method, version="kueue.x-k8s.io/v1beta2", url=url, json=body):
        pass



def _check_message(k8s: Any, name: str) -> str:
    wl = [w for w in live(k8s, WORKLOADS) if w["metadata"]["name"] == name]
    if not wl:
        return ""
    checks = (wl[0].get("status") or {}).get("admissionChecks") or []
    return next((c.get("message") or "" for c in checks if c["name"] == "fabric-validated"), "")


@pytest.mark.parametrize("expire_as", ["event", "http"])
async def test_the_running_controller_relists_after_410_and_acts_on_a_change_made_in_the_gap(
        cluster, profile_path, lustre, expire_as) -> None:
    k8s, kc = cluster
    k8s.expire_as = expire_as
    cfg = RunConfig(load_profile(profile_path), image=CANARY_IMAGE, kubeconfig=kc, lustre_root=lustre,
                    identity="solo", resync_s=3600, lease_s=3, min_gap_s=0.2)
    stop = asyncio.Event()
    metrics = Metrics()
    loop = asyncio.create_task(run_forever(cfg, metrics, stop))
    try:
        await until(lambda: metrics.last_pass._value.get() > 0)
        # The watches end (an apiserver restart); while they are away a Workload arrives and etcd compacts.
        k8s.hold_watches()
        k8s.end_watches()
        await _api(admin_kubeconfig(kc), "POST", "namespaces/ml-training/workloads",
                   {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", **workload("jobset-in-the-gap")})
        k8s.compact()
        k8s.release_watches()
        await until(lambda: "no canary has finished yet" in _check_message(k8s, "jobset-in-the-gap"))
        # It came through the relist: the re-watch from the compacted version was refused.
        assert any("/workloads@" in e for e in k8s.expired), k8s.expired
    finally:
        stop.set()
        await loop


async def _cache(kc: str, profile_path: Any) -> tuple[Cache, asyncio.Event, asyncio.Event]:
    cfg = RunConfig(load_profile(profile_path), image=CANARY_IMAGE, kubeconfig=kc, identity="solo")
    cache = Cache(await connect(cfg), cfg.profile, NS)
    wake, stop = asyncio.Event(), asyncio.Event()
    cache.start(wake, stop)
    await until(lambda: cache.synced)
    return cache, wake, stop


def _workload_informer(cache: Cache) -> Any:
    return next(i for i in cache.informers if i.read.plural == "workloads")


@pytest.mark.parametrize("compacted", [True, False])
async def test_the_cache_does_not_serve_an_object_deleted_in_the_gap(cluster, profile_path, compacted) -> None:
    k8s, kc = cluster
    cache, _wake, stop = await _cache(kc, profile_path)
    try:
        inf = _workload_informer(cache)
        names = {w["metadata"]["name"] for w in cache.snapshot().kind("Workload")}
        assert "jobset-llama-ft-3b1c2" in names
        k8s.hold_watches()
        k8s.end_watches()
        await _api(admin_kubeconfig(kc), "DELETE", "namespaces/ml-training/workloads/jobset-llama-ft-3b1c2")
        if compacted:
            k8s.compact()
        k8s.release_watches()
        await until(lambda: all(w["metadata"]["name"] != "jobset-llama-ft-3b1c2"
                                 for w in cache.snapshot().kind("Workload")))
        if compacted:  # the deletion is not in the history any more: only the relist can remove it
            assert inf.lists == 2 and any("/workloads@" in e for e in k8s.expired)
        else:  # the server still holds it: the re-watch streams the DELETED, no relist
            assert inf.lists == 1 and not k8s.expired
    finally:
        stop.set()
        await cache.close()


def _held(cache: Cache) -> list[tuple[str, dict[str, Any], str]]:
    return [(f"{i.read.key} {k}", obj, json.dumps(obj, sort_keys=True))
            for i in cache.informers for k, obj in i.items.items()]


async def test_a_pass_never_mutates_the_cached_objects_it_shares(cluster, profile_path, lustre) -> None:
    """The snapshot hands the pass the cached objects themselves (no copy): a pass that edited one would
    change what the next pass reads. Two passes (a canary started; then that canary finished with its logs,
    judged and recorded, the Workload's check set) must leave every cached object byte-for-byte as it was."""
    k8s, kc = cluster
    cfg = RunConfig(load_profile(profile_path), image=CANARY_IMAGE, kubeconfig=kc, lustre_root=lustre,
                    identity="solo")
    for step, at in enumerate((NOW, NOW + timedelta(minutes=3, seconds=30))):
        if step == 1:  # the canary the first pass created ran and finished
            (js,) = canaries(k8s)
            js = jobset_created(k8s, js, NOW)
            pods_run(k8s, js, ["prd-gh200-02", "prd-gh200-03"], phase="Succeeded")
            ranks_wrote(lustre, js, ROCE_LOGS, busbw=44.0)
            jobset_finishes(k8s, js, NOW + timedelta(minutes=3))
        cache, _wake, stop = await _cache(kc, profile_path)
        try:
            held = _held(cache)
            snap = cache.snapshot()
            assert {id(o) for o in snap.objects} <= {id(obj) for _k, obj, _t in held}  # shared, not copied
            rep = await run_pass(cfg, at, kube=cache.informers[0].kube, cache=cache)
            assert not rep.errors, rep.errors
            assert rep.result.actions, "the pass had nothing to do: it would prove nothing"
            changed = [k for k, obj, before in held if json.dumps(obj, sort_keys=True) != before]
            assert not changed, changed[:5]
        finally:
            stop.set()
            await cache.close()
    (fv,) = live(k8s, FVS)
    assert fv["status"]["runs"][0]["outcome"] == "passed"  # the second pass judged the finished canary
