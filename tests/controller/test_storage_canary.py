"""The storage canary gates the pool's storage: what the canary's nodes' ``probe storage`` left is judged apart
from the fabric (controller/storage_proof.py), and a pool whose fabric passed but whose Lustre is slow, or not
Lustre at all, is held with the storage named, not the fabric.

The probe results are the documents ``probe storage --format json`` writes (``StorageReport.to_dict``), with the
figures a real run's ``metrics`` carry; the pass runs over kmock's emulator with ``--now``.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from controller_support import (
    CANARY_NODES,
    FVS,
    NOW,
    NS,
    PROFILE,
    ROCE_LOGS,
    canaries,
    canary_started,
    gate_check,
    jobset_created,
    jobset_finishes,
    live,
    plugin_fixed,
    pods_run,
    ranks_wrote,
    run_once,
)

from fabricguard.controller.outcome import Outcome, judge_canary
from fabricguard.controller.storage_proof import standing
from fabricguard.profile import loads_profile

# The incident's pool with a storage baseline: 4,000 MB/s write, 8,000 read, floor 0.8 of each.
STORAGE_PROFILE = PROFILE.replace("baseline: {allReduceBusBwGBps: 45}",
                                  "baseline: {allReduceBusBwGBps: 45, storageWriteMBps: 4000, storageReadMBps: 8000}")
PROF = loads_profile(STORAGE_PROFILE)
POOL = PROF.pool()
JS = {"metadata": {"name": "fgc-gh200-roce-1"}}


def storage_wrote(job: Path, write: float, read: float, *, fstype_ok: bool = True, seconds: float = 2.0,
                  nodes: int = 2) -> None:
    """Each node's ``probe storage`` document, as StorageReport.to_dict writes it."""
    out = job / ".fabricguard" / "canary"
    for f in out.glob("storage.node*.json"):
        f.unlink()
    for i in range(nodes):
        fstype = ({"name": "storage.fstype", "status": "pass", "detail": "/mnt/lustre/x is on lustre", "data": {}}
                  if fstype_ok else
                  {"name": "storage.fstype", "status": "failed", "data": {},
                   "detail": "/mnt/lustre/x is on overlay (overlay) at /, not lustre"})
        phase = {"bytes": 1 << 30, "latency_ms": {"p50": 3.0}, "meaningful": seconds >= 0.1}
        out.joinpath(f"storage.node{i}.json").write_text(json.dumps({
            "path": "/mnt/lustre/.fabricguard/canary-storage/node0", "engine": "fio",
            "status": "pass" if fstype_ok else "failed", "workdir": "", "left_behind": [],
            "checks": [fstype, {"name": "storage.checksum", "status": "pass", "detail": "read back", "data": {}},
                       {"name": "storage.throughput", "status": "pass", "detail": "no storage baseline", "data": {}}],
            "metrics": {"write": {**phase, "MBps": write, "seconds": seconds},
                        "read": {**phase, "MBps": read, "seconds": seconds}, "checksum_ok": True}}))


def _judge(lustre: Path):
    job = lustre / NS / "fgc-gh200-roce-1"
    return judge_canary(PROF, POOL, job, job / ".fabricguard" / "nccl", job / ".fabricguard" / "canary")


def test_at_the_floor_the_storage_is_proven(tmp_path: Path) -> None:
    job = ranks_wrote(tmp_path, JS, ROCE_LOGS, busbw=40.0)
    storage_wrote(job, 2000.0, 5000.0)  # summed: 4,000 >= 3,200 and 10,000 >= 6,400
    j = _judge(tmp_path)
    assert j.outcome is Outcome.passed and j.storage is not None
    assert j.storage.outcome == "passed" and j.storage.floorJudged, j.storage
    assert j.storage.writeMBps == 4000.0 and j.storage.floorWriteMBps == 3200.0


def test_slow_storage_is_the_storage_not_the_fabric(tmp_path: Path) -> None:
    job = ranks_wrote(tmp_path, JS, ROCE_LOGS, busbw=40.0)
    storage_wrote(job, 500.0, 5000.0)
    j = _judge(tmp_path)
    assert j.outcome is Outcome.passed, j  # the fabric's outcome says nothing about storage
    assert j.storage is not None and j.storage.outcome == "degraded"
    assert "write 1,000 MB/s < floor 3,200" in j.storage.message, j.storage.message


def test_a_path_off_lustre_fails_the_storage(tmp_path: Path) -> None:
    job = ranks_wrote(tmp_path, JS, ROCE_LOGS, busbw=40.0)
    storage_wrote(job, 9000.0, 9000.0, fstype_ok=False)
    j = _judge(tmp_path)
    assert j.storage is not None and j.storage.outcome == "failed"
    assert "storage.fstype" in j.storage.message and "not lustre" in j.storage.message


