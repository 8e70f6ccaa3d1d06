"""Inspector records: the plugin's real line format per version, followed as the files grow, summarised per collective."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from fabricguard.nccl.inspector import (
    InspectorFollower,
    Series,
    is_inspector_file,
    parse_record,
    read_dir,
    summarize,
)
from inspector_records import Comm, Job, coll_line

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "inspector"
LARGE = 16 << 20


def test_a_2_30_line_is_typed_with_its_comm_name_and_per_rank_size() -> None:
    line = (FIX / "v2.30.7-healthy" / "llm-sft-workers-0-0-pid200.log").read_bytes().splitlines()[1]
    r = parse_record(line)
    assert r is not None
    assert (r.comm_name, r.rank, r.nranks, r.nnodes, r.coll) == ("DP", 0, 4, 2, "AllGather")
    assert r.version == "v4.0" and r.hostname == "llm-sft-workers-0-0" and r.pid == 200
    assert r.msg_bytes == 32 << 20 and r.size_bytes == 128 << 20  # per rank x 4 ranks, as nccl-tests counts S
    assert r.timing == "kernel_gpu" and r.busbw_gbps is not None and 330 < r.busbw_gbps < 350
    # The plugin's own figure: traffic / 1e9 / seconds x (n-1)/n.
    assert abs(r.busbw_gbps - r.size_bytes / 1e9 / (r.exec_us / 1e6) * 3 / 4) < 1e-3


def test_a_2_28_line_has_no_comm_name() -> None:
    r = parse_record((FIX / "v2.28.9-healthy" / "llm-sft-workers-0-1-pid201.log").read_bytes().splitlines()[0])
    assert r is not None and r.comm_name is None and r.rank == 3 and r.nnodes == 2


def test_both_versions_give_the_same_figures() -> None:
    new = summarize(read_dir(FIX / "v2.30.7-healthy")[0], LARGE)
    old = summarize(read_dir(FIX / "v2.28.9-healthy")[0], LARGE)
    assert set(new) == set(old) == {"AllReduce", "AllGather", "ReduceScatter"}
    for c in new:
        assert abs(new[c].busbw_gbps - old[c].busbw_gbps) < 8
    ar = new["AllReduce"]
    assert 350 < ar.busbw_gbps < 360 and ar.nnodes == 2 and ar.nranks == 4 and ar.hosts == 2
    assert ar.sizes == (256 << 20, 256 << 20)  # the 64 KiB all-reduce is latency, not the fabric
    assert ar.records == 4 * 3 * 4 and old["AllReduce"].records == 4 * 3  # 2.28: one record per comm per dump


def test_intra_node_communicators_are_left_out() -> None:
    recs, st = read_dir(FIX / "v2.30.7-healthy")
    assert recs and all(r.nnodes == 2 for r in recs)
    assert st.single_node == 4 * 3 * 4 and st.kept == 4 * 3 * 4 * 4 and st.other == 0


def test_hostile_lines_are_counted_never_fatal() -> None:
    recs, st = read_dir(FIX / "v2.30.7-hostile")
    # Kept: the good all-reduce, the "nan" one (no figure), the all-gather; the bogus size and p2p are not records.
    assert [(r.coll, r.sn) for r in recs] == [("AllReduce", 1), ("AllReduce", 2), ("AllGather", 4)]
    assert recs[1].busbw_gbps is None
    assert st.other == 4 and st.single_node == 1  # p2p, bogus size, stopped line, "not json"
    figs = summarize(recs, LARGE)
    assert figs["AllReduce"].records == 1  # the nan record has no busbw to judge
    assert not is_inspector_file(FIX / "README.md")
    assert is_inspector_file(FIX / "v2.30.7-hostile" / "job-workers-0-0-pid301.log")


def test_half_lines_wait_for_their_end_and_nothing_is_read_twice(tmp_path: Path) -> None:
    src = (FIX / "v2.30.7-healthy" / "llm-sft-workers-0-0-pid200.log").read_bytes()
    f = tmp_path / "h-pid1.log"
    fol = InspectorFollower(tmp_path)
    seen = []
    # The dump reaches the disk in pieces of arbitrary size, the way stdio flushes a large dump.
    for i in range(0, len(src), 997):
        with f.open("ab") as out:
            out.write(src[i : i + 997])
        got, _ = fol.poll()
        seen += got
    assert fol.total.bytes == len(src)
    expected, _ = read_dir(FIX / "v2.30.7-healthy")
    assert seen == [r for r in expected if r.hostname == "llm-sft-workers-0-0" and r.pid == 200]
    got, st = fol.poll()
    assert got == [] and st.bytes == 0


def test_a_restarted_process_truncates_its_file_and_is_read_again(tmp_path: Path) -> None:
    job = Job(nodes=2, gpus=1)
    job.write(tmp_path, 2)
    fol = InspectorFollower(tmp_path)
    assert fol.poll()[0]
    # Same pod, same pid after an in-place restart: fopen("w") starts the file over.
    for p in tmp_path.iterdir():
        p.write_text(job.dump(0 if "0-0" in p.name else 1, 0, 5), encoding="ascii")
    again, st = fol.poll()
    assert st.truncations == 2 and again and {r.sn for r in again} == {21, 22, 23, 24}


def test_a_poll_reads_at_most_its_budget_and_catches_up(tmp_path: Path) -> None:
    Job(nodes=2, gpus=1).write(tmp_path, 20)
    size = sum(p.stat().st_size for p in tmp_path.iterdir())
    fol = InspectorFollower(tmp_path, budget_bytes=8192)
    polls = 0
    total = []
    while True:
        got, st = fol.poll()
        polls += 1
        total += got
        assert st.bytes <= 8192 * 2  # per file
        if not st.bytes:
            break
    assert fol.total.bytes == size and polls > size // 8192 // 2
    assert len(total) == len(read_dir(tmp_path)[0])


def test_an_overlong_line_is_dropped_and_the_next_one_read(tmp_path: Path) -> None:
    f = tmp_path / "h-pid9.log"
    good = coll_line(Comm("0x1", 4, 2), 0, "h", 9, 1, "AllReduce", 1, 256 << 20, 1200)
    f.write_bytes(b"{" + b"x" * (300 * 1024) + b"\n" + good.encode())
    fol = InspectorFollower(tmp_path, budget_bytes=64 << 10)
    recs = []
    for _ in range(10):
        recs += fol.poll()[0]
    assert [r.sn for r in recs] == [1]


def test_only_inspector_files_are_followed_and_links_are_not(tmp_path: Path) -> None:
    shutil.copy(FIX / "v2.30.7-slow" / "llm-sft-workers-0-0-pid200.log", tmp_path / "a-pid1.log")
    (tmp_path / "nccl_inspector_metrics_GPU-1.prom").write_text("nccl_bus_bandwidth_gbs 1\n")
    (tmp_path / "notes.txt").write_text(json.dumps({"header": {}}))
    os.symlink("/etc/passwd", tmp_path / "evil-pid2.log")
    fol = InspectorFollower(tmp_path)
    recs, st = fol.poll()
    assert st.files == 1 and recs


AR = ("AllReduce", 1)  # (collective, ranks per node): the series keeps each communicator shape apart


def test_the_series_says_how_long_a_collective_has_been_below_the_floor() -> None:
    healthy = Job(nodes=2, gpus=1, busbw={"AllReduce": 355.0, "AllGather": 340.0})
    s = Series(LARGE)
    s.add(r for r in (parse_record(x) for x in _lines(healthy, range(0, 3))) if r)
    figs = s.figures(284.0)
    assert figs[AR].below_minutes == 0 and 350 < figs[AR].busbw_gbps < 360
    slow = Job(nodes=2, gpus=1, busbw={"AllReduce": 120.0, "AllGather": 340.0})
    lines = _lines(slow, range(3, 15))
    # Batched one way or another, the same records give the same answer.
    one, many = Series(LARGE), Series(LARGE)
    for x in (one, many):
        x.add(r for r in (parse_record(y) for y in _lines(healthy, range(0, 3))) if r)
    one.add(r for r in (parse_record(y) for y in lines) if r)
    for k in range(0, len(lines), 7):
        many.add(r for r in (parse_record(y) for y in lines[k : k + 7]) if r)
    a, b = one.figures(284.0)[AR], many.figures(284.0)[AR]
    assert a == b and a.below_minutes == 12 and a.busbw_gbps < 125
    assert a.below_since_us == slow.start_us + 3 * 60_000_000
    assert one.figures(284.0)[("AllGather", 1)].below_minutes == 0


def test_the_series_is_bounded() -> None:
    s = Series(LARGE, keep_minutes=5, per_minute=3)
    job = Job(nodes=2, gpus=1, busbw={"AllReduce": 300.0})
    s.add(r for r in (parse_record(y) for y in _lines(job, range(0, 40))) if r)
    assert len(s._b[AR]) == 5 and all(len(v) == 3 for v in s._b[AR].values())
def _lines(job: Job, dumps: range) -> list[str]:
    return [ln for i in dumps for n in range(job.nodes) for ln in job.dump(n, 0, i).splitlines()]


@pytest.mark.parametrize("real, version, git_rev", [("v2.28.9-plugin-healthy", "2.28", ""),
                                                     ("v2.30.7-plugin-healthy", "2.30", "unknown")])
def test_the_plugins_own_output_is_what_the_synthesized_writer_writes(real: str, version: str, git_rev: str) -> None:
    """Lines the real plugin (built from source, driven through its profiler API) wrote, byte for byte."""
    lines = [ln for f in sorted((FIX / real).iterdir()) for ln in f.read_text().splitlines(True)]
    assert len(lines) == 96
    for ln in lines:
        r = parse_record(ln)
        assert r is not None
        comm = Comm(r.comm, r.nranks, r.nnodes, r.comm_name or "unknown")
        assert coll_line(comm, r.rank, r.hostname, r.pid, r.dump_us, r.coll, r.sn, r.msg_bytes, r.exec_us,
                         version=version, timing=r.timing or "", git_rev=git_rev) == ln


def test_the_plugins_own_output_summarises_per_collective() -> None:
    for name, lo, hi in (("v2.28.9-plugin-healthy", 350, 360), ("v2.28.9-plugin-slow", 115, 125),
                         ("v2.30.7-plugin-healthy", 350, 360), ("v2.30.7-plugin-slow", 115, 125)):
        recs, st = read_dir(FIX / name)
        assert st.single_node == 48 and st.other == 0  # the intra-node TP communicator is left out
        figs = summarize(recs, LARGE)
        assert set(figs) == {"AllReduce", "AllGather", "ReduceScatter"}
        assert all(lo < f.busbw_gbps < hi and f.records == 12 and f.hosts == 2 for f in figs.values())


def test_a_late_follower_reads_only_the_tail_from_a_line_boundary(tmp_path: Path) -> None:
    job = Job(nodes=2, gpus=1)
    job.write(tmp_path, 40)
    size = sum(p.stat().st_size for p in tmp_path.iterdir())
    fol = InspectorFollower(tmp_path, tail_bytes=4096)
    recs, st = fol.poll()
    assert st.bytes == 2 * 4096 and st.other == 0  # a cut first line is dropped, never counted as malformed
    assert recs and all(r.sn > 100 for r in recs)  # the latest dumps only
    job.write(tmp_path, 1, first=40)
    more, st = fol.poll()
    assert {r.sn for r in more} == {161, 162, 163, 164} and fol.total.bytes < size


def test_the_fast_path_reads_exactly_what_the_json_path_reads() -> None:
    # Every fixture line, as bytes (the writer's layout: read without a dict) and as text (always json.loads).
    for d in sorted(p for p in FIX.iterdir() if p.is_dir()):
        for f in sorted(d.iterdir()):
            for line in f.read_bytes().splitlines():
                assert parse_record(line) == parse_record(line.decode("utf-8", "replace")), (f, line[:80])
    # A comm name with an escaped quote or slash leaves the fast path and is still read.
    line = coll_line(Comm("0x1", 4, 2, 'D"P/x'), 0, "h", 1, 5, "AllReduce", 1, 256 << 20, 1200).encode()
    r = parse_record(line)
    assert r is not None and r.comm_name == 'D"P/x'
