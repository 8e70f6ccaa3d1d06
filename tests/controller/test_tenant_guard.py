"""Tenant data never stops the controller (issue 25, item 2).

A tenant writes its own NCCL logs and Inspector records. The numbers in them are range-checked where they are
read: a dump time of 2^63 or 2^64, NaN, a 5,000-digit integer, a negative count or a string where a number
goes is not a record. Every per-job step runs under a guard that turns any exception into that job's own
outcome (the live follower's ``unknown`` with the reason, the finished-job judge's ``input-unusable``), logged
once. A hypothesis fuzz feeds hostile records and log lines to one job, beside a healthy job, through the live
followers and the finished-job judge, and asserts that the healthy job is still judged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from controller_support import NOW, PROFILE, ROCE_LOGS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricguard import names
from fabricguard.controller.actions import Annotate, Counters
from fabricguard.controller.busbw import busbw_actions
from fabricguard.controller.canary import log_dir
from fabricguard.controller.jobs import UNUSABLE, judge_jobs
from fabricguard.controller.live import LiveJobs, running_jobs
from fabricguard.controller.lustre import LustreFacts, load_jobs
from fabricguard.controller.runner import follow_live
from fabricguard.nccl.inspector import parse_record
from fabricguard.profile import loads_profile
from fabricguard.times import from_epoch_us
from inspector_records import Job

NS, POOL = "ml-search", "gh200-roce"
INSPECTOR = "  inspector: {delivery: hostPath, hostPath: /opt/nccl-inspector, belowFloorFor: 5m}\n"
PROF = loads_profile(PROFILE.replace("spec:\n", "spec:\n" + INSPECTOR, 1))
SLOW = {"AllReduce": 21.0, "AllGather": 43.0, "ReduceScatter": 42.0}  # below the 36 GB/s floor
NUMBER_FIELDS = ("dump_timestamp_us", "n_ranks", "nnodes", "rank", "pid", "coll_sn", "coll_msg_size_bytes",
                 "coll_exec_time_us", "coll_algobw_gbs", "coll_busbw_gbs")
HOSTILE_NUMBERS = ("9223372036854775808", "18446744073709551616", "-1", "9" * 5000, "NaN", "Infinity", "1e308",
                   "-0.0", '"12"', "null", "[" * 3000 + "]" * 3000, "1" + "0" * 25)


def _jobset(name: str, *, finished: bool = False) -> dict[str, Any]:
    conds = [{"type": "Completed", "status": "True"}] if finished else []
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "labels": {names.LABEL_MANAGED: "true", names.LABEL_POOL: POOL}},
            "spec": {"replicatedJobs": []}, "status": {"conditions": conds}}


def _dump_dir(root: Path, name: str) -> Path:
    return root / NS / name / ".fabricguard" / "inspector"


def _logs(root: Path, name: str) -> Path:
    d = root / log_dir(PROF, NS, name)
    d.mkdir(parents=True, exist_ok=True)
    return d


def _hostile(line: str, field: str, value: str) -> str:
    return re.sub(rf'("{field}":)(-?[0-9.]+|"[^"]*")', lambda m: m.group(1) + value, line, count=1)


# ------------------------------------------------------------------------------------------ the reader


@pytest.mark.parametrize("field", NUMBER_FIELDS)
@pytest.mark.parametrize("value", HOSTILE_NUMBERS, ids=lambda v: v[:12])
def test_a_record_with_an_absurd_number_is_no_record_and_never_raises(field: str, value: str) -> None:
    line = Job(name="victim", nodes=2, gpus=1, busbw=SLOW).dump(0, 0, 0).splitlines()[0]
    assert parse_record(line.encode()) is not None  # the line as the plugin writes it is a record
    rec = parse_record(_hostile(line, field, value).encode())
    if rec is not None:  # kept only with every number in range (a bandwidth out of range is left out)
        assert rec.dump_us >= 0 and from_epoch_us(rec.dump_us) is not None
        assert 1 <= rec.nnodes <= rec.nranks and 0 <= rec.rank < rec.nranks
        assert rec.busbw_gbps is None or 0 <= rec.busbw_gbps <= 100_000


def test_times_out_of_range_are_none() -> None:
    assert from_epoch_us(2**63) is None and from_epoch_us(-1) is None and from_epoch_us(True) is None
    assert from_epoch_us(1_764_576_000_000_000).year == 2025


# ------------------------------------------------------------------------------------------ live followers


def test_a_2_63_dump_time_leaves_the_pass_running_and_the_other_job_judged(tmp_path: Path) -> None:
    """The crash of the field report: one tenant's record with dump_timestamp_us = 2^63, slow enough to be told
    (the telling turned the time into a date: ``year 294247 is out of range``)."""
    lj = LiveJobs(PROF, tmp_path)
    lj.sync(running_jobs(PROF, {"JobSet": [_jobset("victim"), _jobset("healthy")]}))
    victim, healthy = Job(name="victim", nodes=2, gpus=1, busbw=SLOW), Job(name="healthy", nodes=2, gpus=1, busbw=SLOW)
    for minute in range(8):
        healthy.write(_dump_dir(tmp_path, "healthy"), 1, first=minute)
        d = _dump_dir(tmp_path, "victim")
        d.mkdir(parents=True, exist_ok=True)
        for node in range(2):
            with (d / victim.file(node, 0)).open("a") as f:
                f.write("".join(_hostile(x, "dump_timestamp_us", str(2**63)) + "\n"
                                for x in victim.dump(node, 0, minute).splitlines()))
        obs, _errors = asyncio.run(follow_live(None, lj, PROF, [], NOW + timedelta(minutes=minute),  # type: ignore[arg-type]
                                               act=False))
    by = {ob.job.name: ob for ob in obs}
    assert by["healthy"].busbw is not None and by["healthy"].busbw.below  # judged, and found slow
    assert busbw_actions(by["healthy"].job, by["healthy"].busbw, None, NOW)
    assert by["victim"].busbw is None or not by["victim"].busbw.figures  # its records are no records


def test_any_exception_on_one_job_is_that_jobs_alone_and_logged_once(tmp_path: Path, monkeypatch, caplog) -> None:
    """A bug on one job's data (here: telling its busbw raises) marks that job and leaves the other's told."""
    import fabricguard.controller.runner as runner

    real = runner.busbw_actions

    def explode(job: Any, *a: Any, **k: Any) -> Any:
        if job.name == "victim":
            raise OverflowError("a tenant's number")
        return real(job, *a, **k)

    monkeypatch.setattr(runner, "busbw_actions", explode)
    lj = LiveJobs(PROF, tmp_path)
    lj.sync(running_jobs(PROF, {"JobSet": [_jobset("victim"), _jobset("healthy")]}))
    for name in ("victim", "healthy"):
        Job(name=name, nodes=2, gpus=1, busbw=SLOW).write(_dump_dir(tmp_path, name), 8)
    with caplog.at_level(logging.WARNING, logger="fabricguard.controller"):
        for _ in range(3):
            obs, _ = asyncio.run(follow_live(None, lj, PROF, [], NOW, act=False))  # type: ignore[arg-type]
    assert set(lj.unusable) == {("JobSet", NS, "victim")}
    assert "OverflowError" in lj.unusable[("JobSet", NS, "victim")]
    assert sum("victim" in r.getMessage() for r in caplog.records) == 1  # three polls, one line
    assert {ob.job.name for ob in obs} == {"victim", "healthy"}


# ------------------------------------------------------------------------------------------ finished jobs


def _judge(root: Path) -> dict[str, dict[str, str]]:
    by_kind = {"JobSet": [_jobset("victim", finished=True), _jobset("healthy", finished=True)]}
    facts = LustreFacts(root)
    load_jobs(facts, PROF, by_kind)
    actions = judge_jobs(PROF, by_kind, facts, NOW, Counters())
    return {a.name: a.annotations for a in actions if isinstance(a, Annotate)}


def _healthy_logs(root: Path) -> None:
    d = _logs(root, "healthy")
    for i, f in enumerate(ROCE_LOGS):
        shutil.copy(f, d / f"nccl.rank{i}.host{i}.{100 + i}.log")


def test_a_bug_judging_one_finished_job_is_its_input_unusable_verdict(tmp_path: Path, monkeypatch) -> None:
    import fabricguard.controller.jobs as jobs

    real = jobs.judge_finished

    def explode(profile: Any, kind: str, api: str, plural: str, obj: dict[str, Any], *a: Any) -> Any:
        if obj["metadata"]["name"] == "victim":
            raise ValueError("year 294247 is out of range")
        return real(profile, kind, api, plural, obj, *a)

    monkeypatch.setattr(jobs, "judge_finished", explode)
    _healthy_logs(tmp_path)
    shutil.copytree(_logs(tmp_path, "healthy"), _logs(tmp_path, "victim"), dirs_exist_ok=True)
    got = _judge(tmp_path)
    assert got["victim"][names.ANN_VERDICT] == UNUSABLE and "294247" in got["victim"][names.ANN_VERDICT_DETAIL]
    assert got["healthy"][names.ANN_VERDICT] == "pass", got["healthy"]


# ------------------------------------------------------------------------------------------ the fuzz

_record_line = st.builds(
    lambda field, value, node, minute: _hostile(
        Job(name="victim", nodes=2, gpus=1, busbw=SLOW).dump(node, 0, minute).splitlines()[0], field, value),
    st.sampled_from(NUMBER_FIELDS),
    st.one_of(st.sampled_from(HOSTILE_NUMBERS), st.integers(min_value=-(2**70), max_value=2**70).map(str),
              st.floats(allow_nan=True, allow_infinity=True).map(repr)),
    st.integers(0, 1), st.integers(0, 10))
_log_line = st.one_of(
    st.sampled_from([
        "host0:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/" + "9" * 5000 + "\n",
        "host0:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>\n" * 3,
        "\x00" * 4096 + "\n",
        "[" * 20000 + "\n",
        "host0:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks " + "1" * 5000 + " nNodes 2 localRanks 1\n",
    ]),
    st.text(min_size=0, max_size=300).map(lambda t: t + "\n"),
)


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "12")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(_record_line, min_size=1, max_size=6), logs=st.lists(_log_line, min_size=0, max_size=4),
       deep=st.booleans())
def test_fuzz_hostile_records_and_logs_never_stop_the_other_job(tmp_path_factory, records: list[str],
                                                               logs: list[str], deep: bool) -> None:
    root = tmp_path_factory.mktemp("lustre")
    victim, healthy = Job(name="victim", nodes=2, gpus=1, busbw=SLOW), Job(name="healthy", nodes=2, gpus=1, busbw=SLOW)
    healthy.write(_dump_dir(root, "healthy"), 8)
    d = _dump_dir(root, "victim")
    d.mkdir(parents=True, exist_ok=True)
    body = "".join(r + "\n" for r in records) + ('{"header":{"id":' + "[" * 100000 + "\n" if deep else "")
    (d / victim.file(0, 0)).write_text(victim.dump(0, 0, 0) + body)
    _healthy_logs(root)
    vl = _logs(root, "victim")
    (vl / "nccl.rank0.host0.100.log").write_text("".join(logs))
    shutil.copy(ROCE_LOGS[0], vl / "nccl.rank1.host1.101.log")

    # The live followers: every job observed, the healthy one judged below its floor.
    lj = LiveJobs(PROF, root)
    lj.sync(running_jobs(PROF, {"JobSet": [_jobset("victim"), _jobset("healthy")]}))
    obs, _ = asyncio.run(follow_live(None, lj, PROF, [], NOW, act=False))  # type: ignore[arg-type]
    by = {ob.job.name: ob for ob in obs}
    assert set(by) == {"victim", "healthy"}
    assert by["healthy"].busbw is not None and by["healthy"].busbw.below
    assert ("JobSet", NS, "healthy") not in lj.unusable
    lj.close()

    # The finished-job judge: the healthy job's verdict is its own, whatever the victim's files hold.
    got = _judge(root)
    healthy_says = got["healthy"]  # its own records are below the floor: degraded, whatever the victim wrote
    assert healthy_says[names.ANN_VERDICT] == "degraded", healthy_says
    assert "below the pool's floor" in healthy_says[names.ANN_VERDICT_DETAIL]
    assert names.ANN_VERDICT in got["victim"]
