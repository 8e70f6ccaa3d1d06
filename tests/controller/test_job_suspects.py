"""Replays against the emulator: the controller's passes (kept followers, as a running controller keeps them) over a
16-node job whose ranks keep dumping Inspector records (2.30 format, ``inspector_jobs``) name the slow node or the
late rank, with its pod and node, on the job and in an Event, once the finding held for three dump rounds."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from controller_support import NOW, PROFILE, live

from fabricguard.controller.busbw import dump_dir
from fabricguard.controller.live import LiveJobs
from fabricguard.controller.metrics import Metrics
from fabricguard.controller.runner import RunConfig, run_pass
from fabricguard.controller.suspects import ANN_SUSPECTS, suspects_of
from fabricguard.profile import loads_profile
from inspector_jobs import LayoutJob, megatron

NS, POOL = "ml-search", "gh200-roce"
INSPECTOR = "  inspector: {delivery: hostPath, hostPath: /opt/nccl-inspector, belowFloorFor: 5m}\n"
JOBSETS = "jobset.x-k8s.io/v1alpha2/jobsets"


def _objects(k8s, job: LayoutJob) -> None:  # type: ignore[no-untyped-def]
    k8s.objects[JOBSETS, NS, job.name] = {
        "metadata": {"name": job.name, "namespace": NS, "uid": f"uid-{job.name}",
                     "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": POOL}},
        "spec": {"replicatedJobs": []}, "status": {"conditions": []}}
    for n in range(job.nodes):
        name = job.host(n)
        k8s.objects["v1/pods", NS, name] = {
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"jobset.sigs.k8s.io/jobset-name": job.name}},
            "spec": {"nodeName": f"gpu-node-{n:03d}", "hostname": name, "containers": [{"name": "trainer"}]},
            "status": {"phase": "Running", "podIP": f"10.8.0.{n + 10}", "podIPs": [{"ip": f"10.8.0.{n + 10}"}]}}


async def _replay(k8s, kc, tmp_path: Path, job: LayoutJob, rounds: int):  # type: ignore[no-untyped-def]
    prof = loads_profile(PROFILE.replace("spec:\n", "spec:\n" + INSPECTOR, 1))
    lustre = tmp_path / "lustre"
    d = lustre / dump_dir(prof, prof.spec.inspector, NS, job.name)  # type: ignore[arg-type]
    _objects(k8s, job)
    lj = LiveJobs(prof, lustre)
    metrics = Metrics()
    cfg = RunConfig(prof, image="x", kubeconfig=kc, lustre_root=lustre, identity="solo")
    seen = []
    for rnd in range(rounds):
        job.write(d, range(rnd, rnd + 1))
        rep = await run_pass(cfg, NOW + timedelta(minutes=rnd), act=True, live=lj)
        metrics.observe_live(prof, rep.live, lj.cost)
        (js,) = [j for j in live(k8s, JOBSETS) if j["metadata"]["name"] == job.name]
        seen.append(suspects_of(js))
    events = [e for e in live(k8s, "v1/events") if e["involvedObject"].get("name") == job.name]
    return seen, events, metrics


@pytest.mark.slow
async def test_a_rail_at_a_third_names_its_node_and_no_other_within_three_rounds(cluster, tmp_path) -> None:
    k8s, kc = cluster
    job = megatron(nodes=16, gpus=8, slow={(5, 3): 1 / 3})
    seen, events, metrics = await _replay(k8s, kc, tmp_path, job, 3)
    assert seen[:2] == [None, None]
    assert seen[2] is not None and seen[2]["late"] == []
    (slow,) = seen[2]["slow"]
    assert slow["node"] == "gpu-node-005" and slow["pod"] == job.host(5) and slow["tied_with"] == []
    assert 0.3 < slow["ratio"] < 0.37 and slow["confidence"] > 0.9
    (ev,) = [e for e in events if e["reason"] == "FabricNodeSuspect"]
    assert ev["type"] == "Warning" and "gpu-node-005" in ev["message"] and "pair test decides" in ev["message"]
    assert not [e for e in events if e["reason"] == "FabricRankLate"]
    labels = {"namespace": NS, "job": job.name}
    assert metrics.registry.get_sample_value("fabricguard_job_node_suspect_confidence",
                                             {**labels, "node": job.host(5)}) > 0.9
    ratios = {n: metrics.registry.get_sample_value("fabricguard_job_node_busbw_ratio", {**labels, "node": job.host(n)})
              for n in range(16)}
    assert ratios[5] < 0.4 and all(r > 0.6 for n, r in ratios.items() if n != 5)


@pytest.mark.slow
async def test_one_late_rank_is_named_with_its_pod_and_node(cluster, tmp_path) -> None:
    k8s, kc = cluster
    job = megatron(nodes=16, gpus=8, late=(9, 2, 40_000))
    seen, events, metrics = await _replay(k8s, kc, tmp_path, job, 3)
    assert seen[2] is not None and seen[2]["slow"] == []
    (late,) = seen[2]["late"]
    assert late["pod"] == job.host(9) and late["node"] == "gpu-node-009" and 0.035 < late["lateness_s"] < 0.045
    (ev,) = [e for e in events if e["reason"] == "FabricRankLate"]
    assert f"rank {late['rank']}" in ev["message"] and "gpu-node-009" in ev["message"]
    v = metrics.registry.get_sample_value("fabricguard_job_rank_lateness_seconds",
                                          {"namespace": NS, "job": job.name, "node": job.host(9),
                                           "rank": str(late["rank"])})
    assert v is not None and 0.035 < v < 0.045
    anns = next(j for j in live(k8s, JOBSETS) if j["metadata"]["name"] == job.name)["metadata"]["annotations"]
    assert len(anns[ANN_SUSPECTS]) <= 1000 and json.loads(anns[ANN_SUSPECTS])["round"] == 3
