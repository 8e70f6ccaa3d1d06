"""Replays against the emulator: a job whose collectives stop is asked through NCCL's RAS (the querier stands in
for ``pods/exec``: it answers with reports in NCCL 2.30.7's exact JSON, ``tests/fixtures/ras``) and annotated with
the rank, pod and node the others wait for within two queries after the stall window; a job in a 10-minute
checkpoint is never called hung."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
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


def flapping_links(tmp_path: Path, read_at: datetime) -> dict:  # type: ignore[type-arg]
    """The FabricLinks condition an agent writes (agent/links.py, on a sysfs tree) for a node whose mlx5_3 link
    went down and up and keeps taking symbol errors, while nothing moves."""
    from fabricguard.agent.links import LinkWatch, build_links_condition

    root = tmp_path / "node-009"
    for dev, state in (("mlx5_0", "4: ACTIVE"), ("mlx5_3", "4: ACTIVE")):
        port = root / "sys/class/infiniband" / dev / "ports/1"
        (port / "counters").mkdir(parents=True)
        for f, v in (("state", state), ("phys_state", "5: LinkUp"), ("rate", "400 Gb/sec (4X NDR)"),
                     ("link_layer", "Ethernet")):
            (port / f).write_text(v + "\n")
        for f in ("port_rcv_data", "port_xmit_data", "link_downed", "symbol_error", "port_rcv_errors"):
            (port / "counters" / f).write_text("0\n")
    w = LinkWatch()
    w.judge(root, 0.0)
    (root / "sys/class/infiniband/mlx5_3/ports/1/counters/link_downed").write_text("2\n")
    (root / "sys/class/infiniband/mlx5_3/ports/1/counters/symbol_error").write_text("4810\n")
    return build_links_condition(*w.judge(root, 60.0), None, read_at)


def _put_links(k8s, node: str, cond: dict) -> None:  # type: ignore[no-untyped-def,type-arg]
    key = ("v1/nodes", None, node)
    obj = json.loads(json.dumps(k8s.objects[key].raw)) if key in k8s.objects else {"metadata": {"name": node}}
    conds = [c for c in obj.setdefault("status", {}).get("conditions", []) if c.get("type") != "FabricLinks"]
    obj["status"]["conditions"] = [*conds, cond]
    k8s.objects[key] = obj


async def _run(k8s, kc, tmp_path: Path, prof, ras: Ras, minutes: list[int | None],  # type: ignore[no-untyped-def]
               links: dict[str, dict] | None = None):  # type: ignore[type-arg]
    """``minutes``: per pass (one a minute), the dump round written before it (None: the job wrote nothing);
    ``links``: node -> the FabricLinks condition its agent wrote."""
    job = megatron(nodes=16, gpus=1)
    lustre = tmp_path / "lustre"
    d = lustre / dump_dir(prof, prof.spec.inspector, NS, job.name)
    _objects(k8s, job)
    for node, cond in (links or {}).items():
        _put_links(k8s, node, cond)
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
    # The waited-for node's agent last wrote its NICs at minute 6 (a link flapped, symbol errors); another
    # waited-for node is not in the answer, so only node 009's NICs ride along.
    links = {"gpu-node-009": flapping_links(tmp_path, NOW + timedelta(minutes=6))}
    # Three minutes of collectives, then nothing: the stall window (5m) ends at minute 7.
    job, asked, hung_at, metrics = await _run(k8s, kc, tmp_path, _profile("5m"), ras,
                                              [0, 1, 2, None, None, None, None, None, None, None, None], links)
    assert asked[:7] == [0] * 7  # nothing is asked before the window
    assert asked[7] == 1 and asked[8] == 2 and hung_at == 8  # the second query confirms
    assert asked[-1] == 2  # told once; not asked again
    (js,) = [j for j in live(k8s, JOBSETS) if j["metadata"]["name"] == job.name]
    hang = json.loads(js["metadata"]["annotations"][ANN_HANG])
    (w,) = hang["waited_for"]
    assert (w["rank"], w["pod"], w["node"]) == (9, job.host(9), "gpu-node-009")
    assert hang["transport"]  # the job's last transport verdict rides along
    # ... and that node's NIC counters, with their age (hung at minute 8, read at 6).
    nic = hang["nics"]["gpu-node-009"]
    assert (nic["status"], nic["reason"], nic["age_s"], nic["stale"]) == ("False", "LinkFlapped", 120, False)
    assert nic["counters"].startswith("2 port(s), 1 in trouble: mlx5_3/1 up 400G rx 0 B/s, tx 0 B/s over 60 s "
                                      "downed 2(+2), symbol 4810(+4810)")
    assert len(js["metadata"]["annotations"][ANN_HANG]) <= 2000
    # `kubectl fabricguard why` says it too.
    from fabricguard.controller.why import explain

    ans = explain(job.name, js, "JobSet", NS, [], {}, NOW + timedelta(minutes=9))
    assert ans.state == "hung" and "rank 9" in ans.cause and "its NICs (FabricLinks False/LinkFlapped" in ans.cause
    events = [e for e in live(k8s, "v1/events") if e["involvedObject"].get("name") == job.name]
    (ev,) = [e for e in events if e["reason"] == "FabricJobHung"]
    assert "rank 9" in ev["message"] and "gpu-node-009" in ev["message"] and ev["type"] == "Warning"
    assert "its NICs (FabricLinks False/LinkFlapped, read 2 min ago): 2 port(s), 1 in trouble: mlx5_3/1" in ev[
        "message"] and len(ev["message"]) <= 1024
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


def test_the_hang_says_when_the_nic_counters_are_stale_or_absent(tmp_path) -> None:
    """The NIC counters come from the node's agent: older than two heartbeats they are marked stale (the agent
    stopped writing: the node itself may be the problem); a node without the condition says why there are none;
    however long the agent's message, the annotation and Event stay bounded."""
    from fabricguard.controller.hang import NIC_STALE_S, hang_actions, node_links
    from fabricguard.controller.suspects import PodPlace
    from fabricguard.nccl.ras import HangVerdict, WaitedFor

    job = type("Job", (), {"namespace": NS, "name": "llm", "kind": "JobSet", "plural": "jobsets",
                           "api_version": "jobset.x-k8s.io/v1alpha2",
                           "obj": {"metadata": {"name": "llm", "namespace": NS, "uid": "u"}}})()
    verdict = HangVerdict(True, "rule", [WaitedFor("c", 9, "10.8.0.19", 1, 0, "behind on AllReduce"),
                                         WaitedFor("c", 3, "10.8.0.13", 1, 0, "behind on AllReduce")])
    places = {"10.8.0.19": PodPlace("w-9", "node-9", ("10.8.0.19",)),
              "10.8.0.13": PodPlace("w-3", "node-3", ("10.8.0.13",))}
    old = flapping_links(tmp_path, NOW)
    old["message"] = old["message"] + "; " + "x" * 3000  # an agent's message at its longest and then some
    nodes = [{"metadata": {"name": "node-9"}, "status": {"conditions": [old]}}, {"metadata": {"name": "node-3"}}]
    later = NOW + timedelta(seconds=NIC_STALE_S + 60)
    actions, summary = hang_actions(job, verdict, places, "ib", "observe", None, later, node_links(nodes))  # type: ignore[arg-type]
    nine, three = summary["nics"]["node-9"], summary["nics"]["node-3"]
    assert nine["stale"] is True and nine["age_s"] == NIC_STALE_S + 60 and len(nine["counters"]) == 400
    assert "no FabricLinks condition on the node" in three["absent"]
    ann, ev = actions[0], actions[1]
    assert len(json.dumps(summary, separators=(",", ":"))) <= 2000
    message = ev.body["message"]  # type: ignore[attr-defined]
    assert "STALE: older than 10 min" in message and "LinkFlapped" in message
    assert ann is not None


