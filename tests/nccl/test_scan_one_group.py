"""The bulk facts regex returns one group per line (issue 31 item 5: a 6-tuple per match, and hashing it, cost a
third of the pass when every line is a fact). It must find exactly what the six-group form found: the same lines,
the same messages, the same communicator sizes, the same rare-line marks, on hostile input too."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as hs

from fabricguard.nccl import scan
from nccl_logs import IB, Job, rank_lines

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"

# The six-group form of session 24 (c32acbd), kept as the reference: 1 init fact message, 2 nranks, 3 nNodes,
# 4 localRanks, 5 a rare NCCL marker, 6 a torch watchdog line.
REFERENCE = re.compile(
    rb"NCCL(?: (?:INFO (?=[UNGLncrIFP]|As|Sel)(?:"
    rb"((?:Using (?:internal |external )?[Nn]etwork|NET/|NCCL version|GPU Direct|Selected|Loaded"
    rb"|PROFILER/Plugin: Loaded|Assigned NET plugin|Assigned (?:GIN|RMA) plugin"
    rb"|Initialized NET plugin|Failed to initialize NET plugin)[^\n]*)"
    rb"|(?:nccl|comm |rank )[^\n]*?n[Rr]anks (\d+)(?: nNodes (\d+))?(?: localRanks (\d+))?"
    rb")|(?=[Wvef])(WARN|version|error|failure)\b)"
    rb"|(\.cpp:\d+\][^\n]*?Watchdog caught|\(SeqNum[^\n]*?ran for))"
)


def _reference(text: bytes) -> list[tuple[int, tuple[bytes, ...]]]:
    out = []
    for m in REFERENCE.finditer(text):
        fact, nranks, nnodes, local, marker, torch = m.groups(b"")
        if fact:
            key: tuple[bytes, ...] = (b"fact", fact)
        elif nranks:
            key = (b"comm", nranks, nnodes, local)
        else:
            assert marker or torch
            key = (b"rare",)
        out.append((m.start(), key))
    return out


def _one_group(text: bytes) -> list[tuple[int, tuple[bytes, ...]]]:
    out = []
    for m in scan._FACTS.finditer(text):
        found = m.group(1)
        kind = scan._fact_kind(found)
        if kind == scan.FACT:
            key: tuple[bytes, ...] = (b"fact", found)
        elif kind == scan.COMM:
            key = (b"comm", *scan._COMM_SIZE.match(found).groups(b""))  # type: ignore[union-attr]
        else:
            key = (b"rare",)
        out.append((m.start(), key))
    return out


PREFIXES = [b"", b"gpu-0:41:41 [0] ", b"2026-01-01T00:00:00.1Z g:1:2 [3] ", b"x NCCL INFO ", b"\x00", b"NCCL "]
BODIES = [
    b"NCCL INFO Using network IB", b"NCCL INFO Using internal Network Socket", b"NCCL INFO NET/IB : Using [0]mlx5_0:1/IB",
    b"NCCL INFO NCCL version 2.27.7+cuda12.9", b"NCCL INFO GPU Direct RDMA Enabled for GPU 0", b"NCCL INFO Selected provider is efa",
    b"NCCL INFO Loaded net plugin aws", b"NCCL INFO PROFILER/Plugin: Loaded x (v4)", b"NCCL INFO Assigned NET plugin IB to comm",
    b"NCCL INFO Assigned GIN plugin GIN_IB to comm", b"NCCL INFO Initialized NET plugin IB",
    b"NCCL INFO Failed to initialize NET plugin IB",
    b"NCCL INFO comm 0x5 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3", b"NCCL INFO comm 0x5 rank 3 nRanks 16",
    b"NCCL INFO ncclCommInitRankConfig comm 0x1 rank 0 nranks 8 cudaDev 0", b"NCCL INFO nRanks 8 nNodes 1",
    b"NCCL INFO rank nranks x nRanks 4", b"NCCL INFO comm nranks nRanks 5 nNodes x", b"NCCL INFO comm 0x1 nRanks 7 nranks 9",
    b"NCCL INFO comm nRanks x nRanks 3", b"NCCL INFO rank n nn nnRanks nranks  nRanks 2 nNodes 1", b"NCCL INFO nccl n" * 3,
    b"NCCL INFO comm " + b"n" * 300 + b"nRanks 6 localRanks 2",
    b"NCCL WARN NET/IB : Got completion", b"NCCL version 2.18.1+cuda12.1", b"NCCL error: boom", b"NCCL failure x",
    b"NCCL WARNING x", b"NCCL versions", b"NCCL INFO WARN x", b"NCCL INFO version x", b"NCCL INFO AllReduce: opCount 1",
    b"ProcessGroupNCCL.cpp:1234] [Rank 0] Watchdog caught collective operation timeout",
    b"ProcessGroupNCCL.cpp:12] x", b"ProcessGroupNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600000 ms",
    b"NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read via NET/IB/0", b"NCCL INFO Using network IB NCCL INFO NET/x",
    b"NCCL INFO Setting affinity", b"NCCL INFO P2P Chunksize set to 131072", b"NCCL INFO cudaDriverVersion 12040",
    b"NCCL INFO Using network IB\r", b"NCCL INFO comm 0x5 rank 3 nRanks 16\r", b"NCCL INFO NET/\x00IB",
]
LINES = hs.builds(lambda p, b, cut: p + b[: cut if cut else None], hs.sampled_from(PREFIXES), hs.sampled_from(BODIES),
                  hs.integers(0, 60))


@settings(max_examples=40, deadline=None)
@given(hs.lists(LINES, max_size=30), hs.sampled_from([b"\n", b"\r\n", b"\n\n"]), hs.booleans())
def test_one_group_finds_what_six_groups_found(lines: list[bytes], eol: bytes, glue: bool) -> None:
    text = (b"" if glue else eol).join(lines) if not glue else b"".join(lines)
    text = text if glue else text + eol
    assert _one_group(text) == _reference(text)


def test_one_group_on_every_body_and_every_cut() -> None:
    for prefix in PREFIXES:
        for body in BODIES:
            for cut in range(len(body) + 1):
                text = prefix + body[:cut] + b"\n" + body + b"\n"
                assert _one_group(text) == _reference(text), text


def test_one_group_on_the_real_logs_and_the_benchmark_shapes() -> None:
    texts = [p.read_bytes() for p in FIXTURES.rglob("*") if p.is_file() and p.stat().st_size < 4_000_000]
    assert len(texts) > 10
    job = Job(nodes=4, gpus_per_node=8, fabric=IB, version="2.27.7+cuda12.9", channels=16, steps=3)
    texts.append("\n".join(line for r in (0, 7, 8, 31) for line in rank_lines(job, r)).encode())
    for text in texts:
        assert _one_group(text) == _reference(text)
        assert Counter(k for _p, k in _one_group(text)) == Counter(k for _p, k in _reference(text))