def test_a_node_without_a_result_fails_and_a_short_phase_is_not_judged(tmp_path: Path) -> None:
    job = ranks_wrote(tmp_path, JS, ROCE_LOGS, busbw=40.0)
    storage_wrote(job, 9000.0, 9000.0, nodes=1)
    j = _judge(tmp_path)
    assert j.storage is not None and j.storage.outcome == "failed" and "1 of the canary's 2 nodes" in j.storage.message
    # Too short to mean anything (our canary's size, not the file system): proven on Lustre, floor not judged.
    storage_wrote(job, 100.0, 100.0, seconds=0.02)
    j = _judge(tmp_path)
    assert j.storage is not None and j.storage.outcome == "passed" and not j.storage.floorJudged
    assert "too short" in j.storage.message and "canary.storageSize" in j.storage.message


def test_the_standing_is_fresh_for_two_intervals() -> None:
    from fabricguard.controller.storage_proof import StorageProof

    canary = PROF.canary(POOL)
    assert canary is not None
    ok = StorageProof("passed", "storage on Lustre")
    at = "2025-09-30T12:00:00Z"
    from fabricguard.times import parse_time

    t = parse_time(at)
    assert t is not None
    assert standing(POOL, canary, [("r1", at, ok)], None, t + timedelta(minutes=19)).ready
    late = standing(POOL, canary, [("r1", at, ok)], None, t + timedelta(minutes=21))
    assert not late.ready and "within two canary intervals" in late.message and late.last_proven == at
    assert not standing(POOL, canary, [], None, t).ready


async def test_slow_storage_holds_the_pool_naming_the_storage(cluster, tmp_path: Path, lustre: Path) -> None:
    k8s, kc = cluster
    profile_path = tmp_path / "storage-profile.yaml"
    profile_path.write_text(STORAGE_PROFILE)
    plugin_fixed(k8s)
    js = await canary_started(k8s, kc, profile_path, lustre)
    job = ranks_wrote(lustre, js, ROCE_LOGS, busbw=40.0)
    storage_wrote(job, 400.0, 3000.0)  # write 800 < 3,200; read 6,000 < 6,400
    jobset_finishes(k8s, js, NOW + timedelta(minutes=2))
    rc, doc = await run_once(kc, profile_path, NOW + timedelta(minutes=3), lustre)
    pool = doc["pools"]["gh200-roce"]
    assert pool["outcome"] == "passed" and pool["ready"] is False and rc == 1, pool
    assert pool["storage"]["ready"] is False and pool["storage"]["proof"]["outcome"] == "degraded"
    check = gate_check(k8s)
    assert check["message"].startswith("fabricguard: held: pool gh200-roce storage degraded"), check["message"]
    assert "write 800 MB/s < floor 3,200" in check["message"] and check["state"] == "Retry"
    (fv,) = live(k8s, FVS)
    st = fv["status"]["storage"]
    assert st["ready"] is False and st["proof"]["writeMBps"] == 800.0 and st["proof"]["floorWriteMBps"] == 3200.0
    assert fv["status"]["runs"][0]["storage"]["outcome"] == "degraded"
    conds = {c["type"]: c for c in fv["status"]["conditions"]}
    assert conds["StorageReady"]["status"] == "False" and conds["StorageReady"]["reason"] == "StorageDegraded"
    assert conds["Validated"]["reason"] == "StorageNotReady"

    # The file system recovers: the next canary proves it at the floor, and the Workload is let through.
    t = NOW + timedelta(minutes=10)
    await run_once(kc, profile_path, t, lustre)
    js2 = next(c for c in canaries(k8s) if c["metadata"]["name"] != js["metadata"]["name"])
    js2 = jobset_created(k8s, js2, t)
    pods_run(k8s, js2, CANARY_NODES)
    storage_wrote(ranks_wrote(lustre, js2, ROCE_LOGS, busbw=40.0), 2500.0, 4000.0)
    jobset_finishes(k8s, js2, t + timedelta(minutes=2))
    rc, doc = await run_once(kc, profile_path, t + timedelta(minutes=3), lustre)
    pool = doc["pools"]["gh200-roce"]
    assert pool["ready"] is True and pool["storage"]["ready"] is True, pool
    assert gate_check(k8s)["state"] == "Ready"
    (fv,) = live(k8s, FVS)
    conds = {c["type"]: c for c in fv["status"]["conditions"]}
    assert conds["StorageReady"]["status"] == "True" and "at the pool's floor" in conds["StorageReady"]["message"]


def test_the_pass_text_names_the_pools_storage() -> None:
    from fabricguard.controller.commands import _storage_field
    from fabricguard.controller.storage_proof import StorageProof, StorageStanding

    slow = StorageProof("degraded", "below", 2, 800.0, 6000.0, 3200.0, 6400.0, True)
    assert _storage_field(StorageStanding(False, "m", slow)) == (
        "degraded: write 800 MB/s (floor 3,200), read 6,000 MB/s (floor 6,400)")
    assert _storage_field(StorageStanding(False, "m")) == "not proven" and _storage_field(None) == ""