def test_a_tenants_long_host_in_ras_neither_blows_the_annotation_nor_blanks_the_event(tmp_path) -> None:
    """RAS answers from inside the tenant's container, so its fields are the tenant's: a 5,000-character host
    is cut to an address's length, and whatever the annotation must leave out, the Event still names the rank
    the others wait for, its pod, node and NICs."""
    from fabricguard.controller.hang import MAX_ANNOTATION, hang_actions, node_links
    from fabricguard.controller.suspects import PodPlace
    from fabricguard.nccl.ras import HangVerdict, WaitedFor

    job = type("Job", (), {"namespace": NS, "name": "llm", "kind": "JobSet", "plural": "jobsets",
                           "api_version": "jobset.x-k8s.io/v1alpha2",
                           "obj": {"metadata": {"name": "llm", "namespace": NS, "uid": "u"}}})()
    long_host = "10.8.0.19" + "9" * 5000
    verdict = HangVerdict(True, "rule", [WaitedFor("c", 9, long_host, 1, 0, "behind on AllReduce")])
    places = {long_host: PodPlace("w-9", "node-9", ("10.8.0.19",))}
    nodes = [{"metadata": {"name": "node-9"}, "status": {"conditions": [flapping_links(tmp_path, NOW)]}}]
    actions, summary = hang_actions(job, verdict, places, "ib", "observe", None, NOW, node_links(nodes))  # type: ignore[arg-type]
    text = actions[0].annotations[ANN_HANG]  # type: ignore[attr-defined]
    assert len(text) <= MAX_ANNOTATION and json.loads(text) == summary
    assert [(w["rank"], w["pod"], len(w["ip"])) for w in summary["waited_for"]] == [(9, "w-9", 64)]
    message = actions[1].body["message"]  # type: ignore[attr-defined]
    assert "wait for rank 9 (pod w-9, node node-9" in message and "LinkFlapped" in message, message
