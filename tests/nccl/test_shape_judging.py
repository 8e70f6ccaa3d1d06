"""Communicators judged by shape: a healthy hybrid-sharded job is never below its floor, after the fact and live.

The job (``inspector_jobs.hsdp``) has node-pair shard groups (8 ranks per node) and replicate groups with one GPU
per node on the GKE A3 Ultra pool (8 GPUs, floor 284 GB/s): the replicate groups run at one NIC's ~48 GB/s by
design, which the old pooled median called "degraded".
"""

from __future__ import annotations

import shutil
from pathlib import Path

from fabricguard.controller.live import LiveJobs, running_jobs
from fabricguard.nccl.inspector import read_dir, summarize
from fabricguard.profile import load_profile, loads_profile
from fabricguard.verdict import Level, Verdict, judge_job
from fabricguard.verdict.busbw import shape_floor
from inspector_jobs import hsdp

ROOT = Path(__file__).resolve().parents[2]
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
INSPECTOR = "  inspector: {delivery: hostPath, hostPath: /opt/nccl-inspector, belowFloorFor: 5m}\n"


def _job_dir(tmp: Path) -> tuple[Path, Path]:
    job = tmp / "ml-search" / "llm-hsdp"
    logs = job / ".fabricguard" / "nccl"
    shutil.copytree(ROOT / "examples" / "jobs" / "rdma-healthy" / "logs", logs)
    return logs, job / ".fabricguard" / "inspector"


def test_the_floor_follows_the_communicators_shape() -> None:
    pool = load_profile(GKE).pool("h200-rdma")
    assert pool.gpusPerNode == 8
    assert shape_floor(pool, 8)[0] == 284.0
    assert shape_floor(pool, 1) == (35.5, "the pool's floor x 1/8 (1 NIC(s) per node)")
    assert shape_floor(pool, 4)[0] == 142.0
    assert shape_floor(pool, 0) == (None, "no floor")  # uneven: compared with the job's other communicators


def test_a_healthy_hsdp_job_passes_after_the_fact(tmp_path: Path) -> None:
    logs, dump = _job_dir(tmp_path)
    hsdp(nodes=4).write(dump, range(3))
    recs, _ = read_dir(dump)
    # The old rule pooled every communicator into one median: this healthy job read "below the floor".
    assert summarize(recs, 64 << 20)["AllReduce"].busbw_gbps < 284
    v = judge_job(logs, load_profile(GKE), "h200-rdma")
    rows = {(r["collective"], r["ranks_per_node"]): r for r in v.to_dict()["busbw"]}
    assert set(rows) == {("AllReduce", 8), ("AllReduce", 1)}
    assert rows[("AllReduce", 8)]["floor_gbps"] == 284.0 and not rows[("AllReduce", 8)]["below"]
    assert rows[("AllReduce", 1)]["floor_gbps"] == 35.5 and not rows[("AllReduce", 1)]["below"]
    assert 46 < rows[("AllReduce", 1)]["busbw_gbps"] < 50
    busbw = [r for r in v.reasons if r.check == "busbw"]
    assert busbw and all(r.level is Level.info for r in busbw), [r.message for r in busbw]


def test_replicate_groups_below_their_own_floor_are_degraded(tmp_path: Path) -> None:
    logs, dump = _job_dir(tmp_path)
    # Every replicate group at 20 GB/s: below one NIC's floor (35.5), while the shard groups are healthy.
    job = hsdp(nodes=4, shape_busbw={1: 20.0})
    job.write(dump, range(3))
    v = judge_job(logs, load_profile(GKE), "h200-rdma")
    rows = {(r["collective"], r["ranks_per_node"]): r for r in v.to_dict()["busbw"]}
    assert rows[("AllReduce", 1)]["below"] and not rows[("AllReduce", 8)]["below"]
    assert v.verdict is Verdict.degraded


def test_a_healthy_hsdp_job_is_never_below_its_floor_live(tmp_path: Path) -> None:
    gke = GKE.read_text()
    prof = loads_profile(gke.replace("spec:\n", "spec:\n" + INSPECTOR, 1))
    job = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
           "metadata": {"name": "llm-hsdp", "namespace": "ml-search", "uid": "u1",
                        "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": "h200-rdma"}},
           "spec": {"replicatedJobs": []}, "status": {"conditions": []}}
    lj = LiveJobs(prof, tmp_path)
    lj.sync(running_jobs(prof, {"JobSet": [job]}))
    (jb,) = lj._busbw.values()
    layout = hsdp(nodes=4)
    for rnd in range(12):  # 12 minutes of dumps, longer than belowFloorFor
        layout.write(jb.directory, range(rnd, rnd + 1))
        (ob,) = lj.poll()
        assert ob.busbw is not None and not ob.busbw.below, ob.busbw.text()
    figs = ob.busbw.figures
    assert figs[("AllReduce", 1)].floor_gbps == 35.5 and figs[("AllReduce", 8)].floor_gbps == 284.0
    assert figs[("AllReduce", 1)].below_minutes == 0 and figs[("AllReduce", 8)].below_minutes == 0
    assert "1/node" in ob.busbw.text() and "8/node" in ob.busbw.text()
