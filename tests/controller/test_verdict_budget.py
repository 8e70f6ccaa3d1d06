"""Finished jobs' logs are read within a time budget per pass, least recently read first, the rest counted.

A mass finish must not hold every admission decision behind one long read (bench/README.md: 16,667 finished jobs
took 118 s to read at 20,000 nodes and 50,000 jobs), and no job may wait for ever behind others whose verdicts
cannot be written. The clock is the test's: each job read moves it one second.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from controller_support import NOW, PROFILE, WriteRecorder

from fabricguard.controller.actions import Annotate
from fabricguard.controller.lustre import LustreFacts, VerdictReads, load_jobs, reconcile_reading_lustre
from fabricguard.controller.metrics import Metrics
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile import loads_profile

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "socket-fallback"
PROF = loads_profile(PROFILE)


def _jobset(name: str) -> dict:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": "ml-training", "uid": f"uid-{name}",
                         "creationTimestamp": "2025-09-30T10:00:00Z",
                         "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": "gh200-roce"}},
            "spec": {"replicatedJobs": []},
            "status": {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                                       "lastTransitionTime": "2025-09-30T11:50:00Z"}]}}


class _Clock:
    """One second per job read (the facts of the pass grow by one per read), never going back."""

    def __init__(self) -> None:
        self.facts = LustreFacts()
        self.before = 0  # jobs read by earlier passes

    def __call__(self) -> float:
        return float(self.before + len(self.facts.jobs))


def _pass(root: Path, names: list[str], reads: VerdictReads, clock: _Clock) -> LustreFacts:
    clock.before += len(clock.facts.jobs)
    clock.facts = LustreFacts(root)
    load_jobs(clock.facts, PROF, {"JobSet": [_jobset(n) for n in names]}, reads)
    return clock.facts


def _read(facts: LustreFacts) -> list[str]:
    return [name for _ns, name in facts.jobs]


def test_a_pass_reads_within_its_budget_and_the_rest_wait_least_recently_read_first(tmp_path: Path) -> None:
    clock = _Clock()
    reads = VerdictReads(budget_s=2.0, clock=clock)
    jobs = ["a", "b", "c", "d", "e"]
    first = _pass(tmp_path, jobs, reads, clock)
    assert _read(first) == ["a", "b"] and first.jobs_waiting == 3
    assert first.jobs[("ml-training", "a")].error is not None  # no logs on "Lustre": read, judged as missing
    # a and b's verdicts could not be written (still awaiting): they do not keep c, d and e waiting.
    second = _pass(tmp_path, jobs, reads, clock)
    assert _read(second) == ["c", "d"] and second.jobs_waiting == 3
    third = _pass(tmp_path, jobs, reads, clock)
    assert _read(third) == ["e", "a"] and third.jobs_waiting == 3
    # The jobs that got their verdict no longer await one: forgotten, and the rest read.
    fourth = _pass(tmp_path, ["b", "c"], reads, clock)
    assert _read(fourth) == ["b", "c"] and fourth.jobs_waiting == 0
    assert set(reads.last_read) == {("ml-training", "b"), ("ml-training", "c")}


def test_a_budget_of_zero_still_reads_one_job_a_pass(tmp_path: Path) -> None:
    clock = _Clock()
    reads = VerdictReads(budget_s=0.0, clock=clock)
    seen = [_read(_pass(tmp_path, ["a", "b", "c"], reads, clock)) for _ in range(3)]
    assert seen == [["a"], ["b"], ["c"]]


def test_only_the_jobs_read_get_a_verdict_and_the_waiting_are_a_metric(tmp_path: Path) -> None:
    from fabricguard.controller.canaries import CanaryConfig

    for name in ("j1", "j2", "j3"):
        shutil.copytree(EXAMPLE, tmp_path / "ml-training" / name / ".fabricguard" / "nccl")
    snap = Snapshot([_jobset("j1"), _jobset("j2"), _jobset("j3")])
    reads = VerdictReads(budget_s=1.0)
    reads.clock = lambda: float(len(reads.last_read))
    cfg = CanaryConfig("fabricguard-system", "img", tmp_path)
    result = reconcile_reading_lustre(snap, PROF, NOW, cfg, reads=reads)
    annotated = [a.name for a in result.actions if isinstance(a, Annotate)]
    assert annotated == ["j1"] and result.counters.job_verdicts_waiting == 2
    assert result.counters.job_verdicts == [("gh200-roce", "degraded", "socket")]
    m = Metrics()
    m.observe(PROF, result, 0.1, 0)
    assert m.registry.get_sample_value("fabricguard_job_verdicts_waiting") == 2


def test_a_verdict_budget_past_half_the_stall_limit_is_refused(profile_path: Path) -> None:
    from typer.testing import CliRunner

    from fabricguard.cli import app

    r = CliRunner().invoke(app, ["controller", "--profile", str(profile_path), "--verdict-budget", "200",
                                 "--stall", "300"])
    assert r.exit_code == 3 and "--verdict-budget 200 is more than half of --stall 300" in r.output
    assert "Traceback" not in r.output


async def test_verdict_writes_go_out_in_parallel_each_event_after_its_annotation() -> None:
    from fabricguard.controller.actions import event
    from fabricguard.controller.kube import WRITE_CONCURRENCY, apply_actions

    actions: list = []
    for i in range(100):
        js = _jobset(f"j{i:03d}")
        actions += [Annotate("jobset.x-k8s.io/v1alpha2", "jobsets", "ml-training", f"j{i:03d}",
                             {"fabricguard.io/verdict": "pass"}),
                    event(js, "jobset.x-k8s.io/v1alpha2", "JobSet", "JobVerdict", "verdict pass", NOW,
                          warning=False)]
    rec = WriteRecorder(delay_s=0.005, refuse=frozenset({"j007"}))
    errors = await apply_actions(rec, actions, {})  # type: ignore[arg-type]
    assert rec.most == WRITE_CONCURRENCY, rec.most
    assert len(errors) == 1 and "j007" in errors[0] and "forbidden" in errors[0]
    for i in range(100):
        if i != 7:
            assert rec.order.index(f"annotate j{i:03d}") < rec.order.index(f"event j{i:03d}")
    # The refused verdict says nothing yet: the next pass judges it again and emits its Event then.
    assert "event j007" not in rec.order


async def test_a_pass_that_leaves_jobs_waiting_says_so_in_its_log(cluster, profile_path, lustre, caplog) -> None:
    import logging

    from controller_support import JOBSETS

    from fabricguard.controller.runner import RunConfig, run_pass
    from fabricguard.profile import load_profile

    k8s, kc = cluster
    for name in ("w1", "w2", "w3"):
        k8s.objects[JOBSETS, "ml-training", name] = _jobset(name)
    cfg = RunConfig(load_profile(profile_path), image="img:1", lustre_root=lustre, kubeconfig=kc,
                    verdict_budget_s=0.0)
    with caplog.at_level(logging.INFO, logger="fabricguard.controller"):
        rep = await run_pass(cfg, act=False)
    assert rep.result.counters.job_verdicts_waiting == 2
    assert "2 finished job(s) wait for their verdict" in caplog.text and "--verdict-budget of 0 s" in caplog.text
