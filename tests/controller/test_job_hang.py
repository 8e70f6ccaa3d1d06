"""Replays against the emulator: a job whose collectives stop is asked through NCCL's RAS (the querier stands in
for ``pods/exec``: it answers with reports in NCCL 2.30.7's exact JSON, ``tests/fixtures/ras``) and annotated with
the rank, pod and node the others wait for within two queries after the stall window; a job in a 10-minute
checkpoint is never called hung."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from controller_support import NOW, PROFILE, live
from test_job_suspects import JOBSETS, NS, _objects

from fabricguard.controller.busbw import dump_dir
from fabricguard.controller.hang import ANN_HANG
from fabricguard.controller.live import LiveJobs
from fabricguard.controller.metrics import Metrics
from fabricguard.controller.runner import RunConfig, run_pass
from fabricguard.profile import loads_profile
from inspector_jobs import megatron

RAS = Path(__file__).resolve().parents[1] / "fixtures" / "ras"


def _profile(hang_after: str):  # type: ignore[no-untyped-def]
    ins = ("  inspector: {delivery: hostPath, hostPath: /opt/nccl-inspector, belowFloorFor: 5m, "
           f"hangAfter: {hang_after}}}\n")
    return loads_profile(PROFILE.replace("spec:\n", "spec:\n" + ins, 1))


class Ras:
    """What each query of RAS answers, in order (the last one repeats)."""

    def __init__(self, *files: str) -> None:
        self.answers = [(RAS / f).read_bytes() for f in files]
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, job, pod) -> bytes:  # type: ignore[no-untyped-def]
        self.asked.append((job.name, pod.pod))
        return self.answers[min(len(self.asked), len(self.answers)) - 1]


async def _run(k8s, kc, tmp_path: Path, prof, ras: Ras, minutes: list[int | None]):  # type: ignore[no-untyped-def]
    """``minutes``: per pass (one a minute), the dump round written before it (None: the job wrote nothing)."""
    job = megatron(nodes=16, gpus=1)
    lustre = tmp_path / "lustre"
    d = lustre / dump_dir(prof, prof.spec.inspector, NS, job.name)
    _objects(k8s, job)
    lj = LiveJobs(prof, lustre)
    metrics = Metrics()
    cfg = RunConfig(prof, image="x", kubeconfig=kc, lustre_root=lustre, identity="solo")
    asked_by_pass, hung_at = [], None
    for i, rnd in enumerate(minutes):
        if rnd is not None:
            job.write(d, range(rnd, rnd + 1))
        rep = await run_pass(cfg, NOW + timedelta(minutes=i), act=True, live=lj, ras=ras)
        metrics.observe_live(prof, rep.live, lj.cost)
        asked_by_pass.append(len(ras.asked))
        (js,) = [j for j in live(k8s, JOBSETS) if j["metadata"]["name"] == job.name]
        if hung_at is None and ANN_HANG in js["metadata"].get("annotations", {}):
            hung_at = i
    return job, asked_by_pass, hung_at, metrics


@pytest.mark.slow
async def test_a_job_hung_on_one_rank_is_annotated_within_two_queries(cluster, tmp_path) -> None:
    k8s, kc = cluster
    ras = Ras("v2.30.7-hung-rank9-q1.json", "v2.30.7-hung-rank9-q2.json")
    # Three minutes of collectives, then nothing: the stall window (5m) ends at minute 7.
    job, asked, hung_at, metrics = await _run(k8s, kc, tmp_path, _profile("5m"), ras,
                                              [0, 1, 2, None, None, None, None, None, None, None, None])
    assert asked[:7] == [0] * 7  # nothing is asked before the window
    assert asked[7] == 1 and asked[8] == 2 and hung_at == 8  # the second query confirms
    assert asked[-1] == 2  # told once; not asked again
    (js,) = [j for j in live(k8s, JOBSETS) if j["metadata"]["name"] == job.name]
    hang = json.loads(js["metadata"]["annotations"][ANN_HANG])
    (w,) = hang["waited_for"]
    assert (w["rank"], w["pod"], w["node"]) == (9, job.host(9), "gpu-node-009")
    assert hang["transport"]  # the job's last transport verdict rides along
    events = [e for e in live(k8s, "v1/events") if e["involvedObject"].get("name") == job.name]
    (ev,) = [e for e in events if e["reason"] == "FabricJobHung"]
    assert "rank 9" in ev["message"] and "gpu-node-009" in ev["message"] and ev["type"] == "Warning"
    assert metrics.registry.get_sample_value("fabricguard_job_hung", {"namespace": NS, "job": job.name,
                                                                       "node": "gpu-node-009", "rank": "9"}) == 1


@pytest.mark.slow
async def test_a_healthy_job_with_a_ten_minute_checkpoint_is_never_called_hung(cluster, tmp_path) -> None:
    k8s, kc = cluster
    checkpoint = [0, 1, 2, *([None] * 10), 3, 4]  # ten minutes without a collective, then it goes on
    # hangAfter longer than the checkpoint (the profile's advice): RAS is never asked.
    ras = Ras("v2.30.7-checkpoint.json")
    _job, asked, hung_at, _m = await _run(k8s, kc, tmp_path / "a", _profile("15m"), ras, checkpoint)
    assert asked[-1] == 0 and hung_at is None
    # A window shorter than the checkpoint: RAS is asked, every rank launched the same collectives: not a hang,
    # and the job is not asked again for another window.
    ras = Ras("v2.30.7-checkpoint.json")
    _job, asked, hung_at, _m = await _run(k8s, kc, tmp_path / "b", _profile("5m"), ras, checkpoint)
    assert hung_at is None and asked[-1] == 2
