"""A silent fallback, a recovery and a restart mid-canary, replayed on kmock over real HTTP with ``--now``."""

from __future__ import annotations

from datetime import timedelta

from controller_support import (
    CANARY_NODES,
    FVS,
    NOW,
    ROCE_LOGS,
    SOCKET_LOGS,
    canaries,
    canary_started,
    gate_check,
    jobset_finishes,
    live,
    plugin_fixed,
    ranks_wrote,
    run_once,
)


def _posts(k8s, plural: str) -> int:
    return sum(1 for r in list(k8s) if r.method.value.upper() == "POST" and r.url.path.endswith(f"/{plural}"))


async def test_silent_fallback_is_caught_and_holds_workloads(cluster, profile_path, lustre) -> None:
    k8s, kc = cluster
    js = await canary_started(k8s, kc, profile_path, lustre, NOW)
    # The ranks ran, and NCCL quietly chose sockets: the job "succeeded".
    ranks_wrote(lustre, js, SOCKET_LOGS, busbw=4.1)
    jobset_finishes(k8s, js, NOW + timedelta(minutes=3))
    rc, doc = await run_once(kc, profile_path, NOW + timedelta(minutes=3, seconds=30), lustre)
    assert rc == 1
    pool = doc["pools"]["gh200-roce"]
    assert pool["outcome"] == "fallback", pool
    assert "TCP sockets" in pool["message"] and pool["heldWorkloads"] == 1
    (fv,) = live(k8s, FVS)
    run = fv["status"]["runs"][0]
    assert run["transport"] == "socket" and run["nodes"] == CANARY_NODES
    assert any("NET/Socket" in e for e in run["evidence"]), run["evidence"]
    # Known broken: Retry releases the Workload's quota (requeued after one canary interval), see docs/controller.md.
    assert gate_check(k8s)["state"] == "Retry" and "fallback" in gate_check(k8s)["message"]
    assert gate_check(k8s)["requeueAfterSeconds"] == 600
    # The record came first: the JobSet is deleted by the next pass, which reads the outcome back from the status.
    assert [c["metadata"]["name"] for c in canaries(k8s)] == [js["metadata"]["name"]]
    await run_once(kc, profile_path, NOW + timedelta(minutes=3, seconds=40), lustre)
    assert canaries(k8s) == []
    (fv,) = live(k8s, FVS)
    assert [r["outcome"] for r in fv["status"]["runs"]] == ["fallback"]


async def test_recovery_passes_and_releases_the_workload(cluster, profile_path, lustre) -> None:
    k8s, kc = cluster
    js = await canary_started(k8s, kc, profile_path, lustre, NOW)
    ranks_wrote(lustre, js, SOCKET_LOGS, busbw=4.1)
    jobset_finishes(k8s, js, NOW + timedelta(minutes=3))
    await run_once(kc, profile_path, NOW + timedelta(minutes=4), lustre)
    assert gate_check(k8s)["state"] == "Retry"

    # The plugin is fixed; the next canary, one interval later, runs over RoCE at 40 GB/s (floor 36).
    plugin_fixed(k8s)
    t = NOW + timedelta(minutes=10)
    js2 = await canary_started(k8s, kc, profile_path, lustre, t)
    assert js2["metadata"]["name"] != js["metadata"]["name"]
    ranks_wrote(lustre, js2, ROCE_LOGS, busbw=40.0)
    jobset_finishes(k8s, js2, t + timedelta(minutes=2))
    rc, doc = await run_once(kc, profile_path, t + timedelta(minutes=3), lustre)
    pool = doc["pools"]["gh200-roce"]
    assert pool["outcome"] == "passed" and pool["ready"] is True, pool
    assert pool["heldWorkloads"] == 0
    check = gate_check(k8s)
    assert check["state"] == "Ready" and "passed" in check["message"]
    (fv,) = live(k8s, FVS)
    assert [r["outcome"] for r in fv["status"]["runs"]] == ["passed", "fallback"]
    assert fv["status"]["lastSuccess"] == fv["status"]["runs"][0]["finished"]
    assert fv["status"]["runs"][0]["busbwGBps"]["all_reduce"] >= 36
    events = [e["reason"] for e in live(k8s, "v1/events") if e["involvedObject"].get("kind") == "Workload"]
    assert events[-1] == "FabricValidated"
    # One meaning of validated: with the plugin fixed, no critical finding remains, and the exit code agrees.
    assert rc == 0 and not [f for f in doc["findings"] if f["severity"] == "critical"], doc["findings"]

    # Two intervals later with no new success, the pool is stale again: not ready.
    rc, doc = await run_once(kc, profile_path, t + timedelta(minutes=3, seconds=1) + timedelta(minutes=20), lustre)
    assert doc["pools"]["gh200-roce"]["ready"] is False


async def test_restart_mid_canary_adopts_the_running_jobset(cluster, profile_path, lustre) -> None:
    k8s, kc = cluster
    js = await canary_started(k8s, kc, profile_path, lustre, NOW)
    assert _posts(k8s, "jobsets") == 1
    # Every --once is a fresh controller process: two more "restarts" while the canary runs, past the interval.
    for minutes in (2, 11):
        await run_once(kc, profile_path, NOW + timedelta(minutes=minutes), lustre)
        assert _posts(k8s, "jobsets") == 1, "a restarted controller started a duplicate canary"
        (fv,) = live(k8s, FVS)
        assert fv["status"]["active"]["jobSet"] == js["metadata"]["name"]
    ranks_wrote(lustre, js, ROCE_LOGS, busbw=40.0)
    jobset_finishes(k8s, js, NOW + timedelta(minutes=12))
    _rc, _doc = await run_once(kc, profile_path, NOW + timedelta(minutes=12, seconds=30), lustre)
    (fv,) = live(k8s, FVS)
    assert [r["name"] for r in fv["status"]["runs"]] == [js["metadata"]["name"]]  # the result landed, once
    assert fv["status"]["runs"][0]["outcome"] == "passed"
    # The record is in place before the next pass; running it again records nothing twice and starts the next.
    await run_once(kc, profile_path, NOW + timedelta(minutes=12, seconds=40), lustre)
    (fv,) = live(k8s, FVS)
    assert len(fv["status"]["runs"]) == 1
    owner = canaries(k8s)[0]["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "FabricValidation" and owner["name"] == "gh200-roce"
