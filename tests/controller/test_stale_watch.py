"""Never fail open on a stale view (issue 25, item 1), replayed against the test API server's faults
(``kube_support.Emulator.stall``: lists hang and watches go silent after their headers; ``expire_every_watch``:
a 410 storm; ``unaccepting_server``: connects that time out).

* A watch that gets its headers and then nothing ends (``TimedOut``) at its idle deadline; one whose connect
  times out leaves ``Kube.watch`` as ``TimedOut`` too, never as kr8s' ``APITimeoutError``.
* The informer never dies: it lists again with a jittered backoff, and the age of what it last heard grows.
* A pass that would admit on a view older than the bound holds instead, with the reason; the same snapshot
  with the bound lifted would have admitted (so the hold is the staleness check's doing). The age is a metric,
  fails ``/healthz``, and comes back fresh once the server heals.
* A 410 storm costs a bounded number of lists (client-go's backoff), not a busy loop.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from controller_support import (
    CANARY_IMAGE,
    NS,
    admin_kubeconfig,
    agents_report,
    canary_passed,
    gate_check,
    plugin_fixed,
    until,
    workload,
)

from fabricguard import objects as o
from fabricguard.controller.kube import Backoff, Cache, Informer, Read
from fabricguard.controller.lustre import reconcile_reading_lustre
from fabricguard.controller.metrics import Metrics
from fabricguard.controller.runner import RunConfig, connect, run_pass
from fabricguard.kube import Kube, TimedOut, Timeouts
from fabricguard.profile import load_profile
from kube_support import kubeconfig as shared_kubeconfig
from kube_support import unaccepting_server


async def _create_workload(kc: str, wl: dict[str, Any]) -> None:
    import kr8s.asyncio

    api = await kr8s.asyncio.api(kubeconfig=kc)
    async with api.call_api("POST", version="kueue.x-k8s.io/v1beta2", url="namespaces/ml-training/workloads",
                            json={"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", **wl}):
        pass


# ------------------------------------------------------------------------------------------ the edge


async def test_a_watch_silent_after_its_headers_ends_at_its_idle_deadline(cluster) -> None:
    k8s, kc = cluster
    k8s.stall("nodes")
    kube = await Kube.connect(kc)
    try:
        t0 = time.monotonic()
        with pytest.raises(TimedOut, match="went silent"):
            async for _ev in kube.watch("v1", "nodes", idle_s=0.5):
                pass
        assert time.monotonic() - t0 < 3.0
    finally:
        k8s.heal("nodes")
        await kube.close()


async def test_a_watch_whose_connect_times_out_is_a_typed_timeout(tmp_path: Path) -> None:
    with unaccepting_server() as url:
        kube = await Kube.connect(shared_kubeconfig(tmp_path, url), timeouts=Timeouts(connect=0.3, read=2.0))
        try:
            t0 = time.monotonic()
            with pytest.raises(TimedOut):  # kr8s raises APITimeoutError here; the edge types it
                async for _ev in kube.watch("v1", "nodes"):
                    pass
            assert time.monotonic() - t0 < 3.0
        finally:
            await kube.close()


def test_the_backoff_doubles_with_jitter_and_resets_after_a_healthy_stretch() -> None:
    import random

    b = Backoff(rng=random.Random(7))
    waits = [b.next(0.01) for _ in range(8)]
    for i, w in enumerate(waits):
        base = min(30.0, 0.8 * 2 ** i)
        assert base <= w < 2 * base, (i, w)
    assert len({round(w / min(30.0, 0.8 * 2 ** i), 3) for i, w in enumerate(waits)}) > 1  # jittered
    assert b.next(500.0) < 1.6  # a healthy stretch starts over


# ------------------------------------------------------------------------------------------ the cache


async def test_an_informer_outlives_a_connect_timeout_and_keeps_retrying(tmp_path: Path, profile_path) -> None:
    with unaccepting_server() as url:
        cfg = RunConfig(load_profile(profile_path), kubeconfig=shared_kubeconfig(tmp_path, url), identity="solo")
        kube = await Kube.connect(cfg.kubeconfig, timeouts=Timeouts(connect=0.2, read=0.3, call=0.4, list=0.5))
        cache = Cache(kube, cfg.profile, NS)
        for i in cache.informers:
            i.backoff = Backoff(initial_s=0.05, cap_s=0.1)
        wake, stop = asyncio.Event(), asyncio.Event()
        cache.start(wake, stop, idle_s=0.5)
        try:
            await asyncio.sleep(2.0)
            assert not any(t.done() for t in cache.tasks), [t for t in cache.tasks if t.done()]
            assert all(i.error is not None for i in cache.informers)  # the pass fails loudly, it does not wait
            assert not cache.synced
        finally:
            stop.set()
            await cache.close()
            await kube.close()


async def _cache(kc: str, profile_path: Any, idle_s: float = 1.0) -> tuple[Cache, asyncio.Event]:
    cfg = RunConfig(load_profile(profile_path), image=CANARY_IMAGE, kubeconfig=kc, identity="solo")
    kube = await Kube.connect(kc, timeouts=Timeouts(connect=1.0, read=2.0, call=3.0, list=20.0),
                              permissions=(await connect(cfg)).permissions)
    cache = Cache(kube, cfg.profile, NS)
    for i in cache.informers:
        i.backoff = Backoff(initial_s=0.05, cap_s=0.2)
    stop = asyncio.Event()
    cache.start(asyncio.Event(), stop, idle_s=idle_s)
    await until(lambda: cache.synced)
    return cache, stop


async def _validated_pool(k8s: Any, kc: str, profile_path: Path, lustre: Path) -> Any:
    """The incident fixed, the agents saying FabricReady=True, a canary that passed: the pool admits."""
    plugin_fixed(k8s)
    agents_report(k8s, "True", "FabricVerified")
    return await canary_passed(k8s, kc, profile_path, lustre)


BOUND_S = 3.0


async def test_a_nodes_watch_stall_after_the_pool_breaks_admits_nothing(cluster, profile_path, lustre) -> None:
    k8s, kc = cluster
    k8s.bookmark_s = 0.2  # a live server's quiet watches hear a bookmark now and then; a stalled one does not
    at = await _validated_pool(k8s, kc, profile_path, lustre)
    cache, stop = await _cache(kc, profile_path)
    metrics = Metrics()
    metrics.watch_cache(cache.ages, BOUND_S)
    cfg = RunConfig(load_profile(profile_path), image=CANARY_IMAGE, kubeconfig=kc, identity="solo",
                    lustre_root=lustre, stale_s=BOUND_S)
    nodes = next(i for i in cache.informers if i.read.plural == "nodes")
    try:
        await until(lambda: metrics.health()[0], 20.0)  # every read heard within the bound (a bookmark at least)
        # The nodes' watch stalls (an API server host gone behind the load balancer); behind it, the fabric breaks
        # and the agents say so. Workloads keep arriving on their own, healthy watch.
        k8s.stall("nodes")
        agents_report(k8s, "False", "RdmaLinkDown")
        await _create_workload(admin_kubeconfig(kc), workload("jobset-after-break"))
        await until(lambda: any(w["metadata"]["name"] == "jobset-after-break"
                                 for w in cache.snapshot().kind("Workload")))
        await until(lambda: (nodes.age() or 0) > BOUND_S + 0.5)
        lists = nodes.lists
        assert "went silent" in nodes.problem  # the silent watch ended; its relist hangs on the stalled server
        assert not any(t.done() for t in cache.tasks)

        snap = cache.snapshot()
        assert all(o.find_condition(n, "FabricReady")["status"] == "True"
                   for n in snap.nodes if n["metadata"]["name"].startswith("prd-gh200-"))  # what it last heard
        # Without the staleness check this very snapshot admits: the pool looks validated.
        would = reconcile_reading_lustre(snap, cfg.profile, at, cfg.canary_config())
        assert would.pools["gh200-roce"].ready

        rep = await run_pass(cfg, at, kube=cache.informers[0].kube, cache=cache)
        assert "stale" in rep.result.stale and "nodes.v1" in rep.result.stale
        for name in ("jobset-llama-ft-3b1c2", "jobset-after-break"):
            c = gate_check(k8s, name)
            assert c["state"] == "Pending" and "the controller's view is stale" in c["message"], c
        ok, why = metrics.health()
        assert not ok and "nodes.v1" in why, why
        text = metrics.exposition().decode()
        assert 'fabricguard_controller_cache_age_seconds{read="nodes.v1"}' in text
        assert "fabricguard_controller_cache_stale_reads 1.0" in text

        # Healed: the informer lists again, hears the break, and the gate holds for the real reason.
        k8s.heal("nodes")
        await until(lambda: nodes.lists > lists and (nodes.age() or 9) < BOUND_S)
        assert metrics.health()[0]
        rep = await run_pass(cfg, at, kube=cache.informers[0].kube, cache=cache)
        assert rep.result.stale == ""
        c = gate_check(k8s, "jobset-after-break")
        assert c["state"] == "Retry" and "FabricReady=False" in c["message"], c
    finally:
        k8s.heal("nodes")
        stop.set()
        await cache.close()


async def test_a_fresh_view_still_admits(cluster, profile_path, lustre) -> None:
    """The control: the same pool, no stall, the same bound: Ready (the hold above is the stall's)."""
    k8s, kc = cluster
    k8s.bookmark_s = 0.2
    at = await _validated_pool(k8s, kc, profile_path, lustre)
    cache, stop = await _cache(kc, profile_path)
    cfg = RunConfig(load_profile(profile_path), image=CANARY_IMAGE, kubeconfig=kc, identity="solo",
                    lustre_root=lustre, stale_s=BOUND_S)
    try:
        await until(lambda: not cache.stale(BOUND_S), 20.0)
        rep = await run_pass(cfg, at, kube=cache.informers[0].kube, cache=cache)
        assert rep.result.stale == ""
        assert gate_check(k8s, "jobset-llama-ft-3b1c2")["state"] == "Ready"
    finally:
        stop.set()
        await cache.close()


# ------------------------------------------------------------------------------------------ 410 storm

STORM_S = 6.0
# Each read's lists in a storm of STORM_S seconds: the first list, then one per backoff (0.8 s doubling, jitter
# up to 2x): at most 1 + log2(STORM_S / 0.8) + 1 = 5. The code before this bound made hundreds.
MAX_LISTS_PER_READ = 5


async def test_a_410_storm_on_one_read_stays_under_its_request_rate(cluster) -> None:
    """One informer alone (so the emulator's own speed does not pace it): the lists it makes in a storm."""
    k8s, kc = cluster
    inf = Informer(await Kube.connect(kc), Read("v1", "nodes", "Node"))
    stop = asyncio.Event()
    task = asyncio.create_task(inf.run(asyncio.Event(), stop))
    try:
        await until(lambda: inf.watches >= 1)
        k8s.expire_every_watch = True
        k8s.end_watches()
        t0, lists0 = time.monotonic(), inf.lists
        await asyncio.sleep(STORM_S)
        lists = inf.lists - lists0
        assert not task.done()
    finally:
        stop.set()
        await task
        await inf.kube.close()
    assert len(k8s.expired) >= 2  # the storm went on: each re-watch was refused
    assert 2 <= lists <= MAX_LISTS_PER_READ, lists
    print(f"410 storm on one read: {lists} lists in {time.monotonic() - t0:.1f} s")


@pytest.mark.slow
async def test_a_410_storm_stays_under_its_request_rate(cluster, profile_path) -> None:
    k8s, kc = cluster
    cfg = RunConfig(load_profile(profile_path), image=CANARY_IMAGE, kubeconfig=kc, identity="solo")
    cache = Cache(await connect(cfg), cfg.profile, NS)
    stop = asyncio.Event()
    cache.start(asyncio.Event(), stop)
    try:
        await until(lambda: cache.synced and all(i.watches for i in cache.informers if i.note is None), 60.0)
        # The storm: the open watches end, and every watch from now on is answered 410 Gone.
        k8s.expire_every_watch = True
        lists0 = {i.read.key: i.lists for i in cache.informers}
        k8s.end_watches()
        await asyncio.sleep(STORM_S)
        assert not any(t.done() for t in cache.tasks)
        lists = {i.read.key: i.lists - lists0[i.read.key] for i in cache.informers if i.note is None}
    finally:
        stop.set()
        await cache.close()
    stormed = {e.split("@")[0] for e in k8s.expired}
    assert len(stormed) >= len(lists) - 1, (stormed, lists)  # the storm reached (nearly) every read's watch
    worst = max(lists.values())
    assert worst <= MAX_LISTS_PER_READ, lists
    rate = sum(lists.values()) / STORM_S
    print(f"410 storm: {sum(lists.values())} lists from {len(lists)} reads in {STORM_S:.0f} s ({rate:.1f}/s, "
          f"at most {worst} per read; bound {MAX_LISTS_PER_READ} per read)")


# ------------------------------------------------------------------------------------------ the alert


@pytest.mark.external
def test_the_staleness_alert_fires_on_a_read_gone_quiet_and_not_on_bookmarked_ones(tmp_path: Path) -> None:
    from controller_support import PROFILE
    from promtool_support import run_promtool_tests

    from fabricguard.controller.alerts import rule_groups
    from fabricguard.profile import loads_profile

    target = 'job="fabricguard-controller",instance="10.0.0.9:8080"'
    series = [
        # nodes: heard at t=0, then nothing (the stalled watch): the age grows a minute per minute.
        {"series": f'fabricguard_controller_cache_age_seconds{{{target},read="nodes.v1"}}', "values": "0+60x10"},
        # workloads: a bookmark about once a minute keeps it young.
        {"series": f'fabricguard_controller_cache_age_seconds{{{target},read="workloads.kueue.x-k8s.io/v1beta2"}}',
         "values": "10 50 20 55 5 40 30 58 12 44 20"},
        {"series": f"fabricguard_controller_cache_stale_bound_seconds{{{target}}}", "values": "150x10"},
    ]
    healthy = [series[1], series[2]]
    labels = {"severity": "critical", "job": "fabricguard-controller", "instance": "10.0.0.9:8080"}
    r = run_promtool_tests(tmp_path, rule_groups(loads_profile(PROFILE)), [
        {"interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": "1m", "alertname": "FabricguardControllerCacheStale", "exp_alerts": []},
            {"eval_time": "3m", "alertname": "FabricguardControllerCacheStale", "exp_alerts": [{"exp_labels": labels}]},
        ]},
        {"interval": "1m", "input_series": healthy, "alert_rule_test": [
            {"eval_time": t, "alertname": "FabricguardControllerCacheStale", "exp_alerts": []}
            for t in ("2m", "5m", "9m")]},
    ])
    assert r.returncode == 0, r.stdout + r.stderr
