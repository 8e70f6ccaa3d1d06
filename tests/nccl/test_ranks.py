"""The late rank and the slow node from Inspector records alone (``nccl.ranks``), on jobs written in the 2.30
plugin's format by ``inspector_jobs``: a 16-node 3D-parallel job and a hybrid-sharded one."""

from __future__ import annotations

from pathlib import Path

from fabricguard.nccl.inspector import InspectorFollower
from fabricguard.nccl.ranks import Attribution
from inspector_jobs import hsdp, megatron


def _replay(job, tmp: Path, rounds: int, **kw):  # type: ignore[no-untyped-def]
    d = tmp / "inspector"
    f = InspectorFollower(d)
    a = Attribution(**kw)
    views = []
    for rnd in range(rounds):
        job.write(d, range(rnd, rnd + 1))
        recs, _ = f.poll()
        a.add(recs)
        views.append(a.judge())
    return a, views


def test_a_rail_at_a_third_names_its_node_and_no_other_within_three_rounds(tmp_path: Path) -> None:
    job = megatron(nodes=16, gpus=8, slow={(5, 3): 1 / 3})
    _a, views = _replay(job, tmp_path, 3)
    assert [v.confirmed_slow() for v in views[:2]] == [[], []]  # evidence must hold over rounds
    (node,) = views[2].confirmed_slow()
    assert node.hostname == job.host(5) and node.pids == (job.pid(5, 3),) and node.tied_with == ()
    assert node.rounds == 3 and node.confidence > 0.9 and 0.3 < node.ratio < 0.37
    assert views[2].unplaced == [] and len(views[2].slow_comms) == 2  # its CP pair and its DP group
    # The per-node view: that node's worst GPU is at a third; its pair partner and DP peers in between.
    ratios = {n.hostname: n.ratio for n in views[2].nodes}
    assert ratios[job.host(5)] < 0.4 and all(r > 0.6 for h, r in ratios.items() if h != job.host(5))


def test_a_healthy_job_names_nothing(tmp_path: Path) -> None:
    for job in (megatron(nodes=16, gpus=8), hsdp(nodes=8, gpus=8)):
        _a, views = _replay(job, tmp_path / job.name, 4)
        assert all(not v.slow and not v.late and not v.slow_comms for v in views)
        assert views[-1].coverage == 1.0


def test_a_slow_rail_in_an_hsdp_job_is_placed_by_its_replicate_group(tmp_path: Path) -> None:
    job = hsdp(nodes=8, gpus=8, slow={(2, 6): 1 / 3})
    _a, views = _replay(job, tmp_path, 3)
    (node,) = views[-1].confirmed_slow()
    assert node.hostname == job.host(2) and node.pids == (job.pid(2, 6),)


def test_one_late_rank_is_named_with_its_node(tmp_path: Path) -> None:
    job = megatron(nodes=16, gpus=8, late=(9, 2, 40_000))  # 40 ms late to every collective
    _a, views = _replay(job, tmp_path, 3)
    (late,) = views[-1].confirmed_late()
    assert (late.hostname, late.pid) == (job.host(9), job.pid(9, 2))
    assert late.share == 1.0 and 0.035 < late.lateness_s < 0.045 and late.confidence > 0.9
    assert not views[-1].slow  # a late rank is not a slow link: busbw of the others drops uniformly with it


def test_dropped_records_lower_confidence_instead_of_creating_suspects(tmp_path: Path) -> None:
    job = megatron(nodes=16, gpus=8, drop={(4, g) for g in range(8)})  # one node's plugin writes nothing
    _a, views = _replay(job, tmp_path, 3)
    assert all(not v.slow and not v.late for v in views)
    assert views[-1].coverage < 1.0
    slow = megatron(nodes=16, gpus=8, slow={(5, 3): 1 / 3}, drop={(4, g) for g in range(8)})
    _a, views = _replay(slow, tmp_path / "b", 3)
    (node,) = views[-1].confirmed_slow()
    assert node.hostname == slow.host(5) and node.confidence < 0.99


def test_the_analysis_is_bounded(tmp_path: Path) -> None:
    a, _views = _replay(megatron(nodes=4, gpus=8), tmp_path, 6, max_instances=50, window=8)
    assert len(a._inst) <= 50 and all(len(v) <= 8 for c in a._comms.values() for v in c.busbw.values())
    assert all(len(d.waits) <= 8 for d in a._lat.values())
